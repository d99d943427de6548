/*
 * buffer.c -- the buffer protocol both ways (Tensor exports memory the CPU
 * can read; asarray imports any exporter) and __cuda_array_interface__.
 */
#include <string.h>

#include "dlbpy.h"

_Static_assert(sizeof(Py_ssize_t) == sizeof(int64_t),
               "shape arrays are shared between Py_buffer and DLTensor");

/* A non-NULL address for empty buffers whose tensor has no data pointer:
 * consumers may not dereference it, but some reject NULL. */
static char dlbpy_empty_data[1];

/* Byte strides of t (item bytes per element). Dimensions of extent 1 are
 * never stepped, nor any of a tensor without elements, and producers leave
 * any value there; they get itemsize so no product can overflow. */
static int dlbpy_byte_strides(const DLTensor *t, size_t itemsize,
                              Py_ssize_t *out) {
  int empty = 0;
  for (int32_t i = 0; i < t->ndim; i++) empty |= t->shape[i] == 0;
  if (empty) {
    for (int32_t i = 0; i < t->ndim; i++) out[i] = (Py_ssize_t)itemsize;
    return 0;
  }
  /* An accepted tensor has strides whenever ndim != 0. */
  const int64_t *strides = t->strides;
  for (int32_t i = 0; i < t->ndim; i++) {
    int64_t bytes;
    if (t->shape[i] <= 1) {
      out[i] = (Py_ssize_t)itemsize;
    } else if (__builtin_mul_overflow(strides[i], (int64_t)itemsize, &bytes)) {
      PyErr_Format(PyExc_BufferError,
                   "strides[%d] = %lld elements overflows as bytes", (int)i,
                   (long long)strides[i]);
      return -1;
    } else {
      out[i] = (Py_ssize_t)bytes;
    }
  }
  return 0;
}

static void *dlbpy_first_element(const DLTensor *t) {
  return (char *)t->data + t->byte_offset;
}

/* ------------------------------------------------------------------------
 * Export: Tensor's buffer
 * ---------------------------------------------------------------------- */

int dlbpy_tensor_getbuffer(PyObject *self, Py_buffer *view, int flags) {
  const DLManagedTensorVersioned *mt = ((dlbpy_tensor *)self)->mt;
  const DLTensor *t = &mt->dl_tensor;
  char name[DLB_DEVICE_NAME_MAX > DLB_DTYPE_NAME_MAX ? DLB_DEVICE_NAME_MAX
                                                     : DLB_DTYPE_NAME_MAX];
  if (!dlb_device_type_cpu_accessible(t->device.device_type)) {
    if (dlb_device_format(t->device, name, sizeof name) != DLB_OK)
      name[0] = '\0';
    PyErr_Format(PyExc_BufferError,
                 "the tensor is in %s memory, which the CPU cannot read; "
                 "use __dlpack__%s",
                 name,
                 t->device.device_type == kDLCUDA
                     ? " or __cuda_array_interface__"
                     : "");
    return -1;
  }
  const char *format = dlbpy_dtype_buffer_format(t->dtype);
  if (format == NULL) {
    if (dlb_dtype_format(t->dtype, name, sizeof name) != DLB_OK)
      name[0] = '\0';
    PyErr_Format(PyExc_BufferError,
                 "dtype %s has no buffer-protocol format; use __dlpack__",
                 name);
    return -1;
  }
  int readonly = (mt->flags & DLPACK_FLAG_BITMASK_READ_ONLY) != 0;
  if ((flags & PyBUF_WRITABLE) && readonly) {
    PyErr_SetString(PyExc_BufferError, "the tensor is read-only");
    return -1;
  }
  int c_contig = dlb_tensor_is_c_contiguous(t);
  int f_contig = dlb_tensor_is_f_contiguous(t);
  if (((flags & PyBUF_C_CONTIGUOUS) == PyBUF_C_CONTIGUOUS && !c_contig) ||
      ((flags & PyBUF_F_CONTIGUOUS) == PyBUF_F_CONTIGUOUS && !f_contig) ||
      ((flags & PyBUF_ANY_CONTIGUOUS) == PyBUF_ANY_CONTIGUOUS && !c_contig &&
       !f_contig) ||
      ((flags & PyBUF_STRIDES) != PyBUF_STRIDES && !c_contig)) {
    PyErr_SetString(PyExc_BufferError,
                    "the tensor is not contiguous in the order the buffer "
                    "request needs");
    return -1;
  }
  int64_t numel;
  dlb_status s = dlb_tensor_numel(t, &numel);
  if (s != DLB_OK) return dlbpy_fail(s, PyExc_BufferError, "shape");
  size_t itemsize = dlb_dtype_itemsize(t->dtype);
  int64_t len;
  if (__builtin_mul_overflow(numel, (int64_t)itemsize, &len)) {
    PyErr_SetString(PyExc_BufferError, "the tensor's byte size overflows");
    return -1;
  }
  Py_ssize_t *dims = NULL;
  if (t->ndim > 0) {
    dims = PyMem_Malloc(2 * (size_t)t->ndim * sizeof *dims);
    if (dims == NULL) {
      PyErr_NoMemory();
      return -1;
    }
    memcpy(dims, t->shape, (size_t)t->ndim * sizeof *dims);
    if (dlbpy_byte_strides(t, itemsize, dims + t->ndim) < 0) {
      PyMem_Free(dims);
      return -1;
    }
  }
  view->buf = t->data != NULL ? dlbpy_first_element(t) : dlbpy_empty_data;
  view->obj = self;
  Py_INCREF(self);
  view->len = (Py_ssize_t)len;
  view->readonly = readonly;
  view->itemsize = (Py_ssize_t)itemsize;
  view->format = (flags & PyBUF_FORMAT) ? (char *)(uintptr_t)format : NULL;
  if ((flags & PyBUF_ND) == PyBUF_ND) {
    view->ndim = t->ndim;
    view->shape = dims;
    view->strides =
        (flags & PyBUF_STRIDES) == PyBUF_STRIDES && dims ? dims + t->ndim
                                                         : NULL;
  } else {
    /* A plain byte buffer, as PyBuffer_FillInfo gives. */
    view->ndim = 1;
    view->shape = NULL;
    view->strides = NULL;
  }
  view->suboffsets = NULL;
  view->internal = dims;
  return 0;
}

void dlbpy_tensor_releasebuffer(PyObject *self, Py_buffer *view) {
  (void)self;
  PyMem_Free(view->internal);
}

/* ------------------------------------------------------------------------
 * __cuda_array_interface__
 * ---------------------------------------------------------------------- */

PyObject *dlbpy_tensor_cuda_array_interface(PyObject *self, void *closure) {
  (void)closure;
  const DLManagedTensorVersioned *mt = ((dlbpy_tensor *)self)->mt;
  const DLTensor *t = &mt->dl_tensor;
  DLDeviceType type = t->device.device_type;
  if (type != kDLCUDA && type != kDLCUDAHost && type != kDLCUDAManaged) {
    char name[DLB_DEVICE_NAME_MAX];
    if (dlb_device_format(t->device, name, sizeof name) != DLB_OK)
      name[0] = '\0';
    PyErr_Format(PyExc_AttributeError,
                 "__cuda_array_interface__: the tensor is in %s memory, which "
                 "CUDA cannot address",
                 name);
    return NULL;
  }
  const char *typestr = dlbpy_dtype_typestr(t->dtype);
  if (typestr == NULL) {
    PyErr_SetString(PyExc_AttributeError,
                    "__cuda_array_interface__: the tensor's dtype has no "
                    "array-interface type string; use __dlpack__");
    return NULL;
  }
  int64_t numel;
  dlb_status s = dlb_tensor_numel(t, &numel);
  if (s != DLB_OK) return dlbpy_raise(s, PyExc_BufferError, "shape");
  PyObject *shape = PyTuple_New(t->ndim);
  if (shape == NULL) return NULL;
  for (int32_t i = 0; i < t->ndim; i++) {
    PyObject *v = PyLong_FromLongLong((long long)t->shape[i]);
    if (v == NULL) {
      Py_DECREF(shape);
      return NULL;
    }
    PyTuple_SET_ITEM(shape, i, v);
  }
  PyObject *strides = Py_None;
  Py_INCREF(strides);
  if (!dlb_tensor_is_c_contiguous(t)) {
    Py_ssize_t bytes[DLB_MAX_NDIM];
    if (dlbpy_byte_strides(t, dlb_dtype_itemsize(t->dtype), bytes) < 0) {
      Py_DECREF(shape);
      Py_DECREF(strides);
      return NULL;
    }
    Py_DECREF(strides);
    strides = PyTuple_New(t->ndim);
    for (int32_t i = 0; strides != NULL && i < t->ndim; i++) {
      PyObject *v = PyLong_FromSsize_t(bytes[i]);
      if (v == NULL) Py_CLEAR(strides);
      else PyTuple_SET_ITEM(strides, i, v);
    }
    if (strides == NULL) {
      Py_DECREF(shape);
      return NULL;
    }
  }
  /* The interface gives 0 for the pointer of an empty array. */
  void *data = numel == 0 ? NULL : dlbpy_first_element(t);
  int readonly = (mt->flags & DLPACK_FLAG_BITMASK_READ_ONLY) != 0;
  /* stream None: dlbridge's data is ready when the tensor exists. */
  return Py_BuildValue("{s:N,s:s,s:(NO),s:i,s:N,s:O}", "shape", shape,
                       "typestr", typestr, "data", PyLong_FromVoidPtr(data),
                       readonly ? Py_True : Py_False, "version", 3, "strides",
                       strides, "stream", Py_None);
}

/* ------------------------------------------------------------------------
 * Import: any buffer exporter as a tensor
 * ---------------------------------------------------------------------- */

/* The dtype of a struct-module format with one item (no counts, no
 * structs) of view->itemsize bytes in native byte order. The item size
 * must be the one the format letter gives: a buffer that says 'b' with
 * 4-byte items is refused, as NumPy and memoryview refuse it, not read
 * as int32. */
static int dlbpy_format_dtype(const char *format, Py_ssize_t itemsize,
                              DLDataType *out) {
  /* Named in messages too: no format means bytes. */
  if (format == NULL) format = "B";
  const char *f = format;
  int native = 1;
  switch (*f) {
    case '@':
    case '=':
      f++;
      break;
    case '<':
      native = PY_LITTLE_ENDIAN;
      f++;
      break;
    case '>':
    case '!':
      native = !PY_LITTLE_ENDIAN;
      f++;
      break;
    default:
      break;
  }
  DLDataType dtype = {0, 0, 1};
  /* The item size the letter gives; 0 for 'l' and 'L', 4 or 8 bytes: a C
   * long's size varies, and struct's standard size for them is 4. */
  Py_ssize_t expect;
  int complex = 0;
  if (f[0] == 'Z') {
    complex = 1;
    f++;
  }
  if (f[0] == '\0' || f[1] != '\0') goto unsupported;
  switch (f[0]) {
    case 'b': case 'h': case 'i': case 'l': case 'q': case 'n':
      dtype.code = kDLInt;
      break;
    case 'B': case 'H': case 'I': case 'L': case 'Q': case 'N': case 'c':
      dtype.code = kDLUInt;
      break;
    case '?':
      dtype.code = kDLBool;
      break;
    case 'e': case 'f': case 'd':
      dtype.code = kDLFloat;
      break;
    default:
      goto unsupported;
  }
  switch (f[0]) {
    case 'b': case 'B': case 'c': case '?':
      expect = 1;
      break;
    case 'h': case 'H': case 'e':
      expect = 2;
      break;
    case 'i': case 'I': case 'f':
      expect = 4;
      break;
    case 'q': case 'Q': case 'd':
      expect = 8;
      break;
    case 'n': case 'N':
      expect = (Py_ssize_t)sizeof(size_t);
      break;
    default: /* 'l', 'L' */
      expect = 0;
      break;
  }
  if (complex) {
    if (dtype.code != kDLFloat) goto unsupported;
    dtype.code = kDLComplex;
    expect *= 2;
  }
  if (expect != 0 ? itemsize != expect : itemsize != 4 && itemsize != 8) {
    PyErr_Format(PyExc_BufferError,
                 "buffer format '%s' with item size %zd is not a DLPack type",
                 format, itemsize);
    return -1;
  }
  if (!native && itemsize > 1) {
    PyErr_Format(PyExc_BufferError,
                 "buffer format '%s' is not in native byte order; DLPack "
                 "data always is",
                 format);
    return -1;
  }
  dtype.bits = (uint8_t)(itemsize * 8);
  *out = dtype;
  return 0;
unsupported:
  PyErr_Format(PyExc_BufferError,
               "buffer format '%s' has no DLPack type (one number per item "
               "is needed)",
               format);
  return -1;
}

int dlbpy_buffer_scalar_dtype(PyObject *obj, DLDataType *out) {
  Py_buffer view;
  if (PyObject_GetBuffer(obj, &view, PyBUF_RECORDS_RO) < 0) return -1;
  int rc = 0;
  if (view.ndim == 0) {
    rc = dlbpy_format_dtype(view.format, view.itemsize, out) == 0;
    /* The import that follows says what is wrong with the format. */
    if (!rc) PyErr_Clear();
  }
  PyBuffer_Release(&view);
  return rc;
}

void dlbpy_buffer_free(void *ctx) {
  Py_buffer *view = ctx;
  PyBuffer_Release(view);
  PyMem_RawFree(view);
}

void dlbpy_release_buffer(void *ctx) {
  dlbpy_call_with_gil(dlbpy_buffer_free, ctx);
}

/* The Tensor that exported view, directly or through memoryviews of it,
 * or NULL. */
static PyObject *dlbpy_buffer_tensor(const Py_buffer *view) {
  PyObject *exporter = view->obj;
  /* A memoryview's buffer is the one its base exported, sliced or cast. */
  if (exporter != NULL && PyMemoryView_Check(exporter))
    exporter = PyMemoryView_GET_BASE(exporter);
  return exporter != NULL && dlbpy_tensor_check(exporter) ? exporter : NULL;
}

/* A tensor of desc: sharing the owner of the Tensor that exported the
 * buffer, which keeps the memory alive without the buffer (wrapping the
 * buffer would keep that Tensor alive, and a loop of buffer round trips
 * would build a chain of them), or else owning the buffer. */
int dlbpy_buffer_wrap(Py_buffer *view, const DLTensor *desc, uint64_t flags,
                      PyObject *exc, const char *what,
                      DLManagedTensorVersioned **out) {
  PyObject *tensor = dlbpy_buffer_tensor(view);
  if (tensor != NULL) {
    const DLManagedTensorVersioned *root = dlbpy_tensor_owned(tensor);
    if (root == NULL) return -1;
    dlb_status s = dlb_tensor_redescribe(root, desc, flags, out);
    if (s != DLB_OK) return dlbpy_fail(s, exc, what);
    dlbpy_buffer_free(view);
    return 0;
  }
  dlb_status s = dlb_tensor_wrap(desc, flags, dlbpy_release_buffer, view, out);
  return s == DLB_OK ? 0 : dlbpy_fail(s, exc, what);
}

/* NumPy's datetime64 and timedelta64 scalars export their 8 bytes as a
 * buffer of unsigned bytes, which would import as a uint8 vector of the
 * raw value; DLPack has no type for them (NumPy refuses their arrays). */
static int dlbpy_refuse_time_scalar(PyObject *obj) {
  for (PyTypeObject *t = Py_TYPE(obj); t != NULL; t = t->tp_base) {
    if (strcmp(t->tp_name, "numpy.datetime64") == 0 ||
        strcmp(t->tp_name, "numpy.timedelta64") == 0) {
      PyErr_Format(PyExc_BufferError,
                   "%s scalars have no DLPack type", t->tp_name);
      return -1;
    }
  }
  return 0;
}

int dlbpy_import_buffer(PyObject *obj, DLManagedTensorVersioned **out) {
  if (dlbpy_refuse_time_scalar(obj) < 0) return -1;
  /* Raw allocation: the last release may run without the GIL. */
  Py_buffer *view = PyMem_RawMalloc(sizeof *view);
  if (view == NULL) {
    PyErr_NoMemory();
    return -1;
  }
  int readonly = 0;
  if (PyObject_GetBuffer(obj, view, PyBUF_RECORDS) < 0) {
    /* Read-only memory: PyBuffer_FillInfo refuses a writable request with
     * BufferError, NumPy with ValueError. */
    if (!PyErr_ExceptionMatches(PyExc_BufferError) &&
        !PyErr_ExceptionMatches(PyExc_ValueError)) {
      PyMem_RawFree(view);
      return -1;
    }
    PyErr_Clear();
    if (PyObject_GetBuffer(obj, view, PyBUF_RECORDS_RO) < 0) {
      PyMem_RawFree(view);
      return -1;
    }
    readonly = 1;
  }
  readonly |= view->readonly != 0;
  DLDataType dtype;
  int64_t strides[DLB_MAX_NDIM];
  int rc = 0;
  if (view->suboffsets != NULL) {
    PyErr_SetString(PyExc_BufferError,
                    "buffers with suboffsets (indirect arrays) are not DLPack "
                    "tensors");
    rc = -1;
  } else if (view->ndim < 0 || view->ndim > DLB_MAX_NDIM) {
    PyErr_Format(PyExc_BufferError, "buffer has %d dimensions; at most %d",
                 view->ndim, DLB_MAX_NDIM);
    rc = -1;
  } else {
    rc = dlbpy_format_dtype(view->format, view->itemsize, &dtype);
  }
  for (int i = 0; rc == 0 && view->strides != NULL && i < view->ndim; i++) {
    if (view->strides[i] % view->itemsize != 0) {
      PyErr_Format(PyExc_BufferError,
                   "buffer stride[%d] is %zd bytes, not a multiple of the "
                   "item size %zd; DLPack strides count items",
                   i, view->strides[i], view->itemsize);
      rc = -1;
    } else {
      strides[i] = view->strides[i] / view->itemsize;
    }
  }
  if (rc == 0) {
    DLTensor desc;
    desc.data = view->buf;
    desc.device.device_type = kDLCPU;
    desc.device.device_id = 0;
    desc.ndim = view->ndim;
    desc.dtype = dtype;
    desc.shape = (int64_t *)view->shape;
    desc.strides = view->strides != NULL ? strides : NULL;
    desc.byte_offset = 0;
    if (dlbpy_buffer_wrap(view, &desc,
                          readonly ? DLPACK_FLAG_BITMASK_READ_ONLY : 0,
                          PyExc_BufferError, "buffer", out) == 0)
      return 0;
    rc = -1;
  }
  dlbpy_buffer_free(view);
  return rc;
}

/* ------------------------------------------------------------------------
 * __array__: what numpy.asarray(t) and numpy.array(t) call
 * ---------------------------------------------------------------------- */

/*
 * Without this method NumPy reads a Tensor it has no dtype for as a
 * sequence of 0-d Tensors (an object array) or of nothing. Data NumPy has a
 * dtype for goes through the buffer protocol, in place unless a copy or
 * another dtype is asked for; the rest converts only to a dtype the caller
 * names (through the Python numbers tolist() reads), never silently.
 */
PyObject *dlbpy_tensor_array(PyObject *self, PyObject *const *args,
                             Py_ssize_t nargsf, PyObject *kwnames) {
  PyObject *dtype = NULL, *copy_arg = NULL;
  const dlbpy_param params[] = {{"dtype", DLBPY_OPTIONAL, &dtype},
                                {"copy", DLBPY_OPTIONAL, &copy_arg}};
  if (dlbpy_parse_args("__array__", args, nargsf, kwnames, params,
                       DLBPY_NPARAMS(params)) < 0)
    return NULL;
  if (dtype == Py_None) dtype = NULL;
  int copy = -1;
  if (copy_arg != NULL && dlbpy_parse_copy(copy_arg, "copy", &copy) < 0)
    return NULL;
  const DLTensor *t = &((dlbpy_tensor *)self)->mt->dl_tensor;
  char name[DLB_DTYPE_NAME_MAX];
  if (dlb_dtype_format(t->dtype, name, sizeof name) != DLB_OK) name[0] = '\0';
  if (!dlb_device_type_cpu_accessible(t->device.device_type)) {
    PyErr_SetString(PyExc_BufferError,
                    "__array__: the CPU cannot read this tensor's memory; "
                    "copy it to 'cpu' first");
    return NULL;
  }
  PyObject *source;
  int values = 0;
  if (dlbpy_dtype_buffer_format(t->dtype) != NULL) {
    source = PyMemoryView_FromObject(self);
  } else if (!dlbpy_dtype_readable(t->dtype)) {
    PyErr_Format(PyExc_TypeError,
                 "__array__: %s elements have no NumPy dtype and no Python "
                 "number type",
                 name);
    return NULL;
  } else if (dtype == NULL) {
    PyErr_Format(PyExc_TypeError,
                 "__array__: NumPy has no %s dtype; pass one to widen to, "
                 "as in numpy.asarray(t, dtype=numpy.float32)",
                 name);
    return NULL;
  } else if (copy == 0) {
    PyErr_Format(PyExc_ValueError,
                 "__array__: %s elements become a NumPy dtype only in a "
                 "copy, and copy=False forbids one",
                 name);
    return NULL;
  } else {
    source = dlbpy_tensor_tolist(self, NULL);
    values = 1;
  }
  if (source == NULL) return NULL;
  PyObject *r = NULL;
  PyObject *numpy = PyImport_ImportModule("numpy");
  PyObject *asarray =
      numpy != NULL ? PyObject_GetAttrString(numpy, "asarray") : NULL;
  PyObject *kw = asarray != NULL ? PyDict_New() : NULL;
  /* copy= goes to NumPy only when given: NumPy 1 has no such keyword. */
  if (kw != NULL &&
      (dtype == NULL || PyDict_SetItemString(kw, "dtype", dtype) == 0) &&
      (copy < 0 || PyDict_SetItemString(kw, "copy", copy ? Py_True
                                                         : Py_False) == 0)) {
    PyObject *pos = PyTuple_Pack(1, source);
    if (pos != NULL) r = PyObject_Call(asarray, pos, kw);
    Py_XDECREF(pos);
  }
  Py_XDECREF(kw);
  Py_XDECREF(asarray);
  Py_XDECREF(numpy);
  Py_DECREF(source);
  return values ? dlbpy_in_shape_of(r, self) : r;
}
