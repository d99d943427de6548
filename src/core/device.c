/* device.c -- device kind names, parsing, canonical form and accessibility. */
#include <stdio.h>
#include <string.h>

#include "internal.h"

/* Indexed by DLDeviceType; NULL marks the values DLPack leaves unused. */
static const char *const kind_names[] = {
    NULL,           "cpu",    "cuda",      "cuda_host", "opencl",
    NULL,           NULL,     "vulkan",    "metal",     "vpi",
    "rocm",         "rocm_host", "ext_dev", "cuda_managed", "oneapi",
    "webgpu",       "hexagon", "maia",     "trn",
};

#define KIND_COUNT (sizeof kind_names / sizeof kind_names[0])

/* Parsed text and user input reach the message; a bound keeps it readable. */
#define TEXT_SHOWN 64

const char *dlb_device_type_name(DLDeviceType type) {
  /* Through unsigned, so negative values (the enum may be signed or not)
   * fall outside the table instead of indexing before it. */
  unsigned v = (unsigned)type;
  return v < KIND_COUNT ? kind_names[v] : NULL;
}

int dlb_device_type_is_known(DLDeviceType type) {
  return dlb_device_type_name(type) != NULL;
}

int dlb_device_type_is_host_type(DLDeviceType type) {
  switch (type) {
    case kDLCPU:
    case kDLCUDAHost:
    case kDLROCMHost:
    case kDLCUDAManaged:
      return 1;
    default:
      return 0;
  }
}

int dlb_device_type_cpu_accessible(DLDeviceType type) {
  /* The same set today, but a separate question: a future host-type kind
   * need not be CPU-mapped. */
  switch (type) {
    case kDLCPU:
    case kDLCUDAHost:
    case kDLROCMHost:
    case kDLCUDAManaged:
      return 1;
    default:
      return 0;
  }
}

/* Finds the kind whose name is exactly name[0..len). Returns 0 if none. */
static int find_kind(const char *name, size_t len, DLDeviceType *out) {
  for (unsigned v = 0; v < KIND_COUNT; v++) {
    const char *k = dlb_device_type_name((DLDeviceType)v);
    if (k != NULL && strlen(k) == len && memcmp(k, name, len) == 0) {
      *out = (DLDeviceType)v;
      return 1;
    }
  }
  return 0;
}

dlb_status dlb_device_type_parse(const char *name, DLDeviceType *out) {
  if (name == NULL || out == NULL)
    return dlb__fail(DLB_E_INVAL, "dlb_device_type_parse: %s is NULL",
                     name == NULL ? "name" : "out");
  DLDeviceType type;
  if (!find_kind(name, strlen(name), &type))
    return dlb__fail(DLB_E_DEVICE, "device kind \"%.*s\" is not known",
                     TEXT_SHOWN, name);
  *out = type;
  return DLB_OK;
}

/* Reads a device id: decimal digits only, no sign, no leading zeros, at
 * most INT32_MAX. Returns 0 when text[0..len) is not one. */
static int parse_id(const char *text, size_t len, int32_t *out) {
  if (len == 0 || (len > 1 && text[0] == '0')) return 0;
  int64_t v = 0;
  for (size_t i = 0; i < len; i++) {
    if (text[i] < '0' || text[i] > '9') return 0;
    v = v * 10 + (text[i] - '0');
    if (v > INT32_MAX) return 0;
  }
  *out = (int32_t)v;
  return 1;
}

dlb_status dlb_device_parse(const char *text, DLDevice *out) {
  if (text == NULL || out == NULL)
    return dlb__fail(DLB_E_INVAL, "dlb_device_parse: %s is NULL",
                     text == NULL ? "text" : "out");
  const char *colon = strchr(text, ':');
  size_t kind_len = colon != NULL ? (size_t)(colon - text) : strlen(text);
  DLDevice dev;
  if (!find_kind(text, kind_len, &dev.device_type))
    return dlb__fail(DLB_E_DEVICE,
                     "device \"%.*s\": unknown device kind",
                     TEXT_SHOWN, text);
  dev.device_id = 0;
  if (colon != NULL &&
      !parse_id(colon + 1, strlen(colon + 1), &dev.device_id))
    return dlb__fail(DLB_E_DEVICE,
                     "device \"%.*s\": device_id \"%.*s\" is not a decimal "
                     "number in 0..%d",
                     TEXT_SHOWN, text, TEXT_SHOWN, colon + 1, INT32_MAX);
  if (dev.device_id != 0 && dlb_device_type_is_host_type(dev.device_type))
    return dlb__fail(DLB_E_DEVICE,
                     "device \"%.*s\": device_id is %d; %s memory is not tied "
                     "to one device and takes only 0",
                     TEXT_SHOWN, text, (int)dev.device_id,
                     dlb_device_type_name(dev.device_type));
  *out = dev;
  return DLB_OK;
}

/* Puts *dev in canonical form without touching the last error; returns 0
 * when it is not a valid device. */
static int canonical(DLDevice *dev) {
  if (!dlb_device_type_is_known(dev->device_type) || dev->device_id < 0)
    return 0;
  if (dlb_device_type_is_host_type(dev->device_type)) dev->device_id = 0;
  return 1;
}

static dlb_status fail_invalid(DLDevice device) {
  if (!dlb_device_type_is_known(device.device_type))
    return dlb__fail(DLB_E_DEVICE,
                     "device_type is %d; not a DLPack 1.3 device type",
                     (int)device.device_type);
  return dlb__fail(DLB_E_DEVICE, "device_id is %d; must be >= 0",
                   (int)device.device_id);
}

dlb_status dlb_device_format(DLDevice device, char *buf, size_t size) {
  if (buf == NULL) return dlb__fail(DLB_E_INVAL, "dlb_device_format: buf is NULL");
  if (!canonical(&device)) return fail_invalid(device);
  char text[DLB_DEVICE_NAME_MAX];
  const char *name = dlb_device_type_name(device.device_type);
  int n = dlb_device_type_is_host_type(device.device_type)
              ? snprintf(text, sizeof text, "%s", name)
              : snprintf(text, sizeof text, "%s:%d", name,
                         (int)device.device_id);
  if ((size_t)n >= size) {
    if (size > 0) buf[0] = '\0';
    return dlb__fail(DLB_E_INVAL,
                     "dlb_device_format: size is %zu; \"%s\" needs %d",
                     size, text, n + 1);
  }
  memcpy(buf, text, (size_t)n + 1);
  return DLB_OK;
}

dlb_status dlb_device_normalize(DLDevice *device) {
  if (device == NULL)
    return dlb__fail(DLB_E_INVAL, "dlb_device_normalize: device is NULL");
  DLDevice dev = *device;
  if (!canonical(&dev)) return fail_invalid(dev);
  *device = dev;
  return DLB_OK;
}

int dlb_device_equal(DLDevice a, DLDevice b) {
  return canonical(&a) && canonical(&b) && a.device_type == b.device_type &&
         a.device_id == b.device_id;
}

int dlb_device_can_access(DLDevice consumer, DLDevice memory) {
  if (!canonical(&consumer) || !canonical(&memory)) return 0;
  /* Code that computes "on" pinned or managed memory runs on the host. */
  if (dlb_device_type_is_host_type(consumer.device_type))
    return dlb_device_type_cpu_accessible(memory.device_type);
  switch (consumer.device_type) {
    case kDLCUDA:
      if (memory.device_type == kDLCUDAHost ||
          memory.device_type == kDLCUDAManaged)
        return 1;
      break;
    case kDLROCM:
      if (memory.device_type == kDLROCMHost) return 1;
      break;
    default:
      break;
  }
  return consumer.device_type == memory.device_type &&
         consumer.device_id == memory.device_id;
}
