/*
 * bench_kernels.c -- the copy engine's kernels of each instruction set
 * against each other, in one process: every rep runs each case once per
 * level (portable C, SSE2, AVX2, AVX-512; the levels this CPU lacks run
 * the best it has), the order rotating from rep to rep, through
 * dlb_copy_set_kernels, and times a non-temporal copy of the same
 * bytes first. Interleaving is what makes the kernels comparable on a
 * shared machine: separate runs drift by more than they differ.
 *
 * Usage: bench_kernels [--reps N] [--json PATH]
 *
 * Cases, one thread: 64 MiB transposes of 1-, 2-, 4-, 8- and 16-byte
 * elements (as square as powers of two allow) and the (64, 64, 64, 64)
 * float32 tensor permuted (3, 1, 0, 2). Printed: each level's speed as a
 * share of the non-temporal copy's, median (quartiles) of per-rep ratios,
 * and each level's per-rep speed over the level below it.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench_clock.h"
#include "bench_limit.h"
#include "bench_mem.h"
#include "dlbridge.h"

#define MAX_REPS 101
#define NCASES 6
#define NLEVELS 4

static const char *const level_names[NLEVELS] = {"portable", "sse2", "avx2",
                                                 "avx512"};

static DLTensor view(void *data, int32_t ndim, int64_t *shape,
                     int64_t *strides, DLDataType dtype) {
  DLTensor t;
  memset(&t, 0, sizeof t);
  t.data = data;
  t.device.device_type = kDLCPU;
  t.ndim = ndim;
  t.dtype = dtype;
  t.shape = shape;
  t.strides = strides;
  return t;
}

static double median_of(double *v, int n, double *q1, double *q3) {
  sort_samples(v, n);
  if (q1 != NULL) *q1 = v[n / 4];
  if (q3 != NULL) *q3 = v[3 * n / 4];
  return v[n / 2];
}

int main(int argc, char **argv) {
  int reps = 15;
  const char *json_path = "bench_kernels.json";
  for (int i = 1; i < argc; i++) {
    if (strcmp(argv[i], "--reps") == 0 && i + 1 < argc)
      reps = atoi(argv[++i]);
    else if (strcmp(argv[i], "--json") == 0 && i + 1 < argc)
      json_path = argv[++i];
    else {
      fprintf(stderr, "usage: %s [--reps N] [--json PATH]\n", argv[0]);
      return 2;
    }
  }
  if (reps < 1) reps = 1;
  if (reps > MAX_REPS) reps = MAX_REPS;
  const size_t bytes = (size_t)64 << 20;
  char *a = big_alloc(bytes), *b = big_alloc(bytes);
  dlb_copy_set_threads(1);

  static const char *const case_names[NCASES] = {
      "transpose 1 byte",   "transpose 2 bytes", "transpose 4 bytes",
      "transpose 8 bytes",  "transpose 16 bytes", "permute (3,1,0,2) f32"};
  static int64_t shapes[NCASES][4], strides[NCASES][4];
  DLTensor src[NCASES], dst[NCASES];
  for (int k = 0; k < 5; k++) {
    const int es = 1 << k;
    int64_t elems = (int64_t)(bytes / (size_t)es), height = 1;
    while (height * height * 4 <= elems) height *= 2;
    const int64_t cols = elems / height;
    shapes[k][0] = cols;
    shapes[k][1] = height;
    strides[k][0] = 1;
    strides[k][1] = cols;
    DLDataType dt = {kDLUInt, (uint8_t)(8 * es), 1};
    if (es == 16) dt.code = kDLComplex;
    src[k] = view(a, 2, shapes[k], strides[k], dt);
    dst[k] = view(b, 2, shapes[k], NULL, dt);
  }
  const DLDataType f32 = {kDLFloat, 32, 1};
  for (int d = 0; d < 4; d++) shapes[5][d] = 64;
  strides[5][0] = 1;
  strides[5][1] = 64 * 64;
  strides[5][2] = 64 * 64 * 64;
  strides[5][3] = 64;
  src[5] = view(a, 4, shapes[5], strides[5], f32);
  dst[5] = view(b, 4, shapes[5], NULL, f32);

  (void)dlb_copy_set_kernels(NULL);
  int best = 0;
  while (best + 1 < NLEVELS &&
         strcmp(dlb_copy_kernels(), level_names[best]) != 0)
    best++;
  static double t[NCASES][NLEVELS][MAX_REPS], ref[MAX_REPS];
  for (int r = 0; r < reps; r++) {
    const double t0 = now();
    limit_copy(LIMIT_METHODS > 1 ? limit_methods[1].fn : limit_memcpy, b, a,
               bytes, 1);
    ref[r] = now() - t0;
    for (int k = 0; k < NCASES; k++)
      for (int i = 0; i < NLEVELS; i++) {
        const int level = (i + r) % NLEVELS;
        (void)dlb_copy_set_kernels(level_names[level]);
        const double t1 = now();
        if (dlb_copy(&src[k], &dst[k]) != DLB_OK) {
          fprintf(stderr, "dlb_copy: %s\n", dlb_last_error());
          return 1;
        }
        t[k][level][r] = now() - t1;
      }
  }
  (void)dlb_copy_set_kernels(NULL);

  FILE *json = fopen(json_path, "w");
  if (json == NULL) {
    perror(json_path);
    return 1;
  }
  printf("kernels by instruction set, one thread, x a non-temporal copy of "
         "64 MiB in the same rep:\nmedian (quartiles); \"over\": per-rep "
         "speed over the level before. This CPU's best: %s.\n",
         level_names[best]);
  printf("%-22s", "case");
  for (int l = 0; l < NLEVELS; l++) printf(" %-24s", level_names[l]);
  printf("\n");
  fprintf(json, "{\n  \"reps\": %d,\n  \"best\": \"%s\",\n  \"cases\": [\n",
          reps, level_names[best]);
  for (int k = 0; k < NCASES; k++) {
    printf("%-22s", case_names[k]);
    fprintf(json, "    {\"name\": \"%s\"", case_names[k]);
    for (int l = 0; l < NLEVELS; l++) {
      double v[MAX_REPS], q1, q3, over = 1.0;
      for (int r = 0; r < reps; r++) v[r] = ref[r] / t[k][l][r];
      const double med = median_of(v, reps, &q1, &q3);
      if (l > 0) {
        for (int r = 0; r < reps; r++) v[r] = t[k][l - 1][r] / t[k][l][r];
        over = median_of(v, reps, NULL, NULL);
      }
      char cell[64];
      snprintf(cell, sizeof cell, "%.2f (%.2f-%.2f) over %.2f", med, q1, q3,
               over);
      printf(" %-24s", cell);
      fprintf(json,
              ", \"%s\": {\"vs_stream\": %.3f, \"q1\": %.3f, \"q3\": %.3f, "
              "\"over_previous\": %.3f}",
              level_names[l], med, q1, q3, over);
    }
    printf("\n");
    fprintf(json, "}%s\n", k + 1 < NCASES ? "," : "");
  }
  fprintf(json, "  ]\n}\n");
  fclose(json);
  free(a);
  free(b);
  return 0;
}
