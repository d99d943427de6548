/*
 * share_util.h -- helpers for the sharing tests: making shared tensors,
 * counting descriptors, and moving handles by hand.
 */
#ifndef DLB_TESTS_SHARE_UTIL_H
#define DLB_TESTS_SHARE_UTIL_H

#include <dirent.h>
#include <fcntl.h>
#include <sys/socket.h>
#include <unistd.h>

#include "test.h"

static const DLDataType share_u8 = {kDLUInt, 8, 1};
static const DLDataType share_i32 = {kDLInt, 32, 1};

/* A shared uint8 tensor of n bytes. */
static inline DLManagedTensorVersioned *share_bytes(int64_t n) {
  DLManagedTensorVersioned *t = NULL;
  CHECK_OK(dlb_shared_alloc(share_u8, 1, &n, &t));
  return t;
}


/* Entries of /dev/shm. */
static inline int share_count_dev_shm(void) {
  DIR *d = opendir("/dev/shm");
  if (d == NULL) return 0;
  int n = 0;
  for (struct dirent *e = readdir(d); e != NULL; e = readdir(d))
    if (e->d_name[0] != '.') n++;
  closedir(d);
  return n;
}

/* A handle and its descriptor. */
typedef struct share_handle {
  uint8_t bytes[DLB_SHARE_HANDLE_MAX];
  size_t len;
  int fd;
} share_handle;

static inline share_handle share_export(const DLManagedTensorVersioned *t) {
  share_handle h;
  memset(&h, 0, sizeof h);
  CHECK_OK(dlb_share_export(t, h.bytes, sizeof h.bytes, &h.len, &h.fd));
  return h;
}

static inline void share_socketpair(int type, int sv[2]) {
  CHECK(socketpair(AF_UNIX, type | SOCK_CLOEXEC, 0, sv) == 0);
}

/* Runs WORKERS (4) worker processes, forked or exec'd, over one shared
 * tensor of n bytes, each importing it with flags; every byte is checked
 * by each of them and by the caller (test_share_proc.c). */
void share_run_workers(int exec, int64_t n, uint64_t flags);

#endif /* DLB_TESTS_SHARE_UTIL_H */
