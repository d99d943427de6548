/*
 * demo.c -- a tour of dlbridge's core: allocate a tensor, take views of it
 * without copying, hand it to a "consumer" as a DLPack managed tensor the
 * way a Python capsule or a C library would, validate it there, and release
 * everything exactly once.
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>

#include "dlbridge.h"

static int deleted;

#define TRY(call)                                                        \
  do {                                                                   \
    dlb_status s_ = (call);                                              \
    if (s_ != DLB_OK) {                                                  \
      fprintf(stderr, "demo: %s failed: %s: %s\n", #call,                \
              dlb_status_name(s_), dlb_last_error());                    \
      exit(1);                                                           \
    }                                                                    \
  } while (0)

static void describe(const char *what, const DLManagedTensorVersioned *m) {
  const DLTensor *t = &m->dl_tensor;
  char dev[DLB_DEVICE_NAME_MAX], dt[DLB_DTYPE_NAME_MAX];
  TRY(dlb_device_format(t->device, dev, sizeof dev));
  TRY(dlb_dtype_format(t->dtype, dt, sizeof dt));
  printf("%-22s %s %s shape=(", what, dev, dt);
  for (int i = 0; i < t->ndim; i++)
    printf("%s%" PRId64, i ? ", " : "", t->shape[i]);
  printf(") strides=(");
  for (int i = 0; i < t->ndim; i++)
    printf("%s%" PRId64, i ? ", " : "", t->strides[i]);
  printf(") offset=%" PRIu64 " %s%s\n", t->byte_offset,
         dlb_tensor_is_c_contiguous(t) ? "C-contiguous" : "strided",
         (m->flags & DLPACK_FLAG_BITMASK_READ_ONLY) ? " read-only" : "");
}

static float at(const DLTensor *t, int64_t i, int64_t j) {
  const char *base = (const char *)t->data + t->byte_offset;
  return *(const float *)(const void *)(base + (i * t->strides[0] +
                                               j * t->strides[1]) *
                                                  (int64_t)sizeof(float));
}

/* A producer's memory, owned by "someone else", with its own release. */
static void producer_release(void *ctx) {
  free(ctx);
  deleted++;
}

int main(void) {
  printf("dlbridge %s, DLPack %d.%d\n\n", dlb_version_string(),
         DLPACK_MAJOR_VERSION, DLPACK_MINOR_VERSION);

  /* 1. Allocate a 4x6 float32 CPU tensor and fill it. */
  DLDevice cpu;
  DLDataType f32;
  TRY(dlb_device_parse("cpu", &cpu));
  TRY(dlb_dtype_parse("float32", &f32));
  int64_t shape[2] = {4, 6};
  DLManagedTensorVersioned *a = NULL;
  TRY(dlb_tensor_alloc(cpu, f32, 2, shape, &a));
  float *data = a->dl_tensor.data;
  for (int i = 0; i < 24; i++) data[i] = (float)i;
  describe("allocated", a);
  printf("%-22s data %% 256 = %zu (alignment %zu)\n", "",
         (size_t)((uintptr_t)data % 256), dlb_tensor_alignment(&a->dl_tensor));

  /* 2. Views share the data: a reversed, strided slice and a transpose. */
  dlb_slice sl[2] = {{DLB_SLICE_DEFAULT, DLB_SLICE_DEFAULT, -1},
                     {1, DLB_SLICE_DEFAULT, 2}};
  DLManagedTensorVersioned *v = NULL, *tr = NULL;
  TRY(dlb_tensor_slice(a, 2, sl, &v));
  describe("a[::-1, 1::2]", v);
  printf("%-22s v[0][0] = %g (a[3][1] = %g)\n", "", at(&v->dl_tensor, 0, 0),
         data[3 * 6 + 1]);
  int32_t axes[2] = {1, 0};
  TRY(dlb_tensor_permute(a, axes, &tr));
  describe("a.T", tr);

  /* 3. The base may go first: the views keep the data alive. */
  dlb_tensor_release(a);
  printf("%-22s a released; a.T[5][2] = %g\n", "", at(&tr->dl_tensor, 5, 2));

  /* 4. Exchange: a producer wraps its own memory; the consumer receives a
   *    DLManagedTensorVersioned, validates it and adopts it. */
  float *mine = malloc(3 * sizeof(float));
  if (mine == NULL) return 1;
  mine[0] = 1.5f, mine[1] = 2.5f, mine[2] = 3.5f;
  int64_t n3 = 3;
  DLTensor desc = {mine, cpu, 1, f32, &n3, NULL, 0};
  DLManagedTensorVersioned *sent = NULL, *got = NULL;
  TRY(dlb_tensor_wrap(&desc, DLPACK_FLAG_BITMASK_READ_ONLY, producer_release,
                      mine, &sent));
  TRY(dlb_managed_validate(sent));
  TRY(dlb_tensor_adopt(sent, &got));
  describe("received", got);

  /* 5. The validator says exactly what is wrong with bad input. */
  int64_t bad_shape[2] = {2, -3};
  DLTensor bad = {mine, cpu, 2, f32, bad_shape, NULL, 0};
  dlb_status s = dlb_tensor_validate(&bad);
  printf("%-22s %s: %s\n", "validate(bad)", dlb_status_name(s),
         dlb_last_error());

  /* 6. Legacy (pre-1.0) consumers get a DLManagedTensor; read-only data
   *    cannot go that way, since the legacy struct has no flags. */
  s = dlb_tensor_to_legacy(got, &(DLManagedTensor *){NULL});
  printf("%-22s %s: %s\n", "to_legacy(read-only)", dlb_status_name(s),
         dlb_last_error());

  dlb_tensor_release(got);
  printf("%-22s producer's release ran %d time(s)\n", "released", deleted);
  dlb_tensor_release(v);
  dlb_tensor_release(tr);
  return deleted == 1 ? 0 : 1;
}
