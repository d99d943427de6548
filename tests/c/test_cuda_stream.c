/* test_cuda_stream.c -- the DLPack stream convention, hand-off between
 * streams without blocking the host, and host waits before reading pinned
 * or managed memory. */
#include "../emu/emu_fns.h"
#include "test.h"

static const DLDataType f32 = {kDLFloat, 32, 1};
static const DLDevice cuda0 = {kDLCUDA, 0};

DLB_TEST(cuda_stream_from_dlpack_conventions) {
  void *s = (void *)0x99;
  int sync = 7;
  static const DLDeviceType cuda_kinds[] = {kDLCUDA, kDLCUDAHost,
                                            kDLCUDAManaged};
  for (int k = 0; k < 3; k++) {
    CHECK_OK(dlb_stream_from_dlpack(cuda_kinds[k], DLB_STREAM_NONE, &s, &sync));
    CHECK(s == DLB_CUDA_STREAM_LEGACY);
    CHECK_EQ_INT(sync, 1);
    CHECK_OK(dlb_stream_from_dlpack(cuda_kinds[k], 1, &s, &sync));
    CHECK(s == DLB_CUDA_STREAM_LEGACY);
    CHECK_OK(dlb_stream_from_dlpack(cuda_kinds[k], 2, &s, &sync));
    CHECK(s == DLB_CUDA_STREAM_PER_THREAD);
    CHECK_OK(dlb_stream_from_dlpack(cuda_kinds[k], 0x7f001234, &s, &sync));
    CHECK(s == (void *)0x7f001234);
    CHECK_OK(dlb_stream_from_dlpack(cuda_kinds[k], -1, &s, &sync));
    CHECK(s == NULL);
    CHECK_EQ_INT(sync, 0);
    s = (void *)0x99;
    CHECK_STATUS(dlb_stream_from_dlpack(cuda_kinds[k], 0, &s, &sync),
                 DLB_E_INVAL);
    CHECK_ERROR_MENTIONS("never 0");
    CHECK_STATUS(dlb_stream_from_dlpack(cuda_kinds[k], -2, &s, &sync),
                 DLB_E_INVAL);
    CHECK(s == (void *)0x99);
  }
  static const DLDeviceType rocm_kinds[] = {kDLROCM, kDLROCMHost};
  for (int k = 0; k < 2; k++) {
    CHECK_OK(dlb_stream_from_dlpack(rocm_kinds[k], DLB_STREAM_NONE, &s, &sync));
    CHECK(s == NULL);
    CHECK_EQ_INT(sync, 1);
    s = (void *)0x99;
    CHECK_OK(dlb_stream_from_dlpack(rocm_kinds[k], 0, &s, &sync));
    CHECK(s == NULL);
    CHECK_OK(dlb_stream_from_dlpack(rocm_kinds[k], 12345, &s, &sync));
    CHECK(s == (void *)12345);
    CHECK_STATUS(dlb_stream_from_dlpack(rocm_kinds[k], 1, &s, &sync),
                 DLB_E_INVAL);
    CHECK_STATUS(dlb_stream_from_dlpack(rocm_kinds[k], 2, &s, &sync),
                 DLB_E_INVAL);
    CHECK_OK(dlb_stream_from_dlpack(rocm_kinds[k], -1, &s, &sync));
    CHECK_EQ_INT(sync, 0);
  }
  /* cpu needs no synchronisation: both outputs are set, whatever they
   * held before. */
  s = (void *)0x99;
  sync = 7;
  CHECK_OK(dlb_stream_from_dlpack(kDLCPU, DLB_STREAM_NONE, &s, &sync));
  CHECK(s == NULL);
  CHECK_EQ_INT(sync, 0);
  CHECK_STATUS(dlb_stream_from_dlpack(kDLCPU, 1, &s, &sync), DLB_E_INVAL);
  CHECK_STATUS(dlb_stream_from_dlpack(kDLCPU, -1, &s, &sync), DLB_E_INVAL);
  CHECK_STATUS(dlb_stream_from_dlpack(kDLVulkan, 1, &s, &sync), DLB_E_DEVICE);
  CHECK_STATUS(dlb_stream_from_dlpack(kDLCUDA, 1, NULL, &sync), DLB_E_INVAL);
  CHECK_STATUS(dlb_stream_from_dlpack(kDLCUDA, 1, &s, NULL), DLB_E_INVAL);
}

typedef struct scene {
  emu e;
  cu_fns cu;
  dlb__cu_stream producer, consumer;
  DLManagedTensorVersioned *a, *b, *host;
} scene;

/* Device tensor a (values 0, 1, ...), device tensor b and pinned host
 * (zeros), and two non-blocking streams, as two frameworks would have. */
static void scene_open(scene *s) {
  s->e = emu_cuda();
  CHECK_OK(dlb_runtime_status(DLB_RUNTIME_CUDA));
  s->cu = cu_fns_of(&s->e);
  cu_as_framework(&s->cu, 0);
  CHECK_EQ_INT(s->cu.cuStreamCreate(&s->producer, DLB__CU_STREAM_NON_BLOCKING),
               0);
  CHECK_EQ_INT(s->cu.cuStreamCreate(&s->consumer, DLB__CU_STREAM_NON_BLOCKING),
               0);
  int64_t shape[1] = {256};
  CHECK_OK(dlb_tensor_alloc(cuda0, f32, 1, shape, &s->a));
  CHECK_OK(dlb_tensor_alloc(cuda0, f32, 1, shape, &s->b));
  CHECK_OK(dlb_tensor_alloc((DLDevice){kDLCUDAHost, 0}, f32, 1, shape,
                            &s->host));
  float *av = s->e.shadow(s->a->dl_tensor.data);
  for (int i = 0; i < 256; i++) av[i] = (float)i;
  memset(s->e.shadow(s->b->dl_tensor.data), 0, 1024);
  memset(s->host->dl_tensor.data, 0, 1024);
}

static void scene_close(scene *s) {
  dlb_tensor_release(s->a);
  dlb_tensor_release(s->b);
  dlb_tensor_release(s->host);
  CHECK_EQ_INT(s->cu.cuStreamDestroy_v2(s->producer), 0);
  CHECK_EQ_INT(s->cu.cuStreamDestroy_v2(s->consumer), 0);
  CHECK_EQ_INT(s->e.live(), 0);
}

static long host_waits(const emu *e) {
  return e->calls("cuStreamSynchronize") + e->calls("cuEventSynchronize") +
         e->calls("cuCtxSynchronize");
}

/* The producer writes b on its stream; the consumer reads b on its own.
 * With the hand-off the consumer sees the producer's result, without it
 * it does not; and the hand-off never makes the host wait. */
DLB_TEST(cuda_stream_wait_orders_the_consumer) {
  for (int handoff = 0; handoff <= 1; handoff++) {
    scene s;
    scene_open(&s);
    CHECK_OK(dlb_copy_async(&s.a->dl_tensor, &s.b->dl_tensor, s.producer));
    long waits = host_waits(&s.e), records = s.e.calls("cuEventRecord");
    if (handoff) CHECK_OK(dlb_stream_wait(cuda0, s.consumer, s.producer));
    CHECK_EQ_INT(host_waits(&s.e), waits);
    CHECK_EQ_INT(s.e.live_kind(EMU_LIVE_EVENT), 0);
    CHECK_EQ_INT(s.e.calls("cuEventRecord"), records + handoff);
    CHECK_OK(dlb_copy_async(&s.b->dl_tensor, &s.host->dl_tensor, s.consumer));
    CHECK_EQ_INT(s.cu.cuStreamSynchronize(s.consumer), 0);
    float *h = s.host->dl_tensor.data;
    CHECK(h[200] == (handoff ? 200.0f : 0.0f));
    CHECK_EQ_INT(s.e.context_depth(), 1);
    scene_close(&s);
  }
}

DLB_TEST(cuda_stream_wait_same_stream) {
  scene s;
  scene_open(&s);
  long before = s.e.calls(NULL);
  CHECK_OK(dlb_stream_wait(cuda0, s.producer, s.producer));
  CHECK_OK(dlb_stream_wait(cuda0, NULL, DLB_CUDA_STREAM_LEGACY));
  CHECK_EQ_INT(s.e.calls(NULL), before);
  scene_close(&s);
}

DLB_TEST(cuda_stream_wait_failures) {
  static const char *const calls[] = {"cuEventCreate", "cuEventRecord",
                                      "cuStreamWaitEvent"};
  scene s;
  scene_open(&s);
  for (int i = 0; i < 3; i++) {
    s.e.fail(calls[i], 1, 400);
    CHECK_STATUS(dlb_stream_wait(cuda0, s.consumer, s.producer),
                 DLB_E_RUNTIME);
    CHECK_ERROR_MENTIONS(calls[i]);
    CHECK_ERROR_MENTIONS("CUDA_ERROR_INVALID_HANDLE");
    CHECK_EQ_INT(s.e.live_kind(EMU_LIVE_EVENT), 0);
  }
  /* A handle the driver does not know. */
  CHECK_STATUS(dlb_stream_wait(cuda0, (void *)0x1234, s.producer),
               DLB_E_RUNTIME);
  CHECK_STATUS(dlb_stream_wait((DLDevice){kDLCUDA, 7}, s.consumer, s.producer),
               DLB_E_NO_DEVICE);
  CHECK_STATUS(dlb_stream_wait((DLDevice){kDLOpenCL, 0}, NULL, NULL),
               DLB_E_DEVICE);
  CHECK_EQ_INT(s.e.live_kind(EMU_LIVE_EVENT), 0);
  scene_close(&s);
}

/* Importing pinned memory for host use: the producer makes the legacy
 * stream wait (what __dlpack__(stream=1) does), the consumer waits for
 * the legacy stream on the host; then the host reads the finished data. */
DLB_TEST(cuda_stream_host_reads_after_the_producer) {
  for (int handoff = 0; handoff <= 1; handoff++) {
    scene s;
    scene_open(&s);
    CHECK_OK(dlb_copy_async(&s.a->dl_tensor, &s.host->dl_tensor, s.producer));
    void *legacy = NULL;
    int sync = 0;
    CHECK_OK(dlb_stream_from_dlpack(kDLCUDAHost, 1, &legacy, &sync));
    if (handoff) CHECK_OK(dlb_stream_wait(cuda0, legacy, s.producer));
    CHECK_OK(dlb_stream_synchronize((DLDevice){kDLCUDAHost, 0}, legacy));
    float *h = s.host->dl_tensor.data;
    CHECK(h[10] == (handoff ? 10.0f : 0.0f));
    scene_close(&s);
  }
}

/* Host-type memory: the special handles are waited for on every device
 * the process uses, a stream handle once. */
DLB_TEST(cuda_stream_synchronize_host_types) {
  emu e = emu_cuda();
  CHECK_OK(dlb_runtime_status(DLB_RUNTIME_CUDA));
  cu_fns cu = cu_fns_of(&e);
  cu_as_framework(&cu, 1);
  long n = e.calls("cuStreamSynchronize");
  CHECK_OK(dlb_stream_synchronize((DLDevice){kDLCUDAManaged, 0}, NULL));
  CHECK_EQ_INT(e.calls("cuStreamSynchronize"), n + 1); /* only cuda:1 */
  int64_t shape[1] = {4};
  DLManagedTensorVersioned *t = NULL;
  CHECK_OK(dlb_tensor_alloc(cuda0, f32, 1, shape, &t));
  CHECK_OK(dlb_stream_synchronize((DLDevice){kDLCUDAHost, 0},
                                  DLB_CUDA_STREAM_PER_THREAD));
  CHECK_EQ_INT(e.calls("cuStreamSynchronize"), n + 3); /* now both */
  dlb__cu_stream st = NULL;
  CHECK_EQ_INT(cu.cuStreamCreate(&st, 0), 0);
  CHECK_OK(dlb_stream_synchronize((DLDevice){kDLCUDAHost, 0}, st));
  CHECK_EQ_INT(e.calls("cuStreamSynchronize"), n + 4);
  CHECK_OK(dlb_stream_synchronize((DLDevice){kDLCUDA, 1}, st));
  CHECK_EQ_INT(e.calls("cuStreamSynchronize"), n + 5);
  e.fail("cuStreamSynchronize", 1, 999);
  CHECK_STATUS(dlb_stream_synchronize(cuda0, st), DLB_E_RUNTIME);
  CHECK_ERROR_MENTIONS("cuStreamSynchronize");
  CHECK_STATUS(dlb_stream_synchronize((DLDevice){kDLCPU, 0}, NULL),
               DLB_E_DEVICE);
  CHECK_ERROR_MENTIONS("cpu (device_type 1) has no GPU runtime streams");
  dlb_tensor_release(t);
  CHECK_EQ_INT(cu.cuStreamDestroy_v2(st), 0);
  CHECK_EQ_INT(e.live(), 0);
}

DLB_TEST(cuda_device_synchronize_waits_for_everything) {
  scene s;
  scene_open(&s);
  CHECK_OK(dlb_copy_async(&s.a->dl_tensor, &s.b->dl_tensor, s.producer));
  CHECK_OK(dlb_copy_async(&s.b->dl_tensor, &s.host->dl_tensor, s.producer));
  CHECK_EQ_INT(s.e.pending(), 2);
  CHECK_OK(dlb_device_synchronize(cuda0));
  CHECK_EQ_INT(s.e.pending(), 0);
  CHECK(((float *)s.host->dl_tensor.data)[255] == 255.0f);
  long n = s.e.calls("cuCtxSynchronize");
  long retains = s.e.calls("cuDevicePrimaryCtxRetain");
  CHECK_OK(dlb_device_synchronize((DLDevice){kDLCUDAHost, 0}));
  CHECK_EQ_INT(s.e.calls("cuCtxSynchronize"), n + 1); /* cuda:1 unused */
  /* cuda:0 was the one: cuda:1's context was not made to wait on. */
  CHECK_EQ_INT(s.e.calls("cuDevicePrimaryCtxRetain"), retains);
  s.e.fail("cuCtxSynchronize", 1, 999);
  CHECK_STATUS(dlb_device_synchronize(cuda0), DLB_E_RUNTIME);
  CHECK_ERROR_MENTIONS("cuCtxSynchronize on cuda:0");
  CHECK_STATUS(dlb_device_synchronize((DLDevice){kDLCUDA, 2}),
               DLB_E_NO_DEVICE);
  scene_close(&s);
}
