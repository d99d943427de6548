/*
 * ipc.c -- device memory between processes through the runtimes' IPC
 * handles.
 *
 * Export names the allocation holding the tensor (its base, found with
 * the runtime's address-range query, as IPC handles must name a base) and
 * the tensor's offset into it, and records the device's interprocess
 * event so the importer waits for the work queued before the export.
 * Import opens each allocation once per process and device and counts the
 * tensors over it; the last release closes it. The memory itself belongs
 * to the exporting process: see share.h for the lifetime rule.
 */
#include <pthread.h>
#include <string.h>

#include "backend/backend.h"
#include "core/tensor_internal.h"
#include "share/share_internal.h"

/* An allocation of another process opened here. */
typedef struct ipc_entry {
  struct ipc_entry *next;
  const dlb__gpu *gpu;
  int device;
  uint8_t handle[DLB__SHARE_IPC_BYTES];
  void *base;
  uint64_t size; /* as the runtime reports it here */
  long refs;
} ipc_entry;

pthread_mutex_t dlb__ipc_lock = PTHREAD_MUTEX_INITIALIZER;
static ipc_entry *opened;

static void ipc_drop(ipc_entry *e) {
  pthread_mutex_lock(&dlb__ipc_lock);
  if (--e->refs == 0) {
    ipc_entry **link = &opened;
    while (*link != e) link = &(*link)->next;
    *link = e->next;
    e->gpu->ipc_close(e->device, e->base);
    dlb__free(e);
  }
  pthread_mutex_unlock(&dlb__ipc_lock);
}

static void ipc_release(void *ctx) { ipc_drop(ctx); }

static const ipc_entry *ipc_entry_of(const DLManagedTensorVersioned *t) {
  const dlb__tensor *ours = dlb__tensor_of(t);
  if (ours == NULL || ours->owner->kind != DLB__OWNER_CALLBACK ||
      ours->owner->u.callback.fn != ipc_release)
    return NULL;
  return ours->owner->u.callback.ctx;
}

int dlb__ipc_is_imported(const DLManagedTensorVersioned *t) {
  return ipc_entry_of(t) != NULL;
}

/* The runtime of a device kind, with IPC, or a refusal. */
static dlb_status ipc_runtime(DLDeviceType type, const dlb__gpu **out) {
  const dlb__gpu *gpu = type == kDLCUDA   ? &dlb__cuda
                        : type == kDLROCM ? &dlb__hip
                                          : NULL;
  if (gpu == NULL)
    return dlb__fail(DLB_E_UNSUPPORTED, "%s memory cannot be shared between "
                     "processes; only cuda and rocm device memory and "
                     "shared host memory can", dlb__type_label(type));
  if (gpu->ipc_get == NULL)
    return dlb__fail(DLB_E_UNSUPPORTED, "%s device memory cannot be shared "
                     "between processes: this build has no %s IPC",
                     dlb__type_label(type), gpu->name);
  *out = gpu;
  return DLB_OK;
}

dlb_status dlb__ipc_export(const DLManagedTensorVersioned *t,
                           dlb__share_meta *m) {
  const DLTensor *dl = &t->dl_tensor;
  const dlb__gpu *gpu = NULL;
  dlb_status st = ipc_runtime(dl->device.device_type, &gpu);
  if (st != DLB_OK) return st;
  int device = 0;
  st = dlb__gpu_device(gpu, dl->device, &device);
  if (st != DLB_OK) return st;
  dlb__span span;
  st = dlb__managed_validate_span(t, &span);
  if (st != DLB_OK) return st;
  if (span.numel == 0)
    return dlb__fail(DLB_E_UNSUPPORTED, "t has no elements, so no device "
                     "allocation to share; send its shape instead");
  void *first = (char *)dl->data + span.lo;
  void *base = NULL;
  uint64_t size = 0;
  const ipc_entry *imported = ipc_entry_of(t);
  if (imported != NULL) {
    /* Opened here from another process: pass its handle on. */
    base = imported->base;
    size = imported->size;
    memcpy(m->mem_handle, imported->handle, sizeof m->mem_handle);
  } else {
    size_t n = 0;
    st = gpu->range(device, first, &base, &n);
    if (st == DLB_OK) st = gpu->ipc_get(device, base, m->mem_handle);
    if (st != DLB_OK) return st;
    size = n;
  }
  /* The elements must all lie in that one allocation. */
  int64_t delta = (int64_t)((uintptr_t)dl->data - (uintptr_t)base);
  if (delta + span.lo < 0 || (uint64_t)(delta + span.hi) > size)
    return dlb__fail(DLB_E_LAYOUT, "t's elements occupy bytes [%lld, %lld) "
                     "of its %llu-byte allocation; one allocation must hold "
                     "them all", (long long)(delta + span.lo),
                     (long long)(delta + span.hi), (unsigned long long)size);
  st = gpu->ipc_event(device, m->event_handle);
  if (st != DLB_OK) return st;
  m->kind = gpu == &dlb__cuda ? DLB__SHARE_CUDA : DLB__SHARE_HIP;
  m->size = size;
  m->data_offset = 0;
  m->byte_offset = (uint64_t)(delta + (int64_t)dl->byte_offset);
  m->device_id = device;
  return DLB_OK;
}

/* Opens the allocation of m here, or counts one more use of it. */
static dlb_status ipc_acquire(const dlb__gpu *gpu, int device,
                              const dlb__share_meta *m, ipc_entry **out) {
  dlb_status st = DLB_OK;
  dlb__fork_guard();
  pthread_mutex_lock(&dlb__ipc_lock);
  ipc_entry *e = opened;
  while (e != NULL && (e->gpu != gpu || e->device != device ||
                       memcmp(e->handle, m->mem_handle, sizeof e->handle)))
    e = e->next;
  if (e != NULL) {
    /* The handle's size was checked against the allocation when it was
     * opened; a later handle naming it may claim more. */
    if (m->size > e->size)
      st = dlb__fail(DLB_E_HANDLE, "share handle: allocation size is %llu "
                     "but the allocation opened has %zu bytes",
                     (unsigned long long)m->size, e->size);
    else
      e->refs++;
  } else {
    e = dlb__malloc(sizeof *e);
    void *base = NULL, *range_base = NULL;
    size_t size = 0;
    if (e == NULL) st = DLB_E_NOMEM;
    if (st == DLB_OK) st = gpu->ipc_open(device, m->mem_handle, &base);
    if (st == DLB_OK) {
      st = gpu->range(device, base, &range_base, &size);
      if (st == DLB_OK && (range_base != base || size < m->size))
        st = dlb__fail(DLB_E_HANDLE, "share handle: allocation size is "
                       "%llu but the allocation opened has %zu bytes",
                       (unsigned long long)m->size, size);
      if (st != DLB_OK) gpu->ipc_close(device, base);
    }
    if (st != DLB_OK) {
      dlb__free(e);
      e = NULL;
    } else {
      e->gpu = gpu;
      e->device = device;
      memcpy(e->handle, m->mem_handle, sizeof e->handle);
      e->base = base;
      e->size = size;
      e->refs = 1;
      e->next = opened;
      opened = e;
    }
  }
  pthread_mutex_unlock(&dlb__ipc_lock);
  if (st == DLB_OK) *out = e;
  return st;
}

dlb_status dlb__ipc_import(const dlb__share_meta *m,
                           DLManagedTensorVersioned **out) {
  DLDevice dev = {m->kind == DLB__SHARE_CUDA ? kDLCUDA : kDLROCM,
                  m->device_id};
  const dlb__gpu *gpu = NULL;
  dlb_status st = ipc_runtime(dev.device_type, &gpu);
  if (st != DLB_OK) return st;
  int device = 0;
  st = dlb__gpu_device(gpu, dev, &device);
  if (st != DLB_OK) return st;
  ipc_entry *e = NULL;
  st = ipc_acquire(gpu, device, m, &e);
  if (st != DLB_OK) return st;
  st = gpu->ipc_wait(device, m->event_handle);
  if (st == DLB_OK) {
    DLTensor desc;
    memset(&desc, 0, sizeof desc);
    desc.data = e->base;
    desc.device = dev;
    desc.ndim = m->ndim;
    desc.dtype = m->dtype;
    desc.shape = (int64_t *)(uintptr_t)m->shape;
    desc.strides = (int64_t *)(uintptr_t)m->strides;
    desc.byte_offset = m->byte_offset;
    st = dlb_tensor_wrap(&desc, m->flags, ipc_release, e, out);
  }
  if (st != DLB_OK) ipc_drop(e);
  return st;
}
