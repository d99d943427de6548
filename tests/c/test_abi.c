/* test_abi.c -- every size, offset and value of the DLPack 1.3 ABI. */
#include <stddef.h>

#include "test.h"

#define CHECK_OFFSET(type, field, off) CHECK_EQ_INT(offsetof(type, field), off)

DLB_TEST(abi_version_macros) {
  CHECK_EQ_INT(DLPACK_MAJOR_VERSION, 1);
  CHECK_EQ_INT(DLPACK_MINOR_VERSION, 3);
}

DLB_TEST(abi_struct_sizes) {
  CHECK_EQ_INT(sizeof(DLPackVersion), 8);
  CHECK_EQ_INT(sizeof(DLDevice), 8);
  CHECK_EQ_INT(sizeof(DLDeviceType), 4);
  CHECK_EQ_INT(sizeof(DLDataType), 4);
  CHECK_EQ_INT(sizeof(DLTensor), 48);
  CHECK_EQ_INT(sizeof(DLManagedTensor), 64);
  CHECK_EQ_INT(sizeof(DLManagedTensorVersioned), 80);
  CHECK_EQ_INT(sizeof(DLPackExchangeAPIHeader), 16);
  CHECK_EQ_INT(sizeof(DLPackExchangeAPI), 56);
}

DLB_TEST(abi_offsets) {
  CHECK_OFFSET(DLPackVersion, major, 0);
  CHECK_OFFSET(DLPackVersion, minor, 4);
  CHECK_OFFSET(DLDevice, device_type, 0);
  CHECK_OFFSET(DLDevice, device_id, 4);
  CHECK_OFFSET(DLDataType, code, 0);
  CHECK_OFFSET(DLDataType, bits, 1);
  CHECK_OFFSET(DLDataType, lanes, 2);
  CHECK_OFFSET(DLTensor, data, 0);
  CHECK_OFFSET(DLTensor, device, 8);
  CHECK_OFFSET(DLTensor, ndim, 16);
  CHECK_OFFSET(DLTensor, dtype, 20);
  CHECK_OFFSET(DLTensor, shape, 24);
  CHECK_OFFSET(DLTensor, strides, 32);
  CHECK_OFFSET(DLTensor, byte_offset, 40);
  CHECK_OFFSET(DLManagedTensor, dl_tensor, 0);
  CHECK_OFFSET(DLManagedTensor, manager_ctx, 48);
  CHECK_OFFSET(DLManagedTensor, deleter, 56);
  CHECK_OFFSET(DLManagedTensorVersioned, version, 0);
  CHECK_OFFSET(DLManagedTensorVersioned, manager_ctx, 8);
  CHECK_OFFSET(DLManagedTensorVersioned, deleter, 16);
  CHECK_OFFSET(DLManagedTensorVersioned, flags, 24);
  CHECK_OFFSET(DLManagedTensorVersioned, dl_tensor, 32);
  CHECK_OFFSET(DLPackExchangeAPIHeader, version, 0);
  CHECK_OFFSET(DLPackExchangeAPIHeader, prev_api, 8);
  CHECK_OFFSET(DLPackExchangeAPI, header, 0);
  CHECK_OFFSET(DLPackExchangeAPI, managed_tensor_allocator, 16);
  CHECK_OFFSET(DLPackExchangeAPI, managed_tensor_from_py_object_no_sync, 24);
  CHECK_OFFSET(DLPackExchangeAPI, managed_tensor_to_py_object_no_sync, 32);
  CHECK_OFFSET(DLPackExchangeAPI, dltensor_from_py_object_no_sync, 40);
  CHECK_OFFSET(DLPackExchangeAPI, current_work_stream, 48);
}

DLB_TEST(abi_field_widths) {
  DLTensor t;
  DLManagedTensorVersioned m;
  CHECK_EQ_INT(sizeof t.ndim, 4);
  CHECK_EQ_INT(sizeof t.device.device_id, 4);
  CHECK_EQ_INT(sizeof t.byte_offset, 8);
  CHECK_EQ_INT(sizeof t.dtype.code, 1);
  CHECK_EQ_INT(sizeof t.dtype.bits, 1);
  CHECK_EQ_INT(sizeof t.dtype.lanes, 2);
  CHECK_EQ_INT(sizeof m.flags, 8);
  CHECK_EQ_INT(sizeof m.version.major, 4);
  /* Unsigned where the standard says so. */
  t.byte_offset = 0;
  t.byte_offset -= 1;
  CHECK(t.byte_offset > 0);
  t.dtype.lanes = 0;
  t.dtype.lanes--;
  CHECK_EQ_INT(t.dtype.lanes, 65535);
}

DLB_TEST(abi_device_types) {
  CHECK_EQ_INT(kDLCPU, 1);
  CHECK_EQ_INT(kDLCUDA, 2);
  CHECK_EQ_INT(kDLCUDAHost, 3);
  CHECK_EQ_INT(kDLOpenCL, 4);
  CHECK_EQ_INT(kDLVulkan, 7);
  CHECK_EQ_INT(kDLMetal, 8);
  CHECK_EQ_INT(kDLVPI, 9);
  CHECK_EQ_INT(kDLROCM, 10);
  CHECK_EQ_INT(kDLROCMHost, 11);
  CHECK_EQ_INT(kDLExtDev, 12);
  CHECK_EQ_INT(kDLCUDAManaged, 13);
  CHECK_EQ_INT(kDLOneAPI, 14);
  CHECK_EQ_INT(kDLWebGPU, 15);
  CHECK_EQ_INT(kDLHexagon, 16);
  CHECK_EQ_INT(kDLMAIA, 17);
  CHECK_EQ_INT(kDLTrn, 18);
}

DLB_TEST(abi_dtype_codes) {
  CHECK_EQ_INT(kDLInt, 0);
  CHECK_EQ_INT(kDLUInt, 1);
  CHECK_EQ_INT(kDLFloat, 2);
  CHECK_EQ_INT(kDLOpaqueHandle, 3);
  CHECK_EQ_INT(kDLBfloat, 4);
  CHECK_EQ_INT(kDLComplex, 5);
  CHECK_EQ_INT(kDLBool, 6);
  CHECK_EQ_INT(kDLFloat8_e3m4, 7);
  CHECK_EQ_INT(kDLFloat8_e4m3, 8);
  CHECK_EQ_INT(kDLFloat8_e4m3b11fnuz, 9);
  CHECK_EQ_INT(kDLFloat8_e4m3fn, 10);
  CHECK_EQ_INT(kDLFloat8_e4m3fnuz, 11);
  CHECK_EQ_INT(kDLFloat8_e5m2, 12);
  CHECK_EQ_INT(kDLFloat8_e5m2fnuz, 13);
  CHECK_EQ_INT(kDLFloat8_e8m0fnu, 14);
  CHECK_EQ_INT(kDLFloat6_e2m3fn, 15);
  CHECK_EQ_INT(kDLFloat6_e3m2fn, 16);
  CHECK_EQ_INT(kDLFloat4_e2m1fn, 17);
}

DLB_TEST(abi_flags) {
  CHECK_EQ_INT(DLPACK_FLAG_BITMASK_READ_ONLY, 1);
  CHECK_EQ_INT(DLPACK_FLAG_BITMASK_IS_COPIED, 2);
  CHECK_EQ_INT(DLPACK_FLAG_BITMASK_IS_SUBBYTE_TYPE_PADDED, 4);
}

/* The macro names upstream's header defines, with its meanings, so that
 * one build may include both headers (the include guard makes the second
 * a no-op). */
#define DLB_TEST_TEXT(...) #__VA_ARGS__
#define DLB_TEST_EXPANDED(...) DLB_TEST_TEXT(__VA_ARGS__)

DLB_TEST(abi_header_macros) {
#ifdef DLPACK_DLPACK_H_
  const int guard = 1;
#else
  const int guard = 0;
#endif
  CHECK_EQ_INT(guard, 1);
  /* Empty in C; `extern "C"` under C++ (abi_cxx.cc defines a function
   * with it that this file calls by its C name). */
  CHECK_STR(DLB_TEST_EXPANDED(DLPACK_EXTERN_C), "");
#ifdef _WIN32
  CHECK_STR(DLB_TEST_EXPANDED(DLPACK_DLL), "__declspec(dllimport)");
#else
  CHECK_STR(DLB_TEST_EXPANDED(DLPACK_DLL), "");
#endif
  /* Flags are unsigned, as upstream's 1UL shifts are: a mask of them
   * complemented clears exactly those bits. */
  CHECK(~DLPACK_FLAG_BITMASK_READ_ONLY > 0);
}

/* Compiled as C99 and as C++ by the build (abi_c99.c, abi_cxx.cc). */
int dlb_test_abi_c99_size(void);
int dlb_test_abi_cxx_size(void);
int dlb_test_abi_cxx_extern_c(void);

DLB_TEST(abi_other_languages) {
  CHECK_EQ_INT(dlb_test_abi_c99_size(), 80);
#ifdef DLB_TEST_HAVE_CXX
  CHECK_EQ_INT(dlb_test_abi_cxx_size(), 80);
  /* Links only when DLPACK_EXTERN_C gave the C++ definition C linkage. */
  CHECK_EQ_INT(dlb_test_abi_cxx_extern_c(), 1);
#endif
}
