/* test_cuda_staging.c -- pageable host <-> device copies through the
 * pinned double buffer: chunk counts, partial last chunks, pitched rows
 * and planes, what goes direct, the cached buffer, failures. Work on a
 * created stream runs only when someone waits for it, so a chunk queued
 * before its half was filled, or a half reused before its DMA ran, shows
 * up as wrong data. */
#include <pthread.h>
#include <sys/wait.h>
#include <unistd.h>

#include "../emu/emu_fns.h"
#include "backend/staging.h"
#include "test.h"

static const DLDataType u32 = {kDLUInt, 32, 1};
static const DLDevice cpu = {kDLCPU, 0};
static const DLDevice cuda0 = {kDLCUDA, 0};

static emu E;
/* Contexts on this thread's stack between copies: the framework's. */
static int framework_depth;

/* The bytes of t's allocation as the host sees them (device memory
 * through the emulator's second mapping). */
static uint32_t *words(const emu *e, const DLManagedTensorVersioned *t) {
  return e->shadow(t->dl_tensor.data);
}

static DLManagedTensorVersioned *alloc_filled(const emu *e, DLDevice d,
                                              int32_t ndim,
                                              const int64_t *shape,
                                              uint32_t seed) {
  DLManagedTensorVersioned *t = NULL;
  CHECK_OK(dlb_tensor_alloc(d, u32, ndim, shape, &t));
  int64_t n = 0;
  CHECK_OK(dlb_tensor_numel(&t->dl_tensor, &n));
  uint32_t *w = words(e, t);
  for (int64_t i = 0; i < n; i++) w[i] = (uint32_t)i * 2654435761u + seed;
  return t;
}

/* A framework's stream on cuda:0: its work is queued until waited for. */
static dlb__cu_stream new_stream(cu_fns *cu) {
  CHECK_OK(dlb_runtime_status(DLB_RUNTIME_CUDA));
  *cu = cu_fns_of(&E);
  cu_as_framework(cu, 0);
  framework_depth = E.context_depth();
  dlb__cu_stream st = NULL;
  CHECK_EQ_INT(cu->cuStreamCreate(&st, DLB__CU_STREAM_NON_BLOCKING), 0);
  return st;
}

/* Call counts before a copy, to compare after it. */
typedef struct counts {
  long memcpy1d, memcpy2d, memcpy3d, sync, host_alloc;
} counts;

static counts count_now(void) {
  counts c = {E.calls("cuMemcpyAsync"), E.calls("cuMemcpy2DAsync_v2"),
              E.calls("cuMemcpy3DAsync_v2"), E.calls("cuStreamSynchronize"),
              E.calls("cuMemHostAlloc")};
  return c;
}

static void check_counts(counts before, long m1, long m2, long sync,
                         long host_alloc) {
  counts now = count_now();
  CHECK_EQ_INT(now.memcpy1d - before.memcpy1d, m1);
  CHECK_EQ_INT(now.memcpy2d - before.memcpy2d, m2);
  CHECK_EQ_INT(now.memcpy3d - before.memcpy3d, 0);
  if (sync >= 0) CHECK_EQ_INT(now.sync - before.sync, sync);
  CHECK_EQ_INT(now.host_alloc - before.host_alloc, host_alloc);
}

static void check_nothing_left(void) {
  CHECK_EQ_INT(E.context_depth(), framework_depth);
  CHECK_EQ_INT(E.pending(), 0);
  CHECK_EQ_INT(dlb_test_failalloc_live(), 0);
}

DLB_TEST(stage_chunk_sizes) {
  CHECK_EQ_INT(dlb__stage_chunk(DLB__STAGE_MIN), 256 << 10);
  CHECK_EQ_INT(dlb__stage_chunk(DLB__STAGE_MIN + 1), 320 << 10);
  CHECK_EQ_INT(dlb__stage_chunk((size_t)20 << 20), 5 << 20);
  CHECK_EQ_INT(dlb__stage_chunk((size_t)32 << 20), DLB__STAGE_CHUNK_MAX);
  CHECK_EQ_INT(dlb__stage_chunk((size_t)1 << 40), DLB__STAGE_CHUNK_MAX);
  for (size_t n = DLB__STAGE_MIN; n < ((size_t)40 << 20); n = n * 3 / 2 + 7) {
    size_t c = dlb__stage_chunk(n);
    CHECK_EQ_INT(c % DLB__STAGE_CHUNK_ALIGN, 0);
    CHECK(c * 4 >= n || c == DLB__STAGE_CHUNK_MAX);
    CHECK(c <= DLB__STAGE_CHUNK_MAX);
  }
}

/* 40 MiB and 4 bytes: five chunks of 8 MiB and one of 4 bytes, each
 * queued once its half is filled, one wait between chunks and one at the
 * end. */
DLB_TEST(staging_upload_in_chunks_with_a_partial_last_one) {
  E = emu_cuda();
  cu_fns cu;
  dlb__cu_stream st = new_stream(&cu);
  int64_t n[1] = {(10 << 20) + 1};
  DLManagedTensorVersioned *h = alloc_filled(&E, cpu, 1, n, 7);
  DLManagedTensorVersioned *d = alloc_filled(&E, cuda0, 1, n, 0);
  dlb_test_failalloc_install(0);
  counts c0 = count_now();
  CHECK_OK(dlb_copy_sync(&h->dl_tensor, &d->dl_tensor, st));
  check_counts(c0, 6, 0, 6, 1);
  check_nothing_left();
  dlb_test_failalloc_remove();
  CHECK(memcmp(words(&E, d), words(&E, h), (size_t)n[0] * 4) == 0);
  /* The buffer stays for the next copy: pinned host memory, one block. */
  CHECK_EQ_INT(E.live_kind(EMU_LIVE_HOST), 1);
  dlb__stage_release();
  CHECK_EQ_INT(E.live_kind(EMU_LIVE_HOST), 0);
  dlb_tensor_release(h);
  dlb_tensor_release(d);
  CHECK_EQ_INT(cu.cuStreamDestroy_v2(st), 0);
  CHECK_EQ_INT(E.live(), 0);
}

DLB_TEST(staging_download_in_chunks_with_a_partial_last_one) {
  E = emu_cuda();
  cu_fns cu;
  dlb__cu_stream st = new_stream(&cu);
  int64_t n[1] = {(10 << 20) + 1};
  DLManagedTensorVersioned *d = alloc_filled(&E, cuda0, 1, n, 3);
  DLManagedTensorVersioned *h = alloc_filled(&E, cpu, 1, n, 0);
  dlb_test_failalloc_install(0);
  counts c0 = count_now();
  CHECK_OK(dlb_copy_sync(&d->dl_tensor, &h->dl_tensor, st));
  check_counts(c0, 6, 0, 6, 1);
  check_nothing_left();
  dlb_test_failalloc_remove();
  CHECK(memcmp(words(&E, h), words(&E, d), (size_t)n[0] * 4) == 0);
  dlb__stage_release();
  dlb_tensor_release(h);
  dlb_tensor_release(d);
  CHECK_EQ_INT(cu.cuStreamDestroy_v2(st), 0);
  CHECK_EQ_INT(E.live(), 0);
}

/* Copies the host view hv to d (up) or d to hv in four chunks, m1 of them
 * 1-D and m2 2-D copies. The download runs first and allocates the pinned
 * buffer that the upload then reuses. */
static void staged_copy(int up, DLManagedTensorVersioned *hv,
                        DLManagedTensorVersioned *d, dlb__cu_stream st,
                        long m1, long m2) {
  counts c0 = count_now();
  if (up)
    CHECK_OK(dlb_copy_sync(&hv->dl_tensor, &d->dl_tensor, st));
  else
    CHECK_OK(dlb_copy_sync(&d->dl_tensor, &hv->dl_tensor, st));
  check_counts(c0, m1, m2, 4, up ? 0 : 1);
  check_nothing_left();
}

/* Columns [0, 1000) of a 2048 x 1024 host matrix: rows of 4000 bytes,
 * 4096 apart, against a compact device matrix. 2 MiB chunks hold 524
 * rows: four 2-D copies, the last of 476 rows. Downloads leave the host
 * bytes between the rows alone. */
DLB_TEST(staging_pitched_rows) {
  E = emu_cuda();
  cu_fns cu;
  dlb__cu_stream st = new_stream(&cu);
  int64_t full[2] = {2048, 1024}, part[2] = {2048, 1000};
  dlb_slice cols[2] = {{0, 2048, 1}, {0, 1000, 1}};
  for (int up = 0; up <= 1; up++) {
    DLManagedTensorVersioned *hb = alloc_filled(&E, cpu, 2, full, 11);
    DLManagedTensorVersioned *d = alloc_filled(&E, cuda0, 2, part, 5);
    DLManagedTensorVersioned *hv = NULL;
    CHECK_OK(dlb_tensor_slice(hb, 2, cols, &hv));
    uint32_t *hw = words(&E, hb), *dw = words(&E, d);
    uint32_t before = hw[1000];
    staged_copy(up, hv, d, st, 0, 4);
    for (int64_t r = 0; r < 2048; r++)
      if (memcmp(hw + r * 1024, dw + r * 1000, 4000) != 0)
        dlb_test_failed(__FILE__, __LINE__, "row %lld differs", (long long)r);
    CHECK_EQ_INT(hw[1000], before); /* between rows 0 and 1 */
    CHECK_EQ_INT(hw[2048 * 1024 - 1], (uint32_t)(2048 * 1024 - 1) *
                                          2654435761u + 11);
    dlb_tensor_release(hv);
    dlb_tensor_release(hb);
    dlb_tensor_release(d);
  }
  dlb__stage_release();
  CHECK_EQ_INT(cu.cuStreamDestroy_v2(st), 0);
  CHECK_EQ_INT(E.live(), 0);
}

/* [:, :500, :1000] of a 4 x 600 x 1024 host tensor: a 3-D copy staged
 * as one 2-D copy per plane (a plane's 500 rows fit a chunk of 507). */
DLB_TEST(staging_pitched_planes) {
  E = emu_cuda();
  cu_fns cu;
  dlb__cu_stream st = new_stream(&cu);
  int64_t full[3] = {4, 600, 1024}, part[3] = {4, 500, 1000};
  dlb_slice box[3] = {{0, 4, 1}, {0, 500, 1}, {0, 1000, 1}};
  for (int up = 0; up <= 1; up++) {
    DLManagedTensorVersioned *hb = alloc_filled(&E, cpu, 3, full, 1);
    DLManagedTensorVersioned *d = alloc_filled(&E, cuda0, 3, part, 2);
    DLManagedTensorVersioned *hv = NULL;
    CHECK_OK(dlb_tensor_slice(hb, 3, box, &hv));
    uint32_t *hw = words(&E, hb), *dw = words(&E, d);
    staged_copy(up, hv, d, st, 0, 4);
    for (int64_t z = 0; z < 4; z++)
      for (int64_t r = 0; r < 500; r++)
        if (memcmp(hw + (z * 600 + r) * 1024, dw + (z * 500 + r) * 1000,
                   4000) != 0)
          dlb_test_failed(__FILE__, __LINE__, "plane %lld row %lld differs",
                          (long long)z, (long long)r);
    /* Host rows past the view's 500 in plane 0 are untouched. */
    CHECK_EQ_INT(hw[500 * 1024], (uint32_t)(500 * 1024) * 2654435761u + 1);
    dlb_tensor_release(hv);
    dlb_tensor_release(hb);
    dlb_tensor_release(d);
  }
  dlb__stage_release();
  CHECK_EQ_INT(cu.cuStreamDestroy_v2(st), 0);
  CHECK_EQ_INT(E.live(), 0);
}

/* Rows of 3000 bytes, 3200 apart, 36 MB of them: 8 MiB chunks of 2796
 * whole rows (8,388,000 bytes), five of them. A chunk never runs past its
 * half, into the other half that the previous chunk's DMA is yet to read,
 * or past the buffer. */
DLB_TEST(staging_whole_rows_stay_in_their_half) {
  E = emu_cuda();
  cu_fns cu;
  dlb__cu_stream st = new_stream(&cu);
  int64_t full[2] = {12000, 800}, part[2] = {12000, 750};
  dlb_slice cols[2] = {{0, 12000, 1}, {0, 750, 1}};
  for (int up = 0; up <= 1; up++) {
    DLManagedTensorVersioned *hb = alloc_filled(&E, cpu, 2, full, 3);
    DLManagedTensorVersioned *d = alloc_filled(&E, cuda0, 2, part, 9);
    DLManagedTensorVersioned *hv = NULL;
    CHECK_OK(dlb_tensor_slice(hb, 2, cols, &hv));
    uint32_t *hw = words(&E, hb), *dw = words(&E, d);
    counts c0 = count_now();
    if (up)
      CHECK_OK(dlb_copy_sync(&hv->dl_tensor, &d->dl_tensor, st));
    else
      CHECK_OK(dlb_copy_sync(&d->dl_tensor, &hv->dl_tensor, st));
    check_counts(c0, 0, 5, 5, up ? 0 : 1);
    check_nothing_left();
    for (int64_t r = 0; r < 12000; r++)
      if (memcmp(hw + r * 800, dw + r * 750, 3000) != 0)
        dlb_test_failed(__FILE__, __LINE__, "row %lld differs", (long long)r);
    dlb_tensor_release(hv);
    dlb_tensor_release(hb);
    dlb_tensor_release(d);
  }
  dlb__stage_release();
  CHECK_EQ_INT(cu.cuStreamDestroy_v2(st), 0);
  CHECK_EQ_INT(E.live(), 0);
}

/* The buffer is freed in the context of the GPU it was allocated on: a
 * process that used only cuda:1 is given no context on cuda:0. */
DLB_TEST(staging_buffer_freed_on_its_own_gpu) {
  E = emu_cuda();
  int64_t n[1] = {1 << 20};
  DLManagedTensorVersioned *h = alloc_filled(&E, cpu, 1, n, 1);
  DLManagedTensorVersioned *d =
      alloc_filled(&E, (DLDevice){kDLCUDA, 1}, 1, n, 2);
  counts c0 = count_now();
  CHECK_OK(dlb_copy_sync(&h->dl_tensor, &d->dl_tensor, NULL));
  check_counts(c0, 4, 0, -1, 1);
  CHECK(memcmp(words(&E, d), words(&E, h), (size_t)n[0] * 4) == 0);
  CHECK_EQ_INT(E.live_kind(EMU_LIVE_HOST), 1);
  dlb__stage_release();
  CHECK_EQ_INT(E.live_kind(EMU_LIVE_HOST), 0);
  CHECK_EQ_INT(E.calls("cuDevicePrimaryCtxRetain"), 1);
  CHECK_EQ_INT(E.context_depth(), 0);
  dlb_tensor_release(h);
  dlb_tensor_release(d);
  CHECK_EQ_INT(E.live(), 0);
}

/* Two rows of 6,000,000 bytes, 6,400,000 apart: chunks of 3,014,656
 * bytes take each row in two 1-D pieces, the second a partial one. */
DLB_TEST(staging_rows_wider_than_a_chunk) {
  E = emu_cuda();
  cu_fns cu;
  dlb__cu_stream st = new_stream(&cu);
  int64_t full[2] = {2, 1600000}, part[2] = {2, 1500000};
  dlb_slice cols[2] = {{0, 2, 1}, {0, 1500000, 1}};
  for (int up = 0; up <= 1; up++) {
    DLManagedTensorVersioned *hb = alloc_filled(&E, cpu, 2, full, 9);
    DLManagedTensorVersioned *d = alloc_filled(&E, cuda0, 2, part, 4);
    DLManagedTensorVersioned *hv = NULL;
    CHECK_OK(dlb_tensor_slice(hb, 2, cols, &hv));
    uint32_t *hw = words(&E, hb), *dw = words(&E, d);
    uint32_t gap = hw[1500000];
    staged_copy(up, hv, d, st, 4, 0);
    CHECK(memcmp(hw, dw, 6000000) == 0);
    CHECK(memcmp(hw + 1600000, dw + 1500000, 6000000) == 0);
    CHECK_EQ_INT(hw[1500000], gap);
    dlb_tensor_release(hv);
    dlb_tensor_release(hb);
    dlb_tensor_release(d);
  }
  dlb__stage_release();
  CHECK_EQ_INT(cu.cuStreamDestroy_v2(st), 0);
  CHECK_EQ_INT(E.live(), 0);
}

/* A tensor labelled cpu whose memory came from base, for memory the
 * runtime knows although the label does not say so. */
static DLTensor as_cpu(const DLManagedTensorVersioned *base) {
  DLTensor t = base->dl_tensor;
  t.device = cpu;
  return t;
}

/* One plain driver copy, no staging buffer: below DLB__STAGE_MIN, and
 * host memory the DMA reads in place (pinned, registered or managed, even
 * labelled cpu). From DLB__STAGE_MIN on, pageable memory stages in four
 * chunks. */
DLB_TEST(staging_only_for_large_pageable_memory) {
  E = emu_cuda();
  int64_t small[1] = {(1 << 18) - 1}, big[1] = {1 << 18};
  DLManagedTensorVersioned *d = alloc_filled(&E, cuda0, 1, big, 0);
  DLTensor dsmall = d->dl_tensor;
  dsmall.shape = small;
  DLManagedTensorVersioned *h = alloc_filled(&E, cpu, 1, big, 1);
  DLTensor hsmall = h->dl_tensor;
  hsmall.shape = small;
  counts c0 = count_now();
  CHECK_OK(dlb_copy_sync(&hsmall, &dsmall, NULL));
  CHECK_OK(dlb_copy_sync(&dsmall, &hsmall, NULL));
  check_counts(c0, 2, 0, -1, 0);
  DLManagedTensorVersioned *pinned = alloc_filled(&E, (DLDevice){kDLCUDAHost, 0},
                                                  1, big, 2);
  DLManagedTensorVersioned *managed =
      alloc_filled(&E, (DLDevice){kDLCUDAManaged, 0}, 1, big, 3);
  DLManagedTensorVersioned *reg = NULL;
  CHECK_OK(dlb_tensor_pin(h, kDLCUDAHost, &reg));
  const DLManagedTensorVersioned *in_place[3] = {pinned, managed, reg};
  for (int i = 0; i < 3; i++) {
    DLTensor t = as_cpu(in_place[i]);
    c0 = count_now();
    CHECK_OK(dlb_copy_sync(&t, &d->dl_tensor, NULL));
    check_counts(c0, 1, 0, -1, 0);
    CHECK(memcmp(words(&E, d), words(&E, in_place[i]), 1 << 20) == 0);
    CHECK_OK(dlb_copy_sync(&d->dl_tensor, &t, NULL));
    check_counts(c0, 2, 0, -1, 0);
  }
  /* Labelled as what they are, pinned and device memory never stage. */
  c0 = count_now();
  CHECK_OK(dlb_copy_sync(&pinned->dl_tensor, &d->dl_tensor, NULL));
  check_counts(c0, 1, 0, -1, 0);
  dlb_tensor_release(reg);
  /* Pageable memory to or from pinned memory is one runtime copy: no
   * device memory is involved, so no staging. */
  c0 = count_now();
  CHECK_OK(dlb_copy_sync(&h->dl_tensor, &pinned->dl_tensor, NULL));
  CHECK_OK(dlb_copy_sync(&pinned->dl_tensor, &h->dl_tensor, NULL));
  check_counts(c0, 2, 0, -1, 0);
  CHECK(memcmp(words(&E, pinned), words(&E, h), 1 << 20) == 0);
  c0 = count_now();
  CHECK_OK(dlb_copy_sync(&h->dl_tensor, &d->dl_tensor, NULL));
  check_counts(c0, 4, 0, -1, 1);
  CHECK(memcmp(words(&E, d), words(&E, h), 1 << 20) == 0);
  dlb_tensor_release(pinned);
  dlb_tensor_release(managed);
  dlb_tensor_release(h);
  dlb_tensor_release(d);
  dlb__stage_release();
  CHECK_EQ_INT(E.live(), 0);
}

DLB_TEST(staging_buffer_is_allocated_once) {
  E = emu_cuda();
  int64_t n[1] = {3 << 20};
  DLManagedTensorVersioned *h = alloc_filled(&E, cpu, 1, n, 1);
  DLManagedTensorVersioned *d = alloc_filled(&E, cuda0, 1, n, 2);
  DLManagedTensorVersioned *back = alloc_filled(&E, cpu, 1, n, 3);
  counts c0 = count_now();
  for (int i = 0; i < 3; i++) {
    CHECK_OK(dlb_copy_sync(&h->dl_tensor, &d->dl_tensor, NULL));
    CHECK_OK(dlb_copy_sync(&d->dl_tensor, &back->dl_tensor, NULL));
  }
  check_counts(c0, 24, 0, -1, 1);
  CHECK(memcmp(words(&E, back), words(&E, h), (size_t)n[0] * 4) == 0);
  CHECK_EQ_INT(E.live_kind(EMU_LIVE_HOST), 1);
  dlb__stage_release();
  CHECK_EQ_INT(E.live_kind(EMU_LIVE_HOST), 0);
  /* Released, it is allocated again when next needed. */
  CHECK_OK(dlb_copy_sync(&h->dl_tensor, &d->dl_tensor, NULL));
  check_counts(c0, 28, 0, -1, 2);
  dlb__stage_release();
  dlb_tensor_release(h);
  dlb_tensor_release(d);
  dlb_tensor_release(back);
  CHECK_EQ_INT(E.live(), 0);
}

/* Without pinned memory for the buffer, the runtime gets the pageable
 * memory as it is; the next copy tries again. */
DLB_TEST(staging_pinned_allocation_fails_goes_direct) {
  E = emu_cuda();
  int64_t n[1] = {2 << 20};
  DLManagedTensorVersioned *h = alloc_filled(&E, cpu, 1, n, 1);
  DLManagedTensorVersioned *d = alloc_filled(&E, cuda0, 1, n, 2);
  for (int up = 0; up <= 1; up++) {
    dlb_test_failalloc_install(0);
    E.fail("cuMemHostAlloc", 1, 2 /* OUT_OF_MEMORY */);
    counts c0 = count_now();
    if (up)
      CHECK_OK(dlb_copy_sync(&h->dl_tensor, &d->dl_tensor, NULL));
    else
      CHECK_OK(dlb_copy_sync(&d->dl_tensor, &h->dl_tensor, NULL));
    CHECK(E.fail_fired());
    check_counts(c0, 1, 0, -1, 1);
    check_nothing_left();
    dlb_test_failalloc_remove();
    CHECK_EQ_INT(E.live_kind(EMU_LIVE_HOST), 0);
  }
  CHECK(memcmp(words(&E, d), words(&E, h), (size_t)n[0] * 4) == 0);
  counts c0 = count_now();
  CHECK_OK(dlb_copy_sync(&h->dl_tensor, &d->dl_tensor, NULL));
  check_counts(c0, 4, 0, -1, 1);
  dlb__stage_release();
  dlb_tensor_release(h);
  dlb_tensor_release(d);
  CHECK_EQ_INT(E.live(), 0);
}

/* A failure after some chunks: the runtime's status and message, no DMA
 * left running, nothing leaked; the buffer serves the next copy. */
DLB_TEST(staging_fails_midway) {
  E = emu_cuda();
  cu_fns cu;
  dlb__cu_stream st = new_stream(&cu);
  int64_t n[1] = {(10 << 20) + 1};
  DLManagedTensorVersioned *h = alloc_filled(&E, cpu, 1, n, 1);
  DLManagedTensorVersioned *d = alloc_filled(&E, cuda0, 1, n, 2);
  static const struct {
    int up;
    const char *call;
    int nth;
    long copies; /* cuMemcpyAsync calls made */
  } cases[] = {{1, "cuMemcpyAsync", 3, 3},
               {1, "cuStreamSynchronize", 4, 4},
               {1, "cuStreamSynchronize", 6, 6}, /* the wait at the end */
               {0, "cuMemcpyAsync", 4, 4},
               {0, "cuStreamSynchronize", 2, 2}};
  for (int i = 0; i < 5; i++) {
    dlb_test_failalloc_install(0);
    E.fail(cases[i].call, cases[i].nth, 700);
    counts c0 = count_now();
    if (cases[i].up)
      CHECK_STATUS(dlb_copy_sync(&h->dl_tensor, &d->dl_tensor, st),
                   DLB_E_RUNTIME);
    else
      CHECK_STATUS(dlb_copy_sync(&d->dl_tensor, &h->dl_tensor, st),
                   DLB_E_RUNTIME);
    CHECK_ERROR_MENTIONS(cases[i].call);
    CHECK_ERROR_MENTIONS("CUDA_ERROR_ILLEGAL_ADDRESS");
    CHECK_EQ_INT(E.calls("cuMemcpyAsync") - c0.memcpy1d, cases[i].copies);
    CHECK_EQ_INT(E.context_depth(), framework_depth);
    CHECK_EQ_INT(dlb_test_failalloc_live(), 0);
    dlb_test_failalloc_remove();
    /* A failed wait leaves its chunk queued, as a driver whose context
     * broke would: drain the stream before the memory goes. */
    CHECK_EQ_INT(cu.cuStreamSynchronize(st), 0);
    CHECK_EQ_INT(E.live_kind(EMU_LIVE_HOST), 1);
  }
  uint32_t *hw = words(&E, h);
  for (int64_t i = 0; i < n[0]; i++) hw[i] = (uint32_t)i ^ 0x5a5a5a5au;
  counts c0 = count_now();
  CHECK_OK(dlb_copy_sync(&h->dl_tensor, &d->dl_tensor, st));
  check_counts(c0, 6, 0, 6, 0);
  CHECK(memcmp(words(&E, d), hw, (size_t)n[0] * 4) == 0);
  dlb__stage_release();
  dlb_tensor_release(h);
  dlb_tensor_release(d);
  CHECK_EQ_INT(cu.cuStreamDestroy_v2(st), 0);
  CHECK_EQ_INT(E.live(), 0);
}

/* Every driver call of a staged copy failing in turn: an error or, where
 * the failure only cost the buffer, a good copy; never a leak or a
 * context left pushed. */
DLB_TEST(staging_every_driver_call_failing) {
  E = emu_cuda();
  cu_fns cu;
  dlb__cu_stream st = new_stream(&cu);
  int64_t n[1] = {(3 << 20) + 5};
  for (int up = 0; up <= 1; up++) {
    DLManagedTensorVersioned *h = alloc_filled(&E, cpu, 1, n, 1);
    DLManagedTensorVersioned *d = alloc_filled(&E, cuda0, 1, n, 2);
    const DLTensor *src = up ? &h->dl_tensor : &d->dl_tensor;
    const DLTensor *dst = up ? &d->dl_tensor : &h->dl_tensor;
    int failures = 0, n_ok = 0;
    for (int k = 1; k < 200; k++) {
      dlb__stage_release();
      memset(words(&E, up ? d : h), 0, (size_t)n[0] * 4);
      E.fail(NULL, k, 999);
      dlb_test_failalloc_install(0);
      dlb_status s = dlb_copy_sync(src, dst, st);
      int fired = E.fail_fired();
      CHECK_EQ_INT(dlb_test_failalloc_live(), 0);
      dlb_test_failalloc_remove();
      CHECK_EQ_INT(E.context_depth(), framework_depth);
      E.fail(NULL, 0, 0);
      CHECK_EQ_INT(cu.cuStreamSynchronize(st), 0);
      if (s == DLB_OK) {
        n_ok++;
        CHECK(memcmp(words(&E, d), words(&E, h), (size_t)n[0] * 4) == 0);
      } else {
        failures++;
      }
      if (!fired) {
        CHECK_OK(s);
        break;
      }
    }
    CHECK(failures >= 4);
    CHECK(n_ok >= 2); /* the failed buffer allocation, and the clean run */
    dlb_tensor_release(h);
    dlb_tensor_release(d);
  }
  dlb__stage_release();
  CHECK_EQ_INT(cu.cuStreamDestroy_v2(st), 0);
  CHECK_EQ_INT(E.live(), 0);
}

/* dlb_copy_async of pageable memory returns with the copy done: the
 * buffer is free again for the next caller. */
DLB_TEST(staging_async_copy_is_done_on_return) {
  E = emu_cuda();
  cu_fns cu;
  dlb__cu_stream st = new_stream(&cu);
  int64_t n[1] = {1 << 20};
  DLManagedTensorVersioned *h = alloc_filled(&E, cpu, 1, n, 1);
  DLManagedTensorVersioned *d = alloc_filled(&E, cuda0, 1, n, 2);
  CHECK_OK(dlb_copy_async(&h->dl_tensor, &d->dl_tensor, st));
  CHECK_EQ_INT(E.pending(), 0);
  CHECK(memcmp(words(&E, d), words(&E, h), (size_t)n[0] * 4) == 0);
  /* A small one is only queued. */
  int64_t few[1] = {16};
  DLTensor hs = h->dl_tensor, ds = d->dl_tensor;
  hs.shape = ds.shape = few;
  CHECK_OK(dlb_copy_async(&hs, &ds, st));
  CHECK_EQ_INT(E.pending(), 1);
  CHECK_EQ_INT(cu.cuStreamSynchronize(st), 0);
  dlb__stage_release();
  dlb_tensor_release(h);
  dlb_tensor_release(d);
  CHECK_EQ_INT(cu.cuStreamDestroy_v2(st), 0);
  CHECK_EQ_INT(E.live(), 0);
}

typedef struct worker {
  DLManagedTensorVersioned *h, *d, *back;
  int ok;
} worker;

static void *copy_back_and_forth(void *arg) {
  worker *w = arg;
  w->ok = 1;
  for (int i = 0; i < 4; i++) {
    if (dlb_copy_sync(&w->h->dl_tensor, &w->d->dl_tensor, NULL) != DLB_OK ||
        dlb_copy_sync(&w->d->dl_tensor, &w->back->dl_tensor, NULL) !=
            DLB_OK ||
        memcmp(w->back->dl_tensor.data, w->h->dl_tensor.data, 8 << 20) != 0)
      w->ok = 0;
    memset(w->back->dl_tensor.data, 0, 8 << 20);
  }
  return NULL;
}

/* Two threads at once: one has the buffer, the other goes direct; each
 * gets its own data back. */
DLB_TEST(staging_two_threads_at_once) {
  E = emu_cuda();
  int64_t n[1] = {2 << 20};
  worker w[2];
  pthread_t th[2];
  for (int i = 0; i < 2; i++) {
    w[i].h = alloc_filled(&E, cpu, 1, n, (uint32_t)(100 + i));
    w[i].d = alloc_filled(&E, (DLDevice){kDLCUDA, i}, 1, n, 0);
    w[i].back = alloc_filled(&E, cpu, 1, n, 0);
  }
  for (int i = 0; i < 2; i++)
    CHECK_EQ_INT(pthread_create(&th[i], NULL, copy_back_and_forth, &w[i]), 0);
  for (int i = 0; i < 2; i++) CHECK_EQ_INT(pthread_join(th[i], NULL), 0);
  for (int i = 0; i < 2; i++) {
    CHECK(w[i].ok);
    dlb_tensor_release(w[i].h);
    dlb_tensor_release(w[i].d);
    dlb_tensor_release(w[i].back);
  }
  CHECK(E.calls("cuMemHostAlloc") == 1);
  dlb__stage_release();
  CHECK_EQ_INT(E.live(), 0);
}

static void *upload_in_thread(void *arg) {
  worker *w = arg;
  w->ok = dlb_copy_sync(&w->h->dl_tensor, &w->d->dl_tensor, NULL) == DLB_OK;
  return NULL;
}

/* A thread forks while another stages a copy, holding the buffer's lock
 * across slow DMAs: the child makes the lock anew and stages its own copy
 * through the buffer rather than finding it taken for good. */
DLB_TEST(staging_in_a_child_forked_during_a_staged_copy) {
  setenv("EMU_CUDA_SLOW", "cuMemcpyAsync", 1);
  setenv("EMU_CUDA_SLOW_MS", "200", 1);
  E = emu_cuda();
  CHECK_OK(dlb_runtime_status(DLB_RUNTIME_CUDA));
  int64_t n[1] = {1 << 20}; /* 4 MiB: four chunks of 1 MiB */
  worker w = {alloc_filled(&E, cpu, 1, n, 5), alloc_filled(&E, cuda0, 1, n, 0),
              NULL, 0};
  DLManagedTensorVersioned *h = alloc_filled(&E, cpu, 1, n, 9);
  const long copies = E.calls("cuMemcpyAsync");
  pthread_t th;
  CHECK_EQ_INT(pthread_create(&th, NULL, upload_in_thread, &w), 0);
  /* The buffer is allocated under the lock, which the copy then keeps
   * through its DMAs: once the first has started, the buffer is there
   * (fork in its allocation call, and the child would have none). */
  while (E.calls("cuMemcpyAsync") == copies) usleep(1000);
  pid_t pid = fork();
  CHECK(pid >= 0);
  if (pid == 0) {
    alarm(20);
    DLManagedTensorVersioned *d = alloc_filled(&E, cuda0, 1, n, 0);
    counts c0 = count_now();
    int ok = dlb_copy_sync(&h->dl_tensor, &d->dl_tensor, NULL) == DLB_OK &&
             memcmp(words(&E, d), words(&E, h), (size_t)n[0] * 4) == 0 &&
             E.calls("cuMemcpyAsync") - c0.memcpy1d == 4 &&
             E.calls("cuMemHostAlloc") == c0.host_alloc;
    /* The copy in flight holds no block of its own: all can go. */
    dlb_tensor_release(d);
    dlb_tensor_release(h);
    dlb_tensor_release(w.h);
    dlb_tensor_release(w.d);
    dlb__stage_release();
    _exit(ok ? 0 : 1);
  }
  int st = 0;
  CHECK(waitpid(pid, &st, 0) == pid);
  CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0);
  CHECK_EQ_INT(pthread_join(th, NULL), 0);
  CHECK(w.ok);
  CHECK(memcmp(words(&E, w.d), words(&E, w.h), (size_t)n[0] * 4) == 0);
  dlb__stage_release();
  dlb_tensor_release(w.h);
  dlb_tensor_release(w.d);
  dlb_tensor_release(h);
  CHECK_EQ_INT(E.live(), 0);
}

/* The same staging through the HIP runtime's table. */
DLB_TEST(hip_staging_in_chunks) {
  emu H = emu_hip();
  int64_t n[1] = {1 << 20};
  DLDevice rocm0 = {kDLROCM, 0};
  DLManagedTensorVersioned *h = alloc_filled(&H, cpu, 1, n, 1);
  DLManagedTensorVersioned *d = alloc_filled(&H, rocm0, 1, n, 2);
  DLManagedTensorVersioned *back = alloc_filled(&H, cpu, 1, n, 3);
  long copies = H.calls("hipMemcpyAsync");
  CHECK_OK(dlb_copy_sync(&h->dl_tensor, &d->dl_tensor, NULL));
  CHECK_OK(dlb_copy_sync(&d->dl_tensor, &back->dl_tensor, NULL));
  CHECK_EQ_INT(H.calls("hipMemcpyAsync") - copies, 8);
  CHECK_EQ_INT(H.calls("hipHostMalloc"), 1);
  CHECK(memcmp(words(&H, back), words(&H, h), (size_t)n[0] * 4) == 0);
  CHECK_EQ_INT(H.live_kind(EMU_LIVE_HOST), 1);
  dlb__stage_release();
  dlb_tensor_release(h);
  dlb_tensor_release(d);
  dlb_tensor_release(back);
  CHECK_EQ_INT(H.live(), 0);
}
