/*
 * argparse.c -- argument parsing for vectorcall entry points, and the
 * converters for the arguments every entry point shares (copy, device,
 * shape; dtype is in dtype_arg.c).
 *
 * PyArg_ParseTupleAndKeywords would build a tuple and a dict per call; the
 * DLPack entry points are called millions of times, so they parse the
 * vectorcall arrays directly.
 */
#include <assert.h>
#include <string.h>

#include "dlbpy.h"

int dlbpy_parse_args(const char *fname, PyObject *const *args,
                     Py_ssize_t nargsf, PyObject *kwnames,
                     const dlbpy_param *params, Py_ssize_t nparams) {
  Py_ssize_t posonly = 0, npos = 0;
  for (Py_ssize_t j = 0; j < nparams; j++) {
    /* The kinds come in signature order, as Python requires. */
    assert(j == 0 || params[j - 1].kind <= params[j].kind);
    if (params[j].kind == DLBPY_POSONLY) posonly++;
    if (params[j].kind != DLBPY_KWONLY) npos++;
  }
  Py_ssize_t nargs = PyVectorcall_NARGS(nargsf);
  if (nargs > npos) {
    if (npos == 0)
      PyErr_Format(PyExc_TypeError,
                   "%s() takes no positional arguments (%zd given)", fname,
                   nargs);
    else
      PyErr_Format(PyExc_TypeError,
                   "%s() takes at most %zd positional argument%s (%zd given)",
                   fname, npos, npos == 1 ? "" : "s", nargs);
    return -1;
  }
  for (Py_ssize_t i = 0; i < nargs; i++) *params[i].value = args[i];
  Py_ssize_t nkw = kwnames == NULL ? 0 : PyTuple_GET_SIZE(kwnames);
  for (Py_ssize_t k = 0; k < nkw; k++) {
    PyObject *key = PyTuple_GET_ITEM(kwnames, k);
    Py_ssize_t j = posonly;
    for (; j < nparams; j++)
      if (PyUnicode_CompareWithASCIIString(key, params[j].name) == 0) break;
    if (j == nparams) {
      PyErr_Format(PyExc_TypeError,
                   "%s() got an unexpected keyword argument '%U'", fname, key);
      return -1;
    }
    if (j < nargs) {
      PyErr_Format(PyExc_TypeError,
                   "%s() got multiple values for argument '%s'", fname,
                   params[j].name);
      return -1;
    }
    *params[j].value = args[nargs + k];
  }
  for (Py_ssize_t j = 0; j < nparams; j++) {
    if (params[j].kind <= DLBPY_REQUIRED && *params[j].value == NULL) {
      PyErr_Format(PyExc_TypeError, "%s() missing required argument '%s'",
                   fname, params[j].name);
      return -1;
    }
  }
  return 0;
}

const char *dlbpy_name_text(PyObject *str, const char *what) {
  Py_ssize_t size = 0;
  const char *text = PyUnicode_AsUTF8AndSize(str, &size);
  if (text == NULL) {
    /* A lone surrogate: UnicodeEncodeError would name neither the field
     * nor the text. */
    if (PyErr_ExceptionMatches(PyExc_UnicodeEncodeError)) {
      PyErr_Clear();
      PyErr_Format(PyExc_ValueError,
                   "%s %R holds a lone surrogate, which UTF-8 cannot encode; "
                   "names hold none",
                   what, str);
    }
    return NULL;
  }
  const char *nul = memchr(text, '\0', (size_t)size);
  if (nul != NULL) {
    PyErr_Format(PyExc_ValueError,
                 "%s %R has a NUL character at byte %zd; names hold none",
                 what, str, (Py_ssize_t)(nul - text));
    return NULL;
  }
  return text;
}

int dlbpy_error_replaceable(void) {
  return PyErr_ExceptionMatches(PyExc_Exception) &&
         !PyErr_ExceptionMatches(PyExc_MemoryError);
}

int dlbpy_parse_copy(PyObject *obj, const char *what, int *out) {
  if (obj == NULL || obj == Py_None) *out = -1;
  else if (obj == Py_True) *out = 1;
  else if (obj == Py_False) *out = 0;
  else {
    PyErr_Format(PyExc_TypeError, "%s must be True, False or None, not %.100s",
                 what, Py_TYPE(obj)->tp_name);
    return -1;
  }
  return 0;
}

/* obj as a long long and *overflow as PyLong_AsLongLongAndOverflow sets
 * it; TypeError for anything but an int (bools included). */
static int dlbpy_int_of(PyObject *obj, const char *what, long long *v,
                        int *overflow) {
  *overflow = 0;
  if (PyLong_CheckExact(obj)) {
    /* The usual case: an int needs no __index__, and cannot fail. */
    *v = PyLong_AsLongLongAndOverflow(obj, overflow);
    return 0;
  }
  if (PyBool_Check(obj) || !PyIndex_Check(obj)) {
    PyErr_Format(PyExc_TypeError, "%s must be an int, not %.100s", what,
                 Py_TYPE(obj)->tp_name);
    return -1;
  }
  PyObject *index = PyNumber_Index(obj);
  if (index == NULL) return -1;
  *v = PyLong_AsLongLongAndOverflow(index, overflow);
  Py_DECREF(index);
  return *v == -1 && PyErr_Occurred() ? -1 : 0;
}

int dlbpy_try_index(PyObject *obj, PyObject **out) {
  *out = NULL;
  if (!PyIndex_Check(obj)) return 0;
  PyObject *index = PyNumber_Index(obj);
  if (index == NULL) {
    if (PyLong_Check(obj) || !PyErr_ExceptionMatches(PyExc_TypeError))
      return -1;
    PyErr_Clear();
    return 0;
  }
  *out = index;
  return 1;
}

int dlbpy_parse_int64(PyObject *obj, const char *what, int64_t *out) {
  long long v;
  int overflow;
  if (dlbpy_int_of(obj, what, &v, &overflow) < 0) return -1;
  if (overflow) {
    PyErr_Format(PyExc_OverflowError, "%s does not fit in 64 bits", what);
    return -1;
  }
  *out = (int64_t)v;
  return 0;
}

int dlbpy_parse_int64_saturating(PyObject *obj, const char *what,
                                 int64_t *out) {
  long long v;
  int overflow;
  if (dlbpy_int_of(obj, what, &v, &overflow) < 0) return -1;
  *out = overflow > 0 ? INT64_MAX : overflow < 0 ? INT64_MIN : (int64_t)v;
  return 0;
}

/* obj.name in *out and 1; *out NULL and 0 when obj has no such attribute;
 * -1 with an exception set. */
static int dlbpy_try_attr(PyObject *obj, const char *name, PyObject **out) {
  *out = NULL;
  PyObject *key = PyUnicode_InternFromString(name);
  if (key == NULL) return -1;
  int found = DLBPY_GET_OPTIONAL_ATTR(obj, key, out);
  Py_DECREF(key);
  return found;
}

/* A framework's device object that says its kind in .type (a str) and its
 * ordinal in .index (an int, or None), as torch.device does: "cuda" and
 * 1 read as "cuda:1", and None as the ordinal dlbridge takes when none is
 * named, 0. Returns 1 with *out set, 0 when obj is no such object, -1
 * with an exception set. */
static int dlbpy_try_framework_device(PyObject *obj, const char *what,
                                      DLDevice *out) {
  PyObject *type = NULL, *index = NULL;
  int found = dlbpy_try_attr(obj, "type", &type);
  if (found <= 0) return found;
  int rc = -1;
  if (!PyUnicode_Check(type)) {
    rc = 0;
    goto done;
  }
  found = dlbpy_try_attr(obj, "index", &index);
  if (found < 0) goto done;
  if (found == 0 || (index != Py_None && !PyLong_Check(index))) {
    rc = 0;
    goto done;
  }
  PyObject *name = index == Py_None ? PyUnicode_FromFormat("%U", type)
                                    : PyUnicode_FromFormat("%U:%S", type, index);
  if (name == NULL) goto done;
  const char *text = dlbpy_name_text(name, what);
  if (text != NULL) {
    dlb_status s = dlb_device_parse(text, out);
    rc = s == DLB_OK ? 1 : dlbpy_fail(s, PyExc_ValueError, what);
  }
  Py_DECREF(name);
done:
  Py_XDECREF(type);
  Py_XDECREF(index);
  return rc;
}

/* reported: obj is what a producer's __dlpack_device__ said, whose
 * host-type device_id is read as 0, as an import reads a struct's; an
 * argument naming such a device with another id is refused, as the name
 * "cpu:1" is. what names obj in messages: the parameter it was given as
 * ("device", "pin(): kind"), or the answer it is. */
static int dlbpy_parse_device_as(PyObject *obj, int reported,
                                 const char *what, DLDevice *out) {
  DLDevice device;
  if (PyUnicode_Check(obj)) {
    const char *text = dlbpy_name_text(obj, what);
    if (text == NULL) return -1;
    dlb_status s = dlb_device_parse(text, &device);
    if (s != DLB_OK) return dlbpy_fail(s, PyExc_ValueError, what);
  } else if (PyTuple_Check(obj)) {
    if (PyTuple_GET_SIZE(obj) != 2) {
      PyErr_Format(PyExc_TypeError,
                   "%s must be (device_type, device_id), a tuple of 2 "
                   "ints, not of %zd items",
                   what, PyTuple_GET_SIZE(obj));
      return -1;
    }
    /* The items by their own names for a device argument, else as items
     * of what holds them. */
    char type_name[192] = "device_type", id_name[192] = "device_id";
    if (strcmp(what, "device") != 0) {
      PyOS_snprintf(type_name, sizeof type_name, "%s[0] (device_type)", what);
      PyOS_snprintf(id_name, sizeof id_name, "%s[1] (device_id)", what);
    }
    /* Numbers past 64 bits are out of range as those past 32 are. */
    int64_t type, id;
    if (dlbpy_parse_int64_saturating(PyTuple_GET_ITEM(obj, 0), type_name,
                                     &type) < 0 ||
        dlbpy_parse_int64_saturating(PyTuple_GET_ITEM(obj, 1), id_name,
                                     &id) < 0)
      return -1;
    if (type < INT32_MIN || type > INT32_MAX || id < INT32_MIN ||
        id > INT32_MAX) {
      PyErr_Format(PyExc_ValueError, "%s %R is out of range for DLPack", what,
                   obj);
      return -1;
    }
    device.device_type = (DLDeviceType)type;
    device.device_id = (int32_t)id;
    dlb_status s = dlb_device_normalize(&device);
    if (s != DLB_OK) return dlbpy_fail(s, PyExc_ValueError, what);
    if (!reported && device.device_id != (int32_t)id) {
      PyErr_Format(PyExc_ValueError,
                   "%s %R: device_id is %lld; %s memory is not tied to "
                   "one device and takes only 0",
                   what, obj, (long long)id,
                   dlb_device_type_name(device.device_type));
      return -1;
    }
  } else {
    int r = dlbpy_try_framework_device(obj, what, &device);
    if (r < 0) return -1;
    if (r == 0) {
      PyErr_Format(PyExc_TypeError,
                   "%s must be a str such as 'cpu' or 'cuda:1', a "
                   "(device_type, device_id) tuple or a torch.device, not "
                   "%.100s",
                   what, Py_TYPE(obj)->tp_name);
      return -1;
    }
  }
  *out = device;
  return 0;
}

int dlbpy_parse_device(PyObject *obj, DLDevice *out) {
  return dlbpy_parse_device_as(obj, 0, "device", out);
}

int dlbpy_parse_device_named(PyObject *obj, const char *what,
                             DLDevice *out) {
  return dlbpy_parse_device_as(obj, 0, what, out);
}

int dlbpy_parse_reported_device(PyObject *obj, const char *what,
                                DLDevice *out) {
  return dlbpy_parse_device_as(obj, 1, what, out);
}

static int dlbpy_parse_extent(PyObject *obj, int64_t *out) {
  int64_t v;
  if (dlbpy_parse_int64(obj, "shape entry", &v) < 0) return -1;
  if (v < 0) {
    PyErr_Format(PyExc_ValueError,
                 "negative dimensions are not allowed (got %lld)",
                 (long long)v);
    return -1;
  }
  *out = v;
  return 0;
}

int dlbpy_is_one_int(PyObject *obj) {
  if (PyLong_Check(obj)) return !PyBool_Check(obj);
  if (!PyIndex_Check(obj)) return 0;
  if (!PySequence_Check(obj)) return 1;
  /* A NumPy array has __index__ (for its one element) and a length: one
   * with a length is a sequence of ints; a 0-d one (no length) is one. */
  Py_ssize_t n = PySequence_Size(obj);
  if (n >= 0) return 0;
  if (!PyErr_ExceptionMatches(PyExc_TypeError)) return -1;
  PyErr_Clear();
  return 1;
}

static int dlbpy_too_many_dims(const char *what, Py_ssize_t n) {
  PyErr_Format(PyExc_ValueError, "%s has %zd dimensions; at most %d", what, n,
               DLB_MAX_NDIM);
  return -1;
}

PyObject *dlbpy_items_by_index(PyObject *seq, Py_ssize_t n,
                               const char *what) {
  /* Grown item by item: a __len__ that lies costs no memory it names. */
  PyObject *items = PyList_New(0);
  for (Py_ssize_t i = 0; items != NULL && i < n; i++) {
    PyObject *item = ((i + 1) & 0x3fff) == 0 && PyErr_CheckSignals() < 0
                         ? NULL
                         : PySequence_GetItem(seq, i);
    if (item == NULL || PyList_Append(items, item) < 0) {
      if (item == NULL && PyErr_ExceptionMatches(PyExc_IndexError)) {
        PyErr_Clear();
        PyErr_Format(PyExc_ValueError,
                     "%s has length %zd by its __len__, but its item %zd "
                     "raised IndexError",
                     what, n, i);
      }
      Py_CLEAR(items);
    }
    Py_XDECREF(item);
  }
  return items;
}

/* The items of an iterable without a length, one more than
 * DLB_MAX_NDIM at most: an endless one is refused, not read forever. */
static PyObject *dlbpy_items_by_iteration(PyObject *seq, const char *what) {
  PyObject *it = PyObject_GetIter(seq);
  if (it == NULL) return NULL;
  PyObject *list = PyList_New(0);
  PyObject *item = NULL;
  while (list != NULL && (item = PyIter_Next(it)) != NULL) {
    if (PyList_Append(list, item) < 0) Py_CLEAR(list);
    else if (PyList_GET_SIZE(list) > DLB_MAX_NDIM) {
      PyErr_Format(PyExc_ValueError,
                   "%s has more than %d dimensions (it has no length, and "
                   "iterating it gave more)",
                   what, DLB_MAX_NDIM);
      Py_CLEAR(list);
    }
    Py_DECREF(item);
  }
  Py_DECREF(it);
  if (list == NULL || PyErr_Occurred()) {
    Py_XDECREF(list);
    return NULL;
  }
  PyObject *tuple = PyList_AsTuple(list);
  Py_DECREF(list);
  return tuple;
}

PyObject *dlbpy_dims_tuple(PyObject *seq, const char *what) {
  /* Tuples and lists, the common case, are copied (a tuple is taken as it
   * is) without running Python code. Only exact ones: a subclass's tuple()
   * goes through its own __iter__, which may give more items than the
   * size checked here; a subclass is read as any sequence is. */
  if (PyTuple_CheckExact(seq) || PyList_CheckExact(seq)) {
    if (PySequence_Fast_GET_SIZE(seq) > DLB_MAX_NDIM) {
      dlbpy_too_many_dims(what, PySequence_Fast_GET_SIZE(seq));
      return NULL;
    }
    return PySequence_Tuple(seq);
  }
  /* The length first: a sequence of 2**40 items (a Tensor) is refused
   * before a tuple of them is built. */
  Py_ssize_t n = PySequence_Size(seq);
  if (n < 0) {
    /* No length (iteration alone). */
    if (!PyErr_ExceptionMatches(PyExc_TypeError)) return NULL;
    PyErr_Clear();
    return dlbpy_items_by_iteration(seq, what);
  }
  if (n > DLB_MAX_NDIM) {
    dlbpy_too_many_dims(what, n);
    return NULL;
  }
  PyObject *items = dlbpy_items_by_index(seq, n, what);
  if (items == NULL) return NULL;
  PyObject *tuple = PyList_AsTuple(items);
  Py_DECREF(items);
  return tuple;
}

int dlbpy_parse_shape(PyObject *obj, int32_t *ndim, int64_t *shape) {
  const int one = dlbpy_is_one_int(obj);
  if (one < 0) return -1;
  if (one) {
    if (dlbpy_parse_extent(obj, &shape[0]) < 0) return -1;
    *ndim = 1;
    return 0;
  }
  if (PyUnicode_Check(obj) || PyBytes_Check(obj) || !PySequence_Check(obj)) {
    PyErr_Format(PyExc_TypeError,
                 "shape must be an int or a sequence of ints, not %.100s",
                 Py_TYPE(obj)->tp_name);
    return -1;
  }
  /* A tuple snapshot: an item's __index__ may resize or clear a list while
   * it is read, which would free the items still to come. */
  PyObject *seq = dlbpy_dims_tuple(obj, "shape");
  if (seq == NULL) return -1;
  Py_ssize_t n = PyTuple_GET_SIZE(seq);
  int64_t tmp[DLB_MAX_NDIM];
  for (Py_ssize_t i = 0; i < n; i++) {
    if (dlbpy_parse_extent(PyTuple_GET_ITEM(seq, i), &tmp[i]) < 0) {
      Py_DECREF(seq);
      return -1;
    }
  }
  Py_DECREF(seq);
  int64_t numel;
  dlb_status s = dlb_shape_numel((int32_t)n, tmp, &numel);
  if (s != DLB_OK) return dlbpy_fail(s, PyExc_ValueError, "shape");
  memcpy(shape, tmp, (size_t)n * sizeof *tmp);
  *ndim = (int32_t)n;
  return 0;
}
