/*
 * share_internal.h -- what the sources of cross-process sharing share:
 * the handle's decoded form and its codec (handle.c), shared host memory
 * (shm.c) and device memory by runtime IPC (ipc.c). Not installed.
 */
#ifndef DLB_SHARE_SHARE_INTERNAL_H
#define DLB_SHARE_SHARE_INTERNAL_H

#include "internal.h"

/* What memory a handle names. Values are part of the format. */
typedef enum dlb__share_kind {
  DLB__SHARE_HOST = 1, /* a sealed memfd, sent as a descriptor */
  DLB__SHARE_CUDA = 2, /* cuIpcGetMemHandle of a cuMemAlloc allocation */
  DLB__SHARE_HIP = 3,  /* hipIpcGetMemHandle of a hipMalloc allocation */
} dlb__share_kind;

/* The identity of a piece of shared memory: random at allocation. */
#define DLB__SHARE_ID_BYTES 16
/* The runtimes' IPC handles (CU_IPC_HANDLE_SIZE, HIP_IPC_HANDLE_SIZE). */
#define DLB__SHARE_IPC_BYTES 64

/*
 * A handle, decoded. Offsets are relative to the memory the handle names:
 * for host memory the data region of the file (which starts data_offset
 * bytes into it, after the header holding the identity), for device memory
 * the allocation's base.
 */
typedef struct dlb__share_meta {
  dlb__share_kind kind;
  DLDataType dtype;
  int32_t ndim;
  uint64_t flags;       /* DLPACK_FLAG_BITMASK_* */
  uint64_t size;        /* host: the file's size; device: the allocation's */
  uint64_t data_offset; /* host: where the data region starts; device: 0 */
  uint64_t byte_offset; /* of element 0 from the region's start */
  int32_t device_id;    /* device kinds: the exporter's ordinal; host: 0 */
  uint8_t id[DLB__SHARE_ID_BYTES];
  uint8_t mem_handle[DLB__SHARE_IPC_BYTES];   /* device kinds */
  uint8_t event_handle[DLB__SHARE_IPC_BYTES]; /* device kinds */
  int64_t shape[DLB_MAX_NDIM];
  int64_t strides[DLB_MAX_NDIM];
} dlb__share_meta;

/* The encoded size of a handle with ndim dimensions. */
size_t dlb__share_encoded_size(int32_t ndim);

/* Writes m as a handle into buf (dlb__share_encoded_size(m->ndim) bytes). */
void dlb__share_encode(const dlb__share_meta *m, uint8_t *buf);

/*
 * Decodes and checks a handle of len bytes from anywhere: every field,
 * and for a host handle its agreement with file_size, the size of the
 * memory received (fstat), so that every element lies inside the data
 * region. A device handle is checked against the allocation size it
 * states (the importer checks that against the runtime). A pure function
 * of its inputs: DLB_E_HANDLE with a message naming the field and value,
 * *out untouched on failure.
 */
dlb_status dlb__share_decode(const void *buf, size_t len, uint64_t file_size,
                             dlb__share_meta *out);

/* The header at the start of every shared memory file; data follows at
 * data_offset (a multiple of the page size). */
#define DLB__SHM_MAGIC "DLBSHMEM"
#define DLB__SHM_HEADER_BYTES 48

/* Host side (shm.c). The owner context behind every tensor over shared
 * host memory, NULL when t is not one (views, shares and pins see
 * through). */
typedef struct dlb__shm dlb__shm;
const dlb__shm *dlb__shm_of(const DLManagedTensorVersioned *t);
dlb_status dlb__shm_export(const dlb__shm *s, const DLManagedTensorVersioned *t,
                           dlb__share_meta *m, int *fd);
dlb_status dlb__shm_import(const void *buf, size_t len, int fd,
                           uint64_t flags, DLManagedTensorVersioned **out);

/* Device side (ipc.c). */
int dlb__ipc_is_imported(const DLManagedTensorVersioned *t);
dlb_status dlb__ipc_export(const DLManagedTensorVersioned *t,
                           dlb__share_meta *m);
dlb_status dlb__ipc_import(const dlb__share_meta *m,
                           DLManagedTensorVersioned **out);

/* Fills m's geometry (dtype, ndim, shape, strides, flags) from t. */
void dlb__share_meta_geometry(const DLManagedTensorVersioned *t,
                              dlb__share_meta *m);

#endif /* DLB_SHARE_SHARE_INTERNAL_H */
