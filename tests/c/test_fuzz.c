/*
 * test_fuzz.c -- seeded hostile tensors over real memory.
 *
 * test_hostile.c checks verdicts and geometry on fake addresses; here every
 * tensor that can be accepted points into a buffer this file allocated,
 * with guard bytes on both sides, so that the copy engine, dlb_tensor_copy,
 * the views and the GPU entry points really read and write it. Each case
 * goes through every entry point that takes a foreign tensor; the verdict
 * must match a model written from the DLPack rules, a refusal must leave a
 * message and the out-parameters and the memory alone, an accepted copy
 * must move exactly the bytes the model names (in row-major order, the last
 * write winning where dst elements alias) and nothing else, and every
 * foreign deleter or release callback must run exactly once when ownership
 * was taken and never when it was refused. Under ASan any touch outside the
 * buffers is a report.
 *
 * DLB_FUZZ_SEED picks another sequence (decimal or 0x hex) and
 * DLB_FUZZ_CASES another number of cases; a failure prints both.
 */
#include "test.h"

__extension__ typedef __int128 wide;

#define NCOUNT(a) (sizeof(a) / sizeof((a)[0]))
#define W_I64_MAX ((wide)INT64_MAX)
#define W_I64_MIN ((wide)INT64_MIN)
#define SENTINEL ((DLManagedTensorVersioned *)(uintptr_t)0xdead1)
#define LEGACY_SENTINEL ((DLManagedTensor *)(uintptr_t)0xdead2)
/* Copies and content checks stay this small, so a case costs microseconds
 * and an accepted tensor never asks for an unreasonable buffer. */
#define MAX_ELEMS 2048
#define MAX_SPAN (1 << 16)

/* ---- the sequence --------------------------------------------------------- */

typedef struct {
  uint64_t state;
} fz_rng;

static uint64_t fz_u64(fz_rng *r) {
  uint64_t x = (r->state += 0x9e3779b97f4a7c15u);
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9u;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebu;
  return x ^ (x >> 31);
}

static uint64_t fz_below(fz_rng *r, uint64_t n) {
  return n == 0 ? 0 : fz_u64(r) % n;
}

static int fz_pct(fz_rng *r, unsigned p) { return fz_below(r, 100) < p; }

static uint64_t env_u64(const char *name, uint64_t fallback) {
  const char *s = getenv(name);
  if (s == NULL || *s == '\0') return fallback;
  return strtoull(s, NULL, 0);
}

static uint64_t g_seed;
static uint64_t g_case;
static const DLTensor *g_shown; /* the tensor printed with a failure */

static void show_case(void) {
  const DLTensor *t = g_shown;
  if (t == NULL) return;
  fprintf(stderr,
          "  data %p ndim %d dtype (%u, %u, %u) device (%d, %d) "
          "byte_offset %llu shape %p strides %p\n",
          t->data, (int)t->ndim, (unsigned)t->dtype.code,
          (unsigned)t->dtype.bits, (unsigned)t->dtype.lanes,
          (int)t->device.device_type, (int)t->device.device_id,
          (unsigned long long)t->byte_offset, (const void *)t->shape,
          (const void *)t->strides);
  for (int32_t d = 0; t->shape != NULL && d < t->ndim && d < 8; d++)
    fprintf(stderr, "  [%d] extent %lld stride %lld\n", (int)d,
            (long long)t->shape[d],
            t->strides != NULL ? (long long)t->strides[d] : 0LL);
}

#define FCHECK(cond)                                                        \
  do {                                                                      \
    if (!(cond)) show_case();                                               \
    if (!(cond))                                                            \
      dlb_test_failed(__FILE__, __LINE__,                                   \
                      "CHECK(%s) in case %llu (DLB_FUZZ_SEED=%llu); last "  \
                      "error \"%s\"",                                       \
                      #cond, (unsigned long long)g_case,                    \
                      (unsigned long long)g_seed, dlb_last_error());        \
  } while (0)

/* ---- error messages ------------------------------------------------------- */

/* Plants a message no call below writes: a refusal must replace it, a
 * success must leave it. */
static char g_planted[256];

static void plant(void) {
  DLDevice dev;
  (void)dlb_device_parse("no-such-kind:\x7f planted by test_fuzz", &dev);
  snprintf(g_planted, sizeof g_planted, "%s", dlb_last_error());
}

static int planted_kept(void) { return strcmp(dlb_last_error(), g_planted) == 0; }

#define EXPECT_OK(st) FCHECK((st) == DLB_OK && planted_kept())
#define EXPECT_REFUSED(st)                                                \
  FCHECK((st) < 0 && strcmp(dlb_status_name(st), "DLB_E_UNKNOWN") != 0 && \
         dlb_last_error()[0] != '\0' && !planted_kept())

/* ---- the model ------------------------------------------------------------ */

static int m_bits_allowed(uint8_t code, unsigned b) {
  switch (code) {
    case kDLInt:
    case kDLUInt:
      return b == 1 || b == 2 || b == 4 || b == 8 || b == 16 || b == 32 ||
             b == 64;
    case kDLFloat:
      return b == 8 || b == 16 || b == 32 || b == 64;
    case kDLOpaqueHandle:
      return b == 64 || b == 8 * sizeof(void *);
    case kDLBfloat:
      return b == 16;
    case kDLComplex:
      return b == 32 || b == 64 || b == 128;
    case kDLFloat6_e2m3fn:
    case kDLFloat6_e3m2fn:
      return b == 6;
    case kDLFloat4_e2m1fn:
      return b == 4;
    default:
      /* bool and the eight float8 codes */
      return (code == kDLBool ||
              (code >= kDLFloat8_e3m4 && code <= kDLFloat8_e8m0fnu)) &&
             b == 8;
  }
}

static int m_dtype_ok(DLDataType d) {
  if (d.lanes == 0 || !m_bits_allowed(d.code, d.bits)) return 0;
  unsigned total = (unsigned)d.bits * d.lanes;
  return total % 8 == 0 || d.lanes == 1;
}

static int m_subbyte(DLDataType d) { return ((unsigned)d.bits * d.lanes) % 8 != 0; }

static size_t m_itemsize(DLDataType d) {
  return ((size_t)d.bits * d.lanes + 7) / 8;
}

static int m_known_device(int type) {
  return type == 1 || type == 2 || type == 3 || type == 4 ||
         (type >= 7 && type <= 18);
}

/* Memory the CPU may read and write: cpu, cuda_host, rocm_host,
 * cuda_managed. */
static int m_cpu_readable(int type) {
  return type == kDLCPU || type == kDLCUDAHost || type == kDLROCMHost ||
         type == kDLCUDAManaged;
}

/* The element count; 0 for a shape that is not valid. */
static int m_numel(int32_t ndim, const int64_t *shape, int64_t *out) {
  if (ndim < 0 || ndim > DLB_MAX_NDIM || (ndim > 0 && shape == NULL)) return 0;
  wide n = 1;
  int zero = 0;
  for (int32_t d = 0; d < ndim; d++) {
    if (shape[d] < 0) return 0;
    zero |= shape[d] == 0;
  }
  for (int32_t d = 0; d < ndim && !zero; d++) {
    n *= shape[d];
    if (n > W_I64_MAX) return 0;
  }
  *out = zero ? 0 : (int64_t)n;
  return 1;
}

/* Element offset of the row-major k-th element. */
static wide m_offset(const DLTensor *t, int64_t k) {
  wide off = 0, compact = 1;
  for (int32_t d = t->ndim - 1; d >= 0; d--) {
    int64_t i = k % t->shape[d];
    k /= t->shape[d];
    off += (wide)i * (t->strides != NULL ? t->strides[d] : compact);
    compact *= t->shape[d];
  }
  return off;
}

static int m_compact(const DLTensor *t) {
  if (t->strides == NULL) return 1;
  wide expected = 1;
  for (int32_t d = t->ndim - 1; d >= 0; d--) {
    if (t->shape[d] == 1) continue;
    if (t->strides[d] != expected) return 0;
    expected *= t->shape[d];
  }
  return 1;
}

static wide floor8(wide v) { return v >= 0 ? v / 8 : -((-v + 7) / 8); }

typedef struct {
  int ok;        /* every field valid */
  int64_t numel; /* when the shape is valid */
  int64_t lo;    /* byte range relative to data, when ok */
  int64_t hi;
} verdict;

/* The validator's rules, from the DLPack facts and layout.h. padded: the
 * IS_SUBBYTE_TYPE_PADDED flag (sub-byte elements a byte each). */
static verdict m_judge(const DLTensor *t, int padded) {
  verdict v = {0, 0, 0, 0};
  if (!m_numel(t->ndim, t->shape, &v.numel)) return v;
  if (!m_dtype_ok(t->dtype)) return v;
  if (!m_known_device((int)t->device.device_type) || t->device.device_id < 0)
    return v;
  int sub = m_subbyte(t->dtype);
  if (sub && !padded && v.numel > 0 && !m_compact(t)) return v;
  if (t->byte_offset > (uint64_t)INT64_MAX) return v;
  wide eb = sub && padded ? 8 : (wide)t->dtype.bits * t->dtype.lanes;
  wide off = (wide)t->byte_offset, lo = off, hi = off;
  if (v.numel > 0) {
    wide mn = 0, mx = v.numel - 1;
    if (t->strides != NULL) {
      mx = 0;
      for (int32_t d = 0; d < t->ndim; d++) {
        wide term = (wide)(t->shape[d] - 1) * t->strides[d];
        if (term < W_I64_MIN || term > W_I64_MAX) return v;
        if (term < 0) mn += term;
        else mx += term;
        if (mn < W_I64_MIN || mx > W_I64_MAX) return v;
      }
    }
    if (mx + 1 > W_I64_MAX) return v;
    wide blo = floor8(mn * eb), bhi = ((mx + 1) * eb + 7) / 8;
    if (blo < W_I64_MIN || bhi > W_I64_MAX || bhi - blo > W_I64_MAX)
      return v;
    lo = blo + off;
    hi = bhi + off;
    if (lo > W_I64_MAX || hi > W_I64_MAX) return v;
  }
  if (t->data == NULL && v.numel > 0) return v;
  wide base = (wide)(uintptr_t)t->data;
  if (base + lo < 0 || base + hi > (wide)UINTPTR_MAX) return v;
  v.ok = 1;
  v.lo = (int64_t)lo;
  v.hi = (int64_t)hi;
  return v;
}

/* ---- buffers with guards -------------------------------------------------- */

typedef struct {
  unsigned char *mem; /* malloc'd, len bytes; guards included */
  size_t len;
} region;

static void region_make(fz_rng *r, region *g, size_t len) {
  g->len = len == 0 ? 1 : len;
  g->mem = malloc(g->len);
  FCHECK(g->mem != NULL);
  for (size_t i = 0; i < g->len; i++) g->mem[i] = (unsigned char)fz_u64(r);
}

static void region_free(region *g) {
  free(g->mem);
  g->mem = NULL;
}

static uintptr_t addr_of(const void *p) { return (uintptr_t)p; }

/* 1 when bytes [a, a + n) all lie in g. */
static int region_holds(const region *g, wide a, wide n) {
  wide start = (wide)addr_of(g->mem);
  return a >= start && n >= 0 && a + n <= start + (wide)g->len;
}

/* ---- element access by the model ------------------------------------------ */

/* Byte address of element k of a byte-addressable tensor. */
static wide m_elem_addr(const DLTensor *t, int64_t k) {
  return (wide)addr_of(t->data) + (wide)t->byte_offset +
         m_offset(t, k) * (wide)m_itemsize(t->dtype);
}

static unsigned get_bit(const unsigned char *base, wide bit) {
  return (base[(size_t)(bit / 8)] >> (unsigned)(bit % 8)) & 1u;
}

static void put_bit(unsigned char *base, wide bit, unsigned v) {
  unsigned char m = (unsigned char)(1u << (unsigned)(bit % 8));
  size_t i = (size_t)(bit / 8);
  base[i] = (unsigned char)(v ? base[i] | m : base[i] & ~m);
}

/* Every element of src (whose bytes lie in region sg, read from the
 * snapshot sold) is written, in row-major order, over dst (bytes in dg,
 * into want). Packed sub-byte tensors are compact: one run of bits. */
static void m_copy(const DLTensor *src, const region *sg,
                   const unsigned char *sold, const DLTensor *dst,
                   const region *dg, unsigned char *want, int64_t numel) {
  uintptr_t s0 = addr_of(sg->mem), d0 = addr_of(dg->mem);
  if (m_subbyte(src->dtype)) {
    wide bits = (wide)numel * src->dtype.bits;
    wide sb = ((wide)addr_of(src->data) + (wide)src->byte_offset - s0) * 8;
    wide db = ((wide)addr_of(dst->data) + (wide)dst->byte_offset - d0) * 8;
    for (wide i = 0; i < bits; i++) put_bit(want, db + i, get_bit(sold, sb + i));
    return;
  }
  size_t es = m_itemsize(src->dtype);
  for (int64_t k = 0; k < numel; k++) {
    wide s = m_elem_addr(src, k) - s0, d = m_elem_addr(dst, k) - d0;
    memcpy(want + (size_t)d, sold + (size_t)s, es);
  }
}

/* 1 when every byte element of t lies in g (packed: its run of bits). */
static int m_inside(const DLTensor *t, int64_t numel, const region *g) {
  if (numel == 0) return 1;
  if (m_subbyte(t->dtype)) {
    wide first = (wide)addr_of(t->data) + (wide)t->byte_offset;
    return region_holds(g, first, ((wide)numel * t->dtype.bits + 7) / 8);
  }
  for (int64_t k = 0; k < numel; k++)
    if (!region_holds(g, m_elem_addr(t, k), (wide)m_itemsize(t->dtype)))
      return 0;
  return 1;
}

/* ---- hostile tensors over real memory -------------------------------------- */

typedef struct {
  DLTensor t;
  int64_t shape[DLB_MAX_NDIM];
  int64_t strides[DLB_MAX_NDIM];
  region mem;
  verdict v;   /* packed reading */
  int backed;  /* valid, and every element lies in mem */
} fcase;

static const DLDataType GOOD_TYPES[] = {
    {kDLInt, 8, 1},        {kDLUInt, 16, 1},     {kDLInt, 32, 1},
    {kDLFloat, 64, 1},     {kDLComplex, 128, 1}, {kDLBool, 8, 1},
    {kDLBfloat, 16, 1},    {kDLFloat, 32, 4},    {kDLUInt, 8, 3},
    {kDLInt, 16, 3},       {kDLFloat8_e5m2, 8, 1}, {kDLOpaqueHandle, 64, 1},
    {kDLInt, 4, 2},        {kDLInt, 1, 1},       {kDLUInt, 2, 1},
    {kDLInt, 4, 1},        {kDLFloat4_e2m1fn, 4, 1},
    {kDLFloat6_e3m2fn, 6, 1}, {kDLFloat6_e2m3fn, 6, 1},
};

static DLDataType gen_dtype(fz_rng *r) {
  if (fz_pct(r, 80)) return GOOD_TYPES[fz_below(r, NCOUNT(GOOD_TYPES))];
  static const uint8_t bits[] = {0, 1, 2, 3, 4, 6, 7, 8, 12, 16, 24, 32, 48,
                                 64, 96, 128, 255};
  static const uint16_t lanes[] = {0, 1, 1, 2, 3, 4, 16, 65535};
  DLDataType d;
  d.code = (uint8_t)(fz_pct(r, 80) ? fz_below(r, 20) : fz_u64(r));
  d.bits = fz_pct(r, 85) ? bits[fz_below(r, NCOUNT(bits))] : (uint8_t)fz_u64(r);
  d.lanes = fz_pct(r, 85) ? lanes[fz_below(r, NCOUNT(lanes))]
                          : (uint16_t)fz_u64(r);
  return d;
}

static DLDevice gen_device(fz_rng *r) {
  static const int host[] = {kDLCPU, kDLCUDAHost, kDLROCMHost, kDLCUDAManaged};
  static const int other[] = {kDLCUDA, kDLOpenCL, kDLVulkan, kDLMetal, kDLROCM,
                              kDLExtDev, kDLOneAPI, kDLHexagon, kDLTrn};
  static const int unknown[] = {0, 5, 6, 19, 20, -1, INT32_MAX, INT32_MIN};
  static const int32_t ids[] = {1, 3, 7, -1, INT32_MIN, INT32_MAX};
  DLDevice dev = {kDLCPU, 0};
  uint64_t k = fz_below(r, 100);
  if (k < 65) return dev;
  if (k < 85) dev.device_type = (DLDeviceType)host[fz_below(r, NCOUNT(host))];
  else if (k < 95)
    dev.device_type = (DLDeviceType)other[fz_below(r, NCOUNT(other))];
  else
    dev.device_type = (DLDeviceType)unknown[fz_below(r, NCOUNT(unknown))];
  if (fz_pct(r, 40)) dev.device_id = ids[fz_below(r, NCOUNT(ids))];
  return dev;
}

static int64_t hostile_extent(fz_rng *r) {
  static const int64_t v[] = {-1, -2, INT64_MIN, INT64_MAX, (int64_t)1 << 62,
                              (int64_t)1 << 32, 3037000500, 65536};
  return v[fz_below(r, NCOUNT(v))];
}

static int64_t hostile_stride(fz_rng *r) {
  static const int64_t v[] = {INT64_MAX, INT64_MIN, INT64_MIN + 1,
                              (int64_t)1 << 62, -((int64_t)1 << 62),
                              (int64_t)1 << 40, 3037000500, -1000003};
  return v[fz_below(r, NCOUNT(v))];
}

static uint64_t hostile_offset(fz_rng *r) {
  static const uint64_t v[] = {UINT64_MAX, (uint64_t)INT64_MAX,
                               (uint64_t)INT64_MAX + 1, (uint64_t)INT64_MAX - 7,
                               (uint64_t)1 << 62, (uint64_t)1 << 40};
  return v[fz_below(r, NCOUNT(v))];
}

static void gen_strides(fz_rng *r, fcase *c) {
  DLTensor *t = &c->t;
  int32_t n = t->ndim < 0 ? 0 : t->ndim > DLB_MAX_NDIM ? DLB_MAX_NDIM : t->ndim;
  uint64_t k = fz_below(r, 100);
  if (k < 15) {
    t->strides = NULL;
    return;
  }
  int64_t acc = 1;
  for (int32_t d = n - 1; d >= 0; d--) {
    int64_t e = c->shape[d] > 0 && c->shape[d] < 1000 ? c->shape[d] : 1;
    if (k < 45) {
      c->strides[d] = acc;
    } else {
      /* gaps, reversal, aliasing, transposition by chance */
      int64_t s = acc * (int64_t)(1 + fz_below(r, 3));
      c->strides[d] = fz_pct(r, 25) ? -s : fz_pct(r, 8) ? 0 : s;
      if (fz_pct(r, 10)) c->strides[d] = (int64_t)fz_below(r, 7) - 3;
    }
    acc *= e;
    if (acc > 4096) acc = 4096;
  }
  if (k >= 45 && n >= 2 && fz_pct(r, 25)) {
    int32_t a = (int32_t)fz_below(r, (uint64_t)n),
            b = (int32_t)fz_below(r, (uint64_t)n);
    int64_t tmp = c->strides[a];
    c->strides[a] = c->strides[b];
    c->strides[b] = tmp;
  }
  /* A huge stride: harmless on an extent of 0 or 1, fatal elsewhere. */
  if (n > 0 && fz_pct(r, 15))
    c->strides[fz_below(r, (uint64_t)n)] = hostile_stride(r);
}

/* Builds a tensor and, when it is valid and small, memory behind it. */
static void gen_case(fz_rng *r, fcase *c) {
  memset(c, 0, sizeof *c);
  DLTensor *t = &c->t;
  t->shape = c->shape;
  t->strides = c->strides;
  if (fz_pct(r, 90)) {
    t->ndim = (int32_t)fz_below(r, 6);
  } else {
    static const int32_t nd[] = {-1, INT32_MIN, DLB_MAX_NDIM,
                                 DLB_MAX_NDIM + 1, INT32_MAX, 7, 9};
    t->ndim = nd[fz_below(r, NCOUNT(nd))];
  }
  int32_t n = t->ndim < 0 ? 0 : t->ndim > DLB_MAX_NDIM ? DLB_MAX_NDIM : t->ndim;
  for (int32_t d = 0; d < n; d++) {
    if (t->ndim > 5) c->shape[d] = fz_pct(r, 90) ? 1 : 2;
    else c->shape[d] = fz_pct(r, 8) ? 0 : 1 + (int64_t)fz_below(r, 6);
  }
  if (n > 0 && fz_pct(r, 10)) c->shape[fz_below(r, (uint64_t)n)] = hostile_extent(r);
  gen_strides(r, c);
  t->dtype = gen_dtype(r);
  t->device = gen_device(r);
  t->byte_offset = fz_pct(r, 50) ? 0 : fz_below(r, 40);
  if (fz_pct(r, 6)) t->byte_offset = hostile_offset(r);
  if (fz_pct(r, 3) && n > 0) t->shape = NULL;

  /* Place data so that the span the model reports lands inside a buffer
   * with random guards; anything the model cannot place gets a small
   * buffer of its own that nothing may touch. */
  t->data = (void *)((uintptr_t)1 << 44);
  verdict probe = m_judge(t, 0);
  int64_t numel = 0;
  int shape_ok = m_numel(t->ndim, t->shape, &numel);
  verdict padded = m_judge(t, 1);
  verdict place = probe.ok ? probe : padded;
  if (place.ok && numel > 0 && numel <= MAX_ELEMS &&
      place.hi - place.lo <= MAX_SPAN) {
    size_t pre = (size_t)fz_below(r, 9), post = (size_t)fz_below(r, 9);
    region_make(r, &c->mem, pre + (size_t)(place.hi - place.lo) + post);
    t->data = (void *)(addr_of(c->mem.mem) + pre - (uintptr_t)place.lo);
  } else {
    region_make(r, &c->mem, 16);
    t->data = c->mem.mem;
  }
  if (fz_pct(r, 4) || (shape_ok && numel == 0 && fz_pct(r, 30)))
    t->data = NULL;
  c->v = m_judge(t, 0);
  c->backed = c->v.ok && c->v.numel <= MAX_ELEMS &&
              m_inside(t, c->v.numel, &c->mem);
}

/* A compact cpu tensor shaped like c's when c's shape is valid and small,
 * otherwise a small float32 vector, in its own guarded region. */
static void gen_partner(fz_rng *r, const fcase *c, fcase *p) {
  memset(p, 0, sizeof *p);
  DLTensor *t = &p->t;
  int64_t numel = 0;
  if (m_numel(c->t.ndim, c->t.shape, &numel) && numel <= MAX_ELEMS &&
      m_dtype_ok(c->t.dtype) && fz_pct(r, 92)) {
    t->ndim = c->t.ndim;
    for (int32_t d = 0; d < t->ndim; d++) p->shape[d] = c->t.shape[d];
    t->dtype = c->t.dtype;
  } else {
    t->ndim = 1;
    p->shape[0] = 4;
    t->dtype.code = kDLFloat;
    t->dtype.bits = 32;
    t->dtype.lanes = 1;
    numel = 4;
  }
  t->shape = p->shape;
  t->strides = p->strides;
  /* An empty shape's compact strides may leave int64: any stride will do
   * where nothing is addressed. */
  wide acc = 1;
  for (int32_t d = t->ndim - 1; d >= 0; d--) {
    p->strides[d] = acc > W_I64_MAX ? 0 : (int64_t)acc;
    if (acc <= W_I64_MAX) acc *= p->shape[d] == 0 ? 1 : p->shape[d];
  }
  if (fz_pct(r, 20)) t->strides = NULL;
  t->device.device_type = kDLCPU;
  size_t bytes = m_subbyte(t->dtype)
                     ? (size_t)(((wide)numel * t->dtype.bits + 7) / 8)
                     : (size_t)numel * m_itemsize(t->dtype);
  size_t pre = (size_t)fz_below(r, 9);
  region_make(r, &p->mem, pre + bytes + (size_t)fz_below(r, 9));
  t->data = p->mem.mem + pre;
  t->byte_offset = 0;
  p->v = m_judge(t, 0);
  p->backed = p->v.ok;
}

/* ---- counting owners -------------------------------------------------------- */

static void count_versioned(DLManagedTensorVersioned *m) {
  ++*(int *)m->manager_ctx;
}

static void count_legacy(DLManagedTensor *m) { ++*(int *)m->manager_ctx; }

static void count_release(void *ctx) { ++*(int *)ctx; }

/* ---- copies --------------------------------------------------------------- */

static int same_shape(const DLTensor *a, const DLTensor *b) {
  if (a->ndim != b->ndim) return 0;
  for (int32_t d = 0; d < a->ndim; d++)
    if (a->shape[d] != b->shape[d]) return 0;
  return 1;
}

/* What dlb_copy accepts: both valid, CPU-readable, same shape and type;
 * packed sub-byte ones compact. */
static int m_copy_ok(const fcase *s, const fcase *d) {
  if (!s->v.ok || !d->v.ok) return 0;
  if (!m_cpu_readable((int)s->t.device.device_type) ||
      !m_cpu_readable((int)d->t.device.device_type))
    return 0;
  if (!same_shape(&s->t, &d->t) || !dlb_dtype_equal(s->t.dtype, d->t.dtype))
    return 0;
  if (m_subbyte(s->t.dtype) && s->v.numel > 0 &&
      (!m_compact(&s->t) || !m_compact(&d->t)))
    return 0;
  return 1;
}

typedef dlb_status (*copy_fn)(const DLTensor *src, const DLTensor *dst);

static dlb_status copy_plain(const DLTensor *s, const DLTensor *d) {
  return dlb_copy(s, d);
}

static dlb_status copy_sync_null(const DLTensor *s, const DLTensor *d) {
  return dlb_copy_sync(s, d, NULL);
}

static dlb_status copy_async_null(const DLTensor *s, const DLTensor *d) {
  return dlb_copy_async(s, d, NULL);
}

static int runtime_usable(int type) {
  if (type == kDLCUDA || type == kDLCUDAHost || type == kDLCUDAManaged)
    return dlb_runtime_status(DLB_RUNTIME_CUDA) == DLB_OK;
  if (type == kDLROCM || type == kDLROCMHost)
    return dlb_runtime_status(DLB_RUNTIME_HIP) == DLB_OK;
  return 0;
}

/*
 * One copy s -> d through fn. gpu_path: fn is dlb_copy_sync/async, which
 * hand host-type labels other than cpu to their runtime; a usable runtime
 * is left out (it would be asked to copy memory it never saw), a missing
 * one must refuse.
 */
static void try_copy(copy_fn fn, int gpu_path, const fcase *s, fcase *d,
                     int same_region) {
  int st_type = (int)s->t.device.device_type,
      dt_type = (int)d->t.device.device_type;
  if (gpu_path && (runtime_usable(st_type) || runtime_usable(dt_type))) return;
  int ok = m_copy_ok(s, d);
  if (ok && s->v.numel > 0 && (!s->backed || !d->backed)) return;
  if (gpu_path && (st_type != kDLCPU || dt_type != kDLCPU)) ok = 0;
  const region *sg = same_region ? &d->mem : &s->mem;
  unsigned char *sold = malloc(sg->len), *want = malloc(d->mem.len);
  FCHECK(sold != NULL && want != NULL);
  memcpy(sold, sg->mem, sg->len);
  memcpy(want, d->mem.mem, d->mem.len);
  if (ok) m_copy(&s->t, sg, sold, &d->t, &d->mem, want, s->v.numel);
  plant();
  dlb_status st = fn(&s->t, &d->t);
  if (ok) EXPECT_OK(st);
  else EXPECT_REFUSED(st);
  FCHECK(memcmp(d->mem.mem, want, d->mem.len) == 0);
  if (!same_region) FCHECK(memcmp(s->mem.mem, sold, sg->len) == 0);
  free(sold);
  free(want);
}

/* 1 when the compact row-major strides of t's shape fit in int64. */
static int m_strides_fit(const DLTensor *t) {
  wide acc = 1;
  for (int32_t d = t->ndim - 1; d > 0; d--) {
    acc *= t->shape[d] == 0 ? 1 : t->shape[d];
    if (acc > W_I64_MAX) return 0;
  }
  return 1;
}

/* dlb_tensor_copy to cpu: a compact, owned copy of what the model reads.
 * Large valid tensors (aliased extents) are left out, since the copy is
 * allocated before anything else is asked; so are empty ones whose compact
 * strides overflow: the allocation refuses them although the validator
 * accepts them. */
static void try_tensor_copy(const DLTensor *t, const verdict *v,
                            const region *g) {
  if (v->ok && (!m_strides_fit(t) || v->numel > MAX_ELEMS)) return;
  int readable = m_cpu_readable((int)t->device.device_type);
  if (v->ok && readable && !m_inside(t, v->numel, g)) return;
  if (v->ok && !readable && runtime_usable((int)t->device.device_type)) return;
  DLManagedTensorVersioned *out = SENTINEL;
  DLDevice cpu = {kDLCPU, 0};
  plant();
  dlb_status st = dlb_tensor_copy(t, cpu, &out);
  if (!(v->ok && readable)) {
    EXPECT_REFUSED(st);
    FCHECK(out == SENTINEL);
    return;
  }
  EXPECT_OK(st);
  FCHECK(out != SENTINEL && out != NULL);
  const DLTensor *o = &out->dl_tensor;
  FCHECK(out->flags == DLPACK_FLAG_BITMASK_IS_COPIED);
  FCHECK(o->device.device_type == kDLCPU && o->device.device_id == 0);
  FCHECK(same_shape(o, t) && dlb_dtype_equal(o->dtype, t->dtype));
  FCHECK(o->byte_offset == 0 && (v->numel == 0 || m_compact(o)));
  if (v->numel > 0) {
    int64_t bytes = 0;
    FCHECK(dlb_dtype_storage_bytes(t->dtype, v->numel, 0, &bytes) == DLB_OK);
    region og = {(unsigned char *)o->data, (size_t)bytes};
    unsigned char *want = malloc((size_t)bytes);
    FCHECK(want != NULL);
    memcpy(want, o->data, (size_t)bytes);
    m_copy(t, g, g->mem, o, &og, want, v->numel);
    FCHECK(memcmp(want, o->data, (size_t)bytes) == 0);
    free(want);
  }
  dlb_tensor_release(out);
}

/* A second layout of c's shape and type over c's own memory, for copies
 * whose source and destination share bytes. */
static int gen_overlay(fz_rng *r, const fcase *c, fcase *o) {
  memset(o, 0, sizeof *o);
  o->t = c->t;
  o->t.shape = o->shape;
  o->t.strides = o->strides;
  for (int32_t d = 0; d < c->t.ndim; d++) o->shape[d] = c->shape[d];
  int64_t acc = 1;
  int packed = m_subbyte(c->t.dtype);
  for (int32_t d = c->t.ndim - 1; d >= 0; d--) {
    int64_t s = packed ? acc : acc * (int64_t)(1 + fz_below(r, 2));
    o->strides[d] = !packed && fz_pct(r, 30) ? -s : s;
    acc *= o->shape[d] == 0 ? 1 : o->shape[d];
  }
  if (fz_pct(r, 15)) o->t.strides = NULL;
  o->t.device.device_type = kDLCPU;
  o->t.device.device_id = 0;
  o->t.byte_offset = fz_below(r, 8);
  o->t.data = (void *)((uintptr_t)1 << 44);
  verdict v = m_judge(&o->t, 0);
  if (!v.ok || v.hi - v.lo > (int64_t)c->mem.len) return 0;
  size_t room = c->mem.len - (size_t)(v.hi - v.lo);
  size_t at = (size_t)fz_below(r, room + 1);
  o->t.data = (void *)(addr_of(c->mem.mem) + at - (uintptr_t)v.lo);
  o->mem = c->mem;
  o->v = m_judge(&o->t, 0);
  o->backed = o->v.ok && m_inside(&o->t, o->v.numel, &o->mem);
  return o->backed;
}

/* ---- ownership -------------------------------------------------------------- */

/* A view of an adopted tensor must stay inside the memory the foreign
 * tensor described and copy out what the model reads through it. */
static void check_view(dlb_status st, DLManagedTensorVersioned *view,
                       const fcase *c) {
  if (st != DLB_OK) {
    EXPECT_REFUSED(st);
    FCHECK(view == SENTINEL);
    return;
  }
  EXPECT_OK(st);
  FCHECK(view != SENTINEL && dlb_tensor_is_ours(view));
  verdict v = m_judge(&view->dl_tensor,
                      (view->flags & DLPACK_FLAG_BITMASK_IS_SUBBYTE_TYPE_PADDED) != 0);
  FCHECK(v.ok);
  if (!m_subbyte(view->dl_tensor.dtype)) {
    FCHECK(m_inside(&view->dl_tensor, v.numel, &c->mem));
    try_tensor_copy(&view->dl_tensor, &v, &c->mem);
  }
  dlb_tensor_release(view);
}

static void random_views(fz_rng *r, DLManagedTensorVersioned *t,
                         const fcase *c) {
  int32_t nd = t->dl_tensor.ndim;
  DLManagedTensorVersioned *view = SENTINEL;
  dlb_slice sl[DLB_MAX_NDIM];
  for (int32_t d = 0; d < nd; d++) {
    sl[d].start = fz_pct(r, 20) ? DLB_SLICE_DEFAULT : (int64_t)fz_below(r, 9) - 4;
    sl[d].stop = fz_pct(r, 20) ? DLB_SLICE_DEFAULT : (int64_t)fz_below(r, 9) - 4;
    sl[d].step = fz_pct(r, 5) ? 0 : (int64_t)fz_below(r, 7) - 3;
    if (sl[d].step == 0 && fz_pct(r, 80)) sl[d].step = 1;
    if (fz_pct(r, 3)) sl[d].step = INT64_MIN;
  }
  int32_t nslices = (int32_t)fz_below(r, (uint64_t)nd + 1);
  plant();
  dlb_status st = dlb_tensor_slice(t, nslices, sl, &view);
  check_view(st, view, c);

  view = SENTINEL;
  int32_t dim = (int32_t)fz_below(r, (uint64_t)nd + 2) - 1;
  int64_t index = fz_pct(r, 10) ? INT64_MIN : (int64_t)fz_below(r, 9) - 4;
  plant();
  st = dlb_tensor_select(t, dim, index, &view);
  check_view(st, view, c);

  view = SENTINEL;
  int32_t axes[DLB_MAX_NDIM];
  for (int32_t d = 0; d < nd; d++) axes[d] = nd - 1 - d;
  if (nd > 0 && fz_pct(r, 15)) axes[fz_below(r, (uint64_t)nd)] = nd;
  plant();
  st = dlb_tensor_permute(t, axes, &view);
  check_view(st, view, c);

  view = SENTINEL;
  int64_t flat = fz_pct(r, 70) ? -1 : c->v.numel + (int64_t)fz_below(r, 3) - 1;
  plant();
  st = dlb_tensor_reshape(t, 1, &flat, &view);
  check_view(st, view, c);

  view = SENTINEL;
  int64_t wider[DLB_MAX_NDIM];
  wider[0] = (int64_t)fz_below(r, 3);
  for (int32_t d = 0; d < nd && d + 1 < DLB_MAX_NDIM; d++)
    wider[d + 1] = t->dl_tensor.shape[d];
  plant();
  st = dlb_tensor_expand(t, nd + 1 > DLB_MAX_NDIM ? nd : nd + 1, wider, &view);
  check_view(st, view, c);
}

/* The GPU entry points on an accepted or refused tensor: whatever they say,
 * they say it with a message, and leave out-parameters alone. */
static void gpu_entry_points(fz_rng *r, const fcase *c) {
  DLDevice out = {(DLDeviceType)77, 77};
  unsigned flags = (unsigned)fz_below(r, 3);
  int label_ok = flags <= DLB_LABEL_CORRECT &&
                 m_known_device((int)c->t.device.device_type) &&
                 c->t.device.device_id >= 0;
  int no_gpu = dlb_runtime_status(DLB_RUNTIME_CUDA) != DLB_OK &&
               dlb_runtime_status(DLB_RUNTIME_HIP) != DLB_OK;
  plant();
  dlb_status st = dlb_tensor_check_device(&c->t, flags, &out);
  if (!label_ok) FCHECK(st != DLB_OK);
  if (no_gpu && label_ok) {
    /* Nothing can contradict a label: it comes back, normalised. */
    FCHECK(st == DLB_OK && out.device_type == c->t.device.device_type);
    FCHECK(out.device_id ==
           (m_cpu_readable((int)out.device_type) ? 0 : c->t.device.device_id));
  }
  if (st == DLB_OK) {
    FCHECK(planted_kept());
    FCHECK(m_known_device((int)out.device_type) && out.device_id >= 0);
  } else {
    EXPECT_REFUSED(st);
    FCHECK(out.device_type == (DLDeviceType)77 && out.device_id == 77);
  }
  DLDevice host = {kDLCPU, 0};
  plant();
  st = dlb_managed_prefetch(&c->t, host, NULL);
  if (st == DLB_OK) FCHECK(c->v.ok && c->v.lo == c->v.hi && planted_kept());
  else EXPECT_REFUSED(st);
  plant();
  st = dlb_managed_advise(&c->t, (dlb_advice)(fz_below(r, 8)), host);
  if (st == DLB_OK) FCHECK(c->v.ok && c->v.lo == c->v.hi && planted_kept());
  else EXPECT_REFUSED(st);
}

static uint64_t gen_flags(fz_rng *r) {
  static const uint64_t v[] = {0, 0, 0, 0, 1, 2, 3, 4, 5, 7, 8, 16,
                               (uint64_t)1 << 63, UINT64_MAX};
  return fz_pct(r, 95) ? v[fz_below(r, NCOUNT(v))] : fz_u64(r);
}

static int flags_ok(uint64_t f) { return (f & ~(uint64_t)7) == 0; }

static int is_padded(uint64_t f) {
  return (f & DLPACK_FLAG_BITMASK_IS_SUBBYTE_TYPE_PADDED) != 0;
}

/* dlb_tensor_adopt of a versioned struct with a random version: another
 * major may lay out anything past flags, so its dl_tensor is sometimes
 * poison that crashes whoever reads through it. */
static void adopt_case(fz_rng *r, const fcase *c) {
  static const uint32_t majors[] = {0, 2, 3, 255, UINT32_MAX};
  static const uint32_t minors[] = {0, 3, 4, 99, UINT32_MAX};
  int calls = 0;
  DLManagedTensorVersioned m;
  memset(&m, 0, sizeof m);
  m.version.major = fz_pct(r, 85) ? DLPACK_MAJOR_VERSION
                                  : majors[fz_below(r, NCOUNT(majors))];
  m.version.minor = minors[fz_below(r, NCOUNT(minors))];
  m.manager_ctx = &calls;
  m.deleter = fz_pct(r, 90) ? count_versioned : NULL;
  m.flags = gen_flags(r);
  m.dl_tensor = c->t;
  int poisoned = m.version.major != DLPACK_MAJOR_VERSION && fz_pct(r, 50);
  if (poisoned) {
    m.dl_tensor.ndim = 40;
    m.dl_tensor.shape = (int64_t *)(uintptr_t)8;
    m.dl_tensor.strides = (int64_t *)(uintptr_t)8;
  }
  verdict v = m_judge(&c->t, is_padded(m.flags));
  int ok = m.version.major == DLPACK_MAJOR_VERSION && flags_ok(m.flags) && v.ok;

  plant();
  dlb_status st = dlb_managed_validate(&m);
  if (ok) EXPECT_OK(st);
  else EXPECT_REFUSED(st);
  if (m.version.major != DLPACK_MAJOR_VERSION) FCHECK(st == DLB_E_VERSION);

  DLManagedTensorVersioned *out = SENTINEL;
  plant();
  st = dlb_tensor_adopt(&m, &out);
  if (!ok) {
    EXPECT_REFUSED(st);
    FCHECK(out == SENTINEL && calls == 0);
    if (m.version.major != DLPACK_MAJOR_VERSION) FCHECK(st == DLB_E_VERSION);
    return;
  }
  EXPECT_OK(st);
  FCHECK(out != SENTINEL && dlb_tensor_is_ours(out) && calls == 0);
  FCHECK(out->flags == m.flags && out->dl_tensor.data == c->t.data);
  int can_read = c->backed || v.numel == 0;
  if (can_read && !m_subbyte(c->t.dtype))
    random_views(r, out, c);
  if (can_read && !is_padded(m.flags))
    try_tensor_copy(&out->dl_tensor, &c->v, &c->mem);

  /* Pinning needs a runtime (and a cpu tensor): refused here without one,
   * done and undone with one; ownership stays with out either way. */
  if (c->backed && fz_pct(r, 20)) {
    DLManagedTensorVersioned *pinned = SENTINEL;
    DLDeviceType kinds[] = {kDLCUDAHost, kDLROCMHost, kDLCPU, kDLCUDA};
    plant();
    st = dlb_tensor_pin(out, kinds[fz_below(r, 4)], &pinned);
    if (st == DLB_OK) {
      FCHECK(pinned != SENTINEL && dlb_tensor_is_ours(pinned));
      dlb_tensor_release(pinned);
    } else {
      EXPECT_REFUSED(st);
      FCHECK(pinned == SENTINEL);
    }
  }

  /* Through the legacy struct and back; it cannot carry READ_ONLY or a
   * padded sub-byte type. */
  DLManagedTensor *legacy = LEGACY_SENTINEL;
  plant();
  st = dlb_tensor_to_legacy(out, &legacy);
  int carry = !(m.flags & DLPACK_FLAG_BITMASK_READ_ONLY) &&
              !(is_padded(m.flags) && m_subbyte(c->t.dtype));
  if (!carry) {
    EXPECT_REFUSED(st);
    FCHECK(legacy == LEGACY_SENTINEL && calls == 0);
    dlb_tensor_release(out);
  } else {
    EXPECT_OK(st);
    FCHECK(legacy != LEGACY_SENTINEL && calls == 0);
    DLManagedTensorVersioned *back = SENTINEL;
    plant();
    st = dlb_tensor_from_legacy(legacy, 0, &back);
    EXPECT_OK(st);
    FCHECK(back != SENTINEL && calls == 0);
    dlb_tensor_release(back);
  }
  FCHECK(calls == (m.deleter != NULL));
}

/* dlb_tensor_from_legacy and dlb_tensor_wrap: the flags come from the
 * caller, the deleter or release runs once after the last release. */
static void legacy_and_wrap_case(fz_rng *r, const fcase *c) {
  int calls = 0;
  DLManagedTensor l;
  l.dl_tensor = c->t;
  l.manager_ctx = &calls;
  l.deleter = fz_pct(r, 90) ? count_legacy : NULL;
  uint64_t flags = gen_flags(r);
  int ok = flags_ok(flags) && m_judge(&c->t, is_padded(flags)).ok;
  DLManagedTensorVersioned *out = SENTINEL;
  plant();
  dlb_status st = dlb_tensor_from_legacy(&l, flags, &out);
  if (ok) {
    EXPECT_OK(st);
    FCHECK(out != SENTINEL && out->flags == flags && calls == 0);
    if ((c->backed || c->v.numel == 0) && !is_padded(flags))
      try_tensor_copy(&out->dl_tensor, &c->v, &c->mem);
    dlb_tensor_release(out);
    FCHECK(calls == (l.deleter != NULL));
  } else {
    EXPECT_REFUSED(st);
    FCHECK(out == SENTINEL && calls == 0);
  }

  int released = 0;
  flags = gen_flags(r);
  ok = flags_ok(flags) && m_judge(&c->t, is_padded(flags)).ok;
  dlb_release_fn fn = fz_pct(r, 90) ? count_release : NULL;
  out = SENTINEL;
  plant();
  st = dlb_tensor_wrap(&c->t, flags, fn, &released, &out);
  if (ok) {
    EXPECT_OK(st);
    FCHECK(out != SENTINEL && released == 0);
    dlb_tensor_release(out);
    FCHECK(released == (fn != NULL));
  } else {
    EXPECT_REFUSED(st);
    FCHECK(out == SENTINEL && released == 0);
  }
}

/* ---- the tests ------------------------------------------------------------ */

static uint64_t cases_wanted(void) { return env_u64("DLB_FUZZ_CASES", 3000); }

DLB_TEST(fuzz_real_memory_through_every_entry_point) {
  g_seed = env_u64("DLB_FUZZ_SEED", 20260301);
  uint64_t n = cases_wanted();
  fz_rng r = {g_seed};
  uint64_t valid = 0, backed = 0, copied = 0;
  for (g_case = 0; g_case < n; g_case++) {
    fcase c, p;
    gen_case(&r, &c);
    gen_partner(&r, &c, &p);
    g_shown = &c.t;
    valid += (uint64_t)c.v.ok;
    backed += (uint64_t)(c.backed && c.v.numel > 0);
    copied += (uint64_t)(m_copy_ok(&c, &p) && c.backed && c.v.numel > 0);

    plant();
    dlb_status st = dlb_tensor_validate(&c.t);
    if (c.v.ok) EXPECT_OK(st);
    else EXPECT_REFUSED(st);

    int64_t lo = -5, hi = -6;
    plant();
    st = dlb_tensor_byte_span(&c.t, &lo, &hi);
    if (st == DLB_OK) {
      FCHECK(planted_kept() && lo <= hi);
      if (c.v.ok) FCHECK(lo == c.v.lo && hi == c.v.hi);
    } else {
      EXPECT_REFUSED(st);
      FCHECK(lo == -5 && hi == -6 && !c.v.ok);
    }

    try_copy(copy_plain, 0, &c, &p, 0);
    try_copy(copy_plain, 0, &p, &c, 0);
    try_copy(copy_sync_null, 1, &c, &p, 0);
    try_copy(copy_sync_null, 1, &p, &c, 0);
    try_copy(copy_async_null, 1, &p, &c, 0);
    try_tensor_copy(&c.t, &c.v, &c.mem);

    adopt_case(&r, &c);
    legacy_and_wrap_case(&r, &c);
    gpu_entry_points(&r, &c);

    region_free(&c.mem);
    region_free(&p.mem);
  }
  /* The generator must reach both sides, and real copies, often. */
  FCHECK(valid > n / 4 && valid < n - n / 10);
  FCHECK(backed > n / 5 && copied > n / 10);
}

DLB_TEST(fuzz_copies_within_one_buffer_read_a_snapshot) {
  g_seed = env_u64("DLB_FUZZ_SEED", 20260301) ^ 0x5bd1e995u;
  uint64_t n = cases_wanted();
  fz_rng r = {g_seed};
  uint64_t done = 0;
  for (g_case = 0; g_case < n; g_case++) {
    fcase c, o;
    gen_case(&r, &c);
    g_shown = &c.t;
    if (c.backed && c.v.numel > 0 && m_cpu_readable((int)c.t.device.device_type) &&
        gen_overlay(&r, &c, &o)) {
      /* Both directions, and onto itself (which must change nothing). */
      try_copy(copy_plain, 0, &c, &o, 1);
      try_copy(copy_plain, 0, &o, &c, 1);
      try_copy(copy_plain, 0, &c, &c, 1);
      done++;
    }
    region_free(&c.mem);
  }
  FCHECK(done > n / 8);
}
