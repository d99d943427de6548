/*
 * cuda_mem.c -- CUDA memory: allocation, registration of host memory,
 * pointer classification, and managed-memory prefetch and advice.
 */
#include "cuda_loader.h"
#include "host_maps.h"

static void *hostptr(dlb__cu_deviceptr d) { return (void *)(uintptr_t)d; }

dlb_status dlb__cuda_alloc(dlb__side side, int device, size_t size,
                           void **out) {
  int pushed = 0;
  dlb_status s = dlb__cuda_enter(device, &pushed);
  if (s != DLB_OK) return s;
  dlb__cu_result r;
  dlb__cu_deviceptr d = 0;
  void *p = NULL;
  switch (side) {
    case DLB__SIDE_DEVICE:
      r = dlb__cu.cuMemAlloc_v2(&d, size);
      if (r != DLB__CUDA_SUCCESS)
        s = dlb__cuda_fail(r, "cuMemAlloc_v2(%zu bytes) on cuda:%d", size,
                           device);
      p = hostptr(d);
      break;
    case DLB__SIDE_HOST:
      /* Portable: pinned for every GPU, not only the current one; mapped:
       * kernels may read it at its host address. */
      r = dlb__cu.cuMemHostAlloc(&p, size,
                                 DLB__CU_MEMHOSTALLOC_PORTABLE |
                                     DLB__CU_MEMHOSTALLOC_DEVICEMAP);
      if (r != DLB__CUDA_SUCCESS)
        s = dlb__cuda_fail(r, "cuMemHostAlloc(%zu bytes, PORTABLE|DEVICEMAP)",
                           size);
      break;
    case DLB__SIDE_MANAGED:
      r = dlb__cu.cuMemAllocManaged(&d, size, DLB__CU_MEM_ATTACH_GLOBAL);
      if (r != DLB__CUDA_SUCCESS)
        s = dlb__cuda_fail(r, "cuMemAllocManaged(%zu bytes, ATTACH_GLOBAL)",
                           size);
      p = hostptr(d);
      break;
  }
  dlb__cuda_leave(pushed);
  if (s == DLB_OK) *out = p;
  return s;
}

void dlb__cuda_free(dlb__side side, int device, void *p) {
  int pushed = 0;
  /* A release cannot report failure; without the context the free is
   * still worth trying, since the driver finds unified addresses. */
  if (dlb__cuda_enter(device, &pushed) != DLB_OK) pushed = 0;
  if (side == DLB__SIDE_HOST)
    (void)dlb__cu.cuMemFreeHost(p);
  else
    (void)dlb__cu.cuMemFree_v2(dlb__cuda_devptr(p));
  dlb__cuda_leave(pushed);
}

/* Memory mapped read-only (a read-only share, a file mapped for reading)
 * registers only with CU_MEMHOSTREGISTER_READ_ONLY where the device does
 * not read pageable memory through the host's page tables, and that flag
 * only where the device supports it: after a refusal, such memory is
 * registered again with it, when the device says it may. */
static dlb__cu_result register_read_only(void *p, size_t size,
                                         unsigned flags, dlb__cu_result r) {
  int supported = 0;
  if (dlb__range_writable(p, size) != 0 ||
      dlb__cuda_attribute(
          0, DLB__CU_DEVICE_ATTRIBUTE_READ_ONLY_HOST_REGISTER_SUPPORTED,
          "READ_ONLY_HOST_REGISTER_SUPPORTED", &supported) != DLB_OK ||
      !supported)
    return r;
  return dlb__cu.cuMemHostRegister_v2(
      p, size, flags | DLB__CU_MEMHOSTREGISTER_READ_ONLY);
}

dlb_status dlb__cuda_host_register(void *p, size_t size) {
  int pushed = 0;
  dlb_status s = dlb__cuda_enter(0, &pushed);
  if (s != DLB_OK) return s;
  const unsigned flags =
      DLB__CU_MEMHOSTREGISTER_PORTABLE | DLB__CU_MEMHOSTREGISTER_DEVICEMAP;
  dlb__cu_result r = dlb__cu.cuMemHostRegister_v2(p, size, flags);
  if (r != DLB__CUDA_SUCCESS &&
      r != DLB__CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED)
    r = register_read_only(p, size, flags, r);
  if (r == DLB__CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED)
    s = DLB_E_STATE;
  else if (r != DLB__CUDA_SUCCESS)
    s = dlb__cuda_fail(r, "cuMemHostRegister_v2(%p, %zu bytes)", p, size);
  dlb__cuda_leave(pushed);
  return s;
}

void dlb__cuda_host_unregister(void *p) {
  int pushed = 0;
  if (dlb__cuda_enter(0, &pushed) != DLB_OK) pushed = 0;
  (void)dlb__cu.cuMemHostUnregister(p);
  dlb__cuda_leave(pushed);
}

/* One attribute query. IS_MANAGED is documented as "a boolean" of
 * unspecified width: a zeroed 8-byte home reads right whichever width
 * the driver writes. */
static dlb__cu_result query(const void *p, unsigned *type,
                            unsigned long long *managed, int *ordinal) {
  dlb__cu_enum attrs[] = {DLB__CU_POINTER_ATTRIBUTE_MEMORY_TYPE,
                          DLB__CU_POINTER_ATTRIBUTE_IS_MANAGED,
                          DLB__CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL};
  void *data[] = {type, managed, ordinal};
  *type = 0;
  *managed = 0;
  *ordinal = -2;
  return dlb__cu.cuPointerGetAttributes(3, attrs, data, dlb__cuda_devptr(p));
}

/* Stores the first device whose primary context is active, or -1. A
 * failed query fails: taking it for "inactive" could call device memory
 * cpu memory. */
static dlb_status active_device(int *out) {
  *out = -1;
  for (int d = 0; d < dlb__cuda_count() && d < DLB__GPU_MAX_DEVICES; d++) {
    int active = 0;
    dlb_status s = dlb__cuda_query_active(d, &active);
    if (s != DLB_OK) return s;
    if (active) {
      *out = d;
      return DLB_OK;
    }
  }
  return DLB_OK;
}

dlb_status dlb__cuda_classify(const void *p, dlb__ptr_kind *out) {
  unsigned type;
  unsigned long long managed;
  int ordinal;
  dlb__cu_result r = query(p, &type, &managed, &ordinal);
  /* Asking needs a context on some drivers. Never create one just to ask:
   * with no primary context active, no CUDA memory exists here. */
  if (r == DLB__CUDA_ERROR_INVALID_CONTEXT) {
    dlb__cu_context cur = NULL;
    dlb__cu_result rc = dlb__cu.cuCtxGetCurrent(&cur);
    if (rc != DLB__CUDA_SUCCESS) return dlb__cuda_fail(rc, "cuCtxGetCurrent");
    if (cur == NULL) {
      int device = -1, pushed = 0;
      dlb_status s = active_device(&device);
      if (s != DLB_OK) return s;
      if (device < 0) {
        *out = (dlb__ptr_kind){{kDLCPU, 0}, 0};
        return DLB_OK;
      }
      s = dlb__cuda_enter(device, &pushed);
      if (s != DLB_OK) return s;
      r = query(p, &type, &managed, &ordinal);
      dlb__cuda_leave(pushed);
    }
  }
  /* Addresses the driver never saw come back as success with type 0, or
   * (older drivers) as INVALID_VALUE. */
  if (r == DLB__CUDA_ERROR_INVALID_VALUE) {
    type = 0;
    managed = 0;
  } else if (r != DLB__CUDA_SUCCESS) {
    return dlb__cuda_fail(r, "cuPointerGetAttributes(%p)", p);
  }
  dlb__ptr_kind k = {{kDLCPU, 0}, 0};
  /* Managed memory reports a device memory type: IS_MANAGED decides. */
  if (managed != 0 || type == DLB__CU_MEMORYTYPE_UNIFIED) {
    k.device.device_type = kDLCUDAManaged;
    k.managed = 1;
  } else if (type == DLB__CU_MEMORYTYPE_DEVICE) {
    if (ordinal < 0 || ordinal >= dlb__cuda_count())
      return dlb__fail(DLB_E_RUNTIME, "cuPointerGetAttributes(%p): device "
                       "memory with device ordinal %d; the driver reports "
                       "%d devices", p, ordinal, dlb__cuda_count());
    k.device.device_type = kDLCUDA;
    k.device.device_id = ordinal;
  } else if (type == DLB__CU_MEMORYTYPE_HOST) {
    k.device.device_type = kDLCUDAHost;
  }
  *out = k;
  return DLB_OK;
}

/* Devices that cannot use managed memory concurrently with the CPU refuse
 * device prefetches and device-located advice. */
static dlb_status check_concurrent(int device, const char *what) {
  int v = 0;
  dlb_status s = dlb__cuda_attribute(
      device, DLB__CU_DEVICE_ATTRIBUTE_CONCURRENT_MANAGED_ACCESS,
      "CONCURRENT_MANAGED_ACCESS", &v);
  if (s != DLB_OK) return s;
  if (v == 0)
    return dlb__fail(DLB_E_UNSUPPORTED, "%s to cuda:%d: the device cannot "
                     "access managed memory concurrently with the CPU "
                     "(CONCURRENT_MANAGED_ACCESS is 0)", what, device);
  return DLB_OK;
}

static dlb__cu_memlocation location(int target_device) {
  dlb__cu_memlocation loc;
  loc.type = target_device >= 0 ? DLB__CU_MEM_LOCATION_TYPE_DEVICE
                                : DLB__CU_MEM_LOCATION_TYPE_HOST;
  loc.id = target_device >= 0 ? target_device : 0;
  return loc;
}

dlb_status dlb__cuda_prefetch(void *p, size_t size, int target_device,
                              void *stream) {
  if (dlb__cu.cuMemPrefetchAsync_v2 == NULL &&
      dlb__cu.cuMemPrefetchAsync == NULL)
    return dlb__fail(DLB_E_UNSUPPORTED, "CUDA driver %s has no "
                     "cuMemPrefetchAsync", dlb__cuda_library());
  int pushed = 0;
  dlb_status s = dlb__cuda_enter(target_device >= 0 ? target_device : 0,
                                 &pushed);
  if (s != DLB_OK) return s;
  if (target_device >= 0) s = check_concurrent(target_device, "prefetch");
  if (s == DLB_OK) {
    dlb__cu_result r;
    if (dlb__cu.cuMemPrefetchAsync_v2 != NULL)
      r = dlb__cu.cuMemPrefetchAsync_v2(dlb__cuda_devptr(p), size,
                                        location(target_device), 0,
                                        (dlb__cu_stream)stream);
    else
      r = dlb__cu.cuMemPrefetchAsync(
          dlb__cuda_devptr(p), size,
          target_device >= 0 ? target_device : DLB__CU_DEVICE_CPU,
          (dlb__cu_stream)stream);
    if (r != DLB__CUDA_SUCCESS)
      s = dlb__cuda_fail(r, "cuMemPrefetchAsync(%p, %zu bytes, to %s%d)", p,
                         size, target_device >= 0 ? "cuda:" : "cpu",
                         target_device >= 0 ? target_device : 0);
  }
  dlb__cuda_leave(pushed);
  return s;
}

dlb_status dlb__cuda_advise(void *p, size_t size, int advice,
                            int target_device) {
  if (dlb__cu.cuMemAdvise_v2 == NULL && dlb__cu.cuMemAdvise == NULL)
    return dlb__fail(DLB_E_UNSUPPORTED, "CUDA driver %s has no cuMemAdvise",
                     dlb__cuda_library());
  int pushed = 0;
  dlb_status s = dlb__cuda_enter(target_device >= 0 ? target_device : 0,
                                 &pushed);
  if (s != DLB_OK) return s;
  /* Read-mostly ignores the location; the others place pages on it. */
  if (target_device >= 0 && advice > (int)DLB__CU_MEM_ADVISE_UNSET_READ_MOSTLY)
    s = check_concurrent(target_device, "memory advice");
  if (s == DLB_OK) {
    dlb__cu_result r;
    if (dlb__cu.cuMemAdvise_v2 != NULL)
      r = dlb__cu.cuMemAdvise_v2(dlb__cuda_devptr(p), size,
                                 (dlb__cu_enum)advice,
                                 location(target_device));
    else
      r = dlb__cu.cuMemAdvise(
          dlb__cuda_devptr(p), size, (dlb__cu_enum)advice,
          target_device >= 0 ? target_device : DLB__CU_DEVICE_CPU);
    if (r != DLB__CUDA_SUCCESS)
      s = dlb__cuda_fail(r, "cuMemAdvise(%p, %zu bytes, advice %d)", p, size,
                         advice);
  }
  dlb__cuda_leave(pushed);
  return s;
}
