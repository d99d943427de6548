/*
 * cuda_abi_check.c -- compiled only where cuda.h exists: checks at build
 * time that every entry point dlbridge resolves (and every one the
 * emulated driver exports) has the signature cudaTypedefs.h gives for
 * the version we ask cuGetProcAddress_v2 for, and the signature cuda.h
 * declares for the exported _v2 name; and that our structs and constants
 * match cuda.h's. Nothing here runs.
 */
#include <stddef.h>

#include <cuda.h>
#include <cudaTypedefs.h>

/* Signatures name cuda.h's own structs here... */
#define DLB__CU_WITH_CUDA_H
#define DLB__CU_STRUCTS_FROM_CUDA_H
typedef CUDA_MEMCPY2D dlb__cu_memcpy2d;
typedef CUDA_MEMCPY3D dlb__cu_memcpy3d;
typedef CUmemLocation dlb__cu_memlocation;
typedef CUipcMemHandle dlb__cu_ipc_mem_handle;
typedef CUipcEventHandle dlb__cu_ipc_event_handle;
#include "backend/cuda_api.h"
#include "emu_cuda.h"

#define SAME(a, b) __builtin_types_compatible_p(a, b)

/* PFN_<base>_v<version> is cudaTypedefs.h's type of the entry point that
 * cuGetProcAddress_v2(base, version) returns. */
#define CHECK_PFN(name, base, version, params)                          \
  _Static_assert(SAME(dlb__cu_pfn_##name, PFN_##base##_v##version),     \
                 #name ": our signature differs from PFN_" #base "_v"   \
                 #version " in cudaTypedefs.h");
DLB__CU_REQUIRED(CHECK_PFN)
DLB__CU_OPTIONAL(CHECK_PFN)
DLB__CU_FALLBACK(CHECK_PFN)
_Static_assert(SAME(dlb__cu_pfn_cuGetProcAddress_v2,
                    PFN_cuGetProcAddress_v12000),
               "cuGetProcAddress_v2 differs from cudaTypedefs.h");

/* The same for the exported names dlsym finds on drivers before 12.0
 * (cuda.h maps the CUDA 8 prefetch and advice names to the _v2 forms, so
 * those are checked through their PFN types above only). */
#define CHECK_DECL(name, base, version, params)                  \
  _Static_assert(SAME(dlb__cu_pfn_##name, __typeof__(&name)),   \
                 #name ": our signature differs from cuda.h");
DLB__CU_REQUIRED(CHECK_DECL)
DLB__CU_OPTIONAL(CHECK_DECL)

/* The emulator's extra entry points. */
#define EXTRA_PFN(name, base, version, params)                           \
  typedef dlb__cu_result (*extra_##name) params;                         \
  _Static_assert(SAME(extra_##name, PFN_##base##_v##version),            \
                 #name ": the emulator's signature differs from PFN_"    \
                 #base "_v" #version);
EMU_CU_EXTRA(EXTRA_PFN)

/* The ABI must not be the one that the unversioned names have. */
_Static_assert(!SAME(dlb__cu_pfn_cuCtxSynchronize,
                     PFN_cuCtxSynchronize_v13000),
               "cuCtxSynchronize must be the CUDA 2.0 form");

/* Scalars and handles. */
_Static_assert(SAME(dlb__cu_result, CUresult), "CUresult");
_Static_assert(SAME(dlb__cu_device, CUdevice), "CUdevice");
_Static_assert(SAME(dlb__cu_deviceptr, CUdeviceptr), "CUdeviceptr");
_Static_assert(SAME(dlb__cu_uint64, cuuint64_t), "cuuint64_t");
_Static_assert(SAME(dlb__cu_context, CUcontext), "CUcontext");
_Static_assert(SAME(dlb__cu_stream, CUstream), "CUstream");
_Static_assert(SAME(dlb__cu_event, CUevent), "CUevent");

/* Constants. */
#define CHECK_VALUE(ours, theirs) \
  _Static_assert((long long)(ours) == (long long)(theirs), #ours);
CHECK_VALUE(DLB__CUDA_SUCCESS, CUDA_SUCCESS)
CHECK_VALUE(DLB__CUDA_ERROR_INVALID_VALUE, CUDA_ERROR_INVALID_VALUE)
CHECK_VALUE(DLB__CUDA_ERROR_OUT_OF_MEMORY, CUDA_ERROR_OUT_OF_MEMORY)
CHECK_VALUE(DLB__CUDA_ERROR_NOT_INITIALIZED, CUDA_ERROR_NOT_INITIALIZED)
CHECK_VALUE(DLB__CUDA_ERROR_STUB_LIBRARY, CUDA_ERROR_STUB_LIBRARY)
CHECK_VALUE(DLB__CUDA_ERROR_SYSTEM_DRIVER_MISMATCH,
            CUDA_ERROR_SYSTEM_DRIVER_MISMATCH)
CHECK_VALUE(DLB__CUDA_ERROR_NO_DEVICE, CUDA_ERROR_NO_DEVICE)
CHECK_VALUE(DLB__CUDA_ERROR_INVALID_DEVICE, CUDA_ERROR_INVALID_DEVICE)
CHECK_VALUE(DLB__CUDA_ERROR_INVALID_CONTEXT, CUDA_ERROR_INVALID_CONTEXT)
CHECK_VALUE(DLB__CUDA_ERROR_INVALID_HANDLE, CUDA_ERROR_INVALID_HANDLE)
CHECK_VALUE(DLB__CUDA_ERROR_NOT_FOUND, CUDA_ERROR_NOT_FOUND)
CHECK_VALUE(DLB__CUDA_ERROR_NOT_READY, CUDA_ERROR_NOT_READY)
CHECK_VALUE(DLB__CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED,
            CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED)
CHECK_VALUE(DLB__CUDA_ERROR_HOST_MEMORY_NOT_REGISTERED,
            CUDA_ERROR_HOST_MEMORY_NOT_REGISTERED)
CHECK_VALUE(DLB__CUDA_ERROR_NOT_SUPPORTED, CUDA_ERROR_NOT_SUPPORTED)
CHECK_VALUE(DLB__CU_GET_PROC_ADDRESS_LEGACY_STREAM,
            CU_GET_PROC_ADDRESS_LEGACY_STREAM)
CHECK_VALUE(DLB__CU_GET_PROC_ADDRESS_SUCCESS, CU_GET_PROC_ADDRESS_SUCCESS)
CHECK_VALUE(DLB__CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND,
            CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND)
CHECK_VALUE(DLB__CU_GET_PROC_ADDRESS_VERSION_NOT_SUFFICIENT,
            CU_GET_PROC_ADDRESS_VERSION_NOT_SUFFICIENT)
CHECK_VALUE(DLB__CU_MEMORYTYPE_HOST, CU_MEMORYTYPE_HOST)
CHECK_VALUE(DLB__CU_MEMORYTYPE_DEVICE, CU_MEMORYTYPE_DEVICE)
CHECK_VALUE(DLB__CU_MEMORYTYPE_ARRAY, CU_MEMORYTYPE_ARRAY)
CHECK_VALUE(DLB__CU_MEMORYTYPE_UNIFIED, CU_MEMORYTYPE_UNIFIED)
CHECK_VALUE(DLB__CU_POINTER_ATTRIBUTE_MEMORY_TYPE,
            CU_POINTER_ATTRIBUTE_MEMORY_TYPE)
CHECK_VALUE(DLB__CU_POINTER_ATTRIBUTE_DEVICE_POINTER,
            CU_POINTER_ATTRIBUTE_DEVICE_POINTER)
CHECK_VALUE(DLB__CU_POINTER_ATTRIBUTE_IS_MANAGED,
            CU_POINTER_ATTRIBUTE_IS_MANAGED)
CHECK_VALUE(DLB__CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL,
            CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL)
CHECK_VALUE(DLB__CU_POINTER_ATTRIBUTE_RANGE_START_ADDR,
            CU_POINTER_ATTRIBUTE_RANGE_START_ADDR)
CHECK_VALUE(DLB__CU_POINTER_ATTRIBUTE_RANGE_SIZE,
            CU_POINTER_ATTRIBUTE_RANGE_SIZE)
CHECK_VALUE(DLB__CU_DEVICE_ATTRIBUTE_MAX_PITCH, CU_DEVICE_ATTRIBUTE_MAX_PITCH)
CHECK_VALUE(DLB__CU_DEVICE_ATTRIBUTE_UNIFIED_ADDRESSING,
            CU_DEVICE_ATTRIBUTE_UNIFIED_ADDRESSING)
CHECK_VALUE(DLB__CU_DEVICE_ATTRIBUTE_MANAGED_MEMORY,
            CU_DEVICE_ATTRIBUTE_MANAGED_MEMORY)
CHECK_VALUE(DLB__CU_DEVICE_ATTRIBUTE_CONCURRENT_MANAGED_ACCESS,
            CU_DEVICE_ATTRIBUTE_CONCURRENT_MANAGED_ACCESS)
CHECK_VALUE(DLB__CU_MEMHOSTALLOC_PORTABLE, CU_MEMHOSTALLOC_PORTABLE)
CHECK_VALUE(DLB__CU_MEMHOSTALLOC_DEVICEMAP, CU_MEMHOSTALLOC_DEVICEMAP)
CHECK_VALUE(DLB__CU_MEMHOSTREGISTER_PORTABLE, CU_MEMHOSTREGISTER_PORTABLE)
CHECK_VALUE(DLB__CU_MEMHOSTREGISTER_DEVICEMAP, CU_MEMHOSTREGISTER_DEVICEMAP)
CHECK_VALUE(DLB__CU_MEM_ATTACH_GLOBAL, CU_MEM_ATTACH_GLOBAL)
CHECK_VALUE(DLB__CU_EVENT_DISABLE_TIMING, CU_EVENT_DISABLE_TIMING)
CHECK_VALUE(DLB__CU_EVENT_INTERPROCESS, CU_EVENT_INTERPROCESS)
CHECK_VALUE(DLB__CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS,
            CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS)
CHECK_VALUE(DLB__CU_STREAM_NON_BLOCKING, CU_STREAM_NON_BLOCKING)
CHECK_VALUE(DLB__CU_MEM_LOCATION_TYPE_DEVICE, CU_MEM_LOCATION_TYPE_DEVICE)
CHECK_VALUE(DLB__CU_MEM_LOCATION_TYPE_HOST, CU_MEM_LOCATION_TYPE_HOST)
CHECK_VALUE(DLB__CU_MEM_ADVISE_SET_READ_MOSTLY, CU_MEM_ADVISE_SET_READ_MOSTLY)
CHECK_VALUE(DLB__CU_MEM_ADVISE_UNSET_READ_MOSTLY,
            CU_MEM_ADVISE_UNSET_READ_MOSTLY)
CHECK_VALUE(DLB__CU_MEM_ADVISE_UNSET_ACCESSED_BY,
            CU_MEM_ADVISE_UNSET_ACCESSED_BY)
CHECK_VALUE(DLB__CU_DEVICE_CPU, CU_DEVICE_CPU)
