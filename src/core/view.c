/*
 * view.c -- slice, select, permute, reshape and expand without copying.
 *
 * Each view computes its geometry on the stack, then makes one block
 * sharing the base's owner (dlb__tensor_derive). The base is one of ours and
 * is validated again first (its fields are public and writable): every
 * element's byte offset fits in int64_t, which is why offsets of elements
 * that exist are computed without overflow checks. A view with no elements
 * keeps the base's byte_offset: with no element to point at, any offset
 * would do, and computing one could overflow (the strides of an empty
 * tensor are unbounded).
 */
#include <stdbool.h>

#include "tensor_internal.h"

/*
 * What a view is made from: the base's block, and its description for the
 * view's arithmetic to read. A caller may have set the public strides to
 * NULL since (still a valid tensor: compact row-major), so t always carries
 * strides: the base's own, or implied ones in strides.
 */
typedef struct {
  const dlb__tensor *owner;
  uint64_t flags; /* the view's: a copy made for the base is not its own */
  DLTensor t;
  int64_t strides[DLB_MAX_NDIM];
  unsigned packed_bits; /* bits of a packed sub-byte unit, else 0 */
} dlb__view_base;

static dlb_status view_base_of(const DLManagedTensorVersioned *base,
                               DLManagedTensorVersioned **out,
                               dlb__view_base *vb) {
  /* Set on every path, so no caller reads an unset field even where the
   * compiler cannot see that a failure status is never DLB_OK. */
  vb->owner = NULL;
  vb->flags = 0;
  vb->t = (DLTensor){0};
  vb->packed_bits = 0;
  if (out == NULL) return dlb__fail(DLB_E_INVAL, "out is NULL");
  const dlb__tensor *owner = dlb__tensor_of(base);
  if (owner == NULL)
    return dlb__fail(DLB_E_INVAL,
                     base == NULL ? "base is NULL"
                                  : "base is not a dlbridge tensor; adopt it "
                                    "first");
  /* It passed validation when made, but a caller may have overwritten a
   * field since (ndim, a stride), which must not drive the arithmetic. */
  dlb_status st = dlb_managed_validate(base);
  if (st != DLB_OK) return st;
  if (dlb_dtype_is_subbyte(base->dl_tensor.dtype) &&
      !(base->flags & DLPACK_FLAG_BITMASK_IS_SUBBYTE_TYPE_PADDED))
    vb->packed_bits = dlb_dtype_bits(base->dl_tensor.dtype);
  vb->t = base->dl_tensor;
  if (vb->t.strides == NULL && vb->t.ndim > 0) {
    dlb__implied_strides(vb->t.ndim, vb->t.shape, vb->strides);
    vb->t.strides = vb->strides;
  }
  vb->owner = owner;
  vb->flags = base->flags & ~(uint64_t)DLPACK_FLAG_BITMASK_IS_COPIED;
  return DLB_OK;
}

static int any_zero(int32_t ndim, const int64_t *shape) {
  for (int32_t i = 0; i < ndim; i++)
    if (shape[i] == 0) return 1;
  return 0;
}

/*
 * Makes the view of shape and strides (in elements) whose first element is
 * element `first` of the base (an offset in elements from the base's
 * first). Packed sub-byte units have no address of their own: their view
 * must be one run of bits from the start of a byte, as the base is, so it
 * must be compact and start on a byte (DLB_E_UNSUPPORTED otherwise); it
 * gets compact strides. A view with no elements keeps the base's start
 * and the strides it was given.
 */
static dlb_status view_make(const dlb__view_base *vb, int32_t ndim,
                            const int64_t *shape, int64_t *strides,
                            int64_t first, DLManagedTensorVersioned **out) {
  int64_t delta = 0;
  const int empty = any_zero(ndim, shape);
  if (vb->packed_bits == 0) {
    if (!empty) delta = first * (int64_t)dlb_dtype_itemsize(vb->t.dtype);
  } else if (!empty) {
    const unsigned bits = vb->packed_bits;
    int64_t want = 1;
    for (int32_t i = ndim - 1; i >= 0; i--) {
      /* The product stays below the base's element count. */
      if (shape[i] != 1 && strides[i] != want)
        return dlb__fail(DLB_E_UNSUPPORTED,
                         "a view of packed %u-bit units must be compact, "
                         "but its strides[%d] would be %lld, not %lld",
                         bits, (int)i, (long long)strides[i],
                         (long long)want);
      want *= shape[i];
    }
    /* first lies in [0, numel) of a compact base; split it so that
     * first * bits cannot overflow. */
    const int64_t bit_in_byte = (first % 8) * (int64_t)bits % 8;
    if (bit_in_byte != 0)
      return dlb__fail(DLB_E_UNSUPPORTED,
                       "a view of packed %u-bit units must start on a byte, "
                       "but its first unit (%lld) starts at bit %lld of one",
                       bits, (long long)first, (long long)bit_in_byte);
    delta = first / 8 * (int64_t)bits + (first % 8) * (int64_t)bits / 8;
    /* The strides of extent-1 dimensions too, as the base has them. */
    (void)dlb_compact_strides(ndim, shape, 0, strides);
  }
  return dlb__tensor_derive(vb->owner, ndim, shape, strides, delta, vb->flags,
                            out);
}

/* Python's clamping of one slice bound (PySlice_AdjustIndices). */
static int64_t slice_bound(int64_t v, int64_t n, int64_t lower, int64_t upper) {
  if (v < 0) {
    /* v > INT64_MIN here (that value is DLB_SLICE_DEFAULT), so v + n
     * cannot overflow. */
    v += n;
    return v < lower ? lower : v;
  }
  return v > upper ? upper : v;
}

/* Stores the first index of sl over an extent n in *first and returns the
 * number of elements it selects. sl.step != 0. */
static int64_t slice_apply(int64_t n, dlb_slice sl, int64_t *first) {
  int64_t lower = sl.step > 0 ? 0 : -1;
  int64_t upper = sl.step > 0 ? n : n - 1;
  int64_t start = sl.start == DLB_SLICE_DEFAULT
                      ? (sl.step > 0 ? lower : upper)
                      : slice_bound(sl.start, n, lower, upper);
  int64_t stop = sl.stop == DLB_SLICE_DEFAULT
                     ? (sl.step > 0 ? upper : lower)
                     : slice_bound(sl.stop, n, lower, upper);
  *first = start;
  /* start and stop lie in -1..n, so their difference fits; the step is
   * divided as unsigned because -INT64_MIN does not fit in int64_t. */
  if (sl.step > 0)
    return start < stop
               ? (int64_t)((uint64_t)(stop - start - 1) / (uint64_t)sl.step) + 1
               : 0;
  return stop < start ? (int64_t)((uint64_t)(start - stop - 1) /
                                  (0 - (uint64_t)sl.step)) +
                            1
                      : 0;
}

dlb_status dlb_tensor_slice(const DLManagedTensorVersioned *base,
                            int32_t nslices, const dlb_slice *slices,
                            DLManagedTensorVersioned **out) {
  dlb__view_base vb;
  dlb_status st = view_base_of(base, out, &vb);
  if (st != DLB_OK) return st;
  const DLTensor *b = &vb.t;
  int32_t ndim = b->ndim;
  if (nslices < 0 || nslices > ndim)
    return dlb__fail(DLB_E_INVAL, "nslices is %d; base has %d dimensions",
                     (int)nslices, (int)ndim);
  if (nslices > 0 && slices == NULL)
    return dlb__fail(DLB_E_INVAL, "slices is NULL with nslices %d",
                     (int)nslices);
  for (int32_t i = 0; i < nslices; i++)
    if (slices[i].step == 0)
      return dlb__fail(DLB_E_INVAL, "slices[%d].step is 0", (int)i);

  int64_t shape[DLB_MAX_NDIM], strides[DLB_MAX_NDIM], first[DLB_MAX_NDIM];
  for (int32_t i = 0; i < ndim; i++) {
    if (i >= nslices) {
      shape[i] = b->shape[i];
      strides[i] = b->strides[i];
      first[i] = 0;
      continue;
    }
    shape[i] = slice_apply(b->shape[i], slices[i], &first[i]);
    /* The product fits whenever the step reaches a second element of a
     * non-empty base; when it overflows, the dimension holds at most one
     * element or the view none, so its stride is never used. */
    if (dlb__mul_overflow(slices[i].step, b->strides[i], &strides[i]))
      strides[i] = b->strides[i];
  }
  int64_t at = 0;
  if (!any_zero(ndim, shape))
    for (int32_t i = 0; i < ndim; i++) at += first[i] * b->strides[i];
  return view_make(&vb, ndim, shape, strides, at, out);
}

dlb_status dlb_tensor_select(const DLManagedTensorVersioned *base,
                             int32_t dim, int64_t index,
                             DLManagedTensorVersioned **out) {
  dlb__view_base vb;
  dlb_status st = view_base_of(base, out, &vb);
  if (st != DLB_OK) return st;
  const DLTensor *b = &vb.t;
  int32_t ndim = b->ndim;
  if (dim < -ndim || dim >= ndim)
    return dlb__fail(DLB_E_RANGE, "dim is %d; base has %d dimensions",
                     (int)dim, (int)ndim);
  int32_t d = dim < 0 ? dim + ndim : dim;
  int64_t n = b->shape[d];
  if (index < -n || index >= n)
    return dlb__fail(DLB_E_RANGE, "index is %lld; dimension %d has extent %lld",
                     (long long)index, (int)d, (long long)n);
  int64_t i = index < 0 ? index + n : index;

  int64_t shape[DLB_MAX_NDIM], strides[DLB_MAX_NDIM];
  int32_t k = 0;
  for (int32_t j = 0; j < ndim; j++) {
    if (j == d) continue;
    shape[k] = b->shape[j];
    strides[k] = b->strides[j];
    k++;
  }
  return view_make(&vb, k, shape, strides,
                   any_zero(k, shape) ? 0 : i * b->strides[d], out);
}

dlb_status dlb_tensor_permute(const DLManagedTensorVersioned *base,
                              const int32_t *axes,
                              DLManagedTensorVersioned **out) {
  dlb__view_base vb;
  dlb_status st = view_base_of(base, out, &vb);
  if (st != DLB_OK) return st;
  const DLTensor *b = &vb.t;
  int32_t ndim = b->ndim;
  if (ndim > 0 && axes == NULL)
    return dlb__fail(DLB_E_INVAL, "axes is NULL with ndim %d", (int)ndim);
  int64_t shape[DLB_MAX_NDIM], strides[DLB_MAX_NDIM];
  unsigned char seen[DLB_MAX_NDIM] = {0};
  for (int32_t i = 0; i < ndim; i++) {
    int32_t a = axes[i];
    if (a < -ndim || a >= ndim)
      return dlb__fail(DLB_E_INVAL, "axes[%d] is %d; base has %d dimensions",
                       (int)i, (int)a, (int)ndim);
    if (a < 0) a += ndim;
    if (seen[a])
      return dlb__fail(DLB_E_INVAL, "axes[%d] is %d, an axis named twice",
                       (int)i, (int)axes[i]);
    seen[a] = 1;
    shape[i] = b->shape[a];
    strides[i] = b->strides[a];
  }
  return view_make(&vb, ndim, shape, strides, 0, out);
}

/*
 * The strides of a view with shape new_shape whose i-th element in
 * row-major order is the i-th element of the old tensor (old_shape,
 * old_strides) in row-major order, for every i: the no-copy reshape.
 * Returns true and fills new_strides, or false when no strides do that (a
 * copy is needed), with *bad naming the first old dimension of a run that
 * is not laid out contiguously. Both shapes hold the same number of
 * elements, more than 0.
 */
static bool reshaped_view_strides(int32_t old_ndim, const int64_t *old_shape,
                                  const int64_t *old_strides, int32_t new_ndim,
                                  const int64_t *new_shape,
                                  int64_t *new_strides, int32_t *bad) {
  /* Extent-1 dimensions take any stride: only the others constrain. */
  int64_t extent[DLB_MAX_NDIM], stride[DLB_MAX_NDIM];
  int32_t dim_of[DLB_MAX_NDIM];
  int32_t nold = 0;
  for (int32_t i = 0; i < old_ndim; i++) {
    if (old_shape[i] == 1) continue;
    extent[nold] = old_shape[i];
    stride[nold] = old_strides[i];
    dim_of[nold] = i;
    nold++;
  }
  /* Match the shortest runs of old dimensions [old_first, old_end) and new
   * ones [new_first, new_end) with equal element counts, in order (as
   * NumPy's reshape does). */
  int32_t new_first = 0, old_first = 0, new_end = 1, old_end = 1;
  while (new_first < new_ndim && old_first < nold) {
    /* No extent is 0, so these partial products stay below numel. */
    int64_t new_count = new_shape[new_first], old_count = extent[old_first];
    while (new_count != old_count) {
      if (new_count < old_count)
        new_count *= new_shape[new_end++];
      else
        old_count *= extent[old_end++];
    }
    /* The old run must step through memory as one row-major block... */
    for (int32_t k = old_first; k < old_end - 1; k++) {
      int64_t want = 0;
      if (dlb__mul_overflow(extent[k + 1], stride[k + 1], &want) ||
          stride[k] != want) {
        *bad = dim_of[k];
        return false;
      }
    }
    /* ...which the new run then splits row-major, from its last stride. */
    new_strides[new_end - 1] = stride[old_end - 1];
    for (int32_t k = new_end - 1; k > new_first; k--) {
      /* Only an extent-1 dimension can get a stride that overflows (the
       * stride of a longer one reaches an element); such a stride is never
       * used, so any value does. */
      if (dlb__mul_overflow(new_strides[k], new_shape[k], &new_strides[k - 1]))
        new_strides[k - 1] = new_strides[k];
    }
    new_first = new_end++;
    old_first = old_end++;
  }
  /* What is left of the new shape is extent-1 dimensions. */
  int64_t last = new_first >= 1 ? new_strides[new_first - 1] : 1;
  for (int32_t k = new_first; k < new_ndim; k++) new_strides[k] = last;
  return true;
}

dlb_status dlb_tensor_reshape(const DLManagedTensorVersioned *base,
                              int32_t ndim, const int64_t *shape,
                              DLManagedTensorVersioned **out) {
  dlb__view_base vb;
  dlb_status st = view_base_of(base, out, &vb);
  if (st != DLB_OK) return st;
  const DLTensor *b = &vb.t;
  if (ndim < 0 || ndim > DLB_MAX_NDIM)
    return dlb__fail(DLB_E_LAYOUT, "ndim is %d; must be 0..%d", (int)ndim,
                     DLB_MAX_NDIM);
  if (ndim > 0 && shape == NULL)
    return dlb__fail(DLB_E_INVAL, "shape is NULL with ndim %d", (int)ndim);
  int32_t infer = -1;
  int zero = 0;
  for (int32_t i = 0; i < ndim; i++) {
    if (shape[i] == -1) {
      if (infer >= 0)
        return dlb__fail(DLB_E_LAYOUT,
                         "shape[%d] and shape[%d] are both -1; only one "
                         "extent can be inferred",
                         (int)infer, (int)i);
      infer = i;
    } else if (shape[i] < 0) {
      return dlb__fail(DLB_E_LAYOUT,
                       "shape[%d] is %lld; extents must be >= 0 (or -1 to "
                       "infer one)",
                       (int)i, (long long)shape[i]);
    } else if (shape[i] == 0) {
      zero = 1;
    }
  }
  /* The product of the given extents; overflow means more elements than
   * any tensor has, so it cannot match. */
  int64_t known = 1;
  int over = 0;
  for (int32_t i = 0; i < ndim && !zero && !over; i++)
    if (i != infer) over = dlb__mul_overflow(known, shape[i], &known);
  if (zero) known = 0;
  int64_t numel = 0;
  st = dlb_tensor_numel(b, &numel);
  if (st != DLB_OK) return st;

  int64_t nshape[DLB_MAX_NDIM], nstrides[DLB_MAX_NDIM];
  for (int32_t i = 0; i < ndim; i++) nshape[i] = shape[i];
  if (infer >= 0) {
    if (known == 0)
      return dlb__fail(DLB_E_LAYOUT,
                       "shape[%d] is -1 but the other extents multiply to 0, "
                       "so it cannot be inferred",
                       (int)infer);
    if (over || numel % known != 0)
      return dlb__fail(DLB_E_LAYOUT,
                       "shape[%d] is -1 but base's %lld elements do not "
                       "divide by the other extents",
                       (int)infer, (long long)numel);
    nshape[infer] = numel / known;
  } else if (over || known != numel) {
    return dlb__fail(DLB_E_LAYOUT, "shape has %s%lld elements; base has %lld",
                     over ? "more than " : "",
                     over ? (long long)INT64_MAX : (long long)known,
                     (long long)numel);
  }

  if (numel == 0) {
    /* No element is addressed, so the compact strides always do. */
    if (ndim > 0) {
      st = dlb_compact_strides(ndim, nshape, 0, nstrides);
      if (st != DLB_OK) return st;
    }
  } else {
    int32_t bad = 0;
    if (!reshaped_view_strides(b->ndim, b->shape, b->strides, ndim, nshape,
                               nstrides, &bad))
      return dlb__fail(DLB_E_NEEDS_COPY,
                       "base dimension %d (stride %lld) is not contiguous with "
                       "the next one it would merge with, so the new shape "
                       "needs a copy",
                       (int)bad, (long long)b->strides[bad]);
  }
  return view_make(&vb, ndim, nshape, nstrides, 0, out);
}

dlb_status dlb_tensor_expand(const DLManagedTensorVersioned *base,
                             int32_t ndim, const int64_t *shape,
                             DLManagedTensorVersioned **out) {
  dlb__view_base vb;
  dlb_status st = view_base_of(base, out, &vb);
  if (st != DLB_OK) return st;
  const DLTensor *b = &vb.t;
  if (ndim < b->ndim || ndim > DLB_MAX_NDIM)
    return dlb__fail(DLB_E_LAYOUT, "ndim is %d; must be %d (base's) to %d",
                     (int)ndim, (int)b->ndim, DLB_MAX_NDIM);
  if (ndim > 0 && shape == NULL)
    return dlb__fail(DLB_E_INVAL, "shape is NULL with ndim %d", (int)ndim);
  int32_t lead = ndim - b->ndim;
  int64_t strides[DLB_MAX_NDIM];
  for (int32_t i = 0; i < ndim; i++) {
    if (shape[i] < 0)
      return dlb__fail(DLB_E_LAYOUT, "shape[%d] is %lld; extents must be >= 0",
                       (int)i, (long long)shape[i]);
    if (i < lead) {
      strides[i] = 0;
      continue;
    }
    int64_t n = b->shape[i - lead];
    if (n == shape[i]) {
      strides[i] = b->strides[i - lead];
    } else if (n == 1) {
      strides[i] = 0;
    } else {
      return dlb__fail(DLB_E_LAYOUT,
                       "shape[%d] is %lld but base dimension %d has extent "
                       "%lld; only extent 1 broadcasts",
                       (int)i, (long long)shape[i], (int)(i - lead),
                       (long long)n);
    }
  }
  int64_t numel = 0;
  st = dlb_shape_numel(ndim, shape, &numel);
  if (st != DLB_OK) return st;
  vb.flags |= DLPACK_FLAG_BITMASK_READ_ONLY;
  return view_make(&vb, ndim, shape, strides, 0, out);
}
