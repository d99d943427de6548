/* test_cuda_copy.c -- copies between every pair of kinds, any strides:
 * one pitched driver copy where the layout allows it, staging otherwise;
 * streams, limits, failures with nothing leaked. */
#include "../emu/emu_fns.h"
#include "test.h"

static const DLDataType f32 = {kDLFloat, 32, 1};

static const DLDevice kinds[] = {{kDLCPU, 0},
                                 {kDLCUDA, 0},
                                 {kDLCUDA, 1},
                                 {kDLCUDAHost, 0},
                                 {kDLCUDAManaged, 0}};
#define NKINDS 5

static emu E;

/* The element at row-major index i of t, through the emulator's view
 * (device memory cannot be read directly). */
static float *elem(const DLTensor *t, int64_t i) {
  int64_t off = 0, rest = i;
  int64_t compact[DLB_MAX_NDIM];
  CHECK_OK(dlb_compact_strides(t->ndim, t->shape, 0, compact));
  for (int32_t d = 0; d < t->ndim; d++) {
    int64_t k = rest / compact[d];
    rest %= compact[d];
    off += k * (t->strides != NULL ? t->strides[d] : compact[d]);
  }
  return E.shadow((char *)t->data + t->byte_offset +
                  off * (int64_t)sizeof(float));
}

static int64_t numel(const DLTensor *t) {
  int64_t n = 0;
  CHECK_OK(dlb_tensor_numel(t, &n));
  return n;
}

static void fill(const DLTensor *t, float base) {
  for (int64_t i = 0, n = numel(t); i < n; i++) *elem(t, i) = base + (float)i;
}

static void check_same(const DLTensor *a, const DLTensor *b) {
  for (int64_t i = 0, n = numel(a); i < n; i++)
    if (*elem(a, i) != *elem(b, i))
      dlb_test_failed(__FILE__, __LINE__, "element %lld: %g != %g",
                      (long long)i, (double)*elem(a, i), (double)*elem(b, i));
}

static DLManagedTensorVersioned *alloc_on(DLDevice d, int32_t ndim,
                                          const int64_t *shape, float base) {
  DLManagedTensorVersioned *t = NULL;
  CHECK_OK(dlb_tensor_alloc(d, f32, ndim, shape, &t));
  fill(&t->dl_tensor, base);
  return t;
}

/* Views of a 3 x 8 x 10 base, one per way the planner may go. */
enum { CONTIGUOUS, ROWS_2D, PLANES_3D, TRANSPOSED, REVERSED, COMPACT_2D,
       COMPACT_3D, BROADCAST, LAYOUTS };
static const char *const layout_names[] = {
    "contiguous", "2-D",     "3-D",         "transposed",
    "reversed",   "compact 4 x 5", "compact 3 x 4 x 5", "broadcast"};

/* A view of base in the given layout, of shape 3 x 4 x 5 or 4 x 5. */
static DLManagedTensorVersioned *view(DLManagedTensorVersioned *base,
                                      int layout) {
  DLManagedTensorVersioned *v = NULL, *w = NULL;
  dlb_slice s3[3] = {{0, 3, 1}, {0, 4, 1}, {0, 5, 1}};
  switch (layout) {
    case CONTIGUOUS: {
      int64_t shape[3] = {3, 4, 20};
      dlb_slice all[1] = {{0, 3, 1}};
      CHECK_OK(dlb_tensor_slice(base, 1, all, &v));
      CHECK_OK(dlb_tensor_reshape(v, 3, shape, &w));
      break;
    }
    case ROWS_2D: /* rows of 5 of 10: one pitched 2-D copy */
      CHECK_OK(dlb_tensor_select(base, 0, 1, &v));
      CHECK_OK(dlb_tensor_slice(v, 2, s3 + 1, &w));
      break;
    case PLANES_3D:
      CHECK_OK(dlb_tensor_slice(base, 3, s3, &w));
      break;
    case TRANSPOSED: {
      int32_t axes[3] = {0, 2, 1};
      dlb_slice s[3] = {{0, 3, 1}, {0, 5, 1}, {0, 4, 1}};
      CHECK_OK(dlb_tensor_slice(base, 3, s, &v));
      CHECK_OK(dlb_tensor_permute(v, axes, &w));
      break;
    }
    case REVERSED: {
      dlb_slice s[3] = {{2, DLB_SLICE_DEFAULT, -1}, {0, 4, 1}, {9, 4, -1}};
      CHECK_OK(dlb_tensor_slice(base, 3, s, &w));
      break;
    }
    case COMPACT_2D:
    case COMPACT_3D: {
      /* The first 20 or 60 elements, compact: pitches differ from the
       * strided layouts'. */
      int64_t shape[3] = {3, 4, 5};
      dlb_slice rows = {0, layout == COMPACT_2D ? 2 : 6, 1};
      DLManagedTensorVersioned *plane = NULL;
      CHECK_OK(dlb_tensor_select(base, 0, 0, &plane));
      CHECK_OK(dlb_tensor_slice(plane, 1, &rows, &v));
      dlb_tensor_release(plane);
      CHECK_OK(dlb_tensor_reshape(v, layout == COMPACT_2D ? 2 : 3,
                                  layout == COMPACT_2D ? shape + 1 : shape,
                                  &w));
      break;
    }
    case BROADCAST: {
      int64_t shape[3] = {3, 4, 5};
      dlb_slice s[3] = {{0, 1, 1}, {0, 1, 1}, {0, 5, 1}};
      CHECK_OK(dlb_tensor_slice(base, 3, s, &v));
      CHECK_OK(dlb_tensor_expand(v, 3, shape, &w));
      break;
    }
  }
  dlb_tensor_release(v);
  return w;
}

static DLManagedTensorVersioned *base_on(DLDevice d, float value) {
  int64_t shape[3] = {3, 8, 10};
  return alloc_on(d, 3, shape, value);
}

/* Copies each layout between each pair of kinds (broadcast only as a
 * source) and checks every element. */
DLB_TEST(cuda_copy_every_kind_every_layout) {
  E = emu_cuda();
  for (int sl = 0; sl < LAYOUTS; sl++) {
    for (int dl = 0; dl < LAYOUTS; dl++) {
      if (dl == BROADCAST) continue;
      for (int a = 0; a < NKINDS; a++) {
        for (int b = 0; b < NKINDS; b++) {
          DLManagedTensorVersioned *sb = base_on(kinds[a], 1000.0f);
          DLManagedTensorVersioned *db = base_on(kinds[b], -1.0f);
          DLManagedTensorVersioned *s = view(sb, sl), *d = view(db, dl);
          /* Same shape: the layouts reshape to 3 x 4 x 20 or to 4 x 5. */
          if (s->dl_tensor.ndim != d->dl_tensor.ndim ||
              numel(&s->dl_tensor) != numel(&d->dl_tensor) ||
              memcmp(s->dl_tensor.shape, d->dl_tensor.shape,
                     (size_t)s->dl_tensor.ndim * sizeof(int64_t)) != 0) {
            dlb_tensor_release(s);
            dlb_tensor_release(d);
            dlb_tensor_release(sb);
            dlb_tensor_release(db);
            continue;
          }
          dlb_status st = dlb_copy_sync(&s->dl_tensor, &d->dl_tensor, NULL);
          if (st != DLB_OK)
            dlb_test_failed(__FILE__, __LINE__, "%s -> %s, kinds %d -> %d: %s",
                            layout_names[sl], layout_names[dl], a, b,
                            dlb_last_error());
          check_same(&s->dl_tensor, &d->dl_tensor);
          CHECK_EQ_INT(E.context_depth(), 0);
          CHECK_EQ_INT(E.pending(), 0);
          dlb_tensor_release(s);
          dlb_tensor_release(d);
          dlb_tensor_release(sb);
          dlb_tensor_release(db);
        }
      }
    }
  }
  CHECK_EQ_INT(E.live(), 0);
}

/* Which driver call a copy from cpu to cuda:0 of each layout makes. */
DLB_TEST(cuda_copy_picks_one_pitched_copy) {
  E = emu_cuda();
  static const struct {
    int layout;
    const char *call;
  } cases[] = {{CONTIGUOUS, "cuMemcpyAsync"},
               {ROWS_2D, "cuMemcpy2DAsync_v2"},
               {PLANES_3D, "cuMemcpy3DAsync_v2"}};
  for (int i = 0; i < 3; i++) {
    DLManagedTensorVersioned *sb = base_on((DLDevice){kDLCPU, 0}, 5.0f);
    DLManagedTensorVersioned *db = base_on((DLDevice){kDLCUDA, 0}, 0.0f);
    DLManagedTensorVersioned *s = view(sb, cases[i].layout);
    DLManagedTensorVersioned *d = view(db, cases[i].layout);
    long call = E.calls(cases[i].call);
    long async = E.calls("cuMemcpyAsync");
    CHECK_OK(dlb_copy_sync(&s->dl_tensor, &d->dl_tensor, NULL));
    CHECK_EQ_INT(E.calls(cases[i].call), call + 1);
    if (i > 0) CHECK_EQ_INT(E.calls("cuMemcpyAsync"), async);
    check_same(&s->dl_tensor, &d->dl_tensor);
    dlb_tensor_release(s);
    dlb_tensor_release(d);
    dlb_tensor_release(sb);
    dlb_tensor_release(db);
  }
  CHECK_EQ_INT(E.live(), 0);
}

/* Bytes between a strided destination's elements keep their values. */
DLB_TEST(cuda_copy_keeps_bytes_between_destination_elements) {
  E = emu_cuda();
  for (int layout = TRANSPOSED; layout <= REVERSED; layout++) {
    DLManagedTensorVersioned *sb = base_on((DLDevice){kDLCPU, 0}, 1e4f);
    DLManagedTensorVersioned *db = base_on((DLDevice){kDLCUDA, 1}, -1.0f);
    DLManagedTensorVersioned *s = view(sb, layout), *d = view(db, layout);
    CHECK_OK(dlb_copy_sync(&s->dl_tensor, &d->dl_tensor, NULL));
    check_same(&s->dl_tensor, &d->dl_tensor);
    /* Every element of the base outside the view is untouched. */
    int64_t touched = 0;
    for (int64_t i = 0; i < 240; i++) {
      float v = *elem(&db->dl_tensor, i);
      if (v != -1.0f + (float)i) touched++;
    }
    CHECK_EQ_INT(touched, 60);
    dlb_tensor_release(s);
    dlb_tensor_release(d);
    dlb_tensor_release(sb);
    dlb_tensor_release(db);
  }
  CHECK_EQ_INT(E.live(), 0);
}

DLB_TEST(cuda_copy_pitch_over_the_limit_stages) {
  setenv("EMU_CUDA_MAX_PITCH", "32", 1);
  E = emu_cuda();
  /* Staging moves the device side's span in one 1-D copy each way it
   * goes: read from src; read from a strided dst, then written back. */
  static const struct {
    DLDevice from, to;
    long moves;
  } cases[] = {{{kDLCUDA, 0}, {kDLCPU, 0}, 1}, {{kDLCPU, 0}, {kDLCUDA, 0}, 2}};
  for (size_t i = 0; i < 2; i++) {
    DLManagedTensorVersioned *sb = base_on(cases[i].from, 3.0f);
    DLManagedTensorVersioned *db = base_on(cases[i].to, 0.0f);
    DLManagedTensorVersioned *s = view(sb, ROWS_2D), *d = view(db, ROWS_2D);
    long moves = E.calls("cuMemcpyAsync");
    CHECK_OK(dlb_copy_sync(&s->dl_tensor, &d->dl_tensor, NULL));
    CHECK_EQ_INT(E.calls("cuMemcpy2DAsync_v2"), 0);
    CHECK_EQ_INT(E.calls("cuMemcpy3DAsync_v2"), 0);
    CHECK_EQ_INT(E.calls("cuMemcpyAsync"), moves + cases[i].moves);
    check_same(&s->dl_tensor, &d->dl_tensor);
    dlb_tensor_release(s);
    dlb_tensor_release(d);
    dlb_tensor_release(sb);
    dlb_tensor_release(db);
  }
  CHECK_EQ_INT(E.live(), 0);
}

/* Device-to-device 2-D copies may refuse pitches cuMemAllocPitch did not
 * choose: the unaligned form takes over. */
DLB_TEST(cuda_copy_device_pitch_refused_goes_unaligned) {
  setenv("EMU_CUDA_D2D_PITCH_ALIGN", "512", 1);
  E = emu_cuda();
  DLManagedTensorVersioned *sb = base_on((DLDevice){kDLCUDA, 0}, 3.0f);
  DLManagedTensorVersioned *db = base_on((DLDevice){kDLCUDA, 1}, 0.0f);
  DLManagedTensorVersioned *s = view(sb, ROWS_2D), *d = view(db, ROWS_2D);
  CHECK_OK(dlb_copy_sync(&s->dl_tensor, &d->dl_tensor, NULL));
  CHECK_EQ_INT(E.calls("cuMemcpy2DAsync_v2"), 1);
  CHECK_EQ_INT(E.calls("cuMemcpy2DUnaligned_v2"), 1);
  check_same(&s->dl_tensor, &d->dl_tensor);
  dlb_tensor_release(s);
  dlb_tensor_release(d);
  dlb_tensor_release(sb);
  dlb_tensor_release(db);
  CHECK_EQ_INT(E.live(), 0);
}

/* An asynchronous copy is queued on the stream, done once it is waited
 * for. */
DLB_TEST(cuda_copy_async_on_a_stream) {
  E = emu_cuda();
  CHECK_OK(dlb_runtime_status(DLB_RUNTIME_CUDA));
  cu_fns cu = cu_fns_of(&E);
  cu_as_framework(&cu, 0);
  dlb__cu_stream st = NULL;
  CHECK_EQ_INT(cu.cuStreamCreate(&st, DLB__CU_STREAM_NON_BLOCKING), 0);
  int64_t shape[2] = {16, 16};
  DLManagedTensorVersioned *src = alloc_on((DLDevice){kDLCPU, 0}, 2, shape, 1);
  DLManagedTensorVersioned *dev = alloc_on((DLDevice){kDLCUDA, 0}, 2, shape, 0);
  DLManagedTensorVersioned *back =
      alloc_on((DLDevice){kDLCUDAHost, 0}, 2, shape, 0);
  CHECK_OK(dlb_copy_async(&src->dl_tensor, &dev->dl_tensor, st));
  CHECK_OK(dlb_copy_async(&dev->dl_tensor, &back->dl_tensor, st));
  CHECK_EQ_INT(E.pending(), 2);
  CHECK(*elem(&back->dl_tensor, 100) == 100.0f); /* filled with 0 + i */
  /* The pinned result is read on the host: wait for the stream first. */
  CHECK_OK(dlb_stream_synchronize((DLDevice){kDLCUDAHost, 0}, st));
  CHECK_EQ_INT(E.pending(), 0);
  check_same(&src->dl_tensor, &back->dl_tensor);
  /* dlb_copy_sync waits for its copy on the stream. */
  fill(&src->dl_tensor, 50.0f);
  CHECK_OK(dlb_copy_sync(&src->dl_tensor, &back->dl_tensor, st));
  CHECK_EQ_INT(E.pending(), 0);
  check_same(&src->dl_tensor, &back->dl_tensor);
  dlb_tensor_release(src);
  dlb_tensor_release(dev);
  dlb_tensor_release(back);
  CHECK_EQ_INT(cu.cuStreamDestroy_v2(st), 0);
  CHECK_EQ_INT(E.live(), 0);
}

/* Layouts no pitched copy does go through host memory, on the caller's
 * stream: each step waits for its copy before the CPU reads the buffer or
 * lets it go, so dlb_copy_sync leaves nothing queued. */
DLB_TEST(cuda_copy_staged_on_a_stream) {
  E = emu_cuda();
  CHECK_OK(dlb_runtime_status(DLB_RUNTIME_CUDA));
  cu_fns cu = cu_fns_of(&E);
  cu_as_framework(&cu, 0);
  dlb__cu_stream st = NULL;
  CHECK_EQ_INT(cu.cuStreamCreate(&st, DLB__CU_STREAM_NON_BLOCKING), 0);
  DLManagedTensorVersioned *db = base_on((DLDevice){kDLCUDA, 0}, 5.0f);
  DLManagedTensorVersioned *hb = base_on((DLDevice){kDLCPU, 0}, -1.0f);
  DLManagedTensorVersioned *d = view(db, TRANSPOSED), *h = view(hb, TRANSPOSED);
  CHECK_OK(dlb_copy_sync(&d->dl_tensor, &h->dl_tensor, st));
  CHECK_EQ_INT(E.pending(), 0);
  check_same(&d->dl_tensor, &h->dl_tensor);
  fill(&h->dl_tensor, 700.0f);
  CHECK_OK(dlb_copy_sync(&h->dl_tensor, &d->dl_tensor, st));
  CHECK_EQ_INT(E.pending(), 0);
  check_same(&h->dl_tensor, &d->dl_tensor);
  /* A dense destination is written whole: one copy, no read first. */
  DLManagedTensorVersioned *c = view(db, COMPACT_3D);
  long copies = E.calls("cuMemcpyAsync");
  CHECK_OK(dlb_copy_sync(&h->dl_tensor, &c->dl_tensor, st));
  CHECK_EQ_INT(E.calls("cuMemcpyAsync") - copies, 1);
  check_same(&h->dl_tensor, &c->dl_tensor);
  dlb_tensor_release(c);
  CHECK_EQ_INT(E.context_depth(), 1);
  dlb_tensor_release(d);
  dlb_tensor_release(h);
  dlb_tensor_release(db);
  dlb_tensor_release(hb);
  CHECK_EQ_INT(cu.cuStreamDestroy_v2(st), 0);
  CHECK_EQ_INT(E.live(), 0);
}

/* A copy the CPU does touches pinned memory directly: first it waits for
 * work queued on the stream that writes that memory, or reads it. */
DLB_TEST(cuda_copy_staged_waits_for_queued_work) {
  E = emu_cuda();
  CHECK_OK(dlb_runtime_status(DLB_RUNTIME_CUDA));
  cu_fns cu = cu_fns_of(&E);
  cu_as_framework(&cu, 0);
  dlb__cu_stream st = NULL;
  CHECK_EQ_INT(cu.cuStreamCreate(&st, DLB__CU_STREAM_NON_BLOCKING), 0);
  DLManagedTensorVersioned *pb = base_on((DLDevice){kDLCUDAHost, 0}, 1.0f);
  DLManagedTensorVersioned *db = base_on((DLDevice){kDLCUDA, 0}, 500.0f);
  DLManagedTensorVersioned *kb = base_on((DLDevice){kDLCUDA, 0}, 0.0f);
  DLManagedTensorVersioned *hb = base_on((DLDevice){kDLCPU, 0}, -1.0f);
  DLManagedTensorVersioned *pv = view(pb, TRANSPOSED);
  DLManagedTensorVersioned *hv = view(hb, TRANSPOSED);
  DLManagedTensorVersioned *dv = view(db, TRANSPOSED);
  /* Queued: device -> pinned. The CPU then reads the pinned memory. */
  CHECK_OK(dlb_copy_async(&db->dl_tensor, &pb->dl_tensor, st));
  CHECK_EQ_INT(E.pending(), 1);
  CHECK_OK(dlb_copy_sync(&pv->dl_tensor, &hv->dl_tensor, st));
  check_same(&dv->dl_tensor, &hv->dl_tensor);
  /* Queued: pinned -> device. The CPU then writes the pinned memory. */
  CHECK_OK(dlb_copy_async(&pb->dl_tensor, &kb->dl_tensor, st));
  CHECK_EQ_INT(E.pending(), 1);
  fill(&hv->dl_tensor, 9000.0f);
  CHECK_OK(dlb_copy_sync(&hv->dl_tensor, &pv->dl_tensor, st));
  CHECK_OK(dlb_stream_synchronize((DLDevice){kDLCUDA, 0}, st));
  check_same(&db->dl_tensor, &kb->dl_tensor);
  check_same(&hv->dl_tensor, &pv->dl_tensor);
  dlb_tensor_release(pv);
  dlb_tensor_release(hv);
  dlb_tensor_release(dv);
  dlb_tensor_release(pb);
  dlb_tensor_release(db);
  dlb_tensor_release(kb);
  dlb_tensor_release(hb);
  CHECK_EQ_INT(cu.cuStreamDestroy_v2(st), 0);
  CHECK_EQ_INT(E.live(), 0);
}

DLB_TEST(cuda_copy_refuses_mismatches) {
  E = emu_cuda();
  int64_t a[2] = {4, 5}, b[2] = {5, 4};
  DLManagedTensorVersioned *x = alloc_on((DLDevice){kDLCUDA, 0}, 2, a, 0);
  DLManagedTensorVersioned *y = alloc_on((DLDevice){kDLCPU, 0}, 2, b, 0);
  CHECK_STATUS(dlb_copy_sync(&x->dl_tensor, &y->dl_tensor, NULL),
               DLB_E_LAYOUT);
  CHECK_ERROR_MENTIONS("src->shape[0] is 4, dst->shape[0] is 5");
  DLManagedTensorVersioned *z = NULL;
  CHECK_OK(dlb_tensor_alloc((DLDevice){kDLCPU, 0}, (DLDataType){kDLInt, 32, 1},
                            2, a, &z));
  CHECK_STATUS(dlb_copy_async(&x->dl_tensor, &z->dl_tensor, NULL),
               DLB_E_DTYPE);
  DLTensor other = z->dl_tensor;
  other.device = (DLDevice){kDLOpenCL, 0};
  other.dtype = f32;
  CHECK_STATUS(dlb_copy_sync(&x->dl_tensor, &other, NULL), DLB_E_UNSUPPORTED);
  CHECK_ERROR_MENTIONS("dst is opencl memory");
  DLTensor far = x->dl_tensor, near = x->dl_tensor;
  far.device.device_id = 4;
  near.device = (DLDevice){kDLCPU, 0};
  CHECK_STATUS(dlb_copy_sync(&far, &near, NULL), DLB_E_NO_DEVICE);
  CHECK_ERROR_MENTIONS("cuda:4 requested");
  CHECK_STATUS(dlb_copy_sync(NULL, &z->dl_tensor, NULL), DLB_E_INVAL);
  dlb_tensor_release(x);
  dlb_tensor_release(y);
  dlb_tensor_release(z);
  CHECK_EQ_INT(E.live(), 0);
}

/* The GPU copies and dlb_copy check a pair alike: the same status and
 * message for each mismatch, the dtype first, and a bad side named. */
DLB_TEST(cuda_copy_refuses_as_the_cpu_copy_does) {
  E = emu_cuda();
  static const DLDataType i32 = {kDLInt, 32, 1};
  static const char dtypes[] =
      "src->dtype is float32, dst->dtype is int32; copies keep the type";
  int64_t a[2] = {4, 5}, b[2] = {5, 4}, flat[1] = {20}, bad[2] = {4, -1};
  const struct {
    DLDataType dtype;
    int32_t ndim;
    const int64_t *shape;
    dlb_status st;
    const char *message;
  } cases[] = {
      {i32, 2, a, DLB_E_DTYPE, dtypes},
      {f32, 1, flat, DLB_E_LAYOUT, "src->ndim is 2, dst->ndim is 1"},
      {f32, 2, b, DLB_E_LAYOUT, "src->shape[0] is 4, dst->shape[0] is 5"},
      {i32, 2, b, DLB_E_DTYPE, dtypes},
      {f32, 2, bad, DLB_E_LAYOUT, "dst: shape[1] is -1; extents must be >= 0"},
  };
  DLManagedTensorVersioned *x = alloc_on((DLDevice){kDLCUDA, 0}, 2, a, 0);
  float host[20] = {0};
  DLTensor on_cpu = x->dl_tensor;
  on_cpu.data = host;
  on_cpu.device = (DLDevice){kDLCPU, 0};
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    DLTensor dst = on_cpu;
    dst.dtype = cases[i].dtype;
    dst.ndim = cases[i].ndim;
    dst.shape = (int64_t *)cases[i].shape;
    dst.strides = NULL;
    CHECK_STATUS(dlb_copy(&on_cpu, &dst), cases[i].st);
    CHECK_STR(dlb_last_error(), cases[i].message);
    CHECK_STATUS(dlb_copy_sync(&x->dl_tensor, &dst, NULL), cases[i].st);
    CHECK_STR(dlb_last_error(), cases[i].message);
  }
  DLTensor broken = x->dl_tensor;
  broken.shape = bad;
  CHECK_STATUS(dlb_copy_async(&broken, &on_cpu, NULL), DLB_E_LAYOUT);
  CHECK_STR(dlb_last_error(), "src: shape[1] is -1; extents must be >= 0");
  CHECK_EQ_INT(E.calls("cuMemcpyAsync"), 0);
  for (int i = 0; i < 20; i++) CHECK(host[i] == 0.0f);
  dlb_tensor_release(x);
  CHECK_EQ_INT(E.live(), 0);
}

DLB_TEST(cuda_copy_packed_subbyte) {
  E = emu_cuda();
  DLDataType i4 = {kDLInt, 4, 1};
  int64_t shape[1] = {9};
  DLManagedTensorVersioned *h = NULL, *d = NULL, *back = NULL;
  CHECK_OK(dlb_tensor_alloc((DLDevice){kDLCPU, 0}, i4, 1, shape, &h));
  CHECK_OK(dlb_tensor_alloc((DLDevice){kDLCUDA, 0}, i4, 1, shape, &d));
  CHECK_OK(dlb_tensor_alloc((DLDevice){kDLCPU, 0}, i4, 1, shape, &back));
  memcpy(h->dl_tensor.data, "\x21\x43\x65\x87\xA9", 5);
  /* The unused half of the last byte is each tensor's own. */
  memset(E.shadow(d->dl_tensor.data), 0x55, 5);
  memset(back->dl_tensor.data, 0xCC, 5);
  CHECK_OK(dlb_copy_sync(&h->dl_tensor, &d->dl_tensor, NULL));
  CHECK_EQ_INT(((unsigned char *)E.shadow(d->dl_tensor.data))[4], 0x59);
  CHECK_OK(dlb_copy_sync(&d->dl_tensor, &back->dl_tensor, NULL));
  CHECK(memcmp(back->dl_tensor.data, "\x21\x43\x65\x87", 4) == 0);
  CHECK_EQ_INT(((unsigned char *)back->dl_tensor.data)[4], 0xC9);
  /* Whole bytes go in one copy. */
  int64_t eight[1] = {8};
  DLTensor h8 = h->dl_tensor, d8 = d->dl_tensor;
  h8.shape = d8.shape = eight;
  long one = E.calls("cuMemcpyAsync");
  CHECK_OK(dlb_copy_sync(&h8, &d8, NULL));
  CHECK_EQ_INT(E.calls("cuMemcpyAsync"), one + 1);
  int64_t stride[1] = {2};
  DLTensor sparse = d->dl_tensor;
  int64_t four[1] = {4};
  sparse.shape = four;
  sparse.strides = stride;
  DLTensor h4 = h->dl_tensor;
  h4.shape = four;
  CHECK_STATUS(dlb_copy_sync(&sparse, &h4, NULL), DLB_E_LAYOUT);
  dlb_tensor_release(h);
  dlb_tensor_release(d);
  dlb_tensor_release(back);
  CHECK_EQ_INT(E.live(), 0);
}

/* One-byte elements lose their own dimension when coalesced. */
DLB_TEST(cuda_copy_strided_bytes) {
  E = emu_cuda();
  int64_t shape[2] = {6, 7};
  DLManagedTensorVersioned *h = NULL, *d = NULL;
  DLDataType u8 = {kDLUInt, 8, 1};
  CHECK_OK(dlb_tensor_alloc((DLDevice){kDLCPU, 0}, u8, 2, shape, &h));
  CHECK_OK(dlb_tensor_alloc((DLDevice){kDLCUDA, 0}, u8, 2, shape, &d));
  unsigned char *hv = h->dl_tensor.data;
  for (int i = 0; i < 42; i++) hv[i] = (unsigned char)i;
  memset(E.shadow(d->dl_tensor.data), 0xEE, 42);
  DLManagedTensorVersioned *hc = NULL, *dc = NULL;
  CHECK_OK(dlb_tensor_select(h, 1, 3, &hc)); /* a column: stride 7 */
  CHECK_OK(dlb_tensor_select(d, 1, 3, &dc));
  CHECK_OK(dlb_copy_sync(&hc->dl_tensor, &dc->dl_tensor, NULL));
  CHECK_EQ_INT(E.calls("cuMemcpy2DAsync_v2"), 1);
  unsigned char *dv = E.shadow(d->dl_tensor.data);
  for (int i = 0; i < 42; i++)
    CHECK_EQ_INT(dv[i], i % 7 == 3 ? i : 0xEE);
  /* Compact bytes into the column: the destination's stride decides. */
  int64_t six[1] = {6};
  DLManagedTensorVersioned *v = NULL;
  CHECK_OK(dlb_tensor_alloc((DLDevice){kDLCPU, 0}, u8, 1, six, &v));
  for (int i = 0; i < 6; i++) ((unsigned char *)v->dl_tensor.data)[i] = 0x80;
  CHECK_OK(dlb_copy_sync(&v->dl_tensor, &dc->dl_tensor, NULL));
  CHECK_EQ_INT(E.calls("cuMemcpy2DAsync_v2"), 2);
  for (int i = 0; i < 42; i++)
    CHECK_EQ_INT(dv[i], i % 7 == 3 ? 0x80 : 0xEE);
  dlb_tensor_release(v);
  dlb_tensor_release(hc);
  dlb_tensor_release(dc);
  dlb_tensor_release(h);
  dlb_tensor_release(d);
  CHECK_EQ_INT(E.live(), 0);
}

/* A destination whose rows overlap (4 bytes, 2 apart) makes no pitched
 * copy: the result is the CPU copy's, element after element. */
DLB_TEST(cuda_copy_into_overlapping_rows) {
  E = emu_cuda();
  DLDataType u8 = {kDLUInt, 8, 1};
  int64_t shape[2] = {3, 4}, strides[2] = {2, 1}, eight[1] = {8};
  DLManagedTensorVersioned *h = NULL, *d = NULL;
  CHECK_OK(dlb_tensor_alloc((DLDevice){kDLCPU, 0}, u8, 2, shape, &h));
  CHECK_OK(dlb_tensor_alloc((DLDevice){kDLCUDA, 0}, u8, 1, eight, &d));
  unsigned char *hv = h->dl_tensor.data, want[8];
  for (int i = 0; i < 12; i++) hv[i] = (unsigned char)(10 + i);
  for (int i = 0; i < 3; i++)
    for (int j = 0; j < 4; j++) want[2 * i + j] = hv[4 * i + j];
  DLTensor dv = d->dl_tensor;
  dv.ndim = 2;
  dv.shape = shape;
  dv.strides = strides;
  CHECK_OK(dlb_copy_sync(&h->dl_tensor, &dv, NULL));
  CHECK(memcmp(E.shadow(d->dl_tensor.data), want, 8) == 0);
  dlb_tensor_release(h);
  dlb_tensor_release(d);
  CHECK_EQ_INT(E.live(), 0);
}

/* Sources whose rows overlap (4 bytes, 2 apart) or whose planes do (3
 * rows, 2 apart) make no 3-D copy, whose pitch and height may not be less
 * than a row and a plane; they are copied another way. */
DLB_TEST(cuda_copy_from_overlapping_rows_and_planes) {
  E = emu_cuda();
  DLDataType u8 = {kDLUInt, 8, 1};
  int64_t shape[3] = {2, 3, 4};
  static const int64_t strides[2][3] = {{16, 2, 1}, {10, 5, 1}};
  unsigned char host[32];
  for (int i = 0; i < 32; i++) host[i] = (unsigned char)(40 + i);
  DLManagedTensorVersioned *d = NULL;
  CHECK_OK(dlb_tensor_alloc((DLDevice){kDLCUDA, 0}, u8, 3, shape, &d));
  for (int c = 0; c < 2; c++) {
    DLTensor h = d->dl_tensor;
    h.data = host;
    h.device = (DLDevice){kDLCPU, 0};
    h.strides = (int64_t *)(uintptr_t)strides[c];
    memset(E.shadow(d->dl_tensor.data), 0, 24);
    CHECK_OK(dlb_copy_sync(&h, &d->dl_tensor, NULL));
    const unsigned char *dv = E.shadow(d->dl_tensor.data);
    for (int i = 0; i < 2; i++)
      for (int j = 0; j < 3; j++)
        for (int k = 0; k < 4; k++)
          CHECK_EQ_INT(dv[(i * 3 + j) * 4 + k],
                       host[i * strides[c][0] + j * strides[c][1] + k]);
  }
  dlb_tensor_release(d);
  CHECK_EQ_INT(E.live(), 0);
}

/* Overlapping source and destination in one device buffer behave as a
 * copy from a snapshot. */
DLB_TEST(cuda_copy_overlapping_device_ranges) {
  E = emu_cuda();
  int64_t shape[1] = {100};
  DLManagedTensorVersioned *d = alloc_on((DLDevice){kDLCUDA, 0}, 1, shape, 0);
  dlb_slice lo = {0, 90, 1}, hi = {10, 100, 1};
  DLManagedTensorVersioned *a = NULL, *b = NULL;
  CHECK_OK(dlb_tensor_slice(d, 1, &lo, &a));
  CHECK_OK(dlb_tensor_slice(d, 1, &hi, &b));
  CHECK_OK(dlb_copy_sync(&a->dl_tensor, &b->dl_tensor, NULL));
  for (int i = 0; i < 100; i++)
    CHECK(*elem(&d->dl_tensor, i) == (float)(i < 10 ? i : i - 10));
  dlb_tensor_release(a);
  dlb_tensor_release(b);
  dlb_tensor_release(d);
  CHECK_EQ_INT(E.live(), 0);
}

DLB_TEST(cuda_copy_empty_tensor) {
  E = emu_cuda();
  int64_t shape[2] = {0, 5};
  DLManagedTensorVersioned *a = alloc_on((DLDevice){kDLCUDA, 0}, 2, shape, 0);
  DLManagedTensorVersioned *b = alloc_on((DLDevice){kDLCPU, 0}, 2, shape, 0);
  long before = E.calls("cuMemcpyAsync"), all = E.calls(NULL);
  CHECK_OK(dlb_copy_sync(&a->dl_tensor, &b->dl_tensor, NULL));
  CHECK_EQ_INT(E.calls("cuMemcpyAsync"), before);
  /* Nothing to move: no copy of any kind and no synchronization either. */
  CHECK_EQ_INT(E.calls(NULL), all);
  dlb_tensor_release(a);
  dlb_tensor_release(b);
  CHECK_EQ_INT(E.live(), 0);
}

DLB_TEST(cuda_tensor_copy_to_and_from_the_gpu) {
  E = emu_cuda();
  int64_t shape[2] = {4, 6};
  DLManagedTensorVersioned *h = alloc_on((DLDevice){kDLCPU, 0}, 2, shape, 9);
  DLManagedTensorVersioned *d = NULL, *back = NULL;
  CHECK_OK(dlb_tensor_copy(&h->dl_tensor, (DLDevice){kDLCUDA, 1}, &d));
  CHECK_EQ_INT(d->dl_tensor.device.device_type, kDLCUDA);
  CHECK_EQ_INT(d->dl_tensor.device.device_id, 1);
  CHECK(d->flags & DLPACK_FLAG_BITMASK_IS_COPIED);
  CHECK_OK(dlb_tensor_copy(&d->dl_tensor, (DLDevice){kDLCPU, 0}, &back));
  check_same(&h->dl_tensor, &back->dl_tensor);
  dlb_tensor_release(h);
  dlb_tensor_release(d);
  dlb_tensor_release(back);
  CHECK_EQ_INT(E.live(), 0);
}

DLB_TEST(cuda_copy_driver_copy_fails) {
  E = emu_cuda();
  static const struct {
    int layout;
    const char *call;
  } cases[] = {{CONTIGUOUS, "cuMemcpyAsync"},
               {ROWS_2D, "cuMemcpy2DAsync_v2"},
               {PLANES_3D, "cuMemcpy3DAsync_v2"},
               {TRANSPOSED, "cuMemcpyAsync"},
               {REVERSED, "cuStreamSynchronize"}};
  for (int i = 0; i < 5; i++) {
    DLManagedTensorVersioned *sb = base_on((DLDevice){kDLCUDA, 0}, 5.0f);
    DLManagedTensorVersioned *db = base_on((DLDevice){kDLCUDA, 1}, 0.0f);
    DLManagedTensorVersioned *s = view(sb, cases[i].layout);
    DLManagedTensorVersioned *d = view(db, cases[i].layout);
    dlb_test_failalloc_install(0);
    E.fail(cases[i].call, 1, 700);
    CHECK_STATUS(dlb_copy_sync(&s->dl_tensor, &d->dl_tensor, NULL),
                 DLB_E_RUNTIME);
    CHECK_ERROR_MENTIONS(cases[i].call);
    CHECK_ERROR_MENTIONS("CUDA_ERROR_ILLEGAL_ADDRESS");
    /* Staging buffers are gone too. */
    CHECK_EQ_INT(dlb_test_failalloc_live(), 0);
    dlb_test_failalloc_remove();
    CHECK_EQ_INT(E.context_depth(), 0);
    dlb_tensor_release(s);
    dlb_tensor_release(d);
    dlb_tensor_release(sb);
    dlb_tensor_release(db);
  }
  CHECK_EQ_INT(E.live(), 0);
}

typedef struct pair {
  DLManagedTensorVersioned *src, *dst;
} pair;

static dlb_status copy_pair(void *ctx) {
  pair *p = ctx;
  return dlb_copy_sync(&p->src->dl_tensor, &p->dst->dl_tensor, NULL);
}

DLB_TEST(cuda_copy_staged_host_allocation_failures) {
  E = emu_cuda();
  DLManagedTensorVersioned *sb = base_on((DLDevice){kDLCUDA, 0}, 5.0f);
  DLManagedTensorVersioned *db = base_on((DLDevice){kDLCUDA, 1}, 0.0f);
  pair p = {view(sb, TRANSPOSED), view(db, REVERSED)};
  CHECK(dlb_test_oom_loop(copy_pair, &p) >= 2);
  check_same(&p.src->dl_tensor, &p.dst->dl_tensor);
  dlb_tensor_release(p.src);
  dlb_tensor_release(p.dst);
  dlb_tensor_release(sb);
  dlb_tensor_release(db);
  CHECK_EQ_INT(E.live(), 0);
}

DLB_TEST(cuda_copy_every_driver_call_failing) {
  E = emu_cuda();
  for (int layout = CONTIGUOUS; layout <= REVERSED; layout++) {
    DLManagedTensorVersioned *sb = base_on((DLDevice){kDLCUDA, 0}, 5.0f);
    DLManagedTensorVersioned *db = base_on((DLDevice){kDLCUDAHost, 0}, 0.0f);
    pair p = {view(sb, layout), view(db, layout)};
    int failures = 0;
    for (int n = 1; n < 1000; n++) {
      E.fail(NULL, n, 999);
      dlb_test_failalloc_install(0);
      dlb_status s = copy_pair(&p);
      CHECK_EQ_INT(dlb_test_failalloc_live(), 0);
      dlb_test_failalloc_remove();
      if (!E.fail_fired()) {
        CHECK_OK(s);
        break;
      }
      if (s != DLB_OK) failures++;
      CHECK_EQ_INT(E.context_depth(), 0);
    }
    CHECK(failures > 0);
    check_same(&p.src->dl_tensor, &p.dst->dl_tensor);
    dlb_tensor_release(p.src);
    dlb_tensor_release(p.dst);
    dlb_tensor_release(sb);
    dlb_tensor_release(db);
  }
  CHECK_EQ_INT(E.live(), 0);
}

/* Planes a whole number of rows apart make one 3-D copy; planes that are
 * not (29 floats apart, rows of 7) cannot, and are copied another way. */
DLB_TEST(cuda_copy_planes_not_whole_rows_apart) {
  E = emu_cuda();
  float host[64];
  int64_t shape[3] = {2, 3, 4}, strides[3] = {29, 7, 1};
  DLTensor h;
  memset(&h, 0, sizeof h);
  h.data = host;
  h.device = (DLDevice){kDLCPU, 0};
  h.ndim = 3;
  h.dtype = f32;
  h.shape = shape;
  h.strides = strides;
  for (int i = 0; i < 64; i++) host[i] = (float)i;
  DLManagedTensorVersioned *d = alloc_on((DLDevice){kDLCUDA, 0}, 3, shape,
                                         -1.0f);
  CHECK_OK(dlb_copy_sync(&h, &d->dl_tensor, NULL));
  check_same(&h, &d->dl_tensor);
  for (int i = 0; i < 64; i++) host[i] = -2.0f;
  fill(&d->dl_tensor, 100.0f);
  CHECK_OK(dlb_copy_sync(&d->dl_tensor, &h, NULL));
  check_same(&d->dl_tensor, &h);
  CHECK_EQ_INT(host[3 * 7], -2.0f);
  CHECK_EQ_INT(E.calls("cuMemcpy3DAsync_v2"), 0);
  dlb_tensor_release(d);
  CHECK_EQ_INT(E.live(), 0);
}
