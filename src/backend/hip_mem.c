/*
 * hip_mem.c -- HIP memory: allocation, registration of host memory and
 * pointer classification.
 */
#include <string.h>

#include "hip_loader.h"

dlb_status dlb__hip_alloc(dlb__side side, int device, size_t size,
                          void **out) {
  int saved = -1;
  dlb_status s = dlb__hip_enter(device, &saved);
  if (s != DLB_OK) return s;
  void *p = NULL;
  dlb__hip_error e;
  if (side == DLB__SIDE_HOST) {
    e = dlb__hi.hipHostMalloc(
        &p, size, DLB__HIP_HOST_MALLOC_PORTABLE | DLB__HIP_HOST_MALLOC_MAPPED);
    if (e != DLB__HIP_SUCCESS)
      s = dlb__hip_fail(e, "hipHostMalloc(%zu bytes, Portable|Mapped)", size);
  } else {
    /* DLPack has no ROCm-managed kind, so only device memory remains. */
    e = dlb__hi.hipMalloc(&p, size);
    if (e != DLB__HIP_SUCCESS)
      s = dlb__hip_fail(e, "hipMalloc(%zu bytes) on rocm:%d", size, device);
  }
  dlb__hip_leave(saved);
  if (s == DLB_OK) *out = p;
  return s;
}

void dlb__hip_free(dlb__side side, int device, void *p) {
  int saved = -1;
  /* A release cannot report failure; the free is worth trying on any
   * device, since HIP finds unified addresses. */
  if (dlb__hip_enter(device, &saved) != DLB_OK) saved = -1;
  if (side == DLB__SIDE_HOST)
    (void)dlb__hi.hipHostFree(p);
  else
    (void)dlb__hi.hipFree(p);
  dlb__hip_leave(saved);
}

dlb_status dlb__hip_host_register(void *p, size_t size) {
  dlb__hip_error e = dlb__hi.hipHostRegister(
      p, size, DLB__HIP_HOST_REGISTER_PORTABLE | DLB__HIP_HOST_REGISTER_MAPPED);
  if (e == DLB__HIP_ERROR_HOST_MEMORY_ALREADY_REGISTERED) {
    (void)dlb__hi.hipGetLastError();
    return DLB_E_STATE;
  }
  if (e != DLB__HIP_SUCCESS)
    return dlb__hip_fail(e, "hipHostRegister(%p, %zu bytes)", p, size);
  return DLB_OK;
}

void dlb__hip_host_unregister(void *p) { (void)dlb__hi.hipHostUnregister(p); }

dlb_status dlb__hip_classify(const void *p, dlb__ptr_kind *out) {
  dlb__hip_ptr_attr a;
  memset(&a, 0, sizeof a);
  dlb__hip_error e = dlb__hi.hipPointerGetAttributes(&a, p);
  dlb__ptr_kind k = {{kDLCPU, 0}, 0};
  /* Memory HIP never saw is an error in ROCm 5 and early 6, and must not
   * linger for the caller's next hipGetLastError. */
  if (e == DLB__HIP_ERROR_INVALID_VALUE) {
    (void)dlb__hi.hipGetLastError();
    *out = k;
    return DLB_OK;
  }
  if (e != DLB__HIP_SUCCESS)
    return dlb__hip_fail(e, "hipPointerGetAttributes(%p)", p);
  int host, device, managed;
  if (dlb__hip_version() >= 60000000) {
    host = a.type == DLB__HIP6_MEMORY_HOST;
    device = a.type == DLB__HIP6_MEMORY_DEVICE ||
             a.type == DLB__HIP6_MEMORY_ARRAY;
    managed = a.type == DLB__HIP6_MEMORY_MANAGED ||
              a.type == DLB__HIP6_MEMORY_UNIFIED;
  } else {
    host = a.type == DLB__HIP5_MEMORY_HOST;
    device = a.type == DLB__HIP5_MEMORY_DEVICE ||
             a.type == DLB__HIP5_MEMORY_ARRAY;
    managed = a.type == DLB__HIP5_MEMORY_MANAGED ||
              a.type == DLB__HIP5_MEMORY_UNIFIED;
  }
  if (a.isManaged != 0 || managed) {
    /* CPU- and GPU-readable like pinned memory; DLPack has no
     * ROCm-managed type. */
    k.device.device_type = kDLROCMHost;
    k.managed = 1;
  } else if (device) {
    if (a.device < 0 || a.device >= dlb__hip_count())
      return dlb__fail(DLB_E_RUNTIME, "hipPointerGetAttributes(%p): device "
                       "memory on device %d; the runtime reports %d "
                       "devices", p, a.device, dlb__hip_count());
    k.device.device_type = kDLROCM;
    k.device.device_id = a.device;
  } else if (host) {
    k.device.device_type = kDLROCMHost;
  }
  *out = k;
  return DLB_OK;
}
