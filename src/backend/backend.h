/*
 * backend.h -- the GPU runtimes behind one small table of operations.
 *
 * Each runtime (the CUDA driver, HIP) is a dlb__gpu table filled by its own
 * files (cuda_*.c, hip_*.c). The shared code (backend.c, classify.c, pin.c,
 * gpu_copy.c, stream.c, managed.c) works only through these tables, so
 * both runtimes get the same copy planning, pinning and label rules.
 * Not installed.
 */
#ifndef DLB_BACKEND_BACKEND_H
#define DLB_BACKEND_BACKEND_H

#include "internal.h"

/* The most devices a runtime may have; ordinals past it are refused. */
#define DLB__GPU_MAX_DEVICES 64

/* Where one side of a copy or an allocation lives, as the runtime sees it. */
typedef enum dlb__side {
  DLB__SIDE_HOST = 1,    /* host memory, pageable or pinned */
  DLB__SIDE_DEVICE = 2,  /* device memory */
  DLB__SIDE_MANAGED = 3, /* managed (unified) memory */
} dlb__side;

/*
 * One pitched copy of up to three dimensions: depth planes of height rows
 * of width bytes. A row starts pitch bytes after the previous one and a
 * plane rows * pitch bytes after the previous one. height and depth are at
 * least 1; for depth 1 the rows fields are unused, for height 1 the pitches.
 */
typedef struct dlb__pitched {
  char *dst;
  const char *src;
  dlb__side dst_side;
  dlb__side src_side;
  size_t width;
  size_t height;
  size_t depth;
  size_t dst_pitch;
  size_t src_pitch;
  size_t dst_rows;
  size_t src_rows;
} dlb__pitched;

/* What a runtime says about an address. */
typedef struct dlb__ptr_kind {
  DLDevice device; /* cpu when the runtime does not know the address */
  int managed;     /* 1 for managed memory (HIP's too, labelled rocm_host) */
} dlb__ptr_kind;

/*
 * The operations of one runtime. device is an ordinal the caller checked
 * against count(); host-type work runs on device 0. Streams are the
 * runtime's native handles. Every function returning a status records a
 * message naming the runtime call and its error on failure.
 */
typedef struct dlb__gpu {
  const char *name;         /* "CUDA" or "HIP", for messages */
  DLDeviceType device_type; /* kDLCUDA or kDLROCM */
  DLDeviceType host_type;   /* kDLCUDAHost or kDLROCMHost */
  /* Loads the runtime once per process (thread-safe); later calls return
   * the same status and message: DLB_OK, DLB_E_NO_RUNTIME, DLB_E_NO_DEVICE
   * or DLB_E_RUNTIME. */
  dlb_status (*load)(void);
  /* Loads likewise and returns 1 when usable, else 0, without touching
   * dlb_last_error(): for questions that have an answer either way. */
  int (*ready)(void);
  /* The following need a successful load(). */
  int (*count)(void);
  int (*version)(void);
  const char *(*library)(void);
  /* 1 when work of this process may be pending on the device (its primary
   * context is active, or the runtime cannot tell), else 0. */
  int (*active)(int device);
  /* size > 0. DLB_E_NOMEM when the runtime is out of memory. */
  dlb_status (*alloc)(dlb__side side, int device, size_t size, void **out);
  void (*free)(dlb__side side, int device, void *p);
  /* Pins [p, p + size) for every device. DLB_E_STATE, recording no
   * message, when some of it is registered or pinned already: the caller
   * finds out whether that serves (pin.c). */
  dlb_status (*host_register)(void *p, size_t size);
  void (*host_unregister)(void *p);
  dlb_status (*classify)(const void *p, dlb__ptr_kind *out);
  /* Queues the copy on stream. DLB_E_UNSUPPORTED when the runtime cannot
   * take this shape (a pitch over its limit, recording no message; or the
   * runtime's own "not supported"): the caller stages instead, keeping the
   * message it had. */
  dlb_status (*copy)(int device, const dlb__pitched *c, void *stream);
  /* The host waits for the work queued on stream so far. */
  dlb_status (*stream_sync)(int device, void *stream);
  /* consumer waits, on the device, for the work queued on producer. */
  dlb_status (*stream_wait)(int device, void *consumer, void *producer);
  /* The host waits for all work on the device. */
  dlb_status (*device_sync)(int device);
  /* Device memory between processes; NULL where this runtime's is not
   * implemented. Handles are DLB__IPC_HANDLE_BYTES bytes.
   * range: the allocation holding device memory p (DLB_E_UNSUPPORTED when
   * p is not the runtime's allocation). ipc_get: the handle of the
   * allocation at base. ipc_event: records this process's interprocess
   * event of device on the default stream (after the work queued there
   * and on blocking streams) and writes its handle. ipc_open / ipc_close:
   * the memory of a handle another process made. ipc_wait: the default
   * stream of device waits for the event of a handle. */
  dlb_status (*range)(int device, const void *p, void **base, size_t *size);
  dlb_status (*ipc_get)(int device, void *base, uint8_t *handle);
  dlb_status (*ipc_event)(int device, uint8_t *handle);
  dlb_status (*ipc_open)(int device, const uint8_t *handle, void **base);
  void (*ipc_close)(int device, void *base);
  dlb_status (*ipc_wait)(int device, const uint8_t *handle);
  /* What the runtime says about the device; creates no context. */
  dlb_status (*info)(int device, dlb_gpu_info *out);
} dlb__gpu;

#define DLB__IPC_HANDLE_BYTES 64

extern const dlb__gpu dlb__cuda;
extern const dlb__gpu dlb__hip;

/* The runtime that owns memory of type (cuda, cuda_host, cuda_managed:
 * CUDA; rocm, rocm_host: HIP), or NULL (cpu and every other type). */
const dlb__gpu *dlb__gpu_for_type(DLDeviceType type);

/* Loads gpu and checks that device names one of its devices (host-type
 * kinds always name device 0). Stores the ordinal in *ordinal. */
dlb_status dlb__gpu_device(const dlb__gpu *gpu, DLDevice device, int *ordinal);

/* The side a DLPack device type is on for its runtime. */
dlb__side dlb__gpu_side(DLDeviceType type);

/* For messages: dlb_device_type_name(), or "unknown" for a type it does
 * not know. */
static inline const char *dlb__type_label(DLDeviceType type) {
  const char *name = dlb_device_type_name(type);
  return name != NULL ? name : "unknown";
}

/* The tensor a pinned tensor was made from (dlb_tensor_pin() wraps a
 * share of it), or NULL when t is not a pinned tensor of dlbridge. */
const DLManagedTensorVersioned *dlb__pin_source(
    const DLManagedTensorVersioned *t);

/* Prefetches or advises managed memory [p, p + size): CUDA only.
 * target_device is an ordinal, or -1 for the host. */
dlb_status dlb__cuda_prefetch(void *p, size_t size, int target_device,
                              void *stream);
dlb_status dlb__cuda_advise(void *p, size_t size, int advice,
                            int target_device);

#endif /* DLB_BACKEND_BACKEND_H */
