/* cmd_names.c -- dlbridge dtype, device and version: what names mean. */
#include <string.h>

#include "cli.h"

static const cli_opt json_only[] = {
    {"--json", NULL, "print JSON instead of text"},
};

/* The one-lane dtype names, found by asking the library about every code
 * and width, so the list cannot fall behind its parser. */
static void list_dtypes(void) {
  fprintf(stderr, "valid dtypes:");
  for (unsigned code = 0; code <= UINT8_MAX; code++)
    for (unsigned bits = 1; bits <= UINT8_MAX; bits++) {
      DLDataType t = {(uint8_t)code, (uint8_t)bits, 1};
      char name[DLB_DTYPE_NAME_MAX];
      if (dlb_dtype_check(t) == DLB_OK &&
          dlb_dtype_format(t, name, sizeof name) == DLB_OK)
        fprintf(stderr, " %s", name);
    }
  fprintf(stderr, "; a vector type appends xN (float32x4)\n");
}

/* The kind names, from the library as above. */
static void list_devices(void) {
  fprintf(stderr, "valid kinds:");
  for (int type = 0; type <= UINT8_MAX; type++) {
    const char *name = dlb_device_type_name((DLDeviceType)type);
    if (name != NULL) fprintf(stderr, " %s", name);
  }
  fprintf(stderr, "; a device memory kind takes an index (cuda:1), a host "
                  "kind none\n");
}

/* A bad name fails the run (exit 1) but the other names are described;
 * the valid names are listed once, after them. */
static int dtype_run(const char **values, int argc, char **argv) {
  int as_json = values[0] != NULL, rc = CLI_OK;
  json j = {0};
  if (as_json) json_open(&j, '[');
  for (int i = 0; i < argc; i++) {
    DLDataType t;
    char name[DLB_DTYPE_NAME_MAX];
    if (dlb_dtype_parse(argv[i], &t) != DLB_OK ||
        dlb_dtype_format(t, name, sizeof name) != DLB_OK) {
      fprintf(stderr, "%s dtype: %s\n", CLI_NAME, cli_shown(dlb_last_error()));
      rc = CLI_FAILED;
      continue;
    }
    int sub = dlb_dtype_is_subbyte(t);
    if (as_json) {
      json_open(&j, '{');
      json_key(&j, "name");
      json_string(&j, name);
      json_key(&j, "code");
      json_int(&j, t.code);
      json_key(&j, "bits");
      json_int(&j, t.bits);
      json_key(&j, "lanes");
      json_int(&j, t.lanes);
      json_key(&j, "subbyte");
      json_bool(&j, sub);
      json_key(&j, "itemsize");
      if (sub)
        json_string(&j, NULL);
      else
        json_uint(&j, dlb_dtype_itemsize(t));
      json_close(&j, '}');
      continue;
    }
    printf("%s: code %u, bits %u, lanes %u, %u bits per element", name,
           (unsigned)t.code, (unsigned)t.bits, (unsigned)t.lanes,
           (unsigned)dlb_dtype_bits(t));
    if (sub)
      printf(" (sub-byte: packed, or one byte each when padded)\n");
    else
      printf(", itemsize %zu\n", dlb_dtype_itemsize(t));
  }
  if (as_json) json_close(&j, ']');
  if (rc != CLI_OK) list_dtypes();
  return rc;
}

static int device_run(const char **values, int argc, char **argv) {
  int as_json = values[0] != NULL, rc = CLI_OK;
  json j = {0};
  if (as_json) json_open(&j, '[');
  for (int i = 0; i < argc; i++) {
    DLDevice d;
    char name[DLB_DEVICE_NAME_MAX];
    if (dlb_device_parse(argv[i], &d) != DLB_OK ||
        dlb_device_format(d, name, sizeof name) != DLB_OK) {
      fprintf(stderr, "%s device: %s\n", CLI_NAME,
              cli_shown(dlb_last_error()));
      rc = CLI_FAILED;
      continue;
    }
    DLDevice cpu = {kDLCPU, 0};
    int host = dlb_device_type_is_host_type(d.device_type);
    int readable = dlb_device_can_access(cpu, d);
    if (as_json) {
      json_open(&j, '{');
      json_key(&j, "name");
      json_string(&j, name);
      json_key(&j, "device_type");
      json_int(&j, d.device_type);
      json_key(&j, "device_id");
      json_int(&j, d.device_id);
      json_key(&j, "host_type");
      json_bool(&j, host);
      json_key(&j, "cpu_readable");
      json_bool(&j, readable);
      json_close(&j, '}');
      continue;
    }
    printf("%s: device_type %d, device_id %d, %s, %s\n", name,
           (int)d.device_type, (int)d.device_id,
           host ? "host-type (device_id is always 0)" : "device memory",
           readable ? "CPU-readable" : "not CPU-readable");
  }
  if (as_json) json_close(&j, ']');
  if (rc != CLI_OK) list_devices();
  return rc;
}

static int version_run(const char **values, int argc, char **argv) {
  (void)argc;
  (void)argv;
  if (values[0] == NULL) {
    printf("%s\n", dlb_version_string());
    return CLI_OK;
  }
  json j = {0};
  json_open(&j, '{');
  json_key(&j, "version");
  json_string(&j, dlb_version_string());
  json_key(&j, "version_number");
  json_int(&j, dlb_version_number());
  json_key(&j, "dlpack");
  char dlpack[16];
  snprintf(dlpack, sizeof dlpack, "%d.%d", DLPACK_MAJOR_VERSION,
           DLPACK_MINOR_VERSION);
  json_string(&j, dlpack);
  json_close(&j, '}');
  return CLI_OK;
}

const cli_cmd cli_dtype = {
    "dtype", "NAME...", "describe dtype names (float32, int4, float8_e4m3fn, "
    "...)", json_only, 1, 1, -1, dtype_run};
const cli_cmd cli_device = {
    "device", "NAME...", "describe device names (cpu, cuda:1, cuda_managed, "
    "...)", json_only, 1, 1, -1, device_run};
const cli_cmd cli_version = {"version", "", "print the library version",
                             json_only, 1, 0, 0, version_run};
