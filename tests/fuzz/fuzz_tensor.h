/*
 * fuzz_tensor.h -- fuzzed tensor descriptions over memory the harness owns,
 * and the naive element-by-element models the targets check against.
 *
 * A fuzzed tensor's data pointer is NULL or points into (or one past) a
 * heap block of the harness; its shape and strides arrays hold exactly
 * ndim entries (at most FZ_ARRAY_MAX), so a read past them is an ASan
 * report. The library never reads data during validation, and the targets
 * touch data only after checking, in 128-bit arithmetic, that every element
 * lies inside the block: the harness is memory-safe by construction, and a
 * report can only come from the library.
 */
#ifndef DLB_FUZZ_TENSOR_H
#define DLB_FUZZ_TENSOR_H

#include "dlbridge.h"
#include "fuzz_input.h"

__extension__ typedef __int128 fz_wide;

/* Entries allocated for shape and strides at most; larger ndim values are
 * given this many, and the library must refuse them before reading. */
#define FZ_ARRAY_MAX 72
/* Elements the models enumerate at most (the targets skip larger cases). */
#define FZ_ENUM_MAX 4096

typedef struct {
  DLTensor t;
  uint8_t *block; /* the harness's memory */
  size_t block_size;
} fz_tensor;

static inline DLDataType fz_dtype(fz_in *in, int byte_sized) {
  static const uint8_t bits[] = {8, 16, 32, 64, 1, 2, 4, 6, 128, 24};
  DLDataType d;
  if (byte_sized) {
    static const uint8_t byte_codes[] = {kDLInt, kDLUInt, kDLFloat, kDLBool,
                                         kDLBfloat, kDLComplex};
    d.code = byte_codes[fz_below(in, sizeof byte_codes)];
    d.bits = bits[fz_below(in, 4)];
    if (d.code == kDLBool || d.code == kDLBfloat) d.bits = d.code == kDLBool ? 8 : 16;
    if (d.code == kDLComplex && d.bits < 32) d.bits = 32;
    if (d.code == kDLFloat && d.bits == 8) d.bits = 16;
    d.lanes = fz_below(in, 4) == 0 ? (uint16_t)fz_range(in, 2, 4) : 1;
    return d;
  }
  uint64_t pick = fz_below(in, 4);
  d.code = (uint8_t)(pick == 0 ? fz_u8(in) : fz_below(in, 18));
  d.bits = pick == 1 ? fz_u8(in) : bits[fz_below(in, sizeof bits)];
  uint64_t l = fz_below(in, 8);
  d.lanes = l == 0 ? (uint16_t)fz_bytes(in, 2) : l == 1 ? 4 : 1;
  return d;
}

/* a * b for a, b >= 0, saturating at 2^100 (beyond any int64_t). */
static inline fz_wide fz_mul_capped(fz_wide a, fz_wide b) {
  const fz_wide cap = (fz_wide)1 << 100;
  if (b != 0 && a > cap / b) return cap;
  return a * b;
}

/* a * b saturating at +-2^100, for sums of a few such terms. */
static inline fz_wide fz_mul_sat(fz_wide a, fz_wide b) {
  int neg = (a < 0) != (b < 0);
  fz_wide r = fz_mul_capped(a < 0 ? -a : a, b < 0 ? -b : b);
  return neg ? -r : r;
}

/* Compact row-major element strides of shape (as 128-bit values). */
static inline void fz_compact(int32_t ndim, const int64_t *shape,
                              fz_wide *out) {
  fz_wide c = 1;
  for (int32_t i = ndim - 1; i >= 0; i--) {
    out[i] = c;
    c = fz_mul_capped(c, shape[i] > 0 ? shape[i] : 1);
  }
}

/* The stride of dimension i in elements, NULL strides meaning compact. */
static inline fz_wide fz_stride(const DLTensor *t, int32_t i) {
  if (t->strides != NULL) return t->strides[i];
  fz_wide c[FZ_ARRAY_MAX];
  fz_compact(t->ndim, t->shape, c);
  return c[i];
}

/* Element count in 128 bits, or -1 for a bad shape. */
static inline fz_wide fz_numel(int32_t ndim, const int64_t *shape) {
  if (ndim < 0 || ndim > DLB_MAX_NDIM || (ndim > 0 && shape == NULL)) return -1;
  fz_wide n = 1;
  int zero = 0;
  for (int32_t i = 0; i < ndim; i++) {
    if (shape[i] < 0) return -1;
    if (shape[i] == 0) zero = 1;
  }
  if (zero) return 0;
  for (int32_t i = 0; i < ndim; i++) n = fz_mul_capped(n, shape[i]);
  return n;
}

/* Writes the element offsets of t in row-major order into offs (numel of
 * them, numel <= FZ_ENUM_MAX, a valid shape). */
static inline void fz_offsets(int32_t ndim, const int64_t *shape,
                              const fz_wide *strides, fz_wide *offs,
                              int64_t numel) {
  int64_t idx[FZ_ARRAY_MAX];
  memset(idx, 0, sizeof idx);
  for (int64_t k = 0; k < numel; k++) {
    fz_wide o = 0;
    for (int32_t i = 0; i < ndim; i++) o += (fz_wide)idx[i] * strides[i];
    offs[k] = o;
    for (int32_t i = ndim - 1; i >= 0; i--) {
      if (++idx[i] < shape[i]) break;
      idx[i] = 0;
    }
  }
}

static inline void fz_strides_of(const DLTensor *t, fz_wide *out) {
  if (t->strides == NULL) {
    fz_compact(t->ndim, t->shape, out);
    return;
  }
  for (int32_t i = 0; i < t->ndim; i++) out[i] = t->strides[i];
}

/*
 * Fills f with a fuzzed description. With sane != 0 the result is usually
 * valid: known dtype (byte-sized when byte_sized), cpu memory, small
 * extents and strides inside a block of up to max_block bytes.
 */
static inline int fz_tensor_make(fz_in *in, fz_tensor *f, int sane,
                                 int byte_sized, size_t max_block) {
  memset(f, 0, sizeof *f);
  f->block_size = (size_t)fz_below(in, max_block + 1);
  f->block = malloc(f->block_size > 0 ? f->block_size : 1);
  if (f->block == NULL) return -1;
  for (size_t i = 0; i < f->block_size; i++) f->block[i] = (uint8_t)(i * 131u + 7u);
  DLTensor *t = &f->t;
  t->ndim = sane ? (int32_t)fz_below(in, 5)
                 : (fz_below(in, 16) == 0 ? (int32_t)fz_bytes(in, 4)
                                          : (int32_t)fz_range(in, -1, 8));
  size_t n = t->ndim > 0 ? (size_t)(t->ndim < FZ_ARRAY_MAX ? t->ndim : FZ_ARRAY_MAX) : 0;
  int null_shape = !sane && fz_below(in, 32) == 0;
  int null_strides = fz_below(in, 4) == 0;
  if (n > 0 && !null_shape) {
    t->shape = malloc(n * sizeof(int64_t));
    if (t->shape == NULL) return -1;
    for (size_t i = 0; i < n; i++)
      t->shape[i] = sane || fz_below(in, 8) != 0 ? fz_range(in, 0, 6) : fz_i64(in);
  }
  if (n > 0 && !null_strides) {
    t->strides = malloc(n * sizeof(int64_t));
    if (t->strides == NULL) return -1;
    for (size_t i = 0; i < n; i++)
      t->strides[i] = sane || fz_below(in, 8) != 0 ? fz_range(in, -40, 40) : fz_i64(in);
  }
  t->dtype = sane ? fz_dtype(in, byte_sized) : fz_dtype(in, fz_below(in, 2));
  if (sane) {
    t->device.device_type = kDLCPU;
  } else {
    uint64_t d = fz_below(in, 8);
    t->device.device_type = (DLDeviceType)(d < 5 ? kDLCPU : d == 5 ? (int)fz_range(in, 0, 20) : (int)fz_bytes(in, 4));
    t->device.device_id = fz_below(in, 4) == 0 ? (int32_t)fz_bytes(in, 4) : 0;
  }
  uint64_t dp = fz_below(in, 16);
  t->data = dp == 0 ? NULL : f->block + fz_below(in, f->block_size + 1);
  t->byte_offset = sane || fz_below(in, 8) != 0 ? fz_below(in, 64) : (uint64_t)fz_i64(in);
  return 0;
}

static inline void fz_tensor_free(fz_tensor *f) {
  free(f->t.shape);
  free(f->t.strides);
  free(f->block);
  memset(f, 0, sizeof *f);
}

/* 1 when every element of t (a valid, byte-sized tensor with numel <=
 * FZ_ENUM_MAX) lies inside block; offs receives the element offsets. */
static inline int fz_inside(const DLTensor *t, const uint8_t *block,
                            size_t block_size, fz_wide *offs, int64_t numel) {
  fz_wide st[FZ_ARRAY_MAX];
  fz_strides_of(t, st);
  fz_offsets(t->ndim, t->shape, st, offs, numel);
  if (t->data == NULL) return numel == 0;
  size_t item = dlb_dtype_itemsize(t->dtype);
  fz_wide base = (fz_wide)((const uint8_t *)t->data - block) + (fz_wide)t->byte_offset;
  for (int64_t k = 0; k < numel; k++) {
    fz_wide b = base + offs[k] * (fz_wide)item;
    if (b < 0 || b + (fz_wide)item > (fz_wide)block_size) return 0;
    offs[k] = b;
  }
  return 1;
}

#endif /* DLB_FUZZ_TENSOR_H */
