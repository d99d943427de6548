/* test_share_pin.c -- shared memory pinned in each process that holds it,
 * against the emulated CUDA driver and HIP runtime: on receipt or later,
 * in four processes at once, unregistered before the memory goes, and
 * failures that leave nothing behind. */
#include "../emu/emu_fns.h"
#include "share_util.h"

static DLDeviceType kind_of(const void *p) {
  DLDevice d;
  CHECK_OK(dlb_device_of_pointer(p, &d));
  return d.device_type;
}

static void pin_on_receipt(emu e, uint64_t flag, DLDeviceType host_type,
                           const char *unregister) {
  DLManagedTensorVersioned *t = share_bytes(3 * 4096);
  ((uint8_t *)t->dl_tensor.data)[5] = 55;
  int sv[2];
  share_socketpair(SOCK_STREAM, sv);
  int fds = dlb_test_count_fds();
  CHECK_OK(dlb_share_send(sv[0], t));
  DLManagedTensorVersioned *p = NULL;
  CHECK_OK(dlb_share_recv(sv[1], flag, &p));
  CHECK_EQ_INT(p->dl_tensor.device.device_type, host_type);
  CHECK_EQ_INT(p->dl_tensor.device.device_id, 0);
  CHECK_EQ_INT(kind_of(p->dl_tensor.data), host_type);
  CHECK_EQ_INT(kind_of((uint8_t *)p->dl_tensor.data + 3 * 4096 - 1), host_type);
  /* Only the received mapping is pinned, not the sender's. */
  CHECK_EQ_INT(kind_of(t->dl_tensor.data), kDLCPU);
  CHECK_EQ_INT(e.live_kind(EMU_LIVE_REGISTERED), 1);
  CHECK_EQ_INT(((uint8_t *)p->dl_tensor.data)[5], 55);
  CHECK_EQ_INT(dlb_tensor_is_shared(p), 1);
  /* A pinned import exports again, as host memory. */
  share_handle h = share_export(p);
  DLManagedTensorVersioned *q = NULL;
  CHECK_OK(dlb_share_import(h.bytes, h.len, h.fd, 0, &q));
  close(h.fd);
  CHECK_EQ_INT(q->dl_tensor.device.device_type, kDLCPU);
  ((uint8_t *)q->dl_tensor.data)[6] = 66;
  CHECK_EQ_INT(((uint8_t *)p->dl_tensor.data)[6], 66);
  dlb_tensor_release(q);
  void *data = p->dl_tensor.data;
  dlb_tensor_release(p);
  CHECK_EQ_INT(e.calls(unregister), 1);
  CHECK_EQ_INT(e.live(), 0);
  CHECK_EQ_INT(kind_of(data), kDLCPU);
  CHECK_EQ_INT(dlb_test_count_fds(), fds);
  close(sv[0]);
  close(sv[1]);
  dlb_tensor_release(t);
}

DLB_TEST(share_pin_cuda_on_receipt) {
  pin_on_receipt(emu_cuda(), DLB_SHARE_PIN_CUDA, kDLCUDAHost,
                 "cuMemHostUnregister");
}

DLB_TEST(share_pin_hip_on_receipt) {
  pin_on_receipt(emu_hip(), DLB_SHARE_PIN_ROCM, kDLROCMHost,
                 "hipHostUnregister");
}

DLB_TEST(share_pin_existing_shared_tensor_stays_shared) {
  emu e = emu_cuda();
  DLManagedTensorVersioned *t = share_bytes(100);
  DLManagedTensorVersioned *p = NULL;
  CHECK_OK(dlb_tensor_pin(t, kDLCUDAHost, &p));
  CHECK_EQ_INT(dlb_tensor_is_shared(p), 1);
  DLManagedTensorVersioned *v = NULL;
  CHECK_OK(dlb_tensor_select(p, 0, 10, &v));
  CHECK_EQ_INT(dlb_tensor_is_shared(v), 1);
  ((uint8_t *)v->dl_tensor.data)[10] = 7;
  share_handle h = share_export(v);
  DLManagedTensorVersioned *u = NULL;
  CHECK_OK(dlb_share_import(h.bytes, h.len, h.fd, 0, &u));
  close(h.fd);
  CHECK_EQ_INT(u->dl_tensor.ndim, 0);
  CHECK_EQ_INT(*((uint8_t *)u->dl_tensor.data + u->dl_tensor.byte_offset), 7);
  dlb_tensor_release(u);
  dlb_tensor_release(v);
  dlb_tensor_release(p);
  dlb_tensor_release(t);
  CHECK_EQ_INT(e.live(), 0);
}

DLB_TEST(share_pin_cuda_in_four_processes) {
  emu_cuda();
  share_run_workers(0, 1 << 20, DLB_SHARE_PIN_CUDA);
  share_run_workers(1, 1 << 20, DLB_SHARE_PIN_CUDA);
}

DLB_TEST(share_pin_hip_in_four_processes) {
  emu_hip();
  share_run_workers(0, 1 << 20, DLB_SHARE_PIN_ROCM);
  share_run_workers(1, 1 << 20, DLB_SHARE_PIN_ROCM);
}

DLB_TEST(share_pin_refused_leaves_nothing) {
  emu e = emu_cuda();
  DLManagedTensorVersioned *t = share_bytes(100);
  share_handle h = share_export(t);
  int fds = dlb_test_count_fds();
  e.fail("cuMemHostRegister_v2", 1, 2);
  DLManagedTensorVersioned *u = NULL;
  CHECK_STATUS(dlb_share_import(h.bytes, h.len, h.fd, DLB_SHARE_PIN_CUDA, &u),
               DLB_E_NOMEM);
  CHECK(e.fail_fired());
  CHECK(u == NULL);
  CHECK_EQ_INT(dlb_test_count_fds(), fds);
  CHECK_EQ_INT(e.live(), 0);
  close(h.fd);
  dlb_tensor_release(t);
}

DLB_TEST(share_pin_without_runtime) {
  setenv("DLBRIDGE_CUDA_LIBRARY", "/nonexistent/libcuda.so.1", 1);
  DLManagedTensorVersioned *t = share_bytes(100);
  share_handle h = share_export(t);
  int fds = dlb_test_count_fds();
  DLManagedTensorVersioned *u = NULL;
  CHECK_STATUS(dlb_share_import(h.bytes, h.len, h.fd, DLB_SHARE_PIN_CUDA, &u),
               DLB_E_NO_RUNTIME);
  CHECK_EQ_INT(dlb_test_count_fds(), fds);
  close(h.fd);
  dlb_tensor_release(t);
}

static dlb_status body_pin_import(void *ctx) {
  share_handle *h = ctx;
  DLManagedTensorVersioned *u = NULL;
  dlb_status st = dlb_share_import(h->bytes, h->len, h->fd,
                                   DLB_SHARE_PIN_CUDA, &u);
  if (st == DLB_OK) dlb_tensor_release(u);
  return st;
}

DLB_TEST(share_pin_oom_import) {
  emu e = emu_cuda();
  DLManagedTensorVersioned *t = share_bytes(100);
  share_handle h = share_export(t);
  int fds = dlb_test_count_fds();
  /* The import's two; the pin's context, share, registration entry,
   * and its tensor's block (the owner is in it). */
  CHECK_EQ_INT(dlb_test_oom_loop(body_pin_import, &h), 6);
  CHECK_EQ_INT(dlb_test_count_fds(), fds);
  CHECK_EQ_INT(e.live(), 0);
  close(h.fd);
  dlb_tensor_release(t);
}
