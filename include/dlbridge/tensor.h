/*
 * dlbridge/tensor.h -- managed tensors: allocate, wrap, adopt, convert,
 * release.
 *
 * Every DLManagedTensorVersioned that dlbridge creates points, through
 * manager_ctx, at a reference-counted owner of the data. Views and shares
 * of a tensor hold a reference to the same owner, so the data (and the
 * foreign deleter or release callback behind it) lives until the last of
 * them is released, and that release runs exactly once. The struct, shape
 * and strides of each tensor are one allocation. Tensors made here hold
 * host-type devices with device_id 0 (see dlb_device_normalize()).
 */
#ifndef DLBRIDGE_TENSOR_H
#define DLBRIDGE_TENSOR_H

#include "common.h"
#include "status.h"

DLB_BEGIN_DECLS

/* Alignment of data that dlbridge allocates on the CPU. */
#define DLB_DATA_ALIGNMENT 256

/* A callback that frees wrapped memory; ctx is the value given to
 * dlb_tensor_wrap(). It may run on any thread. */
typedef void (*dlb_release_fn)(void *ctx);

/*
 * Allocates a compact row-major tensor with uninitialised elements, version
 * DLPACK_MAJOR_VERSION.DLPACK_MINOR_VERSION, flags 0, strides set (even for
 * ndim 0 they are a valid pointer or NULL), byte_offset 0 and data aligned to
 * DLB_DATA_ALIGNMENT (never NULL, even when empty). The byte no element
 * fills whole (the last one of packed sub-byte elements that end inside it,
 * the one byte behind an empty tensor) is zero. shape is borrowed.
 * The core allocates cpu memory; other kinds need their runtime and return
 * DLB_E_UNSUPPORTED, DLB_E_NO_RUNTIME or DLB_E_NO_DEVICE when it is missing.
 * New; release with dlb_tensor_release().
 */
DLB_API dlb_status dlb_tensor_alloc(DLDevice device, DLDataType dtype,
                                    int32_t ndim, const int64_t *shape,
                                    DLManagedTensorVersioned **out);

/*
 * Wraps foreign memory described by desc (borrowed; shape and strides are
 * copied, NULL strides become compact strides, or 0 where those would
 * overflow int64_t, which only a tensor with no elements allows; the same
 * holds for adopt and the legacy conversions) as a managed tensor with the
 * given DLPACK_FLAG_BITMASK_* flags. When the last tensor sharing it is
 * released, release(ctx) runs once (release may be NULL). desc and flags
 * are validated as dlb_managed_validate() checks a managed tensor (unknown
 * flag bits are DLB_E_INVAL; sub-byte rules follow IS_SUBBYTE_TYPE_PADDED).
 * On failure release is not called: the caller still owns the memory.
 * New; release with dlb_tensor_release().
 */
DLB_API dlb_status dlb_tensor_wrap(const DLTensor *desc, uint64_t flags,
                                   dlb_release_fn release, void *ctx,
                                   DLManagedTensorVersioned **out);

/*
 * Adopts a versioned managed tensor made by anyone: checks it with
 * dlb_managed_validate(), then returns a dlbridge tensor for the same data,
 * same flags and the current version, whose last release calls foreign's
 * deleter exactly once. Takes ownership of foreign on success; on failure
 * foreign is untouched (the caller must still call its deleter). A dlbridge
 * tensor is returned as it is (*out == foreign).
 * New; release with dlb_tensor_release().
 */
DLB_API dlb_status dlb_tensor_adopt(DLManagedTensorVersioned *foreign,
                                    DLManagedTensorVersioned **out);

/*
 * dlb_tensor_adopt for a consumer that has already checked foreign with
 * dlb_managed_validate() (and not let it change since): the same result
 * without validating again. Checks only that neither argument is NULL; a
 * tensor that would not pass dlb_managed_validate() gives undefined
 * results. Takes ownership of foreign on success; on failure (out of
 * memory) foreign is untouched.
 * New; release with dlb_tensor_release().
 */
DLB_API dlb_status dlb_tensor_adopt_validated(
    DLManagedTensorVersioned *foreign, DLManagedTensorVersioned **out);

/*
 * Adopts a legacy managed tensor: validates it, returns a versioned tensor
 * with the given flags whose last release calls legacy's deleter exactly
 * once. Takes ownership of legacy on success; on failure it is untouched.
 * A legacy tensor that dlb_tensor_to_legacy() made from a dlbridge tensor
 * (dlb_legacy_is_ours()) gives that tensor back, with the given flags,
 * instead of wrapping it again; when its dl_tensor was rewritten since, the
 * result describes what the struct says now and shares the tensor's owner
 * (the description is trusted as a producer's is: the owner keeps no size
 * to bound it by).
 * Its sub-byte units are packed, rewritten or not: IS_SUBBYTE_TYPE_PADDED
 * with a sub-byte dtype is refused for it (DLB_E_LAYOUT).
 * Either way no round trip adds a deleter to a chain.
 * New; release with dlb_tensor_release().
 */
DLB_API dlb_status dlb_tensor_from_legacy(DLManagedTensor *legacy,
                                          uint64_t flags,
                                          DLManagedTensorVersioned **out);

/*
 * Converts t to a legacy managed tensor describing the same data; its
 * deleter releases t. The legacy struct cannot carry flags, so a READ_ONLY
 * tensor is refused (DLB_E_READONLY) and a padded sub-byte one too
 * (DLB_E_UNSUPPORTED). Takes ownership of t on success; on failure t is
 * untouched. New; release with dlb_legacy_release().
 */
DLB_API dlb_status dlb_tensor_to_legacy(DLManagedTensorVersioned *t,
                                        DLManagedTensor **out);

/*
 * Returns a new managed tensor describing the same data as t (same shape,
 * strides, flags), sharing its owner: the data lives until both are
 * released. t must be a dlbridge tensor (DLB_E_INVAL otherwise; adopt
 * foreign tensors first) that still passes dlb_managed_validate() (its
 * status otherwise). t is borrowed. New; release with
 * dlb_tensor_release().
 */
DLB_API dlb_status dlb_tensor_share(const DLManagedTensorVersioned *t,
                                    DLManagedTensorVersioned **out);

/*
 * Makes a tensor sharing t's owner (t a dlbridge tensor) that describes
 * desc, validated with flags: for memory of t that came back described by
 * someone else (a buffer exported from it, a struct a consumer rewrote), so
 * that it is not wrapped in an owner of its own that keeps t alive, a link
 * in a chain at each round trip. The caller vouches that desc lies in the
 * memory t's owner keeps alive. DLB_E_INVAL when t is not a dlbridge
 * tensor. Borrows t and desc. New; release with dlb_tensor_release().
 */
DLB_API dlb_status dlb_tensor_redescribe(const DLManagedTensorVersioned *t,
                                         const DLTensor *desc, uint64_t flags,
                                         DLManagedTensorVersioned **out);

/* Returns 1 when t was created by dlbridge (so views and shares of it are
 * possible), else 0. Accepts NULL (returns 0). */
DLB_API int dlb_tensor_is_ours(const DLManagedTensorVersioned *t);

/* Returns 1 when dlb_tensor_to_legacy() made t from a dlbridge tensor, so
 * dlb_tensor_from_legacy() takes it back without wrapping it, else 0.
 * Accepts NULL (returns 0). Borrows t. */
DLB_API int dlb_legacy_is_ours(const DLManagedTensor *t);

/* Calls t's deleter if it has one. Accepts NULL. */
DLB_API void dlb_tensor_release(DLManagedTensorVersioned *t);

/* Calls t's deleter if it has one. Accepts NULL. */
DLB_API void dlb_legacy_release(DLManagedTensor *t);

DLB_END_DECLS

#endif /* DLBRIDGE_TENSOR_H */
