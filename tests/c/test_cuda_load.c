/* test_cuda_load.c -- loading the CUDA driver: found, missing, not a
 * driver, no device, failing init, symbol versions, once per process. */
#include <pthread.h>
#include <sys/stat.h>
#include <unistd.h>

#include "../emu/emu_control.h"
#include "test.h"

static const DLDevice cuda0 = {kDLCUDA, 0};

DLB_TEST(cuda_load_emulated_driver) {
  emu e = emu_cuda();
  CHECK_OK(dlb_runtime_status(DLB_RUNTIME_CUDA));
  int n = 0, v = 0;
  CHECK_OK(dlb_runtime_device_count(DLB_RUNTIME_CUDA, &n));
  CHECK_EQ_INT(n, 2);
  CHECK_OK(dlb_runtime_version(DLB_RUNTIME_CUDA, &v));
  CHECK_EQ_INT(v, 13000);
  CHECK(strstr(dlb_runtime_library(DLB_RUNTIME_CUDA), "libcuda.so.1") != NULL);
  CHECK_EQ_INT(e.calls("cuInit"), 1);
}

/* A driver reporting more devices than dlbridge addresses: the count
 * says 64, and the ordinals from 64 on are refused naming that count. */
DLB_TEST(cuda_load_more_devices_than_addressed) {
  setenv("EMU_CUDA_REPORTED_DEVICES", "100", 1);
  emu_cuda();
  int n = 0;
  CHECK_OK(dlb_runtime_device_count(DLB_RUNTIME_CUDA, &n));
  CHECK_EQ_INT(n, 64);
  DLManagedTensorVersioned *t = NULL;
  int64_t shape[1] = {4};
  const DLDataType f32 = {kDLFloat, 32, 1};
  CHECK_STATUS(dlb_tensor_alloc((DLDevice){kDLCUDA, 64}, f32, 1, shape, &t),
               DLB_E_NO_DEVICE);
  CHECK_ERROR_MENTIONS("cuda:64 requested; the CUDA runtime ");
  CHECK_ERROR_MENTIONS(" reports 64 devices");
  CHECK(t == NULL);
  CHECK_OK(dlb_tensor_alloc((DLDevice){kDLCUDA, 1}, f32, 1, shape, &t));
  dlb_tensor_release(t);
}

/* Under 64 the count is the driver's. */
DLB_TEST(cuda_load_reports_the_drivers_count) {
  setenv("EMU_CUDA_REPORTED_DEVICES", "63", 1);
  emu_cuda();
  int n = 0;
  CHECK_OK(dlb_runtime_device_count(DLB_RUNTIME_CUDA, &n));
  CHECK_EQ_INT(n, 63);
}

DLB_TEST(cuda_load_missing_library) {
  setenv("DLBRIDGE_CUDA_LIBRARY", "/nonexistent/libcuda.so.1", 1);
  CHECK_STATUS(dlb_runtime_status(DLB_RUNTIME_CUDA), DLB_E_NO_RUNTIME);
  CHECK_ERROR_MENTIONS("DLBRIDGE_CUDA_LIBRARY");
  CHECK_ERROR_MENTIONS("/nonexistent/libcuda.so.1");
  CHECK(dlb_runtime_library(DLB_RUNTIME_CUDA) == NULL);
  int n = 7;
  CHECK_STATUS(dlb_runtime_device_count(DLB_RUNTIME_CUDA, &n),
               DLB_E_NO_RUNTIME);
  CHECK_EQ_INT(n, 7);
  CHECK_STATUS(dlb_runtime_version(DLB_RUNTIME_CUDA, &n), DLB_E_NO_RUNTIME);
  CHECK_EQ_INT(n, 7);
  /* Asking for cuda memory says why it cannot be had. */
  DLManagedTensorVersioned *t = NULL;
  int64_t shape[1] = {4};
  CHECK_STATUS(dlb_tensor_alloc(cuda0, (DLDataType){kDLFloat, 32, 1}, 1, shape,
                                &t),
               DLB_E_NO_RUNTIME);
  CHECK_ERROR_MENTIONS("/nonexistent/libcuda.so.1");
  CHECK(t == NULL);
  /* Without a runtime every address is cpu memory. */
  int x = 0;
  DLDevice d = {kDLCUDA, 5};
  CHECK_OK(dlb_device_of_pointer(&x, &d));
  CHECK_EQ_INT(d.device_type, kDLCPU);
  CHECK_EQ_INT(d.device_id, 0);
}

DLB_TEST(cuda_load_default_names) {
  unsetenv("DLBRIDGE_CUDA_LIBRARY");
  void *real = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
  dlb_status s = dlb_runtime_status(DLB_RUNTIME_CUDA);
  if (real != NULL) return; /* a machine with a driver: nothing to check */
  CHECK_EQ_INT(s, DLB_E_NO_RUNTIME);
  CHECK_ERROR_MENTIONS("CUDA driver not found: tried libcuda.so.1 and "
                       "libcuda.so (install the NVIDIA driver, or set "
                       "DLBRIDGE_CUDA_LIBRARY to its path)");
}

/* Without the variable the usual names are tried first to last: a driver
 * already in the process under its soname is found by the first. */
DLB_TEST(cuda_load_default_names_first_one_first) {
  emu e = emu_cuda();
  unsetenv("DLBRIDGE_CUDA_LIBRARY");
  CHECK_OK(dlb_runtime_status(DLB_RUNTIME_CUDA));
  CHECK_STR(dlb_runtime_library(DLB_RUNTIME_CUDA), "libcuda.so.1");
  CHECK_EQ_INT(e.calls("cuInit"), 1);
}

/* A library whose path is longer than a short buffer (deep environments
 * are) is named whole by dlb_runtime_library. */
DLB_TEST(cuda_load_library_with_a_long_path) {
  char emu_file[PATH_MAX + 64], dir[PATH_MAX], link[PATH_MAX + 64];
  emu_path("libcuda.so.1", emu_file, sizeof emu_file);
  CHECK(realpath(emu_file, link) != NULL);
  snprintf(emu_file, sizeof emu_file, "%s", link);
  snprintf(dir, sizeof dir, "/tmp/dlb-long-XXXXXX");
  CHECK(mkdtemp(dir) != NULL);
  char made[4][PATH_MAX];
  size_t len = strlen(dir);
  for (int i = 0; i < 4; i++) {
    dir[len++] = '/';
    memset(dir + len, 'a' + i, 100);
    len += 100;
    dir[len] = '\0';
    CHECK_EQ_INT(mkdir(dir, 0700), 0);
    snprintf(made[i], sizeof made[i], "%s", dir);
  }
  snprintf(link, sizeof link, "%s/libcuda.so.1", dir);
  CHECK_EQ_INT(symlink(emu_file, link), 0);
  setenv("DLBRIDGE_CUDA_LIBRARY", link, 1);
  CHECK_OK(dlb_runtime_status(DLB_RUNTIME_CUDA));
  CHECK_STR(dlb_runtime_library(DLB_RUNTIME_CUDA), link);
  CHECK(strlen(link) > 400);
  unlink(link);
  for (int i = 3; i >= 0; i--) rmdir(made[i]);
  dir[strlen("/tmp/dlb-long-XXXXXX")] = '\0';
  rmdir(dir);
}

DLB_TEST(cuda_load_status_is_remembered) {
  setenv("DLBRIDGE_CUDA_LIBRARY", "/nonexistent/libcuda.so.1", 1);
  CHECK_STATUS(dlb_runtime_status(DLB_RUNTIME_CUDA), DLB_E_NO_RUNTIME);
  /* Loading happens once: pointing elsewhere later changes nothing. */
  emu_cuda();
  dlb_clear_error();
  CHECK_STATUS(dlb_runtime_status(DLB_RUNTIME_CUDA), DLB_E_NO_RUNTIME);
  CHECK_ERROR_MENTIONS("/nonexistent/libcuda.so.1");
}

DLB_TEST(cuda_load_not_a_driver) {
  char path[PATH_MAX + 64];
  emu_path("libamdhip64.so.6", path, sizeof path);
  setenv("DLBRIDGE_CUDA_LIBRARY", path, 1);
  CHECK_STATUS(dlb_runtime_status(DLB_RUNTIME_CUDA), DLB_E_NO_RUNTIME);
  CHECK_ERROR_MENTIONS("exports no cuInit");
}

DLB_TEST(cuda_load_no_device) {
  setenv("EMU_CUDA_DEVICES", "0", 1);
  emu e = emu_cuda();
  CHECK_STATUS(dlb_runtime_status(DLB_RUNTIME_CUDA), DLB_E_NO_DEVICE);
  CHECK_ERROR_MENTIONS("found no GPU");
  CHECK_ERROR_MENTIONS("CUDA_ERROR_NO_DEVICE");
  DLManagedTensorVersioned *t = NULL;
  int64_t shape[1] = {4};
  CHECK_STATUS(dlb_tensor_alloc((DLDevice){kDLCUDAManaged, 0},
                                (DLDataType){kDLFloat, 32, 1}, 1, shape, &t),
               DLB_E_NO_DEVICE);
  int x = 0;
  DLDevice d;
  CHECK_OK(dlb_device_of_pointer(&x, &d));
  CHECK_EQ_INT(d.device_type, kDLCPU);
  CHECK_EQ_INT(e.live(), 0);
}

DLB_TEST(cuda_load_stub_driver) {
  emu e = emu_cuda();
  e.fail("cuInit", 1, 34); /* CUDA_ERROR_STUB_LIBRARY */
  CHECK_STATUS(dlb_runtime_status(DLB_RUNTIME_CUDA), DLB_E_NO_RUNTIME);
  CHECK_ERROR_MENTIONS("CUDA_ERROR_STUB_LIBRARY");
}

DLB_TEST(cuda_load_init_fails) {
  emu e = emu_cuda();
  e.fail("cuInit", 1, 999);
  CHECK_STATUS(dlb_runtime_status(DLB_RUNTIME_CUDA), DLB_E_RUNTIME);
  CHECK_ERROR_MENTIONS("cuInit returned CUDA_ERROR_UNKNOWN (999)");
}

DLB_TEST(cuda_load_count_fails) {
  emu e = emu_cuda();
  e.fail("cuDeviceGetCount", 1, 999);
  CHECK_STATUS(dlb_runtime_status(DLB_RUNTIME_CUDA), DLB_E_RUNTIME);
  CHECK_ERROR_MENTIONS("cuDeviceGetCount");
}

DLB_TEST(cuda_load_missing_entry_point) {
  setenv("EMU_CUDA_HIDE", "cuMemAllocManaged", 1);
  emu_cuda();
  CHECK_STATUS(dlb_runtime_status(DLB_RUNTIME_CUDA), DLB_E_NO_RUNTIME);
  CHECK_ERROR_MENTIONS("lacks cuMemAllocManaged");
}

/* Each entry point is asked for at the version whose ABI dlbridge calls:
 * the unversioned names are the oldest ABIs (the emulator answers those
 * with stubs that fail), and cuCtxSynchronize takes a context from 13.0. */
DLB_TEST(cuda_load_asks_for_each_abi_version) {
  emu e = emu_cuda();
  CHECK_OK(dlb_runtime_status(DLB_RUNTIME_CUDA));
  CHECK_EQ_INT(e.requested_version("cuMemAlloc"), 3020);
  CHECK_EQ_INT(e.requested_version("cuMemFree"), 3020);
  CHECK_EQ_INT(e.requested_version("cuMemHostRegister"), 6050);
  CHECK_EQ_INT(e.requested_version("cuCtxPushCurrent"), 4000);
  CHECK_EQ_INT(e.requested_version("cuCtxSynchronize"), 2000);
  CHECK_EQ_INT(e.requested_version("cuMemcpy2DAsync"), 3020);
  CHECK_EQ_INT(e.requested_version("cuMemPrefetchAsync"), 12020);
  CHECK_EQ_INT(e.requested_version("cuMemAdvise"), 12020);
  CHECK_EQ_INT(e.requested_version("cuEventDestroy"), 4000);
  /* And what came back works: a device allocation round trip. */
  DLManagedTensorVersioned *t = NULL;
  int64_t shape[1] = {16};
  CHECK_OK(dlb_tensor_alloc(cuda0, (DLDataType){kDLFloat, 32, 1}, 1, shape,
                            &t));
  CHECK_EQ_INT(e.live_kind(EMU_LIVE_DEVICE), 1);
  dlb_tensor_release(t);
  CHECK_EQ_INT(e.live(), 0);
  CHECK_EQ_INT(e.calls("cuMemAlloc"), 0);
}

/* A driver before CUDA 12 has no cuGetProcAddress_v2: the exported _v2
 * names are used. */
DLB_TEST(cuda_load_driver_without_proc_address) {
  emu e = emu_open("libcuda_old.so.1", "DLBRIDGE_CUDA_LIBRARY");
  CHECK(dlsym(e.handle, "cuGetProcAddress_v2") == NULL);
  CHECK_OK(dlb_runtime_status(DLB_RUNTIME_CUDA));
  DLManagedTensorVersioned *t = NULL;
  int64_t shape[1] = {16};
  CHECK_OK(dlb_tensor_alloc((DLDevice){kDLCUDA, 1},
                            (DLDataType){kDLFloat, 32, 1}, 1, shape, &t));
  DLDevice d;
  CHECK_OK(dlb_device_of_pointer(t->dl_tensor.data, &d));
  CHECK_EQ_INT(d.device_type, kDLCUDA);
  CHECK_EQ_INT(d.device_id, 1);
  dlb_tensor_release(t);
  CHECK_EQ_INT(e.calls("cuMemAlloc_v2"), 1);
  CHECK_EQ_INT(e.live(), 0);
}

static void *load_in_thread(void *arg) {
  *(dlb_status *)arg = dlb_runtime_status(DLB_RUNTIME_CUDA);
  return NULL;
}

DLB_TEST(cuda_load_once_across_threads) {
  emu e = emu_cuda();
  pthread_t th[8];
  dlb_status st[8];
  for (int i = 0; i < 8; i++)
    CHECK_EQ_INT(pthread_create(&th[i], NULL, load_in_thread, &st[i]), 0);
  for (int i = 0; i < 8; i++) {
    pthread_join(th[i], NULL);
    CHECK_EQ_INT(st[i], DLB_OK);
  }
  CHECK_EQ_INT(e.calls("cuInit"), 1);
  CHECK_EQ_INT(e.calls("cuDeviceGetCount"), 1);
}

DLB_TEST(cuda_runtime_queries_reject_bad_arguments) {
  CHECK_STATUS(dlb_runtime_status((dlb_runtime)7), DLB_E_INVAL);
  CHECK_ERROR_MENTIONS("runtime is 7");
  CHECK_STATUS(dlb_runtime_device_count(DLB_RUNTIME_CUDA, NULL), DLB_E_INVAL);
  CHECK_STATUS(dlb_runtime_version(DLB_RUNTIME_CUDA, NULL), DLB_E_INVAL);
  CHECK(dlb_runtime_library((dlb_runtime)0) == NULL);
}
