/*
 * exchange_api.c -- the DLPack C exchange table (version 1.3) that
 * dlbridge.Tensor publishes, so C consumers (and from_dlpack itself) can
 * exchange tensors without building a capsule per call.
 *
 * The table is static and lives as long as the process. Every function
 * except the allocator is called holding the GIL and reports failure with
 * -1 and a Python exception.
 */
#include "dlbpy.h"

static int dlbpy_xapi_allocator(
    DLTensor *prototype, DLManagedTensorVersioned **out, void *error_ctx,
    void (*set_error)(void *error_ctx, const char *kind, const char *message)) {
  if (prototype == NULL || out == NULL) {
    if (set_error != NULL)
      set_error(error_ctx, "ValueError",
                prototype == NULL
                    ? "managed_tensor_allocator: prototype is NULL"
                    : "managed_tensor_allocator: out is NULL");
    return -1;
  }
  DLManagedTensorVersioned *m;
  dlb_status s = dlb_tensor_alloc(prototype->device, prototype->dtype,
                                  prototype->ndim, prototype->shape, &m);
  if (s != DLB_OK) {
    if (set_error != NULL)
      set_error(error_ctx, s == DLB_E_NOMEM ? "MemoryError" : "BufferError",
                dlb_last_error());
    return -1;
  }
  *out = m;
  return 0;
}

static int dlbpy_xapi_check(void *py_object, const char *fn) {
  if (py_object == NULL || !dlbpy_tensor_check((PyObject *)py_object)) {
    PyErr_Format(PyExc_TypeError, "%s: expected a dlbridge.Tensor, got %.100s",
                 fn,
                 py_object == NULL ? "NULL"
                                   : Py_TYPE((PyObject *)py_object)->tp_name);
    return -1;
  }
  return 0;
}

static int dlbpy_xapi_from_py_object(void *py_object,
                                     DLManagedTensorVersioned **out) {
  if (dlbpy_xapi_check(py_object, "managed_tensor_from_py_object_no_sync") < 0)
    return -1;
  if (out == NULL) {
    PyErr_SetString(PyExc_ValueError,
                    "managed_tensor_from_py_object_no_sync: out is NULL");
    return -1;
  }
  return dlbpy_export((PyObject *)py_object, NULL, -1, out);
}

static int dlbpy_xapi_to_py_object(DLManagedTensorVersioned *tensor,
                                   void **out_py_object) {
  if (tensor == NULL || out_py_object == NULL) {
    /* Steals tensor, errors included. */
    dlbpy_release(tensor);
    PyErr_Format(PyExc_ValueError,
                 "managed_tensor_to_py_object_no_sync: %s is NULL",
                 tensor == NULL ? "tensor" : "out_py_object");
    return -1;
  }
  if (tensor->version.major != DLPACK_MAJOR_VERSION) {
    unsigned major = tensor->version.major, minor = tensor->version.minor;
    dlbpy_release(tensor);
    PyErr_Format(PyExc_BufferError,
                 "managed_tensor_to_py_object_no_sync: version is %u.%u; "
                 "dlbridge reads major version %d only",
                 major, minor, DLPACK_MAJOR_VERSION);
    return -1;
  }
  dlbpy_state *st = dlbpy_state_current();
  if (st == NULL) {
    dlbpy_release_keeping_error(tensor);
    return -1;
  }
  DLManagedTensorVersioned *mt;
  dlb_status s = dlbpy_accept_versioned(tensor, &mt);
  if (s != DLB_OK) {
    dlbpy_raise_unless_set(s, PyExc_BufferError,
                           "managed_tensor_to_py_object_no_sync");
    dlbpy_release_keeping_error(tensor);
    return -1;
  }
  PyObject *obj = dlbpy_tensor_new(st, mt);
  if (obj == NULL) return -1;
  *out_py_object = obj;
  return 0;
}

static int dlbpy_xapi_dltensor_from_py_object(void *py_object, DLTensor *out) {
  if (dlbpy_xapi_check(py_object, "dltensor_from_py_object_no_sync") < 0)
    return -1;
  if (out == NULL) {
    PyErr_SetString(PyExc_ValueError,
                    "dltensor_from_py_object_no_sync: out is NULL");
    return -1;
  }
  const DLManagedTensorVersioned *mt = ((dlbpy_tensor *)py_object)->mt;
  /* A DLTensor has no flags: what they say would be lost, as in the
   * legacy struct, which __dlpack__ refuses for the same tensors. */
  if (mt->flags & DLPACK_FLAG_BITMASK_READ_ONLY) {
    PyErr_SetString(PyExc_BufferError,
                    "dltensor_from_py_object_no_sync: the tensor is "
                    "read-only and a DLTensor cannot say so; "
                    "managed_tensor_from_py_object_no_sync carries the flag");
    return -1;
  }
  if ((mt->flags & DLPACK_FLAG_BITMASK_IS_SUBBYTE_TYPE_PADDED) &&
      dlb_dtype_is_subbyte(mt->dl_tensor.dtype)) {
    PyErr_SetString(PyExc_BufferError,
                    "dltensor_from_py_object_no_sync: the tensor's sub-byte "
                    "units are padded to a byte each and a DLTensor cannot "
                    "say so; managed_tensor_from_py_object_no_sync carries "
                    "the flag");
    return -1;
  }
  /* Shape and strides point into the tensor's own struct, which is
   * immutable and lives as long as the object. */
  *out = mt->dl_tensor;
  return 0;
}

/* dlbridge runs no asynchronous work of its own: whatever it made is ready
 * when the call that made it returns, so the default stream (NULL) is as
 * good as any. */
static int dlbpy_xapi_current_work_stream(DLDeviceType device_type,
                                          int32_t device_id,
                                          void **out_current_stream) {
  if (out_current_stream == NULL) {
    PyErr_SetString(PyExc_ValueError,
                    "current_work_stream: out_current_stream is NULL");
    return -1;
  }
  /* dlbridge works on the default stream of every device it handles;
   * a device that is not DLPack's is refused, not given a stream. */
  if (!dlb_device_type_is_known(device_type) || device_id < 0) {
    PyErr_Format(PyExc_ValueError,
                 "current_work_stream: device (%d, %d) is not a DLPack device",
                 (int)device_type, (int)device_id);
    return -1;
  }
  *out_current_stream = NULL;
  return 0;
}

const DLPackExchangeAPI dlbpy_exchange_api = {
    .header = {.version = {DLPACK_MAJOR_VERSION, DLPACK_MINOR_VERSION},
               .prev_api = NULL},
    .managed_tensor_allocator = dlbpy_xapi_allocator,
    .managed_tensor_from_py_object_no_sync = dlbpy_xapi_from_py_object,
    .managed_tensor_to_py_object_no_sync = dlbpy_xapi_to_py_object,
    .dltensor_from_py_object_no_sync = dlbpy_xapi_dltensor_from_py_object,
    .current_work_stream = dlbpy_xapi_current_work_stream,
};

int dlbpy_exchange_publish(PyTypeObject *type) {
  /* The table is const for us; the capsule API takes void *. Consumers
   * only read it. */
  void *table = (void *)(uintptr_t)&dlbpy_exchange_api;
  PyObject *capsule = PyCapsule_New(table, "dlpack_exchange_api", NULL);
  if (capsule == NULL) return -1;
  int rc = PyDict_SetItemString(type->tp_dict, "__dlpack_c_exchange_api__",
                                capsule);
  Py_DECREF(capsule);
  if (rc < 0) return -1;
  PyObject *address = PyLong_FromVoidPtr(table);
  if (address == NULL) return -1;
  rc = PyDict_SetItemString(type->tp_dict, "__c_dlpack_exchange_api__",
                            address);
  Py_DECREF(address);
  if (rc < 0) return -1;
  PyType_Modified(type);
  return 0;
}
