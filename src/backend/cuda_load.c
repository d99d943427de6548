/*
 * cuda_load.c -- opens the CUDA driver at first use, resolves every entry
 * point up front, and manages the primary contexts.
 *
 * Entry points come from cuGetProcAddress_v2 with the cudaVersion whose
 * ABI our signature is (an unversioned name is the oldest ABI: cuMemAlloc
 * takes 32-bit sizes), and from dlsym of the explicit _v2 names on drivers
 * older than 12.0.
 */
#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cuda_loader.h"

#define MESSAGE_MAX 512

dlb__cu_api dlb__cu;

static pthread_once_t load_once = PTHREAD_ONCE_INIT;
static dlb_status load_status;
static char load_message[MESSAGE_MAX];
static char library_path[256];
static int device_count;
static int driver_version;

static pthread_mutex_t ctx_lock = PTHREAD_MUTEX_INITIALIZER;
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

static dlb_status load_fail(dlb_status s, const char *fmt, ...)
    DLB__PRINTF(2, 3);
static dlb_status load_fail(dlb_status s, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(load_message, sizeof load_message, fmt, ap);
  va_end(ap);
  return s;
}

/* Opens the library named by DLBRIDGE_CUDA_LIBRARY, or the driver's usual
 * names. */
static void *open_driver(dlb_status *status) {
  const char *env = getenv("DLBRIDGE_CUDA_LIBRARY");
  if (env != NULL && env[0] != '\0') {
    void *h = dlopen(env, RTLD_NOW | RTLD_LOCAL);
    if (h == NULL) {
      const char *e = dlerror();
      *status = load_fail(DLB_E_NO_RUNTIME,
                          "CUDA driver not loaded from DLBRIDGE_CUDA_LIBRARY="
                          "\"%.200s\": %.200s",
                          env, e != NULL ? e : "unknown error");
      return NULL;
    }
    snprintf(library_path, sizeof library_path, "%s", env);
    return h;
  }
  static const char *const names[] = {"libcuda.so.1", "libcuda.so"};
  for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
    void *h = dlopen(names[i], RTLD_NOW | RTLD_LOCAL);
    if (h != NULL) {
      snprintf(library_path, sizeof library_path, "%s", names[i]);
      return h;
    }
  }
  *status = load_fail(DLB_E_NO_RUNTIME,
                      "CUDA driver not found: tried libcuda.so.1 and "
                      "libcuda.so (install the NVIDIA driver, or set "
                      "DLBRIDGE_CUDA_LIBRARY to its path)");
  return NULL;
}

/* ISO C has no conversion between object and function pointers; dlsym
 * and cuGetProcAddress hand out the latter as the former. */
_Static_assert(sizeof(void *) == sizeof(void (*)(void)),
               "function pointers must be pointer-sized");
static void store_fn(void *field, void *p) { memcpy(field, &p, sizeof p); }

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

static dlb_status init_driver(void *h) {
  dlb__cu_pfn_cuInit init = NULL;
  dlb__cu_pfn_cuGetProcAddress_v2 gpa = NULL;
  store_fn(&init, dlsym(h, "cuInit"));
  store_fn(&gpa, dlsym(h, "cuGetProcAddress_v2"));
  if (init == NULL)
    return load_fail(DLB_E_NO_RUNTIME,
                     "%s is not a CUDA driver: it exports no cuInit",
                     library_path);
  /* The error strings first, so later failures can name their error. */
  store_fn(&dlb__cu.cuGetErrorName,
           resolve(h, gpa, "cuGetErrorName", 6000, "cuGetErrorName"));
  store_fn(&dlb__cu.cuGetErrorString,
           resolve(h, gpa, "cuGetErrorString", 6000, "cuGetErrorString"));
  dlb__cu_result r = init(0);
  if (r == DLB__CUDA_ERROR_NO_DEVICE)
    return load_fail(DLB_E_NO_DEVICE,
                     "CUDA driver %s found no GPU: cuInit returned %s (%u)",
                     library_path, result_name(r), r);
  if (r == DLB__CUDA_ERROR_STUB_LIBRARY ||
      r == DLB__CUDA_ERROR_SYSTEM_DRIVER_MISMATCH)
    return load_fail(DLB_E_NO_RUNTIME,
                     "%s is not a usable CUDA driver: cuInit returned %s "
                     "(%u): %s",
                     library_path, result_name(r), r, result_string(r));
  if (r != DLB__CUDA_SUCCESS)
    return load_fail(DLB_E_RUNTIME, "CUDA driver %s: cuInit returned %s "
                     "(%u): %s", library_path, result_name(r), r,
                     result_string(r));

#define DLB__CU_RESOLVE(name, base, version, params)                       \
  store_fn(&dlb__cu.name, resolve(h, gpa, #base, version, #name));         \
  if (dlb__cu.name == NULL && required)                                    \
    return load_fail(DLB_E_NO_RUNTIME,                                     \
                     "CUDA driver %s lacks %s (the CUDA %d.%d form)",      \
                     library_path, #base, version / 1000,                  \
                     version % 1000 / 10);
  int required = 1;
  DLB__CU_REQUIRED(DLB__CU_RESOLVE)
  required = 0;
  DLB__CU_OPTIONAL(DLB__CU_RESOLVE)
  DLB__CU_FALLBACK(DLB__CU_RESOLVE)
#undef DLB__CU_RESOLVE

  r = dlb__cu.cuDriverGetVersion(&driver_version);
  if (r != DLB__CUDA_SUCCESS)
    return load_fail(DLB_E_RUNTIME, "CUDA driver %s: cuDriverGetVersion "
                     "returned %s (%u)", library_path, result_name(r), r);
  int n = 0;
  r = dlb__cu.cuDeviceGetCount(&n);
  if (r != DLB__CUDA_SUCCESS)
    return load_fail(DLB_E_RUNTIME, "CUDA driver %s: cuDeviceGetCount "
                     "returned %s (%u)", library_path, result_name(r), r);
  if (n <= 0)
    return load_fail(DLB_E_NO_DEVICE, "CUDA driver %s (version %d) reports "
                     "no GPU", library_path, driver_version);
  device_count = n;
  return DLB_OK;
}

static void load_driver(void) {
  dlb_status s = DLB_OK;
  void *h = open_driver(&s);
  if (h == NULL) {
    load_status = s;
    return;
  }
  load_status = init_driver(h);
  if (load_status != DLB_OK) {
    memset(&dlb__cu, 0, sizeof dlb__cu);
    dlclose(h);
  }
}

dlb_status dlb__cuda_load(void) {
  pthread_once(&load_once, load_driver);
  if (load_status != DLB_OK) return dlb__fail(load_status, "%s", load_message);
  return DLB_OK;
}

int dlb__cuda_ready(void) {
  pthread_once(&load_once, load_driver);
  return load_status == DLB_OK;
}

int dlb__cuda_count(void) { return device_count; }
int dlb__cuda_version(void) { return driver_version; }
const char *dlb__cuda_library(void) { return library_path; }

static dlb_status primary_context(int device, dlb__cu_context *out) {
  dlb__cu_context c = __atomic_load_n(&primary[device], __ATOMIC_ACQUIRE);
  if (c != NULL) {
    *out = c;
    return DLB_OK;
  }
  dlb_status s = DLB_OK;
  pthread_mutex_lock(&ctx_lock);
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
  pthread_mutex_unlock(&ctx_lock);
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

int dlb__cuda_active(int device) {
  dlb__cu_device dev = 0;
  unsigned flags = 0;
  int active = 0;
  if (dlb__cu.cuDeviceGet(&dev, device) != DLB__CUDA_SUCCESS ||
      dlb__cu.cuDevicePrimaryCtxGetState(dev, &flags, &active) !=
          DLB__CUDA_SUCCESS)
    return 0;
  return active != 0;
}
