/* test_cuda_classify.c -- what a pointer is (dlb_device_of_pointer), and
 * producers' labels checked and corrected against it. */
#include "../emu/emu_fns.h"
#include "test.h"

static const DLDataType f32 = {kDLFloat, 32, 1};

static DLManagedTensorVersioned *alloc_on(DLDevice d) {
  int64_t shape[1] = {64};
  DLManagedTensorVersioned *t = NULL;
  CHECK_OK(dlb_tensor_alloc(d, f32, 1, shape, &t));
  return t;
}

static DLDevice kind_of(const void *p) {
  DLDevice d = {(DLDeviceType)0, -7};
  CHECK_OK(dlb_device_of_pointer(p, &d));
  return d;
}

DLB_TEST(cuda_device_of_every_kind) {
  emu e = emu_cuda();
  CHECK_OK(dlb_runtime_status(DLB_RUNTIME_CUDA));
  int on_stack = 0;
  char *heap = malloc(64);
  CHECK(kind_of(&on_stack).device_type == kDLCPU);
  CHECK(kind_of(heap).device_type == kDLCPU);
  DLManagedTensorVersioned *dev1 = alloc_on((DLDevice){kDLCUDA, 1});
  DLManagedTensorVersioned *host = alloc_on((DLDevice){kDLCUDAHost, 0});
  DLManagedTensorVersioned *man = alloc_on((DLDevice){kDLCUDAManaged, 0});
  DLDevice d = kind_of((char *)dev1->dl_tensor.data + 100);
  CHECK_EQ_INT(d.device_type, kDLCUDA);
  CHECK_EQ_INT(d.device_id, 1);
  CHECK_EQ_INT(kind_of(host->dl_tensor.data).device_type, kDLCUDAHost);
  d = kind_of((char *)man->dl_tensor.data + 255);
  CHECK_EQ_INT(d.device_type, kDLCUDAManaged);
  CHECK_EQ_INT(d.device_id, 0);
  /* One past the end is not the allocation. */
  CHECK_EQ_INT(kind_of((char *)host->dl_tensor.data + 256).device_type,
               kDLCPU);
  /* Memory someone else registers is cuda_host while registered. */
  cu_fns cu = cu_fns_of(&e);
  cu_as_framework(&cu, 0);
  CHECK_EQ_INT(cu.cuMemHostRegister_v2(heap, 64, 0), 0);
  CHECK_EQ_INT(kind_of(heap + 10).device_type, kDLCUDAHost);
  CHECK_EQ_INT(cu.cuMemHostUnregister(heap), 0);
  CHECK_EQ_INT(kind_of(heap + 10).device_type, kDLCPU);
  dlb_tensor_release(dev1);
  dlb_tensor_release(host);
  dlb_tensor_release(man);
  free(heap);
  CHECK_EQ_INT(e.live(), 0);
}

/* Classifying must not create a CUDA context (hundreds of MiB on a
 * GPU): without an active primary context no CUDA memory exists. */
DLB_TEST(cuda_device_of_creates_no_context) {
  emu e = emu_cuda();
  int x = 0;
  CHECK_EQ_INT(kind_of(&x).device_type, kDLCPU);
  CHECK_EQ_INT(e.calls("cuDevicePrimaryCtxRetain"), 0);
  DLManagedTensorVersioned *t = alloc_on((DLDevice){kDLCUDA, 1});
  CHECK_EQ_INT(e.calls("cuDevicePrimaryCtxRetain"), 1);
  DLDevice d = kind_of(t->dl_tensor.data);
  CHECK_EQ_INT(d.device_type, kDLCUDA);
  CHECK_EQ_INT(d.device_id, 1);
  CHECK_EQ_INT(e.calls("cuDevicePrimaryCtxRetain"), 1);
  CHECK_EQ_INT(e.context_depth(), 0);
  dlb_tensor_release(t);
}

DLB_TEST(cuda_device_of_bad_arguments) {
  emu_cuda();
  DLDevice d = {kDLCUDA, 3};
  CHECK_STATUS(dlb_device_of_pointer(NULL, &d), DLB_E_INVAL);
  CHECK_ERROR_MENTIONS("dlb_device_of_pointer: ptr is NULL");
  CHECK_EQ_INT(d.device_type, kDLCUDA);
  CHECK_EQ_INT(d.device_id, 3);
  CHECK_STATUS(dlb_device_of_pointer(&d, NULL), DLB_E_INVAL);
  CHECK_ERROR_MENTIONS("dlb_device_of_pointer: out is NULL");
}

DLB_TEST(cuda_device_of_query_fails) {
  emu e = emu_cuda();
  CHECK_OK(dlb_runtime_status(DLB_RUNTIME_CUDA));
  int x = 0;
  DLDevice d = {kDLCUDA, 3};
  e.fail("cuPointerGetAttributes", 1, 999);
  CHECK_STATUS(dlb_device_of_pointer(&x, &d), DLB_E_RUNTIME);
  CHECK_ERROR_MENTIONS("cuPointerGetAttributes");
  CHECK_EQ_INT(d.device_id, 3);
  /* Older drivers refuse addresses they never saw: that is host memory. */
  e.fail("cuPointerGetAttributes", 1, 1);
  CHECK_OK(dlb_device_of_pointer(&x, &d));
  CHECK_EQ_INT(d.device_type, kDLCPU);
  CHECK_EQ_INT(e.context_depth(), 0);
}

/* A label check of data at p labelled label. */
static dlb_status check(void *p, DLDevice label, unsigned flags,
                        DLDevice *out) {
  int64_t shape[1] = {4};
  DLTensor t;
  memset(&t, 0, sizeof t);
  t.data = p;
  t.device = label;
  t.ndim = 1;
  t.dtype = f32;
  t.shape = shape;
  return dlb_tensor_check_device(&t, flags, out);
}

DLB_TEST(cuda_check_device_agreeing_labels) {
  emu e = emu_cuda();
  static const DLDevice kinds[] = {
      {kDLCUDA, 0}, {kDLCUDA, 1}, {kDLCUDAHost, 0}, {kDLCUDAManaged, 0}};
  for (int k = 0; k < 4; k++) {
    DLManagedTensorVersioned *t = alloc_on(kinds[k]);
    DLDevice out = {kDLCPU, 9};
    CHECK_OK(check(t->dl_tensor.data, kinds[k], DLB_LABEL_CORRECT, &out));
    CHECK(dlb_device_equal(out, kinds[k]));
    dlb_tensor_release(t);
  }
  /* Producers that write the current GPU into host-type labels. */
  DLManagedTensorVersioned *t = alloc_on((DLDevice){kDLCUDAHost, 0});
  DLDevice out;
  CHECK_OK(check(t->dl_tensor.data, (DLDevice){kDLCUDAHost, 1}, 0, &out));
  CHECK_EQ_INT(out.device_id, 0);
  dlb_tensor_release(t);
  int x = 0;
  CHECK_OK(check(&x, (DLDevice){kDLCPU, 0}, 0, &out));
  CHECK_EQ_INT(out.device_type, kDLCPU);
  CHECK_EQ_INT(e.live(), 0);
}

/* PyTorch exports pinned tensors as kDLCPU, CuPy managed arrays as
 * kDLCUDA: harmless, kept unless the caller asks, corrected when it does. */
DLB_TEST(cuda_check_device_corrects_known_mislabels) {
  emu e = emu_cuda();
  DLManagedTensorVersioned *host = alloc_on((DLDevice){kDLCUDAHost, 0});
  DLManagedTensorVersioned *man = alloc_on((DLDevice){kDLCUDAManaged, 0});
  DLDevice out;
  struct {
    void *p;
    DLDevice label, truth;
  } cases[] = {
      {host->dl_tensor.data, {kDLCPU, 0}, {kDLCUDAHost, 0}},
      {man->dl_tensor.data, {kDLCPU, 0}, {kDLCUDAManaged, 0}},
      {man->dl_tensor.data, {kDLCUDA, 0}, {kDLCUDAManaged, 0}},
      {man->dl_tensor.data, {kDLCUDA, 1}, {kDLCUDAManaged, 0}},
      {man->dl_tensor.data, {kDLCUDAHost, 0}, {kDLCUDAManaged, 0}},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    CHECK_OK(check(cases[i].p, cases[i].label, 0, &out));
    CHECK(dlb_device_equal(out, cases[i].label));
    CHECK_OK(check(cases[i].p, cases[i].label, DLB_LABEL_CORRECT, &out));
    CHECK(dlb_device_equal(out, cases[i].truth));
  }
  dlb_tensor_release(host);
  dlb_tensor_release(man);
  CHECK_EQ_INT(e.live(), 0);
}

/* Labels the memory cannot honour are errors, corrected or not. */
DLB_TEST(cuda_check_device_reports_contradictions) {
  emu e = emu_cuda();
  DLManagedTensorVersioned *dev0 = alloc_on((DLDevice){kDLCUDA, 0});
  DLManagedTensorVersioned *host = alloc_on((DLDevice){kDLCUDAHost, 0});
  char *heap = malloc(64);
  struct {
    void *p;
    DLDevice label;
    const char *said, *is;
  } cases[] = {
      {heap, {kDLCUDA, 0}, "label cuda:0", "which is cpu"},
      {heap, {kDLCUDAHost, 0}, "label cuda_host", "which is cpu"},
      {heap, {kDLCUDAManaged, 0}, "label cuda_managed", "which is cpu"},
      {host->dl_tensor.data, {kDLCUDA, 0}, "label cuda:0", "cuda_host"},
      {dev0->dl_tensor.data, {kDLCPU, 0}, "label cpu", "cuda:0"},
      {dev0->dl_tensor.data, {kDLCUDA, 1}, "label cuda:1", "cuda:0"},
      {dev0->dl_tensor.data, {kDLCUDAHost, 0}, "label cuda_host", "cuda:0"},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    for (unsigned flags = 0; flags <= DLB_LABEL_CORRECT; flags++) {
      DLDevice out = {kDLOpenCL, 5};
      CHECK_STATUS(check(cases[i].p, cases[i].label, flags, &out),
                   DLB_E_DEVICE);
      CHECK_ERROR_MENTIONS(cases[i].said);
      CHECK_ERROR_MENTIONS(cases[i].is);
      CHECK_EQ_INT(out.device_type, kDLOpenCL);
      CHECK_EQ_INT(out.device_id, 5);
    }
  }
  dlb_tensor_release(dev0);
  dlb_tensor_release(host);
  free(heap);
  CHECK_EQ_INT(e.live(), 0);
}

/* Labels no runtime here can confirm or deny are taken as given. */
DLB_TEST(cuda_check_device_unverifiable_labels) {
  int x = 0;
  DLDevice out;
  setenv("DLBRIDGE_CUDA_LIBRARY", "/nonexistent/libcuda.so.1", 1);
  setenv("DLBRIDGE_HIP_LIBRARY", "/nonexistent/libamdhip64.so", 1);
  CHECK_OK(check(&x, (DLDevice){kDLCUDA, 3}, DLB_LABEL_CORRECT, &out));
  CHECK_EQ_INT(out.device_type, kDLCUDA);
  CHECK_EQ_INT(out.device_id, 3);
  CHECK_OK(check(&x, (DLDevice){kDLOpenCL, 1}, DLB_LABEL_CORRECT, &out));
  CHECK_EQ_INT(out.device_type, kDLOpenCL);
  CHECK_OK(check(&x, (DLDevice){kDLROCMHost, 2}, 0, &out));
  CHECK_EQ_INT(out.device_type, kDLROCMHost);
  CHECK_EQ_INT(out.device_id, 0);
  CHECK_OK(check(NULL, (DLDevice){kDLCUDA, 1}, 0, &out));
  CHECK_EQ_INT(out.device_id, 1);
}

DLB_TEST(cuda_check_device_rocm_label_without_hip) {
  emu e = emu_cuda();
  setenv("DLBRIDGE_HIP_LIBRARY", "/nonexistent/libamdhip64.so", 1);
  DLManagedTensorVersioned *dev0 = alloc_on((DLDevice){kDLCUDA, 0});
  DLDevice out;
  /* HIP is missing, so a rocm label cannot be checked... */
  CHECK_OK(check(dev0->dl_tensor.data, (DLDevice){kDLROCM, 0}, 0, &out));
  CHECK_EQ_INT(out.device_type, kDLROCM);
  /* ...but a cpu label can, against CUDA. */
  CHECK_STATUS(check(dev0->dl_tensor.data, (DLDevice){kDLCPU, 0}, 0, &out),
               DLB_E_DEVICE);
  dlb_tensor_release(dev0);
  CHECK_EQ_INT(e.live(), 0);
}

DLB_TEST(cuda_check_device_bad_arguments) {
  emu_cuda();
  int x = 0;
  DLDevice out = {kDLCPU, 0};
  CHECK_STATUS(check(&x, (DLDevice){kDLCPU, 0}, 2, &out), DLB_E_INVAL);
  CHECK_ERROR_MENTIONS("flags is 0x2");
  CHECK_STATUS(check(&x, (DLDevice){(DLDeviceType)5, 0}, 0, &out),
               DLB_E_DEVICE);
  CHECK_STATUS(check(&x, (DLDevice){kDLCUDA, -1}, 0, &out), DLB_E_DEVICE);
  CHECK_STATUS(dlb_tensor_check_device(NULL, 0, &out), DLB_E_INVAL);
  CHECK_STATUS(check(&x, (DLDevice){kDLCPU, 0}, 0, NULL), DLB_E_INVAL);
}

DLB_TEST(cuda_check_device_query_fails) {
  emu e = emu_cuda();
  CHECK_OK(dlb_runtime_status(DLB_RUNTIME_CUDA));
  int x = 0;
  DLDevice out = {kDLOpenCL, 0};
  e.fail("cuPointerGetAttributes", 1, 999);
  CHECK_STATUS(check(&x, (DLDevice){kDLCPU, 0}, 0, &out), DLB_E_RUNTIME);
  CHECK_EQ_INT(out.device_type, kDLOpenCL);
}

/* Without data there is nothing to check a label against, even where the
 * runtime could: it is taken as given. */
DLB_TEST(cuda_check_device_label_without_data) {
  emu e = emu_cuda();
  CHECK_OK(dlb_runtime_status(DLB_RUNTIME_CUDA));
  DLDevice out = {kDLOpenCL, 5};
  CHECK_OK(check(NULL, (DLDevice){kDLCUDA, 1}, DLB_LABEL_CORRECT, &out));
  CHECK_EQ_INT(out.device_type, kDLCUDA);
  CHECK_EQ_INT(out.device_id, 1);
  CHECK_EQ_INT(e.live(), 0);
}

/* A contradicted label on managed memory says the memory is managed. */
DLB_TEST(cuda_check_device_contradiction_names_managed_memory) {
  emu e = emu_cuda(), h = emu_hip();
  CHECK_OK(dlb_runtime_status(DLB_RUNTIME_HIP));
  DLManagedTensorVersioned *m = alloc_on((DLDevice){kDLCUDAManaged, 0});
  DLDevice out = {kDLOpenCL, 5};
  CHECK_STATUS(check(m->dl_tensor.data, (DLDevice){kDLROCM, 0}, 0, &out),
               DLB_E_DEVICE);
  CHECK_ERROR_MENTIONS("label rocm:0");
  CHECK_ERROR_MENTIONS("cuda_managed");
  CHECK_ERROR_MENTIONS("(managed)");
  CHECK_EQ_INT(out.device_type, kDLOpenCL);
  dlb_tensor_release(m);
  CHECK_EQ_INT(e.live(), 0);
  CHECK_EQ_INT(h.live(), 0);
}
