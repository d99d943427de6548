/* text.c -- what the text outputs print of bytes from outside: file names,
 * .npy headers, names given on the command line and messages that quote
 * them, made safe for a terminal. */
#include <string.h>

#include "cli.h"

int cli_utf8_length(const unsigned char *p) {
  const unsigned char c = p[0];
  int n;
  unsigned char lo = 0x80, hi = 0xbf; /* the second byte's range */
  if (c >= 0xc2 && c <= 0xdf) {
    n = 2;
  } else if (c >= 0xe0 && c <= 0xef) {
    n = 3;
    if (c == 0xe0) lo = 0xa0;
    if (c == 0xed) hi = 0x9f;
  } else if (c >= 0xf0 && c <= 0xf4) {
    n = 4;
    if (c == 0xf0) lo = 0x90;
    if (c == 0xf4) hi = 0x8f;
  } else {
    return 0;
  }
  if (p[1] < lo || p[1] > hi) return 0;
  for (int i = 2; i < n; i++)
    if (p[i] < 0x80 || p[i] > 0xbf) return 0;
  return n;
}

/* Room for a path of PATH_MAX bytes each escaped to four, and the mark of
 * a cut. */
#define SHOWN_ROOM (4 * 4096 + 8)
#define SHOWN_SLOTS 4

/* Appends the n bytes at s to out at *len, if they fit before the room
 * kept for the cut's mark; returns 0 when they do not. */
static int put(char *out, size_t *len, const char *s, size_t n) {
  if (*len + n > SHOWN_ROOM - 4) return 0;
  memcpy(out + *len, s, n);
  *len += n;
  return 1;
}

const char *cli_shown(const char *s) {
  static char slots[SHOWN_SLOTS][SHOWN_ROOM];
  static int next;
  char *out = slots[next];
  next = (next + 1) % SHOWN_SLOTS;
  size_t len = 0;
  int whole = 1;
  for (const unsigned char *p = (const unsigned char *)s; *p != '\0' && whole;
       p++) {
    char esc[8];
    const char *named = *p == '\\'   ? "\\\\"
                        : *p == '\n' ? "\\n"
                        : *p == '\t' ? "\\t"
                        : *p == '\r' ? "\\r"
                                     : NULL;
    /* The C1 controls U+0080-U+009F act on some terminals like ESC. */
    const int n = *p >= 0x80 ? cli_utf8_length(p) : 0;
    if (named != NULL) {
      whole = put(out, &len, named, 2);
    } else if (*p >= 0x20 && *p < 0x7f) {
      whole = put(out, &len, (const char *)p, 1);
    } else if (n > 0 && !(p[0] == 0xc2 && p[1] < 0xa0)) {
      whole = put(out, &len, (const char *)p, (size_t)n);
      p += n - 1;
    } else {
      snprintf(esc, sizeof esc, "\\x%02x", *p);
      whole = put(out, &len, esc, 4);
    }
  }
  if (!whole) {
    memcpy(out + len, "...", 3);
    len += 3;
  }
  out[len] = '\0';
  return out;
}
