/* test_cuda_pin.c -- pinning CPU tensors in place: registration kept
 * while any owner lives, memory pinned already, shared memory of another
 * process, failures with nothing leaked. */
#include <fcntl.h>
#include <pthread.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include "../emu/emu_fns.h"
#include "backend/host_maps.h"
#include "internal.h"
#include "test.h"

static const DLDataType f32 = {kDLFloat, 32, 1};

static DLDeviceType kind_of(const void *p) {
  DLDevice d;
  CHECK_OK(dlb_device_of_pointer(p, &d));
  return d.device_type;
}

DLB_TEST(cuda_pin_registers_until_last_owner) {
  emu e = emu_cuda();
  DLManagedTensorVersioned *t = dlb_test_counting_floats(1000);
  t->flags = DLPACK_FLAG_BITMASK_READ_ONLY;
  DLManagedTensorVersioned *p = NULL;
  CHECK_OK(dlb_tensor_pin(t, kDLCUDAHost, &p));
  CHECK_EQ_INT(p->dl_tensor.device.device_type, kDLCUDAHost);
  CHECK_EQ_INT(p->dl_tensor.device.device_id, 0);
  CHECK(p->dl_tensor.data == t->dl_tensor.data);
  CHECK_EQ_INT(p->flags, DLPACK_FLAG_BITMASK_READ_ONLY);
  CHECK_EQ_INT(kind_of((float *)t->dl_tensor.data + 999), kDLCUDAHost);
  CHECK_EQ_INT(e.live_kind(EMU_LIVE_REGISTERED), 1);
  /* The pinned tensor keeps the memory: the CPU tensor may go first. */
  void *data = t->dl_tensor.data;
  dlb_tensor_release(t);
  CHECK(((float *)p->dl_tensor.data)[999] == 999.0f);
  /* A view holds the registration too. */
  DLManagedTensorVersioned *v = NULL;
  CHECK_OK(dlb_tensor_select(p, 0, 5, &v));
  CHECK_EQ_INT(v->dl_tensor.device.device_type, kDLCUDAHost);
  dlb_tensor_release(p);
  CHECK_EQ_INT(e.live_kind(EMU_LIVE_REGISTERED), 1);
  CHECK_EQ_INT(kind_of(data), kDLCUDAHost);
  dlb_tensor_release(v);
  CHECK_EQ_INT(e.live(), 0);
  CHECK_EQ_INT(e.calls("cuMemHostUnregister"), 1);
}

/* Padded 4-bit units take a byte each: all of them are registered, not
 * the half that packed ones would take. */
DLB_TEST(cuda_pin_padded_sub_byte_units_whole) {
  emu e = emu_cuda();
  (void)e;
  enum { N = 8192 };
  unsigned char *bytes = calloc(N, 1);
  CHECK(bytes != NULL);
  int64_t shape[1] = {N};
  DLTensor d;
  memset(&d, 0, sizeof d);
  d.data = bytes;
  d.device.device_type = kDLCPU;
  d.ndim = 1;
  d.dtype.code = kDLUInt;
  d.dtype.bits = 4;
  d.dtype.lanes = 1;
  d.shape = shape;
  DLManagedTensorVersioned *t = NULL, *p = NULL;
  CHECK_OK(dlb_tensor_wrap(&d, DLPACK_FLAG_BITMASK_IS_SUBBYTE_TYPE_PADDED,
                           NULL, NULL, &t));
  CHECK_OK(dlb_tensor_pin(t, kDLCUDAHost, &p));
  CHECK_EQ_INT(kind_of(bytes), kDLCUDAHost);
  CHECK_EQ_INT(kind_of(bytes + N / 2 + 1), kDLCUDAHost);
  CHECK_EQ_INT(kind_of(bytes + N - 1), kDLCUDAHost);
  dlb_tensor_release(p);
  dlb_tensor_release(t);
  free(bytes);
}

DLB_TEST(cuda_pin_twice_shares_the_registration) {
  emu e = emu_cuda();
  DLManagedTensorVersioned *t = dlb_test_counting_floats(64);
  DLManagedTensorVersioned *a = NULL, *b = NULL;
  CHECK_OK(dlb_tensor_pin(t, kDLCUDAHost, &a));
  CHECK_OK(dlb_tensor_pin(t, kDLCUDAHost, &b));
  CHECK_EQ_INT(e.calls("cuMemHostRegister_v2"), 1);
  CHECK_EQ_INT(e.live_kind(EMU_LIVE_REGISTERED), 1);
  dlb_tensor_release(a);
  CHECK_EQ_INT(kind_of(t->dl_tensor.data), kDLCUDAHost);
  dlb_tensor_release(b);
  CHECK_EQ_INT(kind_of(t->dl_tensor.data), kDLCPU);
  dlb_tensor_release(t);
  CHECK_EQ_INT(e.live(), 0);
}

static void unmap(void *ctx) { (void)ctx; }

/* Wraps size bytes at p as a cpu tensor of float32. */
static DLManagedTensorVersioned *wrap_cpu(void *p, int64_t n,
                                          dlb_release_fn release, void *ctx) {
  int64_t shape[1] = {n};
  DLTensor desc;
  memset(&desc, 0, sizeof desc);
  desc.data = p;
  desc.device = (DLDevice){kDLCPU, 0};
  desc.ndim = 1;
  desc.dtype = f32;
  desc.shape = shape;
  DLManagedTensorVersioned *t = NULL;
  CHECK_OK(dlb_tensor_wrap(&desc, 0, release, ctx, &t));
  return t;
}

/* PyTorch's pinned tensors reach us labelled cpu: pinning them again is
 * accepted, and leaves their pinning alone. */
DLB_TEST(cuda_pin_memory_pinned_by_others) {
  emu e = emu_cuda();
  CHECK_OK(dlb_runtime_status(DLB_RUNTIME_CUDA));
  cu_fns cu = cu_fns_of(&e);
  cu_as_framework(&cu, 0);
  void *pinned = NULL;
  CHECK_EQ_INT(cu.cuMemHostAlloc(&pinned, 4096, 0), 0);
  float *heap = malloc(4096);
  CHECK_EQ_INT(cu.cuMemHostRegister_v2(heap, 4096, 0), 0);
  void *mem[2] = {pinned, heap};
  for (int i = 0; i < 2; i++) {
    DLManagedTensorVersioned *t = wrap_cpu(mem[i], 1024, unmap, NULL);
    DLManagedTensorVersioned *p = NULL;
    CHECK_OK(dlb_tensor_pin(t, kDLCUDAHost, &p));
    CHECK_EQ_INT(p->dl_tensor.device.device_type, kDLCUDAHost);
    dlb_tensor_release(t);
    dlb_tensor_release(p);
    CHECK_EQ_INT(kind_of(mem[i]), kDLCUDAHost);
  }
  CHECK_EQ_INT(e.calls("cuMemHostUnregister"), 0);
  CHECK_EQ_INT(cu.cuMemHostUnregister(heap), 0);
  CHECK_EQ_INT(cu.cuMemFreeHost(pinned), 0);
  free(heap);
  CHECK_EQ_INT(e.live(), 0);
}

/* A range pinned only in part, by someone else, cannot be called pinned
 * (a part pinned by dlbridge is another matter: test_pin_overlap.c). */
DLB_TEST(cuda_pin_partly_registered_range) {
  emu e = emu_cuda();
  CHECK_OK(dlb_runtime_status(DLB_RUNTIME_CUDA));
  cu_fns cu = cu_fns_of(&e);
  cu_as_framework(&cu, 0);
  DLManagedTensorVersioned *t = dlb_test_counting_floats(1024);
  CHECK_EQ_INT(cu.cuMemHostRegister_v2(t->dl_tensor.data, 512 * 4, 0), 0);
  DLManagedTensorVersioned *all = NULL;
  dlb_test_failalloc_install(0);
  CHECK_STATUS(dlb_tensor_pin(t, kDLCUDAHost, &all), DLB_E_RUNTIME);
  CHECK_ERROR_MENTIONS("only part of the range is registered");
  char range[128];
  snprintf(range, sizeof range, "[%p, %p) as pinned already, but byte %p",
           t->dl_tensor.data, (void *)((float *)t->dl_tensor.data + 1024),
           (void *)((char *)t->dl_tensor.data + 1024 * 4 - 1));
  CHECK_ERROR_MENTIONS(range);
  CHECK(all == NULL);
  CHECK_EQ_INT(dlb_test_failalloc_live(), 0);
  dlb_test_failalloc_remove();
  CHECK_EQ_INT(cu.cuMemHostUnregister(t->dl_tensor.data), 0);
  /* A part of a part pinned here shares its registration, which then
   * outlives the pin that made it. */
  DLManagedTensorVersioned *head = NULL, *p = NULL, *inner = NULL, *q = NULL;
  dlb_slice first = {0, 512, 1}, mid = {100, 200, 1};
  CHECK_OK(dlb_tensor_slice(t, 1, &first, &head));
  CHECK_OK(dlb_tensor_pin(head, kDLCUDAHost, &p));
  CHECK_OK(dlb_tensor_slice(head, 1, &mid, &inner));
  CHECK_OK(dlb_tensor_pin(inner, kDLCUDAHost, &q));
  CHECK_EQ_INT(e.calls("cuMemHostRegister_v2"), 3);
  dlb_tensor_release(p);
  CHECK_EQ_INT(kind_of((float *)t->dl_tensor.data + 150), kDLCUDAHost);
  dlb_tensor_release(q);
  CHECK_EQ_INT(kind_of((float *)t->dl_tensor.data + 150), kDLCPU);
  dlb_tensor_release(inner);
  dlb_tensor_release(head);
  dlb_tensor_release(t);
  CHECK_EQ_INT(e.live(), 0);
}

static void unmap_shm(void *ctx) { munmap(ctx, 1 << 16); }

/* Shared memory another process created and filled, pinned here. */
DLB_TEST(cuda_pin_shared_memory_of_another_process) {
  emu e = emu_cuda();
  char name[64];
  snprintf(name, sizeof name, "/dlb-test-pin-%d", (int)getpid());
  pid_t child = fork();
  CHECK(child >= 0);
  if (child == 0) {
    int fd = shm_open(name, O_CREAT | O_EXCL | O_RDWR, 0600);
    if (fd < 0 || ftruncate(fd, 1 << 16) != 0) _exit(1);
    float *v = mmap(NULL, 1 << 16, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    if (v == MAP_FAILED) _exit(1);
    for (int i = 0; i < (1 << 14); i++) v[i] = (float)(3 * i);
    _exit(0);
  }
  int st = 0;
  CHECK(waitpid(child, &st, 0) == child);
  CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0);
  int fd = shm_open(name, O_RDWR, 0600);
  shm_unlink(name);
  CHECK(fd >= 0);
  void *m = mmap(NULL, 1 << 16, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  close(fd);
  CHECK(m != MAP_FAILED);
  DLManagedTensorVersioned *t = wrap_cpu(m, 1 << 14, unmap_shm, m);
  DLManagedTensorVersioned *p = NULL;
  CHECK_OK(dlb_tensor_pin(t, kDLCUDAHost, &p));
  dlb_tensor_release(t);
  CHECK_EQ_INT(kind_of((char *)m + 1000), kDLCUDAHost);
  CHECK(((float *)p->dl_tensor.data)[5000] == 15000.0f);
  dlb_tensor_release(p);
  CHECK_EQ_INT(e.live(), 0);
}

DLB_TEST(cuda_pin_refuses_bad_input) {
  emu e = emu_cuda();
  DLManagedTensorVersioned *t = dlb_test_counting_floats(8), *p = NULL;
  CHECK_STATUS(dlb_tensor_pin(t, kDLCUDA, &p), DLB_E_INVAL);
  CHECK_ERROR_MENTIONS("host_type is 2");
  CHECK_STATUS(dlb_tensor_pin(NULL, kDLCUDAHost, &p), DLB_E_INVAL);
  CHECK_STATUS(dlb_tensor_pin(t, kDLCUDAHost, NULL), DLB_E_INVAL);
  int64_t shape[1] = {8};
  DLManagedTensorVersioned *d = NULL;
  CHECK_OK(dlb_tensor_alloc((DLDevice){kDLCUDA, 0}, f32, 1, shape, &d));
  CHECK_STATUS(dlb_tensor_pin(d, kDLCUDAHost, &p), DLB_E_DEVICE);
  CHECK_ERROR_MENTIONS("only cpu tensors are pinned");
  /* Not ours: adopt it first. */
  DLManagedTensorVersioned foreign = *t;
  foreign.manager_ctx = NULL;
  foreign.deleter = NULL;
  CHECK_STATUS(dlb_tensor_pin(&foreign, kDLCUDAHost, &p), DLB_E_INVAL);
  CHECK_ERROR_MENTIONS("dlb_tensor_adopt");
  CHECK(p == NULL);
  dlb_tensor_release(d);
  dlb_tensor_release(t);
  CHECK_EQ_INT(e.live(), 0);
}

DLB_TEST(cuda_pin_without_runtime) {
  setenv("DLBRIDGE_CUDA_LIBRARY", "/nonexistent/libcuda.so.1", 1);
  DLManagedTensorVersioned *t = dlb_test_counting_floats(8), *p = NULL;
  CHECK_STATUS(dlb_tensor_pin(t, kDLCUDAHost, &p), DLB_E_NO_RUNTIME);
  CHECK(p == NULL);
  dlb_tensor_release(t);
}

DLB_TEST(cuda_pin_empty_tensor) {
  emu e = emu_cuda();
  DLManagedTensorVersioned *t = dlb_test_counting_floats(0), *p = NULL;
  CHECK_OK(dlb_tensor_pin(t, kDLCUDAHost, &p));
  CHECK_EQ_INT(p->dl_tensor.device.device_type, kDLCUDAHost);
  CHECK_EQ_INT(e.calls("cuMemHostRegister_v2"), 0);
  dlb_tensor_release(p);
  dlb_tensor_release(t);
}

DLB_TEST(cuda_pin_driver_refuses) {
  emu e = emu_cuda();
  DLManagedTensorVersioned *t = dlb_test_counting_floats(64), *p = NULL;
  dlb_test_failalloc_install(0);
  e.fail("cuMemHostRegister_v2", 1, 801);
  CHECK_STATUS(dlb_tensor_pin(t, kDLCUDAHost, &p), DLB_E_UNSUPPORTED);
  CHECK_ERROR_MENTIONS("CUDA_ERROR_NOT_SUPPORTED");
  e.fail("cuMemHostRegister_v2", 1, 999);
  CHECK_STATUS(dlb_tensor_pin(t, kDLCUDAHost, &p), DLB_E_RUNTIME);
  CHECK_ERROR_MENTIONS("cuMemHostRegister_v2");
  CHECK(p == NULL);
  CHECK_EQ_INT(dlb_test_failalloc_live(), 0);
  dlb_test_failalloc_remove();
  dlb_tensor_release(t);
  CHECK_EQ_INT(e.live(), 0);
}

static dlb_status pin_and_release(void *ctx) {
  DLManagedTensorVersioned *t = ctx, *p = NULL, *q = NULL;
  dlb_status s = dlb_tensor_pin(t, kDLCUDAHost, &p);
  if (s != DLB_OK) return s;
  s = dlb_tensor_pin(t, kDLCUDAHost, &q);
  dlb_tensor_release(p);
  if (s != DLB_OK) return s;
  dlb_tensor_release(q);
  return DLB_OK;
}

DLB_TEST(cuda_pin_host_allocation_failures) {
  emu e = emu_cuda();
  CHECK_OK(dlb_runtime_status(DLB_RUNTIME_CUDA));
  DLManagedTensorVersioned *t = dlb_test_counting_floats(64);
  CHECK(dlb_test_oom_loop(pin_and_release, t) > 0);
  CHECK_EQ_INT(e.live(), 0);
  dlb_tensor_release(t);
}

DLB_TEST(cuda_pin_every_driver_call_failing) {
  emu e = emu_cuda();
  CHECK_OK(dlb_runtime_status(DLB_RUNTIME_CUDA));
  DLManagedTensorVersioned *t = dlb_test_counting_floats(64);
  for (int n = 1; n < 1000; n++) {
    e.fail(NULL, n, 999);
    dlb_status s = pin_and_release(t);
    if (!e.fail_fired()) {
      CHECK_OK(s);
      break;
    }
    CHECK_EQ_INT(e.live(), 0);
    CHECK_EQ_INT(e.context_depth(), 0);
  }
  dlb_tensor_release(t);
}

static void *pin_in_thread(void *arg) {
  DLManagedTensorVersioned **t = arg;
  return dlb_tensor_pin(t[0], kDLCUDAHost, &t[1]) == DLB_OK ? NULL
                                                             : (void *)1;
}

/* Starts a thread pinning t[0] into t[1]; returns once that thread holds
 * the registry's lock, which it keeps through the slow registration the
 * test asked the emulator for. */
static pthread_t pin_holding_the_lock(DLManagedTensorVersioned **t) {
  pthread_t th;
  CHECK_EQ_INT(pthread_create(&th, NULL, pin_in_thread, t), 0);
  while (pthread_mutex_trylock(&dlb__pin_lock) == 0) {
    pthread_mutex_unlock(&dlb__pin_lock);
    usleep(1000);
  }
  return th;
}

/* Joins that thread: its pin succeeded and t[0]'s memory is pinned. */
static void pin_finished(pthread_t th, DLManagedTensorVersioned **t) {
  void *res = (void *)2;
  CHECK_EQ_INT(pthread_join(th, &res), 0);
  CHECK(res == NULL);
  CHECK_EQ_INT(kind_of(t[0]->dl_tensor.data), kDLCUDAHost);
}

/* A thread forks while another pins, holding the registry's lock across
 * a slow registration: the child, where that thread does not exist, makes
 * the lock anew and pins at once rather than waiting forever. */
DLB_TEST(cuda_pin_in_a_child_forked_during_a_pin) {
  setenv("EMU_CUDA_SLOW", "cuMemHostRegister_v2", 1);
  setenv("EMU_CUDA_SLOW_MS", "500", 1);
  emu e = emu_cuda();
  CHECK_OK(dlb_runtime_status(DLB_RUNTIME_CUDA));
  DLManagedTensorVersioned *t[2] = {dlb_test_counting_floats(1000), NULL};
  DLManagedTensorVersioned *other = dlb_test_counting_floats(1000);
  pthread_t th = pin_holding_the_lock(t);
  /* The child's verdict comes through a pipe: its exit status may also
   * carry valgrind's report of the blocks of the pin in flight, which
   * belong to a call that never returns in the child. */
  int verdict[2];
  CHECK_EQ_INT(pipe(verdict), 0);
  pid_t pid = fork();
  CHECK(pid >= 0);
  if (pid == 0) {
    alarm(20);
    DLManagedTensorVersioned *p = NULL;
    char ok = dlb_tensor_pin(other, kDLCUDAHost, &p) == DLB_OK &&
              kind_of(other->dl_tensor.data) == kDLCUDAHost;
    if (ok) dlb_tensor_release(p);
    dlb_tensor_release(other);
    _exit(write(verdict[1], &ok, 1) == 1 ? 0 : 1);
  }
  close(verdict[1]);
  char ok = 0;
  CHECK(read(verdict[0], &ok, 1) == 1 && ok == 1);
  close(verdict[0]);
  int st = 0;
  CHECK(waitpid(pid, &st, 0) == pid);
  CHECK(WIFEXITED(st));
  pin_finished(th, t);
  CHECK_EQ_INT(kind_of(other->dl_tensor.data), kDLCPU);
  dlb_tensor_release(t[1]);
  dlb_tensor_release(t[0]);
  dlb_tensor_release(other);
  CHECK_EQ_INT(e.live(), 0);
}

/* A pinned tensor released while another thread pins (the registry's
 * lock held across a slow registration) waits for that pin to finish
 * before it changes the registry. */
DLB_TEST(cuda_pin_release_waits_for_a_pin_in_progress) {
  setenv("EMU_CUDA_SLOW", "cuMemHostRegister_v2", 1);
  setenv("EMU_CUDA_SLOW_MS", "300", 1);
  emu e = emu_cuda();
  CHECK_OK(dlb_runtime_status(DLB_RUNTIME_CUDA));
  DLManagedTensorVersioned *first = dlb_test_counting_floats(1000), *p = NULL;
  CHECK_OK(dlb_tensor_pin(first, kDLCUDAHost, &p));
  DLManagedTensorVersioned *t[2] = {dlb_test_counting_floats(1000), NULL};
  pthread_t th = pin_holding_the_lock(t);
  dlb_tensor_release(p);
  /* The other pin's registration was done before this release went on. */
  CHECK_EQ_INT(e.calls("cuMemHostRegister_v2"), 2);
  CHECK_EQ_INT(e.calls("cuMemHostUnregister"), 1);
  pin_finished(th, t);
  CHECK_EQ_INT(kind_of(first->dl_tensor.data), kDLCPU);
  dlb_tensor_release(t[1]);
  dlb_tensor_release(t[0]);
  dlb_tensor_release(first);
  CHECK_EQ_INT(e.live(), 0);
}

/* Two pages of floats 0, 1, 2, ... mapped read-only, wrapped read-only. */
static DLManagedTensorVersioned *read_only_floats(void **map) {
  const size_t bytes = 2 * (size_t)sysconf(_SC_PAGESIZE);
  float *f = mmap(NULL, bytes, PROT_READ | PROT_WRITE,
                  MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  CHECK(f != MAP_FAILED);
  for (size_t i = 0; i < bytes / sizeof *f; i++) f[i] = (float)i;
  CHECK_EQ_INT(mprotect(f, bytes, PROT_READ), 0);
  int64_t shape[1] = {(int64_t)(bytes / sizeof *f)};
  DLTensor d;
  memset(&d, 0, sizeof d);
  d.data = f;
  d.device.device_type = kDLCPU;
  d.ndim = 1;
  d.dtype = f32;
  d.shape = shape;
  DLManagedTensorVersioned *t = NULL;
  CHECK_OK(dlb_tensor_wrap(&d, DLPACK_FLAG_BITMASK_READ_ONLY, NULL, NULL,
                           &t));
  *map = f;
  return t;
}

/* Memory the process may only read (a read-only share, a file mapped for
 * reading) is refused without CU_MEMHOSTREGISTER_READ_ONLY: it is
 * registered again with that flag, where the device supports it. */
DLB_TEST(cuda_pin_read_only_mapping_registers_read_only) {
  emu e = emu_cuda();
  void *map;
  DLManagedTensorVersioned *t = read_only_floats(&map), *p = NULL;
  CHECK_OK(dlb_tensor_pin(t, kDLCUDAHost, &p));
  CHECK_EQ_INT(e.calls("cuMemHostRegister_v2"), 2);
  CHECK_EQ_INT(kind_of(map), kDLCUDAHost);
  CHECK(((const float *)p->dl_tensor.data)[5] == 5.0f);
  dlb_tensor_release(p);
  dlb_tensor_release(t);
  CHECK_EQ_INT(e.live(), 0);
  munmap(map, 2 * (size_t)sysconf(_SC_PAGESIZE));
}

/* A device without READ_ONLY_HOST_REGISTER_SUPPORTED is not asked with
 * the flag: the first refusal is the answer. */
DLB_TEST(cuda_pin_read_only_mapping_without_device_support) {
  setenv("EMU_CUDA_READ_ONLY_REGISTER", "0", 1);
  emu e = emu_cuda();
  void *map;
  DLManagedTensorVersioned *t = read_only_floats(&map), *p = NULL;
  CHECK_STATUS(dlb_tensor_pin(t, kDLCUDAHost, &p), DLB_E_RUNTIME);
  CHECK(p == NULL);
  CHECK_ERROR_MENTIONS("cuMemHostRegister_v2(");
  CHECK_ERROR_MENTIONS("CUDA_ERROR_INVALID_VALUE");
  CHECK_EQ_INT(e.calls("cuMemHostRegister_v2"), 1);
  dlb_tensor_release(t);
  CHECK_EQ_INT(e.live(), 0);
  munmap(map, 2 * (size_t)sysconf(_SC_PAGESIZE));
}

/* Writable memory the driver refuses is not asked again read-only. */
DLB_TEST(cuda_pin_writable_memory_refused_is_not_retried) {
  emu e = emu_cuda();
  DLManagedTensorVersioned *t = dlb_test_counting_floats(1000), *p = NULL;
  e.fail("cuMemHostRegister_v2", 1, 999);
  CHECK_STATUS(dlb_tensor_pin(t, kDLCUDAHost, &p), DLB_E_RUNTIME);
  CHECK_EQ_INT(e.calls("cuMemHostRegister_v2"), 1);
  dlb_tensor_release(t);
  CHECK_EQ_INT(e.live(), 0);
}

/* Pinned already by someone else, and then the driver cannot say what the
 * range is: its failure is the answer, not a guess at the range. */
DLB_TEST(cuda_pin_pinned_already_query_fails) {
  emu e = emu_cuda();
  CHECK_OK(dlb_runtime_status(DLB_RUNTIME_CUDA));
  cu_fns cu = cu_fns_of(&e);
  cu_as_framework(&cu, 0);
  float *heap = malloc(4096);
  CHECK(heap != NULL);
  CHECK_EQ_INT(cu.cuMemHostRegister_v2(heap, 4096, 0), 0);
  DLManagedTensorVersioned *t = wrap_cpu(heap, 1024, unmap, NULL), *p = NULL;
  e.fail("cuPointerGetAttributes", 1, 999);
  CHECK_STATUS(dlb_tensor_pin(t, kDLCUDAHost, &p), DLB_E_RUNTIME);
  CHECK(e.fail_fired());
  CHECK_ERROR_MENTIONS("cuPointerGetAttributes");
  CHECK(p == NULL);
  dlb_tensor_release(t);
  CHECK_EQ_INT(cu.cuMemHostUnregister(heap), 0);
  free(heap);
  CHECK_EQ_INT(e.live(), 0);
}

/* CUDA and HIP each register the memory they pin: a registration of one
 * runtime is no registration of the other. */
DLB_TEST(cuda_and_hip_pin_the_same_memory_each) {
  emu c = emu_cuda(), h = emu_hip();
  DLManagedTensorVersioned *t = dlb_test_counting_floats(1000);
  DLManagedTensorVersioned *p = NULL, *q = NULL;
  CHECK_OK(dlb_tensor_pin(t, kDLCUDAHost, &p));
  CHECK_OK(dlb_tensor_pin(t, kDLROCMHost, &q));
  CHECK_EQ_INT(c.live_kind(EMU_LIVE_REGISTERED), 1);
  CHECK_EQ_INT(h.live_kind(EMU_LIVE_REGISTERED), 1);
  dlb_tensor_release(p);
  CHECK_EQ_INT(c.live_kind(EMU_LIVE_REGISTERED), 0);
  CHECK_EQ_INT(h.live_kind(EMU_LIVE_REGISTERED), 1);
  dlb_tensor_release(q);
  dlb_tensor_release(t);
  CHECK_EQ_INT(c.live(), 0);
  CHECK_EQ_INT(h.live(), 0);
}

/* The registration ends before the pinned tensor lets the memory go. */
static emu *freeing_emu;
static long registered_when_freed = -1;
static void note_free(void *ctx) {
  (void)ctx;
  registered_when_freed = freeing_emu->live_kind(EMU_LIVE_REGISTERED);
}

DLB_TEST(cuda_pin_unregisters_before_the_memory_goes) {
  emu e = emu_cuda();
  freeing_emu = &e;
  float *heap = malloc(4096);
  CHECK(heap != NULL);
  DLManagedTensorVersioned *t = wrap_cpu(heap, 1024, note_free, NULL);
  DLManagedTensorVersioned *p = NULL;
  CHECK_OK(dlb_tensor_pin(t, kDLCUDAHost, &p));
  dlb_tensor_release(t);
  CHECK_EQ_INT(registered_when_freed, -1);
  dlb_tensor_release(p);
  CHECK_EQ_INT(registered_when_freed, 0);
  free(heap);
  CHECK_EQ_INT(e.live(), 0);
}

/* What decides whether memory needs CU_MEMHOSTREGISTER_READ_ONLY: a
 * writable page between read-only ones, ranges at its edges and across
 * them, and the empty range. */
DLB_TEST(pin_writable_range_edges) {
  const size_t pg = (size_t)sysconf(_SC_PAGESIZE);
  char *m = mmap(NULL, 3 * pg, PROT_READ | PROT_WRITE,
                 MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  CHECK(m != MAP_FAILED);
  CHECK_EQ_INT(mprotect(m, pg, PROT_READ), 0);
  CHECK_EQ_INT(mprotect(m + 2 * pg, pg, PROT_READ), 0);
  CHECK_EQ_INT(dlb__range_writable(m + pg, pg), 1);
  CHECK_EQ_INT(dlb__range_writable(m + pg + 1, pg - 2), 1);
  CHECK_EQ_INT(dlb__range_writable(m + pg - 1, 2), 0);
  CHECK_EQ_INT(dlb__range_writable(m + 2 * pg - 1, 2), 0);
  CHECK_EQ_INT(dlb__range_writable(m, 3 * pg), 0);
  CHECK_EQ_INT(dlb__range_writable(NULL, 0), 1);
  /* Past every mapping: not in one, so not writable. */
  CHECK_EQ_INT(dlb__range_writable((void *)(UINTPTR_MAX - 15), 8), 0);
  /* Two writable mappings side by side cover a range across both. */
  CHECK(mmap(m + 2 * pg, pg, PROT_READ | PROT_WRITE,
             MAP_SHARED | MAP_ANONYMOUS | MAP_FIXED, -1, 0) == m + 2 * pg);
  CHECK_EQ_INT(dlb__range_writable(m + pg, 2 * pg), 1);
  munmap(m, 3 * pg);
}
