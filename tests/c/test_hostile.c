/*
 * test_hostile.c -- seeded random hostile input through every entry point
 * that takes foreign tensors, checked against an independent model written
 * in 128-bit arithmetic. Every call must accept exactly what the model
 * accepts; a refusal must be a known negative status with a message, leave
 * out-parameters alone and run no deleter. Accepted tensors must keep their
 * invariants, views of them must stay inside their base and address the
 * elements the model says, and every foreign deleter must run exactly once,
 * after the last tensor sharing it. Built with ASan and UBSan, the same runs
 * catch any undefined arithmetic or stray access on the way.
 */
#include "test.h"

__extension__ typedef __int128 i128;

#define UNTOUCHED ((DLManagedTensorVersioned *)(uintptr_t)0x5a5a)
#define LEGACY_UNTOUCHED ((DLManagedTensor *)(uintptr_t)0x5a5b)
#define D DLB_SLICE_DEFAULT
#define COUNT(a) (sizeof(a) / sizeof((a)[0]))
#define I64_MAX ((i128)INT64_MAX)
#define I64_MIN ((i128)INT64_MIN)

/* ---- random numbers ---------------------------------------------------- */

/* Case counts are sized to run in about a second under the sanitizers;
 * DLB_HOSTILE_SCALE=N multiplies them for a longer search. */
static uint64_t scaled(uint64_t n) {
  const char *s = getenv("DLB_HOSTILE_SCALE");
  long k = s != NULL ? strtol(s, NULL, 10) : 1;
  return k > 1 ? n * (uint64_t)k : n;
}

typedef struct {
  uint64_t s;
} rng;

static uint64_t rnext(rng *r) {
  uint64_t z = (r->s += 0x9e3779b97f4a7c15u);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9u;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebu;
  return z ^ (z >> 31);
}

static uint64_t rbelow(rng *r, uint64_t n) { return n == 0 ? 0 : rnext(r) % n; }

static int rchance(rng *r, unsigned percent) {
  return rbelow(r, 100) < percent;
}

static const int64_t SPECIAL_I64[] = {
    0,
    1,
    2,
    3,
    -1,
    -2,
    INT64_MIN,
    INT64_MIN + 1,
    INT64_MAX,
    INT64_MAX - 1,
    INT64_MAX / 2,
    INT64_MAX / 2 + 1,
    (int64_t)1 << 31,
    (int64_t)1 << 32,
    (int64_t)1 << 61,
    (int64_t)1 << 62,
    -((int64_t)1 << 62),
    INT32_MAX,
    INT32_MIN,
    3037000499, /* floor(sqrt(INT64_MAX)) */
    3037000500,
    -3037000500,
};

static int64_t hostile_i64(rng *r) {
  switch (rbelow(r, 4)) {
    case 0:
      return SPECIAL_I64[rbelow(r, COUNT(SPECIAL_I64))];
    case 1:
      return (int64_t)rnext(r);
    case 2:
      return (int64_t)rbelow(r, 17) - 8;
    default:
      return (int64_t)rbelow(r, 6);
  }
}

static uint64_t hostile_u64(rng *r) {
  static const uint64_t special[] = {0,
                                     1,
                                     7,
                                     8,
                                     255,
                                     4096,
                                     (uint64_t)1 << 32,
                                     (uint64_t)1 << 62,
                                     (uint64_t)INT64_MAX - 7,
                                     (uint64_t)INT64_MAX,
                                     (uint64_t)INT64_MAX + 1,
                                     UINT64_MAX - 4095,
                                     UINT64_MAX - 7,
                                     UINT64_MAX};
  if (rchance(r, 60)) return special[rbelow(r, COUNT(special))];
  return rchance(r, 50) ? rnext(r) : rbelow(r, 1 << 16);
}

static int32_t hostile_i32(rng *r) {
  static const int32_t special[] = {INT32_MIN, INT32_MIN + 1, -65, -64, -2,
                                    -1,        64,            65,   INT32_MAX};
  if (rchance(r, 50)) return special[rbelow(r, COUNT(special))];
  return (int32_t)rnext(r);
}

static void *fake_ptr(uintptr_t v) { return (void *)v; }

static void *hostile_ptr(rng *r) {
  static const uintptr_t special[] = {0,
                                      1,
                                      16,
                                      4096,
                                      (uintptr_t)1 << 40,
                                      (uintptr_t)1 << 47,
                                      (uintptr_t)1 << 62,
                                      (uintptr_t)1 << 63,
                                      UINTPTR_MAX / 2,
                                      UINTPTR_MAX - ((uintptr_t)1 << 40),
                                      UINTPTR_MAX - 4095,
                                      UINTPTR_MAX - 15,
                                      UINTPTR_MAX};
  if (rchance(r, 70)) return fake_ptr(special[rbelow(r, COUNT(special))]);
  return fake_ptr((uintptr_t)rnext(r));
}

static const DLDataType VALID_DTYPES[] = {
    {kDLInt, 8, 1},       {kDLInt, 32, 1},      {kDLInt, 64, 1},
    {kDLInt, 1, 1},       {kDLInt, 4, 1},       {kDLUInt, 2, 1},
    {kDLUInt, 16, 1},     {kDLFloat, 16, 1},    {kDLFloat, 32, 1},
    {kDLFloat, 64, 1},    {kDLFloat, 8, 1},     {kDLBfloat, 16, 1},
    {kDLComplex, 64, 1},  {kDLComplex, 128, 1}, {kDLComplex, 32, 1},
    {kDLBool, 8, 1},      {kDLOpaqueHandle, 64, 1},
    {kDLFloat8_e4m3fn, 8, 1}, {kDLFloat8_e8m0fnu, 8, 1},
    {kDLFloat6_e2m3fn, 6, 1}, {kDLFloat6_e3m2fn, 6, 1},
    {kDLFloat4_e2m1fn, 4, 1}, {kDLFloat, 32, 4},  {kDLInt, 4, 2},
    {kDLUInt, 8, 3},      {kDLInt, 64, 65535},
};

static DLDataType random_dtype(rng *r) {
  if (rchance(r, 70)) return VALID_DTYPES[rbelow(r, COUNT(VALID_DTYPES))];
  DLDataType d;
  d.code = (uint8_t)(rchance(r, 70) ? rbelow(r, 20) : rnext(r));
  d.bits = (uint8_t)(rchance(r, 50) ? (1u << rbelow(r, 8)) : rnext(r));
  d.lanes = (uint16_t)(rchance(r, 60) ? rbelow(r, 3) : rnext(r));
  return d;
}

static DLDevice random_device(rng *r) {
  static const int types[] = {kDLCPU,       kDLCUDA,   kDLCUDAHost,
                              kDLROCM,      kDLROCMHost, kDLCUDAManaged,
                              kDLOneAPI,    kDLTrn,    kDLMAIA};
  DLDevice dev;
  if (rchance(r, 80))
    dev.device_type = (DLDeviceType)types[rbelow(r, COUNT(types))];
  else
    dev.device_type = (DLDeviceType)(rchance(r, 50) ? (int)rbelow(r, 22) - 1
                                                    : (int)hostile_i32(r));
  dev.device_id = rchance(r, 70) ? (int32_t)rbelow(r, 3) : hostile_i32(r);
  return dev;
}

static uint64_t random_flags(rng *r) {
  static const uint64_t special[] = {0, 0, 0, 1, 2, 3, 4, 5, 6, 7, 8,
                                     (uint64_t)1 << 63, UINT64_MAX};
  return rchance(r, 90) ? special[rbelow(r, COUNT(special))] : rnext(r);
}

/* ---- the model --------------------------------------------------------- */

static int model_dtype_ok(DLDataType d) {
  unsigned b = d.bits;
  if (d.lanes == 0 || b == 0) return 0;
  int ok = 0;
  switch (d.code) {
    case kDLInt:
    case kDLUInt:
      ok = b == 1 || b == 2 || b == 4 || b == 8 || b == 16 || b == 32 ||
           b == 64;
      break;
    case kDLFloat:
      ok = b == 8 || b == 16 || b == 32 || b == 64;
      break;
    case kDLOpaqueHandle:
      ok = b == 64 || b == sizeof(void *) * 8;
      break;
    case kDLBfloat:
      ok = b == 16;
      break;
    case kDLComplex:
      ok = b == 32 || b == 64 || b == 128;
      break;
    case kDLBool:
    case kDLFloat8_e3m4:
    case kDLFloat8_e4m3:
    case kDLFloat8_e4m3b11fnuz:
    case kDLFloat8_e4m3fn:
    case kDLFloat8_e4m3fnuz:
    case kDLFloat8_e5m2:
    case kDLFloat8_e5m2fnuz:
    case kDLFloat8_e8m0fnu:
      ok = b == 8;
      break;
    case kDLFloat6_e2m3fn:
    case kDLFloat6_e3m2fn:
      ok = b == 6;
      break;
    case kDLFloat4_e2m1fn:
      ok = b == 4;
      break;
    default:
      return 0;
  }
  if (!ok) return 0;
  return (b * d.lanes) % 8 == 0 || d.lanes == 1;
}

static int model_device_known(int type) {
  return (type >= 1 && type <= 4) || (type >= 7 && type <= 18);
}

static int model_host_type(int type) {
  return type == kDLCPU || type == kDLCUDAHost || type == kDLROCMHost ||
         type == kDLCUDAManaged;
}

/* The element count, or 0 when the shape is not valid. */
static int model_numel(int32_t ndim, const int64_t *shape, int64_t *out) {
  if (ndim < 0 || ndim > DLB_MAX_NDIM) return 0;
  if (ndim > 0 && shape == NULL) return 0;
  int zero = 0;
  for (int32_t i = 0; i < ndim; i++) {
    if (shape[i] < 0) return 0;
    if (shape[i] == 0) zero = 1;
  }
  i128 n = zero ? 0 : 1;
  for (int32_t i = 0; i < ndim && !zero; i++) {
    n *= shape[i];
    if (n > I64_MAX) return 0;
  }
  *out = (int64_t)n;
  return 1;
}

static i128 floor_div8(i128 x) { return x >= 0 ? x / 8 : -((-x + 7) / 8); }

/* Bits one element takes in storage: padded sub-byte elements a byte each. */
static uint32_t model_eb(DLDataType d, int padded) {
  uint32_t bits = (uint32_t)d.bits * d.lanes;
  return bits % 8 != 0 && padded ? 8 * ((bits + 7) / 8) : bits;
}

/* The byte range relative to data, or 0 when some part leaves int64. */
static int model_span(const DLTensor *t, int64_t numel, uint32_t eb,
                      int64_t *lo, int64_t *hi) {
  if (t->byte_offset > (uint64_t)INT64_MAX) return 0;
  i128 off = (i128)t->byte_offset;
  if (numel == 0) {
    *lo = *hi = (int64_t)off;
    return 1;
  }
  i128 mn = 0, mx = 0;
  if (t->strides == NULL) {
    mx = numel - 1;
  } else {
    for (int32_t d = 0; d < t->ndim; d++) {
      i128 term = (i128)(t->shape[d] - 1) * t->strides[d];
      if (term < 0)
        mn += term;
      else
        mx += term;
      if (mn < I64_MIN || mx > I64_MAX) return 0;
    }
  }
  if (mx + 1 > I64_MAX) return 0;
  i128 blo = floor_div8(mn * eb), bhi = ((mx + 1) * eb + 7) / 8;
  if (blo < I64_MIN || bhi > I64_MAX || bhi - blo > I64_MAX) return 0;
  if (blo + off > I64_MAX || bhi + off > I64_MAX) return 0;
  *lo = (int64_t)(blo + off);
  *hi = (int64_t)(bhi + off);
  return 1;
}

static int model_tensor_ok(const DLTensor *t, int padded) {
  int64_t n = 0;
  if (!model_numel(t->ndim, t->shape, &n)) return 0;
  if (!model_dtype_ok(t->dtype)) return 0;
  if (!model_device_known((int)t->device.device_type) ||
      t->device.device_id < 0)
    return 0;
  uint32_t bits = (uint32_t)t->dtype.bits * t->dtype.lanes;
  if (bits % 8 != 0 && !padded && n > 0 && t->strides != NULL) {
    int64_t expected = 1;
    for (int32_t d = t->ndim - 1; d >= 0; d--) {
      if (t->shape[d] == 1) continue;
      if (t->strides[d] != expected) return 0;
      expected *= t->shape[d];
    }
  }
  int64_t lo = 0, hi = 0;
  if (!model_span(t, n, model_eb(t->dtype, padded), &lo, &hi)) return 0;
  if (t->data == NULL && n > 0) return 0;
  i128 base = (i128)(uintptr_t)t->data;
  return base + lo >= 0 && base + hi <= (i128)UINTPTR_MAX;
}

#define KNOWN_FLAGS 7u

static int model_flags_ok(uint64_t flags) {
  return (flags & ~(uint64_t)KNOWN_FLAGS) == 0;
}

static int is_padded(uint64_t flags) {
  return (flags & DLPACK_FLAG_BITMASK_IS_SUBBYTE_TYPE_PADDED) != 0;
}

/* Compact strides (row-major, column-major with fortran), extent 0 counted
 * as 1; returns 0 when one does not fit in int64. */
static int model_compact(int32_t ndim, const int64_t *shape, int fortran,
                         int64_t *out) {
  i128 acc = 1;
  for (int32_t k = 0; k < ndim; k++) {
    int32_t d = fortran ? k : ndim - 1 - k;
    if (acc > I64_MAX) return 0;
    out[d] = (int64_t)acc;
    acc *= shape[d] == 0 ? 1 : shape[d];
  }
  return 1;
}

/* Wrapping or adopting desc with flags accepts what validation accepts. */
static int model_import_ok(const DLTensor *desc, uint64_t flags) {
  return model_flags_ok(flags) && model_tensor_ok(desc, is_padded(flags));
}

/* The strides an import gives a description without them: compact ones,
 * 0 from where they stop fitting (only possible with no elements). */
static void model_implied(int32_t ndim, const int64_t *shape, int64_t *out) {
  i128 acc = 1;
  for (int32_t d = ndim - 1; d >= 0; d--) {
    out[d] = acc > I64_MAX ? 0 : (int64_t)acc;
    if (acc <= I64_MAX) acc *= shape[d] == 0 ? 1 : shape[d];
  }
}

/* ---- reporting --------------------------------------------------------- */

static uint64_t g_seed;
static const DLTensor *g_case;

static void dump_case(void) {
  fprintf(stderr, "  seed %llu\n", (unsigned long long)g_seed);
  const DLTensor *t = g_case;
  if (t == NULL) return;
  fprintf(stderr,
          "  data %p ndim %d dtype (%u,%u,%u) device (%d,%d) byte_offset "
          "%llu\n",
          t->data, (int)t->ndim, (unsigned)t->dtype.code,
          (unsigned)t->dtype.bits, (unsigned)t->dtype.lanes,
          (int)t->device.device_type, (int)t->device.device_id,
          (unsigned long long)t->byte_offset);
  for (int32_t d = 0; d >= 0 && d < t->ndim && d < DLB_MAX_NDIM && d < 8;
       d++)
    fprintf(stderr, "  shape[%d] %lld strides[%d] %lld\n", (int)d,
            t->shape != NULL ? (long long)t->shape[d] : 0LL, (int)d,
            t->strides != NULL ? (long long)t->strides[d] : 0LL);
}

#define HCHECK(cond)                                                    \
  do {                                                                  \
    if (!(cond)) {                                                      \
      dump_case();                                                      \
      dlb_test_failed(__FILE__, __LINE__, "CHECK(%s) [%s]", #cond,      \
                      dlb_last_error());                                \
    }                                                                   \
  } while (0)

/* A message no call here can produce, set before each call: a refusal must
 * replace it with its own, a success must leave it alone. */
static const char MARKER[] = "\x01\x02 a marker longer than any name tried";
static char g_marker[512];

static void mark_error(void) {
  DLDevice dev;
  (void)dlb_device_parse(MARKER, &dev);
  snprintf(g_marker, sizeof g_marker, "%s", dlb_last_error());
}

static int error_marked(void) {
  return strcmp(dlb_last_error(), g_marker) == 0;
}

/* A refusal: a listed negative status and a message of its own. */
static void check_refusal(dlb_status st) {
  HCHECK(st < 0);
  HCHECK(strcmp(dlb_status_name(st), "DLB_E_UNKNOWN") != 0);
  HCHECK(dlb_last_error()[0] != '\0' && !error_marked());
}

/* ---- hostile tensors --------------------------------------------------- */

/* A tensor with its own shape and strides, room for DLB_MAX_NDIM entries:
 * a larger ndim must be refused before either is read. */
typedef struct {
  DLTensor t;
  int64_t shape[DLB_MAX_NDIM];
  int64_t strides[DLB_MAX_NDIM];
} tcase;

static void fill_compact(tcase *c) {
  int32_t n = c->t.ndim < 0 ? 0 : c->t.ndim;
  if (n > DLB_MAX_NDIM) n = DLB_MAX_NDIM;
  if (!model_compact(n, c->shape, 0, c->strides))
    for (int32_t d = 0; d < n; d++) c->strides[d] = 1;
}

/* Mostly small, mostly valid tensors at a plausible address. */
static void gen_sane(rng *r, tcase *c) {
  DLTensor *t = &c->t;
  uint64_t k = rbelow(r, 10);
  t->ndim = (int32_t)(k < 7 ? rbelow(r, 5) : k < 9 ? 5 + rbelow(r, 4)
                                                    : DLB_MAX_NDIM);
  for (int32_t d = 0; d < t->ndim; d++) {
    if (t->ndim == DLB_MAX_NDIM)
      c->shape[d] = rchance(r, 5) ? 2 : 1;
    else
      c->shape[d] = rchance(r, 8) ? 0 : 1 + (int64_t)rbelow(r, 4);
  }
  uint64_t s = rbelow(r, 10);
  if (s < 2) {
    t->strides = NULL;
  } else if (s < 5) {
    fill_compact(c);
  } else {
    for (int32_t d = 0; d < t->ndim; d++)
      c->strides[d] = (int64_t)rbelow(r, 13) - 6;
  }
  t->dtype = VALID_DTYPES[rbelow(r, COUNT(VALID_DTYPES))];
  t->device = random_device(r);
  if (rchance(r, 85)) {
    t->device.device_id = (int32_t)rbelow(r, 3);
    if (!model_device_known((int)t->device.device_type))
      t->device.device_type = kDLCPU;
  }
  t->data = rchance(r, 8) ? NULL
                          : fake_ptr(((uintptr_t)1 << 40) +
                                     (uintptr_t)rbelow(r, 1 << 20) * 64);
  t->byte_offset = rchance(r, 50) ? 0 : rbelow(r, 1 << 16);
}

/* Few dimensions with extents and strides that stretch int64, so that view
 * arithmetic runs near its limits on tensors the validator accepts. */
static void gen_big(rng *r, tcase *c) {
  static const int64_t extents[] = {1,
                                    2,
                                    3,
                                    7,
                                    (int64_t)1 << 31,
                                    3037000499,
                                    (int64_t)1 << 62,
                                    INT64_MAX / 2,
                                    INT64_MAX - 1,
                                    INT64_MAX};
  static const int64_t strides[] = {0, 1, -1, 2, -2, 3, (int64_t)1 << 31,
                                    -((int64_t)1 << 31), (int64_t)1 << 62,
                                    INT64_MAX, INT64_MIN + 1};
  static const uintptr_t datas[] = {(uintptr_t)1 << 40, (uintptr_t)1 << 62,
                                    (uintptr_t)1 << 63,
                                    UINTPTR_MAX - ((uintptr_t)1 << 40),
                                    UINTPTR_MAX - 4095};
  static const uint64_t offsets[] = {0, 1, 4096, (uint64_t)1 << 62,
                                     (uint64_t)INT64_MAX / 2,
                                     (uint64_t)INT64_MAX - 4096};
  DLTensor *t = &c->t;
  t->ndim = (int32_t)(1 + rbelow(r, 3));
  for (int32_t d = 0; d < t->ndim; d++) {
    c->shape[d] = rchance(r, 40) ? 1 + (int64_t)rbelow(r, 4)
                                 : extents[rbelow(r, COUNT(extents))];
    c->strides[d] = strides[rbelow(r, COUNT(strides))];
  }
  if (rchance(r, 20)) fill_compact(c);
  if (rchance(r, 10)) t->strides = NULL;
  static const DLDataType small[] = {{kDLInt, 8, 1}, {kDLUInt, 8, 1},
                                     {kDLBool, 8, 1}, {kDLInt, 16, 1},
                                     {kDLFloat, 64, 1}, {kDLInt, 4, 1}};
  t->dtype = small[rbelow(r, COUNT(small))];
  t->device.device_type = kDLCPU;
  t->device.device_id = 0;
  t->data = fake_ptr(datas[rbelow(r, COUNT(datas))]);
  t->byte_offset = offsets[rbelow(r, COUNT(offsets))];
}

/* Every field hostile. */
static void gen_hostile(rng *r, tcase *c) {
  DLTensor *t = &c->t;
  t->ndim = rchance(r, 30) ? hostile_i32(r) : (int32_t)rbelow(r, 8);
  int32_t n = t->ndim < 0 ? 0 : t->ndim > DLB_MAX_NDIM ? DLB_MAX_NDIM : t->ndim;
  for (int32_t d = 0; d < n; d++) {
    c->shape[d] = hostile_i64(r);
    c->strides[d] = hostile_i64(r);
  }
  t->dtype = random_dtype(r);
  t->device = random_device(r);
  t->data = hostile_ptr(r);
  t->byte_offset = hostile_u64(r);
}

static void gen_tensor(rng *r, tcase *c) {
  memset(c, 0, sizeof *c);
  c->t.shape = c->shape;
  c->t.strides = c->strides;
  switch (rbelow(r, 5)) {
    case 0:
    case 1:
      gen_sane(r, c);
      break;
    case 2:
      gen_big(r, c);
      break;
    case 3:
      gen_hostile(r, c);
      break;
    default: {
      /* One hostile field in an otherwise sane tensor. */
      gen_sane(r, c);
      DLTensor *t = &c->t;
      int32_t n = t->ndim;
      switch (rbelow(r, 8)) {
        case 0:
          t->ndim = hostile_i32(r);
          break;
        case 1:
          if (n > 0) c->shape[rbelow(r, (uint64_t)n)] = hostile_i64(r);
          break;
        case 2:
          if (n > 0) c->strides[rbelow(r, (uint64_t)n)] = hostile_i64(r);
          t->strides = c->strides;
          break;
        case 3:
          t->byte_offset = hostile_u64(r);
          break;
        case 4:
          t->data = hostile_ptr(r);
          break;
        case 5:
          t->dtype = random_dtype(r);
          break;
        case 6:
          t->device = random_device(r);
          break;
        default:
          if (rchance(r, 50)) t->shape = NULL;
          else t->strides = NULL;
          break;
      }
    }
  }
  if (rchance(r, 3)) c->t.shape = NULL;
}

/* ---- counting deleters ------------------------------------------------- */

static void count_versioned(DLManagedTensorVersioned *m) {
  (*(int *)m->manager_ctx)++;
}

static void count_legacy(DLManagedTensor *m) { (*(int *)m->manager_ctx)++; }

static void count_release(void *ctx) { (*(int *)ctx)++; }

/* ---- accepted tensors -------------------------------------------------- */

static int64_t numel_of(const DLTensor *t) {
  int64_t n = 0;
  HCHECK(model_numel(t->ndim, t->shape, &n));
  return n;
}

/* Absolute byte range [lo, hi) of t's elements; equal ends when empty. */
static void abs_span(const DLManagedTensorVersioned *m, i128 *lo, i128 *hi) {
  const DLTensor *t = &m->dl_tensor;
  int64_t l = 0, h = 0;
  HCHECK(model_span(t, numel_of(t), model_eb(t->dtype, is_padded(m->flags)),
                    &l, &h));
  *lo = (i128)(uintptr_t)t->data + l;
  *hi = (i128)(uintptr_t)t->data + h;
}

/* The address of the element at idx: in bytes, or, for packed units of
 * `packed` bits, in bits. */
static i128 elem_addr(const DLTensor *t, const i128 *idx, unsigned packed) {
  i128 off = 0;
  for (int32_t d = 0; d < t->ndim; d++) {
    HCHECK(idx[d] >= 0 && idx[d] < t->shape[d]);
    off += idx[d] * t->strides[d];
  }
  const i128 start = (i128)(uintptr_t)t->data + (i128)t->byte_offset;
  if (packed != 0) return start * 8 + off * (i128)packed;
  return start + off * (i128)dlb_dtype_itemsize(t->dtype);
}

/* Checks what a tensor made from desc with flags must hold. */
static void check_import(const DLManagedTensorVersioned *out,
                         const DLTensor *desc, uint64_t flags) {
  HCHECK(out != NULL && out != UNTOUCHED);
  HCHECK(dlb_tensor_is_ours(out));
  HCHECK(out->version.major == DLPACK_MAJOR_VERSION);
  HCHECK(out->version.minor == DLPACK_MINOR_VERSION);
  HCHECK(out->flags == flags);
  const DLTensor *o = &out->dl_tensor;
  HCHECK(o->data == desc->data);
  HCHECK(o->byte_offset == desc->byte_offset);
  HCHECK(dlb_dtype_equal(o->dtype, desc->dtype));
  HCHECK(o->ndim == desc->ndim);
  HCHECK(o->device.device_type == desc->device.device_type);
  HCHECK(o->device.device_id ==
         (model_host_type((int)desc->device.device_type)
              ? 0
              : desc->device.device_id));
  HCHECK(o->ndim == 0 || (o->shape != NULL && o->strides != NULL));
  int64_t compact[DLB_MAX_NDIM];
  if (desc->strides == NULL) model_implied(desc->ndim, desc->shape, compact);
  for (int32_t d = 0; d < o->ndim; d++) {
    HCHECK(o->shape[d] == desc->shape[d]);
    HCHECK(o->strides[d] ==
           (desc->strides != NULL ? desc->strides[d] : compact[d]));
  }
  mark_error();
  HCHECK(dlb_managed_validate(out) == DLB_OK);
  HCHECK(model_tensor_ok(o, is_padded(flags)));
  int64_t l1 = 0, h1 = 0, l2 = 0, h2 = 0;
  HCHECK(dlb_tensor_byte_span(desc, &l1, &h1) == DLB_OK);
  HCHECK(dlb_tensor_byte_span(o, &l2, &h2) == DLB_OK);
  HCHECK(l1 == l2 && h1 == h2);
}

/* ---- the validator and the byte span against the model ---------------- */

DLB_TEST(hostile_validate_and_span_match_model) {
  int accepted = 0;
  for (uint64_t seed = 1; seed <= scaled(20000); seed++) {
    rng r = {seed * 7919};
    tcase c;
    gen_tensor(&r, &c);
    g_seed = seed;
    g_case = &c.t;
    int ok = model_tensor_ok(&c.t, 0);
    mark_error();
    dlb_status st = dlb_tensor_validate(&c.t);
    if (ok) {
      HCHECK(st == DLB_OK && error_marked());
      accepted++;
    } else {
      check_refusal(st);
    }

    /* numel and byte_span: the model's values, or a refusal that leaves
     * the outputs alone. */
    int64_t mn = 0, n = -7;
    int shape_ok = model_numel(c.t.ndim, c.t.shape, &mn);
    mark_error();
    st = dlb_tensor_numel(&c.t, &n);
    if (shape_ok) {
      HCHECK(st == DLB_OK && error_marked() && n == mn);
    } else {
      check_refusal(st);
      HCHECK(n == -7);
    }
    int64_t lo = -7, hi = -9, mlo = 0, mhi = 0;
    int span_ok = shape_ok && model_span(&c.t, mn, dlb_dtype_bits(c.t.dtype),
                                         &mlo, &mhi);
    mark_error();
    st = dlb_tensor_byte_span(&c.t, &lo, &hi);
    if (span_ok) {
      HCHECK(st == DLB_OK && error_marked());
      HCHECK(lo == mlo && hi == mhi && lo <= hi);
      if (mn == 0) HCHECK(lo == (int64_t)c.t.byte_offset && hi == lo);
      if (ok && mn > 0) {
        int64_t bytes = 0;
        HCHECK(dlb_dtype_storage_bytes(c.t.dtype, 1, 0, &bytes) == DLB_OK);
        HCHECK(hi - lo >= bytes);
      }
    } else {
      check_refusal(st);
      HCHECK(lo == -7 && hi == -9);
    }
  }
  /* The generator must reach both sides often. */
  int total = (int)scaled(20000);
  CHECK(accepted > total / 5 && accepted < total / 5 * 4);
}

/* ---- every foreign entry point, each deleter run once ------------------ */

DLB_TEST(hostile_entry_points_agree_and_release_once) {
  int adopted = 0, wrapped = 0, legacies = 0;
  for (uint64_t seed = 1; seed <= scaled(8000); seed++) {
    rng r = {seed * 104729};
    tcase c;
    gen_tensor(&r, &c);
    g_seed = seed;
    g_case = &c.t;

    /* dlb_managed_validate and dlb_tensor_adopt. */
    int calls = 0;
    DLManagedTensorVersioned m;
    memset(&m, 0, sizeof m);
    m.version.major = rchance(&r, 85) ? 1u : (uint32_t)hostile_i32(&r);
    m.version.minor = (uint32_t)rnext(&r);
    m.manager_ctx = &calls;
    m.deleter = rchance(&r, 90) ? count_versioned : NULL;
    m.flags = random_flags(&r);
    m.dl_tensor = c.t;
    int mok = m.version.major == 1 && model_flags_ok(m.flags) &&
              model_tensor_ok(&c.t, is_padded(m.flags));
    mark_error();
    dlb_status st = dlb_managed_validate(&m);
    if (mok)
      HCHECK(st == DLB_OK && error_marked());
    else
      check_refusal(st);
    if (m.version.major != 1) HCHECK(st == DLB_E_VERSION);

    DLManagedTensorVersioned *out = UNTOUCHED;
    mark_error();
    st = dlb_tensor_adopt(&m, &out);
    int aok = model_import_ok(&c.t, m.flags) && m.version.major == 1;
    if (aok) {
      HCHECK(st == DLB_OK && error_marked());
      check_import(out, &c.t, m.flags);
      HCHECK(calls == 0);
      dlb_tensor_release(out);
      HCHECK(calls == (m.deleter != NULL));
      adopted++;
    } else {
      check_refusal(st);
      HCHECK(out == UNTOUCHED && calls == 0);
    }

    /* dlb_tensor_wrap. */
    int released = 0;
    uint64_t flags = random_flags(&r);
    out = UNTOUCHED;
    mark_error();
    st = dlb_tensor_wrap(&c.t, flags, count_release, &released, &out);
    if (model_import_ok(&c.t, flags)) {
      HCHECK(st == DLB_OK && error_marked());
      check_import(out, &c.t, flags);
      HCHECK(released == 0);
      dlb_tensor_release(out);
      HCHECK(released == 1);
      wrapped++;
    } else {
      check_refusal(st);
      HCHECK(out == UNTOUCHED && released == 0);
    }

    /* dlb_tensor_from_legacy, then back to legacy when the struct can
     * carry it. */
    int lcalls = 0;
    DLManagedTensor l;
    l.dl_tensor = c.t;
    l.manager_ctx = &lcalls;
    l.deleter = count_legacy;
    flags = random_flags(&r);
    out = UNTOUCHED;
    mark_error();
    st = dlb_tensor_from_legacy(&l, flags, &out);
    if (model_import_ok(&c.t, flags)) {
      HCHECK(st == DLB_OK && error_marked());
      check_import(out, &c.t, flags);
      DLManagedTensor *back = LEGACY_UNTOUCHED;
      mark_error();
      st = dlb_tensor_to_legacy(out, &back);
      int sub = dlb_dtype_is_subbyte(c.t.dtype);
      if (flags & DLPACK_FLAG_BITMASK_READ_ONLY) {
        HCHECK(st == DLB_E_READONLY && back == LEGACY_UNTOUCHED);
        dlb_tensor_release(out);
      } else if (is_padded(flags) && sub) {
        HCHECK(st == DLB_E_UNSUPPORTED && back == LEGACY_UNTOUCHED);
        dlb_tensor_release(out);
      } else {
        HCHECK(st == DLB_OK && error_marked());
        HCHECK(back->dl_tensor.data == c.t.data);
        HCHECK(back->dl_tensor.ndim == c.t.ndim);
        HCHECK(back->dl_tensor.byte_offset == c.t.byte_offset);
        HCHECK(c.t.ndim == 0 || back->dl_tensor.strides != NULL);
        HCHECK(lcalls == 0);
        dlb_legacy_release(back);
      }
      HCHECK(lcalls == 1);
      legacies++;
    } else {
      check_refusal(st);
      HCHECK(out == UNTOUCHED && lcalls == 0);
    }
  }
  CHECK(adopted > 1000 && wrapped > 1000 && legacies > 1000);
}

/* ---- random view sequences on adopted tensors -------------------------- */

#define POOL 12

typedef struct {
  DLManagedTensorVersioned *t[POOL];
  int n;
  int *calls; /* the foreign deleter's count */
} pool;

static void pool_remove(pool *p, int i) {
  p->t[i] = p->t[p->n - 1];
  p->n--;
}

/* Releases member i; the foreign deleter runs with the last member only. */
static void pool_release(pool *p, int i) {
  DLManagedTensorVersioned *t = p->t[i];
  pool_remove(p, i);
  HCHECK(*p->calls == 0);
  dlb_tensor_release(t);
  HCHECK(*p->calls == (p->n == 0 ? 1 : 0));
}

static void pool_add(rng *r, pool *p, DLManagedTensorVersioned *t) {
  if (p->n == POOL) pool_release(p, (int)rbelow(r, POOL));
  p->t[p->n++] = t;
}

/* Set while allocations fail on purpose: then any call that allocates may
 * refuse with DLB_E_NOMEM, which must leave its output alone. */
static int g_oom;

static int nomem(dlb_status st, const void *out, const void *untouched) {
  if (!g_oom || st != DLB_E_NOMEM) return 0;
  check_refusal(st);
  HCHECK(out == untouched);
  return 1;
}

static int is_packed(const DLManagedTensorVersioned *t) {
  return dlb_dtype_is_subbyte(t->dl_tensor.dtype) && !is_padded(t->flags);
}

/* What every successful view v of base must hold; expand says whether v
 * must be read-only. */
static void check_view(const DLManagedTensorVersioned *v,
                       const DLManagedTensorVersioned *base, int expand) {
  HCHECK(v != NULL && v != UNTOUCHED && v != base);
  HCHECK(dlb_tensor_is_ours(v));
  HCHECK(v->version.major == DLPACK_MAJOR_VERSION);
  uint64_t want = base->flags & ~(uint64_t)DLPACK_FLAG_BITMASK_IS_COPIED;
  if (expand) want |= DLPACK_FLAG_BITMASK_READ_ONLY;
  HCHECK(v->flags == want);
  const DLTensor *t = &v->dl_tensor, *b = &base->dl_tensor;
  HCHECK(dlb_dtype_equal(t->dtype, b->dtype));
  HCHECK(t->device.device_type == b->device.device_type &&
         t->device.device_id == b->device.device_id);
  HCHECK(t->ndim == 0 || (t->shape != NULL && t->strides != NULL));
  mark_error();
  HCHECK(dlb_managed_validate(v) == DLB_OK);
  HCHECK(model_tensor_ok(t, is_padded(v->flags)));
  if (numel_of(t) == 0) {
    HCHECK(t->data == b->data && t->byte_offset == b->byte_offset);
    return;
  }
  i128 vlo, vhi, blo, bhi;
  abs_span(v, &vlo, &vhi);
  abs_span(base, &blo, &bhi);
  HCHECK(blo <= vlo && vlo < vhi && vhi <= bhi);
  if (t->data != b->data)
    HCHECK(t->byte_offset == 0 && (uintptr_t)t->data < (uintptr_t)b->data);
}

/* Picks view indices to test: all zeros, all last, then random. */
static void sample_index(rng *r, const DLTensor *t, int which, i128 *idx) {
  for (int32_t d = 0; d < t->ndim; d++)
    idx[d] = which == 0   ? 0
             : which == 1 ? t->shape[d] - 1
                          : (i128)rbelow(r, (uint64_t)t->shape[d]);
}

typedef void (*index_map)(const void *ctx, const DLTensor *base,
                          const DLTensor *view, const i128 *vidx,
                          i128 *bidx);

/* Checks that view elements sit where map says in base. */
static void check_map(rng *r, const DLManagedTensorVersioned *v,
                      const DLManagedTensorVersioned *base, index_map map,
                      const void *ctx) {
  const DLTensor *t = &v->dl_tensor, *b = &base->dl_tensor;
  if (numel_of(t) == 0) return;
  const unsigned packed = is_packed(base) ? dlb_dtype_bits(b->dtype) : 0;
  for (int which = 0; which < 4; which++) {
    i128 vidx[DLB_MAX_NDIM], bidx[DLB_MAX_NDIM];
    sample_index(r, t, which, vidx);
    map(ctx, b, t, vidx, bidx);
    HCHECK(elem_addr(t, vidx, packed) == elem_addr(b, bidx, packed));
  }
}

/* A view of packed units is one run of bits from the start of a byte:
 * compact, with the compact strides of its shape. */
static void check_packed_view(const DLManagedTensorVersioned *v) {
  const DLTensor *t = &v->dl_tensor;
  if (numel_of(t) == 0) return;
  int64_t want = 1;
  for (int32_t d = t->ndim - 1; d >= 0; d--) {
    HCHECK(t->strides[d] == want);
    want *= t->shape[d];
  }
}

/* Judges the outcome st, v of a view call on b, which the model accepts
 * when ok; a refusal must carry refusal (DLB_OK: any failure status). A
 * view of packed units that would not be compact or would start inside a
 * byte is refused with DLB_E_UNSUPPORTED: the model does not work out
 * which those are (test_view.c does, case by case), so it accepts that
 * refusal for packed bases and checks what is made. Returns 1 when the
 * view was made and holds what every view must (expand as for
 * check_view), 0 when it was refused or out of memory. */
static int judge_view(const DLManagedTensorVersioned *b, dlb_status st,
                      const DLManagedTensorVersioned *v, int ok,
                      dlb_status refusal, int expand) {
  if (nomem(st, v, UNTOUCHED)) return 0;
  if (!ok || (is_packed(b) && st == DLB_E_UNSUPPORTED)) {
    check_refusal(st);
    if (!ok && refusal != DLB_OK) HCHECK(st == refusal);
    HCHECK(v == UNTOUCHED);
    return 0;
  }
  HCHECK(st == DLB_OK && error_marked());
  check_view(v, b, expand);
  if (is_packed(b)) check_packed_view(v);
  return 1;
}

/* Python's slice semantics, in 128 bits: a given bound counts from the end
 * when negative and is clamped; a default one is the natural end. */
static i128 clamp_bound(int64_t v, int64_t n, i128 lower, i128 upper) {
  i128 x = v;
  if (x < 0) x += n;
  return x < lower ? lower : x > upper ? upper : x;
}

static int64_t model_slice(int64_t n, dlb_slice s, int64_t *first) {
  i128 step = s.step, start, stop, count;
  if (step > 0) {
    start = s.start == D ? 0 : clamp_bound(s.start, n, 0, n);
    stop = s.stop == D ? (i128)n : clamp_bound(s.stop, n, 0, n);
    count = start < stop ? (stop - start - 1) / step + 1 : 0;
  } else {
    start = s.start == D ? (i128)n - 1
                         : clamp_bound(s.start, n, -1, (i128)n - 1);
    stop = s.stop == D ? -1 : clamp_bound(s.stop, n, -1, (i128)n - 1);
    count = stop < start ? (start - stop - 1) / -step + 1 : 0;
  }
  *first = (int64_t)start;
  return (int64_t)count;
}

typedef struct {
  int32_t n;
  const dlb_slice *s;
  const int64_t *first;
} slice_ctx;

static void map_slice(const void *ctx, const DLTensor *b, const DLTensor *v,
                      const i128 *vidx, i128 *bidx) {
  const slice_ctx *c = ctx;
  (void)v;
  for (int32_t d = 0; d < b->ndim; d++)
    bidx[d] = d < c->n ? c->first[d] + vidx[d] * c->s[d].step : vidx[d];
}

static int64_t slice_bound(rng *r, int64_t n) {
  static const int64_t extremes[] = {D,         INT64_MIN + 1, INT64_MAX,
                                     INT64_MAX - 1, -1,        0};
  if (rchance(r, 30)) return D;
  if (rchance(r, 30)) return extremes[rbelow(r, COUNT(extremes))];
  i128 span = (i128)n * 2 + 3;
  if (span > I64_MAX) return (int64_t)rnext(r);
  return (int64_t)((i128)rbelow(r, (uint64_t)span) - n - 1);
}

static void op_slice(rng *r, pool *p, DLManagedTensorVersioned *b) {
  static const int64_t steps[] = {1, 1, 2, 3, -1, -1, -2, -3, INT64_MAX,
                                  INT64_MIN, INT64_MIN + 1, INT64_MAX - 1,
                                  (int64_t)1 << 62, 0};
  int32_t nd = b->dl_tensor.ndim;
  int32_t ns = rchance(r, 92) ? (int32_t)rbelow(r, (uint64_t)nd + 1)
                              : hostile_i32(r);
  dlb_slice s[DLB_MAX_NDIM];
  int64_t first[DLB_MAX_NDIM], shape[DLB_MAX_NDIM];
  int steps_ok = 1;
  for (int32_t d = 0; d < nd; d++) {
    int64_t n = b->dl_tensor.shape[d];
    s[d].start = slice_bound(r, n);
    s[d].stop = slice_bound(r, n);
    s[d].step = rchance(r, 2) ? 0 : steps[rbelow(r, COUNT(steps) - 1)];
    if (d < ns && s[d].step == 0) steps_ok = 0;
  }
  const dlb_slice *arg = rchance(r, 2) ? NULL : s;
  int ok = ns >= 0 && ns <= nd && (ns == 0 || arg != NULL) && steps_ok;
  DLManagedTensorVersioned *v = UNTOUCHED;
  mark_error();
  dlb_status st = dlb_tensor_slice(b, ns, arg, &v);
  if (!judge_view(b, st, v, ok, DLB_OK, 0)) return;
  HCHECK(v->dl_tensor.ndim == nd);
  for (int32_t d = 0; d < nd; d++) {
    shape[d] = d < ns ? model_slice(b->dl_tensor.shape[d], s[d], &first[d])
                      : b->dl_tensor.shape[d];
    HCHECK(v->dl_tensor.shape[d] == shape[d]);
  }
  slice_ctx ctx = {ns, s, first};
  check_map(r, v, b, map_slice, &ctx);
  pool_add(r, p, v);
}

typedef struct {
  int32_t d;
  int64_t i;
} select_ctx;

static void map_select(const void *ctx, const DLTensor *b, const DLTensor *v,
                       const i128 *vidx, i128 *bidx) {
  const select_ctx *c = ctx;
  (void)v;
  for (int32_t j = 0, k = 0; j < b->ndim; j++)
    bidx[j] = j == c->d ? c->i : vidx[k++];
}

static void op_select(rng *r, pool *p, DLManagedTensorVersioned *b) {
  int32_t nd = b->dl_tensor.ndim;
  int32_t dim = rchance(r, 85) && nd > 0
                    ? (int32_t)rbelow(r, 2 * (uint64_t)nd) - nd
                    : hostile_i32(r);
  int dim_ok = dim >= -nd && dim < nd;
  int32_t d = dim < 0 ? dim + nd : dim;
  int64_t n = dim_ok ? b->dl_tensor.shape[d] : 0;
  static const int64_t hostile[] = {INT64_MIN, INT64_MIN + 1, INT64_MAX, -1,
                                    0};
  int64_t index;
  if (rchance(r, 75) && n > 0) {
    index = (int64_t)rbelow(r, (uint64_t)n);
    if (rchance(r, 50)) index -= n;
  } else if (rchance(r, 50)) {
    index = hostile[rbelow(r, COUNT(hostile))];
  } else {
    index = rchance(r, 50) ? n : -n - 1;
  }
  int ok = dim_ok && index >= -n && index < n;
  DLManagedTensorVersioned *v = UNTOUCHED;
  mark_error();
  dlb_status st = dlb_tensor_select(b, dim, index, &v);
  if (!judge_view(b, st, v, ok, DLB_E_RANGE, 0)) return;
  HCHECK(v->dl_tensor.ndim == nd - 1);
  for (int32_t j = 0, k = 0; j < nd; j++)
    if (j != d) HCHECK(v->dl_tensor.shape[k++] == b->dl_tensor.shape[j]);
  select_ctx ctx = {d, index < 0 ? index + n : index};
  check_map(r, v, b, map_select, &ctx);
  pool_add(r, p, v);
}

static void map_permute(const void *ctx, const DLTensor *b, const DLTensor *v,
                        const i128 *vidx, i128 *bidx) {
  const int32_t *axes = ctx;
  for (int32_t i = 0; i < v->ndim; i++) {
    int32_t a = axes[i] < 0 ? axes[i] + b->ndim : axes[i];
    bidx[a] = vidx[i];
  }
}

static void op_permute(rng *r, pool *p, DLManagedTensorVersioned *b) {
  int32_t nd = b->dl_tensor.ndim;
  int32_t axes[DLB_MAX_NDIM];
  for (int32_t i = 0; i < nd; i++) axes[i] = i;
  for (int32_t i = nd - 1; i > 0; i--) {
    int32_t j = (int32_t)rbelow(r, (uint64_t)i + 1), x = axes[i];
    axes[i] = axes[j];
    axes[j] = x;
  }
  for (int32_t i = 0; i < nd; i++)
    if (rchance(r, 30)) axes[i] -= nd;
  if (nd > 0 && rchance(r, 25)) {
    int32_t i = (int32_t)rbelow(r, (uint64_t)nd);
    switch (rbelow(r, 3)) {
      case 0:
        axes[i] = axes[rbelow(r, (uint64_t)nd)];
        break;
      case 1:
        axes[i] = rchance(r, 50) ? nd : -nd - 1;
        break;
      default:
        axes[i] = hostile_i32(r);
    }
  }
  const int32_t *arg = rchance(r, 3) ? NULL : axes;
  int ok = nd == 0 || arg != NULL;
  unsigned char seen[DLB_MAX_NDIM] = {0};
  for (int32_t i = 0; i < nd && ok; i++) {
    int32_t a = axes[i];
    if (a < -nd || a >= nd) {
      ok = 0;
      break;
    }
    if (a < 0) a += nd;
    if (seen[a]) ok = 0;
    seen[a] = 1;
  }
  DLManagedTensorVersioned *v = UNTOUCHED;
  mark_error();
  dlb_status st = dlb_tensor_permute(b, arg, &v);
  if (!judge_view(b, st, v, ok, DLB_E_INVAL, 0)) return;
  HCHECK(v->dl_tensor.ndim == nd);
  for (int32_t i = 0; i < nd; i++) {
    int32_t a = axes[i] < 0 ? axes[i] + nd : axes[i];
    HCHECK(v->dl_tensor.shape[i] == b->dl_tensor.shape[a]);
  }
  check_map(r, v, b, map_permute, axes);
  pool_add(r, p, v);
}

static void map_reshape(const void *ctx, const DLTensor *b, const DLTensor *v,
                        const i128 *vidx, i128 *bidx) {
  (void)ctx;
  i128 lin = 0;
  for (int32_t d = 0; d < v->ndim; d++) lin = lin * v->shape[d] + vidx[d];
  for (int32_t d = b->ndim - 1; d >= 0; d--) {
    bidx[d] = lin % b->shape[d];
    lin /= b->shape[d];
  }
}

/* A new shape for base: mostly a refactoring of its extents (split by small
 * factors, merged, padded with ones, one entry maybe -1), else hostile. */
static int32_t reshape_target(rng *r, const DLTensor *b, int64_t *out) {
  int32_t n = 0;
  if (rchance(r, 20)) {
    int32_t nd = rchance(r, 80) ? (int32_t)rbelow(r, 6) : hostile_i32(r);
    for (int32_t i = 0; i < nd && i < DLB_MAX_NDIM; i++)
      out[i] = rchance(r, 50) ? hostile_i64(r) : (int64_t)rbelow(r, 5) - 1;
    return nd;
  }
  for (int32_t d = 0; d < b->ndim && n < DLB_MAX_NDIM - 1; d++) {
    int64_t e = b->shape[d];
    if (e == 1 && rchance(r, 50)) continue;
    static const int64_t primes[] = {2, 3, 5, 7};
    int64_t f = primes[rbelow(r, COUNT(primes))];
    if (e > 1 && e % f == 0 && e != f && rchance(r, 50)) {
      out[n++] = f;
      out[n++] = e / f;
    } else if (n > 0 && rchance(r, 30) && out[n - 1] != 0 && e != 0 &&
               (i128)out[n - 1] * e <= I64_MAX) {
      out[n - 1] *= e;
    } else {
      out[n++] = e;
    }
  }
  while (n < DLB_MAX_NDIM && rchance(r, 20)) out[n++] = 1;
  if (n > 0 && rchance(r, 40)) out[rbelow(r, (uint64_t)n)] = -1;
  if (n > 1 && rchance(r, 5)) out[rbelow(r, (uint64_t)n)] = -1;
  return n;
}

static void op_reshape(rng *r, pool *p, DLManagedTensorVersioned *b) {
  int64_t shape[DLB_MAX_NDIM];
  int32_t nd = reshape_target(r, &b->dl_tensor, shape);
  int64_t numel = numel_of(&b->dl_tensor);
  /* The model: one -1 at most, no other negative, counts that match. */
  int ok = nd >= 0 && nd <= DLB_MAX_NDIM;
  int32_t infer = -1;
  i128 known = 1;
  int zero = 0;
  for (int32_t i = 0; ok && i < nd; i++) {
    if (shape[i] == -1) {
      if (infer >= 0) ok = 0;
      infer = i;
    } else if (shape[i] < 0) {
      ok = 0;
    } else if (shape[i] == 0) {
      zero = 1;
    } else if (known <= I64_MAX) {
      known *= shape[i];
    }
  }
  if (zero) known = 0;
  int64_t want[DLB_MAX_NDIM];
  if (ok) {
    for (int32_t i = 0; i < nd; i++) want[i] = shape[i];
    if (infer >= 0) {
      ok = known != 0 && known <= I64_MAX && numel % (int64_t)known == 0;
      if (ok) want[infer] = numel / (int64_t)known;
    } else {
      ok = known == numel;
    }
  }
  DLManagedTensorVersioned *v = UNTOUCHED;
  mark_error();
  dlb_status st = dlb_tensor_reshape(b, nd, shape, &v);
  if (nomem(st, v, UNTOUCHED)) return;
  /* A packed base is compact, and so is every reshape of it: those are
   * made as any other. */
  if (!ok) {
    check_refusal(st);
    HCHECK(st == DLB_E_LAYOUT);
    HCHECK(v == UNTOUCHED);
    return;
  }
  int64_t compact[DLB_MAX_NDIM];
  if (st != DLB_OK) {
    check_refusal(st);
    HCHECK(v == UNTOUCHED);
    /* A copy is needed only for a base that is not compact; strides are
     * out of reach only for an empty target whose compact ones overflow. */
    if (st == DLB_E_NEEDS_COPY)
      HCHECK(numel > 0 && !dlb_tensor_is_c_contiguous(&b->dl_tensor));
    else
      HCHECK(st == DLB_E_OVERFLOW && numel == 0 &&
             !model_compact(nd, want, 0, compact));
    return;
  }
  HCHECK(error_marked());
  check_view(v, b, 0);
  if (is_packed(b)) check_packed_view(v);
  HCHECK(v->dl_tensor.ndim == nd);
  for (int32_t i = 0; i < nd; i++) HCHECK(v->dl_tensor.shape[i] == want[i]);
  check_map(r, v, b, map_reshape, NULL);
  pool_add(r, p, v);
}

static void map_expand(const void *ctx, const DLTensor *b, const DLTensor *v,
                       const i128 *vidx, i128 *bidx) {
  (void)ctx;
  int32_t lead = v->ndim - b->ndim;
  for (int32_t j = 0; j < b->ndim; j++)
    bidx[j] = b->shape[j] == 1 ? 0 : vidx[j + lead];
}

static void op_expand(rng *r, pool *p, DLManagedTensorVersioned *b) {
  static const int64_t extents[] = {0, 1, 2, 3, 5, (int64_t)1 << 31,
                                    INT64_MAX};
  const DLTensor *bt = &b->dl_tensor;
  int32_t nd = rchance(r, 85) ? bt->ndim + (int32_t)rbelow(r, 3)
               : rchance(r, 50) ? DLB_MAX_NDIM
                                : hostile_i32(r);
  int64_t shape[DLB_MAX_NDIM];
  int64_t lead = (int64_t)nd - bt->ndim;
  for (int32_t i = 0; i < nd && i < DLB_MAX_NDIM; i++) {
    int64_t n = i >= lead ? bt->shape[i - lead] : 1;
    if (i < lead && nd == DLB_MAX_NDIM)
      shape[i] = rchance(r, 90) ? 1 : extents[rbelow(r, COUNT(extents))];
    else if (n == 1 || rchance(r, 5))
      shape[i] = rchance(r, 5) ? hostile_i64(r)
                               : extents[rbelow(r, COUNT(extents))];
    else
      shape[i] = n;
  }
  const int64_t *arg = nd > 0 && rchance(r, 2) ? NULL : shape;
  int ok = nd >= bt->ndim && nd <= DLB_MAX_NDIM && (nd == 0 || arg != NULL);
  for (int32_t i = 0; ok && i < nd; i++) {
    if (shape[i] < 0) ok = 0;
    else if (i >= lead && bt->shape[i - lead] != 1 &&
             bt->shape[i - lead] != shape[i])
      ok = 0;
  }
  int64_t numel = 0;
  if (ok) ok = model_numel(nd, shape, &numel);
  DLManagedTensorVersioned *v = UNTOUCHED;
  mark_error();
  dlb_status st = dlb_tensor_expand(b, nd, arg, &v);
  if (!judge_view(b, st, v, ok, DLB_OK, 1)) return;
  HCHECK(v->dl_tensor.ndim == nd);
  for (int32_t i = 0; i < nd; i++) HCHECK(v->dl_tensor.shape[i] == shape[i]);
  check_map(r, v, b, map_expand, NULL);
  pool_add(r, p, v);
}

static void map_same(const void *ctx, const DLTensor *b, const DLTensor *v,
                     const i128 *vidx, i128 *bidx) {
  (void)ctx;
  (void)v;
  for (int32_t d = 0; d < b->ndim; d++) bidx[d] = vidx[d];
}

static void op_share(rng *r, pool *p, DLManagedTensorVersioned *b) {
  DLManagedTensorVersioned *v = UNTOUCHED;
  dlb_status st = dlb_tensor_share(b, &v);
  if (nomem(st, v, UNTOUCHED)) return;
  HCHECK(st == DLB_OK);
  HCHECK(v != b && dlb_tensor_is_ours(v) && v->flags == b->flags);
  HCHECK(v->dl_tensor.data == b->dl_tensor.data &&
         v->dl_tensor.byte_offset == b->dl_tensor.byte_offset &&
         v->dl_tensor.ndim == b->dl_tensor.ndim);
  check_map(r, v, b, map_same, NULL);
  /* Adopting one of ours hands it back as it is. */
  DLManagedTensorVersioned *same = UNTOUCHED;
  HCHECK(dlb_tensor_adopt(v, &same) == DLB_OK && same == v);
  pool_add(r, p, v);
}

/* Member i through the legacy struct and back with random flags: the
 * versioned tensor comes back unwrapped, or the legacy one is released. */
static void op_legacy(rng *r, pool *p, int i) {
  DLManagedTensorVersioned *t = p->t[i];
  DLManagedTensor *l = LEGACY_UNTOUCHED;
  mark_error();
  dlb_status st = dlb_tensor_to_legacy(t, &l);
  if (nomem(st, l, LEGACY_UNTOUCHED)) return;
  if (t->flags & DLPACK_FLAG_BITMASK_READ_ONLY) {
    HCHECK(st == DLB_E_READONLY && l == LEGACY_UNTOUCHED);
    return;
  }
  if (is_padded(t->flags) && dlb_dtype_is_subbyte(t->dl_tensor.dtype)) {
    HCHECK(st == DLB_E_UNSUPPORTED && l == LEGACY_UNTOUCHED);
    return;
  }
  HCHECK(st == DLB_OK && error_marked());
  pool_remove(p, i);
  uint64_t flags = random_flags(r);
  /* Judged first: on success the legacy block is gone. Our own struct's
   * sub-byte units are packed (padded ones got none, above): padding
   * would claim bytes it does not have. */
  int ok = model_flags_ok(flags) &&
           model_tensor_ok(&l->dl_tensor, is_padded(flags)) &&
           !(is_padded(flags) && dlb_dtype_is_subbyte(l->dl_tensor.dtype));
  g_case = &l->dl_tensor;
  DLManagedTensorVersioned *back = UNTOUCHED;
  mark_error();
  st = dlb_tensor_from_legacy(l, flags, &back);
  g_case = NULL;
  if (ok) {
    HCHECK(st == DLB_OK && error_marked() && back == t && back->flags == flags);
    p->t[p->n++] = back;
  } else {
    check_refusal(st);
    HCHECK(back == UNTOUCHED && *p->calls == 0);
    dlb_legacy_release(l);
    HCHECK(*p->calls == (p->n == 0 ? 1 : 0));
  }
}

/* Foreign tensors the model accepts (never packed, to let views run, in
 * four runs out of five). */
static void gen_accepted(rng *r, tcase *c, uint64_t *flags) {
  for (;;) {
    gen_tensor(r, c);
    *flags = rchance(r, 70) ? 0 : rbelow(r, 8);
    if (!model_import_ok(&c->t, *flags)) continue;
    if (dlb_dtype_is_subbyte(c->t.dtype) && !is_padded(*flags) &&
        rchance(r, 80))
      continue;
    return;
  }
}

/* One random step on a random member of the pool. */
static void random_op(rng *r, pool *p) {
  int i = (int)rbelow(r, (uint64_t)p->n);
  DLManagedTensorVersioned *b = p->t[i];
  g_case = &b->dl_tensor;
  switch (rbelow(r, 16)) {
    case 0:
    case 1:
    case 2:
      op_slice(r, p, b);
      break;
    case 3:
    case 4:
      op_select(r, p, b);
      break;
    case 5:
    case 6:
      op_permute(r, p, b);
      break;
    case 7:
    case 8:
    case 9:
      op_reshape(r, p, b);
      break;
    case 10:
    case 11:
      op_expand(r, p, b);
      break;
    case 12:
      op_share(r, p, b);
      break;
    case 13:
      op_legacy(r, p, i);
      break;
    case 14:
      mark_error();
      HCHECK(dlb_tensor_slice(b, 0, NULL, NULL) == DLB_E_INVAL);
      HCHECK(dlb_tensor_expand(b, 0, NULL, NULL) == DLB_E_INVAL);
      HCHECK(dlb_tensor_share(b, NULL) == DLB_E_INVAL);
      check_refusal(DLB_E_INVAL);
      break;
    default:
      pool_release(p, i);
      break;
  }
  g_case = NULL;
}

/* A foreign tensor the model accepts, with a deleter counting into calls. */
static void foreign_tensor(rng *r, tcase *c, DLManagedTensorVersioned *m,
                           int *calls) {
  uint64_t flags = 0;
  gen_accepted(r, c, &flags);
  memset(m, 0, sizeof *m);
  m->version.major = 1;
  m->version.minor = (uint32_t)rbelow(r, 100);
  m->manager_ctx = calls;
  m->deleter = count_versioned;
  m->flags = flags;
  m->dl_tensor = c->t;
}

DLB_TEST(hostile_view_sequences_stay_inside_and_release_once) {
  for (uint64_t seed = 1; seed <= scaled(1500); seed++) {
    rng r = {seed * 15485863};
    g_seed = seed;
    g_case = NULL;
    tcase c;
    DLManagedTensorVersioned m;
    int calls = 0;
    foreign_tensor(&r, &c, &m, &calls);
    pool p = {{NULL}, 0, &calls};
    DLManagedTensorVersioned *root = UNTOUCHED;
    HCHECK(dlb_tensor_adopt(&m, &root) == DLB_OK);
    p.t[p.n++] = root;
    for (int step = 0; step < 40 && p.n > 0; step++) random_op(&r, &p);
    while (p.n > 0) pool_release(&p, (int)rbelow(&r, (uint64_t)p.n));
    HCHECK(calls == 1);
  }
}

/* The same with one allocation failing somewhere along the way: the call
 * that meets it refuses cleanly, the rest go on, nothing leaks and the
 * foreign deleter still runs once. */
DLB_TEST(hostile_view_sequences_under_allocation_failure) {
  g_oom = 1;
  int failed = 0;
  for (uint64_t seed = 1; seed <= scaled(600); seed++) {
    rng r = {seed * 2654435761u};
    g_seed = seed;
    g_case = NULL;
    tcase c;
    DLManagedTensorVersioned m;
    int calls = 0;
    foreign_tensor(&r, &c, &m, &calls);
    long fail_at = 1 + (long)rbelow(&r, 16);
    dlb_test_failalloc_install(fail_at);
    pool p = {{NULL}, 0, &calls};
    DLManagedTensorVersioned *root = UNTOUCHED;
    mark_error();
    dlb_status st = dlb_tensor_adopt(&m, &root);
    if (nomem(st, root, UNTOUCHED)) {
      /* Still the caller's. */
      HCHECK(calls == 0);
      m.deleter(&m);
    } else {
      HCHECK(st == DLB_OK);
      p.t[p.n++] = root;
      for (int step = 0; step < 16 && p.n > 0; step++) random_op(&r, &p);
      while (p.n > 0) pool_release(&p, (int)rbelow(&r, (uint64_t)p.n));
    }
    HCHECK(calls == 1);
    failed += dlb_test_failalloc_calls() >= fail_at;
    HCHECK(dlb_test_failalloc_live() == 0);
    dlb_test_failalloc_remove();
  }
  /* Most runs must meet the failure, not end before it. */
  CHECK(failed > (int)scaled(600) / 2);
}

/* ---- allocation --------------------------------------------------------- */

#define ALLOC_CAP ((size_t)1 << 20)

static long cap_live;

/* Refuses blocks over ALLOC_CAP, so hostile shapes cannot exhaust memory. */
static void *cap_alloc(void *ctx, size_t size, size_t alignment) {
  (void)ctx;
  void *p = NULL;
  if (size > ALLOC_CAP) return NULL;
  if (alignment < sizeof(void *)) alignment = sizeof(void *);
  if (posix_memalign(&p, alignment, size) != 0) return NULL;
  cap_live++;
  return p;
}

static void cap_free(void *ctx, void *p, size_t size, size_t alignment) {
  (void)ctx;
  (void)size;
  (void)alignment;
  cap_live--;
  free(p);
}

DLB_TEST(hostile_alloc_matches_model) {
  dlb_allocator a = {cap_alloc, cap_free, NULL};
  CHECK_OK(dlb_set_allocator(&a));
  int made = 0;
  for (uint64_t seed = 1; seed <= scaled(8000); seed++) {
    rng r = {seed * 7727};
    g_seed = seed;
    tcase c;
    gen_tensor(&r, &c);
    g_case = &c.t;
    /* cpu, or a device no backend is asked about. */
    static const int bad_types[] = {0, 5, 6, 19, -1, INT32_MAX};
    DLDevice dev = {kDLCPU, (int32_t)rbelow(&r, 3)};
    if (rchance(&r, 10))
      dev.device_type = (DLDeviceType)bad_types[rbelow(&r, COUNT(bad_types))];
    else if (rchance(&r, 5))
      dev.device_id = -1 - (int32_t)rbelow(&r, 3);
    int64_t n = 0, bytes = 0, strides[DLB_MAX_NDIM];
    int ok = model_device_known((int)dev.device_type) && dev.device_id >= 0 &&
             model_dtype_ok(c.t.dtype) &&
             model_numel(c.t.ndim, c.t.shape, &n) &&
             model_compact(c.t.ndim, c.t.shape, 0, strides);
    int fits = 0;
    if (ok) {
      uint32_t bits = dlb_dtype_bits(c.t.dtype);
      i128 b = bits % 8 == 0 ? (i128)n * (bits / 8) : ((i128)n * bits + 7) / 8;
      ok = b <= I64_MAX;
      bytes = (int64_t)b;
      fits = ok && (size_t)b + 4096 <= ALLOC_CAP;
      if (ok && (size_t)b > ALLOC_CAP) ok = 0;
    }
    DLManagedTensorVersioned *t = UNTOUCHED;
    mark_error();
    dlb_status st = dlb_tensor_alloc(dev, c.t.dtype, c.t.ndim, c.t.shape, &t);
    if (!ok || (!fits && st != DLB_OK)) {
      check_refusal(st);
      HCHECK(t == UNTOUCHED && cap_live == 0);
      continue;
    }
    HCHECK(st == DLB_OK && error_marked());
    made++;
    HCHECK(dlb_tensor_is_ours(t) && t->flags == 0);
    HCHECK(t->version.major == DLPACK_MAJOR_VERSION &&
           t->version.minor == DLPACK_MINOR_VERSION);
    const DLTensor *o = &t->dl_tensor;
    HCHECK(o->data != NULL && (uintptr_t)o->data % DLB_DATA_ALIGNMENT == 0);
    HCHECK(o->byte_offset == 0 && o->ndim == c.t.ndim);
    HCHECK(o->device.device_type == kDLCPU && o->device.device_id == 0);
    for (int32_t d = 0; d < o->ndim; d++)
      HCHECK(o->shape[d] == c.t.shape[d] && o->strides[d] == strides[d]);
    mark_error();
    HCHECK(dlb_managed_validate(t) == DLB_OK);
    /* The block holds every byte the tensor claims. */
    memset(o->data, 0xab, (size_t)bytes);
    dlb_tensor_release(t);
    HCHECK(cap_live == 0);
  }
  g_case = NULL;
  CHECK_OK(dlb_set_allocator(NULL));
  CHECK(made > 1000);
}

/* ---- extreme view arguments, exhaustively ----------------------------- */

/* Wraps a one-dimensional int8 tensor of extent n and stride s at an
 * address where any such span fits. */
static DLManagedTensorVersioned *wrap_line(int64_t n, int64_t s) {
  int64_t shape[1] = {n}, strides[1] = {s};
  DLTensor t;
  memset(&t, 0, sizeof t);
  t.data = fake_ptr((uintptr_t)1 << 63);
  t.device.device_type = kDLCPU;
  t.ndim = 1;
  t.dtype.code = kDLInt;
  t.dtype.bits = 8;
  t.dtype.lanes = 1;
  t.shape = shape;
  t.strides = strides;
  t.byte_offset = s < 0 && n > 0 ? (uint64_t)(n - 1) : 0;
  DLManagedTensorVersioned *m = NULL;
  CHECK_OK(dlb_tensor_wrap(&t, 0, NULL, NULL, &m));
  return m;
}

DLB_TEST(hostile_slice_extremes_match_python) {
  static const int64_t extents[] = {0, 1, 2, 5, INT64_MAX - 1, INT64_MAX};
  static const int64_t strides[] = {1, -1, 0, 3};
  static const int64_t bounds[] = {D, INT64_MIN + 1, INT64_MIN + 2, -6, -1,
                                   0, 1, 4, 5, 6, INT64_MAX - 1, INT64_MAX};
  static const int64_t steps[] = {1, 2, -1, -2, INT64_MAX, INT64_MAX - 1,
                                  INT64_MIN, INT64_MIN + 1};
  rng r = {42};
  for (size_t e = 0; e < COUNT(extents); e++) {
    for (size_t k = 0; k < COUNT(strides); k++) {
      int64_t n = extents[e], s = strides[k];
      /* Stride 3 over INT64_MAX elements does not fit any tensor. */
      if (s == 3 && n > ((int64_t)1 << 60)) continue;
      DLManagedTensorVersioned *b = wrap_line(n, s);
      for (size_t i = 0; i < COUNT(bounds); i++) {
        for (size_t j = 0; j < COUNT(bounds); j++) {
          for (size_t q = 0; q < COUNT(steps); q++) {
            dlb_slice sl = {bounds[i], bounds[j], steps[q]};
            int64_t first = 0;
            int64_t count = model_slice(n, sl, &first);
            DLManagedTensorVersioned *v = NULL;
            CHECK_OK(dlb_tensor_slice(b, 1, &sl, &v));
            g_case = &v->dl_tensor;
            HCHECK(v->dl_tensor.shape[0] == count);
            check_view(v, b, 0);
            slice_ctx ctx = {1, &sl, &first};
            check_map(&r, v, b, map_slice, &ctx);
            dlb_tensor_release(v);
          }
        }
      }
      dlb_tensor_release(b);
    }
  }
  g_case = NULL;
}

DLB_TEST(hostile_select_permute_extremes) {
  DLManagedTensorVersioned *b = wrap_line(INT64_MAX, -1), *v = UNTOUCHED;
  static const int64_t bad_index[] = {INT64_MIN, INT64_MAX};
  for (size_t i = 0; i < COUNT(bad_index); i++) {
    mark_error();
    CHECK_STATUS(dlb_tensor_select(b, 0, bad_index[i], &v), DLB_E_RANGE);
    CHECK_ERROR_MENTIONS("index");
    CHECK(v == UNTOUCHED);
  }
  static const int32_t bad_dim[] = {INT32_MIN, -2, 1, INT32_MAX};
  for (size_t i = 0; i < COUNT(bad_dim); i++) {
    CHECK_STATUS(dlb_tensor_select(b, bad_dim[i], 0, &v), DLB_E_RANGE);
    CHECK_ERROR_MENTIONS("dim");
    CHECK(v == UNTOUCHED);
  }
  /* The far ends of INT64_MAX elements counting down from the top. */
  CHECK_OK(dlb_tensor_select(b, 0, INT64_MAX - 1, &v));
  CHECK(v->dl_tensor.ndim == 0 && v->dl_tensor.byte_offset == 0);
  dlb_tensor_release(v);
  CHECK_OK(dlb_tensor_select(b, -1, -INT64_MAX, &v));
  CHECK(v->dl_tensor.byte_offset == (uint64_t)INT64_MAX - 1);
  dlb_tensor_release(v);
  dlb_tensor_release(b);

  int64_t shape[3] = {2, 3, 4};
  DLDataType f32 = {kDLFloat, 32, 1};
  DLDevice cpu = {kDLCPU, 0};
  CHECK_OK(dlb_tensor_alloc(cpu, f32, 3, shape, &b));
  static const int32_t bad_axes[][3] = {{0, 0, 1},  {0, 1, -3}, {0, 1, 3},
                                        {-4, 0, 1}, {INT32_MIN, 0, 1},
                                        {2, 1, INT32_MAX}, {-1, 2, 0}};
  for (size_t i = 0; i < COUNT(bad_axes); i++) {
    v = UNTOUCHED;
    mark_error();
    CHECK_STATUS(dlb_tensor_permute(b, bad_axes[i], &v), DLB_E_INVAL);
    CHECK_ERROR_MENTIONS("axes[");
    CHECK(v == UNTOUCHED);
  }
  const int32_t good[3] = {-1, 0, -2};
  CHECK_OK(dlb_tensor_permute(b, good, &v));
  CHECK(v->dl_tensor.shape[0] == 4 && v->dl_tensor.shape[1] == 2 &&
        v->dl_tensor.shape[2] == 3);
  CHECK(v->dl_tensor.strides[0] == 1 && v->dl_tensor.strides[1] == 12);
  dlb_tensor_release(v);
  dlb_tensor_release(b);
}

DLB_TEST(hostile_reshape_inference_and_zero_extents) {
  DLDataType f32 = {kDLFloat, 32, 1};
  DLDevice cpu = {kDLCPU, 0};
  DLManagedTensorVersioned *e = NULL, *b = NULL, *v = UNTOUCHED;
  int64_t es[2] = {0, 3}, bs[2] = {2, 3};
  CHECK_OK(dlb_tensor_alloc(cpu, f32, 2, es, &e));
  CHECK_OK(dlb_tensor_alloc(cpu, f32, 2, bs, &b));
  struct {
    DLManagedTensorVersioned *base;
    int32_t ndim;
    int64_t shape[3];
    dlb_status st;
    int64_t want[3];
  } cases[] = {
      {e, 2, {-1, 0}, DLB_E_LAYOUT, {0}},
      {e, 2, {0, -1}, DLB_E_LAYOUT, {0}},
      {e, 2, {-1, 3}, DLB_OK, {0, 3}},
      {e, 3, {5, -1, 7}, DLB_OK, {5, 0, 7}},
      {e, 1, {0}, DLB_OK, {0}},
      {e, 0, {0}, DLB_E_LAYOUT, {0}},
      {e, 3, {0, INT64_MAX, INT64_MAX}, DLB_E_OVERFLOW, {0}},
      {e, 2, {INT64_MAX, 0}, DLB_OK, {INT64_MAX, 0}},
      {b, 1, {-1}, DLB_OK, {6}},
      {b, 2, {6, -1}, DLB_OK, {6, 1}},
      {b, 3, {-1, 1, -1}, DLB_E_LAYOUT, {0}},
      {b, 2, {-2, -3}, DLB_E_LAYOUT, {0}},
      {b, 2, {INT64_MAX, INT64_MAX}, DLB_E_LAYOUT, {0}},
      {b, 3, {INT64_MAX, INT64_MAX, -1}, DLB_E_LAYOUT, {0}},
      {b, 2, {4, -1}, DLB_E_LAYOUT, {0}},
      {b, 2, {0, -1}, DLB_E_LAYOUT, {0}},
      {b, 1, {INT64_MIN}, DLB_E_LAYOUT, {0}},
  };
  for (size_t i = 0; i < COUNT(cases); i++) {
    v = UNTOUCHED;
    mark_error();
    dlb_status st = dlb_tensor_reshape(cases[i].base, cases[i].ndim,
                                       cases[i].shape, &v);
    if (st != cases[i].st)
      dlb_test_failed(__FILE__, __LINE__, "case %zu: %s (%s)", i,
                      dlb_status_name(st), dlb_last_error());
    if (st != DLB_OK) {
      check_refusal(st);
      CHECK(v == UNTOUCHED);
      continue;
    }
    for (int32_t d = 0; d < cases[i].ndim; d++)
      CHECK_EQ_INT(v->dl_tensor.shape[d], cases[i].want[d]);
    CHECK_OK(dlb_managed_validate(v));
    dlb_tensor_release(v);
  }
  static const int32_t bad_ndim[] = {-1, DLB_MAX_NDIM + 1, INT32_MIN,
                                     INT32_MAX};
  int64_t big[1] = {6};
  for (size_t i = 0; i < COUNT(bad_ndim); i++) {
    CHECK_STATUS(dlb_tensor_reshape(b, bad_ndim[i], big, &v), DLB_E_LAYOUT);
    CHECK_ERROR_MENTIONS("ndim");
  }
  dlb_tensor_release(e);
  dlb_tensor_release(b);
}

DLB_TEST(hostile_expand_to_64_dims) {
  DLDataType f32 = {kDLFloat, 32, 1};
  DLDevice cpu = {kDLCPU, 0};
  int64_t bs[1] = {3};
  DLManagedTensorVersioned *b = NULL, *v = UNTOUCHED;
  CHECK_OK(dlb_tensor_alloc(cpu, f32, 1, bs, &b));
  int64_t shape[DLB_MAX_NDIM + 1];
  for (int i = 0; i <= DLB_MAX_NDIM; i++) shape[i] = 1;
  shape[DLB_MAX_NDIM - 1] = 3;
  CHECK_OK(dlb_tensor_expand(b, DLB_MAX_NDIM, shape, &v));
  CHECK(v->dl_tensor.ndim == DLB_MAX_NDIM);
  CHECK(v->flags & DLPACK_FLAG_BITMASK_READ_ONLY);
  CHECK_OK(dlb_managed_validate(v));
  dlb_tensor_release(v);
  /* 2^63 * 3 elements: the count overflows. */
  for (int i = 0; i < 63; i++) shape[i] = 2;
  v = UNTOUCHED;
  CHECK_STATUS(dlb_tensor_expand(b, DLB_MAX_NDIM, shape, &v), DLB_E_OVERFLOW);
  CHECK(v == UNTOUCHED);
  /* A zero extent anywhere makes it empty, however large the rest. */
  shape[10] = 0;
  CHECK_OK(dlb_tensor_expand(b, DLB_MAX_NDIM, shape, &v));
  CHECK_OK(dlb_managed_validate(v));
  dlb_tensor_release(v);
  v = UNTOUCHED;
  CHECK_STATUS(dlb_tensor_expand(b, DLB_MAX_NDIM + 1, shape, &v), DLB_E_LAYOUT);
  CHECK_STATUS(dlb_tensor_expand(b, INT32_MIN, shape, &v), DLB_E_LAYOUT);
  CHECK_STATUS(dlb_tensor_expand(b, 0, shape, &v), DLB_E_LAYOUT);
  shape[DLB_MAX_NDIM - 1] = INT64_MIN;
  CHECK_STATUS(dlb_tensor_expand(b, DLB_MAX_NDIM, shape, &v), DLB_E_LAYOUT);
  CHECK(v == UNTOUCHED);
  dlb_tensor_release(b);
}

/* A tensor of ours whose public fields a caller overwrote: every view and
 * share refuses it instead of trusting what was checked when it was made. */
DLB_TEST(hostile_overwritten_tensor_of_ours_is_refused) {
  DLDataType f32 = {kDLFloat, 32, 1};
  DLDevice cpu = {kDLCPU, 0};
  int64_t shape[2] = {4, 5};
  DLManagedTensorVersioned *t = NULL;
  CHECK_OK(dlb_tensor_alloc(cpu, f32, 2, shape, &t));
  DLTensor saved = t->dl_tensor;
  int64_t s0 = t->dl_tensor.shape[0], st0 = t->dl_tensor.strides[0];
  for (int k = 0; k < 9; k++) {
    DLTensor *dl = &t->dl_tensor;
    switch (k) {
      case 0: dl->ndim = 100; break;
      case 1: dl->ndim = -1; break;
      case 2: dl->ndim = INT32_MAX; break;
      case 3: dl->shape[0] = -5; break;
      case 4: dl->shape[0] = INT64_MAX; break;
      case 5: dl->strides[0] = INT64_MAX; break;
      case 6: dl->byte_offset = UINT64_MAX; break;
      case 7: t->flags = (uint64_t)1 << 40; break;
      default: dl->dtype.lanes = 0; break;
    }
    dlb_slice sl[2] = {{1, D, 2}, {D, D, -1}};
    const int32_t axes[2] = {1, 0};
    const int64_t flat[1] = {20}, wide[3] = {2, 4, 5};
    DLManagedTensorVersioned *v = UNTOUCHED;
    mark_error();
    check_refusal(dlb_tensor_slice(t, 2, sl, &v));
    mark_error();
    check_refusal(dlb_tensor_select(t, 0, 1, &v));
    mark_error();
    check_refusal(dlb_tensor_permute(t, axes, &v));
    mark_error();
    check_refusal(dlb_tensor_reshape(t, 1, flat, &v));
    mark_error();
    check_refusal(dlb_tensor_expand(t, 3, wide, &v));
    mark_error();
    check_refusal(dlb_tensor_share(t, &v));
    CHECK(v == UNTOUCHED);
    t->dl_tensor = saved;
    t->dl_tensor.shape[0] = s0;
    t->dl_tensor.strides[0] = st0;
    t->flags = 0;
  }
  dlb_tensor_release(t);
}

/* ---- the field checks of the standard, through every entry point ------ */

typedef struct {
  int32_t ndim;
  int64_t shape[2];
  int64_t strides[2];
  int null_strides;
  void *data;
  uint64_t byte_offset;
  DLDataType dtype;
  DLDevice device;
} desc_spec;

static void spec_tensor(const desc_spec *s, DLTensor *t, int64_t *shape,
                        int64_t *strides) {
  memcpy(shape, s->shape, sizeof s->shape);
  memcpy(strides, s->strides, sizeof s->strides);
  t->data = s->data;
  t->device = s->device;
  t->ndim = s->ndim;
  t->dtype = s->dtype;
  t->shape = shape;
  t->strides = s->null_strides ? NULL : strides;
  t->byte_offset = s->byte_offset;
}

/* Runs desc through every foreign entry point: each must refuse it with
 * st, a message naming needle, nothing written and no deleter run. */
static void refused_everywhere(const DLTensor *desc, uint64_t flags,
                               uint32_t major, dlb_status st,
                               const char *needle) {
  int calls = 0;
  DLManagedTensorVersioned m;
  memset(&m, 0, sizeof m);
  m.version.major = major;
  m.manager_ctx = &calls;
  m.deleter = count_versioned;
  m.flags = flags;
  m.dl_tensor = *desc;
  DLManagedTensorVersioned *out = UNTOUCHED;
  if (major == DLPACK_MAJOR_VERSION && flags == 0) {
    mark_error();
    CHECK_STATUS(dlb_tensor_validate(desc), st);
    CHECK_ERROR_MENTIONS(needle);
  }
  mark_error();
  CHECK_STATUS(dlb_managed_validate(&m), st);
  CHECK_ERROR_MENTIONS(needle);
  mark_error();
  CHECK_STATUS(dlb_tensor_adopt(&m, &out), st);
  CHECK_ERROR_MENTIONS(needle);
  CHECK(out == UNTOUCHED && calls == 0);
  DLManagedTensor *back = LEGACY_UNTOUCHED;
  mark_error();
  CHECK_STATUS(dlb_tensor_to_legacy(&m, &back), st);
  CHECK_ERROR_MENTIONS(needle);
  CHECK(back == LEGACY_UNTOUCHED && calls == 0);
  if (major != DLPACK_MAJOR_VERSION) return;
  mark_error();
  CHECK_STATUS(dlb_tensor_wrap(desc, flags, count_release, &calls, &out), st);
  CHECK_ERROR_MENTIONS(needle);
  CHECK(out == UNTOUCHED && calls == 0);
  DLManagedTensor l;
  l.dl_tensor = *desc;
  l.manager_ctx = &calls;
  l.deleter = count_legacy;
  mark_error();
  CHECK_STATUS(dlb_tensor_from_legacy(&l, flags, &out), st);
  CHECK_ERROR_MENTIONS(needle);
  CHECK(out == UNTOUCHED && calls == 0);
}

DLB_TEST(hostile_each_field_refused_through_every_entry_point) {
  const DLDataType f32 = {kDLFloat, 32, 1};
  const DLDevice cpu = {kDLCPU, 0};
  void *data = fake_ptr(0x10000);
  const desc_spec good = {2, {2, 3}, {3, 1}, 0, data, 0, f32, cpu};
  struct {
    const char *needle;
    dlb_status st;
    desc_spec s;
  } cases[] = {
      {"ndim", DLB_E_LAYOUT, {-1, {2, 3}, {3, 1}, 0, data, 0, f32, cpu}},
      {"ndim", DLB_E_LAYOUT, {INT32_MIN, {2, 3}, {3, 1}, 0, data, 0, f32, cpu}},
      {"ndim", DLB_E_LAYOUT, {65, {2, 3}, {3, 1}, 0, data, 0, f32, cpu}},
      {"ndim", DLB_E_LAYOUT, {INT32_MAX, {2, 3}, {3, 1}, 0, data, 0, f32, cpu}},
      {"shape[1]", DLB_E_LAYOUT, {2, {2, -3}, {3, 1}, 0, data, 0, f32, cpu}},
      {"shape[0]", DLB_E_LAYOUT,
       {2, {INT64_MIN, 0}, {3, 1}, 0, data, 0, f32, cpu}},
      {"shape[1]", DLB_E_OVERFLOW,
       {2, {INT64_MAX, 2}, {3, 1}, 1, data, 0, f32, cpu}},
      {"shape[1]", DLB_E_OVERFLOW,
       {2, {3037000500, 3037000500}, {0, 0}, 0, data, 0, f32, cpu}},
      {"strides[0]", DLB_E_OVERFLOW,
       {2, {2, 3}, {INT64_MAX, 1}, 0, data, 0, f32, cpu}},
      {"strides[1]", DLB_E_OVERFLOW,
       {2, {2, 3}, {1, INT64_MIN}, 0, data, 0, f32, cpu}},
      {"strides", DLB_E_OVERFLOW,
       {2, {2, 3}, {(int64_t)1 << 61, 1}, 0, data, 0, f32, cpu}},
      {"data", DLB_E_INVAL, {2, {2, 3}, {3, 1}, 0, NULL, 0, f32, cpu}},
      {"dtype.lanes", DLB_E_DTYPE,
       {2, {2, 3}, {3, 1}, 0, data, 0, {kDLFloat, 32, 0}, cpu}},
      {"dtype.bits", DLB_E_DTYPE,
       {2, {2, 3}, {3, 1}, 0, data, 0, {kDLFloat, 0, 1}, cpu}},
      {"dtype.code", DLB_E_DTYPE,
       {2, {2, 3}, {3, 1}, 0, data, 0, {18, 32, 1}, cpu}},
      {"dtype.code", DLB_E_DTYPE,
       {2, {2, 3}, {3, 1}, 0, data, 0, {255, 8, 1}, cpu}},
      {"dtype.bits", DLB_E_DTYPE,
       {2, {2, 3}, {3, 1}, 0, data, 0, {kDLBool, 16, 1}, cpu}},
      {"dtype.bits", DLB_E_DTYPE,
       {2, {2, 3}, {3, 1}, 0, data, 0, {kDLBool, 1, 1}, cpu}},
      {"dtype.bits", DLB_E_DTYPE,
       {2, {2, 3}, {3, 1}, 0, data, 0, {kDLFloat6_e2m3fn, 8, 1}, cpu}},
      {"dtype.bits", DLB_E_DTYPE,
       {2, {2, 3}, {3, 1}, 0, data, 0, {kDLFloat6_e3m2fn, 4, 1}, cpu}},
      {"dtype.bits", DLB_E_DTYPE,
       {2, {2, 3}, {3, 1}, 0, data, 0, {kDLFloat4_e2m1fn, 8, 1}, cpu}},
      {"dtype.bits", DLB_E_DTYPE,
       {2, {2, 3}, {3, 1}, 0, data, 0, {kDLFloat4_e2m1fn, 6, 1}, cpu}},
      {"byte_offset", DLB_E_OVERFLOW,
       {2, {2, 3}, {3, 1}, 0, data, UINT64_MAX, f32, cpu}},
      {"device_type", DLB_E_DEVICE,
       {2, {2, 3}, {3, 1}, 0, data, 0, f32, {(DLDeviceType)5, 0}}},
      {"device_type", DLB_E_DEVICE,
       {2, {2, 3}, {3, 1}, 0, data, 0, f32, {(DLDeviceType)-1, 0}}},
      {"device_id", DLB_E_DEVICE,
       {2, {2, 3}, {3, 1}, 0, data, 0, f32, {kDLCUDA, -1}}},
      {"wraps", DLB_E_OVERFLOW,
       {2, {2, 3}, {3, 1}, 0, fake_ptr(UINTPTR_MAX - 15), 0, f32, cpu}},
      {"wraps", DLB_E_OVERFLOW,
       {2, {2, 3}, {-3, 1}, 0, fake_ptr(8), 0, f32, cpu}},
  };
  DLTensor t;
  int64_t shape[2], strides[2];
  for (size_t i = 0; i < COUNT(cases); i++) {
    spec_tensor(&cases[i].s, &t, shape, strides);
    refused_everywhere(&t, 0, DLPACK_MAJOR_VERSION, cases[i].st,
                       cases[i].needle);
  }
  spec_tensor(&good, &t, shape, strides);
  CHECK_OK(dlb_tensor_validate(&t));
  static const uint32_t majors[] = {0, 2, UINT32_MAX};
  for (size_t i = 0; i < COUNT(majors); i++)
    refused_everywhere(&t, 0, majors[i], DLB_E_VERSION, "version.major");
  static const uint64_t flags[] = {8, (uint64_t)1 << 63, UINT64_MAX};
  for (size_t i = 0; i < COUNT(flags); i++)
    refused_everywhere(&t, flags[i], DLPACK_MAJOR_VERSION, DLB_E_INVAL,
                       "flags");
}

/* An empty tensor with NULL strides passes validation whatever its other
 * extents; importing it must not fail on compact strides that overflow. */
DLB_TEST(hostile_empty_tensor_with_null_strides_beyond_int64) {
  int64_t shape[3] = {0, (int64_t)1 << 62, (int64_t)1 << 62};
  const int64_t want[3] = {0, (int64_t)1 << 62, 1};
  DLTensor t;
  memset(&t, 0, sizeof t);
  t.device.device_type = kDLCPU;
  t.ndim = 3;
  t.dtype.code = kDLFloat;
  t.dtype.bits = 32;
  t.dtype.lanes = 1;
  t.shape = shape;
  CHECK_OK(dlb_tensor_validate(&t));
  int calls = 0;
  DLManagedTensorVersioned *out = NULL;
  CHECK_OK(dlb_tensor_wrap(&t, 0, count_release, &calls, &out));
  for (int d = 0; d < 3; d++) CHECK_EQ_INT(out->dl_tensor.strides[d], want[d]);
  CHECK_OK(dlb_managed_validate(out));
  dlb_tensor_release(out);
  CHECK(calls == 1);

  calls = 0;
  DLManagedTensorVersioned m;
  memset(&m, 0, sizeof m);
  m.version.major = 1;
  m.manager_ctx = &calls;
  m.deleter = count_versioned;
  m.dl_tensor = t;
  CHECK_OK(dlb_tensor_adopt(&m, &out));
  for (int d = 0; d < 3; d++) CHECK_EQ_INT(out->dl_tensor.strides[d], want[d]);
  dlb_tensor_release(out);
  CHECK(calls == 1);

  calls = 0;
  DLManagedTensor *l = NULL;
  CHECK_OK(dlb_tensor_to_legacy(&m, &l));
  for (int d = 0; d < 3; d++) CHECK_EQ_INT(l->dl_tensor.strides[d], want[d]);
  CHECK_OK(dlb_tensor_from_legacy(l, 0, &out));
  CHECK_OK(dlb_managed_validate(out));
  dlb_tensor_release(out);
  CHECK(calls == 1);
}

/* ---- legacy conversions of scalars ------------------------------------ */

DLB_TEST(hostile_legacy_scalars_with_null_shape) {
  int calls = 0;
  DLManagedTensor l;
  memset(&l, 0, sizeof l);
  l.dl_tensor.data = fake_ptr(0x10000);
  l.dl_tensor.device.device_type = kDLCUDAHost;
  l.dl_tensor.device.device_id = 3;
  l.dl_tensor.dtype.code = kDLFloat;
  l.dl_tensor.dtype.bits = 64;
  l.dl_tensor.dtype.lanes = 1;
  l.dl_tensor.byte_offset = 8;
  l.manager_ctx = &calls;
  l.deleter = count_legacy;
  DLManagedTensorVersioned *v = NULL;
  CHECK_OK(dlb_tensor_from_legacy(&l, DLPACK_FLAG_BITMASK_IS_COPIED, &v));
  CHECK(v->dl_tensor.ndim == 0 && v->dl_tensor.byte_offset == 8);
  CHECK(v->dl_tensor.device.device_id == 0);
  int64_t lo = 0, hi = 0;
  CHECK_OK(dlb_tensor_byte_span(&v->dl_tensor, &lo, &hi));
  CHECK(lo == 8 && hi == 16);
  DLManagedTensor *back = NULL;
  CHECK_OK(dlb_tensor_to_legacy(v, &back));
  CHECK(back->dl_tensor.ndim == 0 && back->dl_tensor.data == l.dl_tensor.data);
  CHECK(calls == 0);
  /* Back again: our own legacy struct is unwrapped, not wrapped twice. */
  DLManagedTensorVersioned *again = NULL;
  CHECK_OK(dlb_tensor_from_legacy(back, 0, &again));
  CHECK(again == v && again->flags == 0);
  dlb_tensor_release(again);
  CHECK(calls == 1);

  /* A foreign versioned scalar with NULL shape and strides. */
  calls = 0;
  DLManagedTensorVersioned m;
  memset(&m, 0, sizeof m);
  m.version.major = 1;
  m.manager_ctx = &calls;
  m.deleter = count_versioned;
  m.dl_tensor = l.dl_tensor;
  CHECK_OK(dlb_tensor_to_legacy(&m, &back));
  CHECK(back->dl_tensor.ndim == 0);
  CHECK(back->dl_tensor.device.device_id == 0);
  CHECK_OK(dlb_tensor_from_legacy(back, DLPACK_FLAG_BITMASK_READ_ONLY, &v));
  CHECK(calls == 0);
  again = UNTOUCHED;
  CHECK_STATUS(dlb_tensor_select(v, 0, 0, &again), DLB_E_RANGE);
  CHECK(again == UNTOUCHED);
  dlb_tensor_release(v);
  CHECK(calls == 1);
}

/* A consumer may rewrite the legacy struct it was given (a narrower view,
 * another offset) before handing it back: the result must describe what
 * the struct says, not the tensor it was made from. */
DLB_TEST(hostile_rewritten_legacy_is_not_unwrapped_stale) {
  DLDataType f32 = {kDLFloat, 32, 1};
  DLDevice cpu = {kDLCPU, 0};
  int64_t shape[2] = {4, 5};
  for (int k = 0; k < 5; k++) {
    DLManagedTensorVersioned *t = NULL, *back = NULL;
    CHECK_OK(dlb_tensor_alloc(cpu, f32, 2, shape, &t));
    DLManagedTensor *l = NULL;
    CHECK_OK(dlb_tensor_to_legacy(t, &l));
    DLTensor *dl = &l->dl_tensor;
    switch (k) {
      case 0: dl->byte_offset = 20; dl->shape[0] = 3; break;
      case 1: dl->shape[1] = 2; break;
      case 2: dl->strides[0] = -5; dl->byte_offset = 60; break;
      case 3: dl->dtype.bits = 16; break;
      default: dl->ndim = 1; dl->shape[0] = 20; dl->strides[0] = 1; break;
    }
    DLTensor want = *dl;
    int64_t ws[2] = {dl->shape[0], dl->ndim > 1 ? dl->shape[1] : 0};
    int64_t wst[2] = {dl->strides[0], dl->ndim > 1 ? dl->strides[1] : 0};
    CHECK_OK(dlb_tensor_from_legacy(l, 0, &back));
    const DLTensor *o = &back->dl_tensor;
    CHECK(o->data == want.data && o->byte_offset == want.byte_offset);
    CHECK(o->ndim == want.ndim && dlb_dtype_equal(o->dtype, want.dtype));
    for (int32_t d = 0; d < o->ndim; d++)
      CHECK(o->shape[d] == ws[d] && o->strides[d] == wst[d]);
    CHECK_OK(dlb_managed_validate(back));
    dlb_tensor_release(back);
  }
}

/* ---- names: parse and format ------------------------------------------ */

static void random_text(rng *r, char *buf, size_t cap) {
  static const char alphabet[] = "intuflobxcmpe0123456789_:adhrgvskwzy";
  static const char *const seeds[] = {
      "int8",   "uint64",        "float32x4",   "bfloat16",
      "complex128", "bool",      "handle",      "float8_e4m3fnuz",
      "float6_e2m3fn", "float4_e2m1fn", "int4", "cpu",
      "cuda:1", "cuda_managed",  "rocm_host:0", "hexagon:2147483647",
      "cuda:2147483648", "float8_e4m3b11fnuz", "int64x65535", "trn:7"};
  size_t n = 0;
  if (rchance(r, 60)) {
    const char *s = seeds[rbelow(r, COUNT(seeds))];
    n = strlen(s);
    memcpy(buf, s, n);
    for (int k = (int)rbelow(r, 3); k > 0 && n > 0; k--) {
      size_t at = rbelow(r, n);
      switch (rbelow(r, 3)) {
        case 0:
          buf[at] = alphabet[rbelow(r, sizeof alphabet - 1)];
          break;
        case 1:
          memmove(buf + at, buf + at + 1, n - at - 1);
          n--;
          break;
        default:
          if (n + 1 < cap) {
            memmove(buf + at + 1, buf + at, n - at);
            buf[at] = (char)(rchance(r, 80)
                                 ? alphabet[rbelow(r, sizeof alphabet - 1)]
                                 : (char)(1 + rbelow(r, 255)));
            n++;
          }
      }
    }
  } else {
    n = rbelow(r, cap < 24 ? cap : 24);
    for (size_t i = 0; i < n; i++)
      buf[i] = rchance(r, 90) ? alphabet[rbelow(r, sizeof alphabet - 1)]
                              : (char)(1 + rbelow(r, 255));
  }
  buf[n] = '\0';
}

DLB_TEST(hostile_names_parse_and_format) {
  char text[64];
  int parsed = 0;
  for (uint64_t seed = 1; seed <= scaled(20000); seed++) {
    rng r = {seed};
    g_seed = seed;
    random_text(&r, text, sizeof text);
    DLDataType dt = {77, 77, 77};
    mark_error();
    dlb_status st = dlb_dtype_parse(text, &dt);
    if (st == DLB_OK) {
      parsed++;
      HCHECK(error_marked() && model_dtype_ok(dt));
      /* The canonical name reads back the same and is never longer ("x1"
       * and the handle's width are left out). */
      char name[DLB_DTYPE_NAME_MAX];
      DLDataType again;
      HCHECK(dlb_dtype_format(dt, name, sizeof name) == DLB_OK);
      HCHECK(dlb_dtype_parse(name, &again) == DLB_OK);
      HCHECK(dlb_dtype_equal(dt, again) && strlen(name) <= strlen(text));
    } else {
      check_refusal(st);
      HCHECK(dt.code == 77 && dt.bits == 77 && dt.lanes == 77);
    }
    DLDevice dev = {(DLDeviceType)77, 77};
    mark_error();
    st = dlb_device_parse(text, &dev);
    if (st == DLB_OK) {
      parsed++;
      HCHECK(error_marked());
      HCHECK(model_device_known((int)dev.device_type) && dev.device_id >= 0);
      HCHECK(!model_host_type((int)dev.device_type) || dev.device_id == 0);
      char name[DLB_DEVICE_NAME_MAX];
      HCHECK(dlb_device_format(dev, name, sizeof name) == DLB_OK);
      DLDevice again;
      HCHECK(dlb_device_parse(name, &again) == DLB_OK);
      HCHECK(dlb_device_equal(dev, again));
    } else {
      check_refusal(st);
      HCHECK((int)dev.device_type == 77 && dev.device_id == 77);
    }
    DLDeviceType type = (DLDeviceType)77;
    mark_error();
    st = dlb_device_type_parse(text, &type);
    if (st == DLB_OK) {
      HCHECK(error_marked());
      HCHECK(strcmp(dlb_device_type_name(type), text) == 0);
    } else {
      check_refusal(st);
      HCHECK((int)type == 77);
    }
  }
  CHECK(parsed > 2000);
}

DLB_TEST(hostile_names_very_long) {
  const size_t n = (size_t)1 << 20;
  char *s = malloc(n + 1);
  CHECK(s != NULL);
  static const char *const heads[] = {"int", "float8_e4m3fn", "int8x",
                                      "cuda:", "cpu", "handle"};
  static const char fills[] = {'0', '1', '9', 'x', ':', 'a'};
  for (size_t h = 0; h < COUNT(heads); h++) {
    for (size_t f = 0; f < COUNT(fills); f++) {
      size_t k = strlen(heads[h]);
      memcpy(s, heads[h], k);
      memset(s + k, fills[f], n - k);
      s[n] = '\0';
      DLDataType dt = {77, 77, 77};
      DLDevice dev = {(DLDeviceType)77, 77};
      DLDeviceType type = (DLDeviceType)77;
      mark_error();
      check_refusal(dlb_dtype_parse(s, &dt));
      /* The message shows a bounded part of the text. */
      CHECK(strlen(dlb_last_error()) < 400);
      mark_error();
      check_refusal(dlb_device_parse(s, &dev));
      CHECK(strlen(dlb_last_error()) < 400);
      mark_error();
      check_refusal(dlb_device_type_parse(s, &type));
      CHECK(strlen(dlb_last_error()) < 400);
      CHECK(dt.code == 77 && (int)dev.device_type == 77 && (int)type == 77);
    }
  }
  free(s);
}

/* Formats into heap blocks of exactly size bytes, so any write past the
 * end is caught. */
DLB_TEST(hostile_format_into_tiny_buffers) {
  for (uint64_t seed = 1; seed <= scaled(6000); seed++) {
    rng r = {seed * 31};
    g_seed = seed;
    DLDataType dt = random_dtype(&r);
    if (rchance(&r, 30)) dt.lanes = (uint16_t)(1 + rbelow(&r, 65535));
    DLDevice dev = random_device(&r);
    size_t size = rbelow(&r, 40);
    char *buf = malloc(size == 0 ? 1 : size);
    HCHECK(buf != NULL);
    memset(buf, '#', size);
    mark_error();
    dlb_status st = dlb_dtype_format(dt, buf, size);
    char full[DLB_DTYPE_NAME_MAX];
    dlb_status whole = dlb_dtype_format(dt, full, sizeof full);
    if (!model_dtype_ok(dt)) {
      HCHECK(st == DLB_E_DTYPE && whole == DLB_E_DTYPE);
      for (size_t i = 0; i < size; i++) HCHECK(buf[i] == '#');
    } else {
      HCHECK(whole == DLB_OK);
      if (strlen(full) < size) {
        HCHECK(st == DLB_OK && error_marked() && strcmp(buf, full) == 0);
      } else {
        check_refusal(st);
        HCHECK(st == DLB_E_INVAL);
        if (size > 0) HCHECK(buf[0] == '\0');
      }
      DLDataType back;
      HCHECK(dlb_dtype_parse(full, &back) == DLB_OK);
      HCHECK(dlb_dtype_equal(back, dt));
    }
    memset(buf, '#', size);
    mark_error();
    st = dlb_device_format(dev, buf, size);
    char fulld[DLB_DEVICE_NAME_MAX];
    whole = dlb_device_format(dev, fulld, sizeof fulld);
    if (!model_device_known((int)dev.device_type) || dev.device_id < 0) {
      HCHECK(st == DLB_E_DEVICE && whole == DLB_E_DEVICE);
      for (size_t i = 0; i < size; i++) HCHECK(buf[i] == '#');
    } else {
      HCHECK(whole == DLB_OK);
      if (strlen(fulld) < size) {
        HCHECK(st == DLB_OK && error_marked() && strcmp(buf, fulld) == 0);
      } else {
        HCHECK(st == DLB_E_INVAL);
        if (size > 0) HCHECK(buf[0] == '\0');
      }
    }
    free(buf);
  }
  CHECK_STATUS(dlb_dtype_format(VALID_DTYPES[0], NULL, 8), DLB_E_INVAL);
  DLDevice cpu = {kDLCPU, 0};
  CHECK_STATUS(dlb_device_format(cpu, NULL, 8), DLB_E_INVAL);
}

/* ---- devices and dtypes against the model ------------------------------ */

static int model_can_access(DLDevice c, DLDevice m) {
  int ct = (int)c.device_type, mt = (int)m.device_type;
  if (!model_device_known(ct) || !model_device_known(mt) || c.device_id < 0 ||
      m.device_id < 0)
    return 0;
  int m_host = model_host_type(mt);
  if (model_host_type(ct)) return m_host;
  if (ct == kDLCUDA && (mt == kDLCUDAHost || mt == kDLCUDAManaged)) return 1;
  if (ct == kDLROCM && mt == kDLROCMHost) return 1;
  return ct == mt && (m_host || c.device_id == m.device_id);
}

DLB_TEST(hostile_devices_and_dtypes_match_model) {
  for (uint64_t seed = 1; seed <= scaled(20000); seed++) {
    rng r = {seed * 97};
    g_seed = seed;
    DLDevice a = random_device(&r), b = random_device(&r);
    if (rchance(&r, 20)) b = a;
    int a_ok = model_device_known((int)a.device_type) && a.device_id >= 0;
    int b_ok = model_device_known((int)b.device_type) && b.device_id >= 0;
    mark_error();
    HCHECK(dlb_device_can_access(a, b) == model_can_access(a, b));
    int same = a_ok && b_ok && a.device_type == b.device_type &&
               (model_host_type((int)a.device_type) ||
                a.device_id == b.device_id);
    HCHECK(dlb_device_equal(a, b) == same);
    HCHECK(error_marked());
    HCHECK(dlb_device_type_is_known(a.device_type) ==
           model_device_known((int)a.device_type));
    DLDevice n = a;
    mark_error();
    dlb_status st = dlb_device_normalize(&n);
    if (a_ok) {
      HCHECK(st == DLB_OK && error_marked());
      HCHECK(n.device_type == a.device_type &&
             n.device_id ==
                 (model_host_type((int)a.device_type) ? 0 : a.device_id));
    } else {
      check_refusal(st);
      HCHECK(st == DLB_E_DEVICE);
      HCHECK(n.device_type == a.device_type && n.device_id == a.device_id);
    }

    DLDataType dt = random_dtype(&r);
    mark_error();
    st = dlb_dtype_check(dt);
    if (model_dtype_ok(dt)) {
      HCHECK(st == DLB_OK && error_marked());
    } else {
      check_refusal(st);
      HCHECK(st == DLB_E_DTYPE);
    }
    uint32_t bits = (uint32_t)dt.bits * dt.lanes;
    HCHECK(dlb_dtype_bits(dt) == bits);
    HCHECK(dlb_dtype_is_subbyte(dt) == (bits % 8 != 0));
    HCHECK(dlb_dtype_itemsize(dt) == (bits + 7) / 8);
  }
}

/* ---- geometry helpers against the model -------------------------------- */

/* The element offsets of a row-major (or column-major) walk. */
static int64_t walk(int32_t ndim, const int64_t *shape, const int64_t *strides,
                    int fortran, int64_t *out, int64_t cap) {
  int64_t n = 0;
  if (!model_numel(ndim, shape, &n) || n > cap) return -1;
  for (int64_t k = 0; k < n; k++) {
    int64_t rest = k, off = 0;
    for (int32_t j = 0; j < ndim; j++) {
      int32_t d = fortran ? j : ndim - 1 - j;
      off += rest % shape[d] * strides[d];
      rest /= shape[d];
    }
    out[k] = off;
  }
  return n;
}

DLB_TEST(hostile_geometry_helpers_match_model) {
  static int64_t before[3][512], after[3][512];
  for (uint64_t seed = 1; seed <= scaled(20000); seed++) {
    rng r = {seed * 613};
    g_seed = seed;
    g_case = NULL;
    tcase c;
    gen_tensor(&r, &c);
    const DLTensor *t = &c.t;

    /* dlb_compact_strides: the model's strides, or nothing written. */
    int64_t out[DLB_MAX_NDIM], want[DLB_MAX_NDIM];
    for (int i = 0; i < DLB_MAX_NDIM; i++) out[i] = -77;
    int fortran = (int)rbelow(&r, 2);
    int shape_ok = t->ndim >= 0 && t->ndim <= DLB_MAX_NDIM &&
                   (t->ndim == 0 || t->shape != NULL);
    if (shape_ok)
      for (int32_t d = 0; d < t->ndim; d++)
        if (t->shape[d] < 0) shape_ok = 0;
    int ok = shape_ok && model_compact(t->ndim, t->shape, fortran, want);
    mark_error();
    dlb_status st = dlb_compact_strides(t->ndim, t->shape, fortran, out);
    if (ok) {
      HCHECK(st == DLB_OK && error_marked());
      for (int32_t d = 0; d < t->ndim; d++) HCHECK(out[d] == want[d]);
    } else {
      check_refusal(st);
      for (int i = 0; i < DLB_MAX_NDIM; i++) HCHECK(out[i] == -77);
    }

    /* dlb_dtype_storage_bytes. */
    int64_t count =
        rchance(&r, 50) ? hostile_i64(&r) : (int64_t)rbelow(&r, 100);
    int padded = (int)rbelow(&r, 2);
    int64_t bytes = -77;
    mark_error();
    st = dlb_dtype_storage_bytes(t->dtype, count, padded, &bytes);
    if (count >= 0 && model_dtype_ok(t->dtype)) {
      uint32_t bits = dlb_dtype_bits(t->dtype);
      i128 b = bits % 8 == 0 || padded ? (i128)count * ((bits + 7) / 8)
                                       : ((i128)count * bits + 7) / 8;
      if (b <= I64_MAX)
        HCHECK(st == DLB_OK && error_marked() && bytes == (int64_t)b);
      else
        HCHECK(st == DLB_E_OVERFLOW && bytes == -77);
    } else {
      check_refusal(st);
      HCHECK(bytes == -77);
    }

    /* dlb_tensor_alignment: the lowest set bit of the first byte's
     * address, at most 4096. */
    uintptr_t addr = (uintptr_t)t->data + (uintptr_t)t->byte_offset;
    size_t align = t->data == NULL || addr == 0 ? 4096
                   : (addr & (~addr + 1)) > 4096 ? 4096
                                                 : (size_t)(addr & (~addr + 1));
    HCHECK(dlb_tensor_alignment(t) == align);

    /* Contiguity and coalescing, by walking small tensors. */
    if (!shape_ok || t->ndim > 8) continue;
    int64_t n = 0;
    if (!model_numel(t->ndim, t->shape, &n) || n > 512) continue;
    int64_t compact[DLB_MAX_NDIM];
    const int64_t *st0 = t->strides;
    if (st0 == NULL) {
      model_compact(t->ndim, t->shape, 0, compact);
      st0 = compact;
    }
    int small = 1;
    for (int32_t d = 0; d < t->ndim; d++)
      if (st0[d] > 1000 || st0[d] < -1000) small = 0;
    if (!small) continue;
    int64_t k = walk(t->ndim, t->shape, st0, 0, before[0], 512);
    int c_contig = 1, f_contig = 1;
    for (int64_t i = 0; i < k; i++) c_contig &= before[0][i] == i;
    k = walk(t->ndim, t->shape, st0, 1, before[1], 512);
    for (int64_t i = 0; i < k; i++) f_contig &= before[1][i] == i;
    HCHECK(dlb_tensor_is_c_contiguous(t) == c_contig);
    HCHECK(dlb_tensor_is_f_contiguous(t) == f_contig);

    int count_t = 1 + (int)rbelow(&r, 3);
    int64_t shp[8], str[3][8];
    int64_t *sp[3] = {str[0], str[1], str[2]};
    for (int32_t d = 0; d < t->ndim; d++) {
      shp[d] = t->shape[d];
      str[0][d] = st0[d];
      for (int q = 1; q < count_t; q++)
        str[q][d] = rchance(&r, 60) ? st0[d] * (q + 1)
                                    : (int64_t)rbelow(&r, 9) - 4;
    }
    for (int q = 0; q < count_t; q++)
      walk(t->ndim, t->shape, str[q], 0, before[q], 512);
    int32_t nd = dlb_coalesce_dims(t->ndim, shp, sp, count_t);
    HCHECK(nd >= 0 && nd <= t->ndim);
    if (n == 0) {
      HCHECK(nd == 1 && shp[0] == 0);
      continue;
    }
    int64_t prod = 1;
    for (int32_t d = 0; d < nd; d++) {
      HCHECK(shp[d] > 1);
      prod *= shp[d];
    }
    HCHECK(prod == n);
    for (int q = 0; q < count_t; q++) {
      HCHECK(walk(nd, shp, str[q], 0, after[q], 512) == n);
      HCHECK(memcmp(before[q], after[q], (size_t)n * sizeof(int64_t)) == 0);
    }
  }
}
