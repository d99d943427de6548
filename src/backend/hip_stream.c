/*
 * hip_stream.c -- HIP copies, stream hand-off and synchronisation.
 */
#include <string.h>

#include "hip_loader.h"

/* DLB_E_UNSUPPORTED, recording no message, for a pitch over the device's
 * limit: the caller then stages the copy, a route of its own. */
static dlb_status pitch_fits(int device, const dlb__pitched *c) {
  int max_pitch = 0;
  dlb__hip_error e = dlb__hi.hipDeviceGetAttribute(
      &max_pitch, DLB__HIP_ATTRIBUTE_MAX_PITCH, device);
  if (e != DLB__HIP_SUCCESS)
    return dlb__hip_fail(e, "hipDeviceGetAttribute(MaxPitch, rocm:%d)",
                         device);
  size_t limit = max_pitch > 0 ? (size_t)max_pitch : 0;
  if (c->src_pitch > limit || c->dst_pitch > limit) return DLB_E_UNSUPPORTED;
  return DLB_OK;
}

static dlb_status copy_on_device(int device, const dlb__pitched *c,
                                 dlb__hip_stream stream) {
  dlb__hip_error e;
  if (c->height == 1 && c->depth == 1) {
    e = dlb__hi.hipMemcpyAsync(c->dst, c->src, c->width,
                               DLB__HIP_MEMCPY_DEFAULT, stream);
    if (e != DLB__HIP_SUCCESS)
      return dlb__hip_fail(e, "hipMemcpyAsync(%zu bytes) on rocm:%d", c->width,
                           device);
    return DLB_OK;
  }
  dlb_status s = pitch_fits(device, c);
  if (s != DLB_OK) return s;
  if (c->depth == 1) {
    e = dlb__hi.hipMemcpy2DAsync(c->dst, c->dst_pitch, c->src, c->src_pitch,
                                 c->width, c->height, DLB__HIP_MEMCPY_DEFAULT,
                                 stream);
    if (e != DLB__HIP_SUCCESS)
      return dlb__hip_fail(e, "hipMemcpy2DAsync(%zu x %zu bytes, pitches %zu "
                           "and %zu) on rocm:%d", c->height, c->width,
                           c->src_pitch, c->dst_pitch, device);
    return DLB_OK;
  }
  dlb__hip_memcpy3d m;
  memset(&m, 0, sizeof m);
  /* The runtime only reads through srcPtr, but its type is not const. */
  memcpy(&m.srcPtr.ptr, &c->src, sizeof m.srcPtr.ptr);
  m.srcPtr.pitch = c->src_pitch;
  m.srcPtr.xsize = c->width;
  m.srcPtr.ysize = c->src_rows;
  m.dstPtr.ptr = c->dst;
  m.dstPtr.pitch = c->dst_pitch;
  m.dstPtr.xsize = c->width;
  m.dstPtr.ysize = c->dst_rows;
  m.extent.width = c->width;
  m.extent.height = c->height;
  m.extent.depth = c->depth;
  m.kind = DLB__HIP_MEMCPY_DEFAULT;
  e = dlb__hi.hipMemcpy3DAsync(&m, stream);
  if (e != DLB__HIP_SUCCESS)
    return dlb__hip_fail(e, "hipMemcpy3DAsync(%zu x %zu x %zu bytes) on "
                         "rocm:%d", c->depth, c->height, c->width, device);
  return DLB_OK;
}

dlb_status dlb__hip_copy(int device, const dlb__pitched *c, void *stream) {
  int saved = -1;
  dlb_status s = dlb__hip_enter(device, &saved);
  if (s != DLB_OK) return s;
  s = copy_on_device(device, c, (dlb__hip_stream)stream);
  dlb__hip_leave(saved);
  return s;
}

dlb_status dlb__hip_stream_sync(int device, void *stream) {
  int saved = -1;
  dlb_status s = dlb__hip_enter(device, &saved);
  if (s != DLB_OK) return s;
  dlb__hip_error e = dlb__hi.hipStreamSynchronize((dlb__hip_stream)stream);
  if (e != DLB__HIP_SUCCESS)
    s = dlb__hip_fail(e, "hipStreamSynchronize(%p) on rocm:%d", stream,
                      device);
  dlb__hip_leave(saved);
  return s;
}

dlb_status dlb__hip_stream_wait(int device, void *consumer, void *producer) {
  if (consumer == producer) return DLB_OK;
  int saved = -1;
  dlb_status s = dlb__hip_enter(device, &saved);
  if (s != DLB_OK) return s;
  dlb__hip_event ev = NULL;
  dlb__hip_error e =
      dlb__hi.hipEventCreateWithFlags(&ev, DLB__HIP_EVENT_DISABLE_TIMING);
  if (e != DLB__HIP_SUCCESS) {
    s = dlb__hip_fail(e, "hipEventCreateWithFlags(DisableTiming) on rocm:%d",
                      device);
  } else {
    e = dlb__hi.hipEventRecord(ev, (dlb__hip_stream)producer);
    if (e != DLB__HIP_SUCCESS) {
      s = dlb__hip_fail(e, "hipEventRecord(producer stream %p) on rocm:%d",
                        producer, device);
    } else {
      e = dlb__hi.hipStreamWaitEvent((dlb__hip_stream)consumer, ev, 0);
      if (e != DLB__HIP_SUCCESS)
        s = dlb__hip_fail(e, "hipStreamWaitEvent(consumer stream %p) on "
                          "rocm:%d", consumer, device);
    }
    /* A pending wait keeps what it needs of the event. */
    (void)dlb__hi.hipEventDestroy(ev);
  }
  dlb__hip_leave(saved);
  return s;
}

dlb_status dlb__hip_device_sync(int device) {
  int saved = -1;
  dlb_status s = dlb__hip_enter(device, &saved);
  if (s != DLB_OK) return s;
  dlb__hip_error e = dlb__hi.hipDeviceSynchronize();
  if (e != DLB__HIP_SUCCESS)
    s = dlb__hip_fail(e, "hipDeviceSynchronize on rocm:%d", device);
  dlb__hip_leave(saved);
  return s;
}
