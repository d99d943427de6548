/*
 * managed.c -- prefetch and advice for CUDA managed memory.
 */
#include "backend.h"

/* 0 when the byte at p is managed memory, else DLB_E_DEVICE saying what it
 * is; which says where it lies in the tensor's span. */
static dlb_status managed_at(const char *p, const char *which) {
  dlb__ptr_kind k;
  dlb_status s = dlb__cuda.classify(p, &k);
  if (s != DLB_OK || k.device.device_type == kDLCUDAManaged) return s;
  char name[DLB_DEVICE_NAME_MAX];
  if (dlb_device_format(k.device, name, sizeof name) != DLB_OK)
    name[0] = '\0';
  return dlb__fail(DLB_E_DEVICE, "the memory at %p (%s) is %s, not "
                   "cuda_managed", (const void *)p, which, name);
}

/* Finds the pages t's elements occupy and checks they are managed memory,
 * whatever t's label says: their first and last bytes, so that a tensor
 * running past its managed allocation is refused as well. *size is 0 for
 * a tensor without elements. */
static dlb_status managed_range(const DLTensor *t, char **p, size_t *size) {
  dlb_status s = dlb_tensor_validate(t);
  if (s != DLB_OK) return s;
  int64_t lo = 0, hi = 0;
  s = dlb_tensor_byte_span(t, &lo, &hi);
  if (s != DLB_OK) return s;
  if (hi <= lo || t->data == NULL) {
    *size = 0;
    return DLB_OK;
  }
  char *start = (char *)t->data + lo;
  s = managed_at(start, "the first byte of its elements");
  if (s == DLB_OK && hi - lo > 1)
    s = managed_at(start + (hi - lo) - 1, "the last byte of its elements");
  if (s != DLB_OK) return s;
  *p = start;
  *size = (size_t)(hi - lo);
  return DLB_OK;
}

/* The ordinal of a GPU target, or -1 for the host. */
static dlb_status target_of(DLDevice target, int *out) {
  if (target.device_type == kDLCUDA)
    return dlb__gpu_device(&dlb__cuda, target, out);
  if (dlb_device_type_is_host_type(target.device_type)) {
    *out = -1;
    return DLB_OK;
  }
  return dlb__fail(DLB_E_DEVICE, "target is %s (device_type %d); managed "
                   "memory moves to cuda:N or to the host",
                   dlb__type_label(target.device_type),
                   (int)target.device_type);
}

/* What prefetch and advice both need: the driver, the target's ordinal
 * and t's managed pages. *size is 0 when there is nothing to move. */
static dlb_status prepare(const DLTensor *t, DLDevice target, int *device,
                          char **p, size_t *size) {
  dlb_status s = dlb__cuda.load();
  if (s != DLB_OK) return s;
  s = target_of(target, device);
  if (s != DLB_OK) return s;
  return managed_range(t, p, size);
}

dlb_status dlb_managed_prefetch(const DLTensor *t, DLDevice target,
                                void *stream) {
  if (t == NULL)
    return dlb__fail(DLB_E_INVAL, "dlb_managed_prefetch: t is NULL");
  int device = -1;
  char *p = NULL;
  size_t size = 0;
  dlb_status s = prepare(t, target, &device, &p, &size);
  if (s != DLB_OK || size == 0) return s;
  return dlb__cuda_prefetch(p, size, device, stream);
}

dlb_status dlb_managed_advise(const DLTensor *t, dlb_advice advice,
                              DLDevice target) {
  if (t == NULL)
    return dlb__fail(DLB_E_INVAL, "dlb_managed_advise: t is NULL");
  if (advice < DLB_ADVISE_SET_READ_MOSTLY ||
      advice > DLB_ADVISE_UNSET_ACCESSED_BY)
    return dlb__fail(DLB_E_INVAL, "advice is %d; must be a dlb_advice "
                     "value (1 to 6)", (int)advice);
  int device = -1;
  char *p = NULL;
  size_t size = 0;
  dlb_status s = prepare(t, target, &device, &p, &size);
  if (s != DLB_OK || size == 0) return s;
  return dlb__cuda_advise(p, size, (int)advice, device);
}
