/*
 * bench_gpu.c -- host <-> device and device-to-device bandwidth of
 * dlb_copy_sync for every kind of host memory, against the CUDA driver's
 * own cuMemcpy on pinned memory, the most the link gives.
 *
 * Usage: bench_gpu [--quick] [--reps N] [--bytes N] [--json PATH]
 *
 * Without a usable CUDA driver and GPU it prints "no GPU: <reason>",
 * writes that to the JSON file and exits 0. DLBRIDGE_CUDA_LIBRARY points
 * it at another driver, as for the library; the tests run it against the
 * emulated one, which moves bytes with memcpy, so its figures say nothing
 * about a GPU.
 *
 * The reference calls come from the same driver file dlbridge opened
 * (dlb_runtime_library), resolved with dlsym: cuMemcpy on pinned memory,
 * then cuCtxSynchronize, for host <-> device; cuMemcpyDtoD_v2 (cuMemcpy
 * where the driver lacks it) for device to device. cuMemcpy on pageable
 * memory, the driver staging it itself, is shown beside dlbridge's
 * staging. Every case copies the same number of bytes into memory
 * touched before, the cases take turns in every rep, and "x link" is the
 * median of the per-rep ratios of the reference's time to the case's.
 * GB/s counts the bytes crossing the link once for host <-> device, and
 * bytes read plus bytes written for device to device (as CUDA's
 * bandwidthTest does).
 */
#include <dlfcn.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "bench_clock.h"
#include "dlbridge.h"

#define MAX_REPS 101

typedef unsigned (*cu_copy_fn)(unsigned long long dst, unsigned long long src,
                               size_t bytes);
typedef unsigned (*cu_sync_fn)(void);
typedef unsigned (*cu_retain_fn)(void **ctx, int device);
typedef unsigned (*cu_push_fn)(void *ctx);
typedef unsigned (*cu_name_fn)(char *name, int len, int device);

static struct {
  cu_copy_fn memcpy_any, memcpy_dtod;
  cu_sync_fn ctx_sync;
  cu_retain_fn retain;
  cu_push_fn push;
  cu_name_fn name;
} cu;

static void *sym(void *lib, const char *name, int required) {
  void *p = dlsym(lib, name);
  if (p == NULL && required) {
    fprintf(stderr, "bench_gpu: the driver lacks %s\n", name);
    exit(1);
  }
  return p;
}

/* Object to function pointer without the cast ISO C leaves undefined. */
#define SET_FN(field, lib, name, required)   \
  do {                                       \
    void *p_ = sym(lib, name, required);     \
    memcpy(&cu.field, &p_, sizeof p_);       \
  } while (0)

static void load_driver(void) {
  const char *path = dlb_runtime_library(DLB_RUNTIME_CUDA);
  void *lib = dlopen(path, RTLD_NOW | RTLD_LOCAL);
  if (lib == NULL) {
    fprintf(stderr, "bench_gpu: cannot open %s: %s\n", path, dlerror());
    exit(1);
  }
  SET_FN(memcpy_any, lib, "cuMemcpy", 1);
  SET_FN(memcpy_dtod, lib, "cuMemcpyDtoD_v2", 0);
  SET_FN(ctx_sync, lib, "cuCtxSynchronize", 1);
  SET_FN(retain, lib, "cuDevicePrimaryCtxRetain", 1);
  SET_FN(push, lib, "cuCtxPushCurrent_v2", 1);
  SET_FN(name, lib, "cuDeviceGetName", 0);
  /* dlbridge works in device 0's primary context; so do the references. */
  void *ctx = NULL;
  if (cu.retain(&ctx, 0) != 0 || cu.push(ctx) != 0) {
    fprintf(stderr, "bench_gpu: cannot make cuda:0's primary context "
                    "current\n");
    exit(1);
  }
}

static void check(dlb_status s, const char *what) {
  if (s != DLB_OK) {
    fprintf(stderr, "bench_gpu: %s: %s (%s)\n", what, dlb_status_name(s),
            dlb_last_error());
    exit(1);
  }
}

static DLManagedTensorVersioned *alloc_on(DLDevice d, int64_t n) {
  DLManagedTensorVersioned *t = NULL;
  check(dlb_tensor_alloc(d, (DLDataType){kDLFloat, 32, 1}, 1, &n, &t),
        "dlb_tensor_alloc");
  return t;
}

static unsigned long long addr(const DLManagedTensorVersioned *t) {
  return (unsigned long long)(uintptr_t)t->dl_tensor.data;
}

/* One case: a dlbridge copy, or a driver call (ref) on raw addresses. */
typedef struct bcase {
  const char *name;
  const char *group; /* "h2d", "d2h", "d2d" */
  const DLManagedTensorVersioned *src, *dst;
  cu_copy_fn ref; /* NULL: dlb_copy_sync */
  double t[MAX_REPS], ratio[MAX_REPS];
} bcase;

static void run(const bcase *c, size_t bytes) {
  if (c->ref == NULL) {
    check(dlb_copy_sync(&c->src->dl_tensor, &c->dst->dl_tensor, NULL),
          c->name);
    return;
  }
  if (c->ref(addr(c->dst), addr(c->src), bytes) != 0 || cu.ctx_sync() != 0) {
    fprintf(stderr, "bench_gpu: %s failed\n", c->name);
    exit(1);
  }
}

static void write_reason(const char *json_path, const char *reason) {
  FILE *f = fopen(json_path, "w");
  if (f == NULL) return;
  fprintf(f, "{\n  \"gpu\": false,\n  \"reason\": \"");
  for (const char *p = reason; *p != '\0'; p++)
    if (*p == '"' || *p == '\\')
      fprintf(f, "\\%c", *p);
    else if ((unsigned char)*p >= 0x20)
      fputc(*p, f);
  fprintf(f, "\"\n}\n");
  fclose(f);
}

int main(int argc, char **argv) {
  const char *json_path = "bench_gpu.json";
  int reps = 11;
  size_t bytes = (size_t)256 << 20;
  for (int i = 1; i < argc; i++) {
    if (strcmp(argv[i], "--quick") == 0) {
      reps = 5;
      bytes = (size_t)32 << 20;
    } else if (strcmp(argv[i], "--reps") == 0 && i + 1 < argc) {
      reps = atoi(argv[++i]);
    } else if (strcmp(argv[i], "--bytes") == 0 && i + 1 < argc) {
      bytes = (size_t)strtoull(argv[++i], NULL, 0);
    } else if (strcmp(argv[i], "--json") == 0 && i + 1 < argc) {
      json_path = argv[++i];
    } else {
      fprintf(stderr, "usage: %s [--quick] [--reps N] [--bytes N] "
                      "[--json PATH]\n", argv[0]);
      return 2;
    }
  }
  if (reps < 1) reps = 1;
  if (reps > MAX_REPS) reps = MAX_REPS;
  bytes = bytes / 4 * 4;
  if (bytes == 0) bytes = 4;

  dlb_status st = dlb_runtime_status(DLB_RUNTIME_CUDA);
  if (st != DLB_OK) {
    char reason[512];
    snprintf(reason, sizeof reason, "%s: %s", dlb_status_name(st),
             dlb_last_error());
    printf("no GPU: %s\n", reason);
    write_reason(json_path, reason);
    return 0;
  }
  load_driver();
  int version = 0;
  check(dlb_runtime_version(DLB_RUNTIME_CUDA, &version), "version");
  char gpu_name[256] = "unknown";
  if (cu.name != NULL && cu.name(gpu_name, (int)sizeof gpu_name, 0) != 0)
    snprintf(gpu_name, sizeof gpu_name, "unknown");

  const int64_t n = (int64_t)(bytes / 4);
  const DLDevice cpu = {kDLCPU, 0}, dev = {kDLCUDA, 0};
  DLManagedTensorVersioned *d0 = alloc_on(dev, n), *d1 = alloc_on(dev, n);
  DLManagedTensorVersioned *pageable = alloc_on(cpu, n);
  DLManagedTensorVersioned *pinned = alloc_on((DLDevice){kDLCUDAHost, 0}, n);
  DLManagedTensorVersioned *managed =
      alloc_on((DLDevice){kDLCUDAManaged, 0}, n);
  DLManagedTensorVersioned *plain = alloc_on(cpu, n), *registered = NULL;
  /* Every page touched, so no timing pays a first-touch fault. */
  memset(pageable->dl_tensor.data, 1, bytes);
  memset(pinned->dl_tensor.data, 2, bytes);
  memset(managed->dl_tensor.data, 3, bytes);
  memset(plain->dl_tensor.data, 4, bytes);
  check(dlb_tensor_pin(plain, kDLCUDAHost, &registered), "dlb_tensor_pin");
  cu_copy_fn dtod = cu.memcpy_dtod != NULL ? cu.memcpy_dtod : cu.memcpy_any;

  static bcase cases[] = {
      {"cuMemcpy pinned (link)", "h2d", NULL, NULL, NULL, {0}, {0}},
      {"cuMemcpy pageable", "h2d", NULL, NULL, NULL, {0}, {0}},
      {"dlbridge pageable", "h2d", NULL, NULL, NULL, {0}, {0}},
      {"dlbridge pinned", "h2d", NULL, NULL, NULL, {0}, {0}},
      {"dlbridge registered", "h2d", NULL, NULL, NULL, {0}, {0}},
      {"dlbridge managed", "h2d", NULL, NULL, NULL, {0}, {0}},
      {"cuMemcpy pinned (link)", "d2h", NULL, NULL, NULL, {0}, {0}},
      {"cuMemcpy pageable", "d2h", NULL, NULL, NULL, {0}, {0}},
      {"dlbridge pageable", "d2h", NULL, NULL, NULL, {0}, {0}},
      {"dlbridge pinned", "d2h", NULL, NULL, NULL, {0}, {0}},
      {"dlbridge registered", "d2h", NULL, NULL, NULL, {0}, {0}},
      {"dlbridge managed", "d2h", NULL, NULL, NULL, {0}, {0}},
      {"cuMemcpyDtoD (reference)", "d2d", NULL, NULL, NULL, {0}, {0}},
      {"dlbridge device-to-device", "d2d", NULL, NULL, NULL, {0}, {0}},
  };
  enum { NCASES = sizeof cases / sizeof cases[0] };
  const DLManagedTensorVersioned *host[6] = {pinned,  pageable, pageable,
                                             pinned,  registered, managed};
  for (int k = 0; k < 6; k++) {
    cases[k].src = host[k];
    cases[k].dst = d0;
    cases[6 + k].src = d0;
    cases[6 + k].dst = host[k];
  }
  cases[0].ref = cases[1].ref = cases[6].ref = cases[7].ref = cu.memcpy_any;
  if (cu.memcpy_dtod == NULL) cases[12].name = "cuMemcpy (reference)";
  cases[12].src = cases[13].src = d0;
  cases[12].dst = cases[13].dst = d1;
  cases[12].ref = dtod;
  /* The reference of case k, run just before it in every rep. */
  const int ref_of[NCASES] = {0, 0, 0, 0, 0, 0, 6, 6, 6, 6, 6, 6, 12, 12};

  for (int k = 0; k < NCASES; k++) run(&cases[k], bytes); /* warm */
  for (int r = 0; r < reps; r++)
    for (int k = 0; k < NCASES; k++) {
      double t0 = now();
      run(&cases[k], bytes);
      cases[k].t[r] = now() - t0;
    }
  for (int k = 0; k < NCASES; k++)
    for (int r = 0; r < reps; r++)
      cases[k].ratio[r] = cases[ref_of[k]].t[r] / cases[k].t[r];

  FILE *json = fopen(json_path, "w");
  if (json == NULL) {
    perror(json_path);
    return 1;
  }
  printf("GPU: %s, CUDA driver %d (%s); %zu bytes per copy, %d reps\n",
         gpu_name, version, dlb_runtime_library(DLB_RUNTIME_CUDA), bytes,
         reps);
  printf("(GB/s: bytes over the link once, read + written for d2d; x link: "
         "median of per-rep\n ratios to the reference in the same group)\n");
  printf("%-4s %-28s %10s %10s %10s %8s %7s\n", "dir", "case", "median ms",
         "min ms", "max ms", "GB/s", "x link");
  fprintf(json, "{\n  \"gpu\": true,\n  \"name\": \"%s\",\n"
          "  \"driver_version\": %d,\n  \"bytes\": %zu,\n  \"reps\": %d,\n"
          "  \"cases\": [\n", gpu_name, version, bytes, reps);
  for (int k = 0; k < NCASES; k++) {
    bcase *c = &cases[k];
    sort_samples(c->t, reps);
    sort_samples(c->ratio, reps);
    double moved = (double)bytes * (strcmp(c->group, "d2d") == 0 ? 2 : 1);
    double med = c->t[reps / 2];
    printf("%-4s %-28s %10.3f %10.3f %10.3f %8.2f %7.2f\n", c->group,
           c->name, med * 1e3, c->t[0] * 1e3, c->t[reps - 1] * 1e3,
           moved / med * 1e-9, c->ratio[reps / 2]);
    fprintf(json,
            "    {\"dir\": \"%s\", \"name\": \"%s\", \"bytes_counted\": "
            "%.0f, \"median_s\": %.6f, \"min_s\": %.6f, \"max_s\": %.6f, "
            "\"gbps\": %.3f, \"vs_reference\": %.3f}%s\n",
            c->group, c->name, moved, med, c->t[0], c->t[reps - 1],
            moved / med * 1e-9, c->ratio[reps / 2],
            k + 1 < NCASES ? "," : "");
  }
  fprintf(json, "  ]\n}\n");
  fclose(json);
  printf("wrote %s\n", json_path);
  dlb_tensor_release(registered);
  dlb_tensor_release(plain);
  dlb_tensor_release(managed);
  dlb_tensor_release(pinned);
  dlb_tensor_release(pageable);
  dlb_tensor_release(d1);
  dlb_tensor_release(d0);
  return 0;
}
