/*
 * pin.c -- pinning CPU tensors in place.
 *
 * Each range dlbridge registers is counted here, so pinning it or a part
 * of it again (a second tensor over the same buffer, a view) shares the
 * registration. Runtimes refuse a registration that overlaps another by a
 * byte, and one cannot be grown or split while tensors over it live, so a
 * span that overlaps our registrations without lying inside one of them
 * (the whole tensor pinned after a view of it, two views that overlap in
 * part) has only its gaps registered, each as a registration of its own.
 * Ours thus never overlap one another. A pinned tensor holds a reference
 * on every registration of ours its span uses, and each is unregistered
 * when the last pinned tensor using it goes: a registration may outlive
 * the pin that made it, and cover bytes no live pin spans. Ranges pinned
 * by others are used as they are and never unregistered by us.
 *
 * The registry and the runtime calls that change it run under
 * dlb__pin_lock, so two threads never register the same gap, and a
 * registration is never used while another thread unregisters it.
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

/* What a pinned tensor's release undoes: its references on the
 * registrations of ours its span uses (none when the span was pinned by
 * someone else or is empty), and the share of the CPU tensor that keeps
 * the memory alive. Most spans use one registration, which then needs no
 * list of its own. */
typedef struct pin_ctx {
  DLManagedTensorVersioned *share;
  size_t count;        /* registrations referenced */
  pin_entry **entries; /* &one, or an array of at least count */
  pin_entry *one;
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

/* The registration of ours on gpu that overlaps [at, end) and starts
 * lowest, or NULL. Ours never overlap one another, so this is the one
 * holding at, or else the first one after it. */
static pin_entry *next_ours(const dlb__gpu *gpu, const char *at,
                            const char *end) {
  pin_entry *best = NULL;
  for (pin_entry *e = pins; e != NULL; e = e->next)
    if (e->gpu == gpu && e->base < end && at < e->base + e->size &&
        (best == NULL || e->base < best->base))
      best = e;
  return best;
}

/* The piece of [at, end) that starts at at: a registration of ours
 * (*ours, which may start before at and end after end), or a gap up to
 * the next one of ours or to end (*ours NULL). Returns where it ends. */
static char *piece_at(const dlb__gpu *gpu, char *at, char *end,
                      pin_entry **ours) {
  pin_entry *e = next_ours(gpu, at, end);
  *ours = e != NULL && e->base <= at ? e : NULL;
  if (*ours != NULL) return e->base + e->size;
  return e != NULL ? e->base : end;
}

/* How many pieces piece_at() cuts [base, end) into: the most entries the
 * list of the registrations it uses can need. */
static size_t count_pieces(const dlb__gpu *gpu, char *base, char *end) {
  size_t n = 0;
  pin_entry *ours;
  for (char *at = base; at < end; at = piece_at(gpu, at, end, &ours)) n++;
  return n;
}

/* Registers the gap [base, base + size): *out is a new registration of
 * ours, not yet in the registry (refs 0), or NULL when the gap is pinned
 * by someone else. The entry is allocated first, so that no failure
 * leaves a registration nobody counts. */
static dlb_status register_gap(const dlb__gpu *gpu, char *base, size_t size,
                               pin_entry **out) {
  *out = NULL;
  pin_entry *e = dlb__malloc(sizeof *e);
  if (e == NULL) return DLB_E_NOMEM;
  dlb_status s = gpu->host_register(base, size);
  if (s != DLB_OK) {
    dlb__free(e);
    return s == DLB_E_STATE ? check_pinned(gpu, base, size) : s;
  }
  e->next = NULL;
  e->gpu = gpu;
  e->base = base;
  e->size = size;
  e->refs = 0;
  *out = e;
  return DLB_OK;
}

/* Undoes the registrations take_pieces made before a failure; those that
 * were in the registry before have no reference of this pin yet. */
static void drop_new(pin_entry **list, size_t n) {
  for (size_t i = 0; i < n; i++)
    if (list[i]->refs == 0) {
      list[i]->gpu->host_unregister(list[i]->base);
      dlb__free(list[i]);
    }
}

/* Lists in list the registrations of ours [base, end) uses, registering
 * its gaps, and takes a reference on each, or, failing, leaves the
 * registry as it was. list holds count_pieces() entries. */
static dlb_status take_pieces(const dlb__gpu *gpu, char *base, char *end,
                              pin_entry **list, size_t *count) {
  size_t n = 0;
  dlb_status s = DLB_OK;
  for (char *at = base; at < end && s == DLB_OK;) {
    pin_entry *e;
    char *stop = piece_at(gpu, at, end, &e);
    if (e == NULL) s = register_gap(gpu, at, (size_t)(stop - at), &e);
    if (e != NULL) list[n++] = e;
    at = stop;
  }
  if (s != DLB_OK) {
    drop_new(list, n);
    return s;
  }
  for (size_t i = 0; i < n; i++)
    if (list[i]->refs++ == 0) {
      list[i]->next = pins;
      pins = list[i];
    }
  *count = n;
  return DLB_OK;
}

static dlb_status pin_range(const dlb__gpu *gpu, char *base, size_t size,
                            pin_ctx *c) {
  dlb__fork_guard();
  pthread_mutex_lock(&dlb__pin_lock);
  char *end = base + size;
  size_t n = count_pieces(gpu, base, end);
  pin_entry **list = n == 1 ? &c->one : dlb__malloc(n * sizeof *list);
  dlb_status s = DLB_E_NOMEM;
  if (list != NULL) s = take_pieces(gpu, base, end, list, &c->count);
  if (s == DLB_OK)
    c->entries = list;
  else if (list != &c->one)
    dlb__free(list);
  pthread_mutex_unlock(&dlb__pin_lock);
  return s;
}

static void unpin(pin_ctx *c) {
  if (c->count > 0) {
    pthread_mutex_lock(&dlb__pin_lock);
    for (size_t i = 0; i < c->count; i++) {
      pin_entry *e = c->entries[i];
      if (--e->refs > 0) continue;
      pin_entry **link = &pins;
      while (*link != e) link = &(*link)->next;
      *link = e->next;
      e->gpu->host_unregister(e->base);
      dlb__free(e);
    }
    pthread_mutex_unlock(&dlb__pin_lock);
  }
  if (c->entries != &c->one) dlb__free(c->entries);
}

static void pin_release(void *ctx) {
  pin_ctx *c = ctx;
  /* Unregister before the memory may go with the last share. */
  unpin(c);
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
  c->count = 0;
  c->entries = &c->one;
  s = dlb_tensor_share(t, &c->share);
  if (s != DLB_OK) {
    dlb__free(c);
    return s;
  }
  if (hi > lo && t->dl_tensor.data != NULL)
    s = pin_range(gpu, (char *)t->dl_tensor.data + lo, (size_t)(hi - lo), c);
  if (s == DLB_OK) {
    DLTensor desc = c->share->dl_tensor;
    desc.device.device_type = host_type;
    desc.device.device_id = 0;
    s = dlb_tensor_wrap(&desc, t->flags, pin_release, c, out);
  }
  if (s != DLB_OK) pin_release(c);
  return s;
}
