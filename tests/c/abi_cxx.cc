// abi_cxx.cc -- the ABI header and the public API header compile as C++.
#include <cstddef>

#include "dlbridge.h"
#include "dlpack/dlpack.h"

static_assert(sizeof(DLTensor) == 48, "DLTensor is 48 bytes");
static_assert(offsetof(DLManagedTensorVersioned, dl_tensor) == 32,
              "dl_tensor at 32");
static_assert(sizeof(DLDeviceType) == 4, "DLDeviceType is 4 bytes");

extern "C" int dlb_test_abi_cxx_size(void);
extern "C" int dlb_test_abi_cxx_size(void) {
  return static_cast<int>(sizeof(DLManagedTensorVersioned));
}

// DLPACK_EXTERN_C is extern "C" under C++: test_abi.c calls this by its C
// name.
DLPACK_EXTERN_C int dlb_test_abi_cxx_extern_c(void);
DLPACK_EXTERN_C int dlb_test_abi_cxx_extern_c(void) { return 1; }
