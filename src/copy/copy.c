/* copy.c: being written. */
#include "internal.h"
