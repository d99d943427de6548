/* json.c -- the JSON writer the --json outputs share. */
#include "cli.h"

static void before_value(json *j) {
  if (j->after_key) {
    j->after_key = 0;
    return;
  }
  if (j->depth > 0 && j->count[j->depth]++ > 0) fputs(", ", stdout);
}

void json_open(json *j, char bracket) {
  before_value(j);
  putchar(bracket);
  if (j->depth + 1 < (int)(sizeof j->count / sizeof j->count[0])) j->depth++;
  j->count[j->depth] = 0;
}

void json_close(json *j, char bracket) {
  putchar(bracket);
  if (j->depth > 0) j->depth--;
  if (j->depth == 0) putchar('\n');
}

/* s as a JSON string. Bytes that are not UTF-8 (a file name may hold
 * any) become U+FFFD, so the output stays JSON. */
static void quoted(const char *s) {
  putchar('"');
  for (const unsigned char *p = (const unsigned char *)s; *p != '\0'; p++) {
    if (*p == '"' || *p == '\\') {
      printf("\\%c", *p);
    } else if (*p < 0x20) {
      printf("\\u%04x", *p);
    } else if (*p < 0x80) {
      putchar(*p);
    } else {
      const int n = cli_utf8_length(p);
      if (n == 0) {
        fputs("\\ufffd", stdout);
      } else {
        fwrite(p, 1, (size_t)n, stdout);
        p += n - 1;
      }
    }
  }
  putchar('"');
}

void json_key(json *j, const char *key) {
  before_value(j);
  quoted(key);
  fputs(": ", stdout);
  j->after_key = 1;
}

void json_string(json *j, const char *s) {
  before_value(j);
  if (s == NULL)
    fputs("null", stdout);
  else
    quoted(s);
}

void json_int(json *j, long long v) {
  before_value(j);
  printf("%lld", v);
}

void json_uint(json *j, uint64_t v) {
  before_value(j);
  printf("%llu", (unsigned long long)v);
}

void json_bool(json *j, int v) {
  before_value(j);
  fputs(v ? "true" : "false", stdout);
}

void json_tristate(json *j, int v) {
  before_value(j);
  fputs(v == 1 ? "true" : v == 0 ? "false" : "null", stdout);
}

const char *cli_tristate(int v) {
  return v == 1 ? "yes" : v == 0 ? "no" : "unknown";
}
