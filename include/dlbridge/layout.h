/*
 * dlbridge/layout.h -- validation and geometry of a DLTensor.
 *
 * Wherever a DLTensor's strides are NULL they mean compact row-major strides
 * (producers before DLPack 1.2).
 */
#ifndef DLBRIDGE_LAYOUT_H
#define DLBRIDGE_LAYOUT_H

#include "common.h"
#include "status.h"

DLB_BEGIN_DECLS

/* The most dimensions a tensor may have. */
#define DLB_MAX_NDIM 64

/*
 * Checks every invariant of a tensor received from elsewhere and returns the
 * first problem, naming the field and the value in dlb_last_error():
 * t NULL (DLB_E_INVAL); ndim < 0 or > DLB_MAX_NDIM, shape NULL with ndim > 0,
 * a negative shape entry, an element count over INT64_MAX (DLB_E_LAYOUT /
 * DLB_E_OVERFLOW); a dtype dlb_dtype_check() refuses (DLB_E_DTYPE); an unknown
 * device type or negative device_id (DLB_E_DEVICE); strides whose byte span
 * or data + byte_offset overflows (DLB_E_OVERFLOW); NULL data with a non-zero
 * element count (DLB_E_INVAL); data + byte_offset + the byte span wrapping
 * the address space (DLB_E_OVERFLOW).
 * Sub-byte types are taken as packed (no flags here, and packed is DLPack's
 * default): a tensor with elements must have NULL or compact row-major
 * strides (DLB_E_LAYOUT; size-1 dimensions may have any stride). Its first
 * element starts at the least significant bit of the byte at
 * data + byte_offset, so any byte_offset is accepted.
 * A tensor with no elements may have NULL data and any strides.
 * Never reads the data. Host-type memory with a non-zero device_id is
 * accepted (see dlb_device_normalize).
 */
DLB_API dlb_status dlb_tensor_validate(const DLTensor *t);

/*
 * Checks a versioned managed tensor: version.major must be DLPACK_MAJOR_VERSION
 * (DLB_E_VERSION; then only its deleter may be used), flags must hold only
 * the three DLPack flag bits (DLB_E_INVAL), and the tensor must pass
 * dlb_tensor_validate() (sub-byte rules follow IS_SUBBYTE_TYPE_PADDED: with
 * it each element takes a byte and any strides are allowed). DLB_E_INVAL
 * for m NULL.
 */
DLB_API dlb_status dlb_managed_validate(const DLManagedTensorVersioned *m);

/*
 * Checks a legacy (unversioned) managed tensor without taking it: its
 * tensor must pass dlb_tensor_validate(), and one that
 * dlb_tensor_to_legacy() made (dlb_legacy_is_ours()) must keep its shape
 * and strides within the arrays made for it (DLB_E_LAYOUT for an ndim or
 * pointers changed since). What dlb_tensor_from_legacy() accepts with no
 * flags passes. DLB_E_INVAL for m NULL.
 */
DLB_API dlb_status dlb_legacy_validate(const DLManagedTensor *m);

/* Stores in *out the product of shape[0..ndim) (1 for ndim 0).
 * DLB_E_LAYOUT for a negative entry, bad ndim or shape NULL with ndim > 0,
 * DLB_E_INVAL for out NULL, DLB_E_OVERFLOW when the
 * product exceeds INT64_MAX (a zero extent anywhere gives 0, never overflow). */
DLB_API dlb_status dlb_shape_numel(int32_t ndim, const int64_t *shape,
                                   int64_t *out);

/* dlb_shape_numel() of t's shape. */
DLB_API dlb_status dlb_tensor_numel(const DLTensor *t, int64_t *out);

/*
 * Stores the byte range the tensor's elements touch, relative to t->data:
 * *lo is the lowest byte offset, *hi one past the highest (for any strides:
 * negative, zero, overlapping). byte_offset is included. A tensor with no
 * elements gives lo == hi == byte_offset. Sub-byte types are measured
 * packed: the element at element offset k covers bits [k * bits, (k + 1) *
 * bits) and a partly used byte counts whole. DLB_E_OVERFLOW when the
 * element count, byte_offset, lo, hi or hi - lo does not fit in int64_t;
 * DLB_E_LAYOUT for a bad ndim, NULL shape with ndim > 0 or a negative
 * extent; DLB_E_INVAL for a NULL argument.
 */
DLB_API dlb_status dlb_tensor_byte_span(const DLTensor *t, int64_t *lo,
                                        int64_t *hi);

/* Returns 1 when t is compact in row-major (C) order, else 0. Dimensions of
 * size 1 may have any stride and a tensor with no elements is contiguous.
 * NULL strides are contiguous. */
DLB_API int dlb_tensor_is_c_contiguous(const DLTensor *t);

/* Returns 1 when t is compact in column-major (Fortran) order, else 0, with
 * the same rules as dlb_tensor_is_c_contiguous(); NULL strides (row-major)
 * count only when at most one dimension has more than one element. */
DLB_API int dlb_tensor_is_f_contiguous(const DLTensor *t);

/* Writes the compact strides of shape into strides_out (ndim entries):
 * row-major when fortran == 0, column-major otherwise. Size-0 extents count
 * as 1. DLB_E_OVERFLOW when a stride exceeds INT64_MAX, DLB_E_LAYOUT for a
 * bad ndim or a negative extent. */
DLB_API dlb_status dlb_compact_strides(int32_t ndim, const int64_t *shape,
                                       int fortran, int64_t *strides_out);

/*
 * Merges dimensions in place for an operation over up to `count` tensors of
 * the same shape (strides[k] is tensor k's stride array, ndim entries each):
 * drops size-1 dimensions and joins dimension i with i+1 when, for every
 * tensor, strides[i] == shape[i+1] * strides[i+1]. The result is row-major
 * ordered as the input. Returns the new ndim (0 for a single element). When
 * any extent is 0 the result is one dimension of extent 0 and stride 1.
 * Never fails; count must be >= 1 and ndim within 0..DLB_MAX_NDIM.
 */
DLB_API int32_t dlb_coalesce_dims(int32_t ndim, int64_t *shape,
                                  int64_t *const *strides, int count);

/* Returns the largest power of two, at most 4096, dividing the address
 * (char *)t->data + t->byte_offset; 4096 for NULL data, 1 for t NULL.
 * DLPack recommends 256 but producers do not honour it: check, never
 * assume. */
DLB_API size_t dlb_tensor_alignment(const DLTensor *t);

DLB_END_DECLS

#endif /* DLBRIDGE_LAYOUT_H */
