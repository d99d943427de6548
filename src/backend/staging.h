/*
 * staging.h -- copies between pageable host memory and device memory
 * through a pinned buffer, in chunks, so that the CPU's copy of one chunk
 * overlaps the DMA of the next (device to host) or of the previous one
 * (host to device). Not installed.
 *
 * The buffer holds two chunks of at most DLB__STAGE_CHUNK_MAX bytes. Each
 * runtime has one per process, allocated pinned (portable) at the first
 * copy that stages and kept until the process exits, because pinning costs
 * about as much as moving the same bytes: a buffer per call would eat the
 * gain. A copy that finds it in use by another thread, or cannot have it,
 * hands the pageable memory to the runtime as it is.
 */
#ifndef DLB_BACKEND_STAGING_H
#define DLB_BACKEND_STAGING_H

#include "backend.h"

/* Smaller copies go to the runtime directly: with chunks of a quarter of
 * the copy, the per-chunk waits would cost more than the overlap saves. */
#define DLB__STAGE_MIN ((size_t)1 << 20)
/* The most bytes one chunk moves; the buffer holds two. */
#define DLB__STAGE_CHUNK_MAX ((size_t)8 << 20)
/* Chunk sizes are multiples of this. */
#define DLB__STAGE_CHUNK_ALIGN ((size_t)64 << 10)

/* The chunk size for a copy of total bytes (at least DLB__STAGE_MIN):
 * a quarter of it rounded up to DLB__STAGE_CHUNK_ALIGN, so that even the
 * smallest staged copy has four chunks to overlap, at most
 * DLB__STAGE_CHUNK_MAX. */
size_t dlb__stage_chunk(size_t total);

/*
 * Tries to do c through gpu's staging buffer, on stream, waiting for the
 * result: c is a copy between host memory labelled cpu and device memory
 * of device (the side fields say which is which). Returns 0, having done
 * nothing that matters, when staging does not apply: fewer than
 * DLB__STAGE_MIN bytes, host memory the runtime knows as pinned or
 * managed (its DMA reads it in place), the buffer busy or not to be had,
 * or a chunk shape the runtime refuses (DLB_E_UNSUPPORTED; the caller's
 * own copy then finds the same and stages through the CPU engine).
 * Otherwise returns 1 with the copy's status in *status; on failure the
 * destination is left partly written and the buffer stays cached.
 */
int dlb__stage_copy(const dlb__gpu *gpu, int device, const dlb__pitched *c,
                    void *stream, dlb_status *status);

/* Frees the cached buffers of every runtime. For tests, which count what
 * the runtime has alive; no copy may run meanwhile. */
void dlb__stage_release(void);

#endif /* DLB_BACKEND_STAGING_H */
