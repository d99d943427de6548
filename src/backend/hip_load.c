/*
 * hip_load.c -- starts the HIP runtime at first use (loader.c finds and
 * opens it), resolves every entry point up front, and switches the current
 * device around each call.
 */
#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>

#include "hip_loader.h"
#include "loader.h"

dlb__hip_api dlb__hi;

static void open_once(void);
static dlb_status init_runtime(void *h);

/* Newest first; the unversioned name exists only with the -dev files. */
static const char *const runtime_names[] = {
    "libamdhip64.so.7", "libamdhip64.so.6", "libamdhip64.so.5",
    "libamdhip64.so", NULL};

static dlb__loader loader = {
    .runtime = "HIP runtime",
    .env_var = "DLBRIDGE_HIP_LIBRARY",
    .names = runtime_names,
    .install = "install ROCm",
    .api = &dlb__hi,
    .api_size = sizeof dlb__hi,
    .open_once = open_once,
    .start = init_runtime,
    .once = PTHREAD_ONCE_INIT,
};

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

/* One entry point to resolve: where its pointer goes, its exported name. */
typedef struct {
  void *field;
  const char *name;
} dlb__hip_entry;

#define DLB__HIP_ENTRY(name, ret, params) {&dlb__hi.name, #name},
static const dlb__hip_entry required_entries[] = {
    DLB__HIP_REQUIRED(DLB__HIP_ENTRY){NULL, NULL}};
/* Entry points a runtime may lack (IPC): NULL when it does. */
static const dlb__hip_entry optional_entries[] = {
    DLB__HIP_OPTIONAL(DLB__HIP_ENTRY){NULL, NULL}};
#undef DLB__HIP_ENTRY

static dlb_status init_runtime(void *h) {
  /* hipHostAlloc replaces the deprecated hipHostMalloc in the newest
   * releases, with the same signature and flag values. */
  for (const dlb__hip_entry *e = required_entries; e->field != NULL; e++) {
    void *p = dlsym(h, e->name);
    if (p == NULL && e->field == (void *)&dlb__hi.hipHostMalloc)
      p = dlsym(h, "hipHostAlloc");
    dlb__store_fn(e->field, p);
    if (p == NULL)
      return dlb__loader_fail(&loader, DLB_E_NO_RUNTIME,
                              "%s is not a usable HIP runtime: it exports "
                              "no %s",
                              loader.path, e->name);
  }
  for (const dlb__hip_entry *e = optional_entries; e->field != NULL; e++)
    dlb__store_fn(e->field, dlsym(h, e->name));
  dlb__hip_error e = dlb__hi.hipInit(0);
  if (e == DLB__HIP_ERROR_NO_DEVICE)
    return dlb__loader_fail(&loader, DLB_E_NO_DEVICE,
                            "HIP runtime %s found no GPU: hipInit returned "
                            "%s (%d)", loader.path, error_name(e), e);
  if (e == DLB__HIP_ERROR_INSUFFICIENT_DRIVER)
    return dlb__loader_fail(&loader, DLB_E_NO_RUNTIME,
                            "HIP runtime %s has no usable driver: hipInit "
                            "returned %s (%d)", loader.path, error_name(e),
                            e);
  if (e != DLB__HIP_SUCCESS)
    return dlb__loader_fail(&loader, DLB_E_RUNTIME,
                            "HIP runtime %s: hipInit returned %s (%d): %s",
                            loader.path, error_name(e), e, error_string(e));
  e = dlb__hi.hipRuntimeGetVersion(&runtime_version);
  if (e != DLB__HIP_SUCCESS)
    return dlb__loader_fail(&loader, DLB_E_RUNTIME,
                            "HIP runtime %s: hipRuntimeGetVersion returned "
                            "%s (%d)", loader.path, error_name(e), e);
  int n = 0;
  e = dlb__hi.hipGetDeviceCount(&n);
  if (e == DLB__HIP_ERROR_NO_DEVICE || (e == DLB__HIP_SUCCESS && n <= 0))
    return dlb__loader_fail(&loader, DLB_E_NO_DEVICE,
                            "HIP runtime %s (version %d) reports no GPU",
                            loader.path, runtime_version);
  if (e != DLB__HIP_SUCCESS)
    return dlb__loader_fail(&loader, DLB_E_RUNTIME,
                            "HIP runtime %s: hipGetDeviceCount returned %s "
                            "(%d)", loader.path, error_name(e), e);
  /* As for CUDA: the first DLB__GPU_MAX_DEVICES only. */
  device_count = n < DLB__GPU_MAX_DEVICES ? n : DLB__GPU_MAX_DEVICES;
  return DLB_OK;
}

static void open_once(void) { dlb__loader_open(&loader); }

dlb_status dlb__hip_load(void) { return dlb__loader_load(&loader); }
int dlb__hip_ready(void) { return dlb__loader_ready(&loader); }
int dlb__hip_count(void) { return device_count; }
int dlb__hip_version(void) { return runtime_version; }
const char *dlb__hip_library(void) { return loader.path; }

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
