/*
 * replay.c -- runs a fuzz target over saved inputs without libFuzzer, so any
 * compiler (and any sanitizer) can replay the checked-in corpora.
 * Usage: fuzz_X_replay PATH...  (files, or folders whose files are read).
 * Exits 0 when every input ran (a failed property aborts), 1 when a path
 * cannot be read or no input was found.
 */
#include <dirent.h>
#include <sys/stat.h>

#include "fuzz_input.h"

static int run_file(const char *path) {
  FILE *f = fopen(path, "rb");
  if (f == NULL) {
    perror(path);
    return -1;
  }
  size_t cap = 4096, n = 0;
  uint8_t *buf = malloc(cap);
  size_t got;
  while (buf != NULL && (got = fread(buf + n, 1, cap - n, f)) > 0) {
    n += got;
    if (n == cap) {
      uint8_t *bigger = realloc(buf, cap * 2);
      if (bigger == NULL) {
        free(buf);
        buf = NULL;
        break;
      }
      buf = bigger;
      cap *= 2;
    }
  }
  int err = ferror(f);
  fclose(f);
  if (buf == NULL || err) {
    fprintf(stderr, "%s: cannot read\n", path);
    free(buf);
    return -1;
  }
  /* A copy of exactly n bytes, so reading past the input is an ASan report
   * here as it is under libFuzzer. */
  uint8_t *exact = malloc(n > 0 ? n : 1);
  if (exact == NULL) {
    free(buf);
    return -1;
  }
  memcpy(exact, buf, n);
  free(buf);
  LLVMFuzzerTestOneInput(exact, n);
  free(exact);
  return 1;
}

static int run_path(const char *path) {
  struct stat st;
  if (stat(path, &st) != 0) {
    perror(path);
    return -1;
  }
  if (!S_ISDIR(st.st_mode)) return run_file(path);
  DIR *d = opendir(path);
  if (d == NULL) {
    perror(path);
    return -1;
  }
  int count = 0;
  struct dirent *e;
  while ((e = readdir(d)) != NULL) {
    if (e->d_name[0] == '.') continue;
    char child[4096];
    snprintf(child, sizeof child, "%s/%s", path, e->d_name);
    int r = run_file(child);
    if (r < 0) {
      count = -1;
      break;
    }
    count += r;
  }
  closedir(d);
  return count;
}

int main(int argc, char **argv) {
  int total = 0;
  for (int i = 1; i < argc; i++) {
    int r = run_path(argv[i]);
    if (r < 0) return 1;
    total += r;
  }
  printf("%s: %d inputs\n", argc > 0 ? argv[0] : "replay", total);
  return total > 0 ? 0 : 1;
}
