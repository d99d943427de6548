/*
 * alloc.c -- the replaceable host allocator.
 *
 * Each block carries a header just below the pointer handed out, holding the
 * allocator that made it, so blocks are freed through their own allocator
 * even after dlb_set_allocator() installed another.
 */
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "internal.h"

/* Blocks at least this large ask for transparent huge pages. */
#define DLB__HUGE_THRESHOLD ((size_t)4 << 20)
#define DLB__HUGE_PAGE ((size_t)2 << 20)

static void *default_alloc(void *ctx, size_t size, size_t alignment) {
  (void)ctx;
  void *p = NULL;
  int huge = size >= DLB__HUGE_THRESHOLD;
  if (huge && alignment < DLB__HUGE_PAGE) alignment = DLB__HUGE_PAGE;
  /* malloc already aligns to max_align_t, at half posix_memalign's cost
   * (a tensor's block is the common case: bench/bench_import.c). */
  if (!huge && alignment <= _Alignof(max_align_t)) return malloc(size);
  if (alignment < sizeof(void *)) alignment = sizeof(void *);
  if (posix_memalign(&p, alignment, size) != 0) return NULL;
#ifdef MADV_HUGEPAGE
  /* Page faults on a fresh large block cost more than copying into it;
   * huge pages cut them 512-fold where the system allows. Advice only. */
  if (huge) (void)madvise(p, size & ~(DLB__HUGE_PAGE - 1), MADV_HUGEPAGE);
#endif
  return p;
}

static void default_free(void *ctx, void *p, size_t size, size_t alignment) {
  (void)ctx;
  (void)size;
  (void)alignment;
  free(p);
}

static const dlb_allocator dlb__default_allocator = {
    default_alloc, default_free, NULL};

static dlb_allocator dlb__allocator = {default_alloc, default_free, NULL};

dlb_status dlb_set_allocator(const dlb_allocator *allocator) {
  if (allocator == NULL) {
    dlb__allocator = dlb__default_allocator;
    return DLB_OK;
  }
  if (allocator->alloc == NULL || allocator->free == NULL)
    return dlb__fail(DLB_E_INVAL,
                     "allocator->%s is NULL; both alloc and free are required",
                     allocator->alloc == NULL ? "alloc" : "free");
  dlb__allocator = *allocator;
  return DLB_OK;
}

int dlb__allocator_is_default(void) {
  return dlb__allocator.alloc == default_alloc &&
         dlb__allocator.free == default_free;
}

void dlb_get_allocator(dlb_allocator *out) {
  if (out != NULL) *out = dlb__allocator;
}

typedef struct dlb__block {
  dlb_allocator allocator;
  void *raw;
  size_t total;
  size_t alignment;
} dlb__block;

static void *block_alloc(size_t size, size_t alignment) {
  if (alignment < _Alignof(max_align_t)) alignment = _Alignof(max_align_t);
  size_t head = (sizeof(dlb__block) + alignment - 1) & ~(alignment - 1);
  if (size > SIZE_MAX - head) {
    dlb__fail(DLB_E_NOMEM, "cannot allocate %zu bytes: size overflows", size);
    return NULL;
  }
  size_t total = head + size;
  dlb_allocator a = dlb__allocator;
  char *raw = a.alloc(a.ctx, total, alignment);
  if (raw == NULL) {
    dlb__fail(DLB_E_NOMEM, "out of memory allocating %zu bytes", size);
    return NULL;
  }
  char *user = raw + head;
  dlb__block *b = (dlb__block *)(void *)(user - sizeof(dlb__block));
  b->allocator = a;
  b->raw = raw;
  b->total = total;
  b->alignment = alignment;
  return user;
}

static void block_free(void *p) {
  if (p == NULL) return;
  dlb__block b;
  memcpy(&b, (char *)p - sizeof(dlb__block), sizeof b);
  b.allocator.free(b.allocator.ctx, b.raw, b.total, b.alignment);
}

void *dlb__malloc(size_t size) { return block_alloc(size, 0); }

void *dlb__calloc(size_t size) {
  void *p = block_alloc(size, 0);
  if (p != NULL) memset(p, 0, size);
  return p;
}

void dlb__free(void *p) { block_free(p); }

void *dlb__data_alloc(size_t size, size_t alignment) {
  return block_alloc(size, alignment);
}

void dlb__data_free(void *p) { block_free(p); }
