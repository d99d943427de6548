/*
 * dlbpy.h -- what the sources of the dlbridge extension share. Not installed.
 *
 * Internal names use the dlbpy_ prefix. Every function that returns a
 * PyObject * returns a new reference, or NULL with an exception set; every
 * function that returns int returns 0 on success and -1 with an exception set.
 */
#ifndef DLBPY_H
#define DLBPY_H

#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include "dlbridge.h"

/* The extension's import name; the C API capsule and the exchange table
 * find the module through it. */
#define DLBPY_MODULE_NAME "dlbridge._dlbridge"

/* The DLPack version dlbridge asks producers for and writes in its tensors. */
#define DLBPY_MAX_MAJOR DLPACK_MAJOR_VERSION
#define DLBPY_MAX_MINOR DLPACK_MINOR_VERSION

/* ------------------------------------------------------------------------
 * The Tensor object
 * ---------------------------------------------------------------------- */

/*
 * An "accepted" tensor is either a dlbridge tensor (dlb_tensor_is_ours) or
 * a foreign versioned tensor that passed dlb_managed_validate and is in the
 * form ours have: strides set when ndim != 0, device normalised. Importing
 * keeps a foreign tensor as it is, since wrapping it in a dlbridge owner
 * costs two allocations per exchange; it is wrapped on first need (views,
 * export), once, by dlbpy_own. Whoever holds an accepted tensor releases it
 * with dlbpy_release, holding the GIL.
 */
typedef struct {
  PyObject_HEAD
  /* An accepted tensor, owned; never NULL once the object is visible to
   * Python. */
  DLManagedTensorVersioned *mt;
  /* A share of another Tensor that mt replaced when a view needed a
   * dlbridge tensor (dlbpy_tensor_owned), or NULL. It lives as long as
   * this object: C callers were given pointers into it and into its
   * source's struct (DLBridge_Borrow, dltensor_from_py_object_no_sync). */
  DLManagedTensorVersioned *retired;
  PyObject *weakreflist;
} dlbpy_tensor;

/* ------------------------------------------------------------------------
 * Module state
 * ---------------------------------------------------------------------- */

/* How a producer type's __dlpack__ is called. */
typedef enum {
  DLBPY_FORM_UNKNOWN = 0,
  /* accepts max_version (and copy) */
  DLBPY_FORM_VERSIONED,
  /* accepts no keywords but stream (NumPy 1.x, PyTorch 1.x) */
  DLBPY_FORM_LEGACY,
} dlbpy_call_form;

/* What from_dlpack learned about one producer type. */
typedef struct {
  PyTypeObject *type; /* strong reference; NULL for an empty slot */
  /* type->tp_version_tag when the entry was made: any change to the type
   * (a new __dlpack__, a new table) changes the tag and voids the entry. */
  unsigned int tag;
  /* The type's exchange table, or NULL when it has none usable. */
  const DLPackExchangeAPI *api;
  /* The capsule that holds api, kept so the table outlives the entry. */
  PyObject *api_owner;
  /* The type's __dlpack__ attribute when the entry was made: a tag change
   * that leaves it as it was (a class attribute counting calls) keeps the
   * learned form. */
  PyObject *method;
  /* 1 when calling method with the object first is exactly x.__dlpack__
   * (a plain function or method descriptor, and no instance dict to
   * shadow it), saving the attribute lookup per call. */
  int direct;
  dlbpy_call_form form;
} dlbpy_type_entry;

#define DLBPY_CACHE_SIZE 16

typedef struct {
  PyTypeObject *tensor_type;
  /* dlbridge.StreamError: a stream value the memory's rules refuse. */
  PyObject *stream_error;
  /* Interned names. */
  PyObject *s_dlpack;
  PyObject *s_dlpack_device;
  PyObject *s_exchange_api;
  PyObject *s_requires_grad;
  /* Keyword-name tuples and argument values for calling producers. */
  PyObject *kw_mv;        /* ("max_version",) */
  PyObject *kw_mv_stream; /* ("max_version", "stream") */
  PyObject *kw_stream;    /* ("stream",) */
  PyObject *max_version; /* (DLPACK_MAJOR_VERSION, DLPACK_MINOR_VERSION) */
  dlbpy_type_entry cache[DLBPY_CACHE_SIZE];
  unsigned int cache_next;
} dlbpy_state;

/* The state of a module made from our definition. */
dlbpy_state *dlbpy_state_of_module(PyObject *module);

/* The state of the module that defined type (a Tensor type). */
dlbpy_state *dlbpy_state_of_type(PyTypeObject *type);

/* The state of the dlbridge module loaded in the current interpreter,
 * importing it when needed; NULL with an exception set when that fails.
 * For C entry points that receive no object of ours. */
dlbpy_state *dlbpy_state_current(void);

/* Drops every cached producer-type entry (module clear). */
void dlbpy_cache_clear(dlbpy_state *st);

/* ------------------------------------------------------------------------
 * Errors
 * ---------------------------------------------------------------------- */

/* Raises exc (or MemoryError for DLB_E_NOMEM, IndexError for DLB_E_RANGE)
 * with "what: <dlb_last_error()>", and returns NULL. */
PyObject *dlbpy_raise(dlb_status status, PyObject *exc, const char *what);

/* The same, returning -1. */
int dlbpy_fail(dlb_status status, PyObject *exc, const char *what);

/* The exception for a failed GPU request: RuntimeError when status is the
 * machine's state (no runtime, no GPU, a runtime that refuses or cannot),
 * ValueError otherwise. */
PyObject *dlbpy_gpu_exc(dlb_status status);

/* An exception saved across code that may run Python and must not clobber
 * an exception already set (destructors, deleters). */
typedef struct {
#if PY_VERSION_HEX >= 0x030C0000
  PyObject *exc;
#else
  PyObject *type, *value, *tb;
#endif
} dlbpy_saved_error;

void dlbpy_error_save(dlbpy_saved_error *saved);
/* Restores the saved exception; one raised meanwhile is reported with
 * PyErr_WriteUnraisable, since a destructor cannot raise. */
void dlbpy_error_restore(dlbpy_saved_error *saved);
/* Drops the saved exception. */
void dlbpy_error_discard(dlbpy_saved_error *saved);

/* ------------------------------------------------------------------------
 * Argument parsing (argparse.c)
 * ---------------------------------------------------------------------- */

/*
 * Parses a vectorcall argument list: names[0..posonly) are positional-only,
 * names[posonly..npos) positional or keyword, names[npos..] keyword-only;
 * out[i] receives a borrowed reference or stays as the caller initialised
 * it (NULL: not given). required is the count of leading names that must be
 * given. fname names the function in errors.
 */
int dlbpy_parse_args(const char *fname, PyObject *const *args,
                     Py_ssize_t nargsf, PyObject *kwnames,
                     const char *const *names, Py_ssize_t posonly,
                     Py_ssize_t npos, Py_ssize_t required, PyObject **out);

/* copy: None -> -1, False -> 0, True -> 1; anything else TypeError. */
int dlbpy_parse_copy(PyObject *obj, const char *what, int *out);

/* A device: "cpu", "cuda:1", or a (device_type, device_id) pair of ints.
 * TypeError for other types, ValueError for unknown or malformed ones. */
int dlbpy_parse_device(PyObject *obj, DLDevice *out);

/* A dtype name such as "float32", or an object whose name attribute is one
 * (a NumPy dtype). TypeError for other objects, ValueError for unknown
 * names. */
int dlbpy_parse_dtype(PyObject *obj, DLDataType *out);

/* A shape: an int or a sequence of ints >= 0, at most DLB_MAX_NDIM of them.
 * shape must hold DLB_MAX_NDIM entries. */
int dlbpy_parse_shape(PyObject *obj, int32_t *ndim, int64_t *shape);

/* An int, or an object with __index__ (bool refused), as int64.
 * TypeError for other types, OverflowError beyond 64 bits. */
int dlbpy_parse_int64(PyObject *obj, const char *what, int64_t *out);
/* The same, with values past 64 bits saturating to INT64_MIN / INT64_MAX. */
int dlbpy_parse_int64_saturating(PyObject *obj, const char *what,
                                 int64_t *out);

/* ------------------------------------------------------------------------
 * Tensor type (tensor_type.c)
 * ---------------------------------------------------------------------- */

/* Creates the Tensor type, adds it to module and stores it in st. */
int dlbpy_tensor_type_add(PyObject *module, dlbpy_state *st);

/* 1 when obj is a dlbridge.Tensor (of any loaded copy of the module). */
int dlbpy_tensor_check(PyObject *obj);

/* Wraps mt (an accepted tensor) as a new Tensor of st's type. Steals mt:
 * it is released on failure. */
PyObject *dlbpy_tensor_new(dlbpy_state *st, DLManagedTensorVersioned *mt);

/* The Tensor's tensor as a dlbridge tensor, wrapping a foreign one first
 * (the Tensor keeps the result). NULL with an exception on failure. */
const DLManagedTensorVersioned *dlbpy_tensor_owned(PyObject *self);

/* Methods defined in export.c. */
PyObject *dlbpy_tensor_dlpack(PyObject *self, PyObject *const *args,
                              Py_ssize_t nargsf, PyObject *kwnames);
PyObject *dlbpy_tensor_dlpack_device(PyObject *self, PyObject *unused);

/* Defined in buffer.c. */
int dlbpy_tensor_getbuffer(PyObject *self, Py_buffer *view, int flags);
void dlbpy_tensor_releasebuffer(PyObject *self, Py_buffer *view);
PyObject *dlbpy_tensor_cuda_array_interface(PyObject *self, void *closure);

/* Defined in elements.c: Tensor.tolist(), the values of a CPU-readable
 * tensor as nested lists of Python numbers. */
PyObject *dlbpy_tensor_tolist(PyObject *self, PyObject *unused);
/* value in t: whether any element equals value, as NumPy's `in` answers. */
int dlbpy_tensor_contains(PyObject *self, PyObject *value);

/* Defined in scalars.c: a one-element Tensor as a Python number (the
 * number slots and the item() and __complex__ methods). */
PyObject *dlbpy_tensor_item(PyObject *self, PyObject *unused);
int dlbpy_tensor_bool(PyObject *self);
PyObject *dlbpy_tensor_int(PyObject *self);
PyObject *dlbpy_tensor_float(PyObject *self);
PyObject *dlbpy_tensor_complex(PyObject *self, PyObject *unused);

/* ------------------------------------------------------------------------
 * Export and import
 * ---------------------------------------------------------------------- */

/*
 * The export core shared by __dlpack__, the exchange table and the C API:
 * a new managed tensor for the consumer, on device (NULL: the tensor's
 * own), copied when copy is 1 or the device differs (refused when copy is
 * 0). Its deleter may run on any thread. Clears IS_COPIED unless it
 * copied. Raises BufferError when the request cannot be met.
 */
int dlbpy_export(PyObject *tensor, const DLDevice *device, int copy,
                 DLManagedTensorVersioned **out);

/* 1 when m is a share dlbpy_export made (of an accepted tensor, so it
 * needs no validation), else 0. */
int dlbpy_is_light(const DLManagedTensorVersioned *m);

/* Releases such a share when the caller holds the GIL: what its deleter
 * does, without finding out whether the GIL is held. */
void dlbpy_light_release_holding_gil(DLManagedTensorVersioned *m);

/* The same two for the legacy struct of such a share. */
int dlbpy_is_light_legacy(const DLManagedTensor *m);
void dlbpy_light_legacy_release_holding_gil(DLManagedTensor *m);

/* A core share of such a share's source tensor, in *out; the share itself
 * is left to the caller. */
int dlbpy_light_to_core(const DLManagedTensorVersioned *light,
                        DLManagedTensorVersioned **out);

/* The options of an import (from_dlpack's keywords). */
typedef struct {
  int copy;           /* -1 None, 0 never copy, 1 always copy */
  int has_device;     /* 0: keep the producer's device */
  DLDevice device;
} dlbpy_import_opts;

/*
 * Imports any producer (a Tensor, an object with the exchange API or
 * __dlpack__, a DLPack capsule) as a new accepted tensor with opts applied
 * (opts may be NULL).
 */
int dlbpy_import(dlbpy_state *st, PyObject *obj, const dlbpy_import_opts *opts,
                 DLManagedTensorVersioned **out);

/* Applies opts (copy=, device=) to *mt, an accepted tensor, replacing it
 * by a copy when one is needed. On failure *mt has been released. */
int dlbpy_import_apply(const dlbpy_import_opts *opts,
                       DLManagedTensorVersioned **mt);

/* 1 when obj can be imported by dlbpy_import (a Tensor, a capsule, or an
 * object whose type has __dlpack__), else 0. Never raises. */
int dlbpy_is_producer(dlbpy_state *st, PyObject *obj);

/* from_dlpack(x, /, *, device=None, copy=None). */
PyObject *dlbpy_from_dlpack(PyObject *module, PyObject *const *args,
                            Py_ssize_t nargsf, PyObject *kwnames);

/* Imports an object exporting the buffer protocol (read-only when the
 * buffer is) as a zero-copy dlbridge tensor. */
int dlbpy_import_buffer(PyObject *obj, DLManagedTensorVersioned **out);

/* ------------------------------------------------------------------------
 * Capsules and foreign deleters (capsule.c)
 * ---------------------------------------------------------------------- */

/* A capsule named "dltensor_versioned" holding m. Steals m (released on
 * failure). */
PyObject *dlbpy_capsule_versioned(DLManagedTensorVersioned *m);

/* A capsule named "dltensor" holding m. Steals m. */
PyObject *dlbpy_capsule_legacy(DLManagedTensor *m);

/* Consumes a DLPack capsule: validates it, takes over its deleter and
 * renames it "used_...". A capsule that fails validation is left unused, so
 * its own destructor still calls the deleter. BufferError for a used or
 * invalid capsule, bad_name_exc for a capsule that is not DLPack's. */
int dlbpy_capsule_consume(PyObject *capsule, PyObject *bad_name_exc,
                          DLManagedTensorVersioned **out);

/*
 * Adopts a tensor from another producer: validates it and returns a dlbridge
 * tensor whose last release calls foreign's deleter exactly once, holding
 * the GIL, and never once the interpreter is finalizing on a thread that
 * does not hold it. A dlbridge tensor is taken as it is. Takes ownership on
 * success; on failure foreign is untouched. Sets no Python exception:
 * dlb_last_error() says what is wrong.
 */
dlb_status dlbpy_adopt_versioned(DLManagedTensorVersioned *foreign,
                                 DLManagedTensorVersioned **out);

/* Validates foreign and returns it as an accepted tensor: itself when it
 * is ours or already in our form, else adopted. Ownership as for
 * dlbpy_adopt_versioned. */
dlb_status dlbpy_accept_versioned(DLManagedTensorVersioned *foreign,
                                  DLManagedTensorVersioned **out);

/* Releases an accepted tensor. Holding the GIL; keeps a pending
 * exception. Accepts NULL. */
void dlbpy_release(DLManagedTensorVersioned *m);

/* Turns the accepted tensor *m into a dlbridge tensor in place. On failure
 * (an exception set) *m is unchanged and still owned by the caller. */
int dlbpy_own(DLManagedTensorVersioned **m);
/* The legacy struct has no flags; flags gives the new tensor's. */
dlb_status dlbpy_adopt_legacy(DLManagedTensor *foreign, uint64_t flags,
                              DLManagedTensorVersioned **out);

/* Releases m (a producer's tensor, whose deleter may run Python code)
 * while an exception is set, keeping it. */
void dlbpy_release_keeping_error(DLManagedTensorVersioned *m);

/* Runs fn(ctx) holding the GIL when the interpreter is alive; does nothing
 * (leaks) when it is gone or finalizing on a thread without the GIL. Keeps
 * a pending exception. Callable from any thread. */
void dlbpy_call_with_gil(void (*fn)(void *), void *ctx);

/* ------------------------------------------------------------------------
 * Exchange API (exchange_api.c), C API (capi.c), constructors
 * ---------------------------------------------------------------------- */

/* The static table Tensor publishes. */
extern const DLPackExchangeAPI dlbpy_exchange_api;

/* Publishes the table on type: __dlpack_c_exchange_api__ (capsule) and
 * __c_dlpack_exchange_api__ (int). */
int dlbpy_exchange_publish(PyTypeObject *type);

/* Adds the _C_API capsule to module. */
int dlbpy_capi_add(PyObject *module);

/* files.c: load_npy() and runtimes(). */
PyObject *dlbpy_load_npy(PyObject *module, PyObject *const *args,
                         Py_ssize_t nargsf, PyObject *kwnames);
PyObject *dlbpy_runtimes(PyObject *module, PyObject *unused);

PyObject *dlbpy_empty(PyObject *module, PyObject *const *args,
                      Py_ssize_t nargsf, PyObject *kwnames);
PyObject *dlbpy_zeros(PyObject *module, PyObject *const *args,
                      Py_ssize_t nargsf, PyObject *kwnames);
PyObject *dlbpy_full(PyObject *module, PyObject *const *args,
                     Py_ssize_t nargsf, PyObject *kwnames);
PyObject *dlbpy_arange(PyObject *module, PyObject *const *args,
                       Py_ssize_t nargsf, PyObject *kwnames);
PyObject *dlbpy_asarray(PyObject *module, PyObject *const *args,
                        Py_ssize_t nargsf, PyObject *kwnames);

/* ------------------------------------------------------------------------
 * Accelerator memory (gpu.c)
 * ---------------------------------------------------------------------- */

/* pin(obj, /, kind='cuda_host'). */
PyObject *dlbpy_pin(PyObject *module, PyObject *const *args,
                    Py_ssize_t nargsf, PyObject *kwnames);
/* device_of(x, /). */
PyObject *dlbpy_device_of(PyObject *module, PyObject *x);
/* prefetch(t, /, device, stream=None). */
PyObject *dlbpy_prefetch(PyObject *module, PyObject *const *args,
                         Py_ssize_t nargsf, PyObject *kwnames);
/* advise(t, /, advice, device=None). */
PyObject *dlbpy_advise(PyObject *module, PyObject *const *args,
                       Py_ssize_t nargsf, PyObject *kwnames);
/* synchronize(x, /). */
PyObject *dlbpy_synchronize(PyObject *module, PyObject *x);

/* 1 when copying t is worth running without the GIL (large copies). */
int dlbpy_copy_is_large(const DLTensor *t);

/* A compact, writable copy of mt on device, made by the core's copy engine
 * (dlb_tensor_copy: IS_COPIED set), without the GIL when it is large.
 * Raises exc (MemoryError for lack of memory) when it cannot be made. */
int dlbpy_copy_to(const DLManagedTensorVersioned *mt, DLDevice device,
                  PyObject *exc, DLManagedTensorVersioned **out);

/* ------------------------------------------------------------------------
 * Elements (elements.c): reading and writing one element of a dtype
 * ---------------------------------------------------------------------- */

/* 1 when elements of dtype can be read into and written from Python numbers
 * (bool, int, uint, float16/32/64, bfloat16, complex64/128), else 0. */
int dlbpy_dtype_has_scalars(DLDataType dtype);

/* Writes value, converted to dtype, at p. TypeError / OverflowError /
 * ValueError when value does not convert. */
int dlbpy_element_set(DLDataType dtype, void *p, PyObject *value);

/* Writes the real number v, converted to dtype (truncated toward zero for
 * integer types, range-checked), at p. */
int dlbpy_element_set_double(DLDataType dtype, void *p, double v);

/* Writes the integer v, converted to dtype (range-checked for integer
 * types), at p. */
int dlbpy_element_set_int64(DLDataType dtype, void *p, int64_t v);

/* The element at p as a Python number. */
PyObject *dlbpy_element_get(DLDataType dtype, const void *p);

/* The struct-module format of dtype for the buffer protocol, or NULL when
 * it has none. */
const char *dlbpy_dtype_buffer_format(DLDataType dtype);

/* The __array_interface__ type string of dtype ("<f4"), or NULL. */
const char *dlbpy_dtype_typestr(DLDataType dtype);

/* Python's version helpers that 3.9 lacks under the public names. */
#if PY_VERSION_HEX >= 0x030D0000
#define DLBPY_IS_FINALIZING() Py_IsFinalizing()
#else
#define DLBPY_IS_FINALIZING() _Py_IsFinalizing()
#endif

/* An attribute look-up that returns 0 for a missing attribute instead of
 * raising AttributeError (1 found, -1 error). */
#if PY_VERSION_HEX >= 0x030D0000
#define DLBPY_GET_OPTIONAL_ATTR(o, name, out) PyObject_GetOptionalAttr(o, name, out)
#else
#define DLBPY_GET_OPTIONAL_ATTR(o, name, out) _PyObject_LookupAttr(o, name, out)
#endif

#endif /* DLBPY_H */
