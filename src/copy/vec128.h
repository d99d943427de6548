/*
 * vec128.h -- the 128-bit vector operations of the transpose strips
 * (transpose.c), written once for two instruction sets: SSE2 intrinsics on
 * x86-64, and GCC's and clang's generic vectors on aarch64, where they
 * compile to Advanced SIMD (NEON), which every aarch64 CPU has.
 *
 * The operations move bits only (loads, stores, interleaves), so a value
 * is never interpreted. DLB__HAVE_V128 says whether this build has them.
 */
#ifndef DLBRIDGE_COPY_VEC128_H
#define DLBRIDGE_COPY_VEC128_H

#include <stdint.h>
#include <string.h>

#if defined(__SSE2__)
#include <emmintrin.h>
#define DLB__HAVE_V128 1
#elif defined(__aarch64__) && defined(__has_builtin)
#if __has_builtin(__builtin_shufflevector)
#define DLB__HAVE_V128 1
#define DLB__V128_GENERIC 1
#endif
#endif
#ifndef DLB__HAVE_V128
#define DLB__HAVE_V128 0
#endif

#if DLB__HAVE_V128 && !defined(DLB__V128_GENERIC)

typedef __m128i dlb__v128;

static inline dlb__v128 v_load(const char *p) {
  return _mm_loadu_si128((const __m128i *)(const void *)p);
}
/* p is 16-byte aligned. */
static inline dlb__v128 v_load_a(const char *p) {
  return _mm_load_si128((const __m128i *)(const void *)p);
}
/* 8 bytes into the low half; the high half is zero. */
static inline dlb__v128 v_load8(const char *p) {
  return _mm_loadl_epi64((const __m128i *)(const void *)p);
}
static inline void v_store(char *p, dlb__v128 v) {
  _mm_storeu_si128((__m128i *)(void *)p, v);
}
static inline void v_store_a(char *p, dlb__v128 v) {
  _mm_store_si128((__m128i *)(void *)p, v);
}
/* The low 8 bytes. */
static inline void v_store8(char *p, dlb__v128 v) {
  _mm_storel_epi64((__m128i *)(void *)p, v);
}
/* Non-temporal, to a 16-byte aligned p; dlb__stream_fence orders such
 * stores before what follows. */
static inline void v_stream(char *p, dlb__v128 v) {
  _mm_stream_si128((__m128i *)(void *)p, v);
}

/* Interleaves of the low (lo) or high (hi) halves of a and b in units of
 * 1, 2, 4 and 8 bytes: lo8 gives a0 b0 a1 b1 ... a7 b7. */
#define v_lo8 _mm_unpacklo_epi8
#define v_hi8 _mm_unpackhi_epi8
#define v_lo16 _mm_unpacklo_epi16
#define v_hi16 _mm_unpackhi_epi16
#define v_lo32 _mm_unpacklo_epi32
#define v_hi32 _mm_unpackhi_epi32
#define v_lo64 _mm_unpacklo_epi64
#define v_hi64 _mm_unpackhi_epi64

#elif DLB__HAVE_V128

typedef uint8_t dlb__v128 __attribute__((vector_size(16)));

static inline dlb__v128 v_load(const char *p) {
  dlb__v128 v;
  memcpy(&v, p, 16);
  return v;
}
static inline dlb__v128 v_load_a(const char *p) { return v_load(p); }
static inline dlb__v128 v_load8(const char *p) {
  dlb__v128 v = {0};
  memcpy(&v, p, 8);
  return v;
}
static inline void v_store(char *p, dlb__v128 v) { memcpy(p, &v, 16); }
static inline void v_store_a(char *p, dlb__v128 v) { memcpy(p, &v, 16); }
static inline void v_store8(char *p, dlb__v128 v) { memcpy(p, &v, 8); }
/* Plain stores: no non-temporal store of the generic vectors has been
 * measured against them. */
static inline void v_stream(char *p, dlb__v128 v) { memcpy(p, &v, 16); }

/* The same interleaves as byte shuffles of the 32 bytes a, b (indices
 * 16-31 are b's). */
static inline dlb__v128 v_lo8(dlb__v128 a, dlb__v128 b) {
  return __builtin_shufflevector(a, b, 0, 16, 1, 17, 2, 18, 3, 19, 4, 20, 5,
                                 21, 6, 22, 7, 23);
}
static inline dlb__v128 v_hi8(dlb__v128 a, dlb__v128 b) {
  return __builtin_shufflevector(a, b, 8, 24, 9, 25, 10, 26, 11, 27, 12, 28,
                                 13, 29, 14, 30, 15, 31);
}
static inline dlb__v128 v_lo16(dlb__v128 a, dlb__v128 b) {
  return __builtin_shufflevector(a, b, 0, 1, 16, 17, 2, 3, 18, 19, 4, 5, 20,
                                 21, 6, 7, 22, 23);
}
static inline dlb__v128 v_hi16(dlb__v128 a, dlb__v128 b) {
  return __builtin_shufflevector(a, b, 8, 9, 24, 25, 10, 11, 26, 27, 12, 13,
                                 28, 29, 14, 15, 30, 31);
}
static inline dlb__v128 v_lo32(dlb__v128 a, dlb__v128 b) {
  return __builtin_shufflevector(a, b, 0, 1, 2, 3, 16, 17, 18, 19, 4, 5, 6,
                                 7, 20, 21, 22, 23);
}
static inline dlb__v128 v_hi32(dlb__v128 a, dlb__v128 b) {
  return __builtin_shufflevector(a, b, 8, 9, 10, 11, 24, 25, 26, 27, 12, 13,
                                 14, 15, 28, 29, 30, 31);
}
static inline dlb__v128 v_lo64(dlb__v128 a, dlb__v128 b) {
  return __builtin_shufflevector(a, b, 0, 1, 2, 3, 4, 5, 6, 7, 16, 17, 18,
                                 19, 20, 21, 22, 23);
}
static inline dlb__v128 v_hi64(dlb__v128 a, dlb__v128 b) {
  return __builtin_shufflevector(a, b, 8, 9, 10, 11, 12, 13, 14, 15, 24, 25,
                                 26, 27, 28, 29, 30, 31);
}

#endif

#endif /* DLBRIDGE_COPY_VEC128_H */
