/*
 * dlpack.h -- the DLPack 1.3 ABI, as implemented by dlbridge.
 *
 * Written for dlbridge from the published DLPack 1.3 specification. The
 * include guard, macro names and every type, field and enumerator name match
 * the upstream header, so a translation unit may include either (or both) and
 * see one definition. Field order, widths and enumerator values are ABI:
 * never change them.
 */
#ifndef DLPACK_DLPACK_H_
#define DLPACK_DLPACK_H_

/* Everything declared here has C linkage under C++. */
#ifndef DLPACK_EXTERN_C
#ifdef __cplusplus
#define DLPACK_EXTERN_C extern "C"
#else
#define DLPACK_EXTERN_C
#endif
#endif

/* The major version: a consumer may only touch the deleter of a tensor whose
 * major version differs from its own. */
#define DLPACK_MAJOR_VERSION 1
/* The minor version: a newer minor only adds enumerators. */
#define DLPACK_MINOR_VERSION 3

/* Symbol import/export decoration for Windows DLLs; empty elsewhere. */
#ifdef _WIN32
#ifdef DLPACK_EXPORTS
#define DLPACK_DLL __declspec(dllexport)
#else
#define DLPACK_DLL __declspec(dllimport)
#endif
#else
#define DLPACK_DLL
#endif

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* A DLPack ABI version. 8 bytes. */
typedef struct {
  uint32_t major; /* incompatible ABI changes */
  uint32_t minor; /* compatible additions */
} DLPackVersion;

/*
 * The kind of memory a tensor's data lives in. Stored as a C enum (4 bytes).
 * Values 5 and 6 are unused; values are never renumbered.
 */
#ifdef __cplusplus
typedef enum : int32_t {
#else
typedef enum {
#endif
  /* Ordinary host memory. device_id is 0. */
  kDLCPU = 1,
  /* CUDA device memory; device_id is the GPU ordinal. */
  kDLCUDA = 2,
  /* Page-locked host memory usable by every CUDA device: allocated pinned
   * (cudaMallocHost / cuMemHostAlloc) or ordinary memory pinned later with
   * cudaHostRegister / cuMemHostRegister (it needs no other type: once
   * unregistered it is kDLCPU again). device_id is 0. CPU-readable. */
  kDLCUDAHost = 3,
  /* OpenCL device memory. */
  kDLOpenCL = 4,
  /* Vulkan buffer. */
  kDLVulkan = 7,
  /* Metal buffer (Apple). */
  kDLMetal = 8,
  /* Verilog simulator buffer. */
  kDLVPI = 9,
  /* ROCm / HIP device memory; device_id is the GPU ordinal. */
  kDLROCM = 10,
  /* Page-locked host memory for ROCm (hipHostMalloc or hipHostRegister).
   * device_id is 0. CPU-readable. */
  kDLROCMHost = 11,
  /* Reserved for extension devices. */
  kDLExtDev = 12,
  /* CUDA managed (unified) memory (cudaMallocManaged). Not tied to one GPU:
   * device_id is 0. CPU-readable. */
  kDLCUDAManaged = 13,
  /* Unified shared memory of oneAPI (SYCL). */
  kDLOneAPI = 14,
  /* WebGPU buffer. */
  kDLWebGPU = 15,
  /* Qualcomm Hexagon DSP. */
  kDLHexagon = 16,
  /* Microsoft MAIA. */
  kDLMAIA = 17,
  /* AWS Trainium. */
  kDLTrn = 18,
} DLDeviceType;

/* Where a tensor's data lives. 8 bytes. */
typedef struct {
  DLDeviceType device_type;
  /* The device ordinal for device memory; 0 for kDLCPU, kDLCUDAHost,
   * kDLROCMHost and kDLCUDAManaged. */
  int32_t device_id;
} DLDevice;

/* The kind of number an element holds; stored in DLDataType.code (uint8_t). */
typedef enum {
  kDLInt = 0U,            /* signed two's complement integer */
  kDLUInt = 1U,           /* unsigned integer */
  kDLFloat = 2U,          /* IEEE 754 binary floating point */
  kDLOpaqueHandle = 3U,   /* an opaque pointer-sized handle */
  kDLBfloat = 4U,         /* bfloat16 */
  kDLComplex = 5U,        /* two floats, real then imaginary; bits count both */
  kDLBool = 6U,           /* boolean stored in 8 bits */
  kDLFloat8_e3m4 = 7U,
  kDLFloat8_e4m3 = 8U,
  kDLFloat8_e4m3b11fnuz = 9U,
  kDLFloat8_e4m3fn = 10U,
  kDLFloat8_e4m3fnuz = 11U,
  kDLFloat8_e5m2 = 12U,
  kDLFloat8_e5m2fnuz = 13U,
  kDLFloat8_e8m0fnu = 14U,
  kDLFloat6_e2m3fn = 15U, /* bits must be 6 */
  kDLFloat6_e3m2fn = 16U, /* bits must be 6 */
  kDLFloat4_e2m1fn = 17U, /* bits must be 4 */
} DLDataTypeCode;

/*
 * The element type. 4 bytes. Examples: float32 is {kDLFloat, 32, 1};
 * bool is {kDLBool, 8, 1}; complex64 is {kDLComplex, 64, 1}; a float32x4
 * vector element is {kDLFloat, 32, 4}.
 */
typedef struct {
  uint8_t code;   /* a DLDataTypeCode */
  uint8_t bits;   /* bits of one lane */
  uint16_t lanes; /* lanes of a vector element; 1 for scalars */
} DLDataType;

/*
 * A tensor: a view of memory owned elsewhere. 48 bytes.
 * The first element is at (char *)data + byte_offset. data may be NULL only
 * when the tensor has no elements.
 */
typedef struct {
  /* Base address; for device memory an address on that device. Alignment
   * of 256 bytes is recommended, never guaranteed. */
  void *data;
  DLDevice device;
  /* Number of dimensions; 0 for a scalar. */
  int32_t ndim;
  DLDataType dtype;
  /* ndim extents. May be NULL when ndim == 0. */
  int64_t *shape;
  /* ndim strides counted in elements, not bytes. Producers from 1.2 on
   * must set them when ndim != 0; consumers must read NULL as compact
   * row-major (older producers). */
  int64_t *strides;
  /* Bytes from data to the first element. */
  uint64_t byte_offset;
} DLTensor;

/*
 * The legacy (pre-1.0, unversioned) managed tensor. 64 bytes. Exchanged in a
 * PyCapsule named "dltensor".
 */
typedef struct DLManagedTensor {
  DLTensor dl_tensor;
  /* The producer's context; opaque to the consumer. */
  void *manager_ctx;
  /* Frees the tensor and this struct. May be NULL; otherwise called
   * exactly once, by the consumer, when it is done. */
  void (*deleter)(struct DLManagedTensor *self);
} DLManagedTensor;

/* The data must not be written through this tensor. */
#define DLPACK_FLAG_BITMASK_READ_ONLY (1UL << 0UL)
/* The data was copied for this consumer, which now owns the only copy. */
#define DLPACK_FLAG_BITMASK_IS_COPIED (1UL << 1UL)
/* Sub-byte elements are each padded to a byte; without this flag they are
 * packed, the first element in the least significant bits. */
#define DLPACK_FLAG_BITMASK_IS_SUBBYTE_TYPE_PADDED (1UL << 2UL)

/*
 * The versioned managed tensor (DLPack >= 1.0). 80 bytes. Exchanged in a
 * PyCapsule named "dltensor_versioned". The fields up to and including
 * flags are frozen for every future version; a consumer that does not
 * support version.major may only call the deleter.
 */
struct DLManagedTensorVersioned {
  DLPackVersion version;
  void *manager_ctx;
  /* Frees the tensor and this struct. May be NULL; otherwise called
   * exactly once. */
  void (*deleter)(struct DLManagedTensorVersioned *self);
  /* DLPACK_FLAG_BITMASK_* bits; 0 by default. */
  uint64_t flags;
  DLTensor dl_tensor;
};
typedef struct DLManagedTensorVersioned DLManagedTensorVersioned;

/* ---------------------------------------------------------------------
 * The C exchange API (DLPack 1.2; discovered as in 1.3).
 *
 * A producer type publishes one static, process-lifetime DLPackExchangeAPI
 * table: from 1.3 as a PyCapsule named "dlpack_exchange_api" in the type
 * attribute __dlpack_c_exchange_api__ (1.2: the table's address as an int in
 * __c_dlpack_exchange_api__). Every function returns 0 on success and -1 on
 * failure with a Python exception set (the caller holds the GIL).
 * ------------------------------------------------------------------- */

/* Allocates a new tensor like prototype (only dtype, ndim, shape and device
 * are read). On failure calls set_error(error_ctx, kind, message), where kind
 * names an exception type such as "MemoryError", and returns -1. */
typedef int (*DLPackManagedTensorAllocator)(
    DLTensor *prototype, DLManagedTensorVersioned **out, void *error_ctx,
    void (*SetError)(void *error_ctx, const char *kind, const char *message));

/* Exports py_object (a PyObject *) as a new owning managed tensor, without
 * any stream synchronization. */
typedef int (*DLPackManagedTensorFromPyObjectNoSync)(
    void *py_object, DLManagedTensorVersioned **out);

/* Wraps tensor as a new Python object of the producer's array type (a new
 * reference in *out_py_object). Steals tensor, errors included. */
typedef int (*DLPackManagedTensorToPyObjectNoSync)(
    DLManagedTensorVersioned *tensor, void **out_py_object);

/* Fills out with a non-owning view of py_object, valid while the object
 * lives and is not resized. No synchronization. */
typedef int (*DLPackDLTensorFromPyObjectNoSync)(void *py_object,
                                                DLTensor *out);

/* Stores in *out_current_stream the stream the producer would use now for
 * that device (NULL for the CPU or the default stream). */
typedef int (*DLPackCurrentWorkStream)(DLDeviceType device_type,
                                       int32_t device_id,
                                       void **out_current_stream);

/* The table's header: its version and an optional older table. */
typedef struct DLPackExchangeAPIHeader {
  DLPackVersion version;
  /* A table of an earlier version, or NULL. */
  struct DLPackExchangeAPIHeader *prev_api;
} DLPackExchangeAPIHeader;

/* The exchange table. Only dltensor_from_py_object_no_sync may be NULL. */
typedef struct DLPackExchangeAPI {
  DLPackExchangeAPIHeader header;
  DLPackManagedTensorAllocator managed_tensor_allocator;
  DLPackManagedTensorFromPyObjectNoSync managed_tensor_from_py_object_no_sync;
  DLPackManagedTensorToPyObjectNoSync managed_tensor_to_py_object_no_sync;
  DLPackDLTensorFromPyObjectNoSync dltensor_from_py_object_no_sync;
  DLPackCurrentWorkStream current_work_stream;
} DLPackExchangeAPI;

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* DLPACK_DLPACK_H_ */
