/*
 * pin.c -- pinning CPU tensors in place.
 *
 * Each range dlbridge registers is counted here, so pinning it or a part
 * of it again (a second tensor over the same buffer, a view) shares the
 * registration, and the range is unregistered when the last pinned tensor
 * over it goes. Ranges pinned by others are used as they are and never
 * unregistered by us.
 */
#include <pthread.h>

#include "backend.h"
#include "core/tensor_internal.h"

typedef struct pin_entry {
  struct pin_entry *next;
  const dlb__gpu *gpu;
  char *base;
  size_t size;
  long refs;
} pin_entry;

pthread_mutex_t dlb__pin_lock = PTHREAD_MUTEX_INITIALIZER;
static pin_entry *pins;

/* What a pinned tensor's release undoes: the registration (NULL when the
 * range was pinned by someone else or empty) and the share of the CPU
 * tensor that keeps the memory alive. */
typedef struct pin_ctx {
  pin_entry *entry;
  DLManagedTensorVersioned *share;
} pin_ctx;

/* A range the runtime calls pinned already is fine when both its ends are
 * pinned (or managed) memory; registrations are contiguous, but two
 * registrations side by side are reported the same way. */
static dlb_status check_pinned(const dlb__gpu *gpu, char *base, size_t size) {
  const char *ends[2] = {base, base + size - 1};
  for (int i = 0; i < 2; i++) {
    dlb__ptr_kind k;
    dlb_status s = gpu->classify(ends[i], &k);
    if (s != DLB_OK) return s;
    if (k.device.device_type != gpu->host_type &&
        k.device.device_type != kDLCUDAManaged)
      return dlb__fail(DLB_E_RUNTIME, "%s refuses to pin [%p, %p) as pinned "
                       "already, but byte %p is not: only part of the range "
                       "is registered", gpu->name, (void *)base,
                       (void *)(base + size), (const void *)ends[i]);
  }
  return DLB_OK;
}

static dlb_status pin_range(const dlb__gpu *gpu, char *base, size_t size,
                            pin_entry **out) {
  dlb_status s = DLB_OK;
  dlb__fork_guard();
  pthread_mutex_lock(&dlb__pin_lock);
  /* A registration of ours that covers the range serves it too, and must
   * then live as long as this pin. */
  pin_entry *e = pins;
  while (e != NULL && (e->gpu != gpu || base < e->base ||
                       (size_t)(base - e->base) + size > e->size))
    e = e->next;
  if (e != NULL) {
    e->refs++;
    *out = e;
  } else {
    e = dlb__malloc(sizeof *e);
    if (e == NULL) {
      s = DLB_E_NOMEM;
    } else {
      s = gpu->host_register(base, size);
      if (s == DLB_E_STATE) {
        dlb__free(e);
        e = NULL;
        s = check_pinned(gpu, base, size);
        if (s == DLB_OK) *out = NULL;
      } else if (s != DLB_OK) {
        dlb__free(e);
      } else {
        e->gpu = gpu;
        e->base = base;
        e->size = size;
        e->refs = 1;
        e->next = pins;
        pins = e;
        *out = e;
      }
    }
  }
  pthread_mutex_unlock(&dlb__pin_lock);
  return s;
}

static void unpin(pin_entry *e) {
  if (e == NULL) return;
  pthread_mutex_lock(&dlb__pin_lock);
  if (--e->refs == 0) {
    pin_entry **link = &pins;
    while (*link != e) link = &(*link)->next;
    *link = e->next;
    e->gpu->host_unregister(e->base);
    dlb__free(e);
  }
  pthread_mutex_unlock(&dlb__pin_lock);
}

static void pin_release(void *ctx) {
  pin_ctx *c = ctx;
  /* Unregister before the memory may go with the last share. */
  unpin(c->entry);
  dlb_tensor_release(c->share);
  dlb__free(c);
}

const DLManagedTensorVersioned *dlb__pin_source(
    const DLManagedTensorVersioned *t) {
  const dlb__tensor *ours = dlb__tensor_of(t);
  if (ours == NULL || ours->owner->kind != DLB__OWNER_CALLBACK ||
      ours->owner->u.callback.fn != pin_release)
    return NULL;
  return ((const pin_ctx *)ours->owner->u.callback.ctx)->share;
}

dlb_status dlb_tensor_pin(const DLManagedTensorVersioned *t,
                          DLDeviceType host_type,
                          DLManagedTensorVersioned **out) {
  if (t == NULL || out == NULL)
    return dlb__fail(DLB_E_INVAL, "dlb_tensor_pin: %s is NULL",
                     t == NULL ? "t" : "out");
  const dlb__gpu *gpu = host_type == kDLCUDAHost   ? &dlb__cuda
                        : host_type == kDLROCMHost ? &dlb__hip
                                                   : NULL;
  if (gpu == NULL)
    return dlb__fail(DLB_E_INVAL, "host_type is %d; must be kDLCUDAHost (3) "
                     "or kDLROCMHost (11)", (int)host_type);
  if (t->dl_tensor.device.device_type != kDLCPU)
    return dlb__fail(DLB_E_DEVICE, "t is %s memory (device_type %d); only "
                     "cpu tensors are pinned",
                     dlb__type_label(t->dl_tensor.device.device_type),
                     (int)t->dl_tensor.device.device_type);
  if (!dlb_tensor_is_ours(t))
    return dlb__fail(DLB_E_INVAL, "t was not made by dlbridge; adopt it "
                     "with dlb_tensor_adopt() first");
  dlb_status s = gpu->load();
  if (s != DLB_OK) return s;
  /* The span as t's flags say: padded sub-byte units take a byte each. */
  dlb__span span;
  s = dlb__managed_validate_span(t, &span);
  if (s != DLB_OK) return s;
  const int64_t lo = span.lo, hi = span.hi;
  pin_ctx *c = dlb__malloc(sizeof *c);
  if (c == NULL) return DLB_E_NOMEM;
  c->entry = NULL;
  s = dlb_tensor_share(t, &c->share);
  if (s != DLB_OK) {
    dlb__free(c);
    return s;
  }
  if (hi > lo && t->dl_tensor.data != NULL)
    s = pin_range(gpu, (char *)t->dl_tensor.data + lo, (size_t)(hi - lo),
                  &c->entry);
  if (s == DLB_OK) {
    DLTensor desc = c->share->dl_tensor;
    desc.device.device_type = host_type;
    desc.device.device_id = 0;
    s = dlb_tensor_wrap(&desc, t->flags, pin_release, c, out);
  }
  if (s != DLB_OK) pin_release(c);
  return s;
}
