/*
 * kernels.c -- the row kernels: one strided dimension of 1, 2, 4, 8 or
 * 16-byte units.
 *
 * Units move through fixed-size memcpy, which compilers turn into single
 * unaligned loads and stores: DLPack data need not be aligned and the bytes
 * may belong to any type, so typed pointer access would break alignment and
 * aliasing rules.
 */
#include <string.h>

#if defined(__SSE2__)
#include <emmintrin.h>
#endif

#include "copy/copy_internal.h"

/* One unit from src to dst; with `unit` a constant at every call (the
 * kernels below are force-inlined into one function per unit) this is a
 * single load and store. */
static DLB__FORCE_INLINE void move_unit(char *dst, const char *src,
                                        size_t unit) {
  memcpy(dst, src, unit);
}

/* A unit step on one side lets the compiler fold that side's address into
 * the loop counter; four independent loads per round, all before the
 * stores, hide load latency on strided reads. Every kernel stores in order, so a dst that names one
 * address twice (zero strides) ends with the last value in row-major
 * order. */
static DLB__FORCE_INLINE void gather(char *dst, const char *src,
                                     int64_t src_step, int64_t n,
                                     size_t unit) {
  int64_t i = 0;
  for (; i + 4 <= n; i += 4) {
    unsigned char v[4][16];
    memcpy(v[0], src, unit);
    memcpy(v[1], src + src_step, unit);
    memcpy(v[2], src + 2 * src_step, unit);
    memcpy(v[3], src + 3 * src_step, unit);
    memcpy(dst, v[0], unit);
    memcpy(dst + unit, v[1], unit);
    memcpy(dst + 2 * unit, v[2], unit);
    memcpy(dst + 3 * unit, v[3], unit);
    src += 4 * src_step;
    dst += 4 * unit;
  }
  for (; i < n; i++) {
    move_unit(dst, src, unit);
    src += src_step;
    dst += unit;
  }
}

static DLB__FORCE_INLINE void scatter(char *dst, int64_t dst_step,
                                      const char *src, int64_t n,
                                      size_t unit) {
  int64_t i = 0;
  for (; i + 4 <= n; i += 4) {
    unsigned char v[4][16];
    memcpy(v[0], src, unit);
    memcpy(v[1], src + unit, unit);
    memcpy(v[2], src + 2 * unit, unit);
    memcpy(v[3], src + 3 * unit, unit);
    memcpy(dst, v[0], unit);
    memcpy(dst + dst_step, v[1], unit);
    memcpy(dst + 2 * dst_step, v[2], unit);
    memcpy(dst + 3 * dst_step, v[3], unit);
    src += 4 * unit;
    dst += 4 * dst_step;
  }
  for (; i < n; i++) {
    move_unit(dst, src, unit);
    src += unit;
    dst += dst_step;
  }
}

static DLB__FORCE_INLINE void strided(char *dst, int64_t dst_step,
                                      const char *src, int64_t src_step,
                                      int64_t n, size_t unit) {
  for (int64_t i = 0; i < n; i++) {
    move_unit(dst, src, unit);
    src += src_step;
    dst += dst_step;
  }
}

/* The three kernels for one unit size, as dlb__row_fn. */
#define DLB__ROW_FNS(U)                                                      \
  static void gather_##U(char *d, int64_t ds, const char *s, int64_t ss,     \
                         int64_t n) { (void)ds; gather(d, s, ss, n, U); }    \
  static void scatter_##U(char *d, int64_t ds, const char *s, int64_t ss,    \
                          int64_t n) { (void)ss; scatter(d, ds, s, n, U); }  \
  static void strided_##U(char *d, int64_t ds, const char *s, int64_t ss,    \
                          int64_t n) { strided(d, ds, s, ss, n, U); }
DLB__ROW_FNS(1)
DLB__ROW_FNS(2)
DLB__ROW_FNS(4)
DLB__ROW_FNS(8)
DLB__ROW_FNS(16)
#undef DLB__ROW_FNS

/* Both steps are the unit, so the row is one block: n * unit bytes. The
 * unit is known from the plan; memcpy needs the byte count, and the steps
 * carry it. */
static void contiguous(char *dst, int64_t dst_step, const char *src,
                       int64_t src_step, int64_t n) {
  (void)src_step;
  memcpy(dst, src, (size_t)(n * dst_step));
}

size_t dlb__stream_kind_ahead(int kind) {
  return kind == DLB__STREAM_V128_FAR    ? DLB__STREAM_AHEAD_FAR
         : kind == DLB__STREAM_V128_NEAR ? DLB__STREAM_AHEAD_NEAR
                                         : 0;
}

int dlb__stream_kind_for(int level, int intel) {
  if (intel)
    return level == DLB__ISA_AVX512 ? DLB__STREAM_AVX512
           : level == DLB__ISA_AVX2 ? DLB__STREAM_AVX2
                                    : DLB__STREAM_V128;
  return level == DLB__ISA_AVX512 ? DLB__STREAM_V128_FAR
                                  : DLB__STREAM_V128_NEAR;
}

/* The lines of dlb__stream_copy, not fenced, as a copy of `kind` writes
 * them. */
static DLB__FORCE_INLINE void stream_unfenced(char *dst, const char *src,
                                              size_t n, int kind) {
#if DLB__HAVE_STREAM
  size_t head = (size_t)(-(uintptr_t)dst & 63);
  if (head > n) head = n;
  memcpy(dst, src, head);
  dst += head;
  src += head;
  n -= head;
#if DLB__HAVE_WIDE
  if (kind == DLB__STREAM_AVX2 || kind == DLB__STREAM_AVX512) {
    const size_t lines = n / 64;
    if (kind == DLB__STREAM_AVX512)
      dlb__stream_lines_avx512(dst, src, lines);
    else
      dlb__stream_lines_avx2(dst, src, lines);
    dst += lines * 64;
    src += lines * 64;
    n -= lines * 64;
  }
#endif
  /* One line per round: four loads, then four stores that fill the line's
   * write-combining buffer at once (unrolling to two lines ran slower),
   * after asking for the src line `ahead` bytes on while that is still
   * part of the copy. */
  const size_t ahead = dlb__stream_kind_ahead(kind);
  for (; n >= 64; n -= 64, dst += 64, src += 64) {
    if (ahead != 0 && n >= ahead + 64) _mm_prefetch(src + ahead, _MM_HINT_NTA);
    __m128i a = _mm_loadu_si128((const __m128i *)(const void *)src);
    __m128i b = _mm_loadu_si128((const __m128i *)(const void *)(src + 16));
    __m128i c = _mm_loadu_si128((const __m128i *)(const void *)(src + 32));
    __m128i d = _mm_loadu_si128((const __m128i *)(const void *)(src + 48));
    _mm_stream_si128((__m128i *)(void *)dst, a);
    _mm_stream_si128((__m128i *)(void *)(dst + 16), b);
    _mm_stream_si128((__m128i *)(void *)(dst + 32), c);
    _mm_stream_si128((__m128i *)(void *)(dst + 48), d);
  }
#else
  (void)kind;
#endif
  memcpy(dst, src, n);
}

void dlb__stream_fence(void) {
#if DLB__HAVE_STREAM
  _mm_sfence();
#endif
}

void dlb__stream_copy_as(int kind, char *dst, const char *src, size_t n) {
  stream_unfenced(dst, src, n, kind);
  dlb__stream_fence();
}

void dlb__stream_copy(char *dst, const char *src, size_t n) {
  dlb__stream_copy_as(dlb__stream_kind(), dst, src, n);
}

/* The streamed block copy of each kind, unfenced: a fence waits for every
 * non-temporal store in flight, and one per row of 256 bytes made a (64,
 * 64, 64, 64) float32 permutation (2, 0, 1, 3) run at 0.13 x a
 * non-temporal copy. The plan fences once, at the end of each range it
 * runs (dlb__copy_plan.fence). */
#define DLB__STREAM_ROW_FN(NAME, KIND)                                       \
  static void NAME(char *dst, int64_t dst_step, const char *src,             \
                   int64_t src_step, int64_t n) {                            \
    (void)src_step;                                                          \
    stream_unfenced(dst, src, (size_t)(n * dst_step), KIND);                 \
  }
DLB__STREAM_ROW_FN(contiguous_stream, DLB__STREAM_V128)
DLB__STREAM_ROW_FN(contiguous_stream_near, DLB__STREAM_V128_NEAR)
DLB__STREAM_ROW_FN(contiguous_stream_far, DLB__STREAM_V128_FAR)
DLB__STREAM_ROW_FN(contiguous_stream_avx2, DLB__STREAM_AVX2)
DLB__STREAM_ROW_FN(contiguous_stream_avx512, DLB__STREAM_AVX512)
#undef DLB__STREAM_ROW_FN

/* By kind. */
static const dlb__row_fn dlb__stream_rows[DLB__STREAM_KINDS] = {
    contiguous_stream, contiguous_stream_near, contiguous_stream_far,
    contiguous_stream_avx2, contiguous_stream_avx512};

int dlb__row_kernel_streams(dlb__row_fn fn) {
  for (int k = 0; k < DLB__STREAM_KINDS; k++)
    if (fn == dlb__stream_rows[k]) return 1;
  return 0;
}

#if defined(__SSE2__)
/* Gathers with a src step of two units (a slice [::2]) read whole
 * 16-byte vectors and pick the units out with shuffles: 16 bytes of dst
 * per round from two loads instead of 16 / unit single-unit loads. On the
 * development VM a 4096^2 float32 [::2, ::2] slice ran 1.1-1.4x faster
 * than the unrolled scalar gather; a step of 4 units needs as many
 * instructions shuffled as scalar, and a step of 3 has its own kernel
 * below for 4-byte units only. A round reads src units
 * [2i, 2i + 2 per), of which the last needed is 2 (i + per - 1): rounds
 * stop one short of the end so no load passes the row's last unit, and
 * the rest go one by one. */
static DLB__FORCE_INLINE __m128i ld(const char *p) {
  return _mm_loadu_si128((const __m128i *)(const void *)p);
}

static DLB__FORCE_INLINE __m128i pick(const char *src, size_t unit) {
  if (unit == 1) { /* the low byte of each 16-bit pair */
    const __m128i lo = _mm_set1_epi16(0xff);
    return _mm_packus_epi16(_mm_and_si128(ld(src), lo),
                            _mm_and_si128(ld(src + 16), lo));
  }
  if (unit == 2) { /* sign-extended, so packing is exact */
    __m128i a = _mm_srai_epi32(_mm_slli_epi32(ld(src), 16), 16);
    __m128i b = _mm_srai_epi32(_mm_slli_epi32(ld(src + 16), 16), 16);
    return _mm_packs_epi32(a, b);
  }
  if (unit == 8)
    return _mm_unpacklo_epi64(ld(src), ld(src + 16));
  /* unit 4 */
  return _mm_castps_si128(_mm_shuffle_ps(_mm_castsi128_ps(ld(src)),
                                         _mm_castsi128_ps(ld(src + 16)),
                                         _MM_SHUFFLE(2, 0, 2, 0)));
}

static DLB__FORCE_INLINE void gather_by_2(char *dst, const char *src,
                                          int64_t n, size_t unit) {
  const int64_t per = 16 / (int64_t)unit;
  int64_t i = 0;
  for (; i + per + 1 <= n; i += per) {
    _mm_storeu_si128((__m128i *)(void *)dst, pick(src, unit));
    src += 32;
    dst += 16;
  }
  for (; i < n; i++) {
    memcpy(dst, src, unit);
    src += 2 * unit;
    dst += unit;
  }
}

/* 4-byte units three apart (a slice [::3] of float32 or int32): units
 * 0, 3, 6, 9 of a round are the first and last of the 16 bytes at unit 0
 * and of those at unit 6, so one shuffle of two loads makes 16 bytes of
 * dst, where the scalar gather spends four loads and four stores. A
 * round reads units [3i, 3i + 10) and needs 3i + 9: no load passes the
 * last unit read. Under callgrind the [::2, ::3] slice of a 4096^2
 * float32 matrix takes 0.6 x the scalar gather's instructions; it is
 * bound by reading every line of every second src row, so the time falls
 * less. Units of 8 bytes gain nothing this way (two loads, a shuffle and
 * a store make two units, as two loads and two stores do), and 1- and
 * 2-byte units would need byte shuffles SSE2 does not have. */
static void gather_4_by_3(char *dst, int64_t dst_step, const char *src,
                          int64_t src_step, int64_t n) {
  (void)dst_step;
  (void)src_step;
  int64_t i = 0;
  /* Two rounds a loop: the loop's own instructions are a third of it. */
  for (; i + 8 <= n; i += 8) {
    __m128 a = _mm_castsi128_ps(ld(src)), b = _mm_castsi128_ps(ld(src + 24));
    __m128 c = _mm_castsi128_ps(ld(src + 48));
    __m128 d = _mm_castsi128_ps(ld(src + 72));
    _mm_storeu_si128((__m128i *)(void *)dst,
                     _mm_castps_si128(_mm_shuffle_ps(
                         a, b, _MM_SHUFFLE(3, 0, 3, 0))));
    _mm_storeu_si128((__m128i *)(void *)(dst + 16),
                     _mm_castps_si128(_mm_shuffle_ps(
                         c, d, _MM_SHUFFLE(3, 0, 3, 0))));
    src += 96;
    dst += 32;
  }
  if (i + 4 <= n) {
    __m128 a = _mm_castsi128_ps(ld(src)), b = _mm_castsi128_ps(ld(src + 24));
    _mm_storeu_si128((__m128i *)(void *)dst,
                     _mm_castps_si128(_mm_shuffle_ps(
                         a, b, _MM_SHUFFLE(3, 0, 3, 0))));
    src += 48;
    dst += 16;
    i += 4;
  }
  for (; i < n; i++) {
    memcpy(dst, src, 4);
    src += 12;
    dst += 4;
  }
}

#define DLB__GATHER_FN(UNIT)                                               \
  static void gather_##UNIT##_by_2(char *d, int64_t ds, const char *s,     \
                                   int64_t ss, int64_t n) {                \
    (void)ds; (void)ss; gather_by_2(d, s, n, UNIT); }
DLB__GATHER_FN(1)
DLB__GATHER_FN(2)
DLB__GATHER_FN(4)
DLB__GATHER_FN(8)
#undef DLB__GATHER_FN

/* The shuffling gather for this unit and src step, or NULL. */
static dlb__row_fn gather_shuffled(size_t unit, int64_t src_step) {
  if (unit == 4 && src_step == 12) return gather_4_by_3;
  if (src_step != 2 * (int64_t)unit) return NULL;
  switch (unit) {
    case 1:
      return gather_1_by_2;
    case 2:
      return gather_2_by_2;
    case 4:
      return gather_4_by_2;
    case 8:
      return gather_8_by_2;
    default:
      return NULL;
  }
}
#endif

typedef struct {
  dlb__row_fn gather, scatter, strided;
} dlb__row_set;

static const dlb__row_set dlb__rows[5] = {
    {gather_1, scatter_1, strided_1},    {gather_2, scatter_2, strided_2},
    {gather_4, scatter_4, strided_4},    {gather_8, scatter_8, strided_8},
    {gather_16, scatter_16, strided_16},
};

dlb__row_fn dlb__row_kernel(size_t unit, int64_t dst_step, int64_t src_step,
                            int stream) {
  const int64_t u = (int64_t)unit;
  const dlb__row_set *set = &dlb__rows[dlb__unit_index(unit)];
  if (dst_step == u && src_step == u)
    return !DLB__HAVE_STREAM || !stream ||
                   dlb__copy_isa() == DLB__ISA_PORTABLE
               ? contiguous
               : dlb__stream_rows[dlb__stream_kind()];
#if defined(__SSE2__)
  if (dst_step == u && dlb__copy_isa() != DLB__ISA_PORTABLE) {
    dlb__row_fn fn = gather_shuffled(unit, src_step);
    if (fn != NULL) return fn;
  }
#endif
  if (dst_step == u) return set->gather;
  if (src_step == u) return set->scatter;
  return set->strided;
}
