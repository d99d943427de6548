/*
 * export.c -- Tensor.__dlpack__ and Tensor.__dlpack_device__: the producer
 * side of the Python protocol.
 */
#include "dlbpy.h"

/* TypeError for obj, given as what, which is not a tuple of two ints: a
 * tuple of another length is named by its length ("not tuple" would say
 * nothing). Returns -1. */
static int dlbpy_not_a_pair(PyObject *obj, const char *what,
                            const char *pair) {
  if (PyTuple_Check(obj))
    PyErr_Format(PyExc_TypeError,
                 "%s must be None or a %s tuple of 2 ints, not a tuple of "
                 "%zd items",
                 what, pair, PyTuple_GET_SIZE(obj));
  else
    PyErr_Format(PyExc_TypeError,
                 "%s must be None or a %s tuple of ints, not %.100s", what,
                 pair, Py_TYPE(obj)->tp_name);
  return -1;
}

/* max_version: None or (major, minor) of ints >= 0; parts past 64 bits
 * saturate, since a consumer may name any future version (NumPy and
 * PyTorch accept them). Sets *versioned to 1 for a major >= 1: the
 * consumer reads the versioned struct, whatever minor it names (minors
 * only add enum values). */
static int dlbpy_parse_max_version(PyObject *obj, int *versioned) {
  *versioned = 0;
  if (obj == NULL || obj == Py_None) return 0;
  if (!PyTuple_Check(obj) || PyTuple_GET_SIZE(obj) != 2)
    return dlbpy_not_a_pair(obj, "max_version", "(major, minor)");
  int64_t major, minor;
  if (dlbpy_parse_int64_saturating(PyTuple_GET_ITEM(obj, 0),
                                   "max_version[0]", &major) < 0 ||
      dlbpy_parse_int64_saturating(PyTuple_GET_ITEM(obj, 1),
                                   "max_version[1]", &minor) < 0)
    return -1;
  if (major < 0 || minor < 0) {
    PyErr_Format(PyExc_ValueError, "max_version is (%R, %R); versions are >= 0",
                 PyTuple_GET_ITEM(obj, 0), PyTuple_GET_ITEM(obj, 1));
    return -1;
  }
  *versioned = major >= 1;
  return 0;
}

/* dl_device: None or (device_type, device_id). Types are TypeError; a
 * device DLPack does not define is BufferError, as the standard says for a
 * device the producer cannot export to. */
static int dlbpy_parse_dl_device(PyObject *obj, int *given, DLDevice *out) {
  *given = 0;
  if (obj == NULL || obj == Py_None) return 0;
  if (!PyTuple_Check(obj) || PyTuple_GET_SIZE(obj) != 2)
    return dlbpy_not_a_pair(obj, "dl_device", "(device_type, device_id)");
  /* Numbers past 64 bits name no device either. */
  int64_t type, id;
  if (dlbpy_parse_int64_saturating(PyTuple_GET_ITEM(obj, 0), "dl_device[0]",
                                   &type) < 0 ||
      dlbpy_parse_int64_saturating(PyTuple_GET_ITEM(obj, 1), "dl_device[1]",
                                   &id) < 0)
    return -1;
  DLDevice device;
  device.device_type = (DLDeviceType)(int32_t)type;
  device.device_id = (int32_t)id;
  dlb_status s = DLB_OK;
  if (type < INT32_MIN || type > INT32_MAX || id < INT32_MIN || id > INT32_MAX)
    s = DLB_E_DEVICE;
  else
    s = dlb_device_normalize(&device);
  if (s != DLB_OK) {
    PyErr_Format(PyExc_BufferError,
                 "dl_device %R is not a device dlbridge can export to", obj);
    return -1;
  }
  *given = 1;
  *out = device;
  return 0;
}

/*
 * The stream rules of the standard, for the device the consumer will use
 * the data on. CUDA-family memory (cuda, cuda_host, cuda_managed) follows
 * CUDA's: None or 1 is the legacy default stream, 2 the per-thread default,
 * 0 is ambiguous and forbidden, -1 asks for no synchronisation, other values
 * are handles. ROCm's: None or 0 is the default, 1 and 2 are forbidden.
 * CPU memory has no streams. Stores the value in *stream (DLB_STREAM_NONE
 * for None). A refused value raises st's StreamError.
 */
static int dlbpy_check_stream(dlbpy_state *st, PyObject *obj, DLDevice device,
                              int64_t *out) {
  *out = DLB_STREAM_NONE;
  if (obj == NULL || obj == Py_None) return 0;
  int64_t stream;
  if (dlbpy_parse_int64(obj, "stream", &stream) < 0) return -1;
  *out = stream;
  /* Named only in a refusal: most calls pass a valid stream. */
  char name[DLB_DEVICE_NAME_MAX] = "";
  switch (device.device_type) {
    case kDLCPU:
      PyErr_Format(st->stream_error,
                   "stream must be None for cpu memory, not %lld",
                   (long long)stream);
      return -1;
    case kDLCUDA:
    case kDLCUDAHost:
    case kDLCUDAManaged:
      if (stream == 0) {
        (void)dlb_device_format(device, name, sizeof name);
        PyErr_Format(st->stream_error,
                     "stream 0 is ambiguous for %s memory; pass 1 for the "
                     "legacy default stream or 2 for the per-thread default "
                     "stream",
                     name);
        return -1;
      }
      break;
    case kDLROCM:
    case kDLROCMHost:
      if (stream == 1 || stream == 2) {
        (void)dlb_device_format(device, name, sizeof name);
        PyErr_Format(st->stream_error,
                     "stream %lld is not allowed for %s memory; pass None or "
                     "0 for the default stream",
                     (long long)stream, name);
        return -1;
      }
      break;
    default:
      break;
  }
  if (stream < -1) {
    PyErr_Format(st->stream_error,
                 "stream %lld is not a stream handle (handles are >= 1, -1 "
                 "means no synchronisation)",
                 (long long)stream);
    return -1;
  }
  return 0;
}

/* ------------------------------------------------------------------------
 * Shares
 * ---------------------------------------------------------------------- */

/*
 * What a consumer gets for a tensor it shares with a Tensor: a managed
 * tensor holding a reference to the Tensor, with shape and strides pointing
 * into the Tensor's own struct (immutable, and alive while the Tensor is).
 * One small Python allocation, as NumPy's exports cost: a core share would
 * cost two allocations and a copy of the shape, the largest part of an
 * exchange. The deleter takes the GIL to drop the reference, so it may
 * run anywhere.
 *
 * The same block serves the legacy struct, so a share turns into the other
 * struct in place: exporting the legacy struct and importing it again
 * gives a share of the same source, never a wrapper around a wrapper.
 */
typedef struct {
  union {
    DLManagedTensorVersioned versioned;
    DLManagedTensor legacy;
  } m;
  /* Never a Tensor holding a share itself, nor one that replaced a share
   * (see dlbpy_share_base): a share of a share refers to the first one's
   * source, so re-importing in a loop builds no chain. */
  PyObject *source;
  /* The arrays the share was made pointing at (its source's, which a
   * consumer may not read past by raising ndim) and their length. */
  const int64_t *shape0, *strides0;
  int32_t ndim0;
} dlbpy_light;

static void dlbpy_light_record(dlbpy_light *l, const DLTensor *t) {
  l->shape0 = t->shape;
  l->strides0 = t->strides;
  l->ndim0 = t->ndim;
}

static void dlbpy_light_free(void *ctx) {
  dlbpy_light *l = ctx;
  PyObject *source = l->source;
  /* Kept for the next share, as Tensors are (dlbpy_tensor_new). The
   * source, a Tensor, holds its type and so the module and its state:
   * kept before the source goes, which may take them along. */
  dlbpy_state *st = dlbpy_state_of_type(Py_TYPE(source));
  if (st != NULL && st->spare_light == NULL)
    st->spare_light = l;
  else
    PyMem_Free(l);
  Py_DECREF(source);
}

static void dlbpy_light_deleter(DLManagedTensorVersioned *m) {
  dlbpy_call_with_gil(dlbpy_light_free, m->manager_ctx);
}

static void dlbpy_light_legacy_deleter(DLManagedTensor *m) {
  dlbpy_call_with_gil(dlbpy_light_free, m->manager_ctx);
}

bool dlbpy_is_light(const DLManagedTensorVersioned *m) {
  return m->deleter == dlbpy_light_deleter;
}

void dlbpy_light_release_holding_gil(DLManagedTensorVersioned *m) {
  dlbpy_light_free(m->manager_ctx);
}

bool dlbpy_is_light_legacy(const DLManagedTensor *m) {
  return m->deleter == dlbpy_light_legacy_deleter;
}

void dlbpy_light_legacy_release_holding_gil(DLManagedTensor *m) {
  dlbpy_light_free(m->manager_ctx);
}

/* The struct a share of *tensor describes, and in *tensor the Tensor the
 * share must hold: the source of the share the Tensor holds or held
 * (dlbpy_tensor_owned keeps that one as retired, still pointing into its
 * source), else the Tensor itself. */
static const DLManagedTensorVersioned *dlbpy_share_base(PyObject **tensor) {
  const dlbpy_tensor *t = (const dlbpy_tensor *)*tensor;
  const DLManagedTensorVersioned *base = t->mt;
  if (!dlbpy_is_light(base) && t->retired != NULL) base = t->retired;
  if (dlbpy_is_light(base)) *tensor = ((dlbpy_light *)base->manager_ctx)->source;
  return base;
}

static dlbpy_light *dlbpy_light_alloc(PyObject *source) {
  dlbpy_state *st = dlbpy_state_of_type(Py_TYPE(source));
  dlbpy_light *l = st != NULL ? st->spare_light : NULL;
  if (l != NULL)
    st->spare_light = NULL;
  else
    l = PyMem_Malloc(sizeof *l);
  if (l == NULL) {
    PyErr_NoMemory();
    return NULL;
  }
  l->source = source;
  Py_INCREF(source);
  return l;
}

static int dlbpy_light_new(PyObject *tensor, DLManagedTensorVersioned **out) {
  const DLManagedTensorVersioned *mt = dlbpy_share_base(&tensor);
  dlbpy_light *l = dlbpy_light_alloc(tensor);
  if (l == NULL) return -1;
  DLManagedTensorVersioned *m = &l->m.versioned;
  m->version.major = DLPACK_MAJOR_VERSION;
  m->version.minor = DLPACK_MINOR_VERSION;
  m->manager_ctx = l;
  m->deleter = dlbpy_light_deleter;
  /* The consumer shares the data with this tensor: it is not the only
   * owner, whatever made this tensor. */
  m->flags = mt->flags & ~(uint64_t)DLPACK_FLAG_BITMASK_IS_COPIED;
  m->dl_tensor = mt->dl_tensor;
  dlbpy_light_record(l, &m->dl_tensor);
  *out = m;
  return 0;
}

/* The legacy struct of the share m, in place (m is gone). The caller has
 * checked that the legacy struct can carry m's flags. */
static DLManagedTensor *dlbpy_light_to_legacy(DLManagedTensorVersioned *m) {
  dlbpy_light *l = m->manager_ctx;
  /* The two structs overlap: read before writing. */
  DLTensor t = m->dl_tensor;
  l->m.legacy.dl_tensor = t;
  l->m.legacy.manager_ctx = l;
  l->m.legacy.deleter = dlbpy_light_legacy_deleter;
  return &l->m.legacy;
}

static int dlbpy_same_tensor(const DLTensor *a, const DLTensor *b) {
  if (a->data != b->data || a->byte_offset != b->byte_offset ||
      a->ndim != b->ndim || a->dtype.code != b->dtype.code ||
      a->dtype.bits != b->dtype.bits || a->dtype.lanes != b->dtype.lanes)
    return 0;
  /* The same device as written first: the struct usually still is a copy
   * of its source's, and this check runs on every import of a share. */
  if ((a->device.device_type != b->device.device_type ||
       a->device.device_id != b->device.device_id) &&
      !dlb_device_equal(a->device, b->device))
    return 0;
  if (a->ndim <= 0) return 1;
  if (a->shape == NULL || a->strides == NULL || b->shape == NULL ||
      b->strides == NULL)
    return 0;
  if (a->shape == b->shape && a->strides == b->strides) return 1;
  for (int32_t d = 0; d < a->ndim; d++)
    if (a->shape[d] != b->shape[d] || a->strides[d] != b->strides[d])
      return 0;
  return 1;
}

int dlbpy_try_light_from_legacy(DLManagedTensor *m, uint64_t flags,
                            DLManagedTensorVersioned **out) {
  dlbpy_light *l = m->manager_ctx;
  const dlbpy_tensor *source = (const dlbpy_tensor *)l->source;
  const DLTensor *own = &source->mt->dl_tensor;
  /* A consumer may have rewritten the struct: then it is a foreign one.
   * Flags other than read-only go through the core's checks. */
  if (!dlbpy_same_tensor(&m->dl_tensor, own) ||
      (flags & ~(uint64_t)DLPACK_FLAG_BITMASK_READ_ONLY) != 0)
    return 0;
  DLManagedTensorVersioned *v = &l->m.versioned;
  /* The struct's own fields are all known: the source's. */
  v->dl_tensor = *own;
  v->version.major = DLPACK_MAJOR_VERSION;
  v->version.minor = DLPACK_MINOR_VERSION;
  v->manager_ctx = l;
  v->deleter = dlbpy_light_deleter;
  /* Never wider than the source allows; the consumer shares the data. */
  v->flags = (flags | (source->mt->flags & DLPACK_FLAG_BITMASK_READ_ONLY)) &
             ~(uint64_t)DLPACK_FLAG_BITMASK_IS_COPIED;
  *out = v;
  return 1;
}

/* Whether an array of n >= 1 entries at p, if it starts in the array
 * [a, a + k) the share was made with, ends in it too. A 0-dimensional
 * source's arrays are empty but not NULL: one that starts there runs past
 * them at once. */
static int dlbpy_fits(const int64_t *p, int32_t n, const int64_t *a,
                      int32_t k) {
  const uintptr_t x = (uintptr_t)p, lo = (uintptr_t)a;
  if (a == NULL || k < 0) return 1;
  if (k == 0) return x != lo;
  if (x < lo || x >= (uintptr_t)(a + k)) return 1;
  return (x - lo) % sizeof(int64_t) == 0 && (size_t)n <= (size_t)(a + k - p);
}

int dlbpy_light_arrays_fit(const DLTensor *t, const void *ctx) {
  const dlbpy_light *l = ctx;
  const int32_t n = t->ndim;
  if (n <= 0 || n > DLB_MAX_NDIM) return 0; /* validation refuses it */
  /* The arrays the share was made with, at most as long as then. */
  if (t->shape == l->shape0 && t->strides == l->strides0 && n <= l->ndim0)
    return 0;
  if (dlbpy_fits(t->shape, n, l->shape0, l->ndim0) &&
      dlbpy_fits(t->shape, n, l->strides0, l->ndim0) &&
      dlbpy_fits(t->strides, n, l->shape0, l->ndim0) &&
      dlbpy_fits(t->strides, n, l->strides0, l->ndim0))
    return 0;
  PyErr_Format(PyExc_BufferError,
               "DLPack tensor: ndim is %d, but its shape and strides run "
               "past those of the %d-dimensional dlbridge tensor it was "
               "exported from",
               (int)n, (int)l->ndim0);
  return -1;
}

/* The byte range [*lo, *hi) of t's elements from t->data, padded sub-byte
 * units (as flags say) a byte each; 0 when it cannot be measured (then
 * validation refuses t, as it does NULL data). */
static int dlbpy_span_of(const DLTensor *t, uint64_t flags, int64_t *lo,
                         int64_t *hi) {
  DLTensor u = *t;
  if ((flags & DLPACK_FLAG_BITMASK_IS_SUBBYTE_TYPE_PADDED) &&
      dlb_dtype_is_subbyte(u.dtype))
    u.dtype = (DLDataType){kDLUInt, 8, 1};
  return dlb_tensor_byte_span(&u, lo, hi) == DLB_OK;
}

int dlbpy_light_bounded(const DLTensor *t, uint64_t flags, const void *ctx) {
  const dlbpy_light *l = ctx;
  const DLManagedTensorVersioned *src = ((const dlbpy_tensor *)l->source)->mt;
  int64_t lo, hi, slo, shi;
  if (t->data == NULL || !dlbpy_span_of(t, flags, &lo, &hi) || lo == hi ||
      !dlbpy_span_of(&src->dl_tensor, src->flags, &slo, &shi))
    return 0;
  /* From the source's data: the rewritten data pointer may be anywhere
   * (addresses differ by less than 2^63; a sum past int64 is outside). */
  const int64_t d =
      (int64_t)((uintptr_t)t->data - (uintptr_t)src->dl_tensor.data);
  int64_t first, end;
  if (!__builtin_add_overflow(d, lo, &first) &&
      !__builtin_add_overflow(d, hi, &end) && first >= slo && end <= shi)
    return 0;
  PyErr_Format(PyExc_BufferError,
               "DLPack tensor: its elements reach past the %lld bytes of "
               "the dlbridge tensor it was exported from (a consumer "
               "rewrote its data, byte_offset, shape or strides)",
               (long long)(shi - slo));
  return -1;
}

int dlbpy_light_intact(DLManagedTensorVersioned *m) {
  const dlbpy_light *l = m->manager_ctx;
  const DLManagedTensorVersioned *src = ((const dlbpy_tensor *)l->source)->mt;
  const DLTensor *t = &m->dl_tensor, *own = &src->dl_tensor;
  /* A new ndim over the source's own arrays would read past them. */
  if (dlbpy_light_arrays_fit(t, l) < 0) return -1;
  /* A rewritten struct is judged as a foreign one, within the memory it
   * was given. */
  if (!dlbpy_same_tensor(t, own))
    return dlbpy_light_bounded(t, m->flags, l) < 0 ? -1 : 0;
  /* The data's sub-byte units are packed or padded as the source's are. */
  const uint64_t padded = DLPACK_FLAG_BITMASK_IS_SUBBYTE_TYPE_PADDED;
  if (((m->flags ^ src->flags) & padded) && dlb_dtype_is_subbyte(own->dtype)) {
    PyErr_Format(PyExc_BufferError,
                 "DLPack tensor: flags %s IS_SUBBYTE_TYPE_PADDED, but the "
                 "%u-bit units of the dlbridge tensor it was exported from "
                 "are %s",
                 (m->flags & padded) ? "has" : "lacks",
                 dlb_dtype_bits(own->dtype),
                 (src->flags & padded) ? "padded" : "packed");
    return -1;
  }
  /* Any other flag the source lacks is judged as a foreign tensor's. */
  if (m->flags & ~(src->flags | DLPACK_FLAG_BITMASK_READ_ONLY |
                   DLPACK_FLAG_BITMASK_IS_COPIED))
    return 0;
  /* Never wider than the source allows, and never a copy: the source's
   * data is what it shares. */
  m->flags |= src->flags & DLPACK_FLAG_BITMASK_READ_ONLY;
  m->flags &= ~(uint64_t)DLPACK_FLAG_BITMASK_IS_COPIED;
  return 1;
}

unsigned dlbpy_light_legacy_packed_bits(const DLManagedTensor *m) {
  const dlbpy_light *l = m->manager_ctx;
  const DLManagedTensorVersioned *mt = ((const dlbpy_tensor *)l->source)->mt;
  if (!dlbpy_same_tensor(&m->dl_tensor, &mt->dl_tensor) ||
      !dlb_dtype_is_subbyte(mt->dl_tensor.dtype) ||
      (mt->flags & DLPACK_FLAG_BITMASK_IS_SUBBYTE_TYPE_PADDED))
    return 0;
  return dlb_dtype_bits(mt->dl_tensor.dtype);
}

/* Stores in *out a capsule of what dlb_tensor_to_legacy would make of a
 * share of the tensor and returns 1; returns 0 when the core must convert
 * it (flags the legacy struct cannot carry, NULL strides, a device id it
 * would normalise: the core then raises or converts as before), -1 with an
 * exception set on failure. */
static int dlbpy_try_light_legacy_capsule(PyObject *tensor, PyObject **out) {
  const DLManagedTensorVersioned *mt = dlbpy_share_base(&tensor);
  const DLTensor *t = &mt->dl_tensor;
  if ((mt->flags & (DLPACK_FLAG_BITMASK_READ_ONLY |
                    DLPACK_FLAG_BITMASK_IS_SUBBYTE_TYPE_PADDED)) ||
      (t->strides == NULL && t->ndim != 0))
    return 0;
  DLDevice device = t->device;
  if (dlb_device_normalize(&device) != DLB_OK ||
      device.device_id != t->device.device_id)
    return 0;
  dlbpy_light *l = dlbpy_light_alloc(tensor);
  if (l == NULL) return -1;
  l->m.legacy.dl_tensor = *t;
  l->m.legacy.manager_ctx = l;
  l->m.legacy.deleter = dlbpy_light_legacy_deleter;
  dlbpy_light_record(l, t);
  *out = dlbpy_capsule_legacy(&l->m.legacy);
  return *out != NULL ? 1 : -1;
}

/*
 * Makes the consumer's stream wait, on the device, for the work that
 * produced the data. Whatever dlbridge computes is finished when the call
 * returns; data imported from a producer was ordered before the default
 * stream (from_dlpack passes stream=None), so the default stream is the
 * one to wait for: an event recorded there, waited on by the consumer's.
 * Without the runtime, nobody can have queued work on this memory.
 */
static int dlbpy_hand_off_stream(DLDevice device, int64_t stream) {
  DLDeviceType type = device.device_type;
  int cuda = type == kDLCUDA || type == kDLCUDAHost || type == kDLCUDAManaged;
  int rocm = type == kDLROCM || type == kDLROCMHost;
  if (!cuda && !rocm) return 0;
  void *consumer = NULL;
  int sync = 0;
  dlb_status s = dlb_stream_from_dlpack(type, stream, &consumer, &sync);
  if (s != DLB_OK) return dlbpy_fail(s, PyExc_ValueError, "stream");
  void *producer = cuda ? DLB_CUDA_STREAM_LEGACY : NULL;
  if (!sync || consumer == producer) return 0;
  s = dlb_stream_wait(device, consumer, producer);
  if (s == DLB_OK || s == DLB_E_NO_RUNTIME || s == DLB_E_NO_DEVICE) return 0;
  return dlbpy_fail(s, PyExc_BufferError, "__dlpack__: stream hand-off");
}

int dlbpy_light_to_core(const DLManagedTensorVersioned *light,
                        DLManagedTensorVersioned **out) {
  const dlbpy_light *l = light->manager_ctx;
  /* A core share of the source's tensor: it holds the data through the
   * owner, not through the source object, so views of views build no
   * chain of Python objects either. */
  const DLManagedTensorVersioned *root = dlbpy_tensor_owned(l->source);
  if (root == NULL) return -1;
  DLManagedTensorVersioned *share;
  dlb_status s = dlb_tensor_share(root, &share);
  if (s != DLB_OK) return dlbpy_fail(s, PyExc_BufferError, "DLPack tensor");
  /* What the share may say apart from its source: its flags, and the
   * device name an in_place import gave the memory. */
  share->flags = light->flags;
  share->dl_tensor.device = light->dl_tensor.device;
  *out = share;
  return 0;
}

int dlbpy_export(PyObject *tensor, const DLDevice *device, int copy,
                 DLManagedTensorVersioned **out) {
  const DLManagedTensorVersioned *mt = ((dlbpy_tensor *)tensor)->mt;
  DLDevice own = mt->dl_tensor.device;
  int need_copy = copy == 1;
  if (device != NULL && !dlb_device_equal(*device, own)) {
    if (copy == 0) {
      char from[DLB_DEVICE_NAME_MAX], to[DLB_DEVICE_NAME_MAX];
      if (dlb_device_format(own, from, sizeof from) != DLB_OK) from[0] = '\0';
      if (dlb_device_format(*device, to, sizeof to) != DLB_OK) to[0] = '\0';
      PyErr_Format(PyExc_BufferError,
                   "copy=False, but the tensor is in %s memory and dl_device "
                   "asks for %s: that needs a copy",
                   from, to);
      return -1;
    }
    need_copy = 1;
  }
  if (need_copy)
    return dlbpy_copy_to(mt, device != NULL ? *device : own, PyExc_BufferError,
                         out);
  return dlbpy_light_new(tensor, out);
}

/* The units of a compact padded copy (arg, one byte each) into a compact
 * tensor's units, which dlbpy_make then packs. */
static int dlbpy_fill_from_padded(DLManagedTensorVersioned *mt, int64_t numel,
                                  void *arg) {
  const DLManagedTensorVersioned *padded = arg;
  if (numel > 0)
    memcpy((unsigned char *)mt->dl_tensor.data + mt->dl_tensor.byte_offset,
           (const unsigned char *)padded->dl_tensor.data +
               padded->dl_tensor.byte_offset,
           (size_t)numel);
  return 0;
}

/* copy=True for the legacy struct, which cannot say that sub-byte elements
 * take a byte each: *out, a compact padded copy in memory the CPU can
 * read, becomes a packed copy of the same values (the form the legacy
 * struct reads). 0 when there is nothing to do. */
static int dlbpy_pack_padded_copy(DLManagedTensorVersioned **out) {
  DLManagedTensorVersioned *padded = *out;
  const DLTensor *t = &padded->dl_tensor;
  if (!(padded->flags & DLPACK_FLAG_BITMASK_IS_SUBBYTE_TYPE_PADDED) ||
      !dlb_dtype_is_subbyte(t->dtype) ||
      !dlb_device_type_cpu_accessible(t->device.device_type))
    return 0;
  DLManagedTensorVersioned *packed;
  if (dlbpy_make(t->device, t->dtype, t->ndim, t->shape, 0,
                 dlbpy_fill_from_padded, padded, &packed) < 0)
    return -1;
  packed->flags |= DLPACK_FLAG_BITMASK_IS_COPIED;
  dlbpy_release(padded);
  *out = packed;
  return 0;
}

PyObject *dlbpy_tensor_dlpack(PyObject *self, PyObject *const *args,
                              Py_ssize_t nargsf, PyObject *kwnames) {
  const DLManagedTensorVersioned *mt = ((dlbpy_tensor *)self)->mt;
  /* The common call, no arguments, from a consumer of the legacy struct on
   * cpu memory (no stream to hand off): a share, or the general path. */
  if (PyVectorcall_NARGS(nargsf) == 0 && kwnames == NULL &&
      mt->dl_tensor.device.device_type == kDLCPU) {
    PyObject *capsule = NULL;
    int made = dlbpy_try_light_legacy_capsule(self, &capsule);
    if (made < 0) return NULL;
    if (made) return capsule;
  }
  PyObject *stream_arg = NULL, *max_version = NULL, *dl_device = NULL,
           *copy_arg = NULL;
  const dlbpy_param params[] = {{"stream", DLBPY_KWONLY, &stream_arg},
                                {"max_version", DLBPY_KWONLY, &max_version},
                                {"dl_device", DLBPY_KWONLY, &dl_device},
                                {"copy", DLBPY_KWONLY, &copy_arg}};
  if (dlbpy_parse_args("__dlpack__", args, nargsf, kwnames, params,
                       DLBPY_NPARAMS(params)) < 0)
    return NULL;
  int versioned, has_device, copy;
  int64_t stream;
  DLDevice device = mt->dl_tensor.device;
  if (dlbpy_parse_max_version(max_version, &versioned) < 0 ||
      dlbpy_parse_dl_device(dl_device, &has_device, &device) < 0 ||
      dlbpy_parse_copy(copy_arg, "copy", &copy) < 0 ||
      dlbpy_check_stream(dlbpy_state_of_type(Py_TYPE(self)), stream_arg,
                         device, &stream) < 0)
    return NULL;
  DLManagedTensorVersioned *out;
  if (dlbpy_export(self, has_device ? &device : NULL, copy, &out) < 0)
    return NULL;
  /* The legacy struct has no flags, so a consumer could not know it must
   * not write. A fresh copy is writable and may go. */
  if (!versioned && (out->flags & DLPACK_FLAG_BITMASK_READ_ONLY)) {
    dlbpy_release(out);
    PyErr_SetString(PyExc_BufferError,
                    "the tensor is read-only and the legacy DLPack struct "
                    "cannot say so; ask with max_version=(1, 0) or higher, "
                    "or copy=True");
    return NULL;
  }
  if (!versioned && copy == 1 && dlbpy_pack_padded_copy(&out) < 0) {
    dlbpy_release(out);
    return NULL;
  }
  if (dlbpy_hand_off_stream(device, stream) < 0) {
    dlbpy_release(out);
    return NULL;
  }
  if (versioned) return dlbpy_capsule_versioned(out);
  /* A share turns into the legacy struct in place (it is neither
   * read-only, refused above, nor padded); a copy goes through the core,
   * whose legacy struct dlbpy_adopt_legacy unwraps. */
  if (dlbpy_is_light(out) &&
      !((out->flags & DLPACK_FLAG_BITMASK_IS_SUBBYTE_TYPE_PADDED) &&
        dlb_dtype_is_subbyte(out->dl_tensor.dtype)))
    return dlbpy_capsule_legacy(dlbpy_light_to_legacy(out));
  DLManagedTensor *legacy;
  dlb_status s = dlb_tensor_to_legacy(out, &legacy);
  if (s != DLB_OK) {
    /* Raised before the release, which may run Python code that calls
     * the core and overwrites its message. */
    dlbpy_raise(s, PyExc_BufferError, "__dlpack__");
    dlbpy_release(out);
    return NULL;
  }
  return dlbpy_capsule_legacy(legacy);
}

PyObject *dlbpy_tensor_dlpack_device(PyObject *self, PyObject *unused) {
  (void)unused;
  DLDevice d = ((dlbpy_tensor *)self)->mt->dl_tensor.device;
  PyObject *type =
      dlbpy_device_type_object(dlbpy_state_of_type(Py_TYPE(self)),
                               d.device_type);
  if (type == NULL) return NULL;
  return Py_BuildValue("(Ni)", type, (int)d.device_id);
}
