/*
 * kernels.c -- the row kernels: one strided dimension of 1, 2, 4, 8 or
 * 16-byte units.
 *
 * Units move through fixed-size memcpy, which compilers turn into single
 * unaligned loads and stores: DLPack data need not be aligned and the bytes
 * may belong to any type, so typed pointer access would break alignment and
 * aliasing rules.
 */
#include <string.h>

#include "copy/copy_internal.h"

typedef struct {
  uint64_t lo, hi;
} dlb__u128;

/* A unit step on one side lets the compiler fold that side's address into
 * the loop counter; four independent moves per round hide load latency on
 * strided reads. Every kernel stores in order, so a dst that names one
 * address twice (zero strides) ends with the last value in row-major
 * order. */
#define DLB__ROW_KERNELS(NAME, T)                                             \
  static void gather_##NAME(char *dst, int64_t dst_step, const char *src,     \
                            int64_t src_step, int64_t n) {                    \
    (void)dst_step;                                                           \
    int64_t i = 0;                                                            \
    for (; i + 4 <= n; i += 4) {                                              \
      T v0, v1, v2, v3;                                                       \
      memcpy(&v0, src, sizeof(T));                                            \
      memcpy(&v1, src + src_step, sizeof(T));                                 \
      memcpy(&v2, src + 2 * src_step, sizeof(T));                             \
      memcpy(&v3, src + 3 * src_step, sizeof(T));                             \
      memcpy(dst, &v0, sizeof(T));                                            \
      memcpy(dst + sizeof(T), &v1, sizeof(T));                                \
      memcpy(dst + 2 * sizeof(T), &v2, sizeof(T));                            \
      memcpy(dst + 3 * sizeof(T), &v3, sizeof(T));                            \
      src += 4 * src_step;                                                    \
      dst += 4 * sizeof(T);                                                   \
    }                                                                         \
    for (; i < n; i++) {                                                      \
      T v;                                                                    \
      memcpy(&v, src, sizeof(T));                                             \
      memcpy(dst, &v, sizeof(T));                                             \
      src += src_step;                                                        \
      dst += sizeof(T);                                                       \
    }                                                                         \
  }                                                                           \
  static void scatter_##NAME(char *dst, int64_t dst_step, const char *src,    \
                             int64_t src_step, int64_t n) {                   \
    (void)src_step;                                                           \
    int64_t i = 0;                                                            \
    for (; i + 4 <= n; i += 4) {                                              \
      T v0, v1, v2, v3;                                                       \
      memcpy(&v0, src, sizeof(T));                                            \
      memcpy(&v1, src + sizeof(T), sizeof(T));                                \
      memcpy(&v2, src + 2 * sizeof(T), sizeof(T));                            \
      memcpy(&v3, src + 3 * sizeof(T), sizeof(T));                            \
      memcpy(dst, &v0, sizeof(T));                                            \
      memcpy(dst + dst_step, &v1, sizeof(T));                                 \
      memcpy(dst + 2 * dst_step, &v2, sizeof(T));                             \
      memcpy(dst + 3 * dst_step, &v3, sizeof(T));                             \
      src += 4 * sizeof(T);                                                   \
      dst += 4 * dst_step;                                                    \
    }                                                                         \
    for (; i < n; i++) {                                                      \
      T v;                                                                    \
      memcpy(&v, src, sizeof(T));                                             \
      memcpy(dst, &v, sizeof(T));                                             \
      src += sizeof(T);                                                       \
      dst += dst_step;                                                        \
    }                                                                         \
  }                                                                           \
  static void strided_##NAME(char *dst, int64_t dst_step, const char *src,    \
                             int64_t src_step, int64_t n) {                   \
    for (int64_t i = 0; i < n; i++) {                                         \
      T v;                                                                    \
      memcpy(&v, src, sizeof(T));                                             \
      memcpy(dst, &v, sizeof(T));                                             \
      src += src_step;                                                        \
      dst += dst_step;                                                        \
    }                                                                         \
  }

DLB__ROW_KERNELS(u8, uint8_t)
DLB__ROW_KERNELS(u16, uint16_t)
DLB__ROW_KERNELS(u32, uint32_t)
DLB__ROW_KERNELS(u64, uint64_t)
DLB__ROW_KERNELS(u128, dlb__u128)

/* Both steps are the unit, so the row is one block: n * unit bytes. The
 * unit is known from the plan; memcpy needs the byte count, and the steps
 * carry it. */
static void contiguous(char *dst, int64_t dst_step, const char *src,
                       int64_t src_step, int64_t n) {
  (void)src_step;
  memcpy(dst, src, (size_t)(n * dst_step));
}

typedef struct {
  dlb__row_fn gather, scatter, strided;
} dlb__row_set;

static const dlb__row_set dlb__rows[5] = {
    {gather_u8, scatter_u8, strided_u8},
    {gather_u16, scatter_u16, strided_u16},
    {gather_u32, scatter_u32, strided_u32},
    {gather_u64, scatter_u64, strided_u64},
    {gather_u128, scatter_u128, strided_u128},
};

static int unit_index(size_t unit) {
  switch (unit) {
    case 1:
      return 0;
    case 2:
      return 1;
    case 4:
      return 2;
    case 8:
      return 3;
    default:
      return 4;
  }
}

dlb__row_fn dlb__row_kernel(size_t unit, int64_t dst_step, int64_t src_step) {
  const int64_t u = (int64_t)unit;
  const dlb__row_set *set = &dlb__rows[unit_index(unit)];
  if (dst_step == u && src_step == u) return contiguous;
  if (dst_step == u) return set->gather;
  if (src_step == u) return set->scatter;
  return set->strided;
}
