#!/usr/bin/env bash
# tests/gpu/run.sh -- the real-GPU check, for a machine with an NVIDIA GPU.
#
#   tests/gpu/run.sh [OUT]      (OUT: where the log and table go; default a
#                                temporary folder)
#
# Builds the library (and the Python module when it builds), runs the C
# tests against the emulated runtimes as a sanity check, then against the
# real driver: every memory kind end to end (allocate, classify, check
# labels, pin, copy between every pair of kinds in five layouts, prefetch
# and advise managed memory, hand streams off, wait before host reads),
# host<->device copy bandwidth, and exchange with CuPy, PyTorch and JAX
# (managed memory into PyTorch and CuPy, pinned memory into NumPy and JAX,
# their memory classified, a hand-off between two PyTorch streams), and a
# cuda tensor shared by IPC handle with two other processes. Prints
# a short table last; the full log and the table are in OUT.
#
# Safe for a shared card: small buffers (at most 256 MiB, ordinary device
# memory for the big ones), never more managed memory than the card has
# free, no clock, power or mode changes, never a reset. Finishes well under
# 9 minutes: the steps' time limits add up to 520 s.
#
# PYTHON picks the interpreter (default python3). A dry run without a GPU
# (make test-gpu-dry):
# DLB_GPU_DRY=1 DLBRIDGE_CUDA_LIBRARY=$PWD/build/tests/emu/libcuda.so.1 \
#   tests/gpu/run.sh
# runs everything against the emulated driver, skipping the peers that have
# no CUDA (there, not on a GPU machine).
set -u

REPO=$(cd "$(dirname "$0")/../.." && pwd)
OUT=${1:-$(mktemp -d /tmp/dlbridge-gpu.XXXXXX)}
mkdir -p "$OUT"
OUT=$(cd "$OUT" && pwd)
LOG="$OUT/log.txt"
TABLE="$OUT/table.txt"
RESULTS="$OUT/results.txt"
: > "$LOG"
: > "$RESULTS"
START=$(date +%s)

log() { printf '%s\n' "$*" | tee -a "$LOG"; }
# result AREA NAME STATUS DETAIL...
result() { printf 'RESULT %s %s %s %s\n' "$1" "$2" "$3" "${*:4}" >> "$RESULTS"; }
# step SECONDS NAME COMMAND... : runs with a time limit, output to the log.
step() {
  local limit=$1 name=$2
  shift 2
  log "== $name"
  timeout "$limit" "$@" >> "$LOG" 2>&1
  local rc=$?
  log "   exit $rc after $(( $(date +%s) - START )) s"
  return $rc
}

log "dlbridge real-GPU check, $(date -u '+%Y-%m-%d %H:%M UTC')"
log "repository: $REPO   output: $OUT"
GPU=$(nvidia-smi --query-gpu=name,driver_version,memory.total,memory.used \
      --format=csv,noheader 2>/dev/null | head -1)
log "gpu: ${GPU:-unknown (nvidia-smi failed)}"

PY=${PYTHON:-python3}
export XLA_PYTHON_CLIENT_PREALLOCATE=false  # JAX must not take the card

# ---- build ---------------------------------------------------------------
if ! step 150 "build library and tests" bash -c \
     "meson setup '$OUT/build' '$REPO' -Dbuildtype=release >/dev/null &&
      ninja -C '$OUT/build'"; then
  result build library FAIL "see $LOG"
  log "build failed; nothing else can run"
  tail -30 "$LOG"
  exit 1
fi
result build library ok ""

if step 40 "C tests (emulated runtimes)" "$OUT/build/tests/c/dlb_tests"; then
  result build emulated-tests ok "$(grep -c '^ok' "$LOG") passed"
else
  result build emulated-tests FAIL "$(grep '^FAIL' "$LOG" | head -3 | tr '\n' ' ')"
fi

PYINC=$("$PY" -c "import sysconfig; print(sysconfig.get_paths()['include'])" \
        2>/dev/null)
MODULE_DIR=""
if [ -n "$PYINC" ] && step 90 "build Python module" bash -c \
     "meson setup '$OUT/pybuild' '$REPO' -Dpython=true -Dbuildtype=release \
        >/dev/null && ninja -C '$OUT/pybuild'"; then
  so=$(find "$OUT/pybuild" -name '_dlbridge*.so' | head -1)
  if [ -n "$so" ] && [ -d "$REPO/python/dlbridge" ]; then
    mkdir -p "$OUT/pkg"
    cp -r "$REPO/python/dlbridge" "$OUT/pkg/"
    cp "$so" "$OUT/pkg/dlbridge/"
    MODULE_DIR="$OUT/pkg"
    result build python-module ok ""
  else
    result build python-module FAIL "no _dlbridge extension built"
  fi
else
  result build python-module FAIL "see $LOG"
fi

# ---- the real driver, from C -----------------------------------------------
cat > "$OUT/gpu_check.c" <<'EOF'
/* Every memory kind end to end on the real driver. Prints RESULT and BW
 * lines for run.sh. */
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "dlbridge.h"

static int fails;
static const DLDataType f32 = {kDLFloat, 32, 1};

static void result(const char *area, const char *name, dlb_status s,
                   const char *detail) {
  printf("RESULT %s %s %s %s\n", area, name, s == DLB_OK ? "ok" : "FAIL",
         s == DLB_OK ? detail : dlb_last_error());
  if (s != DLB_OK) fails++;
}

static double now(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

static const char *name_of(DLDevice d) {
  static char buf[4][DLB_DEVICE_NAME_MAX];
  static int k;
  char *b = buf[k++ % 4];
  if (dlb_device_format(d, b, DLB_DEVICE_NAME_MAX) != DLB_OK) strcpy(b, "?");
  return b;
}

/* A cpu tensor with element i = base + i. */
static DLManagedTensorVersioned *cpu_pattern(int32_t ndim, const int64_t *shape,
                                             float base) {
  DLManagedTensorVersioned *t = NULL;
  if (dlb_tensor_alloc((DLDevice){kDLCPU, 0}, f32, ndim, shape, &t) != DLB_OK)
    return NULL;
  int64_t n = 0;
  dlb_tensor_numel(&t->dl_tensor, &n);
  for (int64_t i = 0; i < n; i++) ((float *)t->dl_tensor.data)[i] = base + (float)i;
  return t;
}

/* A base of 3 x 8 x 10 on d holding base + i. */
static dlb_status base_on(DLDevice d, float base, DLManagedTensorVersioned **out) {
  int64_t shape[3] = {3, 8, 10};
  DLManagedTensorVersioned *h = cpu_pattern(3, shape, base), *t = NULL;
  if (h == NULL) return DLB_E_NOMEM;
  dlb_status s = dlb_tensor_alloc(d, f32, 3, shape, &t);
  if (s == DLB_OK) s = dlb_copy_sync(&h->dl_tensor, &t->dl_tensor, NULL);
  dlb_tensor_release(h);
  if (s != DLB_OK) dlb_tensor_release(t);
  else *out = t;
  return s;
}

enum { CONTIGUOUS, ROWS_2D, PLANES_3D, TRANSPOSED, REVERSED, LAYOUTS };
static const char *const layout_names[] = {"contiguous", "2d", "3d",
                                           "transposed", "reversed"};

static DLManagedTensorVersioned *view(DLManagedTensorVersioned *b, int layout) {
  DLManagedTensorVersioned *v = NULL, *w = NULL;
  dlb_slice s3[3] = {{0, 3, 1}, {0, 4, 1}, {0, 5, 1}};
  switch (layout) {
    case CONTIGUOUS: {
      int64_t shape[3] = {3, 4, 20};
      dlb_tensor_reshape(b, 3, shape, &w);
      return w;
    }
    case ROWS_2D: {
      dlb_slice s[3] = {{1, 2, 1}, {0, 4, 1}, {0, 5, 1}};
      dlb_tensor_slice(b, 3, s, &w);
      return w;
    }
    case PLANES_3D:
      dlb_tensor_slice(b, 3, s3, &w);
      return w;
    case TRANSPOSED: {
      int32_t axes[3] = {0, 2, 1};
      dlb_slice s[3] = {{0, 3, 1}, {0, 5, 1}, {0, 4, 1}};
      dlb_tensor_slice(b, 3, s, &v);
      if (v != NULL) dlb_tensor_permute(v, axes, &w);
      dlb_tensor_release(v);
      return w;
    }
    default: {
      dlb_slice s[3] = {{2, DLB_SLICE_DEFAULT, -1}, {0, 4, 1}, {9, 4, -1}};
      dlb_tensor_slice(b, 3, s, &w);
      return w;
    }
  }
}

/* Reads base back to the host and checks that the view's elements hold
 * the source's values and every other element its old one. */
static int verify(DLManagedTensorVersioned *db, int layout, float src_base,
                  float old_base) {
  int64_t shape[3] = {3, 8, 10};
  DLManagedTensorVersioned *h = cpu_pattern(3, shape, 0), *sv = NULL, *dv = NULL;
  DLManagedTensorVersioned *expect = cpu_pattern(3, shape, old_base);
  DLManagedTensorVersioned *src = cpu_pattern(3, shape, src_base);
  int ok = h != NULL && expect != NULL && src != NULL &&
           dlb_copy_sync(&db->dl_tensor, &h->dl_tensor, NULL) == DLB_OK;
  if (ok) {
    sv = view(src, layout);
    dv = view(expect, layout);
    ok = sv != NULL && dv != NULL && dlb_copy(&sv->dl_tensor, &dv->dl_tensor) == DLB_OK;
  }
  if (ok) ok = memcmp(h->dl_tensor.data, expect->dl_tensor.data, 240 * 4) == 0;
  dlb_tensor_release(h);
  dlb_tensor_release(sv);
  dlb_tensor_release(dv);
  dlb_tensor_release(expect);
  dlb_tensor_release(src);
  return ok;
}

typedef int (*cu_stream_create)(void **, unsigned);
typedef int (*cu_stream_destroy)(void *);
typedef int (*cu_ctx_retain)(void **, int);
typedef int (*cu_ctx_set)(void *);

int main(void) {
  dlb_status s = dlb_runtime_status(DLB_RUNTIME_CUDA);
  result("load", "cuda", s, dlb_runtime_library(DLB_RUNTIME_CUDA));
  if (s != DLB_OK) return 2;
  int n = 0, version = 0;
  dlb_runtime_device_count(DLB_RUNTIME_CUDA, &n);
  dlb_runtime_version(DLB_RUNTIME_CUDA, &version);
  char info[64];
  snprintf(info, sizeof info, "%d_devices_driver_%d", n, version);
  result("load", "devices", DLB_OK, info);
  /* Informational: an NVIDIA machine usually has no HIP. */
  s = dlb_runtime_status(DLB_RUNTIME_HIP);
  printf("RESULT load hip %s %s\n",
         s == DLB_OK || s == DLB_E_NO_RUNTIME || s == DLB_E_NO_DEVICE ? "ok"
                                                                     : "FAIL",
         s == DLB_OK ? "usable" : dlb_last_error());

  DLDevice kinds[5];
  int nk = 0;
  kinds[nk++] = (DLDevice){kDLCPU, 0};
  kinds[nk++] = (DLDevice){kDLCUDA, 0};
  if (n > 1) kinds[nk++] = (DLDevice){kDLCUDA, 1};
  kinds[nk++] = (DLDevice){kDLCUDAHost, 0};
  kinds[nk++] = (DLDevice){kDLCUDAManaged, 0};

  /* Allocate, classify, check the label. */
  for (int k = 0; k < nk; k++) {
    int64_t shape[2] = {1024, 1024};
    DLManagedTensorVersioned *t = NULL;
    s = dlb_tensor_alloc(kinds[k], f32, 2, shape, &t);
    result("alloc", name_of(kinds[k]), s, "4 MiB");
    if (s != DLB_OK) continue;
    DLDevice d = {kDLCPU, 0};
    s = dlb_device_of_pointer((char *)t->dl_tensor.data + 12345, &d);
    if (s == DLB_OK && !dlb_device_equal(d, kinds[k])) s = DLB_E_DEVICE;
    result("classify", name_of(kinds[k]), s, name_of(d));
    DLDevice out;
    s = dlb_tensor_check_device(&t->dl_tensor, DLB_LABEL_CORRECT, &out);
    result("label", name_of(kinds[k]), s, name_of(out));
    dlb_tensor_release(t);
  }

  /* Pin in place, twice, and memory pinned already. */
  {
    int64_t shape[1] = {1 << 20};
    DLManagedTensorVersioned *t = cpu_pattern(1, shape, 0), *p = NULL, *q = NULL;
    s = dlb_tensor_pin(t, kDLCUDAHost, &p);
    DLDevice d = {kDLCPU, 0};
    if (s == DLB_OK) s = dlb_device_of_pointer(t->dl_tensor.data, &d);
    if (s == DLB_OK && d.device_type != kDLCUDAHost) s = DLB_E_STATE;
    result("pin", "register", s, name_of(d));
    if (s == DLB_OK) s = dlb_tensor_pin(t, kDLCUDAHost, &q);
    result("pin", "again", s, "");
    dlb_tensor_release(p);
    dlb_tensor_release(q);
    if (s == DLB_OK) s = dlb_device_of_pointer(t->dl_tensor.data, &d);
    result("pin", "unregistered", s == DLB_OK && d.device_type == kDLCPU ? DLB_OK
           : DLB_E_STATE, name_of(d));
    dlb_tensor_release(t);
    DLManagedTensorVersioned *h = NULL, *w = NULL;
    s = dlb_tensor_alloc((DLDevice){kDLCUDAHost, 0}, f32, 1, shape, &h);
    if (s == DLB_OK) {
      DLTensor desc = h->dl_tensor;
      desc.device = (DLDevice){kDLCPU, 0};
      s = dlb_tensor_wrap(&desc, 0, NULL, NULL, &w);
    }
    if (s == DLB_OK) s = dlb_tensor_pin(w, kDLCUDAHost, &p);
    result("pin", "pinned-already", s, "cuMemHostAlloc memory");
    dlb_tensor_release(p);
    dlb_tensor_release(w);
    dlb_tensor_release(h);
  }

  /* A view pinned, then the whole tensor over it: only the gaps are
   * registered, and they share pages with the view's registration (its
   * ends fall inside pages). Then copies over the three registrations, to
   * the device and back into them, which the driver must get right
   * whether or not it takes the span as pinned. */
  {
    int64_t shape[1] = {1 << 20};
    size_t bytes = (size_t)4 << 20;
    DLManagedTensorVersioned *t = cpu_pattern(1, shape, 0), *v = NULL;
    DLManagedTensorVersioned *p = NULL, *q = NULL, *d = NULL;
    dlb_slice mid = {1001, 300001, 1};
    s = t != NULL ? dlb_tensor_slice(t, 1, &mid, &v) : DLB_E_NOMEM;
    if (s == DLB_OK) s = dlb_tensor_pin(v, kDLCUDAHost, &p);
    if (s == DLB_OK) s = dlb_tensor_pin(t, kDLCUDAHost, &q);
    result("pin", "view-then-whole", s, "");
    if (s == DLB_OK)
      s = dlb_tensor_alloc((DLDevice){kDLCUDA, 0}, f32, 1, shape, &d);
    if (s == DLB_OK) s = dlb_copy_sync(&q->dl_tensor, &d->dl_tensor, NULL);
    if (s == DLB_OK) {
      memset(q->dl_tensor.data, 0, bytes);
      s = dlb_copy_sync(&d->dl_tensor, &q->dl_tensor, NULL);
    }
    for (int64_t i = 0; s == DLB_OK && i < shape[0]; i++)
      if (((float *)q->dl_tensor.data)[i] != (float)i) s = DLB_E_STATE;
    result("pin", "copy-over-registrations", s, "4 MiB both ways");
    dlb_tensor_release(d);
    dlb_tensor_release(p);
    dlb_tensor_release(q);
    DLDevice k = {kDLCUDAHost, 0};
    if (t != NULL) dlb_device_of_pointer(t->dl_tensor.data, &k);
    result("pin", "all-unregistered",
           k.device_type == kDLCPU ? DLB_OK : DLB_E_STATE, name_of(k));
    dlb_tensor_release(v);
    dlb_tensor_release(t);
  }

  /* Copies: every pair of kinds, five layouts. */
  for (int l = 0; l < LAYOUTS; l++) {
    int bad = 0, done = 0;
    char detail[160] = "";
    for (int a = 0; a < nk; a++)
      for (int b = 0; b < nk; b++) {
        DLManagedTensorVersioned *sb = NULL, *db = NULL, *sv = NULL, *dv = NULL;
        s = base_on(kinds[a], 1000.0f, &sb);
        if (s == DLB_OK) s = base_on(kinds[b], -1.0f, &db);
        if (s == DLB_OK) {
          sv = view(sb, l);
          dv = view(db, l);
          s = sv != NULL && dv != NULL
                  ? dlb_copy_sync(&sv->dl_tensor, &dv->dl_tensor, NULL)
                  : DLB_E_LAYOUT;
        }
        if (s != DLB_OK || !verify(db, l, 1000.0f, -1.0f)) {
          if (bad++ == 0)
            snprintf(detail, sizeof detail, "%s->%s: %s", name_of(kinds[a]),
                     name_of(kinds[b]), s != DLB_OK ? dlb_last_error()
                                                    : "wrong values");
        }
        done++;
        dlb_tensor_release(sv);
        dlb_tensor_release(dv);
        dlb_tensor_release(sb);
        dlb_tensor_release(db);
      }
    printf("RESULT copy %s %s %d_pairs %s\n", layout_names[l],
           bad == 0 ? "ok" : "FAIL", done, detail);
    fails += bad != 0;
  }

  /* Managed memory: prefetch both ways, advise, read on the host. */
  {
    int64_t shape[1] = {1 << 22};
    DLManagedTensorVersioned *m = NULL;
    s = dlb_tensor_alloc((DLDevice){kDLCUDAManaged, 0}, f32, 1, shape, &m);
    if (s == DLB_OK) {
      float *v = m->dl_tensor.data;
      for (int i = 0; i < (1 << 22); i++) v[i] = (float)i;
      s = dlb_managed_advise(&m->dl_tensor, DLB_ADVISE_SET_READ_MOSTLY,
                             (DLDevice){kDLCUDA, 0});
      result("managed", "advise", s, "read-mostly");
      s = dlb_managed_prefetch(&m->dl_tensor, (DLDevice){kDLCUDA, 0}, NULL);
      result("managed", "prefetch-gpu", s, "");
      s = dlb_managed_prefetch(&m->dl_tensor, (DLDevice){kDLCPU, 0}, NULL);
      if (s == DLB_OK)
        s = dlb_stream_synchronize((DLDevice){kDLCUDAManaged, 0}, NULL);
      if (s == DLB_OK && v[(1 << 22) - 1] != (float)((1 << 22) - 1))
        s = DLB_E_STATE;
      result("managed", "prefetch-host", s, "");
      dlb_tensor_release(m);
    } else {
      result("managed", "alloc", s, "");
    }
  }

  /* Streams: a hand-off must not block the host; a host read after the
   * producer's legacy-stream wait sees the data. */
  void *cu = dlopen("libcuda.so.1", RTLD_NOW | RTLD_NOLOAD);
  cu_stream_create mk = NULL;
  cu_stream_destroy rm = NULL;
  cu_ctx_retain retain = NULL;
  cu_ctx_set set = NULL;
  if (cu != NULL) {
    void *p1 = dlsym(cu, "cuStreamCreate"), *p2 = dlsym(cu, "cuStreamDestroy_v2");
    void *p3 = dlsym(cu, "cuDevicePrimaryCtxRetain"), *p4 = dlsym(cu, "cuCtxSetCurrent");
    memcpy(&mk, &p1, sizeof p1);
    memcpy(&rm, &p2, sizeof p2);
    memcpy(&retain, &p3, sizeof p3);
    memcpy(&set, &p4, sizeof p4);
  }
  if (mk != NULL && rm != NULL && retain != NULL && set != NULL) {
    void *ctx = NULL, *producer = NULL, *consumer = NULL;
    retain(&ctx, 0);
    set(ctx);
    mk(&producer, 1);
    mk(&consumer, 1);
    int64_t big[1] = {64 << 20}; /* 256 MiB of float32, device memory */
    DLManagedTensorVersioned *a = NULL, *b = NULL, *h = NULL;
    s = dlb_tensor_alloc((DLDevice){kDLCUDA, 0}, f32, 1, big, &a);
    if (s == DLB_OK) s = dlb_tensor_alloc((DLDevice){kDLCUDA, 0}, f32, 1, big, &b);
    int64_t small[1] = {1 << 20};
    if (s == DLB_OK)
      s = dlb_tensor_alloc((DLDevice){kDLCUDAHost, 0}, f32, 1, small, &h);
    DLManagedTensorVersioned *src = cpu_pattern(1, small, 5.0f);
    DLTensor head = a->dl_tensor;
    head.shape = small;
    if (s == DLB_OK) s = dlb_copy_sync(&src->dl_tensor, &head, NULL);
    double waited = -1;
    if (s == DLB_OK) {
      /* Several big copies keep the producer busy for a while. */
      for (int i = 0; i < 8 && s == DLB_OK; i++)
        s = dlb_copy_async(&a->dl_tensor, &b->dl_tensor, producer);
      double t0 = now();
      if (s == DLB_OK) s = dlb_stream_wait((DLDevice){kDLCUDA, 0}, consumer, producer);
      waited = now() - t0;
      DLTensor bhead = b->dl_tensor;
      bhead.shape = small;
      if (s == DLB_OK) s = dlb_copy_async(&bhead, &h->dl_tensor, consumer);
      if (s == DLB_OK) s = dlb_stream_synchronize((DLDevice){kDLCUDA, 0}, consumer);
      if (s == DLB_OK && memcmp(h->dl_tensor.data, src->dl_tensor.data, 4 << 20) != 0)
        s = DLB_E_STATE;
    }
    char d[64];
    snprintf(d, sizeof d, "host_blocked_%.3f_ms", waited * 1e3);
    result("stream", "handoff", s, d);
    if (s == DLB_OK) {
      memset(h->dl_tensor.data, 0, 4 << 20);
      for (int i = 0; i < 4 && s == DLB_OK; i++)
        s = dlb_copy_async(&a->dl_tensor, &b->dl_tensor, producer);
      DLTensor ahead = a->dl_tensor;
      ahead.shape = small;
      if (s == DLB_OK) s = dlb_copy_async(&ahead, &h->dl_tensor, producer);
      void *legacy = NULL;
      int sync = 0;
      if (s == DLB_OK) s = dlb_stream_from_dlpack(kDLCUDAHost, 1, &legacy, &sync);
      if (s == DLB_OK) s = dlb_stream_wait((DLDevice){kDLCUDA, 0}, legacy, producer);
      if (s == DLB_OK) s = dlb_stream_synchronize((DLDevice){kDLCUDAHost, 0}, legacy);
      if (s == DLB_OK && memcmp(h->dl_tensor.data, src->dl_tensor.data, 4 << 20) != 0)
        s = DLB_E_STATE;
      result("stream", "host-read-after-producer", s, "");
    }
    /* Bandwidth of dlb_copy_sync, 256 MiB each way. */
    DLManagedTensorVersioned *page = NULL, *pin = NULL;
    if (s == DLB_OK) s = dlb_tensor_alloc((DLDevice){kDLCPU, 0}, f32, 1, big, &page);
    if (s == DLB_OK) s = dlb_tensor_alloc((DLDevice){kDLCUDAHost, 0}, f32, 1, big, &pin);
    if (s == DLB_OK) {
      memset(page->dl_tensor.data, 1, (size_t)256 << 20);
      memset(pin->dl_tensor.data, 1, (size_t)256 << 20);
      struct { const char *name; DLManagedTensorVersioned *from, *to; } bw[] = {
          {"pageable->device", page, a}, {"device->pageable", a, page},
          {"pinned->device", pin, a},    {"device->pinned", a, pin},
          {"device->device", a, b}};
      for (int i = 0; i < 5; i++) {
        double best = 1e9;
        for (int r = 0; r < 3; r++) {
          double t0 = now();
          if (dlb_copy_sync(&bw[i].from->dl_tensor, &bw[i].to->dl_tensor, NULL) != DLB_OK)
            break;
          double t = now() - t0;
          if (t < best) best = t;
        }
        printf("BW %s %.1f\n", bw[i].name, 0.268435456 / best);
      }
    }
    dlb_tensor_release(page);
    dlb_tensor_release(pin);
    dlb_tensor_release(a);
    dlb_tensor_release(b);
    dlb_tensor_release(h);
    dlb_tensor_release(src);
    rm(producer);
    rm(consumer);
  } else {
    result("stream", "handoff", DLB_E_NO_RUNTIME, "");
  }
  return fails != 0;
}
EOF

if step 30 "compile gpu_check.c" cc -std=c11 -D_GNU_SOURCE -O2 -Wall -o "$OUT/gpu_check" \
     "$OUT/gpu_check.c" -I"$REPO/include" -I"$OUT/build/include" \
     "$OUT/build/src/libdlbridge.a" \
     -ldl -lpthread -lm; then
  step 60 "gpu_check (real driver)" bash -c "'$OUT/gpu_check' > '$OUT/gpu_check.txt' 2>&1"
  rc=$?
  cat "$OUT/gpu_check.txt" >> "$LOG"
  grep '^RESULT' "$OUT/gpu_check.txt" >> "$RESULTS"
  # A crash or a time-out reports no failed check of its own.
  if [ "$rc" -ne 0 ] && ! grep -q '^RESULT .* FAIL ' "$OUT/gpu_check.txt"; then
    result c gpu_check FAIL "exit $rc without a failed check (see $LOG)"
  fi
  grep '^BW' "$OUT/gpu_check.txt" > "$OUT/bandwidth.txt"
else
  result c gpu_check FAIL "did not compile"
fi

# ---- CUDA IPC between processes on the real driver ---------------------------
# Two workers, forked before this process touches CUDA (a forked child
# cannot use a parent's CUDA), import one cuda:0 tensor by IPC handle,
# check every byte the exporter wrote, write their half each; the exporter
# checks every byte after. Also times export + send + import + release.
cat > "$OUT/ipc_check.c" <<'EOF'
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "dlbridge.h"

#define N ((int64_t)64 << 20)
static const DLDataType u8 = {kDLUInt, 8, 1};

static unsigned char pat(int who, int64_t k) {
  return (unsigned char)(k * 13 + who);
}

static DLManagedTensorVersioned *host(int64_t n) {
  DLManagedTensorVersioned *t = NULL;
  return dlb_tensor_alloc((DLDevice){kDLCPU, 0}, u8, 1, &n, &t) == DLB_OK ? t
                                                                          : NULL;
}

static int worker(int sock, int i) {
  char c = 0;
  DLManagedTensorVersioned *d = NULL, *h = host(N), *q = NULL, *src = NULL;
  if (h == NULL || dlb_share_recv(sock, 0, &d) != DLB_OK) {
    fprintf(stderr, "worker %d: %s\n", i, dlb_last_error());
    return 1;
  }
  if (dlb_copy_sync(&d->dl_tensor, &h->dl_tensor, NULL) != DLB_OK) return 2;
  const unsigned char *v = h->dl_tensor.data;
  for (int64_t k = 0; k < N; k++)
    if (v[k] != pat(9, k)) return 3;
  if (write(sock, "r", 1) != 1 || read(sock, &c, 1) != 1) return 4;
  dlb_slice half = {i * (N / 2), (i + 1) * (N / 2), 1};
  if (dlb_tensor_slice(d, 1, &half, &q) != DLB_OK ||
      dlb_tensor_slice(h, 1, &half, &src) != DLB_OK)
    return 5;
  unsigned char *w = (unsigned char *)src->dl_tensor.data +
                     src->dl_tensor.byte_offset;
  for (int64_t k = 0; k < N / 2; k++) w[k] = pat(i, i * (N / 2) + k);
  if (dlb_copy_sync(&src->dl_tensor, &q->dl_tensor, NULL) != DLB_OK) return 6;
  dlb_tensor_release(q);
  dlb_tensor_release(src);
  dlb_tensor_release(d);
  dlb_tensor_release(h);
  return write(sock, "w", 1) == 1 ? 0 : 7;
}

int main(void) {
  int socks[2];
  pid_t pids[2];
  for (int i = 0; i < 2; i++) {
    int sv[2];
    if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) != 0) return 1;
    pids[i] = fork();
    if (pids[i] == 0) {
      close(sv[0]);
      _exit(worker(sv[1], i));
    }
    close(sv[1]);
    socks[i] = sv[0];
  }
  int64_t n = N;
  DLManagedTensorVersioned *d = NULL, *h = host(N);
  dlb_status s = dlb_tensor_alloc((DLDevice){kDLCUDA, 0}, u8, 1, &n, &d);
  if (s != DLB_OK || h == NULL) {
    printf("RESULT ipc cuda-two-processes FAIL %s\n", dlb_last_error());
    return 1;
  }
  unsigned char *v = h->dl_tensor.data;
  for (int64_t k = 0; k < N; k++) v[k] = pat(9, k);
  s = dlb_copy_sync(&h->dl_tensor, &d->dl_tensor, NULL);
  struct timespec t0, t1;
  clock_gettime(CLOCK_MONOTONIC, &t0);
  for (int i = 0; i < 2 && s == DLB_OK; i++) s = dlb_share_send(socks[i], d);
  clock_gettime(CLOCK_MONOTONIC, &t1);
  char c = 0;
  int bad = s != DLB_OK;
  for (int i = 0; i < 2; i++) bad |= read(socks[i], &c, 1) != 1 || c != 'r';
  for (int i = 0; i < 2; i++) bad |= write(socks[i], "g", 1) != 1;
  for (int i = 0; i < 2; i++) bad |= read(socks[i], &c, 1) != 1 || c != 'w';
  int codes[2] = {0, 0};
  for (int i = 0; i < 2; i++) {
    int st = 0;
    waitpid(pids[i], &st, 0);
    codes[i] = WIFEXITED(st) ? WEXITSTATUS(st) : 100 + WTERMSIG(st);
    bad |= codes[i] != 0;
  }
  memset(v, 0, (size_t)N);
  if (dlb_copy_sync(&d->dl_tensor, &h->dl_tensor, NULL) != DLB_OK) bad = 1;
  int64_t wrong = 0;
  for (int64_t k = 0; k < N; k++) wrong += v[k] != pat((int)(k / (N / 2)), k);
  printf("RESULT ipc cuda-two-processes %s 64MiB, workers exit %d %d, %lld "
         "wrong bytes %s\n", bad || wrong ? "FAIL" : "ok", codes[0], codes[1],
         (long long)wrong, s != DLB_OK ? dlb_last_error() : "");
  printf("RESULT ipc export-and-send %s %.1f us for two sends\n",
         s == DLB_OK ? "ok" : "FAIL",
         1e6 * ((double)(t1.tv_sec - t0.tv_sec) +
                1e-9 * (double)(t1.tv_nsec - t0.tv_nsec)));
  dlb_tensor_release(d);
  dlb_tensor_release(h);
  return bad || wrong;
}
EOF

if step 20 "compile ipc_check.c" cc -std=c11 -D_GNU_SOURCE -O2 -Wall -o "$OUT/ipc_check" \
     "$OUT/ipc_check.c" -I"$REPO/include" -I"$OUT/build/include" "$OUT/build/src/libdlbridge.a" \
     -ldl -lpthread -lm; then
  step 30 "ipc_check (real driver, 3 processes)" bash -c "'$OUT/ipc_check' > '$OUT/ipc_check.txt' 2>&1"
  cat "$OUT/ipc_check.txt" >> "$LOG"
  if grep -q '^RESULT' "$OUT/ipc_check.txt"; then
    grep '^RESULT' "$OUT/ipc_check.txt" >> "$RESULTS"
  else
    result ipc cuda-two-processes FAIL "no result (see $LOG)"
  fi
else
  result ipc ipc_check FAIL "did not compile"
fi

# ---- peers, through ctypes on the shared library -----------------------------
cat > "$OUT/peers.py" <<'EOF'
"""Exchange with CuPy, PyTorch, JAX and NumPy on the real GPU, through the
C library (ctypes), and the Python module when it built."""
import ctypes as C
import os
import sys
import time
import traceback

lib = C.CDLL(sys.argv[1])
module_dir = sys.argv[2] if len(sys.argv) > 2 else ""


def result(area, name, ok, detail=""):
    detail = " ".join(str(detail).split())[:200]
    print(f"RESULT {area} {name} {'ok' if ok else 'FAIL'} {detail}", flush=True)


def skip(area, name, why):
    print(f"RESULT {area} {name} SKIP {why}", flush=True)


class DLDevice(C.Structure):
    _fields_ = [("device_type", C.c_int), ("device_id", C.c_int32)]


class DLDataType(C.Structure):
    _fields_ = [("code", C.c_uint8), ("bits", C.c_uint8), ("lanes", C.c_uint16)]


class DLTensor(C.Structure):
    _fields_ = [("data", C.c_void_p), ("device", DLDevice), ("ndim", C.c_int32),
                ("dtype", DLDataType), ("shape", C.POINTER(C.c_int64)),
                ("strides", C.POINTER(C.c_int64)), ("byte_offset", C.c_uint64)]


class Versioned(C.Structure):
    _fields_ = [("major", C.c_uint32), ("minor", C.c_uint32),
                ("manager_ctx", C.c_void_p), ("deleter", C.c_void_p),
                ("flags", C.c_uint64), ("dl_tensor", DLTensor)]


class Legacy(C.Structure):
    _fields_ = [("dl_tensor", DLTensor), ("manager_ctx", C.c_void_p),
                ("deleter", C.c_void_p)]


CPU, CUDA, CUDA_HOST, CUDA_MANAGED = 1, 2, 3, 13
lib.dlb_tensor_alloc.argtypes = [DLDevice, DLDataType, C.c_int32,
                                 C.POINTER(C.c_int64),
                                 C.POINTER(C.POINTER(Versioned))]
lib.dlb_tensor_to_legacy.argtypes = [C.POINTER(Versioned),
                                     C.POINTER(C.POINTER(Legacy))]
lib.dlb_tensor_release.argtypes = [C.c_void_p]
lib.dlb_legacy_release.argtypes = [C.c_void_p]
lib.dlb_last_error.restype = C.c_char_p
lib.dlb_device_of_pointer.argtypes = [C.c_void_p, C.POINTER(DLDevice)]
lib.dlb_tensor_check_device.argtypes = [C.POINTER(DLTensor), C.c_uint,
                                        C.POINTER(DLDevice)]
lib.dlb_stream_wait.argtypes = [DLDevice, C.c_void_p, C.c_void_p]

api = C.pythonapi
DESTRUCTOR = C.CFUNCTYPE(None, C.c_void_p)
api.PyCapsule_New.restype = C.py_object
api.PyCapsule_New.argtypes = [C.c_void_p, C.c_char_p, DESTRUCTOR]
api.PyCapsule_IsValid.argtypes = [C.c_void_p, C.c_char_p]
api.PyCapsule_GetPointer.restype = C.c_void_p
api.PyCapsule_GetPointer.argtypes = [C.c_void_p, C.c_char_p]


@DESTRUCTOR
def free_legacy(cap):
    if api.PyCapsule_IsValid(cap, b"dltensor"):
        lib.dlb_legacy_release(api.PyCapsule_GetPointer(cap, b"dltensor"))


@DESTRUCTOR
def free_versioned(cap):
    if api.PyCapsule_IsValid(cap, b"dltensor_versioned"):
        lib.dlb_tensor_release(api.PyCapsule_GetPointer(cap, b"dltensor_versioned"))


def check(status):
    if status != 0:
        raise RuntimeError(lib.dlb_last_error().decode())


def alloc(device_type, n):
    shape = (C.c_int64 * 1)(n)
    out = C.POINTER(Versioned)()
    check(lib.dlb_tensor_alloc(DLDevice(device_type, 0), DLDataType(2, 32, 1), 1,
                               shape, C.byref(out)))
    return out


def host_view(t, n):
    import numpy as np
    buf = (C.c_float * n).from_address(t.contents.dl_tensor.data)
    return np.ctypeslib.as_array(buf)


class Holder:
    """A producer with __dlpack__ handing out one dlbridge tensor, under the
    label the consumer accepts."""

    def __init__(self, t, label):
        self.t, self.label = t, label

    def __dlpack_device__(self):
        return self.label

    def __dlpack__(self, stream=None, max_version=None, dl_device=None, copy=None):
        t, self.t = self.t, None
        t.contents.dl_tensor.device = DLDevice(*self.label)
        if max_version is not None and max_version[0] >= 1:
            return api.PyCapsule_New(C.cast(t, C.c_void_p), b"dltensor_versioned",
                                     free_versioned)
        legacy = C.POINTER(Legacy)()
        check(lib.dlb_tensor_to_legacy(t, C.byref(legacy)))
        return api.PyCapsule_New(C.cast(legacy, C.c_void_p), b"dltensor", free_legacy)


def kind(ptr):
    d = DLDevice(0, 0)
    check(lib.dlb_device_of_pointer(C.c_void_p(ptr), C.byref(d)))
    return (d.device_type, d.device_id)


DRY = os.environ.get("DLB_GPU_DRY") == "1"


def cuda_torch():
    # In the dry run (the emulated driver), a PyTorch without CUDA cannot
    # take part: skipped. On a GPU machine its failure is a failure.
    import torch
    if DRY and not torch.cuda.is_available():
        raise ImportError("this PyTorch has no CUDA")
    return torch


def run(area, name, fn):
    try:
        ok, detail = fn()
        result(area, name, ok, detail)
    except ImportError as e:
        skip(area, name, e)
    except Exception as e:  # one failing peer must not stop the others
        result(area, name, False, f"{type(e).__name__}: {e}")
        traceback.print_exc()


N = 1 << 20


def managed_into_torch():
    torch = cuda_torch()
    t = alloc(CUDA_MANAGED, N)
    ptr = t.contents.dl_tensor.data
    host_view(t, N)[:] = 1.5
    # PyTorch refuses kDLCUDAManaged: cuda:0 is the harmless label.
    x = torch.from_dlpack(Holder(t, (CUDA, 0)))
    x.mul_(2)
    torch.cuda.synchronize()
    same = x.data_ptr() == ptr
    return same and float(x.sum()) == 3.0 * N, f"zero-copy={same}"


def managed_into_cupy():
    import cupy
    t = alloc(CUDA_MANAGED, N)
    ptr = t.contents.dl_tensor.data
    host_view(t, N)[:] = 2.0
    x = cupy.from_dlpack(Holder(t, (CUDA_MANAGED, 0)))
    same = x.data.ptr == ptr
    return same and float(x.sum()) == 2.0 * N, f"zero-copy={same}"


def pinned_into_numpy():
    import numpy as np
    t = alloc(CUDA_HOST, N)
    ptr = t.contents.dl_tensor.data
    host_view(t, N)[:] = np.arange(N, dtype=np.float32)
    a = np.from_dlpack(Holder(t, (CUDA_HOST, 0)))
    same = a.ctypes.data == ptr
    return same and float(a[12345]) == 12345.0, f"zero-copy={same}"


def pinned_into_jax():
    import jax
    import numpy as np
    t = alloc(CUDA_HOST, N)
    host_view(t, N)[:] = 4.0
    # JAX's CPU client takes kDLCPU (pinned memory is CPU memory) and only
    # the legacy struct.
    cpu = jax.devices("cpu")[0]
    h = Holder(t, (CPU, 0))
    x = jax.dlpack.from_dlpack(h)
    return float(np.asarray(x).sum()) == 4.0 * N and cpu in x.devices(), \
        str(x.devices())


def classify_torch():
    torch = cuda_torch()
    d = torch.empty(N, device="cuda")
    p = torch.empty(N).pin_memory()
    c = torch.empty(N)
    got = (kind(d.data_ptr()), kind(p.data_ptr()), kind(c.data_ptr()))
    want = ((CUDA, 0), (CUDA_HOST, 0), (CPU, 0))
    # PyTorch's capsule labels pinned memory kCPU: corrected on request.
    shape = (C.c_int64 * 1)(N)
    dt = DLTensor(p.data_ptr(), DLDevice(CPU, 0), 1, DLDataType(2, 32, 1), shape,
                  None, 0)
    out = DLDevice(0, 0)
    check(lib.dlb_tensor_check_device(C.byref(dt), 1, C.byref(out)))
    return got == want and (out.device_type, out.device_id) == (CUDA_HOST, 0), got


def classify_cupy():
    import cupy
    m = cupy.cuda.malloc_managed(4 * N)
    d = cupy.empty(N, dtype=cupy.float32)
    got = (kind(m.ptr), kind(d.data.ptr))
    return got == ((CUDA_MANAGED, 0), (CUDA, 0)), got


def classify_jax():
    import jax
    import jax.numpy as jnp
    gpus = [d for d in jax.devices() if d.platform == "gpu"]
    if not gpus:
        if DRY:
            raise ImportError("this JAX has no GPU device")
        return False, "no JAX GPU device"
    x = jax.device_put(jnp.ones(N), gpus[0])
    return kind(x.unsafe_buffer_pointer()) == (CUDA, 0), kind(x.unsafe_buffer_pointer())


def torch_stream_handoff():
    torch = cuda_torch()
    producer, consumer = torch.cuda.Stream(), torch.cuda.Stream()
    x = torch.zeros(N, device="cuda")
    torch.cuda.synchronize()
    with torch.cuda.stream(producer):
        torch.cuda._sleep(200_000_000)  # keeps the producer busy
        x.fill_(7.0)
    t0 = time.perf_counter()
    check(lib.dlb_stream_wait(DLDevice(CUDA, 0), C.c_void_p(consumer.cuda_stream),
                              C.c_void_p(producer.cuda_stream)))
    blocked = time.perf_counter() - t0
    with torch.cuda.stream(consumer):
        y = x + 1
    consumer.synchronize()
    ok = bool((y == 8.0).all()) and blocked < 0.05
    return ok, f"host_blocked_{blocked * 1e3:.2f}_ms"


def module_import():
    sys.path.insert(0, module_dir)
    import dlbridge
    return True, getattr(dlbridge, "__file__", "")


run("peer", "managed->torch", managed_into_torch)
run("peer", "managed->cupy", managed_into_cupy)
run("peer", "pinned->numpy", pinned_into_numpy)
run("peer", "pinned->jax", pinned_into_jax)
run("peer", "classify-torch", classify_torch)
run("peer", "classify-cupy", classify_cupy)
run("peer", "classify-jax", classify_jax)
run("peer", "torch-stream-handoff", torch_stream_handoff)
if module_dir:
    run("module", "import", module_import)
else:
    skip("module", "import", "the module did not build")
EOF

step 100 "peers (CuPy, PyTorch, JAX, NumPy)" bash -c \
     "'$PY' '$OUT/peers.py' '$OUT/build/src/libdlbridge.so' '$MODULE_DIR' \
        > '$OUT/peers.txt' 2>&1"
rc=$?
cat "$OUT/peers.txt" >> "$LOG"
grep '^RESULT' "$OUT/peers.txt" >> "$RESULTS"
# Each peer's failure is its own row; a script that stops (a crash, a
# time-out, an error outside the checks) is one more.
if [ "$rc" -ne 0 ]; then
  result peer peers.py FAIL "exit $rc (see $LOG)"
fi

# ---- table -----------------------------------------------------------------
{
  echo "dlbridge on ${GPU:-an unknown GPU}, $(date -u '+%Y-%m-%d %H:%M UTC'), $(( $(date +%s) - START )) s"
  printf '%-9s %-26s %-5s %s\n' area check state detail
  awk '/^RESULT/ { d = ""; for (i = 5; i <= NF; i++) d = d " " $i;
                   printf "%-9s %-26s %-5s%s\n", $2, $3, $4, substr(d, 1, 70) }' \
      "$RESULTS"
  if [ -s "$OUT/bandwidth.txt" ]; then
    echo "copy bandwidth (dlb_copy_sync, 256 MiB, best of 3):"
    awk '{ printf "  %-18s %6s GB/s\n", $2, $3 }' "$OUT/bandwidth.txt"
  fi
  printf 'passed %s, failed %s, skipped %s\n' \
    "$(grep -c ' ok ' "$RESULTS")" "$(grep -c ' FAIL ' "$RESULTS")" \
    "$(grep -c ' SKIP ' "$RESULTS")"
} > "$TABLE"
cat "$TABLE" >> "$LOG"
cat "$TABLE"
echo "log: $LOG"
! grep -q ' FAIL ' "$RESULTS"
