/*
 * module.c -- the dlbridge._dlbridge module: multi-phase initialisation,
 * module state, and the error helpers every source uses.
 */
#include "dlbpy.h"

static PyModuleDef dlbpy_module_def;

dlbpy_state *dlbpy_state_of_module(PyObject *module) {
  return (dlbpy_state *)PyModule_GetState(module);
}

dlbpy_state *dlbpy_state_of_type(PyTypeObject *type) {
  return (dlbpy_state *)PyType_GetModuleState(type);
}

dlbpy_state *dlbpy_state_current(void) {
  PyObject *name = PyUnicode_FromString(DLBPY_MODULE_NAME);
  if (name == NULL) return NULL;
  /* A sys.modules lookup first: a full import costs a microsecond. */
  PyObject *module = PyImport_GetModule(name);
  if (module == NULL && !PyErr_Occurred()) module = PyImport_Import(name);
  Py_DECREF(name);
  if (module == NULL) return NULL;
  /* sys.modules could hold something else under our name. */
  if (PyModule_GetDef(module) != &dlbpy_module_def) {
    Py_DECREF(module);
    PyErr_SetString(PyExc_ImportError,
                    DLBPY_MODULE_NAME " in sys.modules is not dlbridge's");
    return NULL;
  }
  dlbpy_state *st = dlbpy_state_of_module(module);
  /* The module lives in sys.modules for as long as the interpreter. */
  Py_DECREF(module);
  return st;
}

void dlbpy_cache_clear(dlbpy_state *st) {
  for (int i = 0; i < DLBPY_CACHE_SIZE; i++) {
    dlbpy_type_entry *e = &st->cache[i];
    e->api = NULL;
    e->direct = 0;
    e->old_only = 0;
    e->form = DLBPY_FORM_UNKNOWN;
    e->tag = 0;
    e->meta_tag = 0;
    Py_CLEAR(e->api_owner);
    Py_CLEAR(e->method);
    Py_CLEAR(e->type);
  }
  st->cache_next = 0;
}

/* ------------------------------------------------------------------------
 * Errors
 * ---------------------------------------------------------------------- */

PyObject *dlbpy_raise(dlb_status status, PyObject *exc, const char *what) {
  if (status == DLB_E_NOMEM) exc = PyExc_MemoryError;
  else if (status == DLB_E_RANGE) exc = PyExc_IndexError;
  const char *detail = dlb_last_error();
  if (detail[0] == '\0') detail = dlb_status_message(status);
  PyErr_Format(exc, "%s: %s", what, detail);
  return NULL;
}

PyObject *dlbpy_raise_unless_set(dlb_status status, PyObject *exc,
                                 const char *what) {
  if (PyErr_Occurred()) return NULL;
  return dlbpy_raise(status, exc, what);
}

int dlbpy_fail(dlb_status status, PyObject *exc, const char *what) {
  dlbpy_raise(status, exc, what);
  return -1;
}

PyObject *dlbpy_gpu_exc(dlb_status status) {
  int machine = status == DLB_E_NO_RUNTIME || status == DLB_E_NO_DEVICE ||
                status == DLB_E_RUNTIME || status == DLB_E_UNSUPPORTED;
  return machine ? PyExc_RuntimeError : PyExc_ValueError;
}

void dlbpy_error_save(dlbpy_saved_error *saved) {
#if PY_VERSION_HEX >= 0x030C0000
  saved->exc = PyErr_GetRaisedException();
#else
  PyErr_Fetch(&saved->type, &saved->value, &saved->tb);
#endif
}

void dlbpy_error_restore(dlbpy_saved_error *saved) {
  if (PyErr_Occurred()) PyErr_WriteUnraisable(NULL);
#if PY_VERSION_HEX >= 0x030C0000
  PyErr_SetRaisedException(saved->exc);
#else
  PyErr_Restore(saved->type, saved->value, saved->tb);
#endif
}

void dlbpy_error_add_context(PyObject *exc, const char *context) {
  if (!PyErr_ExceptionMatches(exc)) return;
  dlbpy_saved_error saved;
  dlbpy_error_save(&saved);
#if PY_VERSION_HEX >= 0x030C0000
  PyObject *type = (PyObject *)Py_TYPE(saved.exc), *value = saved.exc;
#else
  PyObject *type = saved.type, *value = saved.value;
#endif
  PyObject *text = value != NULL ? PyObject_Str(value) : NULL;
  if (text == NULL) {
    PyErr_Clear();
    dlbpy_error_restore(&saved);
    return;
  }
  Py_INCREF(type);
  dlbpy_error_discard(&saved);
  PyErr_Format(type, "%s: %U", context, text);
  Py_DECREF(type);
  Py_DECREF(text);
}

void dlbpy_error_discard(dlbpy_saved_error *saved) {
#if PY_VERSION_HEX >= 0x030C0000
  Py_XDECREF(saved->exc);
#else
  Py_XDECREF(saved->type);
  Py_XDECREF(saved->value);
  Py_XDECREF(saved->tb);
#endif
}

/* ------------------------------------------------------------------------
 * The module
 * ---------------------------------------------------------------------- */

/* The module holds its own copy of the core, whose symbols stay hidden:
 * this is the one way to replace that copy's allocator (the Python tests
 * fail its allocations in turn through it). */
static PyObject *dlbpy_set_allocator(PyObject *module, PyObject *arg) {
  (void)module;
  const dlb_allocator *a = NULL;
  if (arg != Py_None) {
    a = PyCapsule_GetPointer(arg, "dlbridge.allocator");
    if (a == NULL) return NULL;
  }
  if (dlb_set_allocator(a) != DLB_OK)
    return dlbpy_raise(DLB_E_INVAL, PyExc_ValueError, "_set_allocator");
  Py_RETURN_NONE;
}

static PyMethodDef dlbpy_module_methods[] = {
    {"from_dlpack", (PyCFunction)(void (*)(void))dlbpy_from_dlpack,
     METH_FASTCALL | METH_KEYWORDS,
     "from_dlpack(x, /, *, device=None, copy=None, in_place=False)\n--\n\n"
     "Returns a dlbridge.Tensor for any DLPack producer or capsule, "
     "sharing its memory. The result is on device= when given: memory "
     "elsewhere is copied there (ValueError with copy=False). copy=True "
     "always copies. device= and copy= are passed on to a producer of "
     "the 2023.12 protocol as __dlpack__(dl_device=, copy=); one that "
     "takes neither is asked without them, and dlbridge copies. "
     "copy=False raises ValueError when the producer refuses "
     "(BufferError) or copied (IS_COPIED). A host-type device takes "
     "device_id 0 only ('cpu:1' and (1, 3) are ValueError). in_place=True "
     "shares memory the device can address where it is, under the "
     "device's name (pinned or managed memory as 'cpu'), and never "
     "copies. A capsule is consumed only when the import succeeds."},
    {"empty", (PyCFunction)(void (*)(void))dlbpy_empty,
     METH_FASTCALL | METH_KEYWORDS,
     "empty(shape, dtype='float32', device='cpu', *, shared=False)\n--\n\n"
     "Returns a new tensor with uninitialised values (zeros when shared). "
     "shared=True puts a cpu tensor in shared memory."},
    {"zeros", (PyCFunction)(void (*)(void))dlbpy_zeros,
     METH_FASTCALL | METH_KEYWORDS,
     "zeros(shape, dtype='float32', device='cpu', *, shared=False)\n--\n\n"
     "Returns a new tensor filled with zeros. shared=True puts a cpu "
     "tensor in shared memory."},
    {"full", (PyCFunction)(void (*)(void))dlbpy_full,
     METH_FASTCALL | METH_KEYWORDS,
     "full(shape, fill_value, dtype=None, device='cpu', *, shared=False)"
     "\n--\n\n"
     "Returns a new tensor filled with fill_value. shared=True puts a cpu "
     "tensor in shared memory."},
    {"arange", (PyCFunction)(void (*)(void))dlbpy_arange,
     METH_FASTCALL | METH_KEYWORDS,
     "arange(start, stop=None, step=None, *, dtype=None, device='cpu')\n--\n\n"
     "Returns evenly spaced values in [start, stop)."},
    {"asarray", (PyCFunction)(void (*)(void))dlbpy_asarray,
     METH_FASTCALL | METH_KEYWORDS,
     "asarray(obj, /, *, dtype=None, device=None, copy=None)\n--\n\n"
     "Returns obj as a tensor, from DLPack, the buffer protocol, a Python "
     "scalar, or a nested sequence (any sequence) of numbers and arrays, "
     "stacked as NumPy stacks them. dtype names the element type: array "
     "data of another dtype is converted into a new tensor (copy=False "
     "raises ValueError). A producer is asked for device and copy "
     "(__dlpack__(dl_device=, copy=)) as from_dlpack asks it."},
    {"pin", (PyCFunction)(void (*)(void))dlbpy_pin,
     METH_FASTCALL | METH_KEYWORDS,
     "pin(obj, /, kind='cuda_host')\n--\n\n"
     "Pins obj's CPU memory in place for kind's runtime ('cuda_host' or "
     "'rocm_host') and returns a tensor of that kind sharing it. obj is a "
     "buffer, a DLPack producer or a Tensor; the tensor keeps it alive and "
     "is read-only when it is. The memory is unpinned when the last tensor "
     "sharing the pin goes. Memory of that kind already is shared as it "
     "is. RuntimeError when the runtime or GPU is missing. A DLPack "
     "capsule is consumed only when pinning succeeds."},
    {"device_of", dlbpy_device_of, METH_O,
     "device_of(x, /)\n--\n\n"
     "Returns the name of the memory x points into, as the GPU runtimes "
     "see it ('cpu', 'cuda:0', 'cuda_host', 'cuda_managed', 'rocm:0', "
     "'rocm_host'), whatever its producer says. x is an int address, a "
     "Tensor, a buffer or a DLPack producer. Without a runtime every "
     "address is 'cpu'."},
    {"prefetch", (PyCFunction)(void (*)(void))dlbpy_prefetch,
     METH_FASTCALL | METH_KEYWORDS,
     "prefetch(t, /, device, stream=None)\n--\n\n"
     "Queues the migration of t's pages of CUDA managed memory to device "
     "('cuda:N', or 'cpu' for the host) on a CUDA stream given as "
     "__dlpack__ takes it (None or 1 the legacy default stream, 2 the "
     "per-thread one, else a handle); synchronize() waits for it. "
     "ValueError when t is not managed memory, StreamError (a ValueError) "
     "for stream 0, -1 or below, RuntimeError when CUDA or "
     "the GPU is missing or cannot prefetch."},
    {"advise", (PyCFunction)(void (*)(void))dlbpy_advise,
     METH_FASTCALL | METH_KEYWORDS,
     "advise(t, /, advice, device=None)\n--\n\n"
     "Gives the CUDA driver advice about t's pages of managed memory: "
     "'set_read_mostly', 'unset_read_mostly', 'set_preferred_location', "
     "'unset_preferred_location', 'set_accessed_by' or 'unset_accessed_by', "
     "for device ('cuda:N', or None or 'cpu' for the host; read-mostly "
     "advice ignores it). Errors as for prefetch()."},
    {"synchronize", dlbpy_synchronize, METH_O,
     "synchronize(x, /)\n--\n\n"
     "Waits until the work queued on a device is done. x is a device "
     "('cuda:0', a (device_type, device_id) tuple) or a Tensor or DLPack "
     "producer, whose memory's device is meant; host-type kinds "
     "('cuda_host', 'cuda_managed', 'rocm_host') wait for every GPU of "
     "their runtime the process has used, 'cpu' for nothing. RuntimeError "
     "when the runtime or GPU is missing."},
    {"share_export", dlbpy_share_export, METH_O,
     "share_export(t, /)\n--\n\n"
     "Returns (handle, fd) for a shared tensor (or a cuda/rocm one): the "
     "handle as bytes and a new file descriptor of its memory (-1 for "
     "device memory), which the caller owns and closes once it is sent."},
    {"share_import", (PyCFunction)(void (*)(void))dlbpy_share_import,
     METH_FASTCALL | METH_KEYWORDS,
     "share_import(handle, fd, /, *, pin=None)\n--\n\n"
     "Returns the tensor a handle from share_export() describes, mapping "
     "its memory (fd is borrowed: the caller still closes it). pin="
     "'cuda_host' or 'rocm_host' pins the mapping in this process. "
     "ValueError for a handle or descriptor that is refused."},
    {"_rebuild", (PyCFunction)(void (*)(void))dlbpy_rebuild,
     METH_FASTCALL | METH_KEYWORDS,
     "_rebuild(data, dtype, shape, flags, /)\n--\n\n"
     "A pickled tensor from its data (any buffer of the compact "
     "elements), sharing the buffer when it can."},
    {"_set_allocator", dlbpy_set_allocator, METH_O,
     "_set_allocator(capsule, /)\n--\n\n"
     "Installs the dlb_allocator a 'dlbridge.allocator' capsule points to "
     "for the core's later host allocations; None restores the default. "
     "The allocator must outlive every block it makes."},
    {"load_npy", (PyCFunction)(void (*)(void))dlbpy_load_npy,
     METH_FASTCALL | METH_KEYWORDS,
     "load_npy(path, /, mmap=True, pin=False)\n--\n\n"
     "Returns the array in the .npy file at path (format 1.0, 2.0 or 3.0, "
     "C or Fortran order, bool, int, uint, float or complex in the "
     "machine's byte order). mmap=True maps the file: a read-only tensor "
     "without a copy, which keeps the mapping; mmap=False reads it into a "
     "new writable tensor. pin=True (or 'cuda_host', 'rocm_host') pins the "
     "memory for GPU access. OSError when the file cannot be opened, "
     "ValueError naming the field for a header dlbridge refuses, "
     "RuntimeError when pinning finds no runtime."},
    {"runtimes", dlbpy_runtimes, METH_NOARGS,
     "runtimes()\n--\n\n"
     "Returns what the GPU runtimes report: a list of one dict per runtime "
     "('cuda', 'rocm') with 'available', 'status', 'error' (why not, or "
     "None), 'version', 'library' and 'devices', a list of dicts with "
     "'device', 'name', 'total_memory' and the capabilities "
     "'managed_memory', 'concurrent_managed', 'host_register' and 'ipc' "
     "(True, False, or None when the runtime cannot say)."},
    {NULL, NULL, 0, NULL},
};

static int dlbpy_intern(PyObject **slot, const char *text) {
  *slot = PyUnicode_InternFromString(text);
  return *slot == NULL ? -1 : 0;
}

static int dlbpy_module_exec(PyObject *module) {
  dlbpy_state *st = dlbpy_state_of_module(module);
  if (dlbpy_intern(&st->s_dlpack, "__dlpack__") < 0 ||
      dlbpy_intern(&st->s_dlpack_device, "__dlpack_device__") < 0 ||
      dlbpy_intern(&st->s_exchange_api, "__dlpack_c_exchange_api__") < 0 ||
      dlbpy_intern(&st->s_requires_grad, "requires_grad") < 0)
    return -1;
  /* Interned, so producers' argument parsers (NumPy's) match the keyword
   * by identity instead of comparing strings. */
  PyObject *mv = PyUnicode_InternFromString("max_version");
  PyObject *stream = PyUnicode_InternFromString("stream");
  if (mv != NULL && stream != NULL) {
    st->kw_mv = PyTuple_Pack(1, mv);
    st->kw_mv_stream = PyTuple_Pack(2, mv, stream);
    st->kw_stream = PyTuple_Pack(1, stream);
  }
  Py_XDECREF(mv);
  Py_XDECREF(stream);
  st->max_version = Py_BuildValue("(II)", (unsigned)DLBPY_MAX_MAJOR,
                                  (unsigned)DLBPY_MAX_MINOR);
  if (st->kw_mv == NULL || st->kw_mv_stream == NULL || st->kw_stream == NULL ||
      st->max_version == NULL)
    return -1;
  /* Both bases, as numpy.exceptions.AxisError has two: consumers disagree
   * on the class (NumPy raises RuntimeError for a stream on cpu memory,
   * the array API standard names none), so either except clause works. */
  PyObject *bases = PyTuple_Pack(2, PyExc_ValueError, PyExc_RuntimeError);
  if (bases == NULL) return -1;
  st->stream_error = PyErr_NewExceptionWithDoc(
      "dlbridge.StreamError",
      "A stream value that the memory's stream rules refuse, given to "
      "Tensor.__dlpack__ or prefetch(): a stream for cpu memory, 0 for CUDA "
      "memory, 1 or 2 for ROCm memory, -1 to prefetch(), or a value below "
      "-1. Subclasses both ValueError and RuntimeError.",
      bases, NULL);
  Py_DECREF(bases);
  if (st->stream_error == NULL) return -1;
  /* Added under the name after the last dot of its qualified name. */
  if (PyModule_AddType(module, (PyTypeObject *)st->stream_error) < 0)
    return -1;
  if (dlbpy_watch_exit() < 0) return -1;
  if (dlbpy_device_types_add(module, st) < 0) return -1;
  if (dlbpy_tensor_type_add(module, st) < 0) return -1;
  if (dlbpy_capi_add(module) < 0) return -1;
  if (PyModule_AddIntConstant(module, "DLPACK_MAJOR_VERSION",
                              DLPACK_MAJOR_VERSION) < 0 ||
      PyModule_AddIntConstant(module, "DLPACK_MINOR_VERSION",
                              DLPACK_MINOR_VERSION) < 0 ||
      PyModule_AddStringConstant(module, "core_version",
                                 dlb_version_string()) < 0)
    return -1;
  return 0;
}

static int dlbpy_module_traverse(PyObject *module, visitproc visit,
                                 void *arg) {
  dlbpy_state *st = dlbpy_state_of_module(module);
  Py_VISIT(st->tensor_type);
  Py_VISIT(st->stream_error);
  Py_VISIT(st->device_types);
  for (int i = 0; i < DLBPY_CACHE_SIZE; i++) {
    Py_VISIT(st->cache[i].type);
    Py_VISIT(st->cache[i].api_owner);
    Py_VISIT(st->cache[i].method);
  }
  return 0;
}

static int dlbpy_module_clear(PyObject *module) {
  dlbpy_state *st = dlbpy_state_of_module(module);
  dlbpy_cache_clear(st);
  Py_CLEAR(st->tensor_type);
  Py_CLEAR(st->stream_error);
  Py_CLEAR(st->s_dlpack);
  Py_CLEAR(st->s_dlpack_device);
  Py_CLEAR(st->s_exchange_api);
  Py_CLEAR(st->s_requires_grad);
  Py_CLEAR(st->kw_mv);
  Py_CLEAR(st->kw_mv_stream);
  Py_CLEAR(st->kw_stream);
  Py_CLEAR(st->max_version);
  Py_CLEAR(st->device_types);
  PyObject_Free(st->spare_tensor);
  st->spare_tensor = NULL;
  PyMem_Free(st->spare_light);
  st->spare_light = NULL;
  return 0;
}

static void dlbpy_module_free(void *module) {
  dlbpy_module_clear((PyObject *)module);
}

static PyModuleDef_Slot dlbpy_module_slots[] = {
    {Py_mod_exec, (void *)dlbpy_module_exec},
#if PY_VERSION_HEX >= 0x030C0000
    /* Deleters reach Python through PyGILState_Ensure, which knows only
     * the main interpreter. */
    {Py_mod_multiple_interpreters, Py_MOD_MULTIPLE_INTERPRETERS_NOT_SUPPORTED},
#endif
    {0, NULL},
};

static PyModuleDef dlbpy_module_def = {
    PyModuleDef_HEAD_INIT,
    .m_name = DLBPY_MODULE_NAME,
    .m_doc = "DLPack tensor exchange for every kind of memory (C core).",
    .m_size = sizeof(dlbpy_state),
    .m_methods = dlbpy_module_methods,
    .m_slots = dlbpy_module_slots,
    .m_traverse = dlbpy_module_traverse,
    .m_clear = dlbpy_module_clear,
    .m_free = dlbpy_module_free,
};

PyMODINIT_FUNC PyInit__dlbridge(void);

PyMODINIT_FUNC PyInit__dlbridge(void) {
  return PyModuleDef_Init(&dlbpy_module_def);
}
