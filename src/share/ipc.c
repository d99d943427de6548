/*
 * ipc.c -- device memory across processes by the runtimes' IPC handles.
 * Not implemented in this revision: device tensors are refused.
 */
#include "share/share_internal.h"

int dlb__ipc_is_imported(const DLManagedTensorVersioned *t) {
  (void)t;
  return 0;
}

dlb_status dlb__ipc_export(const DLManagedTensorVersioned *t,
                           dlb__share_meta *m) {
  (void)t;
  (void)m;
  return dlb__fail(DLB_E_UNSUPPORTED, "device memory cannot be shared yet");
}

dlb_status dlb__ipc_import(const dlb__share_meta *m,
                           DLManagedTensorVersioned **out) {
  (void)m;
  (void)out;
  return dlb__fail(DLB_E_UNSUPPORTED, "device handles cannot be imported yet");
}
