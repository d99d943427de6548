/*
 * bench_ab.c -- two builds of the library against each other, in one
 * process: both shared libraries are loaded (dlopen, each with its own
 * copy of everything), and every rep runs each case once through each,
 * the order alternating from rep to rep. A change to the copy engine is
 * measured so: separate runs of bench_copy drift on a shared machine by
 * more than most changes gain, while two copies timed back to back see
 * the same machine.
 *
 * Usage: bench_ab A.so B.so [--reps N] [--threads T]
 *
 * A and B are paths to libdlbridge.so builds (for one built elsewhere:
 * BUILD/src/libdlbridge.so). Cases, on T threads (default 1): a contiguous
 * 64 MiB copy, 64 MiB transposes of 1-, 2-, 4-, 8- and 16-byte elements,
 * the (64, 64, 64, 64) float32 tensor permuted (3, 1, 0, 2) and
 * (2, 0, 1, 3), and the slice [::2, ::3] of a 4096 x 4096 float32 matrix.
 * Printed per case: A's and B's median ms and the median (quartiles,
 * min-max) of the per-rep ratio A / B of their times: above 1, B is
 * faster.
 */
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench_clock.h"
#include "bench_mem.h"
#include "dlbridge.h"

#define MAX_REPS 201
#define BYTES ((size_t)64 << 20)

typedef dlb_status (*copy_fn)(const DLTensor *, const DLTensor *);
typedef void (*threads_fn)(int);

typedef struct {
  copy_fn copy;
} build;

static int load(const char *path, int threads, build *b) {
  void *h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
  if (h == NULL) {
    fprintf(stderr, "bench_ab: %s\n", dlerror());
    return -1;
  }
  /* ISO C converts no object pointer to a function pointer: dlsym's
   * answers are copied into them. */
  void *set_sym = dlsym(h, "dlb_copy_set_threads");
  void *copy_sym = dlsym(h, "dlb_copy");
  threads_fn set_threads;
  memcpy(&set_threads, &set_sym, sizeof set_sym);
  memcpy(&b->copy, &copy_sym, sizeof copy_sym);
  if (set_sym == NULL || copy_sym == NULL) {
    fprintf(stderr, "bench_ab: %s has no dlb_copy or dlb_copy_set_threads\n",
            path);
    return -1;
  }
  set_threads(threads);
  return 0;
}

typedef struct {
  const char *name;
  int32_t ndim;
  int64_t shape[4], src_strides[4], dst_strides[4];
  int bytes; /* of an element */
} case_t;

/* A transpose of 64 MiB of `bytes`-byte elements, as square as powers of
 * two allow: dst (rows x cols) compact, src its columns. */
static case_t transpose_case(const char *name, int bytes) {
  case_t c;
  memset(&c, 0, sizeof c);
  c.name = name;
  c.bytes = bytes;
  int64_t rows = 1;
  while (rows * rows * bytes < (int64_t)BYTES) rows *= 2;
  const int64_t cols = (int64_t)BYTES / bytes / rows;
  c.ndim = 2;
  c.shape[0] = rows;
  c.shape[1] = cols;
  c.src_strides[0] = 1;
  c.src_strides[1] = rows;
  c.dst_strides[0] = cols;
  c.dst_strides[1] = 1;
  return c;
}

/* The (64, 64, 64, 64) float32 tensor permuted by perm into compact dst. */
static case_t permute_case(const char *name, const int perm[4]) {
  case_t c;
  memset(&c, 0, sizeof c);
  c.name = name;
  c.bytes = 4;
  c.ndim = 4;
  const int64_t compact[4] = {64 * 64 * 64, 64 * 64, 64, 1};
  for (int i = 0; i < 4; i++) {
    c.shape[i] = 64;
    c.src_strides[i] = compact[perm[i]];
    c.dst_strides[i] = compact[i];
  }
  return c;
}

static DLTensor tensor(void *data, const case_t *c, const int64_t *strides) {
  DLTensor t;
  memset(&t, 0, sizeof t);
  t.data = data;
  t.device.device_type = kDLCPU;
  t.ndim = c->ndim;
  t.dtype.code = c->bytes == 16 ? kDLComplex : kDLUInt;
  t.dtype.bits = (uint8_t)(8 * c->bytes);
  t.dtype.lanes = 1;
  t.shape = (int64_t *)c->shape;
  t.strides = (int64_t *)strides;
  return t;
}

static int usage(void) {
  fprintf(stderr,
          "usage: bench_ab A.so B.so [--reps N] [--threads T]\n"
          "  (N from 1 to %d, default 21; T from 1, default 1)\n",
          MAX_REPS);
  return 2;
}

int main(int argc, char **argv) {
  int reps = 21, threads = 1;
  const char *paths[2] = {NULL, NULL};
  int npaths = 0;
  for (int i = 1; i < argc; i++) {
    if (strcmp(argv[i], "--reps") == 0 && i + 1 < argc) {
      reps = atoi(argv[++i]);
      if (reps < 1 || reps > MAX_REPS) return usage();
    } else if (strcmp(argv[i], "--threads") == 0 && i + 1 < argc) {
      threads = atoi(argv[++i]);
      if (threads < 1) return usage();
    } else if (argv[i][0] != '-' && npaths < 2) {
      paths[npaths++] = argv[i];
    } else {
      return usage();
    }
  }
  if (npaths != 2) return usage();
  build b[2];
  for (int k = 0; k < 2; k++)
    if (load(paths[k], threads, &b[k]) < 0) return 1;

  char *src = big_alloc(BYTES), *dst = big_alloc(BYTES);

  static const int p3102[4] = {3, 1, 0, 2}, p2013[4] = {2, 0, 1, 3};
  case_t cases[10];
  int n = 0;
  memset(&cases[n], 0, sizeof cases[n]);
  cases[n].name = "contiguous 64 MiB";
  cases[n].ndim = 1;
  cases[n].bytes = 4;
  cases[n].shape[0] = (int64_t)BYTES / 4;
  cases[n].src_strides[0] = cases[n].dst_strides[0] = 1;
  n++;
  cases[n++] = transpose_case("transpose, 1 byte", 1);
  cases[n++] = transpose_case("transpose, 2 bytes", 2);
  cases[n++] = transpose_case("transpose, 4 bytes", 4);
  cases[n++] = transpose_case("transpose, 8 bytes", 8);
  cases[n++] = transpose_case("transpose, 16 bytes", 16);
  cases[n++] = permute_case("permute (3,1,0,2) 64^4", p3102);
  cases[n++] = permute_case("permute (2,0,1,3) 64^4", p2013);
  memset(&cases[n], 0, sizeof cases[n]);
  cases[n].name = "slice [::2, ::3] 4096^2";
  cases[n].ndim = 2;
  cases[n].bytes = 4;
  cases[n].shape[0] = 2048;
  cases[n].shape[1] = (4096 + 2) / 3;
  cases[n].src_strides[0] = 2 * 4096;
  cases[n].src_strides[1] = 3;
  cases[n].dst_strides[0] = cases[n].shape[1];
  cases[n].dst_strides[1] = 1;
  n++;

  printf("A: %s\nB: %s\n%d reps, %d thread%s; ratio: A's time over B's, "
         "median (quartiles, min-max) of per-rep ratios\n",
         paths[0], paths[1], reps, threads, threads == 1 ? "" : "s");
  printf("%-26s %9s %9s  %s\n", "case", "A ms", "B ms", "A / B");
  for (int c = 0; c < n; c++) {
    DLTensor s = tensor(src, &cases[c], cases[c].src_strides);
    DLTensor d = tensor(dst, &cases[c], cases[c].dst_strides);
    double t[2][MAX_REPS], ratio[MAX_REPS];
    for (int k = 0; k < 2; k++)
      if (b[k].copy(&s, &d) != 0) {
        fprintf(stderr, "bench_ab: %s: the copy of %s failed\n",
                paths[k], cases[c].name);
        return 1;
      }
    for (int r = 0; r < reps; r++) {
      for (int o = 0; o < 2; o++) {
        const int k = (r + o) % 2;
        const double t0 = now();
        (void)b[k].copy(&s, &d);
        t[k][r] = now() - t0;
      }
      ratio[r] = t[0][r] / t[1][r];
    }
    sort_samples(t[0], reps);
    sort_samples(t[1], reps);
    sort_samples(ratio, reps);
    printf("%-26s %9.3f %9.3f  %.3f (%.3f-%.3f, %.3f-%.3f)\n", cases[c].name,
           t[0][reps / 2] * 1e3, t[1][reps / 2] * 1e3, ratio[reps / 2],
           ratio[reps / 4], ratio[(3 * reps) / 4], ratio[0],
           ratio[reps - 1]);
  }
  free(src);
  free(dst);
  return 0;
}
