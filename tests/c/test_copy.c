/* test_copy.c -- dlb_copy, dlb_tensor_copy and the copy thread pool. */
#include <dirent.h>
#include <limits.h>
#include <sched.h>
#include <signal.h>
#include <stdatomic.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "copy/copy_internal.h"
#include "test.h"

/* ---- helpers ---------------------------------------------------------- */

static uint64_t rng_next(uint64_t *state) {
  uint64_t z = (*state += 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

static int64_t rng_below(uint64_t *state, int64_t n) {
  return (int64_t)(rng_next(state) % (uint64_t)n);
}

static void fill_random(unsigned char *p, size_t n, uint64_t seed) {
  uint64_t st = seed;
  for (size_t i = 0; i < n; i++) p[i] = (unsigned char)rng_next(&st);
}

static DLDataType dt(uint8_t code, uint8_t bits, uint16_t lanes) {
  DLDataType t = {code, bits, lanes};
  return t;
}

static DLTensor tensor(void *data, DLDataType dtype, int32_t ndim,
                       int64_t *shape, int64_t *strides,
                       uint64_t byte_offset) {
  DLTensor t;
  memset(&t, 0, sizeof t);
  t.data = data;
  t.device.device_type = kDLCPU;
  t.ndim = ndim;
  t.dtype = dtype;
  t.shape = shape;
  t.strides = strides;
  t.byte_offset = byte_offset;
  return t;
}

/* Element offsets reached by strides: [lo, hi] (0, 0 with no elements). */
static void offset_range(int32_t ndim, const int64_t *shape,
                         const int64_t *strides, int64_t *lo, int64_t *hi) {
  *lo = *hi = 0;
  for (int32_t i = 0; i < ndim; i++) {
    if (shape[i] == 0) {
      *lo = *hi = 0;
      return;
    }
    int64_t reach = strides[i] * (shape[i] - 1);
    if (reach < 0)
      *lo += reach;
    else
      *hi += reach;
  }
}

/* The reference: for each index in row-major order, dst's element gets
 * src's element as it was before the copy (snapshot: the arena's original
 * bytes). Offsets are bytes from the arena's start. */
static void reference_copy(unsigned char *out, const unsigned char *snapshot,
                           int32_t ndim, const int64_t *shape,
                           const int64_t *sstr, int64_t soff,
                           const int64_t *dstr, int64_t doff,
                           size_t itemsize) {
  int64_t index[DLB_MAX_NDIM] = {0};
  for (int32_t i = 0; i < ndim; i++)
    if (shape[i] == 0) return;
  for (;;) {
    int64_t s = soff, d = doff;
    for (int32_t i = 0; i < ndim; i++) {
      s += index[i] * sstr[i] * (int64_t)itemsize;
      d += index[i] * dstr[i] * (int64_t)itemsize;
    }
    memcpy(out + d, snapshot + s, itemsize);
    int32_t j = ndim - 1;
    while (j >= 0 && ++index[j] == shape[j]) index[j--] = 0;
    if (j < 0) return;
  }
}

/* Compact row-major strides in elements. */
static void compact(int32_t ndim, const int64_t *shape, int64_t *strides) {
  int64_t s = 1;
  for (int32_t i = ndim - 1; i >= 0; i--) {
    strides[i] = s;
    s *= shape[i] > 0 ? shape[i] : 1;
  }
}

/* ---- the random test -------------------------------------------------- */

static const DLDataType random_types[] = {
    {kDLInt, 8, 1},     {kDLUInt, 16, 1},  {kDLFloat, 32, 1},
    {kDLFloat, 64, 1},  {kDLComplex, 128, 1}, {kDLBool, 8, 1},
    {kDLUInt, 8, 3},    {kDLInt, 16, 3},   {kDLFloat, 32, 3},
    {kDLFloat, 32, 4},  {kDLFloat, 64, 2}, {kDLUInt, 8, 5},
    {kDLFloat, 64, 3},  {kDLFloat, 16, 1}, {kDLInt, 8, 16},
};

/* A random layout over shape: dimensions in a random order, with gaps,
 * negative strides and (where allowed) zero or repeated strides. */
static void random_layout(uint64_t *rng, int32_t ndim, const int64_t *shape,
                          int64_t *strides, int allow_alias) {
  int32_t perm[DLB_MAX_NDIM];
  for (int32_t i = 0; i < ndim; i++) perm[i] = i;
  if (rng_below(rng, 3) != 0)
    for (int32_t i = ndim - 1; i > 0; i--) {
      int32_t j = (int32_t)rng_below(rng, i + 1);
      int32_t t = perm[i];
      perm[i] = perm[j];
      perm[j] = t;
    }
  int64_t s = 1;
  for (int32_t k = ndim - 1; k >= 0; k--) {
    int32_t d = perm[k];
    strides[d] = rng_below(rng, 4) == 0 ? -s : s;
    s *= shape[d] > 0 ? shape[d] : 1;
    if (rng_below(rng, 4) == 0) s += 1 + rng_below(rng, 3);
  }
  if (allow_alias && ndim > 0 && rng_below(rng, 8) == 0) {
    int32_t d = (int32_t)rng_below(rng, ndim);
    strides[d] = rng_below(rng, 2) == 0 ? 0 : strides[perm[ndim - 1]];
  }
}

typedef struct {
  int32_t ndim;
  int64_t shape[8];
  DLDataType dtype;
} random_case;

static void random_shape(uint64_t *rng, random_case *c) {
  c->ndim = (int32_t)rng_below(rng, 7);
  int big = c->ndim > 0 && rng_below(rng, 3) == 0;
  for (int32_t i = 0; i < c->ndim; i++) {
    int64_t r = rng_below(rng, 12);
    c->shape[i] = r == 0 && rng_below(rng, 3) == 0 ? 0 : r < 3 ? 1 : r;
  }
  if (big) c->shape[rng_below(rng, c->ndim)] = 16 + rng_below(rng, 70);
  /* Keep each case small. */
  for (;;) {
    int64_t n = 1;
    for (int32_t i = 0; i < c->ndim; i++) n *= c->shape[i];
    if (n <= 30000) break;
    int32_t i = (int32_t)rng_below(rng, c->ndim);
    if (c->shape[i] > 1) c->shape[i] /= 2;
  }
}

/* One case; returns 0 when dlb_copy matched the reference. */
static int run_random_case(uint64_t *rng, int verbose) {
  random_case c;
  random_shape(rng, &c);
  c.dtype = random_types[rng_below(
      rng, (int64_t)(sizeof random_types / sizeof random_types[0]))];
  const size_t es = dlb_dtype_itemsize(c.dtype);
  int64_t sstr[8], dstr[8];
  /* NULL strides (compact, as before DLPack 1.2) one time in ten. */
  const int null_src = rng_below(rng, 10) == 0;
  if (null_src)
    compact(c.ndim, c.shape, sstr);
  else
    random_layout(rng, c.ndim, c.shape, sstr, 1);
  random_layout(rng, c.ndim, c.shape, dstr, 1);
  int64_t slo, shi, dlo, dhi;
  offset_range(c.ndim, c.shape, sstr, &slo, &shi);
  offset_range(c.ndim, c.shape, dstr, &dlo, &dhi);
  int64_t sbytes = (shi - slo + 1) * (int64_t)es;
  int64_t dbytes = (dhi - dlo + 1) * (int64_t)es;
  /* Regions: src at sstart, dst apart from it or, one time in six, in the
   * same bytes; each shifted off any alignment. */
  int64_t sstart = rng_below(rng, 16);
  int64_t dstart = rng_below(rng, 6) == 0
                       ? rng_below(rng, sbytes + 1)
                       : sstart + sbytes + rng_below(rng, 16);
  int64_t end = sstart + sbytes > dstart + dbytes ? sstart + sbytes
                                                  : dstart + dbytes;
  size_t arena_bytes = (size_t)end + 16;
  unsigned char *arena = malloc(arena_bytes);
  unsigned char *snap = malloc(arena_bytes);
  unsigned char *want = malloc(arena_bytes);
  CHECK(arena != NULL && snap != NULL && want != NULL);
  fill_random(arena, arena_bytes, rng_next(rng));
  memcpy(snap, arena, arena_bytes);
  memcpy(want, arena, arena_bytes);
  int64_t soff = sstart - slo * (int64_t)es, doff = dstart - dlo * (int64_t)es;
  reference_copy(want, snap, c.ndim, c.shape, sstr, soff, dstr, doff, es);
  DLTensor src = tensor(arena, c.dtype, c.ndim, c.shape,
                        null_src ? NULL : sstr, (uint64_t)soff);
  DLTensor dst = tensor(arena, c.dtype, c.ndim, c.shape, dstr,
                        (uint64_t)doff);
  dlb_status st = dlb_copy(&src, &dst);
  int bad = st != DLB_OK || memcmp(arena, want, arena_bytes) != 0;
  if (bad && verbose) {
    fprintf(stderr, "  status %s (%s); itemsize %zu ndim %d shape",
            dlb_status_name(st), dlb_last_error(), es, (int)c.ndim);
    for (int32_t i = 0; i < c.ndim; i++)
      fprintf(stderr, " %lld", (long long)c.shape[i]);
    fprintf(stderr, "; src strides");
    for (int32_t i = 0; i < c.ndim; i++)
      fprintf(stderr, " %lld", (long long)sstr[i]);
    fprintf(stderr, "; dst strides");
    for (int32_t i = 0; i < c.ndim; i++)
      fprintf(stderr, " %lld", (long long)dstr[i]);
    fprintf(stderr, "; src at %lld, dst at %lld\n", (long long)sstart,
            (long long)dstart);
  }
  free(arena);
  free(snap);
  free(want);
  return bad;
}

static void random_layouts(uint64_t seed, int cases) {
  uint64_t rng = seed;
  int failed = 0;
  for (int i = 0; i < cases; i++) {
    if (run_random_case(&rng, failed < 5)) {
      if (failed < 5) fprintf(stderr, "  case %d failed\n", i);
      failed++;
    }
  }
  CHECK_EQ_INT(failed, 0);
}

DLB_TEST(copy_random_layouts_match_reference) { random_layouts(20260114, 1500); }

/* The SSE2 kernels, which x86-64 CPUs without AVX-512 use. */
DLB_TEST(copy_random_layouts_match_reference_sse2) {
  dlb__copy_cap_isa(DLB__ISA_V128);
  random_layouts(20260116, 1500);
  dlb__copy_cap_isa(-1);
}

/* The AVX2 kernels, which x86-64 CPUs with AVX2 but not AVX-512 use. */
DLB_TEST(copy_random_layouts_match_reference_avx2) {
  dlb__copy_cap_isa(DLB__ISA_AVX2);
  random_layouts(20260117, 1500);
  dlb__copy_cap_isa(-1);
}

/* The portable kernels, which builds without SSE2 (aarch64) use. */
DLB_TEST(copy_random_layouts_match_reference_portable) {
  dlb__copy_cap_isa(DLB__ISA_PORTABLE);
  random_layouts(20260115, 1500);
}

/* ---- chosen layouts --------------------------------------------------- */

/* Fills n elements of es bytes with the pattern 1, 2, 3 ... so that a
 * misplaced element shows. */
static void fill_pattern(unsigned char *p, int64_t n, size_t es) {
  for (int64_t i = 0; i < n; i++)
    for (size_t b = 0; b < es; b++)
      p[(size_t)i * es + b] = (unsigned char)((uint64_t)(i + 1) * 131 + b * 7);
}

/* Transposes an nr x nc compact matrix of each unit size, with ragged edges,
 * on both the register path (unit steps) and the plain path (src columns
 * two units apart), and checks every element. */
static void transposes_every_unit_size(void) {
  const DLDataType types[] = {dt(kDLUInt, 8, 1), dt(kDLUInt, 16, 1),
                              dt(kDLUInt, 32, 1), dt(kDLUInt, 64, 1),
                              dt(kDLComplex, 128, 1), dt(kDLFloat, 32, 3)};
  const int64_t nr = 67, nc = 133;
  for (size_t k = 0; k < sizeof types / sizeof types[0]; k++) {
    for (int64_t gap = 1; gap <= 2; gap++) {
      size_t es = dlb_dtype_itemsize(types[k]);
      unsigned char *a = malloc((size_t)(nr * nc * gap) * es);
      unsigned char *b = malloc((size_t)(nr * nc) * es);
      CHECK(a != NULL && b != NULL);
      fill_pattern(a, nr * nc * gap, es);
      memset(b, 0, (size_t)(nr * nc) * es);
      /* b (nc x nr, compact) = transpose of a (nr x nc, columns gap apart). */
      int64_t shape[2] = {nc, nr};
      int64_t sstr[2] = {gap, nc * gap};
      DLTensor src = tensor(a, types[k], 2, shape, sstr, 0);
      DLTensor dst = tensor(b, types[k], 2, shape, NULL, 0);
      CHECK_OK(dlb_copy(&src, &dst));
      for (int64_t i = 0; i < nc; i++)
        for (int64_t j = 0; j < nr; j++)
          if (memcmp(b + (size_t)(i * nr + j) * es,
                     a + (size_t)(j * nc * gap + i * gap) * es, es) != 0)
            dlb_test_failed(__FILE__, __LINE__,
                            "itemsize %zu gap %lld: b[%lld][%lld] wrong", es,
                            (long long)gap, (long long)i, (long long)j);
      free(a);
      free(b);
    }
  }
}

DLB_TEST(copy_transposes_every_unit_size) { transposes_every_unit_size(); }

DLB_TEST(copy_transposes_every_unit_size_sse2) {
  dlb__copy_cap_isa(DLB__ISA_V128);
  transposes_every_unit_size();
  dlb__copy_cap_isa(-1);
}

DLB_TEST(copy_transposes_every_unit_size_avx2) {
  dlb__copy_cap_isa(DLB__ISA_AVX2);
  transposes_every_unit_size();
  dlb__copy_cap_isa(-1);
}

DLB_TEST(copy_transposes_every_unit_size_portable) {
  dlb__copy_cap_isa(DLB__ISA_PORTABLE);
  transposes_every_unit_size();
}

DLB_TEST(copy_zero_stride_dst_keeps_last_row_major_value) {
  int32_t a[12], b[4] = {0, 0, 0, 0};
  for (int i = 0; i < 12; i++) a[i] = i + 1;
  int64_t shape[2] = {3, 4};
  int64_t dstr[2] = {0, 1};
  DLTensor src = tensor(a, dt(kDLInt, 32, 1), 2, shape, NULL, 0);
  DLTensor dst = tensor(b, dt(kDLInt, 32, 1), 2, shape, dstr, 0);
  CHECK_OK(dlb_copy(&src, &dst));
  for (int i = 0; i < 4; i++) CHECK_EQ_INT(b[i], a[8 + i]);
  /* Every element to one place: the last one wins. */
  int64_t all0[2] = {0, 0};
  dst.strides = all0;
  CHECK_OK(dlb_copy(&src, &dst));
  CHECK_EQ_INT(b[0], 12);
}

/* However large, such a copy runs on the calling thread, in row-major
 * order: 4 MiB of rows into one row of dst (and into every second row,
 * the rows overlapping by half), with the threads offered. */
DLB_TEST(copy_large_zero_stride_dst_stays_on_one_thread) {
  const int64_t rows = 16384, cols = 256;
  uint8_t *a = malloc((size_t)(rows * cols));
  uint8_t *b = calloc(1, (size_t)(rows * cols));
  CHECK(a != NULL && b != NULL);
  fill_random(a, (size_t)(rows * cols), 3);
  dlb_copy_set_threads(2);
  int64_t shape[2] = {rows, cols}, one_row[2] = {0, 1}, half[2] = {128, 1};
  DLTensor src = tensor(a, dt(kDLUInt, 8, 1), 2, shape, NULL, 0);
  DLTensor dst = tensor(b, dt(kDLUInt, 8, 1), 2, shape, one_row, 0);
  CHECK_OK(dlb_copy(&src, &dst));
  CHECK_EQ_INT(dlb__copy_last_threads(), 1);
  CHECK(memcmp(b, a + (rows - 1) * cols, (size_t)cols) == 0);
  dst.strides = half;
  CHECK_OK(dlb_copy(&src, &dst));
  CHECK_EQ_INT(dlb__copy_last_threads(), 1);
  /* Each 128 bytes of dst hold the second half of the row written to it
   * first, then the first half of the next: the next one wins. */
  for (int64_t r = 0; r < rows; r++)
    if (memcmp(b + r * 128, a + r * cols, 128) != 0)
      dlb_test_failed(__FILE__, __LINE__, "dst bytes at %lld",
                      (long long)(r * 128));
  CHECK(memcmp(b + rows * 128, a + (rows - 1) * cols + 128, 128) == 0);
  dlb_copy_set_threads(0);
  free(a);
  free(b);
}

DLB_TEST(copy_zero_stride_src_broadcasts) {
  double v[3] = {1.5, -2.5, 3.5};
  double out[4 * 3];
  int64_t shape[2] = {4, 3};
  int64_t sstr[2] = {0, 1};
  DLTensor src = tensor(v, dt(kDLFloat, 64, 1), 2, shape, sstr, 0);
  DLTensor dst = tensor(out, dt(kDLFloat, 64, 1), 2, shape, NULL, 0);
  CHECK_OK(dlb_copy(&src, &dst));
  for (int i = 0; i < 12; i++) CHECK(out[i] == v[i % 3]);
}

DLB_TEST(copy_negative_strides_reverse) {
  uint16_t a[2 * 5], b[2 * 5];
  for (int i = 0; i < 10; i++) a[i] = (uint16_t)(100 + i);
  int64_t shape[2] = {2, 5};
  int64_t sstr[2] = {-5, -1};
  /* The first element is the last of the buffer. */
  DLTensor src = tensor(a, dt(kDLUInt, 16, 1), 2, shape, sstr, 9 * 2);
  DLTensor dst = tensor(b, dt(kDLUInt, 16, 1), 2, shape, NULL, 0);
  CHECK_OK(dlb_copy(&src, &dst));
  for (int i = 0; i < 10; i++) CHECK_EQ_INT(b[i], a[9 - i]);
}

DLB_TEST(copy_zero_dims_and_empty_tensors) {
  float x = 4.25f, y = 0.0f;
  DLTensor src = tensor(&x, dt(kDLFloat, 32, 1), 0, NULL, NULL, 0);
  DLTensor dst = tensor(&y, dt(kDLFloat, 32, 1), 0, NULL, NULL, 0);
  CHECK_OK(dlb_copy(&src, &dst));
  CHECK(y == 4.25f);
  /* No elements: data may be NULL, nothing is touched. */
  int64_t shape[3] = {4, 0, 7};
  DLTensor e1 = tensor(NULL, dt(kDLFloat, 32, 1), 3, shape, NULL, 0);
  DLTensor e2 = tensor(NULL, dt(kDLFloat, 32, 1), 3, shape, NULL, 0);
  CHECK_OK(dlb_copy(&e1, &e2));
  /* Huge extents around a zero, with strides that no element uses: a copy
   * of nothing, packed or not, and a compact copy of nothing. */
  int64_t huge[3] = {INT64_MAX, 0, INT64_MAX};
  int64_t wild[3] = {1, INT64_MAX, -1};
  const DLDataType types[2] = {dt(kDLFloat, 32, 1), dt(kDLInt, 4, 1)};
  for (int i = 0; i < 2; i++) {
    DLTensor h1 = tensor(NULL, types[i], 3, huge, wild, 0);
    DLTensor h2 = tensor(NULL, types[i], 3, huge, NULL, 0);
    CHECK_OK(dlb_copy(&h1, &h2));
    CHECK_OK(dlb_copy(&h2, &h1));
    DLManagedTensorVersioned *c = NULL;
    CHECK_OK(dlb_tensor_copy(&h1, (DLDevice){kDLCPU, 0}, &c));
    CHECK_EQ_INT(c->dl_tensor.ndim, 3);
    CHECK(c->dl_tensor.shape[0] == INT64_MAX && c->dl_tensor.shape[1] == 0);
    dlb_tensor_release(c);
  }
  /* A 0-d packed element: the other bits of its byte stay. */
  unsigned char p = 0x3a, q = 0xc5;
  DLTensor p1 = tensor(&p, dt(kDLInt, 4, 1), 0, NULL, NULL, 0);
  DLTensor q1 = tensor(&q, dt(kDLInt, 4, 1), 0, NULL, NULL, 0);
  CHECK_OK(dlb_copy(&p1, &q1));
  CHECK_EQ_INT(q, 0xca);
  CHECK_EQ_INT(p, 0x3a);
}

/* ---- overlap ---------------------------------------------------------- */

DLB_TEST(copy_overlapping_shifts_behave_like_memmove) {
  for (int dir = 0; dir < 2; dir++) {
    int64_t buf[101], want[101];
    for (int i = 0; i < 101; i++) buf[i] = want[i] = i * 3;
    int64_t shape[1] = {100};
    /* dir 0: dst one element above src, dir 1: one below. */
    DLTensor src = tensor(buf, dt(kDLInt, 64, 1), 1, shape, NULL,
                          dir == 0 ? 0 : 8);
    DLTensor dst = tensor(buf, dt(kDLInt, 64, 1), 1, shape, NULL,
                          dir == 0 ? 8 : 0);
    memmove(want + (dir == 0 ? 1 : 0), want + (dir == 0 ? 0 : 1),
            100 * sizeof(int64_t));
    CHECK_OK(dlb_copy(&src, &dst));
    CHECK(memcmp(buf, want, sizeof buf) == 0);
  }
}

DLB_TEST(copy_in_place_transpose_uses_a_snapshot) {
  enum { N = 40 };
  static float m[N * N], orig[N * N];
  for (int i = 0; i < N * N; i++) m[i] = orig[i] = (float)i;
  int64_t shape[2] = {N, N};
  int64_t tstr[2] = {1, N};
  DLTensor src = tensor(m, dt(kDLFloat, 32, 1), 2, shape, tstr, 0);
  DLTensor dst = tensor(m, dt(kDLFloat, 32, 1), 2, shape, NULL, 0);
  CHECK_OK(dlb_copy(&src, &dst));
  for (int i = 0; i < N; i++)
    for (int j = 0; j < N; j++) CHECK(m[i * N + j] == orig[j * N + i]);
}

/* Interleaved views share a byte range without sharing an element: they
 * take the temporary too, and the bytes between stay. */
DLB_TEST(copy_interleaved_views_of_one_buffer) {
  uint8_t buf[64], want[64];
  for (int i = 0; i < 64; i++) buf[i] = want[i] = (uint8_t)i;
  int64_t shape[1] = {32};
  int64_t str[1] = {2};
  DLTensor even = tensor(buf, dt(kDLUInt, 8, 1), 1, shape, str, 0);
  DLTensor odd = tensor(buf, dt(kDLUInt, 8, 1), 1, shape, str, 1);
  for (int i = 0; i < 32; i++) want[2 * i + 1] = want[2 * i];
  CHECK_OK(dlb_copy(&even, &odd));
  CHECK(memcmp(buf, want, sizeof buf) == 0);
}

static dlb_status overlap_body(void *ctx) {
  (void)ctx;
  int32_t buf[65];
  for (int i = 0; i < 65; i++) buf[i] = i;
  int64_t shape[1] = {64};
  DLTensor src = tensor(buf, dt(kDLInt, 32, 1), 1, shape, NULL, 0);
  DLTensor dst = tensor(buf, dt(kDLInt, 32, 1), 1, shape, NULL, 4);
  dlb_status st = dlb_copy(&src, &dst);
  if (st == DLB_OK)
    for (int i = 1; i < 65; i++) CHECK_EQ_INT(buf[i], i - 1);
  else
    for (int i = 0; i < 65; i++) CHECK_EQ_INT(buf[i], i);
  return st;
}

DLB_TEST(copy_overlap_survives_allocation_failure) {
  CHECK_EQ_INT(dlb_test_oom_loop(overlap_body, NULL), 1);
}

DLB_TEST(copy_onto_itself_changes_nothing_and_allocates_nothing) {
  int32_t buf[24];
  for (int i = 0; i < 24; i++) buf[i] = i;
  int64_t shape[2] = {4, 3};
  int64_t str[2] = {1, 4};
  DLTensor t = tensor(buf, dt(kDLInt, 32, 1), 2, shape, str, 0);
  dlb_test_failalloc_install(0);
  CHECK_OK(dlb_copy(&t, &t));
  CHECK_EQ_INT(dlb_test_failalloc_calls(), 0);
  /* NULL strides are the compact ones: the same elements as explicit
   * compact strides, on either side. Entries past ndim in the arrays are
   * not the tensor's and are never read. */
  int64_t wide[3] = {4, 3, 7}, compact_str[3] = {3, 1, 5};
  DLTensor c = tensor(buf, dt(kDLInt, 32, 1), 2, wide, compact_str, 0);
  DLTensor n = tensor(buf, dt(kDLInt, 32, 1), 2, wide, NULL, 0);
  CHECK_OK(dlb_copy(&n, &c));
  CHECK_OK(dlb_copy(&c, &n));
  CHECK_EQ_INT(dlb_test_failalloc_calls(), 0);
  dlb_test_failalloc_remove();
  for (int i = 0; i < 24; i++) CHECK_EQ_INT(buf[i], i);
  /* Strides of 1 along both dimensions name other elements than the
   * compact ones from the same first byte: that is a copy (from a
   * snapshot), element (i, j) of dst at i + j getting src's 3 i + j, the
   * last written in row-major order winning. */
  int64_t ones[2] = {1, 1};
  DLTensor diag = tensor(buf, dt(kDLInt, 32, 1), 2, shape, ones, 0);
  CHECK_OK(dlb_copy(&n, &diag));
  static const int32_t want[6] = {0, 3, 6, 9, 10, 11};
  for (int i = 0; i < 6; i++) CHECK_EQ_INT(buf[i], want[i]);
  for (int i = 6; i < 24; i++) CHECK_EQ_INT(buf[i], i);
}

/* ---- errors ----------------------------------------------------------- */

DLB_TEST(copy_refuses_bad_arguments_and_leaves_dst_alone) {
  float a[6] = {1, 2, 3, 4, 5, 6}, b[6] = {0};
  int64_t shape[2] = {2, 3}, other[2] = {3, 2}, longer[3] = {2, 3, 1};
  DLTensor src = tensor(a, dt(kDLFloat, 32, 1), 2, shape, NULL, 0);
  DLTensor dst = tensor(b, dt(kDLFloat, 32, 1), 2, shape, NULL, 0);

  CHECK_STATUS(dlb_copy(NULL, &dst), DLB_E_INVAL);
  CHECK_ERROR_MENTIONS("src");
  CHECK_STATUS(dlb_copy(&src, NULL), DLB_E_INVAL);
  CHECK_ERROR_MENTIONS("dst");

  DLTensor bad = dst;
  bad.dtype = dt(kDLInt, 32, 1);
  CHECK_STATUS(dlb_copy(&src, &bad), DLB_E_DTYPE);
  CHECK_STR(dlb_last_error(),
            "src->dtype is float32, dst->dtype is int32; copies keep the "
            "type");
  bad = dst;
  bad.shape = other;
  CHECK_STATUS(dlb_copy(&src, &bad), DLB_E_LAYOUT);
  CHECK_STR(dlb_last_error(), "src->shape[0] is 2, dst->shape[0] is 3");
  bad = dst;
  bad.ndim = 3;
  bad.shape = longer;
  CHECK_STATUS(dlb_copy(&src, &bad), DLB_E_LAYOUT);
  CHECK_STR(dlb_last_error(), "src->ndim is 2, dst->ndim is 3");

  bad = dst;
  bad.device.device_type = kDLCUDA;
  CHECK_STATUS(dlb_copy(&src, &bad), DLB_E_DEVICE);
  CHECK_ERROR_MENTIONS("dst->device");
  bad = src;
  bad.device.device_type = kDLCUDA;
  CHECK_STATUS(dlb_copy(&bad, &dst), DLB_E_DEVICE);
  CHECK_ERROR_MENTIONS("src->device");

  int64_t negative[2] = {2, -3};
  bad = src;
  bad.shape = negative;
  CHECK_STATUS(dlb_copy(&bad, &dst), DLB_E_LAYOUT);
  CHECK_ERROR_MENTIONS("src: ");
  bad = dst;
  bad.data = NULL;
  CHECK_STATUS(dlb_copy(&src, &bad), DLB_E_INVAL);
  CHECK_ERROR_MENTIONS("dst: ");
  bad = dst;
  bad.dtype.lanes = 0;
  CHECK_STATUS(dlb_copy(&src, &bad), DLB_E_DTYPE);

  for (int i = 0; i < 6; i++) CHECK(b[i] == 0);
}

/* Shapes that differ in their last dimension only are refused as those
 * that differ in the first are, and dst stays as it was. */
DLB_TEST(copy_refuses_shapes_differing_in_the_last_dimension) {
  float a[6] = {1, 2, 3, 4, 5, 6}, b[6] = {0};
  int64_t shape[2] = {2, 3}, narrower[2] = {2, 2};
  DLTensor src = tensor(a, dt(kDLFloat, 32, 1), 2, shape, NULL, 0);
  DLTensor dst = tensor(b, dt(kDLFloat, 32, 1), 2, narrower, NULL, 0);
  CHECK_STATUS(dlb_copy(&src, &dst), DLB_E_LAYOUT);
  CHECK_STR(dlb_last_error(), "src->shape[1] is 3, dst->shape[1] is 2");
  CHECK_STATUS(dlb_copy(&dst, &src), DLB_E_LAYOUT);
  CHECK_STR(dlb_last_error(), "src->shape[1] is 2, dst->shape[1] is 3");
  for (int i = 0; i < 6; i++) CHECK(b[i] == 0);
}

/* Strides of extent-1 dimensions are never used, whatever they are: the
 * largest and smallest int64 values on either side copy as 0 would (no
 * product of them is formed), and src and dst that differ only there
 * name the same elements, so a copy between them allocates nothing and
 * changes nothing. */
DLB_TEST(copy_ignores_strides_of_extent_1_dimensions) {
  int32_t a[6] = {1, 2, 3, 4, 5, 6}, b[6] = {0};
  int64_t shape[3] = {2, 1, 3};
  int64_t high[3] = {3, INT64_MAX, 1}, low[3] = {3, INT64_MIN, 1};
  DLTensor src = tensor(a, dt(kDLInt, 32, 1), 3, shape, high, 0);
  DLTensor dst = tensor(b, dt(kDLInt, 32, 1), 3, shape, low, 0);
  CHECK_OK(dlb_copy(&src, &dst));
  for (int i = 0; i < 6; i++) CHECK_EQ_INT(b[i], a[i]);
  dlb_test_failalloc_install(0);
  CHECK_OK(dlb_copy(&src, &src));
  DLTensor other = tensor(a, dt(kDLInt, 32, 1), 3, shape, low, 0);
  CHECK_OK(dlb_copy(&src, &other));
  CHECK_EQ_INT(dlb_test_failalloc_calls(), 0);
  dlb_test_failalloc_remove();
  for (int i = 0; i < 6; i++) CHECK_EQ_INT(a[i], i + 1);
}

/* Host memory of other kinds is CPU memory to the copy engine. */
DLB_TEST(copy_reads_and_writes_host_kinds) {
  int8_t a[4] = {1, 2, 3, 4}, b[4] = {0};
  int64_t shape[1] = {4};
  DLTensor src = tensor(a, dt(kDLInt, 8, 1), 1, shape, NULL, 0);
  DLTensor dst = tensor(b, dt(kDLInt, 8, 1), 1, shape, NULL, 0);
  src.device.device_type = kDLCUDAHost;
  dst.device.device_type = kDLCUDAManaged;
  CHECK_OK(dlb_copy(&src, &dst));
  CHECK(memcmp(a, b, 4) == 0);
}

/* ---- sub-byte --------------------------------------------------------- */

DLB_TEST(copy_packed_subbyte_compact_keeps_bits_beyond_the_end) {
  /* Five int4 elements: 20 bits, so the third byte is half used. */
  unsigned char a[4] = {0x21, 0x43, 0xf5, 0xee};
  unsigned char b[4] = {0x00, 0x00, 0xa0, 0x77};
  int64_t shape[1] = {5};
  DLTensor src = tensor(a, dt(kDLInt, 4, 1), 1, shape, NULL, 0);
  DLTensor dst = tensor(b, dt(kDLInt, 4, 1), 1, shape, NULL, 0);
  CHECK_OK(dlb_copy(&src, &dst));
  CHECK_EQ_INT(b[0], 0x21);
  CHECK_EQ_INT(b[1], 0x43);
  CHECK_EQ_INT(b[2], 0xa5);
  CHECK_EQ_INT(b[3], 0x77);

  /* Thirteen 1-bit elements at byte_offset 1, into a 2-D compact dst. */
  unsigned char c[3] = {0xff, 0xb6, 0x6d}, d[3] = {0x11, 0x00, 0xe0};
  int64_t flat[1] = {13}, grid[2] = {1, 13};
  DLTensor bits = tensor(c, dt(kDLUInt, 1, 1), 1, flat, NULL, 1);
  DLTensor out = tensor(d, dt(kDLUInt, 1, 1), 2, grid, NULL, 1);
  CHECK_STATUS(dlb_copy(&bits, &out), DLB_E_LAYOUT);
  out.ndim = 1;
  out.shape = flat;
  CHECK_OK(dlb_copy(&bits, &out));
  CHECK_EQ_INT(d[0], 0x11);
  CHECK_EQ_INT(d[1], 0xb6);
  CHECK_EQ_INT(d[2], 0xe0 | 0x0d);
}

DLB_TEST(copy_packed_subbyte_strided_is_unsupported) {
  unsigned char a[8] = {0}, b[8] = {0};
  int64_t shape[2] = {2, 4};
  int64_t str[2] = {1, 2};
  DLTensor src = tensor(a, dt(kDLInt, 4, 1), 2, shape, str, 0);
  DLTensor dst = tensor(b, dt(kDLInt, 4, 1), 2, shape, NULL, 0);
  CHECK_STATUS(dlb_copy(&src, &dst), DLB_E_UNSUPPORTED);
  CHECK_STR(dlb_last_error(),
            "src->strides[1] is 2, not 1: packed 4-bit elements are copied "
            "only between compact tensors");
  CHECK_STATUS(dlb_copy(&dst, &src), DLB_E_UNSUPPORTED);
  CHECK_STR(dlb_last_error(),
            "dst->strides[1] is 2, not 1: packed 4-bit elements are copied "
            "only between compact tensors");
  /* The innermost stride that is not the compact one is named; extent-1
   * dimensions may have any stride. */
  int64_t shape3[3] = {3, 1, 4};
  int64_t outer[3] = {5, 99, 1};
  src = tensor(a, dt(kDLUInt, 2, 1), 3, shape3, outer, 0);
  dst = tensor(b, dt(kDLUInt, 2, 1), 3, shape3, NULL, 0);
  CHECK_STATUS(dlb_copy(&src, &dst), DLB_E_UNSUPPORTED);
  CHECK_STR(dlb_last_error(),
            "src->strides[0] is 5, not 4: packed 2-bit elements are copied "
            "only between compact tensors");
  outer[0] = 4;
  CHECK_OK(dlb_copy(&src, &dst));
}

/* ---- threads ---------------------------------------------------------- */

DLB_TEST(copy_thread_setting) {
  cpu_set_t set;
  CHECK(sched_getaffinity(0, sizeof set, &set) == 0);
  int cpus = CPU_COUNT(&set);
  CHECK_EQ_INT(dlb_copy_get_threads(), cpus > 64 ? 64 : cpus);
  dlb_copy_set_threads(3);
  CHECK_EQ_INT(dlb_copy_get_threads(), 3);
  dlb_copy_set_threads(1000);
  CHECK_EQ_INT(dlb_copy_get_threads(), 64);
  dlb_copy_set_threads(-2);
  CHECK_EQ_INT(dlb_copy_get_threads(), cpus > 64 ? 64 : cpus);
  dlb_copy_set_threads(1);
  CHECK_EQ_INT(dlb_copy_get_threads(), 1);
  dlb_copy_set_threads(0);
  CHECK_EQ_INT(dlb_copy_get_threads(), cpus > 64 ? 64 : cpus);
  dlb_copy_set_threads(64);
  CHECK_EQ_INT(dlb_copy_get_threads(), 64);
  dlb_copy_set_threads(65);
  CHECK_EQ_INT(dlb_copy_get_threads(), 64);
  dlb_copy_set_threads(INT_MIN);
  CHECK_EQ_INT(dlb_copy_get_threads(), cpus > 64 ? 64 : cpus);
}

/* The default follows the CPUs this process may run on, one of them
 * too (in a child, pinned to the first CPU it had). */
DLB_TEST(copy_threads_follow_an_affinity_of_one_cpu) {
  cpu_set_t set;
  CHECK(sched_getaffinity(0, sizeof set, &set) == 0);
  int first = 0;
  while (!CPU_ISSET(first, &set)) first++;
  pid_t pid = fork();
  CHECK(pid >= 0);
  if (pid == 0) {
    alarm(20);
    cpu_set_t one;
    CPU_ZERO(&one);
    CPU_SET(first, &one);
    dlb_copy_set_threads(0);
    _exit(sched_setaffinity(0, sizeof one, &one) == 0 &&
                  dlb_copy_get_threads() == 1
              ? 0
              : 3);
  }
  int st = 0;
  CHECK(waitpid(pid, &st, 0) == pid);
  CHECK(WIFEXITED(st));
  CHECK_EQ_INT(WEXITSTATUS(st), 0);
}

/* A permutation of a 4-D tensor large enough for the pool, with threads
 * forced: every element checked, and more than one thread took part. */
static void big_permute_check(int threads, int expect_many) {
  const int64_t n = 32;
  const int64_t total = n * n * n * n;
  float *a = malloc((size_t)total * sizeof(float));
  float *b = malloc((size_t)total * sizeof(float));
  CHECK(a != NULL && b != NULL);
  for (int64_t i = 0; i < total; i++) a[i] = (float)i;
  /* b[i][j][k][l] = a[l][j][i][k]: axes (3, 1, 0, 2). */
  int64_t shape[4] = {n, n, n, n};
  int64_t sstr[4] = {n, n * n, 1, n * n * n};
  DLTensor src = tensor(a, dt(kDLFloat, 32, 1), 4, shape, sstr, 0);
  DLTensor dst = tensor(b, dt(kDLFloat, 32, 1), 4, shape, NULL, 0);
  dlb_copy_set_threads(threads);
  CHECK_OK(dlb_copy(&src, &dst));
  if (expect_many)
    CHECK(dlb__copy_last_threads() > 1);
  else
    CHECK_EQ_INT(dlb__copy_last_threads(), 1);
  for (int64_t i = 0; i < n; i++)
    for (int64_t j = 0; j < n; j++)
      for (int64_t k = 0; k < n; k++)
        for (int64_t l = 0; l < n; l++)
          if (b[((i * n + j) * n + k) * n + l] !=
              a[((l * n + j) * n + i) * n + k])
            dlb_test_failed(__FILE__, __LINE__, "b[%lld][%lld][%lld][%lld]",
                            (long long)i, (long long)j, (long long)k,
                            (long long)l);
  free(a);
  free(b);
}

DLB_TEST(copy_large_permutation_on_threads) { big_permute_check(4, 1); }

DLB_TEST(copy_one_thread_never_uses_the_pool) { big_permute_check(1, 0); }

/* Large copies whose non-temporal stores the plan fences once per part:
 * rows of 256 bytes run in src's order (X of (64, 32, 16, 64) permuted
 * (2, 0, 1, 3), with X's third axis forwards and backwards) and planes of
 * 16 x 16 units transposed, on one thread and on three; every element
 * checked. */
DLB_TEST(copy_streamed_permutations_land_every_element) {
  const int64_t total = 16 * 64 * 32 * 64; /* 8 MiB of float32 */
  /* Line-aligned: the planes' non-temporal stores need dst on a line. */
  uint32_t *x = NULL, *y = NULL;
  CHECK(posix_memalign((void **)&x, 64, (size_t)total * 4) == 0);
  CHECK(posix_memalign((void **)&y, 64, (size_t)total * 4) == 0);
  for (int64_t i = 0; i < total; i++) x[i] = (uint32_t)(i * 2654435761u);
  const int threads[2] = {1, 3};
  for (int t = 0; t < 2; t++) {
    dlb_copy_set_threads(threads[t]);
    for (int back = 0; back < 2; back++) {
      /* y[i][j][k][l] = X[j][k][back ? 15 - i : i][l]. */
      int64_t shape[4] = {16, 64, 32, 64};
      int64_t sstr[4] = {back ? -64 : 64, 32768, 1024, 1};
      DLTensor s = tensor(x, dt(kDLUInt, 32, 1), 4, shape, sstr,
                          back ? 15 * 64 * 4 : 0);
      DLTensor d = tensor(y, dt(kDLUInt, 32, 1), 4, shape, NULL, 0);
      memset(y, 0, (size_t)total * 4);
      CHECK_OK(dlb_copy(&s, &d));
      if (threads[t] > 1) CHECK(dlb__copy_last_threads() > 1);
      for (int64_t i = 0; i < 16; i++)
        for (int64_t j = 0; j < 64; j++)
          for (int64_t k = 0; k < 32; k++)
            for (int64_t l = 0; l < 64; l++) {
              const int64_t xi = back ? 15 - i : i;
              if (y[((i * 64 + j) * 32 + k) * 64 + l] !=
                  x[((j * 32 + k) * 16 + xi) * 64 + l])
                dlb_test_failed(__FILE__, __LINE__,
                                "back %d: y[%lld][%lld][%lld][%lld]", back,
                                (long long)i, (long long)j, (long long)k,
                                (long long)l);
            }
    }
    /* (8192, 16, 16) with its last two axes swapped. */
    int64_t shape[3] = {8192, 16, 16}, sstr[3] = {256, 1, 16};
    DLTensor s = tensor(x, dt(kDLUInt, 32, 1), 3, shape, sstr, 0);
    DLTensor d = tensor(y, dt(kDLUInt, 32, 1), 3, shape, NULL, 0);
    memset(y, 0, (size_t)total * 4);
    CHECK_OK(dlb_copy(&s, &d));
    if (threads[t] > 1) CHECK(dlb__copy_last_threads() > 1);
    for (int64_t i = 0; i < 8192; i++)
      for (int64_t j = 0; j < 16; j++)
        for (int64_t k = 0; k < 16; k++)
          if (y[(i * 16 + j) * 16 + k] != x[i * 256 + k * 16 + j])
            dlb_test_failed(__FILE__, __LINE__, "planes: y[%lld][%lld][%lld]",
                            (long long)i, (long long)j, (long long)k);
  }
  dlb_copy_set_threads(0);
  free(x);
  free(y);
}

/* Rows of 96 bytes (not whole lines) streamed into dst rows far apart:
 * X of (2048, 43, 24) uint32 with its first two axes swapped, about
 * 8.4 MB. Each row's head and tail share lines with other rows; every
 * element checked, and the bytes after dst's end kept. */
DLB_TEST(copy_streamed_short_rows_land_every_element) {
  const int64_t A = 2048, B = 43, C = 24, total = A * B * C;
  uint32_t *x = malloc((size_t)total * 4);
  uint32_t *y = malloc((size_t)(total + 16) * 4);
  CHECK(x != NULL && y != NULL);
  for (int64_t i = 0; i < total; i++) x[i] = (uint32_t)(i * 2246822519u);
  for (int64_t i = 0; i < total + 16; i++) y[i] = 0xa5a5a5a5u;
  /* y[j][i][k] = X[i][j][k]. */
  int64_t shape[3] = {B, A, C}, sstr[3] = {C, B * C, 1};
  DLTensor s = tensor(x, dt(kDLUInt, 32, 1), 3, shape, sstr, 0);
  DLTensor d = tensor(y, dt(kDLUInt, 32, 1), 3, shape, NULL, 0);
  dlb_copy_set_threads(1);
  CHECK_OK(dlb_copy(&s, &d));
  for (int64_t j = 0; j < B; j++)
    for (int64_t i = 0; i < A; i++)
      for (int64_t k = 0; k < C; k++)
        if (y[(j * A + i) * C + k] != x[(i * B + j) * C + k])
          dlb_test_failed(__FILE__, __LINE__, "y[%lld][%lld][%lld]",
                          (long long)j, (long long)i, (long long)k);
  for (int64_t i = total; i < total + 16; i++)
    CHECK_EQ_INT(y[i], 0xa5a5a5a5u);
  dlb_copy_set_threads(0);
  free(x);
  free(y);
}

/* A 2-D transpose on threads: the split runs along the tile's own rows. */
DLB_TEST(copy_large_transpose_on_threads) {
  const int64_t rows = 1024, cols = 1536;
  uint32_t *a = malloc((size_t)(rows * cols) * 4);
  uint32_t *b = malloc((size_t)(rows * cols) * 4);
  CHECK(a != NULL && b != NULL);
  for (int64_t i = 0; i < rows * cols; i++) a[i] = (uint32_t)(i * 2654435761u);
  /* b (cols x rows) = transpose of a (rows x cols). */
  int64_t shape[2] = {cols, rows}, str[2] = {1, cols};
  DLTensor src = tensor(a, dt(kDLUInt, 32, 1), 2, shape, str, 0);
  DLTensor dst = tensor(b, dt(kDLUInt, 32, 1), 2, shape, NULL, 0);
  dlb_copy_set_threads(3);
  CHECK_OK(dlb_copy(&src, &dst));
  CHECK(dlb__copy_last_threads() > 1);
  for (int64_t i = 0; i < cols; i++)
    for (int64_t j = 0; j < rows; j++)
      if (b[i * rows + j] != a[j * cols + i])
        dlb_test_failed(__FILE__, __LINE__, "b[%lld][%lld]", (long long)i,
                        (long long)j);
  free(a);
  free(b);
}

DLB_TEST(copy_large_contiguous_and_strided_on_threads) {
  const int64_t n = (int64_t)6 << 20;
  uint8_t *a = malloc((size_t)n), *b = malloc((size_t)n);
  CHECK(a != NULL && b != NULL);
  fill_random(a, (size_t)n, 7);
  dlb_copy_set_threads(3);
  int64_t shape[1] = {n};
  DLTensor src = tensor(a, dt(kDLUInt, 8, 1), 1, shape, NULL, 0);
  DLTensor dst = tensor(b, dt(kDLUInt, 8, 1), 1, shape, NULL, 0);
  CHECK_OK(dlb_copy(&src, &dst));
  CHECK(dlb__copy_last_threads() > 1);
  CHECK(memcmp(a, b, (size_t)n) == 0);
  /* Every third byte into a compact dst: rows, not a memcpy. */
  memset(b, 0, (size_t)n);
  int64_t third[1] = {n / 3}, str[1] = {3};
  src.shape = dst.shape = third;
  src.strides = str;
  CHECK_OK(dlb_copy(&src, &dst));
  CHECK(dlb__copy_last_threads() > 1);
  for (int64_t i = 0; i < n / 3; i++)
    if (b[i] != a[3 * i])
      dlb_test_failed(__FILE__, __LINE__, "b[%lld]", (long long)i);
  free(a);
  free(b);
}

/* A copy that splits into two parts only (two rows, each gathered from
 * every second byte) still shares out. */
DLB_TEST(copy_two_parts_share_out) {
  const int64_t n = (int64_t)3 << 19; /* 1.5 MiB per row */
  uint8_t *a = malloc((size_t)(2 * n)), *b = malloc((size_t)(2 * n));
  CHECK(a != NULL && b != NULL);
  fill_random(a, (size_t)(2 * n), 5);
  memset(b, 0, (size_t)(2 * n));
  dlb_copy_set_threads(2);
  int64_t shape[2] = {2, n}, str[2] = {1, 2};
  DLTensor src = tensor(a, dt(kDLUInt, 8, 1), 2, shape, str, 0);
  DLTensor dst = tensor(b, dt(kDLUInt, 8, 1), 2, shape, NULL, 0);
  CHECK_OK(dlb_copy(&src, &dst));
  CHECK(dlb__copy_last_threads() > 1);
  for (int64_t r = 0; r < 2; r++)
    for (int64_t i = 0; i < n; i++)
      if (b[r * n + i] != a[2 * i + r])
        dlb_test_failed(__FILE__, __LINE__, "b[%lld][%lld]", (long long)r,
                        (long long)i);
  dlb_copy_set_threads(0);
  free(a);
  free(b);
}

/* Copies share out from DLB__COPY_PARALLEL_MIN bytes on (rows gathered
 * from every second byte) and contiguous ones from
 * DLB__COPY_PARALLEL_MIN_CONTIGUOUS, a byte less running alone; with many
 * threads a part is 256 KiB at least (plan.c), so a copy a byte short of
 * 12 of them is offered to 11 threads. */
DLB_TEST(copy_threads_from_each_threshold_on) {
  const int64_t part = (int64_t)256 << 10;
  const int64_t most = 2 * 12 * part;
  uint8_t *a = malloc((size_t)most), *b = malloc((size_t)most);
  CHECK(a != NULL && b != NULL);
  fill_random(a, (size_t)most, 13);
  const struct {
    int64_t n, step;
    int threads, shared;
  } cases[] = {
      {DLB__COPY_PARALLEL_MIN - 1, 2, 2, 1},
      {DLB__COPY_PARALLEL_MIN, 2, 2, 2},
      {DLB__COPY_PARALLEL_MIN_CONTIGUOUS - 1, 1, 2, 1},
      {DLB__COPY_PARALLEL_MIN_CONTIGUOUS, 1, 2, 2},
      {12 * part - 1, 2, 16, 11},
      {12 * part, 2, 16, 12},
  };
  for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
    dlb_copy_set_threads(cases[k].threads);
    memset(b, 0, (size_t)most);
    int64_t shape[1] = {cases[k].n}, str[1] = {cases[k].step};
    DLTensor src = tensor(a, dt(kDLUInt, 8, 1), 1, shape, str, 0);
    DLTensor dst = tensor(b, dt(kDLUInt, 8, 1), 1, shape, NULL, 0);
    CHECK_OK(dlb_copy(&src, &dst));
    CHECK_EQ_INT(dlb__copy_last_threads(), cases[k].shared);
    for (int64_t i = 0; i < cases[k].n; i++)
      if (b[i] != a[i * cases[k].step])
        dlb_test_failed(__FILE__, __LINE__, "case %zu: b[%lld]", k,
                        (long long)i);
  }
  dlb_copy_set_threads(0);
  free(a);
  free(b);
}

/* Contiguous copies share out between DLB__COPY_PARALLEL_MIN_CONTIGUOUS
 * and DLB__STREAM_MIN bytes, stay on one thread from there (streamed
 * copies on two threads ran slower) and share out again from
 * DLB__COPY_PARALLEL_MIN_STREAMED, where the streamed copy stores 16-byte
 * registers; where it stores wider ones they share out from
 * DLB__STREAM_MIN on. Every level the CPU has; a transpose of the
 * in-between size shares out. */
DLB_TEST(copy_threads_around_the_streamed_threshold) {
  const int64_t n = DLB__COPY_PARALLEL_MIN_STREAMED;
  uint8_t *a = malloc((size_t)n), *b = malloc((size_t)n);
  CHECK(a != NULL && b != NULL);
  fill_random(a, (size_t)n, 11);
  dlb_copy_set_threads(2);
  for (int kind = 0; kind < DLB__STREAM_KINDS; kind++)
    CHECK_EQ_INT(dlb__copy_parallel_min_streamed_for(kind),
                 kind == DLB__STREAM_AVX2 || kind == DLB__STREAM_AVX512
                     ? DLB__STREAM_MIN
                     : DLB__COPY_PARALLEL_MIN_STREAMED);
  for (int level = DLB__ISA_PORTABLE; level <= DLB__ISA_AVX512; level++) {
    dlb__copy_cap_isa(level);
    const int kind = dlb__stream_kind();
    const int wide = kind == DLB__STREAM_AVX2 || kind == DLB__STREAM_AVX512;
    CHECK_EQ_INT(dlb__copy_parallel_min_streamed(),
                 dlb__copy_parallel_min_streamed_for(kind));
    const int64_t sizes[] = {DLB__STREAM_MIN - 1, DLB__STREAM_MIN,
                             DLB__COPY_PARALLEL_MIN_STREAMED - 1,
                             DLB__COPY_PARALLEL_MIN_STREAMED};
    const int shared[] = {1, wide, wide, 1};
    for (size_t k = 0; k < 4; k++) {
      int64_t shape[1] = {sizes[k]};
      DLTensor src = tensor(a, dt(kDLUInt, 8, 1), 1, shape, NULL, 0);
      DLTensor dst = tensor(b, dt(kDLUInt, 8, 1), 1, shape, NULL, 0);
      memset(b, 0, (size_t)n);
      CHECK_OK(dlb_copy(&src, &dst));
      if ((dlb__copy_last_threads() > 1) != shared[k])
        dlb_test_failed(__FILE__, __LINE__, "level %d kind %d size %lld: %s",
                        level, kind, (long long)sizes[k],
                        shared[k] ? "not shared" : "shared");
      CHECK(memcmp(a, b, (size_t)sizes[k]) == 0);
    }
  }
  dlb__copy_cap_isa(-1);
  int64_t side = 2048, shape[2] = {side, side}, str[2] = {1, side};
  DLTensor src = tensor(a, dt(kDLUInt, 32, 1), 2, shape, str, 0);
  DLTensor dst = tensor(b, dt(kDLUInt, 32, 1), 2, shape, NULL, 0);
  CHECK_OK(dlb_copy(&src, &dst));
  CHECK(dlb__copy_last_threads() > 1);
  /* Streamed rows share out below the single block's threshold: 8 MiB
   * in rows of 1000 bytes, 1016 apart in src. */
  int64_t rows[2] = {DLB__STREAM_MIN / 1000 + 1, 1000}, pitch[2] = {1016, 1};
  src = tensor(a, dt(kDLUInt, 8, 1), 2, rows, pitch, 0);
  dst = tensor(b, dt(kDLUInt, 8, 1), 2, rows, NULL, 0);
  CHECK_OK(dlb_copy(&src, &dst));
  CHECK(dlb__copy_last_threads() > 1);
  for (int64_t r = 0; r < rows[0]; r++)
    if (memcmp(b + r * 1000, a + r * 1016, 1000) != 0)
      dlb_test_failed(__FILE__, __LINE__, "row %lld", (long long)r);
  dlb_copy_set_threads(0);
  free(a);
  free(b);
}

/* Two parts that can only finish together: each waits for the other to
 * start. Run on one thread they would wait forever (the test fails after
 * 10 s), so passing proves a worker ran one of them. */
static atomic_int rendezvous_arrived;

static double seconds(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static void rendezvous(void *ctx, int64_t part) {
  (void)ctx;
  (void)part;
  atomic_fetch_add(&rendezvous_arrived, 1);
  const double start = seconds();
  while (atomic_load(&rendezvous_arrived) < 2) {
    if (seconds() - start > 10)
      dlb_test_failed(__FILE__, __LINE__, "no other thread took a part");
    sched_yield();
  }
}

DLB_TEST(copy_pool_runs_parts_on_its_workers) {
  for (int round = 0; round < 3; round++) {
    atomic_store(&rendezvous_arrived, 0);
    CHECK_EQ_INT(dlb__pool_run(rendezvous, NULL, 2, 2), 2);
    CHECK_EQ_INT(atomic_load(&rendezvous_arrived), 2);
  }
}

/* Workers start with every signal blocked, so that signals meant for the
 * process reach the application's threads, and the caller's own mask is
 * what it was. Each part records, from the thread it ran on, whether that
 * thread blocks SIGUSR1 and SIGTERM. */
static atomic_int masked_parts, unmasked_parts;

static void record_mask(void *ctx, int64_t part) {
  const pthread_t *caller = ctx;
  rendezvous(NULL, part);
  if (pthread_equal(pthread_self(), *caller)) return;
  sigset_t now;
  sigemptyset(&now);
  pthread_sigmask(SIG_BLOCK, NULL, &now);
  if (sigismember(&now, SIGUSR1) == 1 && sigismember(&now, SIGTERM) == 1)
    atomic_fetch_add(&masked_parts, 1);
  else
    atomic_fetch_add(&unmasked_parts, 1);
}

DLB_TEST(copy_pool_workers_block_signals_and_keep_the_callers_mask) {
  sigset_t usr1, now;
  sigemptyset(&usr1);
  sigaddset(&usr1, SIGUSR1);
  CHECK(pthread_sigmask(SIG_UNBLOCK, &usr1, NULL) == 0);
  pthread_t self = pthread_self();
  atomic_store(&rendezvous_arrived, 0);
  CHECK_EQ_INT(dlb__pool_run(record_mask, &self, 2, 2), 2);
  CHECK_EQ_INT(atomic_load(&masked_parts), 1);
  CHECK_EQ_INT(atomic_load(&unmasked_parts), 0);
  sigemptyset(&now);
  CHECK(pthread_sigmask(SIG_BLOCK, NULL, &now) == 0);
  CHECK_EQ_INT(sigismember(&now, SIGUSR1), 0);
}

/* A part that starts another job finds the pool busy: the inner job runs
 * on the calling thread instead of waiting for the outer one. */
static int64_t inner_parts;

static void count_part(void *ctx, int64_t part) {
  (void)ctx;
  (void)part;
  inner_parts++;
}

static void nested_part(void *ctx, int64_t part) {
  int *inner_shared = ctx;
  if (part == 0) inner_shared[0] = dlb__pool_run(count_part, NULL, 5, 2);
}

DLB_TEST(copy_pool_busy_runs_nested_jobs_inline) {
  int inner_shared[1] = {0};
  CHECK_EQ_INT(dlb__pool_run(nested_part, inner_shared, 2, 2), 2);
  CHECK_EQ_INT(inner_shared[0], 1);
  CHECK_EQ_INT(inner_parts, 5);
  /* Alone, it is the caller's job too. */
  CHECK_EQ_INT(dlb__pool_run(count_part, NULL, 3, 1), 1);
  CHECK_EQ_INT(inner_parts, 8);
}

/* A job is offered to no more threads than it has parts, the caller
 * included, and to all of them when it has more. */
static atomic_int parts_run;

static void count_part_atomically(void *ctx, int64_t part) {
  (void)ctx;
  (void)part;
  atomic_fetch_add(&parts_run, 1);
}

DLB_TEST(copy_pool_offers_a_job_to_at_most_one_thread_a_part) {
  CHECK_EQ_INT(dlb__pool_run(count_part_atomically, NULL, 2, 4), 2);
  CHECK_EQ_INT(dlb__pool_run(count_part_atomically, NULL, 3, 4), 3);
  CHECK_EQ_INT(dlb__pool_run(count_part_atomically, NULL, 9, 4), 4);
  CHECK_EQ_INT(dlb__pool_run(count_part_atomically, NULL, 9, 3), 3);
  CHECK_EQ_INT(atomic_load(&parts_run), 23);
}

/* Workers the job was not offered to take none of its parts: with three
 * workers started, a job for two threads runs on the caller and one
 * worker, even with parts slow enough for every woken worker to ask for
 * one. */
static pthread_t slow_part_threads[6];

static void record_thread_slowly(void *ctx, int64_t part) {
  (void)ctx;
  slow_part_threads[part] = pthread_self();
  const struct timespec pause = {0, 20 * 1000 * 1000};
  nanosleep(&pause, NULL);
}

DLB_TEST(copy_pool_runs_a_job_only_on_the_threads_offered_it) {
  CHECK_EQ_INT(dlb__pool_run(record_thread_slowly, NULL, 4, 4), 4);
  CHECK_EQ_INT(dlb__pool_run(record_thread_slowly, NULL, 6, 2), 2);
  pthread_t distinct[6];
  int count = 0;
  for (int i = 0; i < 6; i++) {
    int known = 0;
    for (int j = 0; j < count; j++)
      known |= pthread_equal(distinct[j], slow_part_threads[i]) != 0;
    if (!known) distinct[count++] = slow_part_threads[i];
  }
  CHECK(count <= 2);
}

/* A job returns only when every part has finished, the second of two
 * jobs included: its caller, done with its own quick part, waits for the
 * slow one a worker took. */
static atomic_int parts_finished[2];

static void finish_part_slowly(void *ctx, int64_t part) {
  (void)ctx;
  const struct timespec pause = {0, (part == 0 ? 10 : 60) * 1000 * 1000};
  nanosleep(&pause, NULL);
  atomic_store(&parts_finished[part], 1);
}

DLB_TEST(copy_pool_returns_when_every_part_has_finished) {
  for (int job = 0; job < 2; job++) {
    atomic_store(&parts_finished[0], 0);
    atomic_store(&parts_finished[1], 0);
    CHECK_EQ_INT(dlb__pool_run(finish_part_slowly, NULL, 2, 2), 2);
    CHECK_EQ_INT(atomic_load(&parts_finished[0]), 1);
    CHECK_EQ_INT(atomic_load(&parts_finished[1]), 1);
  }
}

/* A pool running in this process must not hang a forked child, which has
 * none of its workers: the child starts its own, and parts run on them
 * (the rendezvous needs a second thread). */
DLB_TEST(copy_pool_survives_fork) {
  big_permute_check(2, 1);
  pid_t pid = fork();
  CHECK(pid >= 0);
  if (pid == 0) {
    alarm(20);
    big_permute_check(2, 1);
    atomic_store(&rendezvous_arrived, 0);
    CHECK_EQ_INT(dlb__pool_run(rendezvous, NULL, 2, 2), 2);
    _exit(0);
  }
  int st = 0;
  CHECK(waitpid(pid, &st, 0) == pid);
  CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0);
  big_permute_check(2, 1);
}

/* A child forked while another thread's job is in flight (its parts
 * waiting, the pool's lock free) finds the pool idle: its own jobs share
 * out rather than run alone as if the parent's job were still running. */
static atomic_int held_parts_started, held_parts_released, child_parts;

static void held_part(void *ctx, int64_t part) {
  (void)ctx;
  (void)part;
  atomic_fetch_add(&held_parts_started, 1);
  const double start = seconds();
  while (!atomic_load(&held_parts_released) && seconds() - start < 10)
    sched_yield();
}

static void *run_held_job(void *arg) {
  *(int *)arg = dlb__pool_run(held_part, NULL, 2, 2);
  return NULL;
}

static void count_child_part(void *ctx, int64_t part) {
  (void)ctx;
  (void)part;
  atomic_fetch_add(&child_parts, 1);
}

DLB_TEST(copy_pool_forked_during_a_job_shares_out_in_the_child) {
  atomic_store(&held_parts_started, 0);
  atomic_store(&held_parts_released, 0);
  int shared = 0;
  pthread_t holder;
  CHECK(pthread_create(&holder, NULL, run_held_job, &shared) == 0);
  const double start = seconds();
  while (atomic_load(&held_parts_started) < 2 && seconds() - start < 10)
    sched_yield();
  const int started = atomic_load(&held_parts_started);
  pid_t pid = started == 2 ? fork() : -1;
  if (pid == 0) {
    alarm(20);
    const int child_shared = dlb__pool_run(count_child_part, NULL, 3, 2);
    _exit(child_shared == 2 && atomic_load(&child_parts) == 3 ? 0 : 3);
  }
  atomic_store(&held_parts_released, 1);
  CHECK(pthread_join(holder, NULL) == 0);
  CHECK_EQ_INT(started, 2);
  CHECK(pid > 0);
  CHECK_EQ_INT(shared, 2);
  int st = 0;
  CHECK(waitpid(pid, &st, 0) == pid);
  CHECK(WIFEXITED(st));
  CHECK_EQ_INT(WEXITSTATUS(st), 0);
}

/* The pool starts only the workers a job is offered to: in a child,
 * which has none, a job for two threads adds one thread to the process,
 * and one for three a second. */
static int threads_in_process(void) {
  DIR *d = opendir("/proc/self/task");
  if (d == NULL) return -1;
  int n = 0;
  for (struct dirent *e; (e = readdir(d)) != NULL;)
    n += e->d_name[0] != '.';
  closedir(d);
  return n;
}

/* ThreadSanitizer's runtime runs a thread of its own, which may start in
 * the child at any time: one more thread than the pool's is allowed. */
#if defined(__SANITIZE_THREAD__)
#define SPARE_THREADS 1
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define SPARE_THREADS 1
#endif
#endif
#ifndef SPARE_THREADS
#define SPARE_THREADS 0
#endif

static int threads_now(int want) {
  const int n = threads_in_process();
  return n >= want && n <= want + SPARE_THREADS;
}

DLB_TEST(copy_pool_starts_only_the_workers_offered_a_job) {
  pid_t pid = fork();
  CHECK(pid >= 0);
  if (pid == 0) {
    alarm(20);
    const int before = threads_in_process();
    int ok = before >= 1 && dlb__pool_run(count_child_part, NULL, 2, 2) == 2;
    ok = ok && threads_now(before + 1);
    ok = ok && dlb__pool_run(count_child_part, NULL, 3, 3) == 3;
    ok = ok && threads_now(before + 2);
    _exit(ok ? 0 : 3);
  }
  int st = 0;
  CHECK(waitpid(pid, &st, 0) == pid);
  CHECK(WIFEXITED(st));
  CHECK_EQ_INT(WEXITSTATUS(st), 0);
}

/* However many threads a job asks for, it is offered to 64 at most (the
 * pool holds 63 workers): in a child, so that this process keeps its
 * pool as it was. */
DLB_TEST(copy_pool_caps_a_job_at_64_threads) {
  pid_t pid = fork();
  CHECK(pid >= 0);
  if (pid == 0) {
    alarm(20);
    atomic_store(&child_parts, 0);
    const int shared = dlb__pool_run(count_child_part, NULL, 100, 1000);
    _exit(shared == 64 && atomic_load(&child_parts) == 100 ? 0 : 3);
  }
  int st = 0;
  CHECK(waitpid(pid, &st, 0) == pid);
  CHECK(WIFEXITED(st));
  CHECK_EQ_INT(WEXITSTATUS(st), 0);
}

/* exit() with workers waiting: the library's destructor stops and joins
 * them, so the process ends (a worker left running would run the library's
 * code while the process tears down). */
DLB_TEST(copy_pool_lets_the_process_exit) {
  pid_t pid = fork();
  CHECK(pid >= 0);
  if (pid == 0) {
    alarm(20);
    big_permute_check(2, 1);
    exit(0);
  }
  int st = 0;
  CHECK(waitpid(pid, &st, 0) == pid);
  CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0);
}

/* After the library's destructor has stopped the workers, a job (from a
 * destructor that runs later) runs on its caller: exit() has not left the
 * pool locked or waiting for workers that are gone. A destructor of lower
 * priority runs after the library's, which has none. */
static atomic_int copy_after_exit;

__attribute__((destructor(101))) static void late_copy(void) {
  if (!atomic_load(&copy_after_exit)) return;
  inner_parts = 0;
  const int shared = dlb__pool_run(count_part, NULL, 3, 2);
  _exit(shared == 1 && inner_parts == 3 ? 0 : 3);
}

DLB_TEST(copy_pool_runs_jobs_alone_after_the_exit_stops_it) {
  pid_t pid = fork();
  CHECK(pid >= 0);
  if (pid == 0) {
    alarm(20);
    big_permute_check(2, 1);
    atomic_store(&copy_after_exit, 1);
    exit(0);
  }
  int st = 0;
  CHECK(waitpid(pid, &st, 0) == pid);
  CHECK(WIFEXITED(st));
  CHECK_EQ_INT(WEXITSTATUS(st), 0);
}

/* ---- dlb_tensor_copy -------------------------------------------------- */

DLB_TEST(tensor_copy_makes_a_compact_owned_copy) {
  int16_t a[3 * 5];
  for (int i = 0; i < 15; i++) a[i] = (int16_t)(i * 7 - 20);
  int64_t shape[2] = {5, 3};
  int64_t tstr[2] = {1, 5};
  DLTensor src = tensor(a, dt(kDLInt, 16, 1), 2, shape, tstr, 0);
  DLDevice cpu = {kDLCPU, 0};
  DLManagedTensorVersioned *t = NULL;
  CHECK_OK(dlb_tensor_copy(&src, cpu, &t));
  CHECK(t != NULL);
  CHECK_EQ_INT(t->flags, DLPACK_FLAG_BITMASK_IS_COPIED);
  CHECK(dlb_tensor_is_c_contiguous(&t->dl_tensor));
  CHECK_EQ_INT(t->dl_tensor.ndim, 2);
  CHECK_EQ_INT(t->dl_tensor.shape[0], 5);
  CHECK_EQ_INT(t->dl_tensor.shape[1], 3);
  const int16_t *d = (const int16_t *)((char *)t->dl_tensor.data +
                                       t->dl_tensor.byte_offset);
  for (int i = 0; i < 5; i++)
    for (int j = 0; j < 3; j++) CHECK_EQ_INT(d[i * 3 + j], a[j * 5 + i]);
  dlb_tensor_release(t);
}

/* Into memory just allocated a memcpy-like copy runs on one thread (page
 * faults bound it), other large copies share out as they would into
 * memory already written; dlb_copy into that memory shares out too. */
DLB_TEST(tensor_copy_of_a_block_into_fresh_memory_stays_on_one_thread) {
  const int64_t n = (int64_t)6 << 20;
  uint8_t *a = malloc((size_t)(2 * n));
  CHECK(a != NULL);
  fill_random(a, (size_t)(2 * n), 17);
  dlb_copy_set_threads(2);
  int64_t shape[1] = {n}, two[1] = {2};
  const DLDevice cpu = {kDLCPU, 0};
  DLTensor block = tensor(a, dt(kDLUInt, 8, 1), 1, shape, NULL, 0);
  DLTensor every_other = tensor(a, dt(kDLUInt, 8, 1), 1, shape, two, 0);
  DLManagedTensorVersioned *t = NULL, *u = NULL;
  CHECK_OK(dlb_tensor_copy(&block, cpu, &t));
  CHECK_EQ_INT(dlb__copy_last_threads(), 1);
  CHECK(memcmp(t->dl_tensor.data, a, (size_t)n) == 0);
  CHECK_OK(dlb_tensor_copy(&every_other, cpu, &u));
  CHECK_EQ_INT(dlb__copy_last_threads(), 2);
  const uint8_t *d = u->dl_tensor.data;
  for (int64_t i = 0; i < n; i++)
    if (d[i] != a[2 * i])
      dlb_test_failed(__FILE__, __LINE__, "element %lld", (long long)i);
  CHECK_OK(dlb_copy(&block, &u->dl_tensor));
  CHECK_EQ_INT(dlb__copy_last_threads(), 2);
  CHECK(memcmp(u->dl_tensor.data, a, (size_t)n) == 0);
  dlb_tensor_release(t);
  dlb_tensor_release(u);
  dlb_copy_set_threads(0);
  free(a);
}

DLB_TEST(tensor_copy_refuses_what_it_cannot_copy) {
  float a[2] = {1, 2};
  int64_t shape[1] = {2};
  DLTensor src = tensor(a, dt(kDLFloat, 32, 1), 1, shape, NULL, 0);
  /* Vulkan: a kind no backend handles, whatever the machine has. */
  DLDevice cpu = {kDLCPU, 0}, vulkan = {kDLVulkan, 0};
  DLManagedTensorVersioned *t = (DLManagedTensorVersioned *)&shape;
  CHECK_STATUS(dlb_tensor_copy(NULL, cpu, &t), DLB_E_INVAL);
  CHECK_STATUS(dlb_tensor_copy(&src, cpu, NULL), DLB_E_INVAL);
  /* Memory the CPU cannot reach is neither made nor read by the CPU
   * engine (src's data is in fact host memory: reading it would work). */
  CHECK(dlb_tensor_copy(&src, vulkan, &t) != DLB_OK);
  DLTensor on_gpu = src;
  on_gpu.device = vulkan;
  CHECK(dlb_tensor_copy(&on_gpu, cpu, &t) != DLB_OK);
  int64_t negative[1] = {-1};
  DLTensor bad = src;
  bad.shape = negative;
  CHECK_STATUS(dlb_tensor_copy(&bad, cpu, &t), DLB_E_LAYOUT);
  CHECK(t == (DLManagedTensorVersioned *)&shape);
}

/* ---- dlb_managed_copy ------------------------------------------------ */

/* int4 values one per byte (padded), every third of a strided buffer. */
DLB_TEST(managed_copy_keeps_padded_sub_byte_elements_a_byte_each) {
  uint8_t a[12];
  for (int i = 0; i < 12; i++) a[i] = (uint8_t)(i % 16);
  int64_t shape[1] = {4}, str[1] = {3};
  DLManagedTensorVersioned m = {
      .version = {DLPACK_MAJOR_VERSION, DLPACK_MINOR_VERSION},
      .flags = DLPACK_FLAG_BITMASK_IS_SUBBYTE_TYPE_PADDED |
               DLPACK_FLAG_BITMASK_READ_ONLY,
      .dl_tensor = tensor(a, dt(kDLInt, 4, 1), 1, shape, str, 0)};
  DLManagedTensorVersioned *t = NULL;
  CHECK_OK(dlb_managed_copy(&m, (DLDevice){kDLCPU, 0}, &t));
  CHECK(dlb_dtype_equal(t->dl_tensor.dtype, m.dl_tensor.dtype));
  CHECK_EQ_INT(t->flags, DLPACK_FLAG_BITMASK_IS_SUBBYTE_TYPE_PADDED |
                             DLPACK_FLAG_BITMASK_IS_COPIED);
  CHECK_OK(dlb_managed_validate(t));
  const uint8_t *d = (const uint8_t *)t->dl_tensor.data;
  for (int i = 0; i < 4; i++) CHECK_EQ_INT(d[i], a[3 * i]);
  dlb_tensor_release(t);
  /* Packed, the same data is two bytes of pairs, as dlb_tensor_copy
   * makes them (compact strides only). */
  m.flags = 0;
  m.dl_tensor.strides = NULL;
  CHECK_OK(dlb_managed_copy(&m, (DLDevice){kDLCPU, 0}, &t));
  CHECK_EQ_INT(t->flags, DLPACK_FLAG_BITMASK_IS_COPIED);
  CHECK_EQ_INT(((const uint8_t *)t->dl_tensor.data)[0], a[0]);
  CHECK_EQ_INT(((const uint8_t *)t->dl_tensor.data)[1], a[1]);
  dlb_tensor_release(t);
}

/* IS_SUBBYTE_TYPE_PADDED means nothing for whole-byte types: float32 with
 * it copies as float32 (strided: element by element), and the copy
 * carries no such flag. */
DLB_TEST(managed_copy_drops_the_padded_flag_of_whole_byte_types) {
  float f[4] = {1.5f, -2.0f, 3.25f, 4.0f};
  int64_t two[1] = {2}, every2[1] = {2};
  DLManagedTensorVersioned m = {
      .version = {DLPACK_MAJOR_VERSION, DLPACK_MINOR_VERSION},
      .flags = DLPACK_FLAG_BITMASK_IS_SUBBYTE_TYPE_PADDED,
      .dl_tensor = tensor(f, dt(kDLFloat, 32, 1), 1, two, every2, 0)};
  DLManagedTensorVersioned *t = NULL;
  CHECK_OK(dlb_managed_copy(&m, (DLDevice){kDLCPU, 0}, &t));
  CHECK(dlb_dtype_equal(t->dl_tensor.dtype, m.dl_tensor.dtype));
  CHECK_EQ_INT(t->flags, DLPACK_FLAG_BITMASK_IS_COPIED);
  const float *g = (const float *)t->dl_tensor.data;
  CHECK(g[0] == 1.5f && g[1] == 3.25f);
  dlb_tensor_release(t);
}

DLB_TEST(managed_copy_refuses_bad_headers) {
  float a[2] = {1, 2};
  int64_t shape[1] = {2};
  DLManagedTensorVersioned m = {
      .version = {DLPACK_MAJOR_VERSION + 1, 0},
      .dl_tensor = tensor(a, dt(kDLFloat, 32, 1), 1, shape, NULL, 0)};
  DLDevice cpu = {kDLCPU, 0};
  DLManagedTensorVersioned *t = (DLManagedTensorVersioned *)&shape;
  CHECK_STATUS(dlb_managed_copy(NULL, cpu, &t), DLB_E_INVAL);
  CHECK_STATUS(dlb_managed_copy(&m, cpu, &t), DLB_E_VERSION);
  m.version.major = DLPACK_MAJOR_VERSION;
  m.flags = (uint64_t)1 << 40;
  CHECK_STATUS(dlb_managed_copy(&m, cpu, &t), DLB_E_INVAL);
  CHECK(strstr(dlb_last_error(), "flags") != NULL);
  CHECK(t == (DLManagedTensorVersioned *)&shape);
}

/* The struct is judged whole, as dlb_managed_validate judges it, before
 * its bytes are described otherwise for the copy. */
DLB_TEST(managed_copy_validates_the_struct_first) {
  DLDevice cpu = {kDLCPU, 0};
  /* A dlbridge tensor whose ndim was raised past its own arrays. */
  int64_t shape[2] = {2, 3};
  DLManagedTensorVersioned *src = NULL, *t = (DLManagedTensorVersioned *)&shape;
  CHECK_OK(dlb_tensor_alloc(cpu, dt(kDLFloat, 32, 1), 2, shape, &src));
  src->dl_tensor.ndim = 40;
  CHECK_STATUS(dlb_managed_copy(src, cpu, &t), DLB_E_LAYOUT);
  CHECK_ERROR_MENTIONS("run past the");
  CHECK(t == (DLManagedTensorVersioned *)&shape);
  src->dl_tensor.ndim = 2;
  CHECK_OK(dlb_managed_copy(src, cpu, &t));
  dlb_tensor_release(t);
  dlb_tensor_release(src);
  /* Padded units of types DLPack does not have. */
  uint8_t a[4] = {1, 2, 3, 4};
  int64_t four[1] = {4};
  const DLDataType bad[] = {dt(kDLInt, 3, 1), dt(200, 4, 1),
                            dt(kDLFloat, 7, 1), dt(kDLInt, 4, 0)};
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    DLManagedTensorVersioned m = {
        .version = {DLPACK_MAJOR_VERSION, DLPACK_MINOR_VERSION},
        .flags = DLPACK_FLAG_BITMASK_IS_SUBBYTE_TYPE_PADDED,
        .dl_tensor = tensor(a, bad[i], 1, four, NULL, 0)};
    t = (DLManagedTensorVersioned *)&shape;
    CHECK_STATUS(dlb_managed_copy(&m, cpu, &t), dlb_managed_validate(&m));
    CHECK(dlb_managed_validate(&m) != DLB_OK);
    CHECK(t == (DLManagedTensorVersioned *)&shape);
  }
}

static dlb_status tensor_copy_body(void *ctx) {
  DLTensor *src = ctx;
  DLDevice cpu = {kDLCPU, 0};
  DLManagedTensorVersioned *t = NULL;
  dlb_status st = dlb_tensor_copy(src, cpu, &t);
  if (st != DLB_OK) {
    CHECK(t == NULL);
    return st;
  }
  const double *d = (const double *)t->dl_tensor.data;
  for (int i = 0; i < 6; i++) CHECK(d[i] == (double)(5 - i));
  dlb_tensor_release(t);
  return DLB_OK;
}

DLB_TEST(tensor_copy_survives_allocation_failure) {
  double a[6] = {0, 1, 2, 3, 4, 5};
  int64_t shape[1] = {6}, str[1] = {-1};
  DLTensor src = tensor(a, dt(kDLFloat, 64, 1), 1, shape, str, 5 * 8);
  CHECK(dlb_test_oom_loop(tensor_copy_body, &src) >= 1);
}
