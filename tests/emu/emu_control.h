/*
 * emu_control.h -- the control functions the emulated CUDA driver
 * (libcuda.so.1) and HIP runtime (libamdhip64.so.6) export besides the
 * runtime's own entry points, and the helpers tests use to load them.
 *
 * Both emulators keep host memory for every allocation and track each
 * allocation, registration, stream and event, so they can answer pointer
 * queries, check every argument, and report what is still alive. Device
 * memory is mapped twice: the address handed out has no access rights, so
 * host code that touches device memory crashes as it would on a GPU; the
 * emulator (and emu_shadow) read and write it through a second mapping.
 * Both mappings are of a memfd, so IPC handles work between processes:
 * a handle names the exporter's process and descriptor, and the importer
 * maps the same memfd (see emu_ipc in emu_core.h). Interprocess events
 * complete the work before them when recorded.
 *
 * Set before the first call, from the environment (PREFIX is EMU_CUDA_ or
 * EMU_HIP_):
 *   PREFIX DEVICES          number of GPUs (default 2; 0: init fails)
 *   PREFIX REPORTED_DEVICES the count cuDeviceGetCount / hipGetDeviceCount
 *                           answer instead (the GPUs stay DEVICES)
 *   PREFIX VERSION          driver / runtime version (CUDA default 13000;
 *                           HIP default 60200000, below 60000000 the
 *                           ROCm 5 pointer attributes)
 *   PREFIX DEVICE_MEMORY    bytes of each GPU (default 1 GiB)
 *   PREFIX MAX_PITCH        the MAX_PITCH device attribute (default 2^31-1)
 *   PREFIX READ_ONLY_REGISTER  READ_ONLY_HOST_REGISTER_SUPPORTED (default 1):
 *                           host memory the process may not write registers
 *                           only with CU_MEMHOSTREGISTER_READ_ONLY, which
 *                           fails with NOT_SUPPORTED when this is 0
 *   PREFIX CONCURRENT_MANAGED  CUDA's CONCURRENT_MANAGED_ACCESS (default 1)
 *   PREFIX MANAGED_MEMORY   CUDA's MANAGED_MEMORY (default 1); with 0,
 *                           cuMemAllocManaged fails with NOT_SUPPORTED
 *   PREFIX D2D_PITCH_ALIGN  device-to-device cuMemcpy2D(Async) refuses
 *                           pitches that are not multiples (default 1)
 *   PREFIX FILL             a byte every new allocation is filled with, as
 *                           a GPU's fresh memory holds anything (default:
 *                           zeros)
 *   PREFIX HIDE             an entry point cuGetProcAddress_v2 denies
 *   PREFIX NAME             every GPU's name, as given (default "Emulated
 *                           CUDA GPU N" or "Emulated HIP GPU N")
 *   PREFIX FAIL             NAME:N, the Nth call of entry point NAME fails
 *                           with error 1 (invalid value), as emu_fail arms
 *   PREFIX SLOW             entry points (comma-separated) that take
 *   PREFIX SLOW_MS          this many milliseconds before they run, as a
 *                           real driver may (to see who waits meanwhile)
 */
#ifndef DLB_TESTS_EMU_CONTROL_H
#define DLB_TESTS_EMU_CONTROL_H

#include <stddef.h>

/* What emu_live_kind() counts. */
enum {
  EMU_LIVE_DEVICE = 1,
  EMU_LIVE_HOST = 2,
  EMU_LIVE_MANAGED = 3,
  EMU_LIVE_REGISTERED = 4,
  EMU_LIVE_STREAM = 5,
  EMU_LIVE_EVENT = 6,
};

/* No prefetch has happened (emu_prefetch_location()). */
#define EMU_NO_PREFETCH (-2)

#ifdef EMU_BUILDING
#define EMU_EXPORT __attribute__((visibility("default")))
#else
#define EMU_EXPORT
#endif

/* Makes the nth call from now (1: the next) of entry point name return
 * result; name NULL counts every call except pure queries and releases.
 * One failure is armed at a time; arming replaces it. */
EMU_EXPORT void emu_fail(const char *name, int nth, int result);
/* 1 once the armed failure has happened. */
EMU_EXPORT int emu_fail_fired(void);
/* Calls of entry point name since loading (NULL: of all). */
EMU_EXPORT long emu_calls(const char *name);
/* The highest cudaVersion cuGetProcAddress_v2 was asked for symbol at,
 * or 0. */
EMU_EXPORT int emu_requested_version(const char *symbol);
/* Allocations, registrations, streams and events alive. */
EMU_EXPORT long emu_live(void);
EMU_EXPORT long emu_live_kind(int kind);
/* Operations queued on streams and not yet executed. */
EMU_EXPORT long emu_pending(void);
/* CUDA: contexts pushed on this thread's stack. HIP: the current device. */
EMU_EXPORT int emu_context_depth(void);
/* The emulator's read-write view of memory at p (device memory's second
 * mapping; p itself for host memory). */
EMU_EXPORT void *emu_shadow(const void *p);
/* Where managed memory at p was last prefetched to: a device ordinal, -1
 * for the host, EMU_NO_PREFETCH. */
EMU_EXPORT int emu_prefetch_location(const void *p);
/* The range the last prefetch of managed memory at p asked for: its
 * first byte in *start and its size, 0 when none. */
EMU_EXPORT size_t emu_prefetch_span(const void *p, const void **start);
/* Advice set on managed memory at p: bit k-1 for the SET advice k (1, 3,
 * 5); *location receives the location of the last located advice. */
EMU_EXPORT unsigned emu_advice(const void *p, int *location);

#ifndef EMU_BUILDING
/* Test side: finding and loading the emulators. The test binary lives in
 * build/tests/c and the emulators in build/tests/emu; DLB_TEST_EMU_DIR
 * overrides the folder. */
#include <dlfcn.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* Writes the path of file in the emulator folder into buf. */
static inline void emu_path(const char *file, char *buf, size_t size) {
  const char *dir = getenv("DLB_TEST_EMU_DIR");
  if (dir != NULL && dir[0] != '\0') {
    snprintf(buf, size, "%s/%s", dir, file);
    return;
  }
  char exe[PATH_MAX];
  ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
  if (n <= 0) {
    snprintf(buf, size, "%s", file);
    return;
  }
  exe[n] = '\0';
  char *slash = strrchr(exe, '/');
  if (slash != NULL) *slash = '\0';
  snprintf(buf, size, "%s/../emu/%s", exe, file);
}

/* The control functions of one loaded emulator. */
typedef struct emu {
  void *handle;
  void (*fail)(const char *name, int nth, int result);
  int (*fail_fired)(void);
  long (*calls)(const char *name);
  int (*requested_version)(const char *symbol);
  long (*live)(void);
  long (*live_kind)(int kind);
  long (*pending)(void);
  int (*context_depth)(void);
  void *(*shadow)(const void *p);
  int (*prefetch_location)(const void *p);
  size_t (*prefetch_span)(const void *p, const void **start);
  unsigned (*advice)(const void *p, int *location);
} emu;

/* Looks up an entry point of the emulated runtime itself. */
static inline void *emu_sym(const emu *e, const char *name) {
  void *p = dlsym(e->handle, name);
  if (p == NULL) {
    fprintf(stderr, "emulator lacks %s\n", name);
    exit(1);
  }
  return p;
}

/* Points env_var (DLBRIDGE_CUDA_LIBRARY or DLBRIDGE_HIP_LIBRARY) at the
 * emulator file, loads it and resolves its control functions; dlbridge's
 * own dlopen of the same file then shares its state. Exits on failure. */
static inline emu emu_open(const char *file, const char *env_var) {
  char path[PATH_MAX + 64];
  emu e;
  memset(&e, 0, sizeof e);
  emu_path(file, path, sizeof path);
  setenv(env_var, path, 1);
  e.handle = dlopen(path, RTLD_NOW | RTLD_LOCAL);
  if (e.handle == NULL) {
    fprintf(stderr, "cannot load %s: %s\n", path, dlerror());
    exit(1);
  }
  void *p[12];
  static const char *const names[12] = {
      "emu_fail",          "emu_fail_fired", "emu_calls",
      "emu_requested_version", "emu_live",   "emu_live_kind",
      "emu_pending",       "emu_context_depth", "emu_shadow",
      "emu_prefetch_location", "emu_advice", "emu_prefetch_span"};
  for (int i = 0; i < 12; i++) p[i] = emu_sym(&e, names[i]);
  memcpy(&e.fail, &p[0], sizeof p[0]);
  memcpy(&e.fail_fired, &p[1], sizeof p[1]);
  memcpy(&e.calls, &p[2], sizeof p[2]);
  memcpy(&e.requested_version, &p[3], sizeof p[3]);
  memcpy(&e.live, &p[4], sizeof p[4]);
  memcpy(&e.live_kind, &p[5], sizeof p[5]);
  memcpy(&e.pending, &p[6], sizeof p[6]);
  memcpy(&e.context_depth, &p[7], sizeof p[7]);
  memcpy(&e.shadow, &p[8], sizeof p[8]);
  memcpy(&e.prefetch_location, &p[9], sizeof p[9]);
  memcpy(&e.advice, &p[10], sizeof p[10]);
  memcpy(&e.prefetch_span, &p[11], sizeof p[11]);
  return e;
}

/* The emulated CUDA driver and HIP runtime. */
static inline emu emu_cuda(void) {
  return emu_open("libcuda.so.1", "DLBRIDGE_CUDA_LIBRARY");
}
static inline emu emu_hip(void) {
  return emu_open("libamdhip64.so.6", "DLBRIDGE_HIP_LIBRARY");
}
#endif

#endif /* DLB_TESTS_EMU_CONTROL_H */
