/*
 * gpu.c -- accelerator memory from Python: pin, device_of, prefetch, advise
 * and synchronize, on the GPU runtimes the core loads at first use.
 *
 * Errors follow the constructors: a missing runtime or GPU, or a runtime
 * that refuses, is the machine's state and raises RuntimeError with the
 * core's message (which names the library looked for); a value that cannot
 * work on any machine raises ValueError; an argument of the wrong type
 * TypeError.
 */
#include <string.h>

#include "dlbpy.h"

static PyObject *dlbpy_gpu_raise(dlb_status s, const char *what) {
  return dlbpy_raise(s, dlbpy_gpu_exc(s), what);
}

static void dlbpy_gpu_name(DLDevice d, char *buf, size_t size) {
  if (dlb_device_format(d, buf, size) != DLB_OK)
    PyOS_snprintf(buf, size, "(%d, %d)", (int)d.device_type,
                  (int)d.device_id);
}

/*
 * The tensor obj stands for: a Tensor's own or an unconsumed DLPack
 * capsule's (borrowed, *owned stays NULL: no Python code may run between
 * this and the last use of *t), or for any other DLPack producer an import
 * of it (*owned, which the caller releases with dlbpy_release once done
 * with *t). TypeError for other objects.
 */
static int dlbpy_gpu_tensor_arg(PyObject *module, const char *fname,
                                PyObject *obj, const DLTensor **t,
                                DLManagedTensorVersioned **owned) {
  *owned = NULL;
  if (dlbpy_tensor_check(obj)) {
    *t = &((dlbpy_tensor *)obj)->mt->dl_tensor;
    return 0;
  }
  /* A capsule is looked at, not consumed: it can still be imported. */
  int peek = dlbpy_capsule_peek(obj, t);
  if (peek != 0) return peek < 0 ? -1 : 0;
  dlbpy_state *st = dlbpy_state_of_module(module);
  int producer = dlbpy_is_producer(st, obj);
  if (producer < 0) return -1;
  if (!producer) {
    PyErr_Format(PyExc_TypeError,
                 "%s(): expected a dlbridge.Tensor or a DLPack producer, not "
                 "%.100s",
                 fname, Py_TYPE(obj)->tp_name);
    return -1;
  }
  if (dlbpy_import(st, obj, NULL, owned) < 0) return -1;
  *t = &(*owned)->dl_tensor;
  return 0;
}

/* ------------------------------------------------------------------------
 * pin
 * ---------------------------------------------------------------------- */

/* obj as a dlbridge tensor: a Tensor's own (borrowed), or a new one for a
 * DLPack producer or a buffer exporter, in *owned. A capsule is taken
 * tentatively (*taken), to be settled once pinning succeeded or failed. */
static int dlbpy_pin_source(dlbpy_state *st, PyObject *obj,
                            const DLManagedTensorVersioned **src,
                            DLManagedTensorVersioned **owned,
                            dlbpy_taken *taken) {
  *owned = NULL;
  taken->capsule = NULL;
  if (dlbpy_tensor_check(obj)) {
    *src = dlbpy_tensor_owned(obj);
    return *src == NULL ? -1 : 0;
  }
  DLManagedTensorVersioned *mt;
  int producer = dlbpy_is_producer(st, obj);
  if (producer < 0) return -1;
  if (producer) {
    if (dlbpy_import_tentative(st, obj, NULL, &mt, taken) < 0) return -1;
    /* Pinning shares the tensor's owner, which a foreign one lacks. */
    if (dlbpy_own(&mt) < 0) {
      dlbpy_release(mt);
      dlbpy_capsule_settle(taken, 0);
      return -1;
    }
  } else if (PyObject_CheckBuffer(obj)) {
    if (dlbpy_import_buffer(obj, &mt) < 0) return -1;
  } else {
    PyErr_Format(PyExc_TypeError,
                 "pin(): %.100s is neither a buffer nor a DLPack producer",
                 Py_TYPE(obj)->tp_name);
    return -1;
  }
  *src = mt;
  *owned = mt;
  return 0;
}

PyObject *dlbpy_pin(PyObject *module, PyObject *const *args,
                    Py_ssize_t nargsf, PyObject *kwnames) {
  PyObject *obj = NULL, *kind_arg = NULL;
  const dlbpy_param params[] = {{"obj", DLBPY_POSONLY, &obj},
                                {"kind", DLBPY_OPTIONAL, &kind_arg}};
  if (dlbpy_parse_args("pin", args, nargsf, kwnames, params,
                       DLBPY_NPARAMS(params)) < 0)
    return NULL;
  DLDevice kind = {kDLCUDAHost, 0};
  if (kind_arg != NULL && kind_arg != Py_None &&
      dlbpy_parse_device_named(kind_arg, "pin(): kind", &kind) < 0)
    return NULL;
  char name[DLB_DEVICE_NAME_MAX];
  if (kind.device_type != kDLCUDAHost && kind.device_type != kDLROCMHost) {
    dlbpy_gpu_name(kind, name, sizeof name);
    PyErr_Format(PyExc_ValueError,
                 "pin(): kind is %s; pinned host memory is 'cuda_host' or "
                 "'rocm_host'",
                 name);
    return NULL;
  }
  dlbpy_state *st = dlbpy_state_of_module(module);
  const DLManagedTensorVersioned *src;
  DLManagedTensorVersioned *owned, *out = NULL;
  /* A capsule whose pinning fails is given back unconsumed. */
  dlbpy_taken taken;
  if (dlbpy_pin_source(st, obj, &src, &owned, &taken) < 0) return NULL;
  DLDevice have = src->dl_tensor.device;
  dlb_status s;
  if (have.device_type == kind.device_type) {
    /* Pinned already, by dlbridge or by its producer: pinning it again
     * changes nothing. */
    s = dlb_tensor_share(src, &out);
  } else if (have.device_type != kDLCPU) {
    dlbpy_gpu_name(have, name, sizeof name);
    dlbpy_release(owned);
    PyErr_Format(PyExc_ValueError,
                 "pin(): the data is in %s memory; only cpu memory can be "
                 "pinned",
                 name);
    dlbpy_capsule_settle(&taken, 0);
    return NULL;
  } else {
    /* Registering takes time in proportion to the size: without the GIL,
     * as share_import and load_npy pin. */
    Py_BEGIN_ALLOW_THREADS
    s = dlb_tensor_pin(src, kind.device_type, &out);
    Py_END_ALLOW_THREADS
  }
  if (s != DLB_OK) {
    dlbpy_gpu_raise(s, "pin()");
    dlbpy_release(owned);
    dlbpy_capsule_settle(&taken, 0);
    return NULL;
  }
  dlbpy_release(owned);
  dlbpy_capsule_settle(&taken, 1);
  return dlbpy_tensor_new(st, out);
}

/* ------------------------------------------------------------------------
 * device_of
 * ---------------------------------------------------------------------- */

/* An int address, 1 to 2**64 - 1. */
static int dlbpy_address_arg(PyObject *obj, const void **out) {
  PyObject *index = PyNumber_Index(obj);
  if (index == NULL) return -1;
  int overflow = 0;
  long long v = PyLong_AsLongLongAndOverflow(index, &overflow);
  unsigned long long address = (unsigned long long)v;
  if (v == -1 && PyErr_Occurred()) {
    Py_DECREF(index);
    return -1;
  }
  if (overflow > 0) {
    address = PyLong_AsUnsignedLongLong(index);
    if (PyErr_Occurred()) {
      PyErr_Clear();
      PyErr_Format(PyExc_OverflowError,
                   "device_of(): address %R does not fit in a pointer",
                   index);
      Py_DECREF(index);
      return -1;
    }
  } else if (overflow < 0 || v < 0) {
    PyErr_Format(PyExc_ValueError, "device_of(): address %R is negative",
                 index);
    Py_DECREF(index);
    return -1;
  }
  Py_DECREF(index);
  if (address == 0) {
    PyErr_SetString(PyExc_ValueError,
                    "device_of(): address 0 is NULL; no memory is there");
    return -1;
  }
  *out = (const void *)(uintptr_t)address;
  return 0;
}

/* The name of the memory at ptr, which obj's data pointer is. */
static PyObject *dlbpy_device_name_of(PyObject *obj, const void *ptr) {
  if (ptr == NULL) {
    PyErr_Format(PyExc_ValueError,
                 "device_of(): the %.100s has no data pointer (NULL); no "
                 "memory is there",
                 Py_TYPE(obj)->tp_name);
    return NULL;
  }
  DLDevice d;
  dlb_status s = dlb_device_of_pointer(ptr, &d);
  if (s != DLB_OK) return dlbpy_gpu_raise(s, "device_of()");
  char name[DLB_DEVICE_NAME_MAX];
  s = dlb_device_format(d, name, sizeof name);
  if (s != DLB_OK) return dlbpy_gpu_raise(s, "device_of()");
  return PyUnicode_FromString(name);
}

PyObject *dlbpy_device_of(PyObject *module, PyObject *x) {
  if (dlbpy_tensor_check(x))
    return dlbpy_device_name_of(x, ((dlbpy_tensor *)x)->mt->dl_tensor.data);
  if (PyLong_Check(x) && !PyBool_Check(x)) {
    const void *ptr;
    if (dlbpy_address_arg(x, &ptr) < 0) return NULL;
    return dlbpy_device_name_of(x, ptr);
  }
  const DLTensor *peeked;
  int peek = dlbpy_capsule_peek(x, &peeked);
  if (peek < 0) return NULL;
  if (peek) return dlbpy_device_name_of(x, peeked->data);
  dlbpy_state *st = dlbpy_state_of_module(module);
  int producer = dlbpy_is_producer(st, x);
  if (producer < 0) return NULL;
  /* A buffer needs no import; an exporter that refuses one may still be a
   * DLPack producer (a GPU array offering a host view only sometimes). */
  if (PyObject_CheckBuffer(x)) {
    Py_buffer view;
    if (PyObject_GetBuffer(x, &view, PyBUF_STRIDED_RO) == 0) {
      PyObject *r = dlbpy_device_name_of(x, view.buf);
      PyBuffer_Release(&view);
      return r;
    }
    if (!producer || !PyErr_ExceptionMatches(PyExc_BufferError)) return NULL;
    PyErr_Clear();
  }
  if (producer) {
    DLManagedTensorVersioned *mt;
    if (dlbpy_import(st, x, NULL, &mt) < 0) return NULL;
    PyObject *r = dlbpy_device_name_of(x, mt->dl_tensor.data);
    dlbpy_release(mt);
    return r;
  }
  if (PyIndex_Check(x) && !PyBool_Check(x)) {
    const void *ptr;
    if (dlbpy_address_arg(x, &ptr) < 0) return NULL;
    return dlbpy_device_name_of(x, ptr);
  }
  PyErr_Format(PyExc_TypeError,
               "device_of(): expected an int address, a dlbridge.Tensor, a "
               "buffer or a DLPack producer, not %.100s",
               Py_TYPE(x)->tp_name);
  return NULL;
}

/* ------------------------------------------------------------------------
 * prefetch and advise
 * ---------------------------------------------------------------------- */

/* A CUDA stream in the __dlpack__ convention: None or 1 the legacy default
 * stream, 2 the per-thread default stream, larger values handles. 0, -1 (no
 * synchronisation: a prefetch is queued on some stream) and every value
 * below name no stream; INT64_MIN among them, which the core reads as
 * None (DLB_STREAM_NONE), so the refusal comes before the core sees it. */
static int dlbpy_prefetch_stream(dlbpy_state *st, PyObject *obj,
                                 void **out) {
  int64_t value = DLB_STREAM_NONE;
  if (obj != NULL && obj != Py_None) {
    if (dlbpy_parse_int64(obj, "stream", &value) < 0) return -1;
    if (value <= 0) {
      PyErr_Format(st->stream_error,
                   "prefetch(): stream is %lld, which names no stream; pass "
                   "None or 1 (the legacy default stream), 2 (the "
                   "per-thread default stream) or a stream handle",
                   (long long)value);
      return -1;
    }
  }
  void *handle = NULL;
  int sync; /* 1: -1, the one value that gives 0, was refused above */
  dlb_status s = dlb_stream_from_dlpack(kDLCUDAManaged, value, &handle, &sync);
  if (s != DLB_OK) return dlbpy_fail(s, st->stream_error, "prefetch()");
  *out = handle;
  return 0;
}

PyObject *dlbpy_prefetch(PyObject *module, PyObject *const *args,
                         Py_ssize_t nargsf, PyObject *kwnames) {
  PyObject *t_arg = NULL, *device_arg = NULL, *stream_arg = NULL;
  const dlbpy_param params[] = {{"t", DLBPY_POSONLY, &t_arg},
                                {"device", DLBPY_REQUIRED, &device_arg},
                                {"stream", DLBPY_OPTIONAL, &stream_arg}};
  if (dlbpy_parse_args("prefetch", args, nargsf, kwnames, params,
                       DLBPY_NPARAMS(params)) < 0)
    return NULL;
  dlbpy_state *st = dlbpy_state_of_module(module);
  DLDevice target;
  void *stream = NULL;
  if (dlbpy_parse_device(device_arg, &target) < 0 ||
      dlbpy_prefetch_stream(st, stream_arg, &stream) < 0)
    return NULL;
  const DLTensor *t;
  DLManagedTensorVersioned *owned;
  if (dlbpy_gpu_tensor_arg(module, "prefetch", t_arg, &t, &owned) < 0)
    return NULL;
  dlb_status s = dlb_managed_prefetch(t, target, stream);
  if (s != DLB_OK) dlbpy_gpu_raise(s, "prefetch()");
  dlbpy_release(owned);
  if (s != DLB_OK) return NULL;
  Py_RETURN_NONE;
}

static const struct {
  const char *name;
  dlb_advice advice;
} dlbpy_advice_names[] = {
    {"set_read_mostly", DLB_ADVISE_SET_READ_MOSTLY},
    {"unset_read_mostly", DLB_ADVISE_UNSET_READ_MOSTLY},
    {"set_preferred_location", DLB_ADVISE_SET_PREFERRED_LOCATION},
    {"unset_preferred_location", DLB_ADVISE_UNSET_PREFERRED_LOCATION},
    {"set_accessed_by", DLB_ADVISE_SET_ACCESSED_BY},
    {"unset_accessed_by", DLB_ADVISE_UNSET_ACCESSED_BY},
};

static int dlbpy_advice_arg(PyObject *obj, dlb_advice *out) {
  if (!PyUnicode_Check(obj)) {
    PyErr_Format(PyExc_TypeError,
                 "advise(): advice must be a str such as 'set_read_mostly', "
                 "not %.100s",
                 Py_TYPE(obj)->tp_name);
    return -1;
  }
  const char *text = dlbpy_name_text(obj, "advise(): advice");
  if (text == NULL) return -1;
  size_t n = sizeof dlbpy_advice_names / sizeof dlbpy_advice_names[0];
  for (size_t i = 0; i < n; i++) {
    if (strcmp(text, dlbpy_advice_names[i].name) == 0) {
      *out = dlbpy_advice_names[i].advice;
      return 0;
    }
  }
  PyErr_Format(PyExc_ValueError,
               "advise(): unknown advice %R; expected set_read_mostly, "
               "unset_read_mostly, set_preferred_location, "
               "unset_preferred_location, set_accessed_by or "
               "unset_accessed_by",
               obj);
  return -1;
}

PyObject *dlbpy_advise(PyObject *module, PyObject *const *args,
                       Py_ssize_t nargsf, PyObject *kwnames) {
  PyObject *t_arg = NULL, *advice_arg = NULL, *device_arg = NULL;
  const dlbpy_param params[] = {{"t", DLBPY_POSONLY, &t_arg},
                                {"advice", DLBPY_REQUIRED, &advice_arg},
                                {"device", DLBPY_OPTIONAL, &device_arg}};
  if (dlbpy_parse_args("advise", args, nargsf, kwnames, params,
                       DLBPY_NPARAMS(params)) < 0)
    return NULL;
  dlb_advice advice;
  /* The host, for advice that names no device (read-mostly). */
  DLDevice target = {kDLCPU, 0};
  if (dlbpy_advice_arg(advice_arg, &advice) < 0 ||
      (device_arg != NULL && device_arg != Py_None &&
       dlbpy_parse_device(device_arg, &target) < 0))
    return NULL;
  const DLTensor *t;
  DLManagedTensorVersioned *owned;
  if (dlbpy_gpu_tensor_arg(module, "advise", t_arg, &t, &owned) < 0)
    return NULL;
  dlb_status s = dlb_managed_advise(t, advice, target);
  if (s != DLB_OK) dlbpy_gpu_raise(s, "advise()");
  dlbpy_release(owned);
  if (s != DLB_OK) return NULL;
  Py_RETURN_NONE;
}

/* ------------------------------------------------------------------------
 * synchronize
 * ---------------------------------------------------------------------- */

/* The device x names: a device itself (a name, a pair, a framework's
 * device object), or the memory of a Tensor, of an unconsumed DLPack
 * capsule (read, not consumed) or of a producer (its __dlpack_device__, so
 * nothing is imported). */
static int dlbpy_sync_device_arg(PyObject *module, PyObject *x,
                                 DLDevice *out) {
  if (PyUnicode_Check(x) || PyTuple_Check(x))
    return dlbpy_parse_device(x, out);
  if (dlbpy_tensor_check(x)) {
    *out = ((dlbpy_tensor *)x)->mt->dl_tensor.device;
    return 0;
  }
  const DLTensor *peeked;
  int peek = dlbpy_capsule_peek(x, &peeked);
  if (peek < 0) return -1;
  if (peek) {
    /* Validated: its device normalises. */
    *out = peeked->device;
    (void)dlb_device_normalize(out);
    return 0;
  }
  dlbpy_state *st = dlbpy_state_of_module(module);
  /* x.__dlpack_device__(), looked up as Python looks it up: on the object,
   * with every kind of descriptor, instance attributes and __getattr__. */
  PyObject *method = NULL;
  int found = DLBPY_GET_OPTIONAL_ATTR(x, st->s_dlpack_device, &method);
  if (found < 0) return -1;
  if (found == 0) {
    /* A framework's device object (torch.device), else not a device. */
    if (dlbpy_parse_device(x, out) == 0) return 0;
    if (!PyErr_ExceptionMatches(PyExc_TypeError)) return -1;
    PyErr_Clear();
    PyErr_Format(PyExc_TypeError,
                 "synchronize(): expected a device ('cuda:0', a "
                 "(device_type, device_id) tuple, a torch.device), a "
                 "dlbridge.Tensor, a DLPack capsule or a DLPack producer, "
                 "not %.100s",
                 Py_TYPE(x)->tp_name);
    return -1;
  }
  if (!PyCallable_Check(method)) {
    PyErr_Format(PyExc_TypeError,
                 "synchronize(): %.100s.__dlpack_device__ is %.100s, not a "
                 "method",
                 Py_TYPE(x)->tp_name, Py_TYPE(method)->tp_name);
    Py_DECREF(method);
    return -1;
  }
  PyObject *pair = PyObject_CallNoArgs(method);
  Py_DECREF(method);
  if (pair == NULL) return -1;
  int rc;
  if (PyTuple_Check(pair)) {
    /* What is refused is the producer's answer, named as such. */
    char what[160];
    PyOS_snprintf(what, sizeof what, "synchronize(): %.100s.__dlpack_device__()",
                  Py_TYPE(x)->tp_name);
    rc = dlbpy_parse_reported_device(pair, what, out);
  } else {
    PyErr_Format(PyExc_TypeError,
                 "synchronize(): %.100s.__dlpack_device__() returned "
                 "%.100s, not a (device_type, device_id) tuple",
                 Py_TYPE(x)->tp_name, Py_TYPE(pair)->tp_name);
    rc = -1;
  }
  Py_DECREF(pair);
  return rc;
}

PyObject *dlbpy_synchronize(PyObject *module, PyObject *x) {
  DLDevice device;
  if (dlbpy_sync_device_arg(module, x, &device) < 0) return NULL;
  /* The CPU runs nothing behind the caller's back. */
  if (device.device_type == kDLCPU) Py_RETURN_NONE;
  dlb_status s;
  /* The wait may be long; the core's message is per thread, and this
   * thread keeps it. */
  Py_BEGIN_ALLOW_THREADS
  s = dlb_device_synchronize(device);
  Py_END_ALLOW_THREADS
  if (s != DLB_OK) return dlbpy_gpu_raise(s, "synchronize()");
  Py_RETURN_NONE;
}
