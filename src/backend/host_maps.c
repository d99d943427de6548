/*
 * host_maps.c -- what the process's mappings allow: whether a range of host
 * memory may be written (a read-only mapping needs its own flag to be
 * pinned by CUDA).
 */
#include <inttypes.h>
#include <stdint.h>
#include <stdio.h>

#include "host_maps.h"

int dlb__range_writable(const void *p, size_t size) {
  if (size == 0) return 1;
  FILE *f = fopen("/proc/self/maps", "re");
  if (f == NULL) return -1;
  uintptr_t at = (uintptr_t)p;
  const uintptr_t end = at + size < at ? UINTPTR_MAX : at + size;
  char line[512];
  int answer = -1;
  /* The mappings come in address order: walk them until [p, end) is
   * covered by writable ones, or one in it is not writable. */
  while (answer < 0 && fgets(line, sizeof line, f) != NULL) {
    uintptr_t lo, hi;
    char perms[8];
    if (sscanf(line, "%" SCNxPTR "-%" SCNxPTR " %7s", &lo, &hi, perms) != 3)
      continue;
    if (hi <= at) continue;
    if (lo > at || perms[1] != 'w')
      answer = 0; /* a gap, or a mapping without write access */
    else if (hi >= end)
      answer = 1;
    else
      at = hi;
  }
  fclose(f);
  return answer < 0 ? 0 : answer;
}
