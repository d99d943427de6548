/* test_dtype.c -- element type names, checks and sizes. */
#include <limits.h>

#include "test.h"

#define PTR_BITS ((int)(sizeof(void *) * CHAR_BIT))

static DLDataType dt(int code, int bits, int lanes) {
  DLDataType t;
  t.code = (uint8_t)code;
  t.bits = (uint8_t)bits;
  t.lanes = (uint16_t)lanes;
  return t;
}

static const DLDataType sentinel = {99, 99, 99};

#define CHECK_DT(t, c, b, l)         \
  do {                               \
    CHECK_EQ_INT((t).code, (c));     \
    CHECK_EQ_INT((t).bits, (b));     \
    CHECK_EQ_INT((t).lanes, (l));    \
  } while (0)

#define CHECK_UNTOUCHED(t) CHECK_DT((t), 99, 99, 99)

/* Every name the header lists, with the type DLPack gives it. */
static const struct {
  const char *name;
  int code, bits;
} header_names[] = {
    {"bool", 6, 8},
    {"int8", 0, 8},
    {"int16", 0, 16},
    {"int32", 0, 32},
    {"int64", 0, 64},
    {"uint8", 1, 8},
    {"uint16", 1, 16},
    {"uint32", 1, 32},
    {"uint64", 1, 64},
    {"float16", 2, 16},
    {"float32", 2, 32},
    {"float64", 2, 64},
    {"bfloat16", 4, 16},
    {"complex64", 5, 64},
    {"complex128", 5, 128},
    {"float8_e3m4", 7, 8},
    {"float8_e4m3", 8, 8},
    {"float8_e4m3b11fnuz", 9, 8},
    {"float8_e4m3fn", 10, 8},
    {"float8_e4m3fnuz", 11, 8},
    {"float8_e5m2", 12, 8},
    {"float8_e5m2fnuz", 13, 8},
    {"float8_e8m0fnu", 14, 8},
    {"float6_e2m3fn", 15, 6},
    {"float6_e3m2fn", 16, 6},
    {"float4_e2m1fn", 17, 4},
};
#define NHEADER (sizeof header_names / sizeof header_names[0])

DLB_TEST(dtype_header_names_parse_and_format) {
  char buf[DLB_DTYPE_NAME_MAX];
  for (size_t i = 0; i < NHEADER; i++) {
    DLDataType t = sentinel;
    CHECK_OK(dlb_dtype_parse(header_names[i].name, &t));
    CHECK_DT(t, header_names[i].code, header_names[i].bits, 1);
    CHECK_OK(dlb_dtype_format(t, buf, sizeof buf));
    CHECK_STR(buf, header_names[i].name);
  }
  DLDataType h = sentinel;
  CHECK_OK(dlb_dtype_parse("handle", &h));
  CHECK_DT(h, kDLOpaqueHandle, PTR_BITS, 1);
  CHECK_OK(dlb_dtype_format(h, buf, sizeof buf));
  CHECK_STR(buf, "handle");
}

DLB_TEST(dtype_other_widths_parse) {
  static const struct {
    const char *name;
    int code, bits;
  } more[] = {
      {"int1", 0, 1},   {"int2", 0, 2},      {"int4", 0, 4},
      {"uint1", 1, 1},  {"uint2", 1, 2},     {"uint4", 1, 4},
      {"float8", 2, 8}, {"complex32", 5, 32}, {"handle64", 3, 64},
  };
  for (size_t i = 0; i < sizeof more / sizeof more[0]; i++) {
    DLDataType t = sentinel;
    CHECK_OK(dlb_dtype_parse(more[i].name, &t));
    CHECK_DT(t, more[i].code, more[i].bits, 1);
  }
}

DLB_TEST(dtype_vector_lanes) {
  char buf[DLB_DTYPE_NAME_MAX];
  DLDataType t = sentinel;
  CHECK_OK(dlb_dtype_parse("float32x4", &t));
  CHECK_DT(t, kDLFloat, 32, 4);
  CHECK_OK(dlb_dtype_format(t, buf, sizeof buf));
  CHECK_STR(buf, "float32x4");
  CHECK_OK(dlb_dtype_parse("complex128x2", &t));
  CHECK_DT(t, kDLComplex, 128, 2);
  CHECK_OK(dlb_dtype_parse("boolx4", &t));
  CHECK_DT(t, kDLBool, 8, 4);
  CHECK_OK(dlb_dtype_parse("float8_e5m2x16", &t));
  CHECK_DT(t, kDLFloat8_e5m2, 8, 16);
  CHECK_OK(dlb_dtype_parse("handlex2", &t));
  CHECK_DT(t, kDLOpaqueHandle, PTR_BITS, 2);
  CHECK_OK(dlb_dtype_parse("int8x65535", &t));
  CHECK_DT(t, kDLInt, 8, 65535);
  /* Whole-byte vectors of sub-byte lanes are allowed. */
  CHECK_OK(dlb_dtype_parse("int4x2", &t));
  CHECK_DT(t, kDLInt, 4, 2);
  CHECK_OK(dlb_dtype_parse("float6_e2m3fnx4", &t));
  CHECK_DT(t, kDLFloat6_e2m3fn, 6, 4);
  /* "x1" is accepted, and formats without the suffix. */
  CHECK_OK(dlb_dtype_parse("float32x1", &t));
  CHECK_DT(t, kDLFloat, 32, 1);
  CHECK_OK(dlb_dtype_format(t, buf, sizeof buf));
  CHECK_STR(buf, "float32");
  CHECK_OK(dlb_dtype_format(dt(kDLFloat8_e4m3b11fnuz, 8, 65535), buf,
                            sizeof buf));
  CHECK_STR(buf, "float8_e4m3b11fnuzx65535");
}

DLB_TEST(dtype_parse_rejects_unknown_names) {
  static const char *const bad[] = {
      "",          "float",       "int",         "uint",        "x4",
      "Float32",   "float32 ",    " float32",    "FLOAT32",     "float_32",
      "int08",     "int+8",       "int-8",       "int256x",     "int1000x2x",
      "float32x",  "float32x-1",  "float32x+1",  "float32x01",  "float256_",
      "float32x65536 ",           "int8x2x2",    "bool8",       "boolean",
      "float8_e4m3f", "float8_e4m3fnx", "float8_e4m3fnu", "float8_e5m3",
      "half",      "double",      "handle_",     "float32\n",   "int8x 2",
  };
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    DLDataType t = sentinel;
    CHECK_STATUS(dlb_dtype_parse(bad[i], &t), DLB_E_DTYPE);
    CHECK_ERROR_MENTIONS(bad[i]);
    CHECK_ERROR_MENTIONS("is not a known type name");
    CHECK_UNTOUCHED(t);
  }
}

DLB_TEST(dtype_parse_rejects_invalid_types_by_field) {
  static const struct {
    const char *name, *field;
  } bad[] = {
      {"int3", "dtype.bits is 3"},
      {"uint128", "dtype.bits is 128"},
      {"float4", "dtype.bits is 4"},
      {"float128", "dtype.bits is 128"},
      {"bfloat32", "dtype.bits is 32"},
      {"complex16", "dtype.bits is 16"},
      {"int0", "dtype.bits is 0"},
      {"float32x0", "dtype.lanes is 0"},
      {"float4_e2m1fnx3", "dtype.lanes is 3"},
      {"uint1x3", "dtype.lanes is 3"},
      {"int4x3", "dtype.lanes is 3"},
      {"float6_e3m2fnx3", "dtype.lanes is 3"},
      /* Widths past 255 and lanes past 65535 are named as such, not read
       * as their value modulo the field's range; the largest values are
       * read as what they are. */
      {"int255", "dtype.bits is 255;"},
      {"int256", "bits 256 is past 255, the most a DLPack dtype holds"},
      {"uint1000x2", "bits 1000 is past 255, the most"},
      {"float32x65536", "lanes 65536 is past 65535, the most"},
      {"float32x99999999999", "lanes 99999999999 is past 65535"},
      {"int99999999999999999999999", "bits 99999999999999999999999 is past"},
      {"float8_e4m3fnx65536", "lanes 65536 is past 65535"},
      {"handlex70000", "lanes 70000 is past 65535"},
  };
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    DLDataType t = sentinel;
    CHECK_STATUS(dlb_dtype_parse(bad[i].name, &t), DLB_E_DTYPE);
    CHECK_ERROR_MENTIONS(bad[i].field);
    CHECK_ERROR_MENTIONS(bad[i].name);
    CHECK_UNTOUCHED(t);
  }
  if (PTR_BITS == 64) {
    DLDataType t = sentinel;
    CHECK_STATUS(dlb_dtype_parse("handle32", &t), DLB_E_DTYPE);
    CHECK_ERROR_MENTIONS("dtype.bits is 32; handle needs");
    CHECK_UNTOUCHED(t);
  }
}

DLB_TEST(dtype_parse_null_arguments) {
  DLDataType t = sentinel;
  CHECK_STATUS(dlb_dtype_parse(NULL, &t), DLB_E_INVAL);
  CHECK_ERROR_MENTIONS("name");
  CHECK_UNTOUCHED(t);
  CHECK_STATUS(dlb_dtype_parse("float32", NULL), DLB_E_INVAL);
  CHECK_ERROR_MENTIONS("out");
}

DLB_TEST(dtype_parse_long_text_message_is_bounded) {
  char text[2000];
  memset(text, 'f', sizeof text - 1);
  text[sizeof text - 1] = '\0';
  DLDataType t = sentinel;
  CHECK_STATUS(dlb_dtype_parse(text, &t), DLB_E_DTYPE);
  CHECK(strlen(dlb_last_error()) < 200);
  CHECK_UNTOUCHED(t);
}

DLB_TEST(dtype_check_messages_name_the_field) {
  CHECK_STATUS(dlb_dtype_check(dt(kDLBool, 7, 1)), DLB_E_DTYPE);
  CHECK_ERROR_MENTIONS("dtype.bits is 7; bool needs 8");
  CHECK_STATUS(dlb_dtype_check(dt(kDLBool, 1, 1)), DLB_E_DTYPE);
  CHECK_ERROR_MENTIONS("dtype.bits is 1");
  CHECK_STATUS(dlb_dtype_check(dt(kDLFloat6_e2m3fn, 8, 1)), DLB_E_DTYPE);
  CHECK_ERROR_MENTIONS("dtype.bits is 8; float6_e2m3fn needs 6");
  CHECK_STATUS(dlb_dtype_check(dt(kDLFloat6_e3m2fn, 16, 1)), DLB_E_DTYPE);
  CHECK_ERROR_MENTIONS("dtype.bits is 16; float6_e3m2fn needs 6");
  CHECK_STATUS(dlb_dtype_check(dt(kDLFloat4_e2m1fn, 8, 1)), DLB_E_DTYPE);
  CHECK_ERROR_MENTIONS("dtype.bits is 8; float4_e2m1fn needs 4");
  for (int code = kDLFloat8_e3m4; code <= kDLFloat8_e8m0fnu; code++) {
    CHECK_STATUS(dlb_dtype_check(dt(code, 16, 1)), DLB_E_DTYPE);
    CHECK_ERROR_MENTIONS("dtype.bits is 16");
    CHECK_ERROR_MENTIONS("needs 8");
    CHECK_OK(dlb_dtype_check(dt(code, 8, 1)));
  }
  CHECK_STATUS(dlb_dtype_check(dt(kDLInt, 12, 1)), DLB_E_DTYPE);
  CHECK_ERROR_MENTIONS("dtype.bits is 12; int needs");
  CHECK_STATUS(dlb_dtype_check(dt(kDLFloat, 0, 1)), DLB_E_DTYPE);
  CHECK_ERROR_MENTIONS("dtype.bits is 0; must be >= 1");
  /* With 64-bit pointers a handle has one width, named alone. */
  if (sizeof(void *) == 8) {
    CHECK_STATUS(dlb_dtype_check(dt(kDLOpaqueHandle, 32, 1)), DLB_E_DTYPE);
    CHECK_STR(dlb_last_error(), "dtype.bits is 32; handle needs 64");
  }
  CHECK_STATUS(dlb_dtype_check(dt(kDLFloat, 32, 0)), DLB_E_DTYPE);
  CHECK_ERROR_MENTIONS("dtype.lanes is 0");
  CHECK_STATUS(dlb_dtype_check(dt(18, 8, 1)), DLB_E_DTYPE);
  CHECK_ERROR_MENTIONS("dtype.code is 18; not a DLPack 1.3 type code (0..17)");
  CHECK_STATUS(dlb_dtype_check(dt(255, 8, 1)), DLB_E_DTYPE);
  CHECK_ERROR_MENTIONS("dtype.code is 255");
  CHECK_STATUS(dlb_dtype_check(dt(kDLUInt, 1, 3)), DLB_E_DTYPE);
  CHECK_ERROR_MENTIONS("dtype.lanes is 3");
  CHECK_STATUS(dlb_dtype_check(dt(kDLFloat4_e2m1fn, 4, 65535)), DLB_E_DTYPE);
  CHECK_ERROR_MENTIONS("dtype.lanes is 65535");
}

DLB_TEST(dtype_check_accepts) {
  static const int ok[][3] = {
      {kDLInt, 1, 1},     {kDLInt, 2, 1},      {kDLInt, 4, 1},
      {kDLInt, 64, 1},    {kDLUInt, 1, 8},     {kDLUInt, 2, 4},
      {kDLUInt, 4, 2},    {kDLFloat, 8, 1},    {kDLFloat, 16, 1},
      {kDLBfloat, 16, 1}, {kDLComplex, 32, 1}, {kDLComplex, 128, 1},
      {kDLBool, 8, 1},    {kDLBool, 8, 64},    {kDLOpaqueHandle, 64, 1},
      {kDLFloat6_e2m3fn, 6, 1}, {kDLFloat6_e2m3fn, 6, 4},
      {kDLFloat4_e2m1fn, 4, 1}, {kDLFloat4_e2m1fn, 4, 2},
      {kDLFloat, 64, 65535},
  };
  for (size_t i = 0; i < sizeof ok / sizeof ok[0]; i++)
    CHECK_OK(dlb_dtype_check(dt(ok[i][0], ok[i][1], ok[i][2])));
}

DLB_TEST(dtype_round_trip_every_valid_type) {
  static const int lanes[] = {0, 1, 2, 3, 4, 8, 16, 255, 256, 65535};
  char buf[DLB_DTYPE_NAME_MAX];
  int valid = 0;
  for (int code = 0; code <= 20; code++) {
    for (int bits = 0; bits <= 255; bits++) {
      for (size_t l = 0; l < sizeof lanes / sizeof lanes[0]; l++) {
        DLDataType t = dt(code, bits, lanes[l]);
        if (dlb_dtype_check(t) != DLB_OK) {
          memset(buf, 'z', sizeof buf);
          CHECK_STATUS(dlb_dtype_format(t, buf, sizeof buf), DLB_E_DTYPE);
          CHECK_EQ_INT(buf[0], 'z');
          continue;
        }
        valid++;
        CHECK_OK(dlb_dtype_format(t, buf, sizeof buf));
        DLDataType back = sentinel;
        CHECK_OK(dlb_dtype_parse(buf, &back));
        CHECK(dlb_dtype_equal(back, t));
      }
    }
  }
  /*
   * Over the 9 non-zero lane counts: whole-byte widths give 9 each; a lane
   * of 1, 2, 4 or 6 bits needs a lane count making whole bytes (or 1): 4, 5,
   * 6 and 5. int and uint: 15 + 4 * 9 each; float 4 * 9; handle 9 per
   * allowed width; bfloat 9; complex 27; bool 9; float8 8 * 9; float6 2 * 5;
   * float4 6.
   */
  int handle_widths = PTR_BITS == 64 ? 1 : 2;
  CHECK_EQ_INT(valid, 51 + 51 + 36 + 9 * handle_widths + 9 + 27 + 9 + 72 +
                          10 + 6);
}

DLB_TEST(dtype_round_trip_every_lane_count) {
  char buf[DLB_DTYPE_NAME_MAX];
  for (int lanes = 1; lanes <= 65535; lanes++) {
    DLDataType t = dt(kDLFloat, 32, lanes);
    CHECK_OK(dlb_dtype_format(t, buf, sizeof buf));
    DLDataType back = sentinel;
    CHECK_OK(dlb_dtype_parse(buf, &back));
    CHECK(dlb_dtype_equal(back, t));
    t = dt(kDLInt, 4, lanes);
    CHECK_EQ_INT(dlb_dtype_check(t) == DLB_OK, lanes == 1 || lanes % 2 == 0);
  }
}

DLB_TEST(dtype_format_buffer_sizes) {
  char buf[16];
  /* "float32x4" needs 10 bytes with its NUL, and writes no more. */
  memset(buf, 'z', sizeof buf);
  CHECK_OK(dlb_dtype_format(dt(kDLFloat, 32, 4), buf, 10));
  CHECK_STR(buf, "float32x4");
  CHECK_EQ_INT(buf[10], 'z');
  memset(buf, 'z', sizeof buf);
  CHECK_STATUS(dlb_dtype_format(dt(kDLFloat, 32, 4), buf, 9), DLB_E_INVAL);
  CHECK_ERROR_MENTIONS("size is 9; \"float32x4\" needs 10");
  CHECK_STR(buf, "");
  memset(buf, 'z', sizeof buf);
  CHECK_STATUS(dlb_dtype_format(dt(kDLBool, 8, 1), buf, 0), DLB_E_INVAL);
  CHECK_EQ_INT(buf[0], 'z');
  CHECK_STATUS(dlb_dtype_format(dt(kDLBool, 8, 1), NULL, 16), DLB_E_INVAL);
  CHECK_ERROR_MENTIONS("buf");
  memset(buf, 'z', sizeof buf);
  CHECK_STATUS(dlb_dtype_format(dt(kDLBool, 7, 1), buf, sizeof buf),
               DLB_E_DTYPE);
  CHECK_ERROR_MENTIONS("dtype.bits is 7");
  CHECK_EQ_INT(buf[0], 'z');
}

DLB_TEST(dtype_equal) {
  CHECK(dlb_dtype_equal(dt(2, 32, 1), dt(2, 32, 1)));
  CHECK(!dlb_dtype_equal(dt(2, 32, 1), dt(0, 32, 1)));
  CHECK(!dlb_dtype_equal(dt(2, 32, 1), dt(2, 64, 1)));
  CHECK(!dlb_dtype_equal(dt(2, 32, 1), dt(2, 32, 2)));
}

DLB_TEST(dtype_sizes) {
  static const struct {
    int code, bits, lanes;
    unsigned total;
    int subbyte;
    size_t itemsize;
  } cases[] = {
      {kDLFloat, 32, 1, 32, 0, 4},
      {kDLFloat, 32, 4, 128, 0, 16},
      {kDLComplex, 128, 1, 128, 0, 16},
      {kDLBool, 8, 1, 8, 0, 1},
      {kDLInt, 4, 1, 4, 1, 1},
      {kDLUInt, 1, 1, 1, 1, 1},
      {kDLFloat6_e2m3fn, 6, 1, 6, 1, 1},
      {kDLInt, 4, 2, 8, 0, 1},
      {kDLUInt, 1, 8, 8, 0, 1},
      {kDLFloat6_e3m2fn, 6, 4, 24, 0, 3},
      {kDLInt, 4, 3, 12, 1, 2},
      {kDLInt, 255, 65535, 16711425u, 1, 2088929},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    DLDataType t = dt(cases[i].code, cases[i].bits, cases[i].lanes);
    CHECK_EQ_INT(dlb_dtype_bits(t), cases[i].total);
    CHECK_EQ_INT(dlb_dtype_is_subbyte(t), cases[i].subbyte);
    CHECK_EQ_INT(dlb_dtype_itemsize(t), cases[i].itemsize);
  }
}

DLB_TEST(dtype_storage_bytes) {
  static const struct {
    int code, bits;
    int64_t count;
    int padded;
    int64_t bytes;
  } cases[] = {
      {kDLFloat, 32, 10, 0, 40},
      {kDLFloat, 32, 10, 1, 40},
      {kDLFloat, 32, 0, 0, 0},
      {kDLInt, 4, 0, 0, 0},
      {kDLInt, 4, 1, 0, 1},
      {kDLInt, 4, 3, 0, 2},
      {kDLInt, 4, 3, 1, 3},
      {kDLFloat4_e2m1fn, 4, 5, 1, 5},
      {kDLFloat6_e2m3fn, 6, 4, 0, 3},
      {kDLFloat6_e2m3fn, 6, 5, 0, 4},
      {kDLFloat6_e2m3fn, 6, 5, 1, 5},
      {kDLUInt, 1, 8, 0, 1},
      {kDLUInt, 1, 9, 0, 2},
      {kDLUInt, 1, 17, 0, 3},
      {kDLInt, 8, INT64_MAX, 0, INT64_MAX},
      {kDLFloat, 32, INT64_MAX / 4, 0, INT64_MAX - 3},
      /* count * bits overflows here while the bytes do not. */
      {kDLInt, 4, INT64_MAX, 0, INT64_C(1) << 62},
      {kDLFloat6_e2m3fn, 6, INT64_MAX, 0, INT64_C(3) << 61},
      {kDLUInt, 1, INT64_MAX, 0, INT64_C(1) << 60},
      {kDLInt, 4, INT64_MAX, 1, INT64_MAX},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    int64_t out = -7;
    CHECK_OK(dlb_dtype_storage_bytes(dt(cases[i].code, cases[i].bits, 1),
                                     cases[i].count, cases[i].padded, &out));
    CHECK_EQ_INT(out, cases[i].bytes);
  }
  int64_t out = -7;
  CHECK_OK(dlb_dtype_storage_bytes(dt(kDLFloat, 32, 4), 3, 0, &out));
  CHECK_EQ_INT(out, 48);
  CHECK_OK(dlb_dtype_storage_bytes(dt(kDLInt, 4, 2), 3, 0, &out));
  CHECK_EQ_INT(out, 3);
}

DLB_TEST(dtype_storage_bytes_rejects) {
  int64_t out = -7;
  CHECK_STATUS(dlb_dtype_storage_bytes(dt(kDLFloat, 32, 1),
                                       INT64_MAX / 4 + 1, 0, &out),
               DLB_E_OVERFLOW);
  CHECK_ERROR_MENTIONS("count");
  CHECK_STATUS(dlb_dtype_storage_bytes(dt(kDLComplex, 128, 1),
                                       INT64_MAX / 16 + 1, 1, &out),
               DLB_E_OVERFLOW);
  CHECK_STATUS(dlb_dtype_storage_bytes(dt(kDLFloat, 64, 65535), INT64_MAX, 0,
                                       &out),
               DLB_E_OVERFLOW);
  /* Four 4-bit lanes make one whole 2-byte element, counted by itemsize. */
  CHECK_STATUS(dlb_dtype_storage_bytes(dt(kDLInt, 4, 4), INT64_MAX / 2 + 1,
                                       0, &out),
               DLB_E_OVERFLOW);
  CHECK_STATUS(dlb_dtype_storage_bytes(dt(kDLFloat, 32, 1), -1, 0, &out),
               DLB_E_INVAL);
  CHECK_ERROR_MENTIONS("count is -1");
  CHECK_STATUS(dlb_dtype_storage_bytes(dt(kDLFloat, 32, 1), INT64_MIN, 0,
                                       &out),
               DLB_E_INVAL);
  CHECK_STATUS(dlb_dtype_storage_bytes(dt(kDLFloat, 0, 1), 4, 0, &out),
               DLB_E_DTYPE);
  CHECK_ERROR_MENTIONS("dtype.bits is 0");
  CHECK_STATUS(dlb_dtype_storage_bytes(dt(kDLFloat, 32, 0), 4, 0, &out),
               DLB_E_DTYPE);
  CHECK_ERROR_MENTIONS("dtype.lanes is 0");
  CHECK_EQ_INT(out, -7);
  CHECK_STATUS(dlb_dtype_storage_bytes(dt(kDLFloat, 32, 1), 4, 0, NULL),
               DLB_E_INVAL);
  CHECK_ERROR_MENTIONS("out");
}

DLB_TEST(dtype_success_leaves_last_error) {
  DLDataType t = sentinel;
  int64_t bytes = 0;
  char buf[DLB_DTYPE_NAME_MAX];
  CHECK_STATUS(dlb_dtype_parse("nope", &t), DLB_E_DTYPE);
  const char *before = "dtype \"nope\" is not a known type name";
  CHECK_STR(dlb_last_error(), before);
  CHECK_OK(dlb_dtype_parse("float32", &t));
  CHECK_OK(dlb_dtype_check(t));
  CHECK_OK(dlb_dtype_format(t, buf, sizeof buf));
  CHECK_OK(dlb_dtype_storage_bytes(t, 3, 0, &bytes));
  CHECK_STR(dlb_last_error(), before);
}
