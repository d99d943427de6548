/* hip_info.c -- what the HIP runtime says about one GPU. */
#include <string.h>

#include "hip_loader.h"

/* A capability the runtime cannot report is unknown (-1), not an error:
 * older runtimes lack some attributes. */
static int capability(int device, int attr) {
  int v = 0;
  if (dlb__hi.hipDeviceGetAttribute(&v, attr, device) != DLB__HIP_SUCCESS) {
    /* HIP keeps the failure as its last error; clear it so that it does
     * not surface from a later, unrelated call. */
    (void)dlb__hi.hipGetLastError();
    return -1;
  }
  return v != 0;
}

dlb_status dlb__hip_info(int device, dlb_gpu_info *out) {
  char name[DLB_GPU_NAME_MAX];
  dlb__hip_error e = dlb__hi.hipDeviceGetName(name, (int)sizeof name, device);
  if (e != DLB__HIP_SUCCESS)
    return dlb__hip_fail(e, "hipDeviceGetName(rocm:%d)", device);
  size_t bytes = 0;
  e = dlb__hi.hipDeviceTotalMem(&bytes, device);
  if (e != DLB__HIP_SUCCESS)
    return dlb__hip_fail(e, "hipDeviceTotalMem(rocm:%d)", device);
  name[sizeof name - 1] = '\0';
  memcpy(out->name, name, sizeof name);
  out->total_memory = bytes;
  out->managed_memory = capability(device, DLB__HIP_ATTRIBUTE_MANAGED_MEMORY);
  out->concurrent_managed =
      capability(device, DLB__HIP_ATTRIBUTE_CONCURRENT_MANAGED_ACCESS);
  out->host_register =
      capability(device, DLB__HIP_ATTRIBUTE_HOST_REGISTER_SUPPORTED);
  out->ipc = capability(device, DLB__HIP_ATTRIBUTE_UNIFIED_ADDRESSING);
  return DLB_OK;
}
