/*
 * dlbridge/share.h -- tensors shared between processes on one machine.
 *
 * Host memory: dlb_shared_alloc() makes a cpu tensor in anonymous shared
 * memory (a sealed memfd: nothing appears in /dev/shm or any file system).
 * dlb_share_export() describes a shared tensor, or any view of one, as a
 * handle (bytes) plus a file descriptor; dlb_share_import() in another
 * process maps the same memory and returns a zero-copy tensor over it.
 * dlb_share_send() / dlb_share_recv() carry both over a Unix socket
 * (SCM_RIGHTS); callers with their own transport move the bytes and the
 * descriptor themselves. The memory lives while any process maps it or
 * holds a descriptor of it, and is gone when the last one lets go, however
 * that process ends (SIGKILL included).
 *
 * Device memory: a cuda (or rocm) tensor exports as a runtime IPC handle
 * (cuIpcGetMemHandle / hipIpcGetMemHandle on its allocation, plus the
 * offset into it) with an interprocess event recorded after the exporter's
 * work; the importer opens the allocation once per process (reference
 * counted) and waits for the event before returning. No descriptor goes
 * with it (fd -1). Lifetime rule: the runtime frees device memory when
 * its owner frees it, whoever still maps it, so the exporting process must
 * keep the exported tensor (or another tensor sharing its memory) alive
 * until every importer has released its tensor; and the exporting process
 * must outlive them. See docs/sharing.md.
 *
 * Pinning: dlb_tensor_pin() pins a shared host tensor in the calling
 * process (each process pins its own mapping); the pinned tensor is still
 * shared and exports like the tensor it was made from.
 *
 * Handles are untrusted input: every field is checked against the memory
 * received (its size, its seals, an identity written into it), and a
 * handle that fails is refused with DLB_E_HANDLE (or DLB_E_SYSTEM for a
 * failing system call) and a message naming the field and value; nothing
 * is ever mapped out of bounds.
 */
#ifndef DLBRIDGE_SHARE_H
#define DLBRIDGE_SHARE_H

#include "common.h"
#include "status.h"

DLB_BEGIN_DECLS

/* The largest handle dlb_share_export() writes (ndim DLB_MAX_NDIM); a
 * buffer this large always suffices. */
#define DLB_SHARE_HANDLE_MAX 1280

/* Flags of dlb_share_import() and dlb_share_recv(): pin the mapping in
 * this process for CUDA (the tensor becomes cuda_host, device_id 0) or
 * for HIP (rocm_host). At most one; host memory only (DLB_E_INVAL for a
 * device handle). The registration is undone before the memory is
 * unmapped, when the last tensor over it is released. */
#define DLB_SHARE_PIN_CUDA 0x1u
#define DLB_SHARE_PIN_ROCM 0x2u

/*
 * Allocates a compact row-major cpu tensor of dtype and shape (borrowed)
 * in anonymous shared memory (memfd_create with MFD_CLOEXEC and
 * MFD_ALLOW_SEALING, sized once, sealed against shrinking, growing and
 * further sealing, mapped MAP_SHARED). The data is zero-filled, never
 * NULL, and aligned to the page size. Tensors without elements work. The
 * memory stays open in this process (one descriptor) until the tensor and
 * every view or share of it are released. dlb_tensor_is_shared() is 1 for
 * it and its views. The same errors as dlb_tensor_alloc() for dtype and
 * shape; DLB_E_SYSTEM when the system refuses (its error text in the
 * message), DLB_E_NOMEM when memory runs out.
 * New; release with dlb_tensor_release().
 */
DLB_API dlb_status dlb_shared_alloc(DLDataType dtype, int32_t ndim,
                                    const int64_t *shape,
                                    DLManagedTensorVersioned **out);

/* Returns 1 when t's memory is shared memory of dlbridge: made by
 * dlb_shared_alloc() or dlb_share_import() (host or device handle), a view
 * or share of such a tensor, or such a tensor pinned with dlb_tensor_pin()
 * or DLB_SHARE_PIN_*; else 0. Accepts NULL (returns 0). Borrows t. */
DLB_API int dlb_tensor_is_shared(const DLManagedTensorVersioned *t);

/*
 * Writes the handle of t into buf (cap bytes; DLB_SHARE_HANDLE_MAX always
 * suffices, DLB_E_RANGE when cap is too small) and its length into *len.
 * For shared host memory *fd receives a NEW descriptor of the memory
 * (close-on-exec) that the caller owns and must close once it is sent;
 * for a read-only tensor (DLPACK_FLAG_BITMASK_READ_ONLY) it is opened
 * read-only, so no importer can map the memory writable. For a cuda or
 * rocm tensor *fd is -1 and the handle carries the runtime's IPC handles.
 * The handle records dtype, shape, strides, the element offset into the
 * memory, t's flags and the identity of the memory. t is borrowed.
 * Refusals: DLB_E_INVAL for a NULL argument, or a tensor in memory that
 * is neither shared memory nor cuda / rocm device memory (private cpu,
 * pinned or managed memory; the message says which, e.g. "t is not shared
 * memory (cpu memory of a private allocation); allocate it with
 * dlb_shared_alloc() ..."); DLB_E_UNSUPPORTED for device memory the
 * runtime cannot export (not one of its allocations, a tensor without
 * elements, a runtime without IPC); DLB_E_LAYOUT when t's elements leave
 * the shared region or the allocation; DLB_E_READONLY for a writable
 * export of memory imported read-only; the runtime's status when it is
 * missing or fails. A runtime without interprocess events (HIP before
 * ROCm 6) synchronises the device at export instead.
 * Nothing to release beyond *fd.
 */
DLB_API dlb_status dlb_share_export(const DLManagedTensorVersioned *t,
                                    void *buf, size_t cap, size_t *len,
                                    int *fd);

/*
 * Imports a handle written by dlb_share_export() (in any process of this
 * machine): buf (len bytes) and fd (-1 for device handles) are borrowed;
 * the descriptor is duplicated, so the caller still closes fd. flags: 0 or
 * one DLB_SHARE_PIN_* flag. Host memory is mapped MAP_SHARED, read-only
 * when the handle is read-only; the tensor is cpu (or cuda_host /
 * rocm_host when pinned) with the exporter's dtype, shape, strides and
 * flags, and writes through it are seen by every process. A process keeps
 * one descriptor and one mapping of a memory, however many tensors over
 * it it imports (read-only and writable imports apart), until the last of
 * them is released. Device memory is opened once per process and per
 * allocation (counted), and the call returns after the importer's device
 * waits for the exporter's work recorded at export.
 * Refusals, each with a message naming the field and value: DLB_E_HANDLE
 * for a truncated, oversized, foreign (magic), newer (format version) or
 * tampered handle (ndim, dtype, negative extents, strides or offset
 * reaching outside the memory, overflow, unknown flags), for a descriptor
 * that is not sealed shared memory (not a memfd, not sealed against
 * shrinking and growing, writable handle with a read-only descriptor), for
 * a file size that disagrees with the handle, and for a handle whose
 * identity differs from the one written in the memory (a handle replayed
 * with other memory); DLB_E_INVAL for NULL arguments or bad flags;
 * DLB_E_SYSTEM when mapping fails; the runtime's status for pinning or
 * device handles. New; release with dlb_tensor_release().
 */
DLB_API dlb_status dlb_share_import(const void *buf, size_t len, int fd,
                                    uint64_t flags,
                                    DLManagedTensorVersioned **out);

/*
 * Sends t's handle (and descriptor, as SCM_RIGHTS) as one message on the
 * connected, blocking Unix socket sock (stream, seqpacket or datagram),
 * without raising SIGPIPE. t and sock are borrowed; the descriptor made for the
 * message is closed before returning. The errors of dlb_share_export(),
 * DLB_E_SYSTEM when sending fails.
 */
DLB_API dlb_status dlb_share_send(int sock, const DLManagedTensorVersioned *t);

/*
 * Receives one message sent by dlb_share_send() on sock (borrowed) and
 * imports it with flags as dlb_share_import() does. Descriptors arrive
 * close-on-exec; every descriptor received is closed before returning,
 * also when the message is refused (more than one descriptor, a control
 * message cut short (MSG_CTRUNC), a message cut short, a handle that
 * fails import). On a stream socket the whole message is read before
 * it is judged, so that after a refusal the next message can be
 * received; only a handle whose length field is impossible ("it says it
 * is N bytes") leaves the stream where it cannot be followed: close the
 * connection then. DLB_E_STATE when
 * the peer closed the connection before a message; DLB_E_SYSTEM when
 * receiving fails, also when this process's descriptor table is full
 * (the kernel then drops the descriptor); the errors of
 * dlb_share_import(). sock must be
 * blocking. New; release with dlb_tensor_release().
 */
DLB_API dlb_status dlb_share_recv(int sock, uint64_t flags,
                                  DLManagedTensorVersioned **out);

DLB_END_DECLS

#endif /* DLBRIDGE_SHARE_H */
