/* test_hip_copy.c -- HIP copies of every layout, stream hand-off, and
 * copies between CUDA and ROCm memory. */
#include "../emu/emu_fns.h"
#include "test.h"

static const DLDataType f32 = {kDLFloat, 32, 1};
static const DLDevice rocm0 = {kDLROCM, 0};

static emu H, C;

/* The element at row-major index i of t, read through the emulator that
 * owns its memory (both give host memory back as it is). */
static float *elem(const DLTensor *t, int64_t i) {
  int64_t off = 0, rest = i, compact[DLB_MAX_NDIM];
  CHECK_OK(dlb_compact_strides(t->ndim, t->shape, 0, compact));
  for (int32_t d = 0; d < t->ndim; d++) {
    off += rest / compact[d] * (t->strides ? t->strides[d] : compact[d]);
    rest %= compact[d];
  }
  const emu *e = t->device.device_type == kDLCUDA ? &C : &H;
  return e->shadow((char *)t->data + t->byte_offset +
                   off * (int64_t)sizeof(float));
}

static void fill(const DLTensor *t, float base) {
  int64_t n = 0;
  CHECK_OK(dlb_tensor_numel(t, &n));
  for (int64_t i = 0; i < n; i++) *elem(t, i) = base + (float)i;
}

static void check_same(const DLTensor *a, const DLTensor *b) {
  int64_t n = 0;
  CHECK_OK(dlb_tensor_numel(a, &n));
  for (int64_t i = 0; i < n; i++)
    if (*elem(a, i) != *elem(b, i))
      dlb_test_failed(__FILE__, __LINE__, "element %lld: %g != %g",
                      (long long)i, (double)*elem(a, i), (double)*elem(b, i));
}

static DLManagedTensorVersioned *base_on(DLDevice d, float value) {
  int64_t shape[3] = {3, 8, 10};
  DLManagedTensorVersioned *t = NULL;
  CHECK_OK(dlb_tensor_alloc(d, f32, 3, shape, &t));
  fill(&t->dl_tensor, value);
  return t;
}

/* A 3 x 4 x 5 view: planes (one 3-D copy), or transposed (staged). */
static DLManagedTensorVersioned *view(DLManagedTensorVersioned *b, int mode) {
  DLManagedTensorVersioned *v = NULL, *w = NULL;
  if (mode == 0) {
    dlb_slice s[3] = {{0, 3, 1}, {0, 4, 1}, {0, 5, 1}};
    CHECK_OK(dlb_tensor_slice(b, 3, s, &w));
    return w;
  }
  if (mode == 1) {
    dlb_slice s[3] = {{0, 3, 1}, {0, 5, 1}, {0, 4, 1}};
    int32_t axes[3] = {0, 2, 1};
    CHECK_OK(dlb_tensor_slice(b, 3, s, &v));
    CHECK_OK(dlb_tensor_permute(v, axes, &w));
    dlb_tensor_release(v);
    return w;
  }
  /* mode 2: rows of one plane (one 2-D copy), shape 4 x 5 */
  dlb_slice s[2] = {{0, 4, 1}, {0, 5, 1}};
  CHECK_OK(dlb_tensor_select(b, 0, 2, &v));
  CHECK_OK(dlb_tensor_slice(v, 2, s, &w));
  dlb_tensor_release(v);
  return w;
}

DLB_TEST(hip_copy_every_kind_and_layout) {
  H = emu_hip();
  static const DLDevice kinds[] = {
      {kDLCPU, 0}, {kDLROCM, 0}, {kDLROCM, 1}, {kDLROCMHost, 0}};
  /* (source view, destination view): 3-D, staged both ways, 2-D. */
  static const int modes[][2] = {{0, 0}, {1, 0}, {0, 1}, {2, 2}};
  for (int m = 0; m < 4; m++)
    for (int a = 0; a < 4; a++)
      for (int b = 0; b < 4; b++) {
        DLManagedTensorVersioned *sb = base_on(kinds[a], 500.0f);
        DLManagedTensorVersioned *db = base_on(kinds[b], -1.0f);
        DLManagedTensorVersioned *s = view(sb, modes[m][0]);
        DLManagedTensorVersioned *d = view(db, modes[m][1]);
        CHECK_OK(dlb_copy_sync(&s->dl_tensor, &d->dl_tensor, NULL));
        check_same(&s->dl_tensor, &d->dl_tensor);
        CHECK_EQ_INT(H.context_depth(), 0);
        dlb_tensor_release(s);
        dlb_tensor_release(d);
        dlb_tensor_release(sb);
        dlb_tensor_release(db);
      }
  CHECK(H.calls("hipMemcpy3DAsync") > 0);
  CHECK(H.calls("hipMemcpy2DAsync") > 0);
  CHECK_EQ_INT(H.pending(), 0);
  CHECK_EQ_INT(H.live(), 0);
}

DLB_TEST(hip_copy_failures_and_limits) {
  setenv("EMU_HIP_MAX_PITCH", "16", 1);
  H = emu_hip();
  DLManagedTensorVersioned *sb = base_on(rocm0, 1.0f);
  DLManagedTensorVersioned *db = base_on((DLDevice){kDLCPU, 0}, 0.0f);
  DLManagedTensorVersioned *s = view(sb, 2), *d = view(db, 2);
  /* Rows 40 bytes apart, over the 16 allowed: staged. */
  CHECK_OK(dlb_copy_sync(&s->dl_tensor, &d->dl_tensor, NULL));
  CHECK_EQ_INT(H.calls("hipMemcpy2DAsync"), 0);
  check_same(&s->dl_tensor, &d->dl_tensor);
  dlb_test_failalloc_install(0);
  H.fail("hipMemcpyAsync", 1, 999);
  CHECK_STATUS(dlb_copy_sync(&s->dl_tensor, &d->dl_tensor, NULL),
               DLB_E_RUNTIME);
  CHECK_ERROR_MENTIONS("hipMemcpyAsync(140 bytes) on rocm:0: ");
  CHECK_EQ_INT(dlb_test_failalloc_live(), 0);
  dlb_test_failalloc_remove();
  dlb_tensor_release(s);
  dlb_tensor_release(d);
  dlb_tensor_release(sb);
  dlb_tensor_release(db);
  CHECK_EQ_INT(H.live(), 0);
}

/* A 3-D and a 2-D copy the runtime refuses name the call, its sizes and
 * the device it ran on. */
DLB_TEST(hip_copy_failures_name_the_device) {
  H = emu_hip();
  const DLDevice rocm1 = {kDLROCM, 1};
  static const struct {
    int mode;
    const char *call, *message;
  } cases[] = {
      {0, "hipMemcpy3DAsync",
       "hipMemcpy3DAsync(3 x 4 x 20 bytes) on rocm:1: "},
      {2, "hipMemcpy2DAsync",
       "hipMemcpy2DAsync(4 x 20 bytes, pitches 40 and 40) on rocm:1: "},
  };
  for (int i = 0; i < 2; i++) {
    DLManagedTensorVersioned *sb = base_on(rocm1, 1.0f);
    DLManagedTensorVersioned *db = base_on(rocm1, 0.0f);
    DLManagedTensorVersioned *s = view(sb, cases[i].mode);
    DLManagedTensorVersioned *d = view(db, cases[i].mode);
    H.fail(cases[i].call, 1, 999);
    CHECK_STATUS(dlb_copy_sync(&s->dl_tensor, &d->dl_tensor, NULL),
                 DLB_E_RUNTIME);
    CHECK_ERROR_MENTIONS(cases[i].message);
    dlb_tensor_release(s);
    dlb_tensor_release(d);
    dlb_tensor_release(sb);
    dlb_tensor_release(db);
  }
  CHECK_EQ_INT(H.live(), 0);
}

/* The producer writes b on its stream, the consumer copies b to pinned
 * memory on its own: it sees the producer's result only after the
 * hand-off, which never makes the host wait. */
static void stream_scene(int handoff) {
  H = emu_hip();
  CHECK_OK(dlb_runtime_status(DLB_RUNTIME_HIP));
  hip_fns hip = hip_fns_of(&H);
  dlb__hip_stream p = NULL, c = NULL;
  CHECK_EQ_INT(hip.hipStreamCreateWithFlags(&p, DLB__HIP_STREAM_NON_BLOCKING),
               0);
  CHECK_EQ_INT(hip.hipStreamCreateWithFlags(&c, DLB__HIP_STREAM_NON_BLOCKING),
               0);
  int64_t shape[1] = {64};
  DLManagedTensorVersioned *a = NULL, *b = NULL, *h = NULL;
  CHECK_OK(dlb_tensor_alloc(rocm0, f32, 1, shape, &a));
  CHECK_OK(dlb_tensor_alloc(rocm0, f32, 1, shape, &b));
  CHECK_OK(dlb_tensor_alloc((DLDevice){kDLROCMHost, 0}, f32, 1, shape, &h));
  fill(&a->dl_tensor, 1.0f);
  fill(&b->dl_tensor, 0.0f);
  fill(&h->dl_tensor, 0.0f);
  CHECK_OK(dlb_copy_async(&a->dl_tensor, &b->dl_tensor, p));
  long syncs = H.calls("hipStreamSynchronize") +
               H.calls("hipDeviceSynchronize") + H.calls("hipEventSynchronize");
  if (handoff) CHECK_OK(dlb_stream_wait(rocm0, c, p));
  CHECK_EQ_INT(H.calls("hipStreamSynchronize") +
                   H.calls("hipDeviceSynchronize") +
                   H.calls("hipEventSynchronize"),
               syncs);
  CHECK_OK(dlb_copy_async(&b->dl_tensor, &h->dl_tensor, c));
  CHECK_OK(dlb_stream_synchronize((DLDevice){kDLROCMHost, 0}, c));
  CHECK(*elem(&h->dl_tensor, 7) == (handoff ? 8.0f : 7.0f));
  CHECK_EQ_INT(H.live_kind(EMU_LIVE_EVENT), 0);
  H.fail("hipEventRecord", 1, 999);
  CHECK_STATUS(dlb_stream_wait(rocm0, c, p), DLB_E_RUNTIME);
  CHECK_ERROR_MENTIONS("hipEventRecord");
  CHECK_EQ_INT(H.live_kind(EMU_LIVE_EVENT), 0);
  CHECK_OK(dlb_device_synchronize(rocm0));
  CHECK_EQ_INT(H.pending(), 0);
  dlb_tensor_release(a);
  dlb_tensor_release(b);
  dlb_tensor_release(h);
  CHECK_EQ_INT(hip.hipStreamDestroy(p), 0);
  CHECK_EQ_INT(hip.hipStreamDestroy(c), 0);
  CHECK_EQ_INT(H.live(), 0);
}

DLB_TEST(hip_stream_wait_orders_the_consumer) { stream_scene(1); }
DLB_TEST(hip_stream_without_wait_is_unordered) { stream_scene(0); }

/* CUDA and ROCm memory in one process: copies stage through the host on
 * each runtime's default stream. */
DLB_TEST(hip_copy_to_and_from_cuda) {
  H = emu_hip();
  C = emu_cuda();
  static const DLDevice pairs[][2] = {{{kDLCUDA, 0}, {kDLROCM, 1}},
                                      {{kDLROCM, 0}, {kDLCUDA, 1}},
                                      {{kDLCUDAManaged, 0}, {kDLROCM, 0}},
                                      {{kDLROCMHost, 0}, {kDLCUDAHost, 0}}};
  for (int i = 0; i < 4; i++)
    for (int mode = 0; mode < 2; mode++) {
      DLManagedTensorVersioned *sb = base_on(pairs[i][0], 3.0f);
      DLManagedTensorVersioned *db = base_on(pairs[i][1], 0.0f);
      DLManagedTensorVersioned *s = view(sb, mode), *d = view(db, mode);
      CHECK_OK(dlb_copy_sync(&s->dl_tensor, &d->dl_tensor, NULL));
      check_same(&s->dl_tensor, &d->dl_tensor);
      CHECK_STATUS(dlb_copy_async(&s->dl_tensor, &d->dl_tensor, (void *)0x10),
                   DLB_E_INVAL);
      CHECK_ERROR_MENTIONS("stream must be NULL");
      dlb_tensor_release(s);
      dlb_tensor_release(d);
      dlb_tensor_release(sb);
      dlb_tensor_release(db);
    }
  /* Both runtimes classify their own memory. */
  DLManagedTensorVersioned *r = base_on((DLDevice){kDLROCM, 1}, 0.0f);
  DLDevice d;
  CHECK_OK(dlb_device_of_pointer(r->dl_tensor.data, &d));
  CHECK_EQ_INT(d.device_type, kDLROCM);
  CHECK_EQ_INT(d.device_id, 1);
  DLTensor lie = r->dl_tensor;
  lie.device = (DLDevice){kDLCUDA, 1};
  CHECK_STATUS(dlb_tensor_check_device(&lie, 0, &d), DLB_E_DEVICE);
  CHECK_ERROR_MENTIONS("which is rocm:1");
  dlb_tensor_release(r);
  CHECK_EQ_INT(H.live(), 0);
  CHECK_EQ_INT(C.live(), 0);
}
