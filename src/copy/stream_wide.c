/*
 * stream_wide.c -- the non-temporal copy's lines in 32- and 64-byte
 * registers, for CPUs where wider stores pay (dlb__stream_kind_for).
 *
 * Four lines per round: their loads, then their stores, each store
 * filling a whole line's write-combining buffer in one (AVX-512) or two
 * (AVX2) instructions.
 */
#include "copy/copy_internal.h"

#if DLB__HAVE_WIDE

#include <immintrin.h>

__attribute__((target("avx2"))) void dlb__stream_lines_avx2(
    char *dst, const char *src, size_t lines) {
  for (; lines >= 4; lines -= 4, dst += 256, src += 256) {
    __m256i v[8];
    for (int i = 0; i < 8; i++)
      v[i] = _mm256_loadu_si256((const __m256i *)(const void *)(src + 32 * i));
    for (int i = 0; i < 8; i++)
      _mm256_stream_si256((__m256i *)(void *)(dst + 32 * i), v[i]);
  }
  for (; lines > 0; lines--, dst += 64, src += 64) {
    const __m256i a = _mm256_loadu_si256((const __m256i *)(const void *)src);
    const __m256i b =
        _mm256_loadu_si256((const __m256i *)(const void *)(src + 32));
    _mm256_stream_si256((__m256i *)(void *)dst, a);
    _mm256_stream_si256((__m256i *)(void *)(dst + 32), b);
  }
}

__attribute__((target("avx512f"))) void dlb__stream_lines_avx512(
    char *dst, const char *src, size_t lines) {
  for (; lines >= 4; lines -= 4, dst += 256, src += 256) {
    __m512i v[4];
    for (int i = 0; i < 4; i++)
      v[i] = _mm512_loadu_si512((const void *)(src + 64 * i));
    for (int i = 0; i < 4; i++)
      _mm512_stream_si512((void *)(dst + 64 * i), v[i]);
  }
  for (; lines > 0; lines--, dst += 64, src += 64)
    _mm512_stream_si512((void *)dst, _mm512_loadu_si512((const void *)src));
}

#endif
