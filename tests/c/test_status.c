/* test_status.c -- status names, messages, the thread-local last error. */
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "internal.h"
#include "test.h"

DLB_TEST(status_names_and_messages) {
  CHECK_STR(dlb_status_name(DLB_OK), "DLB_OK");
  CHECK_STR(dlb_status_name(DLB_E_NOMEM), "DLB_E_NOMEM");
  CHECK_STR(dlb_status_name(DLB_E_NO_RUNTIME), "DLB_E_NO_RUNTIME");
  CHECK_STR(dlb_status_name((dlb_status)-9999), "DLB_E_UNKNOWN");
  CHECK_STR(dlb_status_message(DLB_E_NOMEM), "out of memory");
  CHECK_STR(dlb_status_message((dlb_status)12345), "unknown status");
}

DLB_TEST(status_values_are_fixed) {
  CHECK_EQ_INT(DLB_OK, 0);
  CHECK_EQ_INT(DLB_E_INVAL, -1);
  CHECK_EQ_INT(DLB_E_NOMEM, -2);
  CHECK_EQ_INT(DLB_E_OVERFLOW, -3);
  CHECK_EQ_INT(DLB_E_DTYPE, -4);
  CHECK_EQ_INT(DLB_E_DEVICE, -5);
  CHECK_EQ_INT(DLB_E_LAYOUT, -6);
  CHECK_EQ_INT(DLB_E_VERSION, -7);
  CHECK_EQ_INT(DLB_E_READONLY, -8);
  CHECK_EQ_INT(DLB_E_UNSUPPORTED, -9);
  CHECK_EQ_INT(DLB_E_NO_RUNTIME, -10);
  CHECK_EQ_INT(DLB_E_NO_DEVICE, -11);
  CHECK_EQ_INT(DLB_E_RUNTIME, -12);
  CHECK_EQ_INT(DLB_E_OVERLAP, -13);
  CHECK_EQ_INT(DLB_E_NEEDS_COPY, -14);
  CHECK_EQ_INT(DLB_E_RANGE, -15);
  CHECK_EQ_INT(DLB_E_STATE, -16);
  CHECK_EQ_INT(DLB_E_SYSTEM, -17);
  CHECK_EQ_INT(DLB_E_HANDLE, -18);
}

DLB_TEST(status_every_code_has_distinct_name) {
#define NAME(name, value, msg) dlb_status_name(DLB_##name),
  const char *names[] = {DLB_STATUS_MAP(NAME)};
#undef NAME
  size_t n = sizeof names / sizeof names[0];
  for (size_t i = 0; i < n; i++) {
    CHECK(strcmp(names[i], "DLB_E_UNKNOWN") != 0);
    for (size_t j = i + 1; j < n; j++) CHECK(strcmp(names[i], names[j]) != 0);
  }
  /* Each code answers its own name and message, not a neighbour's. */
#define OWN(name, value, msg)                                   \
  CHECK_STR(dlb_status_name((dlb_status)(value)), "DLB_" #name); \
  CHECK_STR(dlb_status_message((dlb_status)(value)), msg);
  DLB_STATUS_MAP(OWN)
#undef OWN
  CHECK_STR(dlb_status_name((dlb_status)1), "DLB_E_UNKNOWN");
  CHECK_STR(dlb_status_name((dlb_status)-19), "DLB_E_UNKNOWN");
  CHECK_STR(dlb_status_message((dlb_status)-19), "unknown status");
}

static void *other_thread(void *arg) {
  (void)arg;
  /* A fresh thread sees no error of another thread. */
  if (dlb_last_error()[0] != '\0') return (void *)1;
  dlb__fail(DLB_E_INVAL, "from the other thread");
  return NULL;
}

DLB_TEST(status_last_error_is_thread_local) {
  dlb_clear_error();
  CHECK_STR(dlb_last_error(), "");
  CHECK_EQ_INT(dlb__fail(DLB_E_LAYOUT, "shape[%d] is %d", 1, -3),
               DLB_E_LAYOUT);
  CHECK_STR(dlb_last_error(), "shape[1] is -3");
  pthread_t t;
  void *res = (void *)2;
  CHECK_EQ_INT(pthread_create(&t, NULL, other_thread, NULL), 0);
  CHECK_EQ_INT(pthread_join(t, &res), 0);
  CHECK(res == NULL);
  CHECK_STR(dlb_last_error(), "shape[1] is -3");
  dlb_clear_error();
  CHECK_STR(dlb_last_error(), "");
}

DLB_TEST(status_version) {
  CHECK_EQ_INT(dlb_version_number(), DLB_VERSION_NUMBER);
  char want[32];
  snprintf(want, sizeof want, "%d.%d.%d", DLB_VERSION_MAJOR,
           DLB_VERSION_MINOR, DLB_VERSION_PATCH);
  CHECK_STR(dlb_version_string(), want);
  /* The number and the string name the same release. */
  int n = dlb_version_number();
  char buf[32];
  snprintf(buf, sizeof buf, "%d.%d.%d", n / 10000, n / 100 % 100, n % 100);
  CHECK_STR(buf, dlb_version_string());
}

DLB_TEST(alloc_rejects_incomplete_allocator) {
  dlb_allocator a = {NULL, NULL, NULL};
  CHECK_STATUS(dlb_set_allocator(&a), DLB_E_INVAL);
  CHECK_ERROR_MENTIONS("alloc");
  CHECK_OK(dlb_set_allocator(NULL));
}

DLB_TEST(alloc_blocks_free_through_their_allocator) {
  dlb_test_failalloc_install(0);
  void *p = dlb__data_alloc(1000, 256);
  CHECK(p != NULL);
  CHECK_EQ_INT(((uintptr_t)p) % 256, 0);
  CHECK_EQ_INT(dlb_test_failalloc_live(), 1);
  /* Installing another allocator must not misroute the old block's free. */
  CHECK_OK(dlb_set_allocator(NULL));
  dlb__data_free(p);
  CHECK_EQ_INT(dlb_test_failalloc_live(), 0);
}

/* An allocator that remembers its one live block and checks that the free
 * names the size and alignment the alloc was asked for. */
static struct {
  void *p;
  size_t size, alignment;
  int mismatches;
} rec;

static void *rec_alloc(void *ctx, size_t size, size_t alignment) {
  (void)ctx;
  void *p = NULL;
  if (posix_memalign(&p, alignment, size) != 0) return NULL;
  rec.p = p;
  rec.size = size;
  rec.alignment = alignment;
  return p;
}

static void rec_free(void *ctx, void *p, size_t size, size_t alignment) {
  (void)ctx;
  if (p != rec.p || size != rec.size || alignment != rec.alignment)
    rec.mismatches++;
  rec.p = NULL;
  free(p);
}

DLB_TEST(alloc_free_gets_the_size_and_alignment_of_its_alloc) {
  static const size_t alignments[] = {1, 64, 256, 4096};
  dlb_allocator a = {rec_alloc, rec_free, NULL};
  CHECK_OK(dlb_set_allocator(&a));
  for (size_t i = 0; i < sizeof alignments / sizeof alignments[0]; i++) {
    void *p = dlb__data_alloc(1000, alignments[i]);
    CHECK(p != NULL);
    CHECK(rec.size >= 1000);
    CHECK(rec.alignment >= alignments[i]);
    dlb__data_free(p);
    CHECK(rec.p == NULL);
  }
  CHECK_OK(dlb_set_allocator(NULL));
  CHECK_EQ_INT(rec.mismatches, 0);
}

/* The VmFlags of the mapping holding p contain flag (smaps). */
static int mapping_has_flag(const void *p, const char *flag) {
  FILE *f = fopen("/proc/self/smaps", "r");
  if (f == NULL) return -1;
  char line[512];
  int inside = 0, found = 0;
  while (fgets(line, sizeof line, f) != NULL) {
    unsigned long lo, hi;
    if (sscanf(line, "%lx-%lx ", &lo, &hi) == 2 && strchr(line, '-') < strchr(line, ' ')) {
      inside = (uintptr_t)p >= lo && (uintptr_t)p < hi;
    } else if (inside && strncmp(line, "VmFlags:", 8) == 0) {
      found = strstr(line, flag) != NULL;
      break;
    }
  }
  fclose(f);
  return found;
}

/* Blocks of 4 MiB and more start on a 2 MiB boundary and ask for huge
 * pages, where the kernel has them; smaller ones need neither. */
DLB_TEST(alloc_default_large_blocks_ask_for_huge_pages) {
  CHECK_OK(dlb_set_allocator(NULL));
  dlb_allocator a;
  dlb_get_allocator(&a);
  const size_t huge = (size_t)2 << 20;
  char *big = a.alloc(a.ctx, (size_t)4 << 20, 64);
  CHECK(big != NULL);
  CHECK_EQ_INT((uintptr_t)big % huge, 0);
  /* The kernel can take the advice when an anonymous mapping can, and
   * shows it (an emulator such as qemu-user may accept the advice and
   * show the flag nowhere). */
  void *probe = mmap(NULL, 2 * huge, PROT_READ | PROT_WRITE,
                     MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  CHECK(probe != MAP_FAILED);
  int can = madvise(probe, 2 * huge, MADV_HUGEPAGE) == 0 &&
            mapping_has_flag(probe, " hg") == 1;
  munmap(probe, 2 * huge);
  if (can) CHECK_EQ_INT(mapping_has_flag(big, " hg"), 1);
  a.free(a.ctx, big, (size_t)4 << 20, 64);
  char *small = a.alloc(a.ctx, ((size_t)4 << 20) - 1, 4096);
  CHECK(small != NULL);
  CHECK_EQ_INT((uintptr_t)small % 4096, 0);
  if (can) CHECK_EQ_INT(mapping_has_flag(small, " hg"), 0);
  a.free(a.ctx, small, ((size_t)4 << 20) - 1, 4096);
}

/* A wrapped message keeps the wrapper's text whole; the reason follows
 * as far as ": " and a character of it fit, else it is left out. */
DLB_TEST(status_wrapped_message_at_the_buffer_end) {
  char outer[DLB__ERROR_MAX], reason[101], want[DLB__ERROR_MAX];
  memset(reason, 'r', 100);
  reason[100] = '\0';
  for (size_t fill = DLB__ERROR_MAX - 110; fill < DLB__ERROR_MAX; fill++) {
    memset(outer, 'x', fill);
    outer[fill] = '\0';
    size_t kept = 0;
    if (fill + 3 <= DLB__ERROR_MAX) kept = DLB__ERROR_MAX - 1 - fill;
    if (kept > 102) kept = 102;
    memcpy(want, outer, fill);
    memcpy(want + fill, ": ", kept < 2 ? kept : 2);
    if (kept > 2) memcpy(want + fill + 2, reason, kept - 2);
    want[fill + kept] = '\0';
    dlb__fail(DLB_E_INVAL, "%s", reason);
    CHECK_EQ_INT(dlb__fail_within(DLB_E_LAYOUT, "%s", outer), DLB_E_LAYOUT);
    CHECK(strnlen(dlb_last_error(), DLB__ERROR_MAX) < DLB__ERROR_MAX);
    CHECK_STR(dlb_last_error(), want);
  }
  dlb__fail(DLB_E_INVAL, "the reason");
  dlb__fail_within(DLB_E_LAYOUT, "%s", "");
  CHECK_STR(dlb_last_error(), ": the reason");
  dlb__fail(DLB_E_INVAL, "the reason");
  dlb__fail_within(DLB_E_LAYOUT, "shape[%d]", 2);
  CHECK_STR(dlb_last_error(), "shape[2]: the reason");
}
