/*
 * tsan_stress.c -- a concurrency stress test, built to run under
 * ThreadSanitizer (make test-tsan) with no suppressions; it also runs
 * without it, where it checks only the counts.
 *
 * Worker threads, started together at a barrier, race on:
 *  - first use of the emulated CUDA driver and HIP runtime (loading,
 *    cuInit, device queries), then device allocations and copies;
 *  - creating, wrapping, sharing, viewing, exporting to the legacy struct
 *    and importing back, and releasing CPU tensors; a share of each tensor
 *    goes through a queue to another thread, which releases it, so foreign
 *    deleters and release callbacks run on threads that did not make them;
 *  - large copies on the copy thread pool while another thread changes
 *    the pool's size;
 *  - pinning overlapping views of one CPU tensor with either runtime, the
 *    pinned tensors released by other threads, so registrations are
 *    shared, made for the gaps between others and dropped all at once;
 *  - per-thread error messages.
 * At the end every release callback must have run exactly once, every
 * copy must hold the values written, and nothing must be left pinned.
 */
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../emu/emu_control.h"
#include "dlbridge.h"

#define WORKERS 6
#define ROUNDS 40
#define QUEUE_MAX 256

#define REQUIRE(cond)                                                  \
  do {                                                                 \
    if (!(cond)) {                                                     \
      fprintf(stderr, "%s:%d: %s failed (%s)\n", __FILE__, __LINE__,   \
              #cond, dlb_last_error());                                \
      exit(1);                                                         \
    }                                                                  \
  } while (0)

static pthread_barrier_t start;
static atomic_long wrapped, released_cb;

/* Tensors handed to another thread to release. */
static pthread_mutex_t qlock = PTHREAD_MUTEX_INITIALIZER;
static DLManagedTensorVersioned *queue[QUEUE_MAX];
static int qlen;

static void hand_off(DLManagedTensorVersioned *t) {
  for (;;) {
    pthread_mutex_lock(&qlock);
    if (qlen < QUEUE_MAX) {
      queue[qlen++] = t;
      pthread_mutex_unlock(&qlock);
      return;
    }
    pthread_mutex_unlock(&qlock);
    sched_yield();
  }
}

static int drain_one(void) {
  pthread_mutex_lock(&qlock);
  DLManagedTensorVersioned *t = qlen > 0 ? queue[--qlen] : NULL;
  pthread_mutex_unlock(&qlock);
  if (t == NULL) return 0;
  dlb_tensor_release(t);
  return 1;
}

static void on_release(void *ctx) {
  free(ctx);
  atomic_fetch_add(&released_cb, 1);
}

static const DLDataType f32 = {kDLFloat, 32, 1};
static const DLDevice cpu = {kDLCPU, 0};

static void tensor_round(unsigned seed) {
  int64_t shape[2] = {8 + (int64_t)(seed % 5), 6};
  DLManagedTensorVersioned *t = NULL, *v = NULL, *s = NULL, *back = NULL;
  REQUIRE(dlb_tensor_alloc(cpu, f32, 2, shape, &t) == DLB_OK);
  float *p = t->dl_tensor.data;
  for (int64_t i = 0; i < shape[0] * shape[1]; i++) p[i] = (float)(i + seed);

  dlb_slice sl[2] = {{1, DLB_SLICE_DEFAULT, 2}, {DLB_SLICE_DEFAULT, DLB_SLICE_DEFAULT, -1}};
  REQUIRE(dlb_tensor_slice(t, 2, sl, &v) == DLB_OK);
  REQUIRE(dlb_tensor_share(v, &s) == DLB_OK);
  hand_off(s); /* released elsewhere, maybe after t */

  DLManagedTensor *legacy = NULL;
  DLManagedTensorVersioned *w = NULL;
  REQUIRE(dlb_tensor_share(t, &w) == DLB_OK);
  REQUIRE(dlb_tensor_to_legacy(w, &legacy) == DLB_OK);
  REQUIRE(dlb_tensor_from_legacy(legacy, 0, &back) == DLB_OK);
  int32_t axes[2] = {1, 0};
  DLManagedTensorVersioned *pt = NULL;
  REQUIRE(dlb_tensor_permute(back, axes, &pt) == DLB_OK);
  dlb_tensor_release(back);
  hand_off(pt);
  dlb_tensor_release(t);

  /* Foreign memory whose release callback runs on whichever thread drops
   * the last reference. */
  float *mem = malloc(sizeof(float) * 12);
  REQUIRE(mem != NULL);
  for (int i = 0; i < 12; i++) mem[i] = (float)i;
  int64_t fshape[1] = {12};
  DLTensor desc = {mem, cpu, 1, f32, fshape, NULL, 0};
  DLManagedTensorVersioned *f = NULL, *fv = NULL;
  REQUIRE(dlb_tensor_wrap(&desc, 0, on_release, mem, &f) == DLB_OK);
  atomic_fetch_add(&wrapped, 1);
  REQUIRE(dlb_tensor_select(f, 0, 3, &fv) == DLB_OK);
  REQUIRE(*(float *)((char *)fv->dl_tensor.data + fv->dl_tensor.byte_offset) == 3.0f);
  dlb_tensor_release(f);
  hand_off(fv);

  /* This thread's message is its own. */
  char name[32];
  snprintf(name, sizeof name, "notatype%u", seed);
  DLDataType d;
  REQUIRE(dlb_dtype_parse(name, &d) == DLB_E_DTYPE);
  REQUIRE(strstr(dlb_last_error(), name) != NULL);
  dlb_tensor_release(v);
  drain_one();
}

/* A copy big enough for the pool (several MiB), checked in full. */
static void big_copy(unsigned seed) {
  int64_t shape[2] = {1024, 1030};
  DLManagedTensorVersioned *src = NULL, *dst = NULL;
  REQUIRE(dlb_tensor_alloc(cpu, f32, 2, shape, &src) == DLB_OK);
  float *p = src->dl_tensor.data;
  for (int64_t i = 0; i < shape[0] * shape[1]; i++) p[i] = (float)((i * 7 + seed) % 1000);
  /* Transposed source: the tiled, parallel path. */
  int32_t axes[2] = {1, 0};
  DLManagedTensorVersioned *tr = NULL;
  REQUIRE(dlb_tensor_permute(src, axes, &tr) == DLB_OK);
  REQUIRE(dlb_tensor_copy(&tr->dl_tensor, cpu, &dst) == DLB_OK);
  const float *q = dst->dl_tensor.data;
  for (int64_t i = 0; i < shape[1]; i += 97)
    for (int64_t j = 0; j < shape[0]; j += 13)
      REQUIRE(q[i * shape[0] + j] == p[j * shape[1] + i]);
  dlb_tensor_release(dst);
  dlb_tensor_release(tr);
  dlb_tensor_release(src);
}

/* The tensor every worker pins views of. */
#define PIN_ELEMS 4096
static DLManagedTensorVersioned *pin_base;

static void pin_round(unsigned seed, DLDeviceType host) {
  int64_t lo = (int64_t)(seed * 37u % 3000u);
  dlb_slice sl = {lo, lo + 1 + (int64_t)(seed * 101u % 1000u), 1};
  DLManagedTensorVersioned *v = NULL, *p = NULL;
  REQUIRE(dlb_tensor_slice(pin_base, 1, &sl, &v) == DLB_OK);
  REQUIRE(dlb_tensor_pin(v, host, &p) == DLB_OK);
  DLDevice d;
  float *last = (float *)((char *)p->dl_tensor.data +
                          p->dl_tensor.byte_offset) +
                (sl.stop - sl.start - 1);
  REQUIRE(dlb_device_of_pointer(last, &d) == DLB_OK &&
          d.device_type != kDLCPU);
  REQUIRE(*last == (float)(sl.stop - 1));
  dlb_tensor_release(v);
  hand_off(p);
}

static void gpu_round(dlb_runtime rt, DLDeviceType type) {
  int n = 0;
  REQUIRE(dlb_runtime_status(rt) == DLB_OK);
  REQUIRE(dlb_runtime_device_count(rt, &n) == DLB_OK && n >= 1);
  int64_t shape[1] = {256};
  DLManagedTensorVersioned *host = NULL, *dev = NULL, *back = NULL;
  REQUIRE(dlb_tensor_alloc(cpu, f32, 1, shape, &host) == DLB_OK);
  float *p = host->dl_tensor.data;
  for (int i = 0; i < 256; i++) p[i] = (float)i;
  DLDevice d = {type, 0};
  REQUIRE(dlb_tensor_copy(&host->dl_tensor, d, &dev) == DLB_OK);
  hand_off(dev); /* the device tensor is freed by another thread */
  DLManagedTensorVersioned *dev2 = NULL;
  REQUIRE(dlb_tensor_copy(&host->dl_tensor, d, &dev2) == DLB_OK);
  REQUIRE(dlb_tensor_copy(&dev2->dl_tensor, cpu, &back) == DLB_OK);
  REQUIRE(memcmp(back->dl_tensor.data, p, sizeof(float) * 256) == 0);
  dlb_tensor_release(dev2);
  dlb_tensor_release(back);
  dlb_tensor_release(host);
}

static void *worker(void *arg) {
  unsigned id = (unsigned)(uintptr_t)arg;
  pthread_barrier_wait(&start);
  /* Every thread's first call loads a runtime: the loads race. */
  if (id % 2 == 0) gpu_round(DLB_RUNTIME_CUDA, kDLCUDA);
  else gpu_round(DLB_RUNTIME_HIP, kDLROCM);
  for (unsigned r = 0; r < ROUNDS; r++) {
    tensor_round(id * 1000 + r);
    pin_round(id * 1000 + r, r % 2 == 0 ? kDLCUDAHost : kDLROCMHost);
    if (r % 10 == id % 10) big_copy(id + r);
    if (r % 8 == 0) gpu_round(r % 16 == 0 ? DLB_RUNTIME_CUDA : DLB_RUNTIME_HIP,
                              r % 16 == 0 ? kDLCUDA : kDLROCM);
  }
  return NULL;
}

static atomic_int stop_resizer;

static void *resizer(void *arg) {
  (void)arg;
  pthread_barrier_wait(&start);
  int k = 0;
  while (!atomic_load(&stop_resizer)) {
    dlb_copy_set_threads(1 + (k++ % 4));
    REQUIRE(dlb_copy_get_threads() >= 1);
    drain_one();
    sched_yield();
  }
  return NULL;
}

int main(void) {
  char path[PATH_MAX + 64];
  emu_path("libcuda.so.1", path, sizeof path);
  setenv("DLBRIDGE_CUDA_LIBRARY", path, 1);
  emu_path("libamdhip64.so.6", path, sizeof path);
  setenv("DLBRIDGE_HIP_LIBRARY", path, 1);
  dlb_copy_set_threads(4);
  int64_t pin_shape[1] = {PIN_ELEMS};
  REQUIRE(dlb_tensor_alloc(cpu, f32, 1, pin_shape, &pin_base) == DLB_OK);
  for (int i = 0; i < PIN_ELEMS; i++)
    ((float *)pin_base->dl_tensor.data)[i] = (float)i;
  pthread_t th[WORKERS + 1];
  REQUIRE(pthread_barrier_init(&start, NULL, WORKERS + 1) == 0);
  for (unsigned i = 0; i < WORKERS; i++)
    REQUIRE(pthread_create(&th[i], NULL, worker, (void *)(uintptr_t)i) == 0);
  REQUIRE(pthread_create(&th[WORKERS], NULL, resizer, NULL) == 0);
  for (int i = 0; i < WORKERS; i++) pthread_join(th[i], NULL);
  atomic_store(&stop_resizer, 1);
  pthread_join(th[WORKERS], NULL);
  while (drain_one()) {
  }
  pthread_barrier_destroy(&start);
  for (int i = 0; i < PIN_ELEMS; i += 64) {
    DLDevice d;
    REQUIRE(dlb_device_of_pointer((float *)pin_base->dl_tensor.data + i, &d) ==
                DLB_OK &&
            d.device_type == kDLCPU);
  }
  dlb_tensor_release(pin_base);
  REQUIRE(atomic_load(&wrapped) == (long)WORKERS * ROUNDS);
  REQUIRE(atomic_load(&released_cb) == atomic_load(&wrapped));
  printf("tsan_stress: %d threads, %d rounds each: ok\n", WORKERS, ROUNDS);
  return 0;
}
