/* dtype.c -- element type names, checks and sizes. */
#include <limits.h>
#include <stdio.h>
#include <string.h>

#include "internal.h"

/* Indexed by DLDataTypeCode. For the codes whose width varies, the name is a
 * prefix that the bits follow ("int" + "32"). */
static const char *const code_names[] = {
    "int",           "uint",          "float",
    "handle",        "bfloat",        "complex",
    "bool",          "float8_e3m4",   "float8_e4m3",
    "float8_e4m3b11fnuz", "float8_e4m3fn", "float8_e4m3fnuz",
    "float8_e5m2",   "float8_e5m2fnuz", "float8_e8m0fnu",
    "float6_e2m3fn", "float6_e3m2fn", "float4_e2m1fn",
};

#define CODE_COUNT (sizeof code_names / sizeof code_names[0])
#define PTR_BITS ((unsigned)(sizeof(void *) * CHAR_BIT))
#define TEXT_SHOWN 64

/* The bits a code implies, or 0 for the codes whose width varies (their
 * names carry it). */
static unsigned fixed_bits(unsigned code) {
  switch (code) {
    case kDLInt:
    case kDLUInt:
    case kDLFloat:
    case kDLOpaqueHandle:
    case kDLBfloat:
    case kDLComplex:
      return 0;
    case kDLFloat6_e2m3fn:
    case kDLFloat6_e3m2fn:
      return 6;
    case kDLFloat4_e2m1fn:
      return 4;
    default: /* bool and the float8 codes */
      return 8;
  }
}

static int bits_allowed(unsigned code, unsigned bits) {
  switch (code) {
    case kDLInt:
    case kDLUInt:
      return bits == 1 || bits == 2 || bits == 4 || bits == 8 || bits == 16 ||
             bits == 32 || bits == 64;
    case kDLFloat:
      /* 8 is not IEEE, but some producers label their float8 data so. */
      return bits == 8 || bits == 16 || bits == 32 || bits == 64;
    case kDLOpaqueHandle:
      return bits == 64 || bits == PTR_BITS;
    case kDLBfloat:
      return bits == 16;
    case kDLComplex:
      return bits == 32 || bits == 64 || bits == 128;
    default:
      return bits == fixed_bits(code);
  }
}

/* What bits_allowed accepts for the codes of varying width, in words. */
static const char *bits_wanted(unsigned code) {
  switch (code) {
    case kDLInt:
    case kDLUInt:
      return "1, 2, 4, 8, 16, 32 or 64";
    case kDLFloat:
      return "8, 16, 32 or 64";
    case kDLOpaqueHandle:
      return PTR_BITS == 64 ? "64" : "64 or the pointer size";
    case kDLBfloat:
      return "16";
    default: /* complex */
      return "32, 64 or 128";
  }
}

dlb_status dlb_dtype_check(DLDataType dtype) {
  if (dtype.code >= CODE_COUNT)
    return dlb__fail(DLB_E_DTYPE,
                     "dtype.code is %u; not a DLPack 1.3 type code (0..%u)",
                     (unsigned)dtype.code, (unsigned)CODE_COUNT - 1);
  if (dtype.lanes == 0)
    return dlb__fail(DLB_E_DTYPE, "dtype.lanes is 0; must be >= 1");
  if (dtype.bits == 0)
    return dlb__fail(DLB_E_DTYPE, "dtype.bits is 0; must be >= 1");
  if (!bits_allowed(dtype.code, dtype.bits)) {
    if (fixed_bits(dtype.code) != 0)
      return dlb__fail(DLB_E_DTYPE, "dtype.bits is %u; %s needs %u",
                       (unsigned)dtype.bits, code_names[dtype.code],
                       fixed_bits(dtype.code));
    return dlb__fail(DLB_E_DTYPE, "dtype.bits is %u; %s needs %s",
                     (unsigned)dtype.bits, code_names[dtype.code],
                     bits_wanted(dtype.code));
  }
  /* A vector of sub-byte lanes that does not fill whole bytes has no
   * defined packing in DLPack. */
  if (dlb_dtype_is_subbyte(dtype) && dtype.lanes != 1)
    return dlb__fail(DLB_E_DTYPE,
                     "dtype.lanes is %u; %u-bit lanes make a %u-bit element, "
                     "not whole bytes, which needs lanes 1",
                     (unsigned)dtype.lanes, (unsigned)dtype.bits,
                     (unsigned)dlb_dtype_bits(dtype));
  return DLB_OK;
}

/* What a number in a type name turned out to be. */
enum { NOT_A_NUMBER, A_NUMBER, PAST_MAX };

/* Reads a decimal number without sign or leading zeros from
 * text[0..len): A_NUMBER, stored in *out, when it is at most max,
 * PAST_MAX when it is larger. */
static int parse_number(const char *text, size_t len, unsigned max,
                        unsigned *out) {
  if (len == 0 || (len > 1 && text[0] == '0')) return NOT_A_NUMBER;
  unsigned long v = 0;
  for (size_t i = 0; i < len; i++) {
    if (text[i] < '0' || text[i] > '9') return NOT_A_NUMBER;
    if (v <= max) v = v * 10 + (unsigned long)(text[i] - '0');
  }
  if (v > max) return PAST_MAX;
  *out = (unsigned)v;
  return A_NUMBER;
}

/* A name that has a code's form but a number past its field's range. */
typedef struct too_large {
  const char *field, *digits;
  size_t len;
  unsigned max;
} too_large;

/* Matches name against the names of code: the code's name, its bits when
 * the name carries them (optional for handle, which defaults to the pointer
 * size), then an optional "xN". Returns 0 when the text does not fit, and
 * also fills *big when it fits but for a number too large for its field. */
static int match_code(const char *name, unsigned code, DLDataType *out,
                      too_large *big) {
  size_t n = strlen(code_names[code]);
  if (strncmp(name, code_names[code], n) != 0) return 0;
  const char *p = name + n;
  const char *x = strchr(p, 'x');
  size_t bits_len = x != NULL ? (size_t)(x - p) : strlen(p);
  unsigned bits = fixed_bits(code);
  if (bits != 0) {
    if (bits_len != 0) return 0;
  } else if (code == kDLOpaqueHandle && bits_len == 0) {
    bits = PTR_BITS;
  }
  const int bits_read =
      bits != 0 ? A_NUMBER : parse_number(p, bits_len, UINT8_MAX, &bits);
  unsigned lanes = 1;
  const size_t lanes_len = x != NULL ? strlen(x + 1) : 0;
  const int lanes_read =
      x != NULL ? parse_number(x + 1, lanes_len, UINT16_MAX, &lanes) : A_NUMBER;
  if (bits_read == NOT_A_NUMBER || lanes_read == NOT_A_NUMBER) return 0;
  if (bits_read == PAST_MAX) {
    *big = (too_large){"bits", p, bits_len, UINT8_MAX};
    return 0;
  }
  if (lanes_read == PAST_MAX) {
    *big = (too_large){"lanes", x + 1, lanes_len, UINT16_MAX};
    return 0;
  }
  out->code = (uint8_t)code;
  out->bits = (uint8_t)bits;
  out->lanes = (uint16_t)lanes;
  return 1;
}

dlb_status dlb_dtype_parse(const char *name, DLDataType *out) {
  if (name == NULL || out == NULL)
    return dlb__fail(DLB_E_INVAL, "dlb_dtype_parse: %s is NULL",
                     name == NULL ? "name" : "out");
  DLDataType dt;
  unsigned code = 0;
  /* At most one code matches: where one name begins another ("float",
   * "float8_e4m3", "float8_e4m3fn"), the shorter leaves text that is
   * neither bits nor "xN". */
  too_large big = {NULL, NULL, 0, 0};
  while (code < CODE_COUNT && !match_code(name, code, &dt, &big)) code++;
  if (code == CODE_COUNT && big.field != NULL)
    return dlb__fail(DLB_E_DTYPE,
                     "dtype \"%.*s\": %s %.*s is past %u, the most a DLPack "
                     "dtype holds", TEXT_SHOWN, name, big.field,
                     (int)(big.len < 32 ? big.len : 32), big.digits, big.max);
  if (code == CODE_COUNT)
    return dlb__fail(DLB_E_DTYPE, "dtype \"%.*s\" is not a known type name",
                     TEXT_SHOWN, name);
  if (dlb_dtype_check(dt) != DLB_OK)
    return dlb__fail_within(DLB_E_DTYPE, "dtype \"%.*s\"", TEXT_SHOWN, name);
  *out = dt;
  return DLB_OK;
}

dlb_status dlb_dtype_format(DLDataType dtype, char *buf, size_t size) {
  if (buf == NULL) return dlb__fail(DLB_E_INVAL, "dlb_dtype_format: buf is NULL");
  dlb_status st = dlb_dtype_check(dtype);
  if (st != DLB_OK) return st;
  char text[DLB_DTYPE_NAME_MAX];
  int n = snprintf(text, sizeof text, "%s", code_names[dtype.code]);
  if (fixed_bits(dtype.code) == 0 &&
      !(dtype.code == kDLOpaqueHandle && dtype.bits == PTR_BITS))
    n += snprintf(text + n, sizeof text - (size_t)n, "%u",
                  (unsigned)dtype.bits);
  if (dtype.lanes != 1)
    n += snprintf(text + n, sizeof text - (size_t)n, "x%u",
                  (unsigned)dtype.lanes);
  if ((size_t)n >= size) {
    if (size > 0) buf[0] = '\0';
    return dlb__fail(DLB_E_INVAL,
                     "dlb_dtype_format: size is %zu; \"%s\" needs %d", size,
                     text, n + 1);
  }
  memcpy(buf, text, (size_t)n + 1);
  return DLB_OK;
}

int dlb_dtype_equal(DLDataType a, DLDataType b) {
  return a.code == b.code && a.bits == b.bits && a.lanes == b.lanes;
}

uint32_t dlb_dtype_bits(DLDataType dtype) {
  return (uint32_t)dtype.bits * dtype.lanes;
}

int dlb_dtype_is_subbyte(DLDataType dtype) {
  return dlb_dtype_bits(dtype) % 8 != 0;
}

size_t dlb_dtype_itemsize(DLDataType dtype) {
  return ((size_t)dlb_dtype_bits(dtype) + 7) / 8;
}

dlb_status dlb_dtype_storage_bytes(DLDataType dtype, int64_t count,
                                   int padded, int64_t *out) {
  if (out == NULL)
    return dlb__fail(DLB_E_INVAL, "dlb_dtype_storage_bytes: out is NULL");
  if (count < 0)
    return dlb__fail(DLB_E_INVAL, "count is %lld; must be >= 0",
                     (long long)count);
  dlb_status st = dlb_dtype_check(dtype);
  if (st != DLB_OK) return st;
  int64_t bytes;
  int overflow;
  if (padded || !dlb_dtype_is_subbyte(dtype)) {
    overflow =
        dlb__mul_overflow(count, (int64_t)dlb_dtype_itemsize(dtype), &bytes);
  } else {
    /* ceil(count * bits / 8) without forming count * bits, which can
     * overflow when the result does not. */
    int64_t bits = dlb_dtype_bits(dtype);
    overflow = dlb__mul_overflow(count / 8, bits, &bytes) ||
               dlb__add_overflow(bytes, ((count % 8) * bits + 7) / 8, &bytes);
  }
  if (overflow)
    return dlb__fail(DLB_E_OVERFLOW,
                     "count is %lld; that many %u-bit elements exceed "
                     "INT64_MAX bytes",
                     (long long)count, (unsigned)dlb_dtype_bits(dtype));
  *out = bytes;
  return DLB_OK;
}
