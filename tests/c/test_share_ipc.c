/* test_share_ipc.c -- cuda and rocm device tensors between processes
 * through IPC handles, against the emulated runtimes: four processes read
 * and write one
 * allocation, each waits for the exporter's queued work, each opens the
 * allocation once however often it imports it, and every refusal (memory
 * that cannot be exported, a handle opened where it was made or after the
 * exporter left, a handle claiming more memory than there is, runtime
 * failures, allocation failures) leaves nothing open. */
#include <signal.h>
#include <sys/wait.h>

#include "../emu/emu_fns.h"
#include "share_util.h"

#define N (64 * 1024)
#define PROCS 4

/* What differs between the runtimes in these tests. */
typedef struct rt {
  emu (*load)(void);
  DLDeviceType type;
  const char *open, *close, *open_event;
} rt;

static const rt CUDA = {emu_cuda, kDLCUDA, "cuIpcOpenMemHandle_v2",
                        "cuIpcCloseMemHandle", "cuIpcOpenEventHandle"};
static const rt HIP = {emu_hip, kDLROCM, "hipIpcOpenMemHandle",
                       "hipIpcCloseMemHandle", "hipIpcOpenEventHandle"};

static DLManagedTensorVersioned *device_bytes(DLDeviceType type, int64_t n) {
  DLManagedTensorVersioned *t = NULL;
  CHECK_OK(dlb_tensor_alloc((DLDevice){type, 0}, share_u8, 1, &n, &t));
  return t;
}

static DLManagedTensorVersioned *cuda_bytes(int64_t n) {
  return device_bytes(kDLCUDA, n);
}

static DLManagedTensorVersioned *host_bytes(int64_t n) {
  DLManagedTensorVersioned *t = NULL;
  CHECK_OK(dlb_tensor_alloc((DLDevice){kDLCPU, 0}, share_u8, 1, &n, &t));
  return t;
}

static uint8_t pattern(int who, int64_t k) { return (uint8_t)(k * 11 + who); }

static pid_t fork_child(int *parent_end, int *child_end) {
  int sv[2];
  share_socketpair(SOCK_STREAM, sv);
  fflush(NULL);
  pid_t pid = fork();
  CHECK(pid >= 0);
  if (pid == 0) {
    close(sv[0]);
    *child_end = sv[1];
  } else {
    close(sv[1]);
    *parent_end = sv[0];
  }
  return pid;
}

static void wait_ok(pid_t pid) {
  int st = 0;
  CHECK(waitpid(pid, &st, 0) == pid);
  if (!WIFEXITED(st) || WEXITSTATUS(st) != 0)
    dlb_test_failed(__FILE__, __LINE__, "child %d failed (status 0x%x)",
                    (int)pid, st);
}

/* Worker i: imports the tensor twice, checks the exporter's data, writes
 * its quarter through a view of the second import. */
static void ipc_worker(const rt *r, emu e, int sock, int i, int has_events) {
  long opens = e.calls(r->open);
  long devices = e.live_kind(EMU_LIVE_DEVICE);
  long events = e.live_kind(EMU_LIVE_EVENT);
  DLManagedTensorVersioned *a = NULL, *b = NULL;
  CHECK_OK(dlb_share_recv(sock, 0, &a));
  CHECK_OK(dlb_share_recv(sock, 0, &b));
  /* One open for both imports, and one interprocess event per import,
   * destroyed at once. */
  CHECK_EQ_INT(e.calls(r->open) - opens, 1);
  CHECK_EQ_INT(e.calls(r->open_event), has_events ? 2 : 0);
  CHECK_EQ_INT(e.live_kind(EMU_LIVE_DEVICE) - devices, 1);
  CHECK_EQ_INT(a->dl_tensor.device.device_type, r->type);
  CHECK_EQ_INT(a->dl_tensor.device.device_id, 0);
  CHECK(a->dl_tensor.data == b->dl_tensor.data);
  CHECK_EQ_INT(dlb_tensor_is_shared(a), 1);
  DLManagedTensorVersioned *h = host_bytes(N);
  CHECK_OK(dlb_copy_sync(&a->dl_tensor, &h->dl_tensor, NULL));
  const uint8_t *v = h->dl_tensor.data;
  for (int64_t k = 0; k < N; k++)
    if (v[k] != pattern(9, k))
      dlb_test_failed(__FILE__, __LINE__, "worker %d: byte %lld is %u", i,
                      (long long)k, v[k]);
  dlb_tensor_release(a);
  CHECK_EQ_INT(e.calls(r->close), 0);
  /* Everyone has read the exporter's data before anyone writes. */
  char go = 0;
  CHECK(write(sock, "r", 1) == 1);
  CHECK(read(sock, &go, 1) == 1);
  dlb_slice part = {i * (N / PROCS), (i + 1) * (N / PROCS), 1};
  DLManagedTensorVersioned *q = NULL, *src = NULL;
  CHECK_OK(dlb_tensor_slice(b, 1, &part, &q));
  CHECK_OK(dlb_tensor_slice(h, 1, &part, &src));
  uint8_t *w = (uint8_t *)src->dl_tensor.data + src->dl_tensor.byte_offset;
  for (int64_t k = 0; k < N / PROCS; k++)
    w[k] = pattern(i, i * (N / PROCS) + k);
  CHECK_OK(dlb_copy_sync(&src->dl_tensor, &q->dl_tensor, NULL));
  dlb_tensor_release(q);
  dlb_tensor_release(src);
  dlb_tensor_release(h);
  dlb_tensor_release(b);
  CHECK_EQ_INT(e.calls(r->close), 1);
  CHECK_EQ_INT(e.live_kind(EMU_LIVE_DEVICE), devices);
  CHECK_EQ_INT(e.live_kind(EMU_LIVE_EVENT), events);
  CHECK(write(sock, "w", 1) == 1);
}

/* A stream of the runtime, as a framework would make it. */
static void *make_stream(const rt *r, const emu *e) {
  if (r == &CUDA) {
    cu_fns f = cu_fns_of(e);
    cu_as_framework(&f, 0);
    dlb__cu_stream s = NULL;
    CHECK_EQ_INT(f.cuStreamCreate(&s, 0), 0);
    return s;
  }
  hip_fns f = hip_fns_of(e);
  dlb__hip_stream s = NULL;
  CHECK_EQ_INT(f.hipStreamCreateWithFlags(&s, 0), 0);
  return s;
}

static void destroy_stream(const rt *r, const emu *e, void *s) {
  if (r == &CUDA)
    CHECK_EQ_INT(cu_fns_of(e).cuStreamDestroy_v2(s), 0);
  else
    CHECK_EQ_INT(hip_fns_of(e).hipStreamDestroy(s), 0);
}

/* The exporter queues its write on a stream of its own, exports, and
 * four workers check it, then each writes a quarter. events: whether the
 * runtime has interprocess events (else the export synchronises). */
static void four_processes(const rt *r, int events) {
  emu e = r->load();
  DLManagedTensorVersioned *d = device_bytes(r->type, N);
  DLManagedTensorVersioned *h = host_bytes(N);
  uint8_t *v = h->dl_tensor.data;
  for (int64_t k = 0; k < N; k++) v[k] = pattern(9, k);
  void *stream = make_stream(r, &e);
  CHECK_OK(dlb_copy_async(&h->dl_tensor, &d->dl_tensor, stream));
  CHECK(e.pending() > 0);
  share_handle hd = share_export(d);
  CHECK_EQ_INT(hd.fd, -1);
  /* Exporting recorded the device's interprocess event after that work
   * (or synchronised the device). */
  CHECK_EQ_INT(e.pending(), 0);
  CHECK_EQ_INT(e.live_kind(EMU_LIVE_EVENT), 1);
  CHECK_EQ_INT(dlb_tensor_is_shared(d), 0);
  pid_t pids[PROCS];
  int socks[PROCS];
  for (int i = 0; i < PROCS; i++) {
    int child = -1;
    pids[i] = fork_child(&socks[i], &child);
    if (pids[i] == 0) {
      ipc_worker(r, e, child, i, events);
      _exit(0);
    }
    CHECK_OK(dlb_share_send(socks[i], d));
    CHECK(send(socks[i], hd.bytes, hd.len, 0) == (ssize_t)hd.len);
  }
  char c = 0;
  for (int i = 0; i < PROCS; i++) {
    CHECK(read(socks[i], &c, 1) == 1);
    CHECK_EQ_INT(c, 'r');
  }
  for (int i = 0; i < PROCS; i++) CHECK(write(socks[i], "g", 1) == 1);
  for (int i = 0; i < PROCS; i++) {
    CHECK(read(socks[i], &c, 1) == 1);
    CHECK_EQ_INT(c, 'w');
    wait_ok(pids[i]);
    close(socks[i]);
  }
  /* Every worker's writes, in the exporter's memory. */
  memset(v, 0, N);
  CHECK_OK(dlb_copy_sync(&d->dl_tensor, &h->dl_tensor, NULL));
  for (int64_t k = 0; k < N; k++)
    CHECK_EQ_INT(v[k], pattern((int)(k / (N / PROCS)), k));
  destroy_stream(r, &e, stream);
  dlb_tensor_release(h);
  dlb_tensor_release(d);
}

DLB_TEST(share_ipc_cuda_four_processes) { four_processes(&CUDA, 1); }
DLB_TEST(share_ipc_hip_four_processes) { four_processes(&HIP, 1); }

DLB_TEST(share_ipc_hip_without_interprocess_events) {
  /* ROCm 5 has no interprocess events: the export synchronises. */
  setenv("EMU_HIP_VERSION", "50200000", 1);
  four_processes(&HIP, 0);
}

DLB_TEST(share_ipc_views_and_reexport) {
  emu e = emu_cuda();
  DLManagedTensorVersioned *d = cuda_bytes(1000);
  DLManagedTensorVersioned *h = host_bytes(1000);
  for (int k = 0; k < 1000; k++) ((uint8_t *)h->dl_tensor.data)[k] = (uint8_t)k;
  CHECK_OK(dlb_copy_sync(&h->dl_tensor, &d->dl_tensor, NULL));
  /* A backwards view from inside the allocation. */
  dlb_slice s = {900, 99, -2};
  DLManagedTensorVersioned *v = NULL;
  CHECK_OK(dlb_tensor_slice(d, 1, &s, &v));
  int parent = -1, child = -1, grand = -1, gchild = -1;
  pid_t pid = fork_child(&parent, &child);
  if (pid == 0) {
    DLManagedTensorVersioned *u = NULL;
    CHECK_OK(dlb_share_recv(child, 0, &u));
    CHECK_EQ_INT(u->dl_tensor.shape[0], 401);
    CHECK_EQ_INT(u->dl_tensor.strides[0], -2);
    DLManagedTensorVersioned *o = host_bytes(401);
    CHECK_OK(dlb_copy_sync(&u->dl_tensor, &o->dl_tensor, NULL));
    for (int k = 0; k < 401; k++)
      CHECK_EQ_INT(((uint8_t *)o->dl_tensor.data)[k], (uint8_t)(900 - 2 * k));
    /* An import passes on: a third process gets the same allocation. */
    pid_t g = fork_child(&grand, &gchild);
    if (g == 0) {
      DLManagedTensorVersioned *x = NULL;
      CHECK_OK(dlb_share_recv(gchild, 0, &x));
      CHECK_OK(dlb_copy_sync(&x->dl_tensor, &o->dl_tensor, NULL));
      CHECK_EQ_INT(((uint8_t *)o->dl_tensor.data)[400], 100);
      dlb_tensor_release(x);
      /* The host tensors came with the fork: freed, as any process frees
       * its own (device memory goes with the process). */
      dlb_tensor_release(o);
      dlb_tensor_release(h);
      _exit(0);
    }
    CHECK_OK(dlb_share_send(grand, u));
    wait_ok(g);
    dlb_tensor_release(o);
    dlb_tensor_release(u);
    dlb_tensor_release(h);
    _exit(0);
  }
  CHECK_OK(dlb_share_send(parent, v));
  wait_ok(pid);
  dlb_tensor_release(v);
  dlb_tensor_release(h);
  dlb_tensor_release(d);
  (void)e;
}

DLB_TEST(share_ipc_refuses_what_cannot_be_exported) {
  emu e = emu_cuda();
  cu_fns f = cu_fns_of(&e);
  uint8_t buf[DLB_SHARE_HANDLE_MAX];
  size_t len = 0;
  int fd = 5;
  /* Managed memory has no IPC. */
  int64_t n = 64;
  DLManagedTensorVersioned *m = NULL;
  CHECK_OK(dlb_tensor_alloc((DLDevice){kDLCUDAManaged, 0}, share_u8, 1, &n,
                            &m));
  CHECK_STATUS(dlb_share_export(m, buf, sizeof buf, &len, &fd), DLB_E_INVAL);
  CHECK_ERROR_MENTIONS("not shared memory (cuda_managed memory");
  /* cuda-labelled memory that is not a cuMemAlloc allocation. */
  cu_as_framework(&f, 0);
  void *pinned = NULL;
  CHECK_EQ_INT(f.cuMemHostAlloc(&pinned, 4096, 0), 0);
  DLTensor desc = {pinned, {kDLCUDA, 0}, 1, share_u8, &n, NULL, 0};
  CHECK_STATUS(dlb_share_export(&(DLManagedTensorVersioned){
                                    {1, 3}, NULL, NULL, 0, desc},
                                buf, sizeof buf, &len, &fd),
               DLB_E_UNSUPPORTED);
  CHECK_ERROR_MENTIONS("not memory of cuMemAlloc");
  /* Elements past the end of their allocation. */
  DLManagedTensorVersioned *d = cuda_bytes(64);
  int64_t more = 65;
  desc.data = d->dl_tensor.data;
  desc.shape = &more;
  CHECK_STATUS(dlb_share_export(&(DLManagedTensorVersioned){
                                    {1, 3}, NULL, NULL, 0, desc},
                                buf, sizeof buf, &len, &fd),
               DLB_E_LAYOUT);
  CHECK_ERROR_MENTIONS("occupy bytes [0, 65) of its 64-byte allocation");
  /* A device the runtime does not have, even over memory of one it has. */
  desc.device.device_id = 5;
  desc.shape = &n;
  CHECK_STATUS(dlb_share_export(&(DLManagedTensorVersioned){
                                    {1, 3}, NULL, NULL, 0, desc},
                                buf, sizeof buf, &len, &fd),
               DLB_E_NO_DEVICE);
  CHECK_ERROR_MENTIONS("cuda:5 requested");
  /* Nothing to share in an empty tensor. */
  int64_t zero = 0;
  DLManagedTensorVersioned *z = NULL;
  CHECK_OK(dlb_tensor_alloc((DLDevice){kDLCUDA, 0}, share_u8, 1, &zero, &z));
  CHECK_STATUS(dlb_share_export(z, buf, sizeof buf, &len, &fd),
               DLB_E_UNSUPPORTED);
  /* The driver refusing. */
  e.fail("cuIpcGetMemHandle", 1, 1);
  CHECK_STATUS(dlb_share_export(d, buf, sizeof buf, &len, &fd), DLB_E_RUNTIME);
  CHECK_ERROR_MENTIONS("cuIpcGetMemHandle");
  e.fail("cuIpcGetEventHandle", 1, 1);
  CHECK_STATUS(dlb_share_export(d, buf, sizeof buf, &len, &fd), DLB_E_RUNTIME);
  CHECK_EQ_INT(fd, 5);
  /* A handle cannot be opened where it was made. */
  share_handle h = share_export(d);
  DLManagedTensorVersioned *u = NULL;
  CHECK_STATUS(dlb_share_import(h.bytes, h.len, -1, 0, &u), DLB_E_RUNTIME);
  CHECK_ERROR_MENTIONS("process that exported it");
  CHECK_STATUS(dlb_share_import(h.bytes, h.len, -1, DLB_SHARE_PIN_CUDA, &u),
               DLB_E_INVAL);
  CHECK(u == NULL);
  CHECK_EQ_INT(f.cuMemFreeHost(pinned), 0);
  dlb_tensor_release(z);
  dlb_tensor_release(d);
  dlb_tensor_release(m);
}

/* Runs body in a child that receives a handle of a 64-byte allocation,
 * with the exporter alive. */
static void in_child(void (*body)(emu e, share_handle *h)) {
  emu e = emu_cuda();
  DLManagedTensorVersioned *d = cuda_bytes(64);
  share_handle h = share_export(d);
  int parent = -1, child = -1;
  pid_t pid = fork_child(&parent, &child);
  if (pid == 0) {
    body(e, &h);
    _exit(0);
  }
  wait_ok(pid);
  close(parent);
  dlb_tensor_release(d);
}

static void tampered_size(emu e, share_handle *h) {
  long devices = e.live_kind(EMU_LIVE_DEVICE);
  /* Claims 65 bytes of a 64-byte allocation, for a 65-byte tensor. */
  h->bytes[40] = 65;
  h->bytes[208] = 65;
  DLManagedTensorVersioned *u = NULL;
  CHECK_STATUS(dlb_share_import(h->bytes, h->len, -1, 0, &u), DLB_E_HANDLE);
  CHECK_ERROR_MENTIONS("allocation size is 65 but the allocation opened has "
                       "64 bytes");
  CHECK_EQ_INT(e.live_kind(EMU_LIVE_DEVICE), devices);
  /* Bounds inside the claimed size are checked before anything opens. */
  h->bytes[40] = 64;
  CHECK_STATUS(dlb_share_import(h->bytes, h->len, -1, 0, &u), DLB_E_HANDLE);
  CHECK_ERROR_MENTIONS("of a 64-byte region");
  CHECK_EQ_INT(e.calls("cuIpcOpenMemHandle_v2"), 1);
}

/* The same claim in a handle of an allocation this process has open
 * already: the size is checked against the open one. */
static void tampered_size_while_open(emu e, share_handle *h) {
  DLManagedTensorVersioned *u = NULL, *v = NULL;
  CHECK_OK(dlb_share_import(h->bytes, h->len, -1, 0, &u));
  h->bytes[40] = 65;
  h->bytes[208] = 65;
  CHECK_STATUS(dlb_share_import(h->bytes, h->len, -1, 0, &v), DLB_E_HANDLE);
  CHECK_ERROR_MENTIONS("allocation size is 65 but the allocation opened has "
                       "64 bytes");
  CHECK(v == NULL);
  /* Within it, the handle is taken, and the allocation stays open for
   * both until the last goes. */
  h->bytes[40] = 64;
  h->bytes[208] = 32;
  CHECK_OK(dlb_share_import(h->bytes, h->len, -1, 0, &v));
  CHECK_EQ_INT(v->dl_tensor.shape[0], 32);
  CHECK_EQ_INT(e.calls("cuIpcOpenMemHandle_v2"), 1);
  dlb_tensor_release(u);
  CHECK_EQ_INT(e.calls("cuIpcCloseMemHandle"), 0);
  dlb_tensor_release(v);
  CHECK_EQ_INT(e.calls("cuIpcCloseMemHandle"), 1);
}

DLB_TEST(share_ipc_refuses_a_handle_claiming_more_memory_while_open) {
  in_child(tampered_size_while_open);
}

DLB_TEST(share_ipc_refuses_a_handle_claiming_more_memory) {
  in_child(tampered_size);
}

static void runtime_failures(emu e, share_handle *h) {
  long devices = e.live_kind(EMU_LIVE_DEVICE);
  DLManagedTensorVersioned *u = NULL;
  /* Counts the library's blocks (none fails): a refused import frees
   * what it allocated. */
  dlb_test_failalloc_install(0);
  e.fail("cuIpcOpenMemHandle_v2", 1, 2);
  CHECK_STATUS(dlb_share_import(h->bytes, h->len, -1, 0, &u), DLB_E_NOMEM);
  e.fail("cuIpcOpenEventHandle", 1, 1);
  CHECK_STATUS(dlb_share_import(h->bytes, h->len, -1, 0, &u), DLB_E_RUNTIME);
  CHECK_ERROR_MENTIONS("cuIpcOpenEventHandle");
  /* The allocation opened for the failed import is closed again. */
  CHECK_EQ_INT(e.calls("cuIpcCloseMemHandle"), 1);
  CHECK_EQ_INT(e.live_kind(EMU_LIVE_DEVICE), devices);
  CHECK(u == NULL);
  CHECK_EQ_INT(dlb_test_failalloc_live(), 0);
  dlb_test_failalloc_remove();
}

DLB_TEST(share_ipc_runtime_failures_leave_nothing_open) {
  in_child(runtime_failures);
}

static dlb_status body_ipc_import(void *ctx) {
  share_handle *h = ctx;
  DLManagedTensorVersioned *u = NULL;
  dlb_status st = dlb_share_import(h->bytes, h->len, -1, 0, &u);
  if (st == DLB_OK) dlb_tensor_release(u);
  return st;
}

static void oom_import(emu e, share_handle *h) {
  long devices = e.live_kind(EMU_LIVE_DEVICE);
  /* The open allocation's entry and the tensor's block (the owner is in
   * it). */
  CHECK_EQ_INT(dlb_test_oom_loop(body_ipc_import, h), 2);
  CHECK_EQ_INT(e.live_kind(EMU_LIVE_DEVICE), devices);
  CHECK_EQ_INT(e.calls("cuIpcOpenMemHandle_v2"),
               e.calls("cuIpcCloseMemHandle"));
}

DLB_TEST(share_ipc_oom_import) { in_child(oom_import); }

/* Two allocations open at once in the importer: each is found again
 * whichever was opened first, and closing one leaves the other open. The
 * child forks first, so that it holds nothing of the exporter's. */
DLB_TEST(share_ipc_two_allocations_open_in_one_process) {
  emu e = emu_cuda();
  int parent = -1, child = -1;
  pid_t pid = fork_child(&parent, &child);
  if (pid == 0) {
    const long opens = e.calls("cuIpcOpenMemHandle_v2");
    DLManagedTensorVersioned *ua = NULL, *ub = NULL, *ua2 = NULL, *ub2 = NULL;
    CHECK_OK(dlb_share_recv(child, 0, &ua));
    CHECK_OK(dlb_share_recv(child, 0, &ub));
    /* The first opened is found past the second. */
    CHECK_OK(dlb_share_recv(child, 0, &ua2));
    CHECK(ua2->dl_tensor.data == ua->dl_tensor.data);
    CHECK_EQ_INT(e.calls("cuIpcOpenMemHandle_v2") - opens, 2);
    /* Closing the first keeps the second listed: importing it again
     * opens nothing. */
    dlb_tensor_release(ua);
    dlb_tensor_release(ua2);
    CHECK_EQ_INT(e.calls("cuIpcCloseMemHandle"), 1);
    CHECK_OK(dlb_share_recv(child, 0, &ub2));
    CHECK(ub2->dl_tensor.data == ub->dl_tensor.data);
    CHECK_EQ_INT(e.calls("cuIpcOpenMemHandle_v2") - opens, 2);
    dlb_tensor_release(ub);
    dlb_tensor_release(ub2);
    CHECK_EQ_INT(e.calls("cuIpcCloseMemHandle"), 2);
    _exit(0);
  }
  DLManagedTensorVersioned *a = cuda_bytes(64);
  DLManagedTensorVersioned *b = cuda_bytes(128);
  CHECK_OK(dlb_share_send(parent, a));
  CHECK_OK(dlb_share_send(parent, b));
  CHECK_OK(dlb_share_send(parent, a));
  CHECK_OK(dlb_share_send(parent, b));
  wait_ok(pid);
  close(parent);
  dlb_tensor_release(b);
  dlb_tensor_release(a);
}

/* A read-only device tensor stays read-only in the importer. */
DLB_TEST(share_ipc_read_only_stays_read_only) {
  emu e = emu_cuda();
  int parent = -1, child = -1;
  pid_t pid = fork_child(&parent, &child);
  if (pid == 0) {
    DLManagedTensorVersioned *u = NULL;
    CHECK_OK(dlb_share_recv(child, 0, &u));
    CHECK((u->flags & DLPACK_FLAG_BITMASK_READ_ONLY) != 0);
    dlb_tensor_release(u);
    _exit(0);
  }
  DLManagedTensorVersioned *d = cuda_bytes(64);
  d->flags |= DLPACK_FLAG_BITMASK_READ_ONLY;
  CHECK_OK(dlb_share_send(parent, d));
  wait_ok(pid);
  close(parent);
  dlb_tensor_release(d);
  (void)e;
}

DLB_TEST(share_ipc_after_the_exporter_left) {
  emu e = emu_cuda();
  int parent = -1, child = -1;
  pid_t pid = fork_child(&parent, &child);
  if (pid == 0) {
    DLManagedTensorVersioned *d = cuda_bytes(64);
    CHECK_OK(dlb_share_send(child, d));
    /* The exporter frees the memory and leaves. */
    dlb_tensor_release(d);
    _exit(0);
  }
  wait_ok(pid);
  long devices = e.live_kind(EMU_LIVE_DEVICE);
  DLManagedTensorVersioned *u = NULL;
  CHECK_STATUS(dlb_share_recv(parent, 0, &u), DLB_E_RUNTIME);
  CHECK_ERROR_MENTIONS("must still hold the memory");
  CHECK_EQ_INT(e.live_kind(EMU_LIVE_DEVICE), devices);
  close(parent);
}

DLB_TEST(share_ipc_hip_refuses_what_cannot_be_exported) {
  emu e = emu_hip();
  hip_fns f = hip_fns_of(&e);
  DLManagedTensorVersioned *d = device_bytes(kDLROCM, 64);
  void *pinned = NULL;
  CHECK_EQ_INT(f.hipHostMalloc(&pinned, 4096, 0), 0);
  int64_t n = 64;
  DLTensor desc = {pinned, {kDLROCM, 0}, 1, share_u8, &n, NULL, 0};
  uint8_t buf[DLB_SHARE_HANDLE_MAX];
  size_t len = 0;
  int fd = -1;
  CHECK_STATUS(dlb_share_export(&(DLManagedTensorVersioned){
                                    {1, 3}, NULL, NULL, 0, desc},
                                buf, sizeof buf, &len, &fd),
               DLB_E_UNSUPPORTED);
  CHECK_ERROR_MENTIONS("not memory of hipMalloc");
  share_handle h = share_export(d);
  DLManagedTensorVersioned *u = NULL;
  CHECK_STATUS(dlb_share_import(h.bytes, h.len, -1, 0, &u), DLB_E_RUNTIME);
  CHECK_ERROR_MENTIONS("process that exported it");
  CHECK_EQ_INT(f.hipHostFree(pinned), 0);
  dlb_tensor_release(d);
}

DLB_TEST(share_ipc_hip_runtime_failures) {
  emu e = emu_hip();
  DLManagedTensorVersioned *d = device_bytes(kDLROCM, 64);
  uint8_t buf[DLB_SHARE_HANDLE_MAX];
  size_t len = 0;
  int fd = -1;
  e.fail("hipIpcGetMemHandle", 1, 1);
  CHECK_STATUS(dlb_share_export(d, buf, sizeof buf, &len, &fd), DLB_E_RUNTIME);
  CHECK_ERROR_MENTIONS("hipIpcGetMemHandle");
  e.fail("hipIpcGetEventHandle", 1, 1);
  CHECK_STATUS(dlb_share_export(d, buf, sizeof buf, &len, &fd), DLB_E_RUNTIME);
  CHECK_ERROR_MENTIONS("hipIpcGetEventHandle");
  e.fail("hipMemGetAddressRange", 1, 2);
  CHECK_STATUS(dlb_share_export(d, buf, sizeof buf, &len, &fd), DLB_E_NOMEM);
  dlb_tensor_release(d);
}

DLB_TEST(share_ipc_hip_event_refused_synchronises_instead) {
  emu e = emu_hip();
  DLManagedTensorVersioned *d = device_bytes(kDLROCM, 64);
  long syncs = e.calls("hipDeviceSynchronize");
  e.fail("hipEventCreateWithFlags", 1, 801);
  share_handle h = share_export(d);
  CHECK(e.fail_fired());
  CHECK_EQ_INT(e.calls("hipDeviceSynchronize") - syncs, 1);
  /* The event field is zero: the importer has nothing to wait for. */
  for (int i = 144; i < 208; i++) CHECK_EQ_INT(h.bytes[i], 0);
  CHECK_EQ_INT(e.live_kind(EMU_LIVE_EVENT), 0);
  dlb_tensor_release(d);
}
