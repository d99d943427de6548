/*
 * pickle.c -- Tensor pickled by value, and copy.copy / copy.deepcopy.
 *
 * A pickled tensor is (_rebuild, (data, dtype, shape, flags)): data holds
 * the elements compact in row-major order (a strided tensor is compacted
 * first), flags its READ_ONLY and IS_SUBBYTE_TYPE_PADDED bits. With
 * protocol 5 data is a pickle.PickleBuffer over the tensor's own memory
 * (or over the compact copy), so a pickler with a buffer_callback ships
 * the bytes out of band untouched, and _rebuild maps the buffer it is
 * given back instead of copying it. Below protocol 5 data is bytes.
 *
 * Only memory the CPU can read is pickled by value: a device tensor is
 * refused, since a copy to the host would be a silent transfer and the
 * unpickling process may have no such device. multiprocessing sends
 * shared tensors by handle instead (python/dlbridge/_sharing.py).
 */
#include <string.h>

#include "dlbpy.h"

/* Flag bits a pickle carries; anything else in a pickle is refused. */
#define DLBPY_PICKLE_FLAGS \
  (DLPACK_FLAG_BITMASK_READ_ONLY | DLPACK_FLAG_BITMASK_IS_SUBBYTE_TYPE_PADDED)

/* A non-NULL address for the bytes of a tensor without elements. */
static char dlbpy_no_bytes[1];

static void dlbpy_release_tensor(void *ctx) { dlb_tensor_release(ctx); }

/* The element count and stored bytes of a compact tensor. */
static int dlbpy_storage_bytes(DLDataType dtype, int32_t ndim,
                               const int64_t *shape, uint64_t flags,
                               int64_t *numel, int64_t *out) {
  dlb_status s = dlb_shape_numel(ndim, shape, numel);
  if (s == DLB_OK)
    s = dlb_dtype_storage_bytes(
        dtype, *numel,
        (flags & DLPACK_FLAG_BITMASK_IS_SUBBYTE_TYPE_PADDED) != 0, out);
  return s == DLB_OK ? 0 : dlbpy_fail(s, PyExc_ValueError, "pickled tensor");
}

/*
 * A compact tensor holding self's elements on the CPU, in *out: a share of
 * self when it is compact already, else a copy. Refuses memory the CPU
 * cannot read.
 */
static int dlbpy_compact_host(PyObject *self, DLManagedTensorVersioned **out) {
  const DLManagedTensorVersioned *mt = ((dlbpy_tensor *)self)->mt;
  DLDevice device = mt->dl_tensor.device;
  if (!dlb_device_type_cpu_accessible(device.device_type)) {
    char name[DLB_DEVICE_NAME_MAX];
    if (dlb_device_format(device, name, sizeof name) != DLB_OK)
      name[0] = '\0';
    PyErr_Format(PyExc_TypeError,
                 "cannot pickle a tensor in %s memory by value: copy it to "
                 "the host first (t.to('cpu')), or send it to a process of "
                 "this machine through multiprocessing",
                 name);
    return -1;
  }
  if (dlb_tensor_is_c_contiguous(&mt->dl_tensor)) {
    const DLManagedTensorVersioned *own = dlbpy_tensor_owned(self);
    if (own == NULL) return -1;
    dlb_status s = dlb_tensor_share(own, out);
    return s == DLB_OK ? 0 : dlbpy_fail(s, PyExc_ValueError, "pickle");
  }
  return dlbpy_copy_to(mt, (DLDevice){kDLCPU, 0}, PyExc_ValueError, out);
}

/*
 * The bytes of self's elements as a one-dimensional uint8 Tensor (read-only
 * when self is) that keeps the memory alive, for PickleBuffer. It shares
 * compact's owner (and releases compact): wrapping compact would make each
 * out-of-band round trip in one process hold the tensor before it.
 */
static PyObject *dlbpy_bytes_tensor(PyObject *self, uint64_t flags,
                                    DLManagedTensorVersioned *compact,
                                    int64_t nbytes) {
  DLTensor desc;
  memset(&desc, 0, sizeof desc);
  desc.data = nbytes == 0 ? (void *)dlbpy_no_bytes
                          : (char *)compact->dl_tensor.data +
                                compact->dl_tensor.byte_offset;
  desc.device = (DLDevice){kDLCPU, 0};
  desc.ndim = 1;
  desc.dtype = (DLDataType){kDLUInt, 8, 1};
  desc.shape = &nbytes;
  DLManagedTensorVersioned *bytes;
  dlb_status s = dlb_tensor_redescribe(
      compact, &desc, flags & DLPACK_FLAG_BITMASK_READ_ONLY, &bytes);
  dlb_tensor_release(compact);
  if (s != DLB_OK) return dlbpy_raise(s, PyExc_ValueError, "pickle");
  return dlbpy_tensor_new(dlbpy_state_of_type(Py_TYPE(self)), bytes);
}

PyObject *dlbpy_tensor_reduce_ex(PyObject *self, PyObject *protocol_obj) {
  long protocol = PyLong_AsLong(protocol_obj);
  if (protocol == -1 && PyErr_Occurred()) return NULL;
  const DLManagedTensorVersioned *mt = ((dlbpy_tensor *)self)->mt;
  const DLTensor *t = &mt->dl_tensor;
  uint64_t flags = mt->flags & DLBPY_PICKLE_FLAGS;
  char dtype[DLB_DTYPE_NAME_MAX];
  dlb_status s = dlb_dtype_format(t->dtype, dtype, sizeof dtype);
  if (s != DLB_OK) return dlbpy_raise(s, PyExc_ValueError, "pickle: dtype");
  int64_t numel, nbytes;
  if (dlbpy_storage_bytes(t->dtype, t->ndim, t->shape, flags, &numel,
                          &nbytes) < 0)
    return NULL;
  DLManagedTensorVersioned *compact;
  if (dlbpy_compact_host(self, &compact) < 0) return NULL;
  PyObject *data;
  if (protocol >= 5) {
    PyObject *bytes = dlbpy_bytes_tensor(self, flags, compact, nbytes);
    if (bytes == NULL) return NULL;
    data = PyPickleBuffer_FromObject(bytes);
    Py_DECREF(bytes);
  } else {
    const char *p = (const char *)compact->dl_tensor.data +
                    compact->dl_tensor.byte_offset;
    data = PyBytes_FromStringAndSize(nbytes == 0 ? NULL : p,
                                     (Py_ssize_t)nbytes);
    dlb_tensor_release(compact);
  }
  if (data == NULL) return NULL;
  PyObject *module = PyType_GetModule(Py_TYPE(self));
  PyObject *rebuild =
      module == NULL ? NULL : PyObject_GetAttrString(module, "_rebuild");
  if (rebuild == NULL) {
    Py_DECREF(data);
    return NULL;
  }
  PyObject *shape = PyTuple_New(t->ndim);
  for (int32_t i = 0; shape != NULL && i < t->ndim; i++) {
    PyObject *v = PyLong_FromLongLong((long long)t->shape[i]);
    if (v == NULL) Py_CLEAR(shape);
    else PyTuple_SET_ITEM(shape, i, v);
  }
  if (shape == NULL) {
    Py_DECREF(rebuild);
    Py_DECREF(data);
    return NULL;
  }
  return Py_BuildValue("(N(NsNK))", rebuild, data, dtype, shape,
                       (unsigned long long)flags);
}

/* ------------------------------------------------------------------------
 * _rebuild(data, dtype, shape, flags): the other half of a pickle
 * ---------------------------------------------------------------------- */

/* The alignment an element of dtype needs: its size's largest power-of-two
 * factor, at most 16. */
static size_t dlbpy_element_alignment(DLDataType dtype) {
  size_t item = dlb_dtype_itemsize(dtype), align = 1;
  while (align < 16 && item % (align * 2) == 0) align *= 2;
  return align;
}

PyObject *dlbpy_rebuild(PyObject *module, PyObject *const *args,
                        Py_ssize_t nargsf, PyObject *kwnames) {
  PyObject *data = NULL, *dtype_arg = NULL, *shape_arg = NULL,
           *flags_obj = NULL;
  const dlbpy_param params[] = {{"data", DLBPY_POSONLY, &data},
                                {"dtype", DLBPY_POSONLY, &dtype_arg},
                                {"shape", DLBPY_POSONLY, &shape_arg},
                                {"flags", DLBPY_POSONLY, &flags_obj}};
  if (dlbpy_parse_args("_rebuild", args, nargsf, kwnames, params,
                       DLBPY_NPARAMS(params)) < 0)
    return NULL;
  DLDataType dtype;
  int32_t ndim;
  int64_t shape[DLB_MAX_NDIM], flags_arg;
  if (dlbpy_parse_dtype(dtype_arg, &dtype) < 0 ||
      dlbpy_parse_shape(shape_arg, &ndim, shape) < 0 ||
      dlbpy_parse_int64(flags_obj, "_rebuild(): flags", &flags_arg) < 0)
    return NULL;
  if (flags_arg < 0 || ((uint64_t)flags_arg & ~(uint64_t)DLBPY_PICKLE_FLAGS)) {
    PyErr_Format(PyExc_ValueError,
                 "pickled tensor: flags %lld has bits other than READ_ONLY "
                 "and IS_SUBBYTE_TYPE_PADDED",
                 (long long)flags_arg);
    return NULL;
  }
  uint64_t flags = (uint64_t)flags_arg;
  int64_t numel, nbytes;
  if (dlbpy_storage_bytes(dtype, ndim, shape, flags, &numel, &nbytes) < 0)
    return NULL;
  /* Raw allocation: the last release may run without the GIL. */
  Py_buffer *view = PyMem_RawMalloc(sizeof *view);
  if (view == NULL) return PyErr_NoMemory();
  if (PyObject_GetBuffer(data, view, PyBUF_SIMPLE) < 0) {
    PyMem_RawFree(view);
    return NULL;
  }
  if ((int64_t)view->len != nbytes) {
    char name[DLB_DTYPE_NAME_MAX];
    if (dlb_dtype_format(dtype, name, sizeof name) != DLB_OK) name[0] = '\0';
    PyErr_Format(PyExc_ValueError,
                 "pickled tensor: data holds %zd bytes, but %lld elements of "
                 "%s take %lld",
                 view->len, (long long)numel, name,
                 (long long)nbytes);
    dlbpy_buffer_free(view);
    return NULL;
  }
  int want_readonly = (flags & DLPACK_FLAG_BITMASK_READ_ONLY) != 0;
  int aligned =
      ((uintptr_t)view->buf % dlbpy_element_alignment(dtype)) == 0;
  DLTensor desc;
  memset(&desc, 0, sizeof desc);
  desc.device = (DLDevice){kDLCPU, 0};
  desc.ndim = ndim;
  desc.dtype = dtype;
  desc.shape = shape;
  dlb_release_fn release;
  void *ctx;
  if (aligned && (want_readonly || !view->readonly)) {
    /* The memory pickle handed over is the tensor's: no copy. A Tensor's
     * own bytes (out of band in one process) are shared, not wrapped. */
    desc.data = nbytes == 0 ? (void *)dlbpy_no_bytes : view->buf;
    DLManagedTensorVersioned *mt;
    if (dlbpy_buffer_wrap(view, &desc, flags, PyExc_ValueError,
                          "pickled tensor", &mt) < 0) {
      dlbpy_buffer_free(view);
      return NULL;
    }
    return dlbpy_tensor_new(dlbpy_state_of_module(module), mt);
  } else {
    /* A writable tensor from read-only (or misaligned) bytes: one copy. */
    DLManagedTensorVersioned *store;
    int64_t n = nbytes;
    dlb_status s = dlb_tensor_alloc((DLDevice){kDLCPU, 0},
                                    (DLDataType){kDLUInt, 8, 1}, 1, &n, &store);
    if (s != DLB_OK) {
      /* The core's message first: releasing the buffer may run its
       * exporter's code, which may call dlbridge and overwrite it. */
      dlbpy_raise(s, PyExc_ValueError, "pickled tensor");
      dlbpy_buffer_free(view);
      return NULL;
    }
    if (nbytes >= DLBPY_NOGIL_COPY_BYTES) {
      /* The buffer stays exported until dlbpy_buffer_free. */
      Py_BEGIN_ALLOW_THREADS
      memcpy(store->dl_tensor.data, view->buf, (size_t)nbytes);
      Py_END_ALLOW_THREADS
    } else if (nbytes > 0) {
      memcpy(store->dl_tensor.data, view->buf, (size_t)nbytes);
    }
    dlbpy_buffer_free(view);
    desc.data = store->dl_tensor.data;
    release = dlbpy_release_tensor;
    ctx = store;
  }
  DLManagedTensorVersioned *mt;
  dlb_status s = dlb_tensor_wrap(&desc, flags, release, ctx, &mt);
  if (s != DLB_OK) {
    release(ctx);
    return dlbpy_raise(s, PyExc_ValueError, "pickled tensor");
  }
  return dlbpy_tensor_new(dlbpy_state_of_module(module), mt);
}

/* ------------------------------------------------------------------------
 * copy.copy and copy.deepcopy
 * ---------------------------------------------------------------------- */

/* As NumPy's: a copy of the data (compact, on the same device); a
 * read-only tensor gives a read-only copy, as a pickle round trip does. */
PyObject *dlbpy_tensor_copy_copy(PyObject *self, PyObject *unused) {
  (void)unused;
  const DLManagedTensorVersioned *mt = ((dlbpy_tensor *)self)->mt;
  DLManagedTensorVersioned *copy = NULL;
  if (dlbpy_copy_to(mt, mt->dl_tensor.device, PyExc_RuntimeError, &copy) < 0)
    return NULL;
  copy->flags |= mt->flags & DLPACK_FLAG_BITMASK_READ_ONLY;
  return dlbpy_tensor_new(dlbpy_state_of_type(Py_TYPE(self)), copy);
}

PyObject *dlbpy_tensor_deepcopy(PyObject *self, PyObject *memo) {
  (void)memo;
  return dlbpy_tensor_copy_copy(self, NULL);
}
