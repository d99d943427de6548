/*
 * cuda_abi_layout.c -- compiled only where cuda.h exists: checks that the
 * structs of cuda_api.h have cuda.h's sizes and field offsets. (A second
 * unit, since cuda_abi_check.c swaps our structs for cuda.h's.)
 */
#include <stddef.h>

#include <cuda.h>

#define DLB__CU_WITH_CUDA_H
#include "backend/cuda_api.h"

#define SAME_FIELD(ours, theirs, field)                                  \
  _Static_assert(offsetof(ours, field) == offsetof(theirs, field) &&     \
                     sizeof(((ours *)0)->field) ==                        \
                         sizeof(((theirs *)0)->field),                    \
                 #theirs "." #field);

_Static_assert(sizeof(dlb__cu_memcpy2d) == sizeof(CUDA_MEMCPY2D),
               "CUDA_MEMCPY2D size");
#define M2(f) SAME_FIELD(dlb__cu_memcpy2d, CUDA_MEMCPY2D, f)
M2(srcXInBytes) M2(srcY) M2(srcMemoryType) M2(srcHost) M2(srcDevice)
M2(srcArray) M2(srcPitch) M2(dstXInBytes) M2(dstY) M2(dstMemoryType)
M2(dstHost) M2(dstDevice) M2(dstArray) M2(dstPitch) M2(WidthInBytes)
M2(Height)

_Static_assert(sizeof(dlb__cu_memcpy3d) == sizeof(CUDA_MEMCPY3D),
               "CUDA_MEMCPY3D size");
#define M3(f) SAME_FIELD(dlb__cu_memcpy3d, CUDA_MEMCPY3D, f)
M3(srcXInBytes) M3(srcY) M3(srcZ) M3(srcLOD) M3(srcMemoryType) M3(srcHost)
M3(srcDevice) M3(srcArray) M3(reserved0) M3(srcPitch) M3(srcHeight)
M3(dstXInBytes) M3(dstY) M3(dstZ) M3(dstLOD) M3(dstMemoryType) M3(dstHost)
M3(dstDevice) M3(dstArray) M3(reserved1) M3(dstPitch) M3(dstHeight)
M3(WidthInBytes) M3(Height) M3(Depth)

_Static_assert(sizeof(dlb__cu_memlocation) == sizeof(CUmemLocation),
               "CUmemLocation size");
SAME_FIELD(dlb__cu_memlocation, CUmemLocation, type)
SAME_FIELD(dlb__cu_memlocation, CUmemLocation, id)
