/* failalloc.c -- an allocator that fails on demand and counts live blocks. */
#include <stdlib.h>

#include "test.h"

static long fail_at, calls, live;

static void *fa_alloc(void *ctx, size_t size, size_t alignment) {
  (void)ctx;
  calls++;
  if (fail_at > 0 && calls == fail_at) return NULL;
  void *p = NULL;
  if (alignment < sizeof(void *)) alignment = sizeof(void *);
  if (posix_memalign(&p, alignment, size) != 0) return NULL;
  live++;
  return p;
}

static void fa_free(void *ctx, void *p, size_t size, size_t alignment) {
  (void)ctx;
  (void)size;
  (void)alignment;
  live--;
  free(p);
}

void dlb_test_failalloc_install(long n) {
  dlb_allocator a = {fa_alloc, fa_free, NULL};
  fail_at = n;
  calls = 0;
  live = 0;
  CHECK_OK(dlb_set_allocator(&a));
}

long dlb_test_failalloc_live(void) { return live; }
long dlb_test_failalloc_calls(void) { return calls; }
void dlb_test_failalloc_remove(void) { CHECK_OK(dlb_set_allocator(NULL)); }

long dlb_test_oom_loop(dlb_status (*body)(void *ctx), void *ctx) {
  for (long n = 1; n < 100000; n++) {
    dlb_test_failalloc_install(n);
    dlb_status s = body(ctx);
    long made = dlb_test_failalloc_calls();
    long left = dlb_test_failalloc_live();
    dlb_test_failalloc_remove();
    if (left != 0)
      dlb_test_failed(__FILE__, __LINE__,
                      "failing allocation %ld: %ld blocks leaked (%s)", n,
                      left, dlb_status_name(s));
    if (made < n) {
      /* No allocation failed: the run must have succeeded. */
      if (s != DLB_OK)
        dlb_test_failed(__FILE__, __LINE__,
                        "run without failure returned %s (%s)",
                        dlb_status_name(s), dlb_last_error());
      return made;
    }
    if (s != DLB_E_NOMEM)
      dlb_test_failed(__FILE__, __LINE__,
                      "failing allocation %ld returned %s, not DLB_E_NOMEM",
                      n, dlb_status_name(s));
  }
  dlb_test_failed(__FILE__, __LINE__, "oom loop did not terminate");
  return -1;
}
