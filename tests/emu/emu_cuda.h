/*
 * emu_cuda.h -- entry points the emulated CUDA driver exports besides the
 * ones dlbridge calls (DLB__CU_REQUIRED and friends in cuda_api.h): the
 * ones tests call to play PyTorch or CuPy. Same format, and checked
 * against cuda.h the same way.
 */
#ifndef DLB_TESTS_EMU_CUDA_H
#define DLB_TESTS_EMU_CUDA_H

#include "backend/cuda_api.h"

#define EMU_CU_EXTRA(X)                                                       \
  X(cuDevicePrimaryCtxRelease_v2, cuDevicePrimaryCtxRelease, 11000,           \
    (dlb__cu_device device))                                                  \
  X(cuCtxSetCurrent, cuCtxSetCurrent, 4000, (dlb__cu_context ctx))            \
  X(cuCtxGetDevice, cuCtxGetDevice, 2000, (dlb__cu_device * device))          \
  X(cuCtxSynchronize_v2, cuCtxSynchronize, 13000, (dlb__cu_context ctx))      \
  X(cuMemAllocHost_v2, cuMemAllocHost, 3020, (void **pp, size_t bytesize))    \
  X(cuMemHostGetDevicePointer_v2, cuMemHostGetDevicePointer, 3020,            \
    (dlb__cu_deviceptr * dptr, void *p, unsigned int flags))                  \
  X(cuMemHostGetFlags, cuMemHostGetFlags, 2030,                               \
    (unsigned int *flags, void *p))                                           \
  X(cuPointerGetAttribute, cuPointerGetAttribute, 4000,                       \
    (void *data, dlb__cu_enum attribute, dlb__cu_deviceptr ptr))              \
  X(cuMemcpy, cuMemcpy, 4000,                                                 \
    (dlb__cu_deviceptr dst, dlb__cu_deviceptr src, size_t bytes))             \
  X(cuMemcpy2D_v2, cuMemcpy2D, 3020, (const dlb__cu_memcpy2d *copy))          \
  X(cuMemcpy3D_v2, cuMemcpy3D, 3020, (const dlb__cu_memcpy3d *copy))          \
  X(cuStreamCreate, cuStreamCreate, 2000,                                     \
    (dlb__cu_stream * stream, unsigned int flags))                            \
  X(cuStreamDestroy_v2, cuStreamDestroy, 4000, (dlb__cu_stream stream))       \
  X(cuStreamQuery, cuStreamQuery, 2000, (dlb__cu_stream stream))              \
  X(cuEventQuery, cuEventQuery, 2000, (dlb__cu_event event))                  \
  X(cuEventSynchronize, cuEventSynchronize, 2000, (dlb__cu_event event))

/* The oldest ABIs of names that later got a _v2: the emulator exports
 * them as stubs returning NOT_SUPPORTED, so a caller that asks for the
 * wrong version fails loudly. X(name, version). */
#define EMU_CU_LEGACY(X)                  \
  X(cuMemAlloc, 2000)                     \
  X(cuMemFree, 2000)                      \
  X(cuMemHostRegister, 4000)              \
  X(cuCtxPushCurrent, 2000)               \
  X(cuCtxPopCurrent, 2000)                \
  X(cuMemcpy2D, 2000)                     \
  X(cuMemcpy2DAsync, 2000)                \
  X(cuMemcpy2DUnaligned, 2000)            \
  X(cuMemcpy3D, 2000)                     \
  X(cuMemcpy3DAsync, 2000)                \
  X(cuEventDestroy, 2000)                 \
  X(cuStreamDestroy, 2000)                \
  X(cuMemGetAddressRange, 2000)           \
  X(cuMemAllocHost, 2000)                 \
  X(cuMemHostGetDevicePointer, 2020)      \
  X(cuDevicePrimaryCtxRelease, 7000)      \
  X(cuIpcOpenMemHandle, 4010)             \
  X(cuDeviceTotalMem, 2000)

#endif /* DLB_TESTS_EMU_CUDA_H */
