/*
 * dlbpy.h -- what the sources of the dlbridge extension share. Not installed.
 *
 * Internal names use the dlbpy_ prefix. Every function that returns a
 * PyObject * returns a new reference, or NULL with an exception set; every
 * function that returns int returns 0 on success and -1 with an exception set,
 * with two kinds of exception that say so:
 * - a question that cannot fail returns bool;
 * - a dlbpy_try_ function returns 1 when it did its work, 0 when it declined
 *   (another route must do it), -1 with an exception set; so does a question
 *   that can fail, named as one (dlbpy_table_may_skip_checks).
 * Type slots and the C API table's entries keep the contracts their protocols
 * define (sq_contains, nb_bool, DLBridge_CAPI.Check).
 */
#ifndef DLBPY_H
#define DLBPY_H

#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdbool.h>

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
  /* The same for the type's metaclass, whose attributes type(x).name
   * finds too (the exchange table); unused when the metaclass is type. */
  unsigned int meta_tag;
  /* The type's exchange table, or NULL when it has none usable. */
  const DLPackExchangeAPI *api;
  /* The capsule that holds api, kept so the table outlives the entry. */
  PyObject *api_owner;
  /* What the type's MRO holds under __dlpack__ (the descriptor itself,
   * not what it gives) when the entry was made, or NULL: a tag change that
   * leaves it as it was (a class attribute counting calls) keeps the
   * learned form. */
  PyObject *method;
  /* 1 when calling method with the object first is exactly x.__dlpack__:
   * a plain function or method descriptor, found by the generic attribute
   * look-up with no instance dict to shadow it. Anything else (a
   * staticmethod, a classmethod, a property, a callable object, an
   * instance attribute, __getattr__) is looked up on the object per call,
   * as Python looks up x.__dlpack__. */
  int direct;
  /* 1 when method answers a max_version keyword alike whatever the
   * object: a function with neither that parameter nor **kwargs, a C
   * method. Only then is DLBPY_FORM_LEGACY learned: a method
   * that may take it (a proxy passing its keywords on) can front a new
   * producer, whose answer to the keyword-less call would be the legacy
   * struct, read-only on import, where max_version gets the versioned. */
  int old_only;
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
  PyObject *device_types; /* DLDeviceType's members by value, None between */
  /* The memory of the last Tensor deallocated and of the last share of
   * one released, kept for the next (dlbpy_tensor_new, export.c), or
   * NULL. */
  void *spare_tensor;
  void *spare_light;
  dlbpy_type_entry cache[DLBPY_CACHE_SIZE];
  unsigned int cache_next;
} dlbpy_state;

/* Adds DLDeviceType, an IntEnum of DLPack's device types, to module and
 * keeps its members in st. 0, or -1 with an exception. */
int dlbpy_device_types_add(PyObject *module, dlbpy_state *st);

/* DLDeviceType's member for type (new), or a plain int for a value DLPack
 * does not define; NULL with an exception when out of memory. */
PyObject *dlbpy_device_type_object(dlbpy_state *st, DLDeviceType type);

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
/* dlbpy_raise, unless an exception is set already (a more precise one). */
PyObject *dlbpy_raise_unless_set(dlb_status status, PyObject *exc,
                                 const char *what);

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

/* Replaces the exception set (one of type exc) with one of the same type
 * whose message is "<context>: <its message>"; any other exception, or
 * none, is left as it is. */
void dlbpy_error_add_context(PyObject *exc, const char *context);

/* ------------------------------------------------------------------------
 * Argument parsing (argparse.c)
 * ---------------------------------------------------------------------- */

/* How a parameter may be passed, in the order a signature lists them. */
typedef enum {
  DLBPY_POSONLY,  /* required, by position only */
  DLBPY_REQUIRED, /* required, by position or keyword */
  DLBPY_OPTIONAL, /* optional, by position or keyword */
  DLBPY_KWONLY    /* optional, by keyword only */
} dlbpy_param_kind;

/* One parameter of a signature, tied to the variable that receives it. */
typedef struct {
  const char *name;
  dlbpy_param_kind kind;
  /* Receives a borrowed reference, or keeps the caller's value (NULL: not
   * given). */
  PyObject **value;
} dlbpy_param;

/*
 * Parses a vectorcall argument list against params[0..nparams), listed in
 * signature order (kinds never decrease), storing each argument given
 * through its parameter's value pointer. fname names the function in
 * errors. Call sites spell the signature where they read the arguments:
 *
 *   PyObject *t = NULL, *stream = NULL;
 *   dlbpy_param params[] = {{"t", DLBPY_POSONLY, &t},
 *                           {"stream", DLBPY_KWONLY, &stream}};
 *   if (dlbpy_parse_args("f", args, nargsf, kwnames, params,
 *                        DLBPY_NPARAMS(params)) < 0) ...
 */
int dlbpy_parse_args(const char *fname, PyObject *const *args,
                     Py_ssize_t nargsf, PyObject *kwnames,
                     const dlbpy_param *params, Py_ssize_t nparams);
#define DLBPY_NPARAMS(params) ((Py_ssize_t)(sizeof(params) / sizeof *(params)))

/* The UTF-8 text of str (borrowed from it), which names a what ("dtype",
 * "device", ...); NULL with ValueError when it holds a NUL character, which
 * would end the name early for the C parsers, or a lone surrogate, which
 * has no UTF-8. */
const char *dlbpy_name_text(PyObject *str, const char *what);

/* Whether the exception set may be replaced by one that says more: an
 * Exception, not a MemoryError. Interrupts (KeyboardInterrupt, SystemExit)
 * and a lack of memory must reach the caller as they are. */
int dlbpy_error_replaceable(void);

/* copy: None -> -1, False -> 0, True -> 1; anything else TypeError. */
int dlbpy_parse_copy(PyObject *obj, const char *what, int *out);

/* A device: "cpu", "cuda:1", or a (device_type, device_id) pair of ints.
 * TypeError for other types, ValueError for unknown or malformed ones; a
 * host-type kind (cpu, cuda_host, rocm_host, cuda_managed) takes only
 * device_id 0, as a name or as a pair. */
int dlbpy_parse_device(PyObject *obj, DLDevice *out);

/* As dlbpy_parse_device, for a device kind given as another parameter:
 * what names it in messages ("pin(): kind"). */
int dlbpy_parse_device_named(PyObject *obj, const char *what, DLDevice *out);

/* As dlbpy_parse_device, for a pair a producer's __dlpack_device__
 * returned (named what in messages): a host-type kind's device_id is read
 * as 0, whatever it is (as an import reads a struct's). */
int dlbpy_parse_reported_device(PyObject *obj, const char *what,
                                DLDevice *out);

/* dtype_arg.c: a dtype as users pass it elsewhere: a name ("float32"), a
 * NumPy code ("f4", "<i8", "?"), a NumPy dtype or scalar type, a PyTorch
 * dtype, or bool, int, float, complex (as NumPy reads them). TypeError for
 * other objects, ValueError for unknown names and foreign byte order; both
 * messages list the accepted forms. */
int dlbpy_parse_dtype(PyObject *obj, DLDataType *out);

/* A shape: an int or a sequence of ints >= 0, at most DLB_MAX_NDIM of them.
 * shape must hold DLB_MAX_NDIM entries. */
int dlbpy_parse_shape(PyObject *obj, int32_t *ndim, int64_t *shape);

/* 1 when obj is read as one int where a sequence of ints could stand (a
 * shape, reshape's and permute's arguments): an int, or an object with
 * __index__ that has no length (a NumPy array of ints is a sequence, a 0-d
 * one an int); 0 when not; -1 with an exception set. */
int dlbpy_is_one_int(PyObject *obj);

/* tuple(seq), a snapshot of a sequence of extents or axes: ValueError
 * naming what when it has more than DLB_MAX_NDIM items, found from its
 * length before any tuple is built, or when an item its length promises
 * raises IndexError. Only an iterable without a length is iterated, at
 * most DLB_MAX_NDIM + 1 items. */
PyObject *dlbpy_dims_tuple(PyObject *seq, const char *what);

/* A list of the n items seq's __len__ gives, read by index (iterating
 * would never end for a __getitem__ that never raises IndexError), grown
 * item by item and noticing Ctrl-C: ValueError naming what when an item
 * below n raises IndexError. */
PyObject *dlbpy_items_by_index(PyObject *seq, Py_ssize_t n, const char *what);

/* obj as an exact int when it is an integer: 1 with *out a new reference;
 * 0 when it is not: its type has no __index__, or its __index__ refuses
 * this value with TypeError (a 0-d float array or tensor: the slot is the
 * type's, the answer the value's); -1 with any other exception set. */
int dlbpy_try_index(PyObject *obj, PyObject **out);

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

/* Whether obj is a dlbridge.Tensor (of any loaded copy of the module). */
bool dlbpy_tensor_check(PyObject *obj);

/* Wraps mt (an accepted tensor) as a new Tensor of st's type. Steals mt:
 * it is released on failure. */
PyObject *dlbpy_tensor_new(dlbpy_state *st, DLManagedTensorVersioned *mt);

/* The Tensor's tensor as a dlbridge tensor, wrapping a foreign one first
 * (the Tensor keeps the result). NULL with an exception on failure. */
const DLManagedTensorVersioned *dlbpy_tensor_owned(PyObject *self);

/* Defined in indexing.c: t[key] (a view; ints, slices, None, one
 * Ellipsis) and t[key] = value (written through that view, value
 * broadcast). */
PyObject *dlbpy_tensor_subscript(PyObject *self, PyObject *key);
int dlbpy_tensor_ass_subscript(PyObject *self, PyObject *key,
                               PyObject *value);

/* Methods defined in export.c. */
PyObject *dlbpy_tensor_dlpack(PyObject *self, PyObject *const *args,
                              Py_ssize_t nargsf, PyObject *kwnames);
PyObject *dlbpy_tensor_dlpack_device(PyObject *self, PyObject *unused);

/* Defined in buffer.c. */
int dlbpy_tensor_getbuffer(PyObject *self, Py_buffer *view, int flags);
/* Tensor.__array__(dtype=None, copy=None), NumPy 2's signature. */
PyObject *dlbpy_tensor_array(PyObject *self, PyObject *const *args,
                             Py_ssize_t nargsf, PyObject *kwnames);
void dlbpy_tensor_releasebuffer(PyObject *self, Py_buffer *view);
PyObject *dlbpy_tensor_cuda_array_interface(PyObject *self, void *closure);

/* Defined in elements.c: Tensor.tolist(), the values of a CPU-readable
 * tensor as nested lists of Python numbers. */
PyObject *dlbpy_tensor_tolist(PyObject *self, PyObject *unused);
/* made, an array built from tensor's tolist() values, in tensor's shape:
 * the lists stop at the first empty dimension ([] for shape (0, 3)), so an
 * empty one is reshaped. Steals made (NULL passes through); returns a new
 * reference or NULL with an exception set. */
PyObject *dlbpy_in_shape_of(PyObject *made, PyObject *tensor);
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

/* Whether m is a share dlbpy_export made (of an accepted tensor, so it
 * needs no validation). */
bool dlbpy_is_light(const DLManagedTensorVersioned *m);

/* Releases such a share when the caller holds the GIL: what its deleter
 * does, without finding out whether the GIL is held. */
void dlbpy_light_release_holding_gil(DLManagedTensorVersioned *m);

/* The same two for the legacy struct of such a share. */
bool dlbpy_is_light_legacy(const DLManagedTensor *m);
void dlbpy_light_legacy_release_holding_gil(DLManagedTensor *m);

/* Whether the light share m, back from a consumer that may have rewritten
 * it, still describes its source's data: 1 (its flags made no wider than
 * the source's), 0 when it describes something else (to be judged as a
 * foreign tensor), -1 with an exception set for what would misread the
 * source's memory (an ndim over its arrays, padding its units lack). */
int dlbpy_light_intact(DLManagedTensorVersioned *m);

/* 0 when t, a share's description (ctx its manager_ctx), reads no further
 * in the arrays the share was made with than they go; -1 with an
 * exception set when a raised ndim or moved pointer would. */
int dlbpy_light_arrays_fit(const DLTensor *t, const void *ctx);
/* Whether t (with flags), a share's struct as its consumer left it, lies
 * within the memory of the tensor the share was made from (ctx: the
 * share's manager_ctx): 0, or -1 with BufferError. */
int dlbpy_light_bounded(const DLTensor *t, uint64_t flags, const void *ctx);

/* The bits of the sub-byte units of the light legacy struct m when they
 * are packed and m still describes its source; 0 otherwise. */
unsigned dlbpy_light_legacy_packed_bits(const DLManagedTensor *m);

/* Turns such a legacy share back into a versioned one in place, with
 * flags (never wider than its source's), and returns 1; returns 0, leaving
 * m as it is, when a consumer rewrote its description or flags other than
 * read-only are asked for (the core checks those). */
int dlbpy_try_light_from_legacy(DLManagedTensor *m, uint64_t flags,
                            DLManagedTensorVersioned **out);

/* A core share of such a share's source tensor, in *out; the share itself
 * is left to the caller. */
int dlbpy_light_to_core(const DLManagedTensorVersioned *light,
                        DLManagedTensorVersioned **out);

/* A DLPack capsule taken by dlbpy_capsule_take, until it is settled. */
typedef struct dlbpy_claim dlbpy_claim;
typedef struct {
  PyObject *capsule; /* borrowed; NULL when nothing is pending */
  const char *name;  /* the producer's name pointer, to give back */
  dlbpy_claim *claim;
  /* The view as taken (borrowed: the caller holds it), its device and
   * the flags it was given. */
  const DLManagedTensorVersioned *view;
  DLDevice device;
  uint64_t flags;
} dlbpy_taken;

/* The options of an import (from_dlpack's keywords). */
typedef struct {
  int copy;           /* -1 None, 0 never copy, 1 always copy */
  int has_device;     /* 0: keep the producer's device */
  DLDevice device;
  int in_place;       /* 1: device= relabels memory it can address */
  int apply_later;    /* 1: the producer is asked for copy= and device=, but
                         the caller applies them (dlbpy_import_apply) after
                         checks of its own */
} dlbpy_import_opts;

/*
 * Imports any producer (a Tensor, an object with the exchange API or
 * __dlpack__, a DLPack capsule) as a new accepted tensor with opts applied
 * (opts may be NULL).
 */
int dlbpy_import(dlbpy_state *st, PyObject *obj, const dlbpy_import_opts *opts,
                 DLManagedTensorVersioned **out);

/*
 * As dlbpy_import, for callers that can still fail after the import: a
 * DLPack capsule is taken tentatively (dlbpy_capsule_take), and *taken is
 * pending until the caller settles it with dlbpy_capsule_settle, keep 1
 * once it succeeded, 0 once it released *out and all it made on failure,
 * which leaves the capsule unconsumed. For anything but a capsule nothing
 * is pending. On failure here nothing is pending either.
 */
int dlbpy_import_tentative(dlbpy_state *st, PyObject *obj,
                           const dlbpy_import_opts *opts,
                           DLManagedTensorVersioned **out,
                           dlbpy_taken *taken);

/* Applies opts (copy=, device=) to *mt, an accepted tensor, replacing it
 * by a copy when one is needed. On failure *mt has been released. */
int dlbpy_import_apply(const dlbpy_import_opts *opts,
                       DLManagedTensorVersioned **mt);

/* 1 when obj can be imported by dlbpy_import (a Tensor, a capsule, or an
 * object with a __dlpack__ attribute, as hasattr(obj, '__dlpack__') says,
 * other than None), 0 when it cannot, -1 with an exception when the look-up raised anything
 * but AttributeError. */
int dlbpy_is_producer(dlbpy_state *st, PyObject *obj);

/* from_dlpack(x, /, *, device=None, copy=None). */
PyObject *dlbpy_from_dlpack(PyObject *module, PyObject *const *args,
                            Py_ssize_t nargsf, PyObject *kwnames);

/* Imports an object exporting the buffer protocol (read-only when the
 * buffer is) as a zero-copy dlbridge tensor. */
int dlbpy_import_buffer(PyObject *obj, DLManagedTensorVersioned **out);

/* The dtype of obj's buffer when it has no dimensions (a NumPy scalar):
 * 1 with *out set, 0 when it has dimensions or a format with no dtype
 * (the import then says so), -1 with an exception when there is none. */
int dlbpy_buffer_scalar_dtype(PyObject *obj, DLDataType *out);

/* A Py_buffer held for a tensor, allocated with PyMem_RawMalloc: released
 * and freed by dlbpy_buffer_free (GIL held) or by dlbpy_release_buffer
 * (a dlb_release_fn, which takes the GIL). */
void dlbpy_buffer_free(void *ctx);
void dlbpy_release_buffer(void *ctx);

/* A tensor of desc over the memory of view (a held dlbpy_buffer_free
 * buffer): sharing the owner of the Tensor that exported it, when one did,
 * and releasing view, else owning view. On failure -1 with exc set (what
 * names the call), and view is still the caller's. */
int dlbpy_buffer_wrap(Py_buffer *view, const DLTensor *desc, uint64_t flags,
                      PyObject *exc, const char *what,
                      DLManagedTensorVersioned **out);

/* ------------------------------------------------------------------------
 * Capsules and foreign deleters (capsule.c)
 * ---------------------------------------------------------------------- */

/* A capsule named "dltensor_versioned" holding m. Steals m (released on
 * failure). */
PyObject *dlbpy_capsule_versioned(DLManagedTensorVersioned *m);

/* A capsule named "dltensor" holding m. Steals m. */
PyObject *dlbpy_capsule_legacy(DLManagedTensor *m);

/* Borrows the tensor of an unconsumed DLPack capsule without consuming
 * it, for calls that only look at or act on its memory (device_of,
 * prefetch, advise): *t points into the capsule's struct, valid while the
 * capsule lives unconsumed. Returns 1 with *t set when obj is such a
 * capsule and its struct validates (one of ours bounded as its import
 * bounds it), 0 when obj is anything else (a used or foreign capsule
 * included: the import reports what is wrong), -1 with BufferError for a
 * struct it refuses. */
int dlbpy_capsule_peek(PyObject *obj, const DLTensor **t);

/* Consumes a DLPack capsule: validates it, takes over its deleter and
 * renames it "used_...". A capsule that fails validation is left unused, so
 * its own destructor still calls the deleter. BufferError for a used or
 * invalid capsule, bad_name_exc for a capsule that is not DLPack's. */
int dlbpy_capsule_consume(PyObject *capsule, PyObject *bad_name_exc,
                          DLManagedTensorVersioned **out);

/*
 * Takes a DLPack capsule tentatively, for calls that can still fail after
 * the import (a copy, a pin, a check of the result): renames it "used_..."
 * as consuming does, so that nobody else takes it meanwhile, and returns in
 * *view a new tensor of ours over its struct's memory, validated as an
 * import validates it, without running the struct's deleter yet. Returns 1
 * with *taken pending; -1 with an exception (as dlbpy_capsule_consume
 * raises), the capsule left as it was. The caller then calls
 * dlbpy_capsule_settle exactly once.
 */
int dlbpy_capsule_take(PyObject *capsule, PyObject *bad_name_exc,
                       dlbpy_taken *taken, DLManagedTensorVersioned **view);

/* Ends a take. keep: the capsule stays consumed, and its struct's deleter
 * runs once the view and every tensor sharing its memory are released
 * (now, if they are). !keep, after the caller released the view and all it
 * made: the capsule gets its name back, unconsumed, and a later consumer
 * can take it; if something still shares the memory the capsule stays
 * consumed instead. Does nothing when nothing is pending; keeps a pending
 * exception. */
void dlbpy_capsule_settle(dlbpy_taken *taken, int keep);

/* dlbpy_capsule_settle(taken, 1) for a caller whose result *mt may be the
 * view itself, unchanged: then the capsule's struct is taken as consuming
 * takes it (a struct dlbridge made goes back to its one owner, so loops of
 * exports and imports stay flat) and *mt becomes that, the view released;
 * when that fails the view is kept, which serves as well. */
void dlbpy_capsule_settle_result(dlbpy_taken *taken,
                                 DLManagedTensorVersioned **mt);

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
 * dlbpy_adopt_versioned; on failure an exception may be set already
 * (dlbpy_raise_unless_set keeps it), else dlb_last_error() says why. */
dlb_status dlbpy_accept_versioned(DLManagedTensorVersioned *foreign,
                                  DLManagedTensorVersioned **out);

/* Releases an accepted tensor. Holding the GIL; keeps a pending
 * exception. Accepts NULL. */
void dlbpy_release(DLManagedTensorVersioned *m);

/* Turns the accepted tensor *m into a dlbridge tensor in place. On failure
 * (an exception set) *m is unchanged and still owned by the caller. */
int dlbpy_own(DLManagedTensorVersioned **m);
/* The legacy struct has no flags; flags gives the new tensor's. A legacy
 * struct dlbridge made (a share's, or the core's of a dlbridge tensor)
 * gives back what it was made from instead of a wrapper around it. On
 * failure an exception may be set already (dlbpy_raise_unless_set). */
dlb_status dlbpy_adopt_legacy(DLManagedTensor *foreign, uint64_t flags,
                              DLManagedTensorVersioned **out);

/* Releases m (a producer's tensor, whose deleter may run Python code)
 * while an exception is set, keeping it. */
void dlbpy_release_keeping_error(DLManagedTensorVersioned *m);

/* Runs fn(ctx) holding the GIL when the interpreter is alive; does nothing
 * (leaks) when it is gone or finalizing on a thread without the GIL. Keeps
 * a pending exception. Callable from any thread. */
void dlbpy_call_with_gil(void (*fn)(void *), void *ctx);
/* Registers the atexit callback after which dlbpy_call_with_gil leaves
 * what threads without the GIL release (module exec). */
int dlbpy_watch_exit(void);

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

/* Writes the numel elements of mt (compact, CPU memory; sub-byte units a
 * byte each) from arg, the caller's. */
typedef int (*dlbpy_fill_fn)(DLManagedTensorVersioned *mt, int64_t numel,
                             void *arg);

/* A new compact tensor on device (shared memory when shared is set),
 * filled by fill on the CPU and copied over to memory the CPU cannot
 * write, or left uninitialised when fill is NULL. */
int dlbpy_make(DLDevice device, DLDataType dtype, int32_t ndim,
               const int64_t *shape, int shared, dlbpy_fill_fn fill, void *arg,
               DLManagedTensorVersioned **out);

/* TypeError naming fname() unless Python numbers convert to dtype. */
int dlbpy_check_scalar_dtype(DLDataType dtype, const char *fname);

/* nest.c: asarray of a Python number or a nested sequence (of numbers and
 * of arrays: producers and buffer exporters, at any depth) as a new cpu
 * tensor of dtype given, or of the dtype the values need when given is
 * NULL, then opts applied (may be NULL). ValueError naming the place where
 * the sequences are ragged. DLPack capsules among the items are consumed
 * only when the whole call succeeds. */
int dlbpy_nest_values(dlbpy_state *st, PyObject *obj, const DLDataType *given,
                      const dlbpy_import_opts *opts,
                      DLManagedTensorVersioned **out);

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

/* Whether copying t is worth running without the GIL (large copies). */
bool dlbpy_copy_is_large(const DLTensor *t);
/* dlb_copy(src, dst), without the GIL when dst is large: the caller's
 * references keep both tensors' memory alive while other threads run. */
dlb_status dlbpy_copy_tensor(const DLTensor *src, const DLTensor *dst);
/* Copies at least this large run without the GIL: below it, releasing and
 * taking the GIL back costs more than other threads gain. */
#define DLBPY_NOGIL_COPY_BYTES ((int64_t)1 << 18)

/* A compact, writable copy of mt on device, made by the core's copy engine
 * (dlb_tensor_copy: IS_COPIED set), without the GIL when it is large.
 * Raises exc (MemoryError for lack of memory) when it cannot be made. */
int dlbpy_copy_to(const DLManagedTensorVersioned *mt, DLDevice device,
                  PyObject *exc, DLManagedTensorVersioned **out);

/* ------------------------------------------------------------------------
 * Elements (elements.c): reading and writing one element of a dtype
 * ---------------------------------------------------------------------- */

/* Whether elements of dtype can be read into and written from Python
 * numbers (bool, int, uint, float16/32/64, bfloat16, complex64/128). */
bool dlbpy_dtype_has_scalars(DLDataType dtype);

/* Whether elements of dtype can be read as Python numbers: the types above
 * and int1..int4, uint1..uint4, complex32, the float8, float6 and float4
 * types (as float). */
bool dlbpy_dtype_readable(DLDataType dtype);

/* Whether mt holds sub-byte elements packed (not one a byte). */
bool dlbpy_is_packed(const DLManagedTensorVersioned *mt);
/* Packs n units of `bits` bits (1 to 8) into dst from a byte each (their
 * low bits), little-bit-endian from bit 0 of dst; other bits of dst's
 * bytes stay. */
void dlbpy_pack_units(unsigned char *dst, unsigned bits,
                      const unsigned char *units, int64_t n);

/* Element k of a compact run of packed sub-byte elements from base. */
PyObject *dlbpy_element_get_packed(DLDataType dtype, const void *base,
                                   int64_t k);

/* The elements of packed mt that a basic index selects (index[d] where
 * is_index[d], slices[d] elsewhere) as a new read-only compact tensor in
 * *out, for selections no view can describe (not compact, or not starting
 * on a byte). Returns Py_None (borrowed), or NULL with IndexError. */
PyObject *dlbpy_packed_select_copy(const DLManagedTensorVersioned *mt,
                                   const unsigned char *is_index,
                                   const int64_t *index,
                                   const dlb_slice *slices,
                                   DLManagedTensorVersioned **out);

/* Writes value, converted to dtype, at p. TypeError / OverflowError /
 * ValueError when value does not convert. */
int dlbpy_element_set(DLDataType dtype, void *p, PyObject *value);

/* Writes the real number v, converted to dtype (truncated toward zero for
 * integer types, range-checked), at p. */
int dlbpy_element_set_double(DLDataType dtype, void *p, double v);

/* Writes the integer v, converted to dtype (range-checked for integer
 * types), at p. */
int dlbpy_element_set_int64(DLDataType dtype, void *p, int64_t v);

/* The element at p as a Python number (a sub-byte one in the low bits of
 * the byte at p). */
PyObject *dlbpy_element_get(DLDataType dtype, const void *p);

/* The struct-module format of dtype for the buffer protocol, or NULL when
 * it has none. */
const char *dlbpy_dtype_buffer_format(DLDataType dtype);

/* The __array_interface__ type string of dtype ("<f4"), or NULL. */
const char *dlbpy_dtype_typestr(DLDataType dtype);

/* ------------------------------------------------------------------------
 * Pickling and sharing (pickle.c, share.c)
 * ---------------------------------------------------------------------- */

/* Tensor.__reduce_ex__(protocol): the data by value (PickleBuffer from
 * protocol 5). */
PyObject *dlbpy_tensor_reduce_ex(PyObject *self, PyObject *protocol);
/* Tensor.__copy__() and __deepcopy__(memo): a copy of the data. */
PyObject *dlbpy_tensor_copy_copy(PyObject *self, PyObject *unused);
PyObject *dlbpy_tensor_deepcopy(PyObject *self, PyObject *memo);
/* _rebuild(data, dtype, shape, flags): a pickled tensor back. */
PyObject *dlbpy_rebuild(PyObject *module, PyObject *const *args,
                        Py_ssize_t nargsf, PyObject *kwnames);

/* Tensor.is_shared and Tensor.share_memory(). */
PyObject *dlbpy_tensor_is_shared(PyObject *self, void *closure);
PyObject *dlbpy_tensor_share_memory(PyObject *self, PyObject *unused);
/* share_export(t, /) -> (handle bytes, fd): the fd is the caller's. */
PyObject *dlbpy_share_export(PyObject *module, PyObject *t);
/* share_import(handle, fd, /, pin=None): fd is borrowed. */
PyObject *dlbpy_share_import(PyObject *module, PyObject *const *args,
                             Py_ssize_t nargsf, PyObject *kwnames);
/* A compact cpu tensor in shared memory (dlb_shared_alloc). */
int dlbpy_shared_alloc(DLDataType dtype, int32_t ndim, const int64_t *shape,
                       DLManagedTensorVersioned **out);

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
