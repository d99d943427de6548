/* test_pin_overlap.c -- pinning tensors whose spans overlap registrations
 * dlbridge made for other tensors (a view pinned before the whole tensor,
 * views that overlap in part), against the emulated CUDA driver and HIP
 * runtime, which refuse a registration that overlaps another by a byte:
 * only the gaps are registered, every registration lives while a tensor
 * over it does, copies of such tensors run in place, and failures leave
 * the registrations as they were. */
#include "../emu/emu_fns.h"
#include "test.h"

static const DLDataType f32 = {kDLFloat, 32, 1};

/* One runtime as these tests use it. */
typedef struct rt {
  emu e;
  DLDeviceType host;      /* the type pinned tensors get */
  DLDeviceType device;    /* the runtime's device memory */
  const char *reg;        /* its registration entry point */
  const char *unreg;      /* and the one that undoes it */
  const char *copy;       /* its 1-D asynchronous copy */
  const char *host_alloc; /* what a staging buffer would be allocated by */
} rt;

static rt cuda_rt(void) {
  rt r = {emu_cuda(), kDLCUDAHost, kDLCUDA, "cuMemHostRegister_v2",
          "cuMemHostUnregister", "cuMemcpyAsync", "cuMemHostAlloc"};
  CHECK_OK(dlb_runtime_status(DLB_RUNTIME_CUDA));
  return r;
}

static rt hip_rt(void) {
  rt r = {emu_hip(), kDLROCMHost, kDLROCM, "hipHostRegister",
          "hipHostUnregister", "hipMemcpyAsync", "hipHostMalloc"};
  CHECK_OK(dlb_runtime_status(DLB_RUNTIME_HIP));
  return r;
}

static long live_registrations(const rt *r) {
  return r->e.live_kind(EMU_LIVE_REGISTERED);
}

/* The memory kind at element i of t's data. */
static DLDeviceType kind_at(const DLManagedTensorVersioned *t, int64_t i) {
  DLDevice d;
  CHECK_OK(dlb_device_of_pointer((float *)t->dl_tensor.data + i, &d));
  return d.device_type;
}

/* Elements [start, stop) of t. */
static DLManagedTensorVersioned *part(DLManagedTensorVersioned *t,
                                      int64_t start, int64_t stop) {
  dlb_slice s = {start, stop, 1};
  DLManagedTensorVersioned *v = NULL;
  CHECK_OK(dlb_tensor_slice(t, 1, &s, &v));
  return v;
}

static DLManagedTensorVersioned *pin(const rt *r,
                                     const DLManagedTensorVersioned *t) {
  DLManagedTensorVersioned *p = NULL;
  CHECK_OK(dlb_tensor_pin(t, r->host, &p));
  CHECK_EQ_INT(p->dl_tensor.device.device_type, r->host);
  CHECK(p->dl_tensor.data == t->dl_tensor.data);
  return p;
}

/* Every element of t in [start, stop) is of kind k. */
static void check_kind(const DLManagedTensorVersioned *t, int64_t start,
                       int64_t stop, DLDeviceType k) {
  for (int64_t i = start; i < stop; i++)
    if (kind_at(t, i) != k)
      dlb_test_failed(__FILE__, __LINE__, "element %lld is of type %d, "
                      "not %d", (long long)i, (int)kind_at(t, i), (int)k);
}

/* A view in the middle pinned first, then the whole tensor: the parts on
 * either side are registered, the view's registration is shared, and all
 * three live as long as the whole tensor's pin. The other order (the
 * whole first) shares the whole's registration. */
static void view_then_whole(const rt *r) {
  DLManagedTensorVersioned *t = dlb_test_counting_floats(1024), *mid = part(t, 256, 512);
  DLManagedTensorVersioned *p = pin(r, mid), *all = pin(r, t);
  CHECK_EQ_INT(r->e.calls(r->reg), 3);
  CHECK_EQ_INT(live_registrations(r), 3);
  check_kind(t, 0, 1024, r->host);
  CHECK(((float *)all->dl_tensor.data)[1023] == 1023.0f);
  dlb_tensor_release(p);
  CHECK_EQ_INT(live_registrations(r), 3);
  check_kind(t, 0, 1024, r->host);
  dlb_tensor_release(all);
  CHECK_EQ_INT(r->e.calls(r->unreg), 3);
  check_kind(t, 0, 1024, kDLCPU);
  all = pin(r, t);
  p = pin(r, mid);
  CHECK_EQ_INT(r->e.calls(r->reg), 4);
  dlb_tensor_release(all);
  check_kind(t, 0, 1024, r->host);
  dlb_tensor_release(p);
  dlb_tensor_release(mid);
  dlb_tensor_release(t);
  CHECK_EQ_INT(r->e.live(), 0);
}

DLB_TEST(cuda_pin_view_then_whole) {
  rt r = cuda_rt();
  view_then_whole(&r);
}

DLB_TEST(hip_pin_view_then_whole) {
  rt r = hip_rt();
  view_then_whole(&r);
}

/* Two views that overlap in part: the second registers only what the
 * first does not cover and holds the first's registration too, since its
 * span uses it. A span covered by both registers nothing. */
static void overlapping_views(const rt *r) {
  DLManagedTensorVersioned *t = dlb_test_counting_floats(1024);
  DLManagedTensorVersioned *a = part(t, 0, 600), *b = part(t, 400, 1024);
  DLManagedTensorVersioned *pa = pin(r, a), *pb = pin(r, b);
  CHECK_EQ_INT(r->e.calls(r->reg), 2);
  check_kind(t, 0, 1024, r->host);
  DLManagedTensorVersioned *mid = part(t, 500, 700), *pm = pin(r, mid);
  DLManagedTensorVersioned *pall = pin(r, t);
  CHECK_EQ_INT(r->e.calls(r->reg), 2);
  dlb_tensor_release(pa);
  dlb_tensor_release(pall);
  dlb_tensor_release(pb);
  CHECK_EQ_INT(live_registrations(r), 2);
  check_kind(t, 400, 700, r->host);
  dlb_tensor_release(pm);
  CHECK_EQ_INT(r->e.calls(r->unreg), 2);
  check_kind(t, 0, 1024, kDLCPU);
  dlb_tensor_release(mid);
  dlb_tensor_release(a);
  dlb_tensor_release(b);
  dlb_tensor_release(t);
  CHECK_EQ_INT(r->e.live(), 0);
}

DLB_TEST(cuda_pin_overlapping_views) {
  rt r = cuda_rt();
  overlapping_views(&r);
}

DLB_TEST(hip_pin_overlapping_views) {
  rt r = hip_rt();
  overlapping_views(&r);
}

/* A tensor over several registrations copies like one over a single
 * registration: in place, without the staging buffer, both ways. 1 MiB
 * is large enough for pageable memory to be staged. */
static void copies_in_place(const rt *r) {
  enum { N = 1 << 18 };
  DLManagedTensorVersioned *t = dlb_test_counting_floats(N), *mid = part(t, N / 4, N / 2);
  DLManagedTensorVersioned *p = pin(r, mid), *all = pin(r, t);
  CHECK_EQ_INT(live_registrations(r), 3);
  int64_t shape[1] = {N};
  DLManagedTensorVersioned *d = NULL;
  CHECK_OK(dlb_tensor_alloc((DLDevice){r->device, 0}, f32, 1, shape, &d));
  long copies = r->e.calls(r->copy);
  CHECK_OK(dlb_copy_sync(&all->dl_tensor, &d->dl_tensor, NULL));
  memset(all->dl_tensor.data, 0, N * sizeof(float));
  CHECK_OK(dlb_copy_sync(&d->dl_tensor, &all->dl_tensor, NULL));
  CHECK_EQ_INT(r->e.calls(r->copy), copies + 2);
  CHECK_EQ_INT(r->e.calls(r->host_alloc), 0);
  const float *v = all->dl_tensor.data;
  for (int64_t i = 0; i < N; i++)
    if (v[i] != (float)i)
      dlb_test_failed(__FILE__, __LINE__, "element %lld: %g", (long long)i,
                      (double)v[i]);
  dlb_tensor_release(d);
  dlb_tensor_release(all);
  dlb_tensor_release(p);
  dlb_tensor_release(mid);
  dlb_tensor_release(t);
  CHECK_EQ_INT(r->e.live(), 0);
}

DLB_TEST(cuda_pin_overlap_copies_in_place) {
  rt r = cuda_rt();
  copies_in_place(&r);
}

DLB_TEST(hip_pin_overlap_copies_in_place) {
  rt r = hip_rt();
  copies_in_place(&r);
}

/* The runtime refusing the first or the second gap: the whole pin fails
 * with its error, a gap registered already is unregistered, and the
 * view's registration is left as it was, usable. */
static void gap_refused(const rt *r) {
  DLManagedTensorVersioned *t = dlb_test_counting_floats(1024), *mid = part(t, 256, 512);
  DLManagedTensorVersioned *p = pin(r, mid), *all = NULL;
  for (int nth = 1; nth <= 2; nth++) {
    long unregs = r->e.calls(r->unreg);
    dlb_test_failalloc_install(0);
    r->e.fail(r->reg, nth, 999);
    CHECK_STATUS(dlb_tensor_pin(t, r->host, &all), DLB_E_RUNTIME);
    CHECK(r->e.fail_fired());
    CHECK_ERROR_MENTIONS(r->reg);
    CHECK(all == NULL);
    CHECK_EQ_INT(dlb_test_failalloc_live(), 0);
    dlb_test_failalloc_remove();
    CHECK_EQ_INT(r->e.calls(r->unreg), unregs + nth - 1);
    CHECK_EQ_INT(live_registrations(r), 1);
    check_kind(t, 0, 256, kDLCPU);
    check_kind(t, 256, 512, r->host);
    check_kind(t, 512, 1024, kDLCPU);
  }
  all = pin(r, t);
  CHECK_EQ_INT(live_registrations(r), 3);
  dlb_tensor_release(p);
  dlb_tensor_release(all);
  CHECK_EQ_INT(live_registrations(r), 0);
  dlb_tensor_release(mid);
  dlb_tensor_release(t);
  CHECK_EQ_INT(r->e.live(), 0);
}

DLB_TEST(cuda_pin_overlap_gap_refused) {
  rt r = cuda_rt();
  gap_refused(&r);
}

DLB_TEST(hip_pin_overlap_gap_refused) {
  rt r = hip_rt();
  gap_refused(&r);
}

/* A framework's own registration of [p, p + size), as PyTorch's
 * cudaHostRegister or a ROCm framework's hipHostRegister makes it. */
static void others_register(const rt *r, void *p, size_t size) {
  if (r->host == kDLCUDAHost) {
    cu_fns cu = cu_fns_of(&r->e);
    cu_as_framework(&cu, 0);
    CHECK_EQ_INT(cu.cuMemHostRegister_v2(p, size, 0), 0);
  } else {
    hip_fns hip = hip_fns_of(&r->e);
    CHECK_EQ_INT(hip.hipHostRegister(p, size, 0), 0);
  }
}

static void others_unregister(const rt *r, void *p) {
  if (r->host == kDLCUDAHost) {
    cu_fns cu = cu_fns_of(&r->e);
    CHECK_EQ_INT(cu.cuMemHostUnregister(p), 0);
  } else {
    hip_fns hip = hip_fns_of(&r->e);
    CHECK_EQ_INT(hip.hipHostUnregister(p), 0);
  }
}

/* A gap someone else registered whole is used as it is and left to them;
 * a gap they registered in part is refused as before, and the gap of ours
 * registered meanwhile is undone. */
static void gap_pinned_by_others(const rt *r) {
  DLManagedTensorVersioned *t = dlb_test_counting_floats(1024), *mid = part(t, 256, 512);
  float *v = t->dl_tensor.data;
  others_register(r, v + 512, 512 * sizeof(float));
  DLManagedTensorVersioned *p = pin(r, mid), *all = pin(r, t);
  CHECK_EQ_INT(live_registrations(r), 3);
  dlb_tensor_release(p);
  dlb_tensor_release(all);
  CHECK_EQ_INT(live_registrations(r), 1);
  check_kind(t, 0, 512, kDLCPU);
  check_kind(t, 512, 1024, r->host);
  others_unregister(r, v + 512);
  others_register(r, v + 600, 100 * sizeof(float));
  p = pin(r, mid);
  all = NULL;
  long unregs = r->e.calls(r->unreg);
  CHECK_STATUS(dlb_tensor_pin(t, r->host, &all), DLB_E_RUNTIME);
  CHECK_ERROR_MENTIONS("only part of the range is registered");
  CHECK(all == NULL);
  CHECK_EQ_INT(r->e.calls(r->unreg), unregs + 1);
  CHECK_EQ_INT(live_registrations(r), 2);
  check_kind(t, 0, 256, kDLCPU);
  dlb_tensor_release(p);
  others_unregister(r, v + 600);
  dlb_tensor_release(mid);
  dlb_tensor_release(t);
  CHECK_EQ_INT(r->e.live(), 0);
}

DLB_TEST(cuda_pin_overlap_gap_pinned_by_others) {
  rt r = cuda_rt();
  gap_pinned_by_others(&r);
}

DLB_TEST(hip_pin_overlap_gap_pinned_by_others) {
  rt r = hip_rt();
  gap_pinned_by_others(&r);
}

/* For the loops below: the runtime, and a tensor with views over parts of
 * it, pinned one after the other. */
typedef struct loop_ctx {
  const rt *r;
  DLManagedTensorVersioned *views[3];
} loop_ctx;

/* Pins a middle view, a view that overlaps its end, then the whole
 * tensor, and releases them; on a failure, what was pinned before it
 * keeps exactly the registrations it had. */
static dlb_status pin_views_then_whole(void *ctx) {
  loop_ctx *c = ctx;
  DLManagedTensorVersioned *p[3] = {NULL, NULL, NULL};
  long before[3];
  dlb_status s = DLB_OK;
  int n = 0;
  for (; n < 3 && s == DLB_OK; n++) {
    before[n] = live_registrations(c->r);
    s = dlb_tensor_pin(c->views[n], c->r->host, &p[n]);
  }
  if (s != DLB_OK) {
    CHECK(p[n - 1] == NULL);
    CHECK_EQ_INT(live_registrations(c->r), before[n - 1]);
  }
  for (int i = 0; i < 3; i++) dlb_tensor_release(p[i]);
  CHECK_EQ_INT(live_registrations(c->r), 0);
  return s;
}

static loop_ctx loop_views(const rt *r, DLManagedTensorVersioned *t) {
  loop_ctx c = {r, {part(t, 256, 512), part(t, 400, 800), t}};
  return c;
}

static void release_views(loop_ctx *c) {
  dlb_tensor_release(c->views[0]);
  dlb_tensor_release(c->views[1]);
}

/* Allocation 1, 2, 3 ... failing in turn. The successful run allocates,
 * per pin, its context, the share of the tensor and the pinned tensor's
 * block (9); registration entries: one for the first pin's span, one for
 * the gap the second leaves, two for the gaps on either side of the
 * whole (4); and, for the pins whose span uses more than one
 * registration, the list of them (2). */
static void allocation_failures(const rt *r) {
  DLManagedTensorVersioned *t = dlb_test_counting_floats(1024);
  loop_ctx c = loop_views(r, t);
  CHECK_EQ_INT(dlb_test_oom_loop(pin_views_then_whole, &c), 9 + 4 + 2);
  release_views(&c);
  dlb_tensor_release(t);
  CHECK_EQ_INT(r->e.live(), 0);
}

DLB_TEST(cuda_pin_overlap_allocation_failures) {
  rt r = cuda_rt();
  allocation_failures(&r);
}

DLB_TEST(hip_pin_overlap_allocation_failures) {
  rt r = hip_rt();
  allocation_failures(&r);
}

/* Every runtime call failing in turn: nothing is left registered, and no
 * context is left pushed. */
static void every_call_failing(const rt *r) {
  DLManagedTensorVersioned *t = dlb_test_counting_floats(1024);
  loop_ctx c = loop_views(r, t);
  int fired = 0;
  for (int n = 1; n < 1000; n++) {
    r->e.fail(NULL, n, 999);
    dlb_status s = pin_views_then_whole(&c);
    if (!r->e.fail_fired()) {
      CHECK_OK(s);
      break;
    }
    fired++;
    CHECK_EQ_INT(r->e.live(), 0);
    if (r->host == kDLCUDAHost) CHECK_EQ_INT(r->e.context_depth(), 0);
  }
  CHECK(fired >= 4);
  release_views(&c);
  dlb_tensor_release(t);
  CHECK_EQ_INT(r->e.live(), 0);
}

DLB_TEST(cuda_pin_overlap_every_call_failing) {
  rt r = cuda_rt();
  every_call_failing(&r);
}

DLB_TEST(hip_pin_overlap_every_call_failing) {
  rt r = hip_rt();
  every_call_failing(&r);
}
