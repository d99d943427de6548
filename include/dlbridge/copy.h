/*
 * dlbridge/copy.h -- copies between layouts (the CPU copy engine).
 */
#ifndef DLBRIDGE_COPY_H
#define DLBRIDGE_COPY_H

#include "common.h"
#include "status.h"

DLB_BEGIN_DECLS

/*
 * Copies every element of src into dst: same shape and dtype, any strides on
 * either side (negative and zero too; a dst with zero strides gets the last
 * value written, in row-major order). Both must be CPU-accessible memory.
 * Overlapping src and dst are handled through a temporary copy. Packed
 * sub-byte types are refused (DLB_E_UNSUPPORTED) unless both are compact.
 * Large copies run on the copy thread pool. Both are borrowed.
 * DLB_E_LAYOUT for different shapes, DLB_E_DTYPE for different dtypes,
 * DLB_E_DEVICE for memory the CPU cannot access.
 */
DLB_API dlb_status dlb_copy(const DLTensor *src, const DLTensor *dst);

/*
 * Returns a compact row-major copy of src on device (the core copies into
 * cpu memory; other kinds need their runtime), flags IS_COPIED, keeping
 * READ_ONLY off. src is borrowed. New; release with dlb_tensor_release().
 */
DLB_API dlb_status dlb_tensor_copy(const DLTensor *src, DLDevice device,
                                   DLManagedTensorVersioned **out);

/* Sets the number of threads large copies may use (1 = never spawn; 0 =
 * the CPUs this process may run on). The pool starts lazily. */
DLB_API void dlb_copy_set_threads(int threads);

/* Returns the number of threads large copies may use. */
DLB_API int dlb_copy_get_threads(void);

DLB_END_DECLS

#endif /* DLBRIDGE_COPY_H */
