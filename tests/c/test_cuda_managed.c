/* test_cuda_managed.c -- prefetching managed memory to a GPU or the host,
 * and memory advice. */
#include "../emu/emu_fns.h"
#include "test.h"

static const DLDataType f32 = {kDLFloat, 32, 1};
static const DLDevice cpu = {kDLCPU, 0};

static DLManagedTensorVersioned *managed(int64_t n) {
  int64_t shape[1] = {n};
  DLManagedTensorVersioned *t = NULL;
  CHECK_OK(dlb_tensor_alloc((DLDevice){kDLCUDAManaged, 0}, f32, 1, shape, &t));
  return t;
}

DLB_TEST(cuda_managed_prefetch_to_gpu_and_host) {
  emu e = emu_cuda();
  DLManagedTensorVersioned *t = managed(1000);
  void *p = t->dl_tensor.data;
  CHECK_EQ_INT(e.prefetch_location(p), EMU_NO_PREFETCH);
  CHECK_OK(dlb_managed_prefetch(&t->dl_tensor, (DLDevice){kDLCUDA, 1}, NULL));
  CHECK_EQ_INT(e.prefetch_location(p), 1);
  CHECK_OK(dlb_managed_prefetch(&t->dl_tensor, cpu, NULL));
  CHECK_EQ_INT(e.prefetch_location(p), -1);
  /* CuPy labels managed memory cuda:N; what counts is the memory. */
  DLTensor cupy = t->dl_tensor;
  cupy.device = (DLDevice){kDLCUDA, 0};
  CHECK_OK(dlb_managed_prefetch(&cupy, (DLDevice){kDLCUDA, 0}, NULL));
  CHECK_EQ_INT(e.prefetch_location(p), 0);
  /* A view prefetches its own range, and the stream is the caller's. */
  DLManagedTensorVersioned *v = NULL;
  dlb_slice tail = {500, 1000, 1};
  CHECK_OK(dlb_tensor_slice(t, 1, &tail, &v));
  CHECK_OK(dlb_managed_prefetch(&v->dl_tensor, (DLDevice){kDLCUDAHost, 0},
                                DLB_CUDA_STREAM_PER_THREAD));
  CHECK_EQ_INT(e.prefetch_location(p), -1);
  const void *at = NULL;
  CHECK_EQ_INT(e.prefetch_span(p, &at), 500 * 4);
  CHECK(at == (char *)p + 500 * 4);
  CHECK_STATUS(dlb_managed_prefetch(&v->dl_tensor, cpu, (void *)0x4321),
               DLB_E_RUNTIME);
  CHECK_ERROR_MENTIONS("CUDA_ERROR_INVALID_HANDLE");
  CHECK_EQ_INT(e.calls("cuMemPrefetchAsync_v2"), 5);
  dlb_tensor_release(v);
  dlb_tensor_release(t);
  CHECK_EQ_INT(e.live(), 0);
}

DLB_TEST(cuda_managed_refuses_other_memory) {
  emu e = emu_cuda();
  int64_t shape[1] = {16};
  static const DLDevice others[] = {
      {kDLCUDA, 0}, {kDLCUDAHost, 0}, {kDLCPU, 0}};
  for (int k = 0; k < 3; k++) {
    DLManagedTensorVersioned *t = NULL;
    CHECK_OK(dlb_tensor_alloc(others[k], f32, 1, shape, &t));
    DLTensor lie = t->dl_tensor;
    lie.device = (DLDevice){kDLCUDAManaged, 0};
    CHECK_STATUS(dlb_managed_prefetch(&lie, cpu, NULL), DLB_E_DEVICE);
    /* The message says what the memory is. */
    char name[DLB_DEVICE_NAME_MAX], said[DLB_DEVICE_NAME_MAX + 32];
    CHECK_OK(dlb_device_format(others[k], name, sizeof name));
    snprintf(said, sizeof said, " is %s, not cuda_managed", name);
    CHECK_ERROR_MENTIONS(said);
    CHECK_STATUS(dlb_managed_advise(&lie, DLB_ADVISE_SET_READ_MOSTLY, cpu),
                 DLB_E_DEVICE);
    dlb_tensor_release(t);
  }
  DLManagedTensorVersioned *m = managed(16);
  CHECK_STATUS(dlb_managed_prefetch(&m->dl_tensor, (DLDevice){kDLCUDA, 9},
                                    NULL),
               DLB_E_NO_DEVICE);
  CHECK_STATUS(dlb_managed_prefetch(&m->dl_tensor, (DLDevice){kDLROCM, 0},
                                    NULL),
               DLB_E_DEVICE);
  CHECK_ERROR_MENTIONS("target is rocm");
  CHECK_STATUS(dlb_managed_prefetch(NULL, cpu, NULL), DLB_E_INVAL);
  CHECK_ERROR_MENTIONS("dlb_managed_prefetch: t is NULL");
  CHECK_STATUS(dlb_managed_advise(&m->dl_tensor, (dlb_advice)7, cpu),
               DLB_E_INVAL);
  CHECK_STATUS(dlb_managed_advise(&m->dl_tensor, (dlb_advice)0, cpu),
               DLB_E_INVAL);
  CHECK_STATUS(dlb_managed_advise(NULL, DLB_ADVISE_SET_READ_MOSTLY, cpu),
               DLB_E_INVAL);
  CHECK_ERROR_MENTIONS("dlb_managed_advise: t is NULL");
  CHECK_EQ_INT(e.prefetch_location(m->dl_tensor.data), EMU_NO_PREFETCH);
  /* A tensor that runs past its managed allocation (16 floats) by 4 KiB:
   * its last byte is not managed, and nothing reaches the driver. */
  int64_t past[1] = {16 + 1024};
  DLTensor over = {m->dl_tensor.data, {kDLCUDAManaged, 0}, 1, f32, past,
                   NULL, 0};
  CHECK_STATUS(dlb_managed_prefetch(&over, cpu, NULL), DLB_E_DEVICE);
  CHECK_ERROR_MENTIONS("(the last byte of its elements) is cpu, not "
                       "cuda_managed");
  CHECK_STATUS(dlb_managed_advise(&over, DLB_ADVISE_SET_READ_MOSTLY, cpu),
               DLB_E_DEVICE);
  CHECK_ERROR_MENTIONS("(the last byte of its elements) is cpu");
  /* Within it, first and last byte are managed. */
  past[0] = 16;
  CHECK_OK(dlb_managed_prefetch(&over, cpu, NULL));
  CHECK_EQ_INT(e.calls("cuMemPrefetchAsync_v2"), 1);
  /* Within it as data says, but byte_offset moves it 32 bytes past. */
  past[0] = 16;
  over.byte_offset = 32;
  CHECK_STATUS(dlb_managed_prefetch(&over, cpu, NULL), DLB_E_DEVICE);
  CHECK_ERROR_MENTIONS("(the last byte of its elements) is cpu");
  CHECK_EQ_INT(e.calls("cuMemPrefetchAsync_v2"), 1);
  over.byte_offset = 0;
  /* Two bytes, the second one past the allocation. */
  int64_t two[1] = {2};
  DLTensor pair = {(char *)m->dl_tensor.data + 16 * 4 - 1,
                   {kDLCUDAManaged, 0}, 1, (DLDataType){kDLUInt, 8, 1}, two,
                   NULL, 0};
  CHECK_STATUS(dlb_managed_prefetch(&pair, cpu, NULL), DLB_E_DEVICE);
  CHECK_ERROR_MENTIONS("(the last byte of its elements) is cpu");
  CHECK_EQ_INT(e.calls("cuMemPrefetchAsync_v2"), 1);
  /* One element of it, first and last byte alike. */
  past[0] = 1;
  CHECK_OK(dlb_managed_prefetch(&over, cpu, NULL));
  CHECK_EQ_INT(e.calls("cuMemPrefetchAsync_v2"), 2);
  dlb_tensor_release(m);
  CHECK_EQ_INT(e.live(), 0);
}

DLB_TEST(cuda_managed_advice) {
  emu e = emu_cuda();
  DLManagedTensorVersioned *t = managed(64);
  void *p = t->dl_tensor.data;
  int where = 0;
  CHECK_OK(dlb_managed_advise(&t->dl_tensor, DLB_ADVISE_SET_READ_MOSTLY, cpu));
  CHECK_EQ_INT(e.advice(p, &where), 0x1);
  CHECK_OK(dlb_managed_advise(&t->dl_tensor, DLB_ADVISE_SET_PREFERRED_LOCATION,
                              (DLDevice){kDLCUDA, 1}));
  CHECK_EQ_INT(e.advice(p, &where), 0x5);
  CHECK_EQ_INT(where, 1);
  CHECK_OK(dlb_managed_advise(&t->dl_tensor, DLB_ADVISE_SET_ACCESSED_BY, cpu));
  CHECK_EQ_INT(e.advice(p, &where), 0x15);
  CHECK_EQ_INT(where, -1);
  CHECK_OK(
      dlb_managed_advise(&t->dl_tensor, DLB_ADVISE_UNSET_READ_MOSTLY, cpu));
  CHECK_OK(dlb_managed_advise(&t->dl_tensor,
                              DLB_ADVISE_UNSET_PREFERRED_LOCATION, cpu));
  CHECK_EQ_INT(e.advice(p, &where), 0x10);
  e.fail("cuMemAdvise_v2", 1, 999);
  CHECK_STATUS(dlb_managed_advise(&t->dl_tensor, DLB_ADVISE_UNSET_ACCESSED_BY,
                                  cpu),
               DLB_E_RUNTIME);
  CHECK_ERROR_MENTIONS("cuMemAdvise");
  CHECK_EQ_INT(e.advice(p, &where), 0x10);
  CHECK_EQ_INT(e.context_depth(), 0);
  dlb_tensor_release(t);
  CHECK_EQ_INT(e.live(), 0);
}

/* Without concurrent managed access a GPU may not be a prefetch target
 * or a preferred location; the host still may, and read-mostly is fine. */
DLB_TEST(cuda_managed_without_concurrent_access) {
  setenv("EMU_CUDA_CONCURRENT_MANAGED", "0", 1);
  emu e = emu_cuda();
  DLManagedTensorVersioned *t = managed(64);
  const DLDevice gpu = {kDLCUDA, 0};
  CHECK_STATUS(dlb_managed_prefetch(&t->dl_tensor, gpu, NULL),
               DLB_E_UNSUPPORTED);
  CHECK_ERROR_MENTIONS("CONCURRENT_MANAGED_ACCESS is 0");
  CHECK_STATUS(dlb_managed_advise(&t->dl_tensor,
                                  DLB_ADVISE_SET_PREFERRED_LOCATION, gpu),
               DLB_E_UNSUPPORTED);
  CHECK_OK(dlb_managed_prefetch(&t->dl_tensor, cpu, NULL));
  CHECK_OK(dlb_managed_advise(&t->dl_tensor, DLB_ADVISE_SET_READ_MOSTLY, gpu));
  CHECK_EQ_INT(e.calls("cuMemPrefetchAsync_v2"), 1);
  dlb_tensor_release(t);
  CHECK_EQ_INT(e.live(), 0);
}

/* Drivers before 12.2 have only the CUDA 8 forms, which take an ordinal. */
DLB_TEST(cuda_managed_on_an_older_driver) {
  setenv("EMU_CUDA_VERSION", "12000", 1);
  emu e = emu_cuda();
  DLManagedTensorVersioned *t = managed(64);
  void *p = t->dl_tensor.data;
  CHECK_OK(dlb_managed_prefetch(&t->dl_tensor, (DLDevice){kDLCUDA, 1}, NULL));
  CHECK_EQ_INT(e.prefetch_location(p), 1);
  CHECK_OK(dlb_managed_prefetch(&t->dl_tensor, cpu, NULL));
  CHECK_EQ_INT(e.prefetch_location(p), -1);
  int where = 0;
  CHECK_OK(dlb_managed_advise(&t->dl_tensor, DLB_ADVISE_SET_ACCESSED_BY,
                              (DLDevice){kDLCUDA, 1}));
  CHECK_EQ_INT(e.advice(p, &where), 0x10);
  CHECK_EQ_INT(where, 1);
  CHECK_EQ_INT(e.calls("cuMemPrefetchAsync_v2"), 0);
  CHECK_EQ_INT(e.calls("cuMemPrefetchAsync"), 2);
  CHECK_EQ_INT(e.calls("cuMemAdvise"), 1);
  dlb_tensor_release(t);
  CHECK_EQ_INT(e.live(), 0);
}

DLB_TEST(cuda_managed_empty_and_failing) {
  emu e = emu_cuda();
  DLManagedTensorVersioned *t = managed(0);
  CHECK_OK(dlb_managed_prefetch(&t->dl_tensor, cpu, NULL));
  CHECK_OK(dlb_managed_advise(&t->dl_tensor, DLB_ADVISE_SET_READ_MOSTLY, cpu));
  CHECK_EQ_INT(e.calls("cuMemPrefetchAsync_v2") + e.calls("cuMemAdvise_v2"),
               0);
  dlb_tensor_release(t);
  /* Without elements, memory of any kind has nothing to move. */
  char heap[16];
  int64_t none[1] = {0};
  DLTensor empty = {heap, {kDLCUDAManaged, 0}, 1, f32, none, NULL, 0};
  CHECK_OK(dlb_managed_prefetch(&empty, cpu, NULL));
  CHECK_OK(dlb_managed_advise(&empty, DLB_ADVISE_SET_READ_MOSTLY, cpu));
  CHECK_EQ_INT(e.calls("cuMemPrefetchAsync_v2") + e.calls("cuMemAdvise_v2"),
               0);
  t = managed(8);
  e.fail("cuMemPrefetchAsync_v2", 1, 2);
  CHECK_STATUS(dlb_managed_prefetch(&t->dl_tensor, cpu, NULL), DLB_E_NOMEM);
  e.fail("cuPointerGetAttributes", 1, 999);
  CHECK_STATUS(dlb_managed_prefetch(&t->dl_tensor, cpu, NULL), DLB_E_RUNTIME);
  CHECK_EQ_INT(e.context_depth(), 0);
  dlb_tensor_release(t);
  CHECK_EQ_INT(e.live(), 0);
}

DLB_TEST(cuda_managed_without_runtime) {
  setenv("DLBRIDGE_CUDA_LIBRARY", "/nonexistent/libcuda.so.1", 1);
  float x[4] = {0};
  int64_t shape[1] = {4};
  DLTensor t;
  memset(&t, 0, sizeof t);
  t.data = x;
  t.device = (DLDevice){kDLCUDAManaged, 0};
  t.ndim = 1;
  t.dtype = f32;
  t.shape = shape;
  CHECK_STATUS(dlb_managed_prefetch(&t, cpu, NULL), DLB_E_NO_RUNTIME);
  CHECK_STATUS(dlb_managed_advise(&t, DLB_ADVISE_SET_READ_MOSTLY, cpu),
               DLB_E_NO_RUNTIME);
}
