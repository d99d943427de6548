/* cuda_info.c -- what the CUDA driver says about one GPU. */
#include <string.h>

#include "cuda_loader.h"

/* A capability the driver cannot report is unknown (-1), not an error:
 * older drivers lack some attributes. */
static int capability(dlb__cu_device dev, dlb__cu_enum attr) {
  int v = 0;
  if (dlb__cu.cuDeviceGetAttribute(&v, attr, dev) != DLB__CUDA_SUCCESS)
    return -1;
  return v != 0;
}

dlb_status dlb__cuda_info(int device, dlb_gpu_info *out) {
  dlb__cu_device dev = 0;
  dlb__cu_result r = dlb__cu.cuDeviceGet(&dev, device);
  if (r != DLB__CUDA_SUCCESS)
    return dlb__cuda_fail(r, "cuDeviceGet(cuda:%d)", device);
  char name[DLB_GPU_NAME_MAX];
  r = dlb__cu.cuDeviceGetName(name, (int)sizeof name, dev);
  if (r != DLB__CUDA_SUCCESS)
    return dlb__cuda_fail(r, "cuDeviceGetName(cuda:%d)", device);
  size_t bytes = 0;
  r = dlb__cu.cuDeviceTotalMem_v2(&bytes, dev);
  if (r != DLB__CUDA_SUCCESS)
    return dlb__cuda_fail(r, "cuDeviceTotalMem(cuda:%d)", device);
  name[sizeof name - 1] = '\0';
  memcpy(out->name, name, sizeof name);
  out->total_memory = bytes;
  out->managed_memory =
      capability(dev, DLB__CU_DEVICE_ATTRIBUTE_MANAGED_MEMORY);
  out->concurrent_managed =
      capability(dev, DLB__CU_DEVICE_ATTRIBUTE_CONCURRENT_MANAGED_ACCESS);
  out->host_register =
      capability(dev, DLB__CU_DEVICE_ATTRIBUTE_HOST_REGISTER_SUPPORTED);
  out->ipc = capability(dev, DLB__CU_DEVICE_ATTRIBUTE_UNIFIED_ADDRESSING);
  return DLB_OK;
}
