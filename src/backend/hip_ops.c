/* hip_ops.c -- the HIP runtime's table of operations. */
#include "hip_loader.h"

const dlb__gpu dlb__hip = {
    .name = "HIP",
    .device_type = kDLROCM,
    .host_type = kDLROCMHost,
    .load = dlb__hip_load,
    .ready = dlb__hip_ready,
    .count = dlb__hip_count,
    .version = dlb__hip_version,
    .library = dlb__hip_library,
    .active = dlb__hip_active,
    .alloc = dlb__hip_alloc,
    .free = dlb__hip_free,
    .host_register = dlb__hip_host_register,
    .host_unregister = dlb__hip_host_unregister,
    .classify = dlb__hip_classify,
    .copy = dlb__hip_copy,
    .stream_sync = dlb__hip_stream_sync,
    .stream_wait = dlb__hip_stream_wait,
    .device_sync = dlb__hip_device_sync,
    .info = dlb__hip_info,
};
