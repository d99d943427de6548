/*
 * main.c -- the C test runner: runs each registered test in a child process.
 * Usage: dlb_tests [substring]  (runs only tests whose name contains it).
 * DLB_TEST_SKIP=a,b skips the tests whose name contains a or b (for a tool
 * that trips on a known, reported defect; the skip is printed).
 */
#include <stdarg.h>
#include <sys/wait.h>
#include <unistd.h>

#include "test.h"

#define DLB_TEST_MAX 2048

typedef struct {
  const char *name;
  const char *file;
  dlb_test_fn fn;
} dlb_test_case;

static dlb_test_case tests[DLB_TEST_MAX];
static int ntests;

void dlb_test_register(const char *name, const char *file, dlb_test_fn fn) {
  if (ntests == DLB_TEST_MAX) {
    fprintf(stderr, "too many tests\n");
    exit(2);
  }
  tests[ntests].name = name;
  tests[ntests].file = file;
  tests[ntests].fn = fn;
  ntests++;
}

void dlb_test_failed(const char *file, int line, const char *fmt, ...) {
  va_list ap;
  fprintf(stderr, "  %s:%d: ", file, line);
  va_start(ap, fmt);
  vfprintf(stderr, fmt, ap);
  va_end(ap);
  fputc('\n', stderr);
  fflush(stderr);
  _exit(1);
}

/* 1 when name contains one of the comma-separated entries of list. */
static int listed(const char *name, const char *list) {
  while (list != NULL && *list != '\0') {
    const char *end = strchr(list, ',');
    size_t n = end != NULL ? (size_t)(end - list) : strlen(list);
    for (const char *p = name; n > 0 && *p != '\0'; p++)
      if (strncmp(p, list, n) == 0) return 1;
    list = end != NULL ? end + 1 : NULL;
  }
  return 0;
}

static int compare(const void *a, const void *b) {
  const dlb_test_case *x = a, *y = b;
  int c = strcmp(x->file, y->file);
  return c != 0 ? c : strcmp(x->name, y->name);
}

int main(int argc, char **argv) {
  const char *filter = argc > 1 ? argv[1] : NULL;
  int passed = 0, failed = 0;
  qsort(tests, (size_t)ntests, sizeof tests[0], compare);
  setvbuf(stdout, NULL, _IOLBF, 0);
  for (int i = 0; i < ntests; i++) {
    if (filter != NULL && strstr(tests[i].name, filter) == NULL) continue;
    if (listed(tests[i].name, getenv("DLB_TEST_SKIP"))) {
      printf("skip %s (DLB_TEST_SKIP)\n", tests[i].name);
      continue;
    }
    fflush(stdout);
    fflush(stderr);
    pid_t pid = fork();
    if (pid < 0) {
      perror("fork");
      return 2;
    }
    if (pid == 0) {
      tests[i].fn();
      /* exit, not _exit: LeakSanitizer checks the child at exit. */
      exit(0);
    }
    int st = 0;
    while (waitpid(pid, &st, 0) < 0) {
    }
    if (WIFEXITED(st) && WEXITSTATUS(st) == 0) {
      passed++;
      printf("ok   %s\n", tests[i].name);
    } else {
      failed++;
      if (WIFSIGNALED(st))
        printf("FAIL %s (signal %d)\n", tests[i].name, WTERMSIG(st));
      else
        printf("FAIL %s (exit %d)\n", tests[i].name, WEXITSTATUS(st));
    }
  }
  printf("%d passed, %d failed\n", passed, failed);
  return failed == 0 && passed > 0 ? 0 : 1;
}
