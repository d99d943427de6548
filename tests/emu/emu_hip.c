/*
 * emu_hip.c -- an emulated HIP runtime (libamdhip64.so.6) backed by host
 * memory, for testing without a GPU. EMU_HIP_VERSION picks the ROCm
 * release it behaves as: below 6.0 the ROCm 5 pointer-attribute values,
 * and before 6.2 an error (which hipGetLastError reports afterwards) for
 * memory HIP never saw.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "emu_core.h"
#include "emu_hip.h"

typedef dlb__hip_error herr;

#define PROTO(name, ret, params) EMU_EXPORT ret name params;
DLB__HIP_REQUIRED(PROTO)
DLB__HIP_OPTIONAL(PROTO)
EMU_HIP_EXTRA(PROTO)
#undef PROTO

static __thread herr last_error;
static __thread int current_device;
static int inited;

/* Every failure is also kept for hipGetLastError, as HIP does. */
static herr fail(herr e) {
  if (e != DLB__HIP_SUCCESS) last_error = e;
  return e;
}

#define ENTER(name)                              \
  do {                                           \
    int fail_ = emu_enter(name, 0);              \
    if (fail_ != 0) return fail((herr)fail_);    \
  } while (0)
#define ENTER_QUIET(name)                        \
  do {                                           \
    int fail_ = emu_enter(name, 1);              \
    if (fail_ != 0) return fail((herr)fail_);    \
  } while (0)
#define RETURN(r)          \
  do {                     \
    herr r_ = fail(r);     \
    emu_leave();           \
    return r_;             \
  } while (0)
#define NEED_INIT() \
  if (!inited) RETURN(DLB__HIP_ERROR_NOT_INITIALIZED)

static const struct {
  herr code;
  const char *name;
  const char *text;
} errors[] = {
    {0, "hipSuccess", "no error"},
    {1, "hipErrorInvalidValue", "invalid argument"},
    {2, "hipErrorOutOfMemory", "out of memory"},
    {3, "hipErrorNotInitialized", "initialization error"},
    {35, "hipErrorInsufficientDriver", "driver version is insufficient"},
    {100, "hipErrorNoDevice", "no ROCm-capable device is detected"},
    {101, "hipErrorInvalidDevice", "invalid device ordinal"},
    {201, "hipErrorInvalidContext", "invalid device context"},
    {400, "hipErrorInvalidHandle", "invalid resource handle"},
    {500, "hipErrorNotFound", "named symbol not found"},
    {600, "hipErrorNotReady", "device not ready"},
    {712, "hipErrorHostMemoryAlreadyRegistered",
     "part or all of the requested memory range is already mapped"},
    {713, "hipErrorHostMemoryNotRegistered",
     "pointer does not correspond to a registered memory region"},
    {801, "hipErrorNotSupported", "operation not supported"},
    {999, "hipErrorUnknown", "unknown error"},
};

static const char *error_text(herr e, int name) {
  for (size_t i = 0; i < sizeof errors / sizeof errors[0]; i++)
    if (errors[i].code == e) return name ? errors[i].name : errors[i].text;
  return name ? "hipErrorUnknown" : "unknown error";
}

const char *hipGetErrorName(herr error) {
  (void)emu_enter("hipGetErrorName", 1);
  emu_leave();
  return error_text(error, 1);
}

const char *hipGetErrorString(herr error) {
  (void)emu_enter("hipGetErrorString", 1);
  emu_leave();
  return error_text(error, 0);
}

herr hipGetLastError(void) {
  (void)emu_enter("hipGetLastError", 1);
  herr e = last_error;
  last_error = DLB__HIP_SUCCESS;
  emu_leave();
  return e;
}

static void configure(void) { emu_configure("EMU_HIP_", 60200000); }

herr hipInit(unsigned int flags) {
  configure();
  ENTER("hipInit");
  if (flags != 0) RETURN(DLB__HIP_ERROR_INVALID_VALUE);
  if (emu_cfg.devices == 0) RETURN(DLB__HIP_ERROR_NO_DEVICE);
  inited = 1;
  RETURN(DLB__HIP_SUCCESS);
}

herr hipRuntimeGetVersion(int *version) {
  configure();
  ENTER_QUIET("hipRuntimeGetVersion");
  if (version == NULL) RETURN(DLB__HIP_ERROR_INVALID_VALUE);
  *version = emu_cfg.version;
  RETURN(DLB__HIP_SUCCESS);
}

herr hipGetDeviceCount(int *count) {
  configure();
  ENTER_QUIET("hipGetDeviceCount");
  if (count == NULL) RETURN(DLB__HIP_ERROR_INVALID_VALUE);
  if (emu_cfg.devices == 0) RETURN(DLB__HIP_ERROR_NO_DEVICE);
  *count = emu_cfg.reported >= 0 ? emu_cfg.reported : emu_cfg.devices;
  RETURN(DLB__HIP_SUCCESS);
}

herr hipGetDevice(int *device) {
  ENTER_QUIET("hipGetDevice");
  NEED_INIT();
  if (device == NULL) RETURN(DLB__HIP_ERROR_INVALID_VALUE);
  *device = current_device;
  RETURN(DLB__HIP_SUCCESS);
}

herr hipSetDevice(int device) {
  ENTER("hipSetDevice");
  NEED_INIT();
  if (device < 0 || device >= emu_cfg.devices)
    RETURN(DLB__HIP_ERROR_INVALID_DEVICE);
  current_device = device;
  RETURN(DLB__HIP_SUCCESS);
}

int emu_context_depth(void) { return current_device; }

herr hipDeviceGetAttribute(int *value, int attribute, int device) {
  ENTER("hipDeviceGetAttribute");
  NEED_INIT();
  if (value == NULL) RETURN(DLB__HIP_ERROR_INVALID_VALUE);
  if (device < 0 || device >= emu_cfg.devices)
    RETURN(DLB__HIP_ERROR_INVALID_DEVICE);
  switch (attribute) {
    case DLB__HIP_ATTRIBUTE_MAX_PITCH:
      *value = emu_cfg.max_pitch;
      break;
    case DLB__HIP_ATTRIBUTE_MANAGED_MEMORY:
    case DLB__HIP_ATTRIBUTE_UNIFIED_ADDRESSING:
      *value = 1;
      break;
    case DLB__HIP_ATTRIBUTE_CONCURRENT_MANAGED_ACCESS:
      *value = 0;
      break;
    default:
      /* Like a ROCm that predates the attribute (HostRegisterSupported). */
      RETURN(DLB__HIP_ERROR_INVALID_VALUE);
  }
  RETURN(DLB__HIP_SUCCESS);
}

herr hipDeviceGetName(char *name, int len, int device) {
  ENTER_QUIET("hipDeviceGetName");
  NEED_INIT();
  if (name == NULL || len <= 0) RETURN(DLB__HIP_ERROR_INVALID_VALUE);
  if (device < 0 || device >= emu_cfg.devices)
    RETURN(DLB__HIP_ERROR_INVALID_DEVICE);
  if (emu_cfg.name[0] != '\0')
    snprintf(name, (size_t)len, "%s", emu_cfg.name);
  else
    snprintf(name, (size_t)len, "Emulated HIP GPU %d", device);
  RETURN(DLB__HIP_SUCCESS);
}

herr hipDeviceTotalMem(size_t *bytes, int device) {
  ENTER_QUIET("hipDeviceTotalMem");
  NEED_INIT();
  if (bytes == NULL) RETURN(DLB__HIP_ERROR_INVALID_VALUE);
  if (device < 0 || device >= emu_cfg.devices)
    RETURN(DLB__HIP_ERROR_INVALID_DEVICE);
  *bytes = emu_cfg.device_memory;
  RETURN(DLB__HIP_SUCCESS);
}

herr hipDeviceSynchronize(void) {
  ENTER("hipDeviceSynchronize");
  NEED_INIT();
  emu_run_all();
  RETURN(DLB__HIP_SUCCESS);
}

/* ---- memory ---- */

static herr alloc(emu_kind kind, void **ptr, size_t size, unsigned flags) {
  if (ptr == NULL) RETURN(DLB__HIP_ERROR_INVALID_VALUE);
  /* HIP hands out NULL for empty allocations. */
  if (size == 0) {
    *ptr = NULL;
    RETURN(DLB__HIP_SUCCESS);
  }
  emu_region *r = emu_region_new(kind, size, current_device, flags);
  if (r == NULL) RETURN(DLB__HIP_ERROR_OUT_OF_MEMORY);
  *ptr = r->base;
  RETURN(DLB__HIP_SUCCESS);
}

herr hipMalloc(void **ptr, size_t size) {
  ENTER("hipMalloc");
  NEED_INIT();
  return alloc(EMU_DEVICE, ptr, size, 0);
}

herr hipMallocManaged(void **ptr, size_t size, unsigned int flags) {
  ENTER("hipMallocManaged");
  NEED_INIT();
  if (flags != 1 && flags != 2) RETURN(DLB__HIP_ERROR_INVALID_VALUE);
  return alloc(EMU_MANAGED, ptr, size, flags);
}

/* Portable, Mapped, WriteCombined, NumaUser, Coherent, NonCoherent. */
#define HOST_MALLOC_FLAGS 0xE0000007u

herr hipHostMalloc(void **ptr, size_t size, unsigned int flags) {
  ENTER("hipHostMalloc");
  NEED_INIT();
  if ((flags & ~HOST_MALLOC_FLAGS) != 0) RETURN(DLB__HIP_ERROR_INVALID_VALUE);
  return alloc(EMU_HOST, ptr, size, flags);
}

herr hipHostAlloc(void **ptr, size_t size, unsigned int flags) {
  ENTER("hipHostAlloc");
  NEED_INIT();
  if ((flags & ~HOST_MALLOC_FLAGS) != 0) RETURN(DLB__HIP_ERROR_INVALID_VALUE);
  return alloc(EMU_HOST, ptr, size, flags);
}

static herr free_kind(void *ptr, unsigned mask) {
  NEED_INIT();
  if (ptr == NULL) RETURN(DLB__HIP_SUCCESS);
  emu_region *r = emu_region_at(ptr, mask);
  if (r == NULL) RETURN(DLB__HIP_ERROR_INVALID_VALUE);
  emu_run_all();
  emu_region_free(r);
  RETURN(DLB__HIP_SUCCESS);
}

herr hipFree(void *ptr) {
  ENTER_QUIET("hipFree");
  /* Memory opened by IPC is closed, never freed. */
  emu_region *r = ptr != NULL ? emu_region_at(ptr, 1u << EMU_DEVICE) : NULL;
  if (r != NULL && r->ipc_pid != 0) RETURN(DLB__HIP_ERROR_INVALID_VALUE);
  return free_kind(ptr, (1u << EMU_DEVICE) | (1u << EMU_MANAGED));
}

herr hipHostFree(void *ptr) {
  ENTER_QUIET("hipHostFree");
  return free_kind(ptr, 1u << EMU_HOST);
}

herr hipHostRegister(void *ptr, size_t size, unsigned int flags) {
  ENTER("hipHostRegister");
  NEED_INIT();
  if (ptr == NULL || size == 0 || (flags & ~0xFu) != 0)
    RETURN(DLB__HIP_ERROR_INVALID_VALUE);
  if (emu_region_overlaps(ptr, size, (1u << EMU_HOST) | (1u << EMU_REGISTERED)))
    RETURN(DLB__HIP_ERROR_HOST_MEMORY_ALREADY_REGISTERED);
  if (emu_region_overlaps(ptr, size,
                          (1u << EMU_DEVICE) | (1u << EMU_MANAGED)) ||
      !emu_range_mapped(ptr, size))
    RETURN(DLB__HIP_ERROR_INVALID_VALUE);
  if (emu_region_register(ptr, size, flags) == NULL)
    RETURN(DLB__HIP_ERROR_OUT_OF_MEMORY);
  RETURN(DLB__HIP_SUCCESS);
}

herr hipHostUnregister(void *ptr) {
  ENTER_QUIET("hipHostUnregister");
  NEED_INIT();
  emu_region *r = emu_region_at(ptr, 1u << EMU_REGISTERED);
  if (r == NULL) RETURN(DLB__HIP_ERROR_HOST_MEMORY_NOT_REGISTERED);
  emu_run_all();
  emu_region_free(r);
  RETURN(DLB__HIP_SUCCESS);
}

herr hipPointerGetAttributes(dlb__hip_ptr_attr *a, const void *ptr) {
  ENTER("hipPointerGetAttributes");
  NEED_INIT();
  if (a == NULL || ptr == NULL) RETURN(DLB__HIP_ERROR_INVALID_VALUE);
  int v6 = emu_cfg.version >= 60000000;
  emu_region *r = emu_region_find(ptr);
  memset(a, 0, sizeof *a);
  if (r == NULL) {
    if (emu_cfg.version < 60200000) RETURN(DLB__HIP_ERROR_INVALID_VALUE);
    a->type = DLB__HIP6_MEMORY_UNREGISTERED;
    a->device = -1;
    RETURN(DLB__HIP_SUCCESS);
  }
  a->device = r->device;
  a->allocationFlags = r->flags;
  switch (r->kind) {
    case EMU_DEVICE:
      a->type = v6 ? DLB__HIP6_MEMORY_DEVICE : DLB__HIP5_MEMORY_DEVICE;
      a->devicePointer = (void *)(uintptr_t)ptr;
      break;
    case EMU_MANAGED:
      a->type = v6 ? DLB__HIP6_MEMORY_MANAGED : DLB__HIP5_MEMORY_MANAGED;
      a->isManaged = 1;
      a->devicePointer = a->hostPointer = (void *)(uintptr_t)ptr;
      break;
    case EMU_HOST:
    case EMU_REGISTERED:
      a->type = v6 ? DLB__HIP6_MEMORY_HOST : DLB__HIP5_MEMORY_HOST;
      a->devicePointer = a->hostPointer = (void *)(uintptr_t)ptr;
      break;
  }
  RETURN(DLB__HIP_SUCCESS);
}

/* ---- copies ---- */

static int stream_ok(dlb__hip_stream s) {
  emu_stream *es = NULL;
  return emu_stream_lookup((void *)s, &es);
}

herr hipMemcpyAsync(void *dst, const void *src, size_t size, int kind,
                    dlb__hip_stream stream) {
  ENTER("hipMemcpyAsync");
  NEED_INIT();
  if (kind < 0 || kind > 4) RETURN(DLB__HIP_ERROR_INVALID_VALUE);
  if (!stream_ok(stream)) RETURN(DLB__HIP_ERROR_INVALID_VALUE);
  if (size == 0) RETURN(DLB__HIP_SUCCESS);
  char *d = emu_resolve(dst, size, 0, 0);
  const char *s = emu_resolve(src, size, 0, 0);
  if (d == NULL || s == NULL) RETURN(DLB__HIP_ERROR_INVALID_VALUE);
  emu_copy c = {d, s, size, 1, 1, 0, 0, 0, 0};
  emu_submit((void *)stream, &c);
  RETURN(DLB__HIP_SUCCESS);
}

herr hipMemcpy2DAsync(void *dst, size_t dpitch, const void *src,
                      size_t spitch, size_t width, size_t height, int kind,
                      dlb__hip_stream stream) {
  ENTER("hipMemcpy2DAsync");
  NEED_INIT();
  if (kind < 0 || kind > 4) RETURN(DLB__HIP_ERROR_INVALID_VALUE);
  if (!stream_ok(stream)) RETURN(DLB__HIP_ERROR_INVALID_VALUE);
  if (width == 0 || height == 0) RETURN(DLB__HIP_SUCCESS);
  size_t limit = (size_t)emu_cfg.max_pitch;
  if (height > 1 && (dpitch < width || spitch < width || dpitch > limit ||
                     spitch > limit))
    RETURN(DLB__HIP_ERROR_INVALID_VALUE);
  char *d = emu_resolve(dst, (height - 1) * dpitch + width, 0, 0);
  const char *s = emu_resolve(src, (height - 1) * spitch + width, 0, 0);
  if (d == NULL || s == NULL) RETURN(DLB__HIP_ERROR_INVALID_VALUE);
  emu_copy c = {d, s, width, height, 1, dpitch, spitch, 0, 0};
  emu_submit((void *)stream, &c);
  RETURN(DLB__HIP_SUCCESS);
}

herr hipMemcpy3DAsync(const dlb__hip_memcpy3d *p, dlb__hip_stream stream) {
  ENTER("hipMemcpy3DAsync");
  NEED_INIT();
  if (p == NULL || p->srcArray != NULL || p->dstArray != NULL ||
      p->kind < 0 || p->kind > 4)
    RETURN(DLB__HIP_ERROR_INVALID_VALUE);
  if (!stream_ok(stream)) RETURN(DLB__HIP_ERROR_INVALID_VALUE);
  const dlb__hip_extent *e = &p->extent;
  if (e->width == 0 || e->height == 0 || e->depth == 0)
    RETURN(DLB__HIP_SUCCESS);
  const dlb__hip_pitched_ptr *sp = &p->srcPtr, *dp = &p->dstPtr;
  size_t limit = (size_t)emu_cfg.max_pitch;
  if (sp->pitch < e->width + p->srcPos.x ||
      dp->pitch < e->width + p->dstPos.x ||
      sp->pitch > limit || dp->pitch > limit ||
      (e->depth > 1 && (sp->ysize < e->height + p->srcPos.y ||
                        dp->ysize < e->height + p->dstPos.y)))
    RETURN(DLB__HIP_ERROR_INVALID_VALUE);
  size_t splane = sp->pitch * sp->ysize, dplane = dp->pitch * dp->ysize;
  const char *s = emu_resolve(
      (const char *)sp->ptr + p->srcPos.z * splane + p->srcPos.y * sp->pitch +
          p->srcPos.x,
      (e->depth - 1) * splane + (e->height - 1) * sp->pitch + e->width, 0, 0);
  char *d = emu_resolve(
      (char *)dp->ptr + p->dstPos.z * dplane + p->dstPos.y * dp->pitch +
          p->dstPos.x,
      (e->depth - 1) * dplane + (e->height - 1) * dp->pitch + e->width, 0, 0);
  if (s == NULL || d == NULL) RETURN(DLB__HIP_ERROR_INVALID_VALUE);
  emu_copy c = {d, s, e->width, e->height, e->depth, dp->pitch, sp->pitch,
                dp->ysize, sp->ysize};
  emu_submit((void *)stream, &c);
  RETURN(DLB__HIP_SUCCESS);
}

/* ---- streams and events ---- */

typedef struct emu_event {
  struct emu_event *next;
  int destroyed;
  emu_stream *stream;
  long seq;
  /* Interprocess events, as in the CUDA emulator: a shared page counting
   * records; a record completes the work before it. */
  int ipc_fd;
  long *ipc_records;
  int imported;
} emu_event;

static emu_event *events;

static emu_event *event_of(dlb__hip_event e) {
  for (emu_event *v = events; v != NULL; v = v->next)
    if ((void *)v == (void *)e && !v->destroyed) return v;
  return NULL;
}

herr hipStreamCreateWithFlags(dlb__hip_stream *stream, unsigned int flags) {
  ENTER("hipStreamCreateWithFlags");
  NEED_INIT();
  if (stream == NULL || (flags & ~1u) != 0)
    RETURN(DLB__HIP_ERROR_INVALID_VALUE);
  emu_stream *s = emu_stream_new(flags, current_device);
  if (s == NULL) RETURN(DLB__HIP_ERROR_OUT_OF_MEMORY);
  *stream = (dlb__hip_stream)(void *)s;
  RETURN(DLB__HIP_SUCCESS);
}

herr hipStreamDestroy(dlb__hip_stream stream) {
  ENTER_QUIET("hipStreamDestroy");
  NEED_INIT();
  emu_stream *s = NULL;
  if (!emu_stream_lookup((void *)stream, &s) || s == NULL)
    RETURN(DLB__HIP_ERROR_INVALID_VALUE);
  emu_stream_destroy(s);
  RETURN(DLB__HIP_SUCCESS);
}

herr hipStreamSynchronize(dlb__hip_stream stream) {
  ENTER("hipStreamSynchronize");
  NEED_INIT();
  emu_stream *s = NULL;
  if (!emu_stream_lookup((void *)stream, &s))
    RETURN(DLB__HIP_ERROR_INVALID_VALUE);
  if (s != NULL) emu_run(s, -1);
  RETURN(DLB__HIP_SUCCESS);
}

herr hipEventCreateWithFlags(dlb__hip_event *event, unsigned int flags) {
  ENTER("hipEventCreateWithFlags");
  NEED_INIT();
  if (event == NULL || (flags & ~7u) != 0) RETURN(DLB__HIP_ERROR_INVALID_VALUE);
  /* Interprocess events must disable timing. */
  if ((flags & DLB__HIP_EVENT_INTERPROCESS) &&
      !(flags & DLB__HIP_EVENT_DISABLE_TIMING))
    RETURN(DLB__HIP_ERROR_INVALID_VALUE);
  emu_event *v = calloc(1, sizeof *v);
  if (v == NULL) RETURN(DLB__HIP_ERROR_OUT_OF_MEMORY);
  v->ipc_fd = -1;
  if (flags & DLB__HIP_EVENT_INTERPROCESS) {
    int fd = memfd_create("emu-event", MFD_CLOEXEC);
    void *page = MAP_FAILED;
    if (fd >= 0 && ftruncate(fd, 4096) == 0)
      page = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    if (page == MAP_FAILED) {
      if (fd >= 0) close(fd);
      free(v);
      RETURN(DLB__HIP_ERROR_OUT_OF_MEMORY);
    }
    v->ipc_fd = fd;
    v->ipc_records = page;
  }
  v->next = events;
  events = v;
  emu_events_live_add(1);
  *event = (dlb__hip_event)(void *)v;
  RETURN(DLB__HIP_SUCCESS);
}

herr hipEventRecord(dlb__hip_event event, dlb__hip_stream stream) {
  ENTER("hipEventRecord");
  NEED_INIT();
  emu_event *v = event_of(event);
  emu_stream *s = NULL;
  if (v == NULL || v->imported || !emu_stream_lookup((void *)stream, &s))
    RETURN(DLB__HIP_ERROR_INVALID_VALUE);
  emu_mark((void *)stream, &v->stream, &v->seq);
  if (v->ipc_records != NULL) {
    if (s != NULL)
      emu_run(s, v->seq);
    else
      emu_run_all();
    __atomic_add_fetch(v->ipc_records, 1, __ATOMIC_SEQ_CST);
  }
  RETURN(DLB__HIP_SUCCESS);
}

herr hipStreamWaitEvent(dlb__hip_stream stream, dlb__hip_event event,
                        unsigned int flags) {
  ENTER("hipStreamWaitEvent");
  NEED_INIT();
  emu_event *v = event_of(event);
  emu_stream *s = NULL;
  if (v == NULL || !emu_stream_lookup((void *)stream, &s) || flags != 0)
    RETURN(DLB__HIP_ERROR_INVALID_VALUE);
  emu_wait((void *)stream, v->stream, v->seq);
  RETURN(DLB__HIP_SUCCESS);
}

herr hipEventSynchronize(dlb__hip_event event) {
  ENTER("hipEventSynchronize");
  NEED_INIT();
  emu_event *v = event_of(event);
  if (v == NULL) RETURN(DLB__HIP_ERROR_INVALID_VALUE);
  if (v->stream != NULL) emu_run(v->stream, v->seq);
  RETURN(DLB__HIP_SUCCESS);
}

herr hipEventDestroy(dlb__hip_event event) {
  ENTER_QUIET("hipEventDestroy");
  NEED_INIT();
  emu_event *v = event_of(event);
  if (v == NULL) RETURN(DLB__HIP_ERROR_INVALID_VALUE);
  v->destroyed = 1;
  if (v->ipc_records != NULL) {
    munmap(v->ipc_records, 4096);
    close(v->ipc_fd);
    v->ipc_records = NULL;
  }
  emu_events_live_add(-1);
  RETURN(DLB__HIP_SUCCESS);
}

/* ---- IPC (handles: see emu_ipc in emu_core.h) ---- */

static herr open_remote(const emu_ipc *h, const char *magic, int *out) {
  switch (emu_ipc_open(h, magic, out)) {
    case EMU_IPC_OK:
      return DLB__HIP_SUCCESS;
    case EMU_IPC_FOREIGN:
      return DLB__HIP_ERROR_INVALID_VALUE;
    case EMU_IPC_SAME_PROCESS:
      return DLB__HIP_ERROR_INVALID_CONTEXT;
    default:
      return DLB__HIP_ERROR_INVALID_HANDLE;
  }
}

/* Interprocess events are Linux-only from ROCm 6. */
static int ipc_events_supported(void) { return emu_cfg.version >= 60000000; }

herr hipMemGetAddressRange(void **base, size_t *size, void *ptr) {
  ENTER_QUIET("hipMemGetAddressRange");
  NEED_INIT();
  emu_region *r = emu_region_find(ptr);
  if (r == NULL || (r->kind != EMU_DEVICE && r->kind != EMU_MANAGED))
    RETURN(DLB__HIP_ERROR_NOT_FOUND);
  if (base != NULL) *base = r->base;
  if (size != NULL) *size = r->size;
  RETURN(DLB__HIP_SUCCESS);
}

herr hipIpcGetMemHandle(dlb__hip_ipc_mem_handle *handle, void *ptr) {
  ENTER("hipIpcGetMemHandle");
  NEED_INIT();
  emu_region *r = emu_region_at(ptr, 1u << EMU_DEVICE);
  if (handle == NULL || r == NULL || r->ipc_pid != 0)
    RETURN(DLB__HIP_ERROR_INVALID_VALUE);
  emu_ipc h;
  emu_ipc_make(&h, "EMUIPC1", r->fd);
  h.size = r->size;
  h.device = r->device;
  h.base = (uint64_t)(uintptr_t)ptr;
  memset(handle, 0, sizeof *handle);
  memcpy(handle, &h, sizeof h);
  RETURN(DLB__HIP_SUCCESS);
}

herr hipIpcOpenMemHandle(void **ptr, dlb__hip_ipc_mem_handle handle,
                         unsigned int flags) {
  ENTER("hipIpcOpenMemHandle");
  NEED_INIT();
  unsigned lazy = emu_cfg.version >= 60000000
                      ? DLB__HIP_IPC_LAZY_PEER_ACCESS_6
                      : DLB__HIP_IPC_LAZY_PEER_ACCESS_5;
  if (ptr == NULL || flags != lazy) RETURN(DLB__HIP_ERROR_INVALID_VALUE);
  emu_ipc h;
  memcpy(&h, &handle, sizeof h);
  emu_region *again = emu_region_ipc(h.pid, (uintptr_t)h.base);
  if (memcmp(h.magic, "EMUIPC1", 8) == 0 && again != NULL) {
    again->ipc_refs++;
    *ptr = again->base;
    RETURN(DLB__HIP_SUCCESS);
  }
  int fd = -1;
  herr e = open_remote(&h, "EMUIPC1", &fd);
  if (e != DLB__HIP_SUCCESS) RETURN(e);
  struct stat st;
  if (h.size == 0 || fstat(fd, &st) != 0 || (uint64_t)st.st_size < h.size) {
    close(fd);
    RETURN(DLB__HIP_ERROR_INVALID_HANDLE);
  }
  emu_region *r = emu_region_import(fd, (size_t)h.size, current_device, h.pid,
                                    (uintptr_t)h.base);
  if (r == NULL) {
    close(fd);
    RETURN(DLB__HIP_ERROR_OUT_OF_MEMORY);
  }
  *ptr = r->base;
  RETURN(DLB__HIP_SUCCESS);
}

herr hipIpcCloseMemHandle(void *ptr) {
  ENTER_QUIET("hipIpcCloseMemHandle");
  NEED_INIT();
  emu_region *r = emu_region_at(ptr, 1u << EMU_DEVICE);
  if (r == NULL || r->ipc_pid == 0) RETURN(DLB__HIP_ERROR_INVALID_VALUE);
  if (--r->ipc_refs == 0) {
    emu_run_all();
    emu_region_free(r);
  }
  RETURN(DLB__HIP_SUCCESS);
}

herr hipIpcGetEventHandle(dlb__hip_ipc_event_handle *handle,
                          dlb__hip_event event) {
  ENTER("hipIpcGetEventHandle");
  NEED_INIT();
  if (!ipc_events_supported()) RETURN(DLB__HIP_ERROR_NOT_SUPPORTED);
  emu_event *v = event_of(event);
  if (handle == NULL || v == NULL || v->ipc_records == NULL || v->imported)
    RETURN(DLB__HIP_ERROR_INVALID_VALUE);
  emu_ipc h;
  emu_ipc_make(&h, "EMUEVT1", v->ipc_fd);
  memset(handle, 0, sizeof *handle);
  memcpy(handle, &h, sizeof h);
  RETURN(DLB__HIP_SUCCESS);
}

herr hipIpcOpenEventHandle(dlb__hip_event *event,
                           dlb__hip_ipc_event_handle handle) {
  ENTER("hipIpcOpenEventHandle");
  NEED_INIT();
  if (!ipc_events_supported()) RETURN(DLB__HIP_ERROR_NOT_SUPPORTED);
  if (event == NULL) RETURN(DLB__HIP_ERROR_INVALID_VALUE);
  emu_ipc h;
  memcpy(&h, &handle, sizeof h);
  int fd = -1;
  herr e = open_remote(&h, "EMUEVT1", &fd);
  if (e != DLB__HIP_SUCCESS) RETURN(e);
  void *page = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  emu_event *v = page == MAP_FAILED ? NULL : calloc(1, sizeof *v);
  if (v == NULL) {
    if (page != MAP_FAILED) munmap(page, 4096);
    close(fd);
    RETURN(DLB__HIP_ERROR_OUT_OF_MEMORY);
  }
  v->ipc_fd = fd;
  v->ipc_records = page;
  v->imported = 1;
  v->next = events;
  events = v;
  emu_events_live_add(1);
  *event = (dlb__hip_event)(void *)v;
  RETURN(DLB__HIP_SUCCESS);
}
