/*
 * test_copy_kernels.c -- the copy engine's kernels at their edges: the
 * non-temporal block copy (every head and tail alignment, the size
 * threshold that selects it) and the portable paths behind the test hook.
 */
#include "copy/copy_internal.h"
#include "copy/vec128.h"
#include "test.h"

/* What dlb_copy_kernels() calls the 128-bit level on this build. */
#if defined(__aarch64__)
#define V128_NAME "neon"
#else
#define V128_NAME "sse2"
#endif

static void fill(unsigned char *p, size_t n, unsigned seed) {
  for (size_t i = 0; i < n; i++)
    p[i] = (unsigned char)((i + seed) * 2654435761u >> 11);
}

/* Copies n bytes from src + PAD + so to dst + PAD + d0 (dst holds
 * size bytes, a PAD each side) as a non-temporal copy of `kind` does, and
 * fails unless exactly those bytes changed, to src's. */
enum { PAD = 64 };
static void check_stream_copy(int kind, const unsigned char *src,
                              unsigned char *dst, unsigned char *want,
                              size_t size, size_t so, size_t d0, size_t n) {
  fill(dst, size, 3);
  memcpy(want, dst, size);
  memcpy(want + PAD + d0, src + PAD + so, n);
  dlb__stream_copy_as(kind, (char *)dst + PAD + d0,
                      (const char *)src + PAD + so, n);
  if (memcmp(dst, want, size) != 0)
    dlb_test_failed(__FILE__, __LINE__,
                    "kind %d src offset %zu dst offset %zu length %zu", kind,
                    so, d0, n);
}

/* Whether this CPU runs the non-temporal copy of `kind`: the wide ones
 * need its registers. */
static int stream_kind_runs_here(int kind) {
  if (kind == DLB__STREAM_AVX512) return dlb__copy_isa() >= DLB__ISA_AVX512;
  if (kind == DLB__STREAM_AVX2) return dlb__copy_isa() >= DLB__ISA_AVX2;
  return 1;
}

/* Lengths up to 9 lines plus one (every one to 130 and from 600 on, every
 * seventh between: zero to two rounds of the wide kinds' four lines, then
 * single lines, then a tail), from and to every offset in a line (every
 * fifth for the kinds after the first), for every kind this CPU runs:
 * the bytes copied match and the bytes around dst stay as they were. */
DLB_TEST(stream_copy_every_alignment_and_length) {
  enum { MAXN = 9 * 64 + 65 };
  static unsigned char src[PAD + MAXN + PAD], dst[PAD + MAXN + PAD + 64],
      want[sizeof dst];
  fill(src, sizeof src, 1);
  int ran = 0;
  for (int kind = 0; kind < DLB__STREAM_KINDS; kind++) {
    if (!stream_kind_runs_here(kind)) continue;
    ran++;
    for (size_t so = 0; so < 64; so += 7)
      for (size_t d0 = 0; d0 < 64; d0 += kind == DLB__STREAM_V128 ? 1 : 5)
        for (size_t n = 0; n <= MAXN; n += n < 130 ? 1 : n < 600 ? 7 : 1)
          check_stream_copy(kind, src, dst, want, sizeof dst, so, d0, n);
  }
  /* The wide kinds ran wherever the CPU has them and nothing capped the
   * level. */
  int kinds = 3;
#if DLB__HAVE_WIDE
  if (getenv("DLBRIDGE_COPY_ISA") == NULL) {
    __builtin_cpu_init();
    if (__builtin_cpu_supports("avx2")) kinds = 4;
    if (__builtin_cpu_supports("avx512f") &&
        __builtin_cpu_supports("avx512bw") &&
        __builtin_cpu_supports("avx512vbmi"))
      kinds = 5;
  }
#endif
  CHECK_EQ_INT(ran, kinds);
}

/* Lengths around the read-ahead distance of each kind that reads ahead,
 * where the loop starts asking for src lines ahead of its stores, copy
 * the same bytes as memcpy. */
DLB_TEST(stream_copy_lengths_around_its_read_ahead) {
  enum { MAXN = DLB__STREAM_AHEAD_FAR + 3 * 64 };
  static unsigned char src[PAD + MAXN + PAD], dst[PAD + MAXN + PAD + 64],
      want[sizeof dst];
  fill(src, sizeof src, 5);
  CHECK(DLB__STREAM_AHEAD_NEAR < DLB__STREAM_AHEAD_FAR);
  CHECK_EQ_INT(dlb__stream_kind_ahead(DLB__STREAM_V128_NEAR),
               DLB__STREAM_AHEAD_NEAR);
  CHECK_EQ_INT(dlb__stream_kind_ahead(DLB__STREAM_V128_FAR),
               DLB__STREAM_AHEAD_FAR);
  for (int kind = 0; kind < DLB__STREAM_KINDS; kind++) {
    const size_t ahead = dlb__stream_kind_ahead(kind);
    if (kind != DLB__STREAM_V128_NEAR && kind != DLB__STREAM_V128_FAR) {
      CHECK_EQ_INT(ahead, 0);
      continue;
    }
    for (size_t so = 0; so < 64; so += 21)
      for (size_t d0 = 0; d0 < 64; d0 += 13)
        for (size_t n = ahead - 64; n <= ahead + 3 * 64; n += 9)
          check_stream_copy(kind, src, dst, want, sizeof dst, so, d0, n);
  }
}

/* Reads the CPU's vendor from CPUID leaf 0 ("GenuineIntel"). */
#if DLB__HAVE_WIDE
#include <cpuid.h>
static int cpu_vendor_is_intel(void) {
  unsigned a, b, c, d;
  if (!__get_cpuid(0, &a, &b, &c, &d)) return 0;
  char v[13];
  memcpy(v, &b, 4);
  memcpy(v + 4, &d, 4);
  memcpy(v + 8, &c, 4);
  v[12] = 0;
  return strcmp(v, "GenuineIntel") == 0;
}
#endif

/* The non-temporal copy's kind follows the kernels' level and the
 * vendor: Intel CPUs store the widest registers the level has and read
 * nothing ahead; others store 16 bytes and read ahead, far only at the
 * AVX-512 level. dlb__stream_copy and the plan's row kernel take this
 * CPU's. */
DLB_TEST(stream_kind_follows_the_level_and_the_vendor) {
  static const int intel[4] = {DLB__STREAM_V128, DLB__STREAM_V128,
                               DLB__STREAM_AVX2, DLB__STREAM_AVX512};
  static const int other[4] = {DLB__STREAM_V128_NEAR, DLB__STREAM_V128_NEAR,
                               DLB__STREAM_V128_NEAR, DLB__STREAM_V128_FAR};
  for (int level = DLB__ISA_PORTABLE; level <= DLB__ISA_AVX512; level++) {
    CHECK_EQ_INT(dlb__stream_kind_for(level, 1), intel[level]);
    CHECK_EQ_INT(dlb__stream_kind_for(level, 0), other[level]);
  }
#if DLB__HAVE_WIDE
  CHECK_EQ_INT(dlb__cpu_is_intel(), cpu_vendor_is_intel());
#else
  CHECK_EQ_INT(dlb__cpu_is_intel(), 0);
#endif
  /* dlb__stream_copy copies as this CPU's kind does. */
  {
    enum { N = 4 * 64 + 64 + 37 };
    static unsigned char src[PAD + N + PAD], dst[PAD + N + PAD + 64],
        want[sizeof dst];
    fill(src, sizeof src, 9);
    fill(dst, sizeof dst, 3);
    memcpy(want, dst, sizeof dst);
    memcpy(want + PAD + 5, src + PAD + 11, N);
    dlb__stream_copy((char *)dst + PAD + 5, (const char *)src + PAD + 11, N);
    CHECK(memcmp(dst, want, sizeof dst) == 0);
  }
  /* Under every cap the row kernel of a streamed block copy is the one of
   * the kind for the level the cap gives; kinds that differ, kernels that
   * differ. */
  dlb__row_fn by_level[4];
  int kinds[4];
  for (int level = DLB__ISA_PORTABLE; level <= DLB__ISA_AVX512; level++) {
    dlb__copy_cap_isa(level);
    kinds[level] = dlb__stream_kind();
    CHECK_EQ_INT(kinds[level], dlb__stream_kind_for(dlb__copy_isa(),
                                                    dlb__cpu_is_intel()));
    by_level[level] = dlb__row_kernel(4, 4, 4, 1);
    CHECK_EQ_INT(dlb__row_kernel_streams(by_level[level]),
                 DLB__HAVE_STREAM && level > DLB__ISA_PORTABLE);
  }
  dlb__copy_cap_isa(-1);
  for (int i = DLB__ISA_V128; i <= DLB__ISA_AVX512; i++)
    for (int j = DLB__ISA_V128; j < i; j++)
      if (DLB__HAVE_STREAM)
        CHECK_EQ_INT(by_level[i] == by_level[j], kinds[i] == kinds[j]);
}

/* The plan picks the non-temporal kernel from DLB__STREAM_MIN bytes on,
 * for rows of at least DLB__STREAM_ROW_MIN (or shorter ones that follow
 * each other in src: DLB__STREAM_SHORT_ROW_MIN), and memcpy below. */
DLB_TEST(copy_plan_streams_from_the_threshold_on) {
  dlb__copy_plan p;
  static char a[1], b[1];
  const dlb__row_fn stream = dlb__row_kernel(4, 4, 4, 1);
  const dlb__row_fn plain = dlb__row_kernel(4, 4, 4, 0);
#if DLB__HAVE_STREAM
  CHECK(stream != plain);
#else
  /* Without non-temporal stores every size takes memcpy. */
  CHECK(stream == plain);
#endif
  int64_t at[1] = {DLB__STREAM_MIN / 4}, below[1] = {DLB__STREAM_MIN / 4 - 1};
  dlb__copy_plan_build(&p, b, NULL, a, NULL, 1, at, 4);
  CHECK(p.row == stream);
  dlb__copy_plan_build(&p, b, NULL, a, NULL, 1, below, 4);
  CHECK(p.row == plain);
  /* Rows: 2-D, dst rows padded so dims do not merge. */
  const int64_t row = DLB__STREAM_ROW_MIN / 4;
  int64_t shape[2] = {DLB__STREAM_MIN / DLB__STREAM_ROW_MIN, row};
  int64_t dstr[2] = {row + 16, 1};
  dlb__copy_plan_build(&p, b, dstr, a, NULL, 2, shape, 4);
  CHECK(p.row == stream);
  /* Shorter rows, following each other in src: whole lines stream, down
   * to one line; other lengths only into dst rows far apart. */
  int64_t short_rows[2] = {DLB__STREAM_MIN / DLB__STREAM_ROW_MIN * 2,
                           row / 2};
  dlb__copy_plan_build(&p, b, dstr, a, NULL, 2, short_rows, 4);
  CHECK(p.row == stream);
  const int64_t line = DLB__STREAM_SHORT_ROW_MIN / 4;
  int64_t one_line[2] = {DLB__STREAM_MIN / DLB__STREAM_SHORT_ROW_MIN, line};
  dlb__copy_plan_build(&p, b, dstr, a, NULL, 2, one_line, 4);
  CHECK(p.row == stream);
  int64_t under_line[2] = {DLB__STREAM_MIN / 32, line - 1};
  dlb__copy_plan_build(&p, b, dstr, a, NULL, 2, under_line, 4);
  CHECK(p.row == plain);
  int64_t odd[2] = {DLB__STREAM_MIN / 96 + 1, 24}; /* 96 bytes */
  int64_t near_dst[2] = {40, 1}, far_dst[2] = {DLB__STREAM_FAR_ROWS / 4, 1};
  int64_t just_near[2] = {DLB__STREAM_FAR_ROWS / 4 - 1, 1};
  dlb__copy_plan_build(&p, b, near_dst, a, NULL, 2, odd, 4);
  CHECK(p.row == plain);
  dlb__copy_plan_build(&p, b, just_near, a, NULL, 2, odd, 4);
  CHECK(p.row == plain);
  dlb__copy_plan_build(&p, b, far_dst, a, NULL, 2, odd, 4);
  CHECK(p.row == stream);
  /* Rows apart in src too stream from DLB__STREAM_ROW_MIN bytes on. */
  int64_t apart[2] = {row + 16, 1}, rows_at[2] = {shape[0], row},
          rows_below[2] = {shape[0] * 2, row - 1};
  dlb__copy_plan_build(&p, b, apart, a, apart, 2, rows_at, 4);
  CHECK(p.row == stream);
  dlb__copy_plan_build(&p, b, apart, a, apart, 2, rows_below, 4);
  CHECK(p.row == plain);
  /* Whole lines read from rows apart in src, into compact dst: plain. */
  int64_t sparse_src[2] = {row + 16, 1};
  dlb__copy_plan_build(&p, b, NULL, a, sparse_src, 2, short_rows, 4);
  CHECK(p.row == plain);
  /* The test hook turns it off. */
  dlb__copy_cap_isa(DLB__ISA_PORTABLE);
  dlb__copy_plan_build(&p, b, NULL, a, NULL, 1, at, 4);
  CHECK(p.row == plain);
  dlb__copy_cap_isa(-1);
}

/* The (64, 32, 16, 64) float32 tensor X permuted (2, 0, 1, 3): dst is
 * (16, 64, 32, 64), rows of 256 bytes that are contiguous in X too. The
 * loops around them go in src's order: the two middle dims merge (src
 * 4096 bytes apart) and the first, 256 bytes apart in src, goes inside.
 * At 8 MiB the rows stream, unfenced, and the plan fences. */
DLB_TEST(copy_plan_runs_contiguous_rows_in_src_order) {
  dlb__copy_plan p;
  static char a[1], b[1];
  int64_t shape[4] = {16, 64, 32, 64}, sstr[4] = {64, 32768, 1024, 1};
  CHECK_EQ_INT(16 * 64 * 32 * 64 * 4, DLB__STREAM_MIN);
  dlb__copy_plan_build(&p, b, NULL, a, sstr, 4, shape, 4);
  CHECK_EQ_INT(p.kind, DLB__COPY_ROWS);
  CHECK_EQ_INT(p.ndim, 3);
  CHECK_EQ_INT(p.shape[0], 2048);
  CHECK_EQ_INT(p.src_stride[0], 4096);
  CHECK_EQ_INT(p.dst_stride[0], 256);
  CHECK_EQ_INT(p.shape[1], 16);
  CHECK_EQ_INT(p.src_stride[1], 256);
  CHECK_EQ_INT(p.dst_stride[1], 524288);
  CHECK_EQ_INT(p.shape[2], 64);
  CHECK(p.row == dlb__row_kernel(4, 4, 4, 1));
  /* Non-temporal stores to fence where the build has them. */
  CHECK_EQ_INT(p.fence, DLB__HAVE_STREAM);
  /* The outer dim walked backwards in src: flipped to walk forwards, dst
   * from its last row. (The plan only: the memory is never touched.) */
  char *x = malloc((size_t)DLB__STREAM_MIN);
  char *y = malloc((size_t)DLB__STREAM_MIN);
  CHECK(x != NULL && y != NULL);
  int64_t back[4] = {-64, 32768, 1024, 1};
  dlb__copy_plan_build(&p, y, NULL, x + 15 * 256, back, 4, shape, 4);
  CHECK_EQ_INT(p.src_stride[1], 256);
  CHECK_EQ_INT(p.dst_stride[1], -524288);
  CHECK(p.src == x);
  CHECK(p.dst == y + 15 * 524288);
  free(x);
  free(y);
  /* Half the bytes: plain rows, nothing to fence, the same order. */
  int64_t half[4] = {8, 64, 32, 64};
  dlb__copy_plan_build(&p, b, NULL, a, sstr, 4, half, 4);
  CHECK_EQ_INT(p.fence, 0);
  CHECK(p.row == dlb__row_kernel(4, 4, 4, 0));
  CHECK_EQ_INT(p.shape[0], 2048);
  CHECK_EQ_INT(p.src_stride[1], 256);
  /* The test hook's portable rows are plain too. */
  dlb__copy_cap_isa(DLB__ISA_PORTABLE);
  dlb__copy_plan_build(&p, b, NULL, a, sstr, 4, shape, 4);
  dlb__copy_cap_isa(-1);
  CHECK_EQ_INT(p.fence, 0);
  CHECK(p.row == dlb__row_kernel(4, 4, 4, 0));
  /* Three loops around the rows, in dst's order the reverse of src's:
   * dst[a][b][c][:] = X[c][b][a][:] for X of (4, 3, 2, 64) float32. */
  int64_t three[4] = {2, 3, 4, 64}, xstr[4] = {64, 128, 384, 1};
  dlb__copy_plan_build(&p, b, NULL, a, xstr, 4, three, 4);
  CHECK_EQ_INT(p.kind, DLB__COPY_ROWS);
  CHECK_EQ_INT(p.ndim, 4);
  CHECK_EQ_INT(p.src_stride[0], 384 * 4);
  CHECK_EQ_INT(p.src_stride[1], 128 * 4);
  CHECK_EQ_INT(p.src_stride[2], 64 * 4);
  CHECK_EQ_INT(p.dst_stride[0], 64 * 4);
  CHECK_EQ_INT(p.dst_stride[2], 768 * 4);
  CHECK_EQ_INT(p.shape[3], 64);
  /* Rows dst may name twice keep dst's row-major order. */
  int64_t twice[4] = {16, 64, 32, 64}, tstr[4] = {0, 2048, 64, 1};
  dlb__copy_plan_build(&p, b, tstr, a, sstr, 4, twice, 4);
  CHECK_EQ_INT(p.parallel, 0);
  CHECK_EQ_INT(p.src_stride[0], 256);
  CHECK_EQ_INT(p.dst_stride[0], 0);
  /* Gathered rows keep dst's order. */
  int64_t gstr[4] = {128, 65536, 2048, 2};
  dlb__copy_plan_build(&p, b, NULL, a, gstr, 4, shape, 4);
  CHECK_EQ_INT(p.shape[0], 16);
  CHECK_EQ_INT(p.src_stride[0], 512);
}

/* A transposed pair goes to the tile kernel, two dimensions included,
 * when src steps DLB__TILE_MIN_STRIDE bytes or more along dst's rows and
 * less along the other dimension; below that, or at it on the other
 * dimension, rows run. (The plan only: the memory is never touched.) */
DLB_TEST(copy_plan_tiles_from_the_minimum_stride_on) {
  dlb__copy_plan p;
  static char a[1], b[1];
  /* dst (32, 16) float32, compact; src steps 1 element along dst's
   * columns and s along its rows. */
  int64_t shape[2] = {32, 16};
  const int64_t line = DLB__TILE_MIN_STRIDE / 4;
  int64_t at[2] = {1, line}, below[2] = {1, line - 1};
  dlb__copy_plan_build(&p, b, NULL, a, at, 2, shape, 4);
  CHECK_EQ_INT(p.kind, DLB__COPY_TILE);
  CHECK_EQ_INT(p.ndim, 2);
  CHECK(p.tile != NULL && p.row == NULL);
  /* The plane has unit steps on its fast sides: the kernel for them. */
  CHECK(p.tile == dlb__tile_kernel(4, 4, 4, 0));
  dlb__copy_plan_build(&p, b, NULL, a, below, 2, shape, 4);
  CHECK_EQ_INT(p.kind, DLB__COPY_ROWS);
  CHECK(p.row != NULL && p.tile == NULL);
  /* src walking its in-order dimension backwards: flipped to walk it
   * forwards, the same kernel. (Real memory: the plan moves src.) */
  static float m[32 * 16];
  int64_t back[2] = {-1, line};
  dlb__copy_plan_build(&p, b, NULL, (const char *)(m + 31), back, 2, shape,
                       4);
  CHECK_EQ_INT(p.kind, DLB__COPY_TILE);
  CHECK_EQ_INT(p.src_stride[0], 4);
  CHECK(p.src == (const char *)m);
  CHECK(p.tile == dlb__tile_kernel(4, 4, 4, 0));
  /* The other dimension a line apart in src: no pair to transpose. */
  int64_t other_at[2] = {line, line + 1}, other_below[2] = {line - 1, line + 1};
  dlb__copy_plan_build(&p, b, NULL, a, other_at, 2, shape, 4);
  CHECK_EQ_INT(p.kind, DLB__COPY_ROWS);
  dlb__copy_plan_build(&p, b, NULL, a, other_below, 2, shape, 4);
  CHECK_EQ_INT(p.kind, DLB__COPY_TILE);
  /* Three dimensions, dst (16, 16, 32) compact: the dimension src walks
   * in order (first or second) moves next to dst's last to make the
   * plane, the other stays outside it. */
  int64_t cube[3] = {16, 16, 32};
  int64_t first[3] = {1, 528, 16}, second[3] = {528, 1, 16};
  dlb__copy_plan_build(&p, b, NULL, a, first, 3, cube, 4);
  CHECK_EQ_INT(p.kind, DLB__COPY_TILE);
  CHECK_EQ_INT(p.ndim, 3);
  CHECK_EQ_INT(p.src_stride[0], 528 * 4);
  CHECK_EQ_INT(p.dst_stride[0], 32 * 4);
  CHECK_EQ_INT(p.src_stride[1], 4);
  CHECK_EQ_INT(p.dst_stride[1], 512 * 4);
  CHECK_EQ_INT(p.src_stride[2], 64);
  CHECK_EQ_INT(p.dst_stride[2], 4);
  CHECK(p.tile == dlb__tile_kernel(4, 4, 4, 0));
  dlb__copy_plan_build(&p, b, NULL, a, second, 3, cube, 4);
  CHECK_EQ_INT(p.kind, DLB__COPY_TILE);
  CHECK_EQ_INT(p.ndim, 3);
  CHECK_EQ_INT(p.src_stride[0], 528 * 4);
  CHECK_EQ_INT(p.dst_stride[0], 512 * 4);
  CHECK_EQ_INT(p.src_stride[1], 4);
  CHECK_EQ_INT(p.dst_stride[1], 32 * 4);
  CHECK_EQ_INT(p.dst_stride[2], 4);
}

/* Elements copy in units of the largest of 16, 8, 4, 2 and 1 bytes that
 * divides their size: a compact copy of any of them is one block copy of
 * those units. */
DLB_TEST(copy_plan_units_divide_the_element) {
  dlb__copy_plan p;
  static char a[1], b[1];
  const size_t sizes[] = {1, 2, 3, 4, 5, 6, 8, 12, 16, 24, 32, 48};
  const size_t units[] = {1, 2, 1, 4, 1, 2, 8, 4, 16, 8, 16, 16};
  int64_t shape[2] = {3, 5};
  for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++) {
    dlb__copy_plan_build(&p, b, NULL, a, NULL, 2, shape, sizes[i]);
    CHECK_EQ_INT(p.unit, units[i]);
    CHECK_EQ_INT(p.ndim, 1);
    CHECK_EQ_INT(p.shape[0], 15 * (int64_t)(sizes[i] / units[i]));
    CHECK(p.row == dlb__row_kernel(units[i], (int64_t)units[i],
                                   (int64_t)units[i], 0));
  }
}

/* A dst that names each element once is written in address order: the
 * loops are flipped to walk it forwards and sorted outermost = largest
 * step, so a reversed copy is one forward block copy and a transposed
 * dst is written a unit at a time. Rows contiguous on both sides stay
 * the innermost loop when others go in src's order, broadcast ones too. */
DLB_TEST(copy_plan_writes_dst_in_address_order) {
  dlb__copy_plan p;
  static float x[1000], y[1000];
  int64_t n[1] = {1000}, back[1] = {-1};
  dlb__copy_plan_build(&p, (char *)(y + 999), back, (const char *)(x + 999),
                       back, 1, n, 4);
  CHECK_EQ_INT(p.ndim, 1);
  CHECK_EQ_INT(p.dst_stride[0], 4);
  CHECK_EQ_INT(p.src_stride[0], 4);
  CHECK(p.dst == (char *)y);
  CHECK(p.src == (const char *)x);
  CHECK(p.row == dlb__row_kernel(4, 4, 4, 0));
  /* Both sides column-major, or with a dimension of one element: one
   * forward block copy too. */
  int64_t cm_shape[2] = {5, 3}, cm[2] = {1, 5};
  dlb__copy_plan_build(&p, (char *)y, cm, (const char *)x, cm, 2, cm_shape, 4);
  CHECK_EQ_INT(p.ndim, 1);
  CHECK_EQ_INT(p.shape[0], 15);
  CHECK(p.row == dlb__row_kernel(4, 4, 4, 0));
  /* The same gathering every second element of src: one strided row. */
  int64_t cm2[2] = {2, 10};
  dlb__copy_plan_build(&p, (char *)y, cm, (const char *)x, cm2, 2, cm_shape,
                       4);
  CHECK_EQ_INT(p.ndim, 1);
  CHECK_EQ_INT(p.shape[0], 15);
  CHECK_EQ_INT(p.dst_stride[0], 4);
  CHECK_EQ_INT(p.src_stride[0], 8);
  int64_t one_row[2] = {1, 1000};
  dlb__copy_plan_build(&p, (char *)y, NULL, (const char *)x, NULL, 2, one_row,
                       4);
  CHECK(p.parallel);
  CHECK_EQ_INT(p.ndim, 1);
  CHECK_EQ_INT(p.shape[0], 1000);
  CHECK(p.row == dlb__row_kernel(4, 4, 4, 0));
  /* dst (4, 6) transposed in memory, src compact. */
  int64_t shape[2] = {4, 6}, dstr[2] = {1, 4};
  dlb__copy_plan_build(&p, (char *)y, dstr, (const char *)x, NULL, 2, shape,
                       4);
  CHECK_EQ_INT(p.kind, DLB__COPY_ROWS);
  CHECK_EQ_INT(p.ndim, 2);
  CHECK_EQ_INT(p.shape[1], 4);
  CHECK_EQ_INT(p.dst_stride[1], 4);
  CHECK_EQ_INT(p.src_stride[1], 24);
  CHECK_EQ_INT(p.dst_stride[0], 16);
  /* Rows of 64 units, one src row broadcast to four dst rows. */
  int64_t rows[2] = {4, 64}, bcast[2] = {0, 1};
  static float z[256];
  dlb__copy_plan_build(&p, (char *)z, NULL, (const char *)x, bcast, 2, rows,
                       4);
  CHECK_EQ_INT(p.ndim, 2);
  CHECK_EQ_INT(p.shape[1], 64);
  CHECK_EQ_INT(p.dst_stride[1], 4);
  CHECK_EQ_INT(p.src_stride[1], 4);
  CHECK_EQ_INT(p.src_stride[0], 0);
  CHECK(p.row == dlb__row_kernel(4, 4, 4, 0));
}

/* Tile plans loop over their planes in src's order. A streamed one
 * leaves its fence to the plan; a small one has none to do. */
DLB_TEST(copy_plan_fences_streamed_tiles) {
  dlb__copy_plan p;
  static char a[1], b[1];
  /* dst[i][j][k][l] = src[l][j][i][k] for 48^4 float32 (20 MiB), then
   * for 32^4 (4 MiB). The planes are (k, l); around them j (48^2 units
   * apart on both sides) goes outside i (48^3 apart in dst, 48 in src),
   * where dst's order had it inside. */
  int64_t big[4] = {48, 48, 48, 48}, bs[4] = {48, 48 * 48, 1, 48 * 48 * 48};
  dlb__copy_plan_build(&p, b, NULL, a, bs, 4, big, 4);
  CHECK_EQ_INT(p.kind, DLB__COPY_TILE);
  CHECK_EQ_INT(p.ndim, 4);
  CHECK_EQ_INT(p.src_stride[0], 48 * 48 * 4);
  CHECK_EQ_INT(p.dst_stride[0], 48 * 48 * 4);
  CHECK_EQ_INT(p.src_stride[1], 48 * 4);
  CHECK_EQ_INT(p.dst_stride[1], 48 * 48 * 48 * 4);
  CHECK_EQ_INT(p.src_stride[2], 4);
  CHECK_EQ_INT(p.dst_stride[3], 4);
  CHECK_EQ_INT(p.fence, 1);
  /* (32, 32, 32, 64): DLB__STREAM_MIN bytes exactly, and a plane less. */
  int64_t at[4] = {32, 32, 32, 64}, below[4] = {32, 32, 32, 63};
  int64_t as[4] = {32, 32 * 32, 1, 32 * 32 * 32};
  CHECK_EQ_INT(32 * 32 * 32 * 64 * 4, DLB__STREAM_MIN);
  dlb__copy_plan_build(&p, b, NULL, a, as, 4, at, 4);
  CHECK_EQ_INT(p.kind, DLB__COPY_TILE);
  CHECK_EQ_INT(p.fence, 1);
  dlb__copy_plan_build(&p, b, NULL, a, as, 4, below, 4);
  CHECK_EQ_INT(p.kind, DLB__COPY_TILE);
  CHECK_EQ_INT(p.fence, 0);
  int64_t small[4] = {32, 32, 32, 32}, ss[4] = {32, 32 * 32, 1, 32 * 32 * 32};
  dlb__copy_plan_build(&p, b, NULL, a, ss, 4, small, 4);
  CHECK_EQ_INT(p.kind, DLB__COPY_TILE);
  CHECK_EQ_INT(p.fence, 0);
}

/* A CPU tensor of unsigned integers of `bits` bits. */
static DLTensor uint_tensor(void *data, int bits, int32_t ndim,
                            int64_t *shape, int64_t *strides,
                            uint64_t offset) {
  DLTensor t;
  memset(&t, 0, sizeof t);
  t.data = data;
  t.device.device_type = kDLCPU;
  t.ndim = ndim;
  t.dtype.code = kDLUInt;
  t.dtype.bits = (uint8_t)bits;
  t.dtype.lanes = 1;
  t.shape = shape;
  t.strides = strides;
  t.byte_offset = offset;
  return t;
}

static DLTensor flat_u8(void *data, int64_t *shape, uint64_t offset) {
  return uint_tensor(data, 8, 1, shape, NULL, offset);
}

/* dlb_copy just below, at and above the threshold, from and to odd
 * offsets, on one thread and on several: every byte lands, none around. */
DLB_TEST(copy_contiguous_around_the_stream_threshold) {
  const size_t cap = (size_t)DLB__STREAM_MIN + 4096;
  unsigned char *src = malloc(cap), *dst = malloc(cap);
  CHECK(src != NULL && dst != NULL);
  fill(src, cap, 5);
  const int64_t sizes[] = {DLB__STREAM_MIN - 1, DLB__STREAM_MIN,
                           DLB__STREAM_MIN + 61};
  const uint64_t offs[][2] = {{0, 0}, {3, 17}, {63, 1}};
  for (int threads = 1; threads <= 3; threads += 2) {
    dlb_copy_set_threads(threads);
    for (size_t k = 0; k < sizeof sizes / sizeof sizes[0]; k++)
      for (size_t o = 0; o < sizeof offs / sizeof offs[0]; o++) {
        memset(dst, 0xa5, cap);
        int64_t shape[1] = {sizes[k]};
        DLTensor s = flat_u8(src, shape, offs[o][0]);
        DLTensor d = flat_u8(dst, shape, offs[o][1]);
        CHECK_OK(dlb_copy(&s, &d));
        const size_t n = (size_t)sizes[k], d0 = (size_t)offs[o][1];
        if (memcmp(dst + d0, src + offs[o][0], n) != 0)
          dlb_test_failed(__FILE__, __LINE__, "size %zu offsets %d: bytes",
                          n, (int)o);
        for (size_t i = 0; i < d0; i++) CHECK_EQ_INT(dst[i], 0xa5);
        for (size_t i = d0 + n; i < cap; i++) CHECK_EQ_INT(dst[i], 0xa5);
      }
  }
  free(src);
  free(dst);
}

/* Rows of a large padded 2-D copy stream one by one; the padding between
 * them stays. */
DLB_TEST(copy_streamed_rows_keep_the_gaps) {
  const int64_t cols = 1000, rows = DLB__STREAM_MIN / cols / 4 + 3;
  const int64_t pitch = cols + 9; /* elements */
  uint32_t *src = malloc((size_t)(rows * cols) * 4);
  uint32_t *dst = malloc((size_t)(rows * pitch) * 4);
  CHECK(src != NULL && dst != NULL);
  for (int64_t i = 0; i < rows * cols; i++) src[i] = (uint32_t)(i * 7 + 1);
  for (int64_t i = 0; i < rows * pitch; i++) dst[i] = 0xdeadbeefu;
  int64_t shape[2] = {rows, cols}, dstr[2] = {pitch, 1};
  DLTensor s = uint_tensor(src, 32, 2, shape, NULL, 0);
  DLTensor d = uint_tensor(dst, 32, 2, shape, dstr, 0);
  dlb_copy_set_threads(1);
  CHECK_OK(dlb_copy(&s, &d));
  for (int64_t r = 0; r < rows; r++)
    for (int64_t c = 0; c < pitch; c++) {
      uint32_t want = c < cols ? src[r * cols + c] : 0xdeadbeefu;
      if (dst[r * pitch + c] != want)
        dlb_test_failed(__FILE__, __LINE__, "dst[%lld][%lld]", (long long)r,
                        (long long)c);
    }
  free(src);
  free(dst);
}

/* One plane through a tile kernel against element-by-element reference:
 * nb x na units, src rows (along a) src_a bytes apart, dst rows (along b)
 * dst_b bytes apart, dst at offset doff from a line; bytes between rows
 * and around the plane stay. */
static void check_plane(size_t unit, int64_t nb, int64_t na, int64_t pad_s,
                        int64_t pad_d, int64_t doff, int stream) {
  const int64_t u = (int64_t)unit;
  const int64_t src_a = nb * u + pad_s, dst_b = na * u + pad_d;
  const size_t sbytes = (size_t)(na * src_a + 64);
  const size_t dbytes = (size_t)(nb * dst_b + 128);
  unsigned char *sbuf = NULL, *dbuf = NULL, *want = malloc(dbytes);
  CHECK(posix_memalign((void **)&sbuf, 64, sbytes) == 0);
  CHECK(posix_memalign((void **)&dbuf, 64, dbytes) == 0);
  CHECK(want != NULL);
  fill(sbuf, sbytes, (unsigned)(nb * 31 + na));
  fill(dbuf, dbytes, 9);
  memcpy(want, dbuf, dbytes);
  const unsigned char *src = sbuf + 16;
  unsigned char *dst = dbuf + doff;
  for (int64_t b = 0; b < nb; b++)
    for (int64_t a = 0; a < na; a++)
      memcpy(want + doff + b * dst_b + a * u, src + a * src_a + b * u, unit);
  dlb__tile_fn fn = dlb__tile_kernel(unit, u, u, stream);
  /* The next plane is this one again: only prefetched, never read. */
  fn((char *)dst, dst_b, u, (const char *)src, u, src_a, nb, na,
     (const char *)dst, (const char *)src);
  if (memcmp(dbuf, want, dbytes) != 0)
    dlb_test_failed(__FILE__, __LINE__,
                    "unit %zu plane %lld x %lld pads %lld/%lld dst offset "
                    "%lld stream %d",
                    unit, (long long)nb, (long long)na, (long long)pad_s,
                    (long long)pad_d, (long long)doff, stream);
  free(sbuf);
  free(dbuf);
  free(want);
}

/* Planes that fill whole strips, partial strips, ragged rows and columns,
 * for every unit, aligned (non-temporal stores) and not (dst off a line,
 * or its rows not whole lines apart), with the kernels of every
 * instruction set this machine has. */
static void tile_kernels_every_unit_shape_and_alignment(void) {
  const size_t units[] = {1, 2, 4, 8, 16};
  for (size_t k = 0; k < 5; k++) {
    const int64_t line = 64 / (int64_t)units[k];
    const int64_t sizes[] = {1, line - 1, line, line + 3, 2 * line,
                             3 * line + 5, 4 * line};
    for (size_t i = 0; i < 7; i++)
      for (size_t j = 0; j < 7; j += (i % 2) + 1)
        for (int stream = 0; stream < 2; stream++) {
          const int64_t nb = sizes[i] > 0 ? sizes[i] : 1;
          const int64_t na = sizes[j] > 0 ? sizes[j] : 1;
          check_plane(units[k], nb, na, 0, 0, 0, stream);
          check_plane(units[k], nb, na, 64 - (int64_t)units[k],
                      64 - (na * (int64_t)units[k]) % 64, 0, stream);
          check_plane(units[k], nb, na, 7 * (int64_t)units[k],
                      (int64_t)units[k], 3, stream);
          /* Rows whole lines apart from a dst that starts off a line:
           * no non-temporal store, which needs aligned addresses. */
          check_plane(units[k], nb, na, 0,
                      64 - (na * (int64_t)units[k]) % 64, 1, stream);
          check_plane(units[k], nb, na, 0,
                      64 - (na * (int64_t)units[k]) % 64, 32, stream);
        }
  }
}

DLB_TEST(tile_kernels_every_unit_shape_and_alignment) {
  tile_kernels_every_unit_shape_and_alignment();
}

DLB_TEST(tile_kernels_every_unit_shape_and_alignment_sse2) {
  dlb__copy_cap_isa(DLB__ISA_V128);
  tile_kernels_every_unit_shape_and_alignment();
  dlb__copy_cap_isa(-1);
}

DLB_TEST(tile_kernels_every_unit_shape_and_alignment_avx2) {
  dlb__copy_cap_isa(DLB__ISA_AVX2);
  tile_kernels_every_unit_shape_and_alignment();
  dlb__copy_cap_isa(-1);
}

/* A plane with whole strips goes through the strips of the level the
 * kernels run at, for every unit (none at the portable level, which has
 * no strips, nor for 16-byte units on builds whose 128-bit vectors have
 * no non-temporal store). */
DLB_TEST(tile_kernels_run_the_strips_of_their_level) {
  const size_t units[] = {1, 2, 4, 8, 16};
  for (int level = DLB__ISA_PORTABLE; level <= DLB__ISA_AVX512; level++) {
    dlb__copy_cap_isa(level);
    const int isa = dlb__copy_isa();
    for (size_t k = 0; k < 5; k++) {
      dlb__strips_forget();
      const int64_t line = 64 / (int64_t)units[k];
      check_plane(units[k], 2 * line, 2 * DLB__STRIP_BYTES / (int64_t)units[k],
                  0, 0, 0, 1);
      int want = isa != DLB__ISA_PORTABLE ? isa : -1;
#if defined(DLB__V128_GENERIC)
      if (isa == DLB__ISA_V128 && units[k] == 16) want = -1;
#endif
      if (dlb__strips_last_level() != want)
        dlb_test_failed(__FILE__, __LINE__,
                        "unit %zu at level %d: the strips of level %d ran",
                        units[k], isa, dlb__strips_last_level());
    }
  }
  dlb__copy_cap_isa(-1);
}

/* The register kernels' strips keep their loads off the low 12 bits of
 * the dst runs their non-temporal stores wait on: planes whose dst rows are
 * 4 KiB apart (every run at the same low 12 bits) or 6 KiB apart (at two,
 * 2 KiB apart), with strips at every offset of those rows (src's rows
 * padded, so that the strips are not the tall ones of a block of src),
 * once to find where the strips' stack is (that strip is not counted),
 * then counted. The stack pointer stays near half that period away; the
 * AVX2 1-byte pairs' L1 buffers leave runs 4 KiB apart 64 bytes on either
 * side, the 2-byte tiles' over 1 KiB. */
DLB_TEST(tile_strips_keep_their_loads_off_their_runs) {
  const size_t units[] = {1, 2, 4, 8, 16};
  int levels = 0;
  for (int level = DLB__ISA_AVX2; level <= DLB__ISA_AVX512; level++) {
    dlb__copy_cap_isa(level);
    if (dlb__copy_isa() != level) continue;
    levels++;
    for (size_t k = 0; k < 5; k++)
      for (int64_t pad_d = 0; pad_d <= 2048; pad_d += 2048) {
        const int64_t u = (int64_t)units[k];
        check_plane(units[k], 64 / u, 4096 / u, 64, pad_d, 0, 1);
        dlb__strips_forget();
        check_plane(units[k], 64 / u, 4096 / u, 64, pad_d, 0, 1);
        const dlb__strips_nearest n = dlb__strips_nearest_seen();
        const int64_t want_stack = pad_d == 0 ? 1024 : 512;
        int64_t want_buffers = 0;
        if (level == DLB__ISA_AVX2 && u <= 2 && pad_d == 0)
          want_buffers = u == 1 ? 64 : 1024;
        if (n.strips < 8 || n.stack < want_stack || n.buffers < want_buffers)
          dlb_test_failed(__FILE__, __LINE__,
                          "unit %lld at level %d, dst rows %lld bytes "
                          "apart: %lld strips counted, the stack came "
                          "within %lld bytes of their runs, the buffers "
                          "within %lld (want 8 strips, %lld and %lld)",
                          (long long)u, level, (long long)(4096 + pad_d),
                          (long long)n.strips, (long long)n.stack,
                          (long long)n.buffers, (long long)want_stack,
                          (long long)want_buffers);
      }
  }
  dlb__copy_cap_isa(-1);
#if DLB__HAVE_WIDE
  if (levels == 0 && __builtin_cpu_supports("avx2"))
    dlb_test_failed(__FILE__, __LINE__, "no register strips ran");
#else
  (void)levels;
#endif
}

/* Strips long enough for several chunks and strips per plane, so that each
 * chunk prefetches the next, the next strip's and the next plane's lines;
 * the element checks are those of check_plane. A chunk of the register
 * kernels is 16 KiB of src, at least four lines of each row. */
DLB_TEST(tile_kernels_many_strips_and_chunks) {
  const size_t units[] = {1, 2, 4, 8, 16};
  for (int level = DLB__ISA_V128; level <= DLB__ISA_AVX512; level++) {
    dlb__copy_cap_isa(level);
    for (size_t k = 0; k < 5; k++) {
      const int64_t line = 64 / (int64_t)units[k];
      const int64_t strip = DLB__STRIP_BYTES / (int64_t)units[k];
      /* Two whole chunks of the register kernels and a part of one. */
      const int64_t chunks = 2 * dlb__chunk_lines(units[k]) * line + line;
      check_plane(units[k], 9 * line, 3 * strip + line, 0, 0, 0, 1);
      check_plane(units[k], chunks, 3 * strip + line, 0, 0, 0, 1);
      check_plane(units[k], 5 * line + 1, 2 * strip + 2 * line + 3, 64, 64,
                  0, 1);
      /* Strips walked up to four side by side (transpose_avx2.c), whole
       * and then a shorter last one. */
      check_plane(units[k], chunks, 9 * strip + line, 0, 0, 0, 1);
    }
  }
  dlb__copy_cap_isa(-1);
}

DLB_TEST(copy_chunks_are_16_kib_of_src_and_four_lines_at_least) {
  CHECK_EQ_INT(dlb__chunk_lines(1), 4);
  CHECK_EQ_INT(dlb__chunk_lines(2), 4);
  CHECK_EQ_INT(dlb__chunk_lines(4), 8);
  CHECK_EQ_INT(dlb__chunk_lines(8), 16);
  CHECK_EQ_INT(dlb__chunk_lines(16), 32);
}

/* Tall planes: 4096 bytes of each dst row and a ragged part, many strips
 * each, for every unit and level. */
DLB_TEST(tile_kernels_tall_planes) {
  const size_t units[] = {1, 2, 4, 8, 16};
  for (int level = DLB__ISA_V128; level <= DLB__ISA_AVX512; level++) {
    dlb__copy_cap_isa(level);
    for (size_t k = 0; k < 5; k++) {
      const int64_t line = 64 / (int64_t)units[k];
      const int64_t tall = 2048 / (int64_t)units[k];
      check_plane(units[k], 3 * line + 1, 2 * tall + 3 * line + 1, 0, 0, 0,
                  1);
      check_plane(units[k], 2 * line, tall, 64, 0, 0, 1);
    }
  }
  dlb__copy_cap_isa(-1);
}

/* Planes whose src rows follow each other within one chunk (a
 * permutation's planes): strips DLB__TALL_STRIP_BYTES tall, each dst row's
 * run written whole from a buffer; whole and partial tall strips, one or
 * several lines of src rows, aligned dst (streamed) and not, every unit
 * and level. */
DLB_TEST(tile_kernels_planes_read_as_one_block) {
  const size_t units[] = {1, 2, 4, 8, 16};
  for (int level = DLB__ISA_V128; level <= DLB__ISA_AVX512; level++) {
    dlb__copy_cap_isa(level);
    for (size_t k = 0; k < 5; k++) {
      const int64_t u = (int64_t)units[k], line = 64 / u;
      const int64_t tall = DLB__TALL_STRIP_BYTES / u;
      const int64_t chunk = dlb__chunk_lines(units[k]) * line;
      const int64_t widths[] = {line, 2 * line, chunk};
      for (size_t w = 0; w < 3; w++)
        for (int stream = 0; stream < 2; stream++) {
          check_plane(units[k], widths[w], tall, 0, 0, 0, stream);
          check_plane(units[k], widths[w], 2 * tall + line, 0, 0, 0, stream);
          check_plane(units[k], widths[w], tall + 2 * line + 3, 0, 64, 0,
                      stream);
          check_plane(units[k], widths[w], 3 * line, 0, u, 5, stream);
        }
    }
  }
  dlb__copy_cap_isa(-1);
}

/* The cap chooses the instruction set; without it the best one this build
 * and CPU have is used. */
DLB_TEST(copy_isa_follows_the_cap) {
  dlb__copy_cap_isa(-1);
  const int best = dlb__copy_isa();
#if DLB__HAVE_V128
  if (dlb__copy_isa_parse(getenv("DLBRIDGE_COPY_ISA")) != DLB__ISA_PORTABLE)
    CHECK(best >= DLB__ISA_V128);
#else
  CHECK_EQ_INT(best, DLB__ISA_PORTABLE);
#endif
#if DLB__HAVE_WIDE
  __builtin_cpu_init();
  const int has_avx512 = __builtin_cpu_supports("avx512f") &&
                         __builtin_cpu_supports("avx512bw") &&
                         __builtin_cpu_supports("avx512vbmi");
  const int cpu = has_avx512                        ? DLB__ISA_AVX512
                  : __builtin_cpu_supports("avx2") ? DLB__ISA_AVX2
                                                   : DLB__ISA_V128;
  const int asked = dlb__copy_isa_parse(getenv("DLBRIDGE_COPY_ISA"));
  CHECK_EQ_INT(best, asked >= 0 && asked < cpu ? asked : cpu);
#endif
  for (int level = DLB__ISA_PORTABLE; level <= DLB__ISA_AVX512; level++) {
    dlb__copy_cap_isa(level);
    CHECK_EQ_INT(dlb__copy_isa(), best < level ? best : level);
  }
  dlb__copy_cap_isa(-1);
  CHECK_EQ_INT(dlb__copy_isa(), best);
}

/* Under the test hook's portable level the tile kernels are the plain
 * strided ones for unit steps too, as the row kernels are plain block
 * copies: the portable tests run the portable code. */
DLB_TEST(copy_portable_cap_takes_the_strided_tile_kernels) {
  const size_t units[] = {1, 2, 4, 8, 16};
  for (size_t i = 0; i < 5; i++) {
    const int64_t u = (int64_t)units[i];
    const dlb__tile_fn strided = dlb__tile_kernel(units[i], 2 * u, u, 0);
    dlb__copy_cap_isa(DLB__ISA_PORTABLE);
    const dlb__tile_fn plain = dlb__tile_kernel(units[i], u, u, 0);
    const dlb__tile_fn streamed = dlb__tile_kernel(units[i], u, u, 1);
    dlb__copy_cap_isa(-1);
    CHECK(plain == strided);
    CHECK(streamed == strided);
  }
}

/* dlb_copy_kernels names the level in use, the cap included. */
DLB_TEST(copy_kernels_names_the_level) {
  static const char *const names[] = {"portable", V128_NAME, "avx2",
                                      "avx512"};
  dlb__copy_cap_isa(-1);
  const int best = dlb__copy_isa();
  for (int level = DLB__ISA_PORTABLE; level <= DLB__ISA_AVX512; level++) {
    dlb__copy_cap_isa(level);
    CHECK_STR(dlb_copy_kernels(), names[level < best ? level : best]);
  }
  dlb__copy_cap_isa(-1);
  CHECK_STR(dlb_copy_kernels(), names[best]);
}

/* dlb_copy_set_kernels caps the level by name, NULL lifts the cap, and
 * any other name is refused with the name in the message, changing
 * nothing. */
DLB_TEST(copy_set_kernels_caps_by_name) {
  static const char *const names[] = {"portable", V128_NAME, "avx2",
                                      "avx512"};
  CHECK_OK(dlb_copy_set_kernels(NULL));
  const int best = dlb__copy_isa();
  for (int level = DLB__ISA_PORTABLE; level <= DLB__ISA_AVX512; level++) {
    CHECK_OK(dlb_copy_set_kernels(names[level]));
    CHECK_EQ_INT(dlb__copy_isa(), level < best ? level : best);
    CHECK_STR(dlb_copy_kernels(), names[level < best ? level : best]);
  }
  /* Either name of the 128-bit level caps there. */
  CHECK_OK(dlb_copy_set_kernels("neon"));
  CHECK_EQ_INT(dlb__copy_isa(), best < DLB__ISA_V128 ? best : DLB__ISA_V128);
  CHECK_OK(dlb_copy_set_kernels(NULL));
  CHECK_OK(dlb_copy_set_kernels("sse2"));
  CHECK_STATUS(dlb_copy_set_kernels("avx1024"), DLB_E_INVAL);
  CHECK_ERROR_MENTIONS("\"avx1024\"");
  CHECK_ERROR_MENTIONS("portable, sse2, neon, avx2, avx512");
  CHECK_STATUS(dlb_copy_set_kernels(""), DLB_E_INVAL);
  CHECK_EQ_INT(dlb__copy_isa(), best < DLB__ISA_V128 ? best : DLB__ISA_V128);
  CHECK_OK(dlb_copy_set_kernels(NULL));
  CHECK_EQ_INT(dlb__copy_isa(), best);
}

/* The names DLBRIDGE_COPY_ISA takes; anything else asks for nothing. */
DLB_TEST(copy_isa_names) {
  CHECK_EQ_INT(dlb__copy_isa_parse("portable"), DLB__ISA_PORTABLE);
  CHECK_EQ_INT(dlb__copy_isa_parse("sse2"), DLB__ISA_V128);
  CHECK_EQ_INT(dlb__copy_isa_parse("neon"), DLB__ISA_V128);
  CHECK_EQ_INT(dlb__copy_isa_parse("avx2"), DLB__ISA_AVX2);
  CHECK_EQ_INT(dlb__copy_isa_parse("avx512"), DLB__ISA_AVX512);
  CHECK_EQ_INT(dlb__copy_isa_parse(NULL), -1);
  CHECK_EQ_INT(dlb__copy_isa_parse(""), -1);
  CHECK_EQ_INT(dlb__copy_isa_parse("AVX512"), -1);
  CHECK_EQ_INT(dlb__copy_isa_parse("avx"), -1);
  CHECK_EQ_INT(dlb__copy_isa_parse("sse2 "), -1);
}

/* Gathers of every unit with src steps of 1 to 5 units and both signs,
 * rows of 0 to 70 units, from odd offsets: src is allocated to the byte
 * it needs (AddressSanitizer sees any read past it) and dst's
 * neighbours stay. */
DLB_TEST(gather_kernels_every_step_and_length) {
  const size_t units[] = {1, 2, 4, 8, 16};
  for (size_t ui = 0; ui < 5; ui++) {
    const int64_t u = (int64_t)units[ui];
    for (int64_t k = -5; k <= 5; k++) {
      for (int stream = 0; stream < 2 && k != 0; stream++) {
      /* stream only changes contiguous rows; gathers ignore it. */
      const dlb__row_fn fn = dlb__row_kernel(units[ui], u, k * u, stream);
      for (int64_t n = 0; n <= 70; n++) {
        const int64_t span = n == 0 ? 0 : ((n - 1) * (k < 0 ? -k : k) + 1) * u;
        unsigned char *src = malloc((size_t)span + 3);
        unsigned char *dst = malloc((size_t)(n * u) + 8);
        unsigned char *want = malloc((size_t)(n * u) + 8);
        CHECK(src != NULL && dst != NULL && want != NULL);
        fill(src, (size_t)span + 3, (unsigned)(n + k));
        fill(dst, (size_t)(n * u) + 8, 77);
        memcpy(want, dst, (size_t)(n * u) + 8);
        /* The first unit read: the last of the span for a negative step. */
        const unsigned char *first =
            src + 3 + (k < 0 ? span - u : 0);
        for (int64_t i = 0; i < n; i++)
          memcpy(want + 5 + i * u, first + i * k * u, (size_t)u);
        if (n > 0) fn((char *)dst + 5, u, (const char *)first, k * u, n);
        if (memcmp(dst, want, (size_t)(n * u) + 8) != 0)
          dlb_test_failed(__FILE__, __LINE__, "unit %lld step %lld n %lld",
                          (long long)u, (long long)k, (long long)n);
        free(src);
        free(dst);
        free(want);
      }
      }
    }
  }
}

/* Steps the shuffling gathers serve get their own kernel on SSE2 builds;
 * the test hook (and every other step) gets the unrolled scalar one. */
DLB_TEST(gather_kernels_shuffle_where_the_step_allows) {
  struct { size_t unit; int64_t step; } cases[] = {
      {1, 2}, {2, 4}, {4, 8}, {8, 16}, {4, 12}};
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    const size_t u = cases[i].unit;
    dlb__row_fn fast = dlb__row_kernel(u, (int64_t)u, cases[i].step, 0);
    dlb__copy_cap_isa(DLB__ISA_PORTABLE);
    dlb__row_fn plain = dlb__row_kernel(u, (int64_t)u, cases[i].step, 0);
    dlb__copy_cap_isa(-1);
    /* A step with no shuffling kernel: the same scalar gather. */
    dlb__row_fn other = dlb__row_kernel(u, (int64_t)u, 5 * (int64_t)u, 0);
    CHECK(plain == other);
#if defined(__SSE2__)
    CHECK(fast != plain);
#else
    CHECK(fast == plain);
#endif
  }
  /* Three units apart is shuffled for 4-byte units only. */
  CHECK(dlb__row_kernel(8, 8, 24, 0) == dlb__row_kernel(8, 8, 40, 0));
}

/* Gathers whose rows leave a gap of DLB__AHEAD_CHUNK bytes or more run in
 * chunks that prefetch the next row; rows that follow each other, wide
 * steps (a line per unit) and single rows run whole. */
DLB_TEST(copy_plan_runs_gathers_ahead_over_gaps_between_rows) {
  dlb__copy_plan p;
  static char a[1], b[1];
  /* float32 [::2, ::3] of 4096^2: 12-byte steps, rows 32 KiB apart. */
  int64_t shape[2] = {2048, 1366}, every3[2] = {8192, 3};
  dlb__copy_plan_build(&p, b, NULL, a, every3, 2, shape, 4);
  CHECK_EQ_INT(p.ahead_units, DLB__AHEAD_CHUNK / 12 / 16 * 16);
  /* [::2, :]: whole rows, a row apart. */
  int64_t half_rows[2] = {2048, 4096}, every_row2[2] = {8192, 1};
  dlb__copy_plan_build(&p, b, NULL, a, every_row2, 2, half_rows, 4);
  CHECK_EQ_INT(p.ahead_units, DLB__AHEAD_CHUNK / 4);
  /* [:, ::3]: the next row starts where this one ends. */
  int64_t all_rows[2] = {4096, 1366}, next_row[2] = {4096, 3};
  dlb__copy_plan_build(&p, b, NULL, a, next_row, 2, all_rows, 4);
  CHECK_EQ_INT(p.ahead_units, 0);
  /* A gap just short of a chunk, then exactly one. */
  int64_t rows[2] = {64, 100};
  int64_t short_gap[2] = {200 + DLB__AHEAD_CHUNK / 4 - 1, 2};
  int64_t chunk_gap[2] = {200 + DLB__AHEAD_CHUNK / 4, 2};
  dlb__copy_plan_build(&p, b, NULL, a, short_gap, 2, rows, 4);
  CHECK_EQ_INT(p.ahead_units, 0);
  dlb__copy_plan_build(&p, b, NULL, a, chunk_gap, 2, rows, 4);
  CHECK_EQ_INT(p.ahead_units, DLB__AHEAD_CHUNK / 8 / 16 * 16);
  /* The widest step that runs ahead: chunks in whole rounds of 16. */
  int64_t step15[2] = {1500 + DLB__AHEAD_CHUNK, 15};
  dlb__copy_plan_build(&p, b, NULL, a, step15, 2, rows, 4);
  CHECK_EQ_INT(p.ahead_units, 64);
  /* Bytes gathered 63 apart still run ahead; a line apart exactly, with
   * a chunk's gap between rows, not. */
  int64_t step63[2] = {6300 + DLB__AHEAD_CHUNK, 63};
  dlb__copy_plan_build(&p, b, NULL, a, step63, 2, rows, 1);
  CHECK_EQ_INT(p.ahead_units, DLB__AHEAD_CHUNK / 63 / 16 * 16);
  int64_t step16[2] = {1600 + DLB__AHEAD_CHUNK / 4, 16};
  dlb__copy_plan_build(&p, b, NULL, a, step16, 2, rows, 4);
  CHECK_EQ_INT(p.ahead_units, 0);
  /* Units a line apart or more: every unit is its own line anyway. */
  int64_t wide[2] = {8192, 16};
  dlb__copy_plan_build(&p, b, NULL, a, wide, 2, shape, 4);
  CHECK_EQ_INT(p.ahead_units, 0);
  /* One row: nothing to prefetch. */
  int64_t one[1] = {1366}, step3[1] = {3};
  dlb__copy_plan_build(&p, b, NULL, a, step3, 1, one, 4);
  CHECK_EQ_INT(p.ahead_units, 0);
}

/* Such gathers run in bands when their rows read DLB__BAND_MIN bytes or
 * more, and only into a dst that names each element once. */
DLB_TEST(copy_plan_runs_large_gathers_in_bands) {
  dlb__copy_plan p;
  static char a[1], b[1];
  const int64_t band_units_12 = DLB__BAND_CHUNK / 12 / 16 * 16;
  CHECK(band_units_12 >= 16);
  /* float32 [::2, ::3] of 4096^2: 2048 rows of 16 KiB read. */
  int64_t shape[2] = {2048, 1366}, every3[2] = {8192, 3};
  dlb__copy_plan_build(&p, b, NULL, a, every3, 2, shape, 4);
  CHECK_EQ_INT(p.band_units, band_units_12);
  /* Half as many rows read half as much: one row at a time. */
  int64_t half[2] = {1024, 1366};
  dlb__copy_plan_build(&p, b, NULL, a, every3, 2, half, 4);
  CHECK(p.ahead_units > 0);
  CHECK_EQ_INT(p.band_units, 0);
  /* Every second unit of 1024-unit rows, 8 bytes a unit read: exactly
   * DLB__BAND_MIN bytes, then a row fewer. */
  const int64_t rows_at_min = DLB__BAND_MIN / (8 * 1024);
  int64_t at_min[2] = {rows_at_min, 1024}, below[2] = {rows_at_min - 1, 1024};
  int64_t every2[2] = {3072, 2};
  dlb__copy_plan_build(&p, b, NULL, a, every2, 2, at_min, 4);
  CHECK_EQ_INT(p.band_units, DLB__BAND_CHUNK / 8 / 16 * 16);
  dlb__copy_plan_build(&p, b, NULL, a, every2, 2, below, 4);
  CHECK(p.ahead_units > 0);
  CHECK_EQ_INT(p.band_units, 0);
  /* A dst writing every row over the same row: in order, whole. */
  int64_t same_row[2] = {0, 1};
  dlb__copy_plan_build(&p, b, same_row, a, every3, 2, shape, 4);
  CHECK(p.ahead_units > 0);
  CHECK_EQ_INT(p.band_units, 0);
  /* Units 63 bytes apart: chunks of 16 units, the fewest the gathers
   * take. */
  int64_t wide_rows[2] = {DLB__BAND_MIN / (63 * 1024) + 1, 1024};
  int64_t step63[2] = {63 * 1024 + DLB__AHEAD_CHUNK, 63};
  dlb__copy_plan_build(&p, b, NULL, a, step63, 2, wide_rows, 1);
  CHECK_EQ_INT(p.band_units, 16);
  /* Bytes read past what int64 holds count as more than enough: 2^58
   * bytes, every 63rd read (the plan reads no memory). */
  int64_t huge[2] = {(int64_t)1 << 34, (int64_t)1 << 24};
  int64_t huge_strides[2] = {(int64_t)1 << 30, 63};
  dlb__copy_plan_build(&p, b, NULL, a, huge_strides, 2, huge, 1);
  CHECK_EQ_INT(p.band_units, 16);
}

/* Compares every unit of dst (compact over shape, or rows dst_pitch units
 * apart with the rest left at 0xa5) with src at first + the strides. */
static void check_gathered(const unsigned char *src, int64_t first,
                           const int64_t *sstr, const unsigned char *dst,
                           int64_t dst_pitch, int32_t nd,
                           const int64_t *shape, size_t u, const char *what) {
  const int64_t n = shape[nd - 1];
  int64_t rows = 1;
  for (int32_t i = 0; i < nd - 1; i++) rows *= shape[i];
  for (int64_t r = 0; r < rows; r++) {
    int64_t so = first, rem = r;
    for (int32_t i = nd - 2; i >= 0; i--) {
      so += rem % shape[i] * sstr[i];
      rem /= shape[i];
    }
    for (int64_t j = 0; j < dst_pitch; j++) {
      const unsigned char *got = dst + (size_t)((r * dst_pitch + j) * (int64_t)u);
      int bad;
      if (j < n) {
        bad = memcmp(got, src + (size_t)((so + j * sstr[nd - 1]) * (int64_t)u),
                     u) != 0;
      } else {
        bad = 0;
        for (size_t k = 0; k < u; k++) bad |= got[k] != 0xa5;
      }
      if (bad) {
        dlb_test_failed(__FILE__, __LINE__, "%s: unit %zu of row %lld",
                        what, (size_t)j, (long long)r);
        return;
      }
    }
  }
}

/* Rows run in bands copy what rows run one at a time do: row counts around
 * whole numbers of bands (and too few for them), three dimensions of
 * rows, steps forwards and backwards, 1- and 4-byte units, chunks shorter
 * than a row, dst rows with a margin that must stay as it was, on one
 * thread and on several (each part of the rows in bands, parts split
 * along the outer dimension or a middle one). The plan is asked
 * for bands directly: by itself it asks only for DLB__BAND_MIN bytes. */
DLB_TEST(copy_gathers_in_bands_land_every_unit) {
  enum { SRC_ROWS = 1300, COLS = 3500, MARGIN = 37 };
  for (size_t u = 1; u <= 4; u += 3) {
    const size_t bytes = (size_t)SRC_ROWS * COLS * u;
    unsigned char *src = malloc(bytes);
    unsigned char *dst = malloc(bytes);
    CHECK(src != NULL && dst != NULL);
    fill(src, bytes, 5);
    struct {
      int32_t nd;
      int64_t shape[3];
      int64_t steps[3]; /* in rows for the outer ones, units for the last */
      int threads;
    } cases[] = {
        {2, {2 * DLB__BANDS, 1100}, {2, 3}, 1},
        {2, {2 * DLB__BANDS + 1, 1100}, {2, 3}, 1},
        {2, {2 * DLB__BANDS - 1, 1100}, {2, 3}, 1},
        {2, {3 * DLB__BANDS + 5, 1100}, {-2, -3}, 1},
        {2, {SRC_ROWS, COLS / 2}, {1, 2}, 2},
        {2, {SRC_ROWS - 7, COLS / 2 - 3}, {-1, -2}, 2},
        {3, {5, 7, 700}, {30, 4, 5}, 1},
        {3, {3, 13, 1100}, {-60, -3, -3}, 2},
        /* Fewer outer rows than threads: the parts split the middle
         * dimension, and each part's rows span both outer ones. */
        {3, {2, 200, 1700}, {650, 3, 2}, 3},
    };
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
      const int32_t nd = cases[c].nd;
      int64_t sstr[3], first = 0;
      for (int32_t i = 0; i < nd; i++) {
        const int64_t step = cases[c].steps[i];
        sstr[i] = i < nd - 1 ? step * COLS : step;
        if (step < 0) first += (cases[c].shape[i] - 1) * -sstr[i];
      }
      const int64_t n = cases[c].shape[nd - 1];
      int64_t dstr[3];
      dstr[nd - 1] = 1;
      dstr[nd - 2] = n + MARGIN;
      if (nd == 3) dstr[0] = cases[c].shape[1] * (n + MARGIN);
      memset(dst, 0xa5, bytes);
      dlb__copy_plan p;
      dlb__copy_plan_build(&p, (char *)dst, dstr,
                           (const char *)src + first * (int64_t)u, sstr, nd,
                           cases[c].shape, u);
      CHECK(p.parallel);
      p.band_units = 16 * (1 + (int64_t)c % 3); /* shorter than a row */
      dlb_copy_set_threads(cases[c].threads);
      const int64_t banded = dlb__copy_banded_rows();
      dlb__copy_plan_run(&p, 0);
      /* Every row in bands, unless too few for them. */
      const int64_t rows = (nd == 3 ? cases[c].shape[0] : 1) *
                           cases[c].shape[nd - 2];
      CHECK_EQ_INT(dlb__copy_banded_rows() - banded,
                   rows >= 2 * DLB__BANDS ? rows : 0);
      /* The large cases run in parts, the others on this thread. */
      const int64_t units = (int64_t)u * rows * n;
      CHECK_EQ_INT(dlb__copy_last_threads() > 1,
                   cases[c].threads > 1 && units >= DLB__COPY_PARALLEL_MIN);
      char what[64];
      snprintf(what, sizeof what, "unit %zu case %zu", u, c);
      check_gathered(src, first, sstr, dst, n + MARGIN, nd, cases[c].shape,
                     u, what);
      /* Nothing written past the last row. */
      for (size_t k = (size_t)(rows * (n + MARGIN)) * u; k < bytes; k++)
        if (dst[k] != 0xa5) {
          dlb_test_failed(__FILE__, __LINE__, "%s: byte %zu past the rows",
                          what, k);
          break;
        }
    }
    dlb_copy_set_threads(0);
    free(src);
    free(dst);
  }
}

/* A row run in chunks ends where the row does: its last chunk, shorter
 * than the others, writes nothing past it (dst rows here have a margin
 * between them that must stay as it was). */
DLB_TEST(copy_gathers_ahead_stop_at_the_end_of_each_row) {
  enum { ROWS = 8, N = 2000, PITCH = 16384, MARGIN = 1000 };
  unsigned char *src = malloc((size_t)ROWS * PITCH);
  unsigned char *dst = malloc((size_t)ROWS * (N + MARGIN));
  CHECK(src != NULL && dst != NULL);
  fill(src, (size_t)ROWS * PITCH, 4);
  memset(dst, 0xa5, (size_t)ROWS * (N + MARGIN));
  int64_t shape[2] = {ROWS, N}, sstr[2] = {PITCH, 3}, dstr[2] = {N + MARGIN, 1};
  dlb__copy_plan p;
  dlb__copy_plan_build(&p, (char *)dst, dstr, (const char *)src, sstr, 2,
                       shape, 1);
  /* Chunks of fewer units than a row, which is not a whole number of
   * them. */
  CHECK(p.ahead_units > 0 && p.ahead_units < N && N % p.ahead_units != 0);
  DLTensor s = uint_tensor(src, 8, 2, shape, sstr, 0);
  DLTensor d = uint_tensor(dst, 8, 2, shape, dstr, 0);
  CHECK_OK(dlb_copy(&s, &d));
  for (int64_t r = 0; r < ROWS; r++) {
    for (int64_t j = 0; j < N; j++)
      if (dst[r * (N + MARGIN) + j] != src[r * PITCH + 3 * j])
        dlb_test_failed(__FILE__, __LINE__, "element (%lld, %lld)",
                        (long long)r, (long long)j);
    for (int64_t j = N; j < N + MARGIN; j++)
      if (dst[r * (N + MARGIN) + j] != 0xa5)
        dlb_test_failed(__FILE__, __LINE__, "margin byte %lld of row %lld",
                        (long long)(j - N), (long long)r);
  }
  free(src);
  free(dst);
}

/* The chunked rows copy what whole rows do: slices with gaps between rows,
 * forwards and backwards, a chunk and a part per row, 1- and 4-byte
 * units, on one thread and on several. */
DLB_TEST(copy_gathers_ahead_land_every_unit) {
  /* Rows of 12000 bytes: every slice below leaves gaps of a chunk or
   * more, and the larger ones go to the thread pool. */
  enum { ROWS = 1024 };
  const int threads[2] = {1, 3};
  for (int u = 1; u <= 4; u += 3) {
    const int64_t COLS = 12000 / u;
    unsigned char *src = malloc((size_t)ROWS * COLS * (size_t)u);
    unsigned char *dst = malloc((size_t)ROWS * COLS * (size_t)u);
    CHECK(src != NULL && dst != NULL);
    fill(src, (size_t)ROWS * COLS * (size_t)u, 9);
    /* Steps along rows and columns, in units; negative ones start at the
     * far end. */
    const int64_t steps[][2] = {{2, 3}, {-2, -3}, {3, 1}, {2, -5}};
    for (size_t k = 0; k < sizeof steps / sizeof steps[0]; k++)
      for (int th = 0; th < 2; th++) {
        dlb_copy_set_threads(threads[th]);
        const int64_t sr = steps[k][0], sc = steps[k][1];
        int64_t shape[2] = {(ROWS + (sr < 0 ? -sr : sr) - 1) /
                                (sr < 0 ? -sr : sr),
                            (COLS + (sc < 0 ? -sc : sc) - 1) /
                                (sc < 0 ? -sc : sc)};
        int64_t strides[2] = {sr * COLS, sc};
        const int64_t first = (sr < 0 ? ROWS - 1 : 0) * COLS +
                              (sc < 0 ? COLS - 1 : 0);
        DLTensor s = uint_tensor(src, (int)(8 * u), 2, shape, strides,
                                 (uint64_t)(first * u));
        DLTensor d = uint_tensor(dst, (int)(8 * u), 2, shape, NULL, 0);
        memset(dst, 0, (size_t)ROWS * COLS * (size_t)u);
        CHECK_OK(dlb_copy(&s, &d));
        for (int64_t i = 0; i < shape[0]; i++)
          for (int64_t j = 0; j < shape[1]; j++) {
            const unsigned char *want =
                src + (first + i * strides[0] + j * strides[1]) * u;
            const unsigned char *got = dst + (i * shape[1] + j) * u;
            if (memcmp(want, got, (size_t)u) != 0) {
              dlb_test_failed(__FILE__, __LINE__,
                              "unit %d steps (%lld, %lld) threads %d: "
                              "element (%lld, %lld)",
                              u, (long long)sr, (long long)sc, threads[th],
                              (long long)i, (long long)j);
              i = shape[0];
              break;
            }
          }
      }
    dlb_copy_set_threads(0);
    free(src);
    free(dst);
  }
}
