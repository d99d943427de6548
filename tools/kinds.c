/* kinds.c -- the memory kinds usable here, as the runtimes tell them. */
#include "cli.h"

static void add(cli_kind *out, int max, int *n, DLDevice device,
                DLDeviceType registered) {
  if (*n >= max) return;
  cli_kind *k = &out[(*n)++];
  k->device = device;
  k->registered = registered;
  char name[DLB_DEVICE_NAME_MAX];
  if (dlb_device_format(registered != 0 ? (DLDevice){registered, 0} : device,
                        name, sizeof name) != DLB_OK)
    name[0] = '\0';
  snprintf(k->label, sizeof k->label, "%s%s", name,
           registered != 0 ? "(reg)" : "");
}

static void runtime_kinds(dlb_runtime rt, cli_kind *out, int max, int *n) {
  int count = 0;
  if (dlb_runtime_status(rt) != DLB_OK ||
      dlb_runtime_device_count(rt, &count) != DLB_OK)
    return;
  int cuda = rt == DLB_RUNTIME_CUDA;
  DLDeviceType dev = cuda ? kDLCUDA : kDLROCM;
  DLDeviceType host = cuda ? kDLCUDAHost : kDLROCMHost;
  for (int i = 0; i < count; i++) add(out, max, n, (DLDevice){dev, i}, 0);
  add(out, max, n, (DLDevice){host, 0}, 0);
  dlb_gpu_info info;
  int have = dlb_gpu_get_info((DLDevice){dev, 0}, &info) == DLB_OK;
  /* Unknown capabilities are tried: dlbridge check then tells. */
  if (cuda && (!have || info.managed_memory != 0))
    add(out, max, n, (DLDevice){kDLCUDAManaged, 0}, 0);
  if (!have || info.host_register != 0)
    add(out, max, n, (DLDevice){kDLCPU, 0}, host);
}

int cli_kinds(cli_kind *out, int max) {
  int n = 0;
  add(out, max, &n, (DLDevice){kDLCPU, 0}, 0);
  runtime_kinds(DLB_RUNTIME_CUDA, out, max, &n);
  runtime_kinds(DLB_RUNTIME_HIP, out, max, &n);
  return n;
}
