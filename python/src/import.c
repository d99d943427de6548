/*
 * import.c -- from_dlpack: the consumer side of the Python protocol.
 *
 * A producer is reached by the fastest route it offers: its type's C
 * exchange table (one C call, no capsule), else __dlpack__ asking for the
 * versioned struct, else __dlpack__ with no keywords for producers older
 * than max_version. What works is remembered per producer type, so an old
 * producer costs one TypeError per type, not one per call.
 */
#include <string.h>

#include "dlbpy.h"

/* ------------------------------------------------------------------------
 * The per-type cache
 * ---------------------------------------------------------------------- */

/* A copy of an entry, taken before calling the producer: its code may
 * re-enter from_dlpack and recycle the slot. */
typedef struct {
  const DLPackExchangeAPI *api;
  /* A new reference to the capsule that keeps api alive, or NULL: the
   * producer's code can drop the entry's reference meanwhile. */
  PyObject *api_owner;
  PyObject *method; /* a new reference, or NULL */
  /* A new reference to the method the legacy form was learned for, when
   * the object's own look-up may find another (an instance attribute),
   * else NULL. */
  PyObject *learned_for;
  dlbpy_call_form form;
} dlbpy_route;

static bool dlbpy_tag_valid(PyTypeObject *type, unsigned int tag) {
#if PY_VERSION_HEX < 0x030B0000
  /* Before 3.11 a modified type keeps its stale tag and drops this flag. */
  if (!PyType_HasFeature(type, Py_TPFLAGS_VALID_VERSION_TAG)) return false;
#endif
  return tag != 0 && type->tp_version_tag == tag;
}

static dlbpy_type_entry *dlbpy_cache_find(dlbpy_state *st,
                                          PyTypeObject *type) {
  for (int i = 0; i < DLBPY_CACHE_SIZE; i++)
    if (st->cache[i].type == type) return &st->cache[i];
  return NULL;
}

/* Looks up type's exchange table: a capsule named "dlpack_exchange_api"
 * holding a major-1 table. The 1.2 int attribute __c_dlpack_exchange_api__
 * is not read: any class can hold an int, and dereferencing it would turn a
 * typo into a crash. */
static int dlbpy_lookup_api(dlbpy_state *st, PyTypeObject *type,
                            const DLPackExchangeAPI **api, PyObject **owner) {
  *api = NULL;
  *owner = NULL;
  PyObject *capsule = PyObject_GetAttr((PyObject *)type, st->s_exchange_api);
  if (capsule == NULL) {
    if (!PyErr_ExceptionMatches(PyExc_AttributeError)) return -1;
    PyErr_Clear();
    return 0;
  }
  if (PyCapsule_IsValid(capsule, "dlpack_exchange_api")) {
    const DLPackExchangeAPI *table =
        PyCapsule_GetPointer(capsule, "dlpack_exchange_api");
    if (table->header.version.major == DLPACK_MAJOR_VERSION &&
        table->managed_tensor_from_py_object_no_sync != NULL) {
      *api = table;
      *owner = capsule;
      return 0;
    }
  }
  Py_DECREF(capsule);
  return 0;
}

/* The descriptor the type's MRO holds under __dlpack__ (NULL when none),
 * and whether calling it with the object first is exactly
 * x.__dlpack__(...). The MRO is read without the metaclass, as the
 * instance's look-up reads it: a metaclass's __dlpack__ is the class's,
 * not its instances'. */
static PyObject *dlbpy_lookup_method(dlbpy_state *st, PyTypeObject *type,
                                     int *direct) {
  PyObject *method = _PyType_Lookup(type, st->s_dlpack);
  Py_XINCREF(method);
  /* A staticmethod or classmethod is neither, and binds otherwise. */
  *direct = method != NULL && type->tp_dictoffset == 0 &&
            type->tp_getattro == PyObject_GenericGetAttr &&
            (PyFunction_Check(method) ||
             Py_IS_TYPE(method, &PyMethodDescr_Type));
  return method;
}

/* 1 when method, what a type's MRO holds under __dlpack__, answers a
 * max_version keyword alike whatever the object it is called for: a
 * function with neither that parameter nor **kwargs (TypeError), or a C
 * method, whose keywords its type's C code reads (NumPy 1.x's takes stream
 * only); 0 when it may pass its keywords on (**kwargs) or cannot be told (a
 * staticmethod, a callable object, nothing in the MRO), -1 with an
 * exception set. */
static int dlbpy_cannot_take_max_version(PyObject *method) {
  if (method == NULL) return 0;
  if (Py_IS_TYPE(method, &PyMethodDescr_Type)) return 1;
  if (!PyFunction_Check(method)) return 0;
  PyCodeObject *code = (PyCodeObject *)PyFunction_GET_CODE(method);
  if (code->co_flags & CO_VARKEYWORDS) return 0;
  PyObject *names = PyObject_GetAttrString((PyObject *)code, "co_varnames");
  if (names == NULL) return -1;
  int old = 1;
  /* The parameters a keyword can name: past the positional-only ones. */
  Py_ssize_t end = (Py_ssize_t)code->co_argcount + code->co_kwonlyargcount;
  for (Py_ssize_t i = code->co_posonlyargcount;
       old && PyTuple_Check(names) && i < end && i < PyTuple_GET_SIZE(names);
       i++) {
    PyObject *name = PyTuple_GET_ITEM(names, i);
    if (PyUnicode_Check(name) &&
        PyUnicode_CompareWithASCIIString(name, "max_version") == 0)
      old = 0;
  }
  Py_DECREF(names);
  return old;
}

/* 1 when the entry still describes type: neither it nor its metaclass
 * changed since. */
static int dlbpy_entry_valid(const dlbpy_type_entry *e, PyTypeObject *type) {
  if (!dlbpy_tag_valid(type, e->tag)) return 0;
  PyTypeObject *meta = Py_TYPE(type);
  return meta == &PyType_Type || dlbpy_tag_valid(meta, e->meta_tag);
}

/* The route of a valid entry, with references of its own. */
static inline void dlbpy_route_of_entry(const dlbpy_type_entry *e,
                                        dlbpy_route *route) {
  route->api = e->api;
  route->api_owner = e->api != NULL ? e->api_owner : NULL;
  Py_XINCREF(route->api_owner);
  route->method = e->direct ? e->method : NULL;
  Py_XINCREF(route->method);
  route->learned_for =
      !e->direct && e->form == DLBPY_FORM_LEGACY ? e->method : NULL;
  Py_XINCREF(route->learned_for);
  route->form = e->form;
}

/* The slow path of dlbpy_route_for: the entry made or renewed, for a type
 * not seen or changed since. Two kinds of Python code run meanwhile. The
 * look-ups run the producer's (a metaclass's __getattr__, a descriptor),
 * which may give obj another class and so drop the last reference to
 * type but the one held here. And the entry's old values, dropped, may
 * run finalizers that import again (and renew this very entry): so the
 * entry is written whole and the route copied from it before anything
 * it held goes. */
__attribute__((noinline)) static int dlbpy_route_renew(dlbpy_state *st,
                                                       PyTypeObject *type,
                                                       dlbpy_route *route) {
  Py_INCREF(type);
  PyObject *dropped[3] = {NULL, NULL, NULL};
  const DLPackExchangeAPI *api;
  PyObject *owner;
  if (dlbpy_lookup_api(st, type, &api, &owner) < 0) {
    Py_DECREF(type);
    return -1;
  }
  int direct;
  PyObject *method = dlbpy_lookup_method(st, type, &direct);
  int old_only = dlbpy_cannot_take_max_version(method);
  if (old_only < 0) {
    Py_XDECREF(method);
    Py_XDECREF(owner);
    Py_DECREF(type);
    return -1;
  }
  /* The lookups may have run Python code that changed the cache. */
  dlbpy_type_entry *e = dlbpy_cache_find(st, type);
  if (e == NULL) {
    e = &st->cache[st->cache_next];
    st->cache_next = (st->cache_next + 1) % DLBPY_CACHE_SIZE;
    Py_INCREF(type);
    dropped[0] = (PyObject *)e->type;
    e->type = type;
    e->form = DLBPY_FORM_UNKNOWN;
  } else if (e->method != method ||
             (e->form == DLBPY_FORM_LEGACY && !old_only)) {
    e->form = DLBPY_FORM_UNKNOWN;
  }
  dropped[1] = e->api_owner;
  e->api_owner = owner;
  dropped[2] = e->method;
  e->method = method;
  e->api = api;
  e->direct = direct;
  e->old_only = old_only;
  /* The attribute lookups gave the type and its metaclass a tag if they
   * had none. */
  e->tag = type->tp_version_tag;
  e->meta_tag = Py_TYPE(type)->tp_version_tag;
  dlbpy_route_of_entry(e, route);
  for (int i = 0; i < 3; i++) Py_XDECREF(dropped[i]);
  Py_DECREF(type);
  return 0;
}

/* The route for type, from its cache entry, renewed first when the type
 * changed since it was made. */
static int dlbpy_route_for(dlbpy_state *st, PyTypeObject *type,
                           dlbpy_route *route) {
  /* A valid entry runs no Python code: nothing to hold. */
  const dlbpy_type_entry *e = dlbpy_cache_find(st, type);
  if (e != NULL && dlbpy_entry_valid(e, type)) {
    dlbpy_route_of_entry(e, route);
    return 0;
  }
  return dlbpy_route_renew(st, type, route);
}

/* The legacy form is learned only for a method that cannot take
 * max_version (see old_only): one that may, answering without it, may
 * have been a proxy of an old producer, and its type fronts new ones too. */
static void dlbpy_remember_form(dlbpy_state *st, PyTypeObject *type,
                                dlbpy_call_form form) {
  dlbpy_type_entry *e = dlbpy_cache_find(st, type);
  if (e != NULL && (form != DLBPY_FORM_LEGACY || e->old_only)) e->form = form;
}

/* ------------------------------------------------------------------------
 * Getting the struct
 * ---------------------------------------------------------------------- */

static PyObject *dlbpy_vectorcall_dlpack(dlbpy_state *st, PyObject *method,
                                         PyObject **args, size_t nargsf,
                                         PyObject *kwnames) {
  if (method != NULL)
    return PyObject_Vectorcall(method, args, nargsf, kwnames);
  return PyObject_VectorcallMethod(st->s_dlpack, args, nargsf, kwnames);
}

static PyObject *dlbpy_call_form_of(dlbpy_state *st, PyObject *obj,
                                    const dlbpy_route *route, int with_stream,
                                    dlbpy_call_form form) {
  PyObject *args[4] = {NULL, obj, st->max_version, Py_None};
  size_t nargsf = 1 | PY_VECTORCALL_ARGUMENTS_OFFSET;
  if (form == DLBPY_FORM_VERSIONED)
    return dlbpy_vectorcall_dlpack(st, route->method, &args[1], nargsf,
                                   with_stream ? st->kw_mv_stream : st->kw_mv);
  /* The old form: no max_version, and stream positional-or-keyword. */
  args[2] = Py_None;
  return dlbpy_vectorcall_dlpack(st, route->method, &args[1], nargsf,
                                 with_stream ? st->kw_stream : NULL);
}

/* What the caller of from_dlpack asked for that the 2023.12 protocol lets
 * a producer do itself: __dlpack__(dl_device=..., copy=...). */
typedef struct {
  int has_device; /* pass dl_device=device */
  DLDevice device;
  int copy; /* -1: pass no copy=, else copy=bool(copy) */
} dlbpy_ask;

static void dlbpy_device_name(DLDevice d, char *buf, size_t size);

/* __dlpack__(max_version=..., [stream=None,] [dl_device=...,] [copy=...]).
 * A slow path (the caller gave keywords): the names are made per call. */
static PyObject *dlbpy_call_asking(dlbpy_state *st, PyObject *obj,
                                   const dlbpy_route *route, int with_stream,
                                   const dlbpy_ask *ask) {
  PyObject *args[6] = {NULL, obj, st->max_version, NULL, NULL, NULL};
  const char *names[4] = {"max_version", NULL, NULL, NULL};
  Py_ssize_t nkw = 1;
  PyObject *dl_device = NULL;
  if (with_stream) {
    names[nkw] = "stream";
    args[2 + nkw++] = Py_None;
  }
  if (ask->has_device) {
    dl_device = Py_BuildValue("(ii)", (int)ask->device.device_type,
                              (int)ask->device.device_id);
    if (dl_device == NULL) return NULL;
    names[nkw] = "dl_device";
    args[2 + nkw++] = dl_device;
  }
  if (ask->copy >= 0) {
    names[nkw] = "copy";
    args[2 + nkw++] = ask->copy ? Py_True : Py_False;
  }
  PyObject *capsule = NULL;
  PyObject *kwnames = PyTuple_New(nkw);
  for (Py_ssize_t i = 0; kwnames != NULL && i < nkw; i++) {
    PyObject *name = PyUnicode_InternFromString(names[i]);
    if (name == NULL) Py_CLEAR(kwnames);
    else PyTuple_SET_ITEM(kwnames, i, name);
  }
  if (kwnames != NULL) {
    capsule = dlbpy_vectorcall_dlpack(
        st, route->method, &args[1], 1 | PY_VECTORCALL_ARGUMENTS_OFFSET,
        kwnames);
    Py_DECREF(kwnames);
  }
  Py_XDECREF(dl_device);
  return capsule;
}

/* After __dlpack__ failed with the caller's dl_device and copy: 0 (the
 * error cleared) when it is asked again without them, and dlbridge moves
 * or copies the data itself as for an older producer; -1 to report the
 * failure. A TypeError says the keywords are not known. A BufferError is
 * the producer's refusal: with copy=False it is final, and raised as the
 * ValueError the standard gives from_dlpack when only a copy would do (the
 * producer's error its __cause__), as dlbridge's own refusal is; else
 * dlbridge can still do what the producer could not. */
static int dlbpy_ask_refused(PyObject *obj, const dlbpy_ask *ask) {
  if (PyErr_ExceptionMatches(PyExc_TypeError)) {
    PyErr_Clear();
    return 0;
  }
  if (!PyErr_ExceptionMatches(PyExc_BufferError)) return -1;
  if (ask->copy != 0) {
    PyErr_Clear();
    return 0;
  }
  dlbpy_saved_error refusal;
  dlbpy_error_save(&refusal);
#if PY_VERSION_HEX >= 0x030C0000
  PyObject *cause = refusal.exc;
#else
  PyErr_NormalizeException(&refusal.type, &refusal.value, &refusal.tb);
  if (refusal.tb != NULL && refusal.value != NULL)
    PyException_SetTraceback(refusal.value, refusal.tb);
  PyObject *cause = refusal.value;
#endif
  char where[DLB_DEVICE_NAME_MAX + 8] = "";
  if (ask->has_device) {
    char name[DLB_DEVICE_NAME_MAX];
    dlbpy_device_name(ask->device, name, sizeof name);
    PyOS_snprintf(where, sizeof where, " on %s", name);
  }
  PyErr_Format(PyExc_ValueError,
               "copy=False, but %.100s.__dlpack__ refused to give the data%s "
               "without a copy: %S",
               Py_TYPE(obj)->tp_name, where,
               cause != NULL ? cause : Py_None);
  if (cause != NULL) {
    dlbpy_saved_error raised;
    dlbpy_error_save(&raised);
#if PY_VERSION_HEX >= 0x030C0000
    PyObject *exc = raised.exc;
#else
    PyErr_NormalizeException(&raised.type, &raised.value, &raised.tb);
    PyObject *exc = raised.value;
#endif
    if (exc != NULL) {
      Py_INCREF(cause);
      PyException_SetCause(exc, cause);
    }
    dlbpy_error_restore(&raised);
  }
  dlbpy_error_discard(&refusal);
  return -1;
}

/* 1 when obj.__dlpack__ is method (what obj's type's MRO holds) bound to
 * obj, 0 when the look-up finds something else (an instance attribute,
 * what __getattribute__ gives) or nothing, -1 with an exception set. */
static int dlbpy_finds_method(dlbpy_state *st, PyObject *obj,
                              PyObject *method) {
  PyObject *found = NULL;
  int rc = DLBPY_GET_OPTIONAL_ATTR(obj, st->s_dlpack, &found);
  if (rc <= 0) return rc;
  int same = 0;
  if (PyMethod_Check(found))
    same = PyMethod_GET_FUNCTION(found) == method &&
           PyMethod_GET_SELF(found) == obj;
  else if (PyCFunction_Check(found) &&
           Py_IS_TYPE(method, &PyMethodDescr_Type))
    same = PyCFunction_GET_SELF(found) == obj &&
           ((PyCFunctionObject *)found)->m_ml ==
               ((PyMethodDescrObject *)method)->d_method;
  Py_DECREF(found);
  return same;
}

/* Calls __dlpack__ and returns the capsule. with_stream passes stream=None
 * explicitly: PyTorch reads a missing stream as -1 (no synchronisation),
 * not as the standard's None (the default stream), which device memory
 * needs.
 *
 * The form a type answered to only says which call to try first: one type
 * (a proxy forwarding its keywords) can front old and new producers alike,
 * and a TypeError may be a producer's own. So a failed max_version call is
 * retried without it on TypeError, as the standard asks, and a failed
 * keyword-less call, on any error, with max_version (a versioned-only
 * producer, or read-only data the old struct cannot carry). A type learns
 * the form that answered when the first try failed and the other worked,
 * except that a type known to take max_version keeps it. */
static PyObject *dlbpy_call_dlpack(dlbpy_state *st, PyObject *obj,
                                   const dlbpy_route *route, int with_stream,
                                   const dlbpy_ask *ask) {
  dlbpy_call_form known = route->form;
  /* The legacy form was learned for the method in the type's MRO: an
   * object whose own look-up finds another __dlpack__ (an instance
   * attribute), which may take max_version, is asked as the standard
   * says, and teaches its type nothing. */
  int learn = 1;
  if (known == DLBPY_FORM_LEGACY && route->learned_for != NULL) {
    int same = dlbpy_finds_method(st, obj, route->learned_for);
    if (same < 0) return NULL;
    if (!same) {
      known = DLBPY_FORM_UNKNOWN;
      learn = 0;
    }
  }
  dlbpy_call_form first =
      known == DLBPY_FORM_LEGACY ? DLBPY_FORM_LEGACY : DLBPY_FORM_VERSIONED;
  /* The caller's dl_device and copy go to a producer of the 2023.12
   * protocol (the one that takes max_version), before the plain calls. A
   * producer known to be older is not asked. */
  if (ask != NULL && first == DLBPY_FORM_VERSIONED) {
    PyObject *asked = dlbpy_call_asking(st, obj, route, with_stream, ask);
    if (asked != NULL) {
      if (learn && known == DLBPY_FORM_UNKNOWN)
        dlbpy_remember_form(st, Py_TYPE(obj), DLBPY_FORM_VERSIONED);
      return asked;
    }
    if (dlbpy_ask_refused(obj, ask) < 0) return NULL;
  }
  PyObject *capsule = dlbpy_call_form_of(st, obj, route, with_stream, first);
  if (capsule != NULL) {
    if (learn && known == DLBPY_FORM_UNKNOWN)
      dlbpy_remember_form(st, Py_TYPE(obj), first);
    return capsule;
  }
  if (first == DLBPY_FORM_VERSIONED) {
    if (!PyErr_ExceptionMatches(PyExc_TypeError)) return NULL;
    PyErr_Clear();
    capsule = dlbpy_call_form_of(st, obj, route, with_stream,
                                 DLBPY_FORM_LEGACY);
    if (capsule != NULL && learn && known == DLBPY_FORM_UNKNOWN)
      dlbpy_remember_form(st, Py_TYPE(obj), DLBPY_FORM_LEGACY);
    return capsule;
  }
  if (!PyErr_ExceptionMatches(PyExc_Exception)) return NULL;
  dlbpy_saved_error old_answer;
  dlbpy_error_save(&old_answer);
  capsule = dlbpy_call_form_of(st, obj, route, with_stream,
                               DLBPY_FORM_VERSIONED);
  if (capsule != NULL) {
    dlbpy_error_discard(&old_answer);
    dlbpy_remember_form(st, Py_TYPE(obj), DLBPY_FORM_VERSIONED);
    return capsule;
  }
  /* A TypeError says the producer is old after all: its first answer is
   * the one to report. */
  if (PyErr_ExceptionMatches(PyExc_TypeError)) {
    PyErr_Clear();
    dlbpy_error_restore(&old_answer);
  } else {
    dlbpy_error_discard(&old_answer);
  }
  return NULL;
}

static int dlbpy_import_capsule_of(dlbpy_state *st, PyObject *obj,
                                   const dlbpy_route *route, int with_stream,
                                   const dlbpy_ask *ask,
                                   DLManagedTensorVersioned **out) {
  PyObject *capsule = dlbpy_call_dlpack(st, obj, route, with_stream, ask);
  if (capsule == NULL) return -1;
  int rc;
  if (!PyCapsule_CheckExact(capsule)) {
    PyErr_Format(PyExc_BufferError,
                 "%.100s.__dlpack__() returned %.100s, not a DLPack capsule",
                 Py_TYPE(obj)->tp_name, Py_TYPE(capsule)->tp_name);
    rc = -1;
  } else {
    rc = dlbpy_capsule_consume(capsule, PyExc_BufferError, out);
  }
  /* A consumed capsule's destructor does nothing; an unconsumed one frees
   * the producer's tensor, and may run Python code that would clear the
   * refusal's exception. */
  if (rc < 0) {
    dlbpy_saved_error refusal;
    dlbpy_error_save(&refusal);
    Py_DECREF(capsule);
    dlbpy_error_restore(&refusal);
  } else {
    Py_DECREF(capsule);
  }
  return rc;
}

/* 1 when the producer's __dlpack__ should see obj instead of its table.
 * A table skips the Python-level checks of __dlpack__: PyTorch's exports a
 * tensor that requires grad, and the memory of a lazily conjugated complex
 * view without its conjugate bit, so its values would be the conjugates;
 * its __dlpack__ refuses both with a BufferError. Only floating types can
 * require grad and only complex ones be conjugated lazily, so integer and
 * bool tensors never pay for the look-up. -1 with an exception on error. */
static int dlbpy_table_may_skip_checks(dlbpy_state *st, PyObject *obj,
                                       DLDataType dtype) {
  if (dtype.code == kDLComplex) return 1;
  int floating = dtype.code == kDLFloat || dtype.code == kDLBfloat ||
                 (dtype.code >= kDLFloat8_e3m4 && dtype.code <= kDLFloat4_e2m1fn);
  if (!floating) return 0;
  /* Without raising and clearing an AttributeError for objects that have
   * no such attribute. */
  PyObject *grad = NULL;
  if (DLBPY_GET_OPTIONAL_ATTR(obj, st->s_requires_grad, &grad) <= 0)
    return grad == NULL && PyErr_Occurred() ? -1 : 0;
  int requires = PyObject_IsTrue(grad);
  Py_DECREF(grad);
  return requires;
}

/* PyTorch's lazily negated views (x.conj().imag) hold the negatives of
 * their values, with a flag DLPack has no field for, and both its table
 * and its __dlpack__ export that memory as it is: the values would come out
 * negated. Such a view's strides are twice its complex base's, all even, so
 * a tensor whose last dimension has two or more elements one apart (every
 * compact tensor whose rows hold more than one) skips the look-up. 0 when
 * obj is not negated (or has no is_neg), -1 with BufferError when it is,
 * or with the look-up's or the call's error. */
static int dlbpy_refuse_negated(PyObject *obj, const DLTensor *t) {
  /* Not yet validated: ndim is bounded as validation bounds it first. */
  if (t->ndim > 0 && t->ndim <= DLB_MAX_NDIM && t->shape != NULL &&
      t->shape[t->ndim - 1] > 1 &&
      (t->strides == NULL || t->strides[t->ndim - 1] == 1))
    return 0;
  PyObject *name = PyUnicode_InternFromString("is_neg");
  if (name == NULL) return -1;
  PyObject *method = NULL;
  int found = DLBPY_GET_OPTIONAL_ATTR(obj, name, &method);
  Py_DECREF(name);
  if (found <= 0) return found;
  PyObject *answer = PyObject_CallNoArgs(method);
  Py_DECREF(method);
  if (answer == NULL) return -1;
  int negated = PyObject_IsTrue(answer);
  Py_DECREF(answer);
  if (negated <= 0) return negated;
  PyErr_Format(PyExc_BufferError,
               "this %S is a lazily negated view (is_neg() is true): its "
               "memory holds the negatives of its values, which DLPack "
               "cannot say; import x.resolve_neg() instead",
               (PyObject *)Py_TYPE(obj));
  return -1;
}

/* A table's failure is final when it is a refusal (BufferError) or says
 * obj is not the table's (TypeError). Other failures go to __dlpack__,
 * whose answer the standard says from_dlpack propagates: PyTorch's table
 * raises RuntimeError for sparse, quantized and meta tensors that its
 * __dlpack__ refuses with a BufferError. Returns 0 when __dlpack__ should
 * be asked, -1 to propagate the error. */
static int dlbpy_table_failed(PyObject *obj) {
  if (!PyErr_Occurred()) {
    PyErr_Format(PyExc_BufferError,
                 "the DLPack exchange table of %.100s failed without an "
                 "exception",
                 Py_TYPE(obj)->tp_name);
    return -1;
  }
  if (PyErr_ExceptionMatches(PyExc_BufferError) ||
      PyErr_ExceptionMatches(PyExc_TypeError) ||
      !PyErr_ExceptionMatches(PyExc_Exception))
    return -1;
  PyErr_Clear();
  return 0;
}

/* A table function that succeeded with an exception set is a broken
 * producer: the exception would surface later, far from its cause (a
 * result returned with it set is a SystemError). Releases m, the table's
 * tensor, and raises BufferError naming fn; returns -1. */
static int dlbpy_table_left_error(PyObject *obj, const char *fn,
                                  DLManagedTensorVersioned *m) {
  dlbpy_saved_error left;
  dlbpy_error_save(&left);
  dlbpy_release(m);
  dlbpy_error_discard(&left);
  PyErr_Format(PyExc_BufferError,
               "%s of the DLPack exchange table of %.100s succeeded with an "
               "exception set",
               fn, Py_TYPE(obj)->tp_name);
  return -1;
}

/* The exchange table's route. Returns 1 with *out set, 0 when __dlpack__
 * must answer instead (the table declined, or may have skipped a check),
 * -1 on error. */
static int dlbpy_try_import_via_api(dlbpy_state *st,
                                    const DLPackExchangeAPI *api, PyObject *obj,
                                    DLManagedTensorVersioned **out) {
  DLManagedTensorVersioned *m = NULL;
  if (api->managed_tensor_from_py_object_no_sync(obj, &m) != 0)
    return dlbpy_table_failed(obj);
  if (m == NULL) {
    PyErr_Format(PyExc_BufferError,
                 "the DLPack exchange table of %.100s returned no tensor",
                 Py_TYPE(obj)->tp_name);
    return -1;
  }
  if (PyErr_Occurred())
    return dlbpy_table_left_error(obj, "managed_tensor_from_py_object_no_sync",
                                  m);
  if (m->version.major != DLPACK_MAJOR_VERSION) {
    unsigned major = m->version.major, minor = m->version.minor;
    dlbpy_release(m);
    PyErr_Format(PyExc_BufferError,
                 "the DLPack exchange table of %.100s made a version %u.%u "
                 "tensor; dlbridge reads major version %d only",
                 Py_TYPE(obj)->tp_name, major, minor, DLPACK_MAJOR_VERSION);
    return -1;
  }
  if (api != &dlbpy_exchange_api) {
    int skip = dlbpy_table_may_skip_checks(st, obj, m->dl_tensor.dtype);
    if (skip != 0) {
      dlbpy_release_keeping_error(m);
      return skip < 0 ? -1 : 0;
    }
    if (dlbpy_refuse_negated(obj, &m->dl_tensor) < 0) {
      dlbpy_release_keeping_error(m);
      return -1;
    }
  }
  /* "No sync" leaves the producer's pending work on its current stream. A
   * dlbridge tensor carries no stream, so for device memory on a
   * non-default stream let __dlpack__ order that work before the default
   * stream instead. A table without current_work_stream (DLPack allows
   * only dltensor_from_py_object_no_sync to be NULL) cannot say which
   * stream that is: its device memory goes the same way. */
  DLDevice device = m->dl_tensor.device;
  if (device.device_type != kDLCPU && api->current_work_stream == NULL) {
    dlbpy_release(m);
    return 0;
  }
  if (device.device_type != kDLCPU) {
    void *stream = NULL;
    if (api->current_work_stream(device.device_type, device.device_id,
                                 &stream) != 0) {
      if (!PyErr_Occurred())
        PyErr_SetString(PyExc_BufferError,
                        "current_work_stream of the DLPack exchange table "
                        "failed");
      dlbpy_release_keeping_error(m);
      return -1;
    }
    if (PyErr_Occurred())
      return dlbpy_table_left_error(obj, "current_work_stream", m);
    if (stream != NULL) {
      /* Through the guard: a deleter that leaves an exception set would
       * have __dlpack__ called with it pending. */
      dlbpy_release(m);
      return 0;
    }
  }
  dlb_status s = dlbpy_accept_versioned(m, out);
  if (s != DLB_OK) {
    dlbpy_raise_unless_set(s, PyExc_BufferError, "DLPack tensor");
    dlbpy_release_keeping_error(m);
    return -1;
  }
  return 1;
}

/* ------------------------------------------------------------------------
 * copy= and device=
 * ---------------------------------------------------------------------- */

static void dlbpy_device_name(DLDevice d, char *buf, size_t size) {
  if (dlb_device_format(d, buf, size) != DLB_OK)
    PyOS_snprintf(buf, size, "(%d, %d)", (int)d.device_type,
                  (int)d.device_id);
}

int dlbpy_import_apply(const dlbpy_import_opts *opts,
                       DLManagedTensorVersioned **mt) {
  DLManagedTensorVersioned *m = *mt;
  int copied = (m->flags & DLPACK_FLAG_BITMASK_IS_COPIED) != 0;
  if (opts->copy == 0 && copied) {
    dlbpy_release(m);
    PyErr_SetString(PyExc_ValueError,
                    "copy=False, but the producer copied the data (IS_COPIED "
                    "is set)");
    return -1;
  }
  DLDevice own = m->dl_tensor.device;
  DLDevice target = own;
  if (opts->has_device && !dlb_device_equal(opts->device, own)) {
    char from[DLB_DEVICE_NAME_MAX], to[DLB_DEVICE_NAME_MAX];
    dlbpy_device_name(own, from, sizeof from);
    dlbpy_device_name(opts->device, to, sizeof to);
    /* Memory a device can address is not memory placed on it: the result
     * is on the device asked for, by a copy, unless the caller asks for
     * the memory where it is under the device's name. */
    if (opts->in_place) {
      if (!dlb_device_can_access(opts->device, own)) {
        dlbpy_release(m);
        PyErr_Format(PyExc_ValueError,
                     "in_place=True, but the data is in %s memory, which %s "
                     "cannot address",
                     from, to);
        return -1;
      }
      /* Only the label changes, in a struct of our own: a producer's
       * struct taken as it is stays as its producer made it, since its
       * deleter may read the device to know how to free the memory
       * (pinned memory with cudaFreeHost). Such a struct is wrapped. */
      if (!dlbpy_is_light(m) && !dlb_tensor_is_ours(m)) {
        if (dlbpy_own(&m) < 0) {
          dlbpy_release(m);
          return -1;
        }
        *mt = m;
      }
      m->dl_tensor.device = opts->device;
      return 0;
    }
    if (opts->copy == 0) {
      dlbpy_release(m);
      PyErr_Format(PyExc_ValueError,
                   "copy=False, but the data is in %s memory, not on %s: "
                   "only a copy puts it there (from_dlpack's in_place=True "
                   "shares memory %s can address under its name)",
                   from, to, to);
      return -1;
    }
    target = opts->device;
    copied = 0;
  }
  /* copy=True gives a copy of the caller's own, writable as every copy
   * dlbridge makes: a producer's copy that is read-only is not one. */
  if ((opts->copy == 1 &&
       (!copied || (m->flags & DLPACK_FLAG_BITMASK_READ_ONLY))) ||
      !dlb_device_equal(target, own)) {
    DLManagedTensorVersioned *copy;
    int rc = dlbpy_copy_to(m, target, PyExc_BufferError, &copy);
    dlbpy_release(m);
    if (rc < 0) return -1;
    *mt = copy;
  }
  return 0;
}

/* ------------------------------------------------------------------------
 * Entry points
 * ---------------------------------------------------------------------- */

/* What opts asks a producer for, in *ask; 0 when nothing. in_place keeps
 * the memory where it is: no dl_device goes out then. */
static int dlbpy_ask_of(const dlbpy_import_opts *opts, dlbpy_ask *ask) {
  if (opts == NULL) return 0;
  ask->has_device = opts->has_device && !opts->in_place;
  ask->device = opts->device;
  ask->copy = opts->copy;
  return ask->has_device || ask->copy >= 0;
}

static int dlbpy_import_raw(dlbpy_state *st, PyObject *obj,
                            const dlbpy_import_opts *opts,
                            DLManagedTensorVersioned **out) {
  if (PyCapsule_CheckExact(obj))
    return dlbpy_capsule_consume(obj, PyExc_TypeError, out);
  dlbpy_route route;
  if (dlbpy_route_for(st, Py_TYPE(obj), &route) < 0) return -1;
  dlbpy_ask ask;
  const dlbpy_ask *asking = dlbpy_ask_of(opts, &ask) ? &ask : NULL;
  int rc = 0;
  /* The table takes no dl_device or copy: what it gives is moved or
   * copied by dlbpy_import_apply, as for a producer that takes none. */
  if (route.api != NULL) rc = dlbpy_try_import_via_api(st, route.api, obj, out);
  /* The table declines (0) device memory with work pending on a stream:
   * then __dlpack__ orders it before the default stream. */
  if (rc == 0)
    rc = dlbpy_import_capsule_of(st, obj, &route, route.api != NULL, asking,
                                 out) < 0
             ? -1
             : 1;
  /* The method and the table's capsule may be the last references if the
   * producer's code (the table itself, requires_grad, __dlpack__) dropped
   * the cache entry meanwhile. */
  Py_XDECREF(route.method);
  Py_XDECREF(route.learned_for);
  Py_XDECREF(route.api_owner);
  return rc < 0 ? -1 : 0;
}

/*
 * Host-type memory (pinned, managed) is read by the CPU as soon as the
 * import returns: through the buffer protocol, NumPy, tolist. The producer
 * only ordered its work before the default stream (stream=None), so the
 * host waits for that stream here. Without the runtime nobody can have
 * queued work on it.
 */
__attribute__((noinline)) static int dlbpy_host_wait(DLDevice device) {
  /* A wait for the device, which other threads need not share. */
  dlb_status s;
  Py_BEGIN_ALLOW_THREADS
  s = dlb_stream_synchronize(device, NULL);
  Py_END_ALLOW_THREADS
  if (s == DLB_OK || s == DLB_E_NO_RUNTIME || s == DLB_E_NO_DEVICE ||
      s == DLB_E_DEVICE)
    return 0;
  return dlbpy_fail(s, PyExc_BufferError,
                    "from_dlpack: waiting for the producer's stream");
}

/* The test inlined where it is called (from_dlpack(x) of cpu memory runs
 * it), the wait not. */
static inline int dlbpy_host_sync(DLManagedTensorVersioned *mt) {
  const DLDevice device = mt->dl_tensor.device;
  if (device.device_type == kDLCPU ||
      !dlb_device_type_is_host_type(device.device_type))
    return 0;
  return dlbpy_host_wait(device);
}

/* 1 when obj is an unconsumed DLPack capsule of host-type memory other
 * than cpu (pinned, managed), whose import waits for the device: a wait
 * that can fail, so the capsule is taken tentatively. Reads the device
 * only; the import validates the rest. */
static int dlbpy_capsule_needs_wait(PyObject *obj) {
  const char *name = PyCapsule_GetName(obj);
  if (name == NULL) {
    PyErr_Clear();
    return 0;
  }
  DLDevice device;
  if (strcmp(name, "dltensor_versioned") == 0) {
    const DLManagedTensorVersioned *m = PyCapsule_GetPointer(obj, name);
    if (m == NULL || m->version.major != DLPACK_MAJOR_VERSION) {
      PyErr_Clear();
      return 0;
    }
    device = m->dl_tensor.device;
  } else if (strcmp(name, "dltensor") == 0) {
    const DLManagedTensor *m = PyCapsule_GetPointer(obj, name);
    if (m == NULL) {
      PyErr_Clear();
      return 0;
    }
    device = m->dl_tensor.device;
  } else {
    return 0;
  }
  return device.device_type != kDLCPU &&
         dlb_device_type_is_host_type(device.device_type);
}

int dlbpy_import_tentative(dlbpy_state *st, PyObject *obj,
                           const dlbpy_import_opts *opts,
                           DLManagedTensorVersioned **out,
                           dlbpy_taken *taken) {
  taken->capsule = NULL;
  /* Only a capsule is taken tentatively; anything else imports as ever
   * (and dlbpy_import_raw keeps one caller, inlined in dlbpy_import's
   * path of from_dlpack(x): as a call of its own it cost from_dlpack of
   * a NumPy array 47 instructions more, callgrind). */
  if (!PyCapsule_CheckExact(obj)) return dlbpy_import(st, obj, opts, out);
  DLManagedTensorVersioned *mt;
  if (dlbpy_capsule_take(obj, PyExc_TypeError, taken, &mt) < 0) return -1;
  if (dlbpy_host_sync(mt) < 0) {
    dlbpy_release(mt);
    dlbpy_capsule_settle(taken, 0);
    return -1;
  }
  if (opts != NULL && !opts->apply_later &&
      dlbpy_import_apply(opts, &mt) < 0) {
    dlbpy_capsule_settle(taken, 0);
    return -1;
  }
  *out = mt;
  return 0;
}

int dlbpy_import(dlbpy_state *st, PyObject *obj, const dlbpy_import_opts *opts,
                 DLManagedTensorVersioned **out) {
  /* A capsule is consumed only once nothing can fail: with opts (a copy,
   * a refusal) or a wait to come, it is taken tentatively. */
  if (PyCapsule_CheckExact(obj) &&
      (opts != NULL || dlbpy_capsule_needs_wait(obj))) {
    dlbpy_taken taken;
    if (dlbpy_import_tentative(st, obj, opts, out, &taken) < 0) return -1;
    dlbpy_capsule_settle_result(&taken, out);
    return 0;
  }
  DLManagedTensorVersioned *mt;
  if (dlbpy_import_raw(st, obj, opts, &mt) < 0) return -1;
  if (dlbpy_host_sync(mt) < 0) {
    dlbpy_release(mt);
    return -1;
  }
  if (opts != NULL && !opts->apply_later && dlbpy_import_apply(opts, &mt) < 0)
    return -1;
  *out = mt;
  return 0;
}

int dlbpy_is_producer(dlbpy_state *st, PyObject *obj) {
  if (PyCapsule_CheckExact(obj) || dlbpy_tensor_check(obj)) return 1;
  /* On the object, as the call x.__dlpack__(...) will find it: instance
   * attributes and __getattr__ count, a metaclass's attribute does not.
   * The generic look-up finds a function in the MRO whatever the instance
   * holds, so that common case needs no bound method. */
  PyTypeObject *type = Py_TYPE(obj);
  PyObject *found_in_mro = _PyType_Lookup(type, st->s_dlpack);
  if (found_in_mro != NULL && type->tp_getattro == PyObject_GenericGetAttr &&
      (PyFunction_Check(found_in_mro) ||
       Py_IS_TYPE(found_in_mro, &PyMethodDescr_Type)))
    return 1;
  /* __dlpack__ = None says "not a producer", as __hash__ = None and
   * __iter__ = None do for their protocols. */
  PyObject *attr = NULL;
  int found = DLBPY_GET_OPTIONAL_ATTR(obj, st->s_dlpack, &attr);
  if (found > 0 && attr == Py_None) found = 0;
  Py_XDECREF(attr);
  return found;
}

/* from_dlpack with keywords. Out of line: inlined, the parameter table
 * was filled in before the test for the plain call, which then paid for
 * it (about 25 of its instructions). */
__attribute__((noinline)) static PyObject *dlbpy_from_dlpack_keywords(
    dlbpy_state *st, PyObject *const *args, Py_ssize_t nargsf,
    PyObject *kwnames) {
  DLManagedTensorVersioned *mt;
  PyObject *x = NULL, *device_arg = NULL, *copy_arg = NULL,
           *in_place_arg = NULL;
  const dlbpy_param params[] = {{"x", DLBPY_POSONLY, &x},
                                {"device", DLBPY_KWONLY, &device_arg},
                                {"copy", DLBPY_KWONLY, &copy_arg},
                                {"in_place", DLBPY_KWONLY, &in_place_arg}};
  if (dlbpy_parse_args("from_dlpack", args, nargsf, kwnames, params,
                       DLBPY_NPARAMS(params)) < 0)
    return NULL;
  dlbpy_import_opts opts = {-1, 0, {kDLCPU, 0}, 0, 0};
  if (dlbpy_parse_copy(copy_arg, "copy", &opts.copy) < 0) return NULL;
  if (device_arg != NULL && device_arg != Py_None) {
    if (dlbpy_parse_device(device_arg, &opts.device) < 0) return NULL;
    opts.has_device = 1;
  }
  if (in_place_arg != NULL && in_place_arg != Py_False) {
    if (in_place_arg != Py_True) {
      PyErr_Format(PyExc_TypeError, "in_place must be a bool, not %.100s",
                   Py_TYPE(in_place_arg)->tp_name);
      return NULL;
    }
    if (opts.copy == 1) {
      PyErr_SetString(PyExc_ValueError,
                      "in_place=True never copies; it cannot go with "
                      "copy=True");
      return NULL;
    }
    opts.in_place = 1;
  }
  if (dlbpy_import(st, x, &opts, &mt) < 0) return NULL;
  return dlbpy_tensor_new(st, mt);
}

PyObject *dlbpy_from_dlpack(PyObject *module, PyObject *const *args,
                            Py_ssize_t nargsf, PyObject *kwnames) {
  dlbpy_state *st = dlbpy_state_of_module(module);
  if (PyVectorcall_NARGS(nargsf) != 1 || kwnames != NULL)
    return dlbpy_from_dlpack_keywords(st, args, nargsf, kwnames);
  DLManagedTensorVersioned *mt;
  if (dlbpy_import(st, args[0], NULL, &mt) < 0) return NULL;
  return dlbpy_tensor_new(st, mt);
}
