/* host_maps.h -- what the process's mappings allow (host_maps.c). */
#ifndef DLB_BACKEND_HOST_MAPS_H
#define DLB_BACKEND_HOST_MAPS_H

#include <stddef.h>

/* 1 when every byte of [p, p + size) lies in a mapping this process may
 * write, 0 when one does not (or lies in no mapping), -1 when the process's
 * mappings cannot be read. */
int dlb__range_writable(const void *p, size_t size);

#endif /* DLB_BACKEND_HOST_MAPS_H */
