/*
 * cuda_api.h -- the part of the CUDA driver API that dlbridge calls,
 * declared here so that building needs no CUDA SDK. Types, values and
 * signatures follow cuda.h of CUDA 13.0; tests/emu/cuda_abi_check.c compares
 * every one of them with cuda.h and cudaTypedefs.h at build time wherever
 * those headers exist. Shared by the library and the emulated driver in
 * tests/emu. Not installed.
 */
#ifndef DLB_BACKEND_CUDA_API_H
#define DLB_BACKEND_CUDA_API_H

#include <stddef.h>
#include <stdint.h>

/* CUresult and the attribute enums have no negative values, so the
 * compilers give them unsigned int as their compatible type. */
typedef unsigned int dlb__cu_result;
typedef unsigned int dlb__cu_enum;
typedef int dlb__cu_device;
typedef unsigned long long dlb__cu_deviceptr;
typedef uint64_t dlb__cu_uint64;
/* The same incomplete struct tags as cuda.h, so the handle types are the
 * same types. */
typedef struct CUctx_st *dlb__cu_context;
typedef struct CUstream_st *dlb__cu_stream;
typedef struct CUevent_st *dlb__cu_event;

/* The ABI check defines this to use cuda.h's own structs in signatures. */
#ifndef DLB__CU_STRUCTS_FROM_CUDA_H
/* CUDA_MEMCPY2D (the _v2 layout, 128 bytes on LP64). */
typedef struct dlb__cu_memcpy2d {
  size_t srcXInBytes;
  size_t srcY;
  dlb__cu_enum srcMemoryType;
  const void *srcHost;
  dlb__cu_deviceptr srcDevice;
  void *srcArray;
  size_t srcPitch;
  size_t dstXInBytes;
  size_t dstY;
  dlb__cu_enum dstMemoryType;
  void *dstHost;
  dlb__cu_deviceptr dstDevice;
  void *dstArray;
  size_t dstPitch;
  size_t WidthInBytes;
  size_t Height;
} dlb__cu_memcpy2d;

/* CUDA_MEMCPY3D (the _v2 layout, 200 bytes on LP64). */
typedef struct dlb__cu_memcpy3d {
  size_t srcXInBytes;
  size_t srcY;
  size_t srcZ;
  size_t srcLOD;
  dlb__cu_enum srcMemoryType;
  const void *srcHost;
  dlb__cu_deviceptr srcDevice;
  void *srcArray;
  void *reserved0;
  size_t srcPitch;
  size_t srcHeight;
  size_t dstXInBytes;
  size_t dstY;
  size_t dstZ;
  size_t dstLOD;
  dlb__cu_enum dstMemoryType;
  void *dstHost;
  dlb__cu_deviceptr dstDevice;
  void *dstArray;
  void *reserved1;
  size_t dstPitch;
  size_t dstHeight;
  size_t WidthInBytes;
  size_t Height;
  size_t Depth;
} dlb__cu_memcpy3d;

/* CUmemLocation, passed by value (8 bytes). */
typedef struct dlb__cu_memlocation {
  dlb__cu_enum type;
  int id;
} dlb__cu_memlocation;

/* CUipcMemHandle and CUipcEventHandle (CU_IPC_HANDLE_SIZE bytes each),
 * passed by value. */
typedef struct dlb__cu_ipc_mem_handle {
  char reserved[64];
} dlb__cu_ipc_mem_handle;
typedef struct dlb__cu_ipc_event_handle {
  char reserved[64];
} dlb__cu_ipc_event_handle;
#endif

/* Values from cuda.h. */
#define DLB__CUDA_SUCCESS 0u
#define DLB__CUDA_ERROR_INVALID_VALUE 1u
#define DLB__CUDA_ERROR_OUT_OF_MEMORY 2u
#define DLB__CUDA_ERROR_NOT_INITIALIZED 3u
#define DLB__CUDA_ERROR_STUB_LIBRARY 34u
#define DLB__CUDA_ERROR_NO_DEVICE 100u
#define DLB__CUDA_ERROR_INVALID_DEVICE 101u
#define DLB__CUDA_ERROR_INVALID_CONTEXT 201u
#define DLB__CUDA_ERROR_INVALID_HANDLE 400u
#define DLB__CUDA_ERROR_NOT_FOUND 500u
#define DLB__CUDA_ERROR_NOT_READY 600u
#define DLB__CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED 712u
#define DLB__CUDA_ERROR_HOST_MEMORY_NOT_REGISTERED 713u
#define DLB__CUDA_ERROR_NOT_SUPPORTED 801u
#define DLB__CUDA_ERROR_SYSTEM_DRIVER_MISMATCH 803u

#define DLB__CU_GET_PROC_ADDRESS_LEGACY_STREAM 1u
#define DLB__CU_GET_PROC_ADDRESS_SUCCESS 0u
#define DLB__CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND 1u
#define DLB__CU_GET_PROC_ADDRESS_VERSION_NOT_SUFFICIENT 2u

#define DLB__CU_MEMORYTYPE_HOST 1u
#define DLB__CU_MEMORYTYPE_DEVICE 2u
#define DLB__CU_MEMORYTYPE_ARRAY 3u
#define DLB__CU_MEMORYTYPE_UNIFIED 4u

#define DLB__CU_POINTER_ATTRIBUTE_MEMORY_TYPE 2u
#define DLB__CU_POINTER_ATTRIBUTE_DEVICE_POINTER 3u
#define DLB__CU_POINTER_ATTRIBUTE_IS_MANAGED 8u
#define DLB__CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL 9u
#define DLB__CU_POINTER_ATTRIBUTE_RANGE_START_ADDR 11u
#define DLB__CU_POINTER_ATTRIBUTE_RANGE_SIZE 12u

#define DLB__CU_DEVICE_ATTRIBUTE_MAX_PITCH 11u
#define DLB__CU_DEVICE_ATTRIBUTE_UNIFIED_ADDRESSING 41u
#define DLB__CU_DEVICE_ATTRIBUTE_MANAGED_MEMORY 83u
#define DLB__CU_DEVICE_ATTRIBUTE_CONCURRENT_MANAGED_ACCESS 89u
#define DLB__CU_DEVICE_ATTRIBUTE_HOST_REGISTER_SUPPORTED 99u
#define DLB__CU_DEVICE_ATTRIBUTE_READ_ONLY_HOST_REGISTER_SUPPORTED 113u

#define DLB__CU_MEMHOSTALLOC_PORTABLE 0x1u
#define DLB__CU_MEMHOSTALLOC_DEVICEMAP 0x2u
#define DLB__CU_MEMHOSTREGISTER_PORTABLE 0x1u
#define DLB__CU_MEMHOSTREGISTER_DEVICEMAP 0x2u
#define DLB__CU_MEMHOSTREGISTER_READ_ONLY 0x8u
#define DLB__CU_MEM_ATTACH_GLOBAL 0x1u
#define DLB__CU_EVENT_DISABLE_TIMING 0x2u
#define DLB__CU_EVENT_INTERPROCESS 0x4u
#define DLB__CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS 0x1u
#define DLB__CU_STREAM_NON_BLOCKING 0x1u

#define DLB__CU_MEM_LOCATION_TYPE_DEVICE 1u
#define DLB__CU_MEM_LOCATION_TYPE_HOST 2u
#define DLB__CU_MEM_ADVISE_SET_READ_MOSTLY 1u
#define DLB__CU_MEM_ADVISE_UNSET_READ_MOSTLY 2u
#define DLB__CU_MEM_ADVISE_UNSET_ACCESSED_BY 6u
#define DLB__CU_DEVICE_CPU (-1)

#define DLB__CU_STREAM_LEGACY ((dlb__cu_stream)0x1)
#define DLB__CU_STREAM_PER_THREAD ((dlb__cu_stream)0x2)

/*
 * The entry points: X(name, base, version, params). name is the exported
 * symbol (used by dlsym where cuGetProcAddress_v2 is missing), base the name
 * cuGetProcAddress_v2 looks up, version the cudaVersion whose ABI the
 * signature is (the _vNNNN suffix of cudaTypedefs.h's PFN_ type). Every
 * function returns CUresult.
 */
#define DLB__CU_REQUIRED(X)                                                   \
  X(cuInit, cuInit, 2000, (unsigned int flags))                               \
  X(cuDriverGetVersion, cuDriverGetVersion, 2020, (int *version))             \
  X(cuGetErrorName, cuGetErrorName, 6000,                                     \
    (dlb__cu_result error, const char **str))                                 \
  X(cuGetErrorString, cuGetErrorString, 6000,                                 \
    (dlb__cu_result error, const char **str))                                 \
  X(cuDeviceGet, cuDeviceGet, 2000, (dlb__cu_device *device, int ordinal))    \
  X(cuDeviceGetCount, cuDeviceGetCount, 2000, (int *count))                   \
  X(cuDeviceGetName, cuDeviceGetName, 2000,                                   \
    (char *name, int len, dlb__cu_device device))                             \
  X(cuDeviceTotalMem_v2, cuDeviceTotalMem, 3020,                              \
    (size_t *bytes, dlb__cu_device device))                                   \
  X(cuDeviceGetAttribute, cuDeviceGetAttribute, 2000,                         \
    (int *value, dlb__cu_enum attrib, dlb__cu_device device))                 \
  X(cuDevicePrimaryCtxRetain, cuDevicePrimaryCtxRetain, 7000,                 \
    (dlb__cu_context *ctx, dlb__cu_device device))                            \
  X(cuDevicePrimaryCtxGetState, cuDevicePrimaryCtxGetState, 7000,             \
    (dlb__cu_device device, unsigned int *flags, int *active))                \
  X(cuCtxGetCurrent, cuCtxGetCurrent, 4000, (dlb__cu_context *ctx))           \
  X(cuCtxPushCurrent_v2, cuCtxPushCurrent, 4000, (dlb__cu_context ctx))       \
  X(cuCtxPopCurrent_v2, cuCtxPopCurrent, 4000, (dlb__cu_context *ctx))        \
  X(cuCtxSynchronize, cuCtxSynchronize, 2000, (void))                         \
  X(cuMemAlloc_v2, cuMemAlloc, 3020,                                          \
    (dlb__cu_deviceptr *dptr, size_t bytesize))                               \
  X(cuMemFree_v2, cuMemFree, 3020, (dlb__cu_deviceptr dptr))                  \
  X(cuMemHostAlloc, cuMemHostAlloc, 2020,                                     \
    (void **pp, size_t bytesize, unsigned int flags))                         \
  X(cuMemFreeHost, cuMemFreeHost, 2000, (void *p))                            \
  X(cuMemHostRegister_v2, cuMemHostRegister, 6050,                            \
    (void *p, size_t bytesize, unsigned int flags))                           \
  X(cuMemHostUnregister, cuMemHostUnregister, 4000, (void *p))                \
  X(cuMemAllocManaged, cuMemAllocManaged, 6000,                               \
    (dlb__cu_deviceptr *dptr, size_t bytesize, unsigned int flags))           \
  X(cuPointerGetAttributes, cuPointerGetAttributes, 7000,                     \
    (unsigned int count, dlb__cu_enum *attributes, void **data,               \
     dlb__cu_deviceptr ptr))                                                  \
  X(cuMemcpyAsync, cuMemcpyAsync, 4000,                                       \
    (dlb__cu_deviceptr dst, dlb__cu_deviceptr src, size_t bytes,              \
     dlb__cu_stream stream))                                                  \
  X(cuMemcpy2DAsync_v2, cuMemcpy2DAsync, 3020,                                \
    (const dlb__cu_memcpy2d *copy, dlb__cu_stream stream))                    \
  X(cuMemcpy2DUnaligned_v2, cuMemcpy2DUnaligned, 3020,                        \
    (const dlb__cu_memcpy2d *copy))                                           \
  X(cuMemcpy3DAsync_v2, cuMemcpy3DAsync, 3020,                                \
    (const dlb__cu_memcpy3d *copy, dlb__cu_stream stream))                    \
  X(cuStreamSynchronize, cuStreamSynchronize, 2000, (dlb__cu_stream stream))  \
  X(cuStreamWaitEvent, cuStreamWaitEvent, 3020,                               \
    (dlb__cu_stream stream, dlb__cu_event event, unsigned int flags))         \
  X(cuEventCreate, cuEventCreate, 2000,                                       \
    (dlb__cu_event *event, unsigned int flags))                               \
  X(cuEventRecord, cuEventRecord, 2000,                                       \
    (dlb__cu_event event, dlb__cu_stream stream))                             \
  X(cuEventDestroy_v2, cuEventDestroy, 4000, (dlb__cu_event event))

/* Managed-memory entry points of drivers >= 12.2 (missing ones leave
 * prefetch and advice to the older forms below), and the IPC ones (on
 * Linux drivers; missing ones make device memory unshareable). */
#define DLB__CU_OPTIONAL(X)                                                   \
  X(cuMemGetAddressRange_v2, cuMemGetAddressRange, 3020,                      \
    (dlb__cu_deviceptr * base, size_t *size, dlb__cu_deviceptr ptr))          \
  X(cuIpcGetMemHandle, cuIpcGetMemHandle, 4010,                               \
    (dlb__cu_ipc_mem_handle * handle, dlb__cu_deviceptr dptr))                \
  X(cuIpcOpenMemHandle_v2, cuIpcOpenMemHandle, 11000,                         \
    (dlb__cu_deviceptr * dptr, dlb__cu_ipc_mem_handle handle,                 \
     unsigned int flags))                                                     \
  X(cuIpcCloseMemHandle, cuIpcCloseMemHandle, 4010, (dlb__cu_deviceptr dptr)) \
  X(cuIpcGetEventHandle, cuIpcGetEventHandle, 4010,                           \
    (dlb__cu_ipc_event_handle * handle, dlb__cu_event event))                 \
  X(cuIpcOpenEventHandle, cuIpcOpenEventHandle, 4010,                         \
    (dlb__cu_event * event, dlb__cu_ipc_event_handle handle))                 \
  X(cuMemPrefetchAsync_v2, cuMemPrefetchAsync, 12020,                         \
    (dlb__cu_deviceptr ptr, size_t count, dlb__cu_memlocation location,       \
     unsigned int flags, dlb__cu_stream stream))                              \
  X(cuMemAdvise_v2, cuMemAdvise, 12020,                                       \
    (dlb__cu_deviceptr ptr, size_t count, dlb__cu_enum advice,                \
     dlb__cu_memlocation location))

/* The CUDA 8 forms, taking a device ordinal (CU_DEVICE_CPU for the host).
 * cuda.h now maps these names to the _v2 forms, so only cudaTypedefs.h
 * still declares them. */
#define DLB__CU_FALLBACK(X)                                                   \
  X(cuMemPrefetchAsync, cuMemPrefetchAsync, 8000,                             \
    (dlb__cu_deviceptr ptr, size_t count, dlb__cu_device device,              \
     dlb__cu_stream stream))                                                  \
  X(cuMemAdvise, cuMemAdvise, 8000,                                           \
    (dlb__cu_deviceptr ptr, size_t count, dlb__cu_enum advice,                \
     dlb__cu_device device))

/* A pointer type per entry point: dlb__cu_pfn_cuMemAlloc_v2, ... */
#define DLB__CU_PFN_TYPEDEF(name, base, version, params) \
  typedef dlb__cu_result (*dlb__cu_pfn_##name) params;
DLB__CU_REQUIRED(DLB__CU_PFN_TYPEDEF)
DLB__CU_OPTIONAL(DLB__CU_PFN_TYPEDEF)
DLB__CU_FALLBACK(DLB__CU_PFN_TYPEDEF)
#undef DLB__CU_PFN_TYPEDEF

/* Resolved by dlsym before anything else (CUDA >= 12.0). */
typedef dlb__cu_result (*dlb__cu_pfn_cuGetProcAddress_v2)(
    const char *symbol, void **pfn, int cuda_version, dlb__cu_uint64 flags,
    dlb__cu_enum *symbol_status);

/* The table the loader fills; left out where cuda.h is included too, since
 * cuda.h defines some of these names as macros. */
#ifndef DLB__CU_WITH_CUDA_H
typedef struct dlb__cu_api {
#define DLB__CU_FIELD(name, base, version, params) dlb__cu_pfn_##name name;
  DLB__CU_REQUIRED(DLB__CU_FIELD)
  DLB__CU_OPTIONAL(DLB__CU_FIELD)
  DLB__CU_FALLBACK(DLB__CU_FIELD)
#undef DLB__CU_FIELD
} dlb__cu_api;
#endif

#endif /* DLB_BACKEND_CUDA_API_H */
