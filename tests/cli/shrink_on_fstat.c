/*
 * shrink_on_fstat.c -- an LD_PRELOAD library for test_cli.sh: the first
 * fstat of the file at $DLB_SHRINK_PATH reports the file as it was, then
 * cuts it to $DLB_SHRINK_SIZE bytes, as another process truncating it just
 * after it was sized would. Every other call is passed on unchanged.
 */
#undef _FILE_OFFSET_BITS /* fstat and fstat64 stay two functions */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE /* stat64 */
#endif
#include <dlfcn.h>
#include <stdint.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

/* The entry points of C libraries before glibc 2.33, where fstat was an
 * inline call of these. */
int __fxstat(int ver, int fd, struct stat *buf);
int __fxstat64(int ver, int fd, struct stat64 *buf);

static int shrunk;

static void shrink_if_named(dev_t dev, ino_t ino) {
  const char *path = getenv("DLB_SHRINK_PATH");
  const char *size = getenv("DLB_SHRINK_SIZE");
  struct stat named;
  if (shrunk || path == NULL || size == NULL || stat(path, &named) != 0 ||
      named.st_dev != dev || named.st_ino != ino)
    return;
  shrunk = 1;
  if (truncate(path, (off_t)strtoll(size, NULL, 10)) != 0) abort();
}

/* dlsym's void * as a function pointer, as POSIX allows. */
#define NEXT(type, name) ((type)(uintptr_t)dlsym(RTLD_NEXT, name))

int fstat(int fd, struct stat *buf) {
  int r = NEXT(int (*)(int, struct stat *), "fstat")(fd, buf);
  if (r == 0) shrink_if_named(buf->st_dev, buf->st_ino);
  return r;
}

int fstat64(int fd, struct stat64 *buf) {
  int r = NEXT(int (*)(int, struct stat64 *), "fstat64")(fd, buf);
  if (r == 0) shrink_if_named(buf->st_dev, buf->st_ino);
  return r;
}

int __fxstat(int ver, int fd, struct stat *buf) {
  int r = NEXT(int (*)(int, int, struct stat *), "__fxstat")(ver, fd, buf);
  if (r == 0) shrink_if_named(buf->st_dev, buf->st_ino);
  return r;
}

int __fxstat64(int ver, int fd, struct stat64 *buf) {
  int r = NEXT(int (*)(int, int, struct stat64 *), "__fxstat64")(ver, fd,
                                                                 buf);
  if (r == 0) shrink_if_named(buf->st_dev, buf->st_ino);
  return r;
}
