/* cmd_inspect.c -- dlbridge inspect FILE.npy: what a .npy header says,
 * checked as dlb_tensor_map_npy() checks it. */
#include "cli.h"

static const cli_opt opts[] = {
    {"--json", NULL, "print JSON instead of text"},
};

static int inspect_run(const char **values, int argc, char **argv) {
  int as_json = values[0] != NULL, rc = CLI_OK;
  json j = {0};
  if (as_json) json_open(&j, '[');
  for (int i = 0; i < argc; i++) {
    dlb_npy_header h;
    if (dlb_npy_read_header(argv[i], &h) != DLB_OK) {
      fprintf(stderr, "%s inspect: %s: %s\n", CLI_NAME, cli_shown(argv[i]),
              cli_shown(dlb_last_error()));
      rc = CLI_FAILED;
      continue;
    }
    char dtype[DLB_DTYPE_NAME_MAX];
    if (dlb_dtype_format(h.dtype, dtype, sizeof dtype) != DLB_OK)
      dtype[0] = '\0';
    const char *order = h.fortran_order ? "F" : "C";
    if (as_json) {
      json_open(&j, '{');
      json_key(&j, "file");
      json_string(&j, argv[i]);
      json_key(&j, "dtype");
      json_string(&j, dtype);
      json_key(&j, "descr");
      json_string(&j, h.descr);
      json_key(&j, "shape");
      json_open(&j, '[');
      for (int32_t d = 0; d < h.ndim; d++) json_int(&j, h.shape[d]);
      json_close(&j, ']');
      json_key(&j, "order");
      json_string(&j, order);
      json_key(&j, "version");
      char v[16];
      snprintf(v, sizeof v, "%d.%d", h.major, h.minor);
      json_string(&j, v);
      json_key(&j, "data_offset");
      json_uint(&j, h.data_offset);
      json_key(&j, "data_bytes");
      json_uint(&j, h.data_bytes);
      json_close(&j, '}');
      continue;
    }
    printf("%s: dtype %s ('%s'), shape (", cli_shown(argv[i]), dtype,
           cli_shown(h.descr));
    for (int32_t d = 0; d < h.ndim; d++)
      printf("%s%lld", d > 0 ? ", " : "", (long long)h.shape[d]);
    printf("%s), order %s, format %d.%d, data at byte %llu (%llu byte%s)\n",
           h.ndim == 1 ? "," : "", order, h.major, h.minor,
           (unsigned long long)h.data_offset,
           (unsigned long long)h.data_bytes, h.data_bytes == 1 ? "" : "s");
  }
  if (as_json) json_close(&j, ']');
  return rc;
}

const cli_cmd cli_inspect = {
    "inspect", "FILE.npy...", "describe .npy files: dtype, shape, order, "
    "format version, data offset", opts, 1, 1, -1, inspect_run};
