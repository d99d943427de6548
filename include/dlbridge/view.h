/*
 * dlbridge/view.h -- views that share a tensor's data without copying.
 *
 * Every function takes a dlbridge tensor (dlb_tensor_is_ours(); adopt a
 * foreign one first; DLB_E_INVAL otherwise), checks it again with
 * dlb_managed_validate() (its fields may have been overwritten since it was
 * made; that status then), borrows it, and returns a new tensor that shares
 * its owner: the base may be released before the view. Views keep READ_ONLY
 * and drop IS_COPIED. A view keeps the base's data pointer and moves
 * byte_offset (a view with no elements keeps the base's byte_offset); only
 * when its first element lies below data (foreign data with negative
 * strides) does data move down to it, with byte_offset 0. Packed sub-byte
 * units have no address of their own: a view of them must be compact and
 * start on a byte (a row of a 4 x 4 int4 tensor, say, or a reshape), is then
 * one run of bits from that byte with compact strides, and is refused
 * otherwise (DLB_E_UNSUPPORTED, naming the stride or the bit). New; release
 * each result with dlb_tensor_release().
 */
#ifndef DLBRIDGE_VIEW_H
#define DLBRIDGE_VIEW_H

#include "common.h"
#include "status.h"

DLB_BEGIN_DECLS

/* Marks a default start or stop in a dlb_slice. */
#define DLB_SLICE_DEFAULT INT64_MIN

/* One dimension of a slice, with Python's meaning: start and stop may be
 * negative (counted from the end) and are clamped; DLB_SLICE_DEFAULT picks
 * the natural end for the step's sign; step != 0 and may be negative. */
typedef struct dlb_slice {
  int64_t start; /* first index, or DLB_SLICE_DEFAULT */
  int64_t stop;  /* index past the last, or DLB_SLICE_DEFAULT */
  int64_t step;  /* distance between indices, not 0 */
} dlb_slice;

/* Slices the first nslices dimensions (nslices <= ndim; the rest are kept
 * whole). DLB_E_INVAL for step 0 or nslices out of range. */
DLB_API dlb_status dlb_tensor_slice(const DLManagedTensorVersioned *base,
                                    int32_t nslices, const dlb_slice *slices,
                                    DLManagedTensorVersioned **out);

/* Selects index of dimension dim, which the view drops; negative values of
 * either count from the end. DLB_E_RANGE for an index or dim out of range. */
DLB_API dlb_status dlb_tensor_select(const DLManagedTensorVersioned *base,
                                     int32_t dim, int64_t index,
                                     DLManagedTensorVersioned **out);

/* Reorders dimensions: view dimension i is base dimension axes[i]; axes
 * holds each of 0..ndim-1 once (negative values count from the end).
 * DLB_E_INVAL otherwise. */
DLB_API dlb_status dlb_tensor_permute(const DLManagedTensorVersioned *base,
                                      const int32_t *axes,
                                      DLManagedTensorVersioned **out);

/* Gives base a new shape of the same element count (one entry may be -1,
 * inferred) when its strides allow it without a copy, in row-major element
 * order. DLB_E_LAYOUT when the counts differ, for an extent below -1, two
 * -1 entries or ndim outside 0..DLB_MAX_NDIM; DLB_E_NEEDS_COPY when the
 * strides do not allow a view; DLB_E_OVERFLOW when the compact strides of an
 * empty new shape do not fit in int64_t. */
DLB_API dlb_status dlb_tensor_reshape(const DLManagedTensorVersioned *base,
                                      int32_t ndim, const int64_t *shape,
                                      DLManagedTensorVersioned **out);

/* Broadcasts base to shape (ndim >= base's ndim) with NumPy's rules: new
 * leading dimensions and size-1 dimensions get stride 0. The view is marked
 * READ_ONLY, since its elements alias. DLB_E_LAYOUT when a dimension of base
 * is neither 1 nor the target extent, for a negative extent or ndim out of
 * range; DLB_E_OVERFLOW when the element count exceeds INT64_MAX. */
DLB_API dlb_status dlb_tensor_expand(const DLManagedTensorVersioned *base,
                                     int32_t ndim, const int64_t *shape,
                                     DLManagedTensorVersioned **out);

DLB_END_DECLS

#endif /* DLBRIDGE_VIEW_H */
