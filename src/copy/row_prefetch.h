/*
 * row_prefetch.h -- prefetches of the next src chunk for the register
 * transposes (strips.h and the tiles of each instruction set): lines
 * fetched into L2 a row at a time, a few at a time, while the tiles of
 * the chunk before them run.
 */
#ifndef DLBRIDGE_COPY_ROW_PREFETCH_H
#define DLBRIDGE_COPY_ROW_PREFETCH_H

#include <stddef.h>
#include <stdint.h>
#include <xmmintrin.h>

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

#endif /* DLBRIDGE_COPY_ROW_PREFETCH_H */
