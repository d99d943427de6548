/*
 * cmd_bench.c -- dlbridge bench. In a build tree, every benchmark through
 * bench/run_bench.py; installed, the copy benchmark from the libexec folder
 * and then the Python module's exchange benchmark when dlbridge.bench
 * imports ($DLBRIDGE_PYTHON, default python3).
 */
#include <errno.h>
#include <limits.h>
#include <signal.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "cli.h"

static const cli_opt opts[] = {
    {"--quick", NULL, "few repetitions: a smoke test, not figures"},
    {"--reps", "N", "repetitions of each copy case, 1 to 101 "
     "(--quick: 5)"},
    {"--json", NULL, "print the results as JSON (tables go to stderr)"},
};

/* Runs argv and returns its exit status (127 when it cannot start); its
 * output goes to stderr when quiet is set, keeping stdout for JSON. */
static int run(const char *const *argv, int quiet) {
  fflush(stdout);
  fflush(stderr);
  pid_t pid = fork();
  if (pid < 0) {
    fprintf(stderr, "%s bench: cannot start %s: %s\n", CLI_NAME, argv[0],
            strerror(errno));
    return 127;
  }
  if (pid == 0) {
    if (quiet) dup2(STDERR_FILENO, STDOUT_FILENO);
    execvp(argv[0], (char *const *)(uintptr_t)argv);
    fprintf(stderr, "%s bench: cannot run %s\n", CLI_NAME, argv[0]);
    _exit(127);
  }
  int st = 0;
  while (waitpid(pid, &st, 0) < 0)
    if (errno != EINTR) {
      fprintf(stderr, "%s bench: cannot wait for %s: %s\n", CLI_NAME,
              argv[0], strerror(errno));
      return 127;
    }
  return WIFEXITED(st) ? WEXITSTATUS(st) : 128;
}

/* Finds name beside this program: ../bench in a build tree, or the
 * installed ../libexec/dlbridge. */
static int find_beside(const char *const *tries, size_t ntries,
                       const char *name, int mode, char *out, size_t size) {
  char self[PATH_MAX];
  ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
  if (n <= 0) return 0;
  self[n] = '\0';
  char *slash = strrchr(self, '/');
  if (slash == NULL) return 0;
  *slash = '\0';
  for (size_t i = 0; i < ntries; i++) {
    int w = snprintf(out, size, "%s%s%s", self, tries[i], name);
    if (w > 0 && (size_t)w < size && access(out, mode) == 0) return 1;
  }
  return 0;
}

static void progress(int step, int steps, const char *what) {
  if (isatty(STDERR_FILENO))
    fprintf(stderr, "\033[1m[%d/%d] %s\033[0m\n", step, steps, what);
}

static int print_file(const char *path) {
  FILE *f = fopen(path, "r");
  if (f == NULL) {
    fprintf(stderr, "%s bench: no results in %s\n", CLI_NAME, path);
    return CLI_FAILED;
  }
  char buf[4096];
  size_t n;
  while ((n = fread(buf, 1, sizeof buf, f)) > 0) fwrite(buf, 1, n, stdout);
  fclose(f);
  return CLI_OK;
}

/* A scratch folder for JSON results; "" when none could be made. */
static void scratch(char *dir, size_t size) {
  const char *tmp = getenv("TMPDIR");
  snprintf(dir, size, "%s/dlbridge-bench-XXXXXX",
           tmp != NULL && tmp[0] != '\0' ? tmp : "/tmp");
  if (mkdtemp(dir) == NULL) dir[0] = '\0';
}

static int build_tree(const char *script, const char **values) {
  int as_json = values[2] != NULL;
  char dir[PATH_MAX] = "";
  if (as_json) {
    scratch(dir, sizeof dir);
    if (dir[0] == '\0') {
      perror(CLI_NAME " bench: cannot make a scratch folder");
      return CLI_FAILED;
    }
  }
  const char *argv[10];
  int n = 0;
  argv[n++] = "/bin/sh";
  argv[n++] = script;
  if (values[0] != NULL) argv[n++] = "--quick";
  if (values[1] != NULL) {
    argv[n++] = "--reps";
    argv[n++] = values[1];
  }
  if (as_json) {
    argv[n++] = "--out";
    argv[n++] = dir;
  }
  argv[n] = NULL;
  int rc = run(argv, as_json);
  if (as_json) {
    char path[PATH_MAX + 32];
    snprintf(path, sizeof path, "%s/latest.json", dir);
    if (print_file(path) != CLI_OK) rc = CLI_FAILED;
    const char *rm[] = {"rm", "-rf", dir, NULL};
    (void)run(rm, 1);
  }
  return rc == 0 ? CLI_OK : CLI_FAILED;
}

static int installed(const char *copy, const char **values) {
  int as_json = values[2] != NULL;
  char dir[PATH_MAX] = "", path[PATH_MAX + 32] = "";
  if (as_json) {
    scratch(dir, sizeof dir);
    if (dir[0] == '\0') {
      perror(CLI_NAME " bench: cannot make a scratch folder");
      return CLI_FAILED;
    }
    snprintf(path, sizeof path, "%s/bench_copy.json", dir);
  }
  const char *argv[10];
  int n = 0;
  argv[n++] = copy;
  if (values[0] != NULL) argv[n++] = "--quick";
  if (values[1] != NULL) {
    argv[n++] = "--reps";
    argv[n++] = values[1];
  }
  if (as_json) {
    argv[n++] = "--json";
    argv[n++] = path;
  }
  argv[n] = NULL;
  progress(1, 2, "copy engine against memcpy (bench_copy)");
  int rc = run(argv, as_json);
  if (as_json) {
    if (rc == 0 && print_file(path) != CLI_OK) rc = 1;
    remove(path);
    rmdir(dir);
  }
  if (rc != 0) return CLI_FAILED;
  const char *env = getenv("DLBRIDGE_PYTHON");
  const char *py = env != NULL && env[0] != '\0' ? env : "python3";
  const char *probe[] = {py, "-c", "import dlbridge.bench", NULL};
  if (run(probe, 1) != 0) {
    fprintf(stderr, "%s bench: %s cannot import dlbridge.bench (set "
            "DLBRIDGE_PYTHON); skipped the exchange benchmark\n", CLI_NAME,
            py);
    return CLI_OK;
  }
  progress(2, 2, "exchange through the Python module (dlbridge.bench)");
  const char *pyargs[] = {py, "-m", "dlbridge.bench", NULL};
  return run(pyargs, as_json) == 0 ? CLI_OK : CLI_FAILED;
}

/* bench_copy's MAX_REPS: it refuses more. */
#define BENCH_MAX_REPS 101

static int bench_run(const char **values, int argc, char **argv) {
  (void)argc;
  (void)argv;
  /* An ignored SIGCHLD (inherited through exec) would make the kernel reap
   * the benchmarks before they could be waited for, and pass on to them. */
  signal(SIGCHLD, SIG_DFL);
  if (values[1] != NULL) {
    char *end = NULL;
    long reps = strtol(values[1], &end, 10);
    /* Digits only: strtol would also take leading blanks and a sign. */
    if (values[1][0] < '0' || values[1][0] > '9' || *end != '\0' ||
        reps < 1 || reps > BENCH_MAX_REPS) {
      fprintf(stderr, "%s bench: --reps is '%s'; must be 1 to %d\n",
              CLI_NAME, cli_shown(values[1]), BENCH_MAX_REPS);
      return CLI_USAGE;
    }
  }
  char path[PATH_MAX];
  static const char *const tree[] = {"/../bench/"};
  if (find_beside(tree, 1, "run_bench", R_OK, path, sizeof path))
    return build_tree(path, values);
  static const char *const inst[] = {"/../libexec/dlbridge/"};
  if (find_beside(inst, 1, "bench_copy", X_OK, path, sizeof path))
    return installed(path, values);
  fprintf(stderr, "%s bench: neither ../bench/run_bench (a build tree) nor "
          "../libexec/dlbridge/bench_copy (an install) is beside this "
          "program; the command installed with the Python module has "
          "neither: there `python -m dlbridge.bench` runs the exchange "
          "benchmark\n", CLI_NAME);
  return CLI_FAILED;
}

const cli_cmd cli_bench = {
    "bench", "", "run the benchmarks (every one in a build tree; the copy "
    "and exchange ones installed)", opts, 3, 0, 0, bench_run};
