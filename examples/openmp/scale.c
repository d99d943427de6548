/*
 * scale.c -- an OpenMP kernel that works in place on a tensor handed over
 * from Python through DLPack: every element of a float32 tensor of any
 * shape and strides is multiplied by a factor, the rows shared out between
 * threads. The memory must be readable by the CPU: cpu, pinned
 * (cuda_host, rocm_host) or CUDA managed memory, so with a GPU the same
 * buffer can be used by GPU code before and after, without a copy.
 *
 * Built as a shared library (cc -shared -fPIC -fopenmp); scale.py shows the
 * Python side.
 */
#include <stdint.h>

#include "dlpack/dlpack.h"

/* Returns 0, or -1 when m is not of DLPack major version 1 (past flags its
 * fields may lie elsewhere, so none of them is read), or its tensor is not
 * CPU-readable float32 or is read-only. */
int scale_inplace(DLManagedTensorVersioned *m, float factor) {
  if (m->version.major != DLPACK_MAJOR_VERSION) return -1;
  const DLTensor *t = &m->dl_tensor;
  DLDeviceType d = t->device.device_type;
  if ((d != kDLCPU && d != kDLCUDAHost && d != kDLROCMHost &&
       d != kDLCUDAManaged) ||
      t->dtype.code != kDLFloat || t->dtype.bits != 32 || t->dtype.lanes != 1 ||
      (m->flags & DLPACK_FLAG_BITMASK_READ_ONLY) != 0)
    return -1;
  int64_t n = 1, inner = 1, inner_stride = 1;
  for (int32_t i = 0; i < t->ndim; i++) n *= t->shape[i];
  if (t->ndim > 0) {
    inner = t->shape[t->ndim - 1];
    inner_stride = t->strides != NULL ? t->strides[t->ndim - 1] : 1;
  }
  if (n == 0) return 0;
  int64_t rows = n / inner;
  float *base = (float *)((char *)t->data + t->byte_offset);
#pragma omp parallel for schedule(static)
  for (int64_t r = 0; r < rows; r++) {
    /* The offset of row r: its index in each outer dimension times that
     * dimension's stride (compact row-major when strides is NULL). */
    int64_t off = 0, rem = r, step = 1;
    for (int32_t i = t->ndim - 2; i >= 0; i--) {
      int64_t idx = rem % t->shape[i];
      rem /= t->shape[i];
      int64_t stride = t->strides != NULL ? t->strides[i] : step * inner;
      if (t->strides == NULL) step *= t->shape[i];
      off += idx * stride;
    }
    for (int64_t c = 0; c < inner; c++) base[off + c * inner_stride] *= factor;
  }
  return 0;
}
