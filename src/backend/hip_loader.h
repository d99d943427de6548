/*
 * hip_loader.h -- the loaded HIP runtime: its entry points, the current
 * device and the error messages, shared by the hip_*.c files.
 * Not installed.
 */
#ifndef DLB_BACKEND_HIP_LOADER_H
#define DLB_BACKEND_HIP_LOADER_H

#include "backend.h"
#include "hip_api.h"

/* Filled once by dlb__hip_load(); read-only afterwards. */
extern dlb__hip_api dlb__hi;

dlb_status dlb__hip_load(void);
int dlb__hip_ready(void);
int dlb__hip_count(void);
/* hipRuntimeGetVersion: major * 10^7 + minor * 10^5 + patch. */
int dlb__hip_version(void);
const char *dlb__hip_library(void);
int dlb__hip_active(int device);

/* Makes device current on this thread (HIP's primary context of it),
 * storing in *saved what dlb__hip_leave() restores; -1 when nothing
 * changed. Every enter that succeeds is paired with one leave. */
dlb_status dlb__hip_enter(int device, int *saved);
void dlb__hip_leave(int saved);

/* The operations of dlb__hip (see dlb__gpu in backend.h). */
dlb_status dlb__hip_alloc(dlb__side side, int device, size_t size,
                          void **out);
void dlb__hip_free(dlb__side side, int device, void *p);
dlb_status dlb__hip_host_register(void *p, size_t size);
void dlb__hip_host_unregister(void *p);
dlb_status dlb__hip_classify(const void *p, dlb__ptr_kind *out);
dlb_status dlb__hip_copy(int device, const dlb__pitched *c, void *stream);
dlb_status dlb__hip_stream_sync(int device, void *stream);
dlb_status dlb__hip_stream_wait(int device, void *consumer, void *producer);
dlb_status dlb__hip_device_sync(int device);
/* In hip_ipc.c. */
dlb_status dlb__hip_range(int device, const void *p, void **base,
                          size_t *size);
dlb_status dlb__hip_ipc_get(int device, void *base, uint8_t *handle);
dlb_status dlb__hip_ipc_event(int device, uint8_t *handle);
dlb_status dlb__hip_ipc_open(int device, const uint8_t *handle, void **base);
void dlb__hip_ipc_close(int device, void *base);
dlb_status dlb__hip_ipc_wait(int device, const uint8_t *handle);
/* In hip_info.c. */
dlb_status dlb__hip_info(int device, dlb_gpu_info *out);

/* Records "<what>: hipErrorName (code): description" and returns
 * DLB_E_NOMEM, DLB_E_UNSUPPORTED or DLB_E_RUNTIME as for CUDA. */
dlb_status dlb__hip_fail(dlb__hip_error error, const char *fmt, ...)
    DLB__PRINTF(2, 3);

#endif /* DLB_BACKEND_HIP_LOADER_H */
