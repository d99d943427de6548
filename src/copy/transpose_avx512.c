/*
 * transpose_avx512.c -- the strips of transpose.c with AVX-512 registers,
 * chosen at run time on CPUs that have them (dlb__copy_isa).
 *
 * A tile is 64 bytes of M = 64 / unit src rows: held in M registers and
 * transposed there, it is M dst rows of 64 bytes, each written by one
 * store: a whole cache line. With line-aligned dst rows those stores are
 * non-temporal, and a full line per store never leaves a write-combining
 * buffer half filled, whatever the order of the rows.
 *
 * What bounds a large transpose is memory, not the shuffles: reading many
 * rows at once is what memory serves worst. Measured on the development
 * VM (AMD EPYC, one thread, 64 MiB, as a share of a non-temporal copy of
 * the same bytes): the loads and stores of 16 x 16 tiles alone, without
 * shuffles, ran at 0.58 over strips of 16 src rows (every dst row gets
 * single lines, scattered over all of dst) and 0.65 over 32; 32 src rows
 * with the next chunk of 4 lines per row prefetched into L2 in row bursts
 * (so memory sees runs of whole lines) ran at 0.76-0.80, and the same with
 * the shuffles at 0.77. The strips here are those: DLB__STRIP_BYTES of
 * each dst row (two lines), chunks of at least four lines of each src row
 * (16 KiB of src: dlb__chunk_lines), and the next chunk's lines prefetched
 * a few per tile.
 */
#include "copy/copy_internal.h"

#if DLB__HAVE_WIDE

#include <immintrin.h>

#include "copy/row_prefetch.h"

#define DLB__AVX512 __attribute__((target("avx512f,avx512bw,avx512vbmi")))
/* Building blocks, inlined into the strips of each unit (out of line in a
 * coverage build, as DLB__FORCE_INLINE's are). */
#if defined(DLB_COVERAGE)
#define DLB__AVX512_INLINE DLB__AVX512 static inline
#else
#define DLB__AVX512_INLINE \
  DLB__AVX512 __attribute__((always_inline)) static inline
#endif

/* The loops over registers have constant trip counts; unrolled, their
 * arrays are registers. */
#define DLB__UNROLL_ALL _Pragma("GCC unroll 64")

DLB__AVX512_INLINE __m512i load64(const char *p) {
  return _mm512_loadu_si512((const void *)p);
}

DLB__AVX512_INLINE void store64(char *p, __m512i v, int nt) {
  if (nt)
    _mm512_stream_si512((void *)p, v);
  else
    _mm512_storeu_si512((void *)p, v);
}

/* n rows, `step` bytes apart, into registers and out of them. The
 * pointer walks the rows: addresses computed from the start each take a
 * register of their own, and spill. Loading, k of pf's prefetches go
 * before each row: spread so, rather than in one burst before the tile,
 * they made 64 MiB transposes of 1-byte units 1.07-1.09 x faster, of
 * 2-byte units 1.08-1.15 x and of 4-byte units 1.03-1.09 x (one thread
 * or two, the builds before and after loaded in one process and
 * alternated, 21 reps, six runs: bench/bench_ab.c);
 * 8-byte tiles ran 0.95-0.98 x so and keep the burst, as do the tall
 * strips of permutations (strips.h); 16-byte tiles have four loads. */
DLB__AVX512_INLINE void load_rows(__m512i *r, int n, const char *src,
                                  int64_t step, dlb__pf *pf, int64_t k) {
  DLB__UNROLL_ALL
  for (int i = 0; i < n; i++) {
    pf_some(pf, k);
    r[i] = load64(src);
    src += step;
    DLB__OPAQUE(src);
  }
}

DLB__AVX512_INLINE void store_rows(char *dst, int64_t step, const __m512i *r,
                                   int n, int nt) {
  DLB__UNROLL_ALL
  for (int i = 0; i < n; i++) {
    store64(dst, r[i], nt);
    dst += step;
    DLB__OPAQUE(dst);
  }
}

/* 16 rows of 16 four-byte units, transposed in place: r[j] becomes the
 * j-th unit of every row. Four rounds of 16 shuffles; none interprets a
 * value (the float casts only name the instructions). */
DLB__AVX512_INLINE void transpose_16x16(__m512i *r) {
  __m512i t[16];
  DLB__UNROLL_ALL
  for (int i = 0; i < 8; i++) {
    t[2 * i] = _mm512_unpacklo_epi32(r[2 * i], r[2 * i + 1]);
    t[2 * i + 1] = _mm512_unpackhi_epi32(r[2 * i], r[2 * i + 1]);
  }
  /* t[2i + h]: rows 2i, 2i + 1 interleaved, units 4L + 2h + {0, 1} of
   * each 128-bit lane L. */
  DLB__UNROLL_ALL
  for (int i = 0; i < 4; i++) {
    r[4 * i] = _mm512_unpacklo_epi64(t[4 * i], t[4 * i + 2]);
    r[4 * i + 1] = _mm512_unpackhi_epi64(t[4 * i], t[4 * i + 2]);
    r[4 * i + 2] = _mm512_unpacklo_epi64(t[4 * i + 1], t[4 * i + 3]);
    r[4 * i + 3] = _mm512_unpackhi_epi64(t[4 * i + 1], t[4 * i + 3]);
  }
  /* r[4g + k]: lane L holds unit 4L + k of rows 4g .. 4g + 3. */
  DLB__UNROLL_ALL
  for (int k = 0; k < 4; k++) {
    t[k] = _mm512_shuffle_i32x4(r[k], r[4 + k], 0x88);
    t[4 + k] = _mm512_shuffle_i32x4(r[k], r[4 + k], 0xdd);
    t[8 + k] = _mm512_shuffle_i32x4(r[8 + k], r[12 + k], 0x88);
    t[12 + k] = _mm512_shuffle_i32x4(r[8 + k], r[12 + k], 0xdd);
  }
  DLB__UNROLL_ALL
  for (int k = 0; k < 4; k++) {
    r[k] = _mm512_shuffle_i32x4(t[k], t[8 + k], 0x88);
    r[8 + k] = _mm512_shuffle_i32x4(t[k], t[8 + k], 0xdd);
    r[4 + k] = _mm512_shuffle_i32x4(t[4 + k], t[12 + k], 0x88);
    r[12 + k] = _mm512_shuffle_i32x4(t[4 + k], t[12 + k], 0xdd);
  }
}

/* The tiles: M src rows of 64 bytes (src_a apart) to M dst rows of 64
 * bytes (dst_b apart). */

DLB__AVX512_INLINE void tile_4(char *dst, int64_t dst_b, const char *src,
                               int64_t src_a, int nt, dlb__pf *pf,
                               int64_t per) {
  __m512i r[16];
  load_rows(r, 16, src, src_a, pf, (per + 15) / 16);
  transpose_16x16(r);
  store_rows(dst, dst_b, r, 16, nt);
}

DLB__AVX512_INLINE void tile_8(char *dst, int64_t dst_b, const char *src,
                               int64_t src_a, int nt, dlb__pf *pf,
                               int64_t per) {
  __m512i r[8], t[8];
  pf_some(pf, per); /* in one burst: spread, they cost 8-byte units */
  load_rows(r, 8, src, src_a, pf, 0);
  DLB__UNROLL_ALL
  for (int i = 0; i < 4; i++) {
    t[2 * i] = _mm512_unpacklo_epi64(r[2 * i], r[2 * i + 1]);
    t[2 * i + 1] = _mm512_unpackhi_epi64(r[2 * i], r[2 * i + 1]);
  }
  /* t[2i + h]: lane L holds unit 2L + h of rows 2i, 2i + 1. */
  DLB__UNROLL_ALL
  for (int h = 0; h < 2; h++) {
    r[h] = _mm512_shuffle_i64x2(t[h], t[2 + h], 0x88);
    r[2 + h] = _mm512_shuffle_i64x2(t[h], t[2 + h], 0xdd);
    r[4 + h] = _mm512_shuffle_i64x2(t[4 + h], t[6 + h], 0x88);
    r[6 + h] = _mm512_shuffle_i64x2(t[4 + h], t[6 + h], 0xdd);
  }
  /* r[2q + h] (q < 2, rows 0-3) and r[4 + 2q + h] (rows 4-7): lanes hold
   * units 4p + 2q + h of row pairs. */
  DLB__UNROLL_ALL
  for (int k = 0; k < 4; k++) {
    t[k] = _mm512_shuffle_i64x2(r[k], r[4 + k], 0x88);
    t[4 + k] = _mm512_shuffle_i64x2(r[k], r[4 + k], 0xdd);
  }
  store_rows(dst, dst_b, t, 8, nt);
}

DLB__AVX512_INLINE void tile_16(char *dst, int64_t dst_b, const char *src,
                                int64_t src_a, int nt, dlb__pf *pf,
                                int64_t per) {
  pf_some(pf, per);
  __m512i r0 = load64(src), r1 = load64(src + src_a);
  __m512i r2 = load64(src + 2 * src_a), r3 = load64(src + 3 * src_a);
  __m512i t0 = _mm512_shuffle_i64x2(r0, r1, 0x44);
  __m512i t1 = _mm512_shuffle_i64x2(r0, r1, 0xee);
  __m512i t2 = _mm512_shuffle_i64x2(r2, r3, 0x44);
  __m512i t3 = _mm512_shuffle_i64x2(r2, r3, 0xee);
  store64(dst, _mm512_shuffle_i64x2(t0, t2, 0x88), nt);
  store64(dst + dst_b, _mm512_shuffle_i64x2(t0, t2, 0xdd), nt);
  store64(dst + 2 * dst_b, _mm512_shuffle_i64x2(t1, t3, 0x88), nt);
  store64(dst + 3 * dst_b, _mm512_shuffle_i64x2(t1, t3, 0xdd), nt);
}

/* Index for the even 2-byte units of a (0-63) and b (64-127): byte p of
 * a dst row is byte p % 2 of unit p / 2 of the 64 rows, which is unit 2
 * (p / 2) of the concatenated halves (+ 2 bytes for odd rows). */
_Alignas(64) static const unsigned char dlb__pick_even[64] = {
    0,  1,  4,  5,  8,  9,  12, 13, 16, 17, 20, 21, 24, 25, 28, 29,
    32, 33, 36, 37, 40, 41, 44, 45, 48, 49, 52, 53, 56, 57, 60, 61,
    64, 65, 68, 69, 72, 73, 76, 77, 80, 81, 84, 85, 88, 89, 92, 93,
    96, 97, 100, 101, 104, 105, 108, 109, 112, 113, 116, 117, 120, 121,
    124, 125};

/* 2-byte units: each half of the 32 rows transposed as four-byte units,
 * so that h[k] holds units 2k and 2k + 1 of 16 rows, interleaved; one
 * two-source byte permute per dst row takes the even (or odd) units of
 * both halves. (The 16-bit permute does the same in one instruction too,
 * but ran at half the speed on the development VM's AMD EPYC.) */
DLB__AVX512_INLINE void tile_2(char *dst, int64_t dst_b, const char *src,
                               int64_t src_a, int nt, dlb__pf *pf,
                               int64_t per) {
  __m512i lo[16], hi[16];
  const int64_t pf_k = (per + 31) / 32;
  load_rows(lo, 16, src, src_a, pf, pf_k);
  transpose_16x16(lo);
  load_rows(hi, 16, src + 16 * src_a, src_a, pf, pf_k);
  transpose_16x16(hi);
  const __m512i even = _mm512_load_si512((const void *)dlb__pick_even);
  const __m512i odd = _mm512_add_epi8(even, _mm512_set1_epi8(2));
  DLB__UNROLL_ALL
  for (int k = 0; k < 16; k++) {
    store64(dst, _mm512_permutex2var_epi8(lo[k], even, hi[k]), nt);
    dst += dst_b;
    DLB__OPAQUE(dst);
    store64(dst, _mm512_permutex2var_epi8(lo[k], odd, hi[k]), nt);
    dst += dst_b;
    DLB__OPAQUE(dst);
  }
}

/* 1-byte units: four quarters of 16 rows transposed as four-byte units
 * (q[k] then holds bytes 4k .. 4k + 3 of 16 rows, interleaved) through an
 * L1 buffer; byte permutes of two quarters take byte m of each unit, two
 * values of m to a register, and 128-bit shuffles join the pairs. */
DLB__AVX512_INLINE void quarters_1(__m512i q[4][16], const char *src,
                                   int64_t src_a, dlb__pf *pf,
                                   int64_t pf_k) {
  DLB__UNROLL_ALL
  for (int g = 0; g < 4; g++) {
    load_rows(q[g], 16, src, src_a, pf, pf_k);
    src += 16 * src_a;
    DLB__OPAQUE(src);
    transpose_16x16(q[g]);
  }
}

/* Two 2-byte tiles of the same 32 columns, src rows [0, 32) and [32, 64),
 * as tile_pair_1 for 1-byte units: each dst row's two lines stored back
 * to back. Their four groups of 16 rows load and transpose as the 1-byte
 * tiles' quarters do. 64 MiB transposes of 2-byte units ran 1.03-1.05 x
 * faster so on one thread and 1.05-1.06 x on two (the Intel Xeon VM, the
 * builds alternated in one process, 15-21 reps, three runs); on the AMD
 * AVX-512 VM such pairs had gained nothing (tile_pair_1). */
DLB__AVX512_INLINE void tile_pair_2(char *dst, int64_t dst_b,
                                    const char *src, int64_t src_a, int nt,
                                    dlb__pf *pf, int64_t per) {
  __m512i t[4][16];
  quarters_1(t, src, src_a, pf, (per + 63) / 64);
  const __m512i even = _mm512_load_si512((const void *)dlb__pick_even);
  const __m512i odd = _mm512_add_epi8(even, _mm512_set1_epi8(2));
  for (int k = 0; k < 16; k++) {
    store64(dst, _mm512_permutex2var_epi8(t[0][k], even, t[1][k]), nt);
    store64(dst + 64, _mm512_permutex2var_epi8(t[2][k], even, t[3][k]), nt);
    dst += dst_b;
    DLB__OPAQUE(dst);
    store64(dst, _mm512_permutex2var_epi8(t[0][k], odd, t[1][k]), nt);
    store64(dst + 64, _mm512_permutex2var_epi8(t[2][k], odd, t[3][k]), nt);
    dst += dst_b;
    DLB__OPAQUE(dst);
  }
}

/* Index for bytes m and m + 1 of every unit, from a (0-63) and b
 * (64-127): [a m, b m, a m+1, b m+1], 16 bytes each. */
_Alignas(64) static const unsigned char dlb__pick01[64] = {
    0,  4,  8,  12, 16, 20, 24, 28, 32, 36, 40, 44, 48, 52, 56, 60,
    64, 68, 72, 76, 80, 84, 88, 92, 96, 100, 104, 108, 112, 116, 120, 124,
    1,  5,  9,  13, 17, 21, 25, 29, 33, 37, 41, 45, 49, 53, 57, 61,
    65, 69, 73, 77, 81, 85, 89, 93, 97, 101, 105, 109, 113, 117, 121, 125};

/* Dst rows 4k .. 4k + 3 of the quarters' 64 src rows, into out. */
DLB__AVX512_INLINE void rows_1(__m512i out[4], __m512i q[4][16], int k,
                               __m512i i01, __m512i i23) {
  const __m512i ab01 = _mm512_permutex2var_epi8(q[0][k], i01, q[1][k]);
  const __m512i cd01 = _mm512_permutex2var_epi8(q[2][k], i01, q[3][k]);
  const __m512i ab23 = _mm512_permutex2var_epi8(q[0][k], i23, q[1][k]);
  const __m512i cd23 = _mm512_permutex2var_epi8(q[2][k], i23, q[3][k]);
  out[0] = _mm512_shuffle_i64x2(ab01, cd01, 0x44);
  out[1] = _mm512_shuffle_i64x2(ab01, cd01, 0xee);
  out[2] = _mm512_shuffle_i64x2(ab23, cd23, 0x44);
  out[3] = _mm512_shuffle_i64x2(ab23, cd23, 0xee);
}

DLB__AVX512_INLINE void tile_1(char *dst, int64_t dst_b, const char *src,
                               int64_t src_a, int nt, dlb__pf *pf,
                               int64_t per) {
  __m512i q[4][16];
  quarters_1(q, src, src_a, pf, (per + 63) / 64);
  const __m512i i01 = _mm512_load_si512((const void *)dlb__pick01);
  const __m512i i23 = _mm512_add_epi8(i01, _mm512_set1_epi8(2));
  DLB__UNROLL_ALL
  for (int k = 0; k < 16; k++) {
    __m512i out[4];
    rows_1(out, q, k, i01, i23);
    store_rows(dst, dst_b, out, 4, nt);
    dst += 4 * dst_b;
    DLB__OPAQUE(dst);
  }
}

/* Two 1-byte tiles of the same 64 columns, src rows [0, 64) and
 * [64, 128): each dst row's two lines are stored back to back, where
 * tile by tile they went out 64 stores apart. 64 MiB transposes of 1-byte
 * units ran 1.15 x faster so on a quiet VM (one thread or two, the builds
 * alternated in one process; 1.07-1.17 x on a busy one), 0.83-0.88 x
 * float32's rate against 0.74-0.76 in bench_copy's sweep; pairs of 2-,
 * 4- and 8-byte tiles gained nothing there (their tiles store 8-32 rows
 * at a time), 2-byte ones a little on Intel (tile_pair_2). On the Intel
 * Xeon VM the 1-byte pairs ran 1.25 x faster than single tiles on one
 * thread and 1.30 x on two. */
DLB__AVX512_INLINE void tile_pair_1(char *dst, int64_t dst_b,
                                    const char *src, int64_t src_a, int nt,
                                    dlb__pf *pf, int64_t per) {
  __m512i q[2][4][16];
  const int64_t pf_k = (per + 127) / 128;
  quarters_1(q[0], src, src_a, pf, pf_k);
  quarters_1(q[1], src + 64 * src_a, src_a, pf, pf_k);
  const __m512i i01 = _mm512_load_si512((const void *)dlb__pick01);
  const __m512i i23 = _mm512_add_epi8(i01, _mm512_set1_epi8(2));
  for (int k = 0; k < 16; k++) {
    __m512i lo[4], hi[4];
    rows_1(lo, q[0], k, i01, i23);
    rows_1(hi, q[1], k, i01, i23);
    DLB__UNROLL_ALL
    for (int r = 0; r < 4; r++) {
      store64(dst, lo[r], nt);
      store64(dst + 64, hi[r], nt);
      dst += dst_b;
      DLB__OPAQUE(dst);
    }
  }
}

DLB__AVX512_INLINE void tile(char *dst, int64_t dst_b, const char *src,
                             int64_t src_a, size_t unit, int nt, dlb__pf *pf,
                             int64_t per, char *sc) {
  (void)sc; /* whole tiles in registers: no L1 buffer */
  switch (unit) {
    case 1:
      tile_1(dst, dst_b, src, src_a, nt, pf, per);
      break;
    case 2:
      tile_2(dst, dst_b, src, src_a, nt, pf, per);
      break;
    case 4:
      tile_4(dst, dst_b, src, src_a, nt, pf, per);
      break;
    case 8:
      tile_8(dst, dst_b, src, src_a, nt, pf, per);
      break;
    default:
      tile_16(dst, dst_b, src, src_a, nt, pf, per);
      break;
  }
}

/* Two tiles of src rows [0, 2M) at once, for the units DLB__STRIPS_PAIR
 * names (strips.h). */
DLB__AVX512_INLINE void tile_pair(char *dst, int64_t dst_b, const char *src,
                                  int64_t src_a, size_t unit, int nt,
                                  dlb__pf *pf, int64_t per, char *sc) {
  (void)sc;
  if (unit == 1)
    tile_pair_1(dst, dst_b, src, src_a, nt, pf, per);
  else
    tile_pair_2(dst, dst_b, src, src_a, nt, pf, per);
}

DLB__AVX512_INLINE void copy_lines(char *dst, const char *buf, int64_t lines,
                                    int nt) {
  for (int64_t i = 0; i < lines; i++)
    store64(dst + 64 * i, _mm512_load_si512((const void *)(buf + 64 * i)), nt);
}

#define DLB__STRIPS_ATTR DLB__AVX512
#define DLB__STRIPS_PAIR(unit) ((unit) <= 2)
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

void dlb__strips_avx512(char *dst, int64_t dst_b, const char *src,
                        int64_t src_a, int64_t bw, int64_t a_full,
                        const char *next_src, size_t unit, int nt) {
  dlb__strips_fns[nt != 0][dlb__unit_index(unit)](dst, dst_b, src, src_a, bw,
                                                   a_full, next_src);
}

#endif /* DLB__HAVE_WIDE */
