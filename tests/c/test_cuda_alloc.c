/* test_cuda_alloc.c -- allocating every CUDA kind: labels, the runtime
 * call that frees each, the primary context, out-of-memory and failing
 * driver calls with nothing leaked. */
#include "../emu/emu_fns.h"
#include "test.h"

static const DLDataType f32 = {kDLFloat, 32, 1};

static const DLDevice kinds[] = {
    {kDLCUDA, 0}, {kDLCUDA, 1}, {kDLCUDAHost, 0}, {kDLCUDAManaged, 0}};
static const int live_kind[] = {EMU_LIVE_DEVICE, EMU_LIVE_DEVICE,
                                EMU_LIVE_HOST, EMU_LIVE_MANAGED};

DLB_TEST(cuda_alloc_every_kind) {
  emu e = emu_cuda();
  int64_t shape[2] = {3, 5};
  for (int k = 0; k < 4; k++) {
    DLManagedTensorVersioned *t = NULL;
    CHECK_OK(dlb_tensor_alloc(kinds[k], f32, 2, shape, &t));
    CHECK(t->dl_tensor.data != NULL);
    CHECK_EQ_INT(t->dl_tensor.device.device_type, kinds[k].device_type);
    CHECK_EQ_INT(t->dl_tensor.device.device_id, kinds[k].device_id);
    CHECK_EQ_INT(e.live_kind(live_kind[k]), 1);
    /* The driver agrees with the label, at the start and inside. */
    DLDevice d;
    CHECK_OK(dlb_device_of_pointer(t->dl_tensor.data, &d));
    CHECK(dlb_device_equal(d, kinds[k]));
    CHECK_OK(dlb_device_of_pointer((char *)t->dl_tensor.data + 59, &d));
    CHECK(dlb_device_equal(d, kinds[k]));
    /* Every context pushed was popped. */
    CHECK_EQ_INT(e.context_depth(), 0);
    dlb_tensor_release(t);
  }
  CHECK_EQ_INT(e.live(), 0);
  /* Each kind freed with its own call. */
  CHECK_EQ_INT(e.calls("cuMemFree_v2"), 3);
  CHECK_EQ_INT(e.calls("cuMemFreeHost"), 1);
  CHECK_EQ_INT(e.calls("cuMemHostAlloc"), 1);
  CHECK_EQ_INT(e.calls("cuMemAllocManaged"), 1);
}

/* Host-type memory is not tied to one GPU: device_id 0 whatever was
 * asked. */
DLB_TEST(cuda_alloc_host_types_have_device_id_zero) {
  emu e = emu_cuda();
  int64_t shape[1] = {8};
  DLManagedTensorVersioned *t = NULL;
  CHECK_OK(dlb_tensor_alloc((DLDevice){kDLCUDAHost, 1}, f32, 1, shape, &t));
  CHECK_EQ_INT(t->dl_tensor.device.device_id, 0);
  dlb_tensor_release(t);
  CHECK_OK(dlb_tensor_alloc((DLDevice){kDLCUDAManaged, 1}, f32, 1, shape, &t));
  CHECK_EQ_INT(t->dl_tensor.device.device_id, 0);
  dlb_tensor_release(t);
  CHECK_EQ_INT(e.live(), 0);
}

DLB_TEST(cuda_alloc_unknown_device) {
  emu e = emu_cuda();
  int64_t shape[1] = {8};
  DLManagedTensorVersioned *t = NULL;
  CHECK_STATUS(dlb_tensor_alloc((DLDevice){kDLCUDA, 2}, f32, 1, shape, &t),
               DLB_E_NO_DEVICE);
  CHECK_ERROR_MENTIONS("cuda:2 requested");
  CHECK_ERROR_MENTIONS("2 devices");
  CHECK(t == NULL);
  CHECK_EQ_INT(e.live(), 0);
}

DLB_TEST(cuda_alloc_empty_tensor) {
  emu e = emu_cuda();
  int64_t shape[2] = {0, 4};
  for (int k = 0; k < 4; k++) {
    DLManagedTensorVersioned *t = NULL;
    CHECK_OK(dlb_tensor_alloc(kinds[k], f32, 2, shape, &t));
    CHECK(t->dl_tensor.data != NULL);
    dlb_tensor_release(t);
  }
  CHECK_EQ_INT(e.live(), 0);
}

DLB_TEST(cuda_alloc_device_out_of_memory) {
  setenv("EMU_CUDA_DEVICE_MEMORY", "1048576", 1);
  emu e = emu_cuda();
  int64_t shape[1] = {1 << 19}; /* 2 MiB of float32 */
  DLManagedTensorVersioned *t = NULL;
  dlb_test_failalloc_install(0);
  CHECK_STATUS(dlb_tensor_alloc((DLDevice){kDLCUDA, 1}, f32, 1, shape, &t),
               DLB_E_NOMEM);
  CHECK_ERROR_MENTIONS("cuMemAlloc_v2(2097152 bytes) on cuda:1");
  CHECK_ERROR_MENTIONS("CUDA_ERROR_OUT_OF_MEMORY");
  CHECK_STATUS(dlb_tensor_alloc((DLDevice){kDLCUDAManaged, 0}, f32, 1, shape,
                                &t),
               DLB_E_NOMEM);
  CHECK(t == NULL);
  CHECK_EQ_INT(dlb_test_failalloc_live(), 0);
  dlb_test_failalloc_remove();
  CHECK_EQ_INT(e.live(), 0);
}

DLB_TEST(cuda_alloc_driver_call_fails) {
  emu e = emu_cuda();
  static const char *const calls[] = {"cuMemAlloc_v2", "cuMemAlloc_v2",
                                      "cuMemHostAlloc", "cuMemAllocManaged"};
  int64_t shape[1] = {8};
  dlb_test_failalloc_install(0);
  for (int k = 0; k < 4; k++) {
    DLManagedTensorVersioned *t = NULL;
    e.fail(calls[k], 1, 999);
    CHECK_STATUS(dlb_tensor_alloc(kinds[k], f32, 1, shape, &t),
                 DLB_E_RUNTIME);
    CHECK_ERROR_MENTIONS(calls[k]);
    CHECK_ERROR_MENTIONS("CUDA_ERROR_UNKNOWN");
    CHECK(t == NULL);
    CHECK_EQ_INT(e.context_depth(), 0);
  }
  CHECK_EQ_INT(dlb_test_failalloc_live(), 0);
  dlb_test_failalloc_remove();
  CHECK_EQ_INT(e.live(), 0);
}

static dlb_status alloc_all_kinds(void *ctx) {
  (void)ctx;
  int64_t shape[2] = {4, 4};
  for (int k = 0; k < 4; k++) {
    DLManagedTensorVersioned *t = NULL;
    dlb_status s = dlb_tensor_alloc(kinds[k], f32, 2, shape, &t);
    if (s != DLB_OK) return s;
    dlb_tensor_release(t);
  }
  return DLB_OK;
}

DLB_TEST(cuda_alloc_host_allocation_failures) {
  emu e = emu_cuda();
  CHECK_OK(dlb_runtime_status(DLB_RUNTIME_CUDA));
  CHECK(dlb_test_oom_loop(alloc_all_kinds, NULL) > 0);
  CHECK_EQ_INT(e.live(), 0);
}

/* Every driver call the allocations make fails in turn: each run returns
 * a status (or copes), and nothing stays alive. */
DLB_TEST(cuda_alloc_every_driver_call_failing) {
  emu e = emu_cuda();
  CHECK_OK(dlb_runtime_status(DLB_RUNTIME_CUDA));
  int failures = 0;
  for (int n = 1; n < 1000; n++) {
    e.fail(NULL, n, 999);
    dlb_status s = alloc_all_kinds(NULL);
    if (!e.fail_fired()) {
      CHECK_OK(s);
      break;
    }
    if (s != DLB_OK) {
      failures++;
      CHECK(dlb_last_error()[0] != '\0');
    }
    CHECK_EQ_INT(e.live(), 0);
    CHECK_EQ_INT(e.context_depth(), 0);
  }
  CHECK(failures >= 4);
}

/* PyTorch and CuPy work in the primary context: dlbridge uses the same
 * one, leaves the caller's current context alone, and sees their memory. */
DLB_TEST(cuda_alloc_shares_the_primary_context) {
  emu e = emu_cuda();
  CHECK_OK(dlb_runtime_status(DLB_RUNTIME_CUDA));
  cu_fns cu = cu_fns_of(&e);
  cu_as_framework(&cu, 1);
  dlb__cu_context mine = NULL, now = NULL;
  CHECK_EQ_INT(cu.cuCtxGetCurrent(&mine), 0);
  dlb__cu_deviceptr theirs = 0;
  CHECK_EQ_INT(cu.cuMemAlloc_v2(&theirs, 256), 0);
  DLDevice d;
  CHECK_OK(dlb_device_of_pointer((void *)(uintptr_t)theirs, &d));
  CHECK_EQ_INT(d.device_type, kDLCUDA);
  CHECK_EQ_INT(d.device_id, 1);
  int64_t shape[1] = {8};
  DLManagedTensorVersioned *t = NULL;
  long pushes = e.calls("cuCtxPushCurrent_v2");
  CHECK_OK(dlb_tensor_alloc((DLDevice){kDLCUDA, 1}, f32, 1, shape, &t));
  /* Already current: nothing pushed. */
  CHECK_EQ_INT(e.calls("cuCtxPushCurrent_v2"), pushes);
  dlb_tensor_release(t);
  CHECK_OK(dlb_tensor_alloc((DLDevice){kDLCUDA, 0}, f32, 1, shape, &t));
  CHECK_EQ_INT(e.calls("cuCtxPushCurrent_v2"), pushes + 1);
  CHECK_OK(dlb_device_of_pointer(t->dl_tensor.data, &d));
  CHECK_EQ_INT(d.device_id, 0);
  dlb_tensor_release(t);
  CHECK_EQ_INT(cu.cuCtxGetCurrent(&now), 0);
  CHECK(now == mine);
  CHECK_EQ_INT(e.context_depth(), 1);
  /* The primary contexts are retained once each. */
  CHECK_EQ_INT(e.calls("cuDevicePrimaryCtxRetain"), 3);
  CHECK_EQ_INT(cu.cuMemFree_v2(theirs), 0);
  CHECK_EQ_INT(e.live(), 0);
}
