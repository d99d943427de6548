/* dtype.c: being written. */
#include "internal.h"
