/*
 * backend.c -- dispatch of non-cpu memory to the runtime that owns it, and
 * the public questions about the runtimes.
 */
#include <string.h>

#include "backend.h"

const dlb__gpu *dlb__gpu_for_type(DLDeviceType type) {
  switch (type) {
    case kDLCUDA:
    case kDLCUDAHost:
    case kDLCUDAManaged:
      return &dlb__cuda;
    case kDLROCM:
    case kDLROCMHost:
      return &dlb__hip;
    default:
      return NULL;
  }
}

dlb__side dlb__gpu_side(DLDeviceType type) {
  switch (type) {
    case kDLCUDA:
    case kDLROCM:
      return DLB__SIDE_DEVICE;
    case kDLCUDAManaged:
      return DLB__SIDE_MANAGED;
    default:
      return DLB__SIDE_HOST;
  }
}

dlb_status dlb__gpu_device(const dlb__gpu *gpu, DLDevice device,
                           int *ordinal) {
  dlb_status s = gpu->load();
  if (s != DLB_OK) return s;
  if (dlb_device_type_is_host_type(device.device_type)) {
    *ordinal = 0;
    return DLB_OK;
  }
  int n = gpu->count();
  if (device.device_id < 0 || device.device_id >= n ||
      device.device_id >= DLB__GPU_MAX_DEVICES)
    return dlb__fail(DLB_E_NO_DEVICE, "%s:%d requested; the %s runtime %s "
                     "reports %d device%s", dlb_device_type_name(
                     device.device_type), (int)device.device_id, gpu->name,
                     gpu->library(), n, n == 1 ? "" : "s");
  *ordinal = (int)device.device_id;
  return DLB_OK;
}

dlb_status dlb__device_alloc(DLDevice device, size_t size, void **out) {
  const dlb__gpu *gpu = dlb__gpu_for_type(device.device_type);
  if (gpu == NULL)
    return dlb__fail(DLB_E_UNSUPPORTED,
                     "no backend allocates %s memory (device_type %d)",
                     dlb__type_label(device.device_type),
                     (int)device.device_type);
  int ordinal = 0;
  dlb_status s = dlb__gpu_device(gpu, device, &ordinal);
  if (s != DLB_OK) return s;
  /* The runtimes refuse empty allocations, but a tensor's data must not
   * be NULL even when it holds no element. */
  return gpu->alloc(dlb__gpu_side(device.device_type), ordinal,
                    size > 0 ? size : 1, out);
}

dlb_status dlb__device_zero_byte(DLDevice device, void *at) {
  if (dlb_device_type_cpu_accessible(device.device_type)) {
    *(unsigned char *)at = 0;
    return DLB_OK;
  }
  static const char zero = 0;
  const dlb__gpu *gpu = dlb__gpu_for_type(device.device_type);
  int ordinal = 0;
  dlb_status s = dlb__gpu_device(gpu, device, &ordinal);
  if (s != DLB_OK) return s;
  dlb__pitched c;
  memset(&c, 0, sizeof c);
  c.src = &zero;
  c.src_side = DLB__SIDE_HOST;
  c.dst = at;
  c.dst_side = dlb__gpu_side(device.device_type);
  c.width = c.height = c.depth = 1;
  s = gpu->copy(ordinal, &c, NULL);
  if (s == DLB_OK) s = gpu->stream_sync(ordinal, NULL);
  return s;
}

void dlb__device_free(DLDevice device, void *ptr) {
  const dlb__gpu *gpu = dlb__gpu_for_type(device.device_type);
  if (gpu == NULL || ptr == NULL || !gpu->ready()) return;
  int ordinal = dlb_device_type_is_host_type(device.device_type)
                    ? 0
                    : (int)device.device_id;
  gpu->free(dlb__gpu_side(device.device_type), ordinal, ptr);
}

static const dlb__gpu *runtime_gpu(dlb_runtime runtime) {
  switch (runtime) {
    case DLB_RUNTIME_CUDA:
      return &dlb__cuda;
    case DLB_RUNTIME_HIP:
      return &dlb__hip;
  }
  return NULL;
}

static dlb_status loaded(dlb_runtime runtime, const dlb__gpu **out) {
  const dlb__gpu *gpu = runtime_gpu(runtime);
  if (gpu == NULL)
    return dlb__fail(DLB_E_INVAL, "runtime is %d; must be DLB_RUNTIME_CUDA "
                     "(1) or DLB_RUNTIME_HIP (2)", (int)runtime);
  dlb_status s = gpu->load();
  if (s == DLB_OK) *out = gpu;
  return s;
}

dlb_status dlb_runtime_status(dlb_runtime runtime) {
  const dlb__gpu *gpu = NULL;
  return loaded(runtime, &gpu);
}

dlb_status dlb_runtime_device_count(dlb_runtime runtime, int *out) {
  if (out == NULL)
    return dlb__fail(DLB_E_INVAL, "dlb_runtime_device_count: out is NULL");
  const dlb__gpu *gpu = NULL;
  dlb_status s = loaded(runtime, &gpu);
  if (s == DLB_OK) *out = gpu->count();
  return s;
}

dlb_status dlb_runtime_version(dlb_runtime runtime, int *out) {
  if (out == NULL)
    return dlb__fail(DLB_E_INVAL, "dlb_runtime_version: out is NULL");
  const dlb__gpu *gpu = NULL;
  dlb_status s = loaded(runtime, &gpu);
  if (s == DLB_OK) *out = gpu->version();
  return s;
}

const char *dlb_runtime_library(dlb_runtime runtime) {
  const dlb__gpu *gpu = runtime_gpu(runtime);
  return gpu != NULL && gpu->ready() ? gpu->library() : NULL;
}

dlb_status dlb_gpu_get_info(DLDevice device, dlb_gpu_info *out) {
  if (out == NULL)
    return dlb__fail(DLB_E_INVAL, "dlb_gpu_get_info: out is NULL");
  if (device.device_type != kDLCUDA && device.device_type != kDLROCM)
    return dlb__fail(DLB_E_DEVICE, "dlb_gpu_get_info: device_type %d (%s) "
                     "is not a GPU; must be cuda (%d) or rocm (%d)",
                     (int)device.device_type,
                     dlb__type_label(device.device_type), (int)kDLCUDA,
                     (int)kDLROCM);
  const dlb__gpu *gpu = dlb__gpu_for_type(device.device_type);
  int ordinal = 0;
  dlb_status s = dlb__gpu_device(gpu, device, &ordinal);
  if (s != DLB_OK) return s;
  dlb_gpu_info info;
  s = gpu->info(ordinal, &info);
  if (s == DLB_OK) *out = info;
  return s;
}
