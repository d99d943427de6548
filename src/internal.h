/*
 * internal.h -- helpers shared by the library's sources. Not installed.
 * Names shared between the library's files (extern, or static inline in an
 * internal header) use the dlb__ prefix; a function private to one .c file
 * is static and unprefixed, so the prefix always says "defined elsewhere".
 */
#ifndef DLBRIDGE_INTERNAL_H
#define DLBRIDGE_INTERNAL_H

#include <pthread.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include "dlbridge.h"

#if defined(__GNUC__)
#define DLB__PRINTF(fmt, args) __attribute__((format(printf, fmt, args)))
#else
#define DLB__PRINTF(fmt, args)
#endif

/* Records a detailed message for dlb_last_error() and returns status, so a
 * failure reads: return dlb__fail(DLB_E_LAYOUT, "shape[%d] is %lld", ...). */
dlb_status dlb__fail(dlb_status status, const char *fmt, ...)
    DLB__PRINTF(2, 3);

/* dlb__fail for a failure reported by a call made here: the message is
 * fmt's text, ": ", then the message that call left. */
dlb_status dlb__fail_within(dlb_status status, const char *fmt, ...)
    DLB__PRINTF(2, 3);

/* The longest message dlb_last_error() holds, with its terminator. */
#define DLB__ERROR_MAX 512

/*
 * A copy of dlb_last_error(), taken before an internal route whose failure
 * only sends the caller another way (a copy the runtime cannot take is
 * staged instead) and put back when it does: a call that succeeds must
 * leave the message as it found it (status.h).
 */
typedef struct dlb__saved_error {
  char text[DLB__ERROR_MAX];
} dlb__saved_error;
void dlb__error_save(dlb__saved_error *out);
void dlb__error_restore(const dlb__saved_error *saved);

/* Bookkeeping allocations through the installed allocator (default
 * alignment). Failures record a DLB_E_NOMEM message. */
void *dlb__malloc(size_t size);
void *dlb__calloc(size_t size);
void dlb__free(void *p);

/* Checks an allocation request of ndim dimensions of shape and dtype (as
 * dlb_tensor_alloc() documents its errors) and stores the element count
 * and the bytes the elements take. */
dlb_status dlb__alloc_request(DLDataType dtype, int32_t ndim,
                              const int64_t *shape, int64_t *numel,
                              int64_t *bytes);

/* Whether the allocator installed now is the built-in one (caches of
 * freed blocks hold them only then). */
int dlb__allocator_is_default(void);

/* Data allocations: size bytes (0 allowed) aligned to `alignment`. The block
 * remembers the allocator that made it; dlb__data_free frees through it. */
void *dlb__data_alloc(size_t size, size_t alignment);
void dlb__data_free(void *p);

/*
 * Memory of kinds other than cpu comes from the backends (src/backend/).
 * dlb__device_alloc returns DLB_E_UNSUPPORTED, DLB_E_NO_RUNTIME or
 * DLB_E_NO_DEVICE (with a message naming what was looked for) when the kind
 * cannot be had. size 0 is allowed. dlb__device_free frees with the matching
 * runtime call.
 */
dlb_status dlb__device_alloc(DLDevice device, size_t size, void **out);
void dlb__device_free(DLDevice device, void *ptr);
/* Writes a zero byte at at, in device memory from dlb__device_alloc, and
 * waits for it. */
dlb_status dlb__device_zero_byte(DLDevice device, void *at);

/* The part of dlb_managed_validate before the tensor: m not NULL, its
 * major version, no unknown flags. */
dlb_status dlb__managed_check_header(const DLManagedTensorVersioned *m);

/* The deleter of every tensor dlbridge makes (core/tensor.c). */
void dlb__tensor_deleter(DLManagedTensorVersioned *self);

/* DLB_OK unless m is a dlbridge tensor whose shape or strides, still
 * pointing into its own block, would run past it: its ndim was rewritten
 * (DLB_E_LAYOUT, naming both). Reads no entry of either. Validation asks
 * only for tensors with dlb__tensor_deleter. */
dlb_status dlb__tensor_check_arrays(const DLManagedTensorVersioned *m);

/* What validating a tensor measures: its element count and the bytes
 * [lo, hi) its elements occupy, relative to data (dlb_tensor_numel and
 * dlb_tensor_byte_span give the same). */
typedef struct dlb__span {
  int64_t numel;
  int64_t lo, hi;
} dlb__span;

/* dlb_tensor_validate for a copy's side: the message starts with which
 * ("src: ..."), and *out (untouched on failure) spares the copy measuring
 * the tensor again. */
dlb_status dlb__tensor_validate_span(const DLTensor *t, const char *which,
                                     dlb__span *out);

/* dlb_managed_validate that also gives what it measured (the span follows
 * IS_SUBBYTE_TYPE_PADDED). *out is untouched on failure. */
dlb_status dlb__managed_validate_span(const DLManagedTensorVersioned *m,
                                      dlb__span *out);

/* Whether two tensors with elements (numel > 0) and these spans from
 * dlb__tensor_validate_span share a byte. Validation ruled out wrapping. */
static inline int dlb__span_overlap(const DLTensor *x, const dlb__span *xs,
                                    const DLTensor *y, const dlb__span *ys) {
  uintptr_t a = (uintptr_t)x->data, b = (uintptr_t)y->data;
  return a + (uintptr_t)xs->lo < b + (uintptr_t)ys->hi &&
         b + (uintptr_t)ys->lo < a + (uintptr_t)xs->hi;
}

/* The check every copy makes between two valid sides: the same dtype, ndim
 * and shape, in that order; the message names the field and both values. */
dlb_status dlb__copy_check_pair(const DLTensor *src, const DLTensor *dst);

/* Copies between layouts where either side is not CPU-accessible memory.
 * DLB_E_UNSUPPORTED when no backend handles the pair. */
dlb_status dlb__device_copy(const DLTensor *src, const DLTensor *dst);

/* The locks held across long runtime calls, each defined where it is
 * used, which core/fork.c makes anew in a child of fork() (a thread of
 * the parent may have held one); and the copy pool's handlers, which it
 * runs around fork(). */
extern pthread_mutex_t dlb__pin_lock;        /* backend/pin.c */
extern pthread_mutex_t dlb__ipc_lock;        /* share/ipc.c */
extern pthread_mutex_t dlb__shm_lock;        /* share/shm.c */
extern pthread_mutex_t dlb__cuda_event_lock; /* backend/cuda_ipc.c */
extern pthread_mutex_t dlb__hip_event_lock;  /* backend/hip_ipc.c */
extern pthread_mutex_t dlb__cuda_ctx_lock;   /* backend/cuda_load.c */
void dlb__stage_locks_renew(void);           /* backend/staging.c */
void dlb__pool_before_fork(void);            /* copy/pool.c */
void dlb__pool_after_fork_parent(void);
void dlb__pool_after_fork_child(void);

/* Registers fork()'s handlers for those locks, once: every place that
 * takes one of them calls it first. */
void dlb__fork_guard(void);

/* Overflow-checked int64 arithmetic: return 0 on success, 1 on overflow. */
static inline int dlb__mul_overflow(int64_t a, int64_t b, int64_t *out) {
  return __builtin_mul_overflow(a, b, out);
}
static inline int dlb__add_overflow(int64_t a, int64_t b, int64_t *out) {
  return __builtin_add_overflow(a, b, out);
}

#endif /* DLBRIDGE_INTERNAL_H */
