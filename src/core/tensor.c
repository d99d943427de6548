/* tensor.c: being written. */
#include "internal.h"
