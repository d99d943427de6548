/*
 * scalars.c -- a one-element Tensor as a Python number: item(), bool(),
 * int(), float() and complex(), as NumPy and PyTorch read their
 * one-element arrays. There is no __index__: with it every Tensor would
 * pass for an integer wherever PyIndex_Check decides (shapes, indices,
 * fill values), whatever its dtype and size.
 */
#include "dlbpy.h"

/* The one element of self as a Python scalar; what names the caller in
 * messages. */
static PyObject *dlbpy_only_element(PyObject *self, const char *what) {
  const DLTensor *t = &((dlbpy_tensor *)self)->mt->dl_tensor;
  int64_t n = 0;
  if (dlb_tensor_numel(t, &n) != DLB_OK || n != 1) {
    PyErr_Format(PyExc_ValueError,
                 "%s needs a tensor of one element; this one has %lld", what,
                 (long long)n);
    return NULL;
  }
  if (!dlb_device_type_cpu_accessible(t->device.device_type)) {
    PyErr_Format(PyExc_BufferError,
                 "%s: the CPU cannot read this tensor's memory; copy it to "
                 "'cpu' first",
                 what);
    return NULL;
  }
  if (!dlbpy_dtype_readable(t->dtype)) {
    PyErr_Format(PyExc_TypeError, "%s: this dtype has no Python scalar type",
                 what);
    return NULL;
  }
  /* Every index of a one-element tensor is 0: the element is the first. */
  return dlbpy_element_get(t->dtype, (const char *)t->data + t->byte_offset);
}

PyObject *dlbpy_tensor_item(PyObject *self, PyObject *unused) {
  (void)unused;
  return dlbpy_only_element(self, "item()");
}

int dlbpy_tensor_bool(PyObject *self) {
  PyObject *v = dlbpy_only_element(self, "bool()");
  if (v == NULL) return -1;
  int r = PyObject_IsTrue(v);
  Py_DECREF(v);
  return r;
}

/* The one element, converted by convert (a new reference or NULL). */
static PyObject *dlbpy_element_as(PyObject *self, const char *what,
                                  PyObject *(*convert)(PyObject *)) {
  PyObject *v = dlbpy_only_element(self, what);
  if (v == NULL) return NULL;
  PyObject *r = convert(v);
  Py_DECREF(v);
  return r;
}

PyObject *dlbpy_tensor_int(PyObject *self) {
  return dlbpy_element_as(self, "int()", PyNumber_Long);
}

PyObject *dlbpy_tensor_float(PyObject *self) {
  return dlbpy_element_as(self, "float()", PyNumber_Float);
}

PyObject *dlbpy_tensor_complex(PyObject *self, PyObject *unused) {
  (void)unused;
  PyObject *v = dlbpy_only_element(self, "complex()");
  if (v == NULL) return NULL;
  Py_complex c = PyComplex_AsCComplex(v);
  Py_DECREF(v);
  if (c.real == -1.0 && PyErr_Occurred()) return NULL;
  return PyComplex_FromCComplex(c);
}
