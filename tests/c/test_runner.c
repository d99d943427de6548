/*
 * test_runner.c -- the runner (main.c) itself: it runs a second copy of
 * this binary on hidden tests and reads what that copy reports.
 */
#include <limits.h>
#include <signal.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "test.h"

/* Never returns: the runner must stop it. */
DLB_TEST_HIDDEN(runner_hidden_hang, 1) {
  for (;;) pause();
}

/* Forks a process that never ends, then hangs itself; the child holds the
 * runner's output open as long as it lives. */
DLB_TEST_HIDDEN(runner_hidden_hang_with_a_child, 1) {
  pid_t pid = fork();
  CHECK(pid >= 0);
  for (;;) pause();
}

/* Passes at once, leaving a process that never ends. */
DLB_TEST_HIDDEN(runner_hidden_pass_leaving_a_child, 1) {
  pid_t pid = fork();
  CHECK(pid >= 0);
  if (pid == 0)
    for (;;) pause();
}

/* Passes at once: what a runner that cannot wait would still report. */
DLB_TEST_HIDDEN(runner_hidden_pass, 1) { CHECK(getpid() > 0); }

typedef struct {
  char out[4096]; /* the second runner's stdout and stderr */
  int exit_code;  /* its exit status; -1 when it did not exit */
  double seconds; /* how long it ran */
} runner_result;

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* Runs this binary on filter with DLB_TEST_TIMEOUT set to timeout and
 * DLB_TEST_SKIP to skip (NULL: unset), SIGCHLD ignored when
 * ignore_sigchld. */
static void run_runner_skipping(const char *filter, const char *timeout,
                                const char *skip, int ignore_sigchld,
                                runner_result *r) {
  /* The path itself, not /proc/self/exe: under valgrind that link names
   * valgrind, while readlink answers for the program it runs. */
  char exe[PATH_MAX];
  ssize_t len = readlink("/proc/self/exe", exe, sizeof exe - 1);
  CHECK(len > 0);
  exe[len] = '\0';
  int fds[2];
  CHECK(pipe(fds) == 0);
  double start = now_s();
  pid_t pid = fork();
  CHECK(pid >= 0);
  if (pid == 0) {
    close(fds[0]);
    if (dup2(fds[1], STDOUT_FILENO) < 0 || dup2(fds[1], STDERR_FILENO) < 0)
      _exit(127);
    close(fds[1]);
    if (timeout != NULL) setenv("DLB_TEST_TIMEOUT", timeout, 1);
    else unsetenv("DLB_TEST_TIMEOUT");
    if (skip != NULL) setenv("DLB_TEST_SKIP", skip, 1);
    else unsetenv("DLB_TEST_SKIP");
    if (ignore_sigchld) signal(SIGCHLD, SIG_IGN);
    execl(exe, "dlb_tests", filter, (char *)NULL);
    _exit(127);
  }
  close(fds[1]);
  size_t n = 0;
  ssize_t got;
  while ((got = read(fds[0], r->out + n, sizeof r->out - 1 - n)) > 0)
    n += (size_t)got;
  r->out[n] = '\0';
  close(fds[0]);
  int st = 0;
  CHECK(waitpid(pid, &st, 0) == pid);
  r->seconds = now_s() - start;
  r->exit_code = WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

static void run_runner(const char *filter, const char *timeout,
                       int ignore_sigchld, runner_result *r) {
  run_runner_skipping(filter, timeout, NULL, ignore_sigchld, r);
}

/* The second runner reported the hang by name as timed out after limit_s
 * seconds, and it stopped the test then, not later. */
static void check_stopped(const runner_result *r, unsigned limit_s) {
  char line[128];
  snprintf(line, sizeof line,
           "FAIL runner_hidden_hang (timed out after %u s)\n", limit_s);
  if (strstr(r->out, line) == NULL)
    dlb_test_failed(__FILE__, __LINE__, "runner said \"%s\", not \"%s\"",
                    r->out, line);
  CHECK(strstr(r->out, "0 passed, 1 failed\n") != NULL);
  CHECK_EQ_INT(r->exit_code, 1);
  CHECK(r->seconds >= (double)limit_s - 0.05);
  /* Grace for starting the second runner on a loaded machine. */
  CHECK(r->seconds < (double)limit_s + 10.0);
}

DLB_TEST(runner_stops_a_hung_test_at_its_own_limit) {
  runner_result r;
  run_runner("runner_hidden_hang", NULL, 0, &r);
  check_stopped(&r, 1 * dlb_test_limit_scale());
}

/* A process a test forked ends with the test, hung or passed: left
 * running, it would hold the runner's output open (this test's read of
 * it would never end). */
DLB_TEST(runner_stops_what_a_hung_test_forked) {
  runner_result r;
  run_runner("runner_hidden_hang_with_a_child", NULL, 0, &r);
  CHECK(strstr(r.out, "FAIL runner_hidden_hang_with_a_child (timed out "
                      "after ") != NULL);
  CHECK_EQ_INT(r.exit_code, 1);
  CHECK(r.seconds < 1.0 * dlb_test_limit_scale() + 10.0);
}

DLB_TEST(runner_ends_what_a_passing_test_left_running) {
  runner_result r;
  run_runner("runner_hidden_pass_leaving_a_child", NULL, 0, &r);
  CHECK(strstr(r.out, "ok   runner_hidden_pass_leaving_a_child\n") != NULL);
  CHECK_EQ_INT(r.exit_code, 0);
}

DLB_TEST(runner_limit_from_the_environment_replaces_the_test_s) {
  runner_result r;
  run_runner("runner_hidden_hang", "2", 0, &r);
  check_stopped(&r, 2);
}

DLB_TEST(runner_refuses_a_limit_that_is_no_number) {
  runner_result r;
  run_runner("runner_hidden_pass", "soon", 0, &r);
  CHECK_EQ_INT(r.exit_code, 2);
  CHECK(strstr(r.out, "DLB_TEST_TIMEOUT must be a number of seconds") != NULL);
  CHECK(strstr(r.out, "runner_hidden_pass") == NULL);
}

/* An ignored SIGCHLD, inherited through exec, makes the kernel reap
 * children itself: waiting for one fails with ECHILD. */
DLB_TEST(runner_waits_for_tests_with_sigchld_ignored) {
  runner_result r;
  run_runner("runner_hidden_pass", NULL, 1, &r);
  CHECK(strstr(r.out, "ok   runner_hidden_pass\n") != NULL);
  CHECK(strstr(r.out, "1 passed, 0 failed\n") != NULL);
  CHECK_EQ_INT(r.exit_code, 0);
}

/* A test named in DLB_TEST_SKIP is reported and not run (the hang would
 * have failed, timed out); names match in full, anywhere in the list. */
DLB_TEST(runner_skips_the_tests_named_in_dlb_test_skip) {
  runner_result r;
  run_runner_skipping("runner_hidden_hang", NULL,
                      "runner_hidden,runner_hidden_hang,x", 0, &r);
  CHECK(strstr(r.out, "skip runner_hidden_hang (DLB_TEST_SKIP)\n") != NULL);
  CHECK(strstr(r.out, "FAIL") == NULL);
  CHECK(strstr(r.out, "0 passed, 0 failed, 1 skipped\n") != NULL);
  CHECK_EQ_INT(r.exit_code, 1); /* nothing ran */
  /* A name that only starts the test's name skips nothing. */
  run_runner_skipping("runner_hidden_pass", NULL, "runner_hidden", 0, &r);
  CHECK(strstr(r.out, "ok   runner_hidden_pass\n") != NULL);
  CHECK(strstr(r.out, "1 passed, 0 failed\n") != NULL);
  CHECK_EQ_INT(r.exit_code, 0);
  /* The last name of the list counts too. */
  run_runner_skipping("runner_hidden_pass", NULL, "a,runner_hidden_pass", 0,
                      &r);
  CHECK(strstr(r.out, "skip runner_hidden_pass (DLB_TEST_SKIP)\n") != NULL);
}
