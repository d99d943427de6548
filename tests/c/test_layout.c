/* test_layout.c -- validation and geometry of a DLTensor. */
#include "internal.h"
#include "test.h"

static const DLDataType F32 = {kDLFloat, 32, 1};
static const DLDataType F64 = {kDLFloat, 64, 1};
static const DLDataType U8 = {kDLUInt, 8, 1};
static const DLDataType I4 = {kDLInt, 4, 1};
static const DLDataType FP4 = {kDLFloat4_e2m1fn, 4, 1};
static const DLDataType FP6 = {kDLFloat6_e2m3fn, 6, 1};

static _Alignas(4096) char buf[8192];

/* A valid CPU tensor over buf; tests then break one field. */
static DLTensor tensor(DLDataType dtype, int32_t ndim, int64_t *shape,
                       int64_t *strides) {
  DLTensor t;
  memset(&t, 0, sizeof t);
  t.data = buf;
  t.device.device_type = kDLCPU;
  t.device.device_id = 0;
  t.ndim = ndim;
  t.dtype = dtype;
  t.shape = shape;
  t.strides = strides;
  t.byte_offset = 0;
  return t;
}

static DLManagedTensorVersioned managed(DLTensor t, uint64_t flags) {
  DLManagedTensorVersioned m;
  memset(&m, 0, sizeof m);
  m.version.major = DLPACK_MAJOR_VERSION;
  m.version.minor = DLPACK_MINOR_VERSION;
  m.flags = flags;
  m.dl_tensor = t;
  return m;
}

/* ---------------------------------------------------------------- numel */

DLB_TEST(layout_numel_values) {
  int64_t n = -1;
  CHECK_OK(dlb_shape_numel(0, NULL, &n));
  CHECK_EQ_INT(n, 1);
  int64_t s[] = {2, 3, 4};
  CHECK_OK(dlb_shape_numel(3, s, &n));
  CHECK_EQ_INT(n, 24);
  int64_t zero_big[] = {INT64_MAX, 0, INT64_MAX};
  CHECK_OK(dlb_shape_numel(3, zero_big, &n));
  CHECK_EQ_INT(n, 0);
  int64_t max1[] = {INT64_MAX, 1};
  CHECK_OK(dlb_shape_numel(2, max1, &n));
  CHECK_EQ_INT(n, INT64_MAX);
  /* 3037000499 squared is just below INT64_MAX. */
  int64_t root[] = {3037000499LL, 3037000499LL};
  CHECK_OK(dlb_shape_numel(2, root, &n));
  CHECK_EQ_INT(n, 3037000499LL * 3037000499LL);
  DLTensor t = tensor(F32, 3, s, NULL);
  CHECK_OK(dlb_tensor_numel(&t, &n));
  CHECK_EQ_INT(n, 24);
}

DLB_TEST(layout_numel_rejects) {
  int64_t n = -7;
  int64_t neg_after_zero[] = {0, -1};
  CHECK_STATUS(dlb_shape_numel(2, neg_after_zero, &n), DLB_E_LAYOUT);
  CHECK_ERROR_MENTIONS("shape[1] is -1");
  int64_t over[] = {INT64_MAX, 2};
  CHECK_STATUS(dlb_shape_numel(2, over, &n), DLB_E_OVERFLOW);
  CHECK_ERROR_MENTIONS("shape[1]");
  int64_t root1[] = {3037000500LL, 3037000500LL};
  CHECK_STATUS(dlb_shape_numel(2, root1, &n), DLB_E_OVERFLOW);
  CHECK_STATUS(dlb_shape_numel(-1, over, &n), DLB_E_LAYOUT);
  CHECK_ERROR_MENTIONS("ndim is -1; must be >= 0");
  CHECK_STATUS(dlb_shape_numel(65, over, &n), DLB_E_LAYOUT);
  CHECK_ERROR_MENTIONS("ndim is 65; at most 64");
  CHECK_STATUS(dlb_shape_numel(1, NULL, &n), DLB_E_LAYOUT);
  CHECK_ERROR_MENTIONS("shape is NULL");
  CHECK_STATUS(dlb_shape_numel(0, NULL, NULL), DLB_E_INVAL);
  CHECK_ERROR_MENTIONS("out");
  CHECK_STATUS(dlb_tensor_numel(NULL, &n), DLB_E_INVAL);
  CHECK_ERROR_MENTIONS("tensor is NULL");
  CHECK_EQ_INT(n, -7);
}

/* ------------------------------------------------------------ validator */

DLB_TEST(layout_validate_accepts_ordinary_tensors) {
  int64_t s[] = {2, 3};
  int64_t c[] = {3, 1};
  DLTensor t = tensor(F32, 2, s, c);
  CHECK_OK(dlb_tensor_validate(&t));
  t.strides = NULL;
  CHECK_OK(dlb_tensor_validate(&t));
  /* A scalar may have NULL shape and strides. */
  t = tensor(F64, 0, NULL, NULL);
  CHECK_OK(dlb_tensor_validate(&t));
  /* Host-type memory with a stray device_id, and device memory of any id. */
  t = tensor(F32, 2, s, c);
  t.device.device_type = kDLCUDAHost;
  t.device.device_id = 3;
  CHECK_OK(dlb_tensor_validate(&t));
  t.device.device_type = kDLCUDA;
  t.device.device_id = 7;
  CHECK_OK(dlb_tensor_validate(&t));
  t.device.device_type = kDLTrn;
  CHECK_OK(dlb_tensor_validate(&t));
  DLDataType boolean = {kDLBool, 8, 1}, vec = {kDLFloat, 32, 4};
  t = tensor(boolean, 2, s, c);
  CHECK_OK(dlb_tensor_validate(&t));
  t.dtype = vec;
  CHECK_OK(dlb_tensor_validate(&t));
}

DLB_TEST(layout_validate_accepts_boundaries) {
  /* 64 dimensions is the limit, not past it. */
  int64_t s64[64], st64[64];
  for (int i = 0; i < 64; i++) {
    s64[i] = 1;
    st64[i] = 1000 + i;
  }
  s64[10] = 2;
  st64[10] = 1;
  DLTensor t = tensor(F32, 64, s64, st64);
  CHECK_OK(dlb_tensor_validate(&t));
  t.strides = NULL;
  CHECK_OK(dlb_tensor_validate(&t));

  /* INT64_MAX bytes in all: the largest span there is. The address is
   * chosen so that data + span stays inside a 64-bit address space. */
  if (sizeof(uintptr_t) >= 8) {
    int64_t huge[] = {INT64_MAX};
    t = tensor(U8, 1, huge, NULL);
    t.data = (void *)(uintptr_t)4096;
    CHECK_OK(dlb_tensor_validate(&t));
    int64_t root[] = {3037000499LL, 3037000499LL};
    t = tensor(U8, 2, root, NULL);
    t.data = (void *)(uintptr_t)4096;
    CHECK_OK(dlb_tensor_validate(&t));
    int64_t f64max[] = {INT64_MAX / 8};
    t = tensor(F64, 1, f64max, NULL);
    t.data = (void *)(uintptr_t)4096;
    CHECK_OK(dlb_tensor_validate(&t));
  }
}

DLB_TEST(layout_validate_accepts_empty_tensors) {
  /* No elements: NULL data and nonsense strides are fine. */
  int64_t s[] = {INT64_MAX, 0, 5};
  int64_t wild[] = {INT64_MAX, INT64_MIN, -5};
  DLTensor t = tensor(F64, 3, s, wild);
  t.data = NULL;
  CHECK_OK(dlb_tensor_validate(&t));
  t.byte_offset = 4096;
  CHECK_OK(dlb_tensor_validate(&t));
  t.dtype = I4;
  CHECK_OK(dlb_tensor_validate(&t));
}

DLB_TEST(layout_validate_accepts_negative_and_zero_strides) {
  int64_t s[] = {3};
  int64_t back[] = {-1};
  DLTensor t = tensor(F32, 1, s, back);
  t.byte_offset = 8; /* the last of three floats */
  CHECK_OK(dlb_tensor_validate(&t));
  int64_t s2[] = {5, 4};
  int64_t bcast[] = {0, 1};
  t = tensor(F32, 2, s2, bcast);
  CHECK_OK(dlb_tensor_validate(&t));
  int64_t all0[] = {0, 0};
  t.strides = all0;
  CHECK_OK(dlb_tensor_validate(&t));
}

DLB_TEST(layout_validate_rejects_null_and_ndim) {
  CHECK_STATUS(dlb_tensor_validate(NULL), DLB_E_INVAL);
  CHECK_ERROR_MENTIONS("tensor is NULL");
  int64_t s[65];
  for (int i = 0; i < 65; i++) s[i] = 1;
  DLTensor t = tensor(F32, 65, s, NULL);
  CHECK_STATUS(dlb_tensor_validate(&t), DLB_E_LAYOUT);
  CHECK_ERROR_MENTIONS("ndim is 65; at most 64");
  t.ndim = -1;
  CHECK_STATUS(dlb_tensor_validate(&t), DLB_E_LAYOUT);
  CHECK_ERROR_MENTIONS("ndim is -1");
  t.ndim = INT32_MIN;
  CHECK_STATUS(dlb_tensor_validate(&t), DLB_E_LAYOUT);
  CHECK_ERROR_MENTIONS("ndim");
}

DLB_TEST(layout_validate_rejects_bad_shapes) {
  DLTensor t = tensor(F32, 2, NULL, NULL);
  CHECK_STATUS(dlb_tensor_validate(&t), DLB_E_LAYOUT);
  CHECK_ERROR_MENTIONS("shape is NULL with ndim 2");
  int64_t neg[] = {2, 3, -1};
  t = tensor(F32, 3, neg, NULL);
  CHECK_STATUS(dlb_tensor_validate(&t), DLB_E_LAYOUT);
  CHECK_ERROR_MENTIONS("shape[2] is -1");
  /* A zero extent does not excuse a negative one. */
  int64_t zneg[] = {0, INT64_MIN};
  t = tensor(F32, 2, zneg, NULL);
  t.data = NULL;
  CHECK_STATUS(dlb_tensor_validate(&t), DLB_E_LAYOUT);
  CHECK_ERROR_MENTIONS("shape[1]");
  int64_t over[] = {1LL << 32, 1LL << 30, 2};
  t = tensor(U8, 3, over, NULL);
  CHECK_STATUS(dlb_tensor_validate(&t), DLB_E_OVERFLOW);
  CHECK_ERROR_MENTIONS("shape[2]");
  CHECK_ERROR_MENTIONS("element count");
  /* An overflowing count is refused even when the strides stay small. */
  int64_t zero_strides[] = {0, 0, 0};
  t.strides = zero_strides;
  CHECK_STATUS(dlb_tensor_validate(&t), DLB_E_OVERFLOW);
  CHECK_ERROR_MENTIONS("shape[2]");
}

DLB_TEST(layout_validate_rejects_bad_dtypes) {
  int64_t s[] = {4};
  DLTensor t = tensor(F32, 1, s, NULL);
  t.dtype.lanes = 0;
  CHECK_STATUS(dlb_tensor_validate(&t), DLB_E_DTYPE);
  CHECK_ERROR_MENTIONS("dtype.lanes is 0");
  t.dtype = F32;
  t.dtype.bits = 0;
  CHECK_STATUS(dlb_tensor_validate(&t), DLB_E_DTYPE);
  CHECK_ERROR_MENTIONS("dtype.bits is 0");
  t.dtype.code = 18;
  t.dtype.bits = 32;
  CHECK_STATUS(dlb_tensor_validate(&t), DLB_E_DTYPE);
  CHECK_ERROR_MENTIONS("dtype.code is 18");
  t.dtype.code = 255;
  CHECK_STATUS(dlb_tensor_validate(&t), DLB_E_DTYPE);
  CHECK_ERROR_MENTIONS("dtype.code is 255");
  DLDataType bool16 = {kDLBool, 16, 1};
  t.dtype = bool16;
  CHECK_STATUS(dlb_tensor_validate(&t), DLB_E_DTYPE);
  CHECK_ERROR_MENTIONS("dtype.bits is 16");
  DLDataType fp6_8 = {kDLFloat6_e3m2fn, 8, 1};
  t.dtype = fp6_8;
  CHECK_STATUS(dlb_tensor_validate(&t), DLB_E_DTYPE);
  CHECK_ERROR_MENTIONS("dtype.bits is 8");
  DLDataType fp4_8 = {kDLFloat4_e2m1fn, 8, 1};
  t.dtype = fp4_8;
  CHECK_STATUS(dlb_tensor_validate(&t), DLB_E_DTYPE);
  CHECK_ERROR_MENTIONS("dtype.bits is 8");
  DLDataType fp4_6 = {kDLFloat4_e2m1fn, 6, 1};
  t.dtype = fp4_6;
  CHECK_STATUS(dlb_tensor_validate(&t), DLB_E_DTYPE);
  CHECK_ERROR_MENTIONS("dtype.bits is 6");
  /* Widths between the allowed ones, for every integer and float code and
   * with several lanes: each is refused, whatever the lanes make of it. */
  static const uint8_t odd_bits[] = {9, 12, 15, 24, 31, 48, 63};
  for (uint8_t code = kDLInt; code <= kDLFloat; code++)
    for (size_t i = 0; i < sizeof odd_bits; i++)
      for (uint16_t lanes = 1; lanes <= 8; lanes *= 2) {
        DLDataType odd = {code, odd_bits[i], lanes};
        t.dtype = odd;
        CHECK_STATUS(dlb_tensor_validate(&t), DLB_E_DTYPE);
        CHECK_ERROR_MENTIONS("dtype.bits is");
      }
}

DLB_TEST(layout_validate_rejects_bad_devices) {
  int64_t s[] = {4};
  DLTensor t = tensor(F32, 1, s, NULL);
  t.device.device_type = (DLDeviceType)5;
  CHECK_STATUS(dlb_tensor_validate(&t), DLB_E_DEVICE);
  CHECK_ERROR_MENTIONS("device.device_type is 5");
  t.device.device_type = (DLDeviceType)19;
  CHECK_STATUS(dlb_tensor_validate(&t), DLB_E_DEVICE);
  CHECK_ERROR_MENTIONS("device.device_type is 19");
  t.device.device_type = (DLDeviceType)0;
  CHECK_STATUS(dlb_tensor_validate(&t), DLB_E_DEVICE);
  CHECK_ERROR_MENTIONS("device.device_type is 0");
  t.device.device_type = kDLCUDA;
  t.device.device_id = -1;
  CHECK_STATUS(dlb_tensor_validate(&t), DLB_E_DEVICE);
  CHECK_ERROR_MENTIONS("device.device_id is -1");
  t.device.device_type = kDLCPU;
  t.device.device_id = INT32_MIN;
  CHECK_STATUS(dlb_tensor_validate(&t), DLB_E_DEVICE);
  CHECK_ERROR_MENTIONS("device.device_id");
}

DLB_TEST(layout_validate_rejects_stride_overflow) {
  /* The element span fits (2^62 + 1) but four bytes per element do not. */
  int64_t s[] = {2, 2};
  int64_t st[] = {INT64_MAX / 2, 1};
  DLTensor t = tensor(F32, 2, s, st);
  CHECK_STATUS(dlb_tensor_validate(&t), DLB_E_OVERFLOW);
  CHECK_ERROR_MENTIONS("strides");
  /* (extent - 1) * stride itself overflows. */
  int64_t s3[] = {3};
  int64_t big[] = {INT64_MAX / 2 + 1};
  t = tensor(U8, 1, s3, big);
  CHECK_STATUS(dlb_tensor_validate(&t), DLB_E_OVERFLOW);
  CHECK_ERROR_MENTIONS("strides[0]");
  /* The sum of two fitting terms overflows. */
  int64_t s22[] = {2, 2};
  int64_t two[] = {INT64_MAX / 2 + 1, INT64_MAX / 2 + 1};
  t = tensor(U8, 2, s22, two);
  CHECK_STATUS(dlb_tensor_validate(&t), DLB_E_OVERFLOW);
  CHECK_ERROR_MENTIONS("strides[1]");
  /* The same downwards: two equal negative terms, the later one named. */
  int64_t two_down[] = {INT64_MIN / 2 - 1, INT64_MIN / 2 - 1};
  t = tensor(U8, 2, s22, two_down);
  CHECK_STATUS(dlb_tensor_validate(&t), DLB_E_OVERFLOW);
  CHECK_ERROR_MENTIONS("strides[1]");
  /* stride * itemsize overflows. */
  int64_t s2[] = {2};
  int64_t eighth[] = {INT64_MAX / 8 + 1};
  t = tensor(F64, 1, s2, eighth);
  CHECK_STATUS(dlb_tensor_validate(&t), DLB_E_OVERFLOW);
  CHECK_ERROR_MENTIONS("strides (given) reach elements 0..1152921504606846976");
  /* The same downwards. */
  int64_t down[] = {INT64_MIN / 8 - 1};
  t.strides = down;
  CHECK_STATUS(dlb_tensor_validate(&t), DLB_E_OVERFLOW);
  CHECK_ERROR_MENTIONS("strides");
  /* Both ends fit in int64, the width between them does not. */
  int64_t most_neg[] = {INT64_MIN};
  t = tensor(U8, 1, s2, most_neg);
  CHECK_STATUS(dlb_tensor_validate(&t), DLB_E_OVERFLOW);
  CHECK_ERROR_MENTIONS("strides");
  /* Compact strides implied by NULL overflow as bytes. */
  int64_t f64over[] = {INT64_MAX / 8 + 1};
  t = tensor(F64, 1, f64over, NULL);
  CHECK_STATUS(dlb_tensor_validate(&t), DLB_E_OVERFLOW);
  CHECK_ERROR_MENTIONS("strides (NULL, compact) reach elements "
                       "0..1152921504606846975");
}

DLB_TEST(layout_validate_rejects_offset_and_address_overflow) {
  int64_t s[] = {4};
  DLTensor t = tensor(U8, 1, s, NULL);
  t.byte_offset = (uint64_t)INT64_MAX - 2;
  CHECK_STATUS(dlb_tensor_validate(&t), DLB_E_OVERFLOW);
  CHECK_ERROR_MENTIONS("byte_offset");
  t.byte_offset = (uint64_t)INT64_MAX + 1;
  CHECK_STATUS(dlb_tensor_validate(&t), DLB_E_OVERFLOW);
  CHECK_ERROR_MENTIONS("byte_offset is 9223372036854775808");
  t.byte_offset = UINT64_MAX;
  CHECK_STATUS(dlb_tensor_validate(&t), DLB_E_OVERFLOW);
  CHECK_ERROR_MENTIONS("byte_offset");

  /* Past the top of the address space. */
  int64_t s32[] = {32};
  t = tensor(U8, 1, s32, NULL);
  t.data = (void *)(UINTPTR_MAX - 15);
  CHECK_STATUS(dlb_tensor_validate(&t), DLB_E_OVERFLOW);
  CHECK_ERROR_MENTIONS("data");
  /* Sixteen bytes end exactly at the top: one past the last byte would
   * wrap to 0, so that too is refused; fifteen fit. */
  int64_t s16[] = {16}, s15[] = {15};
  t.shape = s16;
  CHECK_STATUS(dlb_tensor_validate(&t), DLB_E_OVERFLOW);
  t.shape = s15;
  CHECK_OK(dlb_tensor_validate(&t));
  /* byte_offset alone wraps, even with no elements. */
  int64_t s0[] = {0};
  t.shape = s0;
  t.byte_offset = 64;
  CHECK_STATUS(dlb_tensor_validate(&t), DLB_E_OVERFLOW);
  CHECK_ERROR_MENTIONS("byte_offset");

  /* Below address 0 through a negative stride. */
  int64_t back[] = {-1};
  t = tensor(U8, 1, s32, back);
  t.data = (void *)(uintptr_t)16;
  CHECK_STATUS(dlb_tensor_validate(&t), DLB_E_OVERFLOW);
  CHECK_ERROR_MENTIONS("data");
  t.byte_offset = 15; /* the lowest element is then at address 0 */
  CHECK_OK(dlb_tensor_validate(&t));
}

DLB_TEST(layout_validate_rejects_null_data) {
  int64_t s[] = {2, 3};
  DLTensor t = tensor(F32, 2, s, NULL);
  t.data = NULL;
  CHECK_STATUS(dlb_tensor_validate(&t), DLB_E_INVAL);
  CHECK_ERROR_MENTIONS("data is NULL with 6 elements");
  /* A scalar has one element. */
  t = tensor(F32, 0, NULL, NULL);
  t.data = NULL;
  CHECK_STATUS(dlb_tensor_validate(&t), DLB_E_INVAL);
  CHECK_STR(dlb_last_error(), "data is NULL with 1 element");
}

DLB_TEST(layout_validate_packed_subbyte_must_be_compact) {
  int64_t s[] = {2, 3};
  int64_t c[] = {3, 1}, f[] = {1, 2};
  DLTensor t = tensor(I4, 2, s, NULL);
  CHECK_OK(dlb_tensor_validate(&t));
  t.strides = c;
  CHECK_OK(dlb_tensor_validate(&t));
  t.byte_offset = 3; /* whole bytes: always on an element boundary */
  CHECK_OK(dlb_tensor_validate(&t));
  t.strides = f;
  CHECK_STATUS(dlb_tensor_validate(&t), DLB_E_LAYOUT);
  CHECK_ERROR_MENTIONS("strides[1] is 2");
  int64_t gap[] = {4, 1};
  t.strides = gap;
  t.dtype = FP4;
  CHECK_STATUS(dlb_tensor_validate(&t), DLB_E_LAYOUT);
  CHECK_ERROR_MENTIONS("strides[0] is 4");
  CHECK_ERROR_MENTIONS("(expected 3)");
  int64_t rev[] = {3, -1};
  t.strides = rev;
  t.dtype = FP6;
  CHECK_STATUS(dlb_tensor_validate(&t), DLB_E_LAYOUT);
  CHECK_ERROR_MENTIONS("strides[1] is -1");
  /* Size-1 dimensions may have any stride; empty tensors any strides. */
  int64_t s1[] = {2, 1, 3};
  int64_t odd[] = {3, 99, 1};
  t = tensor(FP4, 3, s1, odd);
  CHECK_OK(dlb_tensor_validate(&t));
  int64_t s0[] = {2, 0};
  t = tensor(I4, 2, s0, f);
  CHECK_OK(dlb_tensor_validate(&t));
}

/* ---------------------------------------------------- versioned tensors */

DLB_TEST(layout_managed_validate) {
  int64_t s[] = {2, 3};
  DLManagedTensorVersioned m = managed(tensor(F32, 2, s, NULL), 0);
  CHECK_OK(dlb_managed_validate(&m));
  m.version.minor = 99; /* a newer minor only adds enum values */
  CHECK_OK(dlb_managed_validate(&m));
  m.flags = DLPACK_FLAG_BITMASK_READ_ONLY | DLPACK_FLAG_BITMASK_IS_COPIED |
            DLPACK_FLAG_BITMASK_IS_SUBBYTE_TYPE_PADDED;
  CHECK_OK(dlb_managed_validate(&m));

  CHECK_STATUS(dlb_managed_validate(NULL), DLB_E_INVAL);
  CHECK_ERROR_MENTIONS("managed tensor is NULL");
  m.version.major = 2;
  CHECK_STATUS(dlb_managed_validate(&m), DLB_E_VERSION);
  CHECK_ERROR_MENTIONS("version.major is 2; this library reads 1");
  m.version.major = 0;
  CHECK_STATUS(dlb_managed_validate(&m), DLB_E_VERSION);
  CHECK_ERROR_MENTIONS("version.major is 0");
  /* A foreign major version: nothing past the deleter may be read, so the
   * version is refused before the (garbage) tensor is looked at. */
  m.version.major = 100;
  m.dl_tensor.ndim = 1000;
  CHECK_STATUS(dlb_managed_validate(&m), DLB_E_VERSION);
  m.version.major = 1;
  m.dl_tensor.ndim = 2;
  m.flags = 1u << 3;
  CHECK_STATUS(dlb_managed_validate(&m), DLB_E_INVAL);
  CHECK_ERROR_MENTIONS("flags is 0x8");
  m.flags = DLPACK_FLAG_BITMASK_READ_ONLY | (1ull << 63);
  CHECK_STATUS(dlb_managed_validate(&m), DLB_E_INVAL);
  CHECK_ERROR_MENTIONS("0x8000000000000000");
  /* The tensor's own rules apply. */
  m.flags = 0;
  m.dl_tensor.ndim = 65;
  CHECK_STATUS(dlb_managed_validate(&m), DLB_E_LAYOUT);
  CHECK_ERROR_MENTIONS("ndim is 65");
  m.dl_tensor.ndim = 2;
  m.dl_tensor.data = NULL;
  CHECK_STATUS(dlb_managed_validate(&m), DLB_E_INVAL);
  CHECK_ERROR_MENTIONS("data is NULL");
}

DLB_TEST(layout_managed_subbyte_follows_padded_flag) {
  int64_t s[] = {2, 3};
  int64_t f[] = {1, 2};
  DLManagedTensorVersioned m = managed(tensor(I4, 2, s, f), 0);
  CHECK_STATUS(dlb_managed_validate(&m), DLB_E_LAYOUT);
  CHECK_ERROR_MENTIONS("strides[1]");
  m.flags = DLPACK_FLAG_BITMASK_IS_SUBBYTE_TYPE_PADDED;
  CHECK_OK(dlb_managed_validate(&m));

  /* Padded elements take a byte each: 16 int4 elements need 16 bytes, packed
   * only 8. Placed 10 bytes below the top of the address space, only the
   * packed tensor fits. */
  int64_t s16[] = {16};
  m = managed(tensor(I4, 1, s16, NULL), 0);
  m.dl_tensor.data = (void *)(UINTPTR_MAX - 9);
  CHECK_OK(dlb_managed_validate(&m));
  CHECK_OK(dlb_tensor_validate(&m.dl_tensor));
  m.flags = DLPACK_FLAG_BITMASK_IS_SUBBYTE_TYPE_PADDED;
  CHECK_STATUS(dlb_managed_validate(&m), DLB_E_OVERFLOW);
  CHECK_ERROR_MENTIONS("data");
}

/* ------------------------------------------------------------ byte span */

static void check_span(const DLTensor *t, int64_t lo, int64_t hi) {
  int64_t l = -12345, h = -12345;
  CHECK_OK(dlb_tensor_byte_span(t, &l, &h));
  CHECK_EQ_INT(l, lo);
  CHECK_EQ_INT(h, hi);
}

DLB_TEST(layout_byte_span_byte_types) {
  int64_t s[] = {2, 3};
  DLTensor t = tensor(F32, 2, s, NULL);
  check_span(&t, 0, 24);
  t.byte_offset = 4;
  check_span(&t, 4, 28);
  /* All strides negative: data + byte_offset is the highest element. */
  int64_t neg[] = {-3, -1};
  t.strides = neg;
  t.byte_offset = 20;
  check_span(&t, 0, 24);
  int64_t mixed[] = {3, -1};
  t.strides = mixed;
  t.byte_offset = 8;
  check_span(&t, 0, 24);
  /* Broadcast and overlapping strides. */
  int64_t s44[] = {4, 4};
  int64_t zero[] = {0, 0};
  t = tensor(F32, 2, s44, zero);
  check_span(&t, 0, 4);
  int64_t s33[] = {3, 3};
  int64_t ov[] = {1, 1};
  t = tensor(F32, 2, s33, ov);
  check_span(&t, 0, 20);
  /* Size-1 dimensions add nothing whatever their stride. */
  int64_t s1[] = {1, 5};
  int64_t wild[] = {INT64_MIN, 1};
  t = tensor(U8, 2, s1, wild);
  check_span(&t, 0, 5);
  DLDataType vec = {kDLFloat, 32, 4};
  int64_t s2[] = {2};
  t = tensor(vec, 1, s2, NULL);
  check_span(&t, 0, 32);
  /* A scalar is one element. */
  t = tensor(F64, 0, NULL, NULL);
  t.byte_offset = 16;
  check_span(&t, 16, 24);
  /* No elements: an empty range at byte_offset. */
  int64_t s0[] = {0, 5};
  int64_t any[] = {INT64_MAX, INT64_MIN};
  t = tensor(F64, 2, s0, any);
  t.byte_offset = 12;
  check_span(&t, 12, 12);
  /* The largest range there is. */
  int64_t f64max[] = {INT64_MAX / 8};
  t = tensor(F64, 1, f64max, NULL);
  check_span(&t, 0, INT64_MAX / 8 * 8);
  int64_t bottom[] = {-(INT64_MAX / 8 - 1)};
  int64_t s2b[] = {2};
  t = tensor(F64, 1, s2b, bottom);
  check_span(&t, -(INT64_MAX / 8 - 1) * 8, 8);
}

DLB_TEST(layout_byte_span_packed_subbyte) {
  int64_t s5[] = {5};
  DLTensor t = tensor(I4, 1, s5, NULL);
  check_span(&t, 0, 3); /* 20 bits */
  int64_t s4[] = {4};
  t.shape = s4;
  t.byte_offset = 1;
  check_span(&t, 1, 3);
  /* Backwards: the lowest element starts half a byte below data +
   * byte_offset, so the byte holding it counts. */
  int64_t s3[] = {3};
  int64_t back[] = {-1};
  t = tensor(I4, 1, s3, back);
  t.byte_offset = 2;
  check_span(&t, 1, 3);
  DLDataType i1 = {kDLInt, 1, 1};
  int64_t s9[] = {9};
  t = tensor(i1, 1, s9, NULL);
  check_span(&t, 0, 2);
  t = tensor(FP6, 1, s4, NULL);
  check_span(&t, 0, 3); /* 24 bits */
  t.shape = s3;
  check_span(&t, 0, 3); /* 18 bits */
  int64_t s2[] = {2};
  t = tensor(FP6, 1, s2, back);
  t.byte_offset = 1;
  check_span(&t, 0, 2); /* bits -6..5 around bit 8 */
  /* Packed int4: INT64_MAX elements fit in half as many bytes. */
  int64_t huge[] = {INT64_MAX};
  t = tensor(I4, 1, huge, NULL);
  check_span(&t, 0, INT64_MAX / 2 + 1);
  int64_t most_neg[] = {INT64_MIN};
  t = tensor(I4, 1, s2, most_neg);
  check_span(&t, INT64_MIN / 2, 1);
}

DLB_TEST(layout_byte_span_rejects) {
  int64_t lo = -7, hi = -7;
  CHECK_STATUS(dlb_tensor_byte_span(NULL, &lo, &hi), DLB_E_INVAL);
  CHECK_ERROR_MENTIONS("tensor is NULL");
  int64_t s[] = {4};
  DLTensor t = tensor(U8, 1, s, NULL);
  CHECK_STATUS(dlb_tensor_byte_span(&t, NULL, &hi), DLB_E_INVAL);
  CHECK_ERROR_MENTIONS("lo");
  CHECK_STATUS(dlb_tensor_byte_span(&t, &lo, NULL), DLB_E_INVAL);
  CHECK_ERROR_MENTIONS("hi");
  t.byte_offset = (uint64_t)INT64_MAX + 1;
  CHECK_STATUS(dlb_tensor_byte_span(&t, &lo, &hi), DLB_E_OVERFLOW);
  CHECK_ERROR_MENTIONS("byte_offset");
  t.byte_offset = (uint64_t)INT64_MAX - 3;
  CHECK_STATUS(dlb_tensor_byte_span(&t, &lo, &hi), DLB_E_OVERFLOW);
  CHECK_ERROR_MENTIONS("byte_offset");
  t.byte_offset = (uint64_t)INT64_MAX - 4;
  check_span(&t, INT64_MAX - 4, INT64_MAX);
  int64_t neg[] = {-2};
  t.shape = neg;
  CHECK_STATUS(dlb_tensor_byte_span(&t, &lo, &hi), DLB_E_LAYOUT);
  CHECK_ERROR_MENTIONS("shape[0] is -2");
  int64_t over[] = {INT64_MAX, 2};
  int64_t zero[] = {0, 0};
  t = tensor(U8, 2, over, zero);
  CHECK_STATUS(dlb_tensor_byte_span(&t, &lo, &hi), DLB_E_OVERFLOW);
  CHECK_ERROR_MENTIONS("shape[1]");
  int64_t s2[] = {2};
  int64_t big[] = {INT64_MAX / 4 + 1};
  t = tensor(F32, 1, s2, big);
  CHECK_STATUS(dlb_tensor_byte_span(&t, &lo, &hi), DLB_E_OVERFLOW);
  CHECK_ERROR_MENTIONS("strides");
  /* Ends that fit but are more than INT64_MAX apart. */
  int64_t bottom[] = {-(INT64_MAX / 8)};
  t = tensor(F64, 1, s2, bottom);
  CHECK_STATUS(dlb_tensor_byte_span(&t, &lo, &hi), DLB_E_OVERFLOW);
  CHECK_ERROR_MENTIONS("wider than INT64_MAX");
  CHECK_EQ_INT(lo, -7);
  CHECK_EQ_INT(hi, -7);
}

/* Wide elements whose size is not a power of two (3 bytes: int8 x 3) with
 * the lowest element just above INT64_MIN / 3 bytes: lo = 3 * stride fits,
 * and so does the width, so the span is exact rather than an overflow. */
DLB_TEST(layout_byte_span_three_byte_elements_near_int64_min) {
  const DLDataType i8x3 = {kDLInt, 8, 3};
  int64_t s[] = {2};
  int64_t low[] = {-3074457345618258601LL};
  DLTensor t = tensor(i8x3, 1, s, low);
  check_span(&t, 3 * low[0], 3);
  /* One element lower and the width no longer fits. */
  low[0]--;
  int64_t lo = -7, hi = -7;
  CHECK_STATUS(dlb_tensor_byte_span(&t, &lo, &hi), DLB_E_OVERFLOW);
  CHECK_EQ_INT(lo, -7);
  CHECK_EQ_INT(hi, -7);
}

/* What validation measures for a copy (numel and [lo, hi)) is what
 * dlb_tensor_numel and dlb_tensor_byte_span report, for implied, given,
 * negative and zero strides and a byte_offset. */
DLB_TEST(layout_validate_span_matches_numel_and_byte_span) {
  int64_t s[] = {3, 4};
  int64_t given[] = {8, 2}, neg[] = {-4, -1}, zero[] = {0, 1};
  int64_t *strides[] = {NULL, given, neg, zero};
  const DLDataType types[] = {U8, F32, F64, I4};
  for (size_t k = 0; k < sizeof strides / sizeof strides[0]; k++) {
    for (size_t d = 0; d < sizeof types / sizeof types[0]; d++) {
      /* Packed sub-byte elements take compact strides only. */
      if (dlb_dtype_is_subbyte(types[d]) && strides[k] != NULL) continue;
      DLTensor t = tensor(types[d], 2, s, strides[k]);
      t.byte_offset = 64;
      int64_t numel = 0, lo = 0, hi = 0;
      CHECK_OK(dlb_tensor_numel(&t, &numel));
      CHECK_OK(dlb_tensor_byte_span(&t, &lo, &hi));
      dlb__span span = {-1, -1, -1};
      CHECK_OK(dlb__tensor_validate_span(&t, "t", &span));
      CHECK_EQ_INT(span.numel, numel);
      CHECK_EQ_INT(span.lo, lo);
      CHECK_EQ_INT(span.hi, hi);
    }
  }
}

/* ----------------------------------------------------------- contiguity */

DLB_TEST(layout_contiguity) {
  int64_t s[] = {2, 3};
  DLTensor t = tensor(F32, 2, s, NULL);
  CHECK_EQ_INT(dlb_tensor_is_c_contiguous(&t), 1);
  CHECK_EQ_INT(dlb_tensor_is_f_contiguous(&t), 0);
  /* NULL strides with one extent above 1 are both orders at once. */
  int64_t col[] = {1, 5, 1};
  t.ndim = 3;
  t.shape = col;
  CHECK_EQ_INT(dlb_tensor_is_f_contiguous(&t), 1);
  t = tensor(F32, 2, s, NULL);
  int64_t c[] = {3, 1}, f[] = {1, 2};
  t.strides = c;
  CHECK_EQ_INT(dlb_tensor_is_c_contiguous(&t), 1);
  CHECK_EQ_INT(dlb_tensor_is_f_contiguous(&t), 0);
  t.strides = f;
  CHECK_EQ_INT(dlb_tensor_is_c_contiguous(&t), 0);
  CHECK_EQ_INT(dlb_tensor_is_f_contiguous(&t), 1);
  int64_t gap[] = {4, 1}, rev[] = {-3, -1}, bcast[] = {0, 1};
  t.strides = gap;
  CHECK_EQ_INT(dlb_tensor_is_c_contiguous(&t), 0);
  t.strides = rev;
  CHECK_EQ_INT(dlb_tensor_is_c_contiguous(&t), 0);
  t.strides = bcast;
  CHECK_EQ_INT(dlb_tensor_is_c_contiguous(&t), 0);
  CHECK_EQ_INT(dlb_tensor_is_f_contiguous(&t), 0);
}

DLB_TEST(layout_contiguity_ignores_size_one_and_empty) {
  int64_t s[] = {2, 1, 3};
  int64_t odd[] = {3, 999, 1};
  DLTensor t = tensor(F32, 3, s, odd);
  CHECK_EQ_INT(dlb_tensor_is_c_contiguous(&t), 1);
  CHECK_EQ_INT(dlb_tensor_is_f_contiguous(&t), 0);
  int64_t fodd[] = {1, -5, 2};
  t.strides = fodd;
  CHECK_EQ_INT(dlb_tensor_is_f_contiguous(&t), 1);
  CHECK_EQ_INT(dlb_tensor_is_c_contiguous(&t), 0);
  /* A row or a column is both. */
  int64_t row[] = {1, 4};
  int64_t row_st[] = {7, 1};
  t = tensor(F32, 2, row, row_st);
  CHECK_EQ_INT(dlb_tensor_is_c_contiguous(&t), 1);
  CHECK_EQ_INT(dlb_tensor_is_f_contiguous(&t), 1);
  int64_t e[] = {2, 0};
  int64_t junk[] = {INT64_MIN, 7};
  t = tensor(F32, 2, e, junk);
  CHECK_EQ_INT(dlb_tensor_is_c_contiguous(&t), 1);
  CHECK_EQ_INT(dlb_tensor_is_f_contiguous(&t), 1);
  t = tensor(F32, 0, NULL, NULL);
  CHECK_EQ_INT(dlb_tensor_is_c_contiguous(&t), 1);
  CHECK_EQ_INT(dlb_tensor_is_f_contiguous(&t), 1);
}

DLB_TEST(layout_contiguity_of_invalid_tensors) {
  dlb_clear_error();
  CHECK_EQ_INT(dlb_tensor_is_c_contiguous(NULL), 0);
  CHECK_EQ_INT(dlb_tensor_is_f_contiguous(NULL), 0);
  int64_t neg[] = {2, -1};
  DLTensor t = tensor(F32, 2, neg, NULL);
  CHECK_EQ_INT(dlb_tensor_is_c_contiguous(&t), 0);
  CHECK_EQ_INT(dlb_tensor_is_f_contiguous(&t), 0);
  int64_t over[] = {INT64_MAX, 2};
  t.shape = over;
  CHECK_EQ_INT(dlb_tensor_is_c_contiguous(&t), 0);
  t.shape = NULL;
  CHECK_EQ_INT(dlb_tensor_is_c_contiguous(&t), 0);
  int64_t s[65] = {0};
  t = tensor(F32, 65, s, NULL);
  CHECK_EQ_INT(dlb_tensor_is_c_contiguous(&t), 0);
  /* Predicates leave the last error alone. */
  CHECK_STR(dlb_last_error(), "");
}

/* -------------------------------------------------------- compact strides */

DLB_TEST(layout_compact_strides) {
  int64_t s[] = {2, 3, 4};
  int64_t out[3] = {0};
  CHECK_OK(dlb_compact_strides(3, s, 0, out));
  CHECK_EQ_INT(out[0], 12);
  CHECK_EQ_INT(out[1], 4);
  CHECK_EQ_INT(out[2], 1);
  CHECK_OK(dlb_compact_strides(3, s, 1, out));
  CHECK_EQ_INT(out[0], 1);
  CHECK_EQ_INT(out[1], 2);
  CHECK_EQ_INT(out[2], 6);
  int64_t z[] = {2, 0, 3};
  CHECK_OK(dlb_compact_strides(3, z, 0, out));
  CHECK_EQ_INT(out[0], 3);
  CHECK_EQ_INT(out[1], 3);
  CHECK_EQ_INT(out[2], 1);
  CHECK_OK(dlb_compact_strides(3, z, 1, out));
  CHECK_EQ_INT(out[0], 1);
  CHECK_EQ_INT(out[1], 2);
  CHECK_EQ_INT(out[2], 2);
  CHECK_OK(dlb_compact_strides(0, NULL, 0, NULL));
  /* The outermost extent never enters a stride. */
  int64_t big[] = {INT64_MAX, INT64_MAX};
  CHECK_OK(dlb_compact_strides(2, big, 0, out));
  CHECK_EQ_INT(out[0], INT64_MAX);
  CHECK_EQ_INT(out[1], 1);
  CHECK_OK(dlb_compact_strides(2, big, 1, out));
  CHECK_EQ_INT(out[0], 1);
  CHECK_EQ_INT(out[1], INT64_MAX);
  /* They agree with the contiguity predicates. */
  int64_t s5[] = {3, 1, 5, 2};
  int64_t st[4];
  CHECK_OK(dlb_compact_strides(4, s5, 0, st));
  DLTensor t = tensor(F32, 4, s5, st);
  CHECK_EQ_INT(dlb_tensor_is_c_contiguous(&t), 1);
  CHECK_OK(dlb_compact_strides(4, s5, 1, st));
  CHECK_EQ_INT(dlb_tensor_is_f_contiguous(&t), 1);
  CHECK_EQ_INT(dlb_tensor_is_c_contiguous(&t), 0);
}

DLB_TEST(layout_compact_strides_rejects) {
  int64_t out[3] = {-7, -7, -7};
  int64_t over[] = {1, 1LL << 32, 1LL << 32};
  CHECK_STATUS(dlb_compact_strides(3, over, 0, out), DLB_E_OVERFLOW);
  CHECK_ERROR_MENTIONS("shape[1]");
  int64_t fover[] = {1LL << 32, 1LL << 32, 1};
  CHECK_STATUS(dlb_compact_strides(3, fover, 1, out), DLB_E_OVERFLOW);
  CHECK_ERROR_MENTIONS("shape[1]");
  int64_t neg[] = {2, -3, 4};
  CHECK_STATUS(dlb_compact_strides(3, neg, 0, out), DLB_E_LAYOUT);
  CHECK_ERROR_MENTIONS("shape[1] is -3");
  CHECK_STATUS(dlb_compact_strides(65, neg, 0, out), DLB_E_LAYOUT);
  CHECK_ERROR_MENTIONS("ndim is 65");
  CHECK_STATUS(dlb_compact_strides(-2, neg, 0, out), DLB_E_LAYOUT);
  CHECK_ERROR_MENTIONS("ndim is -2");
  CHECK_STATUS(dlb_compact_strides(3, NULL, 0, out), DLB_E_LAYOUT);
  CHECK_ERROR_MENTIONS("shape is NULL");
  int64_t s[] = {2};
  CHECK_STATUS(dlb_compact_strides(1, s, 0, NULL), DLB_E_INVAL);
  CHECK_ERROR_MENTIONS("strides_out");
  for (int i = 0; i < 3; i++) CHECK_EQ_INT(out[i], -7);
}

/* ------------------------------------------------------------ coalescing */

DLB_TEST(layout_coalesce_contiguous_to_one_dim) {
  int64_t s[] = {2, 3, 4};
  int64_t st[] = {12, 4, 1};
  int64_t *const arrays[] = {st};
  CHECK_EQ_INT(dlb_coalesce_dims(3, s, arrays, 1), 1);
  CHECK_EQ_INT(s[0], 24);
  CHECK_EQ_INT(st[0], 1);
  /* Reversed and broadcast walks merge the same way. */
  int64_t r[] = {2, 3};
  int64_t rst[] = {-3, -1};
  int64_t *const rev[] = {rst};
  CHECK_EQ_INT(dlb_coalesce_dims(2, r, rev, 1), 1);
  CHECK_EQ_INT(r[0], 6);
  CHECK_EQ_INT(rst[0], -1);
  int64_t b[] = {3, 4};
  int64_t bst[] = {0, 0};
  int64_t *const bc[] = {bst};
  CHECK_EQ_INT(dlb_coalesce_dims(2, b, bc, 1), 1);
  CHECK_EQ_INT(b[0], 12);
  CHECK_EQ_INT(bst[0], 0);
}

DLB_TEST(layout_coalesce_keeps_transposed_and_gapped) {
  int64_t s[] = {3, 2};
  int64_t st[] = {1, 3};
  int64_t *const arrays[] = {st};
  CHECK_EQ_INT(dlb_coalesce_dims(2, s, arrays, 1), 2);
  CHECK_EQ_INT(s[0], 3);
  CHECK_EQ_INT(s[1], 2);
  CHECK_EQ_INT(st[0], 1);
  CHECK_EQ_INT(st[1], 3);
  /* Padded rows: the inner two dimensions merge, the rows do not. */
  int64_t g[] = {2, 3, 4};
  int64_t gst[] = {20, 4, 1};
  int64_t *const ga[] = {gst};
  CHECK_EQ_INT(dlb_coalesce_dims(3, g, ga, 1), 2);
  CHECK_EQ_INT(g[0], 2);
  CHECK_EQ_INT(g[1], 12);
  CHECK_EQ_INT(gst[0], 20);
  CHECK_EQ_INT(gst[1], 1);
  /* extent * stride wraps to 0 == the outer stride; it must not merge. */
  int64_t o[] = {2, 4};
  int64_t ost[] = {0, 1LL << 62};
  int64_t *const oa[] = {ost};
  CHECK_EQ_INT(dlb_coalesce_dims(2, o, oa, 1), 2);
  CHECK_EQ_INT(o[0], 2);
  CHECK_EQ_INT(o[1], 4);
  /* Broadcast dimensions whose merged extent would overflow stay apart. */
  int64_t h[] = {1LL << 32, 1LL << 32};
  int64_t hst[] = {0, 0};
  int64_t *const ha[] = {hst};
  CHECK_EQ_INT(dlb_coalesce_dims(2, h, ha, 1), 2);
  CHECK_EQ_INT(h[0], 1LL << 32);
  CHECK_EQ_INT(h[1], 1LL << 32);
}

DLB_TEST(layout_coalesce_drops_size_one) {
  int64_t s[] = {1, 2, 1, 3, 1};
  int64_t st[] = {77, 3, -9, 1, 5};
  int64_t *const arrays[] = {st};
  CHECK_EQ_INT(dlb_coalesce_dims(5, s, arrays, 1), 1);
  CHECK_EQ_INT(s[0], 6);
  CHECK_EQ_INT(st[0], 1);
  /* Dropped even where the rest cannot merge. */
  int64_t g[] = {2, 1, 3};
  int64_t gst[] = {6, 100, 1};
  int64_t *const ga[] = {gst};
  CHECK_EQ_INT(dlb_coalesce_dims(3, g, ga, 1), 2);
  CHECK_EQ_INT(g[0], 2);
  CHECK_EQ_INT(g[1], 3);
  CHECK_EQ_INT(gst[0], 6);
  CHECK_EQ_INT(gst[1], 1);
  /* A single element has no dimensions left. */
  int64_t one[] = {1, 1, 1};
  int64_t ost[] = {4, 5, 6};
  int64_t *const oa[] = {ost};
  CHECK_EQ_INT(dlb_coalesce_dims(3, one, oa, 1), 0);
  CHECK_EQ_INT(dlb_coalesce_dims(0, NULL, oa, 1), 0);
}

DLB_TEST(layout_coalesce_empty_is_one_zero_dim) {
  int64_t s[] = {3, 0, 5};
  int64_t a[] = {5, 5, 1}, b[] = {1, 3, 3};
  int64_t *const arrays[] = {a, b};
  CHECK_EQ_INT(dlb_coalesce_dims(3, s, arrays, 2), 1);
  CHECK_EQ_INT(s[0], 0);
  CHECK_EQ_INT(a[0], 1);
  CHECK_EQ_INT(b[0], 1);
}

DLB_TEST(layout_coalesce_two_arrays) {
  /* a is compact, b has padded rows: only the inner pair merges for both. */
  int64_t s[] = {2, 3, 4};
  int64_t a[] = {12, 4, 1}, b[] = {24, 4, 1};
  int64_t *const arrays[] = {a, b};
  CHECK_EQ_INT(dlb_coalesce_dims(3, s, arrays, 2), 2);
  CHECK_EQ_INT(s[0], 2);
  CHECK_EQ_INT(s[1], 12);
  CHECK_EQ_INT(a[0], 12);
  CHECK_EQ_INT(a[1], 1);
  CHECK_EQ_INT(b[0], 24);
  CHECK_EQ_INT(b[1], 1);
  /* One compact, one transposed: nothing merges. */
  int64_t s2[] = {2, 3, 4};
  int64_t c[] = {12, 4, 1}, f[] = {1, 2, 6};
  int64_t *const cf[] = {c, f};
  CHECK_EQ_INT(dlb_coalesce_dims(3, s2, cf, 2), 3);
  CHECK_EQ_INT(s2[0], 2);
  CHECK_EQ_INT(s2[1], 3);
  CHECK_EQ_INT(s2[2], 4);
  CHECK_EQ_INT(f[2], 6);
  /* Both compact: one dimension for both. */
  int64_t s3[] = {4, 1, 5};
  int64_t x[] = {5, 0, 1}, y[] = {10, 3, 2};
  int64_t *const xy[] = {x, y};
  CHECK_EQ_INT(dlb_coalesce_dims(3, s3, xy, 2), 1);
  CHECK_EQ_INT(s3[0], 20);
  CHECK_EQ_INT(x[0], 1);
  CHECK_EQ_INT(y[0], 2);
}

/* ------------------------------------------------------------- alignment */

DLB_TEST(layout_alignment) {
  int64_t s[] = {4};
  DLTensor t = tensor(U8, 1, s, NULL);
  CHECK_EQ_INT(dlb_tensor_alignment(&t), 4096);
  t.byte_offset = 256;
  CHECK_EQ_INT(dlb_tensor_alignment(&t), 256);
  t.byte_offset = 4096 + 8;
  CHECK_EQ_INT(dlb_tensor_alignment(&t), 8);
  t.byte_offset = 3;
  CHECK_EQ_INT(dlb_tensor_alignment(&t), 1);
  t.data = buf + 64;
  t.byte_offset = 64;
  CHECK_EQ_INT(dlb_tensor_alignment(&t), 128);
  t.data = (void *)(uintptr_t)(1u << 20);
  t.byte_offset = 0;
  CHECK_EQ_INT(dlb_tensor_alignment(&t), 4096);
  t.data = NULL;
  t.byte_offset = 3;
  CHECK_EQ_INT(dlb_tensor_alignment(&t), 4096);
  CHECK_EQ_INT(dlb_tensor_alignment(NULL), 1);
}
