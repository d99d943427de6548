/*
 * staging.c -- pageable host <-> device copies in chunks through a pinned
 * double buffer (see staging.h).
 *
 * At most one chunk is in flight. Host to device, the CPU fills one half
 * while the DMA reads the other, then waits for that DMA before queueing
 * the half it just filled; device to host, the DMA fills one half while
 * the CPU empties the other. Waiting on the copy's own stream, the one
 * synchronisation every backend offers, thus waits for exactly the chunk
 * whose half is needed next and never for the one it overlaps.
 */
#include <pthread.h>
#include <string.h>

#include "staging.h"

typedef struct stage_buffer {
  pthread_mutex_t lock;
  char *mem;  /* 2 * DLB__STAGE_CHUNK_MAX pinned bytes, or NULL */
  int device; /* the ordinal it was allocated on, for its free */
} stage_buffer;

/* One per runtime: CUDA, HIP. */
static stage_buffer buffers[2] = {
    {PTHREAD_MUTEX_INITIALIZER, NULL, 0},
    {PTHREAD_MUTEX_INITIALIZER, NULL, 0},
};

static stage_buffer *buffer_of(const dlb__gpu *gpu) {
  return &buffers[gpu->device_type == kDLCUDA ? 0 : 1];
}

size_t dlb__stage_chunk(size_t total) {
  const size_t align = DLB__STAGE_CHUNK_ALIGN;
  size_t quarter = total / 4 + (total % 4 != 0);
  size_t chunk = (quarter + align - 1) / align * align;
  return chunk < DLB__STAGE_CHUNK_MAX ? chunk : DLB__STAGE_CHUNK_MAX;
}

/* A piece of the copy: rows rows of width bytes from byte x of row y of
 * plane z on. */
typedef struct piece {
  size_t z, y, x, rows, width;
} piece;

/* Cuts the copy into pieces of at most chunk bytes, in order: whole rows
 * of one plane when a row fits, else parts of one row. */
typedef struct walk {
  const dlb__pitched *c;
  size_t chunk;
  size_t z, y, x; /* where the next piece starts */
} walk;

static int walk_next(walk *w, piece *p) {
  const dlb__pitched *c = w->c;
  if (w->z == c->depth) return 0;
  p->z = w->z;
  p->y = w->y;
  p->x = w->x;
  if (c->width <= w->chunk) {
    size_t fit = w->chunk / c->width, left = c->height - w->y;
    p->rows = fit < left ? fit : left;
    p->width = c->width;
    w->y += p->rows;
  } else {
    size_t left = c->width - w->x;
    p->rows = 1;
    p->width = left < w->chunk ? left : w->chunk;
    w->x += p->width;
    if (w->x == c->width) {
      w->x = 0;
      w->y++;
    }
  }
  if (w->y == c->height) {
    w->y = 0;
    w->z++;
  }
  return 1;
}

/* Where p starts on a side of c with this base, pitch and plane rows
 * (unused fields of 1-D and 2-D copies meet only zero indices). */
static char *at(const char *base, size_t pitch, size_t plane_rows,
                const piece *p) {
  return (char *)(uintptr_t)base + (p->z * plane_rows + p->y) * pitch + p->x;
}

/* The CPU's part: p's rows between host memory (rows pitch bytes apart)
 * and their compact image in half, on the copy engine's threads. */
static dlb_status host_move(char *half, char *host, size_t pitch,
                            const piece *p, int into_half) {
  int64_t shape[2] = {(int64_t)p->rows, (int64_t)p->width};
  int64_t strides[2] = {(int64_t)(p->rows > 1 ? pitch : p->width), 1};
  DLTensor h, s;
  memset(&h, 0, sizeof h);
  h.data = host;
  h.device.device_type = kDLCPU;
  h.ndim = 2;
  h.dtype.code = kDLUInt;
  h.dtype.bits = 8;
  h.dtype.lanes = 1;
  h.shape = shape;
  h.strides = strides;
  s = h;
  s.data = half;
  s.strides = NULL;
  return into_half ? dlb_copy(&h, &s) : dlb_copy(&s, &h);
}

/* The runtime's part: p between half and the device side of c. */
static dlb_status dma(const dlb__gpu *gpu, int device, const dlb__pitched *c,
                      char *half, const piece *p, void *stream) {
  dlb__pitched k;
  memset(&k, 0, sizeof k);
  k.width = p->width;
  k.height = p->rows;
  k.depth = 1;
  k.src_side = c->src_side;
  k.dst_side = c->dst_side;
  if (c->src_side == DLB__SIDE_HOST) {
    k.src = half;
    k.src_pitch = p->width;
    k.dst = at(c->dst, c->dst_pitch, c->dst_rows, p);
    k.dst_pitch = c->dst_pitch;
  } else {
    k.src = at(c->src, c->src_pitch, c->src_rows, p);
    k.src_pitch = c->src_pitch;
    k.dst = half;
    k.dst_pitch = p->width;
  }
  return gpu->copy(device, &k, stream);
}

static char *half_of(char *mem, size_t k) {
  return mem + (k % 2) * DLB__STAGE_CHUNK_MAX;
}

static dlb_status upload(const dlb__gpu *gpu, int device,
                         const dlb__pitched *c, char *mem, size_t chunk,
                         void *stream) {
  walk w = {c, chunk, 0, 0, 0};
  piece p;
  int busy = 0; /* the previous chunk's DMA may be running */
  dlb_status s = DLB_OK;
  for (size_t k = 0; s == DLB_OK && walk_next(&w, &p); k++) {
    /* This half's last reader, chunk k - 2, was waited for before chunk
     * k - 1 was queued. */
    char *half = half_of(mem, k);
    s = host_move(half, at(c->src, c->src_pitch, c->src_rows, &p),
                  c->src_pitch, &p, 1);
    if (s == DLB_OK && busy) {
      busy = 0;
      s = gpu->stream_sync(device, stream);
    }
    if (s == DLB_OK) {
      s = dma(gpu, device, c, half, &p, stream);
      busy = s == DLB_OK;
    }
  }
  /* Done, or failed with a DMA still reading the buffer: it must end
   * before another copy may fill the buffer. */
  if (busy) {
    dlb_status d = gpu->stream_sync(device, stream);
    if (s == DLB_OK) s = d;
  }
  return s;
}

static dlb_status download(const dlb__gpu *gpu, int device,
                           const dlb__pitched *c, char *mem, size_t chunk,
                           void *stream) {
  walk w = {c, chunk, 0, 0, 0};
  piece cur, next;
  if (!walk_next(&w, &cur)) return DLB_OK;
  dlb_status s = dma(gpu, device, c, half_of(mem, 0), &cur, stream);
  int busy = s == DLB_OK;
  for (size_t k = 0; s == DLB_OK; k++) {
    busy = 0;
    s = gpu->stream_sync(device, stream); /* chunk k is in its half */
    if (s != DLB_OK) break;
    int more = walk_next(&w, &next);
    if (more) {
      s = dma(gpu, device, c, half_of(mem, k + 1), &next, stream);
      busy = s == DLB_OK;
    }
    if (s == DLB_OK)
      s = host_move(half_of(mem, k), at(c->dst, c->dst_pitch, c->dst_rows,
                                        &cur),
                    c->dst_pitch, &cur, 0);
    if (!more) break;
    cur = next;
  }
  if (busy) {
    dlb_status d = gpu->stream_sync(device, stream);
    if (s == DLB_OK) s = d;
  }
  return s;
}

int dlb__stage_copy(const dlb__gpu *gpu, int device, const dlb__pitched *c,
                    void *stream, dlb_status *status) {
  size_t total = c->width * c->height * c->depth;
  if (total < DLB__STAGE_MIN) return 0;
  /* Failing to classify, to have the buffer or to shape a chunk only means
   * the caller copies another way, which leaves the message as it was. */
  dlb__saved_error before;
  dlb__error_save(&before);
  int up = c->src_side == DLB__SIDE_HOST;
  dlb__ptr_kind kind;
  if (gpu->classify(up ? c->src : c->dst, &kind) != DLB_OK ||
      kind.device.device_type != kDLCPU) {
    dlb__error_restore(&before);
    return 0;
  }
  stage_buffer *b = buffer_of(gpu);
  dlb__fork_guard();
  if (pthread_mutex_trylock(&b->lock) != 0) return 0;
  if (b->mem == NULL) {
    void *p = NULL;
    if (gpu->alloc(DLB__SIDE_HOST, device, 2 * DLB__STAGE_CHUNK_MAX, &p) ==
        DLB_OK) {
      b->mem = p;
      b->device = device;
    }
  }
  dlb_status s = DLB_E_UNSUPPORTED;
  if (b->mem != NULL) {
    size_t chunk = dlb__stage_chunk(total);
    s = up ? upload(gpu, device, c, b->mem, chunk, stream)
           : download(gpu, device, c, b->mem, chunk, stream);
  }
  pthread_mutex_unlock(&b->lock);
  if (s == DLB_E_UNSUPPORTED) {
    dlb__error_restore(&before);
    return 0;
  }
  *status = s;
  return 1;
}

void dlb__stage_release(void) {
  const dlb__gpu *gpus[2] = {&dlb__cuda, &dlb__hip};
  for (int i = 0; i < 2; i++) {
    stage_buffer *b = buffer_of(gpus[i]);
    pthread_mutex_lock(&b->lock);
    if (b->mem != NULL) gpus[i]->free(DLB__SIDE_HOST, b->device, b->mem);
    b->mem = NULL;
    pthread_mutex_unlock(&b->lock);
  }
}

void dlb__stage_locks_renew(void) {
  for (int i = 0; i < 2; i++) pthread_mutex_init(&buffers[i].lock, NULL);
}
