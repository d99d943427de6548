/*
 * plan.c -- turns a copy between two layouts into loops over bytes, and
 * runs them.
 *
 * Dimensions are merged where both sides allow it, so a compact copy
 * becomes one memcpy whatever its shape. When dst names every element once
 * the copy may run in any order: dimensions are then flipped and sorted so
 * that dst is written in address order, and a transposed pair (src in
 * order along another dimension than dst) goes to the tile kernel; the
 * loops around a plane, or around a row contiguous on both sides, are
 * then put in src's address order. Otherwise the row-major order is kept,
 * so that a dst naming one address twice ends with the last value.
 */
#include <stdatomic.h>
#include <stdlib.h>

#include "copy/copy_internal.h"

static int64_t abs64(int64_t v) { return v < 0 ? -v : v; }

/* The largest of 16, 8, 4, 2, 1 dividing itemsize. */
static size_t unit_of(size_t itemsize) {
  size_t unit = 16;
  while (itemsize % unit != 0) unit /= 2;
  return unit;
}

/* Whether every index of the layout names distinct bytes: with dimensions
 * sorted by |stride|, each stride must step past everything the inner ones
 * reach (a mixed-radix argument). Extents are >= 2 after merging. */
static int names_each_once(int32_t ndim, const int64_t *shape,
                           const int64_t *stride, int64_t unit) {
  int32_t order[DLB__COPY_DIMS];
  for (int32_t i = 0; i < ndim; i++) order[i] = i;
  for (int32_t i = 1; i < ndim; i++) {
    int32_t k = order[i], j = i;
    while (j > 0 && abs64(stride[order[j - 1]]) > abs64(stride[k])) {
      order[j] = order[j - 1];
      j--;
    }
    order[j] = k;
  }
  int64_t reach = unit;
  for (int32_t i = 0; i < ndim; i++) {
    int64_t s = abs64(stride[order[i]]);
    if (s < reach) return 0;
    /* s * (extent - 1) fits: it is part of the validated byte span. */
    reach += s * (shape[order[i]] - 1);
  }
  return 1;
}

static void swap64(int64_t *a, int64_t *b) {
  int64_t t = *a;
  *a = *b;
  *b = t;
}

static void swap_dims(dlb__copy_plan *p, int32_t i, int32_t j) {
  swap64(&p->shape[i], &p->shape[j]);
  swap64(&p->dst_stride[i], &p->dst_stride[j]);
  swap64(&p->src_stride[i], &p->src_stride[j]);
}

/* Walks dimension i backwards on both sides: same elements, other order. */
static void flip_dim(dlb__copy_plan *p, int32_t i) {
  p->dst += (p->shape[i] - 1) * p->dst_stride[i];
  p->src += (p->shape[i] - 1) * p->src_stride[i];
  p->dst_stride[i] = -p->dst_stride[i];
  p->src_stride[i] = -p->src_stride[i];
}

static void coalesce(dlb__copy_plan *p) {
  int64_t *strides[2] = {p->dst_stride, p->src_stride};
  p->ndim = dlb_coalesce_dims(p->ndim, p->shape, strides, 2);
  if (p->ndim == 0) {
    /* A single unit. */
    p->ndim = 1;
    p->shape[0] = 1;
    p->dst_stride[0] = p->src_stride[0] = (int64_t)p->unit;
  }
}

/* dst names each element once: order the loops by dst address. */
static void reorder(dlb__copy_plan *p) {
  for (int32_t i = 0; i < p->ndim; i++)
    if (p->dst_stride[i] < 0) flip_dim(p, i);
  /* Insertion sort, outermost = largest dst stride (strides are distinct:
   * dst names each element once). */
  for (int32_t i = 1; i < p->ndim; i++)
    for (int32_t j = i; j > 0 && p->dst_stride[j - 1] < p->dst_stride[j]; j--)
      swap_dims(p, j - 1, j);
  coalesce(p);
}

/* A transposed pair: dst in order along the last dimension a, src in order
 * along b (its smallest |stride|). b moves next to a, walking src forwards,
 * and the pair goes to the tile kernel. */
static void find_tile(dlb__copy_plan *p) {
  int32_t a = p->ndim - 1;
  if (p->ndim < 2 || abs64(p->src_stride[a]) < DLB__TILE_MIN_STRIDE) return;
  int32_t b = 0;
  for (int32_t i = 1; i < a; i++)
    if (abs64(p->src_stride[i]) < abs64(p->src_stride[b])) b = i;
  if (abs64(p->src_stride[b]) >= DLB__TILE_MIN_STRIDE) return;
  if (p->src_stride[b] < 0) flip_dim(p, b);
  for (int32_t i = b; i + 1 < a; i++) swap_dims(p, i, i + 1);
  coalesce(p);
  p->kind = DLB__COPY_TILE;
}

/* Rows contiguous on both sides, and planes: the loops around the row
 * or plane go in src's address order instead of dst's (src walking
 * forwards). Each row or plane writes whole runs of dst in any order,
 * while reads in order are what memory and the prefetchers serve best.
 * Measured with the two orders alternated in one process, one thread, on
 * (64, 64, 64, 64) tensors permuted: float32 (2, 0, 1, 3), rows of 256
 * bytes streamed, ran at 0.60 x a non-temporal copy against 0.24; with
 * 1- and 2-byte units (memcpy rows of 64 and 128 bytes) (2, 0, 1, 3),
 * (0, 2, 1, 3) and (1, 0, 2, 3) ran 1.2-2.2 x faster, and so did
 * (2, 0, 1, 3) at 16^4 float32, in cache (11.0 GB/s against 5.4). Of the
 * 17 permutations of 64^4 float32 whose plans transpose planes, two runs
 * each, (1, 3, 0, 2) ran 1.33-1.37 x faster, (3, 1, 0, 2) 1.09-1.19 and
 * (3, 2, 1, 0) 1.06-1.19; none lost in both runs, the worst single ratio
 * 0.91. The row or plane itself stays. */
static void src_order(dlb__copy_plan *p) {
  const int32_t outer = p->ndim - (p->kind == DLB__COPY_TILE ? 2 : 1);
  for (int32_t i = 0; i < outer; i++)
    if (p->src_stride[i] < 0) flip_dim(p, i);
  for (int32_t i = 1; i < outer; i++)
    for (int32_t j = i; j > 0 && p->src_stride[j - 1] < p->src_stride[j]; j--)
      swap_dims(p, j - 1, j);
  coalesce(p);
}

void dlb__copy_plan_build(dlb__copy_plan *p, char *dst,
                          const int64_t *dst_strides, const char *src,
                          const int64_t *src_strides, int32_t ndim,
                          const int64_t *shape, size_t itemsize) {
  p->dst = dst;
  p->src = src;
  p->unit = unit_of(itemsize);
  p->kind = DLB__COPY_ROWS;
  int64_t compact = 1;
  for (int32_t i = ndim - 1; i >= 0; i--) {
    /* Strides of size-1 dimensions are never used, and may be anything. */
    int64_t ds = dst_strides != NULL ? dst_strides[i] : compact;
    int64_t ss = src_strides != NULL ? src_strides[i] : compact;
    p->shape[i] = shape[i];
    p->dst_stride[i] = shape[i] == 1 ? 0 : ds * (int64_t)itemsize;
    p->src_stride[i] = shape[i] == 1 ? 0 : ss * (int64_t)itemsize;
    compact *= shape[i];
  }
  p->ndim = ndim;
  if (itemsize > p->unit) {
    p->shape[ndim] = (int64_t)(itemsize / p->unit);
    p->dst_stride[ndim] = p->src_stride[ndim] = (int64_t)p->unit;
    p->ndim++;
  }
  coalesce(p);
  p->parallel =
      names_each_once(p->ndim, p->shape, p->dst_stride, (int64_t)p->unit);
  if (p->parallel) {
    reorder(p);
    find_tile(p);
  }
  int32_t last = p->ndim - 1;
  /* Only a dst naming each element once may be written out of the
   * cache's order; its bytes are within its validated span. */
  int64_t bytes = (int64_t)p->unit;
  for (int32_t i = 0; p->parallel && i < p->ndim; i++) bytes *= p->shape[i];
  p->fence = 0;
  if (p->kind == DLB__COPY_TILE) {
    src_order(p);
    last = p->ndim - 1;
    p->row = NULL;
    p->fence = p->parallel && bytes >= DLB__STREAM_MIN;
    p->tile = dlb__tile_kernel(p->unit, p->dst_stride[last],
                               p->src_stride[last - 1], p->fence);
  } else {
    if (p->parallel && p->dst_stride[last] == (int64_t)p->unit &&
        p->src_stride[last] == (int64_t)p->unit) {
      src_order(p);
      last = p->ndim - 1;
    }
    /* Within the bytes of a dst naming each element once, so it fits. */
    const int64_t row_bytes =
        p->parallel ? p->shape[last] * (int64_t)p->unit : 0;
    const int short_ok =
        p->ndim > 1 && row_bytes >= DLB__STREAM_SHORT_ROW_MIN &&
        p->src_stride[last - 1] == row_bytes &&
        (row_bytes % 64 == 0 ||
         abs64(p->dst_stride[last - 1]) >= DLB__STREAM_FAR_ROWS);
    const int stream = p->parallel && bytes >= DLB__STREAM_MIN &&
                       (row_bytes >= DLB__STREAM_ROW_MIN || short_ok);
    p->tile = NULL;
    p->row = dlb__row_kernel(p->unit, p->dst_stride[last],
                             p->src_stride[last], stream);
    p->fence = dlb__row_kernel_streams(p->row);
  }
  p->ahead_units = 0;
  p->band_units = 0;
  const int64_t step = abs64(p->src_stride[last]);
  if (p->kind == DLB__COPY_ROWS && p->ndim >= 2 && step >= (int64_t)p->unit &&
      step < 64 &&
      abs64(p->src_stride[last - 1]) - step * p->shape[last] >=
          DLB__AHEAD_CHUNK) {
    /* Whole rounds of the unrolled gathers: 64 units or more, since the
     * step is under a line. */
    p->ahead_units = DLB__AHEAD_CHUNK / step / 16 * 16;
    /* Bands change the order of the rows: only a dst naming each element
     * once may be written so. */
    int64_t read = step;
    for (int32_t i = 0; i <= last; i++)
      if (dlb__mul_overflow(read, p->shape[i], &read)) read = INT64_MAX;
    if (p->parallel && read >= DLB__BAND_MIN) {
      p->band_units = DLB__BAND_CHUNK / step / 16 * 16;
      if (p->band_units < 16) p->band_units = 16;
    }
  }
}

/* Prefetches into L2 units [i, i + m) of the src row at offset row (a
 * gather's next row), in either direction. */
static inline void prefetch_chunk(const dlb__copy_plan *p, int64_t row,
                                  int64_t i, int64_t m) {
  const int64_t ss = p->src_stride[p->ndim - 1];
  int64_t lo = row + i * ss, hi = row + (i + m - 1) * ss;
  if (lo > hi) {
    const int64_t x = lo;
    lo = hi;
    hi = x;
  }
  /* Lines as addresses: the first may start before the tensor. */
  const uintptr_t base = (uintptr_t)p->src;
  for (uintptr_t a = (base + (uintptr_t)lo) & ~(uintptr_t)63;
       a < base + (uintptr_t)(hi + (int64_t)p->unit); a += 64)
    DLB__PREFETCH_L2((const char *)a);
}

/* Runs one row of a gather in chunks, each after prefetching the same
 * chunk of the next row (next: its first unit) into L2. Out of line: inlined
 * into run_range, it made the loop that calls the tile kernels run the
 * (64, 64, 64, 64) permutation 3-5 % slower. */
__attribute__((noinline)) static void row_ahead(const dlb__copy_plan *p,
                                                int64_t doff, int64_t soff,
                                                int64_t next, int64_t n) {
  const int32_t last = p->ndim - 1;
  const int64_t ds = p->dst_stride[last], ss = p->src_stride[last];
  for (int64_t i = 0; i < n; i += p->ahead_units) {
    const int64_t m = n - i < p->ahead_units ? n - i : p->ahead_units;
    prefetch_chunk(p, next, i, m);
    p->row(p->dst + doff + i * ds, ds, p->src + soff + i * ss, ss, m);
  }
}

/* Adds the offsets of row r of a range (rows in row-major order over
 * dimensions 0 to ndim - 2 of shape) to *doff and *soff. */
static void row_at(const dlb__copy_plan *p, const int64_t *shape, int64_t r,
                   int64_t *doff, int64_t *soff) {
  for (int32_t j = p->ndim - 2; j >= 0; j--) {
    const int64_t i = r % shape[j];
    r /= shape[j];
    *doff += i * p->dst_stride[j];
    *soff += i * p->src_stride[j];
  }
}

static _Atomic int64_t dlb__banded_rows;

int64_t dlb__copy_banded_rows(void) {
  return atomic_load_explicit(&dlb__banded_rows, memory_order_relaxed);
}

/* Runs the rows of a gather with gaps between them (band_units > 0) as
 * DLB__BANDS bands of consecutive rows, one row of each band at a time,
 * their chunks interleaved: each chunk after prefetching the same chunk of
 * its band's next row. Reading rows far apart at once is what spreads the
 * reads over the memory: one at a time, the rows of a slice [::2] of
 * 16 KiB rows left much of it idle (bench_copy). */
static void run_bands(const dlb__copy_plan *p, const int64_t *shape,
                      int64_t doff0, int64_t soff0, int64_t rows) {
  atomic_fetch_add_explicit(&dlb__banded_rows, rows, memory_order_relaxed);
  const int32_t last = p->ndim - 1;
  const int64_t n = shape[last], chunk = p->band_units;
  const int64_t ds = p->dst_stride[last], ss = p->src_stride[last];
  const int64_t per = (rows + DLB__BANDS - 1) / DLB__BANDS;
  for (int64_t i = 0; i < per; i++) {
    int64_t doff[DLB__BANDS], soff[DLB__BANDS], next[DLB__BANDS];
    int bands = 0;
    for (int b = 0; b < DLB__BANDS && b * per + i < rows; b++, bands++) {
      const int64_t r = b * per + i;
      int64_t unused = 0;
      doff[b] = doff0;
      soff[b] = soff0;
      row_at(p, shape, r, &doff[b], &soff[b]);
      next[b] = -1;
      if (i + 1 < per && r + 1 < rows) {
        next[b] = soff0;
        row_at(p, shape, r + 1, &unused, &next[b]);
      }
    }
    for (int64_t c = 0; c < n; c += chunk) {
      const int64_t m = n - c < chunk ? n - c : chunk;
      for (int b = 0; b < bands; b++) {
        if (next[b] >= 0) prefetch_chunk(p, next[b], c, m);
        p->row(p->dst + doff[b] + c * ds, ds, p->src + soff[b] + c * ss, ss,
               m);
      }
    }
  }
}

/* Runs the plan with dimension k restricted to [lo, hi). Offsets are kept
 * as integers so no pointer is formed outside the tensors. */
static void run_range(const dlb__copy_plan *p, int32_t k, int64_t lo,
                      int64_t hi) {
  if (hi <= lo) return;
  int64_t shape[DLB__COPY_DIMS];
  int64_t index[DLB__COPY_DIMS];
  const int32_t nd = p->ndim;
  const int32_t outer = nd - (p->kind == DLB__COPY_TILE ? 2 : 1);
  for (int32_t i = 0; i < nd; i++) {
    shape[i] = p->shape[i];
    index[i] = 0;
  }
  shape[k] = hi - lo;
  int64_t doff = lo * p->dst_stride[k], soff = lo * p->src_stride[k];
  if (p->band_units > 0) {
    int64_t rows = 1;
    for (int32_t i = 0; i < nd - 1; i++) rows *= shape[i];
    if (rows >= 2 * DLB__BANDS) {
      run_bands(p, shape, doff, soff, rows);
      if (p->fence) dlb__stream_fence();
      return;
    }
  }
  for (;;) {
    /* Step to the next kernel call first: a tile prefetches it. */
    int64_t ndoff = doff, nsoff = soff;
    int32_t j = outer - 1;
    for (; j >= 0; j--) {
      ndoff += p->dst_stride[j];
      nsoff += p->src_stride[j];
      if (++index[j] < shape[j]) break;
      ndoff -= shape[j] * p->dst_stride[j];
      nsoff -= shape[j] * p->src_stride[j];
      index[j] = 0;
    }
    const int more = j >= 0;
    if (p->kind == DLB__COPY_TILE)
      p->tile(p->dst + doff, p->dst_stride[nd - 2], p->dst_stride[nd - 1],
              p->src + soff, p->src_stride[nd - 2], p->src_stride[nd - 1],
              shape[nd - 2], shape[nd - 1], more ? p->dst + ndoff : NULL,
              more ? p->src + nsoff : NULL);
    else if (more && p->ahead_units > 0)
      row_ahead(p, doff, soff, nsoff, shape[nd - 1]);
    else
      p->row(p->dst + doff, p->dst_stride[nd - 1], p->src + soff,
             p->src_stride[nd - 1], shape[nd - 1]);
    if (!more) {
      if (p->fence) dlb__stream_fence();
      return;
    }
    doff = ndoff;
    soff = nsoff;
  }
}

/* Parts below this size cost more in hand-over than they gain. */
#define DLB__PART_MIN ((int64_t)256 << 10)

typedef struct {
  const dlb__copy_plan *plan;
  int32_t dim; /* the dimension split */
  int64_t extent;
  int64_t nparts;
  int64_t align; /* part boundaries are multiples of it */
} dlb__split;

static int64_t split_at(const dlb__split *s, int64_t part) {
  if (part == s->nparts) return s->extent;
  /* extent * part could overflow; part counts are small, so split it. */
  int64_t at = s->extent / s->nparts * part +
               s->extent % s->nparts * part / s->nparts;
  return at / s->align * s->align;
}

static void run_part(void *ctx, int64_t part) {
  const dlb__split *s = ctx;
  run_range(s->plan, s->dim, split_at(s, part), split_at(s, part + 1));
}

/* Part boundaries along dimension k: whole cache lines for a row the
 * kernel walks, whole blocks for a tile's rows, anything for outer loops. */
static int64_t split_align(const dlb__copy_plan *p, int32_t k) {
  if (p->kind == DLB__COPY_TILE && k == p->ndim - 2)
    return DLB__BLOCK_BYTES / (int64_t)p->unit;
  return k == p->ndim - 1 ? 64 : 1;
}

/* The dimension to split among threads: the outermost one with a part for
 * each thread, so that every part runs the kernels on whole rows and
 * planes (splitting a tile's own rows instead makes each plane thin: the
 * (3, 1, 0, 2) permutation on 2 threads fell from 0.9 to 0.6 x memcpy);
 * failing that, the one allowing the most parts. Returns how many parts it
 * allows. */
static int64_t choose_split(const dlb__copy_plan *p, int threads,
                            dlb__split *s) {
  int32_t best = 0;
  int64_t best_parts = 0;
  for (int32_t k = 0; k < p->ndim; k++) {
    int64_t parts = p->shape[k] / split_align(p, k);
    if (parts > best_parts) {
      best = k;
      best_parts = parts;
    }
    if (parts >= threads) break;
  }
  s->dim = best;
  s->extent = p->shape[best];
  s->align = split_align(p, best);
  return best_parts;
}

void dlb__copy_plan_run(const dlb__copy_plan *p, int fresh_dst) {
  const int32_t last = p->ndim - 1;
  const int contiguous = p->kind == DLB__COPY_ROWS &&
                         p->dst_stride[last] == (int64_t)p->unit &&
                         p->src_stride[last] == (int64_t)p->unit;
  /* Only a dst naming each element once may run in parallel; its bytes
   * are within its validated span, so the product fits. */
  int64_t bytes = (int64_t)p->unit;
  if (p->parallel && !(fresh_dst && contiguous))
    for (int32_t i = 0; i < p->ndim; i++) bytes *= p->shape[i];
  dlb__split s;
  s.plan = p;
  int64_t nparts = 1;
  int threads = 1;
  /* The thread count costs a system call: ask only for large copies.
   * The streamed threshold is a single block's: streamed rows (a
   * permutation's, a padded copy's) gained from two threads from 8 MiB
   * on, two threads and one alternated in one process: (40, 40, 40, 40)
   * and (48, 48, 48, 48) float32 permuted (2, 0, 1, 3), (0, 2, 1, 3) and
   * (1, 0, 2, 3), 10 and 21 MB, 1.1-1.4 x; rows of 1000 bytes into dst
   * rows 1016 apart, 10 to 22 MiB, 1.2-1.4 x. */
  const int64_t least = !contiguous ? DLB__COPY_PARALLEL_MIN
                       : bytes >= DLB__STREAM_MIN && p->ndim == 1
                           ? dlb__copy_parallel_min_streamed()
                           : DLB__COPY_PARALLEL_MIN_CONTIGUOUS;
  if (bytes >= least &&
      (threads = dlb_copy_get_threads()) > 1) {
    nparts = choose_split(p, threads, &s);
    if (nparts > bytes / DLB__PART_MIN) nparts = bytes / DLB__PART_MIN;
    if (nparts > 4 * (int64_t)threads) nparts = 4 * (int64_t)threads;
  }
  if (nparts < 2) {
    run_range(p, 0, 0, p->shape[0]);
    dlb__copy_set_last_threads(1);
    return;
  }
  s.nparts = nparts;
  dlb__copy_set_last_threads(dlb__pool_run(run_part, &s, nparts, threads));
}
