/*
 * cuda_load.c -- starts the CUDA driver at first use (loader.c finds and
 * opens it), resolves every entry point up front, and manages the primary
 * contexts.
 *
 * Entry points come from cuGetProcAddress_v2 with the cudaVersion whose
 * ABI our signature is (an unversioned name is the oldest ABI: cuMemAlloc
 * takes 32-bit sizes), and from dlsym of the explicit _v2 names on drivers
 * older than 12.0.
 */
#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>

#include "cuda_loader.h"
#include "loader.h"

dlb__cu_api dlb__cu;

static void open_once(void);
static dlb_status init_driver(void *h);

static const char *const driver_names[] = {"libcuda.so.1", "libcuda.so",
                                           NULL};

static dlb__loader loader = {
    .runtime = "CUDA driver",
    .env_var = "DLBRIDGE_CUDA_LIBRARY",
    .names = driver_names,
    .install = "install the NVIDIA driver",
    .api = &dlb__cu,
    .api_size = sizeof dlb__cu,
    .open_once = open_once,
    .start = init_driver,
    .once = PTHREAD_ONCE_INIT,
};

static int device_count;
static int driver_version;

pthread_mutex_t dlb__cuda_ctx_lock = PTHREAD_MUTEX_INITIALIZER;
static dlb__cu_context primary[DLB__GPU_MAX_DEVICES];

static const char *result_name(dlb__cu_result r) {
  const char *s = NULL;
  if (dlb__cu.cuGetErrorName == NULL || dlb__cu.cuGetErrorName(r, &s) != 0 ||
      s == NULL)
    return "CUDA_ERROR_UNKNOWN_CODE";
  return s;
}

static const char *result_string(dlb__cu_result r) {
  const char *s = NULL;
  if (dlb__cu.cuGetErrorString == NULL ||
      dlb__cu.cuGetErrorString(r, &s) != 0 || s == NULL)
    return "no description";
  return s;
}

dlb_status dlb__cuda_fail(dlb__cu_result result, const char *fmt, ...) {
  char what[256];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(what, sizeof what, fmt, ap);
  va_end(ap);
  dlb_status s = result == DLB__CUDA_ERROR_OUT_OF_MEMORY ? DLB_E_NOMEM
                 : result == DLB__CUDA_ERROR_NOT_SUPPORTED ? DLB_E_UNSUPPORTED
                                                           : DLB_E_RUNTIME;
  return dlb__fail(s, "%s: %s (%u): %s", what, result_name(result), result,
                   result_string(result));
}

/* Resolves one entry point; NULL when the driver lacks it. */
static void *resolve(void *h, dlb__cu_pfn_cuGetProcAddress_v2 gpa,
                     const char *base, int version, const char *exported) {
  if (gpa == NULL) return dlsym(h, exported);
  void *p = NULL;
  dlb__cu_enum found = DLB__CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND;
  dlb__cu_result r =
      gpa(base, &p, version, DLB__CU_GET_PROC_ADDRESS_LEGACY_STREAM, &found);
  if (r != DLB__CUDA_SUCCESS || found != DLB__CU_GET_PROC_ADDRESS_SUCCESS)
    return NULL;
  return p;
}

/* One entry point to resolve: where its pointer goes, the name
 * cuGetProcAddress_v2 knows it by, the ABI version, the exported name. */
typedef struct {
  void *field;
  const char *base;
  int version;
  const char *exported;
} dlb__cu_entry;

#define DLB__CU_ENTRY(name, base, version, params) \
  {&dlb__cu.name, #base, version, #name},
static const dlb__cu_entry required_entries[] = {
    DLB__CU_REQUIRED(DLB__CU_ENTRY){NULL, NULL, 0, NULL}};
static const dlb__cu_entry optional_entries[] = {
    DLB__CU_OPTIONAL(DLB__CU_ENTRY) DLB__CU_FALLBACK(DLB__CU_ENTRY){
        NULL, NULL, 0, NULL}};
#undef DLB__CU_ENTRY

/* Resolves every entry up to the NULL one. A required one the driver lacks
 * fails the load, naming it; a missing optional one stays NULL. */
static dlb_status resolve_all(void *h, dlb__cu_pfn_cuGetProcAddress_v2 gpa,
                              const dlb__cu_entry *e, int required) {
  for (; e->field != NULL; e++) {
    void *p = resolve(h, gpa, e->base, e->version, e->exported);
    dlb__store_fn(e->field, p);
    if (p == NULL && required)
      return dlb__loader_fail(&loader, DLB_E_NO_RUNTIME,
                              "CUDA driver %s lacks %s (the CUDA %d.%d "
                              "form)",
                              loader.path, e->base, e->version / 1000,
                              e->version % 1000 / 10);
  }
  return DLB_OK;
}

static dlb_status init_driver(void *h) {
  dlb__cu_pfn_cuInit init = NULL;
  dlb__cu_pfn_cuGetProcAddress_v2 gpa = NULL;
  dlb__store_fn(&init, dlsym(h, "cuInit"));
  dlb__store_fn(&gpa, dlsym(h, "cuGetProcAddress_v2"));
  if (init == NULL)
    return dlb__loader_fail(&loader, DLB_E_NO_RUNTIME,
                            "%s is not a CUDA driver: it exports no cuInit",
                            loader.path);
  /* The error strings first, so later failures can name their error. */
  dlb__store_fn(&dlb__cu.cuGetErrorName,
                resolve(h, gpa, "cuGetErrorName", 6000, "cuGetErrorName"));
  dlb__store_fn(&dlb__cu.cuGetErrorString,
                resolve(h, gpa, "cuGetErrorString", 6000, "cuGetErrorString"));
  dlb__cu_result r = init(0);
  if (r == DLB__CUDA_ERROR_NO_DEVICE)
    return dlb__loader_fail(&loader, DLB_E_NO_DEVICE,
                            "CUDA driver %s found no GPU: cuInit returned %s "
                            "(%u)", loader.path, result_name(r), r);
  if (r == DLB__CUDA_ERROR_STUB_LIBRARY ||
      r == DLB__CUDA_ERROR_SYSTEM_DRIVER_MISMATCH)
    return dlb__loader_fail(&loader, DLB_E_NO_RUNTIME,
                            "%s is not a usable CUDA driver: cuInit returned "
                            "%s (%u): %s", loader.path, result_name(r), r,
                            result_string(r));
  if (r != DLB__CUDA_SUCCESS)
    return dlb__loader_fail(&loader, DLB_E_RUNTIME,
                            "CUDA driver %s: cuInit returned %s (%u): %s",
                            loader.path, result_name(r), r, result_string(r));

  dlb_status st = resolve_all(h, gpa, required_entries, 1);
  if (st != DLB_OK) return st;
  (void)resolve_all(h, gpa, optional_entries, 0);

  r = dlb__cu.cuDriverGetVersion(&driver_version);
  if (r != DLB__CUDA_SUCCESS)
    return dlb__loader_fail(&loader, DLB_E_RUNTIME,
                            "CUDA driver %s: cuDriverGetVersion returned %s "
                            "(%u)", loader.path, result_name(r), r);
  int n = 0;
  r = dlb__cu.cuDeviceGetCount(&n);
  if (r != DLB__CUDA_SUCCESS)
    return dlb__loader_fail(&loader, DLB_E_RUNTIME,
                            "CUDA driver %s: cuDeviceGetCount returned %s "
                            "(%u)", loader.path, result_name(r), r);
  if (n <= 0)
    return dlb__loader_fail(&loader, DLB_E_NO_DEVICE,
                            "CUDA driver %s (version %d) reports no GPU",
                            loader.path, driver_version);
  /* dlbridge addresses the first DLB__GPU_MAX_DEVICES; the count says
   * so, for every caller to agree with the ordinals accepted. */
  device_count = n < DLB__GPU_MAX_DEVICES ? n : DLB__GPU_MAX_DEVICES;
  return DLB_OK;
}

static void open_once(void) { dlb__loader_open(&loader); }

dlb_status dlb__cuda_load(void) { return dlb__loader_load(&loader); }
int dlb__cuda_ready(void) { return dlb__loader_ready(&loader); }
int dlb__cuda_count(void) { return device_count; }
int dlb__cuda_version(void) { return driver_version; }
const char *dlb__cuda_library(void) { return loader.path; }

static dlb_status primary_context(int device, dlb__cu_context *out) {
  dlb__cu_context c = __atomic_load_n(&primary[device], __ATOMIC_ACQUIRE);
  if (c != NULL) {
    *out = c;
    return DLB_OK;
  }
  dlb_status s = DLB_OK;
  dlb__fork_guard();
  pthread_mutex_lock(&dlb__cuda_ctx_lock);
  c = primary[device];
  if (c == NULL) {
    dlb__cu_device dev = 0;
    dlb__cu_result r = dlb__cu.cuDeviceGet(&dev, device);
    if (r == DLB__CUDA_SUCCESS) r = dlb__cu.cuDevicePrimaryCtxRetain(&c, dev);
    if (r != DLB__CUDA_SUCCESS)
      s = dlb__cuda_fail(r, "retaining the primary context of cuda:%d",
                         device);
    else
      __atomic_store_n(&primary[device], c, __ATOMIC_RELEASE);
  }
  pthread_mutex_unlock(&dlb__cuda_ctx_lock);
  if (s == DLB_OK) *out = c;
  return s;
}

dlb_status dlb__cuda_enter(int device, int *pushed) {
  dlb__cu_context want = NULL, cur = NULL;
  dlb_status s = primary_context(device, &want);
  if (s != DLB_OK) return s;
  dlb__cu_result r = dlb__cu.cuCtxGetCurrent(&cur);
  if (r != DLB__CUDA_SUCCESS) return dlb__cuda_fail(r, "cuCtxGetCurrent");
  if (cur == want) {
    *pushed = 0;
    return DLB_OK;
  }
  r = dlb__cu.cuCtxPushCurrent_v2(want);
  if (r != DLB__CUDA_SUCCESS)
    return dlb__cuda_fail(r, "cuCtxPushCurrent(primary context of cuda:%d)",
                          device);
  *pushed = 1;
  return DLB_OK;
}

void dlb__cuda_leave(int pushed) {
  if (!pushed) return;
  dlb__cu_context popped = NULL;
  /* Nothing useful can be done if popping fails: the push succeeded, so
   * the driver's stack holds our context on top. */
  (void)dlb__cu.cuCtxPopCurrent_v2(&popped);
}

dlb_status dlb__cuda_attribute(int device, dlb__cu_enum attr, const char *name,
                               int *out) {
  dlb__cu_device dev = 0;
  dlb__cu_result r = dlb__cu.cuDeviceGet(&dev, device);
  if (r == DLB__CUDA_SUCCESS) r = dlb__cu.cuDeviceGetAttribute(out, attr, dev);
  if (r != DLB__CUDA_SUCCESS)
    return dlb__cuda_fail(r, "cuDeviceGetAttribute(%s, cuda:%d)", name,
                          device);
  return DLB_OK;
}

dlb_status dlb__cuda_query_active(int device, int *active) {
  dlb__cu_device dev = 0;
  unsigned flags = 0;
  int on = 0;
  dlb__cu_result r = dlb__cu.cuDeviceGet(&dev, device);
  if (r != DLB__CUDA_SUCCESS)
    return dlb__cuda_fail(r, "cuDeviceGet(cuda:%d)", device);
  r = dlb__cu.cuDevicePrimaryCtxGetState(dev, &flags, &on);
  if (r != DLB__CUDA_SUCCESS)
    return dlb__cuda_fail(r, "cuDevicePrimaryCtxGetState(cuda:%d)", device);
  *active = on != 0;
  return DLB_OK;
}

int dlb__cuda_active(int device) {
  int active = 1;
  if (dlb__cuda_query_active(device, &active) != DLB_OK) return 1;
  return active;
}
