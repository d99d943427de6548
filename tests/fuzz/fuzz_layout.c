/*
 * fuzz_layout.c -- the validator and the geometry functions on fuzzed
 * DLTensor and DLManagedTensorVersioned descriptions (see fuzz_tensor.h
 * for why the harness is memory-safe).
 *
 * Properties: a refusal leaves a message, a success leaves dlb_last_error()
 * alone; an accepted tensor has a count, a byte span equal to the naive
 * model's, known dtype and device and non-NULL data when it has elements;
 * the contiguity answers, compact strides and dimension merging agree with
 * naive models; dlb_managed_validate adds exactly the version and flag
 * rules; dlb_tensor_wrap accepts what dlb_managed_validate accepts and runs
 * the release callback once; an accepted cpu tensor inside the harness's
 * block copies (dlb_tensor_copy) to the values read element by element.
 */
#include "fuzz_tensor.h"

static const char MARK[] = "dtype name is NULL";

/* Leaves a known message in dlb_last_error(). */
static void mark_error(void) {
  DLDataType d;
  (void)dlb_dtype_parse(NULL, &d);
}

static int mark_intact(void) { return strstr(dlb_last_error(), "NULL") != NULL; }

static fz_wide floor_div8(fz_wide x) { return x >= 0 ? x / 8 : -((-x + 7) / 8); }

static int fits(fz_wide v) { return v >= INT64_MIN && v <= INT64_MAX; }

static void check_span(const DLTensor *t, fz_wide numel) {
  int64_t lo = 7, hi = 9;
  dlb_status st = dlb_tensor_byte_span(t, &lo, &hi);
  if (numel < 0) {
    FZ_ASSERT(st == DLB_E_LAYOUT);
    return;
  }
  if (numel > INT64_MAX) {
    FZ_ASSERT(st == DLB_E_OVERFLOW);
    return;
  }
  if (t->byte_offset > (uint64_t)INT64_MAX) {
    FZ_ASSERT(st == DLB_E_OVERFLOW);
    return;
  }
  fz_wide eb = (fz_wide)t->dtype.bits * t->dtype.lanes;
  fz_wide bo = (fz_wide)t->byte_offset, mlo, mhi;
  if (numel == 0) {
    mlo = mhi = bo;
  } else {
    fz_wide elo = 0, ehi = 0;
    for (int32_t i = 0; i < t->ndim; i++) {
      fz_wide reach = fz_mul_sat(t->shape[i] - 1, fz_stride(t, i));
      if (reach < 0) elo += reach;
      else ehi += reach;
    }
    /* The library measures the reach in elements first: a reach that does
     * not fit int64_t is an overflow even where its bytes would fit. */
    if (!fits(elo) || !fits(ehi + 1)) {
      FZ_ASSERT(st == DLB_E_OVERFLOW);
      return;
    }
    mlo = bo + floor_div8(elo * eb);
    mhi = bo + floor_div8((ehi + 1) * eb + 7);
  }
  if (!fits(mlo) || !fits(mhi) || !fits(mhi - mlo)) {
    FZ_ASSERT(st == DLB_E_OVERFLOW);
    return;
  }
  if (st != DLB_OK || lo != mlo || hi != mhi) {
    fprintf(stderr, "span: %s (%s) lo %lld hi %lld; model %lld %lld; ndim %d bits %u lanes %u bo %llu\n",
            dlb_status_name(st), dlb_last_error(), (long long)lo, (long long)hi,
            (long long)mlo, (long long)mhi, (int)t->ndim, t->dtype.bits, t->dtype.lanes,
            (unsigned long long)t->byte_offset);
    for (int32_t i = 0; i < t->ndim; i++)
      fprintf(stderr, "  shape %lld stride %lld\n", (long long)t->shape[i],
              t->strides ? (long long)t->strides[i] : -1LL);
  }
  FZ_ASSERT(st == DLB_OK);
  FZ_ASSERT(lo == mlo && hi == mhi);
}

static int model_contiguous(const DLTensor *t, fz_wide numel, int fortran) {
  if (numel == 0) return 1;
  if (t->strides == NULL) {
    if (!fortran) return 1;
    int big = 0;
    for (int32_t i = 0; i < t->ndim; i++) big += t->shape[i] > 1;
    return big <= 1;
  }
  fz_wide expect = 1;
  for (int32_t k = 0; k < t->ndim; k++) {
    int32_t i = fortran ? k : t->ndim - 1 - k;
    if (t->shape[i] != 1 && t->strides[i] != expect) return 0;
    expect *= t->shape[i];
  }
  return 1;
}

static void check_coalesce(const DLTensor *t, int64_t numel) {
  static fz_wide before[FZ_ENUM_MAX], after[FZ_ENUM_MAX], other[FZ_ENUM_MAX];
  int64_t shape[DLB_MAX_NDIM + 1], s0[DLB_MAX_NDIM + 1], s1[DLB_MAX_NDIM + 1];
  fz_wide w[FZ_ARRAY_MAX];
  fz_strides_of(t, w);
  fz_offsets(t->ndim, t->shape, w, before, numel);
  for (int32_t i = 0; i < t->ndim; i++) {
    shape[i] = t->shape[i];
    if (!fits(w[i])) return;
    s0[i] = (int64_t)w[i];
  }
  fz_wide c[FZ_ARRAY_MAX];
  fz_compact(t->ndim, t->shape, c);
  for (int32_t i = 0; i < t->ndim; i++) s1[i] = (int64_t)c[i];
  int64_t *both[2] = {s0, s1};
  int32_t nd = dlb_coalesce_dims(t->ndim, shape, both, 2);
  FZ_ASSERT(nd >= 0 && nd <= t->ndim + 1);
  fz_wide a0[FZ_ARRAY_MAX], a1[FZ_ARRAY_MAX];
  for (int32_t i = 0; i < nd; i++) {
    a0[i] = s0[i];
    a1[i] = s1[i];
  }
  FZ_ASSERT(fz_numel(nd, shape) == numel);
  if (numel == 0) return;
  fz_offsets(nd, shape, a0, after, numel);
  for (int64_t k = 0; k < numel; k++) FZ_ASSERT(after[k] == before[k]);
  fz_offsets(nd, shape, a1, other, numel);
  for (int64_t k = 0; k < numel; k++) FZ_ASSERT(other[k] == k);
}

static void check_alignment(const DLTensor *t) {
  size_t a = dlb_tensor_alignment(t);
  FZ_ASSERT(a >= 1 && a <= 4096 && (a & (a - 1)) == 0);
  if (t->data == NULL) {
    FZ_ASSERT(a == 4096);
    return;
  }
  uintptr_t addr = (uintptr_t)t->data + (uintptr_t)t->byte_offset;
  if (addr == 0) return;
  FZ_ASSERT(addr % a == 0);
  FZ_ASSERT(a == 4096 || addr % (a * 2) != 0);
}

static uint64_t bits_at(const uint8_t *base, fz_wide bit, unsigned n) {
  uint64_t v = 0;
  for (unsigned i = 0; i < n; i++) {
    fz_wide b = bit + i;
    v |= (uint64_t)((base[(size_t)(b / 8)] >> (unsigned)(b % 8)) & 1u) << i;
  }
  return v;
}

/* An accepted cpu tensor whose elements lie in the block copies to the
 * values read one by one. */
static void check_copy(const fz_tensor *f, int64_t numel) {
  static fz_wide offs[FZ_ENUM_MAX];
  const DLTensor *t = &f->t;
  DLManagedTensorVersioned *c = NULL;
  const DLDevice cpu = {kDLCPU, 0};
  if (dlb_dtype_is_subbyte(t->dtype)) {
    /* Packed: compact, element k at bit k * bits from data + byte_offset. */
    unsigned eb = dlb_dtype_bits(t->dtype);
    if (t->data == NULL) return;
    fz_wide first = (fz_wide)((const uint8_t *)t->data - f->block) + (fz_wide)t->byte_offset;
    if (first + ((fz_wide)numel * eb + 7) / 8 > (fz_wide)f->block_size) return;
    mark_error();
    FZ_ASSERT(dlb_tensor_copy(t, cpu, &c) == DLB_OK);
    FZ_ASSERT(mark_intact());
    for (int64_t k = 0; k < numel; k++)
      FZ_ASSERT(bits_at(c->dl_tensor.data, (fz_wide)k * eb, eb) ==
                bits_at(f->block + (size_t)first, (fz_wide)k * eb, eb));
    dlb_tensor_release(c);
    return;
  }
  if (!fz_inside(t, f->block, f->block_size, offs, numel)) return;
  size_t item = dlb_dtype_itemsize(t->dtype);
  FZ_ASSERT(dlb_tensor_copy(t, cpu, &c) == DLB_OK);
  FZ_ASSERT(c->dl_tensor.ndim == t->ndim);
  FZ_ASSERT(dlb_tensor_is_c_contiguous(&c->dl_tensor));
  const uint8_t *got = (const uint8_t *)c->dl_tensor.data + c->dl_tensor.byte_offset;
  for (int64_t k = 0; k < numel; k++)
    FZ_ASSERT(memcmp(got + (size_t)k * item, f->block + (size_t)offs[k], item) == 0);
  dlb_tensor_release(c);
}

static int released;
static void on_release(void *ctx) {
  FZ_ASSERT(ctx == &released);
  released++;
}

static void check_managed(fz_in *in, const DLTensor *t, dlb_status plain) {
  DLManagedTensorVersioned m;
  memset(&m, 0, sizeof m);
  m.dl_tensor = *t;
  m.version.major = fz_below(in, 8) == 0 ? (uint32_t)fz_bytes(in, 4) : DLPACK_MAJOR_VERSION;
  m.version.minor = (uint32_t)fz_bytes(in, 1);
  uint64_t fl = fz_below(in, 16) == 0 ? fz_bytes(in, 8) : fz_below(in, 8);
  m.flags = fl;
  mark_error();
  dlb_status st = dlb_managed_validate(&m);
  if (st == DLB_OK) FZ_ASSERT(mark_intact());
  else FZ_ASSERT(dlb_last_error()[0] != '\0');
  int padded_sub = (fl & DLPACK_FLAG_BITMASK_IS_SUBBYTE_TYPE_PADDED) &&
                   dlb_dtype_check(t->dtype) == DLB_OK && dlb_dtype_is_subbyte(t->dtype);
  if (m.version.major != DLPACK_MAJOR_VERSION) {
    FZ_ASSERT(st == DLB_E_VERSION);
    return;
  }
  if (fl & ~(uint64_t)7) {
    FZ_ASSERT(st == DLB_E_INVAL);
    return;
  }
  if (!padded_sub && st != plain)
    fprintf(stderr, "managed %s (%s), plain %s; padded sub-byte %d\n", dlb_status_name(st),
            dlb_last_error(), dlb_status_name(plain), padded_sub);
  /* Padded sub-byte elements take a byte each and may have any strides:
   * the two verdicts differ either way, so only the rest is compared. */
  if (!padded_sub) FZ_ASSERT(st == plain);

  DLManagedTensorVersioned *w = (DLManagedTensorVersioned *)&m;
  released = 0;
  dlb_status ws = dlb_tensor_wrap(t, fl, on_release, &released, &w);
  FZ_ASSERT(ws == st);
  if (ws != DLB_OK) {
    FZ_ASSERT(w == &m && released == 0);
    return;
  }
  FZ_ASSERT(dlb_tensor_is_ours(w));
  FZ_ASSERT(w->flags == fl);
  FZ_ASSERT(dlb_managed_validate(w) == DLB_OK);
  dlb_tensor_release(w);
  FZ_ASSERT(released == 1);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  fz_in in = {data, size};
  fz_tensor f;
  int sane = fz_below(&in, 2) == 0;
  if (fz_tensor_make(&in, &f, sane, 0, 512) != 0) {
    fz_tensor_free(&f);
    return 0;
  }
  const DLTensor *t = &f.t;
  fz_wide numel = fz_numel(t->ndim, t->shape);
  mark_error();
  dlb_status st = dlb_tensor_validate(t);
  if (st != DLB_OK) {
    FZ_ASSERT(dlb_last_error()[0] != '\0');
    FZ_ASSERT(strcmp(dlb_last_error(), MARK) != 0);
  } else {
    FZ_ASSERT(mark_intact());
  }
  if (t->ndim < 0 || t->ndim > DLB_MAX_NDIM || numel < 0) {
    if (st != DLB_E_LAYOUT) fprintf(stderr, "%s %s\n", dlb_status_name(st), dlb_last_error());
    FZ_ASSERT(st == DLB_E_LAYOUT);
  }
  if (numel > INT64_MAX) FZ_ASSERT(st != DLB_OK);

  int64_t n64 = -1;
  dlb_status ns = dlb_tensor_numel(t, &n64);
  if (numel >= 0 && numel <= INT64_MAX) FZ_ASSERT(ns == DLB_OK && n64 == numel);
  else FZ_ASSERT(ns != DLB_OK && n64 == -1);

  if (numel >= 0 && numel <= INT64_MAX && t->ndim <= DLB_MAX_NDIM) {
    FZ_ASSERT(dlb_tensor_is_c_contiguous(t) == model_contiguous(t, numel, 0));
    FZ_ASSERT(dlb_tensor_is_f_contiguous(t) == model_contiguous(t, numel, 1));
    int64_t cs[DLB_MAX_NDIM];
    fz_wide cw[FZ_ARRAY_MAX];
    fz_compact(t->ndim, t->shape, cw);
    int fit = 1;
    for (int32_t i = 0; i < t->ndim; i++) fit &= cw[i] <= INT64_MAX;
    dlb_status cst = dlb_compact_strides(t->ndim, t->shape, 0, cs);
    FZ_ASSERT((cst == DLB_OK) == fit);
    for (int32_t i = 0; cst == DLB_OK && i < t->ndim; i++) FZ_ASSERT(cs[i] == cw[i]);
  }
  if (dlb_dtype_check(t->dtype) == DLB_OK && t->ndim >= 0 && t->ndim <= DLB_MAX_NDIM)
    check_span(t, numel);
  check_alignment(t);

  if (st == DLB_OK) {
    FZ_ASSERT(dlb_dtype_check(t->dtype) == DLB_OK);
    FZ_ASSERT(dlb_device_type_is_known(t->device.device_type));
    FZ_ASSERT(t->device.device_id >= 0);
    FZ_ASSERT(numel == 0 || t->data != NULL);
    if (numel > 0 && dlb_dtype_is_subbyte(t->dtype)) FZ_ASSERT(model_contiguous(t, numel, 0));
    int64_t lo, hi;
    FZ_ASSERT(dlb_tensor_byte_span(t, &lo, &hi) == DLB_OK && lo <= hi);
    if (numel <= FZ_ENUM_MAX) {
      check_coalesce(t, (int64_t)numel);
      if (t->device.device_type == kDLCPU && numel > 0) check_copy(&f, (int64_t)numel);
    }
  }
  check_managed(&in, t, st);
  fz_tensor_free(&f);
  return 0;
}
