/*
 * constructors.c -- empty, zeros, full, arange and asarray.
 *
 * Defaults follow PyTorch: float32 when no dtype is given, Python ints give
 * int64, floats float32, complex numbers complex64. Memory the CPU cannot
 * write is filled on the CPU and copied over by the core's copy path.
 */
#include <math.h>
#include <string.h>

#include "dlbpy.h"

static const DLDataType dlbpy_float32 = {kDLFloat, 32, 1};
static const DLDataType dlbpy_int64 = {kDLInt, 64, 1};
static const DLDataType dlbpy_bool = {kDLBool, 8, 1};
static const DLDataType dlbpy_complex64 = {kDLComplex, 64, 1};

/* shared: shared memory (cpu only). */
static int dlbpy_alloc(DLDevice device, DLDataType dtype, int32_t ndim,
                       const int64_t *shape, int shared,
                       DLManagedTensorVersioned **out) {
  if (shared) {
    if (device.device_type != kDLCPU) {
      PyErr_SetString(PyExc_ValueError,
                      "shared=True allocates cpu memory; device must be "
                      "'cpu' (pin the shared tensor for a GPU runtime)");
      return -1;
    }
    return dlbpy_shared_alloc(dtype, ndim, shape, out);
  }
  dlb_status s = dlb_tensor_alloc(device, dtype, ndim, shape, out);
  if (s == DLB_OK) return 0;
  char name[DLB_DEVICE_NAME_MAX], what[64];
  if (dlb_device_format(device, name, sizeof name) != DLB_OK) name[0] = '\0';
  PyOS_snprintf(what, sizeof what, "cannot allocate on %s", name);
  return dlbpy_fail(s, dlbpy_gpu_exc(s), what);
}

static int dlbpy_fill_zero(DLManagedTensorVersioned *mt, int64_t numel,
                           void *arg);

/* Packed sub-byte units have no address of their own: fill writes them a
 * byte each into a buffer, as padded units are held, and they are packed
 * into mt from there. */
static int dlbpy_fill_packed(DLManagedTensorVersioned *mt, int64_t numel,
                             dlbpy_fill_fn fill, void *arg) {
  unsigned char *units = PyMem_Malloc(numel > 0 ? (size_t)numel : 1);
  if (units == NULL) {
    PyErr_Format(PyExc_MemoryError,
                 "%lld bytes to hold %lld sub-byte elements a byte each, "
                 "before they are packed, do not fit in memory",
                 (long long)numel, (long long)numel);
    return -1;
  }
  DLManagedTensorVersioned padded = *mt;
  padded.dl_tensor.data = units;
  padded.dl_tensor.byte_offset = 0;
  padded.flags |= DLPACK_FLAG_BITMASK_IS_SUBBYTE_TYPE_PADDED;
  int rc = fill(&padded, numel, arg);
  if (rc == 0)
    dlbpy_pack_units((unsigned char *)mt->dl_tensor.data +
                         mt->dl_tensor.byte_offset,
                     dlb_dtype_bits(mt->dl_tensor.dtype), units, numel);
  PyMem_Free(units);
  return rc;
}

/* Allocates a compact tensor on device and fills it with fill (NULL: leave
 * it uninitialised). The device memory comes first, so a missing runtime
 * fails before any filling, as it does for empty(). */
int dlbpy_make(DLDevice device, DLDataType dtype, int32_t ndim,
               const int64_t *shape, int shared, dlbpy_fill_fn fill, void *arg,
               DLManagedTensorVersioned **out) {
  DLManagedTensorVersioned *mt, *host;
  if (dlbpy_alloc(device, dtype, ndim, shape, shared, &mt) < 0) return -1;
  if (fill == NULL) {
    *out = mt;
    return 0;
  }
  host = mt;
  if (!dlb_device_type_cpu_accessible(device.device_type) &&
      dlbpy_alloc((DLDevice){kDLCPU, 0}, dtype, ndim, shape, 0, &host) < 0) {
    dlb_tensor_release(mt);
    return -1;
  }
  int64_t numel;
  dlb_status s = dlb_tensor_numel(&host->dl_tensor, &numel);
  int rc = s != DLB_OK ? dlbpy_fail(s, PyExc_ValueError, "shape")
           : fill != dlbpy_fill_zero && dlbpy_is_packed(host)
               ? dlbpy_fill_packed(host, numel, fill, arg)
               : fill(host, numel, arg);
  if (rc == 0 && host != mt) {
    if (dlbpy_copy_is_large(&host->dl_tensor)) {
      Py_BEGIN_ALLOW_THREADS
      s = dlb_copy_sync(&host->dl_tensor, &mt->dl_tensor, NULL);
      Py_END_ALLOW_THREADS
    } else {
      s = dlb_copy_sync(&host->dl_tensor, &mt->dl_tensor, NULL);
    }
    if (s != DLB_OK) {
      char name[DLB_DEVICE_NAME_MAX], what[64];
      if (dlb_device_format(device, name, sizeof name) != DLB_OK)
        name[0] = '\0';
      PyOS_snprintf(what, sizeof what, "cannot write the values to %s",
                    name);
      rc = dlbpy_fail(s, dlbpy_gpu_exc(s), what);
    }
  }
  if (host != mt) dlb_tensor_release(host);
  if (rc < 0) {
    dlb_tensor_release(mt);
    return -1;
  }
  *out = mt;
  return 0;
}

static PyObject *dlbpy_wrap(PyObject *module, DLManagedTensorVersioned *mt) {
  return dlbpy_tensor_new(dlbpy_state_of_module(module), mt);
}

static int dlbpy_device_arg(PyObject *obj, DLDevice *out) {
  if (obj == NULL || obj == Py_None) {
    out->device_type = kDLCPU;
    out->device_id = 0;
    return 0;
  }
  return dlbpy_parse_device(obj, out);
}

static int dlbpy_dtype_arg(PyObject *obj, DLDataType fallback,
                           DLDataType *out) {
  if (obj == NULL || obj == Py_None) {
    *out = fallback;
    return 0;
  }
  return dlbpy_parse_dtype(obj, out);
}

/* ------------------------------------------------------------------------
 * empty, zeros, full
 * ---------------------------------------------------------------------- */

/* shared=: False (None) or True. */
static int dlbpy_shared_arg(PyObject *obj, int *out) {
  if (obj != NULL && obj != Py_None && !PyBool_Check(obj)) {
    PyErr_Format(PyExc_TypeError, "shared must be True or False, not %.100s",
                 Py_TYPE(obj)->tp_name);
    return -1;
  }
  *out = obj == Py_True;
  return 0;
}

static PyObject *dlbpy_empty_like_call(const char *fname, PyObject *module,
                                       PyObject *const *args,
                                       Py_ssize_t nargsf, PyObject *kwnames,
                                       dlbpy_fill_fn fill) {
  PyObject *shape_arg = NULL, *dtype_arg = NULL, *device_arg = NULL,
           *shared_arg = NULL;
  const dlbpy_param params[] = {{"shape", DLBPY_REQUIRED, &shape_arg},
                                {"dtype", DLBPY_OPTIONAL, &dtype_arg},
                                {"device", DLBPY_OPTIONAL, &device_arg},
                                {"shared", DLBPY_KWONLY, &shared_arg}};
  if (dlbpy_parse_args(fname, args, nargsf, kwnames, params,
                       DLBPY_NPARAMS(params)) < 0)
    return NULL;
  int32_t ndim;
  int64_t shape[DLB_MAX_NDIM];
  DLDataType dtype;
  DLDevice device;
  int shared;
  if (dlbpy_parse_shape(shape_arg, &ndim, shape) < 0 ||
      dlbpy_dtype_arg(dtype_arg, dlbpy_float32, &dtype) < 0 ||
      dlbpy_device_arg(device_arg, &device) < 0 ||
      dlbpy_shared_arg(shared_arg, &shared) < 0)
    return NULL;
  DLManagedTensorVersioned *mt = NULL;
  if (dlbpy_make(device, dtype, ndim, shape, shared, fill, NULL, &mt) < 0)
    return NULL;
  return dlbpy_wrap(module, mt);
}

PyObject *dlbpy_empty(PyObject *module, PyObject *const *args,
                      Py_ssize_t nargsf, PyObject *kwnames) {
  return dlbpy_empty_like_call("empty", module, args, nargsf, kwnames, NULL);
}

static int dlbpy_fill_zero(DLManagedTensorVersioned *mt, int64_t numel,
                           void *arg) {
  (void)arg;
  const DLTensor *t = &mt->dl_tensor;
  if (t->dtype.code == kDLFloat8_e8m0fnu) {
    PyErr_SetString(PyExc_ValueError,
                    "float8_e8m0fnu has no zero (it holds powers of two)");
    return -1;
  }
  int64_t bytes;
  dlb_status s = dlb_dtype_storage_bytes(t->dtype, numel, 0, &bytes);
  if (s != DLB_OK) return dlbpy_fail(s, PyExc_ValueError, "zeros");
  if (bytes > 0) memset((char *)t->data + t->byte_offset, 0, (size_t)bytes);
  return 0;
}

PyObject *dlbpy_zeros(PyObject *module, PyObject *const *args,
                      Py_ssize_t nargsf, PyObject *kwnames) {
  return dlbpy_empty_like_call("zeros", module, args, nargsf, kwnames,
                               dlbpy_fill_zero);
}

/* Fills by writing one element and doubling the written prefix. */
static int dlbpy_fill_value(DLManagedTensorVersioned *mt, int64_t numel,
                            void *arg) {
  const DLTensor *t = &mt->dl_tensor;
  char *p = (char *)t->data + t->byte_offset;
  size_t itemsize = dlb_dtype_itemsize(t->dtype);
  if (numel == 0) {
    unsigned char scratch[16];
    return dlbpy_element_set(t->dtype, scratch, (PyObject *)arg);
  }
  if (dlbpy_element_set(t->dtype, p, (PyObject *)arg) < 0) return -1;
  size_t total = (size_t)numel * itemsize, done = itemsize;
  while (done < total) {
    size_t n = done < total - done ? done : total - done;
    memcpy(p + done, p, n);
    done += n;
  }
  return 0;
}

/* A Tensor converts to float and complex (one element), but is not a
 * Python number here: its dtype would be lost (an int64 tensor read as a
 * float). Returns -1 with TypeError for one. */
static int dlbpy_refuse_tensor_number(PyObject *obj, const char *what) {
  if (obj == NULL || !dlbpy_tensor_check(obj)) return 0;
  PyErr_Format(PyExc_TypeError,
               "%s is a dlbridge.Tensor, not a Python number; pass t.item()",
               what);
  return -1;
}

/* The dtype a number gets when none is named: bool, int64, float32 or
 * complex64 by its kind. A NumPy scalar or 0-d array tells its kind by its
 * dtype; an __index__ says integer only when it takes the value (a 0-d
 * float array or tensor has the slot, and refuses). */
static int dlbpy_infer_scalar(PyObject *value, DLDataType *out) {
  if (PyBool_Check(value)) {
    *out = dlbpy_bool;
    return 0;
  }
  if (PyLong_Check(value)) {
    *out = dlbpy_int64;
    return 0;
  }
  if (PyFloat_Check(value)) {
    *out = dlbpy_float32;
    return 0;
  }
  if (PyComplex_Check(value)) {
    *out = dlbpy_complex64;
    return 0;
  }
  if (PyObject_CheckBuffer(value)) {
    DLDataType dtype;
    int scalar = dlbpy_buffer_scalar_dtype(value, &dtype);
    if (scalar < 0) return -1;
    if (scalar) {
      *out = dtype.code == kDLBool      ? dlbpy_bool
             : dtype.code == kDLInt ||
                     dtype.code == kDLUInt ? dlbpy_int64
             : dtype.code == kDLComplex    ? dlbpy_complex64
                                           : dlbpy_float32;
      return 0;
    }
  }
  PyObject *index;
  int integer = dlbpy_try_index(value, &index);
  if (integer < 0) return -1;
  if (integer) {
    Py_DECREF(index);
    *out = dlbpy_int64;
    return 0;
  }
  /* Complex when it converts to complex but not to float. */
  PyNumberMethods *nb = Py_TYPE(value)->tp_as_number;
  *out = (nb == NULL || nb->nb_float == NULL) &&
                 PyObject_HasAttrString(value, "__complex__")
             ? dlbpy_complex64
             : dlbpy_float32;
  return 0;
}

/* A value that is no number at all (a str, None, a list): TypeError
 * naming what, before any dtype is chosen for it. */
static int dlbpy_number_arg(PyObject *obj, const char *what, int real) {
  if (PyNumber_Check(obj) && !(real && PyComplex_Check(obj))) return 0;
  PyErr_Format(PyExc_TypeError, "%s must be a %snumber, not %.100s", what,
               real ? "real " : "", Py_TYPE(obj)->tp_name);
  return -1;
}

int dlbpy_check_scalar_dtype(DLDataType dtype, const char *fname) {
  if (dlbpy_dtype_has_scalars(dtype)) return 0;
  char name[DLB_DTYPE_NAME_MAX];
  if (dlb_dtype_format(dtype, name, sizeof name) != DLB_OK) name[0] = '\0';
  PyErr_Format(PyExc_TypeError,
               "%s(): dtype %s has no Python number type to convert from",
               fname, name);
  return -1;
}

/* The value full() converts: for an integer dtype, a value whose type has
 * __index__ but whose __index__ refuses it (a 0-d float array or tensor)
 * as a float, which converts as Python floats do; the element conversion
 * takes the type's slot for an integer's (and asarray's values must not
 * be converted twice). A new reference, or NULL with an exception set. */
static PyObject *dlbpy_fill_for(DLDataType dtype, PyObject *value) {
  if ((dtype.code == kDLInt || dtype.code == kDLUInt) &&
      !PyLong_Check(value) && PyIndex_Check(value)) {
    PyObject *index;
    int integer = dlbpy_try_index(value, &index);
    if (integer < 0) return NULL;
    if (!integer) return PyNumber_Float(value);
    Py_DECREF(index);
  }
  Py_INCREF(value);
  return value;
}

PyObject *dlbpy_full(PyObject *module, PyObject *const *args,
                     Py_ssize_t nargsf, PyObject *kwnames) {
  PyObject *shape_arg = NULL, *fill_value = NULL, *dtype_arg = NULL,
           *device_arg = NULL, *shared_arg = NULL;
  const dlbpy_param params[] = {{"shape", DLBPY_REQUIRED, &shape_arg},
                                {"fill_value", DLBPY_REQUIRED, &fill_value},
                                {"dtype", DLBPY_OPTIONAL, &dtype_arg},
                                {"device", DLBPY_OPTIONAL, &device_arg},
                                {"shared", DLBPY_KWONLY, &shared_arg}};
  if (dlbpy_parse_args("full", args, nargsf, kwnames, params,
                       DLBPY_NPARAMS(params)) < 0)
    return NULL;
  int32_t ndim;
  int64_t shape[DLB_MAX_NDIM];
  DLDataType dtype;
  DLDevice device;
  int shared;
  DLDataType inferred = dlbpy_float32;
  if (dlbpy_refuse_tensor_number(fill_value, "full(): fill_value") < 0 ||
      dlbpy_parse_shape(shape_arg, &ndim, shape) < 0 ||
      ((dtype_arg == NULL || dtype_arg == Py_None) &&
       dlbpy_infer_scalar(fill_value, &inferred) < 0) ||
      dlbpy_dtype_arg(dtype_arg, inferred, &dtype) < 0 ||
      /* Any value has a truth, for bool; the other types need a number. */
      (dtype.code != kDLBool &&
       dlbpy_number_arg(fill_value, "full(): fill_value", 0) < 0) ||
      dlbpy_device_arg(device_arg, &device) < 0 ||
      dlbpy_shared_arg(shared_arg, &shared) < 0 ||
      dlbpy_check_scalar_dtype(dtype, "full") < 0)
    return NULL;
  PyObject *value = dlbpy_fill_for(dtype, fill_value);
  if (value == NULL) return NULL;
  DLManagedTensorVersioned *mt = NULL;
  int rc = dlbpy_make(device, dtype, ndim, shape, shared, dlbpy_fill_value,
                      value, &mt);
  Py_DECREF(value);
  if (rc < 0) return NULL;
  return dlbpy_wrap(module, mt);
}

/* ------------------------------------------------------------------------
 * arange
 * ---------------------------------------------------------------------- */

typedef struct {
  int integral;
  int64_t istart, istep;
  double fstart, fstep;
} dlbpy_range;

static int dlbpy_fill_range(DLManagedTensorVersioned *mt, int64_t numel,
                            void *arg) {
  const dlbpy_range *r = arg;
  const DLTensor *t = &mt->dl_tensor;
  char *p = (char *)t->data + t->byte_offset;
  size_t itemsize = dlb_dtype_itemsize(t->dtype);
  for (int64_t i = 0; i < numel; i++, p += itemsize) {
    int rc;
    if (r->integral) {
      /* Wrapping arithmetic is exact here: every value lies in
       * [start, stop). */
      int64_t value = (int64_t)((uint64_t)r->istart +
                                (uint64_t)i * (uint64_t)r->istep);
      rc = dlbpy_element_set_int64(t->dtype, p, value);
      if (rc < 0) {
        char context[64];
        PyOS_snprintf(context, sizeof context,
                      "arange(): element %lld of the range", (long long)i);
        dlbpy_error_add_context(PyExc_OverflowError, context);
      }
    } else {
      rc = dlbpy_element_set_double(t->dtype, p,
                                    r->fstart + (double)i * r->fstep);
    }
    if (rc < 0) return -1;
  }
  return 0;
}

/* 1 for an integer bound (or none given), 0 for another number, -1 with
 * an exception set. */
static int dlbpy_is_int_arg(PyObject *obj) {
  if (obj == NULL || obj == Py_None || PyLong_Check(obj)) return 1;
  if (PyFloat_Check(obj)) return 0;
  PyObject *index;
  int integer = dlbpy_try_index(obj, &index);
  Py_XDECREF(index);
  return integer;
}

/* An integer bound; bools are 0 and 1, as range() and NumPy read them. */
static int dlbpy_range_int(PyObject *obj, const char *what, int64_t *out) {
  if (PyBool_Check(obj)) {
    *out = obj == Py_True;
    return 0;
  }
  return dlbpy_parse_int64(obj, what, out);
}

/* A bound that is not an integer, as a double. */
static int dlbpy_range_real(PyObject *obj, const char *what, double *out) {
  if (dlbpy_number_arg(obj, what, 1) < 0) return -1;
  *out = PyFloat_AsDouble(obj);
  return *out == -1.0 && PyErr_Occurred() ? -1 : 0;
}

static int dlbpy_range_count(PyObject *start_obj, PyObject *stop_obj,
                             PyObject *step_obj, dlbpy_range *r,
                             int64_t *count) {
  int integral = 1;
  PyObject *const bounds[] = {start_obj, stop_obj, step_obj};
  for (int i = 0; i < 3 && integral == 1; i++)
    integral = dlbpy_is_int_arg(bounds[i]);
  if (integral < 0) return -1;
  if (integral) {
    int64_t start, stop, step = 1;
    if (dlbpy_range_int(start_obj, "arange(): start", &start) < 0 ||
        dlbpy_range_int(stop_obj, "arange(): stop", &stop) < 0 ||
        (step_obj != NULL && step_obj != Py_None &&
         dlbpy_range_int(step_obj, "arange(): step", &step) < 0))
      return -1;
    if (step == 0) {
      PyErr_SetString(PyExc_ValueError, "arange(): step must not be zero");
      return -1;
    }
    uint64_t span, ustep;
    if (step > 0) {
      span = stop > start ? (uint64_t)stop - (uint64_t)start : 0;
      ustep = (uint64_t)step;
    } else {
      span = start > stop ? (uint64_t)start - (uint64_t)stop : 0;
      ustep = (uint64_t)0 - (uint64_t)step;
    }
    uint64_t n = span == 0 ? 0 : (span - 1) / ustep + 1;
    if (n > (uint64_t)INT64_MAX) {
      PyErr_SetString(PyExc_ValueError, "arange(): too many elements");
      return -1;
    }
    r->integral = 1;
    r->istart = start;
    r->istep = step;
    *count = (int64_t)n;
    return 0;
  }
  double start, stop, step = 1.0;
  if (dlbpy_range_real(start_obj, "arange(): start", &start) < 0 ||
      dlbpy_range_real(stop_obj, "arange(): stop", &stop) < 0 ||
      (step_obj != NULL && step_obj != Py_None &&
       dlbpy_range_real(step_obj, "arange(): step", &step) < 0))
    return -1;
  if (!isfinite(start) || !isfinite(stop) || !isfinite(step)) {
    PyErr_SetString(PyExc_ValueError,
                    "arange(): start, stop and step must be finite");
    return -1;
  }
  if (step == 0) {
    PyErr_SetString(PyExc_ValueError, "arange(): step must not be zero");
    return -1;
  }
  double n = ceil((stop - start) / step);
  if (!(n > 0)) n = 0;
  if (n >= 9.2e18) {
    PyErr_SetString(PyExc_ValueError, "arange(): too many elements");
    return -1;
  }
  r->integral = 0;
  r->fstart = start;
  r->fstep = step;
  *count = (int64_t)n;
  return 0;
}

PyObject *dlbpy_arange(PyObject *module, PyObject *const *args,
                       Py_ssize_t nargsf, PyObject *kwnames) {
  PyObject *start = NULL, *stop = NULL, *step = NULL, *dtype_arg = NULL,
           *device_arg = NULL;
  const dlbpy_param params[] = {{"start", DLBPY_REQUIRED, &start},
                                {"stop", DLBPY_OPTIONAL, &stop},
                                {"step", DLBPY_OPTIONAL, &step},
                                {"dtype", DLBPY_KWONLY, &dtype_arg},
                                {"device", DLBPY_KWONLY, &device_arg}};
  if (dlbpy_parse_args("arange", args, nargsf, kwnames, params,
                       DLBPY_NPARAMS(params)) < 0)
    return NULL;
  if (stop == NULL || stop == Py_None) {
    stop = start;
    start = NULL;
  }
  PyObject *zero = NULL;
  if (start == NULL) {
    zero = PyLong_FromLong(0);
    if (zero == NULL) return NULL;
    start = zero;
  }
  dlbpy_range r = {0, 0, 0, 0.0, 0.0};
  int64_t count;
  int rc = dlbpy_refuse_tensor_number(start, "arange(): start") < 0 ||
                   dlbpy_refuse_tensor_number(stop, "arange(): stop") < 0 ||
                   dlbpy_refuse_tensor_number(step, "arange(): step") < 0
               ? -1
               : dlbpy_range_count(start, stop, step, &r, &count);
  Py_XDECREF(zero);
  if (rc < 0) return NULL;
  DLDataType dtype;
  DLDevice device;
  if (dlbpy_dtype_arg(dtype_arg, r.integral ? dlbpy_int64 : dlbpy_float32,
                      &dtype) < 0 ||
      dlbpy_device_arg(device_arg, &device) < 0 ||
      dlbpy_check_scalar_dtype(dtype, "arange") < 0)
    return NULL;
  DLManagedTensorVersioned *mt = NULL;
  if (dlbpy_make(device, dtype, 1, &count, 0, dlbpy_fill_range, &r, &mt) < 0)
    return NULL;
  return dlbpy_wrap(module, mt);
}

/* ------------------------------------------------------------------------
 * asarray
 * ---------------------------------------------------------------------- */

/* asarray of array data (mt, imported from obj) given another dtype: a
 * new tensor of the values converted, as an array among the items of a
 * nested sequence is converted. copy=False raises ValueError, as the
 * standard says for a copy that would be necessary. Releases mt and
 * settles taken. */
static PyObject *dlbpy_asarray_convert(dlbpy_state *st,
                                       DLManagedTensorVersioned *mt,
                                       DLDataType dtype,
                                       dlbpy_import_opts *opts,
                                       dlbpy_taken *taken) {
  if (opts->copy == 0) {
    char have[DLB_DTYPE_NAME_MAX], want[DLB_DTYPE_NAME_MAX];
    if (dlb_dtype_format(mt->dl_tensor.dtype, have, sizeof have) != DLB_OK)
      have[0] = '\0';
    if (dlb_dtype_format(dtype, want, sizeof want) != DLB_OK) want[0] = '\0';
    dlbpy_release(mt);
    PyErr_Format(PyExc_ValueError,
                 "asarray(): copy=False, but the data is %s and dtype is %s: "
                 "only a copy converts it",
                 have, want);
    dlbpy_capsule_settle(taken, 0);
    return NULL;
  }
  /* The converted values are a new tensor: copy=True is satisfied. */
  if (opts->copy == 1) opts->copy = -1;
  /* They are made on the host; without device= they go back to the
   * memory the data is in, as the array API standard infers an array's
   * device. */
  if (!opts->has_device) {
    opts->has_device = 1;
    opts->device = mt->dl_tensor.device;
  }
  PyObject *source = dlbpy_tensor_new(st, mt);
  DLManagedTensorVersioned *converted = NULL;
  int rc = source != NULL
               ? dlbpy_nest_values(st, source, &dtype, opts, &converted)
               : -1;
  /* The source goes first: a capsule is given back only once nothing
   * shares its memory. */
  Py_XDECREF(source);
  dlbpy_capsule_settle(taken, rc == 0);
  if (rc < 0) return NULL;
  return dlbpy_tensor_new(st, converted);
}

PyObject *dlbpy_asarray(PyObject *module, PyObject *const *args,
                        Py_ssize_t nargsf, PyObject *kwnames) {
  dlbpy_state *st = dlbpy_state_of_module(module);
  PyObject *obj = NULL, *dtype_arg = NULL, *device_arg = NULL,
           *copy_arg = NULL;
  const dlbpy_param params[] = {{"obj", DLBPY_POSONLY, &obj},
                                {"dtype", DLBPY_KWONLY, &dtype_arg},
                                {"device", DLBPY_KWONLY, &device_arg},
                                {"copy", DLBPY_KWONLY, &copy_arg}};
  if (dlbpy_parse_args("asarray", args, nargsf, kwnames, params,
                       DLBPY_NPARAMS(params)) < 0)
    return NULL;
  dlbpy_import_opts opts = {-1, 0, {kDLCPU, 0}, 0, 0};
  if (dlbpy_parse_copy(copy_arg, "copy", &opts.copy) < 0) return NULL;
  if (device_arg != NULL && device_arg != Py_None) {
    if (dlbpy_parse_device(device_arg, &opts.device) < 0) return NULL;
    opts.has_device = 1;
  }
  int has_dtype = dtype_arg != NULL && dtype_arg != Py_None;
  DLDataType dtype = {0, 0, 0};
  if (has_dtype && dlbpy_parse_dtype(dtype_arg, &dtype) < 0) return NULL;
  /* As numpy.asarray: the same object when nothing needs to change. */
  if (dlbpy_tensor_check(obj) && opts.copy != 1 &&
      (!opts.has_device ||
       dlb_device_equal(opts.device,
                        ((dlbpy_tensor *)obj)->mt->dl_tensor.device)) &&
      (!has_dtype ||
       dlb_dtype_equal(dtype, ((dlbpy_tensor *)obj)->mt->dl_tensor.dtype))) {
    Py_INCREF(obj);
    return obj;
  }
  DLManagedTensorVersioned *mt;
  /* A capsule is consumed only once the result stands: a dtype or copy=
   * refusal gives it back. */
  dlbpy_taken taken = {.capsule = NULL};
  int producer = dlbpy_is_producer(st, obj);
  if (producer < 0) return NULL;
  if (producer) {
    /* The producer is asked for device= and copy= as from_dlpack asks it
     * (__dlpack__(dl_device=, copy=)); what it could not do is done below,
     * after the dtype is checked. */
    opts.apply_later = 1;
    int rc = dlbpy_import_tentative(st, obj, &opts, &mt, &taken);
    opts.apply_later = 0;
    if (rc < 0) return NULL;
  } else if (PyObject_CheckBuffer(obj)) {
    if (dlbpy_import_buffer(obj, &mt) < 0) return NULL;
  } else if (!PyUnicode_Check(obj)) {
    /* Refused before any item is read (or imported). */
    if (opts.copy == 0) {
      PyErr_SetString(PyExc_ValueError,
                      "asarray(): copy=False, but Python numbers and nested "
                      "sequences are always copied into a new tensor");
      return NULL;
    }
    /* The values are copied into fresh memory: copy=True is satisfied.
     * opts apply before the capsules among the items are consumed, so a
     * failure gives them back. */
    if (opts.copy == 1) opts.copy = -1;
    if (dlbpy_nest_values(st, obj, has_dtype ? &dtype : NULL, &opts, &mt) < 0)
      return NULL;
    return dlbpy_tensor_new(st, mt);
  } else {
    PyErr_SetString(PyExc_TypeError,
                    "asarray(): a str is not a DLPack producer, a buffer or "
                    "a number");
    return NULL;
  }
  if (has_dtype && !dlb_dtype_equal(dtype, mt->dl_tensor.dtype))
    return dlbpy_asarray_convert(st, mt, dtype, &opts, &taken);
  if (dlbpy_import_apply(&opts, &mt) < 0) {
    dlbpy_capsule_settle(&taken, 0);
    return NULL;
  }
  dlbpy_capsule_settle_result(&taken, &mt);
  return dlbpy_tensor_new(st, mt);
}
