/* test_tensor.c -- allocation, wrapping, adoption, legacy conversion, sharing
 * and release of managed tensors. */
#include <pthread.h>

#include "core/tensor_internal.h"
#include "test.h"

static const DLDataType F32 = {kDLFloat, 32, 1};
static const DLDataType I32 = {kDLInt, 32, 1};
static const DLDevice CPU = {kDLCPU, 0};

/* A value no call may write into an out-parameter on failure. */
#define UNTOUCHED ((DLManagedTensorVersioned *)(uintptr_t)0x5a5a)

static void count_release(void *ctx) { (*(int *)ctx)++; }

/* The 2 x 3 int32 tensor both foreign kinds describe, values 0..5. */
static void fill_2x3(DLTensor *t, int64_t shape[2], int64_t strides[2],
                     int32_t data[6]) {
  shape[0] = 2;
  shape[1] = 3;
  strides[0] = 3;
  strides[1] = 1;
  for (int i = 0; i < 6; i++) data[i] = i;
  t->data = data;
  t->device = CPU;
  t->ndim = 2;
  t->dtype = I32;
  t->shape = shape;
  t->strides = strides;
}

/* A versioned tensor as another library would make it: 2 x 3 int32 with
 * values 0..5, one malloc block, a deleter that counts its calls. */
typedef struct foreign {
  DLManagedTensorVersioned m;
  int64_t shape[2], strides[2];
  int32_t data[6];
  int *count;
} foreign;

static void foreign_deleter(DLManagedTensorVersioned *self) {
  foreign *f = self->manager_ctx;
  (*f->count)++;
  free(f);
}

static foreign *foreign_new(int *count) {
  foreign *f = calloc(1, sizeof *f);
  CHECK(f != NULL);
  f->m.version.major = 1;
  f->m.version.minor = 0;
  f->m.manager_ctx = f;
  f->m.deleter = foreign_deleter;
  fill_2x3(&f->m.dl_tensor, f->shape, f->strides, f->data);
  f->count = count;
  return f;
}

/* The legacy counterpart. */
typedef struct foreign_legacy {
  DLManagedTensor m;
  int64_t shape[2], strides[2];
  int32_t data[6];
  int *count;
} foreign_legacy;

static void foreign_legacy_deleter(DLManagedTensor *self) {
  foreign_legacy *f = self->manager_ctx;
  (*f->count)++;
  free(f);
}

static foreign_legacy *foreign_legacy_new(int *count) {
  foreign_legacy *f = calloc(1, sizeof *f);
  CHECK(f != NULL);
  f->m.manager_ctx = f;
  f->m.deleter = foreign_legacy_deleter;
  fill_2x3(&f->m.dl_tensor, f->shape, f->strides, f->data);
  f->count = count;
  return f;
}

static void check_shape2(const DLTensor *t, int64_t s0, int64_t s1,
                         int64_t st0, int64_t st1) {
  CHECK_EQ_INT(t->ndim, 2);
  CHECK_EQ_INT(t->shape[0], s0);
  CHECK_EQ_INT(t->shape[1], s1);
  CHECK(t->strides != NULL);
  CHECK_EQ_INT(t->strides[0], st0);
  CHECK_EQ_INT(t->strides[1], st1);
}

/* ---- alloc ------------------------------------------------------------- */

DLB_TEST(tensor_alloc_compact_layout) {
  int64_t shape[3] = {2, 3, 4};
  DLManagedTensorVersioned *t = NULL;
  CHECK_OK(dlb_tensor_alloc(CPU, F32, 3, shape, &t));
  CHECK(dlb_tensor_is_ours(t));
  CHECK_EQ_INT(t->version.major, DLPACK_MAJOR_VERSION);
  CHECK_EQ_INT(t->version.minor, DLPACK_MINOR_VERSION);
  CHECK_EQ_INT(t->flags, 0);
  const DLTensor *dl = &t->dl_tensor;
  CHECK_EQ_INT(dl->ndim, 3);
  CHECK(dl->shape != shape);
  CHECK_EQ_INT(dl->shape[0], 2);
  CHECK_EQ_INT(dl->shape[1], 3);
  CHECK_EQ_INT(dl->shape[2], 4);
  CHECK_EQ_INT(dl->strides[0], 12);
  CHECK_EQ_INT(dl->strides[1], 4);
  CHECK_EQ_INT(dl->strides[2], 1);
  CHECK_EQ_INT(dl->byte_offset, 0);
  CHECK_EQ_INT(dl->device.device_type, kDLCPU);
  CHECK_EQ_INT(dl->device.device_id, 0);
  CHECK(dl->data != NULL);
  CHECK_EQ_INT((uintptr_t)dl->data % DLB_DATA_ALIGNMENT, 0);
  CHECK_OK(dlb_managed_validate(t));
  /* The whole 96 bytes are usable (a short block would trip the sanitizer
   * or corrupt the heap here). */
  float *p = dl->data;
  for (int i = 0; i < 24; i++) p[i] = (float)i;
  for (int i = 0; i < 24; i++) CHECK(p[i] == (float)i);
  dlb_tensor_release(t);
}

DLB_TEST(tensor_alloc_scalar_and_empty) {
  DLManagedTensorVersioned *s = NULL, *e = NULL;
  CHECK_OK(dlb_tensor_alloc(CPU, F32, 0, NULL, &s));
  CHECK_EQ_INT(s->dl_tensor.ndim, 0);
  CHECK(s->dl_tensor.data != NULL);
  *(float *)s->dl_tensor.data = 2.5f;
  CHECK_OK(dlb_managed_validate(s));
  int64_t shape[2] = {3, 0};
  CHECK_OK(dlb_tensor_alloc(CPU, F32, 2, shape, &e));
  CHECK(e->dl_tensor.data != NULL);
  check_shape2(&e->dl_tensor, 3, 0, 1, 1);
  CHECK_OK(dlb_managed_validate(e));
  dlb_tensor_release(s);
  dlb_tensor_release(e);
}

/* A tensor made under an application's allocator and released after the
 * default came back returns its block to that allocator at once, not as
 * the thread's spare for the default's next tensor. */
DLB_TEST(tensor_block_goes_back_to_the_allocator_that_made_it) {
  dlb_test_failalloc_install(0);
  int64_t shape[1] = {4};
  DLManagedTensorVersioned *t = NULL, *u = NULL;
  CHECK_OK(dlb_tensor_alloc(CPU, F32, 1, shape, &t));
  CHECK(dlb_test_failalloc_live() > 0);
  CHECK_OK(dlb_set_allocator(NULL));
  dlb_tensor_release(t);
  CHECK_EQ_INT(dlb_test_failalloc_live(), 0);
  /* The default's own blocks are still kept and reused. */
  CHECK_OK(dlb_tensor_alloc(CPU, F32, 1, shape, &u));
  dlb_tensor_release(u);
}

DLB_TEST(tensor_alloc_normalizes_host_device_id) {
  DLDevice dev = {kDLCPU, 7};
  int64_t shape[1] = {4};
  DLManagedTensorVersioned *t = NULL;
  CHECK_OK(dlb_tensor_alloc(dev, F32, 1, shape, &t));
  CHECK_EQ_INT(t->dl_tensor.device.device_type, kDLCPU);
  CHECK_EQ_INT(t->dl_tensor.device.device_id, 0);
  dlb_tensor_release(t);
}

DLB_TEST(tensor_alloc_rejects_invalid) {
  int64_t shape[2] = {2, 3};
  DLManagedTensorVersioned *t = UNTOUCHED;
  CHECK_STATUS(dlb_tensor_alloc(CPU, F32, 2, shape, NULL), DLB_E_INVAL);
  CHECK_ERROR_MENTIONS("out");
  DLDataType bad_dtype = {kDLFloat, 7, 1};
  CHECK_STATUS(dlb_tensor_alloc(CPU, bad_dtype, 2, shape, &t), DLB_E_DTYPE);
  DLDevice bad_dev = {(DLDeviceType)99, 0};
  CHECK_STATUS(dlb_tensor_alloc(bad_dev, F32, 2, shape, &t), DLB_E_DEVICE);
  DLDevice neg_id = {kDLCUDA, -1};
  CHECK_STATUS(dlb_tensor_alloc(neg_id, F32, 2, shape, &t), DLB_E_DEVICE);
  CHECK_STATUS(dlb_tensor_alloc(CPU, F32, -1, shape, &t), DLB_E_LAYOUT);
  CHECK_ERROR_MENTIONS("ndim is -1");
  CHECK_STATUS(dlb_tensor_alloc(CPU, F32, DLB_MAX_NDIM + 1, shape, &t),
               DLB_E_LAYOUT);
  CHECK_ERROR_MENTIONS("ndim is 65");
  /* An ndim out of range is the error, whatever the shape. */
  CHECK_STATUS(dlb_tensor_alloc(CPU, F32, DLB_MAX_NDIM + 1, NULL, &t),
               DLB_E_LAYOUT);
  CHECK_ERROR_MENTIONS("ndim is 65");
  CHECK_STATUS(dlb_tensor_alloc(CPU, F32, 2, NULL, &t), DLB_E_INVAL);
  CHECK_ERROR_MENTIONS("shape is NULL");
  int64_t neg[2] = {2, -3};
  CHECK_STATUS(dlb_tensor_alloc(CPU, F32, 2, neg, &t), DLB_E_LAYOUT);
  CHECK_ERROR_MENTIONS("shape[1]");
  int64_t huge[2] = {INT64_MAX / 2, 3};
  CHECK_STATUS(dlb_tensor_alloc(CPU, F32, 2, huge, &t), DLB_E_OVERFLOW);
  /* The count fits but its bytes do not. */
  int64_t big_bytes[1] = {INT64_MAX / 2};
  CHECK_STATUS(dlb_tensor_alloc(CPU, F32, 1, big_bytes, &t), DLB_E_OVERFLOW);
  /* Empty, yet the compact strides of the other extents overflow. */
  int64_t wide[3] = {0, INT64_C(1) << 40, INT64_C(1) << 40};
  CHECK_STATUS(dlb_tensor_alloc(CPU, F32, 3, wide, &t), DLB_E_OVERFLOW);
  CHECK(t == UNTOUCHED);
}

DLB_TEST(tensor_alloc_other_kinds_need_a_runtime) {
  /* No backend will ever allocate hexagon memory; the failure must come
   * back as one of the documented statuses and leak nothing. */
  DLDevice dev = {kDLHexagon, 0};
  int64_t shape[1] = {16};
  DLManagedTensorVersioned *t = UNTOUCHED;
  dlb_test_failalloc_install(0);
  dlb_status st = dlb_tensor_alloc(dev, F32, 1, shape, &t);
  CHECK(st == DLB_E_UNSUPPORTED || st == DLB_E_NO_RUNTIME ||
        st == DLB_E_NO_DEVICE);
  CHECK_ERROR_MENTIONS("hexagon");
  CHECK(t == UNTOUCHED);
  CHECK_EQ_INT(dlb_test_failalloc_live(), 0);
  dlb_test_failalloc_remove();
}

/* ---- wrap -------------------------------------------------------------- */

DLB_TEST(tensor_wrap_copies_geometry_and_releases_once) {
  static int32_t buf[8];
  int64_t shape[2] = {2, 3}, strides[2] = {4, 1};
  DLTensor desc = {buf, CPU, 2, I32, shape, strides, 4};
  int count = 0;
  DLManagedTensorVersioned *t = NULL;
  CHECK_OK(dlb_tensor_wrap(&desc, DLPACK_FLAG_BITMASK_READ_ONLY,
                           count_release, &count, &t));
  CHECK(dlb_tensor_is_ours(t));
  CHECK_EQ_INT(t->flags, DLPACK_FLAG_BITMASK_READ_ONLY);
  CHECK_EQ_INT(t->version.major, DLPACK_MAJOR_VERSION);
  CHECK(t->dl_tensor.data == buf);
  CHECK_EQ_INT(t->dl_tensor.byte_offset, 4);
  CHECK(t->dl_tensor.shape != shape && t->dl_tensor.strides != strides);
  /* The caller's arrays are borrowed only for the call. */
  shape[0] = 99;
  strides[0] = 99;
  check_shape2(&t->dl_tensor, 2, 3, 4, 1);
  CHECK_EQ_INT(count, 0);
  dlb_tensor_release(t);
  CHECK_EQ_INT(count, 1);
}

DLB_TEST(tensor_wrap_fills_strides_and_normalizes_device) {
  static float buf[6];
  int64_t shape[2] = {3, 2};
  DLTensor desc = {buf, {kDLCUDAHost, 3}, 2, F32, shape, NULL, 0};
  DLManagedTensorVersioned *t = NULL;
  CHECK_OK(dlb_tensor_wrap(&desc, 0, NULL, NULL, &t));
  check_shape2(&t->dl_tensor, 3, 2, 2, 1);
  CHECK_EQ_INT(t->dl_tensor.device.device_type, kDLCUDAHost);
  CHECK_EQ_INT(t->dl_tensor.device.device_id, 0);
  dlb_tensor_release(t);

  /* Non-host devices keep their id. */
  desc.device.device_type = kDLCUDA;
  CHECK_OK(dlb_tensor_wrap(&desc, 0, NULL, NULL, &t));
  CHECK_EQ_INT(t->dl_tensor.device.device_id, 3);
  dlb_tensor_release(t);

  /* An empty tensor may have NULL data. */
  int64_t empty[1] = {0};
  DLTensor none = {NULL, CPU, 1, F32, empty, NULL, 0};
  int count = 0;
  CHECK_OK(dlb_tensor_wrap(&none, 0, count_release, &count, &t));
  CHECK(t->dl_tensor.data == NULL);
  dlb_tensor_release(t);
  CHECK_EQ_INT(count, 1);
}

DLB_TEST(tensor_wrap_rejects_invalid_without_releasing) {
  static float buf[6];
  int64_t shape[2] = {2, 3};
  DLTensor desc = {buf, CPU, 2, F32, shape, NULL, 0};
  int count = 0;
  DLManagedTensorVersioned *t = UNTOUCHED;
  CHECK_STATUS(dlb_tensor_wrap(NULL, 0, count_release, &count, &t),
               DLB_E_INVAL);
  CHECK_ERROR_MENTIONS("desc");
  CHECK_STATUS(dlb_tensor_wrap(&desc, 0, count_release, &count, NULL),
               DLB_E_INVAL);
  CHECK_ERROR_MENTIONS("out");
  CHECK_STATUS(dlb_tensor_wrap(&desc, 1u << 5, count_release, &count, &t),
               DLB_E_INVAL);
  CHECK_ERROR_MENTIONS("flags");
  shape[1] = -3;
  CHECK_STATUS(dlb_tensor_wrap(&desc, 0, count_release, &count, &t),
               DLB_E_LAYOUT);
  CHECK_ERROR_MENTIONS("shape[1]");
  shape[1] = 3;
  desc.data = NULL;
  CHECK_STATUS(dlb_tensor_wrap(&desc, 0, count_release, &count, &t),
               DLB_E_INVAL);
  CHECK_ERROR_MENTIONS("data");
  desc.data = buf;
  desc.device.device_type = (DLDeviceType)5;
  CHECK_STATUS(dlb_tensor_wrap(&desc, 0, count_release, &count, &t),
               DLB_E_DEVICE);
  desc.device = CPU;
  desc.dtype.bits = 12;
  CHECK_STATUS(dlb_tensor_wrap(&desc, 0, count_release, &count, &t),
               DLB_E_DTYPE);
  CHECK(t == UNTOUCHED);
  CHECK_EQ_INT(count, 0);
}

/* ---- adopt ------------------------------------------------------------- */

DLB_TEST(tensor_adopt_calls_foreign_deleter_once) {
  int count = 0;
  foreign *f = foreign_new(&count);
  f->m.flags = DLPACK_FLAG_BITMASK_READ_ONLY | DLPACK_FLAG_BITMASK_IS_COPIED;
  f->m.dl_tensor.device.device_type = kDLCUDAManaged;
  f->m.dl_tensor.device.device_id = 1;
  DLManagedTensorVersioned *t = NULL;
  CHECK_OK(dlb_tensor_adopt(&f->m, &t));
  CHECK(t != &f->m);
  CHECK(dlb_tensor_is_ours(t));
  CHECK_EQ_INT(t->version.major, DLPACK_MAJOR_VERSION);
  CHECK_EQ_INT(t->version.minor, DLPACK_MINOR_VERSION);
  CHECK_EQ_INT(t->flags,
               DLPACK_FLAG_BITMASK_READ_ONLY | DLPACK_FLAG_BITMASK_IS_COPIED);
  CHECK(t->dl_tensor.data == f->data);
  CHECK(t->dl_tensor.shape != f->shape);
  check_shape2(&t->dl_tensor, 2, 3, 3, 1);
  CHECK_EQ_INT(t->dl_tensor.device.device_type, kDLCUDAManaged);
  CHECK_EQ_INT(t->dl_tensor.device.device_id, 0);
  CHECK_EQ_INT(count, 0);
  dlb_tensor_release(t);
  CHECK_EQ_INT(count, 1);
}

DLB_TEST(tensor_adopt_null_strides_and_null_deleter) {
  int count = 0;
  foreign *f = foreign_new(&count);
  f->m.dl_tensor.strides = NULL;
  f->m.deleter = NULL;
  DLManagedTensorVersioned *t = NULL;
  CHECK_OK(dlb_tensor_adopt(&f->m, &t));
  check_shape2(&t->dl_tensor, 2, 3, 3, 1);
  dlb_tensor_release(t);
  CHECK_EQ_INT(count, 0);
  free(f);
}

DLB_TEST(tensor_adopt_rejects_and_leaves_foreign_alone) {
  int count = 0;
  foreign *f = foreign_new(&count);
  DLManagedTensorVersioned *t = UNTOUCHED;
  CHECK_STATUS(dlb_tensor_adopt(NULL, &t), DLB_E_INVAL);
  CHECK_ERROR_MENTIONS("foreign");
  CHECK_STATUS(dlb_tensor_adopt(&f->m, NULL), DLB_E_INVAL);
  f->m.version.major = 2;
  CHECK_STATUS(dlb_tensor_adopt(&f->m, &t), DLB_E_VERSION);
  f->m.version.major = 1;
  f->m.flags = 1u << 7;
  CHECK_STATUS(dlb_tensor_adopt(&f->m, &t), DLB_E_INVAL);
  f->m.flags = 0;
  f->shape[0] = -2;
  CHECK_STATUS(dlb_tensor_adopt(&f->m, &t), DLB_E_LAYOUT);
  f->shape[0] = 2;
  CHECK(t == UNTOUCHED);
  CHECK_EQ_INT(count, 0);
  f->m.deleter(&f->m);
  CHECK_EQ_INT(count, 1);
}

DLB_TEST(tensor_adopt_of_ours_is_the_same_tensor) {
  int64_t shape[1] = {5};
  DLManagedTensorVersioned *t = NULL, *a = NULL;
  CHECK_OK(dlb_tensor_alloc(CPU, F32, 1, shape, &t));
  dlb_test_failalloc_install(0);
  CHECK_OK(dlb_tensor_adopt(t, &a));
  CHECK(a == t);
  CHECK_EQ_INT(dlb_test_failalloc_calls(), 0);
  dlb_test_failalloc_remove();
  dlb_tensor_release(a);
}

/* What a consumer that validated first gets: the same tensor as from
 * dlb_tensor_adopt, one allocation, the deleter called once; NULLs refused;
 * one of ours given back as it is. */
DLB_TEST(tensor_adopt_validated_matches_adopt) {
  int count = 0;
  foreign *f = foreign_new(&count);
  f->m.flags = DLPACK_FLAG_BITMASK_READ_ONLY;
  f->m.dl_tensor.device.device_type = kDLCUDAHost;
  f->m.dl_tensor.device.device_id = 2;
  CHECK_OK(dlb_managed_validate(&f->m));
  DLManagedTensorVersioned *t = UNTOUCHED;
  CHECK_STATUS(dlb_tensor_adopt_validated(NULL, &t), DLB_E_INVAL);
  CHECK_ERROR_MENTIONS("foreign");
  CHECK_STATUS(dlb_tensor_adopt_validated(&f->m, NULL), DLB_E_INVAL);
  CHECK_ERROR_MENTIONS("out");
  CHECK(t == UNTOUCHED);
  dlb_test_failalloc_install(0);
  CHECK_OK(dlb_tensor_adopt_validated(&f->m, &t));
  CHECK_EQ_INT(dlb_test_failalloc_calls(), 1);
  CHECK(t != &f->m && dlb_tensor_is_ours(t));
  CHECK_EQ_INT(t->flags, DLPACK_FLAG_BITMASK_READ_ONLY);
  CHECK(t->dl_tensor.data == f->data);
  check_shape2(&t->dl_tensor, 2, 3, 3, 1);
  CHECK_EQ_INT(t->dl_tensor.device.device_type, kDLCUDAHost);
  CHECK_EQ_INT(t->dl_tensor.device.device_id, 0);
  DLManagedTensorVersioned *again = NULL;
  CHECK_OK(dlb_tensor_adopt_validated(t, &again));
  CHECK(again == t);
  CHECK_EQ_INT(dlb_test_failalloc_calls(), 1);
  CHECK_EQ_INT(count, 0);
  dlb_tensor_release(t);
  CHECK_EQ_INT(count, 1);
  CHECK_EQ_INT(dlb_test_failalloc_live(), 0);
  dlb_test_failalloc_remove();
}

/* A released tensor's block serves this thread's next tensor (of up to 8
 * dimensions) under the default allocator; an installed allocator sees
 * every block come back. */
DLB_TEST(tensor_block_is_reused_by_the_next_tensor_on_the_thread) {
  int count = 0;
  DLManagedTensorVersioned *a = NULL, *b = NULL;
  foreign *f = foreign_new(&count);
  CHECK_OK(dlb_tensor_adopt(&f->m, &a));
  dlb_tensor_release(a);
  f = foreign_new(&count);
  CHECK_OK(dlb_tensor_adopt(&f->m, &b));
  CHECK(b == a);
  dlb_tensor_release(b);
  CHECK_EQ_INT(count, 2);
  dlb_test_failalloc_install(0);
  f = foreign_new(&count);
  CHECK_OK(dlb_tensor_adopt(&f->m, &a));
  CHECK_EQ_INT(dlb_test_failalloc_calls(), 1);
  dlb_tensor_release(a);
  CHECK_EQ_INT(dlb_test_failalloc_live(), 0);
  dlb_test_failalloc_remove();
  CHECK_EQ_INT(count, 3);
}

/* Wraps an ndim-dimensional view of buf (every extent 1). */
static DLManagedTensorVersioned *wrap_ones(int32_t ndim, int32_t *buf) {
  int64_t shape[9] = {1, 1, 1, 1, 1, 1, 1, 1, 1};
  DLTensor desc = {buf, CPU, ndim, I32, shape, NULL, 0};
  DLManagedTensorVersioned *t = NULL;
  CHECK(ndim <= 9);
  CHECK_OK(dlb_tensor_wrap(&desc, 0, NULL, NULL, &t));
  return t;
}

/* The kept block comes back whether or not malloc would have handed the
 * same address out again: blocks of about its size are taken from malloc
 * in between, so a block that was freed instead of kept goes to them.
 * Tensors of up to 8 dimensions share the spare; the first tensor of 8
 * dimensions made after one was released is made in its block. */
DLB_TEST(tensor_spare_block_is_kept_not_freed) {
  static int32_t buf[1];
  enum { FILLERS = 48 };
  for (int32_t ndim = 0; ndim <= 8; ndim += 4) {
    const int32_t next = ndim == 0 ? 8 : ndim;
    DLManagedTensorVersioned *a = wrap_ones(ndim, buf);
    dlb_tensor_release(a);
    void *filler[FILLERS];
    for (int i = 0; i < FILLERS; i++) {
      filler[i] = malloc(sizeof(dlb__tensor) + 16 * (size_t)i);
      CHECK(filler[i] != NULL);
    }
    DLManagedTensorVersioned *b = wrap_ones(next, buf);
    CHECK(b == a);
    CHECK_EQ_INT(b->dl_tensor.ndim, next);
    CHECK_EQ_INT(b->dl_tensor.shape[next - 1], 1);
    dlb_tensor_release(b);
    for (int i = 0; i < FILLERS; i++) free(filler[i]);
  }
  /* A tensor of 9 dimensions does not fit in the spare: a block of its
   * own, and the spare stays for the next small tensor. */
  DLManagedTensorVersioned *a = wrap_ones(2, buf);
  dlb_tensor_release(a);
  DLManagedTensorVersioned *big = wrap_ones(9, buf);
  CHECK(big != a);
  DLManagedTensorVersioned *b = wrap_ones(8, buf);
  CHECK(b == a);
  dlb_tensor_release(b);
  dlb_tensor_release(big);
}

static void *import_and_exit(void *arg) {
  int *count = arg;
  DLManagedTensorVersioned *t = NULL;
  foreign *f = foreign_new(count);
  CHECK_OK(dlb_tensor_adopt(&f->m, &t));
  dlb_tensor_release(t);
  return NULL;
}

/* A thread's spare block is freed when the thread exits (the leak check
 * of the sanitizer build sees it otherwise). */
DLB_TEST(tensor_spare_block_freed_at_thread_exit) {
  int count = 0;
  for (int i = 0; i < 4; i++) {
    pthread_t th;
    CHECK(pthread_create(&th, NULL, import_and_exit, &count) == 0);
    CHECK(pthread_join(th, NULL) == 0);
  }
  CHECK_EQ_INT(count, 4);
}

/* A tensor released by another thread-specific destructor after the one
 * that frees the thread's spare ran: its block is freed in the next round
 * of destructors, not kept as a spare nobody frees (the leak check of the
 * sanitizer build and valgrind see it otherwise). */
static pthread_key_t late_key;

/* Releases the tensor, then makes and releases another one. */
static void release_late(void *t) {
  dlb_tensor_release(t);
  static int32_t buf[1];
  int64_t shape[1] = {1};
  DLTensor desc = {buf, CPU, 1, I32, shape, NULL, 0};
  DLManagedTensorVersioned *u = NULL;
  CHECK_OK(dlb_tensor_wrap(&desc, 0, NULL, NULL, &u));
  dlb_tensor_release(u);
}

static void *release_in_a_late_destructor(void *arg) {
  int *count = arg;
  DLManagedTensorVersioned *t = NULL, *u = NULL;
  /* The thread has a spare when it exits (so its destructor has one to
   * free) and a tensor left to the late destructor. */
  foreign *f = foreign_new(count);
  CHECK_OK(dlb_tensor_adopt(&f->m, &t));
  f = foreign_new(count);
  CHECK_OK(dlb_tensor_adopt(&f->m, &u));
  dlb_tensor_release(t);
  CHECK(pthread_setspecific(late_key, u) == 0);
  return NULL;
}

DLB_TEST(tensor_spare_block_freed_after_late_destructors) {
  int count = 0;
  /* The spare's key first (a release registers it), then this test's, so
   * that this test's destructor runs after the spare's. */
  DLManagedTensorVersioned *t = NULL;
  foreign *f = foreign_new(&count);
  CHECK_OK(dlb_tensor_adopt(&f->m, &t));
  dlb_tensor_release(t);
  CHECK(pthread_key_create(&late_key, release_late) == 0);
  for (int i = 0; i < 4; i++) {
    pthread_t th;
    CHECK(pthread_create(&th, NULL, release_in_a_late_destructor, &count) ==
          0);
    CHECK(pthread_join(th, NULL) == 0);
  }
  CHECK_EQ_INT(count, 9);
}

/* ---- legacy ------------------------------------------------------------ */

DLB_TEST(tensor_from_legacy_calls_deleter_once) {
  int count = 0;
  foreign_legacy *f = foreign_legacy_new(&count);
  DLManagedTensorVersioned *t = NULL;
  CHECK_OK(dlb_tensor_from_legacy(&f->m, DLPACK_FLAG_BITMASK_READ_ONLY, &t));
  CHECK(dlb_tensor_is_ours(t));
  CHECK_EQ_INT(t->flags, DLPACK_FLAG_BITMASK_READ_ONLY);
  CHECK_EQ_INT(t->version.major, DLPACK_MAJOR_VERSION);
  CHECK(t->dl_tensor.data == f->data);
  check_shape2(&t->dl_tensor, 2, 3, 3, 1);
  CHECK_EQ_INT(count, 0);
  dlb_tensor_release(t);
  CHECK_EQ_INT(count, 1);
}

DLB_TEST(tensor_from_legacy_rejects_and_leaves_legacy_alone) {
  int count = 0;
  foreign_legacy *f = foreign_legacy_new(&count);
  DLManagedTensorVersioned *t = UNTOUCHED;
  CHECK_STATUS(dlb_tensor_from_legacy(NULL, 0, &t), DLB_E_INVAL);
  CHECK_ERROR_MENTIONS("legacy");
  CHECK_STATUS(dlb_tensor_from_legacy(&f->m, 0, NULL), DLB_E_INVAL);
  CHECK_STATUS(dlb_tensor_from_legacy(&f->m, 1u << 3, &t), DLB_E_INVAL);
  CHECK_ERROR_MENTIONS("flags");
  f->m.dl_tensor.dtype.code = 200;
  CHECK_STATUS(dlb_tensor_from_legacy(&f->m, 0, &t), DLB_E_DTYPE);
  CHECK(t == UNTOUCHED);
  CHECK_EQ_INT(count, 0);
  f->m.deleter(&f->m);
  CHECK_EQ_INT(count, 1);
}

DLB_TEST(tensor_to_legacy_releases_the_versioned_tensor) {
  int count = 0;
  foreign *f = foreign_new(&count);
  f->m.dl_tensor.device.device_type = kDLROCMHost;
  f->m.dl_tensor.device.device_id = 2;
  f->m.dl_tensor.byte_offset = 4;
  f->shape[0] = 1;
  f->m.dl_tensor.strides = NULL;
  DLManagedTensor *l = NULL;
  CHECK_OK(dlb_tensor_to_legacy(&f->m, &l));
  const DLTensor *dl = &l->dl_tensor;
  CHECK(dl->data == f->data);
  CHECK_EQ_INT(dl->byte_offset, 4);
  CHECK_EQ_INT(dl->dtype.code, kDLInt);
  CHECK_EQ_INT(dl->device.device_type, kDLROCMHost);
  CHECK_EQ_INT(dl->device.device_id, 0);
  /* NULL strides go out compact, as DLPack 1.2 requires of producers. */
  check_shape2(dl, 1, 3, 3, 1);
  CHECK(dl->shape != f->shape);
  CHECK_OK(dlb_tensor_validate(dl));
  CHECK_EQ_INT(count, 0);
  dlb_legacy_release(l);
  CHECK_EQ_INT(count, 1);
}

DLB_TEST(tensor_to_legacy_refuses_what_it_cannot_carry) {
  int count = 0;
  foreign *f = foreign_new(&count);
  DLManagedTensor *l = (DLManagedTensor *)(uintptr_t)0x5a5a;
  CHECK_STATUS(dlb_tensor_to_legacy(NULL, &l), DLB_E_INVAL);
  CHECK_ERROR_MENTIONS("t is NULL");
  CHECK_STATUS(dlb_tensor_to_legacy(&f->m, NULL), DLB_E_INVAL);
  CHECK_ERROR_MENTIONS("out is NULL");
  f->m.flags = DLPACK_FLAG_BITMASK_READ_ONLY;
  CHECK_STATUS(dlb_tensor_to_legacy(&f->m, &l), DLB_E_READONLY);
  CHECK_ERROR_MENTIONS("READ_ONLY");
  f->m.flags = DLPACK_FLAG_BITMASK_IS_SUBBYTE_TYPE_PADDED;
  f->m.dl_tensor.dtype.bits = 4;
  CHECK_STATUS(dlb_tensor_to_legacy(&f->m, &l), DLB_E_UNSUPPORTED);
  CHECK_ERROR_MENTIONS("PADDED");
  f->m.flags = 0;
  f->m.dl_tensor.dtype.bits = 32;
  f->m.version.major = 0;
  CHECK_STATUS(dlb_tensor_to_legacy(&f->m, &l), DLB_E_VERSION);
  CHECK(l == (DLManagedTensor *)(uintptr_t)0x5a5a);
  CHECK_EQ_INT(count, 0);
  f->m.deleter(&f->m);
  CHECK_EQ_INT(count, 1);
}

/* dlb_legacy_validate judges without taking: anyone's struct by its
 * tensor, one of ours also by the arrays made for it, as the import does. */
DLB_TEST(legacy_validate_bounds_ours_and_takes_nothing) {
  int count = 0;
  foreign_legacy *f = foreign_legacy_new(&count);
  CHECK_STATUS(dlb_legacy_validate(NULL), DLB_E_INVAL);
  CHECK_ERROR_MENTIONS("legacy tensor is NULL");
  CHECK_OK(dlb_legacy_validate(&f->m));
  f->shape[0] = -1;
  CHECK_STATUS(dlb_legacy_validate(&f->m), DLB_E_LAYOUT);
  CHECK_ERROR_MENTIONS("shape[0]");
  CHECK_EQ_INT(count, 0);
  f->m.deleter(&f->m);
  CHECK_EQ_INT(count, 1);

  int64_t shape[8] = {1, 1, 1, 1, 1, 1, 1, 1};
  DLManagedTensorVersioned *t = NULL;
  CHECK_OK(dlb_tensor_alloc(CPU, F32, 8, shape, &t));
  DLManagedTensor *l = NULL;
  CHECK_OK(dlb_tensor_to_legacy(t, &l));
  CHECK_OK(dlb_legacy_validate(l));
  /* Nine dimensions would read past the eight shape and stride entries,
   * where a foreign struct's arrays are its producer's word. */
  l->dl_tensor.ndim = 9;
  CHECK_STATUS(dlb_legacy_validate(l), DLB_E_LAYOUT);
  CHECK_ERROR_MENTIONS("ndim is 9, but");
  l->dl_tensor.ndim = 8;
  l->dl_tensor.dtype.bits = 0;
  CHECK_STATUS(dlb_legacy_validate(l), DLB_E_DTYPE);
  l->dl_tensor.dtype.bits = 32;
  /* Untaken: it still converts back to the tensor it came from. */
  DLManagedTensorVersioned *back = NULL;
  CHECK_OK(dlb_tensor_from_legacy(l, 0, &back));
  CHECK(back == t);
  dlb_tensor_release(back);
}

DLB_TEST(tensor_to_legacy_keeps_padding_flag_of_byte_types) {
  /* PADDED means nothing for byte-sized elements, so nothing is lost. */
  int count = 0;
  foreign *f = foreign_new(&count);
  f->m.flags = DLPACK_FLAG_BITMASK_IS_SUBBYTE_TYPE_PADDED |
               DLPACK_FLAG_BITMASK_IS_COPIED;
  DLManagedTensor *l = NULL;
  CHECK_OK(dlb_tensor_to_legacy(&f->m, &l));
  CHECK(l != NULL);
  CHECK(l->dl_tensor.data == f->data);
  CHECK_EQ_INT(l->dl_tensor.dtype.bits, 32);
  CHECK_EQ_INT(count, 0);
  dlb_legacy_release(l);
  CHECK_EQ_INT(count, 1);
}

DLB_TEST(tensor_legacy_round_trip_of_ours_unwraps) {
  dlb_test_failalloc_install(0);
  int64_t shape[2] = {2, 2};
  DLManagedTensorVersioned *t = NULL, *back = NULL;
  CHECK_OK(dlb_tensor_alloc(CPU, F32, 2, shape, &t));
  DLManagedTensor *l = NULL;
  CHECK_OK(dlb_tensor_to_legacy(t, &l));
  CHECK(l->dl_tensor.data == t->dl_tensor.data);
  long live = dlb_test_failalloc_live();
  CHECK_OK(dlb_tensor_from_legacy(l, DLPACK_FLAG_BITMASK_IS_COPIED, &back));
  /* The wrapper is gone and the tensor comes back, with the new flags. */
  CHECK(back == t);
  CHECK_EQ_INT(back->flags, DLPACK_FLAG_BITMASK_IS_COPIED);
  CHECK_EQ_INT(dlb_test_failalloc_live(), live - 1);
  dlb_tensor_release(back);
  CHECK_EQ_INT(dlb_test_failalloc_live(), 0);
  dlb_test_failalloc_remove();
}

/* Our legacy struct of packed sub-byte units cannot come back as padded:
 * the padding would claim twice the bytes there are. It is refused and
 * left as it was; packed, it comes back. */
DLB_TEST(tensor_legacy_round_trip_of_ours_refuses_padding_it_lacks) {
  int64_t shape[1] = {4096};
  const DLDataType u4 = {kDLUInt, 4, 1};
  DLManagedTensorVersioned *t = NULL, *back = NULL;
  CHECK_OK(dlb_tensor_alloc(CPU, u4, 1, shape, &t));
  DLManagedTensor *l = NULL;
  CHECK_OK(dlb_tensor_to_legacy(t, &l));
  back = (DLManagedTensorVersioned *)(uintptr_t)1;
  CHECK_STATUS(dlb_tensor_from_legacy(
                   l, DLPACK_FLAG_BITMASK_IS_SUBBYTE_TYPE_PADDED, &back),
               DLB_E_LAYOUT);
  CHECK_ERROR_MENTIONS("IS_SUBBYTE_TYPE_PADDED");
  CHECK_ERROR_MENTIONS("4-bit units are packed");
  CHECK(back == (DLManagedTensorVersioned *)(uintptr_t)1);
  CHECK(dlb_legacy_is_ours(l));
  CHECK_EQ_INT(t->flags, 0);
  /* Rewritten (one unit fewer, or another sub-byte type), the units are
   * still packed: 4095 padded units would claim 4095 of 2048 bytes. */
  l->dl_tensor.shape[0] = 4095;
  CHECK_STATUS(dlb_tensor_from_legacy(
                   l, DLPACK_FLAG_BITMASK_IS_SUBBYTE_TYPE_PADDED, &back),
               DLB_E_LAYOUT);
  CHECK_ERROR_MENTIONS("4-bit units are packed");
  l->dl_tensor.dtype.bits = 2;
  CHECK_STATUS(dlb_tensor_from_legacy(
                   l, DLPACK_FLAG_BITMASK_IS_SUBBYTE_TYPE_PADDED, &back),
               DLB_E_LAYOUT);
  CHECK_ERROR_MENTIONS("2-bit units are packed");
  CHECK(back == (DLManagedTensorVersioned *)(uintptr_t)1);
  l->dl_tensor.dtype = u4;
  l->dl_tensor.shape[0] = 4096;
  CHECK_OK(dlb_tensor_from_legacy(l, DLPACK_FLAG_BITMASK_READ_ONLY, &back));
  CHECK(back == t);
  CHECK_EQ_INT(back->flags, DLPACK_FLAG_BITMASK_READ_ONLY);
  dlb_tensor_release(back);
}

/* A tensor whose strides were set to NULL (compact, as DLPack allows)
 * after it went out as a legacy struct: the struct is compared with it
 * without reading through the NULL, and comes back as what it says. */
DLB_TEST(tensor_legacy_round_trip_of_ours_with_strides_cleared) {
  int64_t shape[2] = {2, 3};
  DLManagedTensorVersioned *t = NULL, *back = NULL;
  CHECK_OK(dlb_tensor_alloc(CPU, F32, 2, shape, &t));
  float *data = t->dl_tensor.data;
  for (int i = 0; i < 6; i++) data[i] = (float)i;
  DLManagedTensor *l = NULL;
  CHECK_OK(dlb_tensor_to_legacy(t, &l));
  t->dl_tensor.strides = NULL;
  CHECK_OK(dlb_tensor_from_legacy(l, 0, &back));
  CHECK(back->dl_tensor.data == data);
  check_shape2(&back->dl_tensor, 2, 3, 3, 1);
  dlb_tensor_release(back);
}

/* A scalar has no shape or strides to compare: its legacy struct with
 * both set to NULL (which ndim 0 allows) still describes the tensor, and
 * unwraps to it. */
DLB_TEST(tensor_legacy_round_trip_of_ours_scalar_without_arrays) {
  DLManagedTensorVersioned *t = NULL, *back = NULL;
  CHECK_OK(dlb_tensor_alloc(CPU, F32, 0, NULL, &t));
  DLManagedTensor *l = NULL;
  CHECK_OK(dlb_tensor_to_legacy(t, &l));
  l->dl_tensor.shape = NULL;
  l->dl_tensor.strides = NULL;
  CHECK_OK(dlb_tensor_from_legacy(l, DLPACK_FLAG_BITMASK_IS_COPIED, &back));
  CHECK(back == t);
  CHECK_EQ_INT(back->flags, DLPACK_FLAG_BITMASK_IS_COPIED);
  dlb_tensor_release(back);
}

/* A dlbridge tensor whose ndim was raised after it was made: validation
 * refuses it before reading past its own shape and strides; pointed at
 * arrays of the caller's, the same ndim is judged as any tensor. */
DLB_TEST(tensor_validate_refuses_ndim_past_its_own_arrays) {
  int64_t shape[2] = {2, 3};
  DLManagedTensorVersioned *t = NULL;
  CHECK_OK(dlb_tensor_alloc(CPU, F32, 2, shape, &t));
  t->dl_tensor.ndim = 40;
  CHECK_STATUS(dlb_managed_validate(t), DLB_E_LAYOUT);
  CHECK_ERROR_MENTIONS("ndim is 40, but the shape and strides of this "
                       "dlbridge tensor run past the 4 entries made for "
                       "them");
  DLManagedTensorVersioned *s = (DLManagedTensorVersioned *)(uintptr_t)1;
  CHECK_STATUS(dlb_tensor_share(t, &s), DLB_E_LAYOUT);
  CHECK(s == (DLManagedTensorVersioned *)(uintptr_t)1);
  int64_t ones[40], steps[40];
  for (int i = 0; i < 40; i++) ones[i] = 1, steps[i] = 1;
  int64_t *own_shape = t->dl_tensor.shape, *own_strides = t->dl_tensor.strides;
  t->dl_tensor.shape = ones;
  t->dl_tensor.strides = steps;
  CHECK_OK(dlb_managed_validate(t));
  t->dl_tensor.shape = own_shape;
  CHECK_STATUS(dlb_managed_validate(t), DLB_E_LAYOUT);
  t->dl_tensor.shape = ones;
  t->dl_tensor.strides = own_strides;
  CHECK_STATUS(dlb_managed_validate(t), DLB_E_LAYOUT);
  /* A pointer elsewhere in the block, or between its entries, is not
   * taken either. */
  t->dl_tensor.ndim = 2;
  t->dl_tensor.strides = own_strides;
  t->dl_tensor.shape = (int64_t *)(void *)t;
  CHECK_STATUS(dlb_managed_validate(t), DLB_E_LAYOUT);
  t->dl_tensor.shape = (int64_t *)(void *)((char *)own_shape + 4);
  CHECK_STATUS(dlb_managed_validate(t), DLB_E_LAYOUT);
  t->dl_tensor.shape = own_shape;
  CHECK_OK(dlb_managed_validate(t));
  dlb_tensor_release(t);
}

/* The room a block has past the entries made for its tensor's shape and
 * strides (a tensor of fewer dimensions than the block was made for, or a
 * 0-dimensional one) holds nothing of this tensor's: an ndim raised into
 * it is refused, not read from whatever an earlier tensor left there. */
DLB_TEST(tensor_validate_refuses_ndim_raised_into_the_spare_room) {
  int64_t shape[2] = {2, 3};
  DLManagedTensorVersioned *t = NULL;
  CHECK_OK(dlb_tensor_alloc(CPU, F32, 2, shape, &t));
  CHECK(dlb__tensor_of(t)->dims_room > 3);
  t->dl_tensor.ndim = 3;
  CHECK_STATUS(dlb_managed_validate(t), DLB_E_LAYOUT);
  CHECK_ERROR_MENTIONS("ndim is 3, but the shape and strides of this "
                       "dlbridge tensor run past the 4 entries");
  /* Pointed past its entries, into the room, as well. */
  t->dl_tensor.ndim = 2;
  t->dl_tensor.strides += 2;
  CHECK_STATUS(dlb_managed_validate(t), DLB_E_LAYOUT);
  t->dl_tensor.strides -= 2;
  CHECK_OK(dlb_managed_validate(t));
  dlb_tensor_release(t);
  CHECK_OK(dlb_tensor_alloc(CPU, F32, 0, NULL, &t));
  t->dl_tensor.ndim = 1;
  CHECK_STATUS(dlb_managed_validate(t), DLB_E_LAYOUT);
  CHECK_ERROR_MENTIONS("run past the 0 entries");
  t->dl_tensor.ndim = 0;
  CHECK_OK(dlb_managed_validate(t));
  dlb_tensor_release(t);
}

/* The bound holds from one dimension up to DLB_MAX_NDIM, the most a
 * tensor may have; past that, validation refuses ndim itself. A scalar
 * reads neither array, so its pointers may be moved anywhere, its own
 * block included. */
DLB_TEST(tensor_validate_bounds_its_arrays_for_every_ndim) {
  int64_t shape[1] = {5};
  DLManagedTensorVersioned *t = NULL, *s = NULL;
  CHECK_OK(dlb_tensor_alloc(CPU, F32, 1, shape, &t));
  int64_t *own_shape = t->dl_tensor.shape;
  t->dl_tensor.shape = (int64_t *)(void *)((char *)own_shape + 4);
  CHECK_STATUS(dlb_managed_validate(t), DLB_E_LAYOUT);
  CHECK_ERROR_MENTIONS("ndim is 1, but the shape and strides of this "
                       "dlbridge tensor run past");
  t->dl_tensor.shape = own_shape;
  t->dl_tensor.ndim = DLB_MAX_NDIM;
  CHECK_STATUS(dlb_managed_validate(t), DLB_E_LAYOUT);
  CHECK_ERROR_MENTIONS("run past the 2 entries");
  t->dl_tensor.ndim = DLB_MAX_NDIM + 1;
  CHECK_STATUS(dlb_managed_validate(t), DLB_E_LAYOUT);
  CHECK_ERROR_MENTIONS("at most 64");
  t->dl_tensor.ndim = 1;
  CHECK_OK(dlb_managed_validate(t));
  dlb_tensor_release(t);

  CHECK_OK(dlb_tensor_alloc(CPU, F32, 0, NULL, &t));
  t->dl_tensor.shape = (int64_t *)(void *)t;
  t->dl_tensor.strides = (int64_t *)(void *)((char *)t + 3);
  CHECK_OK(dlb_managed_validate(t));
  CHECK_OK(dlb_tensor_share(t, &s));
  CHECK_EQ_INT(s->dl_tensor.ndim, 0);
  dlb_tensor_release(s);
  dlb_tensor_release(t);
}

/* An allocator that remembers the blocks it handed out (the last few). */
#define RECORDED 16
static struct {
  char *p;
  size_t size;
} recorded[RECORDED];
static int nrecorded;
static void *record_alloc(void *ctx, size_t size, size_t alignment) {
  (void)ctx;
  void *p = NULL;
  if (posix_memalign(&p, alignment, size) != 0) return NULL;
  recorded[nrecorded % RECORDED].p = p;
  recorded[nrecorded % RECORDED].size = size;
  nrecorded++;
  return p;
}
static void record_free(void *ctx, void *p, size_t size, size_t alignment) {
  (void)ctx, (void)size, (void)alignment;
  free(p);
}

/* The bytes of the recorded block holding p from p on, or 0. */
static size_t recorded_bytes_from(const void *p) {
  const char *c = p;
  for (int i = 0; i < RECORDED && i < nrecorded; i++)
    if (c >= recorded[i].p && c < recorded[i].p + recorded[i].size)
      return (size_t)(recorded[i].p + recorded[i].size - c);
  return 0;
}

/* An empty CPU tensor still gets one byte of data, zeroed, inside the
 * allocation it came from. */
DLB_TEST(tensor_alloc_empty_gets_one_byte) {
  const dlb_allocator record = {record_alloc, record_free, NULL};
  CHECK_OK(dlb_set_allocator(&record));
  int64_t shape[2] = {0, 3};
  DLManagedTensorVersioned *t = NULL;
  CHECK_OK(dlb_tensor_alloc(CPU, F32, 2, shape, &t));
  CHECK(t->dl_tensor.data != NULL);
  CHECK(recorded_bytes_from(t->dl_tensor.data) >= 1);
  CHECK_EQ_INT(*(const unsigned char *)t->dl_tensor.data, 0);
  dlb_tensor_release(t);
  CHECK_OK(dlb_set_allocator(NULL));
}

/* A foreign tensor that carries dlbridge's deleter but no block of ours
 * (manager_ctx NULL) is not ours, and is validated as any foreign one. */
DLB_TEST(tensor_validate_our_deleter_without_a_block) {
  int64_t shape[2] = {2, 3};
  float data[6] = {0};
  DLManagedTensorVersioned m;
  memset(&m, 0, sizeof m);
  m.version.major = DLPACK_MAJOR_VERSION;
  m.version.minor = DLPACK_MINOR_VERSION;
  m.deleter = dlb__tensor_deleter;
  m.manager_ctx = NULL;
  m.dl_tensor.data = data;
  m.dl_tensor.device = CPU;
  m.dl_tensor.ndim = 2;
  m.dl_tensor.dtype = F32;
  m.dl_tensor.shape = shape;
  CHECK(!dlb_tensor_is_ours(&m));
  CHECK_OK(dlb_managed_validate(&m));
  m.dl_tensor.ndim = -1;
  CHECK_STATUS(dlb_managed_validate(&m), DLB_E_LAYOUT);
}

/* An allocator whose every allocation has room to spare past its end, so
 * a test may place arrays of its own right after a block. */
#define SLACK_BYTES 256
static void *slack_alloc(void *ctx, size_t size, size_t alignment) {
  (void)ctx;
  void *p = NULL;
  if (posix_memalign(&p, alignment, size + SLACK_BYTES) != 0) return NULL;
  return p;
}
static void slack_free(void *ctx, void *p, size_t size, size_t alignment) {
  (void)ctx, (void)size, (void)alignment;
  free(p);
}

/* Arrays that start exactly where a tensor's block ends are not in it, so
 * they are not bounded by its entries: such a tensor is judged as any
 * other. */
DLB_TEST(tensor_validate_takes_arrays_just_past_its_block) {
  const dlb_allocator slack = {slack_alloc, slack_free, NULL};
  CHECK_OK(dlb_set_allocator(&slack));
  int64_t shape[2] = {2, 3};
  DLManagedTensorVersioned *t = NULL;
  CHECK_OK(dlb_tensor_alloc(CPU, F32, 2, shape, &t));
  const dlb__tensor *block = dlb__tensor_of(t);
  CHECK(block != NULL);
  int64_t *end = (int64_t *)block->dims + 2 * (size_t)block->dims_room;
  CHECK((size_t)((char *)(end + 4) - (char *)block) <=
        sizeof *block + 2 * (size_t)block->dims_room * sizeof(int64_t) +
            SLACK_BYTES);
  end[0] = 2, end[1] = 3, end[2] = 3, end[3] = 1;
  int64_t *own_shape = t->dl_tensor.shape, *own_strides = t->dl_tensor.strides;
  t->dl_tensor.shape = end;
  CHECK_OK(dlb_managed_validate(t));
  t->dl_tensor.shape = own_shape;
  t->dl_tensor.strides = end + 2;
  CHECK_OK(dlb_managed_validate(t));
  /* One entry earlier is the block's last entry: two do not fit there. */
  t->dl_tensor.strides = end - 1;
  CHECK_STATUS(dlb_managed_validate(t), DLB_E_LAYOUT);
  t->dl_tensor.strides = own_strides;
  dlb_tensor_release(t);
  CHECK_OK(dlb_set_allocator(NULL));
}

/* The same for the legacy struct dlbridge made: a raised ndim is refused
 * before anything reads past its block, and the struct stays the
 * caller's. */
DLB_TEST(tensor_from_legacy_refuses_ndim_past_its_own_arrays) {
  /* A 0-dimensional tensor's struct has no entries: its arrays start where
   * its block ends. */
  for (int32_t ndim = 0; ndim <= 2; ndim += 2) {
    int64_t shape[2] = {3, 4};
    DLManagedTensorVersioned *t = NULL, *back = NULL;
    CHECK_OK(dlb_tensor_alloc(CPU, F32, ndim, shape, &t));
    DLManagedTensor *l = NULL;
    CHECK_OK(dlb_tensor_to_legacy(t, &l));
    CHECK(l->dl_tensor.shape != NULL);
    l->dl_tensor.ndim = ndim + 1;
    char says[128];
    snprintf(says, sizeof says, "ndim is %d, but the shape and strides of "
             "this legacy tensor run past the %d entries", (int)ndim + 1,
             2 * (int)ndim);
    CHECK_STATUS(dlb_legacy_validate(l), DLB_E_LAYOUT);
    CHECK_ERROR_MENTIONS(says);
    CHECK_STATUS(dlb_tensor_from_legacy(l, 0, &back), DLB_E_LAYOUT);
    CHECK_ERROR_MENTIONS(says);
    CHECK(back == NULL);
    l->dl_tensor.ndim = ndim;
    CHECK_OK(dlb_tensor_from_legacy(l, 0, &back));
    CHECK(back == t);
    dlb_tensor_release(back);
  }
}

DLB_TEST(tensor_legacy_round_trip_of_foreign) {
  int count = 0;
  foreign *f = foreign_new(&count);
  DLManagedTensor *l = NULL;
  CHECK_OK(dlb_tensor_to_legacy(&f->m, &l));
  DLManagedTensorVersioned *back = NULL;
  CHECK_OK(dlb_tensor_from_legacy(l, 0, &back));
  CHECK(dlb_tensor_is_ours(back));
  CHECK(back->dl_tensor.data == f->data);
  check_shape2(&back->dl_tensor, 2, 3, 3, 1);
  /* And once more through the legacy struct. */
  DLManagedTensor *l2 = NULL;
  CHECK_OK(dlb_tensor_to_legacy(back, &l2));
  CHECK_EQ_INT(((int32_t *)l2->dl_tensor.data)[4], 4);
  CHECK_EQ_INT(count, 0);
  dlb_legacy_release(l2);
  CHECK_EQ_INT(count, 1);
}

/* A consumer that rewrites our legacy struct (a view of its own) and hands
 * it back, many times over: each result shares the first tensor's owner, so
 * nothing nests, memory stays flat and the last release frees the data
 * once, without recursing through a chain of deleters. */
/* A legacy struct of ours in which a consumer rewrote a single field comes
 * back as what the struct now says, whichever field that was, and still
 * releases the data once. */
DLB_TEST(tensor_legacy_rewritten_in_one_field_comes_back_as_rewritten) {
  static int32_t buf[12];
  int64_t shape[2] = {2, 3};
  DLTensor desc = {buf, CPU, 2, I32, shape, NULL, 0};
  for (int field = 0; field < 5; field++) {
    int count = 0;
    DLManagedTensorVersioned *t = NULL, *back = NULL;
    CHECK_OK(dlb_tensor_wrap(&desc, 0, count_release, &count, &t));
    DLManagedTensor *l = NULL;
    CHECK_OK(dlb_tensor_to_legacy(t, &l));
    DLTensor *dl = &l->dl_tensor;
    int64_t want_shape[2] = {2, 3}, want_strides[2] = {3, 1};
    switch (field) {
      case 0:
        dl->data = buf + 6;
        break;
      case 1:
        dl->byte_offset = 24;
        break;
      case 2:
        dl->dtype = F32;
        break;
      case 3: /* compact, as before, but said by NULL */
        dl->strides = NULL;
        break;
      default:
        dl->ndim = 1;
        break;
    }
    const DLTensor want = *dl;
    CHECK_OK(dlb_tensor_from_legacy(l, 0, &back));
    const DLTensor *got = &back->dl_tensor;
    CHECK(got->data == want.data);
    CHECK_EQ_INT(got->byte_offset, want.byte_offset);
    CHECK(dlb_dtype_equal(got->dtype, want.dtype));
    CHECK_EQ_INT(got->ndim, want.ndim);
    for (int32_t d = 0; d < want.ndim; d++) {
      CHECK_EQ_INT(got->shape[d], want_shape[d]);
      CHECK_EQ_INT(got->strides[d], want_strides[d]);
    }
    dlb_tensor_release(back);
    CHECK_EQ_INT(count, 1);
  }
  /* One dimension, its stride cleared to NULL. */
  int count = 0;
  int64_t n[1] = {6};
  DLTensor flat = {buf, CPU, 1, I32, n, NULL, 0};
  DLManagedTensorVersioned *t = NULL, *back = NULL;
  CHECK_OK(dlb_tensor_wrap(&flat, 0, count_release, &count, &t));
  DLManagedTensor *l = NULL;
  CHECK_OK(dlb_tensor_to_legacy(t, &l));
  l->dl_tensor.strides = NULL;
  CHECK_OK(dlb_tensor_from_legacy(l, 0, &back));
  CHECK_EQ_INT(back->dl_tensor.shape[0], 6);
  CHECK_EQ_INT(back->dl_tensor.strides[0], 1);
  dlb_tensor_release(back);
  CHECK_EQ_INT(count, 1);
}

DLB_TEST(tensor_legacy_rewritten_round_trips_share_the_owner) {
  static int32_t buf[6];
  int64_t shape[2] = {2, 3};
  DLTensor desc = {buf, CPU, 2, I32, shape, NULL, 0};
  int count = 0;
  DLManagedTensorVersioned *t = NULL;
  CHECK_OK(dlb_tensor_wrap(&desc, 0, count_release, &count, &t));
  const dlb__owner *owner = dlb__tensor_of(t)->owner;
  DLManagedTensorVersioned *x = NULL;
  CHECK_OK(dlb_tensor_share(t, &x));
  for (int i = 0; i < 200000; i++) {
    DLManagedTensor *l = NULL;
    CHECK_OK(dlb_tensor_to_legacy(x, &l));
    CHECK(dlb_legacy_is_ours(l));
    /* Row i % 4 / 2 of the 2x3 data as a 1x3 tensor, then the whole
     * again, alternately (two dimensions each: the struct has room for
     * two). */
    l->dl_tensor.shape[0] = i % 2 == 0 ? 1 : 2;
    l->dl_tensor.byte_offset = i % 2 == 0 ? (uint64_t)(i % 4 / 2) * 12 : 0;
    DLManagedTensorVersioned *back = NULL;
    CHECK_OK(dlb_tensor_from_legacy(l, DLPACK_FLAG_BITMASK_READ_ONLY, &back));
    CHECK(dlb_tensor_is_ours(back));
    CHECK(dlb__tensor_of(back)->owner == owner);
    CHECK_EQ_INT(back->flags, DLPACK_FLAG_BITMASK_READ_ONLY);
    CHECK_EQ_INT(back->dl_tensor.shape[0], i % 2 == 0 ? 1 : 2);
    CHECK_EQ_INT(back->dl_tensor.byte_offset, i % 2 == 0 ? i % 4 / 2 * 12 : 0);
    back->flags = 0;
    x = back;
  }
  /* The owner's references: t and x, nothing else. */
  CHECK_EQ_INT(atomic_load(&dlb__tensor_of(t)->owner->refs), 2);
  dlb_tensor_release(t);
  CHECK_EQ_INT(count, 0);
  dlb_tensor_release(x);
  CHECK_EQ_INT(count, 1);
}

DLB_TEST(tensor_redescribe_shares_the_owner) {
  static int32_t buf[6];
  int64_t shape[2] = {2, 3};
  DLTensor desc = {buf, CPU, 2, I32, shape, NULL, 0};
  int count = 0;
  DLManagedTensorVersioned *t = NULL, *r = NULL;
  CHECK_OK(dlb_tensor_wrap(&desc, 0, count_release, &count, &t));
  int64_t row_shape[1] = {3}, row_strides[1] = {1};
  DLTensor row = {buf, CPU, 1, I32, row_shape, row_strides, 12};
  CHECK_OK(dlb_tensor_redescribe(t, &row, DLPACK_FLAG_BITMASK_READ_ONLY, &r));
  CHECK(dlb__tensor_of(r)->owner == dlb__tensor_of(t)->owner);
  CHECK(r->dl_tensor.shape != row_shape && r->dl_tensor.shape[0] == 3);
  CHECK_EQ_INT(r->dl_tensor.byte_offset, 12);
  CHECK_EQ_INT(r->flags, DLPACK_FLAG_BITMASK_READ_ONLY);
  dlb_tensor_release(t);
  CHECK_EQ_INT(count, 0);
  /* Refusals leave nothing behind and name what is wrong. */
  DLManagedTensorVersioned *bad = r;
  row.ndim = -1;
  CHECK_STATUS(dlb_tensor_redescribe(r, &row, 0, &bad), DLB_E_LAYOUT);
  CHECK(bad == r);
  row.ndim = 1;
  CHECK_STATUS(dlb_tensor_redescribe(r, NULL, 0, &bad), DLB_E_INVAL);
  CHECK_STATUS(dlb_tensor_redescribe(r, &row, 0, NULL), DLB_E_INVAL);
  CHECK_STATUS(dlb_tensor_redescribe(NULL, &row, 0, &bad), DLB_E_INVAL);
  int other = 0;
  foreign *f = foreign_new(&other);
  CHECK_STATUS(dlb_tensor_redescribe(&f->m, &row, 0, &bad), DLB_E_INVAL);
  CHECK(strstr(dlb_last_error(), "not a dlbridge tensor") != NULL);
  f->m.deleter(&f->m);
  dlb_tensor_release(r);
  CHECK_EQ_INT(count, 1);
}

DLB_TEST(tensor_legacy_is_ours) {
  int count = 0;
  CHECK(!dlb_legacy_is_ours(NULL));
  foreign *f = foreign_new(&count);
  DLManagedTensor *l = NULL;
  /* A legacy struct around a foreign tensor is not ours to unwrap. */
  CHECK_OK(dlb_tensor_to_legacy(&f->m, &l));
  CHECK(!dlb_legacy_is_ours(l));
  dlb_legacy_release(l);
  CHECK_EQ_INT(count, 1);
  int64_t shape[1] = {4};
  DLManagedTensorVersioned *t = NULL;
  CHECK_OK(dlb_tensor_alloc(CPU, I32, 1, shape, &t));
  CHECK_OK(dlb_tensor_to_legacy(t, &l));
  CHECK(dlb_legacy_is_ours(l));
  DLManagedTensor copy = *l;
  copy.deleter = NULL;
  CHECK(!dlb_legacy_is_ours(&copy));
  dlb_legacy_release(l);
}

/* ---- share, release ---------------------------------------------------- */

DLB_TEST(tensor_share_keeps_data_until_both_are_released) {
  static int32_t buf[6];
  int64_t shape[2] = {2, 3};
  DLTensor desc = {buf, CPU, 2, I32, shape, NULL, 8};
  for (int order = 0; order < 2; order++) {
    int count = 0;
    DLManagedTensorVersioned *t = NULL, *s = NULL;
    CHECK_OK(dlb_tensor_wrap(&desc, DLPACK_FLAG_BITMASK_IS_COPIED,
                             count_release, &count, &t));
    CHECK_OK(dlb_tensor_share(t, &s));
    CHECK(s != t);
    CHECK(dlb_tensor_is_ours(s));
    CHECK(s->dl_tensor.data == buf);
    CHECK(s->dl_tensor.shape != t->dl_tensor.shape);
    CHECK_EQ_INT(s->dl_tensor.byte_offset, 8);
    CHECK_EQ_INT(s->flags, DLPACK_FLAG_BITMASK_IS_COPIED);
    check_shape2(&s->dl_tensor, 2, 3, 3, 1);
    dlb_tensor_release(order ? s : t);
    CHECK_EQ_INT(count, 0);
    dlb_tensor_release(order ? t : s);
    CHECK_EQ_INT(count, 1);
  }
}

DLB_TEST(tensor_share_rejects_foreign) {
  int count = 0;
  foreign *f = foreign_new(&count);
  DLManagedTensorVersioned *s = UNTOUCHED;
  CHECK_STATUS(dlb_tensor_share(&f->m, &s), DLB_E_INVAL);
  CHECK_ERROR_MENTIONS("adopt");
  CHECK_STATUS(dlb_tensor_share(NULL, &s), DLB_E_INVAL);
  CHECK_ERROR_MENTIONS("t is NULL");
  CHECK(s == UNTOUCHED);
  DLManagedTensorVersioned *t = NULL;
  CHECK_OK(dlb_tensor_adopt(&f->m, &t));
  CHECK_STATUS(dlb_tensor_share(t, NULL), DLB_E_INVAL);
  dlb_tensor_release(t);
  CHECK_EQ_INT(count, 1);
}

DLB_TEST(tensor_is_ours_and_release_accept_anything) {
  int count = 0;
  foreign *f = foreign_new(&count);
  CHECK(!dlb_tensor_is_ours(NULL));
  CHECK(!dlb_tensor_is_ours(&f->m));
  dlb_tensor_release(NULL);
  dlb_legacy_release(NULL);
  f->m.deleter = NULL;
  dlb_tensor_release(&f->m);
  CHECK_EQ_INT(count, 0);
  f->m.deleter = foreign_deleter;
  dlb_tensor_release(&f->m);
  CHECK_EQ_INT(count, 1);
}

/* Threads make and release shares of one tensor at once, and the last
 * reference goes on whichever thread drops it last: the owner must count
 * every reference and free exactly once. */
#define SHARE_THREADS 4
#define SHARES_PER_THREAD 2000

typedef struct share_job {
  DLManagedTensorVersioned *held[SHARES_PER_THREAD];
  int ok;
} share_job;

static void *share_worker(void *arg) {
  share_job *job = arg;
  job->ok = 1;
  /* held[0] is this thread's own reference, alive while it shares it. */
  for (int i = 0; i < SHARES_PER_THREAD; i++) {
    DLManagedTensorVersioned *s = NULL;
    if (dlb_tensor_share(job->held[0], &s) != DLB_OK) job->ok = 0;
    dlb_tensor_release(s);
  }
  for (int i = SHARES_PER_THREAD - 1; i >= 0; i--)
    dlb_tensor_release(job->held[i]);
  return NULL;
}

DLB_TEST(tensor_shares_released_on_many_threads) {
  static int32_t buf[4];
  int64_t shape[1] = {4};
  DLTensor desc = {buf, CPU, 1, I32, shape, NULL, 0};
  int count = 0;
  DLManagedTensorVersioned *t = NULL;
  CHECK_OK(dlb_tensor_wrap(&desc, 0, count_release, &count, &t));
  static share_job jobs[SHARE_THREADS];
  pthread_t th[SHARE_THREADS];
  for (int k = 0; k < SHARE_THREADS; k++)
    for (int i = 0; i < SHARES_PER_THREAD; i++)
      CHECK_OK(dlb_tensor_share(t, &jobs[k].held[i]));
  CHECK_EQ_INT(atomic_load(&dlb__tensor_of(t)->owner->refs),
               1 + SHARE_THREADS * SHARES_PER_THREAD);
  for (int k = 0; k < SHARE_THREADS; k++)
    CHECK_EQ_INT(pthread_create(&th[k], NULL, share_worker, &jobs[k]), 0);
  dlb_tensor_release(t);
  for (int k = 0; k < SHARE_THREADS; k++) {
    CHECK_EQ_INT(pthread_join(th[k], NULL), 0);
    CHECK(jobs[k].ok);
  }
  CHECK_EQ_INT(count, 1);
}
