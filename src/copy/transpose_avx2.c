/*
 * transpose_avx2.c -- the strips of transpose.c with AVX2 registers, on
 * x86-64 CPUs with AVX2 but not the AVX-512 of transpose_avx512.c (chosen
 * at run time: dlb__copy_isa).
 *
 * A tile is 64 bytes of 64 / unit src rows, as in transpose_avx512.c, made
 * of 32-byte register transposes (8 x 8 four-byte units, 4 x 4 eight-byte
 * ones, 2 x 2 sixteen-byte ones; for 1- and 2-byte units, transposes
 * within each 128-bit lane joined by 128-bit permutes): each dst row's
 * two halves of a line come from two of them and are stored back to back,
 * so a write-combining buffer fills whole. On the first development VM
 * (AMD EPYC with AVX-512, one thread, 64 MiB transposes, the three kernels
 * interleaved in one process under the instruction-set cap, 15 reps):
 * 1.07-1.09 x the SSE2 strips' speed for 4-byte units, 1.28-1.33 x for
 * 8-byte and 1.46-1.55 x for 16-byte ones, 1.09-1.14 x on the (3, 1, 0, 2)
 * permutation of 64^4 float32. On the Zen 3 VM of 2026-12-05 (AVX2, no
 * AVX-512; bench_ab against the build with SSE2 strips for 1- and 2-byte
 * units and one-strip walks, 15 reps): 1-byte units 1.14 x faster, 2-byte
 * 1.19 x, 8-byte 1.08 x and 16-byte 1.19 x on one thread; 1.08, 1.29, 1.12
 * and 1.17 x on two; float32, two wide against one, 1.00-1.03 x on one
 * thread and 1.10-1.15 x on two. With the tiles' L1 buffers and the
 * strips' stacks kept off the low 12 bits of the dst runs (strips.h,
 * 2026-12-06, with the tiles at the columns that meet the runs ordered;
 * bench_ab against 99711e4, 21 reps, the VM quiet): 1.56 x for 1-byte
 * units, 1.28 x for 2-byte, 1.09 x for float32, 1.16 x for 8-byte and
 * 1.18 x for 16-byte ones on one thread; 1.53-1.56, 1.19-1.23, 1.06-1.13,
 * 1.04-1.08 and 1.08 x on two.
 */
#include "copy/copy_internal.h"

#if DLB__HAVE_WIDE

#include <immintrin.h>

#include "copy/row_prefetch.h"

#define DLB__AVX2 __attribute__((target("avx2")))
#if defined(DLB_COVERAGE)
#define DLB__AVX2_INLINE DLB__AVX2 static inline
#else
#define DLB__AVX2_INLINE DLB__AVX2 __attribute__((always_inline)) static inline
#endif

#define DLB__UNROLL_ALL _Pragma("GCC unroll 16")

/* The 1- and 2-byte tiles' L1 buffers, in the strip's scratch (strips.h):
 * ga from its start, 4 groups of 16 registers at most; then a hole of
 * DLB__SCRATCH_HOLE_BYTES, which strips.h lays over the strip's dst runs
 * (modulo 4 KiB); then gb, as large as ga. Only 1-byte tile pairs use gb;
 * a 1-byte tile uses all of ga, a 2-byte one 1 KiB. */
#define DLB__SCRATCH_HOLE 2048
#define DLB__SCRATCH_HOLE_BYTES 256
#define DLB__SCRATCH_BYTES (2 * DLB__SCRATCH_HOLE + DLB__SCRATCH_HOLE_BYTES)
#define DLB__SCRATCH_USED(unit, pairs)                                 \
  ((pairs)       ? DLB__SCRATCH_BYTES                                  \
   : (unit) == 1 ? 2048                                               \
   : (unit) == 2 ? 1024                                               \
                 : 0)

DLB__AVX2_INLINE __m256i load32(const char *p) {
  return _mm256_loadu_si256((const __m256i *)(const void *)p);
}

/* Both halves of a dst line, back to back. */
DLB__AVX2_INLINE void store_line(char *p, __m256i lo, __m256i hi, int nt) {
  if (nt) {
    _mm256_stream_si256((__m256i *)(void *)p, lo);
    _mm256_stream_si256((__m256i *)(void *)(p + 32), hi);
  } else {
    _mm256_storeu_si256((__m256i *)(void *)p, lo);
    _mm256_storeu_si256((__m256i *)(void *)(p + 32), hi);
  }
}

/* 8 rows of 8 four-byte units, transposed in place. */
DLB__AVX2_INLINE void transpose_8x8(__m256i *r) {
  __m256i t[8], s[8];
  DLB__UNROLL_ALL
  for (int i = 0; i < 4; i++) {
    t[2 * i] = _mm256_unpacklo_epi32(r[2 * i], r[2 * i + 1]);
    t[2 * i + 1] = _mm256_unpackhi_epi32(r[2 * i], r[2 * i + 1]);
  }
  DLB__UNROLL_ALL
  for (int g = 0; g < 2; g++) {
    s[4 * g] = _mm256_unpacklo_epi64(t[4 * g], t[4 * g + 2]);
    s[4 * g + 1] = _mm256_unpackhi_epi64(t[4 * g], t[4 * g + 2]);
    s[4 * g + 2] = _mm256_unpacklo_epi64(t[4 * g + 1], t[4 * g + 3]);
    s[4 * g + 3] = _mm256_unpackhi_epi64(t[4 * g + 1], t[4 * g + 3]);
  }
  /* s[4g + k]: 128-bit lane L holds unit 4L + k of rows 4g .. 4g + 3. */
  DLB__UNROLL_ALL
  for (int k = 0; k < 4; k++) {
    r[k] = _mm256_permute2x128_si256(s[k], s[4 + k], 0x20);
    r[4 + k] = _mm256_permute2x128_si256(s[k], s[4 + k], 0x31);
  }
}

/* 16 rows: each 32-byte half of the tile (along b) is two 8 x 8
 * transposes (rows 0-7 and 8-15), the two halves of 8 dst lines. The
 * first goes through the L1 buffer lo (8 registers): both held in
 * registers, with the shuffles' temporaries, are more than AVX2's 16
 * registers. lo is on the stack, which strips.h keeps away from the dst
 * runs; in the strip's placed scratch instead, transposes of 256 KiB to 4
 * MiB ran at 0.87-0.96 x. */
DLB__AVX2_INLINE void tile_4(char *dst, int64_t dst_b, const char *src,
                             int64_t src_a, int nt, __m256i *lo) {
  DLB__UNROLL_ALL
  for (int h = 0; h < 2; h++) {
    __m256i r[8];
    const char *s = src + 32 * h;
    DLB__UNROLL_ALL
    for (int i = 0; i < 8; i++, s += src_a) {
      r[i] = load32(s);
      DLB__OPAQUE(s);
    }
    transpose_8x8(r);
    DLB__UNROLL_ALL
    for (int j = 0; j < 8; j++) _mm256_store_si256(&lo[j], r[j]);
    DLB__UNROLL_ALL
    for (int i = 0; i < 8; i++, s += src_a) {
      r[i] = load32(s);
      DLB__OPAQUE(s);
    }
    transpose_8x8(r);
    DLB__UNROLL_ALL
    for (int j = 0; j < 8; j++, dst += dst_b) {
      store_line(dst, _mm256_load_si256(&lo[j]), r[j], nt);
      DLB__OPAQUE(dst);
    }
  }
}

/* 8 rows of 8 eight-byte units: 4 x 4 transposes of each quarter. */
DLB__AVX2_INLINE void transpose_4x4_64(__m256i *r) {
  __m256i t0 = _mm256_unpacklo_epi64(r[0], r[1]);
  __m256i t1 = _mm256_unpackhi_epi64(r[0], r[1]);
  __m256i t2 = _mm256_unpacklo_epi64(r[2], r[3]);
  __m256i t3 = _mm256_unpackhi_epi64(r[2], r[3]);
  r[0] = _mm256_permute2x128_si256(t0, t2, 0x20);
  r[1] = _mm256_permute2x128_si256(t1, t3, 0x20);
  r[2] = _mm256_permute2x128_si256(t0, t2, 0x31);
  r[3] = _mm256_permute2x128_si256(t1, t3, 0x31);
}

DLB__AVX2_INLINE void tile_8(char *dst, int64_t dst_b, const char *src,
                             int64_t src_a, int nt) {
  DLB__UNROLL_ALL
  for (int h = 0; h < 2; h++) {
    __m256i lo[4], hi[4];
    const char *s = src + 32 * h;
    DLB__UNROLL_ALL
    for (int i = 0; i < 4; i++, s += src_a) {
      lo[i] = load32(s);
      DLB__OPAQUE(s);
    }
    DLB__UNROLL_ALL
    for (int i = 0; i < 4; i++, s += src_a) {
      hi[i] = load32(s);
      DLB__OPAQUE(s);
    }
    transpose_4x4_64(lo);
    transpose_4x4_64(hi);
    DLB__UNROLL_ALL
    for (int j = 0; j < 4; j++, dst += dst_b) {
      store_line(dst, lo[j], hi[j], nt);
      DLB__OPAQUE(dst);
    }
  }
}

/* 4 rows of 4 sixteen-byte units: dst row j is unit j of rows 0-3. */
DLB__AVX2_INLINE void tile_16(char *dst, int64_t dst_b, const char *src,
                              int64_t src_a, int nt) {
  DLB__UNROLL_ALL
  for (int h = 0; h < 2; h++) {
    __m256i r0 = load32(src + 32 * h), r1 = load32(src + src_a + 32 * h);
    __m256i r2 = load32(src + 2 * src_a + 32 * h);
    __m256i r3 = load32(src + 3 * src_a + 32 * h);
    store_line(dst + 2 * h * dst_b, _mm256_permute2x128_si256(r0, r1, 0x20),
               _mm256_permute2x128_si256(r2, r3, 0x20), nt);
    store_line(dst + (2 * h + 1) * dst_b,
               _mm256_permute2x128_si256(r0, r1, 0x31),
               _mm256_permute2x128_si256(r2, r3, 0x31), nt);
  }
}

/* 8 rows of 8 two-byte units in each 128-bit lane, transposed lane by
 * lane: r[k] becomes unit 8L + k of rows 0-7 in lane L. */
DLB__AVX2_INLINE void transpose_lanes_2(__m256i *r) {
  __m256i t[8], s[8];
  DLB__UNROLL_ALL
  for (int k = 0; k < 4; k++) {
    t[2 * k] = _mm256_unpacklo_epi16(r[2 * k], r[2 * k + 1]);
    t[2 * k + 1] = _mm256_unpackhi_epi16(r[2 * k], r[2 * k + 1]);
  }
  /* t[2k + h]: rows 2k, 2k + 1 interleaved, units 4h .. 4h + 3. */
  DLB__UNROLL_ALL
  for (int h = 0; h < 2; h++) {
    s[4 * h] = _mm256_unpacklo_epi32(t[4 * h], t[4 * h + 2]);
    s[4 * h + 1] = _mm256_unpackhi_epi32(t[4 * h], t[4 * h + 2]);
    s[4 * h + 2] = _mm256_unpacklo_epi32(t[4 * h + 1], t[4 * h + 3]);
    s[4 * h + 3] = _mm256_unpackhi_epi32(t[4 * h + 1], t[4 * h + 3]);
  }
  /* s[4h + k]: rows 4h .. 4h + 3, units 2k and 2k + 1. */
  DLB__UNROLL_ALL
  for (int k = 0; k < 4; k++) {
    r[2 * k] = _mm256_unpacklo_epi64(s[k], s[k + 4]);
    r[2 * k + 1] = _mm256_unpackhi_epi64(s[k], s[k + 4]);
  }
}

/* 16 rows of 16 bytes in each 128-bit lane, transposed lane by lane:
 * r[k] becomes byte 16L + k of rows 0-15 in lane L. */
DLB__AVX2_INLINE void transpose_lanes_1(__m256i *r) {
  __m256i a[16], c[16];
  DLB__UNROLL_ALL
  for (int k = 0; k < 8; k++) {
    a[k] = _mm256_unpacklo_epi8(r[2 * k], r[2 * k + 1]);
    a[k + 8] = _mm256_unpackhi_epi8(r[2 * k], r[2 * k + 1]);
  }
  /* a[8h + k]: rows 2k, 2k + 1 interleaved, bytes 8h .. 8h + 7. */
  DLB__UNROLL_ALL
  for (int h = 0; h < 2; h++)
    DLB__UNROLL_ALL
    for (int m = 0; m < 4; m++) {
      c[8 * h + m] = _mm256_unpacklo_epi16(a[8 * h + 2 * m],
                                           a[8 * h + 2 * m + 1]);
      c[8 * h + m + 4] = _mm256_unpackhi_epi16(a[8 * h + 2 * m],
                                               a[8 * h + 2 * m + 1]);
    }
  /* c[4g + m]: rows 4m .. 4m + 3, bytes 4g .. 4g + 3. */
  DLB__UNROLL_ALL
  for (int g = 0; g < 4; g++)
    DLB__UNROLL_ALL
    for (int p = 0; p < 2; p++) {
      a[4 * g + 2 * p] = _mm256_unpacklo_epi32(c[4 * g + 2 * p],
                                               c[4 * g + 2 * p + 1]);
      a[4 * g + 2 * p + 1] = _mm256_unpackhi_epi32(c[4 * g + 2 * p],
                                                   c[4 * g + 2 * p + 1]);
    }
  /* a[4g + 2p + s]: rows 8p .. 8p + 7, bytes 4g + 2s, 4g + 2s + 1. */
  DLB__UNROLL_ALL
  for (int g = 0; g < 4; g++)
    DLB__UNROLL_ALL
    for (int s = 0; s < 2; s++) {
      r[4 * g + 2 * s] = _mm256_unpacklo_epi64(a[4 * g + s], a[4 * g + 2 + s]);
      r[4 * g + 2 * s + 1] =
          _mm256_unpackhi_epi64(a[4 * g + s], a[4 * g + 2 + s]);
    }
}

/* 1- and 2-byte units, 32 bytes of each src row: the N = 32 / unit dst
 * rows of those columns. The src rows go in `groups` groups of 16 / unit
 * rows (4 groups: one tile's 64 / unit rows; 8: two tiles'), each group
 * transposed lane by lane into an L1 buffer, where lane L of g(q)[j] (ga
 * for groups 0-3, gb for 4-7, each N registers a group: the strip's
 * scratch) holds what group q gives dst row L N / 2 + j. A dst line is
 * those halves of four groups, joined by 128-bit permutes; with 8 groups
 * each dst row's two lines are stored back to back. k of pf's prefetches
 * go before each group's loads (before each row's, their bookkeeping cost
 * 1-byte tiles more than the prefetches gained). */
DLB__AVX2_INLINE void half_narrow(char *dst, int64_t dst_b, const char *src,
                                  int64_t src_a, size_t unit, int groups,
                                  int nt, dlb__pf *pf, int64_t k,
                                  __m256i *ga, __m256i *gb) {
  const int n = unit == 1 ? 16 : 8;
#define DLB__G(q, j) ((q) < 4 ? ga : gb)[((q) & 3) * n + (j)]
  DLB__UNROLL_ALL
  for (int q = 0; q < groups; q++) {
    __m256i r[16];
    pf_some(pf, k);
    DLB__UNROLL_ALL
    for (int i = 0; i < n; i++) {
      r[i] = load32(src);
      src += src_a;
      DLB__OPAQUE(src);
    }
    if (unit == 1)
      transpose_lanes_1(r);
    else
      transpose_lanes_2(r);
    DLB__UNROLL_ALL
    for (int j = 0; j < n; j++) _mm256_store_si256(&DLB__G(q, j), r[j]);
  }
  for (int j = 0; j < n; j++) {
    char *lo = dst + j * dst_b, *hi = dst + (n + j) * dst_b;
    for (int l = 0; l < groups / 4; l++) {
      const __m256i a = _mm256_load_si256(&DLB__G(4 * l, j));
      const __m256i b = _mm256_load_si256(&DLB__G(4 * l + 1, j));
      const __m256i c = _mm256_load_si256(&DLB__G(4 * l + 2, j));
      const __m256i e = _mm256_load_si256(&DLB__G(4 * l + 3, j));
      store_line(lo + 64 * l, _mm256_permute2x128_si256(a, b, 0x20),
                 _mm256_permute2x128_si256(c, e, 0x20), nt);
      store_line(hi + 64 * l, _mm256_permute2x128_si256(a, b, 0x31),
                 _mm256_permute2x128_si256(c, e, 0x31), nt);
    }
  }
#undef DLB__G
}

/* A tile (groups = 4) or two (8) of 1- or 2-byte units: both 32-byte
 * halves of the src lines. */
DLB__AVX2_INLINE void tile_narrow(char *dst, int64_t dst_b, const char *src,
                                  int64_t src_a, size_t unit, int groups,
                                  int nt, dlb__pf *pf, int64_t per,
                                  char *sc) {
  const int64_t k = (per + 2 * groups - 1) / (2 * groups);
  __m256i *ga = (__m256i *)(void *)sc;
  __m256i *gb = (__m256i *)(void *)(sc + DLB__SCRATCH_HOLE +
                                     DLB__SCRATCH_HOLE_BYTES);
  half_narrow(dst, dst_b, src, src_a, unit, groups, nt, pf, k, ga, gb);
  half_narrow(dst + (32 / (int64_t)unit) * dst_b, dst_b, src + 32, src_a,
              unit, groups, nt, pf, k, ga, gb);
}

/* For 4-, 8- and 16-byte units the prefetches go first, in one burst:
 * these tiles were measured so. */
DLB__AVX2_INLINE void tile(char *dst, int64_t dst_b, const char *src,
                           int64_t src_a, size_t unit, int nt, dlb__pf *pf,
                           int64_t per, char *sc) {
  if (unit <= 2) {
    tile_narrow(dst, dst_b, src, src_a, unit, 4, nt, pf, per, sc);
    return;
  }
  pf_some(pf, per);
  switch (unit) {
    case 4: {
      _Alignas(32) __m256i lo[8];
      tile_4(dst, dst_b, src, src_a, nt, lo);
      break;
    }
    case 8:
      tile_8(dst, dst_b, src, src_a, nt);
      break;
    default:
      tile_16(dst, dst_b, src, src_a, nt);
      break;
  }
}

DLB__AVX2_INLINE void copy_lines(char *dst, const char *buf, int64_t lines,
                                  int nt) {
  for (int64_t i = 0; i < lines; i++)
    store_line(dst + 64 * i,
               _mm256_load_si256((const __m256i *)(const void *)(buf + 64 * i)),
               _mm256_load_si256(
                   (const __m256i *)(const void *)(buf + 64 * i + 32)),
               nt);
}

/* Two tiles of src rows [0, 2M) at once, for the units DLB__STRIPS_PAIR
 * names (strips.h). */
DLB__AVX2_INLINE void tile_pair(char *dst, int64_t dst_b, const char *src,
                                int64_t src_a, size_t unit, int nt,
                                dlb__pf *pf, int64_t per, char *sc) {
  tile_narrow(dst, dst_b, src, src_a, unit, 8, nt, pf, per, sc);
}

#define DLB__STRIPS_ATTR DLB__AVX2
#define DLB__STRIPS_PAIR(unit) ((unit) == 1)
/* Strips of 4- and 8-byte units two strips wide, of 16-byte units four:
 * on the Zen 3 VM (docs/performance.md, 2026-12-05 evening; bench_ab,
 * 9-15 reps, two or three runs each) 64 MiB transposes of 8-byte units ran
 * 1.07-1.11 x faster so on one thread, of 16-byte units 1.14-1.18 x
 * (two wide 1.07-1.13 x), of float32 1.01-1.03 x on one thread and
 * 1.10-1.14 x on two (four wide: 0.92 x and 1.00 x against two). 2-byte
 * units lost two wide (0.97 x), and 1-byte units without their pairs lost
 * on two threads (0.96 x). */
#define DLB__STRIPS_WIDE(unit) \
  ((unit) == 4 || (unit) == 8 ? 2 : (unit) == 16 ? 4 : 1)
#include "copy/strips.h"

DLB__STRIPS_INSTANCE(1)
DLB__STRIPS_INSTANCE(2)
DLB__STRIPS_INSTANCE(4)
DLB__STRIPS_INSTANCE(8)
DLB__STRIPS_INSTANCE(16)

static const dlb__strips_fn dlb__strips_fns[2][5] = {
    {strips_1, strips_2, strips_4, strips_8, strips_16},
    {strips_nt_1, strips_nt_2, strips_nt_4, strips_nt_8, strips_nt_16},
};

void dlb__strips_avx2(char *dst, int64_t dst_b, const char *src,
                      int64_t src_a, int64_t bw, int64_t a_full,
                      const char *next_src, size_t unit, int nt) {
  dlb__strips_fns[nt != 0][dlb__unit_index(unit)](
      dst, dst_b, src, src_a, bw, a_full, next_src);
}

#endif /* DLB__HAVE_WIDE */
