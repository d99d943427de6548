/*
 * gpu_copy.c -- copies where a side is GPU memory: one pitched runtime
 * copy when the layouts allow it, host staging plus the CPU copy engine
 * otherwise.
 *
 * Planning works in bytes: the dimensions of both tensors are merged where
 * both are contiguous (dlb_coalesce_dims), with the element's bytes as one
 * more, innermost, dimension. Up to three dimensions with positive strides
 * that the runtime's pitch rules accept make one 1-D, 2-D or 3-D copy.
 * Such a copy between device memory and large pageable host memory goes
 * through pinned staging in chunks instead (staging.h): the runtime stages
 * pageable memory too, but this overlaps the CPU's part with the DMA and
 * runs it on the copy engine's threads (docs/performance.md says how it
 * compares on a real GPU).
 */
#include <string.h>

#include "backend.h"
#include "staging.h"

/* One tensor of a copy, and what its memory needs. */
typedef struct side {
  const DLTensor *t;
  dlb__span span; /* measured by validation */
  const dlb__gpu *gpu; /* NULL for cpu memory */
  dlb__side where;
  int ordinal;
  int cpu_access; /* the CPU may read and write it directly */
} side;

static dlb_status side_init(const DLTensor *t, const char *which, side *out) {
  out->t = t;
  out->gpu = dlb__gpu_for_type(t->device.device_type);
  out->where = dlb__gpu_side(t->device.device_type);
  out->ordinal = 0;
  out->cpu_access = dlb_device_type_cpu_accessible(t->device.device_type);
  if (out->gpu == NULL && t->device.device_type != kDLCPU)
    return dlb__fail(DLB_E_UNSUPPORTED, "%s is %s memory (device_type %d); "
                     "no backend copies it", which,
                     dlb__type_label(t->device.device_type),
                     (int)t->device.device_type);
  if (out->gpu == NULL) return DLB_OK;
  return dlb__gpu_device(out->gpu, t->device, &out->ordinal);
}

static char *first_byte(const DLTensor *t) {
  return (char *)t->data + t->byte_offset;
}

/* The element strides of t, compact ones for NULL strides. */
static void strides_of(const DLTensor *t, int64_t *out) {
  if (t->strides != NULL)
    memcpy(out, t->strides, (size_t)t->ndim * sizeof *out);
  else
    (void)dlb_compact_strides(t->ndim, t->shape, 0, out);
}

/* Rows of one side of a 3-D copy: the plane stride in whole rows, at
 * least as many as the copy has. */
static int plane_rows(int64_t plane, int64_t row, int64_t rows, size_t *out) {
  if (plane % row != 0 || plane / row < rows) return 0;
  *out = (size_t)(plane / row);
  return 1;
}

/* Fills c with one pitched copy doing the whole of src -> dst, or
 * returns 0 when the layouts need more than that. */
static int plan(const DLTensor *src, const DLTensor *dst, size_t itemsize,
                dlb__pitched *c) {
  int64_t shape[DLB_MAX_NDIM + 2], ss[DLB_MAX_NDIM + 2], ds[DLB_MAX_NDIM + 2];
  int32_t nd = src->ndim;
  if (nd > 0) memcpy(shape, src->shape, (size_t)nd * sizeof *shape);
  strides_of(src, ss);
  strides_of(dst, ds);
  int64_t *strides[2] = {ss, ds};
  nd = dlb_coalesce_dims(nd, shape, strides, 2);
  /* The bytes dimension merges into at most one of these. */
  if (nd > 3) return 0;
  for (int32_t i = 0; i < nd; i++) {
    ss[i] *= (int64_t)itemsize;
    ds[i] *= (int64_t)itemsize;
  }
  shape[nd] = (int64_t)itemsize;
  ss[nd] = ds[nd] = 1;
  nd = dlb_coalesce_dims(nd + 1, shape, strides, 2);
  /* One-byte elements lose their own dimension to the merge: then each
   * element is a row of one byte. */
  if (nd == 0 || ss[nd - 1] != 1 || ds[nd - 1] != 1) {
    shape[nd] = nd == 0 ? (int64_t)itemsize : 1;
    ss[nd] = ds[nd] = 1;
    nd++;
  }
  for (int32_t i = 0; i + 1 < nd; i++)
    if (ss[i] <= 0 || ds[i] <= 0) return 0;
  memset(c, 0, sizeof *c);
  c->src = first_byte(src);
  c->dst = first_byte(dst);
  c->width = (size_t)shape[nd - 1];
  c->height = c->depth = 1;
  switch (nd) {
    case 1:
      return 1;
    case 2:
      if (ss[0] < shape[1] || ds[0] < shape[1]) return 0;
      c->height = (size_t)shape[0];
      c->src_pitch = (size_t)ss[0];
      c->dst_pitch = (size_t)ds[0];
      return 1;
    case 3:
      if (ss[1] < shape[2] || ds[1] < shape[2]) return 0;
      if (!plane_rows(ss[0], ss[1], shape[1], &c->src_rows) ||
          !plane_rows(ds[0], ds[1], shape[1], &c->dst_rows))
        return 0;
      c->depth = (size_t)shape[0];
      c->height = (size_t)shape[1];
      c->src_pitch = (size_t)ss[1];
      c->dst_pitch = (size_t)ds[1];
      return 1;
    default:
      return 0;
  }
}

/* The bytes of a side's span between its memory and a host buffer of
 * that size, finished before returning. */
static dlb_status move_span(const side *s, char *host, int to_host,
                            void *stream) {
  dlb__pitched c;
  memset(&c, 0, sizeof c);
  char *mem = (char *)s->t->data + s->span.lo;
  c.width = (size_t)(s->span.hi - s->span.lo);
  c.height = c.depth = 1;
  if (to_host) {
    c.src = mem;
    c.src_side = s->where;
    c.dst = host;
    c.dst_side = DLB__SIDE_HOST;
  } else {
    c.src = host;
    c.src_side = DLB__SIDE_HOST;
    c.dst = mem;
    c.dst_side = s->where;
  }
  dlb_status st = s->gpu->copy(s->ordinal, &c, stream);
  if (st == DLB_OK) st = s->gpu->stream_sync(s->ordinal, stream);
  return st;
}

/* A host buffer *buf (the caller frees it, failure or not) for the bytes
 * of a GPU-only side's span, filled from the GPU when read is set, and
 * *view, a host tensor over it. */
static dlb_status to_host(const side *s, int read, void *stream, char **buf,
                          DLTensor *view) {
  *buf = dlb__data_alloc((size_t)(s->span.hi - s->span.lo),
                         DLB_DATA_ALIGNMENT);
  if (*buf == NULL) return DLB_E_NOMEM;
  dlb_status st = DLB_OK;
  if (read) st = move_span(s, *buf, 1, stream);
  if (st != DLB_OK) return st;
  *view = *s->t;
  view->data = *buf;
  view->byte_offset = s->t->byte_offset - (uint64_t)s->span.lo;
  view->device.device_type = kDLCPU;
  view->device.device_id = 0;
  return DLB_OK;
}

/* 0 when the last byte of a packed sub-byte tensor is used only in part:
 * its other bits are dst's and must survive a copy. */
static int whole_bytes(const DLTensor *t) {
  int64_t n = 0;
  if (!dlb_dtype_is_subbyte(t->dtype) || dlb_tensor_numel(t, &n) != DLB_OK)
    return 1;
  return (uint64_t)n * dlb_dtype_bits(t->dtype) % 8 == 0;
}

static dlb_status staged(const side *a, const side *b, void *stream) {
  dlb_status s = DLB_OK;
  /* The CPU is about to touch memory the GPU may still be writing. */
  if (a->gpu != NULL) s = a->gpu->stream_sync(a->ordinal, stream);
  if (s == DLB_OK && b->gpu != NULL && b->gpu != a->gpu)
    s = b->gpu->stream_sync(b->ordinal, stream);
  if (s != DLB_OK) return s;
  DLTensor sv = *a->t, dv = *b->t;
  char *sbuf = NULL, *dbuf = NULL;
  if (!a->cpu_access) s = to_host(a, 1, stream, &sbuf, &sv);
  if (s == DLB_OK && !b->cpu_access) {
    /* Bytes between dst's elements are written back unchanged, so they
     * are read first unless dst is dense. */
    int dense = (dlb_tensor_is_c_contiguous(b->t) ||
                 dlb_tensor_is_f_contiguous(b->t)) &&
                whole_bytes(b->t);
    s = to_host(b, !dense, stream, &dbuf, &dv);
  }
  if (s == DLB_OK) s = dlb_copy(&sv, &dv);
  if (s == DLB_OK && !b->cpu_access)
    s = move_span(b, dbuf, 0, stream);
  dlb__data_free(sbuf);
  dlb__data_free(dbuf);
  return s;
}

/* Copies src to dst, waiting for the result when wait is set. */
static dlb_status gpu_copy(const DLTensor *src, const DLTensor *dst,
                           void *stream, int wait) {
  if (src == NULL || dst == NULL)
    return dlb__fail(DLB_E_INVAL, "copy: %s is NULL",
                     src == NULL ? "src" : "dst");
  side a, b;
  dlb_status s = dlb__tensor_validate_span(src, "src", &a.span);
  if (s == DLB_OK) s = dlb__tensor_validate_span(dst, "dst", &b.span);
  if (s == DLB_OK) s = dlb__copy_check_pair(src, dst);
  if (s == DLB_OK) s = side_init(src, "src", &a);
  if (s == DLB_OK) s = side_init(dst, "dst", &b);
  if (s != DLB_OK) return s;
  if (a.gpu == NULL && b.gpu == NULL) return dlb_copy(src, dst);
  if (a.gpu != NULL && b.gpu != NULL && a.gpu != b.gpu && stream != NULL)
    return dlb__fail(DLB_E_INVAL, "copies between %s and %s memory use the "
                     "default streams; stream must be NULL, not %p",
                     a.gpu->name, b.gpu->name, stream);
  const int64_t n = a.span.numel;
  if (n == 0) return DLB_OK;
  if (a.gpu != NULL && b.gpu != NULL && a.gpu != b.gpu)
    return staged(&a, &b, NULL);
  const dlb__gpu *gpu = a.gpu != NULL ? a.gpu : b.gpu;
  /* The context of the side that is device memory, if any. */
  int device = a.gpu != NULL && a.where == DLB__SIDE_DEVICE ? a.ordinal
               : b.gpu != NULL                             ? b.ordinal
                                                           : a.ordinal;
  dlb__pitched c;
  int direct;
  /* The validator let only compact packed sub-byte tensors through: one
   * run of bytes, unless the last is shared with bits dst keeps. */
  if (dlb_dtype_is_subbyte(src->dtype)) {
    int64_t bytes = 0;
    s = dlb_dtype_storage_bytes(src->dtype, n, 0, &bytes);
    if (s != DLB_OK) return s;
    memset(&c, 0, sizeof c);
    c.src = first_byte(src);
    c.dst = first_byte(dst);
    c.width = (size_t)bytes;
    c.height = c.depth = 1;
    direct = whole_bytes(src);
  } else {
    direct = plan(src, dst, dlb_dtype_itemsize(src->dtype), &c);
  }
  /* Runtime copies of overlapping ranges are undefined; staging reads all
   * of src before writing dst. */
  if (direct && !dlb__span_overlap(src, &a.span, dst, &b.span)) {
    c.src_side = a.where;
    c.dst_side = b.where;
    int pageable = (a.gpu == NULL && b.where == DLB__SIDE_DEVICE) ||
                   (b.gpu == NULL && a.where == DLB__SIDE_DEVICE);
    if (pageable && dlb__stage_copy(gpu, device, &c, stream, &s)) return s;
    dlb__saved_error before;
    dlb__error_save(&before);
    s = gpu->copy(device, &c, stream);
    if (s == DLB_OK && wait) s = gpu->stream_sync(device, stream);
    if (s != DLB_E_UNSUPPORTED) return s;
    dlb__error_restore(&before);
  }
  return staged(&a, &b, stream);
}

dlb_status dlb_copy_async(const DLTensor *src, const DLTensor *dst,
                          void *stream) {
  return gpu_copy(src, dst, stream, 0);
}

dlb_status dlb_copy_sync(const DLTensor *src, const DLTensor *dst,
                         void *stream) {
  return gpu_copy(src, dst, stream, 1);
}

dlb_status dlb__device_copy(const DLTensor *src, const DLTensor *dst) {
  return gpu_copy(src, dst, NULL, 1);
}
