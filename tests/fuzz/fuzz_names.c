/*
 * fuzz_names.c -- dtype and device names: parsing fuzzed text and
 * formatting fuzzed DLDataType / DLDevice values.
 *
 * Properties: whatever parses is valid and formats to a name that parses
 * back to the same value; a kind name parses exactly to the type whose name
 * it is; formatting into a buffer of every size up to the name's length is
 * refused with "" written and nothing past the buffer touched (each buffer
 * is a heap block of exactly that size); a value the checks refuse is
 * refused by the formatter with the buffer untouched; refusals leave a
 * message.
 */
#include "fuzz_input.h"
#include "dlbridge.h"

static void check_format_sizes(dlb_status (*fmt)(const void *, char *, size_t),
                               const void *value, const char *full) {
  size_t len = strlen(full);
  for (size_t k = 0; k <= len + 1; k++) {
    char *buf = malloc(k > 0 ? k : 1);
    FZ_ASSERT(buf != NULL);
    if (k > 0) memset(buf, 'x', k);
    dlb_status st = fmt(value, k > 0 ? buf : NULL, k);
    if (k <= len) {
      FZ_ASSERT(st == DLB_E_INVAL);
      if (k > 0) FZ_ASSERT(buf[0] == '\0');
    } else {
      FZ_ASSERT(st == DLB_OK);
      FZ_ASSERT(strcmp(buf, full) == 0);
    }
    free(buf);
  }
}

static dlb_status fmt_dtype(const void *v, char *buf, size_t n) {
  return dlb_dtype_format(*(const DLDataType *)v, buf, n);
}

static dlb_status fmt_device(const void *v, char *buf, size_t n) {
  return dlb_device_format(*(const DLDevice *)v, buf, n);
}

static void check_dtype_value(DLDataType d) {
  char name[DLB_DTYPE_NAME_MAX];
  memset(name, '#', sizeof name);
  dlb_status st = dlb_dtype_format(d, name, sizeof name);
  if (dlb_dtype_check(d) != DLB_OK) {
    FZ_ASSERT(st == DLB_E_DTYPE);
    FZ_ASSERT(name[0] == '#');
    FZ_ASSERT(dlb_last_error()[0] != '\0');
    return;
  }
  FZ_ASSERT(st == DLB_OK);
  DLDataType back;
  FZ_ASSERT(dlb_dtype_parse(name, &back) == DLB_OK);
  FZ_ASSERT(dlb_dtype_equal(back, d));
  check_format_sizes(fmt_dtype, &d, name);
  FZ_ASSERT(dlb_dtype_bits(d) == (uint32_t)d.bits * d.lanes);
  FZ_ASSERT(dlb_dtype_is_subbyte(d) == (dlb_dtype_bits(d) % 8 != 0));
  FZ_ASSERT(dlb_dtype_itemsize(d) == (dlb_dtype_bits(d) + 7) / 8);
  FZ_ASSERT(!dlb_dtype_is_subbyte(d) || d.lanes == 1);
}

static void check_device_value(DLDevice dev) {
  char name[DLB_DEVICE_NAME_MAX];
  memset(name, '#', sizeof name);
  DLDevice norm = dev;
  dlb_status ns = dlb_device_normalize(&norm);
  dlb_status st = dlb_device_format(dev, name, sizeof name);
  if (ns != DLB_OK) {
    FZ_ASSERT(ns == DLB_E_DEVICE && st == DLB_E_DEVICE);
    FZ_ASSERT(name[0] == '#');
    FZ_ASSERT(memcmp(&norm, &dev, sizeof dev) == 0);
    FZ_ASSERT(!dlb_device_can_access(dev, dev));
    FZ_ASSERT(!dlb_device_equal(dev, dev));
    return;
  }
  FZ_ASSERT(st == DLB_OK);
  FZ_ASSERT(dlb_device_equal(dev, norm));
  FZ_ASSERT(dlb_device_can_access(dev, dev));
  FZ_ASSERT(dlb_device_type_is_known(dev.device_type));
  DLDevice back;
  FZ_ASSERT(dlb_device_parse(name, &back) == DLB_OK);
  FZ_ASSERT(back.device_type == norm.device_type && back.device_id == norm.device_id);
  check_format_sizes(fmt_device, &dev, name);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  fz_in in = {data, size};
  switch (fz_below(&in, 3)) {
    case 0: {
      DLDataType d;
      d.code = fz_u8(&in);
      d.bits = fz_u8(&in);
      d.lanes = (uint16_t)fz_bytes(&in, 2);
      check_dtype_value(d);
      return 0;
    }
    case 1: {
      DLDevice dev;
      dev.device_type = (DLDeviceType)(int32_t)fz_bytes(&in, 4);
      dev.device_id = (int32_t)fz_bytes(&in, 4);
      check_device_value(dev);
      return 0;
    }
    default:
      break;
  }
  /* The rest is text; it ends at its first NUL as a C string does. */
  char *text = malloc(in.n + 1);
  FZ_ASSERT(text != NULL);
  memcpy(text, in.p, in.n);
  text[in.n] = '\0';
  DLDataType d = {0, 0, 0}, d0 = {0, 0, 0};
  dlb_status st = dlb_dtype_parse(text, &d);
  if (st == DLB_OK) {
    FZ_ASSERT(dlb_dtype_check(d) == DLB_OK);
    check_dtype_value(d);
  } else {
    FZ_ASSERT(st == DLB_E_DTYPE);
    FZ_ASSERT(memcmp(&d, &d0, sizeof d) == 0);
    FZ_ASSERT(dlb_last_error()[0] != '\0');
  }
  DLDevice dev = {(DLDeviceType)0, -7};
  st = dlb_device_parse(text, &dev);
  if (st == DLB_OK) {
    DLDevice norm = dev;
    FZ_ASSERT(dlb_device_normalize(&norm) == DLB_OK);
    FZ_ASSERT(norm.device_id == dev.device_id);
    check_device_value(dev);
    FZ_ASSERT(strncmp(text, dlb_device_type_name(dev.device_type),
                      strlen(dlb_device_type_name(dev.device_type))) == 0);
  } else {
    FZ_ASSERT(st == DLB_E_DEVICE);
    FZ_ASSERT(dev.device_type == (DLDeviceType)0 && dev.device_id == -7);
  }
  DLDeviceType type = (DLDeviceType)0;
  st = dlb_device_type_parse(text, &type);
  if (st == DLB_OK) FZ_ASSERT(strcmp(dlb_device_type_name(type), text) == 0);
  else FZ_ASSERT(st == DLB_E_DEVICE && type == (DLDeviceType)0);
  free(text);
  return 0;
}
