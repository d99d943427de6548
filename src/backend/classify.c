/*
 * classify.c -- what a pointer really is, and whether a producer's device
 * label agrees with it.
 */
#include <stdio.h>

#include "backend.h"

/* Asks each usable runtime in turn: cpu when none knows the address. */
static dlb_status classify(const void *p, dlb__ptr_kind *out) {
  static const dlb__gpu *const gpus[] = {&dlb__cuda, &dlb__hip};
  dlb__ptr_kind k = {{kDLCPU, 0}, 0};
  for (size_t i = 0; i < sizeof gpus / sizeof gpus[0]; i++) {
    if (!gpus[i]->ready()) continue;
    dlb_status s = gpus[i]->classify(p, &k);
    if (s != DLB_OK) return s;
    if (k.device.device_type != kDLCPU) break;
  }
  *out = k;
  return DLB_OK;
}

dlb_status dlb_device_of_pointer(const void *ptr, DLDevice *out) {
  if (ptr == NULL || out == NULL)
    return dlb__fail(DLB_E_INVAL, "dlb_device_of_pointer: %s is NULL",
                     ptr == NULL ? "ptr" : "out");
  dlb__ptr_kind k;
  dlb_status s = classify(ptr, &k);
  if (s == DLB_OK) *out = k.device;
  return s;
}

/* Labels that misname the memory but ask nothing of it that it cannot do:
 * every access the label allows works on the memory. */
static int harmless(DLDevice label, const dlb__ptr_kind *truth) {
  DLDeviceType t = truth->device.device_type;
  if (label.device_type == kDLCPU) return dlb_device_type_cpu_accessible(t);
  if (t == kDLCUDAManaged)
    return label.device_type == kDLCUDA || label.device_type == kDLCUDAHost;
  if (t == kDLROCMHost && truth->managed)
    return label.device_type == kDLROCM;
  return 0;
}

dlb_status dlb_tensor_check_device(const DLTensor *t, unsigned flags,
                                   DLDevice *out) {
  if (t == NULL || out == NULL)
    return dlb__fail(DLB_E_INVAL, "dlb_tensor_check_device: %s is NULL",
                     t == NULL ? "t" : "out");
  if ((flags & ~DLB_LABEL_CORRECT) != 0)
    return dlb__fail(DLB_E_INVAL, "flags is 0x%x; only DLB_LABEL_CORRECT "
                     "(0x1) is defined", flags);
  DLDevice label = t->device;
  dlb_status s = dlb_device_normalize(&label);
  if (s != DLB_OK) return s;
  const dlb__gpu *family = dlb__gpu_for_type(label.device_type);
  /* Labels that no runtime here can confirm or deny are taken as given. */
  if (t->data == NULL || (label.device_type != kDLCPU && family == NULL) ||
      (family != NULL && !family->ready())) {
    *out = label;
    return DLB_OK;
  }
  dlb__ptr_kind truth;
  s = classify(t->data, &truth);
  if (s != DLB_OK) return s;
  if (dlb_device_equal(label, truth.device)) {
    *out = label;
    return DLB_OK;
  }
  if (harmless(label, &truth)) {
    *out = (flags & DLB_LABEL_CORRECT) != 0 ? truth.device : label;
    return DLB_OK;
  }
  char said[DLB_DEVICE_NAME_MAX], is[DLB_DEVICE_NAME_MAX];
  if (dlb_device_format(label, said, sizeof said) != DLB_OK)
    snprintf(said, sizeof said, "device_type %d", (int)label.device_type);
  if (dlb_device_format(truth.device, is, sizeof is) != DLB_OK)
    snprintf(is, sizeof is, "unknown");
  return dlb__fail(DLB_E_DEVICE, "device label %s contradicts the memory at "
                   "%p, which is %s%s", said, t->data, is,
                   truth.managed ? " (managed)" : "");
}
