/*
 * fail_fork.c -- an LD_PRELOAD library for test_cli.sh: fork() fails with
 * EAGAIN, as it does when the process limit is reached. Every other call
 * is the C library's.
 */
#include <errno.h>
#include <sys/types.h>
#include <unistd.h>

pid_t fork(void) {
  errno = EAGAIN;
  return -1;
}
