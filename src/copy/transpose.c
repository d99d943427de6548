/*
 * transpose.c -- the tile kernels: copies where dst writes in order along
 * one dimension (a) and src reads in order along another (b).
 *
 * A plain loop either reads or writes a new cache line per element. Where
 * both fast sides have unit steps (the common transpose and permutation),
 * the plane goes in strips: 128 bytes of every dst row at a time (128 /
 * unit src rows), walked along b one src line at a time. Each src line is
 * read whole, square micro-tiles of 16 bytes a row are transposed in
 * 128-bit registers (SSE2 on x86-64, NEON on aarch64: vec128.h; shuffles
 * move bits exactly: no value is ever interpreted),
 * and each dst row's two lines are written by consecutive stores, so
 * memory sees runs of whole lines on both sides; in copies of
 * DLB__STREAM_MIN bytes or more those stores are non-temporal, which
 * saves reading dst's lines first. The next chunk of the strip's rows (or
 * the next strip's, or the next plane's: a permutation copies many small
 * planes, between which no hardware prefetcher follows) is prefetched into
 * L2 in bursts of a row's lines. Non-temporal stores pay only with such
 * runs: 16 x 16 blocks that wrote one line per row gained nothing from
 * them.
 *
 * On CPUs with AVX-512 (F, BW and VBMI) the strips run in
 * transpose_avx512.c instead, chosen at run time: the same strips and
 * prefetch (strips.h), with whole 64-byte tiles in registers and no L1
 * buffer; on CPUs with AVX2 but not those, the strips run in
 * transpose_avx2.c the same way.
 *
 * Everything else (strided fast sides, ragged edges, 16-byte units on
 * aarch64, builds without 128-bit vectors) goes through the blocked path:
 * outer tiles with rows of DLB__TILE_BYTES, blocks of one cache line a row
 * inside them, small planes prefetching the next one.
 *
 * Measured with bench/bench_copy.c (one thread, x memcpy of the same
 * rep): a 4096 x 4096 float32 transpose 0.3 with single-level blocks, 0.5
 * with two levels, 0.65 with strips under heavy load, 0.8 with these
 * strips at light load, 1.04 with the AVX-512 ones (docs/performance.md
 * has the figures and the load).
 */
#include <stdatomic.h>
#include <string.h>

#include "copy/copy_internal.h"
#include "copy/vec128.h"

/* An outer tile row is 16 cache lines (a block row is one: copy_internal.h). */
#define DLB__TILE_BYTES 1024

/* Planes up to this many bytes a side prefetch the next one: with both
 * planes' lines it still fits in L2, so prefetched lines survive to use. */
#define DLB__PREFETCH_PLANE_MAX ((int64_t)64 << 10)

/* Walks the lines of a plane's rows in address order (rows of `lines`
 * cache lines, `step` bytes apart), prefetching n at a time: runs of
 * neighbouring lines are what memory serves fastest. */
typedef struct {
  const char *base;
  int64_t step, rows, lines;
  int64_t row, line;
} dlb__ahead;

static inline void ahead_init(dlb__ahead *c, const char *base, int64_t step,
                              int64_t rows, int64_t row_bytes) {
  c->base = base;
  c->step = step;
  c->rows = base != NULL ? rows : 0;
  c->lines = (row_bytes + 63) / 64;
  c->row = c->line = 0;
}

static inline void ahead(dlb__ahead *c, int64_t n) {
  for (; n > 0 && c->row < c->rows; n--) {
    DLB__PREFETCH(c->base + c->row * c->step + c->line * 64);
    if (++c->line == c->lines) {
      c->line = 0;
      c->row++;
    }
  }
}

/* Element by element over rows [b0, b1) and columns [a0, a1) of a plane. */
static DLB__FORCE_INLINE void scalar_block(char *dst, int64_t dst_b,
                                           int64_t dst_a, const char *src,
                                           int64_t src_b, int64_t src_a,
                                           int64_t b0, int64_t b1, int64_t a0,
                                           int64_t a1, size_t unit) {
  for (int64_t b = b0; b < b1; b++) {
    const char *s = src + b * src_b + a0 * src_a;
    char *d = dst + b * dst_b + a0 * dst_a;
    for (int64_t a = a0; a < a1; a++) {
      memcpy(d, s, unit);
      s += src_a;
      d += dst_a;
    }
  }
}

#if DLB__HAVE_V128
/* Micro-tiles: M rows of src (consecutive a, M units along b each) become
 * M rows of dst (consecutive b, M units along a each). */

static inline void micro_u8(char *dst, int64_t dst_b, const char *src,
                            int64_t src_a) {
  dlb__v128 r0 = v_load8(src), r1 = v_load8(src + src_a);
  dlb__v128 r2 = v_load8(src + 2 * src_a), r3 = v_load8(src + 3 * src_a);
  dlb__v128 r4 = v_load8(src + 4 * src_a), r5 = v_load8(src + 5 * src_a);
  dlb__v128 r6 = v_load8(src + 6 * src_a), r7 = v_load8(src + 7 * src_a);
  dlb__v128 t0 = v_lo8(r0, r1), t1 = v_lo8(r2, r3);
  dlb__v128 t2 = v_lo8(r4, r5), t3 = v_lo8(r6, r7);
  dlb__v128 s0 = v_lo16(t0, t1), s1 = v_hi16(t0, t1);
  dlb__v128 s2 = v_lo16(t2, t3), s3 = v_hi16(t2, t3);
  dlb__v128 q0 = v_lo32(s0, s2), q1 = v_hi32(s0, s2);
  dlb__v128 q2 = v_lo32(s1, s3), q3 = v_hi32(s1, s3);
  v_store8(dst, q0);
  v_store8(dst + dst_b, v_hi64(q0, q0));
  v_store8(dst + 2 * dst_b, q1);
  v_store8(dst + 3 * dst_b, v_hi64(q1, q1));
  v_store8(dst + 4 * dst_b, q2);
  v_store8(dst + 5 * dst_b, v_hi64(q2, q2));
  v_store8(dst + 6 * dst_b, q3);
  v_store8(dst + 7 * dst_b, v_hi64(q3, q3));
}

static inline void micro_u16(char *dst, int64_t dst_b, const char *src,
                             int64_t src_a) {
  dlb__v128 r0 = v_load(src), r1 = v_load(src + src_a);
  dlb__v128 r2 = v_load(src + 2 * src_a), r3 = v_load(src + 3 * src_a);
  dlb__v128 r4 = v_load(src + 4 * src_a), r5 = v_load(src + 5 * src_a);
  dlb__v128 r6 = v_load(src + 6 * src_a), r7 = v_load(src + 7 * src_a);
  dlb__v128 t0 = v_lo16(r0, r1), t1 = v_hi16(r0, r1);
  dlb__v128 t2 = v_lo16(r2, r3), t3 = v_hi16(r2, r3);
  dlb__v128 t4 = v_lo16(r4, r5), t5 = v_hi16(r4, r5);
  dlb__v128 t6 = v_lo16(r6, r7), t7 = v_hi16(r6, r7);
  dlb__v128 s0 = v_lo32(t0, t2), s1 = v_hi32(t0, t2);
  dlb__v128 s2 = v_lo32(t1, t3), s3 = v_hi32(t1, t3);
  dlb__v128 s4 = v_lo32(t4, t6), s5 = v_hi32(t4, t6);
  dlb__v128 s6 = v_lo32(t5, t7), s7 = v_hi32(t5, t7);
  v_store(dst, v_lo64(s0, s4));
  v_store(dst + dst_b, v_hi64(s0, s4));
  v_store(dst + 2 * dst_b, v_lo64(s1, s5));
  v_store(dst + 3 * dst_b, v_hi64(s1, s5));
  v_store(dst + 4 * dst_b, v_lo64(s2, s6));
  v_store(dst + 5 * dst_b, v_hi64(s2, s6));
  v_store(dst + 6 * dst_b, v_lo64(s3, s7));
  v_store(dst + 7 * dst_b, v_hi64(s3, s7));
}

static inline void micro_u32(char *dst, int64_t dst_b, const char *src,
                             int64_t src_a) {
  dlb__v128 r0 = v_load(src), r1 = v_load(src + src_a);
  dlb__v128 r2 = v_load(src + 2 * src_a), r3 = v_load(src + 3 * src_a);
  dlb__v128 t0 = v_lo32(r0, r1), t1 = v_hi32(r0, r1);
  dlb__v128 t2 = v_lo32(r2, r3), t3 = v_hi32(r2, r3);
  v_store(dst, v_lo64(t0, t2));
  v_store(dst + dst_b, v_hi64(t0, t2));
  v_store(dst + 2 * dst_b, v_lo64(t1, t3));
  v_store(dst + 3 * dst_b, v_hi64(t1, t3));
}

static inline void micro_u64(char *dst, int64_t dst_b, const char *src,
                             int64_t src_a) {
  dlb__v128 r0 = v_load(src), r1 = v_load(src + src_a);
  v_store(dst, v_lo64(r0, r1));
  v_store(dst + dst_b, v_hi64(r0, r1));
}

/* The micro-tile for `unit`: M x M units, M = 16 bytes over the unit
 * (8 for single bytes, which move 8 at a time). */
static DLB__FORCE_INLINE int64_t micro_edge(size_t unit) {
  return unit == 1 ? 8 : 16 / (int64_t)unit;
}

static DLB__FORCE_INLINE void micro(char *dst, int64_t dst_b,
                                    const char *src, int64_t src_a,
                                    size_t unit) {
  switch (unit) {
    case 1:
      micro_u8(dst, dst_b, src, src_a);
      break;
    case 2:
      micro_u16(dst, dst_b, src, src_a);
      break;
    case 4:
      micro_u32(dst, dst_b, src, src_a);
      break;
    default:
      micro_u64(dst, dst_b, src, src_a);
      break;
  }
}

/* A block with unit steps on the fast sides (units of 1 to 8 bytes):
 * micro-tiles, the ragged edges element by element. */
static DLB__FORCE_INLINE void fast_block(char *dst, int64_t dst_b,
                                         int64_t dst_a, const char *src,
                                         int64_t src_b, int64_t src_a,
                                         int64_t b0, int64_t b1, int64_t a0,
                                         int64_t a1, size_t unit) {
  const int64_t m = micro_edge(unit), u = (int64_t)unit;
  const int64_t bm = b0 + (b1 - b0) / m * m;
  const int64_t am = a0 + (a1 - a0) / m * m;
  for (int64_t b = b0; b < bm; b += m)
    for (int64_t a = a0; a < am; a += m)
      micro(dst + b * dst_b + a * u, dst_b, src + a * src_a + b * u, src_a,
            unit);
  scalar_block(dst, dst_b, dst_a, src, src_b, src_a, b0, bm, am, a1, unit);
  scalar_block(dst, dst_b, dst_a, src, src_b, src_a, bm, b1, a0, a1, unit);
}
/* ---- strips: runs of whole lines per dst row ------------------------ */

/* The bytes of each src row a strip's chunk reads (a strip writes
 * DLB__STRIP_BYTES of each dst row: copy_internal.h). */
#define DLB__STRIP_CHUNK 256

/* The loops over registers below have constant trip counts once inlined;
 * unrolled, their arrays live in registers rather than on the stack. */
#if defined(__GNUC__)
#define DLB__UNROLL _Pragma("GCC unroll 16")
#else
#define DLB__UNROLL
#endif

/* Micro-tiles held in registers: r[i] is row i of src (16 bytes along b);
 * on return r[j] is row j of dst (16 bytes along a). M = 16 / unit rows. */
static DLB__FORCE_INLINE void transpose_16x16_u8(dlb__v128 *r) {
  dlb__v128 a[16], c[16];
  DLB__UNROLL
  for (int k = 0; k < 8; k++) {
    a[k] = v_lo8(r[2 * k], r[2 * k + 1]);
    a[k + 8] = v_hi8(r[2 * k], r[2 * k + 1]);
  }
  /* a[h * 8 + k]: rows 2k, 2k + 1 interleaved, b = h * 8 + 0..7. */
  DLB__UNROLL
  for (int h = 0; h < 2; h++)
    DLB__UNROLL
    for (int m = 0; m < 4; m++) {
      c[h * 8 + m] = v_lo16(a[h * 8 + 2 * m], a[h * 8 + 2 * m + 1]);
      c[h * 8 + m + 4] = v_hi16(a[h * 8 + 2 * m], a[h * 8 + 2 * m + 1]);
    }
  /* c[g * 4 + m]: rows 4m..4m + 3, b = 4g + 0..3. */
  DLB__UNROLL
  for (int g = 0; g < 4; g++)
    DLB__UNROLL
    for (int p = 0; p < 2; p++) {
      a[g * 4 + p * 2] = v_lo32(c[g * 4 + 2 * p], c[g * 4 + 2 * p + 1]);
      a[g * 4 + p * 2 + 1] = v_hi32(c[g * 4 + 2 * p], c[g * 4 + 2 * p + 1]);
    }
  /* a[g * 4 + p * 2 + s]: rows 8p..8p + 7, b = 4g + 2s + 0..1. */
  DLB__UNROLL
  for (int g = 0; g < 4; g++)
    DLB__UNROLL
    for (int s = 0; s < 2; s++) {
      r[4 * g + 2 * s] = v_lo64(a[g * 4 + s], a[g * 4 + 2 + s]);
      r[4 * g + 2 * s + 1] = v_hi64(a[g * 4 + s], a[g * 4 + 2 + s]);
    }
}

static DLB__FORCE_INLINE void transpose_8x8_u16(dlb__v128 *r) {
  dlb__v128 t[8], s[8];
  DLB__UNROLL
  for (int k = 0; k < 4; k++) {
    t[2 * k] = v_lo16(r[2 * k], r[2 * k + 1]);
    t[2 * k + 1] = v_hi16(r[2 * k], r[2 * k + 1]);
  }
  DLB__UNROLL
  for (int h = 0; h < 2; h++) {
    s[4 * h] = v_lo32(t[4 * h], t[4 * h + 2]);
    s[4 * h + 1] = v_hi32(t[4 * h], t[4 * h + 2]);
    s[4 * h + 2] = v_lo32(t[4 * h + 1], t[4 * h + 3]);
    s[4 * h + 3] = v_hi32(t[4 * h + 1], t[4 * h + 3]);
  }
  DLB__UNROLL
  for (int k = 0; k < 4; k++) {
    r[2 * k] = v_lo64(s[k], s[k + 4]);
    r[2 * k + 1] = v_hi64(s[k], s[k + 4]);
  }
}

static DLB__FORCE_INLINE void transpose_4x4_u32(dlb__v128 *r) {
  dlb__v128 t0 = v_lo32(r[0], r[1]);
  dlb__v128 t1 = v_hi32(r[0], r[1]);
  dlb__v128 t2 = v_lo32(r[2], r[3]);
  dlb__v128 t3 = v_hi32(r[2], r[3]);
  r[0] = v_lo64(t0, t2);
  r[1] = v_hi64(t0, t2);
  r[2] = v_lo64(t1, t3);
  r[3] = v_hi64(t1, t3);
}

static DLB__FORCE_INLINE void transpose_registers(dlb__v128 *r, size_t unit) {
  switch (unit) {
    case 1:
      transpose_16x16_u8(r);
      break;
    case 2:
      transpose_8x8_u16(r);
      break;
    case 4:
      transpose_4x4_u32(r);
      break;
    case 8: {
      dlb__v128 t = v_lo64(r[0], r[1]);
      r[1] = v_hi64(r[0], r[1]);
      r[0] = t;
      break;
    }
    default: /* a 16-byte unit is its own micro-tile */
      break;
  }
}

/* One block of a strip: `rows` src rows (a multiple of M = 16 / unit;
 * DLB__STRIP_BYTES / unit at most) by one cache line of each (64 / unit
 * units along b), that is 64 / unit dst rows of rows * unit bytes. Each
 * src line is read whole, M rows at a time, so it is used while in L1
 * (rows a power-of-two apart share few L1 sets); the micro-tiles go
 * through an L1 buffer, from which each dst row's run of lines is written
 * by consecutive stores: with nt, non-temporal ones that fill whole
 * write-combining buffers. */
static DLB__FORCE_INLINE void strip_block(char *dst, int64_t dst_b,
                                          const char *src, int64_t src_a,
                                          int64_t rows, size_t unit,
                                          int nt) {
  const int64_t m = unit >= 16 ? 1 : 16 / (int64_t)unit;
  const int64_t out_rows = 64 / (int64_t)unit;
  const int64_t run = rows * (int64_t)unit; /* bytes per dst row */
  _Alignas(64) char buf[64][DLB__STRIP_BYTES]; /* 64 / unit rows used */
  /* A micro-tile of 1-byte units reads 16 src rows in each of four
   * rounds; rows a power of two apart fall in one L1 set, and 16 of them
   * are more than its 8 ways: every load went to L2. So bytes first copy
   * the block's src lines, each read whole, into lines of their own (a
   * load and a store more per 16 bytes, all hits): 1.4 x faster for a
   * 64 MiB transpose (bench_copy's size sweep). 2-byte units read 8 rows
   * a round and gained nothing from it. */
  _Alignas(64) char lines[DLB__STRIP_BYTES][64]; /* rows used */
  if (unit == 1) {
    for (int64_t i = 0; i < rows; i++) {
      const char *p = src + i * src_a;
      dlb__v128 x0 = v_load(p);
      dlb__v128 x1 = v_load(p + 16);
      dlb__v128 x2 = v_load(p + 32);
      dlb__v128 x3 = v_load(p + 48);
      v_store_a(lines[i], x0);
      v_store_a(lines[i] + 16, x1);
      v_store_a(lines[i] + 32, x2);
      v_store_a(lines[i] + 48, x3);
    }
    src = lines[0];
    src_a = 64;
  }
  for (int64_t g = 0; g < rows; g += m) {
    DLB__UNROLL
    for (int t = 0; t < 4; t++) {
      dlb__v128 v[16];
      DLB__UNROLL
      for (int i = 0; i < m; i++)
        v[i] = v_load(src + (g + i) * src_a + t * 16);
      transpose_registers(v, unit);
      DLB__UNROLL
      for (int j = 0; j < m; j++)
        v_store_a(&buf[t * m + j][g * (int64_t)unit], v[j]);
    }
  }
  for (int64_t r = 0; r < out_rows; r++) {
    char *d = dst + r * dst_b;
    for (int64_t off = 0; off < run; off += 64) {
      dlb__v128 x0 = v_load_a(&buf[r][off]);
      dlb__v128 x1 = v_load_a(&buf[r][off + 16]);
      dlb__v128 x2 = v_load_a(&buf[r][off + 32]);
      dlb__v128 x3 = v_load_a(&buf[r][off + 48]);
      if (nt) {
        v_stream(d + off, x0);
        v_stream(d + off + 16, x1);
        v_stream(d + off + 32, x2);
        v_stream(d + off + 48, x3);
      } else {
        v_store(d + off, x0);
        v_store(d + off + 16, x1);
        v_store(d + off + 32, x2);
        v_store(d + off + 48, x3);
      }
    }
  }
}

/* Prefetches bytes [lo, hi) of `rows` src rows src_a apart into L2 (L1
 * has too few ways for rows a power of two apart): the lines of one row
 * in a burst, then the next row's. */
static DLB__FORCE_INLINE void prefetch_rows(const char *src, int64_t src_a,
                                            int64_t rows, int64_t lo,
                                            int64_t hi) {
  for (int64_t r = 0; r < rows; r++)
    for (int64_t off = lo; off < hi; off += 64)
      DLB__PREFETCH_L2(src + r * src_a + off);
}

/* Strips of up to DLB__STRIP_BYTES / unit src rows (whole dst lines per
 * row), walked along b in chunks of `chunk` bytes of each src row; each
 * chunk prefetches the next one (the next strip's first, the next plane's
 * at the end) in row bursts. Covers columns [0, a_full) (a multiple of
 * 64 / unit) and rows [0, bw) (a multiple of 64 / unit) of the plane;
 * with nt the stores are non-temporal (dst and dst_b aligned to lines). */
static DLB__FORCE_INLINE void strips(char *dst, int64_t dst_b,
                                     const char *src, int64_t src_a,
                                     int64_t bw, int64_t a_full,
                                     const char *next_src, size_t unit,
                                     int nt, int64_t chunk) {
  const int64_t u = (int64_t)unit;
  const int64_t strip_rows = DLB__STRIP_BYTES / u;
  const int64_t block_units = 64 / u;
  const int64_t chunk_units = chunk / u;
  const int64_t first = chunk < bw * u ? chunk : bw * u;
  for (int64_t a0 = 0; a0 < a_full; a0 += strip_rows) {
    const int64_t rows =
        a0 + strip_rows < a_full ? strip_rows : a_full - a0;
    const char *s0 = src + a0 * src_a;
    char *d0 = dst + a0 * u;
    for (int64_t c0 = 0; c0 < bw; c0 += chunk_units) {
      const int64_t c1 = c0 + chunk_units < bw ? c0 + chunk_units : bw;
      if (c1 < bw) {
        const int64_t c2 = c1 + chunk_units < bw ? c1 + chunk_units : bw;
        prefetch_rows(s0, src_a, rows, c1 * u, c2 * u);
      } else if (a0 + strip_rows < a_full) {
        const int64_t next = a0 + strip_rows;
        prefetch_rows(src + next * src_a, src_a,
                      next + strip_rows < a_full ? strip_rows
                                                 : a_full - next,
                      0, first);
      } else if (next_src != NULL) {
        prefetch_rows(next_src, src_a,
                      strip_rows < a_full ? strip_rows : a_full, 0, first);
      }
      for (int64_t b = c0; b < c1; b += block_units)
        strip_block(d0 + b * dst_b, dst_b, s0 + b * u, src_a, rows, unit,
                    nt);
    }
  }
}

#endif

/* Which units go in strips. The generic vectors (aarch64) have no
 * non-temporal store, and without one 16-byte units ran slower in strips
 * than in blocks: the same source built with generic vectors on the
 * x86-64 development VM, one process, the blocks and the strips
 * interleaved (bench_kernels, 7 reps, two runs), ran the strips at 0.75 x
 * the blocks' speed for 16-byte units, 1.03-1.17 x for 4- and 8-byte
 * units, 3.8 x for 2-byte and 8.5 x for 1-byte ones. (With non-temporal
 * stores put back, the same build ran about as fast as the SSE2 kernels:
 * the stores make the difference; docs/performance.md.) */
#if defined(DLB__V128_GENERIC)
#define DLB__V128_STRIPS(unit) ((unit) < 16)
#else
#define DLB__V128_STRIPS(unit) 1
#endif

/* Columns [a_lo, na) of the plane in outer tiles, each in blocks (edges
 * DLB__TILE_BYTES and DLB__BLOCK_BYTES over the unit, along both sides).
 * With unit_steps (dst_a and src_b are the unit: rows are contiguous) a
 * small plane prefetches the next one, its lines spread evenly over this
 * one's blocks, and blocks of units up to 8 bytes move in 128-bit
 * micro-tiles. */
static DLB__FORCE_INLINE void blocked(char *dst, int64_t dst_b, int64_t dst_a,
                                      const char *src, int64_t src_b,
                                      int64_t src_a, int64_t nb, int64_t na,
                                      int64_t a_lo, const char *next_dst,
                                      const char *next_src, size_t unit,
                                      int unit_steps) {
  const int64_t u = (int64_t)unit;
  const int64_t tile = DLB__TILE_BYTES / u;
  const int64_t edge = DLB__BLOCK_BYTES / u;
  const int64_t blocks =
      ((nb + edge - 1) / edge) * ((na - a_lo + edge - 1) / edge);
  dlb__ahead as, ad;
  if (!unit_steps || nb * na * u > DLB__PREFETCH_PLANE_MAX)
    next_src = next_dst = NULL;
  ahead_init(&as, next_src, src_a, na, nb * u);
  ahead_init(&ad, next_dst, dst_b, nb, na * u);
  const int64_t per_s = (as.rows * as.lines + blocks - 1) / blocks;
  const int64_t per_d = (ad.rows * ad.lines + blocks - 1) / blocks;
  for (int64_t tb = 0; tb < nb; tb += tile) {
    const int64_t tb1 = tb + tile < nb ? tb + tile : nb;
    for (int64_t ta = a_lo; ta < na; ta += tile) {
      const int64_t ta1 = ta + tile < na ? ta + tile : na;
      for (int64_t b0 = tb; b0 < tb1; b0 += edge) {
        const int64_t b1 = b0 + edge < tb1 ? b0 + edge : tb1;
        for (int64_t a0 = ta; a0 < ta1; a0 += edge) {
          const int64_t a1 = a0 + edge < ta1 ? a0 + edge : ta1;
          ahead(&as, per_s);
          ahead(&ad, per_d);
#if DLB__HAVE_V128
          if (unit_steps && unit <= 8)
            fast_block(dst, dst_b, dst_a, src, src_b, src_a, b0, b1, a0, a1,
                       unit);
          else
#endif
            scalar_block(dst, dst_b, dst_a, src, src_b, src_a, b0, b1, a0,
                         a1, unit);
        }
      }
    }
  }
}


/* The level whose strips ran last (-1: none since dlb__strips_forget),
 * for the tests to see which kernels a copy took. Stored only when it
 * changes, so that threads running planes at one level only read it. */
static atomic_int dlb__strips_level = -1;

#if DLB__HAVE_V128
static void note_strips(int level) {
  if (atomic_load_explicit(&dlb__strips_level, memory_order_relaxed) != level)
    atomic_store_explicit(&dlb__strips_level, level, memory_order_relaxed);
}
#endif

int dlb__strips_last_level(void) {
  return atomic_load_explicit(&dlb__strips_level, memory_order_relaxed);
}

/* The least distances dlb__strips_note was given, and how often; the
 * strips give them once dlb__strips_counting is set. */
static _Atomic int64_t dlb__strips_near_stack = 4096,
                       dlb__strips_near_buffers = 4096, dlb__strips_noted;
atomic_int dlb__strips_counting;

void dlb__strips_forget(void) {
  atomic_store_explicit(&dlb__strips_counting, 1, memory_order_relaxed);
  atomic_store_explicit(&dlb__strips_level, -1, memory_order_relaxed);
  atomic_store_explicit(&dlb__strips_near_stack, 4096, memory_order_relaxed);
  atomic_store_explicit(&dlb__strips_near_buffers, 4096,
                        memory_order_relaxed);
  atomic_store_explicit(&dlb__strips_noted, 0, memory_order_relaxed);
}

static void note_least(_Atomic int64_t *least, int64_t v) {
  if (v < atomic_load_explicit(least, memory_order_relaxed))
    atomic_store_explicit(least, v, memory_order_relaxed);
}

void dlb__strips_note(int64_t stack, int64_t buffers) {
  note_least(&dlb__strips_near_stack, stack);
  note_least(&dlb__strips_near_buffers, buffers);
  atomic_fetch_add_explicit(&dlb__strips_noted, 1, memory_order_relaxed);
}

dlb__strips_nearest dlb__strips_nearest_seen(void) {
  dlb__strips_nearest n;
  n.stack = atomic_load_explicit(&dlb__strips_near_stack, memory_order_relaxed);
  n.buffers =
      atomic_load_explicit(&dlb__strips_near_buffers, memory_order_relaxed);
  n.strips = atomic_load_explicit(&dlb__strips_noted, memory_order_relaxed);
  return n;
}

/* One plane. With unit steps and 128-bit vectors the columns that fill
 * whole dst lines go in strips (stream: with non-temporal stores where
 * dst's rows are line-aligned), the rest in blocks; otherwise all in
 * blocks. */
static DLB__FORCE_INLINE void plane(char *dst, int64_t dst_b, int64_t dst_a,
                                    const char *src, int64_t src_b,
                                    int64_t src_a, int64_t nb, int64_t na,
                                    const char *next_dst,
                                    const char *next_src, size_t unit,
                                    int unit_steps, int stream) {
#if DLB__HAVE_V128
  const int64_t u = (int64_t)unit;
  const int64_t a_full = na / (64 / u) * (64 / u);
  const int64_t bw = nb / (64 / u) * (64 / u);
  if (unit_steps && a_full > 0 && bw > 0 && DLB__V128_STRIPS(unit)) {
    const int nt = stream && ((uintptr_t)dst & 63) == 0 && (dst_b & 63) == 0;
#if DLB__HAVE_WIDE
    const int isa = dlb__copy_isa();
    if (isa == DLB__ISA_AVX512) {
      note_strips(DLB__ISA_AVX512);
      dlb__strips_avx512(dst, dst_b, src, src_a, bw, a_full, next_src, unit,
                         nt);
    } else if (isa == DLB__ISA_AVX2) {
      note_strips(DLB__ISA_AVX2);
      dlb__strips_avx2(dst, dst_b, src, src_a, bw, a_full, next_src, unit,
                       nt);
    } else
#endif
    {
      note_strips(DLB__ISA_V128);
      strips(dst, dst_b, src, src_a, bw, a_full, next_src, unit, nt,
             DLB__STRIP_CHUNK);
    }
    if (bw < nb)
      blocked(dst + bw * dst_b, dst_b, dst_a, src + bw * u, src_b, src_a,
              nb - bw, a_full, 0, NULL, NULL, unit, unit_steps);
    if (a_full < na)
      blocked(dst, dst_b, dst_a, src, src_b, src_a, nb, na, a_full, NULL,
              NULL, unit, unit_steps);
    return;
  }
#else
  (void)stream;
#endif
  blocked(dst, dst_b, dst_a, src, src_b, src_a, nb, na, 0, next_dst,
          next_src, unit, unit_steps);
}

/* The plane kernel for one unit size, whether steps are units, and
 * whether to stream, as dlb__tile_fn. */
#define DLB__TILE_FN(NAME, UNIT, UNIT_STEPS, STREAM)                         \
  static void NAME(char *d, int64_t db, int64_t da, const char *s,           \
                   int64_t sb, int64_t sa, int64_t nb, int64_t na,           \
                   const char *nd, const char *ns) {                         \
    plane(d, db, da, s, sb, sa, nb, na, nd, ns, UNIT, UNIT_STEPS, STREAM);   \
  }
DLB__TILE_FN(tile_u8, 1, 0, 0)
DLB__TILE_FN(tile_u16, 2, 0, 0)
DLB__TILE_FN(tile_u32, 4, 0, 0)
DLB__TILE_FN(tile_u64, 8, 0, 0)
DLB__TILE_FN(tile_u128, 16, 0, 0)
DLB__TILE_FN(tile_fast_u8, 1, 1, 0)
DLB__TILE_FN(tile_fast_u16, 2, 1, 0)
DLB__TILE_FN(tile_fast_u32, 4, 1, 0)
DLB__TILE_FN(tile_fast_u64, 8, 1, 0)
DLB__TILE_FN(tile_fast_u128, 16, 1, 0)
DLB__TILE_FN(tile_stream_u8, 1, 1, 1)
DLB__TILE_FN(tile_stream_u16, 2, 1, 1)
DLB__TILE_FN(tile_stream_u32, 4, 1, 1)
DLB__TILE_FN(tile_stream_u64, 8, 1, 1)
DLB__TILE_FN(tile_stream_u128, 16, 1, 1)
#undef DLB__TILE_FN

typedef struct {
  dlb__tile_fn strided, unit_steps, stream;
} dlb__tile_set;

static const dlb__tile_set dlb__tiles[5] = {
    {tile_u8, tile_fast_u8, tile_stream_u8},
    {tile_u16, tile_fast_u16, tile_stream_u16},
    {tile_u32, tile_fast_u32, tile_stream_u32},
    {tile_u64, tile_fast_u64, tile_stream_u64},
    {tile_u128, tile_fast_u128, tile_stream_u128},
};

dlb__tile_fn dlb__tile_kernel(size_t unit, int64_t dst_a, int64_t src_b,
                              int stream) {
  const dlb__tile_set *set = &dlb__tiles[dlb__unit_index(unit)];
  /* The portable kernels (the test hook) are those without vectors. */
  if (dst_a != (int64_t)unit || src_b != (int64_t)unit ||
      dlb__copy_isa() == DLB__ISA_PORTABLE)
    return set->strided;
  return stream ? set->stream : set->unit_steps;
}
