/*
 * dlbridge_capi.h -- dlbridge's C API for other CPython extensions.
 *
 * Include it, after Python.h, in one or more source files of your extension
 * (the compiler needs dlbridge.get_include() on its include path) and call
 * import_dlbridge() in the module's init or exec function:
 *
 *     #include <Python.h>
 *     #include "dlbridge_capi.h"
 *
 *     static int exec_module(PyObject *m) {
 *       if (import_dlbridge() < 0) return -1;
 *       ...
 *     }
 *
 * Then DLBridge_ToManaged(), DLBridge_Borrow(), DLBridge_FromManaged() ...
 * work as documented below. Every function must be called holding the GIL;
 * those returning int return 0 on success and -1 with a Python exception
 * set. Tensors dlbridge hands out may be released (their deleter called)
 * on any thread, with or without the GIL.
 *
 * Each translation unit that includes this header gets its own pointer to
 * the API table; import_dlbridge() fills it for that unit.
 */
#ifndef DLBRIDGE_CAPI_H
#define DLBRIDGE_CAPI_H

#include <Python.h>

#include "dlpack/dlpack.h"

#ifdef __cplusplus
extern "C" {
#endif

/* The table's version. Functions are only ever appended; a table whose
 * version is lower than the one you compiled against lacks the newer ones,
 * and import_dlbridge() refuses it. */
#define DLBRIDGE_CAPI_VERSION 1

/* The capsule's name, also its attribute path. */
#define DLBRIDGE_CAPI_NAME "dlbridge._dlbridge._C_API"

/* flags for DLBridge_ToManaged and DLBridge_Borrow. */
/* Refuse read-only data (BufferError) instead of handing it out. */
#define DLBRIDGE_REQUIRE_WRITABLE 0x1
/* Refuse memory the CPU cannot read (BufferError). */
#define DLBRIDGE_REQUIRE_CPU 0x2

typedef struct DLBridge_CAPI {
  /* DLBRIDGE_CAPI_VERSION of the dlbridge that made the table. */
  unsigned int version;
  /* sizeof(DLBridge_CAPI) of that dlbridge. */
  unsigned int size;

  /* Returns 1 when obj is a dlbridge.Tensor, else 0. Never fails. */
  int (*Check)(PyObject *obj);

  /* Imports obj (anything dlbridge.from_dlpack accepts: a Tensor, a
   * NumPy array, a PyTorch tensor, a DLPack capsule ...) without copying,
   * and stores in *out a new managed tensor the caller owns: call its
   * deleter exactly once when done, from any thread. READ_ONLY in its
   * flags says the data must not be written. */
  int (*ToManaged)(PyObject *obj, int flags, DLManagedTensorVersioned **out);

  /* Like ToManaged, but borrowed: *out stays valid while *owner lives.
   * *owner is a new reference (obj itself when obj is a dlbridge.Tensor,
   * so this costs no allocation then); Py_DECREF it when done and do not
   * call the deleter of *out. */
  int (*Borrow)(PyObject *obj, int flags, PyObject **owner,
                const DLManagedTensorVersioned **out);

  /* Returns a new dlbridge.Tensor holding m (validated first). Steals m:
   * its deleter is called on failure too. Returns NULL with an exception
   * set on failure. */
  PyObject *(*FromManaged)(DLManagedTensorVersioned *m);

  /* The same for the legacy struct, with flags (DLPACK_FLAG_BITMASK_*)
   * for the new tensor, e.g. READ_ONLY. Steals m. */
  PyObject *(*FromLegacy)(DLManagedTensor *m, uint64_t flags);
} DLBridge_CAPI;

/* This translation unit's table, filled by import_dlbridge(). */
static const DLBridge_CAPI *DLBridge_API = NULL;

/* Imports dlbridge and fetches its table. Returns 0, or -1 with ImportError
 * set. Safe to call more than once. Use it through import_dlbridge(). */
static inline int dlbridge_import_capi(void) {
  if (DLBridge_API != NULL) return 0;
  const DLBridge_CAPI *api =
      (const DLBridge_CAPI *)PyCapsule_Import(DLBRIDGE_CAPI_NAME, 0);
  if (api == NULL) return -1;
  if (api->version < DLBRIDGE_CAPI_VERSION ||
      api->size < sizeof(DLBridge_CAPI)) {
    PyErr_Format(PyExc_ImportError,
                 "dlbridge C API version %u is older than version %d this "
                 "extension was built for",
                 api->version, DLBRIDGE_CAPI_VERSION);
    return -1;
  }
  DLBridge_API = api;
  return 0;
}

/* Fills this translation unit's table: 0, or -1 with ImportError set. */
#define import_dlbridge() dlbridge_import_capi()

#define DLBridge_Check(obj) (DLBridge_API->Check(obj))
#define DLBridge_ToManaged(obj, flags, out) \
  (DLBridge_API->ToManaged((obj), (flags), (out)))
#define DLBridge_Borrow(obj, flags, owner, out) \
  (DLBridge_API->Borrow((obj), (flags), (owner), (out)))
#define DLBridge_FromManaged(m) (DLBridge_API->FromManaged(m))
#define DLBridge_FromLegacy(m, flags) (DLBridge_API->FromLegacy((m), (flags)))

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* DLBRIDGE_CAPI_H */
