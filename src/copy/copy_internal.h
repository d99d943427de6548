/*
 * copy_internal.h -- the pieces of the CPU copy engine (src/copy/).
 *
 * A copy is planned in bytes: dimensions merged and reordered so that the
 * innermost loop writes memory in order, then run by a row kernel (one
 * strided dimension) or a tile kernel (two dimensions, transposed), on one
 * or several threads.
 */
#ifndef DLBRIDGE_COPY_INTERNAL_H
#define DLBRIDGE_COPY_INTERNAL_H

#include <stdatomic.h>

#include "internal.h"

/* For the kernels' building blocks: each is written once for any unit
 * size and inlined where the size is a constant, so it compiles to the
 * loads and stores of that size. A coverage build (DLB_COVERAGE) leaves
 * them out of line, so that gcov counts each branch of the source once
 * rather than once in every specialised copy. */
#if defined(__GNUC__) && !defined(DLB_COVERAGE)
#define DLB__FORCE_INLINE inline __attribute__((always_inline))
#else
#define DLB__FORCE_INLINE inline
#endif

/* Hides a pointer's value from the optimiser, so that the register
 * kernels walk their rows one add at a time. Left to itself, GCC turned
 * the fully unrolled walk over 16 to 64 rows into an address per row,
 * all kept live across the tile loop and spilled: the AVX-512 strips of
 * 1-byte units were 2,058 instructions (659 of them moves), of 4-byte
 * units 1,156; with the walk hidden, 1,156 and 448. */
#if defined(__GNUC__)
#define DLB__OPAQUE(p) __asm__("" : "+r"(p))
#else
#define DLB__OPAQUE(p) ((void)0)
#endif

/* The index of a unit size (1, 2, 4, 8, 16 bytes) in the kernels' tables:
 * 0 to 4. */
static inline int dlb__unit_index(size_t unit) {
  return unit == 1 ? 0 : unit == 2 ? 1 : unit == 4 ? 2 : unit == 8 ? 3 : 4;
}

/* One extra dimension splits elements whose size is not a power of two
 * (float32x3: 12 bytes) into units of 1, 2, 4, 8 or 16 bytes. */
#define DLB__COPY_DIMS (DLB_MAX_NDIM + 1)

/* Copies n units of `unit` bytes, src and dst advancing by their steps in
 * bytes (any sign, zero included). Returns nothing: plans are valid. */
typedef void (*dlb__row_fn)(char *dst, int64_t dst_step, const char *src,
                            int64_t src_step, int64_t n);

/* Copies an nb x na plane: element (b, a) is at src + b * src_b + a * src_a
 * and goes to dst + b * dst_b + a * dst_a (steps in bytes). next_dst and
 * next_src, when not NULL, are where the next plane of the same geometry
 * starts: a small plane prefetches it while it copies. */
typedef void (*dlb__tile_fn)(char *dst, int64_t dst_b, int64_t dst_a,
                             const char *src, int64_t src_b, int64_t src_a,
                             int64_t nb, int64_t na, const char *next_dst,
                             const char *next_src);

/* The row kernel for units of `unit` bytes (1, 2, 4, 8 or 16) and these
 * steps: a block copy when both are the unit (with non-temporal stores
 * when `stream`, see DLB__STREAM_MIN), else a loop specialised for a unit
 * step on either side. */
dlb__row_fn dlb__row_kernel(size_t unit, int64_t dst_step, int64_t src_step,
                            int stream);

/* Whether fn is the streaming block copy, whose non-temporal stores are
 * not fenced: whoever runs it fences after the last row. */
int dlb__row_kernel_streams(dlb__row_fn fn);

/* Copies n bytes with non-temporal stores (dst aligned to a cache line by
 * a plain head copy; the stores' width and the read-ahead of
 * dlb__stream_kind()) and fences them, so they are ordered before
 * anything the caller does next. On a build without SSE2, memcpy.
 * dlb__stream_copy_as is the same as a copy of `kind` would run it; kinds
 * with wide stores need a CPU that has them. */
void dlb__stream_copy(char *dst, const char *src, size_t n);
void dlb__stream_copy_as(int kind, char *dst, const char *src, size_t n);

/* Orders the non-temporal stores before it before everything after it (a
 * no-op on builds without them). */
void dlb__stream_fence(void);

/* Whether this build has non-temporal stores (SSE2). Without them, as on
 * aarch64, a streamed copy is plain memcpy: no non-temporal kernel has
 * been measured there. */
#if defined(__SSE2__)
#define DLB__HAVE_STREAM 1
#else
#define DLB__HAVE_STREAM 0
#endif

/* A copy writing at least this many bytes in rows of at least
 * DLB__STREAM_ROW_MIN bytes uses non-temporal stores: they skip reading
 * dst's lines into the cache before overwriting them (a third of the
 * memory traffic of a copy) but lose where src and dst would stay in the
 * cache. bench_copy's stream sweep on the development VM (AMD EPYC, 32 MiB
 * L3, one thread): memcpy of 4 MiB runs 1.2-1.3x the non-temporal copy,
 * the two are even at 5-8 MiB (noise of other tenants decides), and from
 * 10 MiB on the non-temporal copy runs 1.4-1.8x memcpy. `rep movsb` was
 * slower than the non-temporal copy at every size there. */
#define DLB__STREAM_MIN ((int64_t)8 << 20)

/* How the non-temporal copy writes on this CPU (dlb__stream_kind): the
 * register width of its stores, and how far ahead of them it asks for src
 * lines (prefetchnta, one line per line copied, within the row it copies,
 * so rows shorter than the distance are read as before).
 *
 * The hosts measured disagree. On AMD EPYC, 16-byte stores with src read
 * ahead: on the AVX-512 VM (2026-12-05 morning), 64 MiB, one thread,
 * alternated in one process, 21 reps (median ms): no prefetch 3.21, 512
 * bytes ahead 2.85, 2 KiB 2.61, 3 KiB 2.55, 4 KiB 2.56, 8 KiB 2.60, `rep
 * movsb` 2.77-2.85; prefetcht0 1 KiB ahead 2.77, prefetcht1 1 KiB 3.58;
 * two threads, 4 KiB 2.46-2.50 against 2.60-2.80 with none. On the Zen 3
 * VM (AVX2, 2026-12-05 evening; 15-21 reps, speed over no prefetch, three
 * runs): 512 bytes 1.00-1.07, 1 KiB 0.97-0.99, 2 KiB 0.90-0.93, 4 KiB
 * 0.82-0.83, `rep movsb` 0.90-1.01. On Intel Xeon (family 6 model 207,
 * AVX-512, 2026-12-06; 64 MiB, one thread, 21 reps, two runs, median ms):
 * 16-byte stores with no prefetch 8.1-10.0, with prefetchnta 512 bytes
 * ahead 11.6-13.4, 4 KiB 12.5-13.1; 32-byte stores 6.5-8.0, 64-byte
 * stores 5.8-7.1 (prefetcht0 512 bytes to 2 KiB ahead: 5.3-7.0, within the
 * noise), memcpy 10.5-11.6, `rep movsb` 10.6-11.4. So on Intel CPUs the
 * copy stores the widest registers the kernels' level has and reads
 * nothing ahead; elsewhere 16-byte stores, src read DLB__STREAM_AHEAD_FAR
 * bytes ahead where the kernels are AVX-512 ones and
 * DLB__STREAM_AHEAD_NEAR below. */
#define DLB__STREAM_AHEAD_FAR 4096
#define DLB__STREAM_AHEAD_NEAR 512
enum {
  DLB__STREAM_V128 = 0,      /* 16-byte stores, nothing read ahead */
  DLB__STREAM_V128_NEAR = 1, /* 16-byte, DLB__STREAM_AHEAD_NEAR ahead */
  DLB__STREAM_V128_FAR = 2,  /* 16-byte, DLB__STREAM_AHEAD_FAR ahead */
  DLB__STREAM_AVX2 = 3,      /* 32-byte stores, nothing read ahead */
  DLB__STREAM_AVX512 = 4,    /* 64-byte stores, nothing read ahead */
  DLB__STREAM_KINDS = 5
};
#define DLB__STREAM_ROW_MIN ((int64_t)256)

/* Shorter rows stream too, from DLB__STREAM_SHORT_ROW_MIN bytes, when
 * they follow each other in src (as a permutation's do in src's order)
 * and are whole lines or land DLB__STREAM_FAR_ROWS bytes or more apart in
 * dst. Streamed and plain alternated in one process, one thread: (N, N,
 * N, N) tensors permuted (2, 0, 1, 3) and (0, 2, 1, 3), rows of 64 to 224
 * bytes, ran 1.3-2.7 x faster streamed; rows of 64 to 192 bytes from
 * compact src into dst rows 128 to 4096 bytes apart 1.7-2.7 x. Rows that
 * are not whole lines, close together in dst, lost (96 bytes 160 apart
 * 0.72 x, 100 bytes 164 apart 0.85 x: lines shared by two rows get both
 * kinds of store), and so did rows read from every 4 KiB of src (128
 * bytes: 0.51 x), which keep DLB__STREAM_ROW_MIN. */
#define DLB__STREAM_SHORT_ROW_MIN ((int64_t)64)
#define DLB__STREAM_FAR_ROWS ((int64_t)4096)

/* The instruction sets the kernels may use, each including the ones
 * before it. DLB__ISA_V128 is 128-bit vectors: SSE2 on x86-64 ("sse2"),
 * Advanced SIMD on aarch64 ("neon", the transpose strips only: vec128.h);
 * other builds run the portable C paths. An x86-64 build chooses at run
 * time AVX-512 kernels on CPUs with AVX-512 F, BW and VBMI, AVX2 ones on
 * CPUs with AVX2 (each where the OS saves the registers), and SSE2 ones
 * elsewhere. */
enum {
  DLB__ISA_PORTABLE = 0,
  DLB__ISA_V128 = 1,
  DLB__ISA_AVX2 = 2,
  DLB__ISA_AVX512 = 3
};

/* The best level this build and CPU allow, capped by the environment
 * variable DLBRIDGE_COPY_ISA (read once: "portable", "sse2" or "neon"
 * (the same level), "avx2" or "avx512"; it can only lower the level) and
 * by the test hook. */
int dlb__copy_isa(void);

/* Whether the CPU is an Intel one (read once). Builds without the wide
 * kernels (compilers older than GCC 9) do not ask and answer 0, so they
 * stream as on other CPUs. */
int dlb__cpu_is_intel(void);

/* The non-temporal copy's kind (DLB__STREAM_V128 ...) for kernels at
 * `level` on an Intel CPU (intel non-zero) or another; dlb__stream_kind()
 * is the one for this CPU at dlb__copy_isa(). See DLB__STREAM_AHEAD_FAR. */
int dlb__stream_kind_for(int level, int intel);
static inline int dlb__stream_kind(void) {
  return dlb__stream_kind_for(dlb__copy_isa(), dlb__cpu_is_intel());
}

/* The bytes read ahead of the stores by a non-temporal copy of `kind`. */
size_t dlb__stream_kind_ahead(int kind);

/* For the tests: the level (DLB__ISA_V128, DLB__ISA_AVX2 or
 * DLB__ISA_AVX512) whose transpose strips ran last, or -1 when none has
 * since dlb__strips_forget(). */
int dlb__strips_last_level(void);
void dlb__strips_forget(void);

/* For the tests: how near, modulo 4 KiB, the register kernels' strips came
 * to the low 12 bits of their own dst runs (strips.h): with their stack
 * pointers (strips run below a gap placed for it; the first strip of each
 * kind shows where the pointer is and is not counted) and with the bytes
 * their tiles' L1 buffers use (the AVX2 level's 1-byte tile pairs, which
 * use all of their scratch), the least since dlb__strips_forget(), and how
 * many strips were counted. Strips count only once dlb__strips_forget() has
 * run (dlb__strips_counting: a copy outside the tests pays one load a
 * strip for it). */
typedef struct {
  int64_t stack, buffers; /* bytes; 4096 while none was counted */
  int64_t strips;
} dlb__strips_nearest;
extern atomic_int dlb__strips_counting;
void dlb__strips_note(int64_t stack, int64_t buffers);
dlb__strips_nearest dlb__strips_nearest_seen(void);

/* The level a DLBRIDGE_COPY_ISA value names, or -1 (NULL, unknown). */
int dlb__copy_isa_parse(const char *name);

/* Test hook: kernels are chosen as if the CPU had at most `level` (one of
 * the above), so tests run every path the machine can; -1 lifts the cap. */
void dlb__copy_cap_isa(int level);

/* Whether this build has the AVX2 and AVX-512 kernels: x86-64 with a
 * compiler that compiles them for a target chosen per function. */
#if defined(__x86_64__) && defined(__SSE2__) && \
    (defined(__clang__) || (defined(__GNUC__) && __GNUC__ >= 9))
#define DLB__HAVE_WIDE 1
#else
#define DLB__HAVE_WIDE 0
#endif

/* GCC deletes loops that hold nothing but __builtin_prefetch (12.2 does, in
 * transpose.c's ahead(): it sees no side effect to keep), so on x86 the
 * instruction is written out; elsewhere the builtin is the best there is. */
#if defined(__GNUC__) && (defined(__x86_64__) || defined(__i386__))
#define DLB__PREFETCH(p) \
  __asm__ volatile("prefetcht0 %0" : : "m"(*(const char *)(p)))
#define DLB__PREFETCH_L2(p) \
  __asm__ volatile("prefetcht1 %0" : : "m"(*(const char *)(p)))
#elif defined(__GNUC__)
#define DLB__PREFETCH(p) __builtin_prefetch((p), 0, 3)
#define DLB__PREFETCH_L2(p) __builtin_prefetch((p), 0, 2)
#else
#define DLB__PREFETCH(p) ((void)(p))
#define DLB__PREFETCH_L2(p) ((void)(p))
#endif

/* Src bytes of a gathered row's chunks (see ahead_units below). Rows with
 * gaps between them defeat the hardware prefetchers on the development VM:
 * reading every second 16 KiB row of a 64 MiB matrix took longer than
 * reading every row, and 0.55-0.75 x that time when the same 4 KiB of the
 * next row was prefetched before each 4 KiB (1 and 8 KiB did less well;
 * prefetching whole rows, or the skipped rows, did not help). Rows that
 * follow each other lose by it: [:, ::3] of 4096^2 float32 ran at 0.75 x. */
#define DLB__AHEAD_CHUNK 4096

/* Rows of such a gather that reads DLB__BAND_MIN bytes of rows or more
 * run DLB__BANDS at a time, from bands of rows far apart, in chunks of
 * DLB__BAND_CHUNK src bytes, or of 16 units where those span more
 * (plan.c's run_bands). Reading every second 16 KiB block of 64 MiB took
 * 2.4-2.9 x the time of reading the same 32 MiB in one run on the
 * development VM, every second 1 MiB block no longer (bench_copy's slice
 * section): rows close together leave part of the memory idle. With
 * bands, a slice [::2, ::3] of 4096^2 float32 ran 1.31-1.40 x faster, one
 * thread or two (bands of 4 and 6 rows, chunks of 256 bytes: 6 by 1.07 x;
 * 8 bands, 384- to 2048-byte chunks, prefetches along the row instead of
 * the next row's chunk, or none, ran slower). The chunks cost calls: with
 * the rows in the caches, slices of 8 and 16 MiB ran 1.4 x slower so,
 * 32 MiB 0.91-1.15 x as fast, 64 MiB 1.37-1.42 x faster (rows read:
 * half). */
#define DLB__BANDS 6
#define DLB__BAND_CHUNK 256
#define DLB__BAND_MIN ((int64_t)24 << 20)

/* Bytes of each dst row that a transpose's strip writes: its src rows are
 * this over the unit (transpose.c, transpose_avx512.c). */
#define DLB__STRIP_BYTES 128

/* The same when a strip reads one block of src (rows that follow each
 * other, each within one chunk: a permutation's 64 x 64 planes), where
 * taller strips cost the reads nothing (strips.h). */
#define DLB__TALL_STRIP_BYTES 256

/* Lines of each src row that a chunk of the register kernels' strips
 * covers (strips.h): 16 KiB of src, and at least four lines of each row:
 * 4, 4, 8, 16 and 32 lines for units of 1, 2, 4, 8 and 16 bytes. The
 * 4 KiB and 2 KiB chunks that four lines made for 8- and 16-byte units
 * ran 1.11-1.19 x and 1.14-1.22 x slower than 16 KiB ones (64 MiB
 * transposes, AVX-512, the chunks alternated in one process, three
 * runs); 4-byte units ran the same with 8 KiB and 16 KiB chunks. */
#define DLB__CHUNK_BYTES ((int64_t)16 << 10)
static inline int64_t dlb__chunk_lines(size_t unit) {
  const int64_t lines =
      DLB__CHUNK_BYTES / (DLB__STRIP_BYTES / (int64_t)unit * 64);
  return lines > 4 ? lines : 4;
}

#if DLB__HAVE_WIDE
/* The strips of a plane with unit steps on its fast sides, in AVX-512
 * registers: columns [0, a_full) and rows [0, bw) (multiples of 64 /
 * unit), next_src (or NULL) the next plane's first src byte, nt for
 * non-temporal stores (dst and dst_b aligned to lines; not fenced). Only
 * when dlb__copy_isa() is DLB__ISA_AVX512. */
void dlb__strips_avx512(char *dst, int64_t dst_b, const char *src,
                        int64_t src_a, int64_t bw, int64_t a_full,
                        const char *next_src, size_t unit, int nt);

/* The same with AVX2 registers, for every unit; only when dlb__copy_isa()
 * is DLB__ISA_AVX2 or higher. */
void dlb__strips_avx2(char *dst, int64_t dst_b, const char *src,
                      int64_t src_a, int64_t bw, int64_t a_full,
                      const char *next_src, size_t unit, int nt);

/* Whole lines of the non-temporal copy (dst aligned to a line, `lines`
 * of 64 bytes) in 32- and 64-byte registers, nothing read ahead, not
 * fenced: DLB__STREAM_AVX2 and DLB__STREAM_AVX512 (stream_wide.c). */
void dlb__stream_lines_avx2(char *dst, const char *src, size_t lines);
void dlb__stream_lines_avx512(char *dst, const char *src, size_t lines);
#endif

/* The tile kernel for `unit`; the fast paths expect dst_a == unit and
 * src_b == unit (rows in, columns out), and with `stream` write dst with
 * non-temporal stores where its rows are line-aligned (see
 * DLB__STREAM_MIN), not fenced: the caller fences after its last plane
 * (dlb__stream_fence). A fence per plane cost a third of the speed of
 * (32768, 16, 16) float32 planes transposed. */
dlb__tile_fn dlb__tile_kernel(size_t unit, int64_t dst_a, int64_t src_b,
                              int stream);

/* The edge in bytes of a tile kernel's blocks, along both sides: a cache
 * line. Threads split tiles at multiples of it. */
#define DLB__BLOCK_BYTES 64

/* Smallest |src stride| in bytes of the dimension that dst writes in order
 * for a transposed plan to pay: below it rows share cache lines anyway. */
#define DLB__TILE_MIN_STRIDE 64

/* How the innermost dimensions run. */
typedef enum dlb__copy_kind {
  DLB__COPY_ROWS, /* the last dimension by a row kernel */
  DLB__COPY_TILE  /* the last two by a tile kernel */
} dlb__copy_kind;

/* A planned copy of elements that do not overlap between src and dst. */
typedef struct dlb__copy_plan {
  char *dst;
  const char *src;
  int32_t ndim; /* >= 1, outermost first */
  int64_t shape[DLB__COPY_DIMS];
  int64_t dst_stride[DLB__COPY_DIMS]; /* bytes */
  int64_t src_stride[DLB__COPY_DIMS]; /* bytes */
  size_t unit;                        /* bytes of one unit: 1,2,4,8,16 */
  dlb__copy_kind kind;
  /* Whether the elements may be split among threads: dst names every
   * element once, so neither order nor concurrency changes the result. */
  int parallel;
  dlb__row_fn row;
  dlb__tile_fn tile;
  /* The kernels may leave non-temporal stores unfenced (streaming rows
   * and tiles): each range run fences once at its end. */
  int fence;
  /* Rows of a gather run in chunks of this many units, each after the
   * same chunk of the next row is prefetched; 0: rows run whole. */
  int64_t ahead_units;
  /* The same for rows run in bands (plan.c's run_bands); 0: not. */
  int64_t band_units;
} dlb__copy_plan;

/* Plans copying ndim dimensions of shape (no extent 0) with element strides
 * of itemsize bytes (NULL: compact); the first elements are at src and dst.
 * Fills *plan; never fails for tensors that passed dlb_tensor_validate. */
void dlb__copy_plan_build(dlb__copy_plan *plan, char *dst,
                          const int64_t *dst_strides, const char *src,
                          const int64_t *src_strides, int32_t ndim,
                          const int64_t *shape, size_t itemsize);

/* Runs the plan, over the pool when it is large and parallel. fresh_dst
 * says dst's pages were never touched: then a memcpy-like plan runs on one
 * thread, since it is bound by page faults, and concurrent faults on huge
 * pages contend (bench/bench_copy_peers.py: 64 MiB into fresh memory takes
 * 8 ms on one thread, 10 to 15 ms on two). */
void dlb__copy_plan_run(const dlb__copy_plan *plan, int fresh_dst);

/* Below these many bytes a copy runs on the calling thread: waking the
 * other threads (tens of microseconds in a VM) costs more than they save.
 * bench/bench_copy.c's sweep on 2 cores: a transpose gains 1.5 x at
 * 2 MiB and nothing at 1 MiB; a memcpy-like copy, which runs from L3 at
 * these sizes, gains nothing at 2 MiB (20 % lost in some runs) and 1.3 x
 * at 4 MiB. */
#define DLB__COPY_PARALLEL_MIN ((int64_t)2 << 20)
#define DLB__COPY_PARALLEL_MIN_CONTIGUOUS ((int64_t)4 << 20)

/* A contiguous copy of DLB__STREAM_MIN bytes or more streams, and two
 * threads streaming ran slower than one up to 12 MiB: per-rep speed-up,
 * 31 reps each, median (quartiles), 2 cores: 8 MiB 0.95 (0.88-0.96), 12
 * MiB 0.95-0.99, 16 MiB 0.95 or 1.46 in two runs, 24 MiB 1.03-1.05
 * (1.00-1.09), 32 MiB 1.14-1.17, 64 MiB 1.17-1.20. So such copies share
 * out from here on. A single block only: streamed rows share out from
 * DLB__COPY_PARALLEL_MIN_CONTIGUOUS (dlb__copy_plan_run). */
#define DLB__COPY_PARALLEL_MIN_STREAMED ((int64_t)24 << 20)

/* The threshold above for a streamed copy of `kind`: the kinds that
 * store 32- or 64-byte registers (Intel CPUs) share out from
 * DLB__STREAM_MIN on. On the Intel Xeon VM (AVX-512; bench_copy's sweep
 * with the threshold lowered, 15 reps, two runs) two threads ran 8 MiB
 * 1.85-1.96 x as fast as one, 16 MiB 1.94 x, 32 MiB 1.91-1.95 x. That VM
 * is the only Intel host measured, for this and for the kinds; the AVX2
 * kind follows from it untried. dlb__copy_parallel_min_streamed() is the
 * threshold for this CPU's kind. */
static inline int64_t dlb__copy_parallel_min_streamed_for(int kind) {
  return kind == DLB__STREAM_AVX2 || kind == DLB__STREAM_AVX512
             ? DLB__STREAM_MIN
             : DLB__COPY_PARALLEL_MIN_STREAMED;
}
static inline int64_t dlb__copy_parallel_min_streamed(void) {
  return dlb__copy_parallel_min_streamed_for(dlb__stream_kind());
}

/* Runs fn(ctx, part) for part in [0, nparts) on up to `threads` threads,
 * the caller included, and returns when all are done. Runs everything on
 * the caller when the pool is busy with another caller's job (a part may
 * call it again), or threads cannot start. Returns how many threads the
 * parts were offered to (1: the caller alone); which of them ran parts
 * depends on scheduling. */
int dlb__pool_run(void (*fn)(void *ctx, int64_t part), void *ctx,
                  int64_t nparts, int threads);

/* How many threads this thread's last dlb_copy was shared among (1 when
 * it ran alone): lets tests see that the pool was used. */
int dlb__copy_last_threads(void);
/* Rows of gathers run in bands so far, in this process (for tests). */
int64_t dlb__copy_banded_rows(void);
void dlb__copy_set_last_threads(int threads);

#endif /* DLBRIDGE_COPY_INTERNAL_H */
