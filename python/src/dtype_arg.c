/*
 * dtype_arg.c -- the dtype= argument: what users pass elsewhere, read
 * without importing NumPy or PyTorch.
 *
 * Accepted: a dlbridge name ("float32", "bfloat16"); NumPy's codes ("f4",
 * "<i8", "?", "c8", "e") and aliases ("double", "intc"); a NumPy dtype
 * (recognised by its name and byteorder attributes); a NumPy scalar type
 * (numpy.float32: a type from the numpy or ml_dtypes package, whose
 * instance carries the dtype); a PyTorch dtype (type torch.dtype, whose
 * str() is "torch.<name>"); the Python types bool, int, float and complex,
 * which mean what NumPy makes of them (bool, int64, float64, complex128).
 * Foreign byte order is refused (but on a one-byte type, which has none):
 * dlbridge tensors are in native order.
 */
#include <string.h>

#include "dlbpy.h"

#define DLBPY_DTYPE_FORMS                                                     \
  "a name such as 'float32' or 'bfloat16', a NumPy code such as 'f4', "      \
  "'<i8' or '?', a NumPy dtype or scalar type (numpy.float32), a PyTorch "   \
  "dtype (torch.bfloat16) or one of the Python types bool, int, float, "     \
  "complex"

#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_BIG_ENDIAN__
#define DLBPY_NATIVE_ORDER '>'
#define DLBPY_FOREIGN_ORDER '<'
#else
#define DLBPY_NATIVE_ORDER '<'
#define DLBPY_FOREIGN_ORDER '>'
#endif

/* Bits of a C type, for the codes NumPy ties to C types. */
#define DLBPY_CBITS(type) ((unsigned)(sizeof(type) * 8))

typedef struct {
  const char *text;
  uint8_t code;
  unsigned bits;
} dlbpy_dtype_alias;

/* NumPy's one-character codes and C-type aliases (long double has no
 * DLPack type and is left out). */
static int dlbpy_alias(const char *text, DLDataType *out) {
  const dlbpy_dtype_alias aliases[] = {
      {"?", kDLBool, 8},
      {"b", kDLInt, 8},
      {"B", kDLUInt, 8},
      {"h", kDLInt, DLBPY_CBITS(short)},
      {"H", kDLUInt, DLBPY_CBITS(short)},
      {"i", kDLInt, DLBPY_CBITS(int)},
      {"I", kDLUInt, DLBPY_CBITS(int)},
      {"l", kDLInt, DLBPY_CBITS(long)},
      {"L", kDLUInt, DLBPY_CBITS(long)},
      {"q", kDLInt, DLBPY_CBITS(long long)},
      {"Q", kDLUInt, DLBPY_CBITS(long long)},
      {"p", kDLInt, DLBPY_CBITS(void *)},
      {"P", kDLUInt, DLBPY_CBITS(void *)},
      {"e", kDLFloat, 16},
      {"f", kDLFloat, 32},
      {"d", kDLFloat, 64},
      {"F", kDLComplex, 64},
      {"D", kDLComplex, 128},
      {"byte", kDLInt, 8},
      {"ubyte", kDLUInt, 8},
      {"short", kDLInt, DLBPY_CBITS(short)},
      {"ushort", kDLUInt, DLBPY_CBITS(short)},
      {"intc", kDLInt, DLBPY_CBITS(int)},
      {"uintc", kDLUInt, DLBPY_CBITS(int)},
      {"int", kDLInt, DLBPY_CBITS(long)},
      {"long", kDLInt, DLBPY_CBITS(long)},
      {"ulong", kDLUInt, DLBPY_CBITS(long)},
      {"longlong", kDLInt, DLBPY_CBITS(long long)},
      {"ulonglong", kDLUInt, DLBPY_CBITS(long long)},
      {"intp", kDLInt, DLBPY_CBITS(void *)},
      {"uintp", kDLUInt, DLBPY_CBITS(void *)},
      {"half", kDLFloat, 16},
      {"single", kDLFloat, 32},
      {"float", kDLFloat, 64},
      {"double", kDLFloat, 64},
      {"csingle", kDLComplex, 64},
      {"complex", kDLComplex, 128},
      {"cdouble", kDLComplex, 128},
  };
  for (size_t i = 0; i < sizeof aliases / sizeof *aliases; i++) {
    if (strcmp(text, aliases[i].text) == 0) {
      *out = (DLDataType){aliases[i].code, (uint8_t)aliases[i].bits, 1};
      return 1;
    }
  }
  return 0;
}

/* NumPy's kind-and-bytes codes: b1, i1..i8, u1..u8, f2..f8, c8, c16, with
 * leading zeros as NumPy reads them ("i08" is int64). */
static int dlbpy_kind_code(const char *text, DLDataType *out) {
  uint8_t code;
  switch (text[0]) {
    case 'b': code = kDLBool; break;
    case 'i': code = kDLInt; break;
    case 'u': code = kDLUInt; break;
    case 'f': code = kDLFloat; break;
    case 'c': code = kDLComplex; break;
    default: return 0;
  }
  unsigned bytes = 0;
  const char *p = text + 1;
  if (*p < '0' || *p > '9') return 0;
  for (; *p >= '0' && *p <= '9'; p++) {
    bytes = bytes * 10 + (unsigned)(*p - '0');
    if (bytes > 16) return 0;
  }
  if (*p != '\0') return 0;
  int ok;
  switch (code) {
    case kDLBool: ok = bytes == 1; break;
    case kDLInt:
    case kDLUInt: ok = bytes == 1 || bytes == 2 || bytes == 4 || bytes == 8;
      break;
    case kDLFloat: ok = bytes == 2 || bytes == 4 || bytes == 8; break;
    default: ok = bytes == 8 || bytes == 16; break;
  }
  if (!ok) return 0;
  *out = (DLDataType){code, (uint8_t)(bytes * 8), 1};
  return 1;
}

static int dlbpy_foreign_order(PyObject *shown) {
  PyErr_Format(PyExc_ValueError,
               "dtype %R is in %s byte order; dlbridge tensors are in the "
               "machine's (native) order",
               shown,
               DLBPY_FOREIGN_ORDER == '>' ? "big-endian" : "little-endian");
  return -1;
}

/* A name or a NumPy code (codes may start with a byte-order mark). */
static int dlbpy_parse_dtype_text(PyObject *str, PyObject *shown,
                                  DLDataType *out) {
  const char *text = dlbpy_name_text(str, "dtype");
  if (text == NULL) return -1;
  const char *code = text;
  if (code[0] == DLBPY_FOREIGN_ORDER) {
    /* A one-byte type has no byte order: NumPy reads '>i1' as int8, and
     * load_npy takes it in a header. */
    DLDataType one;
    if ((dlbpy_alias(code + 1, &one) || dlbpy_kind_code(code + 1, &one)) &&
        one.bits == 8) {
      *out = one;
      return 0;
    }
    return dlbpy_foreign_order(shown);
  }
  if (code[0] == DLBPY_NATIVE_ORDER || code[0] == '=' || code[0] == '|')
    code++;
  /* Codes first: a failed dlb_dtype_parse would set dlb_last_error on a
   * call that succeeds. */
  if (dlbpy_alias(code, out) || dlbpy_kind_code(code, out)) return 0;
  DLDataType dtype;
  if (code == text && dlb_dtype_parse(text, &dtype) == DLB_OK) {
    *out = dtype;
    return 0;
  }
  /* A name of a type's form with a field DLPack refuses ("int3",
   * "int300"): the core's reason, after the name it repeats. */
  const char *why = code == text ? strstr(dlb_last_error(), "\": ") : NULL;
  if (why != NULL && strstr(why, "known type name") == NULL) {
    /* Copied first: the reason lies in the core's per-thread message,
     * which the repr of shown (a dtype-like object's own code) may
     * overwrite by calling dlbridge. */
    PyObject *reason = PyUnicode_FromString(why + 3);
    if (reason == NULL) return -1;
    PyErr_Format(PyExc_ValueError, "dtype %R is not known (%U); dtype "
                 "takes %s", shown, reason, DLBPY_DTYPE_FORMS);
    Py_DECREF(reason);
    return -1;
  }
  PyErr_Format(PyExc_ValueError, "dtype %R is not known; dtype takes %s",
               shown, DLBPY_DTYPE_FORMS);
  return -1;
}

/* 1 when type comes from module or one of its submodules, 0 when not
 * (or its __module__ cannot be read), -1 with an exception that must not
 * be replaced (dlbpy_error_replaceable). */
static int dlbpy_type_from(PyTypeObject *type, const char *module) {
  PyObject *mod = PyObject_GetAttrString((PyObject *)type, "__module__");
  if (mod == NULL) {
    if (!dlbpy_error_replaceable()) return -1;
    PyErr_Clear();
    return 0;
  }
  int r = 0;
  if (PyUnicode_Check(mod)) {
    const char *m = PyUnicode_AsUTF8(mod);
    if (m == NULL) {
      if (dlbpy_error_replaceable())
        PyErr_Clear();
      else
        r = -1;
    } else {
      size_t n = strlen(module);
      r = strncmp(m, module, n) == 0 && (m[n] == '\0' || m[n] == '.');
    }
  }
  Py_DECREF(mod);
  return r;
}

/* obj.name in *out: 1 found, 0 missing, -1 error. */
static int dlbpy_optional_attr(PyObject *obj, const char *name,
                               PyObject **out) {
  PyObject *key = PyUnicode_FromString(name);
  if (key == NULL) return -1;
  int found = DLBPY_GET_OPTIONAL_ATTR(obj, key, out);
  Py_DECREF(key);
  return found;
}

static int dlbpy_dtype_type_error(PyObject *obj) {
  if (PyType_Check(obj))
    PyErr_Format(PyExc_TypeError, "dtype must be %s, not the type %.100s",
                 DLBPY_DTYPE_FORMS, ((PyTypeObject *)obj)->tp_name);
  else
    PyErr_Format(PyExc_TypeError, "dtype must be %s, not %.100s",
                 DLBPY_DTYPE_FORMS, Py_TYPE(obj)->tp_name);
  return -1;
}

/* A NumPy dtype, or anything dtype-like with a str name: refused when its
 * byteorder attribute names the foreign order. */
static int dlbpy_parse_dtype_object(PyObject *obj, DLDataType *out) {
  PyObject *name = NULL;
  int found = dlbpy_optional_attr(obj, "name", &name);
  if (found < 0) return -1;
  if (found == 0 || !PyUnicode_Check(name)) {
    Py_XDECREF(name);
    return dlbpy_dtype_type_error(obj);
  }
  PyObject *order = NULL;
  found = dlbpy_optional_attr(obj, "byteorder", &order);
  if (found < 0) {
    Py_DECREF(name);
    return -1;
  }
  int rc;
  if (found && PyUnicode_Check(order) &&
      PyUnicode_GetLength(order) == 1 &&
      PyUnicode_ReadChar(order, 0) == (Py_UCS4)DLBPY_FOREIGN_ORDER) {
    rc = dlbpy_foreign_order(obj);
  } else {
    rc = dlbpy_parse_dtype_text(name, obj, out);
  }
  Py_XDECREF(order);
  Py_DECREF(name);
  return rc;
}

/* A Python or NumPy scalar type. */
static int dlbpy_parse_dtype_type(PyTypeObject *type, DLDataType *out) {
  if (type == &PyBool_Type) {
    *out = (DLDataType){kDLBool, 8, 1};
    return 0;
  }
  if (type == &PyLong_Type) {
    *out = (DLDataType){kDLInt, 64, 1};
    return 0;
  }
  if (type == &PyFloat_Type) {
    *out = (DLDataType){kDLFloat, 64, 1};
    return 0;
  }
  if (type == &PyComplex_Type) {
    *out = (DLDataType){kDLComplex, 128, 1};
    return 0;
  }
  int from = dlbpy_type_from(type, "numpy");
  if (from == 0) from = dlbpy_type_from(type, "ml_dtypes");
  if (from < 0) return -1;
  if (from == 0) return dlbpy_dtype_type_error((PyObject *)type);
  /* A scalar type's default instance (zero) carries its dtype, which
   * tells the C type behind aliases such as numpy.intc. */
  PyObject *zero = PyObject_CallNoArgs((PyObject *)type);
  if (zero == NULL) {
    if (!dlbpy_error_replaceable()) return -1;
    PyErr_Clear();
    return dlbpy_dtype_type_error((PyObject *)type);
  }
  PyObject *dtype = NULL;
  int found = dlbpy_optional_attr(zero, "dtype", &dtype);
  Py_DECREF(zero);
  if (found < 0) return -1;
  if (found == 0) return dlbpy_dtype_type_error((PyObject *)type);
  int rc = dlbpy_parse_dtype_object(dtype, out);
  Py_DECREF(dtype);
  return rc;
}

int dlbpy_parse_dtype(PyObject *obj, DLDataType *out) {
  if (PyUnicode_Check(obj)) return dlbpy_parse_dtype_text(obj, obj, out);
  if (PyType_Check(obj))
    return dlbpy_parse_dtype_type((PyTypeObject *)obj, out);
  if (strcmp(Py_TYPE(obj)->tp_name, "torch.dtype") == 0) {
    /* str(torch.bfloat16) is 'torch.bfloat16'; the rest is our name. */
    PyObject *str = PyObject_Str(obj);
    if (str == NULL) return -1;
    int rc;
    PyObject *prefix = PyUnicode_FromString("torch.");
    if (prefix == NULL) {
      rc = -1;
    } else if (PyUnicode_Tailmatch(str, prefix, 0, PY_SSIZE_T_MAX, -1) == 1) {
      PyObject *name = PyUnicode_Substring(str, 6, PY_SSIZE_T_MAX);
      if (name == NULL) {
        rc = -1;
      } else {
        const char *text = dlbpy_name_text(name, "dtype");
        DLDataType dtype;
        if (text == NULL) {
          rc = -1;
        } else if (dlb_dtype_parse(text, &dtype) == DLB_OK) {
          *out = dtype;
          rc = 0;
        } else {
          PyErr_Format(PyExc_ValueError,
                       "dtype %R has no DLPack type; dtype takes %s", obj,
                       DLBPY_DTYPE_FORMS);
          rc = -1;
        }
        Py_DECREF(name);
      }
    } else {
      rc = dlbpy_dtype_type_error(obj);
    }
    Py_XDECREF(prefix);
    Py_DECREF(str);
    return rc;
  }
  return dlbpy_parse_dtype_object(obj, out);
}
