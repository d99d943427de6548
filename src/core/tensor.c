/*
 * tensor.c -- managed tensors: allocation, wrapping, adoption, legacy
 * conversion, sharing and release, and the owners behind them.
 *
 * Every tensor made here is one block (see tensor_internal.h) holding one
 * reference to an owner that knows how to free the data. Shares and views
 * add references, so the data, and the foreign deleter or callback behind
 * it, outlive whichever of them is released last, in any order and on any
 * thread.
 */
#include <pthread.h>
#include <string.h>

#include "tensor_internal.h"

/* ---- owners ------------------------------------------------------------ */

static void block_release(dlb__tensor *t);

/* Makes t's embedded owner its owner, with one reference; the caller
 * fills in the union. */
static void owner_init(dlb__tensor *t, dlb__owner_kind kind) {
  dlb__owner *o = &t->own;
  atomic_init(&o->refs, 1);
  o->kind = kind;
  o->home = t;
  memset(&o->u, 0, sizeof o->u);
  t->owner = o;
}

static void owner_retain(dlb__owner *o) {
  /* A reference is only ever taken through one already held, which keeps
   * the owner alive meanwhile: no ordering is needed. */
  atomic_fetch_add_explicit(&o->refs, 1, memory_order_relaxed);
}

static void owner_drop(dlb__owner *o) {
  /* acq_rel: the release half publishes this holder's writes to the data,
   * the acquire half makes the other holders' writes happen before the
   * free. One acq_rel decrement rather than release plus an acquire fence,
   * because ThreadSanitizer does not model fences and would report every
   * free from a thread other than the last writer. */
  if (atomic_fetch_sub_explicit(&o->refs, 1, memory_order_acq_rel) != 1)
    return;
  switch (o->kind) {
    case DLB__OWNER_CPU_DATA:
      dlb__data_free(o->u.cpu_data);
      break;
    case DLB__OWNER_DEVICE:
      dlb__device_free(o->u.device.device, o->u.device.ptr);
      break;
    case DLB__OWNER_VERSIONED:
      if (o->u.versioned->deleter != NULL)
        o->u.versioned->deleter(o->u.versioned);
      break;
    case DLB__OWNER_LEGACY:
      if (o->u.legacy->deleter != NULL) o->u.legacy->deleter(o->u.legacy);
      break;
    case DLB__OWNER_CALLBACK:
      if (o->u.callback.fn != NULL) o->u.callback.fn(o->u.callback.ctx);
      break;
  }
  block_release(o->home);
}

/* ---- tensor blocks ----------------------------------------------------- */

/* Blocks have room for at least this many dimensions, so that one freed
 * block serves the next tensor of up to that many: each thread keeps one
 * spare, which spares an import and release their malloc and free (about
 * 150 of 470 instructions: bench/callgrind.sh). Only blocks of the default
 * allocator, reused only while it is installed, so an application's
 * allocator makes every block while it is installed and sees every block
 * it made come back. A thread's spare is freed when it exits. */
#define SPARE_NDIM 8

static _Thread_local dlb__tensor *spare_block;
static _Thread_local int spare_registered;
static pthread_key_t spare_key;
static pthread_once_t spare_once = PTHREAD_ONCE_INIT;
static int spare_key_ok;

static void spare_free(void *unused) {
  (void)unused;
  dlb__tensor *t = spare_block;
  spare_block = NULL;
  /* Another key's destructor may release a tensor after this ran: it
   * registers again, so its block is freed in the next round of
   * destructors instead of staying a spare that nothing frees. */
  spare_registered = 0;
  dlb__free(t);
}

static void spare_init(void) {
  spare_key_ok = pthread_key_create(&spare_key, spare_free) == 0;
}

/* Frees a tensor block, or keeps it as this thread's spare when the
 * default allocator made it (a block of an application's goes back to it
 * at once, whatever is installed now; tensor_new takes the spare only
 * while the default is installed). */
static void block_release(dlb__tensor *t) {
  if (t->dims_room == SPARE_NDIM && t->default_block && spare_block == NULL) {
    if (!spare_registered) {
      pthread_once(&spare_once, spare_init);
      /* The key's value only makes the thread's exit run
       * spare_free. */
      spare_registered =
          spare_key_ok &&
          pthread_setspecific(spare_key, &spare_block) == 0;
    }
    if (spare_registered) {
      spare_block = t;
      return;
    }
  }
  dlb__free(t);
}

/* The deleter of every tensor made here; dlb_tensor_is_ours() recognises
 * our tensors by it. */
void dlb__tensor_deleter(DLManagedTensorVersioned *self) {
  dlb__tensor *t = self->manager_ctx;
  dlb__owner *o = t->owner;
  /* The block holding the owner goes with the owner's last reference. */
  if (o->home != t) block_release(t);
  owner_drop(o);
}

/* Allocates the block of a tensor with ndim dimensions (0..DLB_MAX_NDIM),
 * current version, no owner yet. Freed with block_release until it has
 * one. */
static dlb__tensor *tensor_new(int32_t ndim) {
  dlb__tensor *t = NULL;
  if (ndim <= SPARE_NDIM && spare_block != NULL &&
      dlb__allocator_is_default()) {
    t = spare_block;
    spare_block = NULL;
  } else {
    int32_t room = ndim > SPARE_NDIM ? ndim : SPARE_NDIM;
    const int by_default = dlb__allocator_is_default();
    t = dlb__malloc(sizeof *t + 2 * (size_t)room * sizeof(int64_t));
    if (t == NULL) return NULL;
    t->dims_room = room;
    t->default_block = by_default;
  }
  memset(&t->managed, 0, sizeof t->managed);
  t->managed.version.major = DLPACK_MAJOR_VERSION;
  t->managed.version.minor = DLPACK_MINOR_VERSION;
  t->managed.manager_ctx = t;
  t->managed.deleter = dlb__tensor_deleter;
  t->managed.dl_tensor.ndim = ndim;
  t->dims_made = ndim;
  /* Non-NULL even for ndim 0, for consumers that test the pointers. */
  t->managed.dl_tensor.shape = t->dims;
  t->managed.dl_tensor.strides = t->dims + ndim;
  t->owner = NULL;
  return t;
}

dlb__tensor *dlb__tensor_of(const DLManagedTensorVersioned *t) {
  if (t == NULL || t->deleter != dlb__tensor_deleter) return NULL;
  return t->manager_ctx;
}

/* Whether an array of n int64_t at p, if it starts anywhere in the block
 * [block, end), lies in the entries [dims, hi) made for its shape and
 * strides: a pointer into a block of ours is ours to bound (the room past
 * hi holds no entry of this tensor's), one elsewhere is not. */
static int fits(const int64_t *p, int32_t n, const void *block,
                const int64_t *dims, const int64_t *hi, const int64_t *end) {
  const uintptr_t a = (uintptr_t)p;
  if (a < (uintptr_t)block || a >= (uintptr_t)end) return 1;
  return a >= (uintptr_t)dims && a < (uintptr_t)hi &&
         a % sizeof(int64_t) == (uintptr_t)dims % sizeof(int64_t) &&
         (size_t)n <= (size_t)(hi - p);
}

/* DLB_E_LAYOUT unless shape and strides of a ndim-dimensional tensor fit
 * the entries [dims, dims + entries) made for them in the block starting at
 * block, whose dims have room for room entries. */
static dlb_status arrays_fit(const DLTensor *dl, const void *block,
                             const int64_t *dims, size_t entries, size_t room,
                             const char *what) {
  const int32_t ndim = dl->ndim;
  if (ndim <= 0 || ndim > DLB_MAX_NDIM) return DLB_OK; /* validation's */
  const int64_t *hi = dims + entries, *end = dims + room;
  /* A 0-dimensional legacy struct's arrays are empty and start at the
   * block's end: arrays that start there are still its own. */
  const int own_empty =
      room == 0 && (dl->shape == dims || dl->strides == dims);
  if (!own_empty && fits(dl->shape, ndim, block, dims, hi, end) &&
      fits(dl->strides, ndim, block, dims, hi, end))
    return DLB_OK;
  return dlb__fail(DLB_E_LAYOUT, "ndim is %d, but the shape and strides "
                   "of this %s run past the %zu entries made for them: its "
                   "ndim or their pointers were changed after it was made",
                   (int)ndim, what, entries);
}

dlb_status dlb__tensor_check_arrays(const DLManagedTensorVersioned *m) {
  const dlb__tensor *t = dlb__tensor_of(m);
  if (t == NULL) return DLB_OK;
  return arrays_fit(&m->dl_tensor, t, t->dims, 2 * (size_t)t->dims_made,
                    2 * (size_t)t->dims_room, "dlbridge tensor");
}

/*
 * Fills the strides of a validated description that has none: compact
 * row-major ones. Validation accepts any shape with no elements, whose
 * compact strides may not fit in int64_t ([0, 2^62, 2^62]); as no element is
 * ever addressed, the strides that would overflow are 0 instead of refusing
 * a tensor that dlb_managed_validate() accepts.
 */
void dlb__implied_strides(int32_t ndim, const int64_t *shape,
                          int64_t *strides) {
  int64_t acc = 1;
  int over = 0;
  for (int32_t d = ndim - 1; d >= 0; d--) {
    strides[d] = over ? 0 : acc;
    over = over || dlb__mul_overflow(acc, shape[d] == 0 ? 1 : shape[d], &acc);
  }
}

/* Copies dl->ndim entries of shape and of strides (NULL: implied ones) into
 * dl's own arrays. */
static void set_dims(DLTensor *dl, const int64_t *shape,
                     const int64_t *strides) {
  int32_t ndim = dl->ndim;
  if (ndim == 0) return;
  memcpy(dl->shape, shape, (size_t)ndim * sizeof(int64_t));
  if (strides != NULL)
    memcpy(dl->strides, strides, (size_t)ndim * sizeof(int64_t));
  else
    dlb__implied_strides(ndim, dl->shape, dl->strides);
}

dlb_status dlb__tensor_derive(const dlb__tensor *base, int32_t ndim,
                              const int64_t *shape, const int64_t *strides,
                              int64_t delta, uint64_t flags,
                              DLManagedTensorVersioned **out) {
  dlb__tensor *t = tensor_new(ndim);
  if (t == NULL) return DLB_E_NOMEM;
  const DLTensor *b = &base->managed.dl_tensor;
  DLTensor *dl = &t->managed.dl_tensor;
  t->managed.flags = flags;
  dl->device = b->device;
  dl->dtype = b->dtype;
  set_dims(dl, shape, strides);
  /* base was validated, so its byte_offset and every element's offset fit
   * in int64_t; delta leads to one of its elements. */
  int64_t off = (int64_t)b->byte_offset + delta;
  if (off >= 0) {
    dl->data = b->data;
    dl->byte_offset = (uint64_t)off;
  } else {
    /* byte_offset is unsigned: move data itself, with integer arithmetic
     * since it may be a device address. */
    dl->data = (void *)((uintptr_t)b->data + (uintptr_t)off);
    dl->byte_offset = 0;
  }
  t->owner = base->owner;
  owner_retain(t->owner);
  *out = &t->managed;
  return DLB_OK;
}

/*
 * Makes a tensor describing desc (already validated) with an owner: a new
 * one of the given kind whose union the caller fills in, or, when shared is
 * not NULL, a reference to shared. NULL strides become compact ones;
 * host-type devices get device_id 0. Nothing is taken over here, so a
 * failure leaves the caller's input as it was.
 */
static dlb_status tensor_import(const DLTensor *desc, uint64_t flags,
                                     dlb__owner_kind kind, dlb__owner *shared,
                                     dlb__tensor **out) {
  int32_t ndim = desc->ndim;
  dlb__tensor *t = tensor_new(ndim);
  if (t == NULL) return DLB_E_NOMEM;
  DLTensor *dl = &t->managed.dl_tensor;
  set_dims(dl, desc->shape, desc->strides);
  dl->data = desc->data;
  dl->device = desc->device;
  /* Cannot fail: validation accepted the device; cpu:0 is normal. */
  if (dl->device.device_type != kDLCPU || dl->device.device_id != 0)
    (void)dlb_device_normalize(&dl->device);
  dl->dtype = desc->dtype;
  dl->byte_offset = desc->byte_offset;
  t->managed.flags = flags;
  if (shared != NULL) {
    owner_retain(shared);
    t->owner = shared;
  } else {
    owner_init(t, kind);
  }
  *out = t;
  return DLB_OK;
}

/* Validates desc as the tensor of a current-version managed tensor with
 * flags, so flag bits and the sub-byte rules are checked too. */
static dlb_status validate_desc(const DLTensor *desc, uint64_t flags) {
  DLManagedTensorVersioned probe;
  memset(&probe, 0, sizeof probe);
  probe.version.major = DLPACK_MAJOR_VERSION;
  probe.version.minor = DLPACK_MINOR_VERSION;
  probe.flags = flags;
  probe.dl_tensor = *desc;
  return dlb_managed_validate(&probe);
}

/* ---- public API -------------------------------------------------------- */

dlb_status dlb__alloc_request(DLDataType dtype, int32_t ndim,
                              const int64_t *shape, int64_t *numel,
                              int64_t *bytes) {
  dlb_status st = dlb_dtype_check(dtype);
  if (st != DLB_OK) return st;
  if (ndim < 0 || ndim > DLB_MAX_NDIM)
    return dlb__fail(DLB_E_LAYOUT, "ndim is %d; must be 0..%d", (int)ndim,
                     DLB_MAX_NDIM);
  if (ndim > 0 && shape == NULL)
    return dlb__fail(DLB_E_INVAL, "shape is NULL with ndim %d", (int)ndim);
  st = dlb_shape_numel(ndim, shape, numel);
  if (st != DLB_OK) return st;
  return dlb_dtype_storage_bytes(dtype, *numel, 0, bytes);
}

dlb_status dlb_tensor_alloc(DLDevice device, DLDataType dtype, int32_t ndim,
                            const int64_t *shape,
                            DLManagedTensorVersioned **out) {
  if (out == NULL) return dlb__fail(DLB_E_INVAL, "out is NULL");
  dlb_status st = dlb_device_normalize(&device);
  if (st != DLB_OK) return st;
  int64_t numel = 0, bytes = 0;
  st = dlb__alloc_request(dtype, ndim, shape, &numel, &bytes);
  if (st != DLB_OK) return st;
  int64_t strides[DLB_MAX_NDIM];
  if (ndim > 0) {
    st = dlb_compact_strides(ndim, shape, 0, strides);
    if (st != DLB_OK) return st;
  }

  dlb__tensor *t = tensor_new(ndim);
  if (t == NULL) return DLB_E_NOMEM;
  int cpu = device.device_type == kDLCPU;
  owner_init(t, cpu ? DLB__OWNER_CPU_DATA : DLB__OWNER_DEVICE);
  void *data = NULL;
  if (cpu) {
    /* At least one byte, so data is never NULL even when empty. */
    data = dlb__data_alloc(bytes > 0 ? (size_t)bytes : 1, DLB_DATA_ALIGNMENT);
    st = data != NULL ? DLB_OK : DLB_E_NOMEM;
    t->owner->u.cpu_data = data;
  } else {
    st = dlb__device_alloc(device, (size_t)bytes, &data);
    t->owner->u.device.device = device;
    t->owner->u.device.ptr = data;
  }
  /* The byte that no element fills whole (the last of packed sub-byte
   * elements that end inside it, or the one byte of an empty tensor) is
   * zeroed: every byte handed out is defined, and copies into the tensor
   * keep the bits they do not write. */
  int64_t spare = bytes == 0 ? 0 : -1;
  if (dlb_dtype_is_subbyte(dtype) && (numel % 8) * dlb_dtype_bits(dtype) % 8)
    spare = bytes - 1;
  if (st == DLB_OK && spare >= 0) {
    st = dlb__device_zero_byte(device, (char *)data + spare);
    if (st != DLB_OK) {
      if (cpu)
        dlb__data_free(data);
      else
        dlb__device_free(device, data);
    }
  }
  if (st != DLB_OK) {
    block_release(t);
    return st;
  }
  DLTensor *dl = &t->managed.dl_tensor;
  dl->data = data;
  dl->device = device;
  dl->dtype = dtype;
  set_dims(dl, shape, strides);
  *out = &t->managed;
  return DLB_OK;
}

dlb_status dlb_tensor_wrap(const DLTensor *desc, uint64_t flags,
                           dlb_release_fn release, void *ctx,
                           DLManagedTensorVersioned **out) {
  if (out == NULL) return dlb__fail(DLB_E_INVAL, "out is NULL");
  if (desc == NULL) return dlb__fail(DLB_E_INVAL, "desc is NULL");
  dlb_status st = validate_desc(desc, flags);
  if (st != DLB_OK) return st;
  dlb__tensor *t = NULL;
  st = tensor_import(desc, flags, DLB__OWNER_CALLBACK, NULL, &t);
  if (st != DLB_OK) return st;
  t->owner->u.callback.fn = release;
  t->owner->u.callback.ctx = ctx;
  *out = &t->managed;
  return DLB_OK;
}

/* dlb_tensor_adopt after validation. */
static dlb_status adopt_valid(DLManagedTensorVersioned *foreign,
                              DLManagedTensorVersioned **out) {
  if (dlb__tensor_of(foreign) != NULL) {
    /* Already ours, at the current version: wrapping it again would only
     * lengthen the chain of deleters. */
    *out = foreign;
    return DLB_OK;
  }
  dlb__tensor *t = NULL;
  dlb_status st = tensor_import(&foreign->dl_tensor, foreign->flags,
                                DLB__OWNER_VERSIONED, NULL, &t);
  if (st != DLB_OK) return st;
  t->owner->u.versioned = foreign;
  *out = &t->managed;
  return DLB_OK;
}

dlb_status dlb_tensor_adopt(DLManagedTensorVersioned *foreign,
                            DLManagedTensorVersioned **out) {
  if (out == NULL) return dlb__fail(DLB_E_INVAL, "out is NULL");
  if (foreign == NULL) return dlb__fail(DLB_E_INVAL, "foreign is NULL");
  dlb_status st = dlb_managed_validate(foreign);
  if (st != DLB_OK) return st;
  return adopt_valid(foreign, out);
}

dlb_status dlb_tensor_adopt_validated(DLManagedTensorVersioned *foreign,
                                      DLManagedTensorVersioned **out) {
  if (out == NULL) return dlb__fail(DLB_E_INVAL, "out is NULL");
  if (foreign == NULL) return dlb__fail(DLB_E_INVAL, "foreign is NULL");
  return adopt_valid(foreign, out);
}

/* A legacy tensor made by dlb_tensor_to_legacy(): one block with its shape
 * and strides; manager_ctx is the versioned tensor it releases. */
typedef struct dlb__legacy {
  DLManagedTensor managed;
  int32_t ndim; /* dims holds 2 * ndim entries */
  int64_t dims[];
} dlb__legacy;

static void legacy_deleter(DLManagedTensor *self) {
  DLManagedTensorVersioned *t = self->manager_ctx;
  dlb__free(self);
  dlb_tensor_release(t);
}

/* 1 when legacy still describes exactly the tensor t it was made from. */
static int legacy_unchanged(const DLManagedTensor *legacy,
                            const DLManagedTensorVersioned *t) {
  const DLTensor *a = &legacy->dl_tensor, *b = &t->dl_tensor;
  if (a->data != b->data || a->byte_offset != b->byte_offset ||
      a->ndim != b->ndim || !dlb_dtype_equal(a->dtype, b->dtype) ||
      !dlb_device_equal(a->device, b->device) ||
      (a->ndim > 0 && (a->strides == NULL || b->shape == NULL ||
                       b->strides == NULL)))
    return 0;
  for (int32_t d = 0; d < a->ndim; d++)
    if (a->shape[d] != b->shape[d] || a->strides[d] != b->strides[d]) return 0;
  return 1;
}

/* For a legacy struct of ours, DLB_E_LAYOUT unless its shape and strides
 * lie in the arrays made for them: ours to bound before anything reads
 * them. DLB_OK for anyone else's. */
static dlb_status legacy_arrays_fit(const DLManagedTensor *legacy) {
  if (!dlb_legacy_is_ours(legacy)) return DLB_OK;
  const dlb__legacy *l = (const dlb__legacy *)(const void *)legacy;
  return arrays_fit(&legacy->dl_tensor, l, l->dims, 2 * (size_t)l->ndim,
                    2 * (size_t)l->ndim, "legacy tensor");
}

dlb_status dlb_legacy_validate(const DLManagedTensor *m) {
  if (m == NULL) return dlb__fail(DLB_E_INVAL, "legacy tensor is NULL");
  dlb_status st = legacy_arrays_fit(m);
  if (st != DLB_OK) return st;
  return dlb_tensor_validate(&m->dl_tensor);
}

dlb_status dlb_tensor_from_legacy(DLManagedTensor *legacy, uint64_t flags,
                                  DLManagedTensorVersioned **out) {
  if (out == NULL) return dlb__fail(DLB_E_INVAL, "out is NULL");
  if (legacy == NULL) return dlb__fail(DLB_E_INVAL, "legacy is NULL");
  dlb_status st = legacy_arrays_fit(legacy);
  if (st == DLB_OK) st = validate_desc(&legacy->dl_tensor, flags);
  if (st != DLB_OK) return st;
  if (dlb_legacy_is_ours(legacy)) {
    /* Our own conversion of one of our tensors: unwrap it instead of
     * stacking a deleter on a deleter at every round trip, which would
     * build a chain as long as the round trips, freed by recursion. The
     * wrapper owned the tensor alone, so its flags are ours to set. One
     * whose description a consumer rewrote gets a new tensor of what the
     * struct now says, sharing the owner. */
    DLManagedTensorVersioned *t = legacy->manager_ctx;
    /* Its sub-byte units are packed (padded ones get no legacy struct),
     * rewritten or not: padding would claim more bytes than there are. */
    if ((flags & DLPACK_FLAG_BITMASK_IS_SUBBYTE_TYPE_PADDED) &&
        dlb_dtype_is_subbyte(legacy->dl_tensor.dtype))
      return dlb__fail(DLB_E_LAYOUT,
                       "flags has IS_SUBBYTE_TYPE_PADDED, but this legacy "
                       "tensor's %u-bit units are packed",
                       (unsigned)dlb_dtype_bits(legacy->dl_tensor.dtype));
    if (legacy_unchanged(legacy, t)) {
      t->flags = flags;
    } else {
      dlb__tensor *n = NULL;
      st = tensor_import(&legacy->dl_tensor, flags, DLB__OWNER_LEGACY,
                              dlb__tensor_of(t)->owner, &n);
      if (st != DLB_OK) return st;
      dlb_tensor_release(t);
      t = &n->managed;
    }
    dlb__free(legacy);
    *out = t;
    return DLB_OK;
  }
  dlb__tensor *t = NULL;
  st = tensor_import(&legacy->dl_tensor, flags, DLB__OWNER_LEGACY, NULL,
                          &t);
  if (st != DLB_OK) return st;
  t->owner->u.legacy = legacy;
  *out = &t->managed;
  return DLB_OK;
}

dlb_status dlb_tensor_to_legacy(DLManagedTensorVersioned *t,
                                DLManagedTensor **out) {
  if (out == NULL) return dlb__fail(DLB_E_INVAL, "out is NULL");
  if (t == NULL) return dlb__fail(DLB_E_INVAL, "t is NULL");
  dlb_status st = dlb_managed_validate(t);
  if (st != DLB_OK) return st;
  if (t->flags & DLPACK_FLAG_BITMASK_READ_ONLY)
    return dlb__fail(DLB_E_READONLY,
                     "t->flags has READ_ONLY, which the legacy struct cannot "
                     "carry");
  if ((t->flags & DLPACK_FLAG_BITMASK_IS_SUBBYTE_TYPE_PADDED) &&
      dlb_dtype_is_subbyte(t->dl_tensor.dtype))
    return dlb__fail(DLB_E_UNSUPPORTED,
                     "t->flags has IS_SUBBYTE_TYPE_PADDED with a %u-bit "
                     "dtype; the legacy struct cannot carry the padding",
                     (unsigned)dlb_dtype_bits(t->dl_tensor.dtype));
  int32_t ndim = t->dl_tensor.ndim;
  dlb__legacy *l = dlb__malloc(sizeof *l + 2 * (size_t)ndim * sizeof(int64_t));
  if (l == NULL) return DLB_E_NOMEM;
  DLTensor *dl = &l->managed.dl_tensor;
  *dl = t->dl_tensor;
  dl->shape = l->dims;
  dl->strides = l->dims + ndim;
  l->ndim = ndim;
  set_dims(dl, t->dl_tensor.shape, t->dl_tensor.strides);
  /* Cannot fail: validation accepted the device. */
  (void)dlb_device_normalize(&dl->device);
  l->managed.manager_ctx = t;
  l->managed.deleter = legacy_deleter;
  *out = &l->managed;
  return DLB_OK;
}

dlb_status dlb_tensor_share(const DLManagedTensorVersioned *t,
                            DLManagedTensorVersioned **out) {
  if (out == NULL) return dlb__fail(DLB_E_INVAL, "out is NULL");
  const dlb__tensor *ours = dlb__tensor_of(t);
  if (ours == NULL)
    return dlb__fail(DLB_E_INVAL, t == NULL ? "t is NULL"
                                            : "t is not a dlbridge tensor; "
                                              "adopt it first");
  /* Its fields are public: one overwritten since it was made must not size
   * the copy of shape and strides. */
  dlb_status st = dlb_managed_validate(t);
  if (st != DLB_OK) return st;
  const DLTensor *dl = &t->dl_tensor;
  return dlb__tensor_derive(ours, dl->ndim, dl->shape, dl->strides, 0,
                            t->flags, out);
}

dlb_status dlb_tensor_redescribe(const DLManagedTensorVersioned *t,
                                 const DLTensor *desc, uint64_t flags,
                                 DLManagedTensorVersioned **out) {
  if (out == NULL) return dlb__fail(DLB_E_INVAL, "out is NULL");
  if (desc == NULL) return dlb__fail(DLB_E_INVAL, "desc is NULL");
  const dlb__tensor *ours = dlb__tensor_of(t);
  if (ours == NULL)
    return dlb__fail(DLB_E_INVAL, t == NULL ? "t is NULL"
                                            : "t is not a dlbridge tensor; "
                                              "adopt it first");
  dlb_status st = validate_desc(desc, flags);
  if (st != DLB_OK) return st;
  dlb__tensor *n = NULL;
  st = tensor_import(desc, flags, DLB__OWNER_CALLBACK, ours->owner, &n);
  if (st != DLB_OK) return st;
  *out = &n->managed;
  return DLB_OK;
}

int dlb_legacy_is_ours(const DLManagedTensor *t) {
  return t != NULL && t->deleter == legacy_deleter &&
         dlb__tensor_of(t->manager_ctx) != NULL;
}

int dlb_tensor_is_ours(const DLManagedTensorVersioned *t) {
  return dlb__tensor_of(t) != NULL;
}

void dlb_tensor_release(DLManagedTensorVersioned *t) {
  if (t != NULL && t->deleter != NULL) t->deleter(t);
}

void dlb_legacy_release(DLManagedTensor *t) {
  if (t != NULL && t->deleter != NULL) t->deleter(t);
}
