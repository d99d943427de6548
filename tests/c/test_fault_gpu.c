/*
 * test_fault_gpu.c -- every runtime call failing in turn, for every public
 * GPU operation, through both emulated runtimes.
 *
 * Each operation makes what it needs, does its work and releases it all.
 * For n = 1, 2, ... the emulator makes the n-th runtime call of the
 * operation fail, until a run passes no injected failure. Every run must
 * then: return DLB_OK or a runtime status (never crash or hang), with a
 * message naming a runtime entry point when it fails; leave no device
 * allocation, registration, stream or event alive, no context pushed and
 * no host block of dlbridge's allocated; and leave the runtime usable, so
 * the same operation passes at once without injection. Loading is checked
 * the same way, each attempt in a fresh process, since a failed load is
 * remembered.
 */
#include <sys/wait.h>
#include <unistd.h>

#include "../emu/emu_control.h"
#include "test.h"

typedef struct {
  const char *name;
  DLDeviceType gpu, host;   /* the runtime's device and host kinds */
  dlb_runtime runtime;
  const char *prefix;       /* its entry points' prefix: "cu", "hip" */
} rt_desc;

static const rt_desc CUDA = {"cuda", kDLCUDA, kDLCUDAHost, DLB_RUNTIME_CUDA, "cu"};
static const rt_desc HIP = {"hip", kDLROCM, kDLROCMHost, DLB_RUNTIME_HIP, "hip"};

static const DLDataType f32 = {kDLFloat, 32, 1};
static const DLDevice cpu = {kDLCPU, 0};

static dlb_status cpu_tensor(int64_t rows, int64_t cols,
                             DLManagedTensorVersioned **out) {
  int64_t shape[2] = {rows, cols};
  dlb_status s = dlb_tensor_alloc(cpu, f32, 2, shape, out);
  if (s != DLB_OK) return s;
  float *p = (*out)->dl_tensor.data;
  for (int64_t i = 0; i < rows * cols; i++) p[i] = (float)i;
  return DLB_OK;
}

/* Releases up to four tensors and returns s. */
static dlb_status done(dlb_status s, DLManagedTensorVersioned *a,
                       DLManagedTensorVersioned *b, DLManagedTensorVersioned *c,
                       DLManagedTensorVersioned *d) {
  dlb_tensor_release(a);
  dlb_tensor_release(b);
  dlb_tensor_release(c);
  dlb_tensor_release(d);
  return s;
}

/* ---- the operations ------------------------------------------------------ */

static dlb_status op_alloc(const rt_desc *r) {
  int64_t shape[1] = {100};
  DLManagedTensorVersioned *a = NULL, *b = NULL, *c = NULL, *d = NULL;
  dlb_status s = dlb_tensor_alloc((DLDevice){r->gpu, 0}, f32, 1, shape, &a);
  if (s == DLB_OK) s = dlb_tensor_alloc((DLDevice){r->gpu, 1}, f32, 1, shape, &b);
  if (s == DLB_OK) s = dlb_tensor_alloc((DLDevice){r->host, 0}, f32, 1, shape, &c);
  if (s == DLB_OK && r->gpu == kDLCUDA)
    s = dlb_tensor_alloc((DLDevice){kDLCUDAManaged, 0}, f32, 1, shape, &d);
  return done(s, a, b, c, d);
}

/* Host to device, device to device (another GPU), device to host, the
 * last through a transposed view, which stages. */
static dlb_status op_copy(const rt_desc *r) {
  DLManagedTensorVersioned *h = NULL, *d0 = NULL, *d1 = NULL, *back = NULL;
  dlb_status s = cpu_tensor(16, 24, &h);
  if (s == DLB_OK) s = dlb_tensor_copy(&h->dl_tensor, (DLDevice){r->gpu, 0}, &d0);
  if (s == DLB_OK) s = dlb_tensor_copy(&d0->dl_tensor, (DLDevice){r->gpu, 1}, &d1);
  if (s == DLB_OK) {
    int32_t axes[2] = {1, 0};
    DLManagedTensorVersioned *tr = NULL;
    s = dlb_tensor_permute(d1, axes, &tr);
    if (s == DLB_OK) s = dlb_tensor_copy(&tr->dl_tensor, cpu, &back);
    dlb_tensor_release(tr);
  }
  if (s == DLB_OK) {
    const float *q = back->dl_tensor.data;
    for (int i = 0; i < 24; i++)
      for (int j = 0; j < 16; j++) CHECK(q[i * 16 + j] == (float)(j * 24 + i));
  }
  return done(s, h, d0, d1, back);
}

/* dlb_copy_async on the default stream, then synchronising it. */
static dlb_status op_copy_async(const rt_desc *r) {
  DLManagedTensorVersioned *h = NULL, *d = NULL, *back = NULL;
  int64_t shape[2] = {8, 8};
  dlb_status s = cpu_tensor(8, 8, &h);
  if (s == DLB_OK) s = dlb_tensor_alloc((DLDevice){r->gpu, 0}, f32, 2, shape, &d);
  if (s == DLB_OK) s = dlb_tensor_alloc((DLDevice){r->host, 0}, f32, 2, shape, &back);
  if (s == DLB_OK) s = dlb_copy_async(&h->dl_tensor, &d->dl_tensor, NULL);
  if (s == DLB_OK) s = dlb_copy_async(&d->dl_tensor, &back->dl_tensor, NULL);
  if (s == DLB_OK) s = dlb_stream_synchronize((DLDevice){r->gpu, 0}, NULL);
  if (s == DLB_OK) s = dlb_device_synchronize((DLDevice){r->gpu, 0});
  if (s == DLB_OK)
    CHECK(memcmp(h->dl_tensor.data, back->dl_tensor.data, 64 * sizeof(float)) == 0);
  return done(s, h, d, back, NULL);
}

static dlb_status op_pin(const rt_desc *r) {
  DLManagedTensorVersioned *h = NULL, *p = NULL;
  dlb_status s = cpu_tensor(4, 256, &h);
  if (s == DLB_OK) s = dlb_tensor_pin(h, r->host, &p);
  if (s == DLB_OK) {
    DLDevice d;
    s = dlb_device_of_pointer(p->dl_tensor.data, &d);
    if (s == DLB_OK) CHECK_EQ_INT(d.device_type, r->host);
  }
  return done(s, h, p, NULL, NULL);
}

/* Asking what memory is, and checking a label against it. */
static dlb_status op_classify(const rt_desc *r) {
  int64_t shape[1] = {32};
  DLManagedTensorVersioned *d = NULL;
  dlb_status s = dlb_tensor_alloc((DLDevice){r->gpu, 1}, f32, 1, shape, &d);
  DLDevice got = {kDLCPU, 0};
  if (s == DLB_OK) s = dlb_device_of_pointer(d->dl_tensor.data, &got);
  if (s == DLB_OK) {
    CHECK_EQ_INT(got.device_type, r->gpu);
    CHECK_EQ_INT(got.device_id, 1);
    s = dlb_tensor_check_device(&d->dl_tensor, DLB_LABEL_CORRECT, &got);
  }
  if (s == DLB_OK) CHECK_EQ_INT(got.device_id, 1);
  return done(s, d, NULL, NULL, NULL);
}

/* The consumer's stream waits for the producer's (an event). */
static dlb_status op_stream_wait(const rt_desc *r) {
  void *consumer = NULL;
  int sync = 0;
  dlb_status s = dlb_stream_from_dlpack(r->gpu, r->gpu == kDLCUDA ? 2 : 0,
                                        &consumer, &sync);
  void *producer = r->gpu == kDLCUDA ? DLB_CUDA_STREAM_LEGACY : NULL;
  if (s == DLB_OK && r->gpu != kDLCUDA) {
    /* HIP has one special stream; the per-thread one stands in. */
    producer = (void *)(uintptr_t)2;
    consumer = NULL;
    return dlb_device_synchronize((DLDevice){r->gpu, 1});
  }
  if (s == DLB_OK) s = dlb_stream_wait((DLDevice){r->gpu, 0}, consumer, producer);
  if (s == DLB_OK) s = dlb_stream_synchronize((DLDevice){r->host, 0}, consumer);
  return s;
}

/* Managed memory: prefetch to a GPU and back, advice. */
static dlb_status op_managed(const rt_desc *r) {
  (void)r;
  int64_t shape[1] = {1024};
  DLManagedTensorVersioned *m = NULL;
  dlb_status s = dlb_tensor_alloc((DLDevice){kDLCUDAManaged, 0}, f32, 1, shape, &m);
  if (s == DLB_OK) s = dlb_managed_prefetch(&m->dl_tensor, (DLDevice){kDLCUDA, 1}, NULL);
  if (s == DLB_OK) s = dlb_managed_prefetch(&m->dl_tensor, cpu, NULL);
  if (s == DLB_OK)
    s = dlb_managed_advise(&m->dl_tensor, DLB_ADVISE_SET_PREFERRED_LOCATION,
                           (DLDevice){kDLCUDA, 0});
  if (s == DLB_OK) s = dlb_managed_advise(&m->dl_tensor, DLB_ADVISE_SET_READ_MOSTLY, cpu);
  return done(s, m, NULL, NULL, NULL);
}

/* ---- the loop ------------------------------------------------------------ */

typedef dlb_status (*op_fn)(const rt_desc *);

static emu open_rt(const rt_desc *r) {
  emu e = r->gpu == kDLCUDA ? emu_cuda() : emu_hip();
  CHECK_OK(dlb_runtime_status(r->runtime));
  return e;
}

/* Runs op with runtime call 1, 2, ... failing; returns the runs that failed. */
static int fail_each_call(const rt_desc *r, emu *e, op_fn op) {
  int failures = 0, n;
  /* Warm up once: lazily made state (primary contexts, staging buffers,
   * the pool) is the runtime's, not the operation's. */
  CHECK_OK(op(r));
  long base_live = e->live();
  for (n = 1; n < 2000; n++) {
    dlb_test_failalloc_install(0);
    e->fail(NULL, n, 999);
    dlb_clear_error();
    dlb_status s = op(r);
    int fired = e->fail_fired();
    if (getenv("DLB_FAULT_TRACE"))
      fprintf(stderr, "call %d: fired %d, %s: %s\n", n, fired, dlb_status_name(s),
              dlb_last_error());
    e->fail(NULL, 0, 0);
    CHECK_EQ_INT(dlb_test_failalloc_live(), 0);
    dlb_test_failalloc_remove();
    CHECK_EQ_INT(e->context_depth(), r->gpu == kDLCUDA ? 0 : e->context_depth());
    CHECK_EQ_INT(e->pending(), 0);
    CHECK_EQ_INT(e->live(), base_live);
    if (!fired) {
      CHECK_OK(s);
      break;
    }
    if (s != DLB_OK) {
      failures++;
      if (s != DLB_E_RUNTIME && s != DLB_E_NOMEM && s != DLB_E_NO_DEVICE)
        CHECK_STATUS(s, DLB_E_RUNTIME);
      if (strstr(dlb_last_error(), r->prefix) == NULL)
        dlb_test_failed(__FILE__, __LINE__, "call %d: message \"%s\" names no %s* call",
                        n, dlb_last_error(), r->prefix);
    }
    /* The runtime is still usable. */
    CHECK_OK(op(r));
    CHECK_EQ_INT(e->live(), base_live);
  }
  CHECK(n > 1);
  return failures;
}

#define FAULT_TEST(rt, opname, min_failures)                       \
  DLB_TEST(fault_##rt##_##opname) {                                \
    emu e = open_rt(&rt);                                          \
    CHECK(fail_each_call(&rt, &e, op_##opname) >= (min_failures)); \
  }

FAULT_TEST(CUDA, alloc, 4)
FAULT_TEST(CUDA, copy, 3)
FAULT_TEST(CUDA, copy_async, 3)
FAULT_TEST(CUDA, pin, 1)
FAULT_TEST(CUDA, classify, 2)
FAULT_TEST(CUDA, stream_wait, 2)
FAULT_TEST(CUDA, managed, 3)
FAULT_TEST(HIP, alloc, 3)
FAULT_TEST(HIP, copy, 3)
FAULT_TEST(HIP, copy_async, 3)
FAULT_TEST(HIP, pin, 1)
FAULT_TEST(HIP, classify, 2)
FAULT_TEST(HIP, stream_wait, 1)

/* Loading: the n-th call of the load fails, in a fresh process each time
 * (a failed load is remembered for the process's life). */
static void fail_each_load_call(const rt_desc *r) {
  int n, failures = 0;
  for (n = 1; n < 200; n++) {
    fflush(NULL);
    pid_t pid = fork();
    CHECK(pid >= 0);
    if (pid == 0) {
      emu e = r->gpu == kDLCUDA ? emu_cuda() : emu_hip();
      e.fail(NULL, n, 999);
      dlb_status s = dlb_runtime_status(r->runtime);
      if (!e.fail_fired()) _exit(s == DLB_OK ? 10 : 1);
      if (s == DLB_OK) _exit(11);
      /* The refusal is remembered, with its message, and allocations
       * say why. */
      if (strstr(dlb_last_error(), r->prefix) == NULL) _exit(2);
      int64_t shape[1] = {4};
      DLManagedTensorVersioned *t = NULL;
      dlb_status a = dlb_tensor_alloc((DLDevice){r->gpu, 0}, f32, 1, shape, &t);
      if (a == DLB_OK || t != NULL) _exit(3);
      if (dlb_runtime_status(r->runtime) != s) _exit(4);
      if (e.live() != 0) _exit(5);
      _exit(12);
    }
    int st = 0;
    while (waitpid(pid, &st, 0) < 0) {
    }
    CHECK(WIFEXITED(st));
    int code = WEXITSTATUS(st);
    if (code == 10) break;
    if (code != 11 && code != 12)
      dlb_test_failed(__FILE__, __LINE__, "load with call %d failing: child exit %d", n, code);
    failures += code == 12;
  }
  /* The load makes few calls the emulator counts (queries are not). */
  CHECK(n >= 2);
  CHECK(failures >= 1);
}

DLB_TEST(fault_CUDA_load) { fail_each_load_call(&CUDA); }
DLB_TEST(fault_HIP_load) { fail_each_load_call(&HIP); }
