/* bench_probe.h -- what the memory does with the write patterns of a
 * transpose, without dlbridge: non-temporal writes of whole lines to rows
 * far apart, a column of runs at a time. */
#ifndef DLB_BENCH_PROBE_H
#define DLB_BENCH_PROBE_H

#include <stdint.h>

#if defined(__SSE2__)
#include <emmintrin.h>

/* Writes `rows` rows of `row_bytes` (multiples of 64), `step` bytes apart,
 * with non-temporal stores, `run` bytes of every row at a time: the first
 * run of each row, then the second of each, and so on (a transpose's
 * strips write their dst this way). */
static inline void probe_column_writes(char *p, int64_t rows,
                                       int64_t row_bytes, int64_t step,
                                       int64_t run) {
  const __m128i v = _mm_set1_epi8(7);
  for (int64_t c = 0; c < row_bytes; c += run)
    for (int64_t r = 0; r < rows; r++) {
      char *q = p + r * step + c;
      for (int64_t o = 0; o < run; o += 16)
        _mm_stream_si128((__m128i *)(void *)(q + o), v);
    }
  _mm_sfence();
}
#endif

#endif
