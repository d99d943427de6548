/*
 * capi.c -- the C API table other extensions reach through
 * dlbridge_capi.h and import_dlbridge().
 */
#include "dlbpy.h"
#include "dlbridge_capi.h"

static int dlbpy_capi_check(PyObject *obj) {
  return obj != NULL && dlbpy_tensor_check(obj);
}

static int dlbpy_capi_require(const DLManagedTensorVersioned *mt, int flags) {
  if ((flags & DLBRIDGE_REQUIRE_WRITABLE) &&
      (mt->flags & DLPACK_FLAG_BITMASK_READ_ONLY)) {
    PyErr_SetString(PyExc_BufferError,
                    "the tensor is read-only and a writable one was required");
    return -1;
  }
  if ((flags & DLBRIDGE_REQUIRE_CPU) &&
      !dlb_device_type_cpu_accessible(mt->dl_tensor.device.device_type)) {
    PyErr_SetString(PyExc_BufferError,
                    "the tensor is in memory the CPU cannot read, and CPU "
                    "memory was required");
    return -1;
  }
  return 0;
}

static int dlbpy_capi_bad_flags(int flags, const char *fn) {
  const unsigned unknown =
      (unsigned)flags &
      ~(unsigned)(DLBRIDGE_REQUIRE_WRITABLE | DLBRIDGE_REQUIRE_CPU);
  if (unknown == 0) return 0;
  PyErr_Format(PyExc_ValueError,
               "%s: flags is 0x%x; bits 0x%x are not dlbridge C API flags", fn,
               (unsigned)flags, unknown);
  return -1;
}

static int dlbpy_capi_to_managed(PyObject *obj, int flags,
                                 DLManagedTensorVersioned **out) {
  if (obj == NULL || out == NULL) {
    PyErr_Format(PyExc_ValueError, "DLBridge_ToManaged: %s is NULL",
                 obj == NULL ? "obj" : "out");
    return -1;
  }
  if (dlbpy_capi_bad_flags(flags, "DLBridge_ToManaged") < 0) return -1;
  DLManagedTensorVersioned *mt;
  dlbpy_taken taken = {.capsule = NULL};
  if (dlbpy_tensor_check(obj)) {
    if (dlbpy_export(obj, NULL, -1, &mt) < 0) return -1;
  } else {
    /* The caller may release it on any thread: it must be ours, whose
     * foreign deleters take the GIL. */
    dlbpy_state *st = dlbpy_state_current();
    if (st == NULL ||
        dlbpy_import_tentative(st, obj, NULL, &mt, &taken) < 0)
      return -1;
    if (dlbpy_own(&mt) < 0) {
      dlbpy_release(mt);
      dlbpy_capsule_settle(&taken, 0);
      return -1;
    }
  }
  /* A capsule refused here is given back unconsumed. */
  if (dlbpy_capi_require(mt, flags) < 0) {
    dlbpy_release(mt);
    dlbpy_capsule_settle(&taken, 0);
    return -1;
  }
  /* Kept as the view: the caller may release it on any thread, so it
   * stays ours. */
  dlbpy_capsule_settle(&taken, 1);
  *out = mt;
  return 0;
}

static int dlbpy_capi_borrow(PyObject *obj, int flags, PyObject **owner,
                             const DLManagedTensorVersioned **out) {
  if (obj == NULL || owner == NULL || out == NULL) {
    PyErr_Format(PyExc_ValueError, "DLBridge_Borrow: %s is NULL",
                 obj == NULL ? "obj" : owner == NULL ? "owner" : "out");
    return -1;
  }
  if (dlbpy_capi_bad_flags(flags, "DLBridge_Borrow") < 0) return -1;
  PyObject *tensor;
  dlbpy_taken taken = {.capsule = NULL};
  if (dlbpy_tensor_check(obj)) {
    tensor = obj;
    Py_INCREF(tensor);
  } else {
    dlbpy_state *st = dlbpy_state_current();
    DLManagedTensorVersioned *mt;
    if (st == NULL ||
        dlbpy_import_tentative(st, obj, NULL, &mt, &taken) < 0)
      return -1;
    tensor = dlbpy_tensor_new(st, mt);
    if (tensor == NULL) {
      dlbpy_capsule_settle(&taken, 0);
      return -1;
    }
  }
  const DLManagedTensorVersioned *mt = ((dlbpy_tensor *)tensor)->mt;
  /* A capsule refused here is given back unconsumed. */
  if (dlbpy_capi_require(mt, flags) < 0) {
    Py_DECREF(tensor);
    dlbpy_capsule_settle(&taken, 0);
    return -1;
  }
  dlbpy_capsule_settle(&taken, 1);
  *owner = tensor;
  *out = mt;
  return 0;
}

static PyObject *dlbpy_capi_wrap(DLManagedTensorVersioned *mt) {
  dlbpy_state *st = dlbpy_state_current();
  if (st == NULL) {
    dlbpy_release(mt);
    return NULL;
  }
  return dlbpy_tensor_new(st, mt);
}

static PyObject *dlbpy_capi_from_managed(DLManagedTensorVersioned *m) {
  if (m == NULL) {
    PyErr_SetString(PyExc_ValueError, "DLBridge_FromManaged: NULL tensor");
    return NULL;
  }
  if (m->version.major != DLPACK_MAJOR_VERSION) {
    unsigned major = m->version.major, minor = m->version.minor;
    dlbpy_release(m);
    PyErr_Format(PyExc_BufferError,
                 "DLBridge_FromManaged: version is %u.%u; dlbridge reads "
                 "major version %d only",
                 major, minor, DLPACK_MAJOR_VERSION);
    return NULL;
  }
  DLManagedTensorVersioned *mt;
  dlb_status s = dlbpy_accept_versioned(m, &mt);
  if (s != DLB_OK) {
    dlbpy_raise_unless_set(s, PyExc_BufferError, "DLBridge_FromManaged");
    dlbpy_release_keeping_error(m);
    return NULL;
  }
  return dlbpy_capi_wrap(mt);
}

static PyObject *dlbpy_capi_from_legacy(DLManagedTensor *m, uint64_t flags) {
  if (m == NULL) {
    PyErr_SetString(PyExc_ValueError, "DLBridge_FromLegacy: NULL tensor");
    return NULL;
  }
  DLManagedTensorVersioned *mt = NULL;
  dlb_status s = dlbpy_adopt_legacy(m, flags, &mt);
  if (s != DLB_OK) {
    dlbpy_raise_unless_set(s, PyExc_BufferError, "DLBridge_FromLegacy");
    dlbpy_saved_error saved;
    dlbpy_error_save(&saved);
    dlb_legacy_release(m);
    dlbpy_error_restore(&saved);
    return NULL;
  }
  return dlbpy_capi_wrap(mt);
}

static const DLBridge_CAPI dlbpy_capi = {
    .version = DLBRIDGE_CAPI_VERSION,
    .size = sizeof(DLBridge_CAPI),
    .Check = dlbpy_capi_check,
    .ToManaged = dlbpy_capi_to_managed,
    .Borrow = dlbpy_capi_borrow,
    .FromManaged = dlbpy_capi_from_managed,
    .FromLegacy = dlbpy_capi_from_legacy,
};

int dlbpy_capi_add(PyObject *module) {
  /* Readers get a const table; the capsule API only takes void *. */
  PyObject *capsule = PyCapsule_New((void *)(uintptr_t)&dlbpy_capi,
                                    DLBRIDGE_CAPI_NAME, NULL);
  if (capsule == NULL) return -1;
  if (PyModule_AddObject(module, "_C_API", capsule) < 0) {
    Py_DECREF(capsule);
    return -1;
  }
  return 0;
}
