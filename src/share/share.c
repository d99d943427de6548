/*
 * share.c -- the public face of sharing: which memory a tensor is in,
 * and handing export and import to the host (shm.c) or device (ipc.c)
 * side.
 */
#include <string.h>

#include "core/tensor_internal.h"
#include "share/share_internal.h"

void dlb__share_meta_geometry(const DLManagedTensorVersioned *t,
                              dlb__share_meta *m) {
  const DLTensor *dl = &t->dl_tensor;
  m->dtype = dl->dtype;
  m->ndim = dl->ndim;
  m->flags = t->flags;
  if (dl->ndim > 0) {
    memcpy(m->shape, dl->shape, (size_t)dl->ndim * sizeof(int64_t));
    if (dl->strides != NULL)
      memcpy(m->strides, dl->strides, (size_t)dl->ndim * sizeof(int64_t));
    else
      dlb__implied_strides(dl->ndim, dl->shape, m->strides);
  }
}

int dlb_tensor_is_shared(const DLManagedTensorVersioned *t) {
  return dlb__shm_of(t) != NULL || dlb__ipc_is_imported(t);
}

dlb_status dlb_share_export(const DLManagedTensorVersioned *t, void *buf,
                            size_t cap, size_t *len, int *fd) {
  if (t == NULL || buf == NULL || len == NULL || fd == NULL)
    return dlb__fail(DLB_E_INVAL, "dlb_share_export: %s is NULL",
                     t == NULL     ? "t"
                     : buf == NULL ? "buf"
                     : len == NULL ? "len"
                                   : "fd");
  dlb_status st = dlb_managed_validate(t);
  if (st != DLB_OK) return st;
  size_t need = dlb__share_encoded_size(t->dl_tensor.ndim);
  if (cap < need)
    return dlb__fail(DLB_E_RANGE, "cap is %zu; this handle needs %zu bytes "
                     "(DLB_SHARE_HANDLE_MAX always suffices)", cap, need);
  dlb__share_meta m;
  memset(&m, 0, sizeof m);
  dlb__share_meta_geometry(t, &m);
  int nfd = -1;
  const dlb__shm *s = dlb__shm_of(t);
  DLDeviceType type = t->dl_tensor.device.device_type;
  if (s != NULL) {
    st = dlb__shm_export(s, t, &m, &nfd);
  } else if (type == kDLCUDA || type == kDLROCM) {
    st = dlb__ipc_export(t, &m);
  } else {
    const char *name = dlb_device_type_name(type);
    return dlb__fail(DLB_E_INVAL,
                     "t is not shared memory (%s memory of %s); allocate it "
                     "with dlb_shared_alloc() or copy it into such a tensor",
                     name != NULL ? name : "unknown",
                     dlb_tensor_is_ours(t) ? "a private allocation"
                                           : "a foreign producer");
  }
  if (st != DLB_OK) return st;
  dlb__share_encode(&m, buf);
  *len = need;
  *fd = nfd;
  return DLB_OK;
}

dlb_status dlb_share_import(const void *buf, size_t len, int fd,
                            uint64_t flags, DLManagedTensorVersioned **out) {
  if (out == NULL) return dlb__fail(DLB_E_INVAL, "out is NULL");
  if (buf == NULL) return dlb__fail(DLB_E_INVAL, "buf is NULL");
  const uint64_t pins = DLB_SHARE_PIN_CUDA | DLB_SHARE_PIN_ROCM;
  if ((flags & ~pins) != 0 || (flags & pins) == pins)
    return dlb__fail(DLB_E_INVAL, "flags is 0x%llx; 0 or one of "
                     "DLB_SHARE_PIN_CUDA and DLB_SHARE_PIN_ROCM",
                     (unsigned long long)flags);
  if (fd >= 0) return dlb__shm_import(buf, len, fd, flags, out);
  dlb__share_meta m;
  dlb_status st = dlb__share_decode(buf, len, 0, &m);
  if (st != DLB_OK) {
    /* A host handle fails on its size against no memory: say why. */
    const uint8_t *b = buf;
    if (len > 16 && memcmp(b, "DLBSHARE", 8) == 0 && b[16] == DLB__SHARE_HOST)
      return dlb__fail(DLB_E_HANDLE, "share handle: a host handle needs the "
                       "memory's descriptor; fd is %d", fd);
    return st;
  }
  if (flags != 0)
    return dlb__fail(DLB_E_INVAL, "flags is 0x%llx; pinning is for host "
                     "memory, this is a device handle",
                     (unsigned long long)flags);
  return dlb__ipc_import(&m, out);
}
