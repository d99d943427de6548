/*
 * dlbridge.h -- the public C API of dlbridge.
 *
 * dlbridge allocates, wraps, validates, views, copies and releases DLPack
 * tensors in every kind of memory DLPack names. This umbrella header pulls in
 * every part of the API; each part lives in include/dlbridge/ and documents
 * each declaration: what it returns and who owns what.
 *
 * Conventions, everywhere:
 *  - Every fallible call returns a dlb_status: DLB_OK (0) or a negative code.
 *    On failure out-parameters are left untouched and dlb_last_error() holds
 *    a message naming the field and the value at fault.
 *  - "new; release with X": the caller owns the result.
 *  - "borrows": the callee keeps no reference after it returns.
 *  - "takes ownership on success": on failure the caller still owns it.
 *  - Release functions accept NULL.
 */
#ifndef DLBRIDGE_H
#define DLBRIDGE_H

#include "dlbridge/common.h"
#include "dlbridge/status.h"
#include "dlbridge/alloc.h"
#include "dlbridge/device.h"
#include "dlbridge/dtype.h"
#include "dlbridge/layout.h"
#include "dlbridge/tensor.h"
#include "dlbridge/view.h"
#include "dlbridge/copy.h"
#include "dlbridge/gpu.h"
#include "dlbridge/share.h"
#include "dlbridge/npy.h"

#endif /* DLBRIDGE_H */
