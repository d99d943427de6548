/*
 * capi_example.c -- a CPython extension that uses dlbridge's C API
 * (dlbridge_capi.h) to read, write and make tensors of any library.
 *
 *   total(x)       sum of the elements of any CPU tensor (NumPy, PyTorch,
 *                  dlbridge ...), any strides, borrowed: no copy, no capsule
 *   scale(x, k)    multiplies a writable float tensor in place
 *   ramp(n)        a float64 tensor 0, 1, ..., n-1 made here with its own
 *                  deleter and handed to Python as a dlbridge.Tensor
 *   owned_ndim(x)  takes an owned tensor, reads it, releases it
 *
 * Build it like any extension, with dlbridge.get_include() on the include
 * path; it links nothing of dlbridge.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdlib.h>

#include "dlbridge_capi.h"

typedef double (*read_fn)(const char *p);

static double read_f32(const char *p) {
  return *(const float *)(const void *)p;
}
static double read_f64(const char *p) {
  return *(const double *)(const void *)p;
}
static double read_i32(const char *p) {
  return *(const int32_t *)(const void *)p;
}
static double read_i64(const char *p) {
  return (double)*(const int64_t *)(const void *)p;
}

static read_fn reader_for(DLDataType t, size_t *itemsize) {
  if (t.lanes != 1) return NULL;
  *itemsize = t.bits / 8;
  if (t.code == kDLFloat && t.bits == 32) return read_f32;
  if (t.code == kDLFloat && t.bits == 64) return read_f64;
  if (t.code == kDLInt && t.bits == 32) return read_i32;
  if (t.code == kDLInt && t.bits == 64) return read_i64;
  return NULL;
}

/* Visits every element in row-major order, whatever the strides. */
static double sum_at(const DLTensor *t, read_fn read, size_t itemsize,
                     int32_t dim, const char *p) {
  if (dim == t->ndim) return read(p);
  double total = 0;
  /* NULL strides (producers before DLPack 1.2) mean compact row-major. */
  int64_t stride = 1;
  if (t->strides != NULL) {
    stride = t->strides[dim];
  } else {
    for (int32_t d = dim + 1; d < t->ndim; d++) stride *= t->shape[d];
  }
  for (int64_t i = 0; i < t->shape[dim]; i++)
    total += sum_at(t, read, itemsize, dim + 1,
                    p + i * stride * (int64_t)itemsize);
  return total;
}

static PyObject *total(PyObject *self, PyObject *obj) {
  (void)self;
  PyObject *owner;
  const DLManagedTensorVersioned *m;
  if (DLBridge_Borrow(obj, DLBRIDGE_REQUIRE_CPU, &owner, &m) < 0) return NULL;
  const DLTensor *t = &m->dl_tensor;
  size_t itemsize = 0;
  read_fn read = reader_for(t->dtype, &itemsize);
  if (read == NULL) {
    Py_DECREF(owner);
    PyErr_SetString(PyExc_TypeError,
                    "total() reads float32, float64, int32 and int64");
    return NULL;
  }
  double sum = sum_at(t, read, itemsize, 0,
                      (const char *)t->data + t->byte_offset);
  Py_DECREF(owner);
  return PyFloat_FromDouble(sum);
}

static void scale_at(const DLTensor *t, double k, int32_t dim, char *p) {
  if (dim == t->ndim) {
    if (t->dtype.bits == 64) *(double *)(void *)p *= k;
    else *(float *)(void *)p = (float)(*(float *)(void *)p * k);
    return;
  }
  int64_t stride = 1;
  if (t->strides != NULL) {
    stride = t->strides[dim];
  } else {
    for (int32_t d = dim + 1; d < t->ndim; d++) stride *= t->shape[d];
  }
  for (int64_t i = 0; i < t->shape[dim]; i++)
    scale_at(t, k, dim + 1, p + i * stride * (int64_t)(t->dtype.bits / 8));
}

static PyObject *scale(PyObject *self, PyObject *const *args,
                       Py_ssize_t nargs) {
  (void)self;
  if (nargs != 2) {
    PyErr_SetString(PyExc_TypeError, "scale(x, k) takes 2 arguments");
    return NULL;
  }
  double k = PyFloat_AsDouble(args[1]);
  if (k == -1.0 && PyErr_Occurred()) return NULL;
  PyObject *owner;
  const DLManagedTensorVersioned *m;
  if (DLBridge_Borrow(args[0], DLBRIDGE_REQUIRE_CPU | DLBRIDGE_REQUIRE_WRITABLE,
                      &owner, &m) < 0)
    return NULL;
  const DLTensor *t = &m->dl_tensor;
  if (t->dtype.code != kDLFloat || t->dtype.lanes != 1 ||
      (t->dtype.bits != 32 && t->dtype.bits != 64)) {
    Py_DECREF(owner);
    PyErr_SetString(PyExc_TypeError, "scale() writes float32 and float64");
    return NULL;
  }
  scale_at(t, k, 0, (char *)t->data + t->byte_offset);
  Py_DECREF(owner);
  Py_RETURN_NONE;
}

/* One allocation holds the struct, its shape and the data. */
typedef struct {
  DLManagedTensorVersioned m;
  int64_t shape[1];
  int64_t strides[1];
  double data[];
} ramp_block;

static void ramp_deleter(DLManagedTensorVersioned *m) { free(m); }

static PyObject *ramp(PyObject *self, PyObject *arg) {
  (void)self;
  Py_ssize_t n = PyNumber_AsSsize_t(arg, PyExc_OverflowError);
  if (n == -1 && PyErr_Occurred()) return NULL;
  if (n < 0 || (size_t)n > (SIZE_MAX - sizeof(ramp_block)) / sizeof(double)) {
    PyErr_SetString(PyExc_ValueError, "ramp(n) needs 0 <= n");
    return NULL;
  }
  ramp_block *b = malloc(sizeof *b + (size_t)n * sizeof(double));
  if (b == NULL) return PyErr_NoMemory();
  for (Py_ssize_t i = 0; i < n; i++) b->data[i] = (double)i;
  b->shape[0] = n;
  b->strides[0] = 1;
  b->m.version.major = DLPACK_MAJOR_VERSION;
  b->m.version.minor = DLPACK_MINOR_VERSION;
  b->m.manager_ctx = NULL;
  b->m.deleter = ramp_deleter;
  b->m.flags = 0;
  b->m.dl_tensor.data = b->data;
  b->m.dl_tensor.device.device_type = kDLCPU;
  b->m.dl_tensor.device.device_id = 0;
  b->m.dl_tensor.ndim = 1;
  b->m.dl_tensor.dtype.code = kDLFloat;
  b->m.dl_tensor.dtype.bits = 64;
  b->m.dl_tensor.dtype.lanes = 1;
  b->m.dl_tensor.shape = b->shape;
  b->m.dl_tensor.strides = b->strides;
  b->m.dl_tensor.byte_offset = 0;
  /* Steals b, errors included. */
  return DLBridge_FromManaged(&b->m);
}

static PyObject *owned_ndim(PyObject *self, PyObject *obj) {
  (void)self;
  DLManagedTensorVersioned *m;
  if (DLBridge_ToManaged(obj, 0, &m) < 0) return NULL;
  int ndim = m->dl_tensor.ndim;
  if (m->deleter != NULL) m->deleter(m);
  return PyLong_FromLong(ndim);
}

static PyMethodDef example_methods[] = {
    {"total", total, METH_O, "Sum of the elements of a CPU tensor."},
    {"scale", (PyCFunction)(void (*)(void))scale, METH_FASTCALL,
     "Multiplies a writable float tensor in place."},
    {"ramp", ramp, METH_O, "A float64 tensor 0 .. n-1 made in C."},
    {"owned_ndim", owned_ndim, METH_O,
     "ndim of x, through an owned managed tensor."},
    {NULL, NULL, 0, NULL},
};

static int example_exec(PyObject *module) {
  (void)module;
  return import_dlbridge();
}

static PyModuleDef_Slot example_slots[] = {
    {Py_mod_exec, (void *)example_exec},
    {0, NULL},
};

static PyModuleDef example_def = {
    PyModuleDef_HEAD_INIT,
    .m_name = "dlbridge._capi_example",
    .m_doc = "An example of dlbridge's C API.",
    .m_size = 0,
    .m_methods = example_methods,
    .m_slots = example_slots,
};

PyMODINIT_FUNC PyInit__capi_example(void);

PyMODINIT_FUNC PyInit__capi_example(void) {
  return PyModuleDef_Init(&example_def);
}
