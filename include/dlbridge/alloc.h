/*
 * dlbridge/alloc.h -- the replaceable host allocator.
 */
#ifndef DLBRIDGE_ALLOC_H
#define DLBRIDGE_ALLOC_H

#include "common.h"
#include "status.h"

DLB_BEGIN_DECLS

/*
 * The functions dlbridge uses for every host allocation it makes: its own
 * bookkeeping (structs, shapes, strides, owners) and CPU tensor data.
 * Each object records the allocator that made it and is freed through that
 * one, so replacing the allocator while objects live is safe.
 */
typedef struct dlb_allocator {
  /* Returns size bytes aligned to alignment (a power of two >= sizeof(void *)),
   * or NULL. size is never 0. */
  void *(*alloc)(void *ctx, size_t size, size_t alignment);
  /* Frees p (never NULL) returned by alloc with the same size and alignment. */
  void (*free)(void *ctx, void *p, size_t size, size_t alignment);
  /* Passed to both functions. */
  void *ctx;
} dlb_allocator;

/* Installs allocator for every later allocation on every thread (it is
 * copied). NULL restores the default allocator (aligned allocation that asks
 * for transparent huge pages for large blocks). Not synchronised with
 * allocations running on other threads: install it before sharing work.
 * Returns DLB_E_INVAL if a function pointer is NULL. */
DLB_API dlb_status dlb_set_allocator(const dlb_allocator *allocator);

/* Copies the allocator in effect into *out. */
DLB_API void dlb_get_allocator(dlb_allocator *out);

DLB_END_DECLS

#endif /* DLBRIDGE_ALLOC_H */
