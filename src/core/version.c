/* version.c -- the library's version. */
#include "internal.h"

#define DLB__STR2(x) #x
#define DLB__STR(x) DLB__STR2(x)

unsigned dlb_version_number(void) { return DLB_VERSION_NUMBER; }

const char *dlb_version_string(void) {
  return DLB__STR(DLB_VERSION_MAJOR) "." DLB__STR(
      DLB_VERSION_MINOR) "." DLB__STR(DLB_VERSION_PATCH);
}
