/*
 * bench_import.c -- what importing a tensor costs at the C level: a
 * versioned managed tensor made by someone else is checked, adopted and
 * released, as a consumer's from_dlpack does with what __dlpack__ returns.
 *
 * Usage: bench_import [--calls N] [--reps R] [--json PATH]
 *        bench_import --count N --case NAME
 *
 * The first form times every case: R reps of N calls each, the median
 * nanoseconds per call and the spread (min, max) of the reps, the cases
 * taken in turn in every rep. The second runs one case N times and
 * nothing else, for bench/callgrind.sh, which counts the instructions of
 * run_case alone (callgrind's --toggle-collect).
 *
 * The foreign tensor is a 4-D float32 one with explicit strides, as
 * PyTorch exports, whose deleter only counts its calls.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "bench_clock.h"
#include "dlbridge.h"

#define MAX_REPS 101

static int64_t shape[4] = {8, 3, 224, 224};
static int64_t strides[4] = {3 * 224 * 224, 224 * 224, 224, 1};
static float storage[1]; /* the data is never read */
static long deleted;

static void foreign_deleter(DLManagedTensorVersioned *self) {
  (void)self;
  deleted++;
}

static DLManagedTensorVersioned foreign = {
    {DLPACK_MAJOR_VERSION, DLPACK_MINOR_VERSION},
    NULL,
    foreign_deleter,
    0,
    {storage, {kDLCPU, 0}, 4, {kDLFloat, 32, 1}, shape, strides, 0},
};

static void die(const char *what, dlb_status s) {
  fprintf(stderr, "%s: %s (%s)\n", what, dlb_status_name(s), dlb_last_error());
  exit(1);
}

typedef enum which {
  VALIDATE,       /* dlb_managed_validate alone */
  IMPORT,         /* dlb_tensor_adopt (validates) + dlb_tensor_release */
  VALIDATE_IMPORT, /* a consumer that validates first, then imports */
  VALIDATE_ADOPT   /* the same with dlb_tensor_adopt_validated */
} which;

static const char *const case_names[] = {"validate", "import",
                                         "validate+import",
                                         "validate+adopt_validated"};
static const char *const case_labels[] = {
    "dlb_managed_validate",
    "dlb_tensor_adopt + dlb_tensor_release",
    "validate, then adopt + release",
    "validate, then adopt_validated + release",
};
#define NCASES 4

/* The measured loop; callgrind.sh collects inside this function only, so
 * it must stay a function of its own. */
__attribute__((noinline)) static void run_case(which w, long n) {
  for (long i = 0; i < n; i++) {
    dlb_status s;
    DLManagedTensorVersioned *t = NULL;
    switch (w) {
      case VALIDATE:
        s = dlb_managed_validate(&foreign);
        if (s != DLB_OK) die("dlb_managed_validate", s);
        break;
      case VALIDATE_IMPORT:
        s = dlb_managed_validate(&foreign);
        if (s != DLB_OK) die("dlb_managed_validate", s);
        /* fall through */
      case IMPORT:
        s = dlb_tensor_adopt(&foreign, &t);
        if (s != DLB_OK) die("dlb_tensor_adopt", s);
        dlb_tensor_release(t);
        break;
      case VALIDATE_ADOPT:
        s = dlb_managed_validate(&foreign);
        if (s != DLB_OK) die("dlb_managed_validate", s);
        s = dlb_tensor_adopt_validated(&foreign, &t);
        if (s != DLB_OK) die("dlb_tensor_adopt_validated", s);
        dlb_tensor_release(t);
        break;
    }
  }
}

static int usage(const char *prog) {
  fprintf(stderr,
          "usage: %s [--calls N] [--reps R] [--json PATH]\n"
          "       %s --count N --case validate|import|validate+import|"
          "validate+adopt_validated\n",
          prog, prog);
  return 2;
}

int main(int argc, char **argv) {
  long calls = 200000, count = 0;
  int reps = 15;
  const char *json_path = "bench_import.json", *only = NULL;
  for (int i = 1; i < argc; i++) {
    if (strcmp(argv[i], "--calls") == 0 && i + 1 < argc)
      calls = atol(argv[++i]);
    else if (strcmp(argv[i], "--reps") == 0 && i + 1 < argc)
      reps = atoi(argv[++i]);
    else if (strcmp(argv[i], "--json") == 0 && i + 1 < argc)
      json_path = argv[++i];
    else if (strcmp(argv[i], "--count") == 0 && i + 1 < argc)
      count = atol(argv[++i]);
    else if (strcmp(argv[i], "--case") == 0 && i + 1 < argc)
      only = argv[++i];
    else
      return usage(argv[0]);
  }
  if (only != NULL) {
    for (int c = 0; c < NCASES; c++)
      if (strcmp(only, case_names[c]) == 0) {
        run_case((which)c, count);
        /* Every import released its foreign tensor exactly once. */
        return deleted == (c == VALIDATE ? 0 : count) ? 0 : 1;
      }
    return usage(argv[0]);
  }
  if (calls < 1) calls = 1;
  if (reps < 1) reps = 1;
  if (reps > MAX_REPS) reps = MAX_REPS;

  double t[NCASES][MAX_REPS];
  for (int c = 0; c < NCASES; c++) run_case((which)c, calls / 10 + 1);
  for (int r = 0; r < reps; r++)
    for (int c = 0; c < NCASES; c++) {
      double t0 = now();
      run_case((which)c, calls);
      t[c][r] = (now() - t0) / (double)calls * 1e9;
    }
  FILE *json = fopen(json_path, "w");
  if (json == NULL) {
    perror(json_path);
    return 1;
  }
  printf("C-level import of a foreign 4-D float32 tensor (%d reps of %ld "
         "calls)\n", reps, calls);
  printf("%-40s %10s %10s %10s\n", "case", "median ns", "min ns", "max ns");
  fprintf(json, "{\n  \"reps\": %d,\n  \"calls\": %ld,\n  \"cases\": [\n",
          reps, calls);
  for (int c = 0; c < NCASES; c++) {
    sort_samples(t[c], reps);
    double med = t[c][reps / 2], lo = t[c][0], hi = t[c][reps - 1];
    printf("%-40s %10.1f %10.1f %10.1f\n", case_labels[c], med, lo, hi);
    fprintf(json,
            "    {\"name\": \"%s\", \"label\": \"%s\", \"median_ns\": %.2f, "
            "\"min_ns\": %.2f, \"max_ns\": %.2f}%s\n",
            case_names[c], case_labels[c], med, lo, hi,
            c + 1 < NCASES ? "," : "");
  }
  fprintf(json, "  ]\n}\n");
  fclose(json);
  printf("wrote %s\n", json_path);
  return 0;
}
