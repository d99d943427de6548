/*
 * testhelper.c -- dlbridge._testhelper: hostile producers and C consumers
 * for the Python tests.
 *
 *   make_capsule(...)        a DLPack capsule with any field set to anything,
 *                            and a deleter that counts its calls
 *   counters() / reset()     what the deleters saw
 *   exchange_*(...)          drive a type's DLPack exchange table from C
 *                            (exchange_null: with a NULL pointer)
 *   fake_exchange*(...)      a producer's exchange table (one whose capsule
 *                            owns it: retired_counts())
 *   release_in_thread(lst)   export lst[0] through the exchange table, drop
 *                            lst[0], release on a new thread without the GIL
 *   release_in_thread_holding_gil(lst, ms)
 *                            the same, this thread keeping the GIL ms ms
 *   release_at_exit(lst)     the same, released by a C atexit handler after
 *                            the interpreter is gone
 *   decref_with_error(lst)   drop lst's items while an exception is set and
 *                            check the exception survives
 *   capi_*(...)              the C API of dlbridge_capi.h
 *   careless_buffer(n, ...)  a buffer exporter with items of n bytes and
 *                            no format, or any fields given
 *   oom_*(...)               allocation N failing in turn: the core's
 *                            allocator and CPython's three domains
 *   OldCProducer(array)      a C __dlpack__ that takes stream only, as
 *                            NumPy 1.x's, counting its calls
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <structmember.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "dlbridge/alloc.h"
#include "dlbridge_capi.h"

/* ------------------------------------------------------------------------
 * Counters (process-wide: deleters run without any module at hand)
 * ---------------------------------------------------------------------- */

static atomic_int deleted;
static atomic_int deleted_with_gil;
static atomic_int deleted_without_gil;

static PyObject *counters(PyObject *self, PyObject *unused) {
  (void)self;
  (void)unused;
  return Py_BuildValue("{s:i,s:i,s:i}", "deleted", atomic_load(&deleted),
                       "with_gil", atomic_load(&deleted_with_gil),
                       "without_gil", atomic_load(&deleted_without_gil));
}

static PyObject *reset(PyObject *self, PyObject *unused) {
  (void)self;
  (void)unused;
  atomic_store(&deleted, 0);
  atomic_store(&deleted_with_gil, 0);
  atomic_store(&deleted_without_gil, 0);
  Py_RETURN_NONE;
}

/* ------------------------------------------------------------------------
 * Hostile producer
 * ---------------------------------------------------------------------- */

enum { MODE_COUNT, MODE_NONE, MODE_CLEAR_ERROR, MODE_LEAVE_ERROR };

typedef struct {
  union {
    DLManagedTensorVersioned v;
    DLManagedTensor l;
  } m;
  int legacy;
  int mode;
  PyObject *keep;
  Py_buffer view;
  int has_view;
  char name[64];
  int64_t shape[80];
  int64_t strides[80];
} helper_tensor;

/* Written like a careless producer: it takes the GIL without asking
 * whether the interpreter still exists, so a call after finalization
 * crashes the process. */
static void helper_free(helper_tensor *h) {
  int had_gil = PyGILState_Check();
  PyGILState_STATE gil = PyGILState_Ensure();
  if (h->has_view) PyBuffer_Release(&h->view);
  Py_XDECREF(h->keep);
  if (h->mode == MODE_CLEAR_ERROR) {
    /* A deleter that tidies up after itself and so wipes whatever
     * exception its caller had pending. */
    PyErr_SetString(PyExc_RuntimeError, "raised inside the deleter");
    PyErr_Clear();
  } else if (h->mode == MODE_LEAVE_ERROR) {
    PyErr_SetString(PyExc_RuntimeError, "left set by the deleter");
  }
  PyGILState_Release(gil);
  atomic_fetch_add(had_gil ? &deleted_with_gil : &deleted_without_gil, 1);
  atomic_fetch_add(&deleted, 1);
  PyMem_RawFree(h);
}

static void helper_deleter_v(DLManagedTensorVersioned *m) {
  helper_free((helper_tensor *)m->manager_ctx);
}

static void helper_deleter_l(DLManagedTensor *m) {
  helper_free((helper_tensor *)m->manager_ctx);
}

static void helper_call_deleter(helper_tensor *h) {
  if (h->legacy) {
    if (h->m.l.deleter != NULL) h->m.l.deleter(&h->m.l);
  } else if (h->m.v.deleter != NULL) {
    h->m.v.deleter(&h->m.v);
  }
}

static void helper_capsule_destructor(PyObject *capsule) {
  const char *name = PyCapsule_GetName(capsule);
  if (name == NULL || strncmp(name, "used_", 5) == 0) return;
  helper_tensor *h = PyCapsule_GetContext(capsule);
  if (h != NULL) helper_call_deleter(h);
}

static int parse_int64s(PyObject *seq, int64_t *out, Py_ssize_t max,
                        Py_ssize_t *n) {
  PyObject *fast = PySequence_Fast(seq, "expected a sequence of ints");
  if (fast == NULL) return -1;
  *n = PySequence_Fast_GET_SIZE(fast);
  if (*n > max) {
    Py_DECREF(fast);
    PyErr_SetString(PyExc_ValueError, "too many entries");
    return -1;
  }
  for (Py_ssize_t i = 0; i < *n; i++) {
    out[i] = PyLong_AsLongLong(PySequence_Fast_GET_ITEM(fast, i));
    if (out[i] == -1 && PyErr_Occurred()) {
      Py_DECREF(fast);
      return -1;
    }
  }
  Py_DECREF(fast);
  return 0;
}

static helper_tensor *helper_new(void) {
  helper_tensor *h = PyMem_RawCalloc(1, sizeof *h);
  if (h == NULL) PyErr_NoMemory();
  return h;
}

/* Builds the struct described by keywords into h. */
static int helper_fill(helper_tensor *h, PyObject *args, PyObject *kwargs) {
  static const char *const kw[] = {"data",    "shape",  "strides",  "dtype",
                       "device",  "byte_offset", "flags", "version",
                       "legacy",  "name",   "deleter",  "ndim",
                       "shape_null", NULL};
  PyObject *data = Py_None, *shape = NULL, *strides = NULL;
  int code = kDLFloat, bits = 32, lanes = 1;
  int dev_type = kDLCPU, dev_id = 0;
  unsigned long long byte_offset = 0, flags = 0;
  unsigned int major = DLPACK_MAJOR_VERSION, minor = DLPACK_MINOR_VERSION;
  int legacy = 0, shape_null = 0, ndim = -999;
  const char *name = NULL, *deleter = "count";
  if (!PyArg_ParseTupleAndKeywords(
          args, kwargs, "|$OOO(iii)(ii)KK(II)pzsip", (char **)(uintptr_t)kw,
          &data, &shape, &strides, &code, &bits, &lanes, &dev_type, &dev_id,
          &byte_offset, &flags, &major, &minor, &legacy, &name, &deleter,
          &ndim, &shape_null))
    return -1;
  Py_ssize_t nshape = 0;
  if (shape != NULL && parse_int64s(shape, h->shape, 80, &nshape) < 0)
    return -1;
  Py_ssize_t nstrides = 0;
  int null_strides = strides == Py_None;
  if (strides != NULL && strides != Py_None &&
      parse_int64s(strides, h->strides, 80, &nstrides) < 0)
    return -1;
  if (strides == NULL) {
    /* Compact strides, wrapping (not overflowing) past 64 bits: a shape
     * such as (2**40, 2**40) is for the consumer to refuse. */
    uint64_t s = 1;
    for (Py_ssize_t i = nshape - 1; i >= 0; i--) {
      h->strides[i] = (int64_t)s;
      s *= h->shape[i] > 0 ? (uint64_t)h->shape[i] : 1;
    }
  }
  void *ptr = NULL;
  if (PyLong_Check(data)) {
    ptr = PyLong_AsVoidPtr(data);
    if (ptr == NULL && PyErr_Occurred()) return -1;
  } else if (data != Py_None) {
    if (PyObject_GetBuffer(data, &h->view, PyBUF_RECORDS_RO) < 0) return -1;
    h->has_view = 1;
    ptr = h->view.buf;
    h->keep = data;
    Py_INCREF(data);
  }
  if (strcmp(deleter, "count") == 0) h->mode = MODE_COUNT;
  else if (strcmp(deleter, "none") == 0) h->mode = MODE_NONE;
  else if (strcmp(deleter, "clear_error") == 0) h->mode = MODE_CLEAR_ERROR;
  else if (strcmp(deleter, "leave_error") == 0) h->mode = MODE_LEAVE_ERROR;
  else {
    PyErr_Format(PyExc_ValueError, "unknown deleter mode '%s'", deleter);
    return -1;
  }
  h->legacy = legacy;
  PyOS_snprintf(h->name, sizeof h->name, "%s",
                name != NULL ? name
                             : legacy ? "dltensor" : "dltensor_versioned");
  DLTensor *t = legacy ? &h->m.l.dl_tensor : &h->m.v.dl_tensor;
  t->data = ptr;
  t->device.device_type = (DLDeviceType)dev_type;
  t->device.device_id = dev_id;
  t->ndim = ndim == -999 ? (int32_t)nshape : ndim;
  t->dtype.code = (uint8_t)code;
  t->dtype.bits = (uint8_t)bits;
  t->dtype.lanes = (uint16_t)lanes;
  t->shape = shape_null ? NULL : h->shape;
  t->strides = null_strides ? NULL : h->strides;
  t->byte_offset = byte_offset;
  if (legacy) {
    h->m.l.manager_ctx = h;
    h->m.l.deleter = h->mode == MODE_NONE ? NULL : helper_deleter_l;
  } else {
    h->m.v.version.major = major;
    h->m.v.version.minor = minor;
    h->m.v.manager_ctx = h;
    h->m.v.deleter = h->mode == MODE_NONE ? NULL : helper_deleter_v;
    h->m.v.flags = flags;
  }
  return 0;
}

static void helper_discard(helper_tensor *h) {
  if (h->has_view) PyBuffer_Release(&h->view);
  Py_XDECREF(h->keep);
  PyMem_RawFree(h);
}

static PyObject *make_capsule(PyObject *self, PyObject *args,
                              PyObject *kwargs) {
  (void)self;
  helper_tensor *h = helper_new();
  if (h == NULL) return NULL;
  if (helper_fill(h, args, kwargs) < 0) {
    helper_discard(h);
    return NULL;
  }
  void *ptr = h->legacy ? (void *)&h->m.l : (void *)&h->m.v;
  PyObject *capsule = PyCapsule_New(ptr, h->name, helper_capsule_destructor);
  if (capsule == NULL) {
    helper_discard(h);
    return NULL;
  }
  if (PyCapsule_SetContext(capsule, h) < 0) {
    Py_DECREF(capsule);
    return NULL;
  }
  return capsule;
}

/* ------------------------------------------------------------------------
 * The exchange table, from C
 * ---------------------------------------------------------------------- */

static const DLPackExchangeAPI *api_of(PyObject *type_or_obj) {
  PyObject *type = PyType_Check(type_or_obj) ? type_or_obj
                                             : (PyObject *)Py_TYPE(type_or_obj);
  /* Made once: the allocation-failure tests fail dlbridge's calls, not
   * the making of this name. */
  static PyObject *name;
  if (name == NULL) {
    name = PyUnicode_InternFromString("__dlpack_c_exchange_api__");
    if (name == NULL) return NULL;
  }
  PyObject *capsule = PyObject_GetAttr(type, name);
  if (capsule == NULL) return NULL;
  const DLPackExchangeAPI *api =
      PyCapsule_GetPointer(capsule, "dlpack_exchange_api");
  Py_DECREF(capsule);
  return api;
}

/* The table's functions return 0, or -1 with an exception set (the
 * allocator reports through set_error instead), and nothing else: a
 * consumer may test for -1. Anything else is a SystemError here. */
static int xapi_rc(int rc, const char *fn) {
  if (rc == -1 || (rc == 0 && !PyErr_Occurred())) return rc;
  if (rc == 0) {
    PyErr_Format(PyExc_SystemError, "%s returned 0 with an exception set",
                 fn);
    return -1;
  }
  PyErr_Format(PyExc_SystemError,
               "%s returned %d; exchange API functions return 0 or -1", fn,
               rc);
  return -1;
}

/* XAPI(api, fn, args...): api->fn(args...), its result checked. */
#define XAPI(api, fn, ...) xapi_rc((api)->fn(__VA_ARGS__), #fn)

static PyObject *exchange_version(PyObject *self, PyObject *type) {
  (void)self;
  const DLPackExchangeAPI *api = api_of(type);
  if (api == NULL) return NULL;
  PyObject *int_attr =
      PyObject_GetAttrString(type, "__c_dlpack_exchange_api__");
  void *addr = NULL;
  if (int_attr != NULL) {
    addr = PyLong_AsVoidPtr(int_attr);
    Py_DECREF(int_attr);
  } else {
    PyErr_Clear();
  }
  return Py_BuildValue(
      "{s:I,s:I,s:O,s:O,s:O}", "major", api->header.version.major, "minor",
      api->header.version.minor, "prev_api_null",
      api->header.prev_api == NULL ? Py_True : Py_False, "int_attr_matches",
      addr == (const void *)api ? Py_True : Py_False, "all_set",
      (api->managed_tensor_allocator &&
       api->managed_tensor_from_py_object_no_sync &&
       api->managed_tensor_to_py_object_no_sync &&
       api->dltensor_from_py_object_no_sync && api->current_work_stream)
          ? Py_True
          : Py_False);
}

static PyObject *exchange_roundtrip(PyObject *self, PyObject *const *args,
                                    Py_ssize_t nargs) {
  (void)self;
  if (nargs != 2) {
    PyErr_SetString(PyExc_TypeError,
                    "exchange_roundtrip(producer_type, obj)");
    return NULL;
  }
  const DLPackExchangeAPI *api = api_of(args[0]);
  if (api == NULL) return NULL;
  DLManagedTensorVersioned *m = NULL;
  if (XAPI(api, managed_tensor_from_py_object_no_sync, args[1], &m) != 0)
    return NULL;
  void *out = NULL;
  if (XAPI(api, managed_tensor_to_py_object_no_sync, m, &out) != 0) return NULL;
  return (PyObject *)out;
}

static PyObject *exchange_flags(PyObject *self, PyObject *obj) {
  (void)self;
  const DLPackExchangeAPI *api = api_of(obj);
  if (api == NULL) return NULL;
  DLManagedTensorVersioned *m = NULL;
  if (XAPI(api, managed_tensor_from_py_object_no_sync, obj, &m) != 0)
    return NULL;
  PyObject *r = Py_BuildValue("(KII)", (unsigned long long)m->flags,
                              m->version.major, m->version.minor);
  if (m->deleter != NULL) m->deleter(m);
  return r;
}

static PyObject *exchange_view(PyObject *self, PyObject *const *args,
                               Py_ssize_t nargs) {
  (void)self;
  if (nargs != 2 && nargs != 3) {
    PyErr_SetString(PyExc_TypeError,
                    "exchange_view(producer_type, obj[, then])");
    return NULL;
  }
  const DLPackExchangeAPI *api = api_of(args[0]);
  if (api == NULL) return NULL;
  DLTensor t;
  if (XAPI(api, dltensor_from_py_object_no_sync, args[1], &t) != 0) return NULL;
  /* then() runs between taking the view and reading it: the view must
   * stay valid for as long as obj lives, whatever happens meanwhile. */
  if (nargs == 3) {
    PyObject *r = PyObject_CallNoArgs(args[2]);
    if (r == NULL) return NULL;
    Py_DECREF(r);
  }
  PyObject *shape = PyTuple_New(t.ndim), *strides = PyTuple_New(t.ndim);
  if (shape == NULL || strides == NULL) {
    Py_XDECREF(shape);
    Py_XDECREF(strides);
    return NULL;
  }
  for (int32_t i = 0; i < t.ndim; i++) {
    PyTuple_SET_ITEM(shape, i, PyLong_FromLongLong(t.shape[i]));
    PyTuple_SET_ITEM(strides, i,
                     PyLong_FromLongLong(t.strides ? t.strides[i] : 0));
  }
  return Py_BuildValue("{s:N,s:i,s:N,s:N,s:K,s:(ii),s:(iii)}", "data",
                       PyLong_FromVoidPtr(t.data), "ndim", t.ndim, "shape",
                       shape, "strides", strides, "byte_offset",
                       (unsigned long long)t.byte_offset, "device",
                       (int)t.device.device_type, (int)t.device.device_id,
                       "dtype", (int)t.dtype.code, (int)t.dtype.bits,
                       (int)t.dtype.lanes);
}

typedef struct {
  char kind[64];
  char message[256];
  int calls;
} error_sink;

static void sink_set_error(void *ctx, const char *kind, const char *message) {
  error_sink *sink = ctx;
  sink->calls++;
  PyOS_snprintf(sink->kind, sizeof sink->kind, "%s", kind);
  PyOS_snprintf(sink->message, sizeof sink->message, "%s", message);
}

/* exchange_alloc(type, shape, (code, bits, lanes), (dev_type, dev_id)):
 * the allocator, then to_py_object; an allocator failure comes back as
 * ("error", kind, message). */
static PyObject *exchange_alloc(PyObject *self, PyObject *args) {
  (void)self;
  PyObject *type, *shape_obj;
  int code, bits, lanes, dev_type, dev_id, ndim = -999;
  if (!PyArg_ParseTuple(args, "OO(iii)(ii)|i", &type, &shape_obj, &code,
                        &bits, &lanes, &dev_type, &dev_id, &ndim))
    return NULL;
  const DLPackExchangeAPI *api = api_of(type);
  if (api == NULL) return NULL;
  int64_t shape[80];
  Py_ssize_t n;
  if (parse_int64s(shape_obj, shape, 80, &n) < 0) return NULL;
  DLTensor proto;
  memset(&proto, 0, sizeof proto);
  proto.device.device_type = (DLDeviceType)dev_type;
  proto.device.device_id = dev_id;
  proto.ndim = ndim == -999 ? (int32_t)n : ndim;
  proto.dtype.code = (uint8_t)code;
  proto.dtype.bits = (uint8_t)bits;
  proto.dtype.lanes = (uint16_t)lanes;
  proto.shape = shape;
  error_sink sink = {{0}, {0}, 0};
  DLManagedTensorVersioned *m = NULL;
  if (XAPI(api, managed_tensor_allocator,
           &proto, &m, &sink, sink_set_error) != 0)
    return Py_BuildValue("(ssi)", sink.kind, sink.message, sink.calls);
  void *out = NULL;
  if (XAPI(api, managed_tensor_to_py_object_no_sync, m, &out) != 0) return NULL;
  return (PyObject *)out;
}

/* exchange_null(type, which[, obj]): one call of the table with the NULL
 * pointer which names, returning (rc, the exception raised or None), so
 * that the exact result is seen. */
static PyObject *exchange_null(PyObject *self, PyObject *args) {
  (void)self;
  PyObject *type, *obj = Py_None;
  const char *which;
  if (!PyArg_ParseTuple(args, "Os|O", &type, &which, &obj)) return NULL;
  const DLPackExchangeAPI *api = api_of(type);
  if (api == NULL) return NULL;
  DLManagedTensorVersioned *m = NULL;
  DLTensor t;
  void *p = NULL;
  int rc;
  if (strcmp(which, "alloc_prototype") == 0) {
    rc = api->managed_tensor_allocator(NULL, &m, NULL, NULL);
  } else if (strcmp(which, "alloc_out") == 0) {
    memset(&t, 0, sizeof t);
    t.device.device_type = kDLCPU;
    t.dtype.code = kDLFloat;
    t.dtype.bits = 32;
    t.dtype.lanes = 1;
    rc = api->managed_tensor_allocator(&t, NULL, NULL, NULL);
  } else if (strcmp(which, "from_py_object") == 0) {
    rc = api->managed_tensor_from_py_object_no_sync(NULL, &m);
  } else if (strcmp(which, "from_py_out") == 0) {
    rc = api->managed_tensor_from_py_object_no_sync(obj, NULL);
  } else if (strcmp(which, "to_py_tensor") == 0) {
    rc = api->managed_tensor_to_py_object_no_sync(NULL, &p);
  } else if (strcmp(which, "view_object") == 0) {
    rc = api->dltensor_from_py_object_no_sync(NULL, &t);
  } else if (strcmp(which, "view_out") == 0) {
    rc = api->dltensor_from_py_object_no_sync(obj, NULL);
  } else if (strcmp(which, "stream_out") == 0) {
    rc = api->current_work_stream(kDLCPU, 0, NULL);
  } else {
    PyErr_Format(PyExc_ValueError, "exchange_null: unknown %s", which);
    return NULL;
  }
  if (m != NULL || p != NULL) {
    PyErr_SetString(PyExc_SystemError, "exchange_null: an output was set");
    return NULL;
  }
#if PY_VERSION_HEX >= 0x030C0000
  PyObject *exc = PyErr_GetRaisedException();
#else
  PyObject *etype, *exc, *tb;
  PyErr_Fetch(&etype, &exc, &tb);
  PyErr_NormalizeException(&etype, &exc, &tb);
  Py_XDECREF(etype);
  Py_XDECREF(tb);
#endif
  return Py_BuildValue("(iN)", rc, exc != NULL ? exc : Py_NewRef(Py_None));
}

static PyObject *exchange_stream(PyObject *self, PyObject *args) {
  (void)self;
  PyObject *type;
  int dev_type, dev_id;
  if (!PyArg_ParseTuple(args, "Oii", &type, &dev_type, &dev_id)) return NULL;
  const DLPackExchangeAPI *api = api_of(type);
  if (api == NULL) return NULL;
  void *stream = (void *)1;
  if (XAPI(api, current_work_stream,
           (DLDeviceType)dev_type, dev_id, &stream) != 0)
    return NULL;
  return PyLong_FromVoidPtr(stream);
}

/* exchange_to_py(type, **make_capsule keywords): builds a helper tensor and
 * hands it to the table's to_py_object, which must steal it. */
static PyObject *exchange_to_py(PyObject *self, PyObject *args,
                                PyObject *kwargs) {
  (void)self;
  if (PyTuple_GET_SIZE(args) != 1) {
    PyErr_SetString(PyExc_TypeError, "exchange_to_py(type, **fields)");
    return NULL;
  }
  const DLPackExchangeAPI *api = api_of(PyTuple_GET_ITEM(args, 0));
  if (api == NULL) return NULL;
  helper_tensor *h = helper_new();
  if (h == NULL) return NULL;
  PyObject *empty = PyTuple_New(0);
  int rc = empty == NULL ? -1 : helper_fill(h, empty, kwargs);
  Py_XDECREF(empty);
  if (rc < 0 || h->legacy) {
    if (rc == 0) PyErr_SetString(PyExc_ValueError, "versioned only");
    helper_discard(h);
    return NULL;
  }
  void *out = NULL;
  if (XAPI(api, managed_tensor_to_py_object_no_sync, &h->m.v, &out) != 0)
    return NULL;
  return (PyObject *)out;
}

/* A producer's exchange table for tests: from_py_object takes the helper
 * capsule in obj.capsule (consuming it), and succeeds with an exception
 * left set when obj.leave_error is true (a broken producer);
 * current_work_stream reports the stream set by fake_exchange(stream), and
 * succeeds with an exception left set after fake_exchange(stream, True). */
static void *fake_stream;
static int fake_stream_leaves_error;

static int fake_from_py(void *py_object, DLManagedTensorVersioned **out) {
  PyObject *capsule = PyObject_GetAttrString(py_object, "capsule");
  if (capsule == NULL) return -1;
  DLManagedTensorVersioned *m =
      PyCapsule_GetPointer(capsule, "dltensor_versioned");
  if (m == NULL || PyCapsule_SetName(capsule, "used_dltensor_versioned") < 0) {
    Py_DECREF(capsule);
    return -1;
  }
  Py_DECREF(capsule);
  *out = m;
  PyObject *leave = PyObject_GetAttrString(py_object, "leave_error");
  if (leave == NULL) {
    PyErr_Clear();
    return 0;
  }
  int broken = PyObject_IsTrue(leave);
  Py_DECREF(leave);
  if (broken > 0) PyErr_SetString(PyExc_KeyError, "left behind");
  return 0;
}

static int fake_unsupported(void) {
  PyErr_SetString(PyExc_NotImplementedError, "not in the fake table");
  return -1;
}

static int fake_alloc(DLTensor *p, DLManagedTensorVersioned **out, void *ctx,
                      void (*set_error)(void *, const char *, const char *)) {
  (void)p;
  (void)out;
  set_error(ctx, "NotImplementedError", "not in the fake table");
  return -1;
}

static int fake_to_py(DLManagedTensorVersioned *m, void **out) {
  (void)out;
  if (m->deleter != NULL) m->deleter(m);
  return fake_unsupported();
}

static int fake_stream_of(DLDeviceType type, int32_t id, void **out) {
  (void)type;
  (void)id;
  *out = fake_stream;
  if (fake_stream_leaves_error)
    PyErr_SetString(PyExc_KeyError, "left behind by current_work_stream");
  return 0;
}

static const DLPackExchangeAPI fake_api = {
    .header = {.version = {DLPACK_MAJOR_VERSION, DLPACK_MINOR_VERSION},
               .prev_api = NULL},
    .managed_tensor_allocator = fake_alloc,
    .managed_tensor_from_py_object_no_sync = fake_from_py,
    .managed_tensor_to_py_object_no_sync = fake_to_py,
    .dltensor_from_py_object_no_sync = NULL,
    .current_work_stream = fake_stream_of,
};

static PyObject *fake_exchange(PyObject *self, PyObject *args) {
  (void)self;
  PyObject *stream;
  int leave_error = 0;
  if (!PyArg_ParseTuple(args, "O|p", &stream, &leave_error)) return NULL;
  fake_stream = PyLong_AsVoidPtr(stream);
  if (fake_stream == NULL && PyErr_Occurred()) return NULL;
  fake_stream_leaves_error = leave_error;
  return PyCapsule_New((void *)(uintptr_t)&fake_api, "dlpack_exchange_api",
                       NULL);
}

/* fake_exchange_owned(): the fake table in memory its capsule owns. When
 * the capsule dies the table is retired rather than freed (so that a use
 * after it is seen, not undefined): every function then counts a call in
 * retired_calls and fails. retired_counts() is (tables retired, calls to
 * retired tables). */
static int retired_tables, retired_calls;

static int retired_fail(void) {
  retired_calls++;
  PyErr_SetString(PyExc_RuntimeError, "a retired exchange table was called");
  return -1;
}

static int retired_from_py(void *py_object, DLManagedTensorVersioned **out) {
  (void)py_object;
  (void)out;
  return retired_fail();
}

static int retired_stream_of(DLDeviceType type, int32_t id, void **out) {
  (void)type;
  (void)id;
  (void)out;
  return retired_fail();
}

static void owned_table_retire(PyObject *capsule) {
  DLPackExchangeAPI *api =
      PyCapsule_GetPointer(capsule, "dlpack_exchange_api");
  if (api == NULL) {
    PyErr_Clear();
    return;
  }
  api->managed_tensor_from_py_object_no_sync = retired_from_py;
  api->current_work_stream = retired_stream_of;
  retired_tables++;
}

static PyObject *fake_exchange_owned(PyObject *self, PyObject *unused) {
  (void)self;
  (void)unused;
  fake_stream = NULL;
  fake_stream_leaves_error = 0;
  DLPackExchangeAPI *api = PyMem_RawMalloc(sizeof *api);
  if (api == NULL) return PyErr_NoMemory();
  memcpy(api, &fake_api, sizeof *api);
  /* Retired tables stay allocated: a test makes a few. */
  return PyCapsule_New(api, "dlpack_exchange_api", owned_table_retire);
}

static PyObject *retired_counts(PyObject *self, PyObject *unused) {
  (void)self;
  (void)unused;
  return Py_BuildValue("(ii)", retired_tables, retired_calls);
}

/* ------------------------------------------------------------------------
 * Releasing from elsewhere
 * ---------------------------------------------------------------------- */

/* Takes an owned tensor for lst[0] from its type's table and empties lst,
 * so the returned tensor holds the last reference to the data. */
static DLManagedTensorVersioned *take_last(PyObject *lst) {
  if (!PyList_Check(lst) || PyList_GET_SIZE(lst) != 1) {
    PyErr_SetString(PyExc_TypeError, "expected a list of one object");
    return NULL;
  }
  PyObject *obj = PyList_GET_ITEM(lst, 0);
  const DLPackExchangeAPI *api = api_of(obj);
  if (api == NULL) return NULL;
  DLManagedTensorVersioned *m = NULL;
  if (XAPI(api, managed_tensor_from_py_object_no_sync, obj, &m) != 0)
    return NULL;
  if (PyList_SetSlice(lst, 0, 1, NULL) < 0) {
    if (m->deleter != NULL) m->deleter(m);
    return NULL;
  }
  return m;
}

static void *release_thread(void *arg) {
  DLManagedTensorVersioned *m = arg;
  if (m->deleter != NULL) m->deleter(m);
  return NULL;
}

static PyObject *release_in_thread(PyObject *self, PyObject *lst) {
  (void)self;
  DLManagedTensorVersioned *m = take_last(lst);
  if (m == NULL) return NULL;
  pthread_t thread;
  int err;
  Py_BEGIN_ALLOW_THREADS
  err = pthread_create(&thread, NULL, release_thread, m);
  if (err == 0) pthread_join(thread, NULL);
  Py_END_ALLOW_THREADS
  if (err != 0) {
    if (m->deleter != NULL) m->deleter(m);
    PyErr_SetString(PyExc_OSError, "pthread_create failed");
    return NULL;
  }
  Py_RETURN_NONE;
}

/* release_in_thread_holding_gil(lst, ms): as release_in_thread, but this
 * thread keeps the GIL while it waits up to ms milliseconds for the other;
 * True when the release finished meanwhile (it needed no GIL), False when
 * it waited for the GIL (it then finishes once this thread lets go). */
typedef struct {
  DLManagedTensorVersioned *m;
  atomic_int done;
} timed_release;

static void *timed_release_thread(void *arg) {
  timed_release *r = arg;
  if (r->m->deleter != NULL) r->m->deleter(r->m);
  atomic_store(&r->done, 1);
  return NULL;
}

static PyObject *release_in_thread_holding_gil(PyObject *self,
                                               PyObject *args) {
  (void)self;
  PyObject *lst;
  int ms;
  if (!PyArg_ParseTuple(args, "Oi", &lst, &ms)) return NULL;
  timed_release r = {take_last(lst), 0};
  if (r.m == NULL) return NULL;
  pthread_t thread;
  if (pthread_create(&thread, NULL, timed_release_thread, &r) != 0) {
    if (r.m->deleter != NULL) r.m->deleter(r.m);
    PyErr_SetString(PyExc_OSError, "pthread_create failed");
    return NULL;
  }
  for (int waited = 0; waited < ms && !atomic_load(&r.done); waited++)
    usleep(1000);
  int finished = atomic_load(&r.done);
  Py_BEGIN_ALLOW_THREADS
  pthread_join(thread, NULL);
  Py_END_ALLOW_THREADS
  return PyBool_FromLong(finished);
}

static DLManagedTensorVersioned *at_exit_tensor;

static void release_at_exit_handler(void) {
  DLManagedTensorVersioned *m = at_exit_tensor;
  at_exit_tensor = NULL;
  if (m != NULL && m->deleter != NULL) m->deleter(m);
  static const char done[] = "released after finalization\n";
  ssize_t w = write(2, done, sizeof done - 1);
  (void)w;
}

static PyObject *release_at_exit(PyObject *self, PyObject *lst) {
  (void)self;
  if (at_exit_tensor != NULL) {
    PyErr_SetString(PyExc_RuntimeError, "release_at_exit: already armed");
    return NULL;
  }
  DLManagedTensorVersioned *m = take_last(lst);
  if (m == NULL) return NULL;
  at_exit_tensor = m;
  if (atexit(release_at_exit_handler) != 0) {
    at_exit_tensor = NULL;
    if (m->deleter != NULL) m->deleter(m);
    PyErr_SetString(PyExc_OSError, "atexit failed");
    return NULL;
  }
  Py_RETURN_NONE;
}

static PyObject *decref_with_error(PyObject *self, PyObject *lst) {
  (void)self;
  if (!PyList_Check(lst)) {
    PyErr_SetString(PyExc_TypeError, "expected a list");
    return NULL;
  }
  Py_INCREF(lst);
  PyErr_SetString(PyExc_ValueError, "kept");
  /* Drops the items with the exception pending, as unwinding does. */
  int rc = PyList_SetSlice(lst, 0, PyList_GET_SIZE(lst), NULL);
  Py_DECREF(lst);
  if (rc < 0) return NULL;
  if (!PyErr_Occurred())
    PyErr_SetString(PyExc_AssertionError,
                    "the pending exception was cleared by a destructor");
  return NULL;
}

/* get_buffer(obj, flags): PyObject_GetBuffer with exactly these flags;
 * the exporter's exception comes through unchanged. */
static PyObject *get_buffer(PyObject *self, PyObject *args) {
  (void)self;
  PyObject *obj;
  int flags;
  if (!PyArg_ParseTuple(args, "Oi", &obj, &flags)) return NULL;
  Py_buffer view;
  if (PyObject_GetBuffer(obj, &view, flags) < 0) return NULL;
  PyObject *shape = Py_None, *strides = Py_None;
  Py_INCREF(shape);
  Py_INCREF(strides);
  if (view.shape != NULL) {
    Py_DECREF(shape);
    shape = PyTuple_New(view.ndim);
    for (int i = 0; shape != NULL && i < view.ndim; i++)
      PyTuple_SET_ITEM(shape, i, PyLong_FromSsize_t(view.shape[i]));
  }
  if (view.strides != NULL) {
    Py_DECREF(strides);
    strides = PyTuple_New(view.ndim);
    for (int i = 0; strides != NULL && i < view.ndim; i++)
      PyTuple_SET_ITEM(strides, i, PyLong_FromSsize_t(view.strides[i]));
  }
  PyObject *r = Py_BuildValue(
      "{s:N,s:i,s:i,s:z,s:N,s:N,s:n,s:n,s:O}", "buf",
      PyLong_FromVoidPtr(view.buf),
      "readonly", view.readonly, "ndim", view.ndim, "format", view.format,
      "shape", shape, "strides", strides, "len", view.len, "itemsize",
      view.itemsize, "obj_is_exporter", view.obj == obj ? Py_True : Py_False);
  PyBuffer_Release(&view);
  return r;
}

/* ------------------------------------------------------------------------
 * A careless buffer exporter
 * ---------------------------------------------------------------------- */

/* careless_buffer(itemsize, format=None, shape=None, strides=None,
 * suboffsets=None, readonly=False, on_release=None): 64 bytes (zeroed)
 * exported with exactly these fields whatever the request: an exporter
 * that ignores PyBUF_FORMAT, PyBUF_WRITABLE and the rest. format None is
 * NULL (which means 'B'); shape None is one dimension of as many items as
 * fit, with strides of one item; strides None with a shape is NULL. The
 * caller keeps what the fields describe within the 64 bytes. on_release,
 * a callable, is called with no arguments each time a buffer is released
 * (as a Python __release_buffer__ would run), keeping any exception set
 * meanwhile; what it raises is reported as unraisable. on_request, a
 * callable, is called with the request's flags before each buffer is
 * given: what it raises is the exporter's refusal. */
#define CARELESS_MAX_NDIM 72

typedef struct {
  PyObject_HEAD
  Py_ssize_t itemsize;
  int ndim;
  int readonly;
  int has_format, has_strides, has_suboffsets;
  char format[32];
  Py_ssize_t shape[CARELESS_MAX_NDIM];
  Py_ssize_t strides[CARELESS_MAX_NDIM];
  Py_ssize_t suboffsets[CARELESS_MAX_NDIM];
  char data[64];
  PyObject *on_release;
  PyObject *on_request;
} careless_object;

static PyTypeObject *careless_type;

static void careless_releasebuffer(PyObject *self, Py_buffer *view) {
  (void)view;
  careless_object *c = (careless_object *)self;
  if (c->on_release == NULL) return;
  PyObject *type, *value, *tb;
  PyErr_Fetch(&type, &value, &tb);
  PyObject *r = PyObject_CallNoArgs(c->on_release);
  if (r == NULL) PyErr_WriteUnraisable(c->on_release);
  Py_XDECREF(r);
  PyErr_Restore(type, value, tb);
}

static void careless_dealloc(PyObject *self) {
  PyTypeObject *type = Py_TYPE(self);
  Py_CLEAR(((careless_object *)self)->on_release);
  Py_CLEAR(((careless_object *)self)->on_request);
  type->tp_free(self);
  Py_DECREF(type);
}

static int careless_getbuffer(PyObject *self, Py_buffer *view, int flags) {
  careless_object *c = (careless_object *)self;
  if (c->on_request != NULL) {
    PyObject *r = PyObject_CallFunction(c->on_request, "i", flags);
    if (r == NULL) return -1;
    Py_DECREF(r);
  }
  /* The length the fields make, PY_SSIZE_T_MAX past it: no consumer
   * may trust it. */
  Py_ssize_t len = c->itemsize;
  for (int i = 0; i < c->ndim; i++)
    if (__builtin_mul_overflow(len, c->shape[i], &len)) len = PY_SSIZE_T_MAX;
  view->buf = c->data;
  view->obj = self;
  Py_INCREF(self);
  view->len = len;
  view->readonly = c->readonly;
  view->itemsize = c->itemsize;
  view->format = c->has_format ? c->format : NULL;
  view->ndim = c->ndim;
  view->shape = c->shape;
  view->strides = c->has_strides ? c->strides : NULL;
  view->suboffsets = c->has_suboffsets ? c->suboffsets : NULL;
  view->internal = NULL;
  return 0;
}

static PyType_Slot careless_slots[] = {
    {Py_bf_getbuffer, (void *)careless_getbuffer},
    {Py_bf_releasebuffer, (void *)careless_releasebuffer},
    {Py_tp_dealloc, (void *)careless_dealloc},
    {0, NULL},
};

static PyType_Spec careless_spec = {
    .name = "dlbridge._testhelper.CarelessBuffer",
    .basicsize = sizeof(careless_object),
    .flags = Py_TPFLAGS_DEFAULT,
    .slots = careless_slots,
};

/* The entries of tuple t (at most CARELESS_MAX_NDIM) in out; their count,
 * or -1. */
static int careless_sizes(PyObject *t, const char *what, Py_ssize_t *out) {
  if (!PyTuple_Check(t) || PyTuple_GET_SIZE(t) > CARELESS_MAX_NDIM) {
    PyErr_Format(PyExc_ValueError, "%s is a tuple of at most %d ints", what,
                 CARELESS_MAX_NDIM);
    return -1;
  }
  for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(t); i++) {
    out[i] = PyLong_AsSsize_t(PyTuple_GET_ITEM(t, i));
    if (out[i] == -1 && PyErr_Occurred()) return -1;
  }
  return (int)PyTuple_GET_SIZE(t);
}

static PyObject *careless_buffer(PyObject *self, PyObject *args,
                                 PyObject *kwargs) {
  (void)self;
  static const char *const kw[] = {"itemsize",   "format",   "shape",
                                   "strides",    "suboffsets", "readonly",
                                   "on_release", "on_request", NULL};
  Py_ssize_t itemsize;
  const char *format = NULL;
  PyObject *shape = Py_None, *strides = Py_None, *suboffsets = Py_None,
           *on_release = Py_None, *on_request = Py_None;
  int readonly = 0;
  if (!PyArg_ParseTupleAndKeywords(args, kwargs, "n|zOOOpOO",
                                   (char **)(uintptr_t)kw, &itemsize, &format,
                                   &shape, &strides, &suboffsets, &readonly,
                                   &on_release, &on_request))
    return NULL;
  if (itemsize < -64 || itemsize > 64 ||
      (format != NULL && strlen(format) >= 32)) {
    PyErr_SetString(PyExc_ValueError,
                    "itemsize is -64 to 64, format shorter than 32");
    return NULL;
  }
  careless_object *c =
      (careless_object *)careless_type->tp_alloc(careless_type, 0);
  if (c == NULL) return NULL;
  c->itemsize = itemsize;
  c->readonly = readonly;
  c->has_format = format != NULL;
  if (format != NULL) strcpy(c->format, format);
  if (shape == Py_None) {
    c->ndim = 1;
    c->shape[0] = itemsize > 0 ? (Py_ssize_t)sizeof c->data / itemsize : 0;
    c->strides[0] = itemsize;
    c->has_strides = 1;
  } else {
    c->ndim = careless_sizes(shape, "shape", c->shape);
    c->has_strides = strides != Py_None;
    if (c->ndim < 0 ||
        (c->has_strides &&
         careless_sizes(strides, "strides", c->strides) != c->ndim)) {
      if (!PyErr_Occurred())
        PyErr_SetString(PyExc_ValueError, "strides has ndim entries");
      Py_DECREF(c);
      return NULL;
    }
  }
  c->has_suboffsets = suboffsets != Py_None;
  if (c->has_suboffsets &&
      careless_sizes(suboffsets, "suboffsets", c->suboffsets) != c->ndim) {
    if (!PyErr_Occurred())
      PyErr_SetString(PyExc_ValueError, "suboffsets has ndim entries");
    Py_DECREF(c);
    return NULL;
  }
  memset(c->data, 0, sizeof c->data);
  if (on_release != Py_None) {
    Py_INCREF(on_release);
    c->on_release = on_release;
  }
  if (on_request != Py_None) {
    Py_INCREF(on_request);
    c->on_request = on_request;
  }
  return (PyObject *)c;
}

/* ------------------------------------------------------------------------
 * The C API
 * ---------------------------------------------------------------------- */

static PyObject *capi_to_managed(PyObject *self, PyObject *args) {
  (void)self;
  PyObject *obj;
  int flags = 0;
  if (!PyArg_ParseTuple(args, "O|i", &obj, &flags)) return NULL;
  DLManagedTensorVersioned *m;
  if (DLBridge_ToManaged(obj, flags, &m) < 0) return NULL;
  PyObject *r = Py_BuildValue("{s:N,s:i,s:K,s:(II)}", "data",
                              PyLong_FromVoidPtr(m->dl_tensor.data), "ndim",
                              m->dl_tensor.ndim, "flags",
                              (unsigned long long)m->flags, "version",
                              m->version.major, m->version.minor);
  if (m->deleter != NULL) m->deleter(m);
  return r;
}

static PyObject *capi_borrow(PyObject *self, PyObject *args) {
  (void)self;
  PyObject *obj, *then = NULL;
  int flags = 0;
  if (!PyArg_ParseTuple(args, "O|iO", &obj, &flags, &then)) return NULL;
  PyObject *owner;
  const DLManagedTensorVersioned *m;
  if (DLBridge_Borrow(obj, flags, &owner, &m) < 0) return NULL;
  /* then() runs while owner is held: the borrowed struct must survive. */
  if (then != NULL) {
    PyObject *r = PyObject_CallNoArgs(then);
    if (r == NULL) {
      Py_DECREF(owner);
      return NULL;
    }
    Py_DECREF(r);
  }
  const DLTensor *t = &m->dl_tensor;
  PyObject *shape = PyTuple_New(t->ndim);
  if (shape == NULL) {
    Py_DECREF(owner);
    return NULL;
  }
  for (int32_t i = 0; i < t->ndim; i++)
    PyTuple_SET_ITEM(shape, i, PyLong_FromLongLong(t->shape[i]));
  PyObject *r = Py_BuildValue("(ONN)", owner == obj ? Py_True : Py_False,
                              PyLong_FromVoidPtr(t->data), shape);
  Py_DECREF(owner);
  return r;
}

static PyObject *capi_check(PyObject *self, PyObject *obj) {
  (void)self;
  return PyBool_FromLong(DLBridge_Check(obj));
}

/* capi_from(**make_capsule keywords, wrap_flags=0): FromManaged or, with
 * legacy=True, FromLegacy(m, wrap_flags). */
static PyObject *capi_from(PyObject *self, PyObject *args, PyObject *kwargs) {
  (void)self;
  unsigned long long wrap_flags = 0;
  PyObject *kw = kwargs != NULL ? PyDict_Copy(kwargs) : PyDict_New();
  if (kw == NULL) return NULL;
  PyObject *wf = PyDict_GetItemString(kw, "wrap_flags");
  if (wf != NULL) {
    wrap_flags = PyLong_AsUnsignedLongLong(wf);
    if (PyErr_Occurred() || PyDict_DelItemString(kw, "wrap_flags") < 0) {
      Py_DECREF(kw);
      return NULL;
    }
  }
  helper_tensor *h = helper_new();
  if (h == NULL) {
    Py_DECREF(kw);
    return NULL;
  }
  int rc = helper_fill(h, args, kw);
  Py_DECREF(kw);
  if (rc < 0) {
    helper_discard(h);
    return NULL;
  }
  if (h->legacy) return DLBridge_FromLegacy(&h->m.l, wrap_flags);
  return DLBridge_FromManaged(&h->m.v);
}

/* ------------------------------------------------------------------------
 * Allocation failure in turn
 *
 * oom_allocator() is a capsule for dlbridge._dlbridge._set_allocator: the
 * core's allocator, counting live blocks. oom_arm(n, domains) makes the
 * n-th later allocation of the chosen domains fail, once, counting only
 * allocations of the thread that armed it (other threads' allocations are
 * not the call under test), and wraps CPython's chosen domains until
 * oom_disarm(), which restores them and returns (allocations counted,
 * whether the n-th failed). The wrappers forward to the allocators they
 * replace, so blocks cross the install and restore freely.
 * ---------------------------------------------------------------------- */

enum { OOM_CORE = 1, OOM_RAW = 2, OOM_MEM = 4, OOM_OBJ = 8 };

static struct {
  atomic_int armed;
  int domains;
  long target;
  long counted;
  int failed;
  pthread_t thread;
  PyMemAllocatorEx saved[3];
  int installed;
} oom;
static atomic_long oom_live_blocks;

/* Whether this allocation of domain (an OOM_ bit) is the one to fail. */
static int oom_fails(int domain) {
  if (!atomic_load_explicit(&oom.armed, memory_order_relaxed) ||
      !(oom.domains & domain) || !pthread_equal(pthread_self(), oom.thread))
    return 0;
  if (++oom.counted < oom.target) return 0;
  oom.failed = 1;
  atomic_store(&oom.armed, 0);
  return 1;
}

static void *oom_core_alloc(void *ctx, size_t size, size_t alignment) {
  (void)ctx;
  if (oom_fails(OOM_CORE)) return NULL;
  void *p = NULL;
  if (posix_memalign(&p, alignment < sizeof(void *) ? sizeof(void *)
                                                     : alignment,
                     size) != 0)
    return NULL;
  atomic_fetch_add(&oom_live_blocks, 1);
  return p;
}

static void oom_core_free(void *ctx, void *p, size_t size, size_t alignment) {
  (void)ctx;
  (void)size;
  (void)alignment;
  atomic_fetch_sub(&oom_live_blocks, 1);
  free(p);
}

static dlb_allocator oom_core = {oom_core_alloc, oom_core_free, NULL};

static int oom_bit(void *ctx) {
  PyMemAllocatorEx *saved = ctx;
  return saved == &oom.saved[PYMEM_DOMAIN_RAW]   ? OOM_RAW
         : saved == &oom.saved[PYMEM_DOMAIN_MEM] ? OOM_MEM
                                                 : OOM_OBJ;
}

static void *oom_py_malloc(void *ctx, size_t size) {
  PyMemAllocatorEx *saved = ctx;
  if (oom_fails(oom_bit(ctx))) return NULL;
  return saved->malloc(saved->ctx, size);
}

static void *oom_py_calloc(void *ctx, size_t n, size_t size) {
  PyMemAllocatorEx *saved = ctx;
  if (oom_fails(oom_bit(ctx))) return NULL;
  return saved->calloc(saved->ctx, n, size);
}

static void *oom_py_realloc(void *ctx, void *p, size_t size) {
  PyMemAllocatorEx *saved = ctx;
  if (oom_fails(oom_bit(ctx))) return NULL;
  return saved->realloc(saved->ctx, p, size);
}

static void oom_py_free(void *ctx, void *p) {
  PyMemAllocatorEx *saved = ctx;
  saved->free(saved->ctx, p);
}

/* oom_allocator(without_free=False): the counting allocator, or one with
 * no free function, which dlb_set_allocator refuses. */
static dlb_allocator oom_no_free = {oom_core_alloc, NULL, NULL};

static PyObject *oom_allocator(PyObject *self, PyObject *args) {
  (void)self;
  int without_free = 0;
  if (!PyArg_ParseTuple(args, "|p", &without_free)) return NULL;
  return PyCapsule_New(without_free ? &oom_no_free : &oom_core,
                       "dlbridge.allocator", NULL);
}

static const PyMemAllocatorDomain oom_py_domains[3] = {
    PYMEM_DOMAIN_RAW, PYMEM_DOMAIN_MEM, PYMEM_DOMAIN_OBJ};

static void oom_restore(void) {
  if (!oom.installed) return;
  for (int i = 0; i < 3; i++)
    if (oom.domains & (OOM_RAW << i))
      PyMem_SetAllocator(oom_py_domains[i], &oom.saved[oom_py_domains[i]]);
  oom.installed = 0;
}

static PyObject *oom_arm(PyObject *self, PyObject *args) {
  (void)self;
  long n;
  int domains;
  if (!PyArg_ParseTuple(args, "li", &n, &domains)) return NULL;
  if (n < 1 || (domains & ~(OOM_CORE | OOM_RAW | OOM_MEM | OOM_OBJ))) {
    PyErr_Format(PyExc_ValueError, "oom_arm(%ld, %d): bad arguments", n,
                 domains);
    return NULL;
  }
  oom_restore();
  oom.domains = domains;
  oom.target = n;
  oom.counted = 0;
  oom.failed = 0;
  oom.thread = pthread_self();
  for (int i = 0; i < 3; i++) {
    if (!(domains & (OOM_RAW << i))) continue;
    PyMemAllocatorDomain d = oom_py_domains[i];
    PyMem_GetAllocator(d, &oom.saved[d]);
    PyMemAllocatorEx w = {&oom.saved[d], oom_py_malloc, oom_py_calloc,
                          oom_py_realloc, oom_py_free};
    PyMem_SetAllocator(d, &w);
  }
  oom.installed = 1;
  atomic_store(&oom.armed, 1);
  Py_RETURN_NONE;
}

static PyObject *oom_disarm(PyObject *self, PyObject *unused) {
  (void)self;
  (void)unused;
  atomic_store(&oom.armed, 0);
  oom_restore();
  return Py_BuildValue("(lO)", oom.counted, oom.failed ? Py_True : Py_False);
}

static PyObject *oom_live(PyObject *self, PyObject *unused) {
  (void)self;
  (void)unused;
  return PyLong_FromLong(atomic_load(&oom_live_blocks));
}

/* ------------------------------------------------------------------------
 * OldCProducer(array): a C __dlpack__ method that takes stream only, as
 * NumPy 1.x's does (max_version is a TypeError from its argument parsing),
 * and answers with array's legacy capsule. calls counts every call, the
 * refused ones included.
 * ---------------------------------------------------------------------- */

typedef struct {
  PyObject_HEAD
  PyObject *array;
  Py_ssize_t calls;
} old_c_object;

static PyTypeObject *old_c_type;

static PyObject *old_c_new(PyTypeObject *type, PyObject *args,
                           PyObject *kwargs) {
  PyObject *array;
  static const char *const kw[] = {"array", NULL};
  if (!PyArg_ParseTupleAndKeywords(args, kwargs, "O", (char **)(uintptr_t)kw,
                                   &array))
    return NULL;
  old_c_object *o = (old_c_object *)type->tp_alloc(type, 0);
  if (o == NULL) return NULL;
  Py_INCREF(array);
  o->array = array;
  return (PyObject *)o;
}

static void old_c_dealloc(PyObject *self) {
  PyTypeObject *type = Py_TYPE(self);
  Py_CLEAR(((old_c_object *)self)->array);
  type->tp_free(self);
  Py_DECREF(type);
}

static PyObject *old_c_dlpack(PyObject *self, PyObject *args,
                              PyObject *kwargs) {
  old_c_object *o = (old_c_object *)self;
  o->calls++;
  PyObject *stream = Py_None;
  static const char *const kw[] = {"stream", NULL};
  if (!PyArg_ParseTupleAndKeywords(args, kwargs, "|O", (char **)(uintptr_t)kw,
                                   &stream))
    return NULL;
  return PyObject_CallMethod(o->array, "__dlpack__", NULL);
}

static PyMethodDef old_c_methods[] = {
    {"__dlpack__", (PyCFunction)(void (*)(void))old_c_dlpack,
     METH_VARARGS | METH_KEYWORDS, NULL},
    {NULL, NULL, 0, NULL},
};

static PyMemberDef old_c_members[] = {
    {"calls", T_PYSSIZET, offsetof(old_c_object, calls), 0, NULL},
    {NULL, 0, 0, 0, NULL},
};

static PyType_Slot old_c_slots[] = {
    {Py_tp_new, (void *)old_c_new},
    {Py_tp_dealloc, (void *)old_c_dealloc},
    {Py_tp_methods, old_c_methods},
    {Py_tp_members, old_c_members},
    {0, NULL},
};

static PyType_Spec old_c_spec = {
    .name = "dlbridge._testhelper.OldCProducer",
    .basicsize = sizeof(old_c_object),
    .flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_BASETYPE,
    .slots = old_c_slots,
};

static PyMethodDef helper_methods[] = {
    {"make_capsule", (PyCFunction)(void (*)(void))make_capsule,
     METH_VARARGS | METH_KEYWORDS, NULL},
    {"counters", counters, METH_NOARGS, NULL},
    {"reset", reset, METH_NOARGS, NULL},
    {"exchange_version", exchange_version, METH_O, NULL},
    {"exchange_roundtrip", (PyCFunction)(void (*)(void))exchange_roundtrip,
     METH_FASTCALL, NULL},
    {"exchange_flags", exchange_flags, METH_O, NULL},
    {"exchange_view", (PyCFunction)(void (*)(void))exchange_view,
     METH_FASTCALL, NULL},
    {"exchange_alloc", exchange_alloc, METH_VARARGS, NULL},
    {"exchange_stream", exchange_stream, METH_VARARGS, NULL},
    {"exchange_null", exchange_null, METH_VARARGS, NULL},
    {"exchange_to_py", (PyCFunction)(void (*)(void))exchange_to_py,
     METH_VARARGS | METH_KEYWORDS, NULL},
    {"fake_exchange", fake_exchange, METH_VARARGS, NULL},
    {"fake_exchange_owned", fake_exchange_owned, METH_NOARGS, NULL},
    {"release_in_thread_holding_gil", release_in_thread_holding_gil,
     METH_VARARGS, NULL},
    {"retired_counts", retired_counts, METH_NOARGS, NULL},
    {"release_in_thread", release_in_thread, METH_O, NULL},
    {"release_at_exit", release_at_exit, METH_O, NULL},
    {"decref_with_error", decref_with_error, METH_O, NULL},
    {"get_buffer", get_buffer, METH_VARARGS, NULL},
    {"capi_to_managed", capi_to_managed, METH_VARARGS, NULL},
    {"capi_borrow", capi_borrow, METH_VARARGS, NULL},
    {"capi_check", capi_check, METH_O, NULL},
    {"capi_from", (PyCFunction)(void (*)(void))capi_from,
     METH_VARARGS | METH_KEYWORDS, NULL},
    {"oom_allocator", oom_allocator, METH_VARARGS, NULL},
    {"oom_arm", oom_arm, METH_VARARGS, NULL},
    {"oom_disarm", oom_disarm, METH_NOARGS, NULL},
    {"oom_live", oom_live, METH_NOARGS, NULL},
    {"careless_buffer", (PyCFunction)(void (*)(void))careless_buffer,
     METH_VARARGS | METH_KEYWORDS, NULL},
    {NULL, NULL, 0, NULL},
};

static int helper_exec(PyObject *module) {
  if (careless_type == NULL) {
    careless_type = (PyTypeObject *)PyType_FromSpec(&careless_spec);
    if (careless_type == NULL) return -1;
  }
  if (old_c_type == NULL) {
    old_c_type = (PyTypeObject *)PyType_FromSpec(&old_c_spec);
    if (old_c_type == NULL) return -1;
  }
  if (PyModule_AddObjectRef(module, "OldCProducer", (PyObject *)old_c_type) < 0)
    return -1;
  return import_dlbridge();
}

static PyModuleDef_Slot helper_slots[] = {
    {Py_mod_exec, (void *)helper_exec},
    {0, NULL},
};

static PyModuleDef helper_def = {
    PyModuleDef_HEAD_INIT,
    .m_name = "dlbridge._testhelper",
    .m_doc = "Hostile producers and C consumers for dlbridge's tests.",
    .m_size = 0,
    .m_methods = helper_methods,
    .m_slots = helper_slots,
};

PyMODINIT_FUNC PyInit__testhelper(void);

PyMODINIT_FUNC PyInit__testhelper(void) {
  return PyModuleDef_Init(&helper_def);
}
