/* layout.c: being written. */
#include "internal.h"
