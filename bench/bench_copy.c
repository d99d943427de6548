/*
 * bench_copy.c -- the CPU copy engine against memcpy and against the
 * machine's copy limit, into preallocated output.
 *
 * Usage: bench_copy [--quick] [--reps N] [--json PATH]
 *
 * N is 1 to 101 (11 by default; --quick makes it 5 unless --reps is given).
 *
 * Every case copies into memory already written once (no page faults in
 * the timings) and reports the median and spread (min, max) of N runs.
 * Bandwidth counts bytes read plus bytes written, as memcpy's does, so the
 * ratio columns compare like with like. The limit (bench_limit.h) is the
 * fastest contiguous copy of the bytes a case writes (the reference with
 * the best median), on one thread for the one-thread runs and on up to all
 * threads for the others, timed in the same reps as the case. The threshold sweep times small
 * contiguous copies and transposes on one thread and on all of them, to
 * place DLB__COPY_PARALLEL_MIN; the sections after it are described in
 * bench/README.md.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#if defined(__SSE2__)
#include <emmintrin.h>
#endif

#include "bench_clock.h"
#include "bench_limit.h"
#include "bench_mem.h"
#include "bench_probe.h"
#include "dlbridge.h"

#define MAX_REPS 101
#define MAX_ROWS 128

typedef struct {
  char name[64];
  int threads; /* 0: memcpy */
  double bytes; /* read + written */
  double median, min, max; /* seconds */
  double ratio;            /* bandwidth / memcpy's of the same size */
  double vs_limit;         /* bandwidth / the limit's at these threads */
  double vs_limit_min, vs_limit_max;
  int is_limit; /* a reference copy, not dlb_copy */
} row;

static row rows[MAX_ROWS];
static int nrows;

typedef struct {
  const DLTensor *src, *dst;
  void *mdst;
  const void *msrc;
  size_t mbytes;
} job;

static void run_memcpy(const job *j) { memcpy(j->mdst, j->msrc, j->mbytes); }

static void run_copy(const job *j) {
  dlb_status st = dlb_copy(j->src, j->dst);
  if (st != DLB_OK) {
    fprintf(stderr, "dlb_copy: %s (%s)\n", dlb_status_name(st),
            dlb_last_error());
    exit(1);
  }
}

static int reps = 11;

static double time_once(void (*fn)(const job *), const job *j) {
  double t0 = now();
  fn(j);
  return now() - t0;
}

static void summarise(row *w, const char *name, int threads, double bytes,
                      double *t, double *ratio, double *vs_limit) {
  sort_samples(t, reps);
  snprintf(w->name, sizeof w->name, "%s", name);
  w->threads = threads;
  w->bytes = bytes;
  w->median = t[reps / 2];
  w->min = t[0];
  w->max = t[reps - 1];
  if (ratio != NULL) {
    sort_samples(ratio, reps);
    w->ratio = ratio[reps / 2];
  } else {
    w->ratio = 1.0;
  }
  w->vs_limit = w->vs_limit_min = w->vs_limit_max = 0.0;
  if (vs_limit != NULL) {
    sort_samples(vs_limit, reps);
    w->vs_limit = vs_limit[reps / 2];
    w->vs_limit_min = vs_limit[0];
    w->vs_limit_max = vs_limit[reps - 1];
  }
}

/* Median seconds of j on one thread and on `all`, taken in turn, and the
 * median per-rep speed-up (sweep only). */
static void pair_times(int all, const job *j, double *one, double *many,
                       double *gain) {
  double t1[MAX_REPS], tn[MAX_REPS], g[MAX_REPS];
  dlb_copy_set_threads(all);
  run_copy(j);
  for (int r = 0; r < reps; r++) {
    dlb_copy_set_threads(1);
    t1[r] = time_once(run_copy, j);
    dlb_copy_set_threads(all);
    tn[r] = time_once(run_copy, j);
    g[r] = t1[r] / tn[r];
  }
  sort_samples(t1, reps);
  sort_samples(tn, reps);
  sort_samples(g, reps);
  *one = t1[reps / 2];
  *many = tn[reps / 2];
  *gain = g[reps / 2];
}

static DLTensor view(void *data, int32_t ndim, int64_t *shape,
                     int64_t *strides) {
  DLTensor t;
  memset(&t, 0, sizeof t);
  t.data = data;
  t.device.device_type = kDLCPU;
  t.ndim = ndim;
  t.dtype.code = kDLFloat;
  t.dtype.bits = 32;
  t.dtype.lanes = 1;
  t.shape = shape;
  t.strides = strides;
  return t;
}

/* Times of every limit method on 1 and on `all` threads for the bytes of
 * one case, per rep. */
typedef struct {
  double t[LIMIT_METHODS][2][MAX_REPS];
} limits;

static void time_limits(limits *l, int r, const job *j, int all) {
  for (size_t m = 0; m < limit_methods_here(); m++)
    for (int k = 0; k < 2; k++) {
      double t0 = now();
      limit_copy(limit_methods[m].fn, j->mdst, j->msrc, j->mbytes,
                 k == 0 ? 1 : all);
      l->t[m][k][r] = now() - t0;
    }
}

static double median_of(const double *t) {
  double s[MAX_REPS];
  memcpy(s, t, sizeof(double) * (size_t)reps);
  sort_samples(s, reps);
  return s[reps / 2];
}

/* The reference with the best median among methods on one thread
 * (k_max 0) or on one or `all` threads (k_max 1): the limit. Its own
 * time in each rep is compared with the case's in that rep (the fastest
 * of six references per rep would favour the limit by noise alone). */
static const double *best_limit(const limits *l, int k_max, size_t *method,
                                int *k_out) {
  double best = 1e30;
  const double *times = l->t[0][0];
  for (size_t m = 0; m < limit_methods_here(); m++)
    for (int k = 0; k <= k_max; k++) {
      double med = median_of(l->t[m][k]);
      if (med < best) {
        best = med;
        times = l->t[m][k];
        *method = m;
        *k_out = k;
      }
    }
  return times;
}

/* memcpy, the limit methods, and dlb_copy on one thread and on `all`,
 * taken in turn in every rep so that the machine's drift (other tenants)
 * hits them alike; each ratio is the median of the per-rep ratios. The
 * reference copies move as many bytes as the case writes. */
static void bench_case(const char *name, const DLTensor *src,
                       const DLTensor *dst, size_t out_bytes, void *mdst,
                       const void *msrc, int all) {
  job j = {src, dst, mdst, msrc, out_bytes};
  static limits l;
  double tm[MAX_REPS], t1[MAX_REPS], tn[MAX_REPS], r1[MAX_REPS],
      rn[MAX_REPS], l1[MAX_REPS], ln[MAX_REPS], b1[MAX_REPS], bn[MAX_REPS],
      lt1[MAX_REPS], ltn[MAX_REPS];
  const double moved = 2.0 * (double)out_bytes;
  /* Warm: the pool starts, caches and TLBs fill. */
  run_memcpy(&j);
  dlb_copy_set_threads(all);
  run_copy(&j);
  for (int r = 0; r < reps; r++) {
    tm[r] = time_once(run_memcpy, &j);
    time_limits(&l, r, &j, all);
    dlb_copy_set_threads(1);
    t1[r] = time_once(run_copy, &j);
    dlb_copy_set_threads(all);
    tn[r] = time_once(run_copy, &j);
    r1[r] = tm[r] / t1[r];
    rn[r] = tm[r] / tn[r];
  }
  size_t m1 = 0, mn = 0;
  int k1 = 0, kn = 0;
  memcpy(lt1, best_limit(&l, 0, &m1, &k1), sizeof(double) * (size_t)reps);
  memcpy(ltn, best_limit(&l, all > 1, &mn, &kn),
         sizeof(double) * (size_t)reps);
  for (int r = 0; r < reps; r++) {
    l1[r] = lt1[r] / t1[r];
    ln[r] = ltn[r] / tn[r];
    b1[r] = tm[r] / lt1[r];
    bn[r] = tm[r] / ltn[r];
  }
  char label[64];
  snprintf(label, sizeof label, "memcpy %.0f MiB",
           (double)out_bytes / (1 << 20));
  double ones[MAX_REPS];
  for (int r = 0; r < reps; r++) ones[r] = 1.0;
  summarise(&rows[nrows++], label, 0, moved, tm, NULL, NULL);
  for (size_t m = 0; m < limit_methods_here(); m++)
    for (int k = 0; k < (all > 1 ? 2 : 1); k++) {
      double rm[MAX_REPS];
      for (int r = 0; r < reps; r++) rm[r] = tm[r] / l.t[m][k][r];
      snprintf(label, sizeof label, "limit: %s", limit_methods[m].name);
      summarise(&rows[nrows++], label, k == 0 ? 1 : all, moved, l.t[m][k],
                rm, NULL);
      rows[nrows - 1].is_limit = 1;
    }
  snprintf(label, sizeof label, "limit = %s", limit_methods[m1].name);
  summarise(&rows[nrows++], label, 1, moved, lt1, b1, ones);
  rows[nrows - 1].is_limit = 1;
  if (all > 1) {
    snprintf(label, sizeof label, "limit = %s%s", limit_methods[mn].name,
             kn == 0 ? " x1" : "");
    summarise(&rows[nrows++], label, all, moved, ltn, bn, ones);
    rows[nrows - 1].is_limit = 1;
  }
  summarise(&rows[nrows++], name, 1, moved, t1, r1, l1);
  if (all > 1) summarise(&rows[nrows++], name, all, moved, tn, rn, ln);
}

/* Microseconds for copies of growing size on 1 and on `all` threads, and
 * the speed-up, to place DLB__COPY_PARALLEL_MIN. */
static void sweep(FILE *json, int all, float *a, float *b) {
  static const int64_t sizes[] = {256 << 10, 512 << 10, 1 << 20,  2 << 20,
                                  4 << 20,   8 << 20,   16 << 20, 32 << 20};
  printf("\nthreshold sweep (median microseconds; 1 thread vs %d; gain = "
         "median per-rep speed-up)\n", all);
  printf("%10s %11s %11s %6s %11s %11s %6s\n", "bytes", "contig x1",
         "contig xN", "gain", "transp x1", "transp xN", "gain");
  fprintf(json, "  \"sweep\": [\n");
  const size_t n = sizeof sizes / sizeof sizes[0];
  for (size_t k = 0; k < n; k++) {
    int64_t elems = sizes[k] / 4;
    /* A square-ish transpose of the same bytes: rows x cols. */
    int64_t rows_ = 1;
    while (rows_ * rows_ * 4 <= elems) rows_ *= 2;
    int64_t cols = elems / rows_;
    int64_t flat[1] = {elems};
    int64_t sq[2] = {cols, rows_}, tstr[2] = {1, cols};
    DLTensor cs = view(a, 1, flat, NULL), cd = view(b, 1, flat, NULL);
    DLTensor ts = view(a, 2, sq, tstr), td = view(b, 2, sq, NULL);
    job cj = {&cs, &cd, NULL, NULL, 0}, tj = {&ts, &td, NULL, NULL, 0};
    double c1, cn, cg, t1, tn, tg;
    pair_times(all, &cj, &c1, &cn, &cg);
    pair_times(all, &tj, &t1, &tn, &tg);
    printf("%10lld %11.1f %11.1f %6.2f %11.1f %11.1f %6.2f\n",
           (long long)sizes[k], c1 * 1e6, cn * 1e6, cg, t1 * 1e6, tn * 1e6,
           tg);
    fprintf(json,
            "    {\"bytes\": %lld, \"contig_1_us\": %.2f, \"contig_n_us\": "
            "%.2f, \"contig_gain\": %.3f, \"transpose_1_us\": %.2f, "
            "\"transpose_n_us\": %.2f, \"transpose_gain\": %.3f}%s\n",
            (long long)sizes[k], c1 * 1e6, cn * 1e6, cg, t1 * 1e6, tn * 1e6,
            tg, k + 1 < n ? "," : "");
  }
  fprintf(json, "  ],\n");
}

/* Transposes of 64 MiB of every element size (1, 2, 4, 8, 16 bytes) on
 * one thread, each against the one-thread limit (the reference with the
 * best median) in the same reps: the kernels should move bytes at the
 * same rate whatever the element size. Every rep times the references,
 * then each size once, the order rotating from rep to rep, so that each
 * size's rate over float32's is a ratio within one rep (sizes timed in
 * blocks of reps drift apart with the machine). */
static void size_sweep(FILE *json, float *a, float *b, size_t bytes) {
  enum { NSIZES = 5, F32 = 2 };
  static const int sizes[NSIZES] = {1, 2, 4, 8, 16};
  printf("\ntranspose of 64 MiB by element size, one thread, sizes "
         "interleaved (median ms, GB/s read + written, x limit median "
         "(min-max), rate over float32's median (min-max))\n");
  fprintf(json, "  \"size_sweep\": [\n");
  dlb_copy_set_threads(1);
  job ref = {NULL, NULL, b, a, bytes};
  int64_t shape[NSIZES][2], str[NSIZES][2];
  DLTensor ts[NSIZES], td[NSIZES];
  job jobs[NSIZES];
  for (int k = 0; k < NSIZES; k++) {
    const int es = sizes[k];
    /* rows x cols elements, as square as powers of two allow. */
    int64_t elems = (int64_t)(bytes / (size_t)es), height = 1;
    while (height * height * 4 <= elems) height *= 2;
    shape[k][0] = elems / height;
    shape[k][1] = height;
    str[k][0] = 1;
    str[k][1] = shape[k][0];
    ts[k] = view(a, 2, shape[k], str[k]);
    td[k] = view(b, 2, shape[k], NULL);
    ts[k].dtype.code = td[k].dtype.code = es == 16 ? kDLComplex : kDLUInt;
    ts[k].dtype.bits = td[k].dtype.bits = (uint8_t)(es == 16 ? 128 : 8 * es);
    jobs[k] = (job){&ts[k], &td[k], NULL, NULL, 0};
    run_copy(&jobs[k]);
  }
  static limits l;
  static double t[NSIZES][MAX_REPS];
  for (int i = 0; i < reps; i++) {
    time_limits(&l, i, &ref, 1);
    for (int n = 0; n < NSIZES; n++) {
      const int k = (n + i) % NSIZES;
      t[k][i] = time_once(run_copy, &jobs[k]);
    }
  }
  size_t m = 0;
  int kk = 0;
  const double *lt = best_limit(&l, 0, &m, &kk);
  /* Per-rep ratios first: they pair the times of one rep. */
  double vl[NSIZES][MAX_REPS], vf[NSIZES][MAX_REPS];
  for (int k = 0; k < NSIZES; k++)
    for (int i = 0; i < reps; i++) {
      vl[k][i] = lt[i] / t[k][i];
      vf[k][i] = t[F32][i] / t[k][i];
    }
  for (int k = 0; k < NSIZES; k++) {
    sort_samples(vl[k], reps);
    sort_samples(vf[k], reps);
  }
  for (int k = 0; k < NSIZES; k++) sort_samples(t[k], reps);
  for (int k = 0; k < NSIZES; k++) {
    const double med = t[k][reps / 2];
    printf("%3d bytes %6lld x %-6lld %8.3f %8.2f %6.2f (%.2f-%.2f) %6.2f "
           "(%.2f-%.2f)\n",
           sizes[k], (long long)shape[k][0], (long long)shape[k][1],
           med * 1e3, 2.0 * (double)bytes / med * 1e-9, vl[k][reps / 2],
           vl[k][0], vl[k][reps - 1], vf[k][reps / 2], vf[k][0],
           vf[k][reps - 1]);
    fprintf(json,
            "    {\"itemsize\": %d, \"median_s\": %.6f, \"gbps\": %.3f, "
            "\"vs_limit\": %.3f, \"vs_float32\": %.3f, "
            "\"vs_float32_min\": %.3f, \"vs_float32_max\": %.3f}%s\n",
            sizes[k], med, 2.0 * (double)bytes / med * 1e-9,
            vl[k][reps / 2], vf[k][reps / 2], vf[k][0], vf[k][reps - 1],
            k + 1 < NSIZES ? "," : "");
  }
  fprintf(json, "  ],\n");
}

/* XORs every 16 bytes of `count` rows of `row_bytes` (a multiple of 64),
 * `step` bytes apart: a read of those lines and little else. */
static uint64_t read_rows(const char *p, int64_t count, int64_t row_bytes,
                          int64_t step) {
#if defined(__SSE2__)
  __m128i x0 = _mm_setzero_si128(), x1 = x0, x2 = x0, x3 = x0;
  for (int64_t r = 0; r < count; r++, p += step)
    for (const char *q = p; q < p + row_bytes; q += 64) {
      x0 = _mm_xor_si128(x0, _mm_loadu_si128((const __m128i *)(const void *)q));
      x1 = _mm_xor_si128(
          x1, _mm_loadu_si128((const __m128i *)(const void *)(q + 16)));
      x2 = _mm_xor_si128(
          x2, _mm_loadu_si128((const __m128i *)(const void *)(q + 32)));
      x3 = _mm_xor_si128(
          x3, _mm_loadu_si128((const __m128i *)(const void *)(q + 48)));
    }
  return (uint64_t)_mm_cvtsi128_si64(
      _mm_xor_si128(_mm_xor_si128(x0, x1), _mm_xor_si128(x2, x3)));
#else
  uint64_t acc = 0;
  for (int64_t r = 0; r < count; r++, p += step)
    for (int64_t o = 0; o < row_bytes; o += 8) {
      uint64_t v;
      memcpy(&v, p + o, sizeof v);
      acc ^= v;
    }
  return acc;
#endif
}

static volatile uint64_t read_sink;

/* What bounds the [::2, ::3] slice on one thread: it reads every line of
 * every second src row. Each rep times the slice, a read of just those
 * rows, a read of every row (twice the bytes) and a read of as many bytes
 * as the slice's rows in blocks of 64 rows (1 MiB) with gaps of as many
 * between them; the ratios show how close the slice is to its reads, and
 * what the gaps between rows cost the reads. */
static void slice_bound(FILE *json, const DLTensor *src, const DLTensor *dst,
                        const char *a, int64_t n) {
  double ts[MAX_REPS], th[MAX_REPS], ta[MAX_REPS], tb[MAX_REPS],
      rs[MAX_REPS], rh[MAX_REPS], rb[MAX_REPS];
  job j = {src, dst, NULL, NULL, 0};
  const int64_t line = n * (int64_t)sizeof(float); /* one src row */
  dlb_copy_set_threads(1);
  run_copy(&j);
  for (int r = 0; r < reps; r++) {
    ts[r] = time_once(run_copy, &j);
    double t0 = now();
    read_sink = read_rows(a, n / 2, line, 2 * line);
    th[r] = now() - t0;
    t0 = now();
    read_sink = read_rows(a, n, line, line);
    ta[r] = now() - t0;
    t0 = now();
    read_sink = read_rows(a, n / 128, 64 * line, 128 * line);
    tb[r] = now() - t0;
    rs[r] = th[r] / ts[r];
    rh[r] = th[r] / ta[r];
    rb[r] = th[r] / tb[r];
  }
  sort_samples(ts, reps);
  sort_samples(th, reps);
  sort_samples(ta, reps);
  sort_samples(tb, reps);
  sort_samples(rs, reps);
  sort_samples(rh, reps);
  sort_samples(rb, reps);
  printf("\nslice [::2, ::3] against its reads, one thread (median ms)\n");
  printf("  slice %.3f, reading every second row %.3f, reading every row "
         "%.3f, reading every second block of 64 rows %.3f;\n  slice at "
         "%.2f (%.2f-%.2f) of the read's speed; half the rows read in %.2f "
         "(%.2f-%.2f) of the time of all, in %.2f (%.2f-%.2f) of the time "
         "of the blocks\n",
         ts[reps / 2] * 1e3, th[reps / 2] * 1e3, ta[reps / 2] * 1e3,
         tb[reps / 2] * 1e3, rs[reps / 2], rs[0], rs[reps - 1],
         rh[reps / 2], rh[0], rh[reps - 1], rb[reps / 2], rb[0],
         rb[reps - 1]);
  fprintf(json,
          "  \"slice_bound\": {\"slice_s\": %.6f, \"read_half_s\": %.6f, "
          "\"read_all_s\": %.6f, \"read_blocks_s\": %.6f, "
          "\"slice_vs_read\": %.3f, \"half_vs_all\": %.3f, "
          "\"half_vs_blocks\": %.3f},\n",
          ts[reps / 2], th[reps / 2], ta[reps / 2], tb[reps / 2],
          rs[reps / 2], rh[reps / 2], rb[reps / 2]);
}

#if defined(__SSE2__)
/* Contiguous copies of growing size on one thread: memcpy against the
 * non-temporal copy of limit_methods written as the library's on this CPU
 * (limit_stream_like_library), median per-rep ratio of their times, and
 * dlb_copy against memcpy, to place DLB__STREAM_MIN
 * (src/copy/copy_internal.h). */
static void stream_sweep(FILE *json, float *a, float *b) {
  static const int64_t mib[] = {1, 2, 4, 6, 8, 10, 12, 16, 24, 32, 64};
  const size_t like = limit_stream_like_library();
  const limit_fn stream = limit_methods[like].fn;
  printf("\nstream sweep, one thread (median per-rep ratios of times: "
         ">1 means the first is slower; stream: \"%s\")\n",
         limit_methods[like].name);
  printf("%6s %14s %14s\n", "MiB", "memcpy/stream", "dlb/memcpy");
  fprintf(json, "  \"stream_sweep_method\": \"%s\",\n",
          limit_methods[like].name);
  fprintf(json, "  \"stream_sweep\": [\n");
  const size_t n = sizeof mib / sizeof mib[0];
  dlb_copy_set_threads(1);
  for (size_t k = 0; k < n; k++) {
    const size_t bytes = (size_t)mib[k] << 20;
    int64_t flat[1] = {(int64_t)(bytes / 4)};
    DLTensor cs = view(a, 1, flat, NULL), cd = view(b, 1, flat, NULL);
    job j = {&cs, &cd, b, a, bytes};
    double ms[MAX_REPS], dm[MAX_REPS];
    /* Each method runs twice and the second is timed: a non-temporal copy
     * leaves dst out of the cache, which would slow whatever runs next. */
    for (int r = 0; r < reps; r++) {
      run_memcpy(&j);
      double tm = time_once(run_memcpy, &j);
      run_copy(&j);
      double td = time_once(run_copy, &j);
      stream(b, a, bytes);
      double t0 = now();
      stream(b, a, bytes);
      double ts = now() - t0;
      ms[r] = tm / ts;
      dm[r] = td / tm;
    }
    sort_samples(ms, reps);
    sort_samples(dm, reps);
    printf("%6lld %8.2f (%.2f-%.2f) %8.2f (%.2f-%.2f)\n", (long long)mib[k],
           ms[reps / 2], ms[0], ms[reps - 1], dm[reps / 2], dm[0],
           dm[reps - 1]);
    fprintf(json,
            "    {\"mib\": %lld, \"memcpy_over_stream\": %.3f, "
            "\"dlb_over_memcpy\": %.3f}%s\n",
            (long long)mib[k], ms[reps / 2], dm[reps / 2],
            k + 1 < n ? "," : "");
  }
  fprintf(json, "  ],\n");
}
#endif

#if defined(__SSE2__)
/* What dst rows a power of two apart cost, on one thread: the transpose of
 * 4096^2 float32 with src's or dst's rows padded (by 64 bytes: every row
 * at other low 12 bits; by 512 and 1024: the rows at 8 or 4 of them),
 * each against the unpadded one of the same rep; then the non-temporal
 * writes of 64 MiB, 16 KiB rows, a run of each row at a time, the rows
 * 16 KiB or 16 KiB + 64 apart, against one sequential non-temporal write
 * of the same bytes. */
static void padding_probe(FILE *json, int64_t n) {
  static const struct {
    const char *name;
    int64_t src_pad, dst_pad; /* float32 units */
  } pads[] = {{"dst + 64 B", 0, 16},
              {"dst + 512 B", 0, 128},
              {"dst + 1 KiB", 0, 256},
              {"src + 64 B", 16, 0},
              {"both + 64 B", 16, 16}};
  enum { NPADS = sizeof pads / sizeof pads[0] };
  static const int64_t runs[] = {64, 128, 256};
  enum { NRUNS = sizeof runs / sizeof runs[0] };
  const int64_t wide = n + 256;
  const size_t bytes = (size_t)(n * wide) * sizeof(float);
  float *a = big_alloc(bytes), *b = big_alloc(bytes);
  int64_t sq[2] = {n, n}, plain[2] = {1, n};
  DLTensor s0 = view(a, 2, sq, plain), d0 = view(b, 2, sq, NULL);
  job j0 = {&s0, &d0, NULL, NULL, 0};
  int64_t sstr[NPADS][2], dstr[NPADS][2];
  DLTensor sp[NPADS], dp[NPADS];
  job jp[NPADS];
  for (int k = 0; k < NPADS; k++) {
    sstr[k][0] = 1;
    sstr[k][1] = n + pads[k].src_pad;
    dstr[k][0] = n + pads[k].dst_pad;
    dstr[k][1] = 1;
    sp[k] = view(a, 2, sq, sstr[k]);
    dp[k] = view(b, 2, sq, dstr[k]);
    jp[k] = (job){&sp[k], &dp[k], NULL, NULL, 0};
  }
  double tr[NPADS][MAX_REPS], w[2][NRUNS][MAX_REPS];
  const int64_t row_bytes = n * (int64_t)sizeof(float);
  const size_t wbytes = (size_t)(n * row_bytes);
  dlb_copy_set_threads(1);
  run_copy(&j0);
  for (int r = 0; r < reps; r++) {
    const double t0 = time_once(run_copy, &j0);
    for (int k = 0; k < NPADS; k++)
      tr[k][r] = t0 / time_once(run_copy, &jp[k]);
    double t = now();
    probe_column_writes((char *)b, 1, (int64_t)wbytes, 0, (int64_t)wbytes);
    const double seq = now() - t;
    for (int pad = 0; pad < 2; pad++)
      for (int q = 0; q < NRUNS; q++) {
        t = now();
        probe_column_writes((char *)b, n, row_bytes, row_bytes + 64 * pad,
                            runs[q]);
        w[pad][q][r] = seq / (now() - t);
      }
  }
  printf("\ntranspose 4096^2 f32 with padded rows, one thread (median "
         "(min-max) per-rep speed over the unpadded one)\n");
  fprintf(json, "  \"padding\": {\n");
  for (int k = 0; k < NPADS; k++) {
    sort_samples(tr[k], reps);
    printf("  %-12s %.2f (%.2f-%.2f)\n", pads[k].name, tr[k][reps / 2],
           tr[k][0], tr[k][reps - 1]);
    fprintf(json, "    \"%s\": %.3f,\n", pads[k].name, tr[k][reps / 2]);
  }
  printf("non-temporal writes of 64 MiB in 16 KiB rows, a run of every row "
         "at a time (median (min-max) speed over one sequential write)\n");
  for (int pad = 0; pad < 2; pad++) {
    printf("  rows %s apart:", pad ? "16 KiB + 64" : "16 KiB     ");
    for (int q = 0; q < NRUNS; q++) {
      sort_samples(w[pad][q], reps);
      printf("  run %3lld B %.2f (%.2f-%.2f)", (long long)runs[q],
             w[pad][q][reps / 2], w[pad][q][0], w[pad][q][reps - 1]);
      fprintf(json, "    \"writes %s run %lld\": %.3f%s\n",
              pad ? "padded" : "aligned", (long long)runs[q],
              w[pad][q][reps / 2], pad && q + 1 == NRUNS ? "" : ",");
    }
    printf("\n");
  }
  fprintf(json, "  },\n");
  free(a);
  free(b);
}
#endif

int main(int argc, char **argv) {
  const char *json_path = "bench_copy.json";
  int quick = 0, reps_given = 0;
  for (int i = 1; i < argc; i++) {
    char *end = NULL;
    if (strcmp(argv[i], "--quick") == 0) {
      quick = 1;
    } else if (strcmp(argv[i], "--reps") == 0 && i + 1 < argc) {
      /* Refused, not clamped: a run must do what it was asked. */
      const long n = strtol(argv[++i], &end, 10);
      if (end == argv[i] || *end != '\0' || n < 1 || n > MAX_REPS) {
        fprintf(stderr, "%s: --reps is '%s'; must be 1 to %d\n", argv[0],
                argv[i], MAX_REPS);
        return 2;
      }
      reps = (int)n;
      reps_given = 1;
    } else if (strcmp(argv[i], "--json") == 0 && i + 1 < argc) {
      json_path = argv[++i];
    } else {
      fprintf(stderr, "usage: %s [--quick] [--reps N] [--json PATH]\n",
              argv[0]);
      return 2;
    }
  }
  if (quick && !reps_given) reps = 5;
  dlb_copy_set_threads(0);
  const int all = dlb_copy_get_threads();
  limit_start(all);

  const int64_t n = 4096;
  const size_t bytes = (size_t)(n * n) * sizeof(float);
  float *a = big_alloc(bytes), *b = big_alloc(bytes);

  /* Contiguous: 64 MiB. */
  int64_t flat[1] = {n * n};
  DLTensor cs = view(a, 1, flat, NULL), cd = view(b, 1, flat, NULL);
  bench_case("contiguous 64 MiB", &cs, &cd, bytes, b, a, all);

  /* 2-D transpose of 4096 x 4096 float32. */
  int64_t sq[2] = {n, n}, tstr[2] = {1, n};
  DLTensor ts = view(a, 2, sq, tstr), td = view(b, 2, sq, NULL);
  bench_case("transpose 4096^2 f32", &ts, &td, bytes, b, a, all);

  /* (64, 64, 64, 64) float32 permuted (3, 1, 0, 2). */
  int64_t p4[4] = {64, 64, 64, 64};
  int64_t pstr[4] = {1, 64 * 64, 64 * 64 * 64, 64};
  DLTensor ps = view(a, 4, p4, pstr), pd = view(b, 4, p4, NULL);
  bench_case("permute (3,1,0,2) 64^4", &ps, &pd, bytes, b, a, all);

  /* The same permuted (2, 0, 1, 3): rows of 256 bytes, contiguous on
   * both sides. */
  int64_t rstr[4] = {64, 64 * 64 * 64, 64 * 64, 1};
  DLTensor rs = view(a, 4, p4, rstr), rd = view(b, 4, p4, NULL);
  bench_case("permute (2,0,1,3) 64^4", &rs, &rd, bytes, b, a, all);

  /* The slice [::2, ::3] of the 4096 x 4096 matrix. */
  int64_t sl[2] = {n / 2, (n + 2) / 3}, slstr[2] = {2 * n, 3};
  DLTensor ss = view(a, 2, sl, slstr), sd = view(b, 2, sl, NULL);
  bench_case("slice [::2, ::3]", &ss, &sd,
             (size_t)(sl[0] * sl[1]) * sizeof(float), b, a, all);

  FILE *json = fopen(json_path, "w");
  if (json == NULL) {
    perror(json_path);
    return 1;
  }
  printf("%-24s %7s %9s %9s %9s %8s %8s %8s %11s\n", "case", "threads",
         "median ms", "min ms", "max ms", "GB/s", "x memcpy", "x limit",
         "limit range");
  printf("(GB/s: bytes read + written over the median; x memcpy: median of\n"
         " per-rep ratios to the one-thread memcpy of the same rep; x limit:\n"
         " median (min-max) of per-rep ratios to the limit (the reference\n"
         " copy with the best median, on up to as many threads) in the same\n"
         " rep)\n");
  fprintf(json, "{\n  \"reps\": %d,\n  \"threads_all\": %d,\n", reps, all);
  fprintf(json, "  \"cases\": [\n");
  for (int i = 0; i < nrows; i++) {
    const row *w = &rows[i];
    char lim[16] = "-", range[32] = "";
    if (w->vs_limit > 0) snprintf(lim, sizeof lim, "%.2f", w->vs_limit);
    if (w->vs_limit > 0 && !w->is_limit)
      snprintf(range, sizeof range, "%.2f-%.2f", w->vs_limit_min,
               w->vs_limit_max);
    printf("%-24s %7s %9.3f %9.3f %9.3f %8.2f %8.2f %8s %11s\n", w->name,
           w->threads == 0 ? "-" : w->threads == 1 ? "1" : "all",
           w->median * 1e3, w->min * 1e3, w->max * 1e3,
           w->bytes / w->median * 1e-9, w->ratio, lim, range);
    fprintf(json,
            "    {\"name\": \"%s\", \"threads\": %d, \"bytes\": %.0f, "
            "\"median_s\": %.6f, \"min_s\": %.6f, \"max_s\": %.6f, "
            "\"gbps\": %.3f, \"vs_memcpy\": %.3f, \"vs_limit\": %.3f, "
            "\"vs_limit_min\": %.3f, \"vs_limit_max\": %.3f, "
            "\"reference\": %s}%s\n",
            w->name, w->threads == 0 ? 0 : w->threads == 1 ? 1 : all,
            w->bytes, w->median, w->min, w->max, w->bytes / w->median * 1e-9,
            w->ratio, w->vs_limit, w->vs_limit_min, w->vs_limit_max,
            w->is_limit ? "true" : "false", i + 1 < nrows ? "," : "");
  }
  fprintf(json, "  ],\n");
  sweep(json, all, a, b);
  size_sweep(json, a, b, bytes);
  slice_bound(json, &ss, &sd, (const char *)a, n);
#if defined(__SSE2__)
  stream_sweep(json, a, b);
  padding_probe(json, n);
#endif
  fprintf(json, "  \"memcpy_bytes\": %zu\n}\n", bytes);
  fclose(json);
  printf("\nwrote %s\n", json_path);
  limit_stop();
  free(a);
  free(b);
  return 0;
}
