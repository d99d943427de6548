/* layout.c -- validation and geometry of a DLTensor: element counts, byte
 * spans, contiguity, compact strides, dimension coalescing, alignment. */
#include <stdio.h>
#include <string.h>

#include "internal.h"

#define DLB__KNOWN_FLAGS                                                  \
  (DLPACK_FLAG_BITMASK_READ_ONLY | DLPACK_FLAG_BITMASK_IS_COPIED |        \
   DLPACK_FLAG_BITMASK_IS_SUBBYTE_TYPE_PADDED)

typedef enum {
  SHAPE_OK,
  SHAPE_BAD_NDIM,
  SHAPE_NULL,
  SHAPE_NEGATIVE,
  SHAPE_OVERFLOW
} shape_problem;

/* Scans a shape without touching the error message, so the predicates
 * (contiguity) can use it; *at names the offending dimension. */
static shape_problem shape_scan(int32_t ndim, const int64_t *shape,
                                int64_t *numel, int32_t *at) {
  if (ndim < 0 || ndim > DLB_MAX_NDIM) return SHAPE_BAD_NDIM;
  if (ndim > 0 && shape == NULL) return SHAPE_NULL;
  int has_zero = 0;
  /* Every entry is checked before multiplying: a zero extent must not hide
   * a negative one, and makes the count 0 however large the others are. */
  for (int32_t i = 0; i < ndim; i++) {
    if (shape[i] < 0) {
      *at = i;
      return SHAPE_NEGATIVE;
    }
    if (shape[i] == 0) has_zero = 1;
  }
  int64_t n = 1;
  if (has_zero) {
    n = 0;
  } else {
    for (int32_t i = 0; i < ndim; i++) {
      if (dlb__mul_overflow(n, shape[i], &n)) {
        *at = i;
        return SHAPE_OVERFLOW;
      }
    }
  }
  *numel = n;
  return SHAPE_OK;
}

static dlb_status shape_fail(shape_problem p, int32_t ndim,
                             const int64_t *shape, int32_t at) {
  switch (p) {
    case SHAPE_BAD_NDIM:
      if (ndim < 0)
        return dlb__fail(DLB_E_LAYOUT, "ndim is %d; must be >= 0", (int)ndim);
      return dlb__fail(DLB_E_LAYOUT, "ndim is %d; at most %d", (int)ndim,
                       DLB_MAX_NDIM);
    case SHAPE_NULL:
      return dlb__fail(DLB_E_LAYOUT, "shape is NULL with ndim %d", (int)ndim);
    case SHAPE_NEGATIVE:
      return dlb__fail(DLB_E_LAYOUT, "shape[%d] is %lld; extents must be >= 0",
                       (int)at, (long long)shape[at]);
    case SHAPE_OVERFLOW:
      return dlb__fail(DLB_E_OVERFLOW,
                       "shape[%d] is %lld; the element count exceeds "
                       "INT64_MAX",
                       (int)at, (long long)shape[at]);
    case SHAPE_OK:
      break;
  }
  return DLB_OK;
}

dlb_status dlb_shape_numel(int32_t ndim, const int64_t *shape, int64_t *out) {
  if (out == NULL) return dlb__fail(DLB_E_INVAL, "dlb_shape_numel: out is NULL");
  int64_t n = 0;
  int32_t at = 0;
  shape_problem p = shape_scan(ndim, shape, &n, &at);
  if (p != SHAPE_OK) return shape_fail(p, ndim, shape, at);
  *out = n;
  return DLB_OK;
}

dlb_status dlb_tensor_numel(const DLTensor *t, int64_t *out) {
  if (t == NULL) return dlb__fail(DLB_E_INVAL, "tensor is NULL");
  return dlb_shape_numel(t->ndim, t->shape, out);
}

/* floor(off * eb / 8) or, with round_up, the ceiling: the byte holding the
 * first bit of element `off` for elements of eb bits. Splitting off into
 * 8q + r keeps every intermediate within int64 whenever the result is. */
static int scale_bits(int64_t off, uint32_t eb, int round_up, int64_t *out) {
  if (eb % 8 == 0) return dlb__mul_overflow(off, (int64_t)(eb / 8), out);
  int64_t q = off / 8, r = off % 8;
  if (r < 0) {
    r += 8;
    q--;
  }
  int64_t part = (r * (int64_t)eb + (round_up ? 7 : 0)) / 8, whole = 0;
  if (dlb__mul_overflow(q, (int64_t)eb, &whole)) return 1;
  return dlb__add_overflow(whole, part, out);
}

/*
 * The bytes the tensor's elements occupy: [lo, hi) relative to data, from
 * the first byte of its lowest element to the end of its highest one
 * (byte_offset included), for elements of eb bits (element k of the
 * storage at bit k * eb). The shape must already be valid with numel
 * elements. Fails, naming the field, when any part of that computation
 * overflows int64; leaves lo and hi untouched then.
 */
static dlb_status occupied_bytes(const DLTensor *t, int64_t numel,
                                 uint32_t eb, int64_t *lo, int64_t *hi) {
  if (t->byte_offset > (uint64_t)INT64_MAX)
    return dlb__fail(DLB_E_OVERFLOW, "byte_offset is %llu; exceeds INT64_MAX",
                     (unsigned long long)t->byte_offset);
  int64_t off = (int64_t)t->byte_offset;
  if (numel == 0) {
    *lo = off;
    *hi = off;
    return DLB_OK;
  }
  /* Element offsets of the lowest and the highest element. */
  int64_t min_el = 0, max_el = numel - 1;
  if (t->strides != NULL) {
    max_el = 0;
    /* When a sum overflows rather than one term, the message names the
     * dimension reaching farthest on that side (the later one of equals),
     * not whichever harmless one came last. */
    int32_t far[2] = {0, 0};
    int64_t reach[2] = {0, 0};
    for (int32_t d = 0; d < t->ndim; d++) {
      int neg = t->strides[d] < 0;
      int64_t term = 0;
      int64_t *acc = neg ? &min_el : &max_el;
      int32_t at = d;
      int over = dlb__mul_overflow(t->shape[d] - 1, t->strides[d], &term);
      if (!over) {
        if (neg ? term <= reach[neg] : term >= reach[neg]) {
          reach[neg] = term;
          far[neg] = d;
        }
        over = dlb__add_overflow(*acc, term, acc);
        at = far[neg];
      }
      if (over)
        return dlb__fail(DLB_E_OVERFLOW,
                         "strides[%d] is %lld with shape[%d] %lld; the "
                         "span in elements overflows int64",
                         (int)at, (long long)t->strides[at], (int)at,
                         (long long)t->shape[at]);
    }
  }
  int64_t blo = 0, bhi = 0, end_el = 0;
  if (scale_bits(min_el, eb, 0, &blo) ||
      dlb__add_overflow(max_el, 1, &end_el) ||
      scale_bits(end_el, eb, 1, &bhi))
    return dlb__fail(DLB_E_OVERFLOW,
                     "strides (%s) reach elements %lld..%lld; at %u bits per "
                     "element the byte span overflows int64",
                     t->strides != NULL ? "given" : "NULL, compact",
                     (long long)min_el, (long long)max_el, (unsigned)eb);
  /* Callers take hi - lo as a size, so the width must fit as well. */
  int64_t width = 0;
  if (__builtin_sub_overflow(bhi, blo, &width))
    return dlb__fail(DLB_E_OVERFLOW,
                     "strides reach bytes %lld..%lld; the byte span is wider "
                     "than INT64_MAX",
                     (long long)blo, (long long)bhi);
  int64_t first = 0, end = 0;
  if (dlb__add_overflow(blo, off, &first) || dlb__add_overflow(bhi, off, &end))
    return dlb__fail(DLB_E_OVERFLOW,
                     "byte_offset is %lld; with the strides' byte span "
                     "[%lld, %lld) it overflows int64",
                     (long long)off, (long long)blo, (long long)bhi);
  *lo = first;
  *hi = end;
  return DLB_OK;
}

dlb_status dlb_tensor_byte_span(const DLTensor *t, int64_t *lo, int64_t *hi) {
  if (t == NULL) return dlb__fail(DLB_E_INVAL, "tensor is NULL");
  if (lo == NULL || hi == NULL)
    return dlb__fail(DLB_E_INVAL, "dlb_tensor_byte_span: %s is NULL",
                     lo == NULL ? "lo" : "hi");
  int64_t numel = 0;
  dlb_status st = dlb_tensor_numel(t, &numel);
  if (st != DLB_OK) return st;
  return occupied_bytes(t, numel, dlb_dtype_bits(t->dtype), lo, hi);
}

/* Index of the first dimension, innermost first, whose stride breaks compact
 * order (row-major, or column-major with fortran), or -1. The shape must be
 * valid with a non-zero element count, so no partial product overflows. */
static int32_t first_noncompact(int32_t ndim, const int64_t *shape,
                                const int64_t *strides, int fortran,
                                int64_t *expected_out) {
  int64_t expected = 1;
  for (int32_t k = 0; k < ndim; k++) {
    int32_t d = fortran ? k : ndim - 1 - k;
    if (shape[d] == 1) continue;
    if (strides[d] != expected) {
      *expected_out = expected;
      return d;
    }
    expected *= shape[d];
  }
  return -1;
}

static int is_contiguous(const DLTensor *t, int fortran) {
  if (t == NULL) return 0;
  int64_t numel = 0;
  int32_t at = 0;
  if (shape_scan(t->ndim, t->shape, &numel, &at) != SHAPE_OK) return 0;
  if (numel == 0) return 1;
  if (t->strides == NULL) {
    /* Row-major strides are also column-major ones only when at most one
     * dimension has more than one element. */
    if (!fortran) return 1;
    int big = 0;
    for (int32_t d = 0; d < t->ndim; d++) big += t->shape[d] != 1;
    return big <= 1;
  }
  int64_t expected = 0;
  return first_noncompact(t->ndim, t->shape, t->strides, fortran,
                          &expected) < 0;
}

int dlb_tensor_is_c_contiguous(const DLTensor *t) { return is_contiguous(t, 0); }

int dlb_tensor_is_f_contiguous(const DLTensor *t) { return is_contiguous(t, 1); }

dlb_status dlb_compact_strides(int32_t ndim, const int64_t *shape, int fortran,
                               int64_t *strides_out) {
  if (ndim < 0 || ndim > DLB_MAX_NDIM)
    return shape_fail(SHAPE_BAD_NDIM, ndim, shape, 0);
  if (ndim > 0 && shape == NULL) return shape_fail(SHAPE_NULL, ndim, shape, 0);
  if (ndim > 0 && strides_out == NULL)
    return dlb__fail(DLB_E_INVAL, "dlb_compact_strides: strides_out is NULL");
  for (int32_t i = 0; i < ndim; i++)
    if (shape[i] < 0) return shape_fail(SHAPE_NEGATIVE, ndim, shape, i);
  /* Built aside so strides_out stays untouched when a stride overflows. */
  int64_t s[DLB_MAX_NDIM];
  int64_t acc = 1;
  for (int32_t k = 0; k < ndim; k++) {
    int32_t d = fortran ? k : ndim - 1 - k;
    s[d] = acc;
    /* The outermost extent never feeds a stride, so it cannot overflow one. */
    if (k + 1 < ndim &&
        dlb__mul_overflow(acc, shape[d] == 0 ? 1 : shape[d], &acc))
      return dlb__fail(DLB_E_OVERFLOW,
                       "shape[%d] is %lld; the compact stride of the next "
                       "dimension exceeds INT64_MAX",
                       (int)d, (long long)shape[d]);
  }
  if (ndim > 0) memcpy(strides_out, s, (size_t)ndim * sizeof s[0]);
  return DLB_OK;
}

/* 1 when, for every array, the outer dimension's stride steps exactly over
 * the whole inner one, so the pair walks memory as one dimension. */
static int can_merge(int64_t inner_extent, int64_t *const *strides,
                     int count, int32_t outer, int32_t inner) {
  for (int k = 0; k < count; k++) {
    int64_t step = 0;
    if (dlb__mul_overflow(inner_extent, strides[k][inner], &step) ||
        strides[k][outer] != step)
      return 0;
  }
  return 1;
}

int32_t dlb_coalesce_dims(int32_t ndim, int64_t *shape,
                          int64_t *const *strides, int count) {
  for (int32_t i = 0; i < ndim; i++) {
    if (shape[i] == 0) {
      shape[0] = 0;
      for (int k = 0; k < count; k++) strides[k][0] = 1;
      return 1;
    }
  }
  int32_t w = 0;
  for (int32_t r = 0; r < ndim; r++) {
    if (shape[r] == 1) continue;
    int64_t merged = 0;
    if (w > 0 && !dlb__mul_overflow(shape[w - 1], shape[r], &merged) &&
        can_merge(shape[r], strides, count, w - 1, r)) {
      shape[w - 1] = merged;
      for (int k = 0; k < count; k++) strides[k][w - 1] = strides[k][r];
      continue;
    }
    shape[w] = shape[r];
    for (int k = 0; k < count; k++) strides[k][w] = strides[k][r];
    w++;
  }
  return w;
}

size_t dlb_tensor_alignment(const DLTensor *t) {
  const size_t cap = 4096;
  if (t == NULL) return 1;
  if (t->data == NULL) return cap;
  uintptr_t addr = (uintptr_t)t->data + (uintptr_t)t->byte_offset;
  if (addr == 0) return cap;
  size_t low = (size_t)(addr & (~addr + 1));
  return low < cap ? low : cap;
}

/* The common case of validate() in one pass, recording nothing: whole-byte
 * elements, every extent at least 1, no product or sum overflowing. Returns
 * 1 with *out filled when t is valid so; 0 when validate()'s full path must
 * decide (and word the message), which it does for every tensor this
 * accepts with the same result. */
static int validate_common(const DLTensor *t, dlb__span *out) {
  const int32_t ndim = t->ndim;
  if (ndim < 0 || ndim > DLB_MAX_NDIM || (ndim > 0 && t->shape == NULL) ||
      t->byte_offset > (uint64_t)INT64_MAX || t->data == NULL ||
      t->device.device_id < 0 ||
      (t->device.device_type != kDLCPU &&
       !dlb_device_type_is_known(t->device.device_type)))
    return 0;
  const DLDataType dt = t->dtype;
  const uint32_t bits = (uint32_t)dt.bits * dt.lanes;
  /* Integers and floats of 8 to 64 bits, which dlb_dtype_check accepts
   * with any lane count, spare its call. */
  const int plain = dt.code <= kDLFloat && dt.lanes >= 1 && dt.bits >= 8 &&
                    dt.bits <= 64 && (dt.bits & (dt.bits - 1)) == 0;
  if (!plain &&
      (dt.bits < 8 || bits % 8 != 0 || dlb_dtype_check(dt) != DLB_OK))
    return 0;
  const int64_t *shape = t->shape, *strides = t->strides;
  int64_t numel = 1, min_el = 0, max_el = 0;
  int over = 0;
  for (int32_t d = 0; d < ndim; d++) {
    const int64_t e = shape[d];
    if (e < 1) return 0;
    over |= __builtin_mul_overflow(numel, e, &numel);
    if (strides != NULL) {
      int64_t term = 0;
      over |= __builtin_mul_overflow(e - 1, strides[d], &term);
      if (term < 0)
        over |= __builtin_add_overflow(min_el, term, &min_el);
      else
        over |= __builtin_add_overflow(max_el, term, &max_el);
    }
  }
  if (over) return 0;
  if (strides == NULL) max_el = numel - 1;
  const int64_t size = (int64_t)(bits / 8), off = (int64_t)t->byte_offset;
  int64_t blo = 0, bhi = 0, width = 0, lo = 0, hi = 0;
  uintptr_t first = 0, last = 0;
  over |= __builtin_mul_overflow(min_el, size, &blo);
  over |= __builtin_add_overflow(max_el, 1, &bhi);
  over |= __builtin_mul_overflow(bhi, size, &bhi);
  over |= __builtin_sub_overflow(bhi, blo, &width);
  over |= __builtin_add_overflow(blo, off, &lo);
  over |= __builtin_add_overflow(bhi, off, &hi);
  if (over || __builtin_add_overflow((uintptr_t)t->data, lo, &first) ||
      __builtin_add_overflow((uintptr_t)t->data, hi, &last))
    return 0;
  out->numel = numel;
  out->lo = lo;
  out->hi = hi;
  return 1;
}

/* validate() past its common case: every tensor validate_common() leaves
 * undecided, with the message for each refusal. Out of line, so that the
 * common case saves no registers for it. */
static __attribute__((noinline)) dlb_status validate_full(const DLTensor *t,
                                                          int padded,
                                                          dlb__span *out) {
  int64_t numel = 0;
  dlb_status st = dlb_tensor_numel(t, &numel);
  if (st != DLB_OK) return st;
  st = dlb_dtype_check(t->dtype);
  if (st != DLB_OK) return st;
  if (!dlb_device_type_is_known(t->device.device_type))
    return dlb__fail(DLB_E_DEVICE,
                     "device.device_type is %d; not a DLPack 1.3 device type",
                     (int)t->device.device_type);
  if (t->device.device_id < 0)
    return dlb__fail(DLB_E_DEVICE, "device.device_id is %d; must be >= 0",
                     (int)t->device.device_id);
  int subbyte = dlb_dtype_is_subbyte(t->dtype);
  /* Packed elements share bytes, so only compact order has a defined
   * meaning; an empty tensor touches nothing and may keep any strides. */
  if (subbyte && !padded && numel > 0 && t->strides != NULL) {
    int64_t expected = 0;
    int32_t d = first_noncompact(t->ndim, t->shape, t->strides, 0, &expected);
    if (d >= 0)
      return dlb__fail(DLB_E_LAYOUT,
                       "strides[%d] is %lld; a packed sub-byte type (%u bits) "
                       "needs compact row-major strides (expected %lld)",
                       (int)d, (long long)t->strides[d],
                       (unsigned)dlb_dtype_bits(t->dtype),
                       (long long)expected);
  }
  uint32_t eb = subbyte && padded ? (uint32_t)(8 * dlb_dtype_itemsize(t->dtype))
                                  : dlb_dtype_bits(t->dtype);
  int64_t lo = 0, hi = 0;
  st = occupied_bytes(t, numel, eb, &lo, &hi);
  if (st != DLB_OK) return st;
  if (t->data == NULL && numel > 0)
    return dlb__fail(DLB_E_INVAL, "data is NULL with %lld element%s",
                     (long long)numel, numel == 1 ? "" : "s");
  uintptr_t first = 0, last = 0;
  if (__builtin_add_overflow((uintptr_t)t->data, lo, &first) ||
      __builtin_add_overflow((uintptr_t)t->data, hi, &last))
    return dlb__fail(DLB_E_OVERFLOW,
                     "data %p with byte_offset %llu and byte span [%lld, "
                     "%lld) wraps the address space",
                     t->data, (unsigned long long)t->byte_offset,
                     (long long)lo, (long long)hi);
  out->numel = numel;
  out->lo = lo;
  out->hi = hi;
  return DLB_OK;
}

/* The validator; padded says sub-byte elements take a byte each
 * (IS_SUBBYTE_TYPE_PADDED), otherwise they are packed. Fills *out with
 * what it measured on success. */
static inline dlb_status validate(const DLTensor *t, int padded,
                                  dlb__span *out) {
  if (t == NULL) return dlb__fail(DLB_E_INVAL, "tensor is NULL");
  if (__builtin_expect(validate_common(t, out), 1)) return DLB_OK;
  return validate_full(t, padded, out);
}

dlb_status dlb_tensor_validate(const DLTensor *t) {
  dlb__span span;
  return validate(t, 0, &span);
}

dlb_status dlb__tensor_validate_span(const DLTensor *t, const char *which,
                                     dlb__span *out) {
  dlb__span span;
  dlb_status st = validate(t, 0, &span);
  if (st != DLB_OK) return dlb__fail_within(st, "%s", which);
  *out = span;
  return DLB_OK;
}

dlb_status dlb__managed_check_header(const DLManagedTensorVersioned *m) {
  if (m == NULL) return dlb__fail(DLB_E_INVAL, "managed tensor is NULL");
  if (m->version.major != DLPACK_MAJOR_VERSION)
    return dlb__fail(DLB_E_VERSION, "version.major is %u; this library reads %d",
                     (unsigned)m->version.major, DLPACK_MAJOR_VERSION);
  if ((m->flags & ~(uint64_t)DLB__KNOWN_FLAGS) != 0)
    return dlb__fail(DLB_E_INVAL,
                     "flags is 0x%llx; bits 0x%llx are not DLPack flags",
                     (unsigned long long)m->flags,
                     (unsigned long long)(m->flags &
                                          ~(uint64_t)DLB__KNOWN_FLAGS));
  return DLB_OK;
}

dlb_status dlb__managed_validate_span(const DLManagedTensorVersioned *m,
                                      dlb__span *out) {
  dlb_status st = dlb__managed_check_header(m);
  if (st == DLB_OK && m->deleter == dlb__tensor_deleter)
    st = dlb__tensor_check_arrays(m);
  if (st != DLB_OK) return st;
  return validate(&m->dl_tensor,
                  (m->flags & DLPACK_FLAG_BITMASK_IS_SUBBYTE_TYPE_PADDED) != 0,
                  out);
}

dlb_status dlb_managed_validate(const DLManagedTensorVersioned *m) {
  dlb__span span;
  return dlb__managed_validate_span(m, &span);
}
