/* bench_mem.h -- the large buffers the copy benchmarks copy between. */
#ifndef DLB_BENCH_MEM_H
#define DLB_BENCH_MEM_H

#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>

/* Huge pages where the system allows, as dlbridge's own allocator asks, and
 * every page written (with a pattern) so no timing pays a fault. Exits on
 * failure. */
static inline void *big_alloc(size_t bytes) {
  void *p = NULL;
  if (posix_memalign(&p, (size_t)2 << 20, bytes) != 0) {
    fprintf(stderr, "out of memory (%zu bytes)\n", bytes);
    exit(1);
  }
#ifdef MADV_HUGEPAGE
  (void)madvise(p, bytes, MADV_HUGEPAGE);
#endif
  unsigned char *c = p;
  for (size_t i = 0; i < bytes; i++)
    c[i] = (unsigned char)(i * 2654435761u >> 13);
  return p;
}

#endif
