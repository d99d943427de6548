/*
 * emu_fns.h -- test side: the emulated runtimes' own entry points as
 * tables of typed function pointers, for tests that play PyTorch, CuPy or
 * a ROCm framework (allocating, registering, creating streams) next to
 * dlbridge. Every pointer comes from the emulator a test loaded.
 */
#ifndef DLB_TESTS_EMU_FNS_H
#define DLB_TESTS_EMU_FNS_H

#include <string.h>

#include "emu_control.h"
#include "emu_cuda.h"
#include "emu_hip.h"

#define EMU_CU_TYPEDEF(name, base, version, params) \
  typedef dlb__cu_result (*emu_cu_pfn_##name) params;
DLB__CU_REQUIRED(EMU_CU_TYPEDEF)
DLB__CU_OPTIONAL(EMU_CU_TYPEDEF)
DLB__CU_FALLBACK(EMU_CU_TYPEDEF)
EMU_CU_EXTRA(EMU_CU_TYPEDEF)
#undef EMU_CU_TYPEDEF

typedef struct cu_fns {
#define EMU_CU_FIELD(name, base, version, params) emu_cu_pfn_##name name;
  DLB__CU_REQUIRED(EMU_CU_FIELD)
  DLB__CU_OPTIONAL(EMU_CU_FIELD)
  DLB__CU_FALLBACK(EMU_CU_FIELD)
  EMU_CU_EXTRA(EMU_CU_FIELD)
#undef EMU_CU_FIELD
} cu_fns;

static inline cu_fns cu_fns_of(const emu *e) {
  cu_fns f;
  void *p;
#define EMU_CU_SET(name, base, version, params) \
  p = emu_sym(e, #name);                       \
  memcpy(&f.name, &p, sizeof p);
  DLB__CU_REQUIRED(EMU_CU_SET)
  DLB__CU_OPTIONAL(EMU_CU_SET)
  DLB__CU_FALLBACK(EMU_CU_SET)
  EMU_CU_EXTRA(EMU_CU_SET)
#undef EMU_CU_SET
  return f;
}

#define EMU_HIP_TYPEDEF(name, ret, params) \
  typedef ret(*emu_hip_pfn_##name) params;
DLB__HIP_REQUIRED(EMU_HIP_TYPEDEF)
DLB__HIP_OPTIONAL(EMU_HIP_TYPEDEF)
EMU_HIP_EXTRA(EMU_HIP_TYPEDEF)
#undef EMU_HIP_TYPEDEF

typedef struct hip_fns {
#define EMU_HIP_FIELD(name, ret, params) emu_hip_pfn_##name name;
  DLB__HIP_REQUIRED(EMU_HIP_FIELD)
  DLB__HIP_OPTIONAL(EMU_HIP_FIELD)
  EMU_HIP_EXTRA(EMU_HIP_FIELD)
#undef EMU_HIP_FIELD
} hip_fns;

static inline hip_fns hip_fns_of(const emu *e) {
  hip_fns f;
  void *p;
#define EMU_HIP_SET(name, ret, params) \
  p = emu_sym(e, #name);              \
  memcpy(&f.name, &p, sizeof p);
  DLB__HIP_REQUIRED(EMU_HIP_SET)
  DLB__HIP_OPTIONAL(EMU_HIP_SET)
  EMU_HIP_EXTRA(EMU_HIP_SET)
#undef EMU_HIP_SET
  return f;
}

/* Makes device's primary context current on this thread, as the CUDA
 * runtime (PyTorch, CuPy) does once it uses the device. */
static inline void cu_as_framework(const cu_fns *f, int device) {
  dlb__cu_context c = NULL;
  if (f->cuDevicePrimaryCtxRetain(&c, device) != 0 ||
      f->cuCtxSetCurrent(c) != 0) {
    fprintf(stderr, "cannot make cuda:%d current\n", device);
    exit(1);
  }
}

#endif /* DLB_TESTS_EMU_FNS_H */
