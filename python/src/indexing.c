/*
 * indexing.c -- t[key] and t[key] = value: ints, slices, None (a new axis
 * of extent 1) and one Ellipsis, as NumPy reads them, always as views; an
 * assignment writes through that view with the core's copy engine,
 * broadcasting the value with zero strides.
 */
#include <string.h>

#include "dlbpy.h"

/* A key, read against a tensor of ndim dimensions. */
typedef struct {
  /* Per dimension of the tensor: the slice taken, or the index selected
   * (is_index). */
  dlb_slice slices[DLB_MAX_NDIM];
  int64_t index[DLB_MAX_NDIM];
  unsigned char is_index[DLB_MAX_NDIM];
  int any_slice, any_index;
  /* Per dimension of the result: 1 where None put a new axis. */
  unsigned char is_new[DLB_MAX_NDIM];
  int32_t nnew;
  /* The result's dimensions. */
  int32_t out_ndim;
} dlbpy_index;

static int dlbpy_slice_bound(PyObject *obj, int64_t *out) {
  if (obj == Py_None) {
    *out = DLB_SLICE_DEFAULT;
    return 0;
  }
  /* A bool is an int here, as NumPy and Python read slices (as an index
   * it would be a mask: dlbpy_parse_index). */
  if (!PyIndex_Check(obj)) {
    PyErr_SetString(PyExc_TypeError,
                    "slice indices must be integers or None");
    return -1;
  }
  /* Saturates: a bound past either end is clamped by the slice anyway. */
  Py_ssize_t v = PyNumber_AsSsize_t(obj, NULL);
  if (v == -1 && PyErr_Occurred()) return -1;
  /* INT64_MIN is the DEFAULT marker; its saturated neighbour clamps the
   * same way. */
  *out = v == PY_SSIZE_T_MIN ? (int64_t)PY_SSIZE_T_MIN + 1 : (int64_t)v;
  return 0;
}

static int dlbpy_parse_slice(PyObject *obj, dlb_slice *out) {
  PySliceObject *sl = (PySliceObject *)obj;
  dlb_slice s;
  if (sl->step == Py_None) {
    s.step = 1;
  } else {
    if (!PyIndex_Check(sl->step)) {
      PyErr_SetString(PyExc_TypeError,
                      "slice indices must be integers or None");
      return -1;
    }
    Py_ssize_t step = PyNumber_AsSsize_t(sl->step, NULL);
    if (step == -1 && PyErr_Occurred()) return -1;
    if (step == 0) {
      PyErr_SetString(PyExc_ValueError, "slice step cannot be zero");
      return -1;
    }
    /* -INT64_MAX steps as far as INT64_MIN would. */
    s.step = step == PY_SSIZE_T_MIN ? -(int64_t)PY_SSIZE_T_MAX : step;
  }
  if (dlbpy_slice_bound(sl->start, &s.start) < 0 ||
      dlbpy_slice_bound(sl->stop, &s.stop) < 0)
    return -1;
  *out = s;
  return 0;
}

static int dlbpy_parse_index(PyObject *key, int32_t ndim, dlbpy_index *ix) {
  /* A tuple is fixed-size, and its items are held by it while __index__
   * methods run. */
  PyObject *const *items = &key;
  Py_ssize_t n = 1;
  if (PyTuple_Check(key)) {
    items = PySequence_Fast_ITEMS(key); /* also when it is empty */
    n = PyTuple_GET_SIZE(key);
  }
  Py_ssize_t ellipsis = -1, consumed = 0, nnew = 0;
  for (Py_ssize_t i = 0; i < n; i++) {
    PyObject *item = items[i];
    if (item == Py_Ellipsis) {
      if (ellipsis >= 0) {
        PyErr_SetString(PyExc_IndexError,
                        "an index can only have a single ellipsis ('...')");
        return -1;
      }
      ellipsis = i;
    } else if (item == Py_None) {
      nnew++;
    } else if (PyBool_Check(item)) {
      /* NumPy reads a bool as a mask, which makes a copy, never a view. */
      PyErr_SetString(PyExc_IndexError,
                      "bool indices are masks, which select a copy; dlbridge "
                      "indexing makes views only (use ints, slices, None and "
                      "'...')");
      return -1;
    } else if (PySlice_Check(item) || PyIndex_Check(item)) {
      consumed++;
    } else {
      PyErr_Format(PyExc_IndexError,
                   "only integers, slices, None and ellipsis ('...') are "
                   "valid indices, not %.100s",
                   Py_TYPE(item)->tp_name);
      return -1;
    }
  }
  if (consumed > ndim) {
    PyErr_Format(PyExc_IndexError,
                 "too many indices for tensor: tensor is %d-dimensional, but "
                 "%zd were indexed",
                 (int)ndim, consumed);
    return -1;
  }
  for (int32_t d = 0; d < ndim; d++) {
    ix->slices[d].start = DLB_SLICE_DEFAULT;
    ix->slices[d].stop = DLB_SLICE_DEFAULT;
    ix->slices[d].step = 1;
    ix->is_index[d] = 0;
  }
  ix->any_slice = ix->any_index = 0;
  int32_t d = 0, r = 0;
  for (Py_ssize_t i = 0; i < n; i++) {
    PyObject *item = items[i];
    if (item == Py_None) {
      /* Checked before it is written: at most DLB_MAX_NDIM results. */
      if (r >= DLB_MAX_NDIM) break;
      ix->is_new[r++] = 1;
    } else if (i == ellipsis) {
      for (Py_ssize_t k = 0; k < ndim - consumed && r < DLB_MAX_NDIM; k++)
        ix->is_new[r++] = 0;
      d += (int32_t)(ndim - consumed);
    } else if (PySlice_Check(item)) {
      if (dlbpy_parse_slice(item, &ix->slices[d]) < 0) return -1;
      ix->any_slice = 1;
      d++;
      if (r < DLB_MAX_NDIM) ix->is_new[r++] = 0;
    } else {
      Py_ssize_t v = PyNumber_AsSsize_t(item, PyExc_IndexError);
      if (v == -1 && PyErr_Occurred()) return -1;
      ix->index[d] = v;
      ix->is_index[d] = 1;
      ix->any_index = 1;
      d++;
    }
  }
  /* The dimensions no item named come last, whole. */
  Py_ssize_t out_ndim = 0;
  for (int32_t k = 0; k < ndim; k++) out_ndim += !ix->is_index[k];
  out_ndim += nnew;
  if (out_ndim > DLB_MAX_NDIM) {
    PyErr_Format(PyExc_IndexError,
                 "the index makes %zd dimensions; at most %d", out_ndim,
                 DLB_MAX_NDIM);
    return -1;
  }
  for (; r < out_ndim; r++) ix->is_new[r] = 0;
  ix->nnew = (int32_t)nnew;
  ix->out_ndim = (int32_t)out_ndim;
  return 0;
}

/* v (a dlbridge tensor, stolen) with the new axes of ix inserted: extent
 * 1, stride 0, as NumPy gives them. */
static int dlbpy_insert_axes(const dlbpy_index *ix,
                             DLManagedTensorVersioned **v) {
  if (ix->nnew == 0) return 0;
  const DLTensor *t = &(*v)->dl_tensor;
  int64_t shape[DLB_MAX_NDIM], strides[DLB_MAX_NDIM];
  int32_t k = 0;
  for (int32_t r = 0; r < ix->out_ndim; r++) {
    if (ix->is_new[r]) {
      shape[r] = 1;
      strides[r] = 0;
    } else {
      shape[r] = t->shape[k];
      strides[r] = t->strides[k];
      k++;
    }
  }
  DLTensor desc = *t;
  desc.ndim = ix->out_ndim;
  desc.shape = shape;
  desc.strides = strides;
  DLManagedTensorVersioned *next;
  dlb_status s = dlb_tensor_redescribe(*v, &desc, (*v)->flags, &next);
  dlb_tensor_release(*v);
  *v = NULL;
  if (s != DLB_OK) return dlbpy_fail(s, PyExc_IndexError, "index");
  *v = next;
  return 0;
}

/* What key selects from mt (a dlbridge tensor): a view, or, for packed
 * elements no view can describe (not compact, or starting inside a byte),
 * a read-only copy (*copied = 1). */
static int dlbpy_index_select(const DLManagedTensorVersioned *mt,
                              PyObject *key, DLManagedTensorVersioned **out,
                              int *copied) {
  int32_t ndim = mt->dl_tensor.ndim;
  dlbpy_index ix;
  if (dlbpy_parse_index(key, ndim, &ix) < 0) return -1;
  *copied = 0;
  DLManagedTensorVersioned *view;
  dlb_status s = ix.any_slice ? dlb_tensor_slice(mt, ndim, ix.slices, &view)
                              : dlb_tensor_share(mt, &view);
  /* Packed elements no view can describe are copied out. */
  const int packed = dlbpy_is_packed(mt);
  if (s == DLB_E_UNSUPPORTED && packed) {
    if (dlbpy_packed_select_copy(mt, ix.is_index, ix.index, ix.slices,
                                 &view) == NULL)
      return -1;
    *copied = 1;
  } else if (s != DLB_OK) {
    return dlbpy_fail(s, PyExc_IndexError, "index");
  }
  /* From the last dimension down, so earlier dimension numbers hold. */
  for (int32_t k = ndim - 1; !*copied && ix.any_index && k >= 0; k--) {
    if (!ix.is_index[k]) continue;
    DLManagedTensorVersioned *next;
    s = dlb_tensor_select(view, k, ix.index[k], &next);
    dlb_tensor_release(view);
    if (s == DLB_E_UNSUPPORTED && packed) {
      if (dlbpy_packed_select_copy(mt, ix.is_index, ix.index, ix.slices,
                                   &next) == NULL)
        return -1;
      *copied = 1;
      view = next;
      break;
    }
    if (s != DLB_OK) {
      if (s == DLB_E_RANGE)
        PyErr_Format(PyExc_IndexError,
                     "index %lld is out of bounds for axis %d with size %lld",
                     (long long)ix.index[k], (int)k,
                     (long long)mt->dl_tensor.shape[k]);
      else
        dlbpy_raise(s, PyExc_IndexError, "index");
      return -1;
    }
    view = next;
  }
  if (dlbpy_insert_axes(&ix, &view) < 0) return -1;
  *out = view;
  return 0;
}

PyObject *dlbpy_tensor_subscript(PyObject *self, PyObject *key) {
  const DLManagedTensorVersioned *mt = dlbpy_tensor_owned(self);
  if (mt == NULL) return NULL;
  DLManagedTensorVersioned *view;
  int copied;
  if (dlbpy_index_select(mt, key, &view, &copied) < 0) return NULL;
  return dlbpy_tensor_new(dlbpy_state_of_type(Py_TYPE(self)), view);
}

/* ------------------------------------------------------------------------
 * Assignment
 * ---------------------------------------------------------------------- */

static PyObject *dlbpy_shape_repr(const DLTensor *t) {
  PyObject *tuple = PyTuple_New(t->ndim);
  if (tuple == NULL) return NULL;
  for (int32_t i = 0; i < t->ndim; i++) {
    PyObject *v = PyLong_FromLongLong((long long)t->shape[i]);
    if (v == NULL) {
      Py_DECREF(tuple);
      return NULL;
    }
    PyTuple_SET_ITEM(tuple, i, v);
  }
  return tuple;
}

static int dlbpy_broadcast_error(const DLTensor *src, const DLTensor *dst) {
  PyObject *from = dlbpy_shape_repr(src), *to = dlbpy_shape_repr(dst);
  if (from != NULL && to != NULL)
    PyErr_Format(PyExc_ValueError,
                 "could not broadcast input of shape %R into shape %R", from,
                 to);
  Py_XDECREF(from);
  Py_XDECREF(to);
  return -1;
}

/* src described with dst's shape (NumPy's broadcasting: dimensions of
 * extent 1 and missing leading ones get stride 0; leading ones of src
 * beyond dst's must be 1) in *out, whose shape and strides live in the
 * arrays given. */
static int dlbpy_broadcast_to(const DLTensor *src, const DLTensor *dst,
                              DLTensor *out, int64_t *strides) {
  int32_t extra = src->ndim - dst->ndim;
  for (int32_t j = 0; j < extra; j++)
    if (src->shape[j] != 1) return dlbpy_broadcast_error(src, dst);
  for (int32_t i = 0; i < dst->ndim; i++) {
    int32_t j = i + extra;
    if (j < 0) {
      strides[i] = 0;
    } else if (src->shape[j] == dst->shape[i]) {
      strides[i] = src->strides[j];
    } else if (src->shape[j] == 1) {
      strides[i] = 0;
    } else {
      return dlbpy_broadcast_error(src, dst);
    }
  }
  *out = *src;
  out->ndim = dst->ndim;
  out->shape = dst->shape;
  out->strides = strides;
  return 0;
}

static int dlbpy_device_error(const char *which, DLDevice device) {
  char name[DLB_DEVICE_NAME_MAX];
  if (dlb_device_format(device, name, sizeof name) != DLB_OK) name[0] = '\0';
  PyErr_Format(PyExc_BufferError,
               "t[...] = value: the %s is in %s memory, which the CPU cannot "
               "write; assign on a copy in 'cpu' memory and copy it back "
               "with to()",
               which, name);
  return -1;
}

/* value as a Tensor of dtype (held by the caller): DLPack producers and
 * buffers as they are, converted through Python numbers (tolist) when
 * their dtype differs; Python numbers and sequences built in dtype. A
 * DLPack capsule is taken tentatively (*taken), for the caller to settle
 * once the assignment is done; on failure here nothing is pending. */
static PyObject *dlbpy_assigned_value(PyObject *self, PyObject *value,
                                      DLDataType dtype, dlbpy_taken *taken) {
  taken->capsule = NULL;
  PyObject *module = PyType_GetModule(Py_TYPE(self));
  if (module == NULL) return NULL;
  char name[DLB_DTYPE_NAME_MAX];
  dlb_status s = dlb_dtype_format(dtype, name, sizeof name);
  if (s != DLB_OK) return dlbpy_raise(s, PyExc_ValueError, "dtype");
  PyObject *dtype_name = PyUnicode_FromString(name);
  if (dtype_name == NULL) return NULL;
  PyObject *kwnames = Py_BuildValue("(s)", "dtype");
  if (kwnames == NULL) {
    Py_DECREF(dtype_name);
    return NULL;
  }
  PyObject *src = NULL;
  int producer = dlbpy_tensor_check(value);
  if (!producer) {
    dlbpy_state *st = dlbpy_state_of_type(Py_TYPE(self));
    producer = dlbpy_is_producer(st, value);
    if (producer == 0) producer = PyObject_CheckBuffer(value);
  }
  if (producer > 0 && PyCapsule_CheckExact(value)) {
    dlbpy_state *st = dlbpy_state_of_type(Py_TYPE(self));
    DLManagedTensorVersioned *mt;
    if (dlbpy_import_tentative(st, value, NULL, &mt, taken) == 0)
      src = dlbpy_tensor_new(st, mt);
  } else if (producer > 0) {
    PyObject *args[1] = {value};
    src = dlbpy_asarray(module, args, 1, NULL);
  }
  if (producer > 0) {
    if (src != NULL &&
        !dlb_dtype_equal(((dlbpy_tensor *)src)->mt->dl_tensor.dtype, dtype)) {
      const DLTensor *t = &((dlbpy_tensor *)src)->mt->dl_tensor;
      char have[DLB_DTYPE_NAME_MAX];
      if (dlb_dtype_format(t->dtype, have, sizeof have) != DLB_OK)
        have[0] = '\0';
      PyObject *from = src;
      src = NULL;
      if (dlbpy_dtype_readable(t->dtype) && dlbpy_dtype_has_scalars(dtype)) {
        /* Memory the CPU cannot read is read from a copy on the host, as
         * a value of the tensor's own dtype is copied there. */
        PyObject *readable = from;
        Py_INCREF(readable);
        if (!dlb_device_type_cpu_accessible(t->device.device_type)) {
          DLManagedTensorVersioned *host;
          Py_SETREF(readable,
                    dlbpy_copy_to(((dlbpy_tensor *)from)->mt,
                                  (DLDevice){kDLCPU, 0}, PyExc_BufferError,
                                  &host) < 0
                        ? NULL
                        : dlbpy_tensor_new(
                              dlbpy_state_of_type(Py_TYPE(self)), host));
        }
        PyObject *values =
            readable != NULL ? dlbpy_tensor_tolist(readable, NULL) : NULL;
        if (values != NULL) {
          PyObject *vargs[2] = {values, dtype_name};
          src = dlbpy_in_shape_of(dlbpy_asarray(module, vargs, 1, kwnames),
                                  readable);
          Py_DECREF(values);
        }
        Py_XDECREF(readable);
      } else {
        PyErr_Format(PyExc_TypeError,
                     "t[...] = value: the value is %s, the tensor %s, and "
                     "dlbridge has no conversion between them",
                     have, name);
      }
      Py_DECREF(from);
    }
  } else if (producer == 0) {
    PyObject *vargs[2] = {value, dtype_name};
    src = dlbpy_asarray(module, vargs, 1, kwnames);
  }
  Py_DECREF(kwnames);
  Py_DECREF(dtype_name);
  if (src == NULL) dlbpy_capsule_settle(taken, 0);
  return src;
}

/* Sub-byte units, packed (compact, from bit 0 of the byte at data +
 * byte_offset) or padded (a byte each, the value in its low bits): what
 * dlb_copy, which knows no flags, cannot tell apart. */

/* Unit k of n-bit packed units at p, in a byte: sign-extended for
 * integers, zero-extended otherwise (the value a padded byte holds). */
static uint8_t dlbpy_unpack_unit(const uint8_t *p, int64_t k, unsigned n,
                                 int is_signed) {
  const int64_t bit = k * (int64_t)n;
  unsigned w = p[bit / 8];
  if ((bit % 8) + n > 8) w |= (unsigned)p[bit / 8 + 1] << 8;
  unsigned v = (w >> (bit % 8)) & ((1u << n) - 1u);
  if (is_signed && (v >> (n - 1)) != 0) v |= 0xffu << n;
  return (uint8_t)v;
}

/* A compact byte-per-unit tensor over buf, of t's shape. */
static DLTensor dlbpy_bytes_like(const DLTensor *t, void *buf,
                                 int64_t *strides) {
  DLTensor b = *t;
  b.data = buf;
  b.byte_offset = 0;
  b.dtype = (DLDataType){kDLUInt, 8, 1};
  (void)dlb_compact_strides(t->ndim, t->shape, 0, strides);
  b.strides = strides;
  return b;
}

/* dlbpy_write where either side holds padded sub-byte units, or src is
 * broadcast to dst's shape: through a byte per unit in dst's shape,
 * unpacked from a packed src (compact, as packed tensors are) or copied
 * from a padded one, then copied into a padded dst or packed into a
 * packed one. */
static int dlbpy_write_subbyte(const DLTensor *src, int src_padded,
                               const DLTensor *dst, int dst_padded) {
  const unsigned n = dlb_dtype_bits(dst->dtype);
  const int is_signed = dst->dtype.code == kDLInt;
  int64_t count = 0, src_count = 0;
  if (dlb_tensor_numel(dst, &count) != DLB_OK ||
      dlb_tensor_numel(src, &src_count) != DLB_OK)
    return dlbpy_fail(DLB_E_OVERFLOW, PyExc_ValueError, "t[...] = value");
  uint8_t *units = PyMem_Malloc((size_t)(count > 0 ? count : 1));
  uint8_t *unpacked = src_padded ? NULL
                                 : PyMem_Malloc((size_t)(src_count > 0
                                                             ? src_count
                                                             : 1));
  int rc = -1;
  if (units == NULL || (!src_padded && unpacked == NULL)) {
    PyErr_Format(PyExc_MemoryError,
                 "t[...] = value: %lld bytes to hold the sub-byte elements "
                 "a byte each, before they are packed, do not fit in memory",
                 (long long)(count + (src_padded ? 0 : src_count)));
    goto done;
  }
  int64_t s1[DLB_MAX_NDIM], s2[DLB_MAX_NDIM], s3[DLB_MAX_NDIM];
  DLTensor bsrc = *src;
  if (src_padded) {
    bsrc.dtype = (DLDataType){kDLUInt, 8, 1};
  } else {
    const uint8_t *p = (const uint8_t *)src->data + src->byte_offset;
    for (int64_t k = 0; k < src_count; k++)
      unpacked[k] = dlbpy_unpack_unit(p, k, n, is_signed);
    bsrc = dlbpy_bytes_like(src, unpacked, s1);
  }
  DLTensor bunits = dlbpy_bytes_like(dst, units, s2), from;
  if (dlbpy_broadcast_to(&bsrc, &bunits, &from, s3) < 0) goto done;
  dlb_status s = dlb_copy(&from, &bunits);
  if (s == DLB_OK && dst_padded) {
    DLTensor bdst = *dst;
    bdst.dtype = (DLDataType){kDLUInt, 8, 1};
    s = dlb_copy(&bunits, &bdst);
  } else if (s == DLB_OK) {
    dlbpy_pack_units((uint8_t *)dst->data + dst->byte_offset, n, units,
                     count);
  }
  rc = s == DLB_OK ? 0 : dlbpy_fail(s, PyExc_ValueError, "t[...] = value");
done:
  PyMem_Free(units);
  PyMem_Free(unpacked);
  return rc;
}

static int dlbpy_same_shape(const DLTensor *a, const DLTensor *b) {
  if (a->ndim != b->ndim) return 0;
  for (int32_t d = 0; d < a->ndim; d++)
    if (a->shape[d] != b->shape[d]) return 0;
  return 1;
}

/* Writes src's elements into dst, both CPU-accessible and of the same
 * dtype, src broadcast to dst's shape; *_padded: the side's sub-byte
 * units take a byte each (IS_SUBBYTE_TYPE_PADDED). */
static int dlbpy_write(const DLTensor *src, int src_padded,
                       const DLTensor *dst, int dst_padded) {
  /* Packed units copy as they are only between tensors of one shape:
   * broadcasting repeats units, which packed strides cannot say. */
  if (dlb_dtype_is_subbyte(dst->dtype) &&
      (src_padded || dst_padded || !dlbpy_same_shape(src, dst)))
    return dlbpy_write_subbyte(src, src_padded, dst, dst_padded);
  int64_t strides[DLB_MAX_NDIM];
  DLTensor from;
  if (dlbpy_broadcast_to(src, dst, &from, strides) < 0) return -1;
  /* The caller holds references to both tensors' owners. */
  dlb_status s = dlbpy_copy_tensor(&from, dst);
  return s == DLB_OK ? 0 : dlbpy_fail(s, PyExc_ValueError, "t[...] = value");
}

int dlbpy_tensor_ass_subscript(PyObject *self, PyObject *key,
                               PyObject *value) {
  if (value == NULL) {
    PyErr_SetString(PyExc_ValueError, "cannot delete tensor elements");
    return -1;
  }
  if (((dlbpy_tensor *)self)->mt->flags & DLPACK_FLAG_BITMASK_READ_ONLY) {
    PyErr_SetString(PyExc_ValueError, "assignment destination is read-only");
    return -1;
  }
  /* The value first, as NumPy does: its conversion may fail before any
   * index is read. */
  DLDataType dtype = ((dlbpy_tensor *)self)->mt->dl_tensor.dtype;
  /* A capsule value is consumed only when the assignment is done. */
  dlbpy_taken taken;
  PyObject *src = dlbpy_assigned_value(self, value, dtype, &taken);
  if (src == NULL) return -1;
  DLManagedTensorVersioned *dst;
  int copied, rc = -1;
  const DLManagedTensorVersioned *mt = dlbpy_tensor_owned(self);
  if (mt == NULL || dlbpy_index_select(mt, key, &dst, &copied) < 0) goto done;
  const DLManagedTensorVersioned *from = ((dlbpy_tensor *)src)->mt;
  DLManagedTensorVersioned *host = NULL;
  if (copied) {
    PyErr_SetString(PyExc_ValueError,
                    "t[...] = value: these packed sub-byte elements are "
                    "not one compact run from the start of a byte, so no "
                    "view can write them");
  } else if (!dlb_device_type_cpu_accessible(
                 dst->dl_tensor.device.device_type)) {
    dlbpy_device_error("tensor", dst->dl_tensor.device);
  } else if (!dlb_device_type_cpu_accessible(
                 from->dl_tensor.device.device_type) &&
             dlbpy_copy_to(from, (DLDevice){kDLCPU, 0}, PyExc_BufferError,
                           &host) < 0) {
    /* raised */
  } else {
    const uint64_t padded = DLPACK_FLAG_BITMASK_IS_SUBBYTE_TYPE_PADDED;
    const DLManagedTensorVersioned *v = host != NULL ? host : from;
    rc = dlbpy_write(&v->dl_tensor, (v->flags & padded) != 0,
                     &dst->dl_tensor, (dst->flags & padded) != 0);
  }
  dlb_tensor_release(host);
  dlb_tensor_release(dst);
done:
  Py_DECREF(src);
  dlbpy_capsule_settle(&taken, rc == 0);
  return rc;
}
