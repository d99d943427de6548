/*
 * main.c -- the C test runner: runs each registered test in a child process
 * under a time limit, so a crash or a hang fails only that test, by name.
 *
 * Usage: dlb_tests [substring]  (runs only tests whose name contains it; a
 * hidden test runs only when named in full).
 *
 * DLB_TEST_SKIP=<name>,<name>,... names tests not to run (in full, as
 * listed by the runner): each is reported as skipped. A platform's check
 * uses it for tests that an emulator, not the library, fails.
 *
 * Time limits: DLB_TEST_DEFAULT_LIMIT_S, or the test's own (test.h);
 * both are stretched in builds with a sanitizer and under valgrind. The
 * environment variable DLB_TEST_TIMEOUT=<seconds> replaces every limit as
 * given (0: none, for a debugger).
 */
#include <errno.h>
#include <signal.h>
#include <stdarg.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "test.h"

#define DLB_TEST_MAX 2048
#define DLB_TEST_DEFAULT_LIMIT_S 60u

#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
#define DLB_TEST_SANITIZED 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer) || \
    __has_feature(memory_sanitizer)
#define DLB_TEST_SANITIZED 1
#endif
#endif

typedef struct {
  const char *name;
  const char *file;
  dlb_test_fn fn;
  unsigned limit_s; /* 0: the default */
  int hidden;
} dlb_test_case;

static dlb_test_case tests[DLB_TEST_MAX];
static int ntests;

void dlb_test_register(const char *name, const char *file, dlb_test_fn fn,
                       unsigned limit_s, int hidden) {
  if (ntests == DLB_TEST_MAX) {
    fprintf(stderr, "too many tests\n");
    exit(2);
  }
  tests[ntests].name = name;
  tests[ntests].file = file;
  tests[ntests].fn = fn;
  tests[ntests].limit_s = limit_s;
  tests[ntests].hidden = hidden;
  ntests++;
}

static void (*at_end)(void);

void dlb_test_at_end(void (*fn)(void)) {
  at_end = fn;
  atexit(fn);
}

void dlb_test_failed(const char *file, int line, const char *fmt, ...) {
  va_list ap;
  fprintf(stderr, "  %s:%d: ", file, line);
  va_start(ap, fmt);
  vfprintf(stderr, fmt, ap);
  va_end(ap);
  fputc('\n', stderr);
  fflush(stderr);
  if (at_end != NULL) at_end();
  _exit(1);
}

unsigned dlb_test_limit_scale(void) {
  /* Valgrind preloads its own library into the program it runs. */
  const char *preload = getenv("LD_PRELOAD");
  if (preload != NULL && strstr(preload, "vgpreload") != NULL) return 20;
#ifdef DLB_TEST_SANITIZED
  return 5;
#else
  return 1;
#endif
}

/* The limit of test c in seconds, 0 for none; -1 when DLB_TEST_TIMEOUT is
 * not a number of seconds. */
static long limit_of(const dlb_test_case *c) {
  const char *env = getenv("DLB_TEST_TIMEOUT");
  if (env != NULL && *env != '\0') {
    char *end;
    errno = 0;
    long v = strtol(env, &end, 10);
    if (errno != 0 || *end != '\0' || v < 0 || v > 86400L * 365) return -1;
    return v;
  }
  unsigned own = c->limit_s != 0 ? c->limit_s : DLB_TEST_DEFAULT_LIMIT_S;
  return (long)own * (long)dlb_test_limit_scale();
}

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* Waits for child pid for at most limit_s seconds (0: no limit), with
 * SIGCHLD blocked so that sigtimedwait sees it. Returns 0 with *status set,
 * 1 when the limit passed (the child is killed and reaped), -1 when the
 * child cannot be waited for (errno says why). */
static int wait_limited(pid_t pid, long limit_s, int *status) {
  sigset_t chld;
  sigemptyset(&chld);
  sigaddset(&chld, SIGCHLD);
  double deadline = now_s() + (double)limit_s;
  for (;;) {
    pid_t r = waitpid(pid, status, WNOHANG);
    if (r == pid) return 0;
    if (r < 0 && errno != EINTR) return -1;
    if (r != 0) continue;
    if (limit_s == 0) {
      if (sigwaitinfo(&chld, NULL) < 0 && errno != EINTR) return -1;
      continue;
    }
    double left = deadline - now_s();
    if (left <= 0) break;
    struct timespec ts = {(time_t)left,
                          (long)((left - (double)(time_t)left) * 1e9)};
    if (sigtimedwait(&chld, NULL, &ts) < 0 && errno != EAGAIN &&
        errno != EINTR)
      return -1;
  }
  /* The test's own processes too: one it forked and left running would
   * keep the runner's output open after the runner is done. */
  kill(-pid, SIGKILL);
  kill(pid, SIGKILL);
  while (waitpid(pid, status, 0) < 0)
    if (errno != EINTR) return -1;
  return 1;
}

static int compare(const void *a, const void *b) {
  const dlb_test_case *x = a, *y = b;
  int c = strcmp(x->file, y->file);
  return c != 0 ? c : strcmp(x->name, y->name);
}

static int selected(const dlb_test_case *c, const char *filter) {
  if (c->hidden) return filter != NULL && strcmp(c->name, filter) == 0;
  return filter == NULL || strstr(c->name, filter) != NULL;
}

/* Whether name is one of the comma-separated names in list (NULL: none). */
static int listed(const char *list, const char *name) {
  const size_t len = strlen(name);
  for (const char *p = list; p != NULL && *p != '\0';) {
    const char *end = strchr(p, ',');
    const size_t n = end != NULL ? (size_t)(end - p) : strlen(p);
    if (n == len && strncmp(p, name, n) == 0) return 1;
    p = end != NULL ? end + 1 : NULL;
  }
  return 0;
}

int main(int argc, char **argv) {
  const char *filter = argc > 1 ? argv[1] : NULL;
  const char *skip = getenv("DLB_TEST_SKIP");
  int passed = 0, failed = 0, skipped = 0;
  qsort(tests, (size_t)ntests, sizeof tests[0], compare);
  setvbuf(stdout, NULL, _IOLBF, 0);
  /* An ignored SIGCHLD (inherited through exec) would make the kernel reap
   * the children before they could be waited for. */
  signal(SIGCHLD, SIG_DFL);
  sigset_t chld, old;
  sigemptyset(&chld);
  sigaddset(&chld, SIGCHLD);
  sigprocmask(SIG_BLOCK, &chld, &old);
  for (int i = 0; i < ntests; i++) {
    if (!selected(&tests[i], filter)) continue;
    if (listed(skip, tests[i].name)) {
      skipped++;
      printf("skip %s (DLB_TEST_SKIP)\n", tests[i].name);
      continue;
    }
    long limit = limit_of(&tests[i]);
    if (limit < 0) {
      fprintf(stderr, "DLB_TEST_TIMEOUT must be a number of seconds\n");
      return 2;
    }
    fflush(stdout);
    fflush(stderr);
    pid_t pid = fork();
    if (pid < 0) {
      perror("fork");
      return 2;
    }
    /* Each test leads a process group of its own, so that whatever it
     * forks ends with it (set on both sides: either may run first). */
    if (pid == 0) {
      setpgid(0, 0);
      sigprocmask(SIG_SETMASK, &old, NULL);
      tests[i].fn();
      /* exit, not _exit: LeakSanitizer checks the child at exit. */
      exit(0);
    }
    setpgid(pid, pid);
    int st = 0;
    int waited = wait_limited(pid, limit, &st);
    /* What the test forked and left running, if anything. */
    if (waited == 0) kill(-pid, SIGKILL);
    if (waited == 0 && WIFEXITED(st) && WEXITSTATUS(st) == 0) {
      passed++;
      printf("ok   %s\n", tests[i].name);
      continue;
    }
    failed++;
    if (waited < 0)
      printf("FAIL %s (cannot wait for it: %s)\n", tests[i].name,
             strerror(errno));
    else if (waited == 1)
      printf("FAIL %s (timed out after %ld s)\n", tests[i].name, limit);
    else if (WIFSIGNALED(st))
      printf("FAIL %s (signal %d)\n", tests[i].name, WTERMSIG(st));
    else
      printf("FAIL %s (exit %d)\n", tests[i].name, WEXITSTATUS(st));
  }
  if (skipped > 0)
    printf("%d passed, %d failed, %d skipped\n", passed, failed, skipped);
  else
    printf("%d passed, %d failed\n", passed, failed);
  return failed == 0 && passed > 0 ? 0 : 1;
}
