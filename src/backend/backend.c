/* backend.c -- dispatch of non-cpu memory to the runtime backends. */
#include "internal.h"

dlb_status dlb__device_alloc(DLDevice device, size_t size, void **out) {
  (void)size;
  (void)out;
  const char *name = dlb_device_type_name(device.device_type);
  return dlb__fail(DLB_E_UNSUPPORTED,
                   "no backend allocates %s memory (device_type %d)",
                   name != NULL ? name : "unknown", (int)device.device_type);
}

void dlb__device_free(DLDevice device, void *ptr) {
  (void)device;
  (void)ptr;
}

dlb_status dlb__device_copy(const DLTensor *src, const DLTensor *dst) {
  (void)dst;
  return dlb__fail(DLB_E_UNSUPPORTED,
                   "no backend copies from device_type %d",
                   (int)src->device.device_type);
}
