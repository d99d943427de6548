/* bench_limit.h -- the machine's copy limit, measured the ways a copy can
 * be written: the C library's memcpy, SSE2 non-temporal stores (they skip
 * reading dst's lines into the cache before overwriting them), the same
 * with src prefetched 512 bytes and 4 KiB ahead (hosts differ in which
 * pays), x86's `rep movsb` (the microcoded string copy), and
 * non-temporal stores of AVX2 and AVX-512 registers where the CPU has
 * them, each on one thread and on N, the bytes split into equal parts of
 * whole cache lines. The limit for a size and a thread count is
 * the fastest of them. */
#ifndef DLB_BENCH_LIMIT_H
#define DLB_BENCH_LIMIT_H

#include <pthread.h>
#include <stdint.h>
#include <string.h>

#if defined(__SSE2__)
#include <emmintrin.h>
#endif

typedef void (*limit_fn)(void *dst, const void *src, size_t n);

static void limit_memcpy(void *dst, const void *src, size_t n) {
  memcpy(dst, src, n);
}

#if defined(__SSE2__)
/* Copies the bytes before dst's first line boundary (at most n) with
 * memcpy, moves *d and *s past them and returns the bytes left. */
static inline size_t limit_head(char **d, const char **s, size_t n) {
  size_t head = (size_t)(-(uintptr_t)*d & 63);
  if (head > n) head = n;
  memcpy(*d, *s, head);
  *d += head;
  *s += head;
  return n - head;
}

/* dst aligned to a line by a plain head copy, then 64 bytes per round:
 * four loads, four streaming stores; the fence orders them before the
 * copy counts as done. With `ahead` non-zero, each round first asks for
 * the src line that many bytes further on (prefetchnta), while it lies
 * inside the copy. */
static void stream_copy(char *d, const char *s, size_t n, size_t ahead) {
  n = limit_head(&d, &s, n);
  for (; n >= 64; n -= 64, d += 64, s += 64) {
    if (ahead > 0 && n >= ahead + 64) _mm_prefetch(s + ahead, _MM_HINT_NTA);
    __m128i a = _mm_loadu_si128((const __m128i *)(const void *)s);
    __m128i b = _mm_loadu_si128((const __m128i *)(const void *)(s + 16));
    __m128i c = _mm_loadu_si128((const __m128i *)(const void *)(s + 32));
    __m128i e = _mm_loadu_si128((const __m128i *)(const void *)(s + 48));
    _mm_stream_si128((__m128i *)(void *)d, a);
    _mm_stream_si128((__m128i *)(void *)(d + 16), b);
    _mm_stream_si128((__m128i *)(void *)(d + 32), c);
    _mm_stream_si128((__m128i *)(void *)(d + 48), e);
  }
  _mm_sfence();
  memcpy(d, s, n);
}

static void limit_stream(void *dst, const void *src, size_t n) {
  stream_copy(dst, src, n, 0);
}

/* The same with src read 512 bytes and 4 KiB ahead. */
static void limit_stream_near(void *dst, const void *src, size_t n) {
  stream_copy(dst, src, n, 512);
}

static void limit_stream_ahead(void *dst, const void *src, size_t n) {
  stream_copy(dst, src, n, 4096);
}
#endif

#if defined(__x86_64__) && (defined(__clang__) || __GNUC__ >= 9)
#include <immintrin.h>
#define LIMIT_HAVE_WIDE 1
/* The same without read-ahead, in 32- and 64-byte registers: four lines
 * of loads, then their stores. Only on CPUs with AVX2 and AVX-512 F
 * (limit_methods_here). dst is aligned to a line as above. */
__attribute__((target("avx2"))) static void limit_stream_256(void *dst,
                                                             const void *src,
                                                             size_t n) {
  char *d = dst;
  const char *s = src;
  n = limit_head(&d, &s, n);
  for (; n >= 256; n -= 256, d += 256, s += 256) {
    __m256i v[8];
    for (int i = 0; i < 8; i++)
      v[i] = _mm256_loadu_si256((const __m256i *)(const void *)(s + 32 * i));
    for (int i = 0; i < 8; i++)
      _mm256_stream_si256((__m256i *)(void *)(d + 32 * i), v[i]);
  }
  _mm_sfence();
  memcpy(d, s, n);
}

__attribute__((target("avx512f"))) static void limit_stream_512(
    void *dst, const void *src, size_t n) {
  char *d = dst;
  const char *s = src;
  n = limit_head(&d, &s, n);
  for (; n >= 256; n -= 256, d += 256, s += 256) {
    __m512i v[4];
    for (int i = 0; i < 4; i++) v[i] = _mm512_loadu_si512(s + 64 * i);
    for (int i = 0; i < 4; i++) _mm512_stream_si512((void *)(d + 64 * i), v[i]);
  }
  _mm_sfence();
  memcpy(d, s, n);
}
#else
#define LIMIT_HAVE_WIDE 0
#endif

#if defined(__x86_64__) && defined(__GNUC__)
static void limit_movsb(void *dst, const void *src, size_t n) {
  __asm__ volatile("rep movsb" : "+D"(dst), "+S"(src), "+c"(n) : : "memory");
}
#endif

typedef struct {
  const char *name;
  limit_fn fn;
} limit_method;

static const limit_method limit_methods[] = {
    {"memcpy", limit_memcpy},
#if defined(__SSE2__)
    {"stream", limit_stream},
    {"stream ahead 512", limit_stream_near},
    {"stream ahead", limit_stream_ahead},
#endif
#if defined(__x86_64__) && defined(__GNUC__)
    {"rep movsb", limit_movsb},
#endif
    /* Last, as limit_methods_here counts them. */
#if LIMIT_HAVE_WIDE
    {"stream 256-bit", limit_stream_256},
    {"stream 512-bit", limit_stream_512},
#endif
};
#define LIMIT_METHODS (sizeof limit_methods / sizeof limit_methods[0])

/* The index in limit_methods of the non-temporal copy written as the
 * library writes its own on this CPU (src/copy/copy_internal.h,
 * DLB__STREAM_AHEAD_FAR): on Intel CPUs the widest registers the CPU has,
 * nothing read ahead; elsewhere 16-byte stores reading 4 KiB ahead where
 * the library's kernels are AVX-512 ones (F, BW and VBMI), 512 bytes
 * ahead below. Defined after limit_methods_here. */
static inline size_t limit_stream_like_library(void);

/* How many of limit_methods this CPU runs: all but the wide ones whose
 * registers it lacks. */
static inline size_t limit_methods_here(void) {
#if LIMIT_HAVE_WIDE
  __builtin_cpu_init();
  if (!__builtin_cpu_supports("avx2")) return LIMIT_METHODS - 2;
  if (!__builtin_cpu_supports("avx512f")) return LIMIT_METHODS - 1;
#endif
  return LIMIT_METHODS;
}

static inline size_t limit_stream_like_library(void) {
  const char *name = "stream ahead 512";
#if LIMIT_HAVE_WIDE
  __builtin_cpu_init();
  if (__builtin_cpu_is("intel"))
    name = __builtin_cpu_supports("avx512f")
               ? "stream 512-bit"
               : __builtin_cpu_supports("avx2") ? "stream 256-bit" : "stream";
  else if (__builtin_cpu_supports("avx512f") &&
           __builtin_cpu_supports("avx512bw") &&
           __builtin_cpu_supports("avx512vbmi"))
    name = "stream ahead";
#endif
  for (size_t m = 0; m < limit_methods_here(); m++)
    if (strcmp(limit_methods[m].name, name) == 0) return m;
  return 0; /* memcpy: a build without SSE2 */
}

/* Threads for the N-thread runs, started once and held at a barrier
 * between copies, so a timing pays a wake-up, not a thread start (as the
 * library's own pool does). */
#define LIMIT_MAX_THREADS 64
static struct {
  pthread_t tid[LIMIT_MAX_THREADS];
  pthread_barrier_t start, done;
  int n;
  limit_fn fn;
  char *dst;
  const char *src;
  size_t bytes;
  int quit;
} limit_pool;

static void limit_part(int i) {
  const int n = limit_pool.n;
  const size_t lines = limit_pool.bytes / 64;
  size_t lo = lines * (size_t)i / (size_t)n * 64;
  size_t hi = i + 1 == n ? limit_pool.bytes : lines * (size_t)(i + 1) / (size_t)n * 64;
  limit_pool.fn(limit_pool.dst + lo, limit_pool.src + lo, hi - lo);
}

static void *limit_worker(void *arg) {
  const int i = (int)(intptr_t)arg;
  for (;;) {
    pthread_barrier_wait(&limit_pool.start);
    if (limit_pool.quit) return NULL;
    limit_part(i);
    pthread_barrier_wait(&limit_pool.done);
  }
}

static inline void limit_start(int threads) {
  if (threads > LIMIT_MAX_THREADS) threads = LIMIT_MAX_THREADS;
  limit_pool.n = threads;
  pthread_barrier_init(&limit_pool.start, NULL, (unsigned)threads);
  pthread_barrier_init(&limit_pool.done, NULL, (unsigned)threads);
  for (int i = 1; i < threads; i++)
    pthread_create(&limit_pool.tid[i], NULL, limit_worker, (void *)(intptr_t)i);
}

static inline void limit_stop(void) {
  limit_pool.quit = 1;
  pthread_barrier_wait(&limit_pool.start);
  for (int i = 1; i < limit_pool.n; i++) pthread_join(limit_pool.tid[i], NULL);
}

/* One copy of `bytes` by fn on one thread (threads == 1) or on the pool. */
static void limit_copy(limit_fn fn, void *dst, const void *src, size_t bytes,
                       int threads) {
  if (threads <= 1 || limit_pool.n <= 1) {
    fn(dst, src, bytes);
    return;
  }
  limit_pool.fn = fn;
  limit_pool.dst = dst;
  limit_pool.src = src;
  limit_pool.bytes = bytes;
  pthread_barrier_wait(&limit_pool.start);
  limit_part(0);
  pthread_barrier_wait(&limit_pool.done);
}

#endif
