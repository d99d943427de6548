/*
 * test.h -- the C test harness. Each DLB_TEST registers itself; the runner
 * (main.c) runs every test in its own child process, so a crash fails only
 * that test.
 */
#ifndef DLB_TEST_H
#define DLB_TEST_H

#include <dirent.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dlbridge.h"

typedef void (*dlb_test_fn)(void);

/* limit_s: the test's time limit in seconds, 0 for the runner's default;
 * hidden: run only when the runner is given its full name. */
void dlb_test_register(const char *name, const char *file, dlb_test_fn fn,
                       unsigned limit_s, int hidden);
void dlb_test_failed(const char *file, int line, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
/* The factor the runner stretches built-in time limits by in this build and
 * environment (sanitizers, valgrind). */
unsigned dlb_test_limit_scale(void);
/* Runs fn when the test's process ends, whether the test passed or a check
 * failed (a failed check ends the process without running atexit
 * handlers); for removing scratch files. One function per test process. */
void dlb_test_at_end(void (*fn)(void));

#define DLB_TEST_REGISTERED(name, limit_s, hidden)                        \
  static void dlb_test_##name(void);                                      \
  __attribute__((constructor)) static void dlb_test_reg_##name(void) {    \
    dlb_test_register(#name, __FILE__, dlb_test_##name, limit_s, hidden); \
  }                                                                       \
  static void dlb_test_##name(void)

/* A test, killed and failed when it runs past the runner's default limit;
 * DLB_TEST_REGISTERED(name, seconds, 0) gives one a limit of its own. */
#define DLB_TEST(name) DLB_TEST_REGISTERED(name, 0, 0)
/* A test that runs only when asked for by its full name: the runner's own
 * tests run these in a second runner. */
#define DLB_TEST_HIDDEN(name, seconds) DLB_TEST_REGISTERED(name, seconds, 1)

/* Fails the test (the process exits non-zero) when cond is false. */
#define CHECK(cond)                                                    \
  do {                                                                 \
    if (!(cond)) dlb_test_failed(__FILE__, __LINE__, "CHECK(%s)", #cond); \
  } while (0)

#define CHECK_EQ_INT(a, b)                                                 \
  do {                                                                     \
    long long dlb_a_ = (long long)(a), dlb_b_ = (long long)(b);            \
    if (dlb_a_ != dlb_b_)                                                  \
      dlb_test_failed(__FILE__, __LINE__, "%s == %s: %lld != %lld", #a, #b, \
                      dlb_a_, dlb_b_);                                     \
  } while (0)

#define CHECK_STR(a, b)                                                     \
  do {                                                                      \
    const char *dlb_a_ = (a), *dlb_b_ = (b);                                \
    if (dlb_a_ == NULL || dlb_b_ == NULL || strcmp(dlb_a_, dlb_b_) != 0)    \
      dlb_test_failed(__FILE__, __LINE__, "%s == %s: \"%s\" != \"%s\"", #a, \
                      #b, dlb_a_ ? dlb_a_ : "(null)",                       \
                      dlb_b_ ? dlb_b_ : "(null)");                          \
  } while (0)

/* Checks that a call returned the expected status. */
#define CHECK_STATUS(call, expected)                                        \
  do {                                                                      \
    dlb_status dlb_s_ = (call);                                             \
    if (dlb_s_ != (expected))                                               \
      dlb_test_failed(__FILE__, __LINE__, "%s: got %s, expected %s (%s)",   \
                      #call, dlb_status_name(dlb_s_),                       \
                      dlb_status_name(expected), dlb_last_error());         \
  } while (0)

#define CHECK_OK(call) CHECK_STATUS(call, DLB_OK)

/* Checks that dlb_last_error() contains the text needle. */
#define CHECK_ERROR_MENTIONS(needle)                                      \
  do {                                                                    \
    if (strstr(dlb_last_error(), (needle)) == NULL)                       \
      dlb_test_failed(__FILE__, __LINE__, "last error \"%s\" lacks \"%s\"", \
                      dlb_last_error(), (needle));                        \
  } while (0)

/*
 * Allocation-failure testing. dlb_test_failalloc_install(n) installs an
 * allocator whose n-th call fails (n = 0: none fails) and counts live blocks.
 */
void dlb_test_failalloc_install(long fail_at);
long dlb_test_failalloc_live(void);  /* blocks not yet freed */
long dlb_test_failalloc_calls(void); /* alloc calls since install */
void dlb_test_failalloc_remove(void);

/*
 * Runs body(ctx) with allocation 1, 2, 3 ... failing in turn, until a run
 * completes without an injected failure. body must return DLB_OK after
 * releasing everything it made, or the failing status after cleaning up.
 * Checks that every failing run returned DLB_E_NOMEM and that no run left a
 * block live. Returns the number of allocations the successful run made.
 */
long dlb_test_oom_loop(dlb_status (*body)(void *ctx), void *ctx);

/* Open descriptors of this process (the count's own directory left out). */
static inline int dlb_test_count_fds(void) {
  DIR *d = opendir("/proc/self/fd");
  CHECK(d != NULL);
  int n = 0;
  for (struct dirent *e = readdir(d); e != NULL; e = readdir(d))
    if (e->d_name[0] != '.') n++;
  closedir(d);
  return n - 1;
}

/* A CPU float32 tensor of n elements holding 0, 1, 2, ... */
static inline DLManagedTensorVersioned *dlb_test_counting_floats(int64_t n) {
  int64_t shape[1] = {n};
  const DLDataType f32 = {kDLFloat, 32, 1};
  DLManagedTensorVersioned *t = NULL;
  CHECK_OK(dlb_tensor_alloc((DLDevice){kDLCPU, 0}, f32, 1, shape, &t));
  float *v = t->dl_tensor.data;
  for (int64_t i = 0; i < n; i++) v[i] = (float)i;
  return t;
}

#endif /* DLB_TEST_H */
