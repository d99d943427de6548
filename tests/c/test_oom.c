/* test_oom.c -- every allocating tensor and view call with allocation 1, 2,
 * 3 ... failing in turn: each failure returns DLB_E_NOMEM, leaks nothing,
 * leaves the out-parameter alone and leaves inputs owned by the caller. */
#include "core/tensor_internal.h"
#include "test.h"

static const DLDataType F32 = {kDLFloat, 32, 1};
static const DLDataType I32 = {kDLInt, 32, 1};
static const DLDevice CPU = {kDLCPU, 0};
#define UNTOUCHED ((DLManagedTensorVersioned *)(uintptr_t)0x5a5a)

/* Makes a tensor through the default allocator, so that its blocks are not
 * counted (or failed) by the allocator under test. */
static DLManagedTensorVersioned *outside_alloc(int32_t ndim,
                                               const int64_t *shape) {
  dlb_allocator under_test;
  dlb_get_allocator(&under_test);
  CHECK_OK(dlb_set_allocator(NULL));
  DLManagedTensorVersioned *t = NULL;
  CHECK_OK(dlb_tensor_alloc(CPU, I32, ndim, shape, &t));
  CHECK_OK(dlb_set_allocator(&under_test));
  return t;
}

static void count_release(void *ctx) { (*(int *)ctx)++; }

/* Foreign inputs come from malloc, outside the allocator under test. */
typedef struct foreign {
  DLManagedTensorVersioned v;
  DLManagedTensor l;
  int64_t shape[2];
  float data[6];
  int count;
} foreign;

static void foreign_versioned_deleter(DLManagedTensorVersioned *self) {
  ((foreign *)self->manager_ctx)->count++;
}

static void foreign_legacy_deleter(DLManagedTensor *self) {
  ((foreign *)self->manager_ctx)->count++;
}

static foreign *foreign_new(void) {
  foreign *f = calloc(1, sizeof *f);
  CHECK(f != NULL);
  f->shape[0] = 2;
  f->shape[1] = 3;
  DLTensor desc = {f->data, CPU, 2, F32, f->shape, NULL, 0};
  f->v.version.major = 1;
  f->v.manager_ctx = f;
  f->v.deleter = foreign_versioned_deleter;
  f->v.dl_tensor = desc;
  f->l.manager_ctx = f;
  f->l.deleter = foreign_legacy_deleter;
  f->l.dl_tensor = desc;
  return f;
}

static dlb_status body_alloc(void *ctx) {
  (void)ctx;
  int64_t shape[2] = {3, 4};
  DLManagedTensorVersioned *t = UNTOUCHED;
  dlb_status st = dlb_tensor_alloc(CPU, F32, 2, shape, &t);
  if (st != DLB_OK) {
    CHECK(t == UNTOUCHED);
    return st;
  }
  ((float *)t->dl_tensor.data)[11] = 1.0f;
  dlb_tensor_release(t);
  return DLB_OK;
}

DLB_TEST(oom_alloc) {
  /* The tensor block (holding the owner), the data. */
  CHECK_EQ_INT(dlb_test_oom_loop(body_alloc, NULL), 2);
}

static dlb_status body_wrap(void *ctx) {
  (void)ctx;
  static float buf[6];
  int64_t shape[2] = {2, 3};
  DLTensor desc = {buf, CPU, 2, F32, shape, NULL, 0};
  int count = 0;
  DLManagedTensorVersioned *t = UNTOUCHED;
  dlb_status st = dlb_tensor_wrap(&desc, 0, count_release, &count, &t);
  if (st != DLB_OK) {
    CHECK(t == UNTOUCHED);
    /* The memory is still the caller's to release. */
    CHECK_EQ_INT(count, 0);
    count_release(&count);
  } else {
    dlb_tensor_release(t);
  }
  CHECK_EQ_INT(count, 1);
  return st;
}

/* One block: the tensor with its owner. */
DLB_TEST(oom_wrap) { CHECK_EQ_INT(dlb_test_oom_loop(body_wrap, NULL), 1); }

/* Runs a call that takes over f's versioned or legacy struct on success and
 * checks that a failure left it as it was. */
static dlb_status finish_foreign(foreign *f, const foreign *before,
                                 dlb_status st,
                                 DLManagedTensorVersioned *t, int legacy) {
  if (st != DLB_OK) {
    CHECK(t == UNTOUCHED);
    CHECK(memcmp(f, before, sizeof *f) == 0);
    CHECK_EQ_INT(f->count, 0);
    if (legacy)
      f->l.deleter(&f->l);
    else
      f->v.deleter(&f->v);
  } else {
    CHECK(t->dl_tensor.data == f->data);
    dlb_tensor_release(t);
  }
  CHECK_EQ_INT(f->count, 1);
  free(f);
  return st;
}

static dlb_status body_adopt(void *ctx) {
  (void)ctx;
  foreign *f = foreign_new(), before;
  memcpy(&before, f, sizeof before);
  DLManagedTensorVersioned *t = UNTOUCHED;
  dlb_status st = dlb_tensor_adopt(&f->v, &t);
  return finish_foreign(f, &before, st, t, 0);
}

DLB_TEST(oom_adopt) { CHECK_EQ_INT(dlb_test_oom_loop(body_adopt, NULL), 1); }

static dlb_status body_from_legacy(void *ctx) {
  (void)ctx;
  foreign *f = foreign_new(), before;
  memcpy(&before, f, sizeof before);
  DLManagedTensorVersioned *t = UNTOUCHED;
  dlb_status st =
      dlb_tensor_from_legacy(&f->l, DLPACK_FLAG_BITMASK_READ_ONLY, &t);
  return finish_foreign(f, &before, st, t, 1);
}

DLB_TEST(oom_from_legacy) {
  CHECK_EQ_INT(dlb_test_oom_loop(body_from_legacy, NULL), 1);
}

static dlb_status body_to_legacy(void *ctx) {
  (void)ctx;
  foreign *f = foreign_new(), before;
  memcpy(&before, f, sizeof before);
  DLManagedTensor *l = (DLManagedTensor *)(uintptr_t)0x5a5a;
  dlb_status st = dlb_tensor_to_legacy(&f->v, &l);
  if (st != DLB_OK) {
    CHECK(l == (DLManagedTensor *)(uintptr_t)0x5a5a);
    CHECK(memcmp(f, &before, sizeof *f) == 0);
    CHECK_EQ_INT(f->count, 0);
    f->v.deleter(&f->v);
  } else {
    CHECK(l->dl_tensor.data == f->data);
    dlb_legacy_release(l);
  }
  CHECK_EQ_INT(f->count, 1);
  free(f);
  return st;
}

DLB_TEST(oom_to_legacy) {
  CHECK_EQ_INT(dlb_test_oom_loop(body_to_legacy, NULL), 1);
}

static dlb_status body_to_legacy_ours(void *ctx) {
  (void)ctx;
  int64_t shape[1] = {4};
  DLManagedTensorVersioned *t = outside_alloc(1, shape);
  DLManagedTensor *l = (DLManagedTensor *)(uintptr_t)0x5a5a;
  dlb_status st = dlb_tensor_to_legacy(t, &l);
  if (st != DLB_OK) {
    CHECK(l == (DLManagedTensor *)(uintptr_t)0x5a5a);
    dlb_tensor_release(t);
    return st;
  }
  dlb_legacy_release(l);
  return DLB_OK;
}

DLB_TEST(oom_to_legacy_of_ours) {
  CHECK_EQ_INT(dlb_test_oom_loop(body_to_legacy_ours, NULL), 1);
}

static dlb_status body_round_trips(void *ctx) {
  (void)ctx;
  int64_t shape[1] = {4};
  DLManagedTensorVersioned *t = outside_alloc(1, shape), *a = NULL, *b = NULL;
  /* Adopting one of ours, or taking back our own legacy wrapper, allocates
   * nothing and so cannot fail. */
  CHECK_OK(dlb_tensor_adopt(t, &a));
  dlb_allocator under_test;
  dlb_get_allocator(&under_test);
  CHECK_OK(dlb_set_allocator(NULL));
  DLManagedTensor *l = NULL;
  CHECK_OK(dlb_tensor_to_legacy(a, &l));
  CHECK_OK(dlb_set_allocator(&under_test));
  CHECK_OK(dlb_tensor_from_legacy(l, 0, &b));
  CHECK(b == t);
  dlb_tensor_release(b);
  return DLB_OK;
}

DLB_TEST(oom_round_trips_of_ours_allocate_nothing) {
  CHECK_EQ_INT(dlb_test_oom_loop(body_round_trips, NULL), 0);
}

/* A legacy struct of ours that a consumer rewrote needs a new tensor to
 * come back as; when that cannot be made, the struct stays as it was, ours
 * to release. */
static dlb_status body_rewritten_round_trip(void *ctx) {
  (void)ctx;
  int64_t shape[1] = {4};
  DLManagedTensorVersioned *t = outside_alloc(1, shape), *b = UNTOUCHED;
  dlb_allocator under_test;
  dlb_get_allocator(&under_test);
  CHECK_OK(dlb_set_allocator(NULL));
  DLManagedTensor *l = NULL;
  CHECK_OK(dlb_tensor_to_legacy(t, &l));
  CHECK_OK(dlb_set_allocator(&under_test));
  l->dl_tensor.shape[0] = 2;
  dlb_status st = dlb_tensor_from_legacy(l, 0, &b);
  if (st != DLB_OK) {
    CHECK(b == UNTOUCHED);
    CHECK(dlb_legacy_is_ours(l));
    CHECK_EQ_INT(l->dl_tensor.shape[0], 2);
    dlb_legacy_release(l);
    return st;
  }
  CHECK_EQ_INT(b->dl_tensor.ndim, 1);
  CHECK_EQ_INT(b->dl_tensor.shape[0], 2);
  dlb_tensor_release(b);
  return DLB_OK;
}

DLB_TEST(oom_rewritten_round_trip_of_ours) {
  CHECK_EQ_INT(dlb_test_oom_loop(body_rewritten_round_trip, NULL), 1);
}

/* Share, the views and redescribe, of a base made outside the allocator
 * under test. */
enum {
  OP_SHARE,
  OP_SLICE,
  OP_SELECT,
  OP_PERMUTE,
  OP_RESHAPE,
  OP_EXPAND,
  OP_REDESCRIBE
};

typedef struct view_case {
  DLManagedTensorVersioned *base;
  int op;
} view_case;

static dlb_status body_view(void *ctx) {
  view_case *c = ctx;
  DLManagedTensorVersioned *v = UNTOUCHED;
  dlb_slice s[2] = {{1, DLB_SLICE_DEFAULT, 1}, {DLB_SLICE_DEFAULT, 0, -2}};
  int32_t axes[2] = {1, 0};
  int64_t flat[1] = {12}, big[3] = {2, 3, 4};
  dlb_status st = DLB_E_INVAL;
  switch (c->op) {
    case OP_SHARE:
      st = dlb_tensor_share(c->base, &v);
      break;
    case OP_SLICE:
      st = dlb_tensor_slice(c->base, 2, s, &v);
      break;
    case OP_SELECT:
      st = dlb_tensor_select(c->base, 0, -1, &v);
      break;
    case OP_PERMUTE:
      st = dlb_tensor_permute(c->base, axes, &v);
      break;
    case OP_RESHAPE:
      st = dlb_tensor_reshape(c->base, 1, flat, &v);
      break;
    case OP_EXPAND:
      st = dlb_tensor_expand(c->base, 3, big, &v);
      break;
    case OP_REDESCRIBE:
      st = dlb_tensor_redescribe(c->base, &c->base->dl_tensor, 0, &v);
      break;
  }
  if (st != DLB_OK) {
    CHECK(v == UNTOUCHED);
    return st;
  }
  CHECK(v->dl_tensor.data == c->base->dl_tensor.data);
  dlb_tensor_release(v);
  return DLB_OK;
}

DLB_TEST(oom_share_and_views) {
  int64_t shape[2] = {3, 4};
  view_case c = {NULL, 0};
  c.base = outside_alloc(2, shape);
  /* One block each: struct, shape and strides together. */
  for (c.op = OP_SHARE; c.op <= OP_REDESCRIBE; c.op++)
    CHECK_EQ_INT(dlb_test_oom_loop(body_view, &c), 1);
  /* Failed calls took no reference and released views dropped theirs. */
  CHECK_EQ_INT(atomic_load(&dlb__tensor_of(c.base)->owner->refs), 1);
  dlb_tensor_release(c.base);
}
