/*
 * strips.h -- the strip walk of the register transposes, for the kernel
 * files of each instruction set (transpose_avx512.c, transpose_avx2.c).
 *
 * Before including it, a kernel file defines DLB__STRIPS_ATTR (the
 * attributes of its functions: its target) and a function
 *
 *   tile(dst, dst_b, src, src_a, unit, nt)
 *
 * that moves 64 bytes of each of 64 / unit src rows (src_a bytes apart)
 * into 64 / unit dst rows (dst_b apart), with non-temporal stores when nt.
 * DLB__STRIPS_INSTANCE(UNIT) then defines strips_UNIT and strips_nt_UNIT,
 * of type dlb__strips_fn.
 */
#ifndef DLBRIDGE_COPY_STRIPS_H
#define DLBRIDGE_COPY_STRIPS_H

#include <xmmintrin.h>

#include "copy/copy_internal.h"

/* Lines still to prefetch: `rows` rows `step` apart, `lines` lines of
 * each, walked row by row (a burst of a row's lines, then the next). */
typedef struct {
  const char *row_start;
  int64_t step, lines, rows_left, line;
} dlb__pf;

static inline __attribute__((always_inline)) void pf_init(
    dlb__pf *p, const char *base, int64_t step, int64_t rows, int64_t bytes) {
  p->row_start = base;
  p->step = step;
  p->lines = (bytes + 63) / 64;
  p->rows_left = base != NULL ? rows : 0;
  p->line = 0;
}

static inline __attribute__((always_inline)) void pf_some(dlb__pf *p,
                                                          int64_t n) {
  for (; n > 0 && p->rows_left > 0; n--) {
    _mm_prefetch(p->row_start + p->line * 64, _MM_HINT_T1);
    if (++p->line == p->lines) {
      p->line = 0;
      p->row_start += p->step;
      p->rows_left--;
    }
  }
}

typedef void (*dlb__strips_fn)(char *dst, int64_t dst_b, const char *src,
                               int64_t src_a, int64_t bw, int64_t a_full,
                               const char *next_src);

#endif /* DLBRIDGE_COPY_STRIPS_H */

/* The walk itself takes the including file's target, so it is defined
 * once per including file. */

/* Columns [0, a_full) and rows [0, bw) of the plane (both multiples of
 * M = 64 / unit): strips of DLB__STRIP_BYTES / unit src rows, walked along
 * b in chunks of dlb__chunk_lines(unit) lines of each src row; while a
 * chunk's tiles run, the next chunk (the next strip's first, at the end
 * the next plane's) is prefetched, an even share of its lines per tile. */
DLB__STRIPS_ATTR static inline __attribute__((always_inline)) void strips(
    char *dst, int64_t dst_b, const char *src, int64_t src_a, int64_t bw,
    int64_t a_full, const char *next_src, size_t unit, int nt) {
  const int64_t u = (int64_t)unit, m = 64 / u;
  const int64_t strip_rows = DLB__STRIP_BYTES / u;
  const int64_t chunk = dlb__chunk_lines(unit) * m; /* units along b */
  const int64_t first_rows = strip_rows < a_full ? strip_rows : a_full;
  const int64_t first_bytes = (chunk < bw ? chunk : bw) * u;
  for (int64_t a0 = 0; a0 < a_full; a0 += strip_rows) {
    const int64_t rows = a0 + strip_rows < a_full ? strip_rows : a_full - a0;
    const char *s0 = src + a0 * src_a;
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
        pf_init(&pf, next_src, src_a, first_rows, first_bytes);
      }
      const int64_t tiles = (rows / m) * ((c1 - c0) / m);
      const int64_t per = (pf.rows_left * pf.lines + tiles - 1) / tiles;
      for (int64_t b = c0; b < c1; b += m)
        for (int64_t a = a0; a < a0 + rows; a += m) {
          pf_some(&pf, per);
          tile(dst + b * dst_b + a * u, dst_b, src + a * src_a + b * u,
               src_a, unit, nt);
        }
    }
  }
}

/* One function per unit and store kind, so that both are constants in
 * the tiles. */
#define DLB__STRIPS_INSTANCE(UNIT)                                         \
  DLB__STRIPS_ATTR static void strips_##UNIT(                              \
      char *dst, int64_t dst_b, const char *src, int64_t src_a, int64_t bw, \
      int64_t a_full, const char *next_src) {                              \
    strips(dst, dst_b, src, src_a, bw, a_full, next_src, UNIT, 0);         \
  }                                                                        \
  DLB__STRIPS_ATTR static void strips_nt_##UNIT(                           \
      char *dst, int64_t dst_b, const char *src, int64_t src_a, int64_t bw, \
      int64_t a_full, const char *next_src) {                              \
    strips(dst, dst_b, src, src_a, bw, a_full, next_src, UNIT, 1);         \
  }
