/*
 * hip_ipc.c -- HIP device memory between processes: IPC memory handles of
 * hipMalloc allocations and, where the runtime has them (Linux, ROCm 6 and
 * later), one interprocess event per device recorded on the default stream
 * at each export, as for CUDA (cuda_ipc.c). A runtime without interprocess
 * events gets a device synchronisation at export instead, and an all-zero
 * event handle that tells the importer there is nothing to wait for.
 */
#include <pthread.h>
#include <string.h>

#include "hip_loader.h"

pthread_mutex_t dlb__hip_event_lock = PTHREAD_MUTEX_INITIALIZER;
static dlb__hip_event events[DLB__GPU_MAX_DEVICES];

static dlb_status need(int present, const char *name) {
  if (present) return DLB_OK;
  return dlb__fail(DLB_E_UNSUPPORTED, "the HIP runtime %s lacks %s: device "
                   "memory cannot be shared between processes",
                   dlb__hip_library(), name);
}

static int all_zero(const uint8_t *p, size_t n) {
  for (size_t i = 0; i < n; i++)
    if (p[i] != 0) return 0;
  return 1;
}

dlb_status dlb__hip_range(int device, const void *p, void **base,
                          size_t *size) {
  dlb_status s = need(dlb__hi.hipMemGetAddressRange != NULL,
                      "hipMemGetAddressRange");
  if (s != DLB_OK) return s;
  int saved = -1;
  s = dlb__hip_enter(device, &saved);
  if (s != DLB_OK) return s;
  void *b = NULL;
  size_t n = 0;
  dlb__hip_error e = dlb__hi.hipMemGetAddressRange(&b, &n, (void *)(uintptr_t)p);
  if (e == DLB__HIP_ERROR_NOT_FOUND || e == DLB__HIP_ERROR_INVALID_VALUE) {
    (void)dlb__hi.hipGetLastError();
    s = dlb__fail(DLB_E_UNSUPPORTED, "hipMemGetAddressRange(%p) on rocm:%d: "
                  "not memory of hipMalloc, which alone can be shared", p,
                  device);
  } else if (e != DLB__HIP_SUCCESS) {
    s = dlb__hip_fail(e, "hipMemGetAddressRange(%p) on rocm:%d", p, device);
  }
  dlb__hip_leave(saved);
  if (s == DLB_OK) {
    *base = b;
    *size = n;
  }
  return s;
}

dlb_status dlb__hip_ipc_get(int device, void *base, uint8_t *handle) {
  dlb_status s = need(dlb__hi.hipIpcGetMemHandle != NULL,
                      "hipIpcGetMemHandle");
  if (s != DLB_OK) return s;
  int saved = -1;
  s = dlb__hip_enter(device, &saved);
  if (s != DLB_OK) return s;
  dlb__hip_ipc_mem_handle h;
  memset(&h, 0, sizeof h);
  dlb__hip_error e = dlb__hi.hipIpcGetMemHandle(&h, base);
  if (e != DLB__HIP_SUCCESS)
    s = dlb__hip_fail(e, "hipIpcGetMemHandle(%p) on rocm:%d", base, device);
  else
    memcpy(handle, &h, sizeof h);
  dlb__hip_leave(saved);
  return s;
}

/* Records the device's interprocess event and writes its handle; 0 with
 * *unsupported set when the runtime has no interprocess events. */
static dlb_status record_event(int device, uint8_t *handle, int *unsupported) {
  dlb_status s = DLB_OK;
  dlb__hip_error e = DLB__HIP_SUCCESS;
  dlb__fork_guard();
  pthread_mutex_lock(&dlb__hip_event_lock);
  if (events[device] == NULL) {
    e = dlb__hi.hipEventCreateWithFlags(
        &events[device],
        DLB__HIP_EVENT_INTERPROCESS | DLB__HIP_EVENT_DISABLE_TIMING);
    if (e == DLB__HIP_ERROR_NOT_SUPPORTED ||
        e == DLB__HIP_ERROR_INVALID_VALUE) {
      /* Runtimes without interprocess events may refuse the flag. */
      (void)dlb__hi.hipGetLastError();
      events[device] = NULL;
      *unsupported = 1;
    } else if (e != DLB__HIP_SUCCESS) {
      events[device] = NULL;
      s = dlb__hip_fail(e, "hipEventCreateWithFlags(Interprocess|"
                        "DisableTiming) on rocm:%d", device);
    }
  }
  if (s == DLB_OK && !*unsupported) {
    e = dlb__hi.hipEventRecord(events[device], NULL);
    if (e != DLB__HIP_SUCCESS)
      s = dlb__hip_fail(e, "hipEventRecord(interprocess event, default "
                        "stream) on rocm:%d", device);
  }
  if (s == DLB_OK && !*unsupported) {
    dlb__hip_ipc_event_handle h;
    memset(&h, 0, sizeof h);
    e = dlb__hi.hipIpcGetEventHandle(&h, events[device]);
    if (e == DLB__HIP_ERROR_NOT_SUPPORTED) {
      (void)dlb__hi.hipGetLastError();
      *unsupported = 1;
    } else if (e != DLB__HIP_SUCCESS) {
      s = dlb__hip_fail(e, "hipIpcGetEventHandle on rocm:%d", device);
    } else {
      memcpy(handle, &h, sizeof h);
    }
  }
  pthread_mutex_unlock(&dlb__hip_event_lock);
  return s;
}

dlb_status dlb__hip_ipc_event(int device, uint8_t *handle) {
  int saved = -1;
  dlb_status s = dlb__hip_enter(device, &saved);
  if (s != DLB_OK) return s;
  int unsupported = dlb__hi.hipIpcGetEventHandle == NULL;
  if (!unsupported) s = record_event(device, handle, &unsupported);
  if (s == DLB_OK && unsupported) {
    /* No event to wait for: the work is done before the handle leaves. */
    memset(handle, 0, DLB__IPC_HANDLE_BYTES);
    dlb__hip_error e = dlb__hi.hipDeviceSynchronize();
    if (e != DLB__HIP_SUCCESS)
      s = dlb__hip_fail(e, "hipDeviceSynchronize on rocm:%d (this runtime "
                        "has no interprocess events)", device);
  }
  dlb__hip_leave(saved);
  return s;
}

dlb_status dlb__hip_ipc_open(int device, const uint8_t *handle, void **base) {
  dlb_status s = need(dlb__hi.hipIpcOpenMemHandle != NULL,
                      "hipIpcOpenMemHandle");
  if (s == DLB_OK)
    s = need(dlb__hi.hipIpcCloseMemHandle != NULL, "hipIpcCloseMemHandle");
  if (s != DLB_OK) return s;
  int saved = -1;
  s = dlb__hip_enter(device, &saved);
  if (s != DLB_OK) return s;
  dlb__hip_ipc_mem_handle h;
  memcpy(&h, handle, sizeof h);
  void *p = NULL;
  unsigned lazy = dlb__hip_version() >= 60000000
                      ? DLB__HIP_IPC_LAZY_PEER_ACCESS_6
                      : DLB__HIP_IPC_LAZY_PEER_ACCESS_5;
  dlb__hip_error e = dlb__hi.hipIpcOpenMemHandle(&p, h, lazy);
  if (e == DLB__HIP_ERROR_INVALID_CONTEXT)
    s = dlb__hip_fail(e, "hipIpcOpenMemHandle on rocm:%d: a handle cannot be "
                      "opened in the process that exported it", device);
  else if (e != DLB__HIP_SUCCESS)
    s = dlb__hip_fail(e, "hipIpcOpenMemHandle on rocm:%d (the exporting "
                      "process must still hold the memory)", device);
  dlb__hip_leave(saved);
  if (s == DLB_OK) *base = p;
  return s;
}

void dlb__hip_ipc_close(int device, void *base) {
  int saved = -1;
  if (dlb__hip_enter(device, &saved) != DLB_OK) saved = -1;
  (void)dlb__hi.hipIpcCloseMemHandle(base);
  dlb__hip_leave(saved);
}

dlb_status dlb__hip_ipc_wait(int device, const uint8_t *handle) {
  if (all_zero(handle, DLB__IPC_HANDLE_BYTES)) return DLB_OK;
  dlb_status s = need(dlb__hi.hipIpcOpenEventHandle != NULL,
                      "hipIpcOpenEventHandle");
  if (s != DLB_OK) return s;
  int saved = -1;
  s = dlb__hip_enter(device, &saved);
  if (s != DLB_OK) return s;
  dlb__hip_ipc_event_handle h;
  memcpy(&h, handle, sizeof h);
  dlb__hip_event ev = NULL;
  dlb__hip_error e = dlb__hi.hipIpcOpenEventHandle(&ev, h);
  if (e != DLB__HIP_SUCCESS) {
    s = dlb__hip_fail(e, "hipIpcOpenEventHandle on rocm:%d", device);
  } else {
    e = dlb__hi.hipStreamWaitEvent(NULL, ev, 0);
    if (e != DLB__HIP_SUCCESS)
      s = dlb__hip_fail(e, "hipStreamWaitEvent(default stream, exporter's "
                        "event) on rocm:%d", device);
    (void)dlb__hi.hipEventDestroy(ev);
  }
  dlb__hip_leave(saved);
  return s;
}
