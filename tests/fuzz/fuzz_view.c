/*
 * fuzz_view.c -- chains of views (slice, select, permute, reshape, expand)
 * on fuzzed layouts, checked against a model that keeps every element's
 * byte address explicitly.
 *
 * Properties: a refused view leaves the out-parameter and the message
 * rules intact and is refused exactly when the model says the arguments are
 * bad (or, for reshape, when no strides can describe the result); an
 * accepted view validates, shares the base's owner, keeps READ_ONLY (expand
 * sets it), drops IS_COPIED, and names exactly the model's elements in
 * row-major order; its values copy out as the model reads them; the base's
 * release callback runs once, after the last view, whatever the order of
 * releases.
 */
#include "fuzz_tensor.h"

#define SENTINEL ((DLManagedTensorVersioned *)(uintptr_t)0xdead1)
#define MAX_OPS 6

typedef struct {
  int32_t ndim;
  int64_t shape[DLB_MAX_NDIM];
  int64_t count;
  fz_wide offs[FZ_ENUM_MAX]; /* byte offsets from the block, row-major */
} model;

static const uint8_t *g_block;
static int released;

static void on_release(void *ctx) {
  FZ_ASSERT(ctx == &released);
  released++;
}

/* Python's slice.indices, in wide arithmetic. */
static fz_wide slice_len(fz_wide n, dlb_slice s, fz_wide *start, fz_wide *step) {
  fz_wide st = s.step, a, b;
  if (st > 0) {
    a = s.start == DLB_SLICE_DEFAULT ? 0 : s.start;
    b = s.stop == DLB_SLICE_DEFAULT ? n : s.stop;
    if (a < 0) a = a + n < 0 ? 0 : a + n;
    else if (a > n) a = n;
    if (b < 0) b = b + n < 0 ? 0 : b + n;
    else if (b > n) b = n;
    *start = a;
    *step = st;
    return b > a ? (b - a - 1) / st + 1 : 0;
  }
  a = s.start == DLB_SLICE_DEFAULT ? n - 1 : s.start;
  b = s.stop == DLB_SLICE_DEFAULT ? -1 : s.stop;
  if (a < 0) a = a + n < 0 ? -1 : a + n;
  else if (a >= n) a = n - 1;
  if (s.stop != DLB_SLICE_DEFAULT) {
    if (b < 0) b = b + n < 0 ? -1 : b + n;
    else if (b >= n) b = n - 1;
  }
  *start = a;
  *step = st;
  return a > b ? (a - b - 1) / (-st) + 1 : 0;
}

/* Builds a model of m's view from index maps: new element k reads old
 * element src[k]. */
static void gather(model *m, const model *old, const int64_t *src) {
  for (int64_t k = 0; k < m->count; k++) m->offs[k] = old->offs[src[k]];
}

/* Flat row-major index in old of the multi-index idx (old's ndim). */
static int64_t flat(const model *old, const int64_t *idx) {
  int64_t f = 0;
  for (int32_t i = 0; i < old->ndim; i++) f = f * old->shape[i] + idx[i];
  return f;
}

static int next_index(int32_t ndim, const int64_t *shape, int64_t *idx) {
  for (int32_t i = ndim - 1; i >= 0; i--) {
    if (++idx[i] < shape[i]) return 1;
    idx[i] = 0;
  }
  return 0;
}

static fz_wide count_of(int32_t ndim, const int64_t *shape) {
  return fz_numel(ndim, shape);
}

/* Compares the view v against the model. */
static void check_view(const DLManagedTensorVersioned *v, const model *m,
                       size_t item) {
  const DLTensor *t = &v->dl_tensor;
  FZ_ASSERT(dlb_tensor_is_ours(v));
  FZ_ASSERT(dlb_managed_validate(v) == DLB_OK);
  FZ_ASSERT(t->ndim == m->ndim);
  for (int32_t i = 0; i < m->ndim; i++) FZ_ASSERT(t->shape[i] == m->shape[i]);
  if (m->count == 0) return;
  static fz_wide offs[FZ_ENUM_MAX];
  fz_wide st[FZ_ARRAY_MAX];
  fz_strides_of(t, st);
  fz_offsets(t->ndim, t->shape, st, offs, m->count);
  fz_wide base = (fz_wide)((uintptr_t)t->data - (uintptr_t)g_block) + (fz_wide)t->byte_offset;
  for (int64_t k = 0; k < m->count; k++)
    FZ_ASSERT(base + offs[k] * (fz_wide)item == m->offs[k]);
  DLManagedTensorVersioned *c = NULL;
  const DLDevice cpu = {kDLCPU, 0};
  FZ_ASSERT(dlb_tensor_copy(t, cpu, &c) == DLB_OK);
  const uint8_t *got = (const uint8_t *)c->dl_tensor.data;
  for (int64_t k = 0; k < m->count; k++)
    FZ_ASSERT(memcmp(got + (size_t)k * item, g_block + (size_t)m->offs[k], item) == 0);
  dlb_tensor_release(c);
}

/* 1 when some strides describe offs (in row-major order) with shape. */
static int describable(int32_t ndim, const int64_t *shape, const model *m) {
  if (m->count == 0) return 1;
  fz_wide st[FZ_ARRAY_MAX];
  fz_wide unit = 1;
  for (int32_t i = ndim - 1; i >= 0; i--) {
    st[i] = shape[i] > 1 ? m->offs[unit] - m->offs[0] : 0;
    unit *= shape[i];
  }
  static fz_wide offs[FZ_ENUM_MAX];
  fz_offsets(ndim, shape, st, offs, m->count);
  for (int64_t k = 0; k < m->count; k++)
    if (offs[k] + m->offs[0] != m->offs[k]) return 0;
  return 1;
}

static model g_models[2];

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  fz_in in = {data, size};
  fz_tensor f;
  static fz_wide offs[FZ_ENUM_MAX];
  if (fz_tensor_make(&in, &f, 1, 1, 2048) != 0) goto done;
  fz_wide n = fz_numel(f.t.ndim, f.t.shape);
  if (n < 0 || n > FZ_ENUM_MAX || dlb_tensor_validate(&f.t) != DLB_OK) goto done;
  if (!fz_inside(&f.t, f.block, f.block_size, offs, (int64_t)n)) goto done;
  g_block = f.block;
  size_t item = dlb_dtype_itemsize(f.t.dtype);
  uint64_t flags = fz_below(&in, 4);
  released = 0;
  DLManagedTensorVersioned *cur = NULL;
  FZ_ASSERT(dlb_tensor_wrap(&f.t, flags, on_release, &released, &cur) == DLB_OK);
  model *m = &g_models[0], *nm = &g_models[1];
  m->ndim = f.t.ndim;
  if (f.t.ndim > 0) memcpy(m->shape, f.t.shape, sizeof(int64_t) * (size_t)f.t.ndim);
  m->count = (int64_t)n;
  if (n > 0) memcpy(m->offs, offs, sizeof(fz_wide) * (size_t)n);
  DLManagedTensorVersioned *held[MAX_OPS + 1];
  int nheld = 0;
  held[nheld++] = cur;
  int read_only = (flags & DLPACK_FLAG_BITMASK_READ_ONLY) != 0;

  for (int op = 0; op < MAX_OPS && in.n > 0; op++) {
    DLManagedTensorVersioned *v = SENTINEL;
    dlb_status st, want = DLB_OK;
    int64_t *src = NULL;
    int sets_read_only = 0;
    int32_t nd = m->ndim;
    memset(nm, 0, sizeof(int32_t) + sizeof nm->shape + sizeof nm->count);
    int kind = (int)fz_below(&in, 5);
    switch (kind) {
      case 0: { /* slice */
        int32_t ns = (int32_t)fz_range(&in, -1, nd + 1);
        dlb_slice sl[DLB_MAX_NDIM + 1];
        fz_wide starts[DLB_MAX_NDIM], steps[DLB_MAX_NDIM];
        for (int32_t i = 0; i < (ns > 0 ? ns : 0); i++) {
          sl[i].start = fz_below(&in, 3) == 0 ? DLB_SLICE_DEFAULT : fz_below(&in, 4) == 0 ? fz_i64(&in) : fz_range(&in, -8, 8);
          sl[i].stop = fz_below(&in, 3) == 0 ? DLB_SLICE_DEFAULT : fz_below(&in, 4) == 0 ? fz_i64(&in) : fz_range(&in, -8, 8);
          sl[i].step = fz_below(&in, 6) == 0 ? fz_i64(&in) : fz_range(&in, -3, 3);
        }
        if (ns < 0 || ns > nd) want = DLB_E_INVAL;
        nm->ndim = nd;
        for (int32_t i = 0; want == DLB_OK && i < nd; i++) {
          if (i < ns && sl[i].step == 0) {
            want = DLB_E_INVAL;
            break;
          }
          dlb_slice whole = {DLB_SLICE_DEFAULT, DLB_SLICE_DEFAULT, 1};
          nm->shape[i] = (int64_t)slice_len(m->shape[i], i < ns ? sl[i] : whole, &starts[i], &steps[i]);
        }
        st = dlb_tensor_slice(cur, ns, ns > 0 ? sl : NULL, &v);
        if (want != DLB_OK) break;
        nm->count = (int64_t)count_of(nd, nm->shape);
        src = malloc(sizeof(int64_t) * (size_t)(nm->count + 1));
        int64_t idx[DLB_MAX_NDIM] = {0}, old[DLB_MAX_NDIM];
        for (int64_t k = 0; k < nm->count; k++) {
          for (int32_t i = 0; i < nd; i++) old[i] = (int64_t)(starts[i] + steps[i] * idx[i]);
          src[k] = flat(m, old);
          next_index(nd, nm->shape, idx);
        }
        break;
      }
      case 1: { /* select */
        int32_t dim = (int32_t)fz_range(&in, -nd - 1, nd);
        int64_t index = fz_below(&in, 8) == 0 ? fz_i64(&in) : fz_range(&in, -7, 7);
        st = dlb_tensor_select(cur, dim, index, &v);
        int32_t d = dim < 0 ? dim + nd : dim;
        if (d < 0 || d >= nd) {
          want = DLB_E_RANGE;
          break;
        }
        fz_wide ix = index < 0 ? (fz_wide)index + m->shape[d] : index;
        if (ix < 0 || ix >= m->shape[d]) {
          want = DLB_E_RANGE;
          break;
        }
        nm->ndim = nd - 1;
        for (int32_t i = 0, j = 0; i < nd; i++)
          if (i != d) nm->shape[j++] = m->shape[i];
        nm->count = (int64_t)count_of(nm->ndim, nm->shape);
        src = malloc(sizeof(int64_t) * (size_t)(nm->count + 1));
        int64_t idx[DLB_MAX_NDIM] = {0}, old[DLB_MAX_NDIM];
        for (int64_t k = 0; k < nm->count; k++) {
          for (int32_t i = 0, j = 0; i < nd; i++) old[i] = i == d ? (int64_t)ix : idx[j++];
          src[k] = flat(m, old);
          next_index(nm->ndim, nm->shape, idx);
        }
        break;
      }
      case 2: { /* permute */
        int32_t axes[DLB_MAX_NDIM + 1], seen[DLB_MAX_NDIM] = {0};
        for (int32_t i = 0; i < nd; i++) axes[i] = i;
        for (int32_t i = nd - 1; i > 0; i--) {
          int32_t j = (int32_t)fz_below(&in, (uint64_t)i + 1), tmp = axes[i];
          axes[i] = axes[j];
          axes[j] = tmp;
        }
        for (int32_t i = 0; i < nd; i++) {
          uint64_t r = fz_below(&in, 16);
          if (r == 0) axes[i] -= nd;
          else if (r == 1) axes[i] = (int32_t)fz_range(&in, -nd - 2, nd + 2);
        }
        st = dlb_tensor_permute(cur, nd > 0 ? axes : NULL, &v);
        int32_t norm[DLB_MAX_NDIM];
        for (int32_t i = 0; i < nd; i++) {
          norm[i] = axes[i] < 0 ? axes[i] + nd : axes[i];
          if (norm[i] < 0 || norm[i] >= nd || seen[norm[i]]++) want = DLB_E_INVAL;
        }
        if (want != DLB_OK) break;
        nm->ndim = nd;
        for (int32_t i = 0; i < nd; i++) nm->shape[i] = m->shape[norm[i]];
        nm->count = m->count;
        src = malloc(sizeof(int64_t) * (size_t)(nm->count + 1));
        int64_t idx[DLB_MAX_NDIM] = {0}, old[DLB_MAX_NDIM];
        for (int64_t k = 0; k < nm->count; k++) {
          for (int32_t i = 0; i < nd; i++) old[norm[i]] = idx[i];
          src[k] = flat(m, old);
          next_index(nd, nm->shape, idx);
        }
        break;
      }
      case 3: { /* reshape */
        int32_t rn = (int32_t)fz_range(&in, 0, 4);
        int64_t shape[4];
        int infer = -1, bad = 0;
        fz_wide prod = 1;
        for (int32_t i = 0; i < rn; i++) {
          uint64_t r = fz_below(&in, 10);
          shape[i] = r == 0 ? -1 : r == 1 ? fz_i64(&in) : fz_range(&in, 0, 6);
          if (shape[i] == -1) {
            if (infer >= 0) bad = 1;
            infer = i;
          } else if (shape[i] < 0) {
            bad = 1;
          } else {
            prod = fz_mul_capped(prod, shape[i]);
          }
        }
        st = dlb_tensor_reshape(cur, rn, shape, &v);
        if (bad) {
          want = DLB_E_LAYOUT;
          break;
        }
        nm->ndim = rn;
        for (int32_t i = 0; i < rn; i++) nm->shape[i] = shape[i];
        if (infer >= 0) {
          if (prod == 0 || prod > INT64_MAX || m->count % prod != 0) {
            /* Nothing (or nothing whole, or more than any tensor holds) to
             * infer: the library decides which refusal, the model only that
             * it is one. */
            FZ_ASSERT(st != DLB_OK && v == SENTINEL);
            want = st;
            break;
          }
          nm->shape[infer] = (int64_t)(m->count / prod);
          prod = m->count;
        }
        if (prod != m->count) {
          want = DLB_E_LAYOUT;
          break;
        }
        nm->count = m->count;
        if (nm->count == 0) {
          fz_wide c[FZ_ARRAY_MAX];
          fz_compact(rn, nm->shape, c);
          for (int32_t i = 0; i < rn; i++)
            if (c[i] > INT64_MAX) want = DLB_E_OVERFLOW;
          if (want != DLB_OK) break;
        }
        if (!describable(rn, nm->shape, m)) {
          want = DLB_E_NEEDS_COPY;
          break;
        }
        src = malloc(sizeof(int64_t) * (size_t)(nm->count + 1));
        for (int64_t k = 0; k < nm->count; k++) src[k] = k;
        break;
      }
      default: { /* expand */
        int32_t en = nd + (int32_t)fz_range(&in, 0, 2);
        int64_t shape[DLB_MAX_NDIM + 2];
        int bad = 0;
        for (int32_t i = 0; i < en; i++) {
          int32_t j = i - (en - nd);
          uint64_t r = fz_below(&in, 8);
          if (j >= 0 && r < 5)
            shape[i] = m->shape[j] == 1 && r >= 3 ? fz_range(&in, 0, 4) : m->shape[j];
          else
            shape[i] = r == 7 ? fz_i64(&in) : fz_range(&in, 0, 4);
          if (shape[i] < 0 || (j >= 0 && m->shape[j] != 1 && m->shape[j] != shape[i])) bad = 1;
        }
        st = dlb_tensor_expand(cur, en, shape, &v);
        if (bad) {
          want = DLB_E_LAYOUT;
          break;
        }
        fz_wide c = count_of(en, shape);
        if (c > INT64_MAX) {
          want = DLB_E_OVERFLOW;
          break;
        }
        if (c > FZ_ENUM_MAX) {
          /* Valid, too big to model: checked for success only. */
          FZ_ASSERT(st == DLB_OK);
          FZ_ASSERT(v->flags & DLPACK_FLAG_BITMASK_READ_ONLY);
          dlb_tensor_release(v);
          goto finish;
        }
        sets_read_only = 1;
        nm->ndim = en;
        memcpy(nm->shape, shape, sizeof(int64_t) * (size_t)en);
        nm->count = (int64_t)c;
        src = malloc(sizeof(int64_t) * (size_t)(nm->count + 1));
        int64_t idx[DLB_MAX_NDIM + 2] = {0}, old[DLB_MAX_NDIM];
        for (int64_t k = 0; k < nm->count; k++) {
          for (int32_t j = 0; j < nd; j++) old[j] = m->shape[j] == 1 ? 0 : idx[j + en - nd];
          src[k] = flat(m, old);
          next_index(en, nm->shape, idx);
        }
        break;
      }
    }
    if (st != want)
      fprintf(stderr, "op %d on ndim %d: got %s (%s), model says %s\n", kind, nd,
              dlb_status_name(st), dlb_last_error(), dlb_status_name(want));
    if (want != DLB_OK) {
      FZ_ASSERT(st == want);
      FZ_ASSERT(v == SENTINEL);
      FZ_ASSERT(dlb_last_error()[0] != '\0');
      free(src);
      continue;
    }
    FZ_ASSERT(st == DLB_OK);
    FZ_ASSERT(src != NULL);
    gather(nm, m, src);
    free(src);
    read_only |= sets_read_only;
    FZ_ASSERT(((v->flags & DLPACK_FLAG_BITMASK_READ_ONLY) != 0) == read_only);
    FZ_ASSERT((v->flags & DLPACK_FLAG_BITMASK_IS_COPIED) == 0);
    check_view(v, nm, item);
    model *tmp = m;
    m = nm;
    nm = tmp;
    held[nheld++] = v;
    cur = v;
    /* Sometimes the base goes before its views. */
    if (fz_below(&in, 2) == 0 && nheld > 1) {
      dlb_tensor_release(held[0]);
      memmove(held, held + 1, sizeof held[0] * (size_t)(nheld - 1));
      nheld--;
    }
  }
finish:
  FZ_ASSERT(released == 0);
  for (int i = 0; i < nheld; i++) {
    FZ_ASSERT(released == 0);
    dlb_tensor_release(held[i]);
  }
  FZ_ASSERT(released == 1);
done:
  fz_tensor_free(&f);
  return 0;
}
