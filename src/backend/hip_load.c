/*
 * hip_load.c -- opens the HIP runtime at first use, resolves every entry
 * point up front, and switches the current device around each call.
 */
#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "hip_loader.h"

#define MESSAGE_MAX 512

dlb__hip_api dlb__hi;

static pthread_once_t load_once = PTHREAD_ONCE_INIT;
static dlb_status load_status;
static char load_message[MESSAGE_MAX];
static char library_path[256];
static int device_count;
static int runtime_version;

static const char *error_name(dlb__hip_error e) {
  const char *s = dlb__hi.hipGetErrorName != NULL ? dlb__hi.hipGetErrorName(e)
                                                  : NULL;
  return s != NULL ? s : "hipErrorUnknownCode";
}

static const char *error_string(dlb__hip_error e) {
  const char *s =
      dlb__hi.hipGetErrorString != NULL ? dlb__hi.hipGetErrorString(e) : NULL;
  return s != NULL ? s : "no description";
}

dlb_status dlb__hip_fail(dlb__hip_error error, const char *fmt, ...) {
  char what[256];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(what, sizeof what, fmt, ap);
  va_end(ap);
  /* HIP keeps the error for hipGetLastError; it is reported now. */
  if (dlb__hi.hipGetLastError != NULL) (void)dlb__hi.hipGetLastError();
  dlb_status s = error == DLB__HIP_ERROR_OUT_OF_MEMORY ? DLB_E_NOMEM
                 : error == DLB__HIP_ERROR_NOT_SUPPORTED ? DLB_E_UNSUPPORTED
                                                         : DLB_E_RUNTIME;
  return dlb__fail(s, "%s: %s (%d): %s", what, error_name(error), error,
                   error_string(error));
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

static void *open_runtime(dlb_status *status) {
  const char *env = getenv("DLBRIDGE_HIP_LIBRARY");
  if (env != NULL && env[0] != '\0') {
    void *h = dlopen(env, RTLD_NOW | RTLD_LOCAL);
    if (h == NULL) {
      const char *e = dlerror();
      *status = load_fail(DLB_E_NO_RUNTIME,
                          "HIP runtime not loaded from DLBRIDGE_HIP_LIBRARY="
                          "\"%.200s\": %.200s",
                          env, e != NULL ? e : "unknown error");
      return NULL;
    }
    snprintf(library_path, sizeof library_path, "%s", env);
    return h;
  }
  /* Newest first; the unversioned name exists only with the -dev files. */
  static const char *const names[] = {"libamdhip64.so.7", "libamdhip64.so.6",
                                      "libamdhip64.so.5", "libamdhip64.so"};
  for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
    void *h = dlopen(names[i], RTLD_NOW | RTLD_LOCAL);
    if (h != NULL) {
      snprintf(library_path, sizeof library_path, "%s", names[i]);
      return h;
    }
  }
  *status = load_fail(DLB_E_NO_RUNTIME,
                      "HIP runtime not found: tried libamdhip64.so.7, .so.6, "
                      ".so.5 and libamdhip64.so (install ROCm, or set "
                      "DLBRIDGE_HIP_LIBRARY to its path)");
  return NULL;
}

_Static_assert(sizeof(void *) == sizeof(void (*)(void)),
               "function pointers must be pointer-sized");
static void store_fn(void *field, void *p) { memcpy(field, &p, sizeof p); }

static dlb_status init_runtime(void *h) {
#define DLB__HIP_RESOLVE(name, ret, params)                               \
  store_fn(&dlb__hi.name, dlsym(h, #name));                               \
  if (dlb__hi.name == NULL && strcmp(#name, "hipHostMalloc") == 0)        \
    store_fn(&dlb__hi.name, dlsym(h, "hipHostAlloc"));                    \
  if (dlb__hi.name == NULL)                                               \
    return load_fail(DLB_E_NO_RUNTIME, "%s is not a usable HIP runtime: " \
                     "it exports no %s", library_path, #name);
  /* hipHostAlloc replaces the deprecated hipHostMalloc in the newest
   * releases, with the same signature and flag values. */
  DLB__HIP_REQUIRED(DLB__HIP_RESOLVE)
#undef DLB__HIP_RESOLVE
  dlb__hip_error e = dlb__hi.hipInit(0);
  if (e == DLB__HIP_ERROR_NO_DEVICE)
    return load_fail(DLB_E_NO_DEVICE,
                     "HIP runtime %s found no GPU: hipInit returned %s (%d)",
                     library_path, error_name(e), e);
  if (e == DLB__HIP_ERROR_INSUFFICIENT_DRIVER)
    return load_fail(DLB_E_NO_RUNTIME,
                     "HIP runtime %s has no usable driver: hipInit returned "
                     "%s (%d)", library_path, error_name(e), e);
  if (e != DLB__HIP_SUCCESS)
    return load_fail(DLB_E_RUNTIME, "HIP runtime %s: hipInit returned %s "
                     "(%d): %s", library_path, error_name(e), e,
                     error_string(e));
  e = dlb__hi.hipRuntimeGetVersion(&runtime_version);
  if (e != DLB__HIP_SUCCESS)
    return load_fail(DLB_E_RUNTIME, "HIP runtime %s: hipRuntimeGetVersion "
                     "returned %s (%d)", library_path, error_name(e), e);
  int n = 0;
  e = dlb__hi.hipGetDeviceCount(&n);
  if (e == DLB__HIP_ERROR_NO_DEVICE || (e == DLB__HIP_SUCCESS && n <= 0))
    return load_fail(DLB_E_NO_DEVICE, "HIP runtime %s (version %d) reports "
                     "no GPU", library_path, runtime_version);
  if (e != DLB__HIP_SUCCESS)
    return load_fail(DLB_E_RUNTIME, "HIP runtime %s: hipGetDeviceCount "
                     "returned %s (%d)", library_path, error_name(e), e);
  device_count = n;
  return DLB_OK;
}

static void load_runtime(void) {
  dlb_status s = DLB_OK;
  void *h = open_runtime(&s);
  if (h == NULL) {
    load_status = s;
    return;
  }
  load_status = init_runtime(h);
  if (load_status != DLB_OK) {
    memset(&dlb__hi, 0, sizeof dlb__hi);
    dlclose(h);
  }
}

dlb_status dlb__hip_load(void) {
  pthread_once(&load_once, load_runtime);
  if (load_status != DLB_OK) return dlb__fail(load_status, "%s", load_message);
  return DLB_OK;
}

int dlb__hip_ready(void) {
  pthread_once(&load_once, load_runtime);
  return load_status == DLB_OK;
}

int dlb__hip_count(void) { return device_count; }
int dlb__hip_version(void) { return runtime_version; }
const char *dlb__hip_library(void) { return library_path; }

/* HIP offers no cheap "has this process used the device" query; the
 * runtime initialises every device at hipInit anyway. */
int dlb__hip_active(int device) {
  (void)device;
  return 1;
}

dlb_status dlb__hip_enter(int device, int *saved) {
  int cur = 0;
  dlb__hip_error e = dlb__hi.hipGetDevice(&cur);
  if (e != DLB__HIP_SUCCESS) return dlb__hip_fail(e, "hipGetDevice");
  if (cur == device) {
    *saved = -1;
    return DLB_OK;
  }
  e = dlb__hi.hipSetDevice(device);
  if (e != DLB__HIP_SUCCESS)
    return dlb__hip_fail(e, "hipSetDevice(%d)", device);
  *saved = cur;
  return DLB_OK;
}

void dlb__hip_leave(int saved) {
  /* Restoring a device that was current a moment ago cannot fail in a way
   * the caller could act on. */
  if (saved >= 0) (void)dlb__hi.hipSetDevice(saved);
}
