/*
 * test_gpu_wrappers.c -- the runtime wrappers (cuda_*.c, hip_*.c,
 * gpu_copy.c) against odd answers and failures of the driver: a test
 * swaps an entry of the loaded table (dlb__cu, dlb__hi) for a spy or a
 * liar in front of the emulator's, which the test's own process owns.
 */
#include <sys/wait.h>
#include <unistd.h>

#include "../emu/emu_fns.h"
#include "backend/cuda_loader.h"
#include "backend/hip_loader.h"
#include "test.h"

static const DLDataType f32 = {kDLFloat, 32, 1};
static const DLDevice cpu = {kDLCPU, 0};

static emu E;
static cu_fns CU;

static void load_cuda(void) {
  E = emu_cuda();
  CU = cu_fns_of(&E);
  CHECK_OK(dlb_runtime_status(DLB_RUNTIME_CUDA));
}

static DLManagedTensorVersioned *alloc_on(DLDevice d, int32_t ndim,
                                          const int64_t *shape) {
  DLManagedTensorVersioned *t = NULL;
  CHECK_OK(dlb_tensor_alloc(d, f32, ndim, shape, &t));
  return t;
}

/* ---- copies --------------------------------------------------------------- */

/* A source whose rows overlap (a sliding window: strides 1, 1) has a row
 * pitch below the row's width, which no pitched copy takes: it stages, in
 * both directions. */
DLB_TEST(gpu_copy_source_rows_overlapping) {
  load_cuda();
  float host[8];
  for (int i = 0; i < 8; i++) host[i] = (float)(i + 1);
  int64_t shape[2] = {3, 4}, window[2] = {1, 1};
  DLTensor src = {host, cpu, 2, f32, shape, window, 0};
  DLManagedTensorVersioned *d = alloc_on((DLDevice){kDLCUDA, 0}, 2, shape);
  CHECK_OK(dlb_copy_sync(&src, &d->dl_tensor, NULL));
  const float *got = E.shadow(d->dl_tensor.data);
  for (int i = 0; i < 3; i++)
    for (int j = 0; j < 4; j++) CHECK(got[i * 4 + j] == (float)(i + j + 1));
  /* And out of device memory read the same way. */
  DLManagedTensorVersioned *flat = NULL;
  int64_t eight[1] = {8};
  CHECK_OK(dlb_tensor_copy(&(DLTensor){host, cpu, 1, f32, eight, NULL, 0},
                           (DLDevice){kDLCUDA, 1}, &flat));
  DLTensor dsrc = flat->dl_tensor;
  dsrc.ndim = 2;
  dsrc.shape = shape;
  dsrc.strides = window;
  float back[12];
  DLTensor dst = {back, cpu, 2, f32, shape, NULL, 0};
  CHECK_OK(dlb_copy_sync(&dsrc, &dst, NULL));
  for (int i = 0; i < 12; i++) CHECK(back[i] == (float)(i / 4 + i % 4 + 1));
  dlb_tensor_release(d);
  dlb_tensor_release(flat);
  CHECK_EQ_INT(E.live(), 0);
}

/* The device of the context current at each cuMemcpyAsync. */
static dlb__cu_pfn_cuMemcpyAsync real_memcpy;
static int memcpy_device = -9;

static dlb__cu_result spy_memcpy(dlb__cu_deviceptr dst, dlb__cu_deviceptr src,
                                 size_t bytes, dlb__cu_stream stream) {
  dlb__cu_device dev = -8;
  if (CU.cuCtxGetDevice(&dev) != 0) dev = -7;
  memcpy_device = dev;
  return real_memcpy(dst, src, bytes, stream);
}

/* A copy between device memory of cuda:1 and pinned or managed memory
 * (device 0's, to the runtime) runs in cuda:1's context, whichever side
 * the device memory is. */
DLB_TEST(gpu_copy_runs_in_the_device_sides_context) {
  load_cuda();
  int64_t shape[1] = {16};
  DLManagedTensorVersioned *pinned = alloc_on((DLDevice){kDLCUDAHost, 0}, 1, shape);
  DLManagedTensorVersioned *managed =
      alloc_on((DLDevice){kDLCUDAManaged, 0}, 1, shape);
  DLManagedTensorVersioned *dev = alloc_on((DLDevice){kDLCUDA, 1}, 1, shape);
  real_memcpy = dlb__cu.cuMemcpyAsync;
  dlb__cu.cuMemcpyAsync = spy_memcpy;
  const DLTensor *others[2] = {&pinned->dl_tensor, &managed->dl_tensor};
  for (int i = 0; i < 2; i++) {
    memcpy_device = -9;
    CHECK_OK(dlb_copy_sync(others[i], &dev->dl_tensor, NULL));
    CHECK_EQ_INT(memcpy_device, 1);
    memcpy_device = -9;
    CHECK_OK(dlb_copy_sync(&dev->dl_tensor, others[i], NULL));
    CHECK_EQ_INT(memcpy_device, 1);
  }
  dlb__cu.cuMemcpyAsync = real_memcpy;
  dlb_tensor_release(pinned);
  dlb_tensor_release(managed);
  dlb_tensor_release(dev);
  CHECK_EQ_INT(E.live(), 0);
}

/* Packed sub-byte elements filling whole bytes go in one copy, every
 * byte of them. */
DLB_TEST(gpu_copy_packed_whole_bytes_arrive) {
  load_cuda();
  DLDataType i4 = {kDLInt, 4, 1};
  int64_t shape[1] = {8};
  unsigned char bytes[4] = {0x21, 0x43, 0x65, 0x87}, back[4] = {0};
  DLTensor h = {bytes, cpu, 1, i4, shape, NULL, 0};
  DLTensor b = {back, cpu, 1, i4, shape, NULL, 0};
  DLManagedTensorVersioned *d = NULL;
  CHECK_OK(dlb_tensor_alloc((DLDevice){kDLCUDA, 1}, i4, 1, shape, &d));
  CHECK_OK(dlb_copy_sync(&h, &d->dl_tensor, NULL));
  CHECK(memcmp(E.shadow(d->dl_tensor.data), bytes, 4) == 0);
  CHECK_OK(dlb_copy_sync(&d->dl_tensor, &b, NULL));
  CHECK(memcmp(back, bytes, 4) == 0);
  dlb_tensor_release(d);
  CHECK_EQ_INT(E.live(), 0);
}

/* ---- failure messages ------------------------------------------------------ */

/* A failing call's message names the call, the error's name and number
 * and the driver's description; out-of-memory is DLB_E_NOMEM. */
DLB_TEST(gpu_cuda_failure_names_the_error) {
  load_cuda();
  int64_t shape[1] = {4};
  DLManagedTensorVersioned *t = NULL;
  E.fail("cuMemAlloc_v2", 1, 2);
  CHECK_STATUS(dlb_tensor_alloc((DLDevice){kDLCUDA, 1}, f32, 1, shape, &t),
               DLB_E_NOMEM);
  CHECK(t == NULL);
  CHECK_ERROR_MENTIONS("cuMemAlloc_v2(16 bytes) on cuda:1: "
                       "CUDA_ERROR_OUT_OF_MEMORY (2): out of memory");
  /* A code the driver cannot name. */
  E.fail("cuMemAlloc_v2", 1, 12345);
  CHECK_STATUS(dlb_tensor_alloc((DLDevice){kDLCUDA, 0}, f32, 1, shape, &t),
               DLB_E_RUNTIME);
  CHECK_ERROR_MENTIONS("cuMemAlloc_v2(16 bytes) on cuda:0: "
                       "CUDA_ERROR_UNKNOWN_CODE (12345): no description");
  CHECK_EQ_INT(E.live(), 0);
}

/* Retaining a primary context fails when the driver refuses the device:
 * the failure is reported, and no other device's context stands in. */
DLB_TEST(gpu_cuda_device_refused_at_first_use) {
  load_cuda();
  int64_t shape[1] = {4};
  DLManagedTensorVersioned *t = NULL;
  E.fail("cuDeviceGet", 1, 101);
  CHECK_STATUS(dlb_tensor_alloc((DLDevice){kDLCUDA, 1}, f32, 1, shape, &t),
               DLB_E_RUNTIME);
  CHECK(t == NULL);
  CHECK_ERROR_MENTIONS("retaining the primary context of cuda:1: "
                       "CUDA_ERROR_INVALID_DEVICE (101)");
  CHECK_EQ_INT(E.calls("cuDevicePrimaryCtxRetain"), 0);
  CHECK_EQ_INT(E.live(), 0);
  /* Not remembered: the next use retains it. */
  CHECK_OK(dlb_tensor_alloc((DLDevice){kDLCUDA, 1}, f32, 1, shape, &t));
  dlb_tensor_release(t);
  CHECK_EQ_INT(E.context_depth(), 0);
}

/* ---- classification ---------------------------------------------------------- */

/* The classify operation itself: kind, ordinal and the managed flag. */
DLB_TEST(gpu_cuda_classify_operation) {
  load_cuda();
  int64_t shape[1] = {16};
  DLManagedTensorVersioned *dev = alloc_on((DLDevice){kDLCUDA, 1}, 1, shape);
  DLManagedTensorVersioned *pinned = alloc_on((DLDevice){kDLCUDAHost, 0}, 1, shape);
  DLManagedTensorVersioned *managed =
      alloc_on((DLDevice){kDLCUDAManaged, 0}, 1, shape);
  static const dlb__ptr_kind unset = {{kDLOneAPI, 7}, 7};
  dlb__ptr_kind k = unset;
  CHECK_OK(dlb__cuda.classify(dev->dl_tensor.data, &k));
  CHECK_EQ_INT(k.device.device_type, kDLCUDA);
  CHECK_EQ_INT(k.device.device_id, 1);
  CHECK_EQ_INT(k.managed, 0);
  k = unset;
  CHECK_OK(dlb__cuda.classify(pinned->dl_tensor.data, &k));
  CHECK_EQ_INT(k.device.device_type, kDLCUDAHost);
  CHECK_EQ_INT(k.device.device_id, 0);
  CHECK_EQ_INT(k.managed, 0);
  k = unset;
  CHECK_OK(dlb__cuda.classify(managed->dl_tensor.data, &k));
  CHECK_EQ_INT(k.device.device_type, kDLCUDAManaged);
  CHECK_EQ_INT(k.device.device_id, 0);
  CHECK_EQ_INT(k.managed, 1);
  int local = 0;
  k = unset;
  CHECK_OK(dlb__cuda.classify(&local, &k));
  CHECK_EQ_INT(k.device.device_type, kDLCPU);
  CHECK_EQ_INT(k.managed, 0);
  dlb_tensor_release(dev);
  dlb_tensor_release(pinned);
  dlb_tensor_release(managed);
}

/* Before any primary context is active the driver cannot be asked (no
 * context), and no CUDA memory exists yet: the answer is cpu, written. */
DLB_TEST(gpu_cuda_classify_before_any_context) {
  load_cuda();
  int local = 0;
  dlb__ptr_kind k = {{kDLOneAPI, 7}, 7};
  CHECK_OK(dlb__cuda.classify(&local, &k));
  CHECK_EQ_INT(k.device.device_type, kDLCPU);
  CHECK_EQ_INT(k.device.device_id, 0);
  CHECK_EQ_INT(k.managed, 0);
  CHECK_EQ_INT(E.calls("cuPointerGetAttributes"), 1);
  CHECK_EQ_INT(E.calls("cuDevicePrimaryCtxRetain"), 0);
}

/* A driver answering device memory on an ordinal it does not have. */
static dlb__cu_pfn_cuPointerGetAttributes real_attributes;
static int lie_ordinal;

static dlb__cu_result lying_attributes(unsigned int count, dlb__cu_enum *attrs,
                                       void **data, dlb__cu_deviceptr ptr) {
  dlb__cu_result r = real_attributes(count, attrs, data, ptr);
  for (unsigned i = 0; r == 0 && i < count; i++)
    if (attrs[i] == DLB__CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL)
      *(int *)data[i] = lie_ordinal;
  return r;
}

DLB_TEST(gpu_cuda_classify_ordinal_the_driver_lacks) {
  load_cuda();
  int64_t shape[1] = {16};
  DLManagedTensorVersioned *dev = alloc_on((DLDevice){kDLCUDA, 1}, 1, shape);
  real_attributes = dlb__cu.cuPointerGetAttributes;
  dlb__cu.cuPointerGetAttributes = lying_attributes;
  static const int lies[3] = {2, 64, -1};
  for (int i = 0; i < 3; i++) {
    lie_ordinal = lies[i];
    DLDevice d = {kDLCPU, 0};
    CHECK_STATUS(dlb_device_of_pointer(dev->dl_tensor.data, &d),
                 DLB_E_RUNTIME);
    char want[64];
    snprintf(want, sizeof want, "device memory with device ordinal %d",
             lies[i]);
    CHECK_ERROR_MENTIONS(want);
    CHECK_ERROR_MENTIONS("cuPointerGetAttributes");
  }
  lie_ordinal = 1;
  DLDevice d = {kDLCPU, 0};
  CHECK_OK(dlb_device_of_pointer(dev->dl_tensor.data, &d));
  CHECK_EQ_INT(d.device_id, 1);
  dlb__cu.cuPointerGetAttributes = real_attributes;
  dlb_tensor_release(dev);
}

/* ---- device information ----------------------------------------------------- */

static dlb__cu_result unterminated_name(char *name, int len,
                                        dlb__cu_device dev) {
  (void)dev;
  memset(name, 'x', (size_t)len);
  return 0;
}

/* A name filling the whole buffer without its NUL is cut to fit. */
DLB_TEST(gpu_cuda_info_name_without_terminator) {
  load_cuda();
  dlb__cu.cuDeviceGetName = unterminated_name;
  dlb_gpu_info info;
  memset(&info, 0, sizeof info);
  CHECK_OK(dlb_gpu_get_info((DLDevice){kDLCUDA, 1}, &info));
  CHECK_EQ_INT(strlen(info.name), DLB_GPU_NAME_MAX - 1);
  CHECK_EQ_INT(info.name[0], 'x');
}

/* ---- missing entry points -------------------------------------------------------- */

/* A driver with neither form of cuMemPrefetchAsync, or of cuMemAdvise:
 * the operation is unsupported, naming what is missing and the driver;
 * the other still works. */
DLB_TEST(gpu_cuda_driver_without_prefetch) {
  setenv("EMU_CUDA_HIDE", "cuMemPrefetchAsync", 1);
  load_cuda();
  int64_t shape[1] = {64};
  DLManagedTensorVersioned *m = alloc_on((DLDevice){kDLCUDAManaged, 0}, 1, shape);
  CHECK_STATUS(dlb_managed_prefetch(&m->dl_tensor, (DLDevice){kDLCUDA, 1}, NULL),
               DLB_E_UNSUPPORTED);
  CHECK_ERROR_MENTIONS("has no cuMemPrefetchAsync");
  CHECK_ERROR_MENTIONS(dlb_runtime_library(DLB_RUNTIME_CUDA));
  CHECK_OK(dlb_managed_advise(&m->dl_tensor, DLB_ADVISE_SET_READ_MOSTLY, cpu));
  dlb_tensor_release(m);
  CHECK_EQ_INT(E.live(), 0);
}

DLB_TEST(gpu_cuda_driver_without_advise) {
  setenv("EMU_CUDA_HIDE", "cuMemAdvise", 1);
  load_cuda();
  int64_t shape[1] = {64};
  DLManagedTensorVersioned *m = alloc_on((DLDevice){kDLCUDAManaged, 0}, 1, shape);
  CHECK_STATUS(dlb_managed_advise(&m->dl_tensor, DLB_ADVISE_SET_READ_MOSTLY, cpu),
               DLB_E_UNSUPPORTED);
  CHECK_ERROR_MENTIONS("has no cuMemAdvise");
  CHECK_OK(dlb_managed_prefetch(&m->dl_tensor, cpu, NULL));
  dlb_tensor_release(m);
  CHECK_EQ_INT(E.live(), 0);
}

/* ---- HIP ----------------------------------------------------------------------- */

static dlb__hip_pfn_hipPointerGetAttributes real_hip_attributes;
static int hip_lie;

static dlb__hip_error lying_hip_attributes(dlb__hip_ptr_attr *a,
                                           const void *p) {
  dlb__hip_error e = real_hip_attributes(a, p);
  if (e == 0) a->device = hip_lie;
  return e;
}

DLB_TEST(gpu_hip_classify_ordinal_the_runtime_lacks) {
  E = emu_hip();
  CHECK_OK(dlb_runtime_status(DLB_RUNTIME_HIP));
  int64_t shape[1] = {16};
  DLManagedTensorVersioned *dev = alloc_on((DLDevice){kDLROCM, 1}, 1, shape);
  real_hip_attributes = dlb__hi.hipPointerGetAttributes;
  dlb__hi.hipPointerGetAttributes = lying_hip_attributes;
  static const int lies[3] = {2, 64, -1};
  for (int i = 0; i < 3; i++) {
    hip_lie = lies[i];
    DLDevice d = {kDLCPU, 0};
    CHECK_STATUS(dlb_device_of_pointer(dev->dl_tensor.data, &d),
                 DLB_E_RUNTIME);
    char want[64];
    snprintf(want, sizeof want, "device memory on device %d", lies[i]);
    CHECK_ERROR_MENTIONS(want);
    CHECK_ERROR_MENTIONS("hipPointerGetAttributes");
  }
  hip_lie = 1;
  DLDevice d = {kDLCPU, 0};
  CHECK_OK(dlb_device_of_pointer(dev->dl_tensor.data, &d));
  CHECK_EQ_INT(d.device_type, kDLROCM);
  CHECK_EQ_INT(d.device_id, 1);
  dlb__hi.hipPointerGetAttributes = real_hip_attributes;
  dlb_tensor_release(dev);
}

/* ---- driver calls of the context and synchronisation helpers --------------- */

/* Asking for the current context fails: the operation fails with it. */
DLB_TEST(gpu_cuda_current_context_unknown) {
  load_cuda();
  int64_t shape[1] = {4};
  DLManagedTensorVersioned *t = NULL;
  E.fail("cuCtxGetCurrent", 1, 999);
  CHECK_STATUS(dlb_tensor_alloc((DLDevice){kDLCUDA, 0}, f32, 1, shape, &t),
               DLB_E_RUNTIME);
  CHECK(E.fail_fired());
  CHECK_ERROR_MENTIONS("cuCtxGetCurrent: CUDA_ERROR_UNKNOWN (999)");
  CHECK_EQ_INT(E.calls("cuMemAlloc_v2"), 0);
  CHECK_EQ_INT(E.live(), 0);
  CHECK_EQ_INT(E.context_depth(), 0);
}

/* Whether a primary context is active cannot be told: classification
 * before any context fails (it might be CUDA memory), and active() says
 * 1, so that synchronising callers do not skip the device. */
DLB_TEST(gpu_cuda_primary_context_state_unknown) {
  load_cuda();
  int local = 0;
  dlb__ptr_kind k;
  E.fail("cuDevicePrimaryCtxGetState", 1, 999);
  CHECK_STATUS(dlb__cuda.classify(&local, &k), DLB_E_RUNTIME);
  CHECK(E.fail_fired());
  CHECK_ERROR_MENTIONS("cuDevicePrimaryCtxGetState(cuda:0): "
                       "CUDA_ERROR_UNKNOWN (999)");
  E.fail("cuDevicePrimaryCtxGetState", 1, 999);
  CHECK_EQ_INT(dlb__cuda.active(1), 1);
  CHECK(E.fail_fired());
  CHECK_EQ_INT(dlb__cuda.active(1), 0);
}

/* Entering a device's context fails: nothing of the operation runs on
 * whatever context is current instead. */
DLB_TEST(gpu_cuda_no_work_without_the_context) {
  load_cuda();
  E.fail("cuCtxPushCurrent_v2", 1, 999);
  CHECK_STATUS(dlb_stream_synchronize((DLDevice){kDLCUDA, 1}, NULL),
               DLB_E_RUNTIME);
  CHECK_ERROR_MENTIONS("cuCtxPushCurrent(primary context of cuda:1): "
                       "CUDA_ERROR_UNKNOWN (999)");
  CHECK_EQ_INT(E.calls("cuStreamSynchronize"), 0);
  E.fail("cuCtxPushCurrent_v2", 1, 999);
  CHECK_STATUS(dlb_device_synchronize((DLDevice){kDLCUDA, 1}), DLB_E_RUNTIME);
  CHECK_ERROR_MENTIONS("cuCtxPushCurrent(primary context of cuda:1)");
  CHECK_EQ_INT(E.calls("cuCtxSynchronize"), 0);
  E.fail("cuCtxPushCurrent_v2", 1, 999);
  CHECK_STATUS(dlb_stream_wait((DLDevice){kDLCUDA, 1}, DLB_CUDA_STREAM_LEGACY,
                               DLB_CUDA_STREAM_PER_THREAD),
               DLB_E_RUNTIME);
  CHECK_ERROR_MENTIONS("cuCtxPushCurrent(primary context of cuda:1)");
  CHECK_EQ_INT(E.calls("cuEventCreate"), 0);
  int64_t four = 4;
  DLManagedTensorVersioned *p = NULL, *q = NULL;
  CHECK_OK(dlb_tensor_alloc((DLDevice){kDLCUDAHost, 0}, f32, 1, &four, &p));
  CHECK_OK(dlb_tensor_alloc((DLDevice){kDLCUDA, 1}, f32, 1, &four, &q));
  E.fail("cuCtxPushCurrent_v2", 1, 999);
  CHECK_STATUS(dlb_copy_async(&p->dl_tensor, &q->dl_tensor, NULL),
               DLB_E_RUNTIME);
  CHECK_ERROR_MENTIONS("cuCtxPushCurrent(primary context of cuda:1)");
  CHECK_EQ_INT(E.calls("cuMemcpyAsync"), 0);
  dlb_tensor_release(p);
  dlb_tensor_release(q);
  /* Exporting device memory enters three times (range, handle, event). */
  int64_t n = 64;
  DLManagedTensorVersioned *d = NULL;
  CHECK_OK(dlb_tensor_alloc((DLDevice){kDLCUDA, 0}, f32, 1, &n, &d));
  uint8_t buf[DLB_SHARE_HANDLE_MAX];
  size_t len = 0;
  int fd = -1;
  E.fail("cuCtxPushCurrent_v2", 3, 999);
  CHECK_STATUS(dlb_share_export(d, buf, sizeof buf, &len, &fd), DLB_E_RUNTIME);
  CHECK(E.fail_fired());
  CHECK_ERROR_MENTIONS("cuCtxPushCurrent(primary context of cuda:0)");
  CHECK_EQ_INT(E.calls("cuEventCreate"), 0);
  CHECK_EQ_INT(E.live_kind(EMU_LIVE_EVENT), 0);
  CHECK_EQ_INT(E.context_depth(), 0);
  dlb_tensor_release(d);
}

/* The synchronisation before an unaligned device-to-device copy fails. */
DLB_TEST(gpu_cuda_unaligned_copy_cannot_wait) {
  setenv("EMU_CUDA_D2D_PITCH_ALIGN", "512", 1);
  load_cuda();
  int64_t shape[2] = {4, 10}, part[2] = {4, 5};
  DLManagedTensorVersioned *a = alloc_on((DLDevice){kDLCUDA, 0}, 2, shape);
  DLManagedTensorVersioned *b = alloc_on((DLDevice){kDLCUDA, 1}, 2, shape);
  DLTensor s = a->dl_tensor, d = b->dl_tensor;
  int64_t strides[2] = {10, 1};
  s.shape = d.shape = part;
  s.strides = d.strides = strides;
  E.fail("cuStreamSynchronize", 1, 999);
  CHECK_STATUS(dlb_copy_sync(&s, &d, NULL), DLB_E_RUNTIME);
  CHECK(E.fail_fired());
  CHECK_ERROR_MENTIONS("cuStreamSynchronize before cuMemcpy2DUnaligned_v2 "
                       "on cuda:0: CUDA_ERROR_UNKNOWN (999)");
  CHECK_EQ_INT(E.calls("cuMemcpy2DUnaligned_v2"), 0);
  /* And the unaligned copy itself fails. */
  E.fail("cuMemcpy2DUnaligned_v2", 1, 999);
  CHECK_STATUS(dlb_copy_sync(&s, &d, NULL), DLB_E_RUNTIME);
  CHECK(E.fail_fired());
  CHECK_ERROR_MENTIONS("cuMemcpy2DUnaligned_v2(4 x 20 bytes, pitches 40 and "
                       "40) on cuda:0: CUDA_ERROR_UNKNOWN (999)");
  dlb_tensor_release(a);
  dlb_tensor_release(b);
  CHECK_EQ_INT(E.live(), 0);
}

/* A 3-D copy the driver refuses. */
DLB_TEST(gpu_cuda_3d_copy_fails) {
  load_cuda();
  int64_t shape[3] = {3, 5, 10}, part[3] = {3, 4, 5};
  DLManagedTensorVersioned *a = alloc_on((DLDevice){kDLCUDAHost, 0}, 3, shape);
  DLManagedTensorVersioned *b = alloc_on((DLDevice){kDLCUDA, 1}, 3, shape);
  DLTensor s = a->dl_tensor, d = b->dl_tensor;
  int64_t strides[3] = {50, 10, 1};
  s.shape = d.shape = part;
  s.strides = d.strides = strides;
  E.fail("cuMemcpy3DAsync_v2", 1, 999);
  CHECK_STATUS(dlb_copy_sync(&s, &d, NULL), DLB_E_RUNTIME);
  CHECK(E.fail_fired());
  CHECK_ERROR_MENTIONS("cuMemcpy3DAsync_v2(3 x 4 x 20 bytes) on cuda:1: "
                       "CUDA_ERROR_UNKNOWN (999)");
  dlb_tensor_release(a);
  dlb_tensor_release(b);
  CHECK_EQ_INT(E.live(), 0);
}

/* ---- IPC ------------------------------------------------------------------------ */

/* A driver lacking an IPC entry point: export or import is unsupported,
 * naming the entry point, and nothing is called through it. An import
 * runs in a child: the exporting process cannot open its own handle. */
static void ipc_without(const char *hidden, int export_fails) {
  setenv("EMU_CUDA_HIDE", hidden, 1);
  load_cuda();
  int64_t n = 64;
  DLManagedTensorVersioned *d = NULL;
  CHECK_OK(dlb_tensor_alloc((DLDevice){kDLCUDA, 0}, f32, 1, &n, &d));
  uint8_t buf[DLB_SHARE_HANDLE_MAX];
  size_t len = 0;
  int fd = -1;
  char want[64];
  snprintf(want, sizeof want, "lacks %s", hidden);
  dlb_status s = dlb_share_export(d, buf, sizeof buf, &len, &fd);
  if (export_fails) {
    CHECK_STATUS(s, DLB_E_UNSUPPORTED);
    CHECK_ERROR_MENTIONS(want);
    CHECK_ERROR_MENTIONS(dlb_runtime_library(DLB_RUNTIME_CUDA));
  } else {
    CHECK_OK(s);
    CHECK_EQ_INT(E.context_depth(), 0);
    fflush(NULL);
    pid_t pid = fork();
    CHECK(pid >= 0);
    if (pid == 0) {
      DLManagedTensorVersioned *u = NULL;
      s = dlb_share_import(buf, len, fd, 0, &u);
      _exit(s != DLB_E_UNSUPPORTED                            ? 1
            : u != NULL                                       ? 2
            : strstr(dlb_last_error(), want) == NULL          ? 3
            : strstr(dlb_last_error(),
                     dlb_runtime_library(DLB_RUNTIME_CUDA)) == NULL ? 5
            : E.live_kind(EMU_LIVE_DEVICE) != 1               ? 4
                                                              : 0);
    }
    int st = 0;
    CHECK(waitpid(pid, &st, 0) == pid);
    CHECK(WIFEXITED(st));
    CHECK_EQ_INT(WEXITSTATUS(st), 0);
  }
  dlb_tensor_release(d);
  CHECK_EQ_INT(E.live_kind(EMU_LIVE_DEVICE), 0);
}

DLB_TEST(gpu_cuda_ipc_without_get_handle) { ipc_without("cuIpcGetMemHandle", 1); }
DLB_TEST(gpu_cuda_ipc_without_address_range) {
  ipc_without("cuMemGetAddressRange", 1);
}
DLB_TEST(gpu_cuda_ipc_without_event_handle) {
  ipc_without("cuIpcGetEventHandle", 1);
}
DLB_TEST(gpu_cuda_ipc_without_open) { ipc_without("cuIpcOpenMemHandle", 0); }
DLB_TEST(gpu_cuda_ipc_without_close) { ipc_without("cuIpcCloseMemHandle", 0); }
DLB_TEST(gpu_cuda_ipc_without_open_event) {
  ipc_without("cuIpcOpenEventHandle", 0);
}

/* An importer that cannot enter the device's context opens nothing. */
DLB_TEST(gpu_cuda_ipc_import_without_the_context) {
  load_cuda();
  int64_t n = 64;
  DLManagedTensorVersioned *d = NULL;
  CHECK_OK(dlb_tensor_alloc((DLDevice){kDLCUDA, 0}, f32, 1, &n, &d));
  uint8_t buf[DLB_SHARE_HANDLE_MAX];
  size_t len = 0;
  int fd = -1;
  CHECK_OK(dlb_share_export(d, buf, sizeof buf, &len, &fd));
  fflush(NULL);
  pid_t pid = fork();
  CHECK(pid >= 0);
  if (pid == 0) {
    DLManagedTensorVersioned *u = NULL;
    E.fail("cuCtxPushCurrent_v2", 1, 999);
    dlb_status s = dlb_share_import(buf, len, fd, 0, &u);
    _exit(s != DLB_E_RUNTIME                                      ? 1
          : u != NULL                                             ? 2
          : strstr(dlb_last_error(), "cuCtxPushCurrent") == NULL  ? 3
          : E.calls("cuIpcOpenMemHandle_v2") != 0                 ? 4
                                                                  : 0);
  }
  int st = 0;
  CHECK(waitpid(pid, &st, 0) == pid);
  CHECK(WIFEXITED(st));
  CHECK_EQ_INT(WEXITSTATUS(st), 0);
  dlb_tensor_release(d);
  CHECK_EQ_INT(E.live_kind(EMU_LIVE_DEVICE), 0);
}

/* ---- boundaries --------------------------------------------------------------- */

/* One element, one byte: copied, not taken for an empty tensor. */
DLB_TEST(gpu_copy_one_byte) {
  load_cuda();
  DLDataType u8 = {kDLUInt, 8, 1};
  unsigned char one = 0xA7, back = 0;
  DLTensor h = {&one, cpu, 0, u8, NULL, NULL, 0};
  DLTensor b = {&back, cpu, 0, u8, NULL, NULL, 0};
  DLManagedTensorVersioned *d = NULL;
  CHECK_OK(dlb_tensor_alloc((DLDevice){kDLCUDA, 1}, u8, 0, NULL, &d));
  CHECK_OK(dlb_copy_sync(&h, &d->dl_tensor, NULL));
  CHECK_EQ_INT(*(unsigned char *)E.shadow(d->dl_tensor.data), 0xA7);
  CHECK_OK(dlb_copy_sync(&d->dl_tensor, &b, NULL));
  CHECK_EQ_INT(back, 0xA7);
  dlb_tensor_release(d);
  CHECK_EQ_INT(E.live(), 0);
}

/* Two rows of a wider base: one pitched copy of both rows. */
DLB_TEST(gpu_copy_two_rows) {
  load_cuda();
  int64_t shape[2] = {2, 8}, part[2] = {2, 5};
  DLManagedTensorVersioned *p = alloc_on((DLDevice){kDLCUDAHost, 0}, 2, shape);
  DLManagedTensorVersioned *d = alloc_on((DLDevice){kDLCUDA, 0}, 2, shape);
  float *v = p->dl_tensor.data;
  for (int i = 0; i < 16; i++) v[i] = (float)(i + 1);
  memset(E.shadow(d->dl_tensor.data), 0, 16 * sizeof(float));
  DLTensor s = p->dl_tensor, t = d->dl_tensor;
  s.shape = t.shape = part;
  long before = E.calls("cuMemcpy2DAsync_v2");
  int64_t strides[2] = {8, 1};
  s.strides = t.strides = strides;
  CHECK_OK(dlb_copy_sync(&s, &t, NULL));
  CHECK_EQ_INT(E.calls("cuMemcpy2DAsync_v2"), before + 1);
  const float *got = E.shadow(d->dl_tensor.data);
  for (int i = 0; i < 16; i++)
    CHECK(got[i] == (i % 8 < 5 ? (float)(i + 1) : 0.0f));
  dlb_tensor_release(p);
  dlb_tensor_release(d);
}

/* The interprocess event of a device is made once and recorded again at
 * each later export. */
DLB_TEST(gpu_cuda_ipc_one_event_per_device) {
  load_cuda();
  int64_t n = 64;
  DLManagedTensorVersioned *d = NULL;
  CHECK_OK(dlb_tensor_alloc((DLDevice){kDLCUDA, 1}, f32, 1, &n, &d));
  uint8_t buf[DLB_SHARE_HANDLE_MAX];
  size_t len = 0;
  int fd = -1;
  for (int i = 0; i < 3; i++)
    CHECK_OK(dlb_share_export(d, buf, sizeof buf, &len, &fd));
  CHECK_EQ_INT(E.live_kind(EMU_LIVE_EVENT), 1);
  CHECK_EQ_INT(E.calls("cuEventCreate"), 1);
  CHECK_EQ_INT(E.calls("cuEventRecord"), 3);
  dlb_tensor_release(d);
}

/* The CUDA 8 prefetch takes an ordinal: device 0 is 0, not the host. */
DLB_TEST(gpu_cuda_old_prefetch_to_device_zero) {
  setenv("EMU_CUDA_VERSION", "12000", 1);
  load_cuda();
  int64_t shape[1] = {64};
  DLManagedTensorVersioned *m = alloc_on((DLDevice){kDLCUDAManaged, 0}, 1, shape);
  CHECK_OK(dlb_managed_prefetch(&m->dl_tensor, (DLDevice){kDLCUDA, 0}, NULL));
  CHECK_EQ_INT(E.prefetch_location(m->dl_tensor.data), 0);
  CHECK_EQ_INT(E.calls("cuMemPrefetchAsync"), 1);
  dlb_tensor_release(m);
}

/* Without concurrent managed access, read-mostly advice (set or unset)
 * still works with a device named: it ignores the location. */
DLB_TEST(gpu_cuda_read_mostly_without_concurrent_access) {
  setenv("EMU_CUDA_CONCURRENT_MANAGED", "0", 1);
  load_cuda();
  int64_t shape[1] = {64};
  DLManagedTensorVersioned *m = alloc_on((DLDevice){kDLCUDAManaged, 0}, 1, shape);
  const DLDevice gpu = {kDLCUDA, 0};
  CHECK_OK(dlb_managed_advise(&m->dl_tensor, DLB_ADVISE_SET_READ_MOSTLY, gpu));
  CHECK_OK(dlb_managed_advise(&m->dl_tensor, DLB_ADVISE_UNSET_READ_MOSTLY, gpu));
  CHECK_EQ_INT(E.advice(m->dl_tensor.data, NULL) & 1u, 0);
  dlb_tensor_release(m);
}

/* A driver answering a capability with a value other than 0 or 1. */
static dlb__cu_pfn_cuDeviceGetAttribute real_attribute;

static dlb__cu_result attribute_seven(int *v, dlb__cu_enum attr,
                                      dlb__cu_device dev) {
  dlb__cu_result r = real_attribute(v, attr, dev);
  if (r == 0) *v = *v != 0 ? 7 : 0;
  return r;
}

DLB_TEST(gpu_cuda_info_capabilities_are_0_or_1) {
  load_cuda();
  real_attribute = dlb__cu.cuDeviceGetAttribute;
  dlb__cu.cuDeviceGetAttribute = attribute_seven;
  dlb_gpu_info info;
  CHECK_OK(dlb_gpu_get_info((DLDevice){kDLCUDA, 0}, &info));
  CHECK_EQ_INT(info.managed_memory, 1);
  CHECK_EQ_INT(info.concurrent_managed, 1);
  CHECK_EQ_INT(info.host_register, 1);
  CHECK_EQ_INT(info.ipc, 1);
  dlb__cu.cuDeviceGetAttribute = real_attribute;
}

/* ---- HIP wrappers --------------------------------------------------------------- */

static hip_fns HI;

static void load_hip(void) {
  E = emu_hip();
  HI = hip_fns_of(&E);
  CHECK_OK(dlb_runtime_status(DLB_RUNTIME_HIP));
}

/* A runtime whose driver is too old is no usable runtime. */
DLB_TEST(gpu_hip_init_insufficient_driver) {
  E = emu_hip();
  E.fail("hipInit", 1, 35);
  CHECK_STATUS(dlb_runtime_status(DLB_RUNTIME_HIP), DLB_E_NO_RUNTIME);
  CHECK_ERROR_MENTIONS("has no usable driver: hipInit returned "
                       "hipErrorInsufficientDriver (35)");
}

/* Switching to the device fails: nothing of the operation runs on the
 * device that was current instead. */
DLB_TEST(gpu_hip_no_work_without_the_device) {
  load_hip();
  int64_t four = 4;
  DLManagedTensorVersioned *p = NULL, *q = NULL;
  CHECK_OK(dlb_tensor_alloc((DLDevice){kDLROCMHost, 0}, f32, 1, &four, &p));
  CHECK_OK(dlb_tensor_alloc((DLDevice){kDLROCM, 1}, f32, 1, &four, &q));
  CHECK_EQ_INT(HI.hipSetDevice(0), 0);
  long copies = E.calls("hipMemcpyAsync");
  E.fail("hipSetDevice", 1, 999);
  CHECK_STATUS(dlb_copy_async(&p->dl_tensor, &q->dl_tensor, NULL),
               DLB_E_RUNTIME);
  CHECK_ERROR_MENTIONS("hipSetDevice(1): hipErrorUnknown (999): unknown error");
  CHECK_EQ_INT(E.calls("hipMemcpyAsync"), copies);
  E.fail("hipSetDevice", 1, 999);
  CHECK_STATUS(dlb_stream_wait((DLDevice){kDLROCM, 1}, NULL, (void *)2),
               DLB_E_RUNTIME);
  CHECK_EQ_INT(E.calls("hipEventCreateWithFlags"), 0);
  E.fail("hipSetDevice", 1, 999);
  CHECK_STATUS(dlb_stream_synchronize((DLDevice){kDLROCM, 1}, NULL),
               DLB_E_RUNTIME);
  CHECK_EQ_INT(E.calls("hipStreamSynchronize"), 0);
  /* Exporting enters three times (range, handle, event), each switch
   * followed by the one back. */
  uint8_t buf[DLB_SHARE_HANDLE_MAX];
  size_t len = 0;
  int fd = -1;
  for (int n = 1; n <= 3; n++) {
    long ranges = E.calls("hipMemGetAddressRange");
    long handles = E.calls("hipIpcGetMemHandle");
    E.fail("hipSetDevice", 2 * n - 1, 999);
    CHECK_STATUS(dlb_share_export(q, buf, sizeof buf, &len, &fd),
                 DLB_E_RUNTIME);
    CHECK(E.fail_fired());
    CHECK_ERROR_MENTIONS("hipSetDevice(1)");
    CHECK_EQ_INT(E.calls("hipMemGetAddressRange") - ranges, n > 1);
    CHECK_EQ_INT(E.calls("hipIpcGetMemHandle") - handles, n > 2);
    CHECK_EQ_INT(E.calls("hipEventCreateWithFlags"), 0);
    CHECK_EQ_INT(E.live_kind(EMU_LIVE_EVENT), 0);
  }
  dlb_tensor_release(p);
  dlb_tensor_release(q);
}

/* A failing stream synchronisation is reported, naming the call. */
DLB_TEST(gpu_hip_stream_sync_fails) {
  load_hip();
  E.fail("hipStreamSynchronize", 1, 999);
  CHECK_STATUS(dlb_stream_synchronize((DLDevice){kDLROCM, 1}, NULL),
               DLB_E_RUNTIME);
  CHECK(E.fail_fired());
  CHECK_ERROR_MENTIONS("on rocm:1: hipErrorUnknown (999): unknown error");
  CHECK_ERROR_MENTIONS("hipStreamSynchronize(");
}

/* The IPC handle is asked for with the allocation's device current. */
static dlb__hip_pfn_hipIpcGetMemHandle real_hip_handle;
static int handle_device = -9;

static dlb__hip_error spy_hip_handle(dlb__hip_ipc_mem_handle *h, void *p) {
  int dev = -8;
  if (HI.hipGetDevice(&dev) != 0) dev = -7;
  handle_device = dev;
  return real_hip_handle(h, p);
}

DLB_TEST(gpu_hip_ipc_on_the_allocations_device) {
  load_hip();
  int64_t n = 64;
  DLManagedTensorVersioned *d = NULL;
  CHECK_OK(dlb_tensor_alloc((DLDevice){kDLROCM, 1}, f32, 1, &n, &d));
  CHECK_EQ_INT(HI.hipSetDevice(0), 0);
  real_hip_handle = dlb__hi.hipIpcGetMemHandle;
  dlb__hi.hipIpcGetMemHandle = spy_hip_handle;
  uint8_t buf[DLB_SHARE_HANDLE_MAX];
  size_t len = 0;
  int fd = -1;
  CHECK_OK(dlb_share_export(d, buf, sizeof buf, &len, &fd));
  CHECK_EQ_INT(handle_device, 1);
  int cur = -1;
  CHECK_EQ_INT(HI.hipGetDevice(&cur), 0);
  CHECK_EQ_INT(cur, 0);
  dlb__hi.hipIpcGetMemHandle = real_hip_handle;
  dlb_tensor_release(d);
}

/* A runtime without interprocess events (no hipIpcGetEventHandle)
 * synchronises the device at export and sends an all-zero event. */
DLB_TEST(gpu_hip_ipc_without_event_entry_point) {
  load_hip();
  int64_t n = 64;
  DLManagedTensorVersioned *d = NULL;
  CHECK_OK(dlb_tensor_alloc((DLDevice){kDLROCM, 0}, f32, 1, &n, &d));
  dlb__hi.hipIpcGetEventHandle = NULL;
  uint8_t buf[DLB_SHARE_HANDLE_MAX];
  size_t len = 0;
  int fd = -1;
  long syncs = E.calls("hipDeviceSynchronize");
  CHECK_OK(dlb_share_export(d, buf, sizeof buf, &len, &fd));
  CHECK_EQ_INT(E.calls("hipDeviceSynchronize"), syncs + 1);
  CHECK_EQ_INT(E.calls("hipEventCreateWithFlags"), 0);
  CHECK_EQ_INT(E.live_kind(EMU_LIVE_EVENT), 0);
  dlb_tensor_release(d);
}

/* Importing in a child: a runtime lacking hipIpcOpenMemHandle, and one
 * whose hipIpcOpenEventHandle fails. */
static int hip_import_child(const uint8_t *buf, size_t len, int fd,
                            dlb_status want, const char *mention) {
  fflush(NULL);
  pid_t pid = fork();
  CHECK(pid >= 0);
  if (pid == 0) {
    DLManagedTensorVersioned *u = NULL;
    dlb_status s = dlb_share_import(buf, len, fd, 0, &u);
    _exit(s != want                                  ? 1
          : u != NULL                                ? 2
          : strstr(dlb_last_error(), mention) == NULL ? 3
          : E.live_kind(EMU_LIVE_DEVICE) != 1        ? 4
                                                     : 0);
  }
  int st = 0;
  CHECK(waitpid(pid, &st, 0) == pid);
  CHECK(WIFEXITED(st));
  return WEXITSTATUS(st);
}

DLB_TEST(gpu_hip_ipc_import_failures) {
  load_hip();
  int64_t n = 64;
  DLManagedTensorVersioned *d = NULL;
  CHECK_OK(dlb_tensor_alloc((DLDevice){kDLROCM, 1}, f32, 1, &n, &d));
  uint8_t buf[DLB_SHARE_HANDLE_MAX];
  size_t len = 0;
  int fd = -1;
  CHECK_OK(dlb_share_export(d, buf, sizeof buf, &len, &fd));
  E.fail("hipIpcOpenEventHandle", 1, 999);
  CHECK_EQ_INT(hip_import_child(buf, len, fd, DLB_E_RUNTIME,
                                "hipIpcOpenEventHandle on rocm:1: "
                                "hipErrorUnknown (999)"),
               0);
  /* The device cannot be made current: nothing is opened. */
  CHECK_EQ_INT(HI.hipSetDevice(0), 0);
  E.fail("hipSetDevice", 1, 999);
  CHECK_EQ_INT(hip_import_child(buf, len, fd, DLB_E_RUNTIME,
                                "hipSetDevice(1): hipErrorUnknown (999)"),
               0);
  E.fail(NULL, 0, 0);
  dlb__hip_pfn_hipIpcOpenMemHandle open = dlb__hi.hipIpcOpenMemHandle;
  dlb__hi.hipIpcOpenMemHandle = NULL;
  CHECK_EQ_INT(hip_import_child(buf, len, fd, DLB_E_UNSUPPORTED,
                                "lacks hipIpcOpenMemHandle"),
               0);
  dlb__hi.hipIpcOpenMemHandle = open;
  dlb_tensor_release(d);
}

/* Device information: a name without its NUL is cut to fit, and an
 * attribute the runtime lacks leaves no error behind for the caller's
 * next hipGetLastError. */
static dlb__hip_error unterminated_hip_name(char *name, int len, int dev) {
  (void)dev;
  memset(name, 'x', (size_t)len);
  return 0;
}

DLB_TEST(gpu_hip_info_name_and_last_error) {
  load_hip();
  dlb__hi.hipDeviceGetName = unterminated_hip_name;
  dlb_gpu_info info;
  memset(&info, 0, sizeof info);
  CHECK_OK(dlb_gpu_get_info((DLDevice){kDLROCM, 1}, &info));
  CHECK_EQ_INT(strlen(info.name), DLB_GPU_NAME_MAX - 1);
  CHECK_EQ_INT(info.host_register, -1);
  CHECK_EQ_INT(HI.hipGetLastError(), 0);
}

/* Counting the devices fails: a runtime error naming the call, not "no
 * GPU". */
DLB_TEST(gpu_hip_device_count_fails) {
  E = emu_hip();
  E.fail("hipGetDeviceCount", 1, 999);
  CHECK_STATUS(dlb_runtime_status(DLB_RUNTIME_HIP), DLB_E_RUNTIME);
  CHECK(E.fail_fired());
  CHECK_ERROR_MENTIONS("hipGetDeviceCount returned hipErrorUnknown (999)");
}

/* Foreign IPC handles (another magic in the runtime's 64 bytes) in an
 * importer: the call that refuses them is named with its error, and a
 * refused event closes the memory opened for it. */
static int cuda_import_child(const uint8_t *buf, size_t len, const char *mention,
                             long closed) {
  fflush(NULL);
  pid_t pid = fork();
  CHECK(pid >= 0);
  if (pid == 0) {
    DLManagedTensorVersioned *u = NULL;
    dlb_status s = dlb_share_import(buf, len, -1, 0, &u);
    _exit(s != DLB_E_RUNTIME                                      ? 1
          : u != NULL                                             ? 2
          : strstr(dlb_last_error(), mention) == NULL             ? 3
          : E.calls("cuIpcOpenMemHandle_v2") != 1                 ? 4
          : E.calls("cuIpcCloseMemHandle") != closed              ? 5
          : E.live_kind(EMU_LIVE_DEVICE) != 1                     ? 6
          : E.live_kind(EMU_LIVE_EVENT) != 1                      ? 7
          : E.context_depth() != 0                                ? 8
                                                                  : 0);
  }
  int st = 0;
  CHECK(waitpid(pid, &st, 0) == pid);
  CHECK(WIFEXITED(st));
  return WEXITSTATUS(st);
}

DLB_TEST(gpu_cuda_ipc_foreign_handles) {
  load_cuda();
  int64_t n = 64;
  DLManagedTensorVersioned *d = NULL;
  CHECK_OK(dlb_tensor_alloc((DLDevice){kDLCUDA, 0}, f32, 1, &n, &d));
  uint8_t buf[DLB_SHARE_HANDLE_MAX], bad[DLB_SHARE_HANDLE_MAX];
  size_t len = 0;
  int fd = -1;
  CHECK_OK(dlb_share_export(d, buf, sizeof buf, &len, &fd));
  /* The memory handle (bytes 80 to 143 of a device handle). */
  memcpy(bad, buf, len);
  bad[80] ^= 0x5A;
  CHECK_EQ_INT(cuda_import_child(bad, len,
                                 "cuIpcOpenMemHandle on cuda:0 (the exporting "
                                 "process must still hold the memory): "
                                 "CUDA_ERROR_INVALID_VALUE (1)",
                                 0),
               0);
  /* The event handle (bytes 144 to 207). */
  memcpy(bad, buf, len);
  bad[144] ^= 0x5A;
  CHECK_EQ_INT(cuda_import_child(bad, len,
                                 "cuIpcOpenEventHandle on cuda:0: "
                                 "CUDA_ERROR_INVALID_VALUE (1)",
                                 1),
               0);
  dlb_tensor_release(d);
}

/* A driver answering MAX_PITCH with a negative number: no pitch fits, so
 * pitched copies stage, and arrive. */
static dlb__cu_result negative_max_pitch(int *v, dlb__cu_enum attr,
                                         dlb__cu_device dev) {
  dlb__cu_result r = real_attribute(v, attr, dev);
  if (r == 0 && attr == DLB__CU_DEVICE_ATTRIBUTE_MAX_PITCH) *v = -5;
  return r;
}

DLB_TEST(gpu_cuda_max_pitch_answered_negative) {
  load_cuda();
  real_attribute = dlb__cu.cuDeviceGetAttribute;
  dlb__cu.cuDeviceGetAttribute = negative_max_pitch;
  int64_t shape[2] = {3, 8}, part[2] = {3, 5}, strides[2] = {8, 1};
  DLManagedTensorVersioned *p = alloc_on((DLDevice){kDLCUDAHost, 0}, 2, shape);
  DLManagedTensorVersioned *d = alloc_on((DLDevice){kDLCUDA, 1}, 2, shape);
  float *v = p->dl_tensor.data;
  for (int i = 0; i < 24; i++) v[i] = (float)(i + 1);
  memset(E.shadow(d->dl_tensor.data), 0, 24 * sizeof(float));
  DLTensor s = p->dl_tensor, t = d->dl_tensor;
  s.shape = t.shape = part;
  s.strides = t.strides = strides;
  CHECK_OK(dlb_copy_sync(&s, &t, NULL));
  CHECK_EQ_INT(E.calls("cuMemcpy2DAsync_v2"), 0);
  const float *got = E.shadow(d->dl_tensor.data);
  for (int i = 0; i < 24; i++)
    CHECK(got[i] == (i % 8 < 5 ? (float)(i + 1) : 0.0f));
  dlb__cu.cuDeviceGetAttribute = real_attribute;
  dlb_tensor_release(p);
  dlb_tensor_release(d);
}
