/*
 * elements.c -- single elements: Python numbers to and from the bytes of a
 * dtype, the dtype's buffer format and array-interface type string, and
 * Tensor.tolist().
 */
#include <float.h>
#include <math.h>
#include <string.h>

#include "dlbpy.h"

#if PY_LITTLE_ENDIAN
#define DLBPY_BO "<"
#else
#define DLBPY_BO ">"
#endif

typedef enum {
  DLBPY_K_NONE,
  DLBPY_K_BOOL,
  DLBPY_K_I8, DLBPY_K_I16, DLBPY_K_I32, DLBPY_K_I64,
  DLBPY_K_U8, DLBPY_K_U16, DLBPY_K_U32, DLBPY_K_U64,
  DLBPY_K_F16, DLBPY_K_BF16, DLBPY_K_F32, DLBPY_K_F64,
  DLBPY_K_C64, DLBPY_K_C128,
  /* Integers of 1, 2 and 4 bits: written a byte per unit, as padded units
   * hold them (dlbpy_pack_units packs them). */
  DLBPY_K_NARROW_INT, DLBPY_K_NARROW_UINT,
  /* Read only: no Python number converts back to these without a rounding
   * rule NumPy does not have either. */
  DLBPY_K_C32, DLBPY_K_MINIFLOAT,
} dlbpy_scalar_kind;

/* The kinds written from Python numbers end here. */
#define DLBPY_K_LAST_WRITABLE DLBPY_K_NARROW_UINT

static dlbpy_scalar_kind dlbpy_kind(DLDataType t) {
  if (t.lanes != 1) return DLBPY_K_NONE;
  if (t.code >= kDLFloat8_e3m4 && t.code <= kDLFloat4_e2m1fn)
    return dlb_dtype_check(t) == DLB_OK ? DLBPY_K_MINIFLOAT : DLBPY_K_NONE;
  switch (t.code) {
    case kDLBool:
      return t.bits == 8 ? DLBPY_K_BOOL : DLBPY_K_NONE;
    case kDLInt:
      switch (t.bits) {
        case 8: return DLBPY_K_I8;
        case 16: return DLBPY_K_I16;
        case 32: return DLBPY_K_I32;
        case 64: return DLBPY_K_I64;
        case 1: case 2: case 4: return DLBPY_K_NARROW_INT;
        default: return DLBPY_K_NONE;
      }
    case kDLUInt:
      switch (t.bits) {
        case 8: return DLBPY_K_U8;
        case 16: return DLBPY_K_U16;
        case 32: return DLBPY_K_U32;
        case 64: return DLBPY_K_U64;
        case 1: case 2: case 4: return DLBPY_K_NARROW_UINT;
        default: return DLBPY_K_NONE;
      }
    case kDLFloat:
      switch (t.bits) {
        case 16: return DLBPY_K_F16;
        case 32: return DLBPY_K_F32;
        case 64: return DLBPY_K_F64;
        default: return DLBPY_K_NONE;
      }
    case kDLBfloat:
      return t.bits == 16 ? DLBPY_K_BF16 : DLBPY_K_NONE;
    case kDLComplex:
      return t.bits == 64    ? DLBPY_K_C64
             : t.bits == 128 ? DLBPY_K_C128
             : t.bits == 32  ? DLBPY_K_C32
                             : DLBPY_K_NONE;
    default:
      return DLBPY_K_NONE;
  }
}

bool dlbpy_dtype_has_scalars(DLDataType dtype) {
  dlbpy_scalar_kind kind = dlbpy_kind(dtype);
  return kind != DLBPY_K_NONE && kind <= DLBPY_K_LAST_WRITABLE;
}

bool dlbpy_dtype_readable(DLDataType dtype) {
  return dlbpy_kind(dtype) != DLBPY_K_NONE;
}

const char *dlbpy_dtype_buffer_format(DLDataType dtype) {
  switch (dlbpy_kind(dtype)) {
    case DLBPY_K_BOOL: return "?";
    case DLBPY_K_I8: return "b";
    case DLBPY_K_I16: return "h";
    case DLBPY_K_I32: return "i";
    case DLBPY_K_I64: return "q";
    case DLBPY_K_U8: return "B";
    case DLBPY_K_U16: return "H";
    case DLBPY_K_U32: return "I";
    case DLBPY_K_U64: return "Q";
    case DLBPY_K_F16: return "e";
    case DLBPY_K_F32: return "f";
    case DLBPY_K_F64: return "d";
    case DLBPY_K_C64: return "Zf";
    case DLBPY_K_C128: return "Zd";
    default: return NULL;
  }
}

const char *dlbpy_dtype_typestr(DLDataType dtype) {
  switch (dlbpy_kind(dtype)) {
    case DLBPY_K_BOOL: return "|b1";
    case DLBPY_K_I8: return "|i1";
    case DLBPY_K_I16: return DLBPY_BO "i2";
    case DLBPY_K_I32: return DLBPY_BO "i4";
    case DLBPY_K_I64: return DLBPY_BO "i8";
    case DLBPY_K_U8: return "|u1";
    case DLBPY_K_U16: return DLBPY_BO "u2";
    case DLBPY_K_U32: return DLBPY_BO "u4";
    case DLBPY_K_U64: return DLBPY_BO "u8";
    case DLBPY_K_F16: return DLBPY_BO "f2";
    case DLBPY_K_F32: return DLBPY_BO "f4";
    case DLBPY_K_F64: return DLBPY_BO "f8";
    case DLBPY_K_C64: return DLBPY_BO "c8";
    case DLBPY_K_C128: return DLBPY_BO "c16";
    default: return NULL;
  }
}

/* ------------------------------------------------------------------------
 * Half and bfloat16, rounding to nearest even
 * ---------------------------------------------------------------------- */

static uint16_t dlbpy_double_to_half(double d) {
  uint64_t b;
  memcpy(&b, &d, sizeof b);
  uint16_t sign = (uint16_t)((b >> 48) & 0x8000);
  int64_t exp = (int64_t)((b >> 52) & 0x7ff);
  uint64_t mant = b & 0xfffffffffffffULL;
  if (exp == 0x7ff) return (uint16_t)(sign | 0x7c00 | (mant ? 0x200 : 0));
  int64_t e = exp - 1023 + 15;
  if (e >= 31) return (uint16_t)(sign | 0x7c00);
  if (e <= 0) {
    /* Below 2^-25 everything rounds to zero. */
    if (e < -10) return sign;
    mant |= 1ULL << 52;
    int shift = (int)(43 - e);
    uint64_t h = mant >> shift;
    uint64_t rem = mant & ((1ULL << shift) - 1);
    uint64_t half = 1ULL << (shift - 1);
    if (rem > half || (rem == half && (h & 1))) h++;
    return (uint16_t)(sign | h);
  }
  uint32_t out = ((uint32_t)e << 10) | (uint32_t)(mant >> 42);
  uint64_t rem = mant & ((1ULL << 42) - 1);
  uint64_t half = 1ULL << 41;
  /* A carry out of the mantissa steps the exponent, up to infinity. */
  if (rem > half || (rem == half && (out & 1))) out++;
  return (uint16_t)(sign | out);
}

static double dlbpy_half_to_double(uint16_t h) {
  int e = (h >> 10) & 0x1f;
  int m = h & 0x3ff;
  double v;
  if (e == 0) v = ldexp((double)m, -24);
  else if (e == 31) v = m ? NAN : INFINITY;
  else v = ldexp((double)(m + 1024), e - 25);
  return (h & 0x8000) ? -v : v;
}

/* Converts to float without the undefined behaviour of an out-of-range
 * cast: what IEEE rounding gives, infinity past the largest float. */
static float dlbpy_double_to_float(double d) {
  /* FLT_MAX plus half its unit in the last place. */
  const double limit = (double)FLT_MAX + ldexp(1.0, 103);
  if (d >= limit) return INFINITY;
  if (d <= -limit) return -INFINITY;
  if (d > FLT_MAX) return FLT_MAX;
  if (d < -FLT_MAX) return -FLT_MAX;
  return (float)d;
}

static uint16_t dlbpy_float_to_bf16(float f) {
  uint32_t b;
  memcpy(&b, &f, sizeof b);
  if ((b & 0x7fffffffu) > 0x7f800000u) return (uint16_t)((b >> 16) | 0x40);
  b += 0x7fffu + ((b >> 16) & 1u);
  return (uint16_t)(b >> 16);
}

static double dlbpy_bf16_to_double(uint16_t h) {
  uint32_t b = (uint32_t)h << 16;
  float f;
  memcpy(&f, &b, sizeof f);
  return f;
}

/* ------------------------------------------------------------------------
 * Writing
 * ---------------------------------------------------------------------- */

static const char *dlbpy_kind_name(dlbpy_scalar_kind kind) {
  static const char *const names[] = {
      "?", "bool", "int8", "int16", "int32", "int64", "uint8", "uint16",
      "uint32", "uint64", "float16", "bfloat16", "float32", "float64",
      "complex64", "complex128"};
  return names[kind];
}

static int dlbpy_store_int(dlbpy_scalar_kind kind, void *p, int64_t v) {
  switch (kind) {
    case DLBPY_K_I8: { int8_t x = (int8_t)v; memcpy(p, &x, 1); return 0; }
    case DLBPY_K_I16: { int16_t x = (int16_t)v; memcpy(p, &x, 2); return 0; }
    case DLBPY_K_I32: { int32_t x = (int32_t)v; memcpy(p, &x, 4); return 0; }
    case DLBPY_K_I64: { memcpy(p, &v, 8); return 0; }
    case DLBPY_K_U8: { uint8_t x = (uint8_t)v; memcpy(p, &x, 1); return 0; }
    case DLBPY_K_U16: { uint16_t x = (uint16_t)v; memcpy(p, &x, 2); return 0; }
    case DLBPY_K_U32: { uint32_t x = (uint32_t)v; memcpy(p, &x, 4); return 0; }
    default: { uint64_t x = (uint64_t)v; memcpy(p, &x, 8); return 0; }
  }
}

/* Whether kind is an integer kind; if so, its bounds in *lo and *hi. */
static bool dlbpy_int_range(dlbpy_scalar_kind kind, int64_t *lo,
                            uint64_t *hi) {
  switch (kind) {
    case DLBPY_K_I8: *lo = INT8_MIN; *hi = INT8_MAX; return true;
    case DLBPY_K_I16: *lo = INT16_MIN; *hi = INT16_MAX; return true;
    case DLBPY_K_I32: *lo = INT32_MIN; *hi = INT32_MAX; return true;
    case DLBPY_K_I64: *lo = INT64_MIN; *hi = INT64_MAX; return true;
    case DLBPY_K_U8: *lo = 0; *hi = UINT8_MAX; return true;
    case DLBPY_K_U16: *lo = 0; *hi = UINT16_MAX; return true;
    case DLBPY_K_U32: *lo = 0; *hi = UINT32_MAX; return true;
    case DLBPY_K_U64: *lo = 0; *hi = UINT64_MAX; return true;
    default: return false;
  }
}

static int dlbpy_store_real(dlbpy_scalar_kind kind, void *p, double v) {
  switch (kind) {
    case DLBPY_K_BOOL: { uint8_t x = v != 0; memcpy(p, &x, 1); return 0; }
    case DLBPY_K_F16: {
      uint16_t x = dlbpy_double_to_half(v);
      memcpy(p, &x, 2);
      return 0;
    }
    case DLBPY_K_BF16: {
      uint16_t x = dlbpy_float_to_bf16(dlbpy_double_to_float(v));
      memcpy(p, &x, 2);
      return 0;
    }
    case DLBPY_K_F32: {
      float x = dlbpy_double_to_float(v);
      memcpy(p, &x, 4);
      return 0;
    }
    case DLBPY_K_F64: memcpy(p, &v, 8); return 0;
    case DLBPY_K_C64: {
      float x[2] = {dlbpy_double_to_float(v), 0.0f};
      memcpy(p, x, 8);
      return 0;
    }
    case DLBPY_K_C128: {
      double x[2] = {v, 0.0};
      memcpy(p, x, 16);
      return 0;
    }
    default:
      break;
  }
  /* Integer kinds: truncate toward zero, as NumPy's casts do. hi is
   * 2^k - 1, so hi + 1.0 is exactly 2^k even where hi is not a double. */
  /* Only integer kinds get here (callers refuse the read-only ones). */
  int64_t lo = 0;
  uint64_t hi = 0;
  dlbpy_int_range(kind, &lo, &hi);
  double t = trunc(v);
  if (!(t >= (double)lo && t < (double)hi + 1.0)) {
    char text[64];
    PyOS_snprintf(text, sizeof text, "%.17g", v);
    PyErr_Format(PyExc_OverflowError, "%s is out of range for %s", text,
                 dlbpy_kind_name(kind));
    return -1;
  }
  if (t < 0) return dlbpy_store_int(kind, p, (int64_t)t);
  return dlbpy_store_int(kind, p, (int64_t)(uint64_t)t);
}

/* Whether dtype is an integer of 1, 2 or 4 bits; if so, its bounds. */
static bool dlbpy_narrow_range(DLDataType dtype, int64_t *lo, int64_t *hi) {
  dlbpy_scalar_kind kind = dlbpy_kind(dtype);
  if (kind != DLBPY_K_NARROW_INT && kind != DLBPY_K_NARROW_UINT) return false;
  const int64_t span = (int64_t)1 << dtype.bits;
  *lo = kind == DLBPY_K_NARROW_INT ? -span / 2 : 0;
  *hi = kind == DLBPY_K_NARROW_INT ? span / 2 - 1 : span - 1;
  return true;
}

/* A narrow integer unit, as the byte a padded unit is (sign-extended for
 * signed ones); OverflowError naming text when v is out of its range. */
static int dlbpy_narrow_store(DLDataType dtype, void *p, int64_t v,
                              const char *text) {
  int64_t lo = 0, hi = 0;
  (void)dlbpy_narrow_range(dtype, &lo, &hi);
  if (v < lo || v > hi) {
    char name[DLB_DTYPE_NAME_MAX];
    if (dlb_dtype_format(dtype, name, sizeof name) != DLB_OK) name[0] = '\0';
    PyErr_Format(PyExc_OverflowError,
                 "%s is out of range for %s (%lld to %lld)", text, name,
                 (long long)lo, (long long)hi);
    return -1;
  }
  *(unsigned char *)p = (unsigned char)(int8_t)v;
  return 0;
}

int dlbpy_element_set_double(DLDataType dtype, void *p, double v) {
  dlbpy_scalar_kind kind = dlbpy_kind(dtype);
  if (!dlbpy_dtype_has_scalars(dtype)) {
    PyErr_SetString(PyExc_TypeError, "dtype has no Python scalar type");
    return -1;
  }
  int64_t lo, hi;
  const bool narrow = dlbpy_narrow_range(dtype, &lo, &hi);
  if (isnan(v) &&
      (narrow || dlbpy_int_range(kind, &(int64_t){0}, &(uint64_t){0}))) {
    PyErr_SetString(PyExc_ValueError, "cannot convert NaN to an integer");
    return -1;
  }
  if (narrow) {
    /* Truncated toward zero, as for the wider integers. */
    char text[64];
    PyOS_snprintf(text, sizeof text, "%.17g", v);
    const double t = trunc(v);
    /* Any value outside a byte is out of every narrow range. */
    const int64_t v64 = t >= -128.0 && t <= 255.0 ? (int64_t)t : INT64_MAX;
    return dlbpy_narrow_store(dtype, p, v64, text);
  }
  return dlbpy_store_real(kind, p, v);
}

int dlbpy_element_set_int64(DLDataType dtype, void *p, int64_t v) {
  dlbpy_scalar_kind kind = dlbpy_kind(dtype);
  int64_t lo;
  uint64_t hi;
  int64_t nlo, nhi;
  if (dlbpy_narrow_range(dtype, &nlo, &nhi)) {
    char text[32];
    PyOS_snprintf(text, sizeof text, "%lld", (long long)v);
    return dlbpy_narrow_store(dtype, p, v, text);
  }
  if (!dlbpy_int_range(kind, &lo, &hi))
    return dlbpy_element_set_double(dtype, p, (double)v);
  if (v < lo || (v > 0 && (uint64_t)v > hi)) {
    PyErr_Format(PyExc_OverflowError, "%lld is out of range for %s",
                 (long long)v, dlbpy_kind_name(kind));
    return -1;
  }
  return dlbpy_store_int(kind, p, v);
}

int dlbpy_element_set(DLDataType dtype, void *p, PyObject *value) {
  dlbpy_scalar_kind kind = dlbpy_kind(dtype);
  if (!dlbpy_dtype_has_scalars(dtype)) {
    PyErr_SetString(PyExc_TypeError, "dtype has no Python scalar type");
    return -1;
  }
  int64_t nlo, nhi;
  if (dlbpy_narrow_range(dtype, &nlo, &nhi) && PyIndex_Check(value)) {
    PyObject *index = PyNumber_Index(value);
    if (index == NULL) return -1;
    int overflow = 0;
    long long x = PyLong_AsLongLongAndOverflow(index, &overflow);
    int rc = -1;
    if (!(x == -1 && PyErr_Occurred())) {
      PyObject *text = PyObject_Repr(index);
      const char *chars = text != NULL ? PyUnicode_AsUTF8(text) : NULL;
      if (chars != NULL)
        rc = dlbpy_narrow_store(dtype, p, overflow ? INT64_MAX : (int64_t)x,
                                chars);
      Py_XDECREF(text);
    }
    Py_DECREF(index);
    return rc;
  }
  if (kind == DLBPY_K_BOOL) {
    int truth = PyObject_IsTrue(value);
    if (truth < 0) return -1;
    uint8_t x = (uint8_t)truth;
    memcpy(p, &x, 1);
    return 0;
  }
  if (kind == DLBPY_K_C64 || kind == DLBPY_K_C128) {
    Py_complex c = PyComplex_AsCComplex(value);
    if (c.real == -1.0 && PyErr_Occurred()) return -1;
    if (kind == DLBPY_K_C128) {
      memcpy(p, &c, 16);
    } else {
      float x[2] = {dlbpy_double_to_float(c.real),
                    dlbpy_double_to_float(c.imag)};
      memcpy(p, x, 8);
    }
    return 0;
  }
  int64_t lo;
  uint64_t hi;
  if (dlbpy_int_range(kind, &lo, &hi) && PyIndex_Check(value)) {
    PyObject *index = PyNumber_Index(value);
    if (index == NULL) return -1;
    int in_range;
    int64_t v = 0;
    if (kind == DLBPY_K_U64) {
      unsigned long long u = PyLong_AsUnsignedLongLong(index);
      in_range = !(u == (unsigned long long)-1 && PyErr_Occurred());
      v = (int64_t)u;
    } else {
      int overflow = 0;
      long long x = PyLong_AsLongLongAndOverflow(index, &overflow);
      in_range = !(x == -1 && PyErr_Occurred()) && overflow == 0 &&
                 x >= lo && (x < 0 || (unsigned long long)x <= hi);
      v = (int64_t)x;
    }
    if (!in_range) {
      if (PyErr_Occurred() && !PyErr_ExceptionMatches(PyExc_OverflowError)) {
        Py_DECREF(index);
        return -1;
      }
      PyErr_Clear();
      PyErr_Format(PyExc_OverflowError,
                   "Python integer %R out of bounds for %s", index,
                   dlbpy_kind_name(kind));
      Py_DECREF(index);
      return -1;
    }
    Py_DECREF(index);
    return dlbpy_store_int(kind, p, v);
  }
  /* A NumPy complex scalar is no Python complex, but would lose its
   * imaginary part to float() as one would. */
  int complex = PyComplex_Check(value);
  if (!complex && !PyFloat_Check(value) && PyObject_CheckBuffer(value)) {
    DLDataType held;
    int scalar = dlbpy_buffer_scalar_dtype(value, &held);
    if (scalar < 0) return -1;
    complex = scalar && held.code == kDLComplex;
  }
  if (complex) {
    char name[DLB_DTYPE_NAME_MAX];
    if (dlb_dtype_format(dtype, name, sizeof name) != DLB_OK) name[0] = '\0';
    PyErr_Format(PyExc_TypeError, "cannot store a complex number as %s",
                 name);
    return -1;
  }
  double d = PyFloat_AsDouble(value);
  if (d == -1.0 && PyErr_Occurred()) return -1;
  return dlbpy_element_set_double(dtype, p, d);
}

/* ------------------------------------------------------------------------
 * Reading
 * ---------------------------------------------------------------------- */

/*
 * The small floats DLPack names, as (exponent bits, mantissa bits, bias,
 * special values). IEEE: the top exponent holds infinities and NaNs. FN:
 * only the all-ones pattern is NaN, no infinity. FNUZ: the pattern of
 * negative zero is the one NaN, no infinity, no negative zero. NONE: every
 * pattern is a finite number (the float6 and float4 types). E8M0: an
 * unsigned power of two, all ones NaN.
 */
enum { DLBPY_SP_IEEE, DLBPY_SP_FN, DLBPY_SP_FNUZ, DLBPY_SP_NONE,
       DLBPY_SP_E8M0 };

typedef struct {
  unsigned char ebits, mbits, special;
  int bias;
} dlbpy_minifloat;

static dlbpy_minifloat dlbpy_minifloat_of(uint8_t code) {
  switch (code) {
    case kDLFloat8_e3m4: return (dlbpy_minifloat){3, 4, DLBPY_SP_IEEE, 3};
    case kDLFloat8_e4m3: return (dlbpy_minifloat){4, 3, DLBPY_SP_IEEE, 7};
    case kDLFloat8_e4m3b11fnuz:
      return (dlbpy_minifloat){4, 3, DLBPY_SP_FNUZ, 11};
    case kDLFloat8_e4m3fn: return (dlbpy_minifloat){4, 3, DLBPY_SP_FN, 7};
    case kDLFloat8_e4m3fnuz: return (dlbpy_minifloat){4, 3, DLBPY_SP_FNUZ, 8};
    case kDLFloat8_e5m2: return (dlbpy_minifloat){5, 2, DLBPY_SP_IEEE, 15};
    case kDLFloat8_e5m2fnuz:
      return (dlbpy_minifloat){5, 2, DLBPY_SP_FNUZ, 16};
    case kDLFloat8_e8m0fnu: return (dlbpy_minifloat){8, 0, DLBPY_SP_E8M0, 127};
    case kDLFloat6_e2m3fn: return (dlbpy_minifloat){2, 3, DLBPY_SP_NONE, 1};
    case kDLFloat6_e3m2fn: return (dlbpy_minifloat){3, 2, DLBPY_SP_NONE, 3};
    default: /* kDLFloat4_e2m1fn */
      return (dlbpy_minifloat){2, 1, DLBPY_SP_NONE, 1};
  }
}

static double dlbpy_minifloat_to_double(uint8_t code, unsigned raw) {
  dlbpy_minifloat f = dlbpy_minifloat_of(code);
  unsigned emax = (1u << f.ebits) - 1, mmax = (1u << f.mbits) - 1;
  if (f.special == DLBPY_SP_E8M0)
    return raw == 0xff ? NAN : ldexp(1.0, (int)raw - f.bias);
  unsigned sign = raw >> (f.ebits + f.mbits) & 1u;
  unsigned e = raw >> f.mbits & emax, m = raw & mmax;
  if (f.special == DLBPY_SP_FNUZ && sign && e == 0 && m == 0) return NAN;
  if (f.special == DLBPY_SP_IEEE && e == emax)
    return m != 0 ? NAN : sign ? -INFINITY : INFINITY;
  if (f.special == DLBPY_SP_FN && e == emax && m == mmax) return NAN;
  double v = e == 0 ? ldexp((double)m, 1 - f.bias - f.mbits)
                    : ldexp((double)(m | (mmax + 1)), (int)e - f.bias - f.mbits);
  return sign ? -v : v;
}

/* An element of at most 8 bits, from its raw bits (the low ones of raw). */
static PyObject *dlbpy_narrow_get(DLDataType dtype, int kind, unsigned raw) {
  unsigned bits = dtype.bits;
  raw &= (1u << bits) - 1;
  if (kind == DLBPY_K_NARROW_UINT) return PyLong_FromLong((long)raw);
  if (kind == DLBPY_K_NARROW_INT)
    return PyLong_FromLong((long)raw - (raw >> (bits - 1) ? 1L << bits : 0));
  return PyFloat_FromDouble(dlbpy_minifloat_to_double(dtype.code, raw));
}

/* The bits of packed element k of bits each from base, in the low bits. */
static unsigned dlbpy_packed_load(const unsigned char *b, unsigned bits,
                                  int64_t k) {
  uint64_t bit = (uint64_t)k * bits;
  unsigned shift = (unsigned)(bit % 8);
  unsigned raw = (unsigned)b[bit / 8] >> shift;
  /* A 6-bit element may run into the next byte. */
  if (shift + bits > 8) raw |= (unsigned)b[bit / 8 + 1] << (8 - shift);
  return raw & ((1u << bits) - 1);
}

/* Sets packed element k to raw; the other bits of its bytes stay. */
static void dlbpy_packed_store(unsigned char *b, unsigned bits, int64_t k,
                               unsigned raw) {
  uint64_t bit = (uint64_t)k * bits;
  unsigned shift = (unsigned)(bit % 8);
  unsigned mask = ((1u << bits) - 1) << shift;
  unsigned v = raw << shift;
  b[bit / 8] = (unsigned char)((b[bit / 8] & ~mask) | (v & mask & 0xff));
  if (shift + bits > 8)
    b[bit / 8 + 1] = (unsigned char)((b[bit / 8 + 1] & ~(mask >> 8)) |
                                     (v >> 8));
}

void dlbpy_pack_units(unsigned char *dst, unsigned bits,
                      const unsigned char *units, int64_t n) {
  for (int64_t k = 0; k < n; k++) dlbpy_packed_store(dst, bits, k, units[k]);
}

PyObject *dlbpy_element_get_packed(DLDataType dtype, const void *base,
                                   int64_t k) {
  return dlbpy_narrow_get(dtype, dlbpy_kind(dtype),
                          dlbpy_packed_load(base, dtype.bits, k));
}

/* The first index and the count of what slice s takes of n elements,
 * with Python's clamping. */
static int64_t dlbpy_slice_span(int64_t n, dlb_slice s, int64_t *first) {
  Py_ssize_t start = s.start != DLB_SLICE_DEFAULT ? (Py_ssize_t)s.start
                     : s.step < 0                 ? PY_SSIZE_T_MAX
                                                  : 0;
  Py_ssize_t stop = s.stop != DLB_SLICE_DEFAULT ? (Py_ssize_t)s.stop
                    : s.step < 0                ? PY_SSIZE_T_MIN
                                                : PY_SSIZE_T_MAX;
  Py_ssize_t count =
      PySlice_AdjustIndices((Py_ssize_t)n, &start, &stop, (Py_ssize_t)s.step);
  *first = start;
  return count;
}

PyObject *dlbpy_packed_select_copy(const DLManagedTensorVersioned *mt,
                                   const unsigned char *is_index,
                                   const int64_t *index,
                                   const dlb_slice *slices,
                                   DLManagedTensorVersioned **out) {
  const DLTensor *t = &mt->dl_tensor;
  if (!dlb_device_type_cpu_accessible(t->device.device_type)) {
    PyErr_SetString(PyExc_IndexError,
                    "index: packed sub-byte elements that do not start on a "
                    "byte are copied out, and the CPU cannot read this "
                    "tensor's memory; copy it to 'cpu' first");
    return NULL;
  }
  int64_t compact[DLB_MAX_NDIM], shape[DLB_MAX_NDIM], step[DLB_MAX_NDIM];
  dlb_status s = dlb_compact_strides(t->ndim, t->shape, 0, compact);
  if (s != DLB_OK) return dlbpy_raise(s, PyExc_IndexError, "index");
  int64_t first = 0;
  int32_t nd = 0;
  for (int32_t d = 0; d < t->ndim; d++) {
    if (!is_index[d]) {
      int64_t start = 0;
      const int64_t count = dlbpy_slice_span(t->shape[d], slices[d], &start);
      shape[nd] = count;
      /* A step is taken only between two elements, where it fits. */
      step[nd++] = count > 1 ? compact[d] * slices[d].step : 0;
      if (count > 0) first += start * compact[d];
      continue;
    }
    int64_t v = index[d] < 0 ? index[d] + t->shape[d] : index[d];
    if (v < 0 || v >= t->shape[d]) {
      PyErr_Format(PyExc_IndexError,
                   "index %lld is out of bounds for axis %d with size %lld",
                   (long long)index[d], (int)d, (long long)t->shape[d]);
      return NULL;
    }
    first += v * compact[d];
  }
  DLManagedTensorVersioned *copy = NULL;
  s = dlb_tensor_alloc(t->device, t->dtype, nd, shape, &copy);
  if (s != DLB_OK) return dlbpy_raise(s, PyExc_IndexError, "index");
  int64_t n = 0, bytes = 0;
  (void)dlb_tensor_numel(&copy->dl_tensor, &n);
  (void)dlb_dtype_storage_bytes(t->dtype, n, 0, &bytes);
  unsigned char *dst = copy->dl_tensor.data;
  memset(dst, 0, (size_t)bytes);
  const unsigned char *src = (const unsigned char *)t->data + t->byte_offset;
  int64_t pos[DLB_MAX_NDIM] = {0}, at = first;
  for (int64_t k = 0; k < n; k++) {
    dlbpy_packed_store(dst, t->dtype.bits, k,
                       dlbpy_packed_load(src, t->dtype.bits, at));
    /* The next element in row-major order of the result. */
    for (int32_t d = nd - 1; d >= 0; d--) {
      at += step[d];
      if (++pos[d] < shape[d]) break;
      at -= step[d] * shape[d];
      pos[d] = 0;
    }
  }
  /* Writes to a copy would reach nobody: it says so by refusing them. */
  copy->flags |= DLPACK_FLAG_BITMASK_READ_ONLY | DLPACK_FLAG_BITMASK_IS_COPIED;
  *out = copy;
  return Py_None;
}

PyObject *dlbpy_element_get(DLDataType dtype, const void *p) {
  dlbpy_scalar_kind kind = dlbpy_kind(dtype);
  switch (kind) {
    case DLBPY_K_NARROW_INT:
    case DLBPY_K_NARROW_UINT:
    case DLBPY_K_MINIFLOAT:
      /* One element a byte (a padded sub-byte one in the low bits). */
      return dlbpy_narrow_get(dtype, kind, *(const unsigned char *)p);
    case DLBPY_K_C32: {
      uint16_t x[2];
      memcpy(x, p, 4);
      return PyComplex_FromDoubles(dlbpy_half_to_double(x[0]),
                                   dlbpy_half_to_double(x[1]));
    }
    case DLBPY_K_BOOL: return PyBool_FromLong(*(const uint8_t *)p != 0);
    case DLBPY_K_I8: return PyLong_FromLong(*(const int8_t *)p);
    case DLBPY_K_I16: {
      int16_t x;
      memcpy(&x, p, 2);
      return PyLong_FromLong(x);
    }
    case DLBPY_K_I32: {
      int32_t x;
      memcpy(&x, p, 4);
      return PyLong_FromLong(x);
    }
    case DLBPY_K_I64: {
      int64_t x;
      memcpy(&x, p, 8);
      return PyLong_FromLongLong((long long)x);
    }
    case DLBPY_K_U8: return PyLong_FromLong(*(const uint8_t *)p);
    case DLBPY_K_U16: {
      uint16_t x;
      memcpy(&x, p, 2);
      return PyLong_FromLong(x);
    }
    case DLBPY_K_U32: {
      uint32_t x;
      memcpy(&x, p, 4);
      return PyLong_FromUnsignedLong(x);
    }
    case DLBPY_K_U64: {
      uint64_t x;
      memcpy(&x, p, 8);
      return PyLong_FromUnsignedLongLong((unsigned long long)x);
    }
    case DLBPY_K_F16: {
      uint16_t x;
      memcpy(&x, p, 2);
      return PyFloat_FromDouble(dlbpy_half_to_double(x));
    }
    case DLBPY_K_BF16: {
      uint16_t x;
      memcpy(&x, p, 2);
      return PyFloat_FromDouble(dlbpy_bf16_to_double(x));
    }
    case DLBPY_K_F32: {
      float x;
      memcpy(&x, p, 4);
      return PyFloat_FromDouble(x);
    }
    case DLBPY_K_F64: {
      double x;
      memcpy(&x, p, 8);
      return PyFloat_FromDouble(x);
    }
    case DLBPY_K_C64: {
      float x[2];
      memcpy(x, p, 8);
      return PyComplex_FromDoubles(x[0], x[1]);
    }
    case DLBPY_K_C128: {
      double x[2];
      memcpy(x, p, 16);
      return PyComplex_FromDoubles(x[0], x[1]);
    }
    default:
      PyErr_SetString(PyExc_TypeError, "dtype has no Python scalar type");
      return NULL;
  }
}

/* ------------------------------------------------------------------------
 * tolist
 * ---------------------------------------------------------------------- */

/* Loops over a tensor's elements check for a signal (Ctrl-C) this often:
 * a comparison costs tens of nanoseconds, so a check every few
 * milliseconds is free. A power of two. */
#define DLBPY_SIGNAL_PERIOD ((int64_t)1 << 14)

/* Counts one step of a long loop in *ticks; -1 with the exception a
 * signal handler raised, once per period. */
static int dlbpy_tick(int64_t *ticks) {
  if ((++*ticks & (DLBPY_SIGNAL_PERIOD - 1)) != 0) return 0;
  return PyErr_CheckSignals();
}

/* A list of n items for tolist(), or NULL with a MemoryError that says
 * how many (CPython's own has no message). */
static PyObject *dlbpy_tolist_new_list(int64_t n) {
  PyObject *list = PyList_New((Py_ssize_t)n);
  if (list == NULL && PyErr_ExceptionMatches(PyExc_MemoryError)) {
    PyErr_Clear();
    PyErr_Format(PyExc_MemoryError,
                 "tolist(): a list of %lld items does not fit in memory",
                 (long long)n);
  }
  return list;
}

static PyObject *dlbpy_tolist_at(const DLTensor *t, const int64_t *strides,
                                 size_t itemsize, int32_t dim, const char *p,
                                 int64_t *ticks) {
  if (dlbpy_tick(ticks) < 0) return NULL;
  if (dim == t->ndim) return dlbpy_element_get(t->dtype, p);
  PyObject *list = dlbpy_tolist_new_list(t->shape[dim]);
  if (list == NULL) return NULL;
  /* A dimension of extent 1 is never stepped and may hold any stride; the
   * others fit, as the validated byte span does, unless the tensor has no
   * elements: then its span is 0, its strides may be anything (the
   * compact strides of (2, 2**62, 0) are (2**62, 1, 1)), and strides is
   * NULL, so the walk makes the empty lists without a step. */
  int64_t step = strides != NULL && t->shape[dim] > 1
                     ? strides[dim] * (int64_t)itemsize
                     : 0;
  for (int64_t i = 0; i < t->shape[dim]; i++) {
    PyObject *item = dlbpy_tolist_at(t, strides, itemsize, dim + 1,
                                     p + i * step, ticks);
    if (item == NULL) {
      Py_DECREF(list);
      return NULL;
    }
    PyList_SET_ITEM(list, (Py_ssize_t)i, item);
  }
  return list;
}

bool dlbpy_is_packed(const DLManagedTensorVersioned *mt) {
  return dlb_dtype_is_subbyte(mt->dl_tensor.dtype) &&
         !(mt->flags & DLPACK_FLAG_BITMASK_IS_SUBBYTE_TYPE_PADDED);
}

/* Packed elements are compact (the validator lets no other layout in), so
 * they are walked in row-major order: *k counts the elements read. */
static PyObject *dlbpy_tolist_packed(const DLTensor *t, int32_t dim,
                                     const char *base, int64_t *k) {
  if (dim == t->ndim) {
    /* Long conversions notice Ctrl-C. */
    if ((*k & 0xffff) == 0xffff && PyErr_CheckSignals() < 0) return NULL;
    return dlbpy_element_get_packed(t->dtype, base, (*k)++);
  }
  PyObject *list = dlbpy_tolist_new_list(t->shape[dim]);
  if (list == NULL) return NULL;
  for (int64_t i = 0; i < t->shape[dim]; i++) {
    PyObject *item = dlbpy_tolist_packed(t, dim + 1, base, k);
    if (item == NULL) {
      Py_DECREF(list);
      return NULL;
    }
    PyList_SET_ITEM(list, (Py_ssize_t)i, item);
  }
  return list;
}

/* -1 with an exception when the CPU cannot read t's elements as Python
 * numbers; what names the caller. */
static int dlbpy_check_readable(const DLTensor *t, const char *what) {
  if (!dlb_device_type_cpu_accessible(t->device.device_type)) {
    PyErr_Format(PyExc_BufferError,
                 "%s: the CPU cannot read this tensor's memory; copy it to "
                 "'cpu' first",
                 what);
    return -1;
  }
  if (!dlbpy_dtype_readable(t->dtype)) {
    PyErr_Format(PyExc_TypeError, "%s: this dtype has no Python scalar type",
                 what);
    return -1;
  }
  return 0;
}

PyObject *dlbpy_tensor_tolist(PyObject *self, PyObject *unused) {
  (void)unused;
  const DLTensor *t = &((dlbpy_tensor *)self)->mt->dl_tensor;
  if (dlbpy_check_readable(t, "tolist()") < 0) return NULL;
  /* An accepted tensor's count is known. */
  int64_t numel = 1;
  (void)dlb_tensor_numel(t, &numel);
  /* Without elements there are no bits to find: the lists are built as for
   * any other dtype. */
  if (dlbpy_is_packed(((dlbpy_tensor *)self)->mt) && numel > 0) {
    int64_t k = 0;
    return dlbpy_tolist_packed(t, 0, (const char *)t->data + t->byte_offset,
                               &k);
  }
  /* An accepted tensor has strides whenever ndim != 0; one without
   * elements is walked without them (dlbpy_tolist_at). */
  int64_t ticks = 0;
  return dlbpy_tolist_at(t, numel > 0 ? t->strides : NULL,
                         dlb_dtype_itemsize(t->dtype), 0,
                         (const char *)t->data + t->byte_offset, &ticks);
}

/* ------------------------------------------------------------------------
 * in
 * ---------------------------------------------------------------------- */

/* 1 when an element from dimension dim on equals value, 0 when none does,
 * -1 on error. value's __eq__ may run any Python code: t stays valid, as a
 * Tensor's struct is kept until the Tensor goes (see dlbpy_tensor), and
 * the caller holds the Tensor. */
static int dlbpy_contains_at(const DLTensor *t, size_t itemsize, int32_t dim,
                             const char *p, PyObject *value, int64_t *ticks) {
  if (dim == t->ndim) {
    if (dlbpy_tick(ticks) < 0) return -1;
    PyObject *item = dlbpy_element_get(t->dtype, p);
    if (item == NULL) return -1;
    int eq = PyObject_RichCompareBool(item, value, Py_EQ);
    Py_DECREF(item);
    return eq;
  }
  int64_t step = t->shape[dim] > 1 ? t->strides[dim] * (int64_t)itemsize : 0;
  for (int64_t i = 0; i < t->shape[dim]; i++) {
    int r = dlbpy_contains_at(t, itemsize, dim + 1, p + i * step, value,
                              ticks);
    if (r != 0) return r;
  }
  return 0;
}

int dlbpy_tensor_contains(PyObject *self, PyObject *value) {
  const DLTensor *t = &((dlbpy_tensor *)self)->mt->dl_tensor;
  if (dlbpy_check_readable(t, "'in'") < 0) return -1;
  /* Without elements there is nothing to compare, whatever the other
   * extents: the walk below would step through all of them. */
  int64_t numel;
  dlb_status s = dlb_tensor_numel(t, &numel);
  if (s != DLB_OK) return dlbpy_fail(s, PyExc_ValueError, "shape");
  if (numel == 0) return 0;
  if (dlbpy_is_packed(((dlbpy_tensor *)self)->mt)) {
    const char *base = (const char *)t->data + t->byte_offset;
    for (int64_t k = 0; k < numel; k++) {
      if ((k & 0xffff) == 0xffff && PyErr_CheckSignals() < 0) return -1;
      PyObject *item = dlbpy_element_get_packed(t->dtype, base, k);
      if (item == NULL) return -1;
      int eq = PyObject_RichCompareBool(item, value, Py_EQ);
      Py_DECREF(item);
      if (eq != 0) return eq;
    }
    return 0;
  }
  int64_t ticks = 0;
  return dlbpy_contains_at(t, dlb_dtype_itemsize(t->dtype), 0,
                           (const char *)t->data + t->byte_offset, value,
                           &ticks);
}

PyObject *dlbpy_in_shape_of(PyObject *made, PyObject *tensor) {
  int64_t numel;
  if (made == NULL ||
      dlb_tensor_numel(&((dlbpy_tensor *)tensor)->mt->dl_tensor, &numel) !=
          DLB_OK ||
      numel != 0)
    return made;
  PyObject *shape = PyObject_GetAttrString(tensor, "shape");
  Py_SETREF(made, shape != NULL
                      ? PyObject_CallMethod(made, "reshape", "(O)", shape)
                      : NULL);
  Py_XDECREF(shape);
  return made;
}
