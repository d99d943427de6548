/*
 * copy.c -- dlb_copy and dlb_tensor_copy: checks, overlap, sub-byte
 * types; the loops are planned in plan.c.
 */
#include <string.h>

#include "copy/copy_internal.h"

/* Packed sub-byte elements share bytes, so only whole compact tensors can
 * be copied; tell that apart from a broken layout, which the validator
 * reports. The message names the innermost stride that is not the
 * compact one (extent-1 dimensions may have any). */
static dlb_status check_subbyte(const DLTensor *t, const char *which) {
  int64_t numel = 0;
  if (dlb_dtype_check(t->dtype) != DLB_OK || !dlb_dtype_is_subbyte(t->dtype) ||
      dlb_tensor_numel(t, &numel) != DLB_OK || numel == 0 ||
      t->strides == NULL)
    return DLB_OK;
  /* Every extent is at least 1, and their product fits: it is numel. */
  int64_t want = 1;
  for (int32_t i = t->ndim - 1; i >= 0; i--) {
    if (t->shape[i] != 1 && t->strides[i] != want)
      return dlb__fail(DLB_E_UNSUPPORTED,
                       "%s->strides[%d] is %lld, not %lld: packed %u-bit "
                       "elements are copied only between compact tensors",
                       which, (int)i, (long long)t->strides[i],
                       (long long)want, (unsigned)dlb_dtype_bits(t->dtype));
    want *= t->shape[i];
  }
  return DLB_OK;
}

static dlb_status check_device(const DLTensor *t, const char *which) {
  if (dlb_device_type_cpu_accessible(t->device.device_type)) return DLB_OK;
  const char *name = dlb_device_type_name(t->device.device_type);
  return dlb__fail(DLB_E_DEVICE,
                   "%s->device.device_type is %d (%s): the CPU copy engine "
                   "reads and writes CPU-accessible memory only",
                   which, (int)t->device.device_type,
                   name != NULL ? name : "unknown");
}

dlb_status dlb__copy_check_pair(const DLTensor *src, const DLTensor *dst) {
  if (!dlb_dtype_equal(src->dtype, dst->dtype)) {
    char a[DLB_DTYPE_NAME_MAX], b[DLB_DTYPE_NAME_MAX];
    if (dlb_dtype_format(src->dtype, a, sizeof a) != DLB_OK) a[0] = '\0';
    if (dlb_dtype_format(dst->dtype, b, sizeof b) != DLB_OK) b[0] = '\0';
    return dlb__fail(DLB_E_DTYPE,
                     "src->dtype is %s, dst->dtype is %s; copies keep the "
                     "type",
                     a, b);
  }
  if (src->ndim != dst->ndim)
    return dlb__fail(DLB_E_LAYOUT, "src->ndim is %d, dst->ndim is %d",
                     (int)src->ndim, (int)dst->ndim);
  for (int32_t i = 0; i < src->ndim; i++)
    if (src->shape[i] != dst->shape[i])
      return dlb__fail(DLB_E_LAYOUT,
                       "src->shape[%d] is %lld, dst->shape[%d] is %lld",
                       (int)i, (long long)src->shape[i], (int)i,
                       (long long)dst->shape[i]);
  return DLB_OK;
}

static char *first_byte(const DLTensor *t) {
  return (char *)t->data + t->byte_offset;
}

/* Both compact: the bits are one run from the least significant bit of the
 * first byte. A last byte used in part keeps dst's other bits. memmove,
 * since both may be views of one buffer. */
static dlb_status copy_packed(const DLTensor *src, const DLTensor *dst,
                              int64_t numel) {
  int64_t bytes = 0;
  dlb_status st = dlb_dtype_storage_bytes(src->dtype, numel, 0, &bytes);
  if (st != DLB_OK) return st;
  const unsigned bits = dlb_dtype_bits(src->dtype);
  const unsigned rest = (unsigned)((uint64_t)(numel % 8) * bits % 8);
  const unsigned char *s = (const unsigned char *)first_byte(src);
  unsigned char *d = (unsigned char *)first_byte(dst);
  int64_t whole = rest != 0 ? bytes - 1 : bytes;
  unsigned char last = rest != 0 ? s[whole] : 0;
  memmove(d, s, (size_t)whole);
  if (rest != 0) {
    unsigned char mask = (unsigned char)((1u << rest) - 1);
    d[whole] = (unsigned char)((d[whole] & ~mask) | (last & mask));
  }
  return DLB_OK;
}

/* Whether src and dst name the same bytes for every element: then the
 * copy changes nothing. */
static int same_elements(const DLTensor *src, const DLTensor *dst) {
  if (first_byte(src) != first_byte(dst)) return 0;
  /* The shapes are equal, so one compact stride serves both sides. */
  int64_t compact = 1;
  for (int32_t i = src->ndim - 1; i >= 0; i--) {
    int64_t ss = src->strides != NULL ? src->strides[i] : compact;
    int64_t ds = dst->strides != NULL ? dst->strides[i] : compact;
    if (src->shape[i] != 1 && ss != ds) return 0;
    compact *= src->shape[i];
  }
  return 1;
}

static void copy_planned(char *dst, const int64_t *dst_strides,
                         const char *src, const int64_t *src_strides,
                         const DLTensor *shape_of, int fresh_dst) {
  dlb__copy_plan plan;
  dlb__copy_plan_build(&plan, dst, dst_strides, src, src_strides,
                       shape_of->ndim, shape_of->shape,
                       dlb_dtype_itemsize(shape_of->dtype));
  dlb__copy_plan_run(&plan, fresh_dst);
}

/* The copy itself, for src and dst that pass every check of dlb_copy,
 * with their spans. ds is NULL for a dst just allocated: its pages were
 * never touched (fresh_dst for dlb__copy_plan_run) and it shares no byte
 * with src. */
static dlb_status copy_checked(const DLTensor *src, const dlb__span *ss,
                               const DLTensor *dst, const dlb__span *ds) {
  dlb__copy_set_last_threads(1);
  if (ss->numel == 0) return DLB_OK;
  if (dlb_dtype_is_subbyte(src->dtype))
    return copy_packed(src, dst, ss->numel);
  if (ds == NULL || !dlb__span_overlap(src, ss, dst, ds)) {
    copy_planned(first_byte(dst), dst->strides, first_byte(src),
                 src->strides, src, ds == NULL);
    return DLB_OK;
  }
  if (same_elements(src, dst)) return DLB_OK;
  /* The byte ranges meet: any element written could be one still to be
   * read. Copying src out first gives the result of a copy from a snapshot
   * whatever the strides. */
  int64_t bytes = 0;
  dlb_status st = dlb_dtype_storage_bytes(src->dtype, ss->numel, 1, &bytes);
  if (st != DLB_OK) return st;
  char *tmp = dlb__data_alloc((size_t)bytes, 64);
  if (tmp == NULL) return DLB_E_NOMEM;
  copy_planned(tmp, NULL, first_byte(src), src->strides, src, 1);
  copy_planned(first_byte(dst), dst->strides, tmp, NULL, src, 0);
  dlb__data_free(tmp);
  return DLB_OK;
}

dlb_status dlb_copy(const DLTensor *src, const DLTensor *dst) {
  if (src == NULL || dst == NULL)
    return dlb__fail(DLB_E_INVAL, "dlb_copy: %s is NULL",
                     src == NULL ? "src" : "dst");
  dlb_status st;
  dlb__span ss, ds;
  if ((st = check_subbyte(src, "src")) != DLB_OK ||
      (st = check_subbyte(dst, "dst")) != DLB_OK ||
      (st = dlb__tensor_validate_span(src, "src", &ss)) != DLB_OK ||
      (st = dlb__tensor_validate_span(dst, "dst", &ds)) != DLB_OK ||
      (st = check_device(src, "src")) != DLB_OK ||
      (st = check_device(dst, "dst")) != DLB_OK ||
      (st = dlb__copy_check_pair(src, dst)) != DLB_OK)
    return st;
  return copy_checked(src, &ss, dst, &ds);
}

dlb_status dlb_tensor_copy(const DLTensor *src, DLDevice device,
                           DLManagedTensorVersioned **out) {
  if (src == NULL || out == NULL)
    return dlb__fail(DLB_E_INVAL, "dlb_tensor_copy: %s is NULL",
                     src == NULL ? "src" : "out");
  dlb__span ss;
  dlb_status st = dlb__tensor_validate_span(src, "src", &ss);
  if (st != DLB_OK) return st;
  DLManagedTensorVersioned *t = NULL;
  st = dlb_tensor_alloc(device, src->dtype, src->ndim, src->shape, &t);
  if (st != DLB_OK) return st;
  /* src passed validation, so packed elements in it are compact, and t was
   * made to match it: on CPU-accessible memory dlb_copy's checks all hold. */
  if (dlb_device_type_cpu_accessible(src->device.device_type) &&
      dlb_device_type_cpu_accessible(t->dl_tensor.device.device_type))
    st = copy_checked(src, &ss, &t->dl_tensor, NULL);
  else
    st = dlb__device_copy(src, &t->dl_tensor);
  if (st != DLB_OK) {
    dlb_tensor_release(t);
    return st;
  }
  t->flags = (t->flags | DLPACK_FLAG_BITMASK_IS_COPIED) &
             ~(uint64_t)DLPACK_FLAG_BITMASK_READ_ONLY;
  *out = t;
  return DLB_OK;
}

dlb_status dlb_managed_copy(const DLManagedTensorVersioned *src,
                            DLDevice device, DLManagedTensorVersioned **out) {
  /* The struct as dlb_managed_validate judges it: the dtype and layout
   * with sub-byte units padded or packed as its flags say, and a dlbridge
   * tensor's ndim against the arrays of its own block. What follows
   * describes the bytes differently, which would check neither. */
  dlb__span span;
  dlb_status st = dlb__managed_validate_span(src, &span);
  if (st != DLB_OK) return st;
  DLTensor t = src->dl_tensor;
  /* A DLTensor cannot say that sub-byte elements take a byte each, and
   * would be copied packed: copy the bytes, then say again what they
   * hold. */
  int padded = (src->flags & DLPACK_FLAG_BITMASK_IS_SUBBYTE_TYPE_PADDED) &&
               dlb_dtype_is_subbyte(t.dtype);
  if (padded) {
    t.dtype.code = kDLUInt;
    t.dtype.bits = 8;
    t.dtype.lanes = (uint16_t)dlb_dtype_itemsize(src->dl_tensor.dtype);
  }
  st = dlb_tensor_copy(&t, device, out);
  if (st == DLB_OK && padded) {
    (*out)->dl_tensor.dtype = src->dl_tensor.dtype;
    (*out)->flags |= DLPACK_FLAG_BITMASK_IS_SUBBYTE_TYPE_PADDED;
  }
  return st;
}
