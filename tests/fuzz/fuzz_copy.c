/*
 * fuzz_copy.c -- the copy planner and engine (dlb_copy) on fuzzed source
 * and destination layouts of one shape, in separate blocks or in the same
 * one (overlapping), checked byte for byte against a naive copy that writes
 * the values src held before the call, one element at a time in row-major
 * order (so where dst's elements alias, the last write wins).
 *
 * Properties: the whole destination block equals the naive result (no byte
 * outside dst's elements changes); a mismatch of shape or dtype is refused
 * with the block untouched; packed sub-byte copies (both compact) replace
 * exactly the bits of the elements.
 */
#include "fuzz_tensor.h"

/* Gives t (already made by fz_tensor_make) the shape and dtype of like,
 * with its own strides. */
static int restrict_to(fz_in *in, fz_tensor *f, const DLTensor *like) {
  DLTensor *t = &f->t;
  free(t->shape);
  free(t->strides);
  t->shape = t->strides = NULL;
  t->ndim = like->ndim;
  t->dtype = like->dtype;
  if (t->ndim == 0) return 0;
  size_t n = (size_t)t->ndim;
  t->shape = malloc(n * sizeof(int64_t));
  if (t->shape == NULL) return -1;
  memcpy(t->shape, like->shape, n * sizeof(int64_t));
  if (fz_below(in, 4) == 0) return 0;
  t->strides = malloc(n * sizeof(int64_t));
  if (t->strides == NULL) return -1;
  fz_wide c[FZ_ARRAY_MAX];
  fz_compact(t->ndim, t->shape, c);
  for (size_t i = 0; i < n; i++) {
    uint64_t r = fz_below(in, 4);
    t->strides[i] = r == 0 ? (int64_t)c[i] : r == 1 ? -(int64_t)c[i] : fz_range(in, -40, 40);
  }
  return 0;
}

static void copy_packed(fz_in *in, fz_tensor *s, fz_tensor *d) {
  static const uint8_t codes[] = {kDLInt, kDLUInt, kDLFloat4_e2m1fn, kDLFloat6_e2m3fn};
  static const uint8_t widths[] = {4, 1, 4, 6};
  size_t pick = (size_t)fz_below(in, 4);
  if (pick < 2) {
    static const uint8_t ib[] = {1, 2, 4};
    s->t.dtype.bits = ib[fz_below(in, 3)];
  } else {
    s->t.dtype.bits = widths[pick];
  }
  s->t.dtype.code = codes[pick];
  s->t.dtype.lanes = 1;
  d->t.dtype = s->t.dtype;
  free(s->t.strides);
  free(d->t.strides);
  s->t.strides = d->t.strides = NULL;
  if (dlb_tensor_validate(&s->t) != DLB_OK || dlb_tensor_validate(&d->t) != DLB_OK) return;
  int64_t numel;
  FZ_ASSERT(dlb_tensor_numel(&s->t, &numel) == DLB_OK);
  if (numel == 0 || s->t.data == NULL || d->t.data == NULL) return;
  unsigned eb = s->t.dtype.bits;
  fz_wide bytes = ((fz_wide)numel * eb + 7) / 8;
  fz_wide s0 = (fz_wide)((uint8_t *)s->t.data - s->block) + (fz_wide)s->t.byte_offset;
  fz_wide d0 = (fz_wide)((uint8_t *)d->t.data - d->block) + (fz_wide)d->t.byte_offset;
  if (s0 + bytes > (fz_wide)s->block_size || d0 + bytes > (fz_wide)d->block_size) return;
  uint8_t *want = malloc(d->block_size + 1);
  FZ_ASSERT(want != NULL);
  memcpy(want, d->block, d->block_size);
  for (fz_wide b = 0; b < (fz_wide)numel * eb; b++) {
    unsigned bit = (s->block[(size_t)(s0 + b / 8)] >> (unsigned)(b % 8)) & 1u;
    uint8_t *w = &want[(size_t)(d0 + b / 8)];
    *w = (uint8_t)((*w & ~(1u << (unsigned)(b % 8))) | (bit << (unsigned)(b % 8)));
  }
  FZ_ASSERT(dlb_copy(&s->t, &d->t) == DLB_OK);
  FZ_ASSERT(memcmp(want, d->block, d->block_size) == 0);
  free(want);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  fz_in in = {data, size};
  fz_tensor s, d;
  static fz_wide so[FZ_ENUM_MAX], dof[FZ_ENUM_MAX];
  memset(&d, 0, sizeof d);
  if (fz_tensor_make(&in, &s, 1, 1, 4096) != 0) goto done;
  int same = fz_below(&in, 3) == 0;
  if (fz_tensor_make(&in, &d, 1, 1, 4096) != 0) goto done;
  if (same) {
    /* One block: dst's data moves into src's block at the same offset. */
    size_t at = (size_t)((uint8_t *)d.t.data - d.block);
    if (d.t.data == NULL) at = 0;
    if (at > s.block_size) at = s.block_size;
    free(d.block);
    d.block = s.block;
    d.block_size = s.block_size;
    d.t.data = d.block + at;
  }
  if (restrict_to(&in, &d, &s.t) != 0) goto done;
  if (fz_below(&in, 4) == 0) {
    copy_packed(&in, &s, &d);
    goto done;
  }
  if (dlb_tensor_validate(&s.t) != DLB_OK || dlb_tensor_validate(&d.t) != DLB_OK) goto done;
  fz_wide n = fz_numel(s.t.ndim, s.t.shape);
  if (n > FZ_ENUM_MAX) goto done;
  if (!fz_inside(&s.t, s.block, s.block_size, so, (int64_t)n) ||
      !fz_inside(&d.t, d.block, d.block_size, dof, (int64_t)n))
    goto done;
  size_t item = dlb_dtype_itemsize(s.t.dtype);
  uint8_t *before = malloc(s.block_size + 1), *want = malloc(d.block_size + 1);
  uint8_t *dst0 = malloc(d.block_size + 1);
  FZ_ASSERT(before != NULL && want != NULL && dst0 != NULL);
  memcpy(before, s.block, s.block_size);
  memcpy(dst0, d.block, d.block_size);
  memcpy(want, d.block, d.block_size);
  for (int64_t k = 0; k < (int64_t)n; k++)
    memcpy(want + (size_t)dof[k], before + (size_t)so[k], item);

  /* A mismatch is refused with dst untouched. */
  uint64_t r = fz_below(&in, 8);
  if (r == 0 && s.t.ndim > 0) {
    int64_t keep = d.t.shape[0];
    d.t.shape[0] = keep == 0 ? 1 : keep - 1;
    if (dlb_tensor_validate(&d.t) == DLB_OK) {
      FZ_ASSERT(dlb_copy(&s.t, &d.t) == DLB_E_LAYOUT);
      FZ_ASSERT(memcmp(dst0, d.block, d.block_size) == 0);
    }
    d.t.shape[0] = keep;
  } else if (r == 1) {
    DLDataType keep = d.t.dtype;
    d.t.dtype.code = keep.code == kDLInt ? kDLUInt : kDLInt;
    d.t.dtype.bits = keep.code == kDLBool || keep.code == kDLBfloat ? 16 : keep.bits;
    if (d.t.dtype.bits > 64) d.t.dtype.bits = 64;
    if (dlb_tensor_validate(&d.t) == DLB_OK) {
      FZ_ASSERT(dlb_copy(&s.t, &d.t) == DLB_E_DTYPE);
      FZ_ASSERT(memcmp(dst0, d.block, d.block_size) == 0);
    }
    d.t.dtype = keep;
  }
  dlb_status st = dlb_copy(&s.t, &d.t);
  FZ_ASSERT(st == DLB_OK);
  FZ_ASSERT(memcmp(want, d.block, d.block_size) == 0);
  if (!same) FZ_ASSERT(memcmp(before, s.block, s.block_size) == 0);
  free(before);
  free(want);
  free(dst0);
done:
  if (d.block == s.block) d.block = NULL;
  fz_tensor_free(&s);
  fz_tensor_free(&d);
  return 0;
}
