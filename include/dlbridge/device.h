/*
 * dlbridge/device.h -- memory kinds: names, parsing, device_id rules and
 * which device can read which memory without a copy.
 *
 * Kind names: "cpu", "cuda", "cuda_host", "opencl", "vulkan", "metal",
 * "vpi", "rocm", "rocm_host", "ext_dev", "cuda_managed", "oneapi", "webgpu",
 * "hexagon", "maia", "trn".
 */
#ifndef DLBRIDGE_DEVICE_H
#define DLBRIDGE_DEVICE_H

#include "common.h"
#include "status.h"

DLB_BEGIN_DECLS

/* Longest text dlb_device_format() writes, with its terminating NUL. */
#define DLB_DEVICE_NAME_MAX 32

/* Returns the kind name of type (a static string), or NULL when type is not a
 * DLPack 1.3 device type. */
DLB_API const char *dlb_device_type_name(DLDeviceType type);

/* Parses a kind name into *out. DLB_E_DEVICE for an unknown name,
 * DLB_E_INVAL when name or out is NULL. */
DLB_API dlb_status dlb_device_type_parse(const char *name, DLDeviceType *out);

/* Returns 1 when type is a DLPack 1.3 device type, else 0. */
DLB_API int dlb_device_type_is_known(DLDeviceType type);

/* Returns 1 for host-type memory that is not tied to one device and so has
 * device_id 0 (cpu, cuda_host, rocm_host, cuda_managed), else 0. */
DLB_API int dlb_device_type_is_host_type(DLDeviceType type);

/* Returns 1 when code running on the CPU may read and write memory of this
 * type directly (cpu, cuda_host, rocm_host, cuda_managed), else 0. */
DLB_API int dlb_device_type_cpu_accessible(DLDeviceType type);

/*
 * Parses "kind" or "kind:N" into *out: "cpu", "cuda" (= "cuda:0"),
 * "cuda:1", "cuda_managed", "rocm_host:0". N is decimal, without sign or
 * leading zeros, at most INT32_MAX. Host-type kinds accept only id 0.
 * DLB_E_DEVICE for an unknown kind, a malformed or negative id, or a
 * non-zero id on a host-type kind; DLB_E_INVAL when text or out is NULL.
 */
DLB_API dlb_status dlb_device_parse(const char *text, DLDevice *out);

/* Writes the canonical name of device into buf (size bytes): "kind" for
 * host-type kinds (whatever their device_id), "kind:N" otherwise.
 * DLB_E_DEVICE for an unknown type or a negative device_id (buf untouched),
 * DLB_E_INVAL when buf is NULL or too small (then buf holds "" if
 * size > 0). dlb_device_parse reads the result back. */
DLB_API dlb_status dlb_device_format(DLDevice device, char *buf, size_t size);

/*
 * Checks device and puts it in canonical form: host-type kinds get
 * device_id 0 (some producers write the current GPU there). DLB_E_DEVICE for
 * an unknown type or a negative device_id (device left untouched),
 * DLB_E_INVAL when device is NULL.
 */
DLB_API dlb_status dlb_device_normalize(DLDevice *device);

/* Returns 1 when a and b name the same memory (after normalisation), else 0;
 * 0 when either fails dlb_device_normalize. Leaves dlb_last_error() alone. */
DLB_API int dlb_device_equal(DLDevice a, DLDevice b);

/*
 * The accessibility relation: returns 1 when a consumer computing on
 * `consumer` can read and write memory on `memory` without a copy, else 0.
 * A CPU consumer (cpu, or a host-type kind) reads cpu, cuda_host, rocm_host
 * and cuda_managed memory; a cuda:N consumer reads cuda:N, cuda_host and
 * cuda_managed; a rocm:N consumer reads rocm:N and rocm_host; any other
 * device reads only its own memory. Peer access between GPUs is not assumed.
 * 0 when either fails dlb_device_normalize. Leaves dlb_last_error() alone.
 */
DLB_API int dlb_device_can_access(DLDevice consumer, DLDevice memory);

DLB_END_DECLS

#endif /* DLBRIDGE_DEVICE_H */
