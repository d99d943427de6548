/* test_hip_load.c -- loading HIP, and its memory: allocation, pointer
 * classification across the ROCm 5 and 6 attribute layouts, pinning. */
#include "../emu/emu_fns.h"
#include "test.h"

static const DLDataType f32 = {kDLFloat, 32, 1};
static const DLDevice rocm0 = {kDLROCM, 0}, rocm1 = {kDLROCM, 1};
static const DLDevice rocm_host = {kDLROCMHost, 0};

DLB_TEST(hip_load_emulated_runtime) {
  emu e = emu_hip();
  CHECK_OK(dlb_runtime_status(DLB_RUNTIME_HIP));
  int n = 0, v = 0;
  CHECK_OK(dlb_runtime_device_count(DLB_RUNTIME_HIP, &n));
  CHECK_EQ_INT(n, 2);
  CHECK_OK(dlb_runtime_version(DLB_RUNTIME_HIP, &v));
  CHECK_EQ_INT(v, 60200000);
  CHECK(strstr(dlb_runtime_library(DLB_RUNTIME_HIP), "libamdhip64.so.6"));
  CHECK_EQ_INT(e.calls("hipInit"), 1);
}

/* As for CUDA: at most 64 devices, whatever the runtime reports. */
DLB_TEST(hip_load_more_devices_than_addressed) {
  setenv("EMU_HIP_REPORTED_DEVICES", "65", 1);
  emu_hip();
  int n = 0;
  CHECK_OK(dlb_runtime_device_count(DLB_RUNTIME_HIP, &n));
  CHECK_EQ_INT(n, 64);
  DLManagedTensorVersioned *t = NULL;
  int64_t shape[1] = {4};
  CHECK_STATUS(dlb_tensor_alloc((DLDevice){kDLROCM, 64}, f32, 1, shape, &t),
               DLB_E_NO_DEVICE);
  CHECK_ERROR_MENTIONS(" reports 64 devices");
  CHECK(t == NULL);
}

DLB_TEST(hip_load_missing_library) {
  setenv("DLBRIDGE_HIP_LIBRARY", "/nonexistent/libamdhip64.so", 1);
  CHECK_STATUS(dlb_runtime_status(DLB_RUNTIME_HIP), DLB_E_NO_RUNTIME);
  CHECK_ERROR_MENTIONS("DLBRIDGE_HIP_LIBRARY");
  DLManagedTensorVersioned *t = NULL;
  int64_t shape[1] = {4};
  CHECK_STATUS(dlb_tensor_alloc(rocm0, f32, 1, shape, &t), DLB_E_NO_RUNTIME);
  CHECK(t == NULL);
}

DLB_TEST(hip_load_default_names) {
  unsetenv("DLBRIDGE_HIP_LIBRARY");
  void *real = dlopen("libamdhip64.so.6", RTLD_NOW | RTLD_LOCAL);
  dlb_status s = dlb_runtime_status(DLB_RUNTIME_HIP);
  if (real != NULL) return;
  CHECK_EQ_INT(s, DLB_E_NO_RUNTIME);
  CHECK_ERROR_MENTIONS("HIP runtime not found: tried libamdhip64.so.7, "
                       "libamdhip64.so.6, libamdhip64.so.5 and libamdhip64.so "
                       "(install ROCm, or set DLBRIDGE_HIP_LIBRARY to its "
                       "path)");
}

DLB_TEST(hip_load_not_hip) {
  char path[PATH_MAX + 64];
  emu_path("libcuda.so.1", path, sizeof path);
  setenv("DLBRIDGE_HIP_LIBRARY", path, 1);
  CHECK_STATUS(dlb_runtime_status(DLB_RUNTIME_HIP), DLB_E_NO_RUNTIME);
  CHECK_ERROR_MENTIONS("exports no hipInit");
}

DLB_TEST(hip_load_no_device) {
  setenv("EMU_HIP_DEVICES", "0", 1);
  emu_hip();
  CHECK_STATUS(dlb_runtime_status(DLB_RUNTIME_HIP), DLB_E_NO_DEVICE);
  CHECK_ERROR_MENTIONS("hipErrorNoDevice");
}

DLB_TEST(hip_load_init_fails) {
  emu e = emu_hip();
  e.fail("hipInit", 1, 999);
  CHECK_STATUS(dlb_runtime_status(DLB_RUNTIME_HIP), DLB_E_RUNTIME);
  CHECK_ERROR_MENTIONS("hipInit returned hipErrorUnknown (999)");
}

DLB_TEST(hip_alloc_every_kind) {
  emu e = emu_hip();
  int64_t shape[2] = {3, 5};
  static const DLDevice kinds[] = {
      {kDLROCM, 0}, {kDLROCM, 1}, {kDLROCMHost, 0}};
  for (int k = 0; k < 3; k++) {
    DLManagedTensorVersioned *t = NULL;
    CHECK_OK(dlb_tensor_alloc(kinds[k], f32, 2, shape, &t));
    CHECK(dlb_device_equal(t->dl_tensor.device, kinds[k]));
    DLDevice d;
    CHECK_OK(dlb_device_of_pointer((char *)t->dl_tensor.data + 40, &d));
    CHECK(dlb_device_equal(d, kinds[k]));
    /* The current device is put back. */
    CHECK_EQ_INT(e.context_depth(), 0);
    dlb_tensor_release(t);
  }
  CHECK_EQ_INT(e.calls("hipFree"), 2);
  CHECK_EQ_INT(e.calls("hipHostFree"), 1);
  CHECK_STATUS(dlb_tensor_alloc((DLDevice){kDLROCM, 2}, f32, 2, shape, NULL),
               DLB_E_INVAL);
  DLManagedTensorVersioned *t = NULL;
  CHECK_STATUS(dlb_tensor_alloc((DLDevice){kDLROCM, 2}, f32, 2, shape, &t),
               DLB_E_NO_DEVICE);
  CHECK_ERROR_MENTIONS("rocm:2 requested");
  e.fail("hipMalloc", 1, 2);
  CHECK_STATUS(dlb_tensor_alloc(rocm1, f32, 2, shape, &t), DLB_E_NOMEM);
  CHECK_ERROR_MENTIONS("hipMalloc(60 bytes) on rocm:1");
  e.fail("hipHostMalloc", 1, 999);
  CHECK_STATUS(dlb_tensor_alloc(rocm_host, f32, 2, shape, &t), DLB_E_RUNTIME);
  CHECK_ERROR_MENTIONS("hipErrorUnknown");
  CHECK(t == NULL);
  CHECK_EQ_INT(e.live(), 0);
}

static dlb_status alloc_hip_kinds(void *ctx) {
  (void)ctx;
  int64_t shape[1] = {16};
  static const DLDevice kinds[] = {{kDLROCM, 1}, {kDLROCMHost, 0}};
  for (int k = 0; k < 2; k++) {
    DLManagedTensorVersioned *t = NULL;
    dlb_status s = dlb_tensor_alloc(kinds[k], f32, 1, shape, &t);
    if (s != DLB_OK) return s;
    dlb_tensor_release(t);
  }
  return DLB_OK;
}

DLB_TEST(hip_alloc_every_runtime_call_failing) {
  emu e = emu_hip();
  CHECK_OK(dlb_runtime_status(DLB_RUNTIME_HIP));
  CHECK(dlb_test_oom_loop(alloc_hip_kinds, NULL) > 0);
  for (int n = 1; n < 1000; n++) {
    e.fail(NULL, n, 999);
    dlb_status s = alloc_hip_kinds(NULL);
    if (!e.fail_fired()) {
      CHECK_OK(s);
      break;
    }
    CHECK_EQ_INT(e.live(), 0);
  }
}

/* The pointer-attribute struct changed its values in ROCm 6.0, and
 * memory HIP never saw is an error before 6.2 (cleared afterwards, so
 * the caller's next hipGetLastError is not ours). */
static void classify_all(const char *version) {
  setenv("EMU_HIP_VERSION", version, 1);
  emu e = emu_hip();
  CHECK_OK(dlb_runtime_status(DLB_RUNTIME_HIP));
  hip_fns hip = hip_fns_of(&e);
  int64_t shape[1] = {64};
  DLManagedTensorVersioned *dev = NULL, *host = NULL;
  CHECK_OK(dlb_tensor_alloc(rocm1, f32, 1, shape, &dev));
  CHECK_OK(dlb_tensor_alloc(rocm_host, f32, 1, shape, &host));
  void *man = NULL;
  CHECK_EQ_INT(hip.hipMallocManaged(&man, 256, 1), 0);
  char *heap = malloc(256);
  DLDevice d;
  CHECK_OK(dlb_device_of_pointer(heap, &d));
  CHECK_EQ_INT(d.device_type, kDLCPU);
  CHECK_EQ_INT(hip.hipGetLastError(), 0);
  CHECK_OK(dlb_device_of_pointer((char *)dev->dl_tensor.data + 8, &d));
  CHECK_EQ_INT(d.device_type, kDLROCM);
  CHECK_EQ_INT(d.device_id, 1);
  CHECK_OK(dlb_device_of_pointer(host->dl_tensor.data, &d));
  CHECK_EQ_INT(d.device_type, kDLROCMHost);
  CHECK_OK(dlb_device_of_pointer(man, &d));
  CHECK_EQ_INT(d.device_type, kDLROCMHost);
  CHECK_EQ_INT(hip.hipHostRegister(heap, 256, 0), 0);
  CHECK_OK(dlb_device_of_pointer(heap + 255, &d));
  CHECK_EQ_INT(d.device_type, kDLROCMHost);
  CHECK_EQ_INT(hip.hipHostUnregister(heap), 0);
  /* HIP managed memory labelled rocm:0 is harmless; correctable. */
  DLTensor t = dev->dl_tensor;
  t.data = man;
  t.device = rocm0;
  DLDevice out;
  CHECK_OK(dlb_tensor_check_device(&t, 0, &out));
  CHECK_EQ_INT(out.device_type, kDLROCM);
  CHECK_OK(dlb_tensor_check_device(&t, DLB_LABEL_CORRECT, &out));
  CHECK_EQ_INT(out.device_type, kDLROCMHost);
  /* Pinned memory that is not managed, labelled rocm:0, is not: a GPU
   * would have to reach it through a mapping the label does not ask for. */
  t.data = host->dl_tensor.data;
  CHECK_STATUS(dlb_tensor_check_device(&t, DLB_LABEL_CORRECT, &out),
               DLB_E_DEVICE);
  CHECK_ERROR_MENTIONS("device label rocm:0 contradicts");
  /* Device memory labelled rocm_host is not. */
  t.data = dev->dl_tensor.data;
  t.device = rocm_host;
  CHECK_STATUS(dlb_tensor_check_device(&t, DLB_LABEL_CORRECT, &out),
               DLB_E_DEVICE);
  CHECK_ERROR_MENTIONS("which is rocm:1");
  e.fail("hipPointerGetAttributes", 1, 999);
  CHECK_STATUS(dlb_device_of_pointer(heap, &d), DLB_E_RUNTIME);
  CHECK_EQ_INT(hip.hipGetLastError(), 0);
  CHECK_EQ_INT(hip.hipFree(man), 0);
  free(heap);
  dlb_tensor_release(dev);
  dlb_tensor_release(host);
  CHECK_EQ_INT(e.live(), 0);
}

DLB_TEST(hip_classify_rocm5) { classify_all("50200000"); }
DLB_TEST(hip_classify_rocm6_0) { classify_all("60000000"); }
DLB_TEST(hip_classify_rocm6_2) { classify_all("60200000"); }

DLB_TEST(hip_pin_cpu_tensor) {
  emu e = emu_hip();
  int64_t shape[1] = {100};
  DLManagedTensorVersioned *t = NULL, *p = NULL, *q = NULL;
  CHECK_OK(dlb_tensor_alloc((DLDevice){kDLCPU, 0}, f32, 1, shape, &t));
  CHECK_OK(dlb_tensor_pin(t, kDLROCMHost, &p));
  CHECK_OK(dlb_tensor_pin(t, kDLROCMHost, &q));
  CHECK_EQ_INT(p->dl_tensor.device.device_type, kDLROCMHost);
  CHECK_EQ_INT(e.calls("hipHostRegister"), 1);
  DLDevice d;
  CHECK_OK(dlb_device_of_pointer(t->dl_tensor.data, &d));
  CHECK_EQ_INT(d.device_type, kDLROCMHost);
  dlb_tensor_release(t);
  dlb_tensor_release(p);
  CHECK_EQ_INT(e.live_kind(EMU_LIVE_REGISTERED), 1);
  dlb_tensor_release(q);
  CHECK_EQ_INT(e.live(), 0);
  /* Pinned already by someone else: accepted and left alone. */
  hip_fns hip = hip_fns_of(&e);
  void *pinned = NULL;
  CHECK_EQ_INT(hip.hipHostMalloc(&pinned, 400, 0), 0);
  DLTensor desc;
  memset(&desc, 0, sizeof desc);
  desc.data = pinned;
  desc.device = (DLDevice){kDLCPU, 0};
  desc.ndim = 1;
  desc.dtype = f32;
  desc.shape = shape;
  CHECK_OK(dlb_tensor_wrap(&desc, 0, NULL, NULL, &t));
  CHECK_OK(dlb_tensor_pin(t, kDLROCMHost, &p));
  dlb_tensor_release(p);
  dlb_tensor_release(t);
  CHECK_EQ_INT(e.calls("hipHostUnregister"), 1);
  CHECK_EQ_INT(hip.hipHostFree(pinned), 0);
  /* A refusal leaves nothing behind. */
  CHECK_OK(dlb_tensor_alloc((DLDevice){kDLCPU, 0}, f32, 1, shape, &t));
  e.fail("hipHostRegister", 1, 999);
  CHECK_STATUS(dlb_tensor_pin(t, kDLROCMHost, &p), DLB_E_RUNTIME);
  CHECK_ERROR_MENTIONS("hipHostRegister");
  dlb_tensor_release(t);
  CHECK_EQ_INT(e.live(), 0);
}
