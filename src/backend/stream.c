/*
 * stream.c -- the DLPack stream convention, stream hand-off and host
 * synchronisation.
 */
#include "backend.h"

dlb_status dlb_stream_from_dlpack(DLDeviceType type, int64_t stream,
                                  void **out, int *sync) {
  if (out == NULL || sync == NULL)
    return dlb__fail(DLB_E_INVAL, "dlb_stream_from_dlpack: %s is NULL",
                     out == NULL ? "out" : "sync");
  const dlb__gpu *gpu = dlb__gpu_for_type(type);
  if (type == kDLCPU) {
    if (stream != DLB_STREAM_NONE)
      return dlb__fail(DLB_E_INVAL, "stream is %lld; cpu memory takes only "
                       "None", (long long)stream);
    *out = NULL;
    *sync = 0;
    return DLB_OK;
  }
  if (gpu == NULL)
    return dlb__fail(DLB_E_DEVICE, "no stream convention for %s memory "
                     "(device_type %d)", dlb__type_label(type), (int)type);
  if (stream == -1) {
    *out = NULL;
    *sync = 0;
    return DLB_OK;
  }
  void *handle = NULL;
  if (gpu == &dlb__cuda) {
    if (stream == DLB_STREAM_NONE || stream == 1)
      handle = DLB_CUDA_STREAM_LEGACY;
    else if (stream == 2)
      handle = DLB_CUDA_STREAM_PER_THREAD;
    else if (stream > 2)
      handle = (void *)(uintptr_t)stream;
    else
      return dlb__fail(DLB_E_INVAL, "stream is %lld; CUDA takes None, -1, 1 "
                       "(legacy default), 2 (per-thread default) or a "
                       "stream handle, never 0", (long long)stream);
  } else {
    if (stream > 2)
      handle = (void *)(uintptr_t)stream;
    else if (stream != DLB_STREAM_NONE && stream != 0)
      return dlb__fail(DLB_E_INVAL, "stream is %lld; ROCm takes None or 0 "
                       "(default stream), -1 or a stream handle, never 1 or "
                       "2", (long long)stream);
  }
  *out = handle;
  *sync = 1;
  return DLB_OK;
}

static dlb_status gpu_of(DLDevice device, const dlb__gpu **gpu, int *ordinal) {
  *gpu = dlb__gpu_for_type(device.device_type);
  if (*gpu == NULL) {
    const char *name = dlb_device_type_name(device.device_type);
    return dlb__fail(DLB_E_DEVICE, "%s (device_type %d) has no GPU runtime "
                     "streams", name != NULL ? name : "unknown device",
                     (int)device.device_type);
  }
  return dlb__gpu_device(*gpu, device, ordinal);
}

dlb_status dlb_stream_wait(DLDevice device, void *consumer, void *producer) {
  const dlb__gpu *gpu = NULL;
  int ordinal = 0;
  dlb_status s = gpu_of(device, &gpu, &ordinal);
  if (s != DLB_OK) return s;
  return gpu->stream_wait(ordinal, consumer, producer);
}

/* Handles that mean "this stream of whichever device is current". */
static int per_device_handle(void *stream) {
  return stream == NULL || stream == DLB_CUDA_STREAM_LEGACY ||
         stream == DLB_CUDA_STREAM_PER_THREAD;
}

dlb_status dlb_stream_synchronize(DLDevice device, void *stream) {
  const dlb__gpu *gpu = NULL;
  int ordinal = 0;
  dlb_status s = gpu_of(device, &gpu, &ordinal);
  if (s != DLB_OK) return s;
  if (!dlb_device_type_is_host_type(device.device_type) ||
      !per_device_handle(stream))
    return gpu->stream_sync(ordinal, stream);
  int n = gpu->count();
  for (int d = 0; d < n && d < DLB__GPU_MAX_DEVICES && s == DLB_OK; d++)
    if (gpu->active(d)) s = gpu->stream_sync(d, stream);
  return s;
}

dlb_status dlb_device_synchronize(DLDevice device) {
  const dlb__gpu *gpu = NULL;
  int ordinal = 0;
  dlb_status s = gpu_of(device, &gpu, &ordinal);
  if (s != DLB_OK) return s;
  if (!dlb_device_type_is_host_type(device.device_type))
    return gpu->device_sync(ordinal);
  int n = gpu->count();
  for (int d = 0; d < n && d < DLB__GPU_MAX_DEVICES && s == DLB_OK; d++)
    if (gpu->active(d)) s = gpu->device_sync(d);
  return s;
}
