/* bench_clock.h -- what every benchmark here times with: a monotonic clock
 * and sorting of samples, for medians and spreads. */
#ifndef DLB_BENCH_CLOCK_H
#define DLB_BENCH_CLOCK_H

#include <stdlib.h>
#include <time.h>

static inline double now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static inline int bench_cmp_double(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return x < y ? -1 : x > y;
}

/* Sorts n samples in place, smallest first. */
static inline void sort_samples(double *v, int n) {
  qsort(v, (size_t)n, sizeof v[0], bench_cmp_double);
}

#endif
