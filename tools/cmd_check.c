/*
 * cmd_check.c -- dlbridge check: allocates every usable kind of memory,
 * checks what the runtimes say its pointers are, takes views, and copies a
 * strided view between every pair of kinds, reading each copy back.
 */
#include <stdlib.h>
#include <string.h>

#include "cli.h"

static const cli_opt opts[] = {
    {"--json", NULL, "print JSON instead of a table"},
    {"--kinds", "K1,K2", "check only these kinds (as dlbridge info lists "
     "them)"},
};

#define ROWS 4
#define COLS 6
static const DLDataType f32 = {kDLFloat, 32, 1};
static const DLDevice cpu = {kDLCPU, 0};

typedef struct result {
  int ok;
  char error[512];
} result;

static void fail(result *r, const char *step) {
  r->ok = 0;
  snprintf(r->error, sizeof r->error, "%s: %s", step, dlb_last_error());
}

/* A ROWS x COLS tensor of kind k, or NULL with r filled. */
static DLManagedTensorVersioned *alloc_kind(const cli_kind *k, int64_t rows,
                                            int64_t cols, result *r) {
  int64_t shape[2] = {rows, cols};
  DLManagedTensorVersioned *t = NULL;
  if (dlb_tensor_alloc(k->device, f32, 2, shape, &t) != DLB_OK) {
    fail(r, "allocate");
    return NULL;
  }
  if (k->registered == 0) return t;
  DLManagedTensorVersioned *p = NULL;
  dlb_status s = dlb_tensor_pin(t, k->registered, &p);
  dlb_tensor_release(t);
  if (s != DLB_OK) fail(r, "register");
  return p;
}

static DLDevice expected_device(const cli_kind *k) {
  return k->registered != 0 ? (DLDevice){k->registered, 0} : k->device;
}

/* Allocation, what the runtimes say the data is, and a view of it. */
static void check_kind(const cli_kind *k, result *r) {
  r->ok = 1;
  DLManagedTensorVersioned *t = alloc_kind(k, ROWS, COLS, r);
  if (t == NULL) return;
  DLDevice got;
  DLDevice want = expected_device(k);
  if (dlb_device_of_pointer(t->dl_tensor.data, &got) != DLB_OK) {
    fail(r, "classify");
  } else if (!dlb_device_equal(got, want)) {
    char a[DLB_DEVICE_NAME_MAX] = "?", b[DLB_DEVICE_NAME_MAX] = "?";
    (void)dlb_device_format(got, a, sizeof a);
    (void)dlb_device_format(want, b, sizeof b);
    r->ok = 0;
    snprintf(r->error, sizeof r->error, "classify: the data is %s memory, "
             "not %s", a, b);
  } else if (!dlb_device_equal(t->dl_tensor.device, want)) {
    r->ok = 0;
    snprintf(r->error, sizeof r->error, "the tensor's label differs from "
             "its kind");
  }
  dlb_slice s[2] = {{DLB_SLICE_DEFAULT, DLB_SLICE_DEFAULT, 1},
                    {1, DLB_SLICE_DEFAULT, 2}};
  DLManagedTensorVersioned *v = NULL;
  if (r->ok && dlb_tensor_slice(t, 2, s, &v) != DLB_OK) fail(r, "view");
  if (r->ok && dlb_managed_validate(v) != DLB_OK) fail(r, "validate view");
  if (r->ok && (v->dl_tensor.data != t->dl_tensor.data ||
                v->dl_tensor.byte_offset != sizeof(float) ||
                v->dl_tensor.strides[1] != 2 ||
                !dlb_device_equal(v->dl_tensor.device, want))) {
    r->ok = 0;
    snprintf(r->error, sizeof r->error, "view: it does not describe "
             "columns 1, 3, 5 of the same data");
  }
  dlb_tensor_release(v);
  dlb_tensor_release(t);
}

/* Fills a tensor of kind from with a pattern through cpu memory, copies
 * its odd columns (a strided view) into a tensor of kind to, reads that
 * back to cpu memory and compares. */
static void check_copy(const cli_kind *from, const cli_kind *to, int seed,
                       result *r) {
  r->ok = 1;
  DLManagedTensorVersioned *pattern = NULL, *src = NULL, *view = NULL,
                           *dst = NULL, *back = NULL;
  int64_t shape[2] = {ROWS, COLS}, half[2] = {ROWS, COLS / 2};
  if (dlb_tensor_alloc(cpu, f32, 2, shape, &pattern) != DLB_OK) {
    fail(r, "allocate cpu");
    goto done;
  }
  float *p = pattern->dl_tensor.data;
  for (int i = 0; i < ROWS * COLS; i++) p[i] = (float)(seed * 1000 + i);
  src = alloc_kind(from, ROWS, COLS, r);
  if (src == NULL) goto done;
  if (dlb_copy_sync(&pattern->dl_tensor, &src->dl_tensor, NULL) != DLB_OK) {
    fail(r, "fill the source");
    goto done;
  }
  dlb_slice s[2] = {{DLB_SLICE_DEFAULT, DLB_SLICE_DEFAULT, 1},
                    {1, DLB_SLICE_DEFAULT, 2}};
  if (dlb_tensor_slice(src, 2, s, &view) != DLB_OK) {
    fail(r, "view the source");
    goto done;
  }
  dst = alloc_kind(to, ROWS, COLS / 2, r);
  if (dst == NULL) goto done;
  if (dlb_copy_sync(&view->dl_tensor, &dst->dl_tensor, NULL) != DLB_OK) {
    fail(r, "copy");
    goto done;
  }
  if (dlb_tensor_alloc(cpu, f32, 2, half, &back) != DLB_OK) {
    fail(r, "allocate cpu");
    goto done;
  }
  if (dlb_copy_sync(&dst->dl_tensor, &back->dl_tensor, NULL) != DLB_OK) {
    fail(r, "read back");
    goto done;
  }
  const float *b = back->dl_tensor.data;
  for (int i = 0; i < ROWS && r->ok; i++)
    for (int c = 0; c < COLS / 2 && r->ok; c++)
      if (b[i * (COLS / 2) + c] != p[i * COLS + 1 + 2 * c]) {
        r->ok = 0;
        snprintf(r->error, sizeof r->error, "element [%d, %d] reads %g, "
                 "not %g", i, c, (double)b[i * (COLS / 2) + c],
                 (double)p[i * COLS + 1 + 2 * c]);
      }
done:
  dlb_tensor_release(back);
  dlb_tensor_release(dst);
  dlb_tensor_release(view);
  dlb_tensor_release(src);
  dlb_tensor_release(pattern);
}

/* Keeps the kinds named in list (comma-separated), in its order, each once
 * however often it is named (checked twice, it would be counted twice);
 * an unknown or empty name is a usage error listing the valid ones. */
static int select_kinds(const char *list, cli_kind *kinds, int *n) {
  const int nall = *n;
  cli_kind *all = malloc((size_t)nall * sizeof *all);
  char *picked = calloc((size_t)nall, 1);
  if (all == NULL || picked == NULL) {
    free(all);
    free(picked);
    fprintf(stderr, "%s check: out of memory\n", CLI_NAME);
    return CLI_FAILED;
  }
  memcpy(all, kinds, (size_t)nall * sizeof *all);
  int m = 0, rc = CLI_OK;
  for (const char *p = list;; p++) {
    size_t len = strcspn(p, ",");
    int i = 0;
    while (i < nall && (strlen(all[i].label) != len ||
                        strncmp(all[i].label, p, len) != 0))
      i++;
    if (i == nall) {
      char *name = len == 0 ? NULL : strndup(p, len);
      if (len == 0)
        fprintf(stderr, "%s check: --kinds '%s' has an empty name; usable "
                "here:", CLI_NAME, cli_shown(list));
      else
        fprintf(stderr, "%s check: unknown or unusable kind '%s'; usable "
                "here:", CLI_NAME, name != NULL ? cli_shown(name) : "?");
      free(name);
      for (int k = 0; k < nall; k++) fprintf(stderr, " %s", all[k].label);
      fprintf(stderr, "\n");
      rc = CLI_USAGE;
      break;
    }
    if (!picked[i]) kinds[m++] = all[i];
    picked[i] = 1;
    p += len;
    if (*p == '\0') break;
  }
  free(all);
  free(picked);
  if (rc == CLI_OK) *n = m;
  return rc;
}

static void text_report(const cli_kind *kinds, int n, const result *kr,
                        const result *cr, int passed, int total) {
  printf("%-16s %s\n", "kind", "alloc, classify, view");
  for (int i = 0; i < n; i++)
    printf("%-16s %s\n", kinds[i].label, kr[i].ok ? "ok" : "FAIL");
  printf("\ncopies of a strided view (rows: from, columns: to)\n%-16s",
         "");
  /* The last column is not padded: no line ends in spaces. */
  for (int b = 0; b < n; b++)
    printf(" %-*s", b + 1 < n ? 15 : 0, kinds[b].label);
  printf("\n");
  for (int a = 0; a < n; a++) {
    printf("%-16s", kinds[a].label);
    for (int b = 0; b < n; b++)
      printf(" %-*s", b + 1 < n ? 15 : 0, cr[a * n + b].ok ? "ok" : "FAIL");
    printf("\n");
  }
  for (int i = 0; i < n; i++)
    if (!kr[i].ok)
      printf("FAIL %s: %s\n", kinds[i].label, cli_shown(kr[i].error));
  for (int a = 0; a < n; a++)
    for (int b = 0; b < n; b++)
      if (!cr[a * n + b].ok)
        printf("FAIL %s -> %s: %s\n", kinds[a].label, kinds[b].label,
               cli_shown(cr[a * n + b].error));
  printf("%d of %d checks passed\n", passed, total);
}

static void json_report(const cli_kind *kinds, int n, const result *kr,
                        const result *cr, int passed, int total) {
  json j = {0};
  json_open(&j, '{');
  json_key(&j, "passed");
  json_bool(&j, passed == total);
  json_key(&j, "checks");
  json_int(&j, total);
  json_key(&j, "failures");
  json_int(&j, total - passed);
  json_key(&j, "kinds");
  json_open(&j, '[');
  for (int i = 0; i < n; i++) {
    json_open(&j, '{');
    json_key(&j, "kind");
    json_string(&j, kinds[i].label);
    json_key(&j, "ok");
    json_bool(&j, kr[i].ok);
    json_key(&j, "error");
    json_string(&j, kr[i].ok ? NULL : kr[i].error);
    json_close(&j, '}');
  }
  json_close(&j, ']');
  json_key(&j, "copies");
  json_open(&j, '[');
  for (int a = 0; a < n; a++)
    for (int b = 0; b < n; b++) {
      const result *r = &cr[a * n + b];
      json_open(&j, '{');
      json_key(&j, "from");
      json_string(&j, kinds[a].label);
      json_key(&j, "to");
      json_string(&j, kinds[b].label);
      json_key(&j, "ok");
      json_bool(&j, r->ok);
      json_key(&j, "error");
      json_string(&j, r->ok ? NULL : r->error);
      json_close(&j, '}');
    }
  json_close(&j, ']');
  json_close(&j, '}');
}

static int check_run(const char **values, int argc, char **argv) {
  (void)argc;
  (void)argv;
  cli_kind *kinds = NULL;
  int n = cli_kinds(&kinds);
  if (n < 0) {
    fprintf(stderr, "%s check: out of memory\n", CLI_NAME);
    return CLI_FAILED;
  }
  if (values[1] != NULL) {
    int rc = select_kinds(values[1], kinds, &n);
    if (rc != CLI_OK) {
      free(kinds);
      return rc;
    }
  }
  result *kr = calloc((size_t)n, sizeof *kr);
  result *cr = calloc((size_t)n * (size_t)n, sizeof *cr);
  if (kr == NULL || cr == NULL) {
    free(kr);
    free(cr);
    free(kinds);
    fprintf(stderr, "%s check: out of memory\n", CLI_NAME);
    return CLI_FAILED;
  }
  int passed = 0, total = n + n * n;
  for (int i = 0; i < n; i++) {
    check_kind(&kinds[i], &kr[i]);
    passed += kr[i].ok;
  }
  for (int a = 0; a < n; a++)
    for (int b = 0; b < n; b++) {
      check_copy(&kinds[a], &kinds[b], a * n + b, &cr[a * n + b]);
      passed += cr[a * n + b].ok;
    }
  if (values[0] != NULL)
    json_report(kinds, n, kr, cr, passed, total);
  else
    text_report(kinds, n, kr, cr, passed, total);
  free(kr);
  free(cr);
  free(kinds);
  return passed == total ? CLI_OK : CLI_FAILED;
}

const cli_cmd cli_check = {
    "check", "", "allocate, classify, view and copy every usable memory kind",
    opts, 2, 0, 0, check_run};
