/* test_defined.c -- every byte dlbridge hands out in a new tensor is
 * defined: the bits of a last byte that no packed element fills, and the
 * byte behind an empty tensor, are zero however the memory came. Fresh
 * memory is poisoned (0xAA) by the allocator and by the emulated GPU. */
#include <stdlib.h>

#include "../emu/emu_fns.h"
#include "test.h"

#define POISON 0xAA

static void *poison_alloc(void *ctx, size_t size, size_t alignment) {
  (void)ctx;
  void *p = NULL;
  if (posix_memalign(&p, alignment, size) != 0) return NULL;
  memset(p, POISON, size);
  return p;
}

static void poison_free(void *ctx, void *p, size_t size, size_t alignment) {
  (void)ctx;
  (void)size;
  (void)alignment;
  free(p);
}

static const dlb_allocator poison = {poison_alloc, poison_free, NULL};

static const DLDataType packed[] = {
    {kDLInt, 1, 1},  {kDLInt, 2, 1},  {kDLInt, 4, 1},
    {kDLUInt, 1, 1}, {kDLUInt, 2, 1}, {kDLUInt, 4, 1},
    {kDLFloat6_e2m3fn, 6, 1}, {kDLFloat6_e3m2fn, 6, 1},
    {kDLFloat4_e2m1fn, 4, 1},
};
#define NPACKED (sizeof packed / sizeof packed[0])

/* The bits of the last byte n packed elements of dtype use (0: all). */
static unsigned used_bits(DLDataType dtype, int64_t n) {
  return (unsigned)(n % 8) * dtype.bits % 8;
}

static int64_t storage(DLDataType dtype, int64_t n) {
  int64_t bytes = 0;
  CHECK_OK(dlb_dtype_storage_bytes(dtype, n, 0, &bytes));
  return bytes;
}

DLB_TEST(defined_new_packed_tensor_has_zero_spare_bits) {
  CHECK_OK(dlb_set_allocator(&poison));
  for (size_t k = 0; k < NPACKED; k++) {
    for (int64_t n = 1; n <= 17; n++) {
      DLManagedTensorVersioned *t = NULL;
      CHECK_OK(dlb_tensor_alloc((DLDevice){kDLCPU, 0}, packed[k], 1, &n, &t));
      const unsigned char *d = t->dl_tensor.data;
      int64_t last = storage(packed[k], n) - 1;
      /* A last byte that elements fill whole is theirs to write, left as
       * it came: allocation costs no pass over the data. */
      CHECK_EQ_INT(d[last], used_bits(packed[k], n) != 0 ? 0 : POISON);
      if (last > 0) CHECK_EQ_INT(d[0], POISON);
      dlb_tensor_release(t);
    }
  }
  CHECK_OK(dlb_set_allocator(NULL));
}

DLB_TEST(defined_empty_tensor_byte_is_zero) {
  CHECK_OK(dlb_set_allocator(&poison));
  const int64_t shapes[][2] = {{0, 3}, {3, 0}};
  const DLDataType types[] = {{kDLFloat, 32, 1}, {kDLInt, 4, 1}};
  for (size_t s = 0; s < 2; s++) {
    for (size_t k = 0; k < 2; k++) {
      DLManagedTensorVersioned *t = NULL;
      CHECK_OK(dlb_tensor_alloc((DLDevice){kDLCPU, 0}, types[k], 2, shapes[s],
                                &t));
      CHECK_EQ_INT(*(const unsigned char *)t->dl_tensor.data, 0);
      dlb_tensor_release(t);
    }
  }
  CHECK_OK(dlb_set_allocator(NULL));
}

/* A compact packed source of n elements over buf, every bit set. */
static DLTensor packed_source(DLDataType dtype, int64_t *n,
                              unsigned char *buf, size_t size) {
  memset(buf, 0xFF, size);
  DLTensor src;
  memset(&src, 0, sizeof src);
  src.data = buf;
  src.device = (DLDevice){kDLCPU, 0};
  src.ndim = 1;
  src.dtype = dtype;
  src.shape = n;
  return src;
}

/* The copy of an all-ones source holds ones in its elements' bits and
 * zeros in the rest of the last byte. */
static void check_copy(const unsigned char *d, DLDataType dtype, int64_t n) {
  int64_t bytes = storage(dtype, n);
  unsigned used = used_bits(dtype, n);
  for (int64_t i = 0; i + 1 < bytes; i++) CHECK_EQ_INT(d[i], 0xFF);
  CHECK_EQ_INT(d[bytes - 1], used != 0 ? (1u << used) - 1 : 0xFF);
}

DLB_TEST(defined_packed_copy_into_new_tensor_zeroes_spare_bits) {
  CHECK_OK(dlb_set_allocator(&poison));
  unsigned char buf[32];
  for (size_t k = 0; k < NPACKED; k++) {
    for (int64_t n = 1; n <= 17; n++) {
      DLTensor src = packed_source(packed[k], &n, buf, sizeof buf);
      DLManagedTensorVersioned *t = NULL;
      CHECK_OK(dlb_tensor_copy(&src, (DLDevice){kDLCPU, 0}, &t));
      check_copy(t->dl_tensor.data, packed[k], n);
      dlb_tensor_release(t);

      DLManagedTensorVersioned m;
      memset(&m, 0, sizeof m);
      m.version.major = DLPACK_MAJOR_VERSION;
      m.dl_tensor = src;
      CHECK_OK(dlb_managed_copy(&m, (DLDevice){kDLCPU, 0}, &t));
      check_copy(t->dl_tensor.data, packed[k], n);
      dlb_tensor_release(t);
    }
  }
  CHECK_OK(dlb_set_allocator(NULL));
}

DLB_TEST(defined_packed_tensors_on_gpu_have_zero_spare_bits) {
  setenv("EMU_CUDA_FILL", "0xAA", 1);
  emu E = emu_cuda();
  const DLDevice kinds[] = {
      {kDLCUDA, 1}, {kDLCUDAHost, 0}, {kDLCUDAManaged, 0}};
  unsigned char buf[32];
  for (size_t g = 0; g < 3; g++) {
    for (size_t k = 0; k < NPACKED; k++) {
      int64_t n = 3;
      DLManagedTensorVersioned *t = NULL;
      CHECK_OK(dlb_tensor_alloc(kinds[g], packed[k], 1, &n, &t));
      const unsigned char *d = E.shadow(t->dl_tensor.data);
      CHECK_EQ_INT(d[storage(packed[k], n) - 1], 0);
      dlb_tensor_release(t);

      DLTensor src = packed_source(packed[k], &n, buf, sizeof buf);
      CHECK_OK(dlb_tensor_copy(&src, kinds[g], &t));
      check_copy(E.shadow(t->dl_tensor.data), packed[k], n);
      dlb_tensor_release(t);
    }
    int64_t none = 0;
    DLManagedTensorVersioned *t = NULL;
    CHECK_OK(dlb_tensor_alloc(kinds[g], packed[0], 1, &none, &t));
    CHECK_EQ_INT(*(const unsigned char *)E.shadow(t->dl_tensor.data), 0);
    dlb_tensor_release(t);
  }
  CHECK_EQ_INT(E.live(), 0);
}

/* The zero byte goes through the driver: when its copy or the wait fails,
 * the allocation fails with the driver's message and nothing stays alive. */
DLB_TEST(defined_spare_byte_failure_on_gpu_leaks_nothing) {
  emu E = emu_cuda();
  static const char *const calls[] = {"cuMemcpyAsync", "cuStreamSynchronize"};
  int64_t n = 3;
  for (int k = 0; k < 2; k++) {
    DLManagedTensorVersioned *t = NULL;
    E.fail(calls[k], 1, 999);
    CHECK_STATUS(dlb_tensor_alloc((DLDevice){kDLCUDA, 0}, packed[2], 1, &n, &t),
                 DLB_E_RUNTIME);
    CHECK_ERROR_MENTIONS(calls[k]);
    CHECK(t == NULL);
    CHECK_EQ_INT(E.live(), 0);
  }
  /* Whole bytes need no driver call beyond the allocation. */
  n = 2;
  DLManagedTensorVersioned *t = NULL;
  long before = E.calls("cuMemcpyAsync");
  CHECK_OK(dlb_tensor_alloc((DLDevice){kDLCUDA, 0}, packed[2], 1, &n, &t));
  CHECK_EQ_INT(E.calls("cuMemcpyAsync"), before);
  dlb_tensor_release(t);
}
