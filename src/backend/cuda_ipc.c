/*
 * cuda_ipc.c -- CUDA device memory between processes: IPC memory handles
 * of cuMemAlloc allocations, and one interprocess event per device that
 * each export records on the legacy default stream (which waits for every
 * blocking stream), so an importer's work waits for the exporter's.
 *
 * The event is created at the first export from a device and kept until
 * the process exits, like the primary contexts: importers may open its
 * handle at any later time, and a later export re-recording it only makes
 * them wait for more.
 */
#include <pthread.h>
#include <string.h>

#include "cuda_loader.h"

pthread_mutex_t dlb__cuda_event_lock = PTHREAD_MUTEX_INITIALIZER;
static dlb__cu_event events[DLB__GPU_MAX_DEVICES];

static dlb_status need(int present, const char *name) {
  if (present) return DLB_OK;
  return dlb__fail(DLB_E_UNSUPPORTED, "the CUDA driver %s lacks %s: device "
                   "memory cannot be shared between processes",
                   dlb__cuda_library(), name);
}

dlb_status dlb__cuda_range(int device, const void *p, void **base,
                           size_t *size) {
  dlb_status s = need(dlb__cu.cuMemGetAddressRange_v2 != NULL,
                      "cuMemGetAddressRange");
  if (s != DLB_OK) return s;
  int pushed = 0;
  s = dlb__cuda_enter(device, &pushed);
  if (s != DLB_OK) return s;
  dlb__cu_deviceptr b = 0;
  size_t n = 0;
  dlb__cu_result r =
      dlb__cu.cuMemGetAddressRange_v2(&b, &n, dlb__cuda_devptr(p));
  if (r == DLB__CUDA_ERROR_NOT_FOUND)
    s = dlb__fail(DLB_E_UNSUPPORTED, "cuMemGetAddressRange(%p) on cuda:%d: "
                  "not memory of cuMemAlloc, which alone can be shared", p,
                  device);
  else if (r != DLB__CUDA_SUCCESS)
    s = dlb__cuda_fail(r, "cuMemGetAddressRange(%p) on cuda:%d", p, device);
  dlb__cuda_leave(pushed);
  if (s == DLB_OK) {
    *base = (void *)(uintptr_t)b;
    *size = n;
  }
  return s;
}

dlb_status dlb__cuda_ipc_get(int device, void *base, uint8_t *handle) {
  dlb_status s = need(dlb__cu.cuIpcGetMemHandle != NULL,
                      "cuIpcGetMemHandle");
  if (s != DLB_OK) return s;
  int pushed = 0;
  s = dlb__cuda_enter(device, &pushed);
  if (s != DLB_OK) return s;
  dlb__cu_ipc_mem_handle h;
  memset(&h, 0, sizeof h);
  dlb__cu_result r = dlb__cu.cuIpcGetMemHandle(&h, dlb__cuda_devptr(base));
  if (r != DLB__CUDA_SUCCESS)
    s = dlb__cuda_fail(r, "cuIpcGetMemHandle(%p) on cuda:%d", base, device);
  else
    memcpy(handle, &h, sizeof h);
  dlb__cuda_leave(pushed);
  return s;
}

dlb_status dlb__cuda_ipc_event(int device, uint8_t *handle) {
  dlb_status s = need(dlb__cu.cuIpcGetEventHandle != NULL,
                      "cuIpcGetEventHandle");
  if (s != DLB_OK) return s;
  int pushed = 0;
  s = dlb__cuda_enter(device, &pushed);
  if (s != DLB_OK) return s;
  dlb__fork_guard();
  pthread_mutex_lock(&dlb__cuda_event_lock);
  dlb__cu_result r = DLB__CUDA_SUCCESS;
  if (events[device] == NULL) {
    r = dlb__cu.cuEventCreate(&events[device], DLB__CU_EVENT_INTERPROCESS |
                                                   DLB__CU_EVENT_DISABLE_TIMING);
    if (r != DLB__CUDA_SUCCESS) {
      events[device] = NULL;
      s = dlb__cuda_fail(r, "cuEventCreate(INTERPROCESS|DISABLE_TIMING) on "
                         "cuda:%d", device);
    }
  }
  if (s == DLB_OK) {
    r = dlb__cu.cuEventRecord(events[device], DLB__CU_STREAM_LEGACY);
    if (r != DLB__CUDA_SUCCESS)
      s = dlb__cuda_fail(r, "cuEventRecord(interprocess event, legacy "
                         "stream) on cuda:%d", device);
  }
  if (s == DLB_OK) {
    dlb__cu_ipc_event_handle h;
    memset(&h, 0, sizeof h);
    r = dlb__cu.cuIpcGetEventHandle(&h, events[device]);
    if (r != DLB__CUDA_SUCCESS)
      s = dlb__cuda_fail(r, "cuIpcGetEventHandle on cuda:%d", device);
    else
      memcpy(handle, &h, sizeof h);
  }
  pthread_mutex_unlock(&dlb__cuda_event_lock);
  dlb__cuda_leave(pushed);
  return s;
}

dlb_status dlb__cuda_ipc_open(int device, const uint8_t *handle,
                              void **base) {
  dlb_status s = need(dlb__cu.cuIpcOpenMemHandle_v2 != NULL,
                      "cuIpcOpenMemHandle");
  if (s == DLB_OK)
    s = need(dlb__cu.cuIpcCloseMemHandle != NULL, "cuIpcCloseMemHandle");
  if (s != DLB_OK) return s;
  int pushed = 0;
  s = dlb__cuda_enter(device, &pushed);
  if (s != DLB_OK) return s;
  dlb__cu_ipc_mem_handle h;
  memcpy(&h, handle, sizeof h);
  dlb__cu_deviceptr d = 0;
  dlb__cu_result r = dlb__cu.cuIpcOpenMemHandle_v2(
      &d, h, DLB__CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS);
  if (r == DLB__CUDA_ERROR_INVALID_CONTEXT)
    s = dlb__fail(DLB_E_RUNTIME, "cuIpcOpenMemHandle on cuda:%d: invalid "
                  "context; a handle cannot be opened in the process that "
                  "exported it", device);
  else if (r != DLB__CUDA_SUCCESS)
    s = dlb__cuda_fail(r, "cuIpcOpenMemHandle on cuda:%d (the exporting "
                       "process must still hold the memory)", device);
  dlb__cuda_leave(pushed);
  if (s == DLB_OK) *base = (void *)(uintptr_t)d;
  return s;
}

void dlb__cuda_ipc_close(int device, void *base) {
  int pushed = 0;
  if (dlb__cuda_enter(device, &pushed) != DLB_OK) pushed = 0;
  (void)dlb__cu.cuIpcCloseMemHandle(dlb__cuda_devptr(base));
  dlb__cuda_leave(pushed);
}

dlb_status dlb__cuda_ipc_wait(int device, const uint8_t *handle) {
  dlb_status s = need(dlb__cu.cuIpcOpenEventHandle != NULL,
                      "cuIpcOpenEventHandle");
  if (s != DLB_OK) return s;
  int pushed = 0;
  s = dlb__cuda_enter(device, &pushed);
  if (s != DLB_OK) return s;
  dlb__cu_ipc_event_handle h;
  memcpy(&h, handle, sizeof h);
  dlb__cu_event e = NULL;
  dlb__cu_result r = dlb__cu.cuIpcOpenEventHandle(&e, h);
  if (r != DLB__CUDA_SUCCESS) {
    s = dlb__cuda_fail(r, "cuIpcOpenEventHandle on cuda:%d", device);
  } else {
    r = dlb__cu.cuStreamWaitEvent(DLB__CU_STREAM_LEGACY, e, 0);
    if (r != DLB__CUDA_SUCCESS)
      s = dlb__cuda_fail(r, "cuStreamWaitEvent(legacy stream, exporter's "
                         "event) on cuda:%d", device);
    /* Allowed while the wait is pending. */
    (void)dlb__cu.cuEventDestroy_v2(e);
  }
  dlb__cuda_leave(pushed);
  return s;
}
