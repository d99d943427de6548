/* share_worker.c -- a worker of the multi-process sharing tests. */
#include "share_worker.h"

#include <stdio.h>
#include <unistd.h>

#include "dlbridge.h"

static int say(int sock, char c) { return write(sock, &c, 1) == 1 ? 0 : 1; }

int share_worker_run(int sock, int index, int nworkers, uint64_t flags) {
  DLManagedTensorVersioned *t = NULL;
  dlb_status st = dlb_share_recv(sock, flags, &t);
  if (st != DLB_OK) {
    fprintf(stderr, "worker %d: %s: %s\n", index, dlb_status_name(st),
            dlb_last_error());
    say(sock, 'F');
    return 1;
  }
  /* Pinned on receipt: labelled so, and the runtime agrees. */
  DLDeviceType want = flags & DLB_SHARE_PIN_CUDA   ? kDLCUDAHost
                      : flags & DLB_SHARE_PIN_ROCM ? kDLROCMHost
                                                   : kDLCPU;
  DLDevice seen = {kDLCPU, 0};
  if (t->dl_tensor.device.device_type != want ||
      dlb_device_of_pointer(t->dl_tensor.data, &seen) != DLB_OK ||
      seen.device_type != want || !dlb_tensor_is_shared(t)) {
    fprintf(stderr, "worker %d: memory is %d, labelled %d, wanted %d\n",
            index, (int)seen.device_type,
            (int)t->dl_tensor.device.device_type, (int)want);
    say(sock, 'F');
    return 1;
  }
  int64_t n = t->dl_tensor.shape[0];
  uint8_t *d = (uint8_t *)t->dl_tensor.data + t->dl_tensor.byte_offset;
  int64_t part = n / nworkers;
  for (int64_t k = index * part; k < (index + 1) * part; k++)
    d[k] = share_worker_byte(index, k);
  if (say(sock, 'w') != 0) return 1;
  char go = 0;
  if (read(sock, &go, 1) != 1) return 1;
  int bad = 0;
  for (int64_t k = 0; k < nworkers * part; k++)
    if (d[k] != share_worker_byte((int)(k / part), k)) bad++;
  if (bad != 0)
    fprintf(stderr, "worker %d: %d bytes differ\n", index, bad);
  dlb_tensor_release(t);
  return say(sock, bad == 0 ? 'k' : 'F') != 0 || bad != 0;
}
