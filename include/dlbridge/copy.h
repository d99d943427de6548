/*
 * dlbridge/copy.h -- copies between layouts (the CPU copy engine).
 */
#ifndef DLBRIDGE_COPY_H
#define DLBRIDGE_COPY_H

#include "common.h"
#include "status.h"

DLB_BEGIN_DECLS

/*
 * Copies every element of src into dst: same shape and dtype, any strides on
 * either side (negative and zero too; a dst with zero strides gets the last
 * value written, in row-major order). Both must be CPU-accessible memory.
 * Overlap is detected by byte span (dlb_tensor_byte_span): when the bytes
 * src and dst touch intersect, even without a shared element, src is first
 * copied to a temporary of numel * itemsize bytes (DLB_E_NOMEM when it
 * cannot be had), so dst gets the values src had before the call. A dst
 * describing exactly src's elements is left as it is. Packed sub-byte
 * types are refused (DLB_E_UNSUPPORTED) unless both are compact; then the
 * bits after the last element in dst's last byte are kept.
 * Large copies run on the copy thread pool. Both are borrowed.
 * DLB_E_LAYOUT for different shapes, DLB_E_DTYPE for different dtypes,
 * DLB_E_DEVICE for memory the CPU cannot access, and what
 * dlb_tensor_validate() returns for an invalid tensor (the message names
 * src or dst).
 */
DLB_API dlb_status dlb_copy(const DLTensor *src, const DLTensor *dst);

/*
 * Returns a compact row-major copy of src on device (the core copies into
 * cpu memory; other kinds need their runtime), flags IS_COPIED, keeping
 * READ_ONLY off. The data comes from dlb_tensor_alloc(); when either side
 * is memory the CPU cannot reach, the runtime backends copy it (their
 * status when none can). src is validated first; DLB_E_INVAL for src or
 * out NULL. src is borrowed. New; release with dlb_tensor_release().
 */
DLB_API dlb_status dlb_tensor_copy(const DLTensor *src, DLDevice device,
                                   DLManagedTensorVersioned **out);

/*
 * dlb_tensor_copy() of a managed tensor, reading what its flags say of the
 * data: sub-byte elements that take a byte each (IS_SUBBYTE_TYPE_PADDED)
 * are copied a byte each, and the copy carries the flag too. DLB_E_INVAL
 * for src NULL or unknown flags, DLB_E_VERSION for a major version other
 * than DLPACK_MAJOR_VERSION; otherwise as dlb_tensor_copy(). src is
 * borrowed. New; release with dlb_tensor_release().
 */
DLB_API dlb_status dlb_managed_copy(const DLManagedTensorVersioned *src,
                                    DLDevice device,
                                    DLManagedTensorVersioned **out);

/* Sets the number of threads large copies may use, the caller included
 * (1 = never spawn; 0 or negative = the CPUs this process may run on, from
 * sched_getaffinity; at most 64). The pool starts lazily, on the first
 * copy that wants it; a forked child starts its own. Safe from any thread. */
DLB_API void dlb_copy_set_threads(int threads);

/* Returns the number of threads large copies may use (1 to 64). */
DLB_API int dlb_copy_get_threads(void);

/* Names the instruction set the CPU copy kernels use: "avx512" (x86-64
 * CPUs with AVX-512 F, BW and VBMI), "avx2" (x86-64 CPUs with AVX2 but not
 * those), "sse2" (other x86-64 CPUs), "neon" (aarch64: the transposes of
 * units up to 8 bytes in NEON registers) or "portable" (plain C, any other
 * machine). The environment variable
 * DLBRIDGE_COPY_ISA, read once (by the first copy or call to this), can
 * lower it to one of those names, never raise it; other values are
 * ignored. Safe from any thread; a static string. */
DLB_API const char *dlb_copy_kernels(void);

/* Lets the CPU copy kernels use at most the named instruction set
 * ("portable", "sse2", "avx2" or "avx512", as dlb_copy_kernels() names
 * them; "neon" and "sse2" name the same level, 128-bit vectors, on any
 * machine), or lifts that limit for NULL; never more than the CPU and
 * DLBRIDGE_COPY_ISA allow. For comparing kernels in one process. Returns
 * DLB_E_INVAL, changing nothing, for any other name. Safe from any thread;
 * a copy running meanwhile may switch kernels between its planes, with
 * the same result. */
DLB_API dlb_status dlb_copy_set_kernels(const char *name);

DLB_END_DECLS

#endif /* DLBRIDGE_COPY_H */
