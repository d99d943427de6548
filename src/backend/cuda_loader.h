/*
 * cuda_loader.h -- the loaded CUDA driver: its entry points, the primary
 * contexts and the error messages, shared by the cuda_*.c files.
 * Not installed.
 */
#ifndef DLB_BACKEND_CUDA_LOADER_H
#define DLB_BACKEND_CUDA_LOADER_H

#include "backend.h"
#include "cuda_api.h"

/* Filled once by dlb__cuda_load(); read-only afterwards. The optional and
 * fallback entries may be NULL. */
extern dlb__cu_api dlb__cu;

/* Loads the driver once per process (see dlb__gpu.load). */
dlb_status dlb__cuda_load(void);
int dlb__cuda_ready(void);
int dlb__cuda_count(void);
int dlb__cuda_version(void);
const char *dlb__cuda_library(void);
/* dlb__gpu.active: 1 when the driver cannot tell either, so that callers
 * synchronising every active device never skip one that may have work. */
int dlb__cuda_active(int device);
/* Stores in *active whether device's primary context is active;
 * DLB_E_RUNTIME (message set) when the driver cannot say. */
dlb_status dlb__cuda_query_active(int device, int *active);

/*
 * Makes the primary context of device current on this thread (retaining
 * it on first use; it stays retained, as the CUDA runtime's does) and
 * stores in *pushed whether dlb__cuda_leave() must pop it. Every enter
 * that succeeds is paired with one leave.
 */
dlb_status dlb__cuda_enter(int device, int *pushed);
void dlb__cuda_leave(int pushed);

/* The operations of dlb__cuda (see dlb__gpu in backend.h), in
 * cuda_mem.c and cuda_stream.c. */
dlb_status dlb__cuda_alloc(dlb__side side, int device, size_t size,
                           void **out);
void dlb__cuda_free(dlb__side side, int device, void *p);
dlb_status dlb__cuda_host_register(void *p, size_t size);
void dlb__cuda_host_unregister(void *p);
dlb_status dlb__cuda_classify(const void *p, dlb__ptr_kind *out);
dlb_status dlb__cuda_copy(int device, const dlb__pitched *c, void *stream);
dlb_status dlb__cuda_stream_sync(int device, void *stream);
dlb_status dlb__cuda_stream_wait(int device, void *consumer, void *producer);
dlb_status dlb__cuda_device_sync(int device);
/* In cuda_ipc.c. */
dlb_status dlb__cuda_range(int device, const void *p, void **base,
                           size_t *size);
dlb_status dlb__cuda_ipc_get(int device, void *base, uint8_t *handle);
dlb_status dlb__cuda_ipc_event(int device, uint8_t *handle);
dlb_status dlb__cuda_ipc_open(int device, const uint8_t *handle, void **base);
void dlb__cuda_ipc_close(int device, void *base);
dlb_status dlb__cuda_ipc_wait(int device, const uint8_t *handle);
/* In cuda_info.c. */
dlb_status dlb__cuda_info(int device, dlb_gpu_info *out);

/* Stores device's attribute attr in *out; name spells attr for the
 * failure message. */
dlb_status dlb__cuda_attribute(int device, dlb__cu_enum attr, const char *name,
                               int *out);

/* Device addresses are unified with host ones. */
static inline dlb__cu_deviceptr dlb__cuda_devptr(const void *p) {
  return (dlb__cu_deviceptr)(uintptr_t)p;
}

/* Records "<what>: CUDA_ERROR_NAME (code): description" and returns the
 * matching status: DLB_E_NOMEM for out-of-memory, DLB_E_UNSUPPORTED for
 * not-supported, DLB_E_RUNTIME otherwise. */
dlb_status dlb__cuda_fail(dlb__cu_result result, const char *fmt, ...)
    DLB__PRINTF(2, 3);

#endif /* DLB_BACKEND_CUDA_LOADER_H */
