/*
 * fuzz_input.h -- reading a fuzz input as a stream of small decisions, for
 * the fuzz targets in this folder. Running out of input gives zeros, so
 * every prefix of an input is itself a valid input and the fuzzer's
 * mutations stay meaningful.
 */
#ifndef DLB_FUZZ_INPUT_H
#define DLB_FUZZ_INPUT_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct {
  const uint8_t *p;
  size_t n;
} fz_in;

static inline uint64_t fz_bytes(fz_in *in, size_t k) {
  uint64_t v = 0;
  for (size_t i = 0; i < k; i++) {
    v <<= 8;
    if (in->n > 0) {
      v |= *in->p++;
      in->n--;
    }
  }
  return v;
}

static inline uint8_t fz_u8(fz_in *in) { return (uint8_t)fz_bytes(in, 1); }

/* A value in [0, n) (0 for n 0). */
static inline uint64_t fz_below(fz_in *in, uint64_t n) {
  if (n == 0) return 0;
  size_t k = n <= 0x100 ? 1 : n <= 0x10000 ? 2 : n <= 0x100000000u ? 4 : 8;
  return fz_bytes(in, k) % n;
}

/* A value in [lo, hi]. */
static inline int64_t fz_range(fz_in *in, int64_t lo, int64_t hi) {
  return lo + (int64_t)fz_below(in, (uint64_t)(hi - lo) + 1);
}

/* An int64 that is usually small but reaches the edges of the type. */
static inline int64_t fz_i64(fz_in *in) {
  switch (fz_below(in, 8)) {
    case 0: return INT64_MAX - fz_range(in, 0, 3);
    case 1: return INT64_MIN + fz_range(in, 0, 3);
    case 2: return (int64_t)fz_bytes(in, 8);
    case 3: return (int64_t)1 << fz_range(in, 0, 62);
    case 4: return -((int64_t)1 << fz_range(in, 0, 62));
    default: return fz_range(in, -8, 8);
  }
}

/* Stops the process with a message: a failed property is a finding. */
#define FZ_ASSERT(cond)                                                  \
  do {                                                                   \
    if (!(cond)) {                                                       \
      fprintf(stderr, "%s:%d: property failed: %s\n", __FILE__, __LINE__, \
              #cond);                                                    \
      abort();                                                           \
    }                                                                    \
  } while (0)

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#endif /* DLB_FUZZ_INPUT_H */
