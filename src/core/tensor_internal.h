/*
 * tensor_internal.h -- the structures behind every tensor dlbridge makes,
 * shared by tensor.c (creation, conversion, release) and view.c (views).
 * Not installed.
 */
#ifndef DLBRIDGE_TENSOR_INTERNAL_H
#define DLBRIDGE_TENSOR_INTERNAL_H

#include <stdatomic.h>

#include "internal.h"

/* How an owner frees the data when its last reference goes. */
typedef enum dlb__owner_kind {
  DLB__OWNER_CPU_DATA,  /* a dlb__data_alloc block */
  DLB__OWNER_DEVICE,    /* a dlb__device_alloc block */
  DLB__OWNER_VERSIONED, /* a foreign DLManagedTensorVersioned */
  DLB__OWNER_LEGACY,    /* a foreign DLManagedTensor */
  DLB__OWNER_CALLBACK   /* a dlb_release_fn given to dlb_tensor_wrap */
} dlb__owner_kind;

/*
 * The shared, reference-counted owner of a tensor's data. Every tensor that
 * describes the data (the first one, its shares and views) holds one
 * reference; the last release frees the data as kind says, exactly once.
 */
typedef struct dlb__owner {
  atomic_size_t refs;
  dlb__owner_kind kind;
  /* The block of the tensor that embeds this owner (the first tensor made
   * for the data): it is freed with the last reference, not before. */
  struct dlb__tensor *home;
  union {
    void *cpu_data;
    struct {
      DLDevice device;
      void *ptr;
    } device;
    DLManagedTensorVersioned *versioned; /* deleter may be NULL */
    DLManagedTensor *legacy;             /* deleter may be NULL */
    struct {
      dlb_release_fn fn; /* may be NULL */
      void *ctx;
    } callback;
  } u;
} dlb__owner;

/*
 * A tensor dlbridge made: one block holding the managed struct, its context
 * (managed.manager_ctx points at this struct), the owner when the tensor
 * was the first made for its data, and shape then strides in dims (ndim
 * entries each).
 */
typedef struct dlb__tensor {
  DLManagedTensorVersioned managed;
  dlb__owner *owner; /* one reference, dropped by the deleter */
  /* The owner of a tensor made for new data lives in its block, so making
   * one costs one allocation; shares and views point at their base's. */
  dlb__owner own;
  int32_t dims_room; /* dims has room for this many dimensions, twice */
  int32_t dims_made; /* the ndim its shape and strides were made for */
  /* Whether the default allocator made this block: only such a block may
   * become a thread's spare, which the default's next tensor reuses. */
  int32_t default_block;
  int64_t dims[];
} dlb__tensor;

/* Returns t's dlb__tensor when dlbridge made t, else NULL (also for NULL). */
dlb__tensor *dlb__tensor_of(const DLManagedTensorVersioned *t);

/*
 * Makes a tensor sharing base's owner, dtype and device, with the given
 * geometry (ndim entries of shape and strides, copied) and flags. Its first
 * element lies delta bytes from base's first element. data stays base's
 * pointer unless the first element lies below it (foreign data with
 * negative strides), where data moves down to it and byte_offset becomes 0.
 * New; release with dlb_tensor_release().
 */
dlb_status dlb__tensor_derive(const dlb__tensor *base, int32_t ndim,
                              const int64_t *shape, const int64_t *strides,
                              int64_t delta, uint64_t flags,
                              DLManagedTensorVersioned **out);

/* Writes compact row-major strides of a validated shape into strides (ndim
 * entries), 0 where they would overflow: only possible when the tensor has
 * no elements, so no element is ever addressed through them. */
void dlb__implied_strides(int32_t ndim, const int64_t *shape,
                          int64_t *strides);

#endif /* DLBRIDGE_TENSOR_INTERNAL_H */
