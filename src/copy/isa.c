/*
 * isa.c -- which instruction sets the copy kernels may use: the best this
 * build and CPU have, found once, capped by DLBRIDGE_COPY_ISA and by the
 * tests' hook.
 */
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "copy/copy_internal.h"
#include "copy/vec128.h"

/* The test hook's cap; -1: none. */
static atomic_int dlb__isa_cap = -1;
static int dlb__isa_best;
/* Whether the CPU is an Intel one, found with the level. */
static int dlb__isa_intel;
static pthread_once_t dlb__isa_once = PTHREAD_ONCE_INIT;

/* By level: DLB__ISA_PORTABLE, DLB__ISA_V128, DLB__ISA_AVX2,
 * DLB__ISA_AVX512, as this build names them. */
static const char *const dlb__isa_names[] = {
    "portable",
#if defined(__aarch64__)
    "neon",
#else
    "sse2",
#endif
    "avx2", "avx512"};

int dlb__copy_isa_parse(const char *name) {
  if (name == NULL) return -1;
  /* Either name of the 128-bit level caps at it, on any build. */
  static const char *const names[] = {"portable", "sse2", "neon", "avx2",
                                      "avx512"};
  static const int levels[] = {DLB__ISA_PORTABLE, DLB__ISA_V128,
                               DLB__ISA_V128, DLB__ISA_AVX2, DLB__ISA_AVX512};
  for (int i = 0; i < 5; i++)
    if (strcmp(name, names[i]) == 0) return levels[i];
  return -1;
}

static void find_isa(void) {
#if DLB__HAVE_V128
  dlb__isa_best = DLB__ISA_V128;
#else
  dlb__isa_best = DLB__ISA_PORTABLE;
#endif
#if DLB__HAVE_WIDE
  /* GCC's and clang's checks read CPUID and whether the OS saves the
   * registers (XGETBV); under valgrind, which emulates AVX2 but not
   * AVX-512, CPUID says no to the second. */
  __builtin_cpu_init();
  dlb__isa_intel = __builtin_cpu_is("intel");
  if (__builtin_cpu_supports("avx2")) dlb__isa_best = DLB__ISA_AVX2;
  if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
      __builtin_cpu_supports("avx512vbmi"))
    dlb__isa_best = DLB__ISA_AVX512;
#endif
  /* A lower level asked for by name (an unknown name asks for nothing):
   * to compare kernels, or to keep wide vectors off a CPU that slows its
   * clock for them. */
  const int asked = dlb__copy_isa_parse(getenv("DLBRIDGE_COPY_ISA"));
  if (asked >= 0 && asked < dlb__isa_best) dlb__isa_best = asked;
}

int dlb__cpu_is_intel(void) {
  pthread_once(&dlb__isa_once, find_isa);
  return dlb__isa_intel;
}

int dlb__copy_isa(void) {
  pthread_once(&dlb__isa_once, find_isa);
  const int cap = atomic_load(&dlb__isa_cap);
  return cap >= 0 && cap < dlb__isa_best ? cap : dlb__isa_best;
}

void dlb__copy_cap_isa(int level) { atomic_store(&dlb__isa_cap, level); }

const char *dlb_copy_kernels(void) { return dlb__isa_names[dlb__copy_isa()]; }

dlb_status dlb_copy_set_kernels(const char *name) {
  if (name == NULL) {
    dlb__copy_cap_isa(-1);
    return DLB_OK;
  }
  const int level = dlb__copy_isa_parse(name);
  if (level < 0)
    return dlb__fail(DLB_E_INVAL,
                     "dlb_copy_set_kernels: name is \"%.64s\"; valid names: "
                     "portable, sse2, neon, avx2, avx512",
                     name);
  dlb__copy_cap_isa(level);
  return DLB_OK;
}
