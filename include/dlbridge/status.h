/*
 * dlbridge/status.h -- status codes and error messages.
 */
#ifndef DLBRIDGE_STATUS_H
#define DLBRIDGE_STATUS_H

#include "common.h"

DLB_BEGIN_DECLS

/*
 * Every status: X(NAME, value, short message). Codes are never renumbered;
 * new codes are appended with the next free value.
 */
#define DLB_STATUS_MAP(X)                                                    \
  X(OK, 0, "success")                                                        \
  X(E_INVAL, -1, "invalid argument")                                         \
  X(E_NOMEM, -2, "out of memory")                                            \
  X(E_OVERFLOW, -3, "size or offset overflows")                              \
  X(E_DTYPE, -4, "invalid or unsupported data type")                         \
  X(E_DEVICE, -5, "invalid or unsupported device")                           \
  X(E_LAYOUT, -6, "invalid shape, strides or offset")                        \
  X(E_VERSION, -7, "unsupported DLPack version")                             \
  X(E_READONLY, -8, "tensor is read-only")                                   \
  X(E_UNSUPPORTED, -9, "operation not supported")                            \
  X(E_NO_RUNTIME, -10, "GPU runtime library not found")                      \
  X(E_NO_DEVICE, -11, "no such GPU device")                                  \
  X(E_RUNTIME, -12, "GPU runtime call failed")                               \
  X(E_OVERLAP, -13, "source and destination overlap")                        \
  X(E_NEEDS_COPY, -14, "not possible without a copy")                        \
  X(E_RANGE, -15, "index out of range")                                      \
  X(E_STATE, -16, "object in the wrong state")                               \
  X(E_SYSTEM, -17, "operating system call failed")                           \
  X(E_HANDLE, -18, "invalid share handle")

/* A status: DLB_OK or one of the negative DLB_E_* codes above. */
typedef enum dlb_status {
#define DLB__STATUS_ENUM(name, value, msg) DLB_##name = (value),
  DLB_STATUS_MAP(DLB__STATUS_ENUM)
#undef DLB__STATUS_ENUM
} dlb_status;

/* Returns the status's name, e.g. "DLB_E_NOMEM", as a static string;
 * "DLB_E_UNKNOWN" for a value not in the list. */
DLB_API const char *dlb_status_name(dlb_status status);

/* Returns the status's short message, e.g. "out of memory", as a static
 * string; "unknown status" for a value not in the list. */
DLB_API const char *dlb_status_message(dlb_status status);

/* Returns the detailed message of the last failure on this thread, e.g.
 * "shape[1] is -3; extents must be >= 0". Never NULL: "" when no call on
 * this thread has failed since the last dlb_clear_error(). Valid until the
 * next dlbridge call on this thread. Successful calls leave it alone. */
DLB_API const char *dlb_last_error(void);

/* Empties this thread's detailed message. */
DLB_API void dlb_clear_error(void);

DLB_END_DECLS

#endif /* DLBRIDGE_STATUS_H */
