/* test_gpu_info.c -- dlb_gpu_get_info against the emulated CUDA driver and
 * HIP runtime: names, memory, capabilities, and every refusal. */
#include "../emu/emu_control.h"
#include "test.h"

DLB_TEST(gpu_info_cuda_emulated) {
  setenv("EMU_CUDA_DEVICE_MEMORY", "123456789", 1);
  setenv("EMU_CUDA_CONCURRENT_MANAGED", "0", 1);
  emu_cuda();
  dlb_gpu_info info;
  memset(&info, 0x55, sizeof info);
  CHECK_OK(dlb_gpu_get_info((DLDevice){kDLCUDA, 1}, &info));
  CHECK_STR(info.name, "Emulated CUDA GPU 1");
  CHECK(info.total_memory == 123456789u);
  CHECK_EQ_INT(info.managed_memory, 1);
  CHECK_EQ_INT(info.concurrent_managed, 0);
  CHECK_EQ_INT(info.host_register, 1);
  CHECK_EQ_INT(info.ipc, 1);
}

/* Each capability comes from its own attribute; one the driver cannot
 * report (an older driver lacks some) is unknown, -1, not 0. */
DLB_TEST(gpu_info_cuda_capabilities) {
  setenv("EMU_CUDA_MANAGED_MEMORY", "0", 1);
  emu e = emu_cuda();
  dlb_gpu_info info;
  CHECK_OK(dlb_gpu_get_info((DLDevice){kDLCUDA, 0}, &info));
  CHECK_EQ_INT(info.managed_memory, 0);
  CHECK_EQ_INT(info.concurrent_managed, 1);
  CHECK_EQ_INT(info.host_register, 1);
  CHECK_EQ_INT(info.ipc, 1);
  for (int k = 0; k < 4; k++) {
    long before = e.calls("cuDeviceGetAttribute");
    e.fail("cuDeviceGetAttribute", k + 1, 1 /* INVALID_VALUE */);
    CHECK_OK(dlb_gpu_get_info((DLDevice){kDLCUDA, 1}, &info));
    CHECK(e.fail_fired());
    CHECK_EQ_INT(e.calls("cuDeviceGetAttribute") - before, 4);
    CHECK_EQ_INT(info.managed_memory, k == 0 ? -1 : 0);
    CHECK_EQ_INT(info.concurrent_managed, k == 1 ? -1 : 1);
    CHECK_EQ_INT(info.host_register, k == 2 ? -1 : 1);
    CHECK_EQ_INT(info.ipc, k == 3 ? -1 : 1);
  }
}

DLB_TEST(gpu_info_hip_emulated) {
  emu_hip();
  dlb_gpu_info info;
  memset(&info, 0x55, sizeof info);
  CHECK_OK(dlb_gpu_get_info((DLDevice){kDLROCM, 0}, &info));
  CHECK_STR(info.name, "Emulated HIP GPU 0");
  CHECK(info.total_memory == (uint64_t)1 << 30);
  CHECK_EQ_INT(info.managed_memory, 1);
  CHECK_EQ_INT(info.concurrent_managed, 0);
  /* The emulated runtime, like an old ROCm, lacks the attribute. */
  CHECK_EQ_INT(info.host_register, -1);
  CHECK_EQ_INT(info.ipc, 1);
}

DLB_TEST(gpu_info_refusals) {
  emu e = emu_cuda();
  dlb_gpu_info info;
  memset(&info, 0x55, sizeof info);
  dlb_gpu_info before = info;
  CHECK_STATUS(dlb_gpu_get_info((DLDevice){kDLCUDA, 0}, NULL), DLB_E_INVAL);
  CHECK_ERROR_MENTIONS("out is NULL");
  CHECK_STATUS(dlb_gpu_get_info((DLDevice){kDLCUDAManaged, 0}, &info),
               DLB_E_DEVICE);
  CHECK_ERROR_MENTIONS("cuda_managed");
  CHECK_STATUS(dlb_gpu_get_info((DLDevice){kDLCPU, 0}, &info), DLB_E_DEVICE);
  CHECK_STATUS(dlb_gpu_get_info((DLDevice){kDLCUDA, 2}, &info),
               DLB_E_NO_DEVICE);
  CHECK_ERROR_MENTIONS("cuda:2");
  CHECK_STATUS(dlb_gpu_get_info((DLDevice){kDLCUDA, -1}, &info),
               DLB_E_NO_DEVICE);
  e.fail("cuDeviceGetName", 1, 999);
  CHECK_STATUS(dlb_gpu_get_info((DLDevice){kDLCUDA, 0}, &info),
               DLB_E_RUNTIME);
  CHECK_ERROR_MENTIONS("cuDeviceGetName(cuda:0)");
  e.fail("cuDeviceTotalMem_v2", 1, 999);
  CHECK_STATUS(dlb_gpu_get_info((DLDevice){kDLCUDA, 0}, &info),
               DLB_E_RUNTIME);
  CHECK_ERROR_MENTIONS("cuDeviceTotalMem(cuda:0)");
  e.fail("cuDeviceGet", 1, 101);
  CHECK_STATUS(dlb_gpu_get_info((DLDevice){kDLCUDA, 0}, &info),
               DLB_E_RUNTIME);
  CHECK_ERROR_MENTIONS("cuDeviceGet(cuda:0)");
  CHECK(memcmp(&info, &before, sizeof info) == 0);
}

DLB_TEST(gpu_info_hip_refusals) {
  emu e = emu_hip();
  dlb_gpu_info info;
  memset(&info, 0x55, sizeof info);
  dlb_gpu_info before = info;
  e.fail("hipDeviceGetName", 1, 999);
  CHECK_STATUS(dlb_gpu_get_info((DLDevice){kDLROCM, 1}, &info),
               DLB_E_RUNTIME);
  CHECK_ERROR_MENTIONS("hipDeviceGetName(rocm:1)");
  e.fail("hipDeviceTotalMem", 1, 999);
  CHECK_STATUS(dlb_gpu_get_info((DLDevice){kDLROCM, 1}, &info),
               DLB_E_RUNTIME);
  CHECK_ERROR_MENTIONS("hipDeviceTotalMem(rocm:1)");
  CHECK(memcmp(&info, &before, sizeof info) == 0);
}

DLB_TEST(gpu_info_missing_runtime) {
  setenv("DLBRIDGE_HIP_LIBRARY", "/nonexistent/libamdhip64.so.6", 1);
  dlb_gpu_info info;
  CHECK_STATUS(dlb_gpu_get_info((DLDevice){kDLROCM, 0}, &info),
               DLB_E_NO_RUNTIME);
  CHECK_ERROR_MENTIONS("/nonexistent/libamdhip64.so.6");
}
