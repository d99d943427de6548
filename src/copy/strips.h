/*
 * strips.h -- the strip walk of the register transposes, for the kernel
 * files of each instruction set (transpose_avx512.c, transpose_avx2.c).
 *
 * Before including it, a kernel file defines DLB__STRIPS_ATTR (the
 * attributes of its functions: its target) and two functions:
 *
 *   tile(dst, dst_b, src, src_a, unit, nt, pf, per, sc)
 *
 * moves 64 bytes of each of 64 / unit src rows (src_a bytes apart) into
 * 64 / unit dst rows (dst_b apart), with non-temporal stores when nt,
 * and issues about `per` of pf's prefetches (row_prefetch.h) meanwhile,
 * its L1 buffers (if any) in the strip's scratch sc;
 *
 *   copy_lines(dst, buf, lines, nt)
 *
 * copies `lines` whole lines from the line-aligned buf to dst, with
 * non-temporal stores when nt. A kernel file may also define
 * DLB__STRIPS_PAIR(unit), true for the units it has pairs of tiles for,
 * and
 *
 *   tile_pair(dst, dst_b, src, src_a, unit, nt, pf, per, sc)
 *
 * doing what two tiles of src rows [0, M) and [M, 2M) do, with each dst
 * row's two lines stored back to back, and about `per` prefetches. And it
 * may define DLB__STRIPS_WIDE(unit), for units without pairs, the strips
 * walked side by side (default 1): a strip of W times the rows, whose
 * tiles at each b go first of every strip, then second of every strip,
 * and so on (the last strip of a plane, if shorter, tile by tile). A
 * kernel file whose tiles buffer in L1 defines the scratch each strip
 * gives them: DLB__SCRATCH_BYTES, with a hole of DLB__SCRATCH_HOLE_BYTES
 * at DLB__SCRATCH_HOLE that the strip lays over its dst runs modulo 4 KiB
 * (see dlb__strip_run), and DLB__SCRATCH_USED(unit, pairs), the bytes of
 * it a unit's tiles use (or its pairs'), for the tests.
 * DLB__STRIPS_INSTANCE(UNIT) then defines strips_UNIT and strips_nt_UNIT,
 * of type dlb__strips_fn, and the strips they run.
 */
#ifndef DLBRIDGE_COPY_STRIPS_H
#define DLBRIDGE_COPY_STRIPS_H

#include "copy/copy_internal.h"
#include "copy/row_prefetch.h"

#include <stdatomic.h>

typedef void (*dlb__strips_fn)(char *dst, int64_t dst_b, const char *src,
                               int64_t src_a, int64_t bw, int64_t a_full,
                               const char *next_src);

/* One strip of a plane: the plane's arguments, the strip's first row a0,
 * and sp, where the strip found its stack pointer. */
typedef struct {
  char *dst;
  int64_t dst_b;
  const char *src;
  int64_t src_a, bw, a_full;
  const char *next_src;
  int64_t a0;
  uintptr_t sp;
  int placed; /* whether it runs below a gap placed for it */
} dlb__strip_job;

#define DLB__STRIP_SP(v) __asm__ volatile("mov %%rsp, %0" : "=r"(v))

/* A load from an address whose low 12 bits fall in the line of a
 * non-temporal store still waiting to be written waits for that store: on
 * the Zen 3 VM, 2.7 x longer a line. A strip stores to `run` bytes of
 * each dst row, the rows' runs at low 12 bits `period` apart (the largest
 * power of two up to 4 KiB dividing dst's row step: all at the same ones
 * when the rows are a multiple of 4 KiB apart), while its loads from its
 * own stack (spilled registers, the tiles' L1 buffers) sit at fixed low 12
 * bits near its stack pointer; the strips whose runs met those ran 2.5 x
 * slower. So each strip runs below a gap of the stack that puts its stack
 * pointer half a period from the middle of its runs (2 KiB for rows a
 * multiple of 4 KiB apart). Where that pointer is without a gap is
 * `depth` below the walk's (the same for every call of one strip
 * function: the first strip run shows it, with no gap). */
__attribute__((noinline)) static void dlb__strip_run_at(
    void (*one)(dlb__strip_job *), dlb__strip_job *j, size_t gap) {
  char *pad = __builtin_alloca(gap);
  __asm__ volatile("" : : "r"(pad) : "memory");
  one(j);
  __asm__ volatile("" : : "r"(pad) : "memory");
}

/* The period, modulo 4 KiB, of the low 12 bits of rows `step` bytes
 * apart: the largest power of two dividing step, 4096 at most. */
static inline int64_t dlb__period_4k(int64_t step) {
  const uint64_t x = (uint64_t)step | 4096; /* |step| has the same bits */
  return (int64_t)(x & (~x + 1));
}

/* How near [a, a + alen) comes to [b + k period, b + k period + blen)
 * for any k, modulo the power of two `period`, in bytes (0 where they
 * overlap). */
static inline int64_t dlb__near_mod(uintptr_t a, int64_t alen, uintptr_t b,
                                    int64_t blen, int64_t period) {
  const int64_t x = (int64_t)((a - b) & (uintptr_t)(period - 1));
  if (x < blen) return 0; /* a starts in one of b's copies */
  const int64_t after = x - blen, before = period - x - alen;
  if (before < 0) return 0;
  return after < before ? after : before;
}

static inline __attribute__((always_inline)) void dlb__strip_run(
    void (*one)(dlb__strip_job *), dlb__strip_job *j,
    _Atomic intptr_t *depth, uintptr_t runs_at, int64_t run) {
  uintptr_t sp;
  DLB__STRIP_SP(sp);
  const intptr_t d = atomic_load_explicit(depth, memory_order_relaxed);
  size_t gap = 0;
  if (d > 0) {
    const uintptr_t away = runs_at + (uintptr_t)run / 2 +
                           (uintptr_t)dlb__period_4k(j->dst_b) / 2;
    gap = (size_t)((sp - (uintptr_t)d - away) & 4095 & ~(uintptr_t)63);
  }
  j->placed = d > 0;
  dlb__strip_run_at(one, j, gap);
  if (d <= 0)
    atomic_store_explicit(depth, (intptr_t)(sp - j->sp),
                          memory_order_relaxed);
}

#endif /* DLBRIDGE_COPY_STRIPS_H */

#ifndef DLB__STRIPS_WIDE
#define DLB__STRIPS_WIDE(unit) 1
#endif
/* Tiles at one b of a strip walked side by side, at most. */
#define DLB__TILES_AT_B 16
#ifndef DLB__SCRATCH_BYTES
#define DLB__SCRATCH_BYTES 0
#define DLB__SCRATCH_HOLE 0
#define DLB__SCRATCH_HOLE_BYTES 0
#define DLB__SCRATCH_USED(unit, pairs) 0
#endif

/* The walk itself takes the including file's target, so it is defined
 * once per including file. */

/* The tiles of a strip `rows` tall (a multiple of M = 64 / unit) at
 * columns [c0, c1) that write each dst row's rows * unit bytes back to
 * back: they go through buf (regular stores, L1), then each dst row's run
 * is copied out whole. Where the strip's src is one block, a permutation's
 * 64 x 64 float32 planes (dst rows 1 MiB apart) ran at 0.73 and 0.77 x a
 * non-temporal copy this way against 0.64 and 0.68 for two-line strips
 * tile by tile, and 0.70-0.73 for tile-by-tile strips of the full 64 rows
 * (in one process, interleaved, 15-21 reps, two runs); against the build
 * before, both loaded in one process, 1.03-1.20 x in seven runs on one
 * thread, 1.03 x on two. Strips over many src rows lose by it: a 4096^2
 * float32 transpose ran at 0.75-0.88 x. */
DLB__STRIPS_ATTR static inline __attribute__((always_inline)) void
tall_tiles(char *dst, int64_t dst_b, const char *src, int64_t src_a,
           int64_t rows, int64_t c0, int64_t c1, dlb__pf *pf, int64_t per,
           size_t unit, int nt, char *sc) {
  const int64_t u = (int64_t)unit, m = 64 / u, run = rows * u;
  _Alignas(64) char buf[DLB__TALL_STRIP_BYTES * 64];
  for (int64_t b = c0; b < c1; b += m) {
    for (int64_t a = 0; a < rows; a += m) {
      pf_some(pf, per); /* one burst: spread, they slowed permutations */
      tile(buf + a * u, run, src + a * src_a + b * u, src_a, unit, 0, pf, 0,
           sc);
    }
    char *d = dst + b * dst_b;
    const int64_t first =
        (int64_t)(((uintptr_t)dst - (uintptr_t)buf) & 4095) / run % m;
    for (int64_t k = 0; k < m; k++) {
      const int64_t r = (first + k) % m;
      copy_lines(d + r * dst_b, buf + r * run, run / 64, nt);
    }
  }
}

/* The strip of rows [a0, a0 + rows) of the plane below (strips): its
 * chunks of columns, each with the next one's prefetches. */
DLB__STRIPS_ATTR static inline __attribute__((always_inline)) void strip(
    const dlb__strip_job *j, size_t unit, int nt) {
  const int64_t u = (int64_t)unit, m = 64 / u;
  const int64_t bw = j->bw, a_full = j->a_full, src_a = j->src_a;
  const int64_t dst_b = j->dst_b, a0 = j->a0;
  char *const dst = j->dst;
  const char *const src = j->src;
  const int64_t chunk = dlb__chunk_lines(unit) * m; /* units along b */
  const int tall = src_a == bw * u && bw <= chunk;
  const int64_t base_rows = DLB__STRIP_BYTES / u;
  const int64_t strip_rows =
      tall ? DLB__TALL_STRIP_BYTES / u : DLB__STRIPS_WIDE(unit) * base_rows;
  const int64_t first_rows = strip_rows < a_full ? strip_rows : a_full;
  const int64_t first_bytes = (chunk < bw ? chunk : bw) * u;
  const int64_t rows = a0 + strip_rows < a_full ? strip_rows : a_full - a0;
  const char *s0 = src + a0 * src_a;
  /* The strip's runs of each dst row, and where their low 12 bits are. */
  const uintptr_t runs_at = (uintptr_t)(dst + a0 * u);
  const int64_t run = rows * u;
#if DLB__SCRATCH_BYTES > 0
  /* The tiles' L1 buffers, placed (modulo 4 KiB) with the middle of the
   * hole between them on the middle of the runs (see dlb__strip_run). */
  _Alignas(64) char area[DLB__SCRATCH_BYTES + 4096];
  const uintptr_t at = runs_at + (uintptr_t)run / 2 - DLB__SCRATCH_HOLE -
                       DLB__SCRATCH_HOLE_BYTES / 2;
  char *const sc = area + ((at - (uintptr_t)area) & 4095 & ~(uintptr_t)63);
#else
  char *const sc = NULL;
#endif
  if (j->placed &&
      atomic_load_explicit(&dlb__strips_counting, memory_order_relaxed)) {
    const int64_t period = dlb__period_4k(dst_b);
    int64_t near = 4096;
#if DLB__SCRATCH_BYTES > 0
#ifdef DLB__STRIPS_PAIR
    const int pairs = DLB__STRIPS_PAIR(unit) && !tall;
#else
    const int pairs = 0;
#endif
    const int64_t used = DLB__SCRATCH_USED(unit, pairs);
    const int64_t below =
        used < DLB__SCRATCH_HOLE ? used : DLB__SCRATCH_HOLE;
    const int64_t above = used - DLB__SCRATCH_HOLE - DLB__SCRATCH_HOLE_BYTES;
    if (below > 0)
      near = dlb__near_mod((uintptr_t)sc, below, runs_at, run, period);
    if (above > 0) {
      const int64_t n2 = dlb__near_mod(
          (uintptr_t)sc + DLB__SCRATCH_HOLE + DLB__SCRATCH_HOLE_BYTES, above,
          runs_at, run, period);
      if (n2 < near) near = n2;
    }
#endif
    dlb__strips_note(dlb__near_mod(j->sp, 1, runs_at, run, period), near);
  }
  for (int64_t c0 = 0; c0 < bw; c0 += chunk) {
    const int64_t c1 = c0 + chunk < bw ? c0 + chunk : bw;
    dlb__pf pf;
    if (c1 < bw) {
      const int64_t c2 = c1 + chunk < bw ? c1 + chunk : bw;
      pf_init(&pf, s0 + c1 * u, src_a, rows, (c2 - c1) * u);
    } else if (a0 + strip_rows < a_full) {
      const int64_t next = a0 + strip_rows;
      pf_init(&pf, src + next * src_a, src_a,
              next + strip_rows < a_full ? strip_rows : a_full - next,
              first_bytes);
    } else {
      pf_init(&pf, j->next_src, src_a, first_rows, first_bytes);
    }
    const int64_t tiles = (rows / m) * ((c1 - c0) / m);
    const int64_t per = (pf.rows_left * pf.lines + tiles - 1) / tiles;
    if (tall && rows * u > DLB__STRIP_BYTES) {
      tall_tiles(dst + a0 * u, dst_b, s0, src_a, rows, c0, c1, &pf, per,
                 unit, nt, sc);
      continue;
    }
    for (int64_t b = c0; b < c1; b += m) {
      int64_t a = a0;
      if (DLB__STRIPS_WIDE(unit) > 1 && !tall && rows == strip_rows && !nt) {
        for (int64_t t = 0; t < base_rows; t += m)
          for (int64_t k = 0; k < DLB__STRIPS_WIDE(unit); k++) {
            const int64_t aa = a0 + k * base_rows + t;
            tile(dst + b * dst_b + aa * u, dst_b, src + aa * src_a + b * u,
                 src_a, unit, nt, &pf, per, sc);
          }
        continue;
      }
      if (DLB__STRIPS_WIDE(unit) > 1 && !tall && rows == strip_rows) {
        /* Each tile at b stores one line of the runs (order: the tiles'
         * first rows past a0). Where src's line at b has the low 12 bits
         * of run line x, the tile storing line x goes last and the one
         * storing x + 1 (which the next b's loads meet) first, so that
         * the loads wait on older non-temporal stores. (With regular
         * stores the order costs copies in the caches up to 14 %.) */
        const int64_t x = (int64_t)(((uintptr_t)(s0 + b * u) - runs_at) &
                                    4095) / 64;
        int64_t order[DLB__TILES_AT_B], n = 0;
        for (int64_t t = 0; t < base_rows; t += m)
          for (int64_t k = 0; k < DLB__STRIPS_WIDE(unit); k++)
            order[n++] = k * base_rows + t;
        if (x < run / 64) {
          int64_t moved[DLB__TILES_AT_B], i2 = 0;
          for (int pass = 0; pass < 3; pass++)
            for (int64_t i = 0; i < n; i++) {
              const int64_t line = order[i] * u / 64;
              if (pass == (line == x + 1 ? 0 : line == x ? 2 : 1))
                moved[i2++] = order[i];
            }
          for (int64_t i = 0; i < n; i++) order[i] = moved[i];
        }
        for (int64_t i = 0; i < n; i++) {
          const int64_t aa = a0 + order[i];
          tile(dst + b * dst_b + aa * u, dst_b, src + aa * src_a + b * u,
               src_a, unit, nt, &pf, per, sc);
        }
        continue;
      }
#ifdef DLB__STRIPS_PAIR
      if (DLB__STRIPS_PAIR(unit))
        for (; a + 2 * m <= a0 + rows; a += 2 * m)
          tile_pair(dst + b * dst_b + a * u, dst_b, src + a * src_a + b * u,
                    src_a, unit, nt, &pf, 2 * per, sc);
#endif
      for (; a < a0 + rows; a += m)
        tile(dst + b * dst_b + a * u, dst_b, src + a * src_a + b * u, src_a,
             unit, nt, &pf, per, sc);
    }
  }
}

/* Columns [0, a_full) and rows [0, bw) of the plane (both multiples of
 * M = 64 / unit): strips of DLB__STRIP_BYTES / unit src rows, walked along
 * b in chunks of dlb__chunk_lines(unit) lines of each src row; while a
 * chunk's tiles run, the next chunk (the next strip's first, at the end
 * the next plane's) is prefetched, an even share of its lines per tile.
 * When src's rows follow each other and one chunk covers them, a strip
 * reads one block of src however tall it is: strips are then
 * DLB__TALL_STRIP_BYTES / unit rows, through tall_tiles where that makes
 * dst's runs longer than DLB__STRIP_BYTES (for two lines, the buffer
 * only costs: 64 x 64 planes of 2-byte units ran at 0.96 x through it).
 * With non-temporal stores (nt) each strip runs in `one`, on a stack
 * placed by dlb__strip_run so that its loads from the stack do not wait on
 * the strip's stores (`depth`: where one's stack pointer is). Without,
 * the strips run inline: on copies of 256 KiB to 4 MiB, mostly in the
 * caches, the calls and the moved stack cost up to 10 %. */
DLB__STRIPS_ATTR static inline __attribute__((always_inline)) void strips(
    char *dst, int64_t dst_b, const char *src, int64_t src_a, int64_t bw,
    int64_t a_full, const char *next_src, size_t unit,
    void (*one)(dlb__strip_job *), _Atomic intptr_t *depth, int nt) {
  const int64_t u = (int64_t)unit, m = 64 / u;
  const int64_t chunk = dlb__chunk_lines(unit) * m;
  const int tall = src_a == bw * u && bw <= chunk;
  const int64_t strip_rows =
      tall ? DLB__TALL_STRIP_BYTES / u
           : DLB__STRIPS_WIDE(unit) * (DLB__STRIP_BYTES / u);
  dlb__strip_job j = {dst, dst_b, src, src_a, bw, a_full, next_src, 0, 0, 0};
  for (j.a0 = 0; j.a0 < a_full; j.a0 += strip_rows)
    if (nt)
      dlb__strip_run(one, &j, depth, (uintptr_t)(dst + j.a0 * u),
                     strip_rows * u);
    else
      strip(&j, unit, 0);
}

/* One function per unit and store kind, so that both are constants in
 * the tiles, and the strip function of the non-temporal kind, called
 * through dlb__strip_run. */
#define DLB__STRIPS_INSTANCE(UNIT)                                         \
  _Static_assert(DLB__STRIPS_WIDE(UNIT) * (DLB__STRIP_BYTES / 64) <=       \
                     DLB__TILES_AT_B,                                      \
                 "strip() orders the tiles at each b in DLB__TILES_AT_B"); \
  static _Atomic intptr_t depth_nt_##UNIT;                                 \
  DLB__STRIPS_ATTR __attribute__((noinline)) static void strip_nt_##UNIT(  \
      dlb__strip_job *j) {                                                 \
    DLB__STRIP_SP(j->sp);                                                  \
    strip(j, UNIT, 1);                                                     \
  }                                                                        \
  DLB__STRIPS_ATTR static void strips_##UNIT(                              \
      char *dst, int64_t dst_b, const char *src, int64_t src_a, int64_t bw, \
      int64_t a_full, const char *next_src) {                              \
    strips(dst, dst_b, src, src_a, bw, a_full, next_src, UNIT, NULL, NULL, \
           0);                                                             \
  }                                                                        \
  DLB__STRIPS_ATTR static void strips_nt_##UNIT(                           \
      char *dst, int64_t dst_b, const char *src, int64_t src_a, int64_t bw, \
      int64_t a_full, const char *next_src) {                              \
    strips(dst, dst_b, src, src_a, bw, a_full, next_src, UNIT,             \
           strip_nt_##UNIT, &depth_nt_##UNIT, 1);                          \
  }
