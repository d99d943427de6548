/*
 * emu_hip.h -- entry points the emulated HIP runtime exports besides the
 * ones dlbridge calls (DLB__HIP_REQUIRED in hip_api.h): the ones tests
 * call to play a framework. Same format.
 */
#ifndef DLB_TESTS_EMU_HIP_H
#define DLB_TESTS_EMU_HIP_H

#include "backend/hip_api.h"

#define EMU_HIP_EXTRA(X)                                                      \
  X(hipMallocManaged, dlb__hip_error,                                         \
    (void **ptr, size_t size, unsigned int flags))                            \
  X(hipHostAlloc, dlb__hip_error,                                             \
    (void **ptr, size_t size, unsigned int flags))                            \
  X(hipStreamCreateWithFlags, dlb__hip_error,                                 \
    (dlb__hip_stream * stream, unsigned int flags))                           \
  X(hipStreamDestroy, dlb__hip_error, (dlb__hip_stream stream))               \
  X(hipEventSynchronize, dlb__hip_error, (dlb__hip_event event))

#endif /* DLB_TESTS_EMU_HIP_H */
