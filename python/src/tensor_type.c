/*
 * tensor_type.c -- the dlbridge.Tensor heap type: lifetime, properties,
 * repr and the view and copy methods (indexing is in indexing.c).
 *
 * A Tensor holds one dlbridge managed tensor. Views are new managed tensors
 * sharing the same owner, so a view keeps the data (and whatever foreign
 * producer stands behind it) alive after its base is gone.
 */
#include "dlbpy.h"

#if PY_VERSION_HEX >= 0x030C0000
#define DLBPY_T_PYSSIZET Py_T_PYSSIZET
#define DLBPY_READONLY Py_READONLY
#else
#include <structmember.h>
#define DLBPY_T_PYSSIZET T_PYSSIZET
#define DLBPY_READONLY READONLY
#endif

#define DLBPY_TENSOR(o) (((dlbpy_tensor *)(o))->mt)

/* Tensors with more elements print their shape instead of their values. */
#define DLBPY_REPR_MAX_ELEMENTS 1000

static void dlbpy_tensor_dealloc(PyObject *self);

bool dlbpy_tensor_check(PyObject *obj) {
  return Py_TYPE(obj)->tp_dealloc == dlbpy_tensor_dealloc;
}

PyObject *dlbpy_tensor_new(dlbpy_state *st, DLManagedTensorVersioned *mt) {
  dlbpy_tensor *t = st->spare_tensor;
  if (t != NULL) {
    st->spare_tensor = NULL;
    (void)PyObject_Init((PyObject *)t, st->tensor_type);
  } else {
    t = PyObject_New(dlbpy_tensor, st->tensor_type);
  }
  if (t == NULL) {
    dlbpy_release(mt);
    return NULL;
  }
  t->mt = mt;
  t->retired = NULL;
  t->weakreflist = NULL;
  return (PyObject *)t;
}

const DLManagedTensorVersioned *dlbpy_tensor_owned(PyObject *self) {
  dlbpy_tensor *t = (dlbpy_tensor *)self;
  if (dlbpy_is_light(t->mt)) {
    /* Once only: the core share replacing it is ours. */
    DLManagedTensorVersioned *core;
    if (dlbpy_light_to_core(t->mt, &core) < 0) return NULL;
    t->retired = t->mt;
    t->mt = core;
    return core;
  }
  if (dlbpy_own(&t->mt) < 0) return NULL;
  return t->mt;
}

/*
 * Releases nest: a Tensor of data another library holds (a NumPy array of
 * a Tensor, imported again) releases that library's tensor, which releases
 * the Tensor behind it, and so on through every round trip, one C frame
 * set per step. Past DLBPY_DEALLOC_DEPTH nested deallocations on a thread
 * the Tensors wait in a list (linked through their weakreflist, unused
 * once the weak references are cleared) that the outermost deallocation
 * works through, as CPython's trashcan does for containers: a chain of any
 * length is freed without overflowing the C stack.
 */
#define DLBPY_DEALLOC_DEPTH 64

/* The thread's nesting depth and waiting Tensors, found once per
 * deallocation: in a module loaded at run time each look-up of a
 * thread-local is a call (__tls_get_addr). */
typedef struct {
  int depth;
  dlbpy_tensor *pending;
} dlbpy_dealloc_state;

static _Thread_local dlbpy_dealloc_state dlbpy_dealloc_tls;

static void dlbpy_tensor_free(dlbpy_tensor *t) {
  PyTypeObject *type = Py_TYPE(t);
  DLManagedTensorVersioned *mt = t->mt, *retired = t->retired;
  t->mt = t->retired = NULL;
  /* Keeps a pending exception: deallocation happens during unwinding. */
  dlbpy_release(mt);
  dlbpy_release(retired);
  /* Kept for the next Tensor: a tensor imported and dropped at once, as
   * an exchange often is, would otherwise give obmalloc's pool for its
   * size back and take it again each time. Per interpreter, whose
   * allocator made it. */
  dlbpy_state *st = dlbpy_state_of_type(type);
  if (st != NULL && st->spare_tensor == NULL)
    st->spare_tensor = t;
  else
    PyObject_Free(t);
  Py_DECREF(type);
}

static void dlbpy_tensor_dealloc(PyObject *self) {
  dlbpy_tensor *t = (dlbpy_tensor *)self;
  dlbpy_dealloc_state *ds = &dlbpy_dealloc_tls;
  /* Kept, not recomputed after each call (compilers would). */
  __asm__("" : "+r"(ds));
  if (t->weakreflist != NULL) PyObject_ClearWeakRefs(self);
  if (ds->depth >= DLBPY_DEALLOC_DEPTH) {
    t->weakreflist = (PyObject *)ds->pending;
    ds->pending = t;
    return;
  }
  ds->depth++;
  dlbpy_tensor_free(t);
  /* Only the outermost deallocation of the thread frees what waits. */
  while (ds->depth == 1 && ds->pending != NULL) {
    dlbpy_tensor *next = ds->pending;
    ds->pending = (dlbpy_tensor *)next->weakreflist;
    dlbpy_tensor_free(next);
  }
  ds->depth--;
}

static PyObject *dlbpy_tensor_tp_new(PyTypeObject *type, PyObject *args,
                                     PyObject *kwargs) {
  (void)type;
  (void)args;
  (void)kwargs;
  PyErr_SetString(PyExc_TypeError,
                  "dlbridge.Tensor cannot be created directly; use "
                  "dlbridge.from_dlpack, asarray, empty, zeros, full or "
                  "arange");
  return NULL;
}

/* ------------------------------------------------------------------------
 * Helpers
 * ---------------------------------------------------------------------- */

static PyObject *dlbpy_int_tuple(int32_t n, const int64_t *v) {
  PyObject *tuple = PyTuple_New(n);
  if (tuple == NULL) return NULL;
  for (int32_t i = 0; i < n; i++) {
    PyObject *item = PyLong_FromLongLong((long long)v[i]);
    if (item == NULL) {
      Py_DECREF(tuple);
      return NULL;
    }
    PyTuple_SET_ITEM(tuple, i, item);
  }
  return tuple;
}


bool dlbpy_copy_is_large(const DLTensor *t) {
  int64_t numel = 0;
  int64_t item = (int64_t)dlb_dtype_itemsize(t->dtype);
  if (item < 1) item = 1;
  return dlb_tensor_numel(t, &numel) == DLB_OK &&
         numel >= DLBPY_NOGIL_COPY_BYTES / item;
}

dlb_status dlbpy_copy_tensor(const DLTensor *src, const DLTensor *dst) {
  if (!dlbpy_copy_is_large(dst)) return dlb_copy(src, dst);
  dlb_status s;
  Py_BEGIN_ALLOW_THREADS
  s = dlb_copy(src, dst);
  Py_END_ALLOW_THREADS
  return s;
}

int dlbpy_copy_to(const DLManagedTensorVersioned *mt, DLDevice device,
                  PyObject *exc, DLManagedTensorVersioned **out) {
  DLManagedTensorVersioned *copy = NULL;
  dlb_status s;
  /* The caller holds a reference to the tensor owning mt, so its data
   * stays alive while other threads run. */
  if (dlbpy_copy_is_large(&mt->dl_tensor)) {
    Py_BEGIN_ALLOW_THREADS
    s = dlb_managed_copy(mt, device, &copy);
    Py_END_ALLOW_THREADS
  } else {
    s = dlb_managed_copy(mt, device, &copy);
  }
  if (s != DLB_OK) {
    char from[DLB_DEVICE_NAME_MAX], to[DLB_DEVICE_NAME_MAX], what[96];
    if (dlb_device_format(mt->dl_tensor.device, from, sizeof from) != DLB_OK)
      from[0] = '\0';
    if (dlb_device_format(device, to, sizeof to) != DLB_OK) to[0] = '\0';
    PyOS_snprintf(what, sizeof what, "cannot copy a tensor from %s to %s",
                  from, to);
    return dlbpy_fail(s, exc, what);
  }
  *out = copy;
  return 0;
}

/* A Tensor of the same module as self holding mt (stolen). */
static PyObject *dlbpy_tensor_like(PyObject *self,
                                   DLManagedTensorVersioned *mt) {
  return dlbpy_tensor_new(dlbpy_state_of_type(Py_TYPE(self)), mt);
}

/* ------------------------------------------------------------------------
 * Properties
 * ---------------------------------------------------------------------- */

static PyObject *dlbpy_get_shape(PyObject *self, void *closure) {
  (void)closure;
  const DLTensor *t = &DLBPY_TENSOR(self)->dl_tensor;
  return dlbpy_int_tuple(t->ndim, t->shape);
}

static PyObject *dlbpy_get_strides(PyObject *self, void *closure) {
  (void)closure;
  /* An accepted tensor has strides whenever ndim != 0. */
  const DLTensor *t = &DLBPY_TENSOR(self)->dl_tensor;
  return dlbpy_int_tuple(t->ndim, t->strides);
}

static PyObject *dlbpy_get_dtype(PyObject *self, void *closure) {
  (void)closure;
  char name[DLB_DTYPE_NAME_MAX];
  dlb_status s =
      dlb_dtype_format(DLBPY_TENSOR(self)->dl_tensor.dtype, name, sizeof name);
  if (s != DLB_OK) return dlbpy_raise(s, PyExc_ValueError, "dtype");
  return PyUnicode_FromString(name);
}

static PyObject *dlbpy_get_device(PyObject *self, void *closure) {
  (void)closure;
  char name[DLB_DEVICE_NAME_MAX];
  dlb_status s = dlb_device_format(DLBPY_TENSOR(self)->dl_tensor.device, name,
                                   sizeof name);
  if (s != DLB_OK) return dlbpy_raise(s, PyExc_ValueError, "device");
  return PyUnicode_FromString(name);
}

static PyObject *dlbpy_get_ndim(PyObject *self, void *closure) {
  (void)closure;
  return PyLong_FromLong(DLBPY_TENSOR(self)->dl_tensor.ndim);
}

static int dlbpy_numel(PyObject *self, int64_t *out) {
  dlb_status s = dlb_tensor_numel(&DLBPY_TENSOR(self)->dl_tensor, out);
  return s == DLB_OK ? 0 : dlbpy_fail(s, PyExc_ValueError, "shape");
}

static PyObject *dlbpy_get_size(PyObject *self, void *closure) {
  (void)closure;
  int64_t n;
  if (dlbpy_numel(self, &n) < 0) return NULL;
  return PyLong_FromLongLong((long long)n);
}

static PyObject *dlbpy_get_nbytes(PyObject *self, void *closure) {
  (void)closure;
  const DLManagedTensorVersioned *mt = DLBPY_TENSOR(self);
  int64_t n, bytes;
  if (dlbpy_numel(self, &n) < 0) return NULL;
  dlb_status s = dlb_dtype_storage_bytes(
      mt->dl_tensor.dtype, n,
      (mt->flags & DLPACK_FLAG_BITMASK_IS_SUBBYTE_TYPE_PADDED) != 0, &bytes);
  if (s != DLB_OK) return dlbpy_raise(s, PyExc_ValueError, "nbytes");
  return PyLong_FromLongLong((long long)bytes);
}

static PyObject *dlbpy_get_itemsize(PyObject *self, void *closure) {
  (void)closure;
  return PyLong_FromSize_t(
      dlb_dtype_itemsize(DLBPY_TENSOR(self)->dl_tensor.dtype));
}

static PyObject *dlbpy_get_readonly(PyObject *self, void *closure) {
  (void)closure;
  return PyBool_FromLong(
      (DLBPY_TENSOR(self)->flags & DLPACK_FLAG_BITMASK_READ_ONLY) != 0);
}

static PyObject *dlbpy_get_data_ptr(PyObject *self, void *closure) {
  (void)closure;
  return PyLong_FromVoidPtr(DLBPY_TENSOR(self)->dl_tensor.data);
}

static PyObject *dlbpy_get_byte_offset(PyObject *self, void *closure) {
  (void)closure;
  return PyLong_FromUnsignedLongLong(
      (unsigned long long)DLBPY_TENSOR(self)->dl_tensor.byte_offset);
}

static PyObject *dlbpy_view_permute(PyObject *self, const int32_t *axes);

static PyObject *dlbpy_get_T(PyObject *self, void *closure) {
  (void)closure;
  int32_t ndim = DLBPY_TENSOR(self)->dl_tensor.ndim;
  int32_t axes[DLB_MAX_NDIM];
  for (int32_t i = 0; i < ndim; i++) axes[i] = ndim - 1 - i;
  return dlbpy_view_permute(self, axes);
}

static PyGetSetDef dlbpy_tensor_getset[] = {
    {"shape", dlbpy_get_shape, NULL, "The extents, a tuple of ints.", NULL},
    {"strides", dlbpy_get_strides, NULL,
     "The strides, a tuple of ints counted in elements (not bytes).", NULL},
    {"dtype", dlbpy_get_dtype, NULL, "The element type's name, e.g. 'float32'.",
     NULL},
    {"device", dlbpy_get_device, NULL,
     "The memory's name: 'cpu', 'cuda:1', 'cuda_managed', ...", NULL},
    {"ndim", dlbpy_get_ndim, NULL, "The number of dimensions.", NULL},
    {"size", dlbpy_get_size, NULL, "The number of elements.", NULL},
    {"nbytes", dlbpy_get_nbytes, NULL,
     "The bytes the elements would occupy if compact.", NULL},
    {"itemsize", dlbpy_get_itemsize, NULL, "The bytes of one element.", NULL},
    {"readonly", dlbpy_get_readonly, NULL,
     "True when the data must not be written.", NULL},
    {"data_ptr", dlbpy_get_data_ptr, NULL,
     "DLTensor.data as an int; the first element is at data_ptr + "
     "byte_offset.",
     NULL},
    {"byte_offset", dlbpy_get_byte_offset, NULL,
     "Bytes from data_ptr to the first element.", NULL},
    {"T", dlbpy_get_T, NULL, "A view with the dimensions reversed.", NULL},
    {"is_shared", dlbpy_tensor_is_shared, NULL,
     "True when the memory is shared memory another process can map "
     "(share_memory(), shared=True, or received from another process).",
     NULL},
    {"__cuda_array_interface__", dlbpy_tensor_cuda_array_interface, NULL,
     "The CUDA Array Interface (version 3), for memory a CUDA device can "
     "read; AttributeError for other memory.",
     NULL},
    {NULL, NULL, NULL, NULL, NULL},
};

/* ------------------------------------------------------------------------
 * repr and len
 * ---------------------------------------------------------------------- */

static PyObject *dlbpy_tensor_repr(PyObject *self) {
  const DLManagedTensorVersioned *mt = DLBPY_TENSOR(self);
  const DLTensor *t = &mt->dl_tensor;
  char dtype[DLB_DTYPE_NAME_MAX], device[DLB_DEVICE_NAME_MAX];
  if (dlb_dtype_format(t->dtype, dtype, sizeof dtype) != DLB_OK)
    PyOS_snprintf(dtype, sizeof dtype, "(%u, %u, %u)", (unsigned)t->dtype.code,
                  (unsigned)t->dtype.bits, (unsigned)t->dtype.lanes);
  if (dlb_device_format(t->device, device, sizeof device) != DLB_OK)
    PyOS_snprintf(device, sizeof device, "(%d, %d)", (int)t->device.device_type,
                  (int)t->device.device_id);
  const char *ro =
      (mt->flags & DLPACK_FLAG_BITMASK_READ_ONLY) ? ", readonly=True" : "";
  /* What tolist() would build: the elements, and the lists holding
   * them, down to the first empty dimension (an empty tensor of shape
   * (2**40, 0) is 2**40 lists). */
  int64_t n = 1;
  for (int32_t i = 0; i < t->ndim && t->shape[i] != 0; i++) {
    if (t->shape[i] > DLBPY_REPR_MAX_ELEMENTS) {
      n = DLBPY_REPR_MAX_ELEMENTS + 1;
      break;
    }
    n *= t->shape[i]; /* both at most the limit: no overflow */
    if (n > DLBPY_REPR_MAX_ELEMENTS) break;
  }
  int show_values = n <= DLBPY_REPR_MAX_ELEMENTS &&
                    dlb_device_type_cpu_accessible(t->device.device_type) &&
                    dlbpy_dtype_readable(t->dtype);
  if (show_values) {
    PyObject *values = dlbpy_tensor_tolist(self, NULL);
    if (values == NULL) return NULL;
    PyObject *r = PyUnicode_FromFormat("dlbridge.Tensor(%R, dtype=%s, "
                                       "device=%s%s)",
                                       values, dtype, device, ro);
    Py_DECREF(values);
    return r;
  }
  PyObject *shape = dlbpy_int_tuple(t->ndim, t->shape);
  if (shape == NULL) return NULL;
  PyObject *r = PyUnicode_FromFormat(
      "dlbridge.Tensor(shape=%R, dtype=%s, device=%s%s)", shape, dtype, device,
      ro);
  Py_DECREF(shape);
  return r;
}

static Py_ssize_t dlbpy_tensor_length(PyObject *self) {
  const DLTensor *t = &DLBPY_TENSOR(self)->dl_tensor;
  if (t->ndim == 0) {
    PyErr_SetString(PyExc_TypeError, "len() of a 0-d tensor");
    return -1;
  }
  return (Py_ssize_t)t->shape[0];
}

/* ------------------------------------------------------------------------
 * Methods
 * ---------------------------------------------------------------------- */

/* The ints of f(1, 0) or f(seq) for a sequence seq of ints ((1, 0), a
 * range, a NumPy array) into out (at most DLB_MAX_NDIM); param names them
 * in messages, as items of f's parameter ("reshape(): shape[1]"). */
static int dlbpy_int_args(const char *fname, const char *param,
                          PyObject *const *args, Py_ssize_t nargs,
                          int64_t *out, int32_t *count) {
  PyObject *seq = NULL;
  PyObject *const *items = args;
  Py_ssize_t n = nargs;
  int one = 1;
  if (nargs == 1 && !PyUnicode_Check(args[0]) && !PyBytes_Check(args[0]) &&
      PySequence_Check(args[0])) {
    one = dlbpy_is_one_int(args[0]);
    if (one < 0) return -1;
  }
  if (!one) {
    /* A tuple snapshot of a list: an item's __index__ may empty the list
     * while the items are read. */
    char what[32];
    PyOS_snprintf(what, sizeof what, "%s()'s sequence", fname);
    seq = dlbpy_dims_tuple(args[0], what);
    if (seq == NULL) return -1;
    items = PySequence_Fast_ITEMS(seq); /* also when it is empty */
    n = PyTuple_GET_SIZE(seq);
  }
  int rc = 0;
  if (n > DLB_MAX_NDIM) {
    PyErr_Format(PyExc_ValueError, "%s() takes at most %d dimensions, not %zd",
                 fname, DLB_MAX_NDIM, n);
    rc = -1;
  }
  for (Py_ssize_t i = 0; rc == 0 && i < n; i++) {
    char what[64];
    PyOS_snprintf(what, sizeof what, "%s(): %s[%zd]", fname, param, i);
    rc = dlbpy_parse_int64(items[i], what, &out[i]);
  }
  Py_XDECREF(seq);
  if (rc == 0) *count = (int32_t)n;
  return rc;
}

static PyObject *dlbpy_view_permute(PyObject *self, const int32_t *axes) {
  const DLManagedTensorVersioned *mt = dlbpy_tensor_owned(self);
  if (mt == NULL) return NULL;
  DLManagedTensorVersioned *view;
  dlb_status s = dlb_tensor_permute(mt, axes, &view);
  if (s != DLB_OK) return dlbpy_raise(s, PyExc_ValueError, "permute");
  return dlbpy_tensor_like(self, view);
}

static PyObject *dlbpy_tensor_permute(PyObject *self, PyObject *const *args,
                                      Py_ssize_t nargs) {
  int32_t ndim = DLBPY_TENSOR(self)->dl_tensor.ndim;
  int64_t v[DLB_MAX_NDIM];
  int32_t n;
  if (dlbpy_int_args("permute", "axes", args, nargs, v, &n) < 0) return NULL;
  if (n != ndim) {
    PyErr_Format(PyExc_ValueError,
                 "permute() needs %d axes for a %d-dimensional tensor, got %d",
                 (int)ndim, (int)ndim, (int)n);
    return NULL;
  }
  int32_t axes[DLB_MAX_NDIM];
  for (int32_t i = 0; i < n; i++) {
    if (v[i] < -ndim || v[i] >= ndim) {
      PyErr_Format(PyExc_ValueError,
                   "permute(): axis %lld is out of range for a %d-dimensional "
                   "tensor",
                   (long long)v[i], (int)ndim);
      return NULL;
    }
    axes[i] = (int32_t)v[i];
  }
  return dlbpy_view_permute(self, axes);
}

static PyObject *dlbpy_tensor_reshape(PyObject *self, PyObject *const *args,
                                      Py_ssize_t nargs) {
  int64_t shape[DLB_MAX_NDIM];
  int32_t n;
  if (dlbpy_int_args("reshape", "shape", args, nargs, shape, &n) < 0)
    return NULL;
  const DLManagedTensorVersioned *mt = dlbpy_tensor_owned(self);
  if (mt == NULL) return NULL;
  DLManagedTensorVersioned *view;
  dlb_status s = dlb_tensor_reshape(mt, n, shape, &view);
  if (s == DLB_E_NEEDS_COPY) {
    /* As NumPy and PyTorch do: a view when the strides allow, else a copy. */
    DLManagedTensorVersioned *compact;
    if (dlbpy_copy_to(mt, mt->dl_tensor.device, PyExc_ValueError, &compact) <
        0)
      return NULL;
    s = dlb_tensor_reshape(compact, n, shape, &view);
    dlb_tensor_release(compact);
  }
  if (s != DLB_OK) return dlbpy_raise(s, PyExc_ValueError, "reshape");
  return dlbpy_tensor_like(self, view);
}

static PyObject *dlbpy_tensor_copy(PyObject *self, PyObject *unused) {
  (void)unused;
  const DLManagedTensorVersioned *mt = DLBPY_TENSOR(self);
  DLManagedTensorVersioned *copy = NULL;
  if (dlbpy_copy_to(mt, mt->dl_tensor.device, PyExc_RuntimeError, &copy) < 0)
    return NULL;
  return dlbpy_tensor_like(self, copy);
}

static PyObject *dlbpy_tensor_to(PyObject *self, PyObject *const *args,
                                 Py_ssize_t nargsf, PyObject *kwnames) {
  PyObject *device_arg = NULL, *copy_arg = NULL;
  const dlbpy_param params[] = {{"device", DLBPY_REQUIRED, &device_arg},
                                {"copy", DLBPY_KWONLY, &copy_arg}};
  if (dlbpy_parse_args("to", args, nargsf, kwnames, params,
                       DLBPY_NPARAMS(params)) < 0)
    return NULL;
  DLDevice device;
  int copy;
  if (dlbpy_parse_device(device_arg, &device) < 0 ||
      dlbpy_parse_copy(copy_arg, "copy", &copy) < 0)
    return NULL;
  const DLManagedTensorVersioned *mt = DLBPY_TENSOR(self);
  if (copy != 1 && dlb_device_equal(device, mt->dl_tensor.device)) {
    Py_INCREF(self);
    return self;
  }
  if (copy == 0) {
    char from[DLB_DEVICE_NAME_MAX], to[DLB_DEVICE_NAME_MAX];
    if (dlb_device_format(mt->dl_tensor.device, from, sizeof from) != DLB_OK)
      from[0] = '\0';
    if (dlb_device_format(device, to, sizeof to) != DLB_OK) to[0] = '\0';
    PyErr_Format(PyExc_ValueError,
                 "to(): copy=False, but the tensor is in %s memory, not on "
                 "%s: only a copy puts it there",
                 from, to);
    return NULL;
  }
  DLManagedTensorVersioned *out = NULL;
  if (dlbpy_copy_to(mt, device, PyExc_RuntimeError, &out) < 0) return NULL;
  return dlbpy_tensor_like(self, out);
}

/* PyTorch's names for what the properties say, as methods as there. */
static PyObject *dlbpy_tensor_element_size(PyObject *self, PyObject *unused) {
  (void)unused;
  return dlbpy_get_itemsize(self, NULL);
}

static PyObject *dlbpy_tensor_numel_method(PyObject *self, PyObject *unused) {
  (void)unused;
  return dlbpy_get_size(self, NULL);
}

static PyObject *dlbpy_tensor_dim(PyObject *self, PyObject *unused) {
  (void)unused;
  return dlbpy_get_ndim(self, NULL);
}

static PyObject *dlbpy_tensor_is_contiguous(PyObject *self, PyObject *unused) {
  (void)unused;
  return PyBool_FromLong(
      dlb_tensor_is_c_contiguous(&DLBPY_TENSOR(self)->dl_tensor));
}

static PyObject *dlbpy_tensor_stride(PyObject *self, PyObject *const *args,
                                     Py_ssize_t nargsf, PyObject *kwnames) {
  PyObject *dim_arg = NULL;
  const dlbpy_param params[] = {{"dim", DLBPY_OPTIONAL, &dim_arg}};
  if (dlbpy_parse_args("stride", args, nargsf, kwnames, params,
                       DLBPY_NPARAMS(params)) < 0)
    return NULL;
  if (dim_arg == NULL || dim_arg == Py_None)
    return dlbpy_get_strides(self, NULL);
  const DLTensor *t = &DLBPY_TENSOR(self)->dl_tensor;
  int64_t dim;
  if (dlbpy_parse_int64(dim_arg, "stride(): dim", &dim) < 0) return NULL;
  if (dim < -(int64_t)t->ndim || dim >= (int64_t)t->ndim) {
    PyErr_Format(PyExc_IndexError,
                 "stride(): dim %lld is out of range for a %d-dimensional "
                 "tensor",
                 (long long)dim, (int)t->ndim);
    return NULL;
  }
  if (dim < 0) dim += t->ndim;
  return PyLong_FromLongLong((long long)t->strides[dim]);
}

/* Iteration walks the first dimension, as NumPy's does: t[0], t[1], ...
 * A 0-d tensor is not iterable, as len() of it is an error. */
static PyObject *dlbpy_tensor_sq_item(PyObject *self, Py_ssize_t i) {
  /* list(t) and other C loops over an iterator never reach the bytecode
   * loop that would notice Ctrl-C; a tensor may have 2**62 rows. */
  if (PyErr_CheckSignals() < 0) return NULL;
  PyObject *key = PyLong_FromSsize_t(i);
  if (key == NULL) return NULL;
  PyObject *r = dlbpy_tensor_subscript(self, key);
  Py_DECREF(key);
  return r;
}

static PyObject *dlbpy_tensor_iter(PyObject *self) {
  if (DLBPY_TENSOR(self)->dl_tensor.ndim == 0) {
    PyErr_SetString(PyExc_TypeError, "iteration over a 0-d tensor");
    return NULL;
  }
  return PySeqIter_New(self);
}

static PyMethodDef dlbpy_tensor_methods[] = {
    {"__dlpack__", (PyCFunction)(void (*)(void))dlbpy_tensor_dlpack,
     METH_FASTCALL | METH_KEYWORDS,
     "__dlpack__($self, /, *, stream=None, max_version=None, dl_device=None, "
     "copy=None)\n--\n\n"
     "Exports the tensor as a DLPack capsule."},
    {"__dlpack_device__", dlbpy_tensor_dlpack_device, METH_NOARGS,
     "__dlpack_device__($self, /)\n--\n\n"
     "Returns (device_type, device_id) of the tensor's memory."},
    {"__array__", (PyCFunction)(void (*)(void))dlbpy_tensor_array,
     METH_FASTCALL | METH_KEYWORDS,
     "__array__($self, /, dtype=None, copy=None)\n--\n\n"
     "Returns the tensor as a NumPy array: in place where NumPy has its "
     "dtype, else widened to dtype (which is then required)."},
    {"copy", dlbpy_tensor_copy, METH_NOARGS,
     "copy($self, /)\n--\n\nReturns a compact copy on the same device."},
    {"to", (PyCFunction)(void (*)(void))dlbpy_tensor_to,
     METH_FASTCALL | METH_KEYWORDS,
     "to($self, /, device, *, copy=None)\n--\n\n"
     "Returns the tensor on device: itself when it is there already (unless "
     "copy=True), else a copy (ValueError with copy=False)."},
    {"permute", (PyCFunction)(void (*)(void))dlbpy_tensor_permute,
     METH_FASTCALL,
     "permute($self, /, *axes)\n--\n\n"
     "Returns a view with the dimensions reordered."},
    {"reshape", (PyCFunction)(void (*)(void))dlbpy_tensor_reshape,
     METH_FASTCALL,
     "reshape($self, /, *shape)\n--\n\n"
     "Returns a view with a new shape (one extent may be -1), or a copy when "
     "the strides do not allow a view."},
    {"tolist", dlbpy_tensor_tolist, METH_NOARGS,
     "tolist($self, /)\n--\n\n"
     "Returns the values as nested lists of Python numbers."},
    {"item", dlbpy_tensor_item, METH_NOARGS,
     "item($self, /)\n--\n\n"
     "Returns the one element of a one-element tensor as a Python number."},
    {"element_size", dlbpy_tensor_element_size, METH_NOARGS,
     "element_size($self, /)\n--\n\n"
     "The bytes of one element (itemsize), as PyTorch names it."},
    {"numel", dlbpy_tensor_numel_method, METH_NOARGS,
     "numel($self, /)\n--\n\n"
     "The number of elements (size), as PyTorch names it."},
    {"dim", dlbpy_tensor_dim, METH_NOARGS,
     "dim($self, /)\n--\n\n"
     "The number of dimensions (ndim), as PyTorch names it."},
    {"is_contiguous", dlbpy_tensor_is_contiguous, METH_NOARGS,
     "is_contiguous($self, /)\n--\n\n"
     "True when the elements are compact in row-major order (extents of 1 "
     "may have any stride)."},
    {"stride", (PyCFunction)(void (*)(void))dlbpy_tensor_stride,
     METH_FASTCALL | METH_KEYWORDS,
     "stride($self, /, dim=None)\n--\n\n"
     "The strides in elements (a tuple), or the stride of dimension dim "
     "(negative counts from the end), as PyTorch gives them."},
    {"share_memory", dlbpy_tensor_share_memory, METH_NOARGS,
     "share_memory($self, /)\n--\n\n"
     "Returns the tensor in shared memory: itself when it is there already "
     "(or in device memory, which crosses processes by IPC handle), else "
     "one copy into a new shared cpu tensor (read-only when this is)."},
    {"__reduce_ex__", dlbpy_tensor_reduce_ex, METH_O,
     "__reduce_ex__($self, protocol, /)\n--\n\n"
     "Pickles the data by value (a PickleBuffer from protocol 5, so it can "
     "travel out of band)."},
    {"__copy__", dlbpy_tensor_copy_copy, METH_NOARGS,
     "__copy__($self, /)\n--\n\nA copy of the data, read-only when this is."},
    {"__deepcopy__", dlbpy_tensor_deepcopy, METH_O,
     "__deepcopy__($self, memo, /)\n--\n\nA copy of the data, read-only when "
     "this is."},
    {"__complex__", dlbpy_tensor_complex, METH_NOARGS,
     "__complex__($self, /)\n--\n\n"
     "Returns the one element of a one-element tensor as a complex."},
    {NULL, NULL, 0, NULL},
};

static PyMemberDef dlbpy_tensor_members[] = {
    {"__weaklistoffset__", DLBPY_T_PYSSIZET,
     offsetof(dlbpy_tensor, weakreflist), DLBPY_READONLY, NULL},
    {NULL, 0, 0, 0, NULL},
};

static PyType_Slot dlbpy_tensor_slots[] = {
    {Py_tp_dealloc, (void *)dlbpy_tensor_dealloc},
    {Py_tp_new, (void *)dlbpy_tensor_tp_new},
    {Py_tp_repr, (void *)dlbpy_tensor_repr},
    {Py_tp_methods, dlbpy_tensor_methods},
    {Py_tp_getset, dlbpy_tensor_getset},
    {Py_tp_members, dlbpy_tensor_members},
    {Py_mp_subscript, (void *)dlbpy_tensor_subscript},
    {Py_mp_ass_subscript, (void *)dlbpy_tensor_ass_subscript},
    {Py_mp_length, (void *)dlbpy_tensor_length},
    {Py_sq_length, (void *)dlbpy_tensor_length},
    {Py_sq_contains, (void *)dlbpy_tensor_contains},
    {Py_sq_item, (void *)dlbpy_tensor_sq_item},
    {Py_tp_iter, (void *)dlbpy_tensor_iter},
    {Py_nb_bool, (void *)dlbpy_tensor_bool},
    {Py_nb_int, (void *)dlbpy_tensor_int},
    {Py_nb_float, (void *)dlbpy_tensor_float},
    {Py_bf_getbuffer, (void *)dlbpy_tensor_getbuffer},
    {Py_bf_releasebuffer, (void *)dlbpy_tensor_releasebuffer},
    {Py_tp_doc,
     (void *)"A DLPack tensor in any kind of memory.\n\n"
             "Made by dlbridge.from_dlpack, asarray, empty, zeros, full and "
             "arange. Exports itself through __dlpack__, the buffer "
             "protocol and __cuda_array_interface__."},
    {0, NULL},
};

static PyType_Spec dlbpy_tensor_spec = {
    .name = "dlbridge.Tensor",
    .basicsize = sizeof(dlbpy_tensor),
    .itemsize = 0,
    .flags = Py_TPFLAGS_DEFAULT
#ifdef Py_TPFLAGS_IMMUTABLETYPE
             /* The exchange table found on the type must stay the one
              * consumers cached. */
             | Py_TPFLAGS_IMMUTABLETYPE
#endif
    ,
    .slots = dlbpy_tensor_slots,
};

int dlbpy_tensor_type_add(PyObject *module, dlbpy_state *st) {
  PyObject *type = PyType_FromModuleAndSpec(module, &dlbpy_tensor_spec, NULL);
  if (type == NULL) return -1;
  if (dlbpy_exchange_publish((PyTypeObject *)type) < 0) {
    Py_DECREF(type);
    return -1;
  }
  st->tensor_type = (PyTypeObject *)type;
  return PyModule_AddType(module, st->tensor_type);
}
