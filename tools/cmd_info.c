/* cmd_info.c -- dlbridge info: the library, DLPack, each runtime and GPU,
 * and the memory kinds usable here. */
#include <stdlib.h>
#include <string.h>

#include "cli.h"

static const cli_opt opts[] = {
    {"--json", NULL, "print JSON instead of text"},
};

static const struct {
  dlb_runtime rt;
  const char *name;
  DLDeviceType type;
} runtimes[] = {
    {DLB_RUNTIME_CUDA, "cuda", kDLCUDA},
    {DLB_RUNTIME_HIP, "rocm", kDLROCM},
};
#define NRUNTIMES (sizeof runtimes / sizeof runtimes[0])

static void thp_mode(char *buf, size_t size) {
  buf[0] = '\0';
  FILE *f = fopen("/sys/kernel/mm/transparent_hugepage/enabled", "r");
  if (f == NULL) return;
  if (fgets(buf, (int)size, f) == NULL) buf[0] = '\0';
  buf[strcspn(buf, "\n")] = '\0';
  fclose(f);
}

static void text_runtime(size_t r) {
  dlb_status s = dlb_runtime_status(runtimes[r].rt);
  if (s != DLB_OK) {
    printf("%-8s %s: %s\n", runtimes[r].name, dlb_status_name(s),
           cli_shown(dlb_last_error()));
    return;
  }
  int count = 0, version = 0;
  (void)dlb_runtime_device_count(runtimes[r].rt, &count);
  (void)dlb_runtime_version(runtimes[r].rt, &version);
  printf("%-8s %d device(s), version %d, from %s\n", runtimes[r].name, count,
         version, cli_shown(dlb_runtime_library(runtimes[r].rt)));
  for (int i = 0; i < count; i++) {
    dlb_gpu_info g;
    if (dlb_gpu_get_info((DLDevice){runtimes[r].type, i}, &g) != DLB_OK) {
      printf("  %s:%d  %s\n", runtimes[r].name, i,
             cli_shown(dlb_last_error()));
      continue;
    }
    printf("  %s:%d  %s, %.1f GiB; managed memory %s (concurrent %s), "
           "host registration %s, IPC %s\n", runtimes[r].name, i,
           cli_shown(g.name),
           (double)g.total_memory / (1024.0 * 1024 * 1024),
           cli_tristate(g.managed_memory), cli_tristate(g.concurrent_managed),
           cli_tristate(g.host_register), cli_tristate(g.ipc));
  }
}

static void json_runtime(json *j, size_t r) {
  json_open(j, '{');
  json_key(j, "name");
  json_string(j, runtimes[r].name);
  dlb_status s = dlb_runtime_status(runtimes[r].rt);
  json_key(j, "status");
  json_string(j, dlb_status_name(s));
  json_key(j, "error");
  json_string(j, s == DLB_OK ? NULL : dlb_last_error());
  int count = 0, version = 0;
  if (s == DLB_OK) {
    (void)dlb_runtime_device_count(runtimes[r].rt, &count);
    (void)dlb_runtime_version(runtimes[r].rt, &version);
  }
  json_key(j, "version");
  if (s == DLB_OK)
    json_int(j, version);
  else
    json_string(j, NULL);
  json_key(j, "library");
  json_string(j, dlb_runtime_library(runtimes[r].rt));
  json_key(j, "devices");
  json_open(j, '[');
  for (int i = 0; i < count; i++) {
    dlb_gpu_info g;
    json_open(j, '{');
    char name[DLB_DEVICE_NAME_MAX];
    snprintf(name, sizeof name, "%s:%d", runtimes[r].name, i);
    json_key(j, "device");
    json_string(j, name);
    if (dlb_gpu_get_info((DLDevice){runtimes[r].type, i}, &g) != DLB_OK) {
      json_key(j, "error");
      json_string(j, dlb_last_error());
    } else {
      json_key(j, "name");
      json_string(j, g.name);
      json_key(j, "total_memory");
      json_uint(j, g.total_memory);
      json_key(j, "managed_memory");
      json_tristate(j, g.managed_memory);
      json_key(j, "concurrent_managed");
      json_tristate(j, g.concurrent_managed);
      json_key(j, "host_register");
      json_tristate(j, g.host_register);
      json_key(j, "ipc");
      json_tristate(j, g.ipc);
    }
    json_close(j, '}');
  }
  json_close(j, ']');
  json_close(j, '}');
}

static int info_run(const char **values, int argc, char **argv) {
  (void)argc;
  (void)argv;
  cli_kind *kinds = NULL;
  int nkinds = cli_kinds(&kinds);
  if (nkinds < 0) {
    fprintf(stderr, "%s info: out of memory\n", CLI_NAME);
    return CLI_FAILED;
  }
  char thp[128];
  thp_mode(thp, sizeof thp);
  if (values[0] == NULL) {
    printf("dlbridge %s (DLPack %d.%d ABI)\n", dlb_version_string(),
           DLPACK_MAJOR_VERSION, DLPACK_MINOR_VERSION);
    printf("%-8s copy threads %d, kernels %s\n", "cpu", dlb_copy_get_threads(),
           dlb_copy_kernels());
    if (thp[0] != '\0')
      printf("%-8s transparent huge pages: %s\n", "", thp);
    for (size_t r = 0; r < NRUNTIMES; r++) text_runtime(r);
    printf("%-8s", "kinds");
    for (int i = 0; i < nkinds; i++) printf(" %s", kinds[i].label);
    printf("\n");
    free(kinds);
    return CLI_OK;
  }
  json j = {0};
  json_open(&j, '{');
  json_key(&j, "version");
  json_string(&j, dlb_version_string());
  char dlpack[16];
  snprintf(dlpack, sizeof dlpack, "%d.%d", DLPACK_MAJOR_VERSION,
           DLPACK_MINOR_VERSION);
  json_key(&j, "dlpack");
  json_string(&j, dlpack);
  json_key(&j, "copy_threads");
  json_int(&j, dlb_copy_get_threads());
  json_key(&j, "copy_kernels");
  json_string(&j, dlb_copy_kernels());
  json_key(&j, "transparent_hugepages");
  json_string(&j, thp[0] != '\0' ? thp : NULL);
  json_key(&j, "runtimes");
  json_open(&j, '[');
  for (size_t r = 0; r < NRUNTIMES; r++) json_runtime(&j, r);
  json_close(&j, ']');
  json_key(&j, "kinds");
  json_open(&j, '[');
  for (int i = 0; i < nkinds; i++) json_string(&j, kinds[i].label);
  json_close(&j, ']');
  json_close(&j, '}');
  free(kinds);
  return CLI_OK;
}

const cli_cmd cli_info = {
    "info", "", "library, DLPack, GPU runtimes and devices, usable memory "
    "kinds", opts, 1, 0, 0, info_run};
