/*
 * dlbridge/npy.h -- NumPy .npy files mapped as read-only tensors, without
 * copying.
 *
 * Format versions 1.0, 2.0 and 3.0 are read, in C or Fortran order, with the
 * dtypes NumPy writes for bool, signed and unsigned integers (1 to 8 bytes),
 * floats (2, 4 and 8 bytes) and complex numbers (8 and 16 bytes), in the
 * machine's byte order. Everything else is refused with a message naming the
 * field and the value: a bad magic string or version, a header that runs past
 * the end of the file or is not the dictionary NumPy writes, object,
 * structured, string and date dtypes, the other byte order, shapes whose
 * size overflows, data shorter than the shape needs, and data that does not
 * start at a multiple of its element's alignment.
 */
#ifndef DLBRIDGE_NPY_H
#define DLBRIDGE_NPY_H

#include "common.h"
#include "layout.h"
#include "status.h"

DLB_BEGIN_DECLS

/* What a .npy header says. */
typedef struct dlb_npy_header {
  int major;              /* format version: 1, 2 or 3 */
  int minor;              /* 0 */
  uint64_t data_offset;   /* where the data starts in the file, in bytes */
  uint64_t data_bytes;    /* bytes the shape and dtype need */
  int fortran_order;      /* 1 for column-major data, 0 for row-major */
  char descr[8];          /* the dtype as the file spells it, e.g. "<f4" */
  DLDataType dtype;       /* the same as a DLPack dtype */
  int32_t ndim;           /* the number of dimensions */
  int64_t shape[DLB_MAX_NDIM]; /* the extents; ndim of them are set */
} dlb_npy_header;

/*
 * Reads and checks the header of the .npy file at path (borrowed) into *out
 * (written only on success), including that the file holds data_bytes of
 * data after the header. The header is read, not mapped, so a file cut
 * shorter meanwhile is refused, never a SIGBUS. DLB_E_INVAL for NULL
 * arguments, a file that cannot be opened or read (with the system's
 * reason) or that ends before its header does, and malformed headers;
 * DLB_E_DTYPE for dtypes dlbridge does not map; DLB_E_UNSUPPORTED for the
 * other byte order; DLB_E_OVERFLOW for sizes that overflow; DLB_E_LAYOUT for
 * data shorter than the shape needs or misaligned.
 */
DLB_API dlb_status dlb_npy_read_header(const char *path, dlb_npy_header *out);

/* Flags for dlb_tensor_map_npy(): pin the mapping for GPU access, as
 * dlb_tensor_pin() does, for CUDA (the tensor is cuda_host) or ROCm
 * (rocm_host). At most one. */
#define DLB_NPY_PIN_CUDA 1u
#define DLB_NPY_PIN_ROCM 2u

/*
 * Maps the .npy file at path (borrowed) read-only and returns a tensor of
 * its data: flags READ_ONLY, device cpu (or the pinned kind), data the
 * first element (aligned as NumPy aligns it: 64 bytes into a page for the
 * files it writes) and byte_offset 0, strides for the file's order. The
 * file may be closed, renamed or deleted afterwards; the mapping lives
 * until the tensor and every view or share of it are released. Writing to
 * the file meanwhile changes what the tensor reads; cutting it shorter
 * (truncate) makes a read of the lost pages raise SIGBUS, as with any
 * mapped file: where another process may do that, read the file into
 * memory instead (the Python module's load_npy(mmap=False)). Refuses what
 * dlb_npy_read_header() refuses, with its statuses; DLB_E_INVAL for unknown
 * flags or both pin flags; pinning fails as dlb_tensor_pin() does (some
 * drivers refuse to register read-only memory). New; release with
 * dlb_tensor_release().
 */
DLB_API dlb_status dlb_tensor_map_npy(const char *path, unsigned flags,
                                      DLManagedTensorVersioned **out);

DLB_END_DECLS

#endif /* DLBRIDGE_NPY_H */
