/*
 * cuda_stream.c -- CUDA copies, stream hand-off and synchronisation.
 */
#include <string.h>

#include "cuda_loader.h"

static dlb__cu_enum memory_type(dlb__side side) {
  switch (side) {
    case DLB__SIDE_HOST:
      return DLB__CU_MEMORYTYPE_HOST;
    case DLB__SIDE_DEVICE:
      return DLB__CU_MEMORYTYPE_DEVICE;
    case DLB__SIDE_MANAGED:
      break;
  }
  /* The driver finds managed pages wherever they are. */
  return DLB__CU_MEMORYTYPE_UNIFIED;
}

/* DLB_E_UNSUPPORTED, recording no message, for a pitch over the device's
 * limit: the caller then stages the copy, a route of its own. */
static dlb_status pitch_fits(int device, const dlb__pitched *c) {
  int max_pitch = 0;
  dlb_status s = dlb__cuda_attribute(
      device, DLB__CU_DEVICE_ATTRIBUTE_MAX_PITCH, "MAX_PITCH", &max_pitch);
  if (s != DLB_OK) return s;
  size_t limit = max_pitch > 0 ? (size_t)max_pitch : 0;
  if (c->src_pitch > limit || c->dst_pitch > limit) return DLB_E_UNSUPPORTED;
  return DLB_OK;
}

static void fill_2d(dlb__cu_memcpy2d *m, const dlb__pitched *c) {
  memset(m, 0, sizeof *m);
  m->srcMemoryType = memory_type(c->src_side);
  if (c->src_side == DLB__SIDE_HOST)
    m->srcHost = c->src;
  else
    m->srcDevice = dlb__cuda_devptr(c->src);
  m->srcPitch = c->src_pitch;
  m->dstMemoryType = memory_type(c->dst_side);
  if (c->dst_side == DLB__SIDE_HOST)
    m->dstHost = c->dst;
  else
    m->dstDevice = dlb__cuda_devptr(c->dst);
  m->dstPitch = c->dst_pitch;
  m->WidthInBytes = c->width;
  m->Height = c->height;
}

static void fill_3d(dlb__cu_memcpy3d *m, const dlb__pitched *c) {
  memset(m, 0, sizeof *m);
  m->srcMemoryType = memory_type(c->src_side);
  if (c->src_side == DLB__SIDE_HOST)
    m->srcHost = c->src;
  else
    m->srcDevice = dlb__cuda_devptr(c->src);
  m->srcPitch = c->src_pitch;
  m->srcHeight = c->src_rows;
  m->dstMemoryType = memory_type(c->dst_side);
  if (c->dst_side == DLB__SIDE_HOST)
    m->dstHost = c->dst;
  else
    m->dstDevice = dlb__cuda_devptr(c->dst);
  m->dstPitch = c->dst_pitch;
  m->dstHeight = c->dst_rows;
  m->WidthInBytes = c->width;
  m->Height = c->height;
  m->Depth = c->depth;
}

static dlb_status copy_in_context(int device, const dlb__pitched *c,
                                  dlb__cu_stream stream) {
  dlb__cu_result r;
  if (c->height == 1 && c->depth == 1) {
    r = dlb__cu.cuMemcpyAsync(dlb__cuda_devptr(c->dst),
                              dlb__cuda_devptr(c->src), c->width, stream);
    if (r != DLB__CUDA_SUCCESS)
      return dlb__cuda_fail(r, "cuMemcpyAsync(%zu bytes) on cuda:%d", c->width,
                            device);
    return DLB_OK;
  }
  dlb_status s = pitch_fits(device, c);
  if (s != DLB_OK) return s;
  if (c->depth == 1) {
    dlb__cu_memcpy2d m;
    fill_2d(&m, c);
    r = dlb__cu.cuMemcpy2DAsync_v2(&m, stream);
    /* Device-to-device copies may refuse pitches that cuMemAllocPitch did
     * not choose; the unaligned form takes any, but only synchronously. */
    if (r == DLB__CUDA_ERROR_INVALID_VALUE && c->src_side != DLB__SIDE_HOST &&
        c->dst_side != DLB__SIDE_HOST) {
      r = dlb__cu.cuStreamSynchronize(stream);
      if (r != DLB__CUDA_SUCCESS)
        return dlb__cuda_fail(r, "cuStreamSynchronize before "
                              "cuMemcpy2DUnaligned_v2 on cuda:%d", device);
      r = dlb__cu.cuMemcpy2DUnaligned_v2(&m);
      if (r != DLB__CUDA_SUCCESS)
        return dlb__cuda_fail(r, "cuMemcpy2DUnaligned_v2(%zu x %zu bytes, "
                              "pitches %zu and %zu) on cuda:%d", c->height,
                              c->width, c->src_pitch, c->dst_pitch, device);
      return DLB_OK;
    }
    if (r != DLB__CUDA_SUCCESS)
      return dlb__cuda_fail(r, "cuMemcpy2DAsync_v2(%zu x %zu bytes, pitches "
                            "%zu and %zu) on cuda:%d", c->height, c->width,
                            c->src_pitch, c->dst_pitch, device);
    return DLB_OK;
  }
  dlb__cu_memcpy3d m;
  fill_3d(&m, c);
  r = dlb__cu.cuMemcpy3DAsync_v2(&m, stream);
  if (r != DLB__CUDA_SUCCESS)
    return dlb__cuda_fail(r, "cuMemcpy3DAsync_v2(%zu x %zu x %zu bytes) on "
                          "cuda:%d", c->depth, c->height, c->width, device);
  return DLB_OK;
}

dlb_status dlb__cuda_copy(int device, const dlb__pitched *c, void *stream) {
  int pushed = 0;
  dlb_status s = dlb__cuda_enter(device, &pushed);
  if (s != DLB_OK) return s;
  s = copy_in_context(device, c, (dlb__cu_stream)stream);
  dlb__cuda_leave(pushed);
  return s;
}

dlb_status dlb__cuda_stream_sync(int device, void *stream) {
  int pushed = 0;
  dlb_status s = dlb__cuda_enter(device, &pushed);
  if (s != DLB_OK) return s;
  dlb__cu_result r = dlb__cu.cuStreamSynchronize((dlb__cu_stream)stream);
  if (r != DLB__CUDA_SUCCESS)
    s = dlb__cuda_fail(r, "cuStreamSynchronize(%p) on cuda:%d", stream,
                       device);
  dlb__cuda_leave(pushed);
  return s;
}

/* The loaded entry points are the legacy-stream ones, so NULL is the
 * legacy default stream. */
static void *canonical_stream(void *s) {
  return s == NULL ? (void *)DLB__CU_STREAM_LEGACY : s;
}

dlb_status dlb__cuda_stream_wait(int device, void *consumer, void *producer) {
  if (canonical_stream(consumer) == canonical_stream(producer)) return DLB_OK;
  int pushed = 0;
  dlb_status s = dlb__cuda_enter(device, &pushed);
  if (s != DLB_OK) return s;
  dlb__cu_event e = NULL;
  dlb__cu_result r = dlb__cu.cuEventCreate(&e, DLB__CU_EVENT_DISABLE_TIMING);
  if (r != DLB__CUDA_SUCCESS) {
    s = dlb__cuda_fail(r, "cuEventCreate(DISABLE_TIMING) on cuda:%d", device);
  } else {
    r = dlb__cu.cuEventRecord(e, (dlb__cu_stream)producer);
    if (r != DLB__CUDA_SUCCESS) {
      s = dlb__cuda_fail(r, "cuEventRecord(producer stream %p) on cuda:%d",
                         producer, device);
    } else {
      r = dlb__cu.cuStreamWaitEvent((dlb__cu_stream)consumer, e, 0);
      if (r != DLB__CUDA_SUCCESS)
        s = dlb__cuda_fail(r, "cuStreamWaitEvent(consumer stream %p) on "
                           "cuda:%d", consumer, device);
    }
    /* Destroying an event that a stream still waits on is allowed: the
     * driver frees it once the wait is over. */
    (void)dlb__cu.cuEventDestroy_v2(e);
  }
  dlb__cuda_leave(pushed);
  return s;
}

dlb_status dlb__cuda_device_sync(int device) {
  int pushed = 0;
  dlb_status s = dlb__cuda_enter(device, &pushed);
  if (s != DLB_OK) return s;
  dlb__cu_result r = dlb__cu.cuCtxSynchronize();
  if (r != DLB__CUDA_SUCCESS)
    s = dlb__cuda_fail(r, "cuCtxSynchronize on cuda:%d", device);
  dlb__cuda_leave(pushed);
  return s;
}
