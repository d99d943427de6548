/*
 * hip_api.h -- the part of the HIP runtime that dlbridge calls, declared
 * here so that building needs no ROCm. Names and values follow the HIP
 * headers of ROCm 5.2 to 7; where they changed (the pointer-attribute
 * memory types) both sets are given. Shared by the library and the
 * emulated runtime in tests/emu. Not installed.
 */
#ifndef DLB_BACKEND_HIP_API_H
#define DLB_BACKEND_HIP_API_H

#include <stddef.h>
#include <stdint.h>

typedef int dlb__hip_error;
typedef struct ihipStream_t *dlb__hip_stream;
typedef struct ihipEvent_t *dlb__hip_event;

/* hipPointerAttribute_t: 32 bytes in every ROCm. The first field is
 * memoryType (<= 5.4), a union of memoryType and type (5.5 to 5.7), then
 * type (>= 6.0), with values that changed in 6.0. */
typedef struct dlb__hip_ptr_attr {
  int type;
  int device;
  void *devicePointer;
  void *hostPointer;
  int isManaged;
  unsigned int allocationFlags;
} dlb__hip_ptr_attr;

/* hipMemcpy3DParms (160 bytes): positions and extents in bytes for
 * linear memory. */
typedef struct dlb__hip_pos {
  size_t x, y, z;
} dlb__hip_pos;
typedef struct dlb__hip_pitched_ptr {
  void *ptr;
  size_t pitch; /* bytes from row to row */
  size_t xsize; /* bytes per row of the allocation */
  size_t ysize; /* rows from plane to plane */
} dlb__hip_pitched_ptr;
typedef struct dlb__hip_extent {
  size_t width, height, depth;
} dlb__hip_extent;
typedef struct dlb__hip_memcpy3d {
  void *srcArray;
  dlb__hip_pos srcPos;
  dlb__hip_pitched_ptr srcPtr;
  void *dstArray;
  dlb__hip_pos dstPos;
  dlb__hip_pitched_ptr dstPtr;
  dlb__hip_extent extent;
  int kind;
} dlb__hip_memcpy3d;

#define DLB__HIP_SUCCESS 0
#define DLB__HIP_ERROR_INVALID_VALUE 1
#define DLB__HIP_ERROR_OUT_OF_MEMORY 2
#define DLB__HIP_ERROR_NOT_INITIALIZED 3
#define DLB__HIP_ERROR_INSUFFICIENT_DRIVER 35
#define DLB__HIP_ERROR_NO_DEVICE 100
#define DLB__HIP_ERROR_INVALID_DEVICE 101
#define DLB__HIP_ERROR_INVALID_CONTEXT 201
#define DLB__HIP_ERROR_INVALID_HANDLE 400
#define DLB__HIP_ERROR_NOT_FOUND 500
#define DLB__HIP_ERROR_HOST_MEMORY_ALREADY_REGISTERED 712
#define DLB__HIP_ERROR_HOST_MEMORY_NOT_REGISTERED 713
#define DLB__HIP_ERROR_NOT_SUPPORTED 801

/* hipMemoryType before ROCm 6.0 ... */
#define DLB__HIP5_MEMORY_HOST 0
#define DLB__HIP5_MEMORY_DEVICE 1
#define DLB__HIP5_MEMORY_ARRAY 2
#define DLB__HIP5_MEMORY_UNIFIED 3
#define DLB__HIP5_MEMORY_MANAGED 4
/* ... and from 6.0. */
#define DLB__HIP6_MEMORY_UNREGISTERED 0
#define DLB__HIP6_MEMORY_HOST 1
#define DLB__HIP6_MEMORY_DEVICE 2
#define DLB__HIP6_MEMORY_MANAGED 3
#define DLB__HIP6_MEMORY_ARRAY 10
#define DLB__HIP6_MEMORY_UNIFIED 11

#define DLB__HIP_MEMCPY_DEFAULT 4
#define DLB__HIP_HOST_MALLOC_PORTABLE 0x1u
#define DLB__HIP_HOST_MALLOC_MAPPED 0x2u
#define DLB__HIP_HOST_REGISTER_PORTABLE 0x1u
#define DLB__HIP_HOST_REGISTER_MAPPED 0x2u
#define DLB__HIP_EVENT_DISABLE_TIMING 0x2u
#define DLB__HIP_EVENT_INTERPROCESS 0x4u
/* hipIpcMemLazyEnablePeerAccess: 0 before ROCm 6.0, 1 from it. */
#define DLB__HIP_IPC_LAZY_PEER_ACCESS_5 0u
#define DLB__HIP_IPC_LAZY_PEER_ACCESS_6 1u
#define DLB__HIP_STREAM_NON_BLOCKING 0x1u
#define DLB__HIP_ATTRIBUTE_CONCURRENT_MANAGED_ACCESS 9
#define DLB__HIP_ATTRIBUTE_MANAGED_MEMORY 24
#define DLB__HIP_ATTRIBUTE_MAX_PITCH 58
#define DLB__HIP_ATTRIBUTE_UNIFIED_ADDRESSING 85
#define DLB__HIP_ATTRIBUTE_HOST_REGISTER_SUPPORTED 90
#define DLB__HIP_STREAM_PER_THREAD ((dlb__hip_stream)0x2)

/*
 * The entry points: X(name, return type, params), looked up by name with
 * dlsym (HIP exports one ABI per name).
 */
#define DLB__HIP_REQUIRED(X)                                                  \
  X(hipInit, dlb__hip_error, (unsigned int flags))                            \
  X(hipRuntimeGetVersion, dlb__hip_error, (int *version))                     \
  X(hipGetErrorName, const char *, (dlb__hip_error error))                    \
  X(hipGetErrorString, const char *, (dlb__hip_error error))                  \
  X(hipGetLastError, dlb__hip_error, (void))                                  \
  X(hipGetDeviceCount, dlb__hip_error, (int *count))                          \
  X(hipGetDevice, dlb__hip_error, (int *device))                              \
  X(hipSetDevice, dlb__hip_error, (int device))                               \
  X(hipDeviceGetAttribute, dlb__hip_error,                                    \
    (int *value, int attribute, int device))                                  \
  X(hipDeviceSynchronize, dlb__hip_error, (void))                             \
  X(hipDeviceGetName, dlb__hip_error, (char *name, int len, int device))      \
  X(hipDeviceTotalMem, dlb__hip_error, (size_t *bytes, int device))           \
  X(hipMalloc, dlb__hip_error, (void **ptr, size_t size))                     \
  X(hipFree, dlb__hip_error, (void *ptr))                                     \
  X(hipHostMalloc, dlb__hip_error,                                            \
    (void **ptr, size_t size, unsigned int flags))                            \
  X(hipHostFree, dlb__hip_error, (void *ptr))                                 \
  X(hipHostRegister, dlb__hip_error,                                          \
    (void *ptr, size_t size, unsigned int flags))                             \
  X(hipHostUnregister, dlb__hip_error, (void *ptr))                           \
  X(hipPointerGetAttributes, dlb__hip_error,                                  \
    (dlb__hip_ptr_attr * attributes, const void *ptr))                        \
  X(hipMemcpyAsync, dlb__hip_error,                                           \
    (void *dst, const void *src, size_t size, int kind,                       \
     dlb__hip_stream stream))                                                 \
  X(hipMemcpy2DAsync, dlb__hip_error,                                         \
    (void *dst, size_t dpitch, const void *src, size_t spitch, size_t width,  \
     size_t height, int kind, dlb__hip_stream stream))                        \
  X(hipMemcpy3DAsync, dlb__hip_error,                                         \
    (const dlb__hip_memcpy3d *copy, dlb__hip_stream stream))                  \
  X(hipStreamSynchronize, dlb__hip_error, (dlb__hip_stream stream))           \
  X(hipStreamWaitEvent, dlb__hip_error,                                       \
    (dlb__hip_stream stream, dlb__hip_event event, unsigned int flags))       \
  X(hipEventCreateWithFlags, dlb__hip_error,                                  \
    (dlb__hip_event * event, unsigned int flags))                             \
  X(hipEventRecord, dlb__hip_error,                                           \
    (dlb__hip_event event, dlb__hip_stream stream))                           \
  X(hipEventDestroy, dlb__hip_error, (dlb__hip_event event))

/* hipIpcMemHandle_t and hipIpcEventHandle_t (HIP_IPC_HANDLE_SIZE bytes
 * each), passed by value. */
typedef struct dlb__hip_ipc_mem_handle {
  char reserved[64];
} dlb__hip_ipc_mem_handle;
typedef struct dlb__hip_ipc_event_handle {
  char reserved[64];
} dlb__hip_ipc_event_handle;

/* Entry points that may be missing: IPC (interprocess events arrived on
 * Linux with ROCm 6; without them an export synchronises instead). */
#define DLB__HIP_OPTIONAL(X)                                                  \
  X(hipMemGetAddressRange, dlb__hip_error,                                    \
    (void **base, size_t *size, void *ptr))                                   \
  X(hipIpcGetMemHandle, dlb__hip_error,                                       \
    (dlb__hip_ipc_mem_handle * handle, void *ptr))                            \
  X(hipIpcOpenMemHandle, dlb__hip_error,                                      \
    (void **ptr, dlb__hip_ipc_mem_handle handle, unsigned int flags))         \
  X(hipIpcCloseMemHandle, dlb__hip_error, (void *ptr))                        \
  X(hipIpcGetEventHandle, dlb__hip_error,                                     \
    (dlb__hip_ipc_event_handle * handle, dlb__hip_event event))               \
  X(hipIpcOpenEventHandle, dlb__hip_error,                                    \
    (dlb__hip_event * event, dlb__hip_ipc_event_handle handle))

#define DLB__HIP_PFN_TYPEDEF(name, ret, params) \
  typedef ret(*dlb__hip_pfn_##name) params;
DLB__HIP_REQUIRED(DLB__HIP_PFN_TYPEDEF)
DLB__HIP_OPTIONAL(DLB__HIP_PFN_TYPEDEF)
#undef DLB__HIP_PFN_TYPEDEF

/* The optional entries may be NULL. */
typedef struct dlb__hip_api {
#define DLB__HIP_FIELD(name, ret, params) dlb__hip_pfn_##name name;
  DLB__HIP_REQUIRED(DLB__HIP_FIELD)
  DLB__HIP_OPTIONAL(DLB__HIP_FIELD)
#undef DLB__HIP_FIELD
} dlb__hip_api;

#endif /* DLB_BACKEND_HIP_API_H */
