/*
 * emu_cuda.c -- an emulated CUDA driver (libcuda.so.1) backed by host
 * memory, for testing without a GPU. It checks arguments the way the
 * driver documents them, keeps primary contexts and a per-thread context
 * stack (calls that need a context fail without one; frees and
 * unregistering find their memory by its unified address without one),
 * tracks every
 * allocation and registration, and runs stream work when it is waited for.
 * Built without EMU_PROC_ADDRESS it lacks cuGetProcAddress_v2, as drivers
 * before CUDA 12 do.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "emu_core.h"
#include "emu_cuda.h"

typedef dlb__cu_result cures;

/* Prototypes for everything exported (the house warnings want them). */
#define PROTO(name, base, version, params) EMU_EXPORT cures name params;
DLB__CU_REQUIRED(PROTO)
DLB__CU_OPTIONAL(PROTO)
DLB__CU_FALLBACK(PROTO)
EMU_CU_EXTRA(PROTO)
#undef PROTO
#define LEGACY_PROTO(name, version) EMU_EXPORT cures name(void);
EMU_CU_LEGACY(LEGACY_PROTO)
#undef LEGACY_PROTO
#ifdef EMU_PROC_ADDRESS
EMU_EXPORT cures cuGetProcAddress_v2(const char *symbol, void **pfn,
                                     int version, dlb__cu_uint64 flags,
                                     dlb__cu_enum *status);
#endif

#define ENTER(name)                              \
  do {                                           \
    int fail_ = emu_enter(name, 0);              \
    if (fail_ != 0) return (cures)fail_;         \
  } while (0)
#define ENTER_QUIET(name)                        \
  do {                                           \
    int fail_ = emu_enter(name, 1);              \
    if (fail_ != 0) return (cures)fail_;         \
  } while (0)
#define RETURN(r)          \
  do {                     \
    cures r_ = (r);        \
    emu_leave();           \
    return r_;             \
  } while (0)
#define NEED_INIT() \
  if (!inited) RETURN(DLB__CUDA_ERROR_NOT_INITIALIZED)

/* ---- contexts ---- */

typedef struct emu_ctx {
  int device;
  int retains;
} emu_ctx;

static int inited;
static emu_ctx ctxs[EMU_MAX_DEVICES];
static __thread emu_ctx *stack[32];
static __thread int depth;

static dlb__cu_context handle_of(emu_ctx *c) {
  return (dlb__cu_context)(void *)c;
}

static emu_ctx *ctx_of(dlb__cu_context h) {
  for (int d = 0; d < emu_cfg.devices; d++)
    if (handle_of(&ctxs[d]) == h) return &ctxs[d];
  return NULL;
}

static emu_ctx *current(void) {
  emu_ctx *c = depth > 0 ? stack[depth - 1] : NULL;
  return c != NULL && c->retains > 0 ? c : NULL;
}

int emu_context_depth(void) { return depth; }

/* ---- errors ---- */

static const struct {
  cures code;
  const char *name;
  const char *text;
} errors[] = {
    {0, "CUDA_SUCCESS", "no error"},
    {1, "CUDA_ERROR_INVALID_VALUE", "invalid argument"},
    {2, "CUDA_ERROR_OUT_OF_MEMORY", "out of memory"},
    {3, "CUDA_ERROR_NOT_INITIALIZED", "initialization error"},
    {34, "CUDA_ERROR_STUB_LIBRARY", "CUDA driver is a stub library"},
    {100, "CUDA_ERROR_NO_DEVICE", "no CUDA-capable device is detected"},
    {101, "CUDA_ERROR_INVALID_DEVICE", "invalid device ordinal"},
    {201, "CUDA_ERROR_INVALID_CONTEXT", "invalid device context"},
    {400, "CUDA_ERROR_INVALID_HANDLE", "invalid resource handle"},
    {500, "CUDA_ERROR_NOT_FOUND", "named symbol not found"},
    {600, "CUDA_ERROR_NOT_READY", "device not ready"},
    {700, "CUDA_ERROR_ILLEGAL_ADDRESS", "an illegal memory access was "
     "encountered"},
    {712, "CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED",
     "part or all of the requested memory range is already mapped"},
    {713, "CUDA_ERROR_HOST_MEMORY_NOT_REGISTERED",
     "pointer does not correspond to a registered memory region"},
    {801, "CUDA_ERROR_NOT_SUPPORTED", "operation not supported"},
    {803, "CUDA_ERROR_SYSTEM_DRIVER_MISMATCH",
     "system has unsupported display driver / cuda driver combination"},
    {999, "CUDA_ERROR_UNKNOWN", "unknown error"},
};

/* EMU_CUDA_ERROR_TEXT, when set, is every error's description: a driver
 * whose words the caller must not print raw. */
static cures error_text(cures e, const char **str, int name) {
  if (str == NULL) return DLB__CUDA_ERROR_INVALID_VALUE;
  const char *told = name ? NULL : getenv("EMU_CUDA_ERROR_TEXT");
  if (told != NULL) {
    *str = told;
    return DLB__CUDA_SUCCESS;
  }
  for (size_t i = 0; i < sizeof errors / sizeof errors[0]; i++)
    if (errors[i].code == e) {
      *str = name ? errors[i].name : errors[i].text;
      return DLB__CUDA_SUCCESS;
    }
  *str = NULL;
  return DLB__CUDA_ERROR_INVALID_VALUE;
}

cures cuGetErrorName(cures error, const char **str) {
  ENTER_QUIET("cuGetErrorName");
  RETURN(error_text(error, str, 1));
}

cures cuGetErrorString(cures error, const char **str) {
  ENTER_QUIET("cuGetErrorString");
  RETURN(error_text(error, str, 0));
}

/* ---- initialisation and devices ---- */

static void configure(void) { emu_configure("EMU_CUDA_", 13000); }

cures cuInit(unsigned int flags) {
  configure();
  ENTER("cuInit");
  if (flags != 0) RETURN(DLB__CUDA_ERROR_INVALID_VALUE);
  if (emu_cfg.devices == 0) RETURN(DLB__CUDA_ERROR_NO_DEVICE);
  for (int d = 0; d < emu_cfg.devices; d++) ctxs[d].device = d;
  inited = 1;
  RETURN(DLB__CUDA_SUCCESS);
}

cures cuDriverGetVersion(int *version) {
  configure();
  ENTER_QUIET("cuDriverGetVersion");
  if (version == NULL) RETURN(DLB__CUDA_ERROR_INVALID_VALUE);
  *version = emu_cfg.version;
  RETURN(DLB__CUDA_SUCCESS);
}

cures cuDeviceGetCount(int *count) {
  ENTER_QUIET("cuDeviceGetCount");
  NEED_INIT();
  if (count == NULL) RETURN(DLB__CUDA_ERROR_INVALID_VALUE);
  *count = emu_cfg.reported >= 0 ? emu_cfg.reported : emu_cfg.devices;
  RETURN(DLB__CUDA_SUCCESS);
}

cures cuDeviceGet(dlb__cu_device *device, int ordinal) {
  ENTER("cuDeviceGet");
  NEED_INIT();
  if (device == NULL) RETURN(DLB__CUDA_ERROR_INVALID_VALUE);
  if (ordinal < 0 || ordinal >= emu_cfg.devices)
    RETURN(DLB__CUDA_ERROR_INVALID_DEVICE);
  *device = ordinal;
  RETURN(DLB__CUDA_SUCCESS);
}

cures cuDeviceGetName(char *name, int len, dlb__cu_device device) {
  ENTER_QUIET("cuDeviceGetName");
  NEED_INIT();
  if (name == NULL || len <= 0) RETURN(DLB__CUDA_ERROR_INVALID_VALUE);
  if (device < 0 || device >= emu_cfg.devices)
    RETURN(DLB__CUDA_ERROR_INVALID_DEVICE);
  if (emu_cfg.name[0] != '\0')
    snprintf(name, (size_t)len, "%s", emu_cfg.name);
  else
    snprintf(name, (size_t)len, "Emulated CUDA GPU %d", device);
  RETURN(DLB__CUDA_SUCCESS);
}

cures cuDeviceTotalMem_v2(size_t *bytes, dlb__cu_device device) {
  ENTER_QUIET("cuDeviceTotalMem_v2");
  NEED_INIT();
  if (bytes == NULL) RETURN(DLB__CUDA_ERROR_INVALID_VALUE);
  if (device < 0 || device >= emu_cfg.devices)
    RETURN(DLB__CUDA_ERROR_INVALID_DEVICE);
  *bytes = emu_cfg.device_memory;
  RETURN(DLB__CUDA_SUCCESS);
}

cures cuDeviceGetAttribute(int *value, dlb__cu_enum attrib,
                           dlb__cu_device device) {
  ENTER("cuDeviceGetAttribute");
  NEED_INIT();
  if (value == NULL) RETURN(DLB__CUDA_ERROR_INVALID_VALUE);
  if (device < 0 || device >= emu_cfg.devices)
    RETURN(DLB__CUDA_ERROR_INVALID_DEVICE);
  switch (attrib) {
    case DLB__CU_DEVICE_ATTRIBUTE_MAX_PITCH:
      *value = emu_cfg.max_pitch;
      break;
    case DLB__CU_DEVICE_ATTRIBUTE_CONCURRENT_MANAGED_ACCESS:
      *value = emu_cfg.concurrent_managed;
      break;
    case 19: /* CAN_MAP_HOST_MEMORY */
    case DLB__CU_DEVICE_ATTRIBUTE_MANAGED_MEMORY:
      *value = emu_cfg.managed_memory;
      break;
    case DLB__CU_DEVICE_ATTRIBUTE_UNIFIED_ADDRESSING:
    case 91: /* CAN_USE_HOST_POINTER_FOR_REGISTERED_MEM */
    case 99: /* HOST_REGISTER_SUPPORTED */
      *value = 1;
      break;
    case 88: /* PAGEABLE_MEMORY_ACCESS */
      *value = 0;
      break;
    case 113: /* READ_ONLY_HOST_REGISTER_SUPPORTED */
      *value = emu_cfg.read_only_register;
      break;
    default:
      RETURN(DLB__CUDA_ERROR_INVALID_VALUE);
  }
  RETURN(DLB__CUDA_SUCCESS);
}

cures cuDevicePrimaryCtxRetain(dlb__cu_context *ctx, dlb__cu_device device) {
  ENTER("cuDevicePrimaryCtxRetain");
  NEED_INIT();
  if (ctx == NULL) RETURN(DLB__CUDA_ERROR_INVALID_VALUE);
  if (device < 0 || device >= emu_cfg.devices)
    RETURN(DLB__CUDA_ERROR_INVALID_DEVICE);
  ctxs[device].retains++;
  *ctx = handle_of(&ctxs[device]);
  RETURN(DLB__CUDA_SUCCESS);
}

cures cuDevicePrimaryCtxRelease_v2(dlb__cu_device device) {
  ENTER_QUIET("cuDevicePrimaryCtxRelease_v2");
  NEED_INIT();
  if (device < 0 || device >= emu_cfg.devices)
    RETURN(DLB__CUDA_ERROR_INVALID_DEVICE);
  if (ctxs[device].retains == 0) RETURN(DLB__CUDA_ERROR_INVALID_CONTEXT);
  ctxs[device].retains--;
  RETURN(DLB__CUDA_SUCCESS);
}

cures cuDevicePrimaryCtxGetState(dlb__cu_device device, unsigned int *flags,
                                 int *active) {
  ENTER_QUIET("cuDevicePrimaryCtxGetState");
  NEED_INIT();
  if (flags == NULL || active == NULL) RETURN(DLB__CUDA_ERROR_INVALID_VALUE);
  if (device < 0 || device >= emu_cfg.devices)
    RETURN(DLB__CUDA_ERROR_INVALID_DEVICE);
  *flags = 0;
  *active = ctxs[device].retains > 0;
  RETURN(DLB__CUDA_SUCCESS);
}

cures cuCtxGetCurrent(dlb__cu_context *ctx) {
  ENTER_QUIET("cuCtxGetCurrent");
  NEED_INIT();
  if (ctx == NULL) RETURN(DLB__CUDA_ERROR_INVALID_VALUE);
  *ctx = depth > 0 ? handle_of(stack[depth - 1]) : NULL;
  RETURN(DLB__CUDA_SUCCESS);
}

cures cuCtxSetCurrent(dlb__cu_context ctx) {
  ENTER("cuCtxSetCurrent");
  NEED_INIT();
  if (ctx == NULL) {
    if (depth > 0) depth--;
    RETURN(DLB__CUDA_SUCCESS);
  }
  emu_ctx *c = ctx_of(ctx);
  if (c == NULL || c->retains == 0) RETURN(DLB__CUDA_ERROR_INVALID_CONTEXT);
  if (depth == 0) depth = 1;
  stack[depth - 1] = c;
  RETURN(DLB__CUDA_SUCCESS);
}

cures cuCtxPushCurrent_v2(dlb__cu_context ctx) {
  ENTER("cuCtxPushCurrent_v2");
  NEED_INIT();
  emu_ctx *c = ctx_of(ctx);
  if (c == NULL || c->retains == 0) RETURN(DLB__CUDA_ERROR_INVALID_CONTEXT);
  if (depth == (int)(sizeof stack / sizeof stack[0]))
    RETURN(DLB__CUDA_ERROR_OUT_OF_MEMORY);
  stack[depth++] = c;
  RETURN(DLB__CUDA_SUCCESS);
}

cures cuCtxPopCurrent_v2(dlb__cu_context *ctx) {
  ENTER_QUIET("cuCtxPopCurrent_v2");
  NEED_INIT();
  if (depth == 0) RETURN(DLB__CUDA_ERROR_INVALID_CONTEXT);
  depth--;
  if (ctx != NULL) *ctx = handle_of(stack[depth]);
  RETURN(DLB__CUDA_SUCCESS);
}

cures cuCtxGetDevice(dlb__cu_device *device) {
  ENTER_QUIET("cuCtxGetDevice");
  NEED_INIT();
  emu_ctx *c = current();
  if (c == NULL) RETURN(DLB__CUDA_ERROR_INVALID_CONTEXT);
  if (device == NULL) RETURN(DLB__CUDA_ERROR_INVALID_VALUE);
  *device = c->device;
  RETURN(DLB__CUDA_SUCCESS);
}

cures cuCtxSynchronize(void) {
  ENTER("cuCtxSynchronize");
  NEED_INIT();
  if (current() == NULL) RETURN(DLB__CUDA_ERROR_INVALID_CONTEXT);
  emu_run_all();
  RETURN(DLB__CUDA_SUCCESS);
}

cures cuCtxSynchronize_v2(dlb__cu_context ctx) {
  ENTER("cuCtxSynchronize_v2");
  NEED_INIT();
  emu_ctx *c = ctx_of(ctx);
  if (c == NULL || c->retains == 0) RETURN(DLB__CUDA_ERROR_INVALID_CONTEXT);
  emu_run_all();
  RETURN(DLB__CUDA_SUCCESS);
}

/* ---- memory ---- */

#define NEED_CONTEXT(c)                                  \
  emu_ctx *c = current();                                \
  if (c == NULL) RETURN(DLB__CUDA_ERROR_INVALID_CONTEXT)

static dlb__cu_deviceptr dptr_of(const void *p) {
  return (dlb__cu_deviceptr)(uintptr_t)p;
}
static void *ptr_of(dlb__cu_deviceptr d) { return (void *)(uintptr_t)d; }

cures cuMemAlloc_v2(dlb__cu_deviceptr *dptr, size_t bytesize) {
  ENTER("cuMemAlloc_v2");
  NEED_INIT();
  NEED_CONTEXT(c);
  if (dptr == NULL || bytesize == 0) RETURN(DLB__CUDA_ERROR_INVALID_VALUE);
  emu_region *r = emu_region_new(EMU_DEVICE, bytesize, c->device, 0);
  if (r == NULL) RETURN(DLB__CUDA_ERROR_OUT_OF_MEMORY);
  *dptr = dptr_of(r->base);
  RETURN(DLB__CUDA_SUCCESS);
}

cures cuMemAllocManaged(dlb__cu_deviceptr *dptr, size_t bytesize,
                        unsigned int flags) {
  ENTER("cuMemAllocManaged");
  NEED_INIT();
  NEED_CONTEXT(c);
  if (dptr == NULL || bytesize == 0 || (flags != 1 && flags != 2))
    RETURN(DLB__CUDA_ERROR_INVALID_VALUE);
  if (!emu_cfg.managed_memory) RETURN(DLB__CUDA_ERROR_NOT_SUPPORTED);
  emu_region *r = emu_region_new(EMU_MANAGED, bytesize, c->device, flags);
  if (r == NULL) RETURN(DLB__CUDA_ERROR_OUT_OF_MEMORY);
  *dptr = dptr_of(r->base);
  RETURN(DLB__CUDA_SUCCESS);
}

cures cuMemFree_v2(dlb__cu_deviceptr dptr) {
  ENTER_QUIET("cuMemFree_v2");
  NEED_INIT();
  emu_region *r = emu_region_at(ptr_of(dptr),
                                (1u << EMU_DEVICE) | (1u << EMU_MANAGED));
  /* Memory opened by IPC is closed, never freed. */
  if (r == NULL || r->ipc_pid != 0) RETURN(DLB__CUDA_ERROR_INVALID_VALUE);
  /* Freeing waits for the device, as the driver does. */
  emu_run_all();
  emu_region_free(r);
  RETURN(DLB__CUDA_SUCCESS);
}

static cures host_alloc(void **pp, size_t bytesize, unsigned flags) {
  NEED_CONTEXT(c);
  if (pp == NULL || bytesize == 0 || (flags & ~7u) != 0)
    RETURN(DLB__CUDA_ERROR_INVALID_VALUE);
  emu_region *r = emu_region_new(EMU_HOST, bytesize, c->device, flags);
  if (r == NULL) RETURN(DLB__CUDA_ERROR_OUT_OF_MEMORY);
  *pp = r->base;
  RETURN(DLB__CUDA_SUCCESS);
}

cures cuMemHostAlloc(void **pp, size_t bytesize, unsigned int flags) {
  ENTER("cuMemHostAlloc");
  NEED_INIT();
  return host_alloc(pp, bytesize, flags);
}

cures cuMemAllocHost_v2(void **pp, size_t bytesize) {
  ENTER("cuMemAllocHost_v2");
  NEED_INIT();
  return host_alloc(pp, bytesize, 0);
}

cures cuMemFreeHost(void *p) {
  ENTER_QUIET("cuMemFreeHost");
  NEED_INIT();
  emu_region *r = emu_region_at(p, 1u << EMU_HOST);
  if (r == NULL) RETURN(DLB__CUDA_ERROR_INVALID_VALUE);
  emu_run_all();
  emu_region_free(r);
  RETURN(DLB__CUDA_SUCCESS);
}

cures cuMemHostRegister_v2(void *p, size_t bytesize, unsigned int flags) {
  ENTER("cuMemHostRegister_v2");
  NEED_INIT();
  NEED_CONTEXT(c);
  (void)c;
  if (p == NULL || bytesize == 0 || (flags & ~0xFu) != 0)
    RETURN(DLB__CUDA_ERROR_INVALID_VALUE);
  if (emu_region_overlaps(p, bytesize,
                          (1u << EMU_HOST) | (1u << EMU_REGISTERED)))
    RETURN(DLB__CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED);
  if (emu_region_overlaps(p, bytesize,
                          (1u << EMU_DEVICE) | (1u << EMU_MANAGED)) ||
      !emu_range_mapped(p, bytesize))
    RETURN(DLB__CUDA_ERROR_INVALID_VALUE);
  /* Memory mapped read-only takes the READ_ONLY flag (0x8), which only a
   * device supporting it accepts. */
  if ((flags & 0x8u) && !emu_cfg.read_only_register)
    RETURN(DLB__CUDA_ERROR_NOT_SUPPORTED);
  if (!(flags & 0x8u) && !emu_range_writable(p, bytesize))
    RETURN(DLB__CUDA_ERROR_INVALID_VALUE);
  if (emu_region_register(p, bytesize, flags) == NULL)
    RETURN(DLB__CUDA_ERROR_OUT_OF_MEMORY);
  RETURN(DLB__CUDA_SUCCESS);
}

cures cuMemHostUnregister(void *p) {
  ENTER_QUIET("cuMemHostUnregister");
  NEED_INIT();
  emu_region *r = emu_region_at(p, 1u << EMU_REGISTERED);
  if (r == NULL) RETURN(DLB__CUDA_ERROR_HOST_MEMORY_NOT_REGISTERED);
  emu_run_all();
  emu_region_free(r);
  RETURN(DLB__CUDA_SUCCESS);
}

cures cuMemHostGetDevicePointer_v2(dlb__cu_deviceptr *dptr, void *p,
                                   unsigned int flags) {
  ENTER("cuMemHostGetDevicePointer_v2");
  NEED_INIT();
  NEED_CONTEXT(c);
  (void)c;
  emu_region *r = emu_region_find(p);
  if (dptr == NULL || flags != 0 || r == NULL ||
      (r->kind != EMU_HOST && r->kind != EMU_REGISTERED))
    RETURN(DLB__CUDA_ERROR_INVALID_VALUE);
  *dptr = dptr_of(p);
  RETURN(DLB__CUDA_SUCCESS);
}

cures cuMemHostGetFlags(unsigned int *flags, void *p) {
  ENTER_QUIET("cuMemHostGetFlags");
  NEED_INIT();
  emu_region *r = emu_region_find(p);
  if (flags == NULL || r == NULL || r->kind != EMU_HOST)
    RETURN(DLB__CUDA_ERROR_INVALID_VALUE);
  *flags = r->flags;
  RETURN(DLB__CUDA_SUCCESS);
}

cures cuMemGetAddressRange_v2(dlb__cu_deviceptr *base, size_t *size,
                              dlb__cu_deviceptr ptr) {
  ENTER_QUIET("cuMemGetAddressRange_v2");
  NEED_INIT();
  emu_region *r = emu_region_find(ptr_of(ptr));
  if (r == NULL || (r->kind != EMU_DEVICE && r->kind != EMU_MANAGED))
    RETURN(DLB__CUDA_ERROR_NOT_FOUND);
  if (base != NULL) *base = dptr_of(r->base);
  if (size != NULL) *size = r->size;
  RETURN(DLB__CUDA_SUCCESS);
}

/* ---- pointer attributes ---- */

static cures attribute(dlb__cu_enum a, void *data, dlb__cu_deviceptr ptr,
                       int strict) {
  emu_region *r = emu_region_find(ptr_of(ptr));
  if (data == NULL) return DLB__CUDA_ERROR_INVALID_VALUE;
  if (r == NULL && strict) return DLB__CUDA_ERROR_INVALID_VALUE;
  int device = r != NULL && (r->kind == EMU_DEVICE || r->kind == EMU_MANAGED);
  switch (a) {
    case DLB__CU_POINTER_ATTRIBUTE_MEMORY_TYPE:
      /* Managed memory reports itself as device memory. */
      *(unsigned *)data = r == NULL ? 0u
                          : device  ? DLB__CU_MEMORYTYPE_DEVICE
                                    : DLB__CU_MEMORYTYPE_HOST;
      break;
    case DLB__CU_POINTER_ATTRIBUTE_DEVICE_POINTER:
      *(dlb__cu_deviceptr *)data = r != NULL ? ptr : 0;
      break;
    case 4: /* HOST_POINTER */
      *(void **)data = r != NULL && r->kind != EMU_DEVICE ? ptr_of(ptr) : NULL;
      break;
    case DLB__CU_POINTER_ATTRIBUTE_IS_MANAGED:
      *(unsigned *)data = r != NULL && r->kind == EMU_MANAGED;
      break;
    case DLB__CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL:
      *(int *)data = r != NULL ? r->device : -2;
      break;
    case DLB__CU_POINTER_ATTRIBUTE_RANGE_START_ADDR:
      *(dlb__cu_deviceptr *)data = r != NULL ? dptr_of(r->base) : 0;
      break;
    case DLB__CU_POINTER_ATTRIBUTE_RANGE_SIZE:
      *(size_t *)data = r != NULL ? r->size : 0;
      break;
    default:
      return DLB__CUDA_ERROR_INVALID_VALUE;
  }
  return DLB__CUDA_SUCCESS;
}

cures cuPointerGetAttributes(unsigned int count, dlb__cu_enum *attributes,
                             void **data, dlb__cu_deviceptr ptr) {
  ENTER("cuPointerGetAttributes");
  NEED_INIT();
  NEED_CONTEXT(c);
  (void)c;
  if (attributes == NULL || data == NULL) RETURN(DLB__CUDA_ERROR_INVALID_VALUE);
  for (unsigned i = 0; i < count; i++) {
    cures r = attribute(attributes[i], data[i], ptr, 0);
    if (r != DLB__CUDA_SUCCESS) RETURN(r);
  }
  RETURN(DLB__CUDA_SUCCESS);
}

cures cuPointerGetAttribute(void *data, dlb__cu_enum attr,
                            dlb__cu_deviceptr ptr) {
  ENTER("cuPointerGetAttribute");
  NEED_INIT();
  NEED_CONTEXT(c);
  (void)c;
  RETURN(attribute(attr, data, ptr, 1));
}

/* ---- copies ---- */

static int stream_ok(dlb__cu_stream s) {
  emu_stream *es = NULL;
  return emu_stream_lookup((void *)s, &es);
}

static cures copy_1d(dlb__cu_deviceptr dst, dlb__cu_deviceptr src,
                     size_t bytes, dlb__cu_stream stream) {
  NEED_CONTEXT(c);
  (void)c;
  if (!stream_ok(stream)) RETURN(DLB__CUDA_ERROR_INVALID_HANDLE);
  if (bytes == 0) RETURN(DLB__CUDA_SUCCESS);
  char *d = emu_resolve(ptr_of(dst), bytes, 0, 0);
  const char *s = emu_resolve(ptr_of(src), bytes, 0, 0);
  if (d == NULL || s == NULL) RETURN(DLB__CUDA_ERROR_INVALID_VALUE);
  emu_copy cp = {d, s, bytes, 1, 1, 0, 0, 0, 0};
  emu_submit((void *)stream, &cp);
  RETURN(DLB__CUDA_SUCCESS);
}

cures cuMemcpy(dlb__cu_deviceptr dst, dlb__cu_deviceptr src, size_t bytes) {
  ENTER("cuMemcpy");
  NEED_INIT();
  return copy_1d(dst, src, bytes, NULL);
}

cures cuMemcpyAsync(dlb__cu_deviceptr dst, dlb__cu_deviceptr src,
                    size_t bytes, dlb__cu_stream stream) {
  ENTER("cuMemcpyAsync");
  NEED_INIT();
  return copy_1d(dst, src, bytes, stream);
}

/* The start of one side of a 2-D or 3-D copy, checked against its memory
 * type, or NULL. */
static char *side_start(dlb__cu_enum type, const void *host,
                        dlb__cu_deviceptr device, size_t offset,
                        size_t extent) {
  const char *base;
  int must_device = 0, must_host = 0;
  switch (type) {
    case DLB__CU_MEMORYTYPE_HOST:
      base = host;
      must_host = 1;
      break;
    case DLB__CU_MEMORYTYPE_DEVICE:
      base = ptr_of(device);
      must_device = 1;
      break;
    case DLB__CU_MEMORYTYPE_UNIFIED:
      base = ptr_of(device);
      break;
    default:
      return NULL;
  }
  if (base == NULL) return NULL;
  return emu_resolve(base + offset, extent, must_device, must_host);
}

static int is_device_memory(dlb__cu_enum type, dlb__cu_deviceptr d) {
  if (type != DLB__CU_MEMORYTYPE_DEVICE) return 0;
  emu_region *r = emu_region_find(ptr_of(d));
  return r != NULL && r->kind == EMU_DEVICE;
}

static cures copy_2d(const dlb__cu_memcpy2d *m, dlb__cu_stream stream,
                     int aligned) {
  NEED_CONTEXT(c);
  (void)c;
  if (m == NULL) RETURN(DLB__CUDA_ERROR_INVALID_VALUE);
  if (!stream_ok(stream)) RETURN(DLB__CUDA_ERROR_INVALID_HANDLE);
  if (m->srcMemoryType == DLB__CU_MEMORYTYPE_ARRAY ||
      m->dstMemoryType == DLB__CU_MEMORYTYPE_ARRAY)
    RETURN(DLB__CUDA_ERROR_NOT_SUPPORTED);
  if (m->WidthInBytes == 0 || m->Height == 0) RETURN(DLB__CUDA_SUCCESS);
  size_t limit = (size_t)emu_cfg.max_pitch;
  if (m->Height > 1 &&
      (m->srcPitch < m->WidthInBytes + m->srcXInBytes ||
       m->dstPitch < m->WidthInBytes + m->dstXInBytes ||
       m->srcPitch > limit || m->dstPitch > limit))
    RETURN(DLB__CUDA_ERROR_INVALID_VALUE);
  if (aligned && is_device_memory(m->srcMemoryType, m->srcDevice) &&
      is_device_memory(m->dstMemoryType, m->dstDevice) &&
      (m->srcPitch % emu_cfg.d2d_pitch_align != 0 ||
       m->dstPitch % emu_cfg.d2d_pitch_align != 0))
    RETURN(DLB__CUDA_ERROR_INVALID_VALUE);
  size_t extent_s = (m->Height - 1) * m->srcPitch + m->WidthInBytes;
  size_t extent_d = (m->Height - 1) * m->dstPitch + m->WidthInBytes;
  const char *s = side_start(m->srcMemoryType, m->srcHost, m->srcDevice,
                             m->srcY * m->srcPitch + m->srcXInBytes,
                             extent_s);
  char *d = side_start(m->dstMemoryType, m->dstHost, m->dstDevice,
                       m->dstY * m->dstPitch + m->dstXInBytes, extent_d);
  if (s == NULL || d == NULL) RETURN(DLB__CUDA_ERROR_INVALID_VALUE);
  emu_copy cp = {d, s, m->WidthInBytes, m->Height, 1, m->dstPitch,
                 m->srcPitch, 0, 0};
  emu_submit((void *)stream, &cp);
  RETURN(DLB__CUDA_SUCCESS);
}

cures cuMemcpy2D_v2(const dlb__cu_memcpy2d *copy) {
  ENTER("cuMemcpy2D_v2");
  NEED_INIT();
  return copy_2d(copy, NULL, 1);
}

cures cuMemcpy2DAsync_v2(const dlb__cu_memcpy2d *copy, dlb__cu_stream stream) {
  ENTER("cuMemcpy2DAsync_v2");
  NEED_INIT();
  return copy_2d(copy, stream, 1);
}

cures cuMemcpy2DUnaligned_v2(const dlb__cu_memcpy2d *copy) {
  ENTER("cuMemcpy2DUnaligned_v2");
  NEED_INIT();
  return copy_2d(copy, NULL, 0);
}

static cures copy_3d(const dlb__cu_memcpy3d *m, dlb__cu_stream stream) {
  NEED_CONTEXT(c);
  (void)c;
  if (m == NULL || m->reserved0 != NULL || m->reserved1 != NULL ||
      m->srcLOD != 0 || m->dstLOD != 0)
    RETURN(DLB__CUDA_ERROR_INVALID_VALUE);
  if (!stream_ok(stream)) RETURN(DLB__CUDA_ERROR_INVALID_HANDLE);
  if (m->srcMemoryType == DLB__CU_MEMORYTYPE_ARRAY ||
      m->dstMemoryType == DLB__CU_MEMORYTYPE_ARRAY)
    RETURN(DLB__CUDA_ERROR_NOT_SUPPORTED);
  if (m->WidthInBytes == 0 || m->Height == 0 || m->Depth == 0)
    RETURN(DLB__CUDA_SUCCESS);
  size_t limit = (size_t)emu_cfg.max_pitch;
  if (m->srcPitch < m->WidthInBytes + m->srcXInBytes ||
      m->dstPitch < m->WidthInBytes + m->dstXInBytes ||
      m->srcPitch > limit || m->dstPitch > limit ||
      (m->Depth > 1 && (m->srcHeight < m->Height + m->srcY ||
                        m->dstHeight < m->Height + m->dstY)))
    RETURN(DLB__CUDA_ERROR_INVALID_VALUE);
  size_t splane = m->srcPitch * m->srcHeight;
  size_t dplane = m->dstPitch * m->dstHeight;
  size_t extent_s = (m->Depth - 1) * splane + (m->Height - 1) * m->srcPitch +
                    m->WidthInBytes;
  size_t extent_d = (m->Depth - 1) * dplane + (m->Height - 1) * m->dstPitch +
                    m->WidthInBytes;
  const char *s = side_start(
      m->srcMemoryType, m->srcHost, m->srcDevice,
      m->srcZ * splane + m->srcY * m->srcPitch + m->srcXInBytes, extent_s);
  char *d = side_start(
      m->dstMemoryType, m->dstHost, m->dstDevice,
      m->dstZ * dplane + m->dstY * m->dstPitch + m->dstXInBytes, extent_d);
  if (s == NULL || d == NULL) RETURN(DLB__CUDA_ERROR_INVALID_VALUE);
  emu_copy cp = {d, s, m->WidthInBytes, m->Height, m->Depth, m->dstPitch,
                 m->srcPitch, m->dstHeight, m->srcHeight};
  emu_submit((void *)stream, &cp);
  RETURN(DLB__CUDA_SUCCESS);
}

cures cuMemcpy3D_v2(const dlb__cu_memcpy3d *copy) {
  ENTER("cuMemcpy3D_v2");
  NEED_INIT();
  return copy_3d(copy, NULL);
}

cures cuMemcpy3DAsync_v2(const dlb__cu_memcpy3d *copy, dlb__cu_stream stream) {
  ENTER("cuMemcpy3DAsync_v2");
  NEED_INIT();
  return copy_3d(copy, stream);
}

/* ---- streams and events ---- */

typedef struct emu_event {
  struct emu_event *next;
  int device;
  int destroyed;
  emu_stream *stream;
  long seq;
  /* Interprocess events: a memfd page counting the records, shared by
   * the exporting and every importing process. A record completes the
   * work before it, so an importer's wait is always satisfied. */
  int ipc_fd;
  long *ipc_records;
  int imported;
} emu_event;

static emu_event *events;

static emu_event *event_of(dlb__cu_event e) {
  for (emu_event *v = events; v != NULL; v = v->next)
    if ((void *)v == (void *)e && !v->destroyed) return v;
  return NULL;
}

cures cuStreamCreate(dlb__cu_stream *stream, unsigned int flags) {
  ENTER("cuStreamCreate");
  NEED_INIT();
  NEED_CONTEXT(c);
  if (stream == NULL || (flags & ~1u) != 0)
    RETURN(DLB__CUDA_ERROR_INVALID_VALUE);
  emu_stream *s = emu_stream_new(flags, c->device);
  if (s == NULL) RETURN(DLB__CUDA_ERROR_OUT_OF_MEMORY);
  *stream = (dlb__cu_stream)(void *)s;
  RETURN(DLB__CUDA_SUCCESS);
}

cures cuStreamDestroy_v2(dlb__cu_stream stream) {
  ENTER_QUIET("cuStreamDestroy_v2");
  NEED_INIT();
  emu_stream *s = NULL;
  if (!emu_stream_lookup((void *)stream, &s) || s == NULL)
    RETURN(DLB__CUDA_ERROR_INVALID_HANDLE);
  emu_stream_destroy(s);
  RETURN(DLB__CUDA_SUCCESS);
}

cures cuStreamSynchronize(dlb__cu_stream stream) {
  ENTER("cuStreamSynchronize");
  NEED_INIT();
  NEED_CONTEXT(c);
  (void)c;
  emu_stream *s = NULL;
  if (!emu_stream_lookup((void *)stream, &s))
    RETURN(DLB__CUDA_ERROR_INVALID_HANDLE);
  if (s != NULL) emu_run(s, -1);
  RETURN(DLB__CUDA_SUCCESS);
}

cures cuStreamQuery(dlb__cu_stream stream) {
  ENTER_QUIET("cuStreamQuery");
  NEED_INIT();
  emu_stream *s = NULL;
  if (!emu_stream_lookup((void *)stream, &s))
    RETURN(DLB__CUDA_ERROR_INVALID_HANDLE);
  emu_stream *mark = NULL;
  long seq = 0;
  emu_mark((void *)stream, &mark, &seq);
  RETURN(emu_done(mark, seq) ? DLB__CUDA_SUCCESS : DLB__CUDA_ERROR_NOT_READY);
}

cures cuEventCreate(dlb__cu_event *event, unsigned int flags) {
  ENTER("cuEventCreate");
  NEED_INIT();
  NEED_CONTEXT(c);
  if (event == NULL || (flags & ~7u) != 0)
    RETURN(DLB__CUDA_ERROR_INVALID_VALUE);
  /* The driver requires interprocess events to disable timing. */
  if ((flags & DLB__CU_EVENT_INTERPROCESS) &&
      !(flags & DLB__CU_EVENT_DISABLE_TIMING))
    RETURN(DLB__CUDA_ERROR_INVALID_VALUE);
  emu_event *v = calloc(1, sizeof *v);
  if (v == NULL) RETURN(DLB__CUDA_ERROR_OUT_OF_MEMORY);
  v->ipc_fd = -1;
  if (flags & DLB__CU_EVENT_INTERPROCESS) {
    int fd = memfd_create("emu-event", MFD_CLOEXEC);
    void *page = MAP_FAILED;
    if (fd >= 0 && ftruncate(fd, 4096) == 0)
      page = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    if (page == MAP_FAILED) {
      if (fd >= 0) close(fd);
      free(v);
      RETURN(DLB__CUDA_ERROR_OUT_OF_MEMORY);
    }
    v->ipc_fd = fd;
    v->ipc_records = page;
  }
  v->device = c->device;
  v->next = events;
  events = v;
  emu_events_live_add(1);
  *event = (dlb__cu_event)(void *)v;
  RETURN(DLB__CUDA_SUCCESS);
}

cures cuEventRecord(dlb__cu_event event, dlb__cu_stream stream) {
  ENTER("cuEventRecord");
  NEED_INIT();
  emu_event *v = event_of(event);
  emu_stream *s = NULL;
  if (v == NULL || !emu_stream_lookup((void *)stream, &s))
    RETURN(DLB__CUDA_ERROR_INVALID_HANDLE);
  /* The event and the stream must belong to the same context. */
  emu_ctx *c = current();
  int stream_device = s != NULL ? emu_stream_device(s)
                      : c != NULL ? c->device
                                  : -1;
  if (stream_device != v->device || v->imported)
    RETURN(DLB__CUDA_ERROR_INVALID_HANDLE);
  emu_mark((void *)stream, &v->stream, &v->seq);
  if (v->ipc_records != NULL) {
    /* Another process cannot run this one's queues: the work the record
     * covers completes now (on a special stream, every blocking
     * stream's pending work, which the legacy stream waits for). */
    if (s != NULL)
      emu_run(s, v->seq);
    else
      emu_run_all();
    __atomic_add_fetch(v->ipc_records, 1, __ATOMIC_SEQ_CST);
  }
  RETURN(DLB__CUDA_SUCCESS);
}

cures cuStreamWaitEvent(dlb__cu_stream stream, dlb__cu_event event,
                        unsigned int flags) {
  ENTER("cuStreamWaitEvent");
  NEED_INIT();
  NEED_CONTEXT(c);
  (void)c;
  emu_event *v = event_of(event);
  emu_stream *s = NULL;
  if (v == NULL || !emu_stream_lookup((void *)stream, &s))
    RETURN(DLB__CUDA_ERROR_INVALID_HANDLE);
  if (flags != 0) RETURN(DLB__CUDA_ERROR_INVALID_VALUE);
  emu_wait((void *)stream, v->stream, v->seq);
  RETURN(DLB__CUDA_SUCCESS);
}

cures cuEventQuery(dlb__cu_event event) {
  ENTER_QUIET("cuEventQuery");
  NEED_INIT();
  emu_event *v = event_of(event);
  if (v == NULL) RETURN(DLB__CUDA_ERROR_INVALID_HANDLE);
  RETURN(emu_done(v->stream, v->seq) ? DLB__CUDA_SUCCESS
                                     : DLB__CUDA_ERROR_NOT_READY);
}

cures cuEventSynchronize(dlb__cu_event event) {
  ENTER("cuEventSynchronize");
  NEED_INIT();
  emu_event *v = event_of(event);
  if (v == NULL) RETURN(DLB__CUDA_ERROR_INVALID_HANDLE);
  if (v->stream != NULL) emu_run(v->stream, v->seq);
  RETURN(DLB__CUDA_SUCCESS);
}

cures cuEventDestroy_v2(dlb__cu_event event) {
  ENTER_QUIET("cuEventDestroy_v2");
  NEED_INIT();
  emu_event *v = event_of(event);
  if (v == NULL) RETURN(DLB__CUDA_ERROR_INVALID_HANDLE);
  /* Waits already queued keep their own copy of the event's point. */
  v->destroyed = 1;
  if (v->ipc_records != NULL) {
    munmap(v->ipc_records, 4096);
    close(v->ipc_fd);
    v->ipc_records = NULL;
  }
  emu_events_live_add(-1);
  RETURN(DLB__CUDA_SUCCESS);
}

/* ---- IPC (handles: see emu_ipc in emu_core.h) ---- */

static cures open_remote(const emu_ipc *h, const char *magic, int *out) {
  switch (emu_ipc_open(h, magic, out)) {
    case EMU_IPC_OK:
      return DLB__CUDA_SUCCESS;
    case EMU_IPC_FOREIGN:
      return DLB__CUDA_ERROR_INVALID_VALUE;
    case EMU_IPC_SAME_PROCESS:
      /* The driver cannot open a handle in the process that made it. */
      return DLB__CUDA_ERROR_INVALID_CONTEXT;
    default:
      return DLB__CUDA_ERROR_INVALID_HANDLE;
  }
}

cures cuIpcGetMemHandle(dlb__cu_ipc_mem_handle *handle,
                        dlb__cu_deviceptr dptr) {
  ENTER("cuIpcGetMemHandle");
  NEED_INIT();
  NEED_CONTEXT(c);
  (void)c;
  emu_region *r = emu_region_at(ptr_of(dptr), 1u << EMU_DEVICE);
  /* Only the base of a cuMemAlloc allocation made here. */
  if (handle == NULL || r == NULL || r->ipc_pid != 0)
    RETURN(DLB__CUDA_ERROR_INVALID_VALUE);
  emu_ipc h;
  emu_ipc_make(&h, "EMUIPC1", r->fd);
  h.size = r->size;
  h.device = r->device;
  h.base = (uint64_t)dptr;
  memset(handle, 0, sizeof *handle);
  memcpy(handle, &h, sizeof h);
  RETURN(DLB__CUDA_SUCCESS);
}

cures cuIpcOpenMemHandle_v2(dlb__cu_deviceptr *dptr,
                            dlb__cu_ipc_mem_handle handle,
                            unsigned int flags) {
  ENTER("cuIpcOpenMemHandle_v2");
  NEED_INIT();
  NEED_CONTEXT(c);
  if (dptr == NULL || flags != DLB__CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS)
    RETURN(DLB__CUDA_ERROR_INVALID_VALUE);
  emu_ipc h;
  memcpy(&h, &handle, sizeof h);
  /* Opening again counts a reference and gives the same address. */
  emu_region *again = emu_region_ipc(h.pid, (uintptr_t)h.base);
  if (memcmp(h.magic, "EMUIPC1", 8) == 0 && again != NULL) {
    again->ipc_refs++;
    *dptr = dptr_of(again->base);
    RETURN(DLB__CUDA_SUCCESS);
  }
  int fd = -1;
  cures e = open_remote(&h, "EMUIPC1", &fd);
  if (e != DLB__CUDA_SUCCESS) RETURN(e);
  struct stat st;
  if (h.size == 0 || fstat(fd, &st) != 0 || (uint64_t)st.st_size < h.size) {
    close(fd);
    RETURN(DLB__CUDA_ERROR_INVALID_HANDLE);
  }
  emu_region *r = emu_region_import(fd, (size_t)h.size, c->device, h.pid,
                                    (uintptr_t)h.base);
  if (r == NULL) {
    close(fd);
    RETURN(DLB__CUDA_ERROR_OUT_OF_MEMORY);
  }
  *dptr = dptr_of(r->base);
  RETURN(DLB__CUDA_SUCCESS);
}

cures cuIpcCloseMemHandle(dlb__cu_deviceptr dptr) {
  ENTER_QUIET("cuIpcCloseMemHandle");
  NEED_INIT();
  emu_region *r = emu_region_at(ptr_of(dptr), 1u << EMU_DEVICE);
  if (r == NULL || r->ipc_pid == 0) RETURN(DLB__CUDA_ERROR_INVALID_VALUE);
  if (--r->ipc_refs == 0) {
    emu_run_all();
    emu_region_free(r);
  }
  RETURN(DLB__CUDA_SUCCESS);
}

cures cuIpcGetEventHandle(dlb__cu_ipc_event_handle *handle,
                          dlb__cu_event event) {
  ENTER("cuIpcGetEventHandle");
  NEED_INIT();
  emu_event *v = event_of(event);
  if (v == NULL) RETURN(DLB__CUDA_ERROR_INVALID_HANDLE);
  if (handle == NULL || v->ipc_records == NULL || v->imported)
    RETURN(DLB__CUDA_ERROR_INVALID_VALUE);
  emu_ipc h;
  emu_ipc_make(&h, "EMUEVT1", v->ipc_fd);
  h.device = v->device;
  memset(handle, 0, sizeof *handle);
  memcpy(handle, &h, sizeof h);
  RETURN(DLB__CUDA_SUCCESS);
}

cures cuIpcOpenEventHandle(dlb__cu_event *event,
                           dlb__cu_ipc_event_handle handle) {
  ENTER("cuIpcOpenEventHandle");
  NEED_INIT();
  NEED_CONTEXT(c);
  if (event == NULL) RETURN(DLB__CUDA_ERROR_INVALID_VALUE);
  emu_ipc h;
  memcpy(&h, &handle, sizeof h);
  int fd = -1;
  cures e = open_remote(&h, "EMUEVT1", &fd);
  if (e != DLB__CUDA_SUCCESS) RETURN(e);
  void *page = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  emu_event *v = page == MAP_FAILED ? NULL : calloc(1, sizeof *v);
  if (v == NULL) {
    if (page != MAP_FAILED) munmap(page, 4096);
    close(fd);
    RETURN(DLB__CUDA_ERROR_OUT_OF_MEMORY);
  }
  v->ipc_fd = fd;
  v->ipc_records = page;
  v->imported = 1;
  v->device = c->device;
  v->next = events;
  events = v;
  emu_events_live_add(1);
  *event = (dlb__cu_event)(void *)v;
  RETURN(DLB__CUDA_SUCCESS);
}

/* ---- managed memory ---- */

static emu_region *managed_range(dlb__cu_deviceptr ptr, size_t count) {
  emu_region *r = emu_region_find(ptr_of(ptr));
  if (r == NULL || r->kind != EMU_MANAGED || count == 0 ||
      count > (size_t)(r->base + r->size - (char *)ptr_of(ptr)))
    return NULL;
  return r;
}

/* Checks a location: a device, or the host (-1). */
static cures location_ok(int device, int for_device_work) {
  if (device == -1) return DLB__CUDA_SUCCESS;
  if (device < 0 || device >= emu_cfg.devices)
    return DLB__CUDA_ERROR_INVALID_DEVICE;
  if (for_device_work && !emu_cfg.concurrent_managed)
    return DLB__CUDA_ERROR_INVALID_DEVICE;
  return DLB__CUDA_SUCCESS;
}

static int location_device(dlb__cu_memlocation loc, cures *err) {
  if (loc.type == DLB__CU_MEM_LOCATION_TYPE_HOST) return -1;
  if (loc.type == DLB__CU_MEM_LOCATION_TYPE_DEVICE) return loc.id;
  *err = DLB__CUDA_ERROR_INVALID_VALUE;
  return -1;
}

static cures prefetch(dlb__cu_deviceptr ptr, size_t count, int device,
                      dlb__cu_stream stream) {
  NEED_CONTEXT(c);
  (void)c;
  emu_region *r = managed_range(ptr, count);
  if (r == NULL) RETURN(DLB__CUDA_ERROR_INVALID_VALUE);
  if (!stream_ok(stream)) RETURN(DLB__CUDA_ERROR_INVALID_HANDLE);
  cures e = location_ok(device, 1);
  if (e != DLB__CUDA_SUCCESS) RETURN(e);
  r->prefetch = device;
  r->prefetch_at = ptr_of(ptr);
  r->prefetch_bytes = count;
  RETURN(DLB__CUDA_SUCCESS);
}

cures cuMemPrefetchAsync_v2(dlb__cu_deviceptr ptr, size_t count,
                            dlb__cu_memlocation location, unsigned int flags,
                            dlb__cu_stream stream) {
  ENTER("cuMemPrefetchAsync_v2");
  NEED_INIT();
  cures e = DLB__CUDA_SUCCESS;
  int device = location_device(location, &e);
  if (e != DLB__CUDA_SUCCESS || flags != 0)
    RETURN(DLB__CUDA_ERROR_INVALID_VALUE);
  return prefetch(ptr, count, device, stream);
}

cures cuMemPrefetchAsync(dlb__cu_deviceptr ptr, size_t count,
                         dlb__cu_device device, dlb__cu_stream stream) {
  ENTER("cuMemPrefetchAsync");
  NEED_INIT();
  return prefetch(ptr, count, device, stream);
}

static cures advise(dlb__cu_deviceptr ptr, size_t count, dlb__cu_enum advice,
                    int device) {
  emu_region *r = managed_range(ptr, count);
  if (r == NULL || advice < 1 || advice > 6)
    RETURN(DLB__CUDA_ERROR_INVALID_VALUE);
  if (advice > 2) {
    cures e = location_ok(device, device >= 0);
    if (e != DLB__CUDA_SUCCESS) RETURN(e);
    r->advice_location = device;
  }
  unsigned bit = 1u << ((advice + 1) / 2 * 2 - 2);
  if (advice % 2 == 1)
    r->advice |= bit;
  else
    r->advice &= ~bit;
  RETURN(DLB__CUDA_SUCCESS);
}

cures cuMemAdvise_v2(dlb__cu_deviceptr ptr, size_t count, dlb__cu_enum advice,
                     dlb__cu_memlocation location) {
  ENTER("cuMemAdvise_v2");
  NEED_INIT();
  cures e = DLB__CUDA_SUCCESS;
  int device = location_device(location, &e);
  if (e != DLB__CUDA_SUCCESS) RETURN(e);
  return advise(ptr, count, advice, device);
}

cures cuMemAdvise(dlb__cu_deviceptr ptr, size_t count, dlb__cu_enum advice,
                  dlb__cu_device device) {
  ENTER("cuMemAdvise");
  NEED_INIT();
  return advise(ptr, count, advice, device);
}

/* ---- the oldest ABIs ---- */

#define LEGACY_STUB(name, version)     \
  cures name(void) {                   \
    ENTER_QUIET(#name);                \
    RETURN(DLB__CUDA_ERROR_NOT_SUPPORTED); \
  }
EMU_CU_LEGACY(LEGACY_STUB)
#undef LEGACY_STUB

/* ---- cuGetProcAddress ---- */

#ifdef EMU_PROC_ADDRESS
typedef void (*emu_fn)(void);

typedef struct proc {
  const char *base;
  int version;
  emu_fn fn;
} proc;

#define PROC(name, base, version, params) {#base, version, (emu_fn)name},
#define LEGACY_PROC(name, version) {#name, version, (emu_fn)name},
static const proc procs[] = {
    DLB__CU_REQUIRED(PROC) DLB__CU_OPTIONAL(PROC) DLB__CU_FALLBACK(PROC)
    EMU_CU_EXTRA(PROC) EMU_CU_LEGACY(LEGACY_PROC)};
#undef PROC
#undef LEGACY_PROC

cures cuGetProcAddress_v2(const char *symbol, void **pfn, int version,
                          dlb__cu_uint64 flags, dlb__cu_enum *status) {
  configure();
  ENTER_QUIET("cuGetProcAddress_v2");
  if (symbol == NULL || pfn == NULL || flags > 2)
    RETURN(DLB__CUDA_ERROR_INVALID_VALUE);
  emu_record_version(symbol, version);
  *pfn = NULL;
  if (version > emu_cfg.version) RETURN(DLB__CUDA_ERROR_INVALID_VALUE);
  const proc *best = NULL;
  int known = 0;
  for (size_t i = 0; i < sizeof procs / sizeof procs[0]; i++) {
    if (strcmp(procs[i].base, symbol) != 0) continue;
    known = 1;
    if (procs[i].version <= version &&
        (best == NULL || procs[i].version > best->version))
      best = &procs[i];
  }
  if (strcmp(emu_cfg.hide, symbol) == 0) {
    known = 0;
    best = NULL;
  }
  if (status != NULL)
    *status = best != NULL ? DLB__CU_GET_PROC_ADDRESS_SUCCESS
              : known      ? DLB__CU_GET_PROC_ADDRESS_VERSION_NOT_SUFFICIENT
                           : DLB__CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND;
  if (best != NULL) memcpy(pfn, &best->fn, sizeof best->fn);
  RETURN(DLB__CUDA_SUCCESS);
}
#endif
