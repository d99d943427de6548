/*
 * test_last_error.c -- status.h's promise: a call that succeeds leaves
 * dlb_last_error() as it found it, even when an internal route failed on
 * the way (a copy the runtime cannot take, staged instead; a staging
 * buffer not to be had; memory pinned already).
 *
 * One test calls every function the headers of include/dlbridge/ declare
 * on a success path, each right after a known failure set the message,
 * and checks the message; it then reads the headers and fails for any
 * function it did not call. The GPU functions run against the emulated runtimes.
 */
#include <dirent.h>
#include <stdio.h>
#include <sys/socket.h>
#include <unistd.h>

#include "../emu/emu_fns.h"
#include "backend/staging.h"
#include "test.h"

static const DLDataType f32 = {kDLFloat, 32, 1};
static const DLDevice cpu = {kDLCPU, 0};

/* The message the known failure left, and the function now under test. */
static char sentinel[512];
static char under_test[64];

/* Function names called on a success path so far. */
static char called[256][64];
static int ncalled;

/* Sets the message with a known failure and notes which public function
 * the next call tests: the first dlb_ name in its text. */
static void fail_first(const char *text) {
  const char *name = strstr(text, "dlb_");
  size_t n = 0;
  while (name != NULL && n + 1 < sizeof under_test &&
         (name[n] == '_' || (name[n] >= 'a' && name[n] <= 'z') ||
          (name[n] >= '0' && name[n] <= '9')))
    n++;
  snprintf(under_test, sizeof under_test, "%.*s", (int)n,
           name != NULL ? name : "?");
  DLDevice d;
  CHECK_STATUS(dlb_device_parse("no-such-kind:7", &d), DLB_E_DEVICE);
  snprintf(sentinel, sizeof sentinel, "%s", dlb_last_error());
  CHECK(strstr(sentinel, "no-such-kind") != NULL);
}

static void check_kept(int line) {
  if (strcmp(dlb_last_error(), sentinel) != 0)
    dlb_test_failed(__FILE__, line,
                    "%s succeeded but changed the message from \"%s\" to "
                    "\"%s\"",
                    under_test, sentinel, dlb_last_error());
  CHECK(ncalled < 256);
  snprintf(called[ncalled++], sizeof called[0], "%s", under_test);
}

/* call returns DLB_OK and leaves the message alone. */
#define KEEPS_OK(call)    \
  do {                    \
    fail_first(#call);    \
    CHECK_OK(call);       \
    check_kept(__LINE__); \
  } while (0)

/* cond (a call of a function that returns no status) holds, and the call
 * leaves the message alone. */
#define KEEPS(cond)       \
  do {                    \
    fail_first(#cond);    \
    CHECK(cond);          \
    check_kept(__LINE__); \
  } while (0)

/* A function returning nothing leaves the message alone. */
#define KEEPS_VOID(call)  \
  do {                    \
    fail_first(#call);    \
    call;                 \
    check_kept(__LINE__); \
  } while (0)

static DLManagedTensorVersioned *cpu_tensor(int64_t rows, int64_t cols) {
  int64_t shape[2] = {rows, cols};
  DLManagedTensorVersioned *t = NULL;
  CHECK_OK(dlb_tensor_alloc(cpu, f32, 2, shape, &t));
  return t;
}

static void *test_alloc(void *ctx, size_t size, size_t alignment) {
  (void)ctx;
  void *p = NULL;
  return posix_memalign(&p, alignment, size) == 0 ? p : NULL;
}

static void test_free(void *ctx, void *p, size_t size, size_t alignment) {
  (void)ctx;
  (void)size;
  (void)alignment;
  free(p);
}

static void no_release(void *ctx) { (void)ctx; }

static void foreign_deleter(DLManagedTensorVersioned *self) { free(self); }

static void legacy_deleter(DLManagedTensor *self) { free(self); }

static void status_and_version(void) {
  KEEPS(strcmp(dlb_status_name(DLB_E_LAYOUT), "DLB_E_LAYOUT") == 0);
  KEEPS(dlb_status_message(DLB_E_LAYOUT)[0] != '\0');
  KEEPS(strcmp(dlb_last_error(), sentinel) == 0);
  KEEPS(dlb_version_number() > 0);
  KEEPS(dlb_version_string()[0] != '\0');
  /* Clearing is the one success that changes the message, by design. */
  fail_first("dlb_clear_error");
  dlb_clear_error();
  CHECK_STR(dlb_last_error(), "");
  snprintf(called[ncalled++], sizeof called[0], "%s", under_test);
}

static void allocator(void) {
  dlb_allocator mine = {test_alloc, test_free, NULL}, now;
  KEEPS_OK(dlb_set_allocator(&mine));
  KEEPS_VOID(dlb_get_allocator(&now));
  CHECK(now.alloc == test_alloc);
  CHECK_OK(dlb_set_allocator(NULL));
}

static void devices_and_dtypes(void) {
  DLDeviceType type;
  DLDevice d = {kDLCUDA, 1};
  char buf[64];
  int64_t bytes = 0;
  DLDataType dt;
  KEEPS(strcmp(dlb_device_type_name(kDLCUDA), "cuda") == 0);
  KEEPS_OK(dlb_device_type_parse("cuda_host", &type));
  KEEPS(dlb_device_type_is_known(kDLROCM));
  KEEPS(dlb_device_type_is_host_type(kDLCUDAHost));
  KEEPS(dlb_device_type_cpu_accessible(kDLCUDAManaged));
  KEEPS_OK(dlb_device_parse("rocm:1", &d));
  KEEPS_OK(dlb_device_format(d, buf, sizeof buf));
  KEEPS_OK(dlb_device_normalize(&d));
  KEEPS(dlb_device_equal(d, d));
  KEEPS(dlb_device_can_access(cpu, (DLDevice){kDLCUDAHost, 0}));
  KEEPS_OK(dlb_dtype_parse("bfloat16", &dt));
  KEEPS_OK(dlb_dtype_format(dt, buf, sizeof buf));
  KEEPS_OK(dlb_dtype_check(dt));
  KEEPS(dlb_dtype_equal(dt, dt));
  KEEPS(dlb_dtype_bits(dt) == 16);
  KEEPS(!dlb_dtype_is_subbyte(dt));
  KEEPS(dlb_dtype_itemsize(dt) == 2);
  KEEPS_OK(dlb_dtype_storage_bytes(dt, 3, 0, &bytes));
}

static void layouts(void) {
  DLManagedTensorVersioned *t = cpu_tensor(4, 6);
  const DLTensor *dl = &t->dl_tensor;
  int64_t n = 0, lo = 0, hi = 0, strides[2];
  int64_t shape[2] = {4, 6}, s2[2] = {6, 1};
  int64_t *sets[1] = {s2};
  KEEPS_OK(dlb_tensor_validate(dl));
  KEEPS_OK(dlb_managed_validate(t));
  KEEPS_OK(dlb_shape_numel(2, shape, &n));
  KEEPS_OK(dlb_tensor_numel(dl, &n));
  KEEPS_OK(dlb_tensor_byte_span(dl, &lo, &hi));
  KEEPS(dlb_tensor_is_c_contiguous(dl));
  KEEPS(!dlb_tensor_is_f_contiguous(dl));
  KEEPS_OK(dlb_compact_strides(2, shape, 1, strides));
  KEEPS(dlb_coalesce_dims(2, shape, sets, 1) == 1);
  KEEPS(dlb_tensor_alignment(dl) >= 64);
  dlb_tensor_release(t);
}

static void tensors_and_views(void) {
  DLManagedTensorVersioned *t = cpu_tensor(4, 6), *out = NULL;
  KEEPS(dlb_tensor_is_ours(t));
  KEEPS_OK(dlb_tensor_share(t, &out));
  KEEPS_VOID(dlb_tensor_release(out));
  KEEPS_OK(dlb_tensor_wrap(&t->dl_tensor, 0, no_release, NULL, &out));
  dlb_tensor_release(out);

  DLManagedTensorVersioned *foreign = calloc(1, sizeof *foreign);
  CHECK(foreign != NULL);
  foreign->version.major = DLPACK_MAJOR_VERSION;
  foreign->dl_tensor = t->dl_tensor;
  foreign->deleter = foreign_deleter;
  KEEPS_OK(dlb_tensor_adopt(foreign, &out));
  dlb_tensor_release(out);

  foreign = calloc(1, sizeof *foreign);
  CHECK(foreign != NULL);
  foreign->version.major = DLPACK_MAJOR_VERSION;
  foreign->dl_tensor = t->dl_tensor;
  foreign->deleter = foreign_deleter;
  CHECK_OK(dlb_managed_validate(foreign));
  KEEPS_OK(dlb_tensor_adopt_validated(foreign, &out));
  dlb_tensor_release(out);

  DLManagedTensor *legacy = calloc(1, sizeof *legacy);
  CHECK(legacy != NULL);
  legacy->dl_tensor = t->dl_tensor;
  legacy->deleter = legacy_deleter;
  KEEPS_OK(dlb_tensor_from_legacy(legacy, 0, &out));
  dlb_tensor_release(out);

  CHECK_OK(dlb_tensor_share(t, &out));
  KEEPS_OK(dlb_tensor_to_legacy(out, &legacy));
  KEEPS(dlb_legacy_is_ours(legacy));
  KEEPS_OK(dlb_legacy_validate(legacy));
  KEEPS_VOID(dlb_legacy_release(legacy));

  KEEPS_OK(dlb_tensor_redescribe(t, &t->dl_tensor, 0, &out));
  dlb_tensor_release(out);

  dlb_slice rows[1] = {{1, 3, 1}};
  int32_t axes[2] = {1, 0};
  int64_t flat[1] = {24}, wide[3] = {2, 4, 6};
  KEEPS_OK(dlb_tensor_slice(t, 1, rows, &out));
  dlb_tensor_release(out);
  KEEPS_OK(dlb_tensor_select(t, 0, 2, &out));
  dlb_tensor_release(out);
  KEEPS_OK(dlb_tensor_permute(t, axes, &out));
  dlb_tensor_release(out);
  KEEPS_OK(dlb_tensor_reshape(t, 1, flat, &out));
  dlb_tensor_release(out);
  KEEPS_OK(dlb_tensor_expand(t, 3, wide, &out));
  dlb_tensor_release(out);
  dlb_tensor_release(t);
}

static void cpu_copies(void) {
  DLManagedTensorVersioned *a = cpu_tensor(64, 64), *b = cpu_tensor(64, 64);
  DLManagedTensorVersioned *out = NULL;
  KEEPS_VOID(dlb_copy_set_threads(2));
  KEEPS(dlb_copy_get_threads() == 2);
  KEEPS(dlb_copy_kernels() != NULL);
  KEEPS_OK(dlb_copy_set_kernels(NULL));
  KEEPS_OK(dlb_copy(&a->dl_tensor, &b->dl_tensor));
  KEEPS_OK(dlb_tensor_copy(&a->dl_tensor, cpu, &out));
  dlb_tensor_release(out);
  KEEPS_OK(dlb_managed_copy(a, cpu, &out));
  dlb_tensor_release(out);
  dlb_tensor_release(a);
  dlb_tensor_release(b);
}

/* Rows of cols floats out of rows x stride ones: one pitched 2-D copy of
 * pitch stride * 4 bytes, when the runtime takes that pitch. */
static DLManagedTensorVersioned *rows_of(DLDevice d, int64_t rows,
                                         int64_t cols, int64_t stride,
                                         DLManagedTensorVersioned **base) {
  int64_t shape[2] = {rows, stride};
  CHECK_OK(dlb_tensor_alloc(d, f32, 2, shape, base));
  dlb_slice s[2] = {{0, rows, 1}, {0, cols, 1}};
  DLManagedTensorVersioned *v = NULL;
  CHECK_OK(dlb_tensor_slice(*base, 2, s, &v));
  return v;
}

/* Copies between cpu and device memory that take another route than the
 * first one tried; EMU_CUDA_MAX_PITCH is 32. */
static void cuda_copy_routes(const emu *e) {
  DLDevice cuda0 = {kDLCUDA, 0};
  DLManagedTensorVersioned *sb, *db;
  /* A pitch of 40 bytes: over the limit, staged. */
  DLManagedTensorVersioned *s = rows_of(cpu, 4, 5, 10, &sb);
  DLManagedTensorVersioned *d = rows_of(cuda0, 4, 5, 10, &db);
  long direct = e->calls("cuMemcpy2DAsync_v2");
  KEEPS_OK(dlb_copy_sync(&s->dl_tensor, &d->dl_tensor, NULL));
  CHECK_EQ_INT(e->calls("cuMemcpy2DAsync_v2"), direct);
  dlb_tensor_release(s);
  dlb_tensor_release(d);
  dlb_tensor_release(sb);
  dlb_tensor_release(db);

  /* A pitch of 32 bytes the driver calls not supported: staged. */
  s = rows_of(cpu, 4, 5, 8, &sb);
  d = rows_of(cuda0, 4, 5, 8, &db);
  e->fail("cuMemcpy2DAsync_v2", 1, (int)DLB__CUDA_ERROR_NOT_SUPPORTED);
  KEEPS_OK(dlb_copy_async(&s->dl_tensor, &d->dl_tensor, NULL));
  CHECK(e->fail_fired());
  dlb_tensor_release(s);
  dlb_tensor_release(d);
  dlb_tensor_release(sb);
  dlb_tensor_release(db);

  /* Large pageable copies: the staging buffer not to be had, then the
   * memory not classified: the driver copies directly. */
  int64_t n[1] = {1 << 20};
  DLManagedTensorVersioned *h = NULL, *g = NULL;
  CHECK_OK(dlb_tensor_alloc(cpu, f32, 1, n, &h));
  CHECK_OK(dlb_tensor_alloc(cuda0, f32, 1, n, &g));
  dlb__stage_release();
  e->fail("cuMemHostAlloc", 1, 2 /* OUT_OF_MEMORY */);
  KEEPS_OK(dlb_tensor_copy(&h->dl_tensor, cuda0, &d));
  CHECK(e->fail_fired());
  dlb_tensor_release(d);
  e->fail("cuPointerGetAttributes", 1, 999);
  KEEPS_OK(dlb_managed_copy(g, cpu, &d));
  CHECK(e->fail_fired());
  dlb_tensor_release(d);
  dlb_tensor_release(h);
  dlb_tensor_release(g);
}

/* A range a framework registered: pinning it again is a route of its own
 * (the runtime says "registered already"; both ends are checked). */
static void pin_pinned_already(DLDeviceType host_type, void *heap) {
  int64_t n[1] = {1024};
  DLTensor desc = {heap, cpu, 1, f32, n, NULL, 0};
  DLManagedTensorVersioned *t = NULL, *p = NULL;
  CHECK_OK(dlb_tensor_wrap(&desc, 0, no_release, NULL, &t));
  KEEPS_OK(dlb_tensor_pin(t, host_type, &p));
  dlb_tensor_release(p);
  dlb_tensor_release(t);
}

/* A .npy file of four float32 values: its header and a mapping of it. */
static void npy_files(void) {
  char path[] = "/tmp/dlb_last_error_XXXXXX";
  int fd = mkstemp(path);
  CHECK(fd >= 0);
  static const char dict[] = "{'descr':'<f4','fortran_order':False,"
                             "'shape':(4,)}";
  char head[64];
  memset(head, ' ', sizeof head);
  memcpy(head, "\x93NUMPY\x01\x00\x36\x00", 10);
  memcpy(head + 10, dict, sizeof dict - 1);
  head[63] = '\n';
  float data[4] = {1, 2, 3, 4};
  CHECK(write(fd, head, sizeof head) == (ssize_t)sizeof head);
  CHECK(write(fd, data, sizeof data) == (ssize_t)sizeof data);
  close(fd);
  dlb_npy_header h;
  KEEPS_OK(dlb_npy_read_header(path, &h));
  CHECK_EQ_INT(h.ndim, 1);
  DLManagedTensorVersioned *t = NULL;
  KEEPS_OK(dlb_tensor_map_npy(path, 0, &t));
  CHECK(((const float *)t->dl_tensor.data)[3] == 4.0f);
  dlb_tensor_release(t);
  unlink(path);
}

/* Shared host memory, through a handle and through a socket; pinned on
 * import when pin_flag is not 0 (a runtime must be loaded). */
static void sharing(uint64_t pin_flag) {
  int64_t n[1] = {16};
  DLManagedTensorVersioned *t = NULL, *u = NULL;
  KEEPS_OK(dlb_shared_alloc(f32, 1, n, &t));
  KEEPS(dlb_tensor_is_shared(t));
  unsigned char handle[DLB_SHARE_HANDLE_MAX];
  size_t len = 0;
  int fd = -1;
  KEEPS_OK(dlb_share_export(t, handle, sizeof handle, &len, &fd));
  KEEPS_OK(dlb_share_import(handle, len, fd, pin_flag, &u));
  close(fd);
  dlb_tensor_release(u);
  int sv[2];
  CHECK(socketpair(AF_UNIX, SOCK_STREAM, 0, sv) == 0);
  KEEPS_OK(dlb_share_send(sv[0], t));
  KEEPS_OK(dlb_share_recv(sv[1], pin_flag, &u));
  CHECK(dlb_tensor_is_shared(u));
  dlb_tensor_release(u);
  close(sv[0]);
  close(sv[1]);
  dlb_tensor_release(t);
}

static void cuda_functions(void) {
  setenv("EMU_CUDA_MAX_PITCH", "32", 1);
  emu e = emu_cuda();
  DLDevice cuda0 = {kDLCUDA, 0}, managed = {kDLCUDAManaged, 0}, dev;
  int v = 0, sync = 0;
  void *stream = NULL;
  KEEPS_OK(dlb_runtime_status(DLB_RUNTIME_CUDA));
  KEEPS_OK(dlb_runtime_device_count(DLB_RUNTIME_CUDA, &v));
  KEEPS_OK(dlb_runtime_version(DLB_RUNTIME_CUDA, &v));
  KEEPS(dlb_runtime_library(DLB_RUNTIME_CUDA) != NULL);
  dlb_gpu_info info;
  KEEPS_OK(dlb_gpu_get_info((DLDevice){kDLCUDA, 0}, &info));
  KEEPS_OK(dlb_stream_from_dlpack(kDLCUDA, DLB_STREAM_NONE, &stream, &sync));

  int64_t n[1] = {256};
  DLManagedTensorVersioned *m = NULL, *t = cpu_tensor(4, 4), *p = NULL;
  KEEPS_OK(dlb_tensor_alloc(managed, f32, 1, n, &m));
  KEEPS_OK(dlb_device_of_pointer(m->dl_tensor.data, &dev));
  KEEPS_OK(dlb_tensor_check_device(&m->dl_tensor, DLB_LABEL_CORRECT, &dev));
  KEEPS_OK(dlb_managed_prefetch(&m->dl_tensor, cuda0, NULL));
  KEEPS_OK(dlb_managed_advise(&m->dl_tensor, DLB_ADVISE_SET_READ_MOSTLY,
                              cpu));
  KEEPS_OK(dlb_stream_wait(cuda0, NULL, NULL));
  KEEPS_OK(dlb_stream_synchronize(cuda0, NULL));
  KEEPS_OK(dlb_device_synchronize(cuda0));
  KEEPS_OK(dlb_tensor_pin(t, kDLCUDAHost, &p));
  dlb_tensor_release(p);
  dlb_tensor_release(t);
  dlb_tensor_release(m);

  cuda_copy_routes(&e);
  sharing(DLB_SHARE_PIN_CUDA);

  cu_fns cu = cu_fns_of(&e);
  cu_as_framework(&cu, 0);
  void *heap = malloc(4096);
  CHECK(heap != NULL);
  CHECK_EQ_INT(cu.cuMemHostRegister_v2(heap, 4096, 0), 0);
  pin_pinned_already(kDLCUDAHost, heap);
  CHECK_EQ_INT(cu.cuMemHostUnregister(heap), 0);
  free(heap);
  dlb__stage_release();
  CHECK_EQ_INT(e.live(), 0);
}

static void hip_functions(void) {
  setenv("EMU_HIP_MAX_PITCH", "32", 1);
  emu e = emu_hip();
  CHECK_OK(dlb_runtime_status(DLB_RUNTIME_HIP));
  DLManagedTensorVersioned *sb, *db;
  DLManagedTensorVersioned *s = rows_of(cpu, 4, 5, 10, &sb);
  DLManagedTensorVersioned *d = rows_of((DLDevice){kDLROCM, 0}, 4, 5, 10, &db);
  KEEPS_OK(dlb_copy_sync(&s->dl_tensor, &d->dl_tensor, NULL));
  CHECK_EQ_INT(e.calls("hipMemcpy2DAsync"), 0);
  dlb_tensor_release(s);
  dlb_tensor_release(d);
  dlb_tensor_release(sb);
  dlb_tensor_release(db);

  hip_fns hip = hip_fns_of(&e);
  void *heap = malloc(4096);
  CHECK(heap != NULL);
  CHECK_EQ_INT(hip.hipHostRegister(heap, 4096, 0), 0);
  pin_pinned_already(kDLROCMHost, heap);
  CHECK_EQ_INT(hip.hipHostUnregister(heap), 0);
  free(heap);
  dlb__stage_release();
  CHECK_EQ_INT(e.live(), 0);
}

/* Every dlb_ function the headers in include/dlbridge/ declare
 * (DLB_API ... name(). */
static int declared(char names[][64], int max) {
  char dir[1024];
  snprintf(dir, sizeof dir, "%s/include/dlbridge", DLB_TEST_SOURCE_ROOT);
  DIR *d = opendir(dir);
  if (d == NULL) dlb_test_failed(__FILE__, __LINE__, "cannot list %s", dir);
  int n = 0;
  for (struct dirent *e; (e = readdir(d)) != NULL;) {
    size_t name_len = strlen(e->d_name);
    if (name_len < 3 || strcmp(e->d_name + name_len - 2, ".h") != 0) continue;
    char path[2048];
    snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
    FILE *f = fopen(path, "r");
    if (f == NULL) dlb_test_failed(__FILE__, __LINE__, "cannot read %s", path);
    static char text[1 << 16];
    size_t len = fread(text, 1, sizeof text - 1, f);
    fclose(f);
    text[len] = '\0';
    for (char *at = strstr(text, "\nDLB_API "); at != NULL;
         at = strstr(at + 1, "\nDLB_API ")) {
      char *paren = strchr(at, '(');
      CHECK(paren != NULL);
      char *end = paren;
      while (end > at && end[-1] == ' ') end--;
      char *start = end;
      while (start > at && (start[-1] == '_' || (start[-1] >= 'a' &&
                                                 start[-1] <= 'z') ||
                            (start[-1] >= '0' && start[-1] <= '9')))
        start--;
      CHECK(n < max);
      snprintf(names[n++], 64, "%.*s", (int)(end - start), start);
    }
  }
  closedir(d);
  return n;
}

DLB_TEST(every_public_function_keeps_the_message_on_success) {
  status_and_version();
  allocator();
  devices_and_dtypes();
  layouts();
  tensors_and_views();
  cpu_copies();
  sharing(0);
  npy_files();
  cuda_functions();
  hip_functions();
  static char names[256][64];
  int n = declared(names, 256);
  CHECK(n >= 70);
  for (int i = 0; i < n; i++) {
    int found = 0;
    for (int j = 0; j < ncalled && !found; j++)
      found = strcmp(names[i], called[j]) == 0;
    if (!found)
      dlb_test_failed(__FILE__, __LINE__,
                      "%s is declared in include/dlbridge/ but not called "
                      "here on a success path",
                      names[i]);
  }
}
