/*
 * dlbridge/dtype.h -- element types: names, checks and sizes.
 *
 * Names: "bool", "int8" "int16" "int32" "int64", "uint8" ... "uint64",
 * "float16" "float32" "float64", "bfloat16", "complex64" "complex128",
 * "float8_e3m4" "float8_e4m3" "float8_e4m3b11fnuz" "float8_e4m3fn"
 * "float8_e4m3fnuz" "float8_e5m2" "float8_e5m2fnuz" "float8_e8m0fnu",
 * "float6_e2m3fn" "float6_e3m2fn", "float4_e2m1fn", "handle" (an opaque
 * pointer-sized value). A vector type appends "xN": "float32x4".
 */
#ifndef DLBRIDGE_DTYPE_H
#define DLBRIDGE_DTYPE_H

#include "common.h"
#include "status.h"

DLB_BEGIN_DECLS

/* Longest text dlb_dtype_format() writes, with its terminating NUL. */
#define DLB_DTYPE_NAME_MAX 32

/* Parses a type name into *out. Widths other than those listed above parse
 * when dlb_dtype_check allows them ("int4", "uint1", "float8", "complex32");
 * "handle" is the pointer size. Numbers are decimal without sign or leading
 * zeros. DLB_E_DTYPE for an unknown name, a type dlb_dtype_check refuses or
 * lanes outside 1..65535; DLB_E_INVAL when name or out is NULL. */
DLB_API dlb_status dlb_dtype_parse(const char *name, DLDataType *out);

/* Writes the name of dtype into buf (size bytes); dlb_dtype_parse reads it
 * back. Lanes 1 has no "x1". DLB_E_DTYPE when dtype is not valid (see
 * dlb_dtype_check; buf untouched), DLB_E_INVAL when buf is NULL or too small
 * (then buf holds "" if size > 0). */
DLB_API dlb_status dlb_dtype_format(DLDataType dtype, char *buf, size_t size);

/*
 * Checks that dtype is one DLPack 1.3 defines: a known code, lanes >= 1,
 * bits >= 1, and bits allowed for the code (int/uint: 1..64 as 1,2,4,8,16,
 * 32,64; float: 16,32,64 (and 8 accepted for producers that use it);
 * bfloat: 16; complex: 32,64,128; bool: 8; handle: 64 or pointer size;
 * float8 codes: 8; float6: 6; float4: 4). Sub-byte element types (bits *
 * lanes < 8 or not a multiple of 8) must have lanes == 1. DLB_E_DTYPE with a
 * message naming the field otherwise.
 */
DLB_API dlb_status dlb_dtype_check(DLDataType dtype);

/* Returns 1 when a and b are the same type, else 0. */
DLB_API int dlb_dtype_equal(DLDataType a, DLDataType b);

/* Returns the bits of one element: bits * lanes. */
DLB_API uint32_t dlb_dtype_bits(DLDataType dtype);

/* Returns 1 when one element occupies less than or not a whole number of
 * bytes (bits * lanes % 8 != 0), else 0. */
DLB_API int dlb_dtype_is_subbyte(DLDataType dtype);

/* Returns the bytes one element occupies when elements are byte-aligned:
 * ceil(bits * lanes / 8). This is also the stride unit of padded sub-byte
 * tensors. */
DLB_API size_t dlb_dtype_itemsize(DLDataType dtype);

/*
 * Stores in *out the bytes that count compact elements occupy: with
 * padded != 0 (DLPACK_FLAG_BITMASK_IS_SUBBYTE_TYPE_PADDED) or a byte-sized
 * type, count * itemsize; for packed sub-byte types, ceil(count * bits / 8).
 * DLB_E_INVAL for count < 0 or out NULL, DLB_E_DTYPE when dtype fails
 * dlb_dtype_check, DLB_E_OVERFLOW when the result exceeds INT64_MAX.
 */
DLB_API dlb_status dlb_dtype_storage_bytes(DLDataType dtype, int64_t count,
                                           int padded, int64_t *out);

DLB_END_DECLS

#endif /* DLBRIDGE_DTYPE_H */
