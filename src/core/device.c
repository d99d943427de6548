/* device.c: being written. */
#include "internal.h"
