/*
 * nest.c -- asarray of nested sequences: Python numbers and arrays (DLPack
 * producers and buffer exporters, dlbridge Tensors among them) at any
 * depth, in lists, tuples or any other sequence (__len__ and __getitem__),
 * read as NumPy reads them.
 *
 * Two passes. The scan finds the shape from the first item of each
 * sequence, down to a number or an array, checks every other item against
 * it and finds the dtype. It imports each array and reads each sequence
 * that is not a list or a tuple into a list of its own (a snapshot), since
 * reading those runs Python code (__dlpack__, __len__, __getitem__) that
 * the fill must not run again. The fill writes the values. Lists and
 * tuples are read live by both: a conversion (an item's __float__) may
 * change a list, and every size and every place is checked again, so a
 * change raises or is read, never read astray.
 */
#include <string.h>

#include "dlbpy.h"

static const DLDataType dlbpy_by_rank[] = {
    {kDLBool, 8, 1}, {kDLInt, 64, 1}, {kDLFloat, 32, 1}, {kDLComplex, 64, 1}};

/* What the scan found at one place that the fill reads again. */
typedef struct {
  PyObject *item;               /* the object there, a new reference */
  PyObject *snapshot;           /* a list of item's items, or NULL */
  DLManagedTensorVersioned *mt; /* item as a CPU-readable tensor, or NULL */
  /* A capsule item taken tentatively: consumed only once the whole call
   * succeeded, given back otherwise. */
  dlbpy_taken taken;
} dlbpy_nest_leaf;

typedef struct {
  dlbpy_state *st;
  /* -1 until the first path (obj[0][0]...) ends at a number, an array or
   * an empty sequence; shape[0..ndim) then. */
  int32_t ndim;
  int64_t shape[DLB_MAX_NDIM];
  /* The numbers' dtype: -1 none yet, else an index of dlbpy_by_rank. */
  int rank;
  /* The arrays' common dtype, once one is seen, and whether every array
   * has it (then no element needs converting). */
  bool arrays;
  bool arrays_alike;
  DLDataType array_dtype;
  /* dtype= was given: every array converts to it, so arrays without a
   * common dtype are no error. */
  bool given;
  /* The index at each depth of the item being read, for messages. */
  Py_ssize_t path[DLB_MAX_NDIM];
  dlbpy_nest_leaf *leaves;
  Py_ssize_t nleaves, room, next;
  int64_t ticks;
} dlbpy_nest;

/* Long scans and fills notice Ctrl-C: a list may hold millions of items,
 * and a sequence's __len__ may say anything. */
static int dlbpy_nest_tick(dlbpy_nest *nest) {
  if ((++nest->ticks & 0x3fff) != 0) return 0;
  return PyErr_CheckSignals();
}

/* ------------------------------------------------------------------------
 * Messages
 * ---------------------------------------------------------------------- */

/* Room for "obj" and DLB_MAX_NDIM indices, or a tuple of as many int64s. */
#define DLBPY_NEST_TEXT (DLB_MAX_NDIM * 24 + 8)

/* "obj[1][0]": the item at depth dim on the path being read, or on the
 * first path (all indices 0) when first is set. */
static void dlbpy_nest_where(const dlbpy_nest *nest, int32_t dim, bool first,
                             char *buf) {
  size_t at = (size_t)PyOS_snprintf(buf, DLBPY_NEST_TEXT, "obj");
  for (int32_t d = 0; d < dim && at < DLBPY_NEST_TEXT; d++)
    at += (size_t)PyOS_snprintf(buf + at, DLBPY_NEST_TEXT - at, "[%zd]",
                                first ? (Py_ssize_t)0 : nest->path[d]);
}

/* "(2, 3)", "(2,)", "()". */
static void dlbpy_shape_text(int32_t ndim, const int64_t *shape, char *buf) {
  size_t at = (size_t)PyOS_snprintf(buf, DLBPY_NEST_TEXT, "(");
  for (int32_t d = 0; d < ndim && at < DLBPY_NEST_TEXT; d++)
    at += (size_t)PyOS_snprintf(buf + at, DLBPY_NEST_TEXT - at, "%s%lld",
                                d > 0 ? ", " : "", (long long)shape[d]);
  if (at < DLBPY_NEST_TEXT)
    PyOS_snprintf(buf + at, DLBPY_NEST_TEXT - at, ndim == 1 ? ",)" : ")");
}

/* ValueError: the item at depth dim is found ("has length 3", "is a
 * number"), which the shape the first items gave cannot hold. */
static int dlbpy_nest_ragged(const dlbpy_nest *nest, int32_t dim,
                             const char *found) {
  char here[DLBPY_NEST_TEXT], first[DLBPY_NEST_TEXT], shape[DLBPY_NEST_TEXT];
  dlbpy_nest_where(nest, dim, false, here);
  dlbpy_nest_where(nest, dim, true, first);
  dlbpy_shape_text(nest->ndim - dim, nest->shape + dim, shape);
  PyErr_Format(PyExc_ValueError,
               "asarray(): the nested sequences have an inhomogeneous shape: "
               "%s %s, where %s has shape %s",
               here, found, first, shape);
  return -1;
}

static int dlbpy_nest_too_deep(void) {
  PyErr_Format(PyExc_ValueError,
               "asarray(): nesting deeper than %d dimensions", DLB_MAX_NDIM);
  return -1;
}

/* The fill found something other than what the scan did. */
static int dlbpy_nest_changed(void) {
  PyErr_SetString(PyExc_ValueError,
                  "asarray(): a sequence changed size or items while it "
                  "was read");
  return -1;
}

/* ------------------------------------------------------------------------
 * Dtypes
 * ---------------------------------------------------------------------- */

/* NumPy's kinds, in the order promotion climbs them. */
typedef enum {
  DLBPY_KIND_BOOL,
  DLBPY_KIND_UINT,
  DLBPY_KIND_INT,
  DLBPY_KIND_FLOAT,
  DLBPY_KIND_COMPLEX,
  DLBPY_KIND_OTHER /* bfloat16, float8, ...: no NumPy rule */
} dlbpy_kind_order;

static dlbpy_kind_order dlbpy_kind_of(DLDataType t) {
  if (t.lanes != 1) return DLBPY_KIND_OTHER;
  switch (t.code) {
    case kDLBool:
      return t.bits == 8 ? DLBPY_KIND_BOOL : DLBPY_KIND_OTHER;
    case kDLUInt:
      return t.bits <= 64 ? DLBPY_KIND_UINT : DLBPY_KIND_OTHER;
    case kDLInt:
      return t.bits <= 64 ? DLBPY_KIND_INT : DLBPY_KIND_OTHER;
    case kDLFloat:
      return t.bits == 16 || t.bits == 32 || t.bits == 64 ? DLBPY_KIND_FLOAT
                                                          : DLBPY_KIND_OTHER;
    case kDLComplex:
      return t.bits == 64 || t.bits == 128 ? DLBPY_KIND_COMPLEX
                                           : DLBPY_KIND_OTHER;
    default:
      return DLBPY_KIND_OTHER;
  }
}

/* The bits of the narrowest float that holds every integer of `bits` bits
 * as NumPy rounds them (16 up to 8 bits, 32 up to 16, 64 beyond). */
static unsigned dlbpy_float_bits_for(unsigned bits) {
  return bits <= 8 ? 16 : bits <= 16 ? 32 : 64;
}

static unsigned dlbpy_max_bits(unsigned a, unsigned b) { return a > b ? a : b; }

/* The dtype NumPy's promotion gives a and b, kinds ka <= kb; 0 when it
 * has none. */
static DLDataType dlbpy_promote_kinds(DLDataType a, dlbpy_kind_order ka,
                                      DLDataType b, dlbpy_kind_order kb) {
  const DLDataType none = {0, 0, 0};
  if (ka == DLBPY_KIND_BOOL) return b;
  if (kb == DLBPY_KIND_OTHER) return none;
  if (ka == kb) {
    DLDataType t = a;
    t.bits = (uint8_t)dlbpy_max_bits(a.bits, b.bits);
    return t;
  }
  if (kb == DLBPY_KIND_INT && ka == DLBPY_KIND_UINT) {
    /* A signed type wide enough for both, past 64 bits a float. */
    if (b.bits > a.bits) return b;
    if (a.bits < 64) return (DLDataType){kDLInt, (uint8_t)(2 * a.bits), 1};
    return (DLDataType){kDLFloat, 64, 1};
  }
  /* An integer or float with a float or complex type: the wider of the
   * float part and the float the other needs. */
  unsigned need = ka == DLBPY_KIND_FLOAT ? a.bits : dlbpy_float_bits_for(a.bits);
  if (kb == DLBPY_KIND_FLOAT)
    return (DLDataType){kDLFloat, (uint8_t)dlbpy_max_bits(b.bits, need), 1};
  /* complex: no complex32 */
  unsigned part = dlbpy_max_bits(dlbpy_max_bits(b.bits / 2, need), 32);
  return (DLDataType){kDLComplex, (uint8_t)(2 * part), 1};
}

/* a and b promoted as NumPy promotes them (bool < unsigned < signed <
 * float < complex, widening as needed: int8 with uint8 is int16, int64
 * with float32 is float64) in *out; a dtype NumPy has no rule for
 * (bfloat16, the float8 types) promotes only with itself and bool.
 * Returns false when there is no common dtype. */
static bool dlbpy_promote(DLDataType a, DLDataType b, DLDataType *out) {
  if (dlb_dtype_equal(a, b)) {
    *out = a;
    return true;
  }
  dlbpy_kind_order ka = dlbpy_kind_of(a), kb = dlbpy_kind_of(b);
  DLDataType t = ka <= kb ? dlbpy_promote_kinds(a, ka, b, kb)
                          : dlbpy_promote_kinds(b, kb, a, ka);
  if (t.bits == 0) return false;
  *out = t;
  return true;
}

/* TypeError: no common dtype for what (dtype a) and b. */
static int dlbpy_no_common_dtype(const char *what, DLDataType a,
                                 DLDataType b) {
  char an[DLB_DTYPE_NAME_MAX], bn[DLB_DTYPE_NAME_MAX];
  if (dlb_dtype_format(a, an, sizeof an) != DLB_OK) an[0] = '\0';
  if (dlb_dtype_format(b, bn, sizeof bn) != DLB_OK) bn[0] = '\0';
  PyErr_Format(PyExc_TypeError,
               "asarray(): %s is %s, which has no common dtype with %s; "
               "pass dtype=",
               what, an, bn);
  return -1;
}

/* ------------------------------------------------------------------------
 * The scan
 * ---------------------------------------------------------------------- */

typedef enum {
  DLBPY_ITEM_LIST,     /* a list or tuple, read live */
  DLBPY_ITEM_SEQUENCE, /* another sequence, read once into a snapshot */
  DLBPY_ITEM_PRODUCER,
  DLBPY_ITEM_BUFFER,
  DLBPY_ITEM_NUMBER,
} dlbpy_item_kind;

/* What obj is; -1 with TypeError for what asarray cannot read. Arrays come
 * before numbers and sequences, as in NumPy: a NumPy scalar is a 0-d array
 * of its dtype, a Tensor or bytes an array, not a sequence. */
static int dlbpy_nest_kind(dlbpy_nest *nest, PyObject *obj, int32_t dim,
                           dlbpy_item_kind *kind) {
  /* The common cases ask no question that runs Python code. */
  if (PyList_Check(obj) || PyTuple_Check(obj)) {
    *kind = DLBPY_ITEM_LIST;
    return 0;
  }
  if (PyFloat_CheckExact(obj) || PyLong_CheckExact(obj) || PyBool_Check(obj) ||
      PyComplex_CheckExact(obj)) {
    *kind = DLBPY_ITEM_NUMBER;
    return 0;
  }
  if (!PyUnicode_Check(obj)) {
    int producer = dlbpy_is_producer(nest->st, obj);
    if (producer < 0) return -1;
    bool known = true;
    if (producer) *kind = DLBPY_ITEM_PRODUCER;
    else if (PyObject_CheckBuffer(obj)) *kind = DLBPY_ITEM_BUFFER;
    else if (PySequence_Check(obj)) *kind = DLBPY_ITEM_SEQUENCE;
    else if (PyNumber_Check(obj)) *kind = DLBPY_ITEM_NUMBER;
    else known = false;
    if (known) return 0;
  }
  char here[DLBPY_NEST_TEXT];
  dlbpy_nest_where(nest, dim, false, here);
  PyErr_Format(PyExc_TypeError,
               "asarray(): %s is %.100s, not a number, a sequence, a DLPack "
               "producer or a buffer",
               here, Py_TYPE(obj)->tp_name);
  return -1;
}

/* Keeps item (and what stands for it) for the fill. Steals snapshot, mt
 * and taken (NULL: nothing pending), even on failure. */
static int dlbpy_nest_keep(dlbpy_nest *nest, PyObject *item,
                           PyObject *snapshot, DLManagedTensorVersioned *mt,
                           dlbpy_taken *taken) {
  if (nest->nleaves == nest->room) {
    Py_ssize_t room = nest->room == 0 ? 8 : 2 * nest->room;
    dlbpy_nest_leaf *more =
        (size_t)room <= PY_SSIZE_T_MAX / sizeof *more
            ? PyMem_Realloc(nest->leaves, (size_t)room * sizeof *more)
            : NULL;
    if (more == NULL) {
      Py_XDECREF(snapshot);
      dlbpy_release(mt);
      if (taken != NULL) dlbpy_capsule_settle(taken, 0);
      PyErr_NoMemory();
      return -1;
    }
    nest->leaves = more;
    nest->room = room;
  }
  dlbpy_nest_leaf *leaf = &nest->leaves[nest->nleaves++];
  Py_INCREF(item);
  leaf->item = item;
  leaf->snapshot = snapshot;
  leaf->mt = mt;
  leaf->taken.capsule = NULL;
  if (taken != NULL) leaf->taken = *taken;
  return 0;
}

/* kept: the call succeeded, and the capsules taken stay consumed; else
 * they are given back. */
static void dlbpy_nest_free(dlbpy_nest *nest, int kept) {
  for (Py_ssize_t i = 0; i < nest->nleaves; i++) {
    Py_DECREF(nest->leaves[i].item);
    Py_XDECREF(nest->leaves[i].snapshot);
    dlbpy_release(nest->leaves[i].mt);
  }
  for (Py_ssize_t i = 0; i < nest->nleaves; i++)
    dlbpy_capsule_settle(&nest->leaves[i].taken, kept);
  PyMem_Free(nest->leaves);
}

/* A list of seq's items, read by index up to what its __len__ says: a
 * length of `expect` (-1: any) or ValueError naming it, read only then. */
static PyObject *dlbpy_nest_snapshot(dlbpy_nest *nest, PyObject *seq,
                                     int32_t dim, int64_t expect) {
  Py_ssize_t n = PySequence_Size(seq);
  if (n < 0) return NULL;
  if (expect >= 0 && n != expect) {
    char found[64];
    PyOS_snprintf(found, sizeof found, "has length %zd", n);
    dlbpy_nest_ragged(nest, dim, found);
    return NULL;
  }
  char here[DLBPY_NEST_TEXT], what[DLBPY_NEST_TEXT + 16];
  dlbpy_nest_where(nest, dim, false, here);
  PyOS_snprintf(what, sizeof what, "asarray(): %s", here);
  return dlbpy_items_by_index(seq, n, what);
}

/* obj (an array) imported as a tensor the CPU can read: a copy when its
 * memory is a device's. */
static int dlbpy_nest_import(dlbpy_nest *nest, PyObject *obj,
                             dlbpy_item_kind kind,
                             DLManagedTensorVersioned **out,
                             dlbpy_taken *taken) {
  DLManagedTensorVersioned *mt;
  taken->capsule = NULL;
  if ((kind == DLBPY_ITEM_PRODUCER
           ? dlbpy_import_tentative(nest->st, obj, NULL, &mt, taken)
           : dlbpy_import_buffer(obj, &mt)) < 0)
    return -1;
  if (!dlb_device_type_cpu_accessible(mt->dl_tensor.device.device_type)) {
    DLManagedTensorVersioned *copy;
    int rc = dlbpy_copy_to(mt, (DLDevice){kDLCPU, 0}, PyExc_BufferError, &copy);
    dlbpy_release(mt);
    if (rc < 0) {
      dlbpy_capsule_settle(taken, 0);
      return -1;
    }
    mt = copy;
  }
  *out = mt;
  return 0;
}

static int dlbpy_nest_scan(dlbpy_nest *nest, PyObject *obj, int32_t dim);

/* A list or tuple (or a snapshot) at depth dim. */
static int dlbpy_nest_scan_list(dlbpy_nest *nest, PyObject *seq, int32_t dim) {
  Py_ssize_t n = PySequence_Fast_GET_SIZE(seq);
  if (nest->ndim < 0) {
    if (dim == DLB_MAX_NDIM) return dlbpy_nest_too_deep();
    nest->shape[dim] = n;
    if (n == 0) nest->ndim = dim + 1;
  } else if (dim == nest->ndim) {
    return dlbpy_nest_ragged(nest, dim, "is a sequence");
  } else if (n != nest->shape[dim] || (n == 0 && nest->ndim != dim + 1)) {
    /* An empty sequence ends where it is: (0,), not (0, 2). */
    char found[64];
    PyOS_snprintf(found, sizeof found, "has length %zd", n);
    return dlbpy_nest_ragged(nest, dim, found);
  }
  /* The size is read again each time: reading an item may change it. */
  for (Py_ssize_t i = 0; i < PySequence_Fast_GET_SIZE(seq); i++) {
    nest->path[dim] = i;
    PyObject *item = PySequence_Fast_GET_ITEM(seq, i);
    Py_INCREF(item);
    int rc = dlbpy_nest_scan(nest, item, dim + 1);
    Py_DECREF(item);
    if (rc < 0) return -1;
  }
  return 0;
}

/* Adds the dtype of an array at depth dim to those seen. */
static int dlbpy_nest_see_dtype(dlbpy_nest *nest, DLDataType dtype,
                                int32_t dim) {
  if (!nest->arrays) {
    nest->arrays = nest->arrays_alike = true;
    nest->array_dtype = dtype;
    return 0;
  }
  nest->arrays_alike &= dlb_dtype_equal(dtype, nest->array_dtype);
  if (dlbpy_promote(nest->array_dtype, dtype, &nest->array_dtype)) return 0;
  if (nest->given) return 0;
  char here[DLBPY_NEST_TEXT];
  dlbpy_nest_where(nest, dim, false, here);
  return dlbpy_no_common_dtype(here, dtype, nest->array_dtype);
}

static int dlbpy_nest_scan_array(dlbpy_nest *nest, PyObject *obj,
                                 dlbpy_item_kind kind, int32_t dim) {
  DLManagedTensorVersioned *mt;
  dlbpy_taken taken;
  if (dlbpy_nest_import(nest, obj, kind, &mt, &taken) < 0 ||
      dlbpy_nest_keep(nest, obj, NULL, mt, &taken) < 0)
    return -1;
  const DLTensor *t = &mt->dl_tensor;
  if (nest->ndim < 0) {
    if (t->ndim > DLB_MAX_NDIM - dim) return dlbpy_nest_too_deep();
    if (t->ndim > 0)
      memcpy(nest->shape + dim, t->shape, (size_t)t->ndim * sizeof *t->shape);
    nest->ndim = dim + t->ndim;
  } else if (t->ndim != nest->ndim - dim ||
             (t->ndim > 0 && memcmp(t->shape, nest->shape + dim,
                                    (size_t)t->ndim * sizeof *t->shape) != 0)) {
    char shape[DLBPY_NEST_TEXT], found[DLBPY_NEST_TEXT + 32];
    dlbpy_shape_text(t->ndim, t->shape, shape);
    PyOS_snprintf(found, sizeof found, "is an array of shape %s", shape);
    return dlbpy_nest_ragged(nest, dim, found);
  }
  return dlbpy_nest_see_dtype(nest, t->dtype, dim);
}

/* A number at depth dim: the first path ends there, or must have. */
static int dlbpy_nest_number_at(dlbpy_nest *nest, int32_t dim) {
  if (nest->ndim < 0) nest->ndim = dim;
  else if (dim != nest->ndim)
    return dlbpy_nest_ragged(nest, dim, "is a number");
  return 0;
}

static int dlbpy_nest_scan_number(dlbpy_nest *nest, PyObject *obj,
                                  int32_t dim) {
  if (dlbpy_nest_number_at(nest, dim) < 0) return -1;
  int rank = PyBool_Check(obj)      ? 0
             : PyIndex_Check(obj)   ? 1
             : PyComplex_Check(obj) ? 3
                                    : 2;
  if (rank > nest->rank) nest->rank = rank;
  return 0;
}

/* A number with a 0-d buffer (a NumPy scalar) is a number of that dtype:
 * the fill converts it as a number, without the import an array costs
 * (ten times a number's conversion). */
static int dlbpy_nest_scan_buffer(dlbpy_nest *nest, PyObject *obj,
                                  int32_t dim) {
  if (PyNumber_Check(obj)) {
    DLDataType dtype;
    int scalar = dlbpy_buffer_scalar_dtype(obj, &dtype);
    if (scalar < 0) return -1;
    if (scalar)
      return dlbpy_nest_number_at(nest, dim) < 0
                 ? -1
                 : dlbpy_nest_see_dtype(nest, dtype, dim);
  }
  return dlbpy_nest_scan_array(nest, obj, DLBPY_ITEM_BUFFER, dim);
}

static int dlbpy_nest_scan(dlbpy_nest *nest, PyObject *obj, int32_t dim) {
  dlbpy_item_kind kind;
  if (dlbpy_nest_tick(nest) < 0 || dlbpy_nest_kind(nest, obj, dim, &kind) < 0)
    return -1;
  switch (kind) {
    case DLBPY_ITEM_LIST:
      return dlbpy_nest_scan_list(nest, obj, dim);
    case DLBPY_ITEM_SEQUENCE: {
      if (nest->ndim >= 0 && dim == nest->ndim)
        return dlbpy_nest_ragged(nest, dim, "is a sequence");
      if (nest->ndim < 0 && dim == DLB_MAX_NDIM) return dlbpy_nest_too_deep();
      PyObject *items = dlbpy_nest_snapshot(
          nest, obj, dim, nest->ndim < 0 ? -1 : nest->shape[dim]);
      /* Kept before its items, in the order the fill meets them. */
      if (items == NULL || dlbpy_nest_keep(nest, obj, items, NULL, NULL) < 0)
        return -1;
      return dlbpy_nest_scan_list(nest, items, dim);
    }
    case DLBPY_ITEM_BUFFER:
      return dlbpy_nest_scan_buffer(nest, obj, dim);
    case DLBPY_ITEM_PRODUCER:
      return dlbpy_nest_scan_array(nest, obj, kind, dim);
    case DLBPY_ITEM_NUMBER:
    default:
      return dlbpy_nest_scan_number(nest, obj, dim);
  }
}

/* ------------------------------------------------------------------------
 * The fill
 * ---------------------------------------------------------------------- */

/* Writes the elements of t (from dimension d on, at q) converted to dtype
 * at *p, in row-major order. */
static int dlbpy_convert_at(dlbpy_nest *nest, const DLTensor *t, int32_t d,
                            const char *q, DLDataType dtype, size_t itemsize,
                            char **p) {
  if (d == t->ndim) {
    PyObject *v = dlbpy_nest_tick(nest) < 0 ? NULL
                                            : dlbpy_element_get(t->dtype, q);
    int rc = v != NULL ? dlbpy_element_set(dtype, *p, v) : -1;
    Py_XDECREF(v);
    *p += itemsize;
    return rc;
  }
  /* An extent of 1 is never stepped and may hold any stride. */
  int64_t step = t->shape[d] > 1
                     ? t->strides[d] * (int64_t)dlb_dtype_itemsize(t->dtype)
                     : 0;
  for (int64_t i = 0; i < t->shape[d]; i++)
    if (dlbpy_convert_at(nest, t, d + 1, q + i * step, dtype, itemsize, p) <
        0)
      return -1;
  return 0;
}

/* Writes the elements of the array mt, shaped as the block from depth dim
 * on, at *p as dtype. */
static int dlbpy_nest_fill_array(dlbpy_nest *nest,
                                 const DLManagedTensorVersioned *mt,
                                 DLDataType dtype, size_t itemsize, char **p) {
  const DLTensor *t = &mt->dl_tensor;
  int64_t numel;
  dlb_status s = dlb_tensor_numel(t, &numel);
  if (s != DLB_OK) return dlbpy_fail(s, PyExc_ValueError, "asarray()");
  if (numel == 0) return 0;
  if (dlb_dtype_equal(t->dtype, dtype) && !dlb_dtype_is_subbyte(dtype)) {
    int64_t strides[DLB_MAX_NDIM];
    s = dlb_compact_strides(t->ndim, t->shape, 0, strides);
    DLTensor dst = {*p, {kDLCPU, 0}, t->ndim, dtype, t->shape, strides, 0};
    /* The tensors are this call's own. */
    if (s == DLB_OK) s = dlbpy_copy_tensor(t, &dst);
    if (s != DLB_OK) return dlbpy_fail(s, PyExc_ValueError, "asarray()");
    *p += numel * (int64_t)itemsize;
    return 0;
  }
  if (!dlbpy_dtype_readable(t->dtype)) {
    char name[DLB_DTYPE_NAME_MAX];
    if (dlb_dtype_format(t->dtype, name, sizeof name) != DLB_OK)
      name[0] = '\0';
    PyErr_Format(PyExc_TypeError,
                 "asarray(): %s elements have no Python number type to "
                 "convert from",
                 name);
    return -1;
  }
  if (dlbpy_is_packed(mt)) {
    /* Packed elements are compact: row-major is their order. */
    const char *base = (const char *)t->data + t->byte_offset;
    for (int64_t k = 0; k < numel; k++) {
      PyObject *v = dlbpy_nest_tick(nest) < 0
                        ? NULL
                        : dlbpy_element_get_packed(t->dtype, base, k);
      int rc = v != NULL ? dlbpy_element_set(dtype, *p, v) : -1;
      Py_XDECREF(v);
      if (rc < 0) return -1;
      *p += itemsize;
    }
    return 0;
  }
  return dlbpy_convert_at(nest, t, 0, (const char *)t->data + t->byte_offset,
                          dtype, itemsize, p);
}

/* Writes what obj, at depth dim, holds at *p, checking it against what
 * the scan found: conversions may have changed the lists since. */
static int dlbpy_nest_fill_at(dlbpy_nest *nest, DLDataType dtype,
                              size_t itemsize, PyObject *obj, int32_t dim,
                              char **p) {
  if (PyList_Check(obj) || PyTuple_Check(obj)) {
    if (dim == nest->ndim) return dlbpy_nest_changed();
    for (int64_t i = 0; i < nest->shape[dim]; i++) {
      if (PySequence_Fast_GET_SIZE(obj) != nest->shape[dim])
        return dlbpy_nest_changed();
      PyObject *item = PySequence_Fast_GET_ITEM(obj, (Py_ssize_t)i);
      Py_INCREF(item);
      int rc = dlbpy_nest_fill_at(nest, dtype, itemsize, item, dim + 1, p);
      Py_DECREF(item);
      if (rc < 0) return -1;
    }
    return PySequence_Fast_GET_SIZE(obj) == nest->shape[dim]
               ? 0
               : dlbpy_nest_changed();
  }
  if (nest->next < nest->nleaves && nest->leaves[nest->next].item == obj) {
    const dlbpy_nest_leaf *leaf = &nest->leaves[nest->next++];
    if (leaf->snapshot != NULL)
      return dlbpy_nest_fill_at(nest, dtype, itemsize, leaf->snapshot, dim, p);
    const DLTensor *t = &leaf->mt->dl_tensor;
    if (t->ndim != nest->ndim - dim ||
        (t->ndim > 0 && memcmp(t->shape, nest->shape + dim,
                               (size_t)t->ndim * sizeof *t->shape) != 0))
      return dlbpy_nest_changed();
    return dlbpy_nest_fill_array(nest, leaf->mt, dtype, itemsize, p);
  }
  if (dim != nest->ndim) return dlbpy_nest_changed();
  if (dlbpy_nest_tick(nest) < 0 || dlbpy_element_set(dtype, *p, obj) < 0)
    return -1;
  *p += itemsize;
  return 0;
}

typedef struct {
  PyObject *obj;
  dlbpy_nest *nest;
} dlbpy_nest_src;

static int dlbpy_fill_nest(DLManagedTensorVersioned *mt, int64_t numel,
                           void *arg) {
  (void)numel;
  const dlbpy_nest_src *src = arg;
  const DLTensor *t = &mt->dl_tensor;
  char *p = (char *)t->data + t->byte_offset;
  src->nest->next = 0;
  return dlbpy_nest_fill_at(src->nest, t->dtype, dlb_dtype_itemsize(t->dtype),
                            src->obj, 0, &p);
}

/* ------------------------------------------------------------------------
 * Entry point
 * ---------------------------------------------------------------------- */

/* The dtype of the values: given, else the arrays' promoted with the
 * numbers' default (int64 for ints, float32 for floats). Python numbers
 * convert to any dtype with scalars; other dtypes (float8, ...) only come
 * from arrays that all have them, copied as they are. */
static int dlbpy_nest_dtype(const dlbpy_nest *nest, const DLDataType *given,
                            DLDataType *out) {
  DLDataType dtype = given != NULL ? *given
                     : nest->rank < 0 && !nest->arrays
                         ? dlbpy_by_rank[2]
                     : !nest->arrays ? dlbpy_by_rank[nest->rank]
                                     : nest->array_dtype;
  if (given == NULL && nest->arrays && nest->rank >= 0 &&
      !dlbpy_promote(dlbpy_by_rank[nest->rank], dtype, &dtype))
    return dlbpy_no_common_dtype("the arrays' dtype", nest->array_dtype,
                                 dlbpy_by_rank[nest->rank]);
  const bool copied_as_is = nest->rank < 0 && nest->arrays &&
                            nest->arrays_alike &&
                            dlb_dtype_equal(dtype, nest->array_dtype) &&
                            !dlb_dtype_is_subbyte(dtype);
  if (!copied_as_is && dlbpy_check_scalar_dtype(dtype, "asarray") < 0)
    return -1;
  *out = dtype;
  return 0;
}

int dlbpy_nest_values(dlbpy_state *st, PyObject *obj, const DLDataType *given,
                      const dlbpy_import_opts *opts,
                      DLManagedTensorVersioned **out) {
  dlbpy_nest nest;
  memset(&nest, 0, sizeof nest);
  nest.st = st;
  nest.ndim = -1;
  nest.rank = -1;
  nest.given = given != NULL;
  DLDataType dtype;
  int rc = dlbpy_nest_scan(&nest, obj, 0);
  if (rc == 0) rc = dlbpy_nest_dtype(&nest, given, &dtype);
  if (rc == 0) {
    dlbpy_nest_src src = {obj, &nest};
    rc = dlbpy_make((DLDevice){kDLCPU, 0}, dtype, nest.ndim, nest.shape, 0,
                    dlbpy_fill_nest, &src, out);
  }
  /* Before the capsules are settled: a failure gives them back. */
  if (rc == 0 && opts != NULL) rc = dlbpy_import_apply(opts, out);
  dlbpy_nest_free(&nest, rc == 0);
  return rc;
}
