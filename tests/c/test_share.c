/* test_share.c -- shared host tensors in one process: allocation, what
 * counts as shared, export and import (views, read-only, empty), the
 * socket transport, and every allocating call failing in turn. */
#include <signal.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/stat.h>

#include "share/share_internal.h"
#include "share_util.h"

DLB_TEST(share_alloc_is_shared_zeroed_and_unnamed) {
  int shm_before = share_count_dev_shm();
  int64_t shape[2] = {3, 1000};
  DLManagedTensorVersioned *t = NULL;
  CHECK_OK(dlb_shared_alloc(share_i32, 2, shape, &t));
  CHECK_EQ_INT(t->dl_tensor.device.device_type, kDLCPU);
  CHECK_EQ_INT(t->dl_tensor.ndim, 2);
  CHECK_EQ_INT(t->dl_tensor.strides[0], 1000);
  CHECK_EQ_INT(t->dl_tensor.strides[1], 1);
  CHECK_EQ_INT((uintptr_t)t->dl_tensor.data % (uintptr_t)sysconf(_SC_PAGESIZE),
               0);
  const int32_t *v = t->dl_tensor.data;
  for (int i = 0; i < 3000; i++) CHECK_EQ_INT(v[i], 0);
  CHECK_EQ_INT(dlb_tensor_is_shared(t), 1);
  /* Views and shares of it are shared memory too. */
  DLManagedTensorVersioned *row = NULL;
  CHECK_OK(dlb_tensor_select(t, 0, 2, &row));
  CHECK_EQ_INT(dlb_tensor_is_shared(row), 1);
  /* Nothing named appears anywhere. */
  CHECK_EQ_INT(share_count_dev_shm(), shm_before);
  dlb_tensor_release(t);
  dlb_tensor_release(row);
  CHECK_EQ_INT(share_count_dev_shm(), shm_before);
}

DLB_TEST(share_is_shared_is_0_for_other_memory) {
  int64_t n = 8;
  DLManagedTensorVersioned *t = NULL;
  CHECK_OK(dlb_tensor_alloc((DLDevice){kDLCPU, 0}, share_u8, 1, &n, &t));
  CHECK_EQ_INT(dlb_tensor_is_shared(t), 0);
  CHECK_EQ_INT(dlb_tensor_is_shared(NULL), 0);
  /* A foreign struct that merely copies a shared tensor's fields. */
  DLManagedTensorVersioned *s = share_bytes(8);
  DLManagedTensorVersioned copy = *s;
  copy.deleter = NULL;
  CHECK_EQ_INT(dlb_tensor_is_shared(&copy), 0);
  dlb_tensor_release(t);
  dlb_tensor_release(s);
}

DLB_TEST(share_alloc_refuses_bad_arguments) {
  DLManagedTensorVersioned *t = NULL;
  int64_t neg = -1;
  CHECK_STATUS(dlb_shared_alloc(share_u8, 1, &neg, &t), DLB_E_LAYOUT);
  CHECK_STATUS(dlb_shared_alloc(share_u8, 65, &neg, &t), DLB_E_LAYOUT);
  CHECK_STATUS(dlb_shared_alloc(share_u8, 1, NULL, &t), DLB_E_INVAL);
  CHECK_STATUS(dlb_shared_alloc((DLDataType){kDLFloat, 7, 1}, 1, &neg, &t),
               DLB_E_DTYPE);
  int64_t huge[2] = {INT64_MAX / 2, 3};
  CHECK_STATUS(dlb_shared_alloc(share_u8, 2, huge, &t), DLB_E_OVERFLOW);
  int64_t big = INT64_MAX - 4096;
  CHECK_STATUS(dlb_shared_alloc(share_u8, 1, &big, &t), DLB_E_OVERFLOW);
  CHECK_STATUS(dlb_shared_alloc(share_u8, 1, &neg, NULL), DLB_E_INVAL);
  CHECK(t == NULL);
}

DLB_TEST(share_roundtrip_in_process_sees_writes_both_ways) {
  int64_t shape[2] = {4, 6};
  DLManagedTensorVersioned *t = NULL;
  CHECK_OK(dlb_shared_alloc(share_i32, 2, shape, &t));
  int32_t *a = t->dl_tensor.data;
  for (int i = 0; i < 24; i++) a[i] = i * 7;
  share_handle h = share_export(t);
  CHECK(h.fd >= 0);
  CHECK(h.len <= DLB_SHARE_HANDLE_MAX);
  CHECK_EQ_INT(fcntl(h.fd, F_GETFD) & FD_CLOEXEC, FD_CLOEXEC);
  DLManagedTensorVersioned *u = NULL;
  CHECK_OK(dlb_share_import(h.bytes, h.len, h.fd, 0, &u));
  /* The caller still owns its descriptor. */
  CHECK(fcntl(h.fd, F_GETFD) >= 0);
  close(h.fd);
  CHECK(u->dl_tensor.data != t->dl_tensor.data);
  CHECK_EQ_INT(dlb_tensor_is_shared(u), 1);
  CHECK_EQ_INT(u->flags, 0);
  CHECK_EQ_INT(u->dl_tensor.ndim, 2);
  CHECK_EQ_INT(u->dl_tensor.shape[1], 6);
  int32_t *b = u->dl_tensor.data;
  for (int i = 0; i < 24; i++) CHECK_EQ_INT(b[i], i * 7);
  b[5] = -1;
  CHECK_EQ_INT(a[5], -1);
  a[23] = 99;
  CHECK_EQ_INT(b[23], 99);
  /* The exporter may go first: the import keeps the memory. */
  dlb_tensor_release(t);
  CHECK_EQ_INT(b[23], 99);
  dlb_tensor_release(u);
}

DLB_TEST(share_view_exports_its_strides_and_offset) {
  int64_t shape[2] = {5, 8};
  DLManagedTensorVersioned *t = NULL;
  CHECK_OK(dlb_shared_alloc(share_i32, 2, shape, &t));
  int32_t *a = t->dl_tensor.data;
  for (int i = 0; i < 40; i++) a[i] = i;
  /* Rows 4, 2, 0 backwards, every third column: negative and wide strides
   * and an offset into the memory. */
  dlb_slice sl[2] = {{4, DLB_SLICE_DEFAULT, -2}, {1, 8, 3}};
  DLManagedTensorVersioned *v = NULL;
  CHECK_OK(dlb_tensor_slice(t, 2, sl, &v));
  share_handle h = share_export(v);
  DLManagedTensorVersioned *u = NULL;
  CHECK_OK(dlb_share_import(h.bytes, h.len, h.fd, 0, &u));
  close(h.fd);
  CHECK_EQ_INT(u->dl_tensor.shape[0], 3);
  CHECK_EQ_INT(u->dl_tensor.shape[1], 3);
  CHECK_EQ_INT(u->dl_tensor.strides[0], -16);
  CHECK_EQ_INT(u->dl_tensor.strides[1], 3);
  const char *base = (const char *)u->dl_tensor.data + u->dl_tensor.byte_offset;
  for (int r = 0; r < 3; r++)
    for (int c = 0; c < 3; c++) {
      int32_t x;
      memcpy(&x, base + 4 * (r * -16 + c * 3), 4);
      CHECK_EQ_INT(x, (4 - 2 * r) * 8 + 1 + 3 * c);
    }
  dlb_tensor_release(u);
  dlb_tensor_release(v);
  dlb_tensor_release(t);
}

/* A tensor of DLB_MAX_NDIM dimensions (the longest handle) whose elements
 * fill its memory's data region to the last byte round-trips. */
DLB_TEST(share_most_dimensions_filling_the_region_round_trip) {
  int64_t shape[DLB_MAX_NDIM];
  for (int32_t d = 0; d < DLB_MAX_NDIM; d++) shape[d] = 1;
  shape[DLB_MAX_NDIM - 1] = 4096;
  DLManagedTensorVersioned *t = NULL, *u = NULL;
  CHECK_OK(dlb_shared_alloc(share_u8, DLB_MAX_NDIM, shape, &t));
  uint8_t *a = t->dl_tensor.data;
  a[0] = 1;
  a[4095] = 2;
  share_handle h = share_export(t);
  CHECK(h.len <= DLB_SHARE_HANDLE_MAX);
  CHECK_OK(dlb_share_import(h.bytes, h.len, h.fd, 0, &u));
  close(h.fd);
  CHECK_EQ_INT(u->dl_tensor.ndim, DLB_MAX_NDIM);
  for (int32_t d = 0; d < DLB_MAX_NDIM; d++) {
    CHECK_EQ_INT(u->dl_tensor.shape[d], shape[d]);
    CHECK_EQ_INT(u->dl_tensor.strides[d], t->dl_tensor.strides[d]);
  }
  const uint8_t *b = u->dl_tensor.data;
  CHECK_EQ_INT(b[u->dl_tensor.byte_offset], 1);
  CHECK_EQ_INT(b[u->dl_tensor.byte_offset + 4095], 2);
  dlb_tensor_release(u);
  dlb_tensor_release(t);
}

DLB_TEST(share_empty_tensor_round_trips) {
  int64_t shape[2] = {0, 5};
  DLManagedTensorVersioned *t = NULL;
  CHECK_OK(dlb_shared_alloc(share_i32, 2, shape, &t));
  CHECK(t->dl_tensor.data != NULL);
  int64_t none = 0;
  DLManagedTensorVersioned *z = NULL;
  CHECK_OK(dlb_shared_alloc(share_i32, 0, &none, &z));
  share_handle h = share_export(t);
  DLManagedTensorVersioned *u = NULL;
  CHECK_OK(dlb_share_import(h.bytes, h.len, h.fd, 0, &u));
  close(h.fd);
  CHECK_EQ_INT(u->dl_tensor.shape[0], 0);
  CHECK_EQ_INT(u->dl_tensor.shape[1], 5);
  CHECK(u->dl_tensor.data != NULL);
  share_handle g = share_export(z);
  DLManagedTensorVersioned *w = NULL;
  CHECK_OK(dlb_share_import(g.bytes, g.len, g.fd, 0, &w));
  close(g.fd);
  CHECK_EQ_INT(w->dl_tensor.ndim, 0);
  *(int32_t *)z->dl_tensor.data = 5;
  CHECK_EQ_INT(*(int32_t *)w->dl_tensor.data, 5);
  dlb_tensor_release(t);
  dlb_tensor_release(u);
  dlb_tensor_release(z);
  dlb_tensor_release(w);
}

/* An empty tensor of shared memory may say any data and byte_offset: it
 * goes out at the region's start, and the handle imports. */
DLB_TEST(share_empty_tensor_anywhere_exports_at_the_start) {
  int64_t shape[1] = {0};
  DLManagedTensorVersioned *t = NULL, *r = NULL, *u = NULL;
  CHECK_OK(dlb_shared_alloc(share_i32, 1, shape, &t));
  static const struct {
    uintptr_t data;
    uint64_t byte_offset;
  } places[] = {{0, 0},
                {(uintptr_t)0x7fffffffffff0000ull, 0x7000000000000000ull},
                {(uintptr_t)0x10, 0}};
  for (size_t i = 0; i < sizeof places / sizeof places[0]; i++) {
    DLTensor d = t->dl_tensor;
    d.data = (void *)places[i].data;
    d.byte_offset = places[i].byte_offset;
    CHECK_OK(dlb_tensor_redescribe(t, &d, 0, &r));
    share_handle h = share_export(r);
    CHECK_OK(dlb_share_import(h.bytes, h.len, h.fd, 0, &u));
    close(h.fd);
    CHECK_EQ_INT(u->dl_tensor.shape[0], 0);
    CHECK_EQ_INT(u->dl_tensor.byte_offset, 0);
    dlb_tensor_release(u);
    dlb_tensor_release(r);
  }
  dlb_tensor_release(t);
}

/* The permissions /proc/self/maps gives the mapping holding p. */
static const char *mapping_perms(const void *p) {
  static char perms[8];
  FILE *f = fopen("/proc/self/maps", "r");
  CHECK(f != NULL);
  char line[512];
  perms[0] = '\0';
  while (fgets(line, sizeof line, f) != NULL) {
    unsigned long lo = 0, hi = 0;
    char pr[8];
    if (sscanf(line, "%lx-%lx %7s", &lo, &hi, pr) != 3) continue;
    if ((uintptr_t)p >= lo && (uintptr_t)p < hi) {
      snprintf(perms, sizeof perms, "%s", pr);
      break;
    }
  }
  fclose(f);
  return perms;
}

DLB_TEST(share_imports_of_one_memory_share_its_descriptor_and_mapping) {
  /* Many tensors over one memory (views of one base, sent one by one)
   * each held a descriptor and a mapping of the whole memory: a receiver
   * ran out of descriptors (EMFILE) after about RLIMIT_NOFILE of them.
   * Imports of memory mapped here already share both. */
  DLManagedTensorVersioned *t = share_bytes(3 * 4096);
  uint8_t *a = t->dl_tensor.data;
  a[5000] = 9;
  dlb_slice sl = {4096, 3 * 4096, 1};
  DLManagedTensorVersioned *view = NULL;
  CHECK_OK(dlb_tensor_slice(t, 1, &sl, &view));
  share_handle h = share_export(t), hv = share_export(view);
  int fds = dlb_test_count_fds();
  struct rlimit old;
  CHECK(getrlimit(RLIMIT_NOFILE, &old) == 0);
  struct rlimit low = {(rlim_t)fds + 32, old.rlim_max};
  CHECK(setrlimit(RLIMIT_NOFILE, &low) == 0);
  enum { N = 200 };
  DLManagedTensorVersioned *u[N];
  dlb_status st = DLB_OK;
  int got = 0;
  for (; got < N && st == DLB_OK; got++) {
    share_handle *g = got % 2 ? &hv : &h;
    st = dlb_share_import(g->bytes, g->len, g->fd, 0, &u[got]);
    if (st != DLB_OK) break;
  }
  CHECK(setrlimit(RLIMIT_NOFILE, &old) == 0);
  CHECK_OK(st);
  CHECK_EQ_INT(got, N);
  CHECK_EQ_INT(dlb_test_count_fds(), fds + 1);
  /* One mapping: the view's data lies one page into the whole's. */
  CHECK((uint8_t *)u[1]->dl_tensor.data + u[1]->dl_tensor.byte_offset ==
        (uint8_t *)u[0]->dl_tensor.data + 4096);
  CHECK_EQ_INT(((uint8_t *)u[N - 1]->dl_tensor.data +
                u[N - 1]->dl_tensor.byte_offset)[5000 - 4096], 9);
  ((uint8_t *)u[0]->dl_tensor.data)[7] = 3;
  CHECK_EQ_INT(a[7], 3);
  /* Re-exports of the shared import carry the one memory. */
  share_handle again = share_export(u[N - 1]);
  DLManagedTensorVersioned *back = NULL;
  CHECK_OK(dlb_share_import(again.bytes, again.len, again.fd, 0, &back));
  close(again.fd);
  CHECK(back->dl_tensor.data == u[0]->dl_tensor.data);
  dlb_tensor_release(back);
  /* A read-only import of the same memory maps it apart, read-only. */
  view->flags = DLPACK_FLAG_BITMASK_READ_ONLY;
  share_handle r = share_export(view);
  DLManagedTensorVersioned *ro = NULL;
  CHECK_OK(dlb_share_import(r.bytes, r.len, r.fd, 0, &ro));
  close(r.fd);
  CHECK_STR(mapping_perms(ro->dl_tensor.data), "r--s");
  CHECK_STR(mapping_perms(u[0]->dl_tensor.data), "rw-s");
  CHECK_EQ_INT(dlb_test_count_fds(), fds + 2);
  /* The memory goes with the last tensor over it, in any order. */
  for (int i = 0; i < N; i += 2) dlb_tensor_release(u[i]);
  CHECK_EQ_INT(((uint8_t *)u[1]->dl_tensor.data)[7], 3);
  CHECK_EQ_INT(dlb_test_count_fds(), fds + 2);
  for (int i = 1; i < N; i += 2) dlb_tensor_release(u[i]);
  dlb_tensor_release(ro);
  CHECK_EQ_INT(dlb_test_count_fds(), fds);
  close(h.fd);
  close(hv.fd);
  dlb_tensor_release(view);
  dlb_tensor_release(t);
}

DLB_TEST(share_read_only_stays_read_only) {
  DLManagedTensorVersioned *t = share_bytes(100);
  ((uint8_t *)t->dl_tensor.data)[7] = 42;
  t->flags = DLPACK_FLAG_BITMASK_READ_ONLY;
  share_handle h = share_export(t);
  /* The descriptor itself is read-only: nobody can map it writable. */
  CHECK_EQ_INT(fcntl(h.fd, F_GETFL) & O_ACCMODE, O_RDONLY);
  CHECK(mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_SHARED, h.fd, 4096) ==
        MAP_FAILED);
  DLManagedTensorVersioned *u = NULL;
  CHECK_OK(dlb_share_import(h.bytes, h.len, h.fd, 0, &u));
  CHECK_EQ_INT(u->flags, DLPACK_FLAG_BITMASK_READ_ONLY);
  CHECK_EQ_INT(((uint8_t *)u->dl_tensor.data)[7], 42);
  /* Re-exporting the import works read-only, and refuses writable. */
  share_handle g = share_export(u);
  close(g.fd);
  u->flags = 0;
  size_t len = 0;
  int fd = -1;
  uint8_t buf[DLB_SHARE_HANDLE_MAX];
  CHECK_STATUS(dlb_share_export(u, buf, sizeof buf, &len, &fd), DLB_E_READONLY);
  CHECK_ERROR_MENTIONS("imported read-only");
  u->flags = DLPACK_FLAG_BITMASK_READ_ONLY;
  /* The mapping itself is read-only (and shared). */
  CHECK_STR(mapping_perms(u->dl_tensor.data), "r--s");
  CHECK_STR(mapping_perms(t->dl_tensor.data), "rw-s");
  CHECK_EQ_INT(((uint8_t *)t->dl_tensor.data)[7], 42);
  close(h.fd);
  dlb_tensor_release(u);
  dlb_tensor_release(t);
}

/* A read-only descriptor alone would not do: any process can open
 * /proc/self/fd/N of it again for writing. */
DLB_TEST(share_read_only_cannot_be_reopened_writable) {
  DLManagedTensorVersioned *t = share_bytes(100);
  DLManagedTensorVersioned *w = NULL;
  CHECK_OK(dlb_tensor_share(t, &w));
  /* A writable share made before keeps writing after the read-only one. */
  share_handle hw = share_export(w);
  DLManagedTensorVersioned *earlier = NULL;
  CHECK_OK(dlb_share_import(hw.bytes, hw.len, hw.fd, 0, &earlier));
  t->flags = DLPACK_FLAG_BITMASK_READ_ONLY;
  share_handle h = share_export(t);
  char path[64];
  snprintf(path, sizeof path, "/proc/self/fd/%d", h.fd);
  int rw = open(path, O_RDWR | O_CLOEXEC);
  if (rw >= 0) {
    CHECK(mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_SHARED, rw, 4096) ==
          MAP_FAILED);
    uint8_t one = 1;
    CHECK(pwrite(rw, &one, 1, 4096 + 7) < 0);
    close(rw);
  }
  DLManagedTensorVersioned *u = NULL;
  CHECK_OK(dlb_share_import(h.bytes, h.len, h.fd, 0, &u));
  /* The existing writable mappings still write, and the reader sees it. */
  ((uint8_t *)w->dl_tensor.data)[7] = 42;
  ((uint8_t *)earlier->dl_tensor.data)[8] = 43;
  CHECK_EQ_INT(((uint8_t *)u->dl_tensor.data)[7], 42);
  CHECK_EQ_INT(((uint8_t *)u->dl_tensor.data)[8], 43);
  /* No new writable share of the memory can be made, nor imported. */
  uint8_t buf[DLB_SHARE_HANDLE_MAX];
  size_t len = 0;
  int fd = -1;
  CHECK_STATUS(dlb_share_export(w, buf, sizeof buf, &len, &fd),
               DLB_E_READONLY);
  CHECK_ERROR_MENTIONS("shared read-only before");
  CHECK_EQ_INT(fd, -1);
  DLManagedTensorVersioned *again = NULL;
  CHECK_STATUS(dlb_share_import(hw.bytes, hw.len, hw.fd, 0, &again),
               DLB_E_HANDLE);
  CHECK_ERROR_MENTIONS("sealed against writes");
  /* Exporting read-only again is fine. */
  share_handle h2 = share_export(t);
  close(h2.fd);
  close(h.fd);
  close(hw.fd);
  dlb_tensor_release(u);
  dlb_tensor_release(earlier);
  dlb_tensor_release(w);
  dlb_tensor_release(t);
}

DLB_TEST(share_export_refuses_unshared_tensors) {
  int64_t n = 8;
  DLManagedTensorVersioned *t = NULL;
  CHECK_OK(dlb_tensor_alloc((DLDevice){kDLCPU, 0}, share_u8, 1, &n, &t));
  uint8_t buf[DLB_SHARE_HANDLE_MAX];
  size_t len = 77;
  int fd = 77;
  CHECK_STATUS(dlb_share_export(t, buf, sizeof buf, &len, &fd), DLB_E_INVAL);
  CHECK_ERROR_MENTIONS("not shared memory");
  CHECK_ERROR_MENTIONS("dlb_shared_alloc");
  CHECK_EQ_INT(len, 77);
  CHECK_EQ_INT(fd, 77);
  DLManagedTensorVersioned *s = share_bytes(8);
  CHECK_STATUS(dlb_share_export(s, buf, 207, &len, &fd), DLB_E_RANGE);
  CHECK_ERROR_MENTIONS("needs 224 bytes");
  CHECK_STATUS(dlb_share_export(NULL, buf, sizeof buf, &len, &fd),
               DLB_E_INVAL);
  CHECK_STATUS(dlb_share_export(s, buf, sizeof buf, &len, NULL), DLB_E_INVAL);
  /* A struct rewritten after allocation must not export outside the
   * memory. */
  s->dl_tensor.shape[0] = 5000;
  CHECK_STATUS(dlb_share_export(s, buf, sizeof buf, &len, &fd), DLB_E_LAYOUT);
  CHECK_ERROR_MENTIONS("of a 4096-byte shared region");
  /* Or one byte before it. */
  s->dl_tensor.shape[0] = 2;
  s->dl_tensor.strides[0] = -1;
  CHECK_STATUS(dlb_share_export(s, buf, sizeof buf, &len, &fd), DLB_E_LAYOUT);
  CHECK_ERROR_MENTIONS("occupy bytes [-1, 1) of a 4096-byte shared region");
  s->dl_tensor.strides[0] = 1;
  s->dl_tensor.shape[0] = 8;
  CHECK_EQ_INT(fd, 77);
  dlb_tensor_release(s);
  dlb_tensor_release(t);
}

DLB_TEST(share_success_leaves_last_error_alone) {
  DLManagedTensorVersioned *t = NULL;
  CHECK_STATUS(dlb_shared_alloc(share_u8, 1, NULL, &t), DLB_E_INVAL);
  char before[256];
  snprintf(before, sizeof before, "%s", dlb_last_error());
  DLManagedTensorVersioned *s = share_bytes(10);
  share_handle h = share_export(s);
  DLManagedTensorVersioned *u = NULL;
  CHECK_OK(dlb_share_import(h.bytes, h.len, h.fd, 0, &u));
  CHECK_STR(dlb_last_error(), before);
  close(h.fd);
  dlb_tensor_release(u);
  dlb_tensor_release(s);
}

/* A buffer of exactly the handle's size is enough; a byte less is not. */
DLB_TEST(share_export_fits_a_buffer_of_exactly_its_size) {
  DLManagedTensorVersioned *s = share_bytes(8);
  uint8_t buf[224];
  size_t len = 0;
  int fd = -1;
  CHECK_STATUS(dlb_share_export(s, buf, sizeof buf - 1, &len, &fd),
               DLB_E_RANGE);
  CHECK_OK(dlb_share_export(s, buf, sizeof buf, &len, &fd));
  CHECK_EQ_INT(len, sizeof buf);
  DLManagedTensorVersioned *u = NULL;
  CHECK_OK(dlb_share_import(buf, len, fd, 0, &u));
  CHECK(u->dl_tensor.data != NULL);
  CHECK_EQ_INT(u->dl_tensor.shape[0], 8);
  close(fd);
  dlb_tensor_release(u);
  dlb_tensor_release(s);
}

/* A tensor that fails validation is refused for what is wrong with it,
 * before its ndim sizes the handle or its shape is read. */
DLB_TEST(share_export_validates_before_sizing_the_handle) {
  DLManagedTensorVersioned *s = share_bytes(8);
  uint8_t buf[DLB_SHARE_HANDLE_MAX];
  size_t len = 77;
  int fd = 77;
  /* One dimension too many: its handle would not fit DLB_SHARE_HANDLE_MAX,
   * but the tensor is the problem, not the buffer. */
  int64_t shape[DLB_MAX_NDIM + 1];
  for (int d = 0; d <= DLB_MAX_NDIM; d++) shape[d] = 1;
  DLTensor desc = {s->dl_tensor.data, {kDLCPU, 0}, DLB_MAX_NDIM + 1, share_u8,
                   shape, NULL, 0};
  DLManagedTensorVersioned many = {{1, 3}, NULL, NULL, 0, desc};
  CHECK_STATUS(dlb_share_export(&many, buf, sizeof buf, &len, &fd),
               DLB_E_LAYOUT);
  CHECK_ERROR_MENTIONS("ndim");
  /* No shape at all. */
  desc.ndim = 1;
  desc.shape = NULL;
  DLManagedTensorVersioned none = {{1, 3}, NULL, NULL, 0, desc};
  CHECK_STATUS(dlb_share_export(&none, buf, sizeof buf, &len, &fd),
               DLB_E_LAYOUT);
  CHECK_ERROR_MENTIONS("shape is NULL");
  CHECK_EQ_INT(len, 77);
  CHECK_EQ_INT(fd, 77);
  dlb_tensor_release(s);
}

/* Descriptor 0 is a descriptor like any other (a process started with
 * stdin closed may get its memory there). */
DLB_TEST(share_import_takes_descriptor_0) {
  DLManagedTensorVersioned *s = share_bytes(8);
  ((uint8_t *)s->dl_tensor.data)[3] = 42;
  share_handle h = share_export(s);
  int saved = dup(0);
  CHECK(saved >= 0);
  CHECK(dup2(h.fd, 0) == 0);
  DLManagedTensorVersioned *u = NULL;
  CHECK_OK(dlb_share_import(h.bytes, h.len, 0, 0, &u));
  CHECK_EQ_INT(((uint8_t *)u->dl_tensor.data)[3], 42);
  CHECK(dup2(saved, 0) == 0);
  close(saved);
  close(h.fd);
  dlb_tensor_release(u);
  dlb_tensor_release(s);
}

static uint64_t le64(const uint8_t *p) {
  uint64_t v = 0;
  for (int i = 0; i < 8; i++) v |= (uint64_t)p[i] << (8 * i);
  return v;
}

/* The header page other processes read before they believe a handle:
 * magic, version 1, the identity the handle carries, where the data
 * starts and how many bytes of it follow, and zeros everywhere else. */
DLB_TEST(share_memory_header_page_layout) {
  const size_t page = (size_t)sysconf(_SC_PAGESIZE);
  DLManagedTensorVersioned *s = share_bytes((int64_t)page + 1);
  share_handle h = share_export(s);
  uint8_t *hdr = malloc(page);
  CHECK(hdr != NULL);
  CHECK(pread(h.fd, hdr, page, 0) == (ssize_t)page);
  CHECK(memcmp(hdr, DLB__SHM_MAGIC, 8) == 0);
  CHECK_EQ_INT(hdr[8], 1);
  CHECK(memcmp(hdr + 16, h.bytes + 64, DLB__SHARE_ID_BYTES) == 0);
  CHECK_EQ_INT(le64(hdr + 32), page);
  CHECK_EQ_INT(le64(hdr + 40), 2 * page);
  for (size_t i = 9; i < page; i++)
    if (i < 16 || i >= DLB__SHM_HEADER_BYTES) CHECK_EQ_INT(hdr[i], 0);
  free(hdr);
  close(h.fd);
  dlb_tensor_release(s);
}

/* The system refusing the memory (here a file size limit, which
 * ftruncate obeys) is a status naming the limit, and the descriptor made
 * for it is closed again. */
DLB_TEST(share_alloc_refused_by_the_system_leaves_no_descriptor) {
  /* SIGXFSZ keeps its default action, which would end this process:
   * the limit is checked before ftruncate could raise it. */
  struct rlimit lim;
  CHECK(getrlimit(RLIMIT_FSIZE, &lim) == 0);
  struct rlimit low = {1 << 20, lim.rlim_max};
  CHECK(setrlimit(RLIMIT_FSIZE, &low) == 0);
  int fds = dlb_test_count_fds();
  int64_t n = 2 << 20;
  DLManagedTensorVersioned *t = NULL;
  CHECK_STATUS(dlb_shared_alloc(share_u8, 1, &n, &t), DLB_E_SYSTEM);
  char says[160];
  snprintf(says, sizeof says, "shared memory of %lld bytes (a page of "
           "header and the data) exceeds this process's file size limit, "
           "1048576 bytes (RLIMIT_FSIZE)", (long long)(n + sysconf(_SC_PAGESIZE)));
  CHECK_ERROR_MENTIONS(says);
  CHECK(t == NULL);
  CHECK_EQ_INT(dlb_test_count_fds(), fds);
  /* With stdin closed the memory gets descriptor 0, closed all the same. */
  int saved = dup(0);
  CHECK(saved >= 0);
  CHECK(close(0) == 0);
  fds = dlb_test_count_fds();
  CHECK_STATUS(dlb_shared_alloc(share_u8, 1, &n, &t), DLB_E_SYSTEM);
  CHECK_EQ_INT(dlb_test_count_fds(), fds);
  CHECK(dup2(saved, 0) == 0);
  close(saved);
  CHECK(setrlimit(RLIMIT_FSIZE, &lim) == 0);
}

/* More shared memory than the system has is refused at once: reserved,
 * it would run the system out of memory, whose killer picks any process. */
DLB_TEST(share_alloc_past_the_available_memory_is_nomem) {
  int fds = dlb_test_count_fds();
  int64_t n = (int64_t)1 << 50;
  DLManagedTensorVersioned *t = NULL;
  CHECK_STATUS(dlb_shared_alloc(share_u8, 1, &n, &t), DLB_E_NOMEM);
  CHECK_ERROR_MENTIONS("exceeds the memory this system has available");
  CHECK_ERROR_MENTIONS("(MemAvailable and SwapFree in /proc/meminfo)");
  CHECK(t == NULL);
  CHECK_EQ_INT(dlb_test_count_fds(), fds);
}

/* This process's address space in bytes (VmSize). */
static uint64_t address_space_bytes(void) {
  FILE *f = fopen("/proc/self/status", "r");
  CHECK(f != NULL);
  char line[256];
  unsigned long long kb = 0;
  while (fgets(line, sizeof line, f) != NULL)
    if (sscanf(line, "VmSize: %llu kB", &kb) == 1) break;
  fclose(f);
  CHECK(kb > 0);
  return (uint64_t)kb * 1024;
}

/* Memory that cannot be mapped for want of address space is a shortage,
 * DLB_E_NOMEM, and the import's own descriptor is closed again. */
DLB_TEST(share_import_without_address_space_is_nomem) {
  /* Sanitizers and valgrind reserve address space of their own as they
   * go: a limit near the current size would fail them, not the import. */
  if (dlb_test_limit_scale() != 1) return;
  DLManagedTensorVersioned *s = share_bytes(8 << 20);
  share_handle h = share_export(s);
  int fds = dlb_test_count_fds();
  struct rlimit lim;
  CHECK(getrlimit(RLIMIT_AS, &lim) == 0);
  struct rlimit low = {address_space_bytes() + (1 << 20), lim.rlim_max};
  CHECK(setrlimit(RLIMIT_AS, &low) == 0);
  DLManagedTensorVersioned *u = NULL;
  dlb_status st = dlb_share_import(h.bytes, h.len, h.fd, 0, &u);
  CHECK(setrlimit(RLIMIT_AS, &lim) == 0);
  CHECK_STATUS(st, DLB_E_NOMEM);
  CHECK_ERROR_MENTIONS("mapping the received shared memory");
  CHECK(u == NULL);
  CHECK_EQ_INT(dlb_test_count_fds(), fds);
  close(h.fd);
  dlb_tensor_release(s);
}
