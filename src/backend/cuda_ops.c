/* cuda_ops.c -- the CUDA driver's table of operations. */
#include "cuda_loader.h"

const dlb__gpu dlb__cuda = {
    .name = "CUDA",
    .device_type = kDLCUDA,
    .host_type = kDLCUDAHost,
    .load = dlb__cuda_load,
    .ready = dlb__cuda_ready,
    .count = dlb__cuda_count,
    .version = dlb__cuda_version,
    .library = dlb__cuda_library,
    .active = dlb__cuda_active,
    .alloc = dlb__cuda_alloc,
    .free = dlb__cuda_free,
    .host_register = dlb__cuda_host_register,
    .host_unregister = dlb__cuda_host_unregister,
    .classify = dlb__cuda_classify,
    .copy = dlb__cuda_copy,
    .stream_sync = dlb__cuda_stream_sync,
    .stream_wait = dlb__cuda_stream_wait,
    .device_sync = dlb__cuda_device_sync,
    .info = dlb__cuda_info,
};
