/*
 * capsule.c -- DLPack capsules (making, destroying, consuming) and the
 * guards around foreign deleters.
 *
 * A foreign producer's deleter was written for a consumer that calls it from
 * Python, holding the GIL. Once dlbridge adopts the tensor, the last release
 * can happen anywhere: in a C consumer's thread without the GIL, or at exit
 * after the interpreter is gone. So every adopted deleter runs through
 * dlbpy_call_with_gil, which restores the context it was written for, or
 * does nothing when that context no longer exists.
 */
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "dlbpy.h"

static const char dlbpy_name_versioned[] = "dltensor_versioned";
static const char dlbpy_name_legacy[] = "dltensor";
static const char dlbpy_name_used_versioned[] = "used_dltensor_versioned";
static const char dlbpy_name_used_legacy[] = "used_dltensor";

/* ------------------------------------------------------------------------
 * Running Python-facing code from anywhere
 * ---------------------------------------------------------------------- */

static void dlbpy_call_saving_error(void (*fn)(void *), void *ctx) {
  /* The common case, no exception pending, costs no fetch and restore. */
  if (!PyErr_Occurred()) {
    fn(ctx);
    if (PyErr_Occurred()) PyErr_WriteUnraisable(NULL);
    return;
  }
  dlbpy_saved_error saved;
  dlbpy_error_save(&saved);
  fn(ctx);
  dlbpy_error_restore(&saved);
}

/* Set by an atexit callback once the main interpreter's exit has begun;
 * cleared when the module is set up again (an embedder that initialises
 * Python anew). A subinterpreter's exit is not the process's. */
static atomic_int dlbpy_exit_started;

static PyObject *dlbpy_note_exit(PyObject *self, PyObject *unused) {
  (void)self;
  (void)unused;
  if (PyInterpreterState_Get() == PyInterpreterState_Main())
    atomic_store(&dlbpy_exit_started, 1);
  Py_RETURN_NONE;
}

static PyMethodDef dlbpy_note_exit_def = {
    "_dlbridge_exit_started", dlbpy_note_exit, METH_NOARGS, NULL};

int dlbpy_watch_exit(void) {
  if (PyInterpreterState_Get() == PyInterpreterState_Main())
    atomic_store(&dlbpy_exit_started, 0);
  PyObject *fn = PyCFunction_New(&dlbpy_note_exit_def, NULL);
  if (fn == NULL) return -1;
  PyObject *atexit = PyImport_ImportModule("atexit");
  PyObject *r =
      atexit != NULL ? PyObject_CallMethod(atexit, "register", "O", fn) : NULL;
  Py_XDECREF(atexit);
  Py_DECREF(fn);
  if (r == NULL) return -1;
  Py_DECREF(r);
  return 0;
}

/* Whether this thread holds the GIL: the thread state that holds it is
 * this thread's. PyGILState_Check() cannot tell once any subinterpreter
 * has existed in the process: it then answers 1 on every thread. */
static int dlbpy_holds_gil(void) {
#if PY_VERSION_HEX >= 0x030D0000
  PyThreadState *cur = PyThreadState_GetUnchecked();
#else
  PyThreadState *cur = _PyThreadState_UncheckedGet();
#endif
  return cur != NULL && cur->thread_id == PyThread_get_thread_ident();
}

void dlbpy_call_with_gil(void (*fn)(void *), void *ctx) {
  /* After Py_Finalize nothing Python-related may run; leaking is the only
   * safe choice. */
  if (!Py_IsInitialized()) return;
  if (dlbpy_holds_gil()) {
    dlbpy_call_saving_error(fn, ctx);
    return;
  }
  /* During finalization PyGILState_Ensure never returns on a thread other
   * than the one finalizing (or ends the thread). Finalization can begin
   * while a thread waits for the GIL, so waiting is refused from the start
   * of the exit on, which the atexit callbacks mark: a thread that released
   * then would wait for a GIL the exit may never give back (and hang a
   * process that joins it at exit). What it holds is left to the exit. */
  if (DLBPY_IS_FINALIZING() || atomic_load(&dlbpy_exit_started)) return;
  PyGILState_STATE gil = PyGILState_Ensure();
  dlbpy_call_saving_error(fn, ctx);
  PyGILState_Release(gil);
}

static void dlbpy_release_now(void *ctx) {
  dlb_tensor_release((DLManagedTensorVersioned *)ctx);
}

void dlbpy_release_keeping_error(DLManagedTensorVersioned *m) {
  if (m != NULL) dlbpy_call_saving_error(dlbpy_release_now, m);
}

void dlbpy_release(DLManagedTensorVersioned *m) {
  if (m == NULL) return;
  if (dlbpy_is_light(m)) dlbpy_light_release_holding_gil(m);
  /* Ours route anything Python-related through dlbpy_call_with_gil. */
  else if (dlb_tensor_is_ours(m)) m->deleter(m);
  else dlbpy_release_keeping_error(m);
}

/* ------------------------------------------------------------------------
 * Adopting foreign tensors
 * ---------------------------------------------------------------------- */

static void dlbpy_versioned_delete(void *ctx) {
  DLManagedTensorVersioned *m = ctx;
  m->deleter(m);
}

static void dlbpy_release_versioned(void *ctx) {
  dlbpy_call_with_gil(dlbpy_versioned_delete, ctx);
}

static void dlbpy_legacy_delete(void *ctx) {
  DLManagedTensor *m = ctx;
  m->deleter(m);
}

static void dlbpy_release_legacy(void *ctx) {
  dlbpy_call_with_gil(dlbpy_legacy_delete, ctx);
}

/* A tensor of ours that foreign describes, holding foreign. */
static dlb_status dlbpy_wrap_versioned(DLManagedTensorVersioned *foreign,
                                       DLManagedTensorVersioned **out) {
  /* Past the major version, dlb_tensor_wrap validates every field and
   * flag, so one validation pass is all an import costs. */
  if (foreign->version.major != DLPACK_MAJOR_VERSION)
    return dlb_managed_validate(foreign);
  /* The core gives host-type memory device_id 0, as our tensors carry. */
  return dlb_tensor_wrap(&foreign->dl_tensor, foreign->flags,
                         foreign->deleter != NULL ? dlbpy_release_versioned
                                                  : NULL,
                         foreign, out);
}

dlb_status dlbpy_adopt_versioned(DLManagedTensorVersioned *foreign,
                                 DLManagedTensorVersioned **out) {
  if (dlb_tensor_is_ours(foreign)) {
    *out = foreign;
    return DLB_OK;
  }
  return dlbpy_wrap_versioned(foreign, out);
}

/* Whether t must be wrapped to be in our form: compact strides to fill
 * in, a host device_id to normalise. */
static int dlbpy_needs_wrap(const DLTensor *t) {
  if (t->strides == NULL && t->ndim != 0) return 1;
  /* Most tensors are already on cpu:0. */
  if (t->device.device_type == kDLCPU && t->device.device_id == 0) return 0;
  DLDevice device = t->device;
  return dlb_device_normalize(&device) == DLB_OK &&
         device.device_id != t->device.device_id;
}

dlb_status dlbpy_accept_versioned(DLManagedTensorVersioned *foreign,
                                  DLManagedTensorVersioned **out) {
  /* dlbridge's own tensors come back as the consumer left them: a share
   * that still describes its source is taken as it is, one rewritten is a
   * foreign tensor; a core tensor is validated (the core bounds what it
   * reads by its own arrays). */
  if (dlbpy_is_light(foreign)) {
    const int intact = dlbpy_light_intact(foreign);
    if (intact < 0) return DLB_E_LAYOUT;
    if (intact == 0) return dlbpy_wrap_versioned(foreign, out);
    *out = foreign;
    return DLB_OK;
  }
  if (dlb_tensor_is_ours(foreign)) {
    dlb_status s = dlb_managed_validate(foreign);
    if (s != DLB_OK) return s;
    if (dlbpy_needs_wrap(&foreign->dl_tensor))
      return dlbpy_wrap_versioned(foreign, out);
    *out = foreign;
    return DLB_OK;
  }
  /* A tensor that must be wrapped is validated by the wrap alone:
   * validating it here first made every such import validate twice. A
   * device that does not normalise fails validation below. */
  if (dlbpy_needs_wrap(&foreign->dl_tensor))
    return dlbpy_wrap_versioned(foreign, out);
  dlb_status s = dlb_managed_validate(foreign);
  if (s != DLB_OK) return s;
  *out = foreign;
  return DLB_OK;
}

int dlbpy_own(DLManagedTensorVersioned **m) {
  if (dlb_tensor_is_ours(*m)) return 0;
  if (dlbpy_is_light(*m)) {
    DLManagedTensorVersioned *core;
    if (dlbpy_light_to_core(*m, &core) < 0) return -1;
    dlbpy_release(*m);
    *m = core;
    return 0;
  }
  DLManagedTensorVersioned *ours;
  dlb_status s = dlbpy_adopt_versioned(*m, &ours);
  if (s != DLB_OK) return dlbpy_fail(s, PyExc_BufferError, "DLPack tensor");
  *m = ours;
  return 0;
}

dlb_status dlbpy_adopt_legacy(DLManagedTensor *foreign, uint64_t flags,
                              DLManagedTensorVersioned **out) {
  /* Legacy structs dlbridge made go back to what they were made from:
   * wrapping them would make each round trip hold the one before. */
  if (dlbpy_is_light_legacy(foreign)) {
    /* A raised ndim must not read past the source's arrays, nor the
     * elements past its memory, and packed units cannot come back padded
     * (the core refuses the same for its own structs). */
    if (dlbpy_light_arrays_fit(&foreign->dl_tensor, foreign->manager_ctx) < 0)
      return DLB_E_LAYOUT;
    const unsigned packed = dlbpy_light_legacy_packed_bits(foreign);
    if (packed != 0 && (flags & DLPACK_FLAG_BITMASK_IS_SUBBYTE_TYPE_PADDED)) {
      PyErr_Format(PyExc_BufferError,
                   "DLPack tensor: flags has IS_SUBBYTE_TYPE_PADDED, but this "
                   "legacy tensor's %u-bit units are packed",
                   packed);
      return DLB_E_LAYOUT;
    }
    if (dlbpy_light_bounded(&foreign->dl_tensor, flags,
                            foreign->manager_ctx) < 0)
      return DLB_E_LAYOUT;
    if (dlbpy_try_light_from_legacy(foreign, flags, out)) return DLB_OK;
  }
  if (dlb_legacy_is_ours(foreign))
    return dlb_tensor_from_legacy(foreign, flags, out);
  return dlb_tensor_wrap(&foreign->dl_tensor, flags,
                         foreign->deleter != NULL ? dlbpy_release_legacy
                                                  : NULL,
                         foreign, out);
}

/* ------------------------------------------------------------------------
 * Capsules we make
 * ---------------------------------------------------------------------- */

/* The destructor calls the deleter only while the capsule is unused (a
 * consumer renames it when it takes the tensor over) and keeps an exception
 * that is being raised while the capsule dies. */
static void dlbpy_light_release_now(void *ctx) {
  dlbpy_light_release_holding_gil(ctx);
}

static void dlbpy_light_legacy_release_now(void *ctx) {
  dlbpy_light_legacy_release_holding_gil(ctx);
}

static void dlbpy_capsule_versioned_destructor(PyObject *capsule) {
  if (!PyCapsule_IsValid(capsule, dlbpy_name_versioned)) return;
  DLManagedTensorVersioned *m =
      PyCapsule_GetPointer(capsule, dlbpy_name_versioned);
  if (m->deleter == NULL) return;
  /* A destructor holds the GIL: our shares need not look for it. */
  if (dlbpy_is_light(m)) {
    dlbpy_call_saving_error(dlbpy_light_release_now, m);
    return;
  }
  dlbpy_saved_error saved;
  dlbpy_error_save(&saved);
  m->deleter(m);
  dlbpy_error_restore(&saved);
}

static void dlbpy_capsule_legacy_destructor(PyObject *capsule) {
  if (!PyCapsule_IsValid(capsule, dlbpy_name_legacy)) return;
  DLManagedTensor *m = PyCapsule_GetPointer(capsule, dlbpy_name_legacy);
  if (m->deleter == NULL) return;
  if (dlbpy_is_light_legacy(m)) {
    dlbpy_call_saving_error(dlbpy_light_legacy_release_now, m);
    return;
  }
  dlbpy_saved_error saved;
  dlbpy_error_save(&saved);
  m->deleter(m);
  dlbpy_error_restore(&saved);
}

PyObject *dlbpy_capsule_versioned(DLManagedTensorVersioned *m) {
  PyObject *capsule = PyCapsule_New(m, dlbpy_name_versioned,
                                    dlbpy_capsule_versioned_destructor);
  if (capsule == NULL) dlb_tensor_release(m);
  return capsule;
}

PyObject *dlbpy_capsule_legacy(DLManagedTensor *m) {
  PyObject *capsule =
      PyCapsule_New(m, dlbpy_name_legacy, dlbpy_capsule_legacy_destructor);
  if (capsule == NULL) dlb_legacy_release(m);
  return capsule;
}

/* ------------------------------------------------------------------------
 * Consuming capsules
 * ---------------------------------------------------------------------- */

/* The struct of a capsule named "dltensor_versioned" (name), or NULL with
 * BufferError when its major version is not ours: a different major means
 * a different struct past flags, so nothing else is touched and the
 * capsule's own destructor calls the deleter. */
static DLManagedTensorVersioned *dlbpy_versioned_of(PyObject *capsule,
                                                    const char *name) {
  DLManagedTensorVersioned *m = PyCapsule_GetPointer(capsule, name);
  if (m == NULL) return NULL;
  if (m->version.major != DLPACK_MAJOR_VERSION) {
    PyErr_Format(PyExc_BufferError,
                 "DLPack capsule: version is %u.%u; dlbridge reads major "
                 "version %d only",
                 (unsigned)m->version.major, (unsigned)m->version.minor,
                 DLPACK_MAJOR_VERSION);
    return NULL;
  }
  return m;
}

/* -1 with BufferError when a share of ours (ctx its dlbpy_light) was moved
 * past its source's arrays or memory, which the import refuses before
 * anything reads it; else 0. */
static int dlbpy_light_peek(const DLTensor *t, uint64_t flags,
                            const void *ctx) {
  return dlbpy_light_arrays_fit(t, ctx) < 0 ||
                 dlbpy_light_bounded(t, flags, ctx) < 0
             ? -1
             : 0;
}

int dlbpy_capsule_peek(PyObject *obj, const DLTensor **t) {
  if (!PyCapsule_CheckExact(obj)) return 0;
  const char *name = PyCapsule_GetName(obj);
  if (name == NULL) return PyErr_Occurred() ? -1 : 0;
  dlb_status s = DLB_OK;
  const DLTensor *found = NULL;
  if (strcmp(name, dlbpy_name_versioned) == 0) {
    const DLManagedTensorVersioned *m = dlbpy_versioned_of(obj, name);
    if (m == NULL) return -1;
    /* The core's own structs are bounded by its validation. */
    if (dlbpy_is_light(m) &&
        dlbpy_light_peek(&m->dl_tensor, m->flags, m->manager_ctx) < 0)
      return -1;
    s = dlb_managed_validate(m);
    found = &m->dl_tensor;
  } else if (strcmp(name, dlbpy_name_legacy) == 0) {
    const DLManagedTensor *m = PyCapsule_GetPointer(obj, name);
    if (m == NULL) return -1;
    if (dlbpy_is_light_legacy(m) &&
        dlbpy_light_peek(&m->dl_tensor, 0, m->manager_ctx) < 0)
      return -1;
    s = dlb_legacy_validate(m);
    found = &m->dl_tensor;
  } else {
    return 0;
  }
  if (s != DLB_OK) return dlbpy_fail(s, PyExc_BufferError, "DLPack capsule");
  *t = found;
  return 1;
}

int dlbpy_capsule_consume(PyObject *capsule, PyObject *bad_name_exc,
                          DLManagedTensorVersioned **out) {
  const char *name = PyCapsule_GetName(capsule);
  if (name == NULL && PyErr_Occurred()) return -1;
  if (name != NULL && strcmp(name, dlbpy_name_versioned) == 0) {
    DLManagedTensorVersioned *m = dlbpy_versioned_of(capsule, name);
    if (m == NULL) return -1;
    /* Renamed before the tensor is taken: once *out owns it, a failing
     * rename would leave the capsule's destructor calling its deleter too.
     * A refused tensor gets the producer's own name pointer back, so that
     * destructor frees it. */
    if (PyCapsule_SetName(capsule, dlbpy_name_used_versioned) < 0) return -1;
    dlb_status s = dlbpy_accept_versioned(m, out);
    if (s != DLB_OK) {
      dlbpy_raise_unless_set(s, PyExc_BufferError, "DLPack capsule");
      dlbpy_saved_error saved;
      dlbpy_error_save(&saved);
      (void)PyCapsule_SetName(capsule, name);
      dlbpy_error_restore(&saved);
      return -1;
    }
    return 0;
  }
  if (name != NULL && strcmp(name, dlbpy_name_legacy) == 0) {
    DLManagedTensor *m = PyCapsule_GetPointer(capsule, name);
    if (m == NULL) return -1;
    if (PyCapsule_SetName(capsule, dlbpy_name_used_legacy) < 0) return -1;
    /* The legacy struct says nothing about writability: the data is read
     * only, as NumPy imports it, so no export of it offers writes its
     * producer never did. One dlbridge made is the exception: only a
     * writable tensor gets a legacy struct, so a round trip through one
     * keeps what its producer offered. */
    uint64_t flags = dlbpy_is_light_legacy(m) || dlb_legacy_is_ours(m)
                         ? 0
                         : DLPACK_FLAG_BITMASK_READ_ONLY;
    dlb_status s = dlbpy_adopt_legacy(m, flags, out);
    if (s != DLB_OK) {
      dlbpy_raise_unless_set(s, PyExc_BufferError, "DLPack capsule (legacy)");
      dlbpy_saved_error saved;
      dlbpy_error_save(&saved);
      (void)PyCapsule_SetName(capsule, name);
      dlbpy_error_restore(&saved);
      return -1;
    }
    return 0;
  }
  if (name != NULL && (strcmp(name, dlbpy_name_used_versioned) == 0 ||
                       strcmp(name, dlbpy_name_used_legacy) == 0)) {
    PyErr_Format(PyExc_BufferError,
                 "DLPack capsule '%s' was already consumed; a capsule can be "
                 "consumed only once",
                 name);
    return -1;
  }
  PyErr_Format(bad_name_exc,
               "capsule named '%s' is not a DLPack capsule (expected "
               "'dltensor' or 'dltensor_versioned')",
               name != NULL ? name : "(null)");
  return -1;
}

/* ------------------------------------------------------------------------
 * Taking capsules tentatively
 * ---------------------------------------------------------------------- */

/* What a tentatively taken capsule's struct waits on: the view wrapping it
 * holds one reference, the taker another. The struct's deleter runs when
 * both are gone, unless the taker gave the capsule back first. */
struct dlbpy_claim {
  atomic_int refs;
  void *raw; /* the capsule's struct; NULL once given back */
  int legacy;
};

static void dlbpy_claim_delete_now(void *ctx) {
  dlbpy_claim *claim = ctx;
  if (claim->legacy) {
    DLManagedTensor *m = claim->raw;
    if (dlbpy_is_light_legacy(m)) dlbpy_light_legacy_release_holding_gil(m);
    else if (m->deleter != NULL) m->deleter(m);
  } else {
    DLManagedTensorVersioned *m = claim->raw;
    if (dlbpy_is_light(m)) dlbpy_light_release_holding_gil(m);
    else if (m->deleter != NULL) m->deleter(m);
  }
}

/* Any thread: the view's last release can happen anywhere. */
static void dlbpy_claim_unref(void *ctx) {
  dlbpy_claim *claim = ctx;
  if (atomic_fetch_sub(&claim->refs, 1) != 1) return;
  if (claim->raw != NULL) dlbpy_call_with_gil(dlbpy_claim_delete_now, claim);
  free(claim);
}

int dlbpy_capsule_take(PyObject *capsule, PyObject *bad_name_exc,
                       dlbpy_taken *taken, DLManagedTensorVersioned **view) {
  taken->capsule = NULL;
  const char *name = PyCapsule_GetName(capsule);
  if (name == NULL && PyErr_Occurred()) return -1;
  int legacy;
  if (name != NULL && strcmp(name, dlbpy_name_versioned) == 0) legacy = 0;
  else if (name != NULL && strcmp(name, dlbpy_name_legacy) == 0) legacy = 1;
  else {
    /* A used capsule, or no DLPack one: consuming reports which, and
     * takes nothing. */
    DLManagedTensorVersioned *none;
    (void)dlbpy_capsule_consume(capsule, bad_name_exc, &none);
    return -1;
  }
  const DLTensor *t;
  void *raw;
  uint64_t flags;
  if (legacy) {
    DLManagedTensor *m = PyCapsule_GetPointer(capsule, name);
    if (m == NULL) return -1;
    if (dlbpy_is_light_legacy(m) &&
        dlbpy_light_peek(&m->dl_tensor, 0, m->manager_ctx) < 0)
      return -1;
    /* As dlbpy_capsule_consume reads writability. */
    flags = dlbpy_is_light_legacy(m) || dlb_legacy_is_ours(m)
                ? 0
                : DLPACK_FLAG_BITMASK_READ_ONLY;
    t = &m->dl_tensor;
    raw = m;
  } else {
    DLManagedTensorVersioned *m = dlbpy_versioned_of(capsule, name);
    if (m == NULL) return -1;
    /* A share of ours as its import judges it: one that still describes
     * its source gets the source's flags (never IS_COPIED: it shares the
     * source's data). */
    if (dlbpy_is_light(m) && dlbpy_light_intact(m) < 0) return -1;
    flags = m->flags;
    t = &m->dl_tensor;
    raw = m;
  }
  dlbpy_claim *claim = malloc(sizeof *claim);
  if (claim == NULL) {
    PyErr_NoMemory();
    return -1;
  }
  atomic_init(&claim->refs, 2);
  claim->raw = raw;
  claim->legacy = legacy;
  /* Renamed first, as a consumer does: nobody else can take it while the
   * caller works without the GIL. */
  if (PyCapsule_SetName(capsule, legacy ? dlbpy_name_used_legacy
                                        : dlbpy_name_used_versioned) < 0) {
    free(claim);
    return -1;
  }
  /* The wrap validates every field as an import does. */
  dlb_status s = dlb_tensor_wrap(t, flags, dlbpy_claim_unref, claim, view);
  if (s != DLB_OK) {
    dlbpy_raise_unless_set(s, PyExc_BufferError,
                           legacy ? "DLPack capsule (legacy)"
                                  : "DLPack capsule");
    dlbpy_saved_error saved;
    dlbpy_error_save(&saved);
    (void)PyCapsule_SetName(capsule, name);
    dlbpy_error_restore(&saved);
    free(claim);
    return -1;
  }
  taken->capsule = capsule;
  taken->name = name;
  taken->claim = claim;
  taken->view = *view;
  taken->device = (*view)->dl_tensor.device;
  taken->flags = flags;
  return 1;
}

void dlbpy_capsule_settle(dlbpy_taken *taken, int keep) {
  if (taken->capsule == NULL) return;
  dlbpy_claim *claim = taken->claim;
  PyObject *capsule = taken->capsule;
  taken->capsule = NULL;
  /* Given back only when nothing uses the struct any more (every tensor
   * made from the view is gone); else the import stands. */
  if (!keep && atomic_load(&claim->refs) == 1) {
    claim->raw = NULL;
    dlbpy_claim_unref(claim);
    dlbpy_saved_error saved;
    dlbpy_error_save(&saved);
    (void)PyCapsule_SetName(capsule, taken->name);
    dlbpy_error_restore(&saved);
    return;
  }
  dlbpy_claim_unref(claim);
}

void dlbpy_capsule_settle_result(dlbpy_taken *taken,
                                 DLManagedTensorVersioned **mt) {
  if (taken->capsule == NULL) return;
  dlbpy_claim *claim = taken->claim;
  DLManagedTensorVersioned *view = *mt;
  if (view == taken->view && claim->raw != NULL &&
      dlb_device_equal(view->dl_tensor.device, taken->device)) {
    DLManagedTensorVersioned *accepted = NULL;
    dlb_status s =
        claim->legacy
            ? dlbpy_adopt_legacy(claim->raw, taken->flags, &accepted)
            : dlbpy_accept_versioned(claim->raw, &accepted);
    if (s == DLB_OK) {
      /* The accepted tensor owns the struct now: the view lets go of it
       * without its deleter. */
      claim->raw = NULL;
      taken->capsule = NULL;
      *mt = accepted;
      dlb_tensor_release(view);
      dlbpy_claim_unref(claim);
      return;
    }
    /* Nothing was taken over: the view still serves. */
    if (PyErr_Occurred()) PyErr_Clear();
  }
  dlbpy_capsule_settle(taken, 1);
}
