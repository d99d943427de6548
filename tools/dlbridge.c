/*
 * dlbridge.c -- the dlbridge command-line tool.
 *
 *   dlbridge info               library, DLPack and runtime status
 *   dlbridge dtype NAME...      what a dtype name means
 *   dlbridge device NAME...     what a device name means
 *   dlbridge bench [ARGS...]    in a build tree, the whole suite that
 *                               `make bench` runs (bench/run_bench.py; ARGS
 *                               go to it); installed, the copy benchmark
 *                               (ARGS go to it), then the Python exchange
 *                               benchmark when dlbridge.bench imports
 *   dlbridge version
 */
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <stdint.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "dlbridge.h"

static int usage(FILE *f) {
  fputs(
      "usage: dlbridge <command> [args]\n"
      "  info              library, DLPack and GPU runtime status\n"
      "  dtype NAME...     describe dtype names (float32, int4, "
      "float8_e4m3fn, ...)\n"
      "  device NAME...    describe device names (cpu, cuda:1, "
      "cuda_managed, ...)\n"
      "  bench [ARGS...]   run the benchmarks (ARGS go to the copy "
      "benchmark)\n"
      "  version           print the version\n",
      f);
  return f == stderr ? 2 : 0;
}

static void runtime_line(const char *label, dlb_runtime rt) {
  dlb_status s = dlb_runtime_status(rt);
  if (s != DLB_OK) {
    printf("%-8s %s: %s\n", label, dlb_status_name(s), dlb_last_error());
    return;
  }
  int count = 0, version = 0;
  (void)dlb_runtime_device_count(rt, &count);
  (void)dlb_runtime_version(rt, &version);
  printf("%-8s %d device(s), version %d, from %s\n", label, count, version,
         dlb_runtime_library(rt));
}

static int cmd_info(void) {
  printf("dlbridge %s (DLPack %d.%d ABI)\n", dlb_version_string(),
         DLPACK_MAJOR_VERSION, DLPACK_MINOR_VERSION);
  printf("%-8s copy threads %d\n", "cpu", dlb_copy_get_threads());
  FILE *thp = fopen("/sys/kernel/mm/transparent_hugepage/enabled", "r");
  if (thp != NULL) {
    char line[128];
    if (fgets(line, sizeof line, thp) != NULL)
      printf("%-8s transparent huge pages: %s", "", line);
    fclose(thp);
  }
  runtime_line("cuda", DLB_RUNTIME_CUDA);
  runtime_line("rocm", DLB_RUNTIME_HIP);
  return 0;
}

static int cmd_dtype(int argc, char **argv) {
  int rc = 0;
  for (int i = 0; i < argc; i++) {
    DLDataType t;
    if (dlb_dtype_parse(argv[i], &t) != DLB_OK) {
      fprintf(stderr, "dlbridge: %s\n", dlb_last_error());
      rc = 1;
      continue;
    }
    char name[DLB_DTYPE_NAME_MAX];
    if (dlb_dtype_format(t, name, sizeof name) != DLB_OK) name[0] = '\0';
    printf("%s: code %u, bits %u, lanes %u, %u bits per element", name,
           (unsigned)t.code, (unsigned)t.bits, (unsigned)t.lanes,
           (unsigned)dlb_dtype_bits(t));
    if (dlb_dtype_is_subbyte(t))
      printf(" (sub-byte: packed, or one byte each when padded)\n");
    else
      printf(", itemsize %zu\n", dlb_dtype_itemsize(t));
  }
  return rc;
}

static int cmd_device(int argc, char **argv) {
  int rc = 0;
  for (int i = 0; i < argc; i++) {
    DLDevice d;
    char name[DLB_DEVICE_NAME_MAX];
    if (dlb_device_parse(argv[i], &d) != DLB_OK ||
        dlb_device_format(d, name, sizeof name) != DLB_OK) {
      fprintf(stderr, "dlbridge: %s\n", dlb_last_error());
      rc = 1;
      continue;
    }
    DLDevice cpu = {kDLCPU, 0};
    printf("%s: device_type %d, device_id %d, %s, %s\n", name,
           (int)d.device_type, (int)d.device_id,
           dlb_device_type_is_host_type(d.device_type)
               ? "host-type (device_id is always 0)"
               : "device memory",
           dlb_device_can_access(cpu, d) ? "CPU-readable"
                                         : "not CPU-readable");
  }
  return rc;
}

/* Runs argv, waits, returns its exit status (127 when it cannot start). */
static int run(const char *const *argv) {
  fflush(stdout);
  pid_t pid = fork();
  if (pid < 0) return 127;
  if (pid == 0) {
    execvp(argv[0], (char *const *)(uintptr_t)argv);
    _exit(127);
  }
  int st = 0;
  while (waitpid(pid, &st, 0) < 0) {
  }
  return WIFEXITED(st) ? WEXITSTATUS(st) : 128;
}

/* Finds a benchmark file that access() allows mode on: in ../bench in a
 * build tree, or installed in the tool's own libexec folder. */
static int find_bench(const char *name, int mode, char *out, size_t size) {
  char self[PATH_MAX];
  ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
  if (n <= 0) return 0;
  self[n] = '\0';
  char *slash = strrchr(self, '/');
  if (slash == NULL) return 0;
  *slash = '\0';
  const char *tries[] = {"/../bench/", "/../libexec/dlbridge/"};
  for (size_t i = 0; i < sizeof tries / sizeof tries[0]; i++) {
    int w = snprintf(out, size, "%s%s%s", self, tries[i], name);
    if (w > 0 && (size_t)w < size && access(out, mode) == 0) return 1;
  }
  return 0;
}

/* In a build tree, every benchmark through bench/run_bench.py (ARGS go to
 * it, and from it to bench_copy); installed, the copy benchmark and then
 * the Python module's exchange benchmark. */
static int cmd_bench(int argc, char **argv) {
  char path[PATH_MAX];
  const char **args = calloc((size_t)argc + 3, sizeof *args);
  if (args == NULL) return 1;
  int rc;
  if (find_bench("run_bench", R_OK, path, sizeof path)) {
    args[0] = "/bin/sh";
    args[1] = path;
    for (int i = 0; i < argc; i++) args[i + 2] = argv[i];
    rc = run(args);
    free((void *)args);
    return rc;
  }
  if (!find_bench("bench_copy", X_OK, path, sizeof path)) {
    free((void *)args);
    fprintf(stderr, "dlbridge: bench_copy not found beside this program\n");
    return 1;
  }
  args[0] = path;
  for (int i = 0; i < argc; i++) args[i + 1] = argv[i];
  rc = run(args);
  free((void *)args);
  if (rc != 0) return rc;
  const char *env = getenv("DLBRIDGE_PYTHON");
  const char *py = env != NULL ? env : "python3";
  const char *probe[] = {py, "-c", "import dlbridge.bench", NULL};
  if (run(probe) != 0) {
    fprintf(stderr, "dlbridge: %s cannot import dlbridge.bench (set "
                    "DLBRIDGE_PYTHON); skipped the exchange benchmark\n",
            py);
    return 0;
  }
  const char *pyargs[] = {py, "-m", "dlbridge.bench", NULL};
  return run(pyargs);
}

int main(int argc, char **argv) {
  if (argc < 2) return usage(stderr);
  const char *cmd = argv[1];
  if (strcmp(cmd, "info") == 0) return cmd_info();
  if (strcmp(cmd, "dtype") == 0) return cmd_dtype(argc - 2, argv + 2);
  if (strcmp(cmd, "device") == 0) return cmd_device(argc - 2, argv + 2);
  if (strcmp(cmd, "bench") == 0) return cmd_bench(argc - 2, argv + 2);
  if (strcmp(cmd, "version") == 0) {
    printf("%s\n", dlb_version_string());
    return 0;
  }
  if (strcmp(cmd, "-h") == 0 || strcmp(cmd, "--help") == 0 ||
      strcmp(cmd, "help") == 0)
    return usage(stdout);
  fprintf(stderr, "dlbridge: unknown command '%s'\n", cmd);
  return usage(stderr);
}
