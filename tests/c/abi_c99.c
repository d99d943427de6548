/* abi_c99.c -- compiled with -std=c99 -pedantic: the ABI header is C99. */
#include "dlpack/dlpack.h"

int dlb_test_abi_c99_size(void);
int dlb_test_abi_c99_size(void) {
  return (int)sizeof(DLManagedTensorVersioned);
}
