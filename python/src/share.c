/*
 * share.c -- tensors in shared memory from Python: Tensor.share_memory(),
 * Tensor.is_shared, share_export() and share_import() (the handle as bytes
 * plus a descriptor), and the allocation behind empty/zeros/full(...,
 * shared=True). multiprocessing's reducer (python/dlbridge/_sharing.py) is
 * built on the two share_ functions.
 */
#include <unistd.h>

#include "dlbpy.h"

#define DLBPY_TENSOR(o) (((dlbpy_tensor *)(o))->mt)

/* The exception for a failed share call: ValueError for a refused handle
 * or argument, OSError when the system refused, RuntimeError for a GPU
 * runtime that is missing or refuses. */
static PyObject *dlbpy_share_exc(dlb_status s) {
  if (s == DLB_E_SYSTEM) return PyExc_OSError;
  return dlbpy_gpu_exc(s);
}

int dlbpy_shared_alloc(DLDataType dtype, int32_t ndim, const int64_t *shape,
                       DLManagedTensorVersioned **out) {
  dlb_status s;
  Py_BEGIN_ALLOW_THREADS
  s = dlb_shared_alloc(dtype, ndim, shape, out);
  Py_END_ALLOW_THREADS
  return s == DLB_OK ? 0
                     : dlbpy_fail(s, dlbpy_share_exc(s),
                                  "cannot allocate shared memory");
}

/* The tensor's own dlbridge tensor, or NULL without an exception when it is
 * a foreign one (which is never shared memory of ours). */
static const DLManagedTensorVersioned *dlbpy_ours(PyObject *self) {
  DLManagedTensorVersioned *mt = DLBPY_TENSOR(self);
  if (dlbpy_is_light(mt)) return dlbpy_tensor_owned(self);
  return dlb_tensor_is_ours(mt) ? mt : NULL;
}

PyObject *dlbpy_tensor_is_shared(PyObject *self, void *closure) {
  (void)closure;
  const DLManagedTensorVersioned *mt = dlbpy_ours(self);
  if (mt == NULL && PyErr_Occurred()) return NULL;
  return PyBool_FromLong(dlb_tensor_is_shared(mt));
}

PyObject *dlbpy_tensor_share_memory(PyObject *self, PyObject *unused) {
  (void)unused;
  const DLManagedTensorVersioned *mt = dlbpy_ours(self);
  if (mt == NULL && PyErr_Occurred()) return NULL;
  const DLManagedTensorVersioned *src = DLBPY_TENSOR(self);
  const DLTensor *t = &src->dl_tensor;
  /* Device memory crosses processes as it is, by IPC handle. */
  if (dlb_tensor_is_shared(mt) ||
      !dlb_device_type_cpu_accessible(t->device.device_type)) {
    Py_INCREF(self);
    return self;
  }
  if (src->flags & DLPACK_FLAG_BITMASK_IS_SUBBYTE_TYPE_PADDED) {
    PyErr_SetString(PyExc_ValueError,
                    "share_memory(): padded sub-byte elements (a byte each) "
                    "cannot be shared; shared memory holds them packed");
    return NULL;
  }
  DLManagedTensorVersioned *shared;
  if (dlbpy_shared_alloc(t->dtype, t->ndim, t->shape, &shared) < 0)
    return NULL;
  /* The caller's reference keeps src's data alive while threads run. */
  dlb_status s = dlbpy_copy_tensor(t, &shared->dl_tensor);
  if (s != DLB_OK) {
    dlb_tensor_release(shared);
    return dlbpy_raise(s, PyExc_ValueError, "share_memory()");
  }
  shared->flags |= src->flags & DLPACK_FLAG_BITMASK_READ_ONLY;
  return dlbpy_tensor_new(dlbpy_state_of_type(Py_TYPE(self)), shared);
}

/* ------------------------------------------------------------------------
 * share_export(t) and share_import(handle, fd, *, pin=None)
 * ---------------------------------------------------------------------- */

PyObject *dlbpy_share_export(PyObject *module, PyObject *t) {
  (void)module;
  if (!dlbpy_tensor_check(t)) {
    PyErr_Format(PyExc_TypeError,
                 "share_export() takes a dlbridge.Tensor, not %.100s",
                 Py_TYPE(t)->tp_name);
    return NULL;
  }
  const DLManagedTensorVersioned *mt = dlbpy_tensor_owned(t);
  if (mt == NULL) return NULL;
  char buf[DLB_SHARE_HANDLE_MAX];
  size_t len = 0;
  int fd = -1;
  dlb_status s;
  /* A device export records an event and may wait on the runtime. */
  Py_BEGIN_ALLOW_THREADS
  s = dlb_share_export(mt, buf, sizeof buf, &len, &fd);
  Py_END_ALLOW_THREADS
  if (s != DLB_OK) return dlbpy_raise(s, dlbpy_share_exc(s), "share_export()");
  PyObject *r = Py_BuildValue("(y#i)", buf, (Py_ssize_t)len, fd);
  if (r == NULL && fd >= 0) close(fd);
  return r;
}

/* pin: None, 'cuda_host' or 'rocm_host' as DLB_SHARE_PIN_* flags. */
static int dlbpy_parse_share_pin(PyObject *obj, const char *fname, uint64_t *out) {
  *out = 0;
  if (obj == NULL || obj == Py_None) return 0;
  DLDevice kind;
  char what[64];
  PyOS_snprintf(what, sizeof what, "%s: pin", fname);
  if (dlbpy_parse_device_named(obj, what, &kind) < 0) return -1;
  if (kind.device_type == kDLCUDAHost) *out = DLB_SHARE_PIN_CUDA;
  else if (kind.device_type == kDLROCMHost) *out = DLB_SHARE_PIN_ROCM;
  else {
    PyErr_Format(PyExc_ValueError,
                 "%s: pin is %R; it is None, 'cuda_host' or 'rocm_host'",
                 fname, obj);
    return -1;
  }
  return 0;
}

PyObject *dlbpy_share_import(PyObject *module, PyObject *const *args,
                             Py_ssize_t nargsf, PyObject *kwnames) {
  PyObject *handle = NULL, *fd_arg = NULL, *pin = NULL;
  const dlbpy_param params[] = {{"handle", DLBPY_POSONLY, &handle},
                                {"fd", DLBPY_POSONLY, &fd_arg},
                                {"pin", DLBPY_KWONLY, &pin}};
  if (dlbpy_parse_args("share_import", args, nargsf, kwnames, params,
                       DLBPY_NPARAMS(params)) < 0)
    return NULL;
  int64_t fd;
  uint64_t flags;
  if (dlbpy_parse_int64(fd_arg, "share_import(): fd", &fd) < 0 ||
      dlbpy_parse_share_pin(pin, "share_import()", &flags) < 0)
    return NULL;
  if (fd < -1 || fd > INT32_MAX) {
    PyErr_Format(PyExc_ValueError,
                 "share_import(): fd %lld is not a file descriptor",
                 (long long)fd);
    return NULL;
  }
  /* A handle of the wrong type is named as such: CPython's own message
   * names neither the call nor the parameter. */
  if (!PyObject_CheckBuffer(handle)) {
    PyErr_Format(PyExc_TypeError,
                 "share_import(): handle must be a bytes-like object (what "
                 "share_export() gave), not %.100s",
                 Py_TYPE(handle)->tp_name);
    return NULL;
  }
  Py_buffer view;
  if (PyObject_GetBuffer(handle, &view, PyBUF_SIMPLE) < 0) return NULL;
  DLManagedTensorVersioned *mt = NULL;
  dlb_status s;
  /* Pinning and waiting for a device's event take time; the buffer is
   * held, so it stays put. */
  Py_BEGIN_ALLOW_THREADS
  s = dlb_share_import(view.buf, (size_t)view.len, (int)fd, flags, &mt);
  Py_END_ALLOW_THREADS
  /* The core's message is read before the buffer goes: its exporter's
   * __release_buffer__ may call dlbridge and overwrite it. */
  if (s != DLB_OK) {
    dlbpy_raise(s, dlbpy_share_exc(s), "share_import()");
    PyBuffer_Release(&view);
    return NULL;
  }
  PyBuffer_Release(&view);
  return dlbpy_tensor_new(dlbpy_state_of_module(module), mt);
}
