/* test_view.c -- slice, select, permute, reshape and expand: geometry
 * against hand-computed strides and offsets, elements read through the
 * views, flags, rejection of bad arguments, and lifetimes. */
#include "test.h"

static const DLDataType I32 = {kDLInt, 32, 1};
static const DLDevice CPU = {kDLCPU, 0};
#define D DLB_SLICE_DEFAULT
#define UNTOUCHED ((DLManagedTensorVersioned *)(uintptr_t)0x5a5a)

/* A compact int32 tensor whose element at linear index k holds k. */
static DLManagedTensorVersioned *iota(int32_t ndim, const int64_t *shape) {
  DLManagedTensorVersioned *t = NULL;
  CHECK_OK(dlb_tensor_alloc(CPU, I32, ndim, shape, &t));
  int64_t n = 0;
  CHECK_OK(dlb_tensor_numel(&t->dl_tensor, &n));
  int32_t *p = t->dl_tensor.data;
  for (int64_t k = 0; k < n; k++) p[k] = (int32_t)k;
  return t;
}

/* The element at idx, found through data, byte_offset and strides. */
static int32_t at(const DLManagedTensorVersioned *t, const int64_t *idx) {
  const DLTensor *dl = &t->dl_tensor;
  int64_t off = 0;
  for (int32_t d = 0; d < dl->ndim; d++) {
    CHECK(idx[d] >= 0 && idx[d] < dl->shape[d]);
    off += idx[d] * dl->strides[d];
  }
  const char *first = (const char *)dl->data + dl->byte_offset;
  int32_t v;
  memcpy(&v, first + off * (int64_t)sizeof(int32_t), sizeof v);
  return v;
}

static int32_t at2(const DLManagedTensorVersioned *t, int64_t i, int64_t j) {
  int64_t idx[2] = {i, j};
  return at(t, idx);
}

static int32_t at3(const DLManagedTensorVersioned *t, int64_t i, int64_t j,
                   int64_t k) {
  int64_t idx[3] = {i, j, k};
  return at(t, idx);
}

/* Checks that v is a valid view of base with the given geometry. */
static void check_view(const DLManagedTensorVersioned *v,
                       const DLManagedTensorVersioned *base, int32_t ndim,
                       const int64_t *shape, const int64_t *strides,
                       uint64_t byte_offset) {
  CHECK(v != NULL && v != base);
  CHECK(dlb_tensor_is_ours(v));
  CHECK_OK(dlb_managed_validate(v));
  CHECK(v->dl_tensor.data == base->dl_tensor.data);
  CHECK_EQ_INT(v->dl_tensor.dtype.code, base->dl_tensor.dtype.code);
  CHECK_EQ_INT(v->dl_tensor.device.device_type,
               base->dl_tensor.device.device_type);
  CHECK_EQ_INT(v->dl_tensor.ndim, ndim);
  for (int32_t d = 0; d < ndim; d++) {
    CHECK_EQ_INT(v->dl_tensor.shape[d], shape[d]);
    CHECK_EQ_INT(v->dl_tensor.strides[d], strides[d]);
  }
  CHECK_EQ_INT(v->dl_tensor.byte_offset, byte_offset);
}

/* ---- slice ------------------------------------------------------------- */

DLB_TEST(view_slice_positive_steps) {
  int64_t shape[2] = {4, 5};
  DLManagedTensorVersioned *b = iota(2, shape), *v = NULL;
  dlb_slice s[2] = {{1, 4, 2}, {D, D, 2}};
  CHECK_OK(dlb_tensor_slice(b, 2, s, &v));
  int64_t vs[2] = {2, 3}, vst[2] = {10, 2};
  check_view(v, b, 2, vs, vst, 5 * 4);
  for (int64_t i = 0; i < 2; i++)
    for (int64_t j = 0; j < 3; j++)
      CHECK_EQ_INT(at2(v, i, j), (1 + 2 * i) * 5 + 2 * j);
  dlb_tensor_release(v);
  dlb_tensor_release(b);
}

DLB_TEST(view_slice_negative_steps) {
  int64_t shape[2] = {4, 5};
  DLManagedTensorVersioned *b = iota(2, shape), *v = NULL, *w = NULL;
  dlb_slice s[2] = {{D, D, -1}, {3, 0, -2}};
  CHECK_OK(dlb_tensor_slice(b, 2, s, &v));
  int64_t vs[2] = {4, 2}, vst[2] = {-5, -2};
  check_view(v, b, 2, vs, vst, (3 * 5 + 3) * 4);
  for (int64_t i = 0; i < 4; i++)
    for (int64_t j = 0; j < 2; j++)
      CHECK_EQ_INT(at2(v, i, j), (3 - i) * 5 + (3 - 2 * j));
  /* Reversing the reversed rows walks forward again. */
  dlb_slice r[1] = {{1, D, -1}};
  CHECK_OK(dlb_tensor_slice(v, 1, r, &w));
  int64_t ws[2] = {2, 2}, wst[2] = {5, -2};
  check_view(w, b, 2, ws, wst, (2 * 5 + 3) * 4);
  CHECK_EQ_INT(at2(w, 0, 0), 13);
  CHECK_EQ_INT(at2(w, 1, 1), 16);
  dlb_tensor_release(w);
  dlb_tensor_release(v);
  dlb_tensor_release(b);
}

DLB_TEST(view_slice_follows_python_clamping) {
  /* Expected first index and length from Python's range(10)[start:stop:step]. */
  static const struct {
    int64_t start, stop, step, first, len;
  } cases[] = {
      {D, D, 1, 0, 10},
      {D, D, -1, 9, 10},
      {-3, D, 1, 7, 3},
      {-100, 100, 1, 0, 10},
      {100, -100, -1, 9, 10},
      {2, 8, 3, 2, 2},
      {8, 2, -3, 8, 2},
      {5, 5, 1, 0, 0},
      {5, 2, 1, 0, 0},
      {-1, -11, -1, 9, 10},
      {-1, -10, -1, 9, 9},
      {D, D, INT64_MAX, 0, 1},
      {D, D, INT64_MIN, 9, 1},
      {3, D, -1, 3, 4},
      {D, 3, -1, 9, 6},
      {11, D, -1, 9, 10},
      {-20, D, -1, 0, 0},
      {0, 10, 20, 0, 1},
      {INT64_MIN + 1, INT64_MIN + 1, 1, 0, 0},
      {INT64_MAX, INT64_MAX, -1, 0, 0},
  };
  int64_t shape[1] = {10};
  DLManagedTensorVersioned *b = iota(1, shape);
  for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
    dlb_slice s = {cases[c].start, cases[c].stop, cases[c].step};
    DLManagedTensorVersioned *v = NULL;
    CHECK_OK(dlb_tensor_slice(b, 1, &s, &v));
    CHECK_OK(dlb_managed_validate(v));
    if (v->dl_tensor.shape[0] != cases[c].len)
      dlb_test_failed(__FILE__, __LINE__, "case %zu: length %lld, want %lld",
                      c, (long long)v->dl_tensor.shape[0],
                      (long long)cases[c].len);
    /* An empty view keeps the base's offset. */
    CHECK_EQ_INT(v->dl_tensor.byte_offset,
                 cases[c].len > 0 ? cases[c].first * 4 : 0);
    for (int64_t i = 0; i < cases[c].len; i++) {
      int64_t want = cases[c].first + i * cases[c].step;
      CHECK_EQ_INT(at(v, &i), want);
    }
    dlb_tensor_release(v);
  }
  dlb_tensor_release(b);
}

DLB_TEST(view_slice_step_too_large_for_stride) {
  int64_t shape[2] = {3, 4};
  DLManagedTensorVersioned *b = iota(2, shape), *v = NULL;
  /* step * stride overflows; the single element selected still reads. */
  dlb_slice s[1] = {{D, D, INT64_MIN}};
  CHECK_OK(dlb_tensor_slice(b, 1, s, &v));
  int64_t vs[2] = {1, 4}, vst[2] = {4, 1};
  check_view(v, b, 2, vs, vst, 2 * 4 * 4);
  CHECK_EQ_INT(at2(v, 0, 3), 11);
  dlb_tensor_release(v);
  dlb_tensor_release(b);
}

DLB_TEST(view_slice_empty_keeps_offset) {
  int64_t shape[2] = {4, 5};
  DLManagedTensorVersioned *b = iota(2, shape), *v = NULL, *e = NULL;
  dlb_slice s[1] = {{1, D, 1}};
  CHECK_OK(dlb_tensor_slice(b, 1, s, &v));
  CHECK_EQ_INT(v->dl_tensor.byte_offset, 20);
  dlb_slice none[2] = {{D, D, 1}, {4, 1, 1}};
  CHECK_OK(dlb_tensor_slice(v, 2, none, &e));
  int64_t es[2] = {3, 0}, est[2] = {5, 1};
  check_view(e, b, 2, es, est, 20);
  dlb_tensor_release(e);
  dlb_tensor_release(v);
  dlb_tensor_release(b);
}

DLB_TEST(view_slice_fewer_slices_than_dimensions) {
  int64_t shape[3] = {2, 3, 4};
  DLManagedTensorVersioned *b = iota(3, shape), *v = NULL, *w = NULL;
  dlb_slice s[1] = {{-1, D, 1}};
  CHECK_OK(dlb_tensor_slice(b, 1, s, &v));
  int64_t vs[3] = {1, 3, 4}, vst[3] = {12, 4, 1};
  check_view(v, b, 3, vs, vst, 12 * 4);
  CHECK_EQ_INT(at3(v, 0, 2, 3), 23);
  /* No slices at all: the same geometry. */
  CHECK_OK(dlb_tensor_slice(b, 0, NULL, &w));
  int64_t bst[3] = {12, 4, 1};
  check_view(w, b, 3, shape, bst, 0);
  dlb_tensor_release(w);
  dlb_tensor_release(v);
  dlb_tensor_release(b);
}

DLB_TEST(view_slice_of_foreign_negative_strides) {
  /* A producer's data pointer is its last element and strides run down. */
  static int32_t buf[10];
  for (int i = 0; i < 10; i++) buf[i] = i;
  int64_t shape[1] = {10}, strides[1] = {-1};
  DLTensor desc = {&buf[9], CPU, 1, I32, shape, strides, 0};
  DLManagedTensorVersioned *b = NULL, *v = NULL, *w = NULL;
  CHECK_OK(dlb_tensor_wrap(&desc, 0, NULL, NULL, &b));
  dlb_slice head = {D, 5, 1};
  CHECK_OK(dlb_tensor_slice(b, 1, &head, &v));
  int64_t vs[1] = {5};
  check_view(v, b, 1, vs, strides, 0);
  dlb_tensor_release(v);
  /* The first element lies below data: byte_offset is unsigned, so data
   * itself moves down to it. */
  dlb_slice tail = {3, D, 1};
  CHECK_OK(dlb_tensor_slice(b, 1, &tail, &v));
  CHECK(v->dl_tensor.data == &buf[6]);
  CHECK_EQ_INT(v->dl_tensor.byte_offset, 0);
  CHECK_EQ_INT(v->dl_tensor.shape[0], 7);
  CHECK_OK(dlb_managed_validate(v));
  int64_t i = 0;
  CHECK_EQ_INT(at(v, &i), 6);
  i = 6;
  CHECK_EQ_INT(at(v, &i), 0);
  dlb_tensor_release(v);
  dlb_tensor_release(b);

  /* With room in byte_offset, data stays what the producer gave. */
  desc.data = &buf[7];
  desc.byte_offset = 8;
  shape[0] = 8;
  CHECK_OK(dlb_tensor_wrap(&desc, 0, NULL, NULL, &b));
  dlb_slice one = {1, D, 1};
  CHECK_OK(dlb_tensor_slice(b, 1, &one, &w));
  CHECK(w->dl_tensor.data == &buf[7]);
  CHECK_EQ_INT(w->dl_tensor.byte_offset, 4);
  i = 0;
  CHECK_EQ_INT(at(w, &i), 8);
  dlb_tensor_release(w);
  dlb_tensor_release(b);
}

DLB_TEST(view_slice_rejects_invalid) {
  int64_t shape[2] = {4, 5};
  DLManagedTensorVersioned *b = iota(2, shape), *v = UNTOUCHED;
  dlb_slice s[3] = {{D, D, 1}, {0, 2, 0}, {D, D, 1}};
  CHECK_STATUS(dlb_tensor_slice(b, 2, s, &v), DLB_E_INVAL);
  CHECK_ERROR_MENTIONS("slices[1].step is 0");
  CHECK_STATUS(dlb_tensor_slice(b, 3, s, &v), DLB_E_INVAL);
  CHECK_ERROR_MENTIONS("nslices is 3");
  CHECK_STATUS(dlb_tensor_slice(b, -1, s, &v), DLB_E_INVAL);
  CHECK_STATUS(dlb_tensor_slice(b, 1, NULL, &v), DLB_E_INVAL);
  CHECK_ERROR_MENTIONS("slices is NULL");
  CHECK_STATUS(dlb_tensor_slice(b, 1, s, NULL), DLB_E_INVAL);
  CHECK_STATUS(dlb_tensor_slice(NULL, 1, s, &v), DLB_E_INVAL);
  CHECK_ERROR_MENTIONS("base is NULL");
  /* A foreign tensor must be adopted first. */
  DLManagedTensorVersioned foreign = *b;
  foreign.deleter = NULL;
  CHECK_STATUS(dlb_tensor_slice(&foreign, 1, s, &v), DLB_E_INVAL);
  CHECK_ERROR_MENTIONS("adopt");
  CHECK(v == UNTOUCHED);
  dlb_tensor_release(b);
}

/* Refuses a view of packed units, with DLB_E_UNSUPPORTED and a message
 * mentioning what. */
#define CHECK_PACKED_REFUSED(call, what)         \
  do {                                           \
    DLManagedTensorVersioned *r_ = UNTOUCHED;    \
    CHECK_STATUS(call(&r_), DLB_E_UNSUPPORTED);  \
    CHECK_ERROR_MENTIONS(what);                  \
    CHECK(r_ == UNTOUCHED);                      \
  } while (0)

static DLManagedTensorVersioned *packed_of(void *buf, int32_t ndim,
                                           int64_t *shape, uint8_t bits) {
  DLTensor desc = {buf, CPU, ndim, {kDLInt, bits, 1}, shape, NULL, 0};
  DLManagedTensorVersioned *t = NULL;
  CHECK_OK(dlb_tensor_wrap(&desc, 0, NULL, NULL, &t));
  return t;
}

DLB_TEST(view_of_packed_subbyte_units_is_compact_from_a_byte) {
  static uint8_t buf[8];
  int64_t eight[1] = {8}, four4[2] = {4, 4}, three3[2] = {3, 3};
  DLManagedTensorVersioned *row = packed_of(buf, 1, eight, 4);
  DLManagedTensorVersioned *sq = packed_of(buf, 2, four4, 4);
  DLManagedTensorVersioned *odd = packed_of(buf, 2, three3, 4);
  DLManagedTensorVersioned *v = NULL;
  int64_t one[1] = {1}, four[1] = {4}, three[1] = {3}, compact44[2] = {4, 1};
  /* Slices that start on a byte and stay compact are views. */
  dlb_slice from2 = {2, D, 1}, from1 = {1, D, 1}, every2 = {0, D, 2};
  dlb_slice none = {8, D, 1};
  CHECK_OK(dlb_tensor_slice(row, 1, &from2, &v));
  int64_t six[1] = {6};
  check_view(v, row, 1, six, one, 1);
  CHECK_EQ_INT(v->flags, 0);
  dlb_tensor_release(v);
#define SLICE_FROM1(out) dlb_tensor_slice(row, 1, &from1, out)
#define SLICE_EVERY2(out) dlb_tensor_slice(row, 1, &every2, out)
  CHECK_PACKED_REFUSED(SLICE_FROM1, "start on a byte");
  CHECK_PACKED_REFUSED(SLICE_EVERY2, "compact");
  /* With no element, the view keeps the base's start. */
  CHECK_OK(dlb_tensor_slice(row, 1, &none, &v));
  CHECK_EQ_INT(v->dl_tensor.shape[0], 0);
  CHECK_EQ_INT(v->dl_tensor.byte_offset, 0);
  dlb_tensor_release(v);
  /* Rows of 4 units start on a byte; columns are not compact; rows of 3
   * units start on a byte every second row. */
  CHECK_OK(dlb_tensor_select(sq, 0, 1, &v));
  check_view(v, sq, 1, four, one, 2);
  dlb_tensor_release(v);
#define SELECT_COLUMN(out) dlb_tensor_select(sq, 1, 0, out)
#define SELECT_ODD_ROW(out) dlb_tensor_select(odd, 0, 1, out)
  CHECK_PACKED_REFUSED(SELECT_COLUMN, "compact");
  CHECK_PACKED_REFUSED(SELECT_ODD_ROW, "bit 4");
  CHECK_OK(dlb_tensor_select(odd, 0, -1, &v));
  check_view(v, odd, 1, three, one, 3);
  dlb_tensor_release(v);
  /* A transpose is not compact; reshapes of a packed base always are. */
  int32_t swap[2] = {1, 0}, same[2] = {0, 1};
#define TRANSPOSE(out) dlb_tensor_permute(sq, swap, out)
  CHECK_PACKED_REFUSED(TRANSPOSE, "compact");
  CHECK_OK(dlb_tensor_permute(sq, same, &v));
  check_view(v, sq, 2, four4, compact44, 0);
  dlb_tensor_release(v);
  int64_t two8[2] = {2, 8}, one8[2] = {1, 8}, to24[2] = {2, 4};
  CHECK_OK(dlb_tensor_reshape(row, 2, to24, &v));
  check_view(v, row, 2, to24, compact44, 0);
  dlb_tensor_release(v);
  /* Broadcasting repeats units: not compact. A new leading 1 is. */
#define BROADCAST(out) dlb_tensor_expand(row, 2, two8, out)
  CHECK_PACKED_REFUSED(BROADCAST, "compact");
  CHECK_OK(dlb_tensor_expand(row, 2, one8, &v));
  int64_t st18[2] = {8, 1};
  check_view(v, row, 2, one8, st18, 0);
  CHECK_EQ_INT(v->flags, DLPACK_FLAG_BITMASK_READ_ONLY);
  dlb_tensor_release(v);
#undef SLICE_FROM1
#undef SLICE_EVERY2
#undef SELECT_COLUMN
#undef SELECT_ODD_ROW
#undef TRANSPOSE
#undef BROADCAST
  dlb_tensor_release(row);
  dlb_tensor_release(sq);
  dlb_tensor_release(odd);
}

DLB_TEST(view_of_packed_units_written_keeps_its_neighbours) {
  /* Two rows of three 4-bit units: row 0 ends in the low half of byte 1,
   * whose high half is row 1's first unit. Writing row 0 through its view
   * leaves that half alone; row 1 starts inside a byte and has no view. */
  static uint8_t buf[3];
  memset(buf, 0xff, sizeof buf);
  int64_t shape[2] = {2, 3}, three[1] = {3};
  DLManagedTensorVersioned *base = packed_of(buf, 2, shape, 4), *v = NULL;
  CHECK_OK(dlb_tensor_select(base, 0, 0, &v));
  static uint8_t zeros[2];
  DLTensor src = {zeros, CPU, 1, {kDLInt, 4, 1}, three, NULL, 0};
  CHECK_OK(dlb_copy(&src, &v->dl_tensor));
  CHECK_EQ_INT(buf[0], 0x00);
  CHECK_EQ_INT(buf[1], 0xf0);
  CHECK_EQ_INT(buf[2], 0xff);
  dlb_tensor_release(v);
  v = UNTOUCHED;
  CHECK_STATUS(dlb_tensor_select(base, 0, 1, &v), DLB_E_UNSUPPORTED);
  CHECK(v == UNTOUCHED);
  /* 2-bit units: a row of 4 is a byte. */
  static uint8_t two[2] = {0x1b, 0xe4};
  int64_t rows[2] = {2, 4};
  DLManagedTensorVersioned *b2 = packed_of(two, 2, rows, 2);
  CHECK_OK(dlb_tensor_select(b2, 0, 1, &v));
  CHECK_EQ_INT(v->dl_tensor.byte_offset, 1);
  CHECK_EQ_INT(v->dl_tensor.dtype.bits, 2);
  dlb_tensor_release(v);
  dlb_tensor_release(b2);
  dlb_tensor_release(base);
}

/* Whether a view of packed units starts on a byte depends on the bit its
 * first unit starts at, at any distance into the base: 4-bit unit 9 is the
 * high half of byte 4, unit 10 is byte 5. */
DLB_TEST(view_of_packed_units_starts_on_a_byte_past_the_first_eight) {
  static uint8_t buf[8];
  int64_t sixteen[1] = {16};
  DLManagedTensorVersioned *row = packed_of(buf, 1, sixteen, 4), *v = NULL;
  dlb_slice from9 = {9, D, 1}, from10 = {10, D, 1};
#define SLICE_FROM9(out) dlb_tensor_slice(row, 1, &from9, out)
  CHECK_PACKED_REFUSED(SLICE_FROM9, "first unit (9) starts at bit 4");
#undef SLICE_FROM9
  CHECK_OK(dlb_tensor_slice(row, 1, &from10, &v));
  int64_t six[1] = {6}, one[1] = {1};
  check_view(v, row, 1, six, one, 5);
  dlb_tensor_release(v);
  dlb_tensor_release(row);
}

DLB_TEST(view_of_padded_subbyte_units_slices_like_bytes) {
  static uint8_t buf[8];
  int64_t shape[1] = {8};
  DLTensor desc = {buf, CPU, 1, {kDLInt, 4, 1}, shape, NULL, 0};
  DLManagedTensorVersioned *padded = NULL, *v = NULL;
  dlb_slice s = {1, D, 2};
  /* Padded elements take a byte each and slice like int8. */
  CHECK_OK(dlb_tensor_wrap(&desc, DLPACK_FLAG_BITMASK_IS_SUBBYTE_TYPE_PADDED,
                           NULL, NULL, &padded));
  CHECK_OK(dlb_tensor_slice(padded, 1, &s, &v));
  int64_t vs[1] = {4}, vst[1] = {2};
  check_view(v, padded, 1, vs, vst, 1);
  CHECK_EQ_INT(v->flags, DLPACK_FLAG_BITMASK_IS_SUBBYTE_TYPE_PADDED);
  dlb_tensor_release(v);
  dlb_tensor_release(padded);
}

/* ---- select ------------------------------------------------------------ */

DLB_TEST(view_select_drops_the_dimension) {
  int64_t shape[3] = {2, 3, 4};
  DLManagedTensorVersioned *b = iota(3, shape), *v = NULL, *w = NULL,
                           *s = NULL;
  CHECK_OK(dlb_tensor_select(b, 1, -1, &v));
  int64_t vs[2] = {2, 4}, vst[2] = {12, 1};
  check_view(v, b, 2, vs, vst, 2 * 4 * 4);
  for (int64_t i = 0; i < 2; i++)
    for (int64_t k = 0; k < 4; k++)
      CHECK_EQ_INT(at2(v, i, k), i * 12 + 8 + k);
  CHECK_OK(dlb_tensor_select(b, -1, 3, &w));
  int64_t ws[2] = {2, 3}, wst[2] = {12, 4};
  check_view(w, b, 2, ws, wst, 3 * 4);
  CHECK_EQ_INT(at2(w, 1, 2), 12 + 8 + 3);
  /* Down to a scalar. */
  DLManagedTensorVersioned *row = NULL;
  CHECK_OK(dlb_tensor_select(v, 0, 1, &row));
  CHECK_OK(dlb_tensor_select(row, 0, 2, &s));
  check_view(s, b, 0, NULL, NULL, (12 + 8 + 2) * 4);
  CHECK_EQ_INT(at(s, NULL), 22);
  dlb_tensor_release(s);
  dlb_tensor_release(row);
  dlb_tensor_release(w);
  dlb_tensor_release(v);
  dlb_tensor_release(b);
}

DLB_TEST(view_select_of_empty_keeps_offset) {
  int64_t shape[2] = {0, 3};
  DLManagedTensorVersioned *b = iota(2, shape), *v = NULL;
  CHECK_OK(dlb_tensor_select(b, 1, 2, &v));
  int64_t vs[1] = {0}, vst[1] = {3};
  check_view(v, b, 1, vs, vst, 0);
  dlb_tensor_release(v);
  dlb_tensor_release(b);
}

DLB_TEST(view_select_rejects_out_of_range) {
  int64_t shape[2] = {3, 0};
  DLManagedTensorVersioned *b = iota(2, shape), *v = UNTOUCHED;
  CHECK_STATUS(dlb_tensor_select(b, 2, 0, &v), DLB_E_RANGE);
  CHECK_ERROR_MENTIONS("dim is 2");
  CHECK_STATUS(dlb_tensor_select(b, -3, 0, &v), DLB_E_RANGE);
  CHECK_STATUS(dlb_tensor_select(b, 0, 3, &v), DLB_E_RANGE);
  CHECK_ERROR_MENTIONS("index is 3");
  CHECK_STATUS(dlb_tensor_select(b, 0, -4, &v), DLB_E_RANGE);
  CHECK_STATUS(dlb_tensor_select(b, 0, INT64_MIN, &v), DLB_E_RANGE);
  CHECK_STATUS(dlb_tensor_select(b, 1, 0, &v), DLB_E_RANGE);
  CHECK_ERROR_MENTIONS("extent 0");
  CHECK_STATUS(dlb_tensor_select(b, 0, 0, NULL), DLB_E_INVAL);
  CHECK(v == UNTOUCHED);
  DLManagedTensorVersioned *s = iota(0, NULL);
  CHECK_STATUS(dlb_tensor_select(s, 0, 0, &v), DLB_E_RANGE);
  dlb_tensor_release(s);
  dlb_tensor_release(b);
}

/* ---- permute ----------------------------------------------------------- */

DLB_TEST(view_permute_reorders_dimensions) {
  int64_t shape[3] = {2, 3, 4};
  DLManagedTensorVersioned *b = iota(3, shape), *v = NULL, *w = NULL;
  int32_t axes[3] = {2, 0, 1}, neg[3] = {-1, -3, -2};
  CHECK_OK(dlb_tensor_permute(b, axes, &v));
  int64_t vs[3] = {4, 2, 3}, vst[3] = {1, 12, 4};
  check_view(v, b, 3, vs, vst, 0);
  for (int64_t k = 0; k < 4; k++)
    for (int64_t i = 0; i < 2; i++)
      for (int64_t j = 0; j < 3; j++)
        CHECK_EQ_INT(at3(v, k, i, j), i * 12 + j * 4 + k);
  CHECK_OK(dlb_tensor_permute(b, neg, &w));
  check_view(w, b, 3, vs, vst, 0);
  dlb_tensor_release(w);
  dlb_tensor_release(v);
  /* A scalar has nothing to reorder. */
  DLManagedTensorVersioned *s = iota(0, NULL);
  CHECK_OK(dlb_tensor_permute(s, NULL, &v));
  check_view(v, s, 0, NULL, NULL, 0);
  dlb_tensor_release(v);
  dlb_tensor_release(s);
  dlb_tensor_release(b);
}

DLB_TEST(view_permute_rejects_bad_axes) {
  int64_t shape[3] = {2, 3, 4};
  DLManagedTensorVersioned *b = iota(3, shape), *v = UNTOUCHED;
  int32_t twice[3] = {0, 2, -3}, far[3] = {0, 1, 3}, low[3] = {0, 1, -4};
  CHECK_STATUS(dlb_tensor_permute(b, twice, &v), DLB_E_INVAL);
  CHECK_ERROR_MENTIONS("axes[2] is -3");
  CHECK_STATUS(dlb_tensor_permute(b, far, &v), DLB_E_INVAL);
  CHECK_ERROR_MENTIONS("axes[2] is 3");
  CHECK_STATUS(dlb_tensor_permute(b, low, &v), DLB_E_INVAL);
  CHECK_STATUS(dlb_tensor_permute(b, NULL, &v), DLB_E_INVAL);
  CHECK_ERROR_MENTIONS("axes is NULL");
  CHECK(v == UNTOUCHED);
  dlb_tensor_release(b);
}

/* ---- reshape ----------------------------------------------------------- */

DLB_TEST(view_reshape_contiguous) {
  int64_t shape[3] = {2, 3, 4};
  DLManagedTensorVersioned *b = iota(3, shape), *v = NULL;
  int64_t s1[2] = {4, -1};
  CHECK_OK(dlb_tensor_reshape(b, 2, s1, &v));
  int64_t vs[2] = {4, 6}, vst[2] = {6, 1};
  check_view(v, b, 2, vs, vst, 0);
  CHECK_EQ_INT(at2(v, 3, 5), 23);
  dlb_tensor_release(v);
  int64_t s2[4] = {2, 1, 12, 1};
  CHECK_OK(dlb_tensor_reshape(b, 4, s2, &v));
  int64_t v2st[4] = {12, 12, 1, 1};
  check_view(v, b, 4, s2, v2st, 0);
  CHECK(dlb_tensor_is_c_contiguous(&v->dl_tensor));
  dlb_tensor_release(v);
  int64_t s3[1] = {-1};
  CHECK_OK(dlb_tensor_reshape(b, 1, s3, &v));
  int64_t v3[1] = {24}, v3st[1] = {1};
  check_view(v, b, 1, v3, v3st, 0);
  dlb_tensor_release(v);
  dlb_tensor_release(b);
}

DLB_TEST(view_reshape_transposed_where_strides_allow) {
  int64_t shape[2] = {4, 6};
  DLManagedTensorVersioned *b = iota(2, shape), *t = NULL, *v = NULL;
  int32_t axes[2] = {1, 0};
  CHECK_OK(dlb_tensor_permute(b, axes, &t));
  /* Splitting the first dimension of the transpose needs no copy. */
  int64_t s1[3] = {2, 3, 4};
  CHECK_OK(dlb_tensor_reshape(t, 3, s1, &v));
  int64_t vst[3] = {3, 1, 6};
  check_view(v, b, 3, s1, vst, 0);
  for (int64_t i = 0; i < 2; i++)
    for (int64_t j = 0; j < 3; j++)
      for (int64_t k = 0; k < 4; k++)
        CHECK_EQ_INT(at3(v, i, j, k), k * 6 + i * 3 + j);
  dlb_tensor_release(v);
  /* Flattening it would need a copy. */
  int64_t flat[1] = {24};
  v = UNTOUCHED;
  CHECK_STATUS(dlb_tensor_reshape(t, 1, flat, &v), DLB_E_NEEDS_COPY);
  CHECK_ERROR_MENTIONS("dimension 0");
  CHECK(v == UNTOUCHED);
  dlb_tensor_release(t);
  dlb_tensor_release(b);
}

DLB_TEST(view_reshape_strided_slice) {
  int64_t shape[2] = {4, 6};
  DLManagedTensorVersioned *b = iota(2, shape), *s = NULL, *v = NULL;
  dlb_slice sl[2] = {{D, D, 1}, {1, D, 2}};
  CHECK_OK(dlb_tensor_slice(b, 2, sl, &s));
  int64_t to[3] = {2, 2, 3};
  CHECK_OK(dlb_tensor_reshape(s, 3, to, &v));
  int64_t vst[3] = {12, 6, 2};
  check_view(v, b, 3, to, vst, 4);
  for (int64_t a = 0; a < 2; a++)
    for (int64_t c = 0; c < 2; c++)
      for (int64_t e = 0; e < 3; e++)
        CHECK_EQ_INT(at3(v, a, c, e), (a * 2 + c) * 6 + 1 + 2 * e);
  dlb_tensor_release(v);
  /* Every second column of rows of 6 is one stride-2 run: it flattens. */
  int64_t flat[1] = {12}, fst[1] = {2};
  CHECK_OK(dlb_tensor_reshape(s, 1, flat, &v));
  check_view(v, b, 1, flat, fst, 4);
  CHECK_EQ_INT(at(v, (int64_t[]){11}), 23);
  dlb_tensor_release(v);
  /* Two of three would leave gaps between rows. */
  DLManagedTensorVersioned *gaps = NULL;
  dlb_slice two[2] = {{D, D, 1}, {1, 5, 2}};
  CHECK_OK(dlb_tensor_slice(b, 2, two, &gaps));
  v = UNTOUCHED;
  CHECK_STATUS(dlb_tensor_reshape(gaps, 1, (int64_t[]){8}, &v),
               DLB_E_NEEDS_COPY);
  CHECK(v == UNTOUCHED);
  dlb_tensor_release(gaps);
  /* Merging the column dimension into itself is fine once rows are 1. */
  dlb_slice one[1] = {{2, 3, 1}};
  DLManagedTensorVersioned *row = NULL;
  CHECK_OK(dlb_tensor_slice(s, 1, one, &row));
  CHECK_OK(dlb_tensor_reshape(row, 1, (int64_t[]){3}, &v));
  int64_t rs[1] = {3}, rst[1] = {2};
  check_view(v, b, 1, rs, rst, (2 * 6 + 1) * 4);
  dlb_tensor_release(v);
  dlb_tensor_release(row);
  dlb_tensor_release(s);
  dlb_tensor_release(b);
}

DLB_TEST(view_reshape_unit_dimension_with_huge_stride) {
  /* Two int8 elements 2^62 bytes apart (never read): the natural stride of
   * a leading extent-1 dimension, 2^63, does not fit, and as it is never
   * used the next dimension's stride stands in. */
  static int8_t byte;
  int64_t shape[1] = {2}, strides[1] = {INT64_C(1) << 62};
  DLTensor desc = {&byte, CPU, 1, {kDLInt, 8, 1}, shape, strides, 0};
  DLManagedTensorVersioned *b = NULL, *v = NULL;
  CHECK_OK(dlb_tensor_wrap(&desc, 0, NULL, NULL, &b));
  int64_t to[2] = {1, 2}, vst[2] = {INT64_C(1) << 62, INT64_C(1) << 62};
  CHECK_OK(dlb_tensor_reshape(b, 2, to, &v));
  check_view(v, b, 2, to, vst, 0);
  dlb_tensor_release(v);
  dlb_tensor_release(b);
}

DLB_TEST(view_reshape_empty_and_scalar) {
  int64_t shape[2] = {0, 3};
  DLManagedTensorVersioned *b = iota(2, shape), *v = NULL;
  int64_t to[3] = {3, 0, 2};
  CHECK_OK(dlb_tensor_reshape(b, 3, to, &v));
  int64_t vst[3] = {2, 2, 1};
  check_view(v, b, 3, to, vst, 0);
  dlb_tensor_release(v);
  int64_t inf[2] = {-1, 3};
  CHECK_OK(dlb_tensor_reshape(b, 2, inf, &v));
  int64_t vs[2] = {0, 3}, vst2[2] = {3, 1};
  check_view(v, b, 2, vs, vst2, 0);
  dlb_tensor_release(v);
  int64_t zero_inf[2] = {0, -1};
  CHECK_STATUS(dlb_tensor_reshape(b, 2, zero_inf, &v), DLB_E_LAYOUT);
  CHECK_ERROR_MENTIONS("multiply to 0");
  /* An empty shape whose compact strides do not fit. */
  int64_t wide[3] = {0, INT64_C(1) << 40, INT64_C(1) << 40};
  CHECK_STATUS(dlb_tensor_reshape(b, 3, wide, &v), DLB_E_OVERFLOW);
  dlb_tensor_release(b);

  DLManagedTensorVersioned *s = iota(0, NULL), *w = NULL;
  int64_t ones[2] = {1, 1};
  CHECK_OK(dlb_tensor_reshape(s, 2, ones, &v));
  check_view(v, s, 2, ones, ones, 0);
  CHECK_OK(dlb_tensor_reshape(v, 0, NULL, &w));
  check_view(w, s, 0, NULL, NULL, 0);
  dlb_tensor_release(w);
  dlb_tensor_release(v);
  dlb_tensor_release(s);
}

DLB_TEST(view_reshape_rejects_bad_shapes) {
  int64_t shape[2] = {4, 6};
  DLManagedTensorVersioned *b = iota(2, shape), *v = UNTOUCHED;
  int64_t other[2] = {5, 5}, two[2] = {-1, -1}, ndiv[2] = {5, -1},
          neg[2] = {-2, -12}, huge[2] = {INT64_MAX, 2}, hugeinf[3] = {
                                                             INT64_MAX, 2, -1};
  CHECK_STATUS(dlb_tensor_reshape(b, 2, other, &v), DLB_E_LAYOUT);
  CHECK_ERROR_MENTIONS("shape has 25 elements; base has 24");
  CHECK_STATUS(dlb_tensor_reshape(b, 2, two, &v), DLB_E_LAYOUT);
  CHECK_ERROR_MENTIONS("both -1");
  CHECK_STATUS(dlb_tensor_reshape(b, 2, ndiv, &v), DLB_E_LAYOUT);
  CHECK_ERROR_MENTIONS("shape[1] is -1");
  CHECK_STATUS(dlb_tensor_reshape(b, 2, neg, &v), DLB_E_LAYOUT);
  CHECK_ERROR_MENTIONS("shape[0] is -2");
  CHECK_STATUS(dlb_tensor_reshape(b, 2, huge, &v), DLB_E_LAYOUT);
  CHECK_ERROR_MENTIONS("more than");
  CHECK_STATUS(dlb_tensor_reshape(b, 3, hugeinf, &v), DLB_E_LAYOUT);
  CHECK_STATUS(dlb_tensor_reshape(b, DLB_MAX_NDIM + 1, other, &v),
               DLB_E_LAYOUT);
  CHECK_ERROR_MENTIONS("ndim is 65");
  CHECK_STATUS(dlb_tensor_reshape(b, -1, other, &v), DLB_E_LAYOUT);
  CHECK_STATUS(dlb_tensor_reshape(b, 2, NULL, &v), DLB_E_INVAL);
  CHECK_ERROR_MENTIONS("shape is NULL");
  CHECK_STATUS(dlb_tensor_reshape(b, 1, NULL, &v), DLB_E_INVAL);
  CHECK_ERROR_MENTIONS("shape is NULL with ndim 1");
  CHECK_STATUS(dlb_tensor_reshape(NULL, 2, ndiv, &v), DLB_E_INVAL);
  CHECK_ERROR_MENTIONS("base is NULL");
  CHECK_STATUS(dlb_tensor_reshape(b, 2, shape, NULL), DLB_E_INVAL);
  CHECK_STATUS(dlb_tensor_reshape(b, 0, NULL, &v), DLB_E_LAYOUT);
  CHECK(v == UNTOUCHED);
  dlb_tensor_release(b);
}

/* A new shape may have DLB_MAX_NDIM dimensions (one more is refused
 * above), and a view of them reshapes back. */
DLB_TEST(view_reshape_to_the_most_dimensions) {
  int64_t shape[2] = {2, 3};
  DLManagedTensorVersioned *b = iota(2, shape), *v = NULL, *w = NULL;
  int64_t to[DLB_MAX_NDIM], st[DLB_MAX_NDIM], idx[DLB_MAX_NDIM];
  for (int32_t d = 0; d < DLB_MAX_NDIM; d++) {
    to[d] = 1;
    st[d] = 6;
    idx[d] = 0;
  }
  to[DLB_MAX_NDIM - 2] = 2;
  to[DLB_MAX_NDIM - 1] = 3;
  st[DLB_MAX_NDIM - 2] = 3;
  st[DLB_MAX_NDIM - 1] = 1;
  CHECK_OK(dlb_tensor_reshape(b, DLB_MAX_NDIM, to, &v));
  check_view(v, b, DLB_MAX_NDIM, to, st, 0);
  idx[DLB_MAX_NDIM - 2] = 1;
  idx[DLB_MAX_NDIM - 1] = 2;
  CHECK_EQ_INT(at(v, idx), 5);
  CHECK_OK(dlb_tensor_reshape(v, 2, shape, &w));
  int64_t wst[2] = {3, 1};
  check_view(w, b, 2, shape, wst, 0);
  dlb_tensor_release(w);
  dlb_tensor_release(v);
  dlb_tensor_release(b);
}

/* A reshape that needs a copy names the base dimension that does not merge
 * with the next one, and its stride. */
DLB_TEST(view_reshape_needing_a_copy_names_the_dimension) {
  int64_t shape[3] = {2, 3, 4};
  DLManagedTensorVersioned *b = iota(3, shape), *s = NULL, *v = UNTOUCHED;
  dlb_slice half[3] = {{D, D, 1}, {D, D, 1}, {0, 2, 1}};
  CHECK_OK(dlb_tensor_slice(b, 3, half, &s));
  int64_t to[2] = {2, 6};
  CHECK_STATUS(dlb_tensor_reshape(s, 2, to, &v), DLB_E_NEEDS_COPY);
  CHECK_ERROR_MENTIONS("base dimension 1 (stride 4)");
  CHECK(v == UNTOUCHED);
  dlb_tensor_release(s);
  dlb_tensor_release(b);
}

/* ---- expand ------------------------------------------------------------ */

DLB_TEST(view_expand_broadcasts_with_zero_strides) {
  int64_t shape[2] = {3, 1};
  DLManagedTensorVersioned *b = iota(2, shape), *v = NULL, *e = NULL;
  int64_t to[3] = {2, 3, 4};
  CHECK_OK(dlb_tensor_expand(b, 3, to, &v));
  int64_t vst[3] = {0, 1, 0};
  check_view(v, b, 3, to, vst, 0);
  CHECK_EQ_INT(v->flags, DLPACK_FLAG_BITMASK_READ_ONLY);
  CHECK_EQ_INT(b->flags, 0);
  for (int64_t a = 0; a < 2; a++)
    for (int64_t i = 0; i < 3; i++)
      for (int64_t k = 0; k < 4; k++) CHECK_EQ_INT(at3(v, a, i, k), i);
  /* Extent 1 broadcasts to 0 too. */
  int64_t empty[2] = {3, 0};
  CHECK_OK(dlb_tensor_expand(b, 2, empty, &e));
  int64_t est[2] = {1, 0};
  check_view(e, b, 2, empty, est, 0);
  dlb_tensor_release(e);
  dlb_tensor_release(v);
  dlb_tensor_release(b);
}

/* A 0-dimensional base expands to 0 dimensions (shape may be NULL then)
 * and to any shape, every stride 0. */
DLB_TEST(view_expand_scalar) {
  DLManagedTensorVersioned *b = iota(0, NULL), *v = NULL, *w = NULL;
  *(int32_t *)b->dl_tensor.data = 7;
  CHECK_OK(dlb_tensor_expand(b, 0, NULL, &v));
  check_view(v, b, 0, NULL, NULL, 0);
  CHECK_EQ_INT(v->flags, DLPACK_FLAG_BITMASK_READ_ONLY);
  CHECK_EQ_INT(*(const int32_t *)v->dl_tensor.data, 7);
  int64_t to[2] = {2, 3}, zeros[2] = {0, 0};
  CHECK_OK(dlb_tensor_expand(b, 2, to, &w));
  check_view(w, b, 2, to, zeros, 0);
  for (int64_t i = 0; i < 2; i++)
    for (int64_t j = 0; j < 3; j++) CHECK_EQ_INT(at2(w, i, j), 7);
  dlb_tensor_release(w);
  dlb_tensor_release(v);
  dlb_tensor_release(b);
}

DLB_TEST(view_expand_rejects_incompatible) {
  int64_t shape[2] = {3, 1};
  DLManagedTensorVersioned *b = iota(2, shape), *v = UNTOUCHED;
  int64_t bad[2] = {4, 4}, neg[2] = {3, -1},
          huge[3] = {INT64_C(1) << 62, 3, 4};
  CHECK_STATUS(dlb_tensor_expand(b, 2, bad, &v), DLB_E_LAYOUT);
  CHECK_ERROR_MENTIONS("base dimension 0 has extent 3");
  CHECK_STATUS(dlb_tensor_expand(b, 1, bad, &v), DLB_E_LAYOUT);
  CHECK_ERROR_MENTIONS("ndim is 1");
  CHECK_STATUS(dlb_tensor_expand(b, DLB_MAX_NDIM + 1, bad, &v), DLB_E_LAYOUT);
  CHECK_STATUS(dlb_tensor_expand(b, 2, neg, &v), DLB_E_LAYOUT);
  CHECK_ERROR_MENTIONS("shape[1] is -1");
  CHECK_STATUS(dlb_tensor_expand(b, 3, huge, &v), DLB_E_OVERFLOW);
  CHECK_STATUS(dlb_tensor_expand(b, 2, NULL, &v), DLB_E_INVAL);
  CHECK(v == UNTOUCHED);
  dlb_tensor_release(b);
}

/* ---- flags and lifetimes ----------------------------------------------- */

DLB_TEST(view_flags_keep_read_only_drop_is_copied) {
  static int32_t buf[6];
  int64_t shape[2] = {2, 3};
  DLTensor desc = {buf, CPU, 2, I32, shape, NULL, 0};
  DLManagedTensorVersioned *b = NULL, *v[5];
  CHECK_OK(dlb_tensor_wrap(&desc,
                           DLPACK_FLAG_BITMASK_READ_ONLY |
                               DLPACK_FLAG_BITMASK_IS_COPIED,
                           NULL, NULL, &b));
  dlb_slice s = {D, D, -1};
  int32_t axes[2] = {1, 0};
  int64_t flat[1] = {6}, big[3] = {2, 2, 3};
  CHECK_OK(dlb_tensor_slice(b, 1, &s, &v[0]));
  CHECK_OK(dlb_tensor_select(b, 0, 1, &v[1]));
  CHECK_OK(dlb_tensor_permute(b, axes, &v[2]));
  CHECK_OK(dlb_tensor_reshape(b, 1, flat, &v[3]));
  CHECK_OK(dlb_tensor_expand(b, 3, big, &v[4]));
  for (int i = 0; i < 5; i++) {
    CHECK_EQ_INT(v[i]->flags, DLPACK_FLAG_BITMASK_READ_ONLY);
    dlb_tensor_release(v[i]);
  }
  dlb_tensor_release(b);
}

/* The ways a family's data can be owned. */
enum { OWN_CALLBACK, OWN_VERSIONED, OWN_LEGACY, OWN_ALLOC, OWN_KINDS };

typedef struct family_data {
  int32_t data[6];
  int64_t shape[2];
  int *count;
  DLManagedTensorVersioned v;
  DLManagedTensor l;
} family_data;

static void family_release(void *ctx) {
  family_data *f = ctx;
  (*f->count)++;
  free(f);
}

static void family_versioned_deleter(DLManagedTensorVersioned *self) {
  family_release(self->manager_ctx);
}

static void family_legacy_deleter(DLManagedTensor *self) {
  family_release(self->manager_ctx);
}

#define FAMILY 7

/* A 2 x 3 int32 base owned the given way, and six tensors sharing it. */
static void family_make(int kind, int *count, DLManagedTensorVersioned **m) {
  DLManagedTensorVersioned *base = NULL;
  int64_t shape[2] = {2, 3};
  if (kind == OWN_ALLOC) {
    base = iota(2, shape);
  } else {
    family_data *f = calloc(1, sizeof *f);
    CHECK(f != NULL);
    for (int i = 0; i < 6; i++) f->data[i] = i;
    f->shape[0] = 2;
    f->shape[1] = 3;
    f->count = count;
    DLTensor desc = {f->data, CPU, 2, I32, f->shape, NULL, 0};
    if (kind == OWN_CALLBACK) {
      CHECK_OK(dlb_tensor_wrap(&desc, 0, family_release, f, &base));
    } else if (kind == OWN_VERSIONED) {
      f->v.version.major = 1;
      f->v.manager_ctx = f;
      f->v.deleter = family_versioned_deleter;
      f->v.dl_tensor = desc;
      CHECK_OK(dlb_tensor_adopt(&f->v, &base));
    } else {
      f->l.manager_ctx = f;
      f->l.deleter = family_legacy_deleter;
      f->l.dl_tensor = desc;
      CHECK_OK(dlb_tensor_from_legacy(&f->l, 0, &base));
    }
  }
  dlb_slice s[2] = {{D, D, -1}, {1, D, 1}};
  int32_t axes[2] = {1, 0};
  int64_t flat[1] = {6}, big[3] = {4, 3, 2};
  m[0] = base;
  CHECK_OK(dlb_tensor_share(base, &m[1]));
  CHECK_OK(dlb_tensor_slice(base, 2, s, &m[2]));
  CHECK_OK(dlb_tensor_select(base, 1, 2, &m[3]));
  CHECK_OK(dlb_tensor_permute(m[2], axes, &m[4]));
  CHECK_OK(dlb_tensor_reshape(base, 1, flat, &m[5]));
  CHECK_OK(dlb_tensor_expand(m[3], 3, big, &m[6]));
}

/* Reads one element of each member, so a freed base shows up (under a
 * sanitizer, or as garbage values). */
static void family_check(DLManagedTensorVersioned **m, int alive) {
  static const int32_t want[FAMILY] = {5, 5, 4, 5, 5, 5, 5};
  int64_t last[FAMILY][3] = {{1, 2}, {1, 2}, {0, 0}, {1}, {1, 0}, {5},
                             {3, 2, 1}};
  for (int i = 0; i < FAMILY; i++)
    if (alive & (1 << i)) CHECK_EQ_INT(at(m[i], last[i]), want[i]);
}

static int next_permutation(int *a, int n) {
  int i = n - 2;
  while (i >= 0 && a[i] >= a[i + 1]) i--;
  if (i < 0) return 0;
  int j = n - 1;
  while (a[j] <= a[i]) j--;
  int t = a[i];
  a[i] = a[j];
  a[j] = t;
  for (int l = i + 1, r = n - 1; l < r; l++, r--) {
    t = a[l];
    a[l] = a[r];
    a[r] = t;
  }
  return 1;
}

DLB_TEST(view_owner_released_once_in_every_order) {
  for (int kind = 0; kind < OWN_KINDS; kind++) {
    int order[FAMILY];
    for (int i = 0; i < FAMILY; i++) order[i] = i;
    long orders = 0;
    do {
      int count = 0;
      DLManagedTensorVersioned *m[FAMILY];
      dlb_test_failalloc_install(0);
      family_make(kind, &count, m);
      /* Each member is one block, the base's holding the owner, which
       * stays until the last member goes; the data (OWN_ALLOC) is one
       * more. */
      long extra = kind == OWN_ALLOC ? 1 : 0;
      CHECK_EQ_INT(dlb_test_failalloc_live(), FAMILY + extra);
      int alive = (1 << FAMILY) - 1;
      for (int r = 0; r < FAMILY; r++) {
        family_check(m, alive);
        CHECK_EQ_INT(count, 0);
        dlb_tensor_release(m[order[r]]);
        alive &= ~(1 << order[r]);
        long left = FAMILY - 1 - r;
        long base_block = (alive & 1) == 0 ? 1 : 0;
        CHECK_EQ_INT(dlb_test_failalloc_live(),
                     left > 0 ? left + base_block + extra : 0);
      }
      CHECK_EQ_INT(count, kind == OWN_ALLOC ? 0 : 1);
      dlb_test_failalloc_remove();
      orders++;
    } while (next_permutation(order, FAMILY));
    CHECK_EQ_INT(orders, 5040);
  }
}

DLB_TEST(view_outlives_its_base) {
  int64_t shape[2] = {3, 4};
  DLManagedTensorVersioned *b = iota(2, shape), *v = NULL, *w = NULL;
  dlb_slice s[2] = {{1, D, 1}, {D, D, -1}};
  CHECK_OK(dlb_tensor_slice(b, 2, s, &v));
  dlb_tensor_release(b);
  /* A view of a view, made after the base is gone. */
  CHECK_OK(dlb_tensor_select(v, 1, 0, &w));
  dlb_tensor_release(v);
  CHECK_EQ_INT(w->dl_tensor.ndim, 1);
  int64_t i = 0;
  CHECK_EQ_INT(at(w, &i), 7);
  i = 1;
  CHECK_EQ_INT(at(w, &i), 11);
  dlb_tensor_release(w);
}

/* The public strides of one of our tensors may be set to NULL later (still
 * a valid, compact tensor): views and shares read them as compact. */
DLB_TEST(view_of_tensor_whose_strides_were_cleared) {
  DLDevice cpu = {kDLCPU, 0};
  DLDataType f32 = {kDLFloat, 32, 1};
  int64_t shape[2] = {2, 3};
  DLManagedTensorVersioned *a = NULL, *v = NULL, *p = NULL, *s = NULL;
  CHECK_OK(dlb_tensor_alloc(cpu, f32, 2, shape, &a));
  float *d = a->dl_tensor.data;
  for (int i = 0; i < 6; i++) d[i] = (float)i;
  a->dl_tensor.strides = NULL;
  dlb_slice rev = {DLB_SLICE_DEFAULT, DLB_SLICE_DEFAULT, -1};
  CHECK_OK(dlb_tensor_slice(a, 1, &rev, &v));
  CHECK_EQ_INT(v->dl_tensor.strides[0], -3);
  CHECK_EQ_INT(v->dl_tensor.strides[1], 1);
  CHECK_EQ_INT(v->dl_tensor.byte_offset, 12);
  int32_t axes[2] = {1, 0};
  CHECK_OK(dlb_tensor_permute(a, axes, &p));
  CHECK_EQ_INT(p->dl_tensor.strides[0], 1);
  CHECK_EQ_INT(p->dl_tensor.strides[1], 3);
  CHECK_OK(dlb_tensor_share(a, &s));
  CHECK_EQ_INT(s->dl_tensor.strides[0], 3);
  CHECK_EQ_INT(s->dl_tensor.strides[1], 1);
  dlb_tensor_release(a);
  dlb_tensor_release(v);
  dlb_tensor_release(p);
  dlb_tensor_release(s);
}

/* The same for one dimension: a vector whose strides were cleared slices as
 * a compact one. */
DLB_TEST(view_of_vector_whose_strides_were_cleared) {
  int64_t shape[1] = {6};
  DLManagedTensorVersioned *a = iota(1, shape), *v = NULL;
  a->dl_tensor.strides = NULL;
  dlb_slice odd = {1, DLB_SLICE_DEFAULT, 2};
  CHECK_OK(dlb_tensor_slice(a, 1, &odd, &v));
  CHECK_EQ_INT(v->dl_tensor.shape[0], 3);
  CHECK_EQ_INT(v->dl_tensor.strides[0], 2);
  CHECK_EQ_INT(v->dl_tensor.byte_offset, 4);
  CHECK_EQ_INT(at(v, (int64_t[]){2}), 5);
  dlb_tensor_release(a);
  dlb_tensor_release(v);
}
