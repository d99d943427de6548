/* kinds.c -- the memory kinds usable here, as the runtimes tell them. */
#include <stdlib.h>

#include "cli.h"

/* A growing list of kinds; failed once an allocation failed. */
typedef struct kind_list {
  cli_kind *items;
  int n, room, failed;
} kind_list;

static void add(kind_list *l, DLDevice device, DLDeviceType registered) {
  if (l->failed) return;
  if (l->n == l->room) {
    const int room = l->room > 0 ? 2 * l->room : 8;
    cli_kind *items = realloc(l->items, (size_t)room * sizeof *items);
    if (items == NULL) {
      l->failed = 1;
      return;
    }
    l->items = items;
    l->room = room;
  }
  cli_kind *k = &l->items[l->n++];
  k->device = device;
  k->registered = registered;
  char name[DLB_DEVICE_NAME_MAX];
  if (dlb_device_format(registered != 0 ? (DLDevice){registered, 0} : device,
                        name, sizeof name) != DLB_OK)
    name[0] = '\0';
  snprintf(k->label, sizeof k->label, "%s%s", name,
           registered != 0 ? "(reg)" : "");
}

static void runtime_kinds(dlb_runtime rt, kind_list *l) {
  int count = 0;
  if (dlb_runtime_status(rt) != DLB_OK ||
      dlb_runtime_device_count(rt, &count) != DLB_OK)
    return;
  int cuda = rt == DLB_RUNTIME_CUDA;
  DLDeviceType dev = cuda ? kDLCUDA : kDLROCM;
  DLDeviceType host = cuda ? kDLCUDAHost : kDLROCMHost;
  for (int i = 0; i < count; i++) add(l, (DLDevice){dev, i}, 0);
  add(l, (DLDevice){host, 0}, 0);
  dlb_gpu_info info;
  int have = dlb_gpu_get_info((DLDevice){dev, 0}, &info) == DLB_OK;
  /* Unknown capabilities are tried: dlbridge check then tells. */
  if (cuda && (!have || info.managed_memory != 0))
    add(l, (DLDevice){kDLCUDAManaged, 0}, 0);
  if (!have || info.host_register != 0) add(l, (DLDevice){kDLCPU, 0}, host);
}

int cli_kinds(cli_kind **out) {
  kind_list l = {NULL, 0, 0, 0};
  add(&l, (DLDevice){kDLCPU, 0}, 0);
  runtime_kinds(DLB_RUNTIME_CUDA, &l);
  runtime_kinds(DLB_RUNTIME_HIP, &l);
  if (l.failed) {
    free(l.items);
    return -1;
  }
  *out = l.items;
  return l.n;
}
