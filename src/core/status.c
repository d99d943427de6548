/* status.c -- status names, messages and the thread-local detailed error. */
#include <stdio.h>
#include <string.h>

#include "internal.h"

static _Thread_local char dlb__error[DLB__ERROR_MAX];

const char *dlb_status_name(dlb_status status) {
  switch (status) {
#define DLB__CASE(name, value, msg) \
  case DLB_##name:                  \
    return "DLB_" #name;
    DLB_STATUS_MAP(DLB__CASE)
#undef DLB__CASE
  }
  return "DLB_E_UNKNOWN";
}

const char *dlb_status_message(dlb_status status) {
  switch (status) {
#define DLB__CASE(name, value, msg) \
  case DLB_##name:                  \
    return msg;
    DLB_STATUS_MAP(DLB__CASE)
#undef DLB__CASE
  }
  return "unknown status";
}

const char *dlb_last_error(void) { return dlb__error; }

void dlb_clear_error(void) { dlb__error[0] = '\0'; }

void dlb__error_save(dlb__saved_error *out) {
  memcpy(out->text, dlb__error, strlen(dlb__error) + 1);
}

void dlb__error_restore(const dlb__saved_error *saved) {
  memcpy(dlb__error, saved->text, strlen(saved->text) + 1);
}

dlb_status dlb__fail(dlb_status status, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(dlb__error, sizeof dlb__error, fmt, ap);
  va_end(ap);
  return status;
}

dlb_status dlb__fail_within(dlb_status status, const char *fmt, ...) {
  /* The message being wrapped is in the buffer about to be written. */
  char why[sizeof dlb__error];
  snprintf(why, sizeof why, "%s", dlb__error);
  va_list ap;
  va_start(ap, fmt);
  int n = vsnprintf(dlb__error, sizeof dlb__error, fmt, ap);
  va_end(ap);
  /* Appended as far as it fits: ": ", the message, the terminator. */
  if (n < 0 || (size_t)n + 3 > sizeof dlb__error) return status;
  char *end = dlb__error + n;
  const size_t len = strnlen(why, sizeof dlb__error - (size_t)n - 3);
  memcpy(end, ": ", 2);
  memcpy(end + 2, why, len);
  end[2 + len] = '\0';
  return status;
}
