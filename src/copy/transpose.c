/*
 * transpose.c -- the tile kernels: copies where dst writes in order along
 * one dimension (a) and src reads in order along another (b).
 *
 * A plain loop either reads or writes a new cache line per element. The
 * plane is cut twice. Outer tiles have rows of DLB__TILE_BYTES on both
 * sides, so memory sees runs of 16 lines rather than one line per row (a
 * row per DRAM page and prefetch stream). Inside them, blocks have one cache
 * line per row on both sides, so a block's lines stay in L1 while it is
 * copied and each line is fetched once. Within a block, where both fast
 * sides have unit steps, SSE2 registers transpose square micro-tiles (16
 * bytes per row), so each load and store moves 16 bytes rather than one
 * element. Shuffles move bits exactly: no value is ever interpreted.
 *
 * Small planes (a permutation copies many) jump in memory from one to the
 * next, where no hardware prefetcher follows: a plane prefetches the next
 * one's lines in address order on both sides, a share before each block.
 * (One line per row of the block, the same block in the next plane, gained
 * half as much: rows far apart make poor runs for memory.)
 *
 * Measured with bench/bench_copy.c (single thread, x memcpy's bandwidth):
 * a 4096 x 4096 float32 transpose, 0.3 with single-level 128-byte blocks,
 * 0.5 with these two levels; (64, 64, 64, 64) permuted (3, 1, 0, 2), planes
 * of 64 x 64, 0.4 without the next-plane prefetch, 0.5 with it. Prefetching
 * within a plane, non-temporal stores and AVX2 / AVX-512 micro-tiles
 * (8 x 8, 16 x 16) gained nothing measurable: the limit is the memory
 * system, not instructions.
 */
#include <string.h>

#if defined(__SSE2__)
#include <emmintrin.h>
#define DLB__HAVE_SSE2 1
#else
#define DLB__HAVE_SSE2 0
#endif

#include "copy/copy_internal.h"

/* An outer tile row is 16 cache lines (a block row is one: copy_internal.h). */
#define DLB__TILE_BYTES 1024

/* Planes up to this many bytes a side prefetch the next one: with both
 * planes' lines it still fits in L2, so prefetched lines survive to use. */
#define DLB__PREFETCH_PLANE_MAX ((int64_t)64 << 10)

/* GCC deletes loops that hold nothing but __builtin_prefetch (12.2 does, in
 * ahead() below: it sees no side effect to keep), so on x86 the
 * instruction is written out; elsewhere the builtin is the best there is. */
#if defined(__GNUC__) && (defined(__x86_64__) || defined(__i386__))
#define DLB__PREFETCH(p) \
  __asm__ volatile("prefetcht0 %0" : : "m"(*(const char *)(p)))
#elif defined(__GNUC__)
#define DLB__PREFETCH(p) __builtin_prefetch((p), 0, 3)
#else
#define DLB__PREFETCH(p) ((void)(p))
#endif

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

#if DLB__HAVE_SSE2
/* Micro-tiles: M rows of src (consecutive a, M units along b each) become
 * M rows of dst (consecutive b, M units along a each). */

static inline void micro_u8(char *dst, int64_t dst_b, const char *src,
                            int64_t src_a) {
  __m128i r0 = _mm_loadl_epi64((const __m128i *)(const void *)(src));
  __m128i r1 = _mm_loadl_epi64((const __m128i *)(const void *)(src + src_a));
  __m128i r2 =
      _mm_loadl_epi64((const __m128i *)(const void *)(src + 2 * src_a));
  __m128i r3 =
      _mm_loadl_epi64((const __m128i *)(const void *)(src + 3 * src_a));
  __m128i r4 =
      _mm_loadl_epi64((const __m128i *)(const void *)(src + 4 * src_a));
  __m128i r5 =
      _mm_loadl_epi64((const __m128i *)(const void *)(src + 5 * src_a));
  __m128i r6 =
      _mm_loadl_epi64((const __m128i *)(const void *)(src + 6 * src_a));
  __m128i r7 =
      _mm_loadl_epi64((const __m128i *)(const void *)(src + 7 * src_a));
  __m128i t0 = _mm_unpacklo_epi8(r0, r1);
  __m128i t1 = _mm_unpacklo_epi8(r2, r3);
  __m128i t2 = _mm_unpacklo_epi8(r4, r5);
  __m128i t3 = _mm_unpacklo_epi8(r6, r7);
  __m128i s0 = _mm_unpacklo_epi16(t0, t1);
  __m128i s1 = _mm_unpackhi_epi16(t0, t1);
  __m128i s2 = _mm_unpacklo_epi16(t2, t3);
  __m128i s3 = _mm_unpackhi_epi16(t2, t3);
  __m128i q0 = _mm_unpacklo_epi32(s0, s2);
  __m128i q1 = _mm_unpackhi_epi32(s0, s2);
  __m128i q2 = _mm_unpacklo_epi32(s1, s3);
  __m128i q3 = _mm_unpackhi_epi32(s1, s3);
  _mm_storel_epi64((__m128i *)(void *)(dst), q0);
  _mm_storel_epi64((__m128i *)(void *)(dst + dst_b),
                   _mm_unpackhi_epi64(q0, q0));
  _mm_storel_epi64((__m128i *)(void *)(dst + 2 * dst_b), q1);
  _mm_storel_epi64((__m128i *)(void *)(dst + 3 * dst_b),
                   _mm_unpackhi_epi64(q1, q1));
  _mm_storel_epi64((__m128i *)(void *)(dst + 4 * dst_b), q2);
  _mm_storel_epi64((__m128i *)(void *)(dst + 5 * dst_b),
                   _mm_unpackhi_epi64(q2, q2));
  _mm_storel_epi64((__m128i *)(void *)(dst + 6 * dst_b), q3);
  _mm_storel_epi64((__m128i *)(void *)(dst + 7 * dst_b),
                   _mm_unpackhi_epi64(q3, q3));
}

static inline __m128i load16(const char *p) {
  return _mm_loadu_si128((const __m128i *)(const void *)p);
}

static inline void store16(char *p, __m128i v) {
  _mm_storeu_si128((__m128i *)(void *)p, v);
}

static inline void micro_u16(char *dst, int64_t dst_b, const char *src,
                             int64_t src_a) {
  __m128i r0 = load16(src), r1 = load16(src + src_a);
  __m128i r2 = load16(src + 2 * src_a), r3 = load16(src + 3 * src_a);
  __m128i r4 = load16(src + 4 * src_a), r5 = load16(src + 5 * src_a);
  __m128i r6 = load16(src + 6 * src_a), r7 = load16(src + 7 * src_a);
  __m128i t0 = _mm_unpacklo_epi16(r0, r1), t1 = _mm_unpackhi_epi16(r0, r1);
  __m128i t2 = _mm_unpacklo_epi16(r2, r3), t3 = _mm_unpackhi_epi16(r2, r3);
  __m128i t4 = _mm_unpacklo_epi16(r4, r5), t5 = _mm_unpackhi_epi16(r4, r5);
  __m128i t6 = _mm_unpacklo_epi16(r6, r7), t7 = _mm_unpackhi_epi16(r6, r7);
  __m128i s0 = _mm_unpacklo_epi32(t0, t2), s1 = _mm_unpackhi_epi32(t0, t2);
  __m128i s2 = _mm_unpacklo_epi32(t1, t3), s3 = _mm_unpackhi_epi32(t1, t3);
  __m128i s4 = _mm_unpacklo_epi32(t4, t6), s5 = _mm_unpackhi_epi32(t4, t6);
  __m128i s6 = _mm_unpacklo_epi32(t5, t7), s7 = _mm_unpackhi_epi32(t5, t7);
  store16(dst, _mm_unpacklo_epi64(s0, s4));
  store16(dst + dst_b, _mm_unpackhi_epi64(s0, s4));
  store16(dst + 2 * dst_b, _mm_unpacklo_epi64(s1, s5));
  store16(dst + 3 * dst_b, _mm_unpackhi_epi64(s1, s5));
  store16(dst + 4 * dst_b, _mm_unpacklo_epi64(s2, s6));
  store16(dst + 5 * dst_b, _mm_unpackhi_epi64(s2, s6));
  store16(dst + 6 * dst_b, _mm_unpacklo_epi64(s3, s7));
  store16(dst + 7 * dst_b, _mm_unpackhi_epi64(s3, s7));
}

static inline void micro_u32(char *dst, int64_t dst_b, const char *src,
                             int64_t src_a) {
  __m128i r0 = load16(src), r1 = load16(src + src_a);
  __m128i r2 = load16(src + 2 * src_a), r3 = load16(src + 3 * src_a);
  __m128i t0 = _mm_unpacklo_epi32(r0, r1), t1 = _mm_unpackhi_epi32(r0, r1);
  __m128i t2 = _mm_unpacklo_epi32(r2, r3), t3 = _mm_unpackhi_epi32(r2, r3);
  store16(dst, _mm_unpacklo_epi64(t0, t2));
  store16(dst + dst_b, _mm_unpackhi_epi64(t0, t2));
  store16(dst + 2 * dst_b, _mm_unpacklo_epi64(t1, t3));
  store16(dst + 3 * dst_b, _mm_unpackhi_epi64(t1, t3));
}

static inline void micro_u64(char *dst, int64_t dst_b, const char *src,
                             int64_t src_a) {
  __m128i r0 = load16(src), r1 = load16(src + src_a);
  store16(dst, _mm_unpacklo_epi64(r0, r1));
  store16(dst + dst_b, _mm_unpackhi_epi64(r0, r1));
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
#endif

/* The plane in outer tiles, each in blocks (edges DLB__TILE_BYTES and
 * DLB__BLOCK_BYTES over the unit, along both sides). With unit_steps
 * (dst_a and src_b are the unit: rows are contiguous) a small plane
 * prefetches the next one, its lines spread evenly over this one's blocks,
 * and blocks of units up to 8 bytes move in SSE2 micro-tiles. */
static DLB__FORCE_INLINE void plane(char *dst, int64_t dst_b, int64_t dst_a,
                                    const char *src, int64_t src_b,
                                    int64_t src_a, int64_t nb, int64_t na,
                                    const char *next_dst,
                                    const char *next_src, size_t unit,
                                    int unit_steps) {
  const int64_t u = (int64_t)unit;
  const int64_t tile = DLB__TILE_BYTES / u;
  const int64_t edge = DLB__BLOCK_BYTES / u;
  const int64_t blocks = ((nb + edge - 1) / edge) * ((na + edge - 1) / edge);
  dlb__ahead as, ad;
  if (!unit_steps || nb * na * u > DLB__PREFETCH_PLANE_MAX)
    next_src = next_dst = NULL;
  ahead_init(&as, next_src, src_a, na, nb * u);
  ahead_init(&ad, next_dst, dst_b, nb, na * u);
  const int64_t per_s = (as.rows * as.lines + blocks - 1) / blocks;
  const int64_t per_d = (ad.rows * ad.lines + blocks - 1) / blocks;
  for (int64_t tb = 0; tb < nb; tb += tile) {
    const int64_t tb1 = tb + tile < nb ? tb + tile : nb;
    for (int64_t ta = 0; ta < na; ta += tile) {
      const int64_t ta1 = ta + tile < na ? ta + tile : na;
      for (int64_t b0 = tb; b0 < tb1; b0 += edge) {
        const int64_t b1 = b0 + edge < tb1 ? b0 + edge : tb1;
        for (int64_t a0 = ta; a0 < ta1; a0 += edge) {
          const int64_t a1 = a0 + edge < ta1 ? a0 + edge : ta1;
          ahead(&as, per_s);
          ahead(&ad, per_d);
#if DLB__HAVE_SSE2
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

/* The plane kernel for one unit size and whether steps are units, as
 * dlb__tile_fn. */
#define DLB__TILE_FN(NAME, UNIT, UNIT_STEPS)                                 \
  static void NAME(char *d, int64_t db, int64_t da, const char *s,           \
                   int64_t sb, int64_t sa, int64_t nb, int64_t na,           \
                   const char *nd, const char *ns) {                         \
    plane(d, db, da, s, sb, sa, nb, na, nd, ns, UNIT, UNIT_STEPS);           \
  }
DLB__TILE_FN(tile_u8, 1, 0)
DLB__TILE_FN(tile_u16, 2, 0)
DLB__TILE_FN(tile_u32, 4, 0)
DLB__TILE_FN(tile_u64, 8, 0)
DLB__TILE_FN(tile_u128, 16, 0)
DLB__TILE_FN(tile_fast_u8, 1, 1)
DLB__TILE_FN(tile_fast_u16, 2, 1)
DLB__TILE_FN(tile_fast_u32, 4, 1)
DLB__TILE_FN(tile_fast_u64, 8, 1)
DLB__TILE_FN(tile_fast_u128, 16, 1)
#undef DLB__TILE_FN

dlb__tile_fn dlb__tile_kernel(size_t unit, int64_t dst_a, int64_t src_b) {
  /* The portable kernels (the test hook) are those without SSE2. */
  const int unit_steps = dst_a == (int64_t)unit && src_b == (int64_t)unit &&
                         !dlb__copy_portable();
  switch (unit) {
    case 1:
      return unit_steps ? tile_fast_u8 : tile_u8;
    case 2:
      return unit_steps ? tile_fast_u16 : tile_u16;
    case 4:
      return unit_steps ? tile_fast_u32 : tile_u32;
    case 8:
      return unit_steps ? tile_fast_u64 : tile_u64;
    default:
      return unit_steps ? tile_fast_u128 : tile_u128;
  }
}
