/* test_share_hostile.c -- handles are untrusted input: every kind of
 * malformed handle and unsuitable descriptor is refused with
 * DLB_E_HANDLE and a message naming what is wrong, and random damage
 * never crashes or maps out of bounds. */
#include <sys/mman.h>
#include <sys/stat.h>

#include "share/share_internal.h"
#include "share_util.h"

/* A shared uint8[100] tensor and its handle. */
typedef struct fixture {
  DLManagedTensorVersioned *t;
  share_handle h;
} fixture;

static fixture fixture_new(void) {
  fixture f;
  f.t = share_bytes(100);
  f.h = share_export(f.t);
  return f;
}

static void fixture_free(fixture *f) {
  close(f->h.fd);
  dlb_tensor_release(f->t);
}

static void put(uint8_t *b, size_t off, uint64_t v, int n) {
  for (int i = 0; i < n; i++) b[off + (size_t)i] = (uint8_t)(v >> (8 * i));
}

/* Imports bytes (len) with fd and expects DLB_E_HANDLE mentioning why,
 * the out-parameter untouched and no descriptor left behind. */
static void expect_refused(const uint8_t *bytes, size_t len, int fd,
                           const char *why) {
  int fds = dlb_test_count_fds();
  DLManagedTensorVersioned *u = (DLManagedTensorVersioned *)(uintptr_t)1;
  CHECK_STATUS(dlb_share_import(bytes, len, fd, 0, &u), DLB_E_HANDLE);
  CHECK_ERROR_MENTIONS(why);
  CHECK_ERROR_MENTIONS("share handle: ");
  CHECK(u == (DLManagedTensorVersioned *)(uintptr_t)1);
  CHECK_EQ_INT(dlb_test_count_fds(), fds);
}

/* Changes n bytes at off of a fresh handle and expects a refusal. */
static void tamper(size_t off, uint64_t v, int n, const char *why) {
  fixture f = fixture_new();
  put(f.h.bytes, off, v, n);
  expect_refused(f.h.bytes, f.h.len, f.h.fd, why);
  fixture_free(&f);
}

DLB_TEST(share_hostile_truncated_and_oversized) {
  fixture f = fixture_new();
  CHECK_EQ_INT(f.h.len, 224);
  expect_refused(f.h.bytes, 0, f.h.fd, "0 bytes is truncated");
  expect_refused(f.h.bytes, 10, f.h.fd, "truncated");
  expect_refused(f.h.bytes, 223, f.h.fd, "224 bytes but 223 were given "
                 "(truncated)");
  expect_refused(f.h.bytes, 225, f.h.fd, "(oversized)");
  expect_refused(f.h.bytes, DLB_SHARE_HANDLE_MAX, f.h.fd, "(oversized)");
  /* 16 bytes hold the length field, which then disagrees. */
  expect_refused(f.h.bytes, 16, f.h.fd, "224 bytes but 16 were given "
                 "(truncated)");
  /* A handle cut short that gives its own short length is refused on that
   * length, before any field past it is read. */
  uint8_t *cut = malloc(20);
  CHECK(cut != NULL);
  memcpy(cut, f.h.bytes, 20);
  put(cut, 12, 20, 4);
  expect_refused(cut, 20, f.h.fd, "20 bytes; a handle has 208 to 1280");
  free(cut);
  fixture_free(&f);
}

DLB_TEST(share_hostile_foreign_and_newer) {
  tamper(0, 'X', 1, "not a dlbridge handle");
  tamper(8, 2, 2, "format version is 2; this library reads version 1");
  tamper(10, 300, 2, "fixed part is 300 bytes");
  tamper(12, 4000, 4, "says it is 4000 bytes");
  tamper(16, 7, 1, "kind is 7");
  tamper(16, 0, 1, "kind is 0");
  tamper(19, 1, 1, "reserved bytes");
  tamper(22, 1, 2, "reserved bytes");
  /* A host handle carries no runtime IPC handles: each byte of their area
   * is checked. */
  for (size_t off = 80; off < 208; off++)
    tamper(off, 0x5a, 1, "bytes 80..207 (the runtime IPC handles) are not "
           "zero");
}

DLB_TEST(share_hostile_tampered_fields) {
  tamper(24, 65, 4, "ndim is 65");
  tamper(24, (uint32_t)-1, 4, "ndim is -1");
  tamper(24, 2, 4, "224 bytes with ndim 2; expected 240");
  tamper(17, 200, 1, "dtype.code is 200");
  tamper(18, 0, 1, "dtype.bits is 0");
  tamper(20, 0, 2, "dtype.lanes is 0");
  tamper(28, 3, 4, "device_id is 3; host handles have 0");
  tamper(32, 1u << 10, 8, "not DLPack flags");
  tamper(208, (uint64_t)-5, 8, "shape[0] is -5");
}

DLB_TEST(share_hostile_out_of_bounds_geometry) {
  /* Elements past the end of the memory: by extent, stride, offset. */
  tamper(208, 4097, 8, "elements occupy bytes [0, 4097) of a 4096-byte "
         "region");
  tamper(216, 100, 8, "elements occupy bytes [0, 9901)");
  tamper(216, (uint64_t)-1, 8, "elements occupy bytes [-99, 1)");
  tamper(56, 4000, 8, "elements occupy bytes [4000, 4100)");
  {
    /* Backwards from byte 98: the last element one byte before the
     * region. */
    fixture f = fixture_new();
    put(f.h.bytes, 216, (uint64_t)-1, 8);
    put(f.h.bytes, 56, 98, 8);
    expect_refused(f.h.bytes, f.h.len, f.h.fd,
                   "elements occupy bytes [-1, 99)");
    fixture_free(&f);
  }
  tamper(56, (uint64_t)1 << 63, 8, "byte_offset is 9223372036854775808");
  /* Products and sums that overflow int64_t. */
  tamper(216, (uint64_t)1 << 62, 8, "overflow");
  {
    fixture f = fixture_new();
    put(f.h.bytes, 208, (uint64_t)1 << 62, 8);
    put(f.h.bytes, 216, 4, 8);
    expect_refused(f.h.bytes, f.h.len, f.h.fd, "overflow");
    fixture_free(&f);
  }
  /* An empty tensor whose offset lies past the region. */
  {
    fixture f = fixture_new();
    put(f.h.bytes, 208, 0, 8);
    put(f.h.bytes, 56, 5000, 8);
    expect_refused(f.h.bytes, f.h.len, f.h.fd, "[5000, 5000)");
    fixture_free(&f);
  }
}

DLB_TEST(share_hostile_sizes_disagree_with_the_memory) {
  tamper(40, 8192 * 4, 8, "memory size is 32768 but the memory received has "
         "8192 bytes");
  tamper(48, 100, 8, "data_offset is 100; must be a multiple");
  tamper(48, 8192, 8, "data_offset 8192 leaves no data in 8192 bytes");
  tamper(48, 0, 8, "data_offset is 0");
  /* A tensor of another size offered with this memory. */
  fixture f = fixture_new();
  DLManagedTensorVersioned *big = share_bytes(3 * 4096);
  share_handle g = share_export(big);
  expect_refused(g.bytes, g.len, f.h.fd, "memory size is 16384 but the "
                 "memory received has 8192 bytes");
  close(g.fd);
  dlb_tensor_release(big);
  fixture_free(&f);
}

DLB_TEST(share_hostile_replayed_with_other_memory) {
  fixture a = fixture_new();
  fixture b = fixture_new();
  /* Same size, other memory: the identity inside the memory differs. */
  expect_refused(a.h.bytes, a.h.len, b.h.fd, "replayed");
  /* A forged identity in the handle. */
  a.h.bytes[64] ^= 1;
  expect_refused(a.h.bytes, a.h.len, a.h.fd, "replayed");
  a.h.bytes[64] ^= 1;
  /* A changed header page start the memory's header contradicts. */
  DLManagedTensorVersioned *u = NULL;
  CHECK_OK(dlb_share_import(a.h.bytes, a.h.len, a.h.fd, 0, &u));
  dlb_tensor_release(u);
  fixture_free(&a);
  fixture_free(&b);
}

DLB_TEST(share_hostile_descriptors_that_are_not_sealed_shared_memory) {
  fixture f = fixture_new();
  int p[2];
  CHECK(pipe(p) == 0);
  expect_refused(f.h.bytes, f.h.len, p[0], "is not shared memory (file mode");
  close(p[0]);
  close(p[1]);
  int sv[2];
  share_socketpair(SOCK_STREAM, sv);
  expect_refused(f.h.bytes, f.h.len, sv[0], "is not shared memory");
  close(sv[0]);
  close(sv[1]);
  expect_refused(f.h.bytes, f.h.len, 9999, "fd 9999 is not an open "
                 "descriptor");
  /* An ordinary file of the right size. */
  char path[] = "/tmp/dlb-share-test-XXXXXX";
  int file = mkstemp(path);
  CHECK(file >= 0);
  unlink(path);
  CHECK(ftruncate(file, 8192) == 0);
  expect_refused(f.h.bytes, f.h.len, file, "fd");
  close(file);
  /* A memfd that could still shrink under the importer. */
  int loose = memfd_create("loose", MFD_CLOEXEC | MFD_ALLOW_SEALING);
  CHECK(loose >= 0);
  CHECK(ftruncate(loose, 8192) == 0);
  expect_refused(f.h.bytes, f.h.len, loose, "not sealed against shrinking");
  CHECK(fcntl(loose, F_ADD_SEALS, F_SEAL_SHRINK) == 0);
  expect_refused(f.h.bytes, f.h.len, loose, "seals 0x2");
  CHECK(fcntl(loose, F_ADD_SEALS, F_SEAL_GROW) == 0);
  /* Sealed, but not ours: no header. */
  expect_refused(f.h.bytes, f.h.len, loose, "no dlbridge header");
  close(loose);
  int unsealable = memfd_create("unsealable", MFD_CLOEXEC);
  CHECK(unsealable >= 0);
  CHECK(ftruncate(unsealable, 8192) == 0);
  expect_refused(f.h.bytes, f.h.len, unsealable, "not sealed");
  close(unsealable);
  fixture_free(&f);
}

DLB_TEST(share_hostile_writable_handle_with_read_only_fd) {
  DLManagedTensorVersioned *t = share_bytes(100);
  t->flags = DLPACK_FLAG_BITMASK_READ_ONLY;
  share_handle h = share_export(t);
  put(h.bytes, 32, 0, 8);
  expect_refused(h.bytes, h.len, h.fd, "the handle is writable but fd");
  close(h.fd);
  dlb_tensor_release(t);
}

DLB_TEST(share_hostile_read_only_handle_with_writable_fd) {
  /* A read-only handle that came with a writable descriptor kept that
   * descriptor, and a read-only export of the import passed it on: its
   * receivers could map the memory writable. */
  DLManagedTensorVersioned *t = share_bytes(100);
  ((uint8_t *)t->dl_tensor.data)[3] = 5;
  share_handle h = share_export(t);
  CHECK_EQ_INT(fcntl(h.fd, F_GETFL) & O_ACCMODE, O_RDWR);
  put(h.bytes, 32, DLPACK_FLAG_BITMASK_READ_ONLY, 8);
  int fds = dlb_test_count_fds();
  DLManagedTensorVersioned *u = NULL;
  CHECK_OK(dlb_share_import(h.bytes, h.len, h.fd, 0, &u));
  CHECK_EQ_INT(dlb_test_count_fds(), fds + 1);
  CHECK_EQ_INT(u->flags, DLPACK_FLAG_BITMASK_READ_ONLY);
  CHECK_EQ_INT(((uint8_t *)u->dl_tensor.data)[3], 5);
  share_handle g = share_export(u);
  CHECK_EQ_INT(fcntl(g.fd, F_GETFL) & O_ACCMODE, O_RDONLY);
  CHECK(mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_SHARED, g.fd, 4096) ==
        MAP_FAILED);
  close(g.fd);
  close(h.fd);
  dlb_tensor_release(u);
  CHECK_EQ_INT(dlb_test_count_fds(), fds - 1);
  dlb_tensor_release(t);
}

DLB_TEST(share_hostile_kind_and_descriptor_mismatch) {
  fixture f = fixture_new();
  expect_refused(f.h.bytes, f.h.len, -1, "a host handle needs the memory's "
                 "descriptor; fd is -1");
  /* A foreign handle without a descriptor is called foreign, not a host
   * handle lacking its memory. */
  f.h.bytes[7] = 'X';
  expect_refused(f.h.bytes, f.h.len, -1, "not a dlbridge handle");
  f.h.bytes[7] = 'E';
  /* A well-formed device handle offered with a descriptor. */
  put(f.h.bytes, 16, 2, 1);
  put(f.h.bytes, 40, 100, 8);
  put(f.h.bytes, 48, 0, 8);
  expect_refused(f.h.bytes, f.h.len, f.h.fd, "device handles carry no "
                 "descriptor");
  fixture_free(&f);
}

DLB_TEST(share_hostile_import_arguments) {
  fixture f = fixture_new();
  DLManagedTensorVersioned *u = NULL;
  CHECK_STATUS(dlb_share_import(f.h.bytes, f.h.len, f.h.fd, 0x4, &u),
               DLB_E_INVAL);
  CHECK_STATUS(dlb_share_import(f.h.bytes, f.h.len, f.h.fd,
                                DLB_SHARE_PIN_CUDA | DLB_SHARE_PIN_ROCM, &u),
               DLB_E_INVAL);
  CHECK_STATUS(dlb_share_import(NULL, 10, f.h.fd, 0, &u), DLB_E_INVAL);
  CHECK_STATUS(dlb_share_import(f.h.bytes, f.h.len, f.h.fd, 0, NULL),
               DLB_E_INVAL);
  CHECK(u == NULL);
  fixture_free(&f);
}

/* Random damage: never a crash, and whatever is accepted lies inside the
 * memory (every byte of it is read). */
DLB_TEST(share_hostile_random_damage) {
  int64_t shape[3] = {3, 4, 5};
  DLManagedTensorVersioned *t = NULL;
  CHECK_OK(dlb_shared_alloc(share_i32, 3, shape, &t));
  share_handle h = share_export(t);
  uint64_t seed = 12345;
  int accepted = 0;
  for (int iter = 0; iter < 20000; iter++) {
    uint8_t b[DLB_SHARE_HANDLE_MAX];
    memcpy(b, h.bytes, h.len);
    int flips = 1 + iter % 4;
    for (int k = 0; k < flips; k++) {
      seed = seed * 6364136223846793005ULL + 1442695040888963407ULL;
      size_t at = (size_t)(seed >> 33) % h.len;
      b[at] = (uint8_t)(seed >> 17);
    }
    DLManagedTensorVersioned *u = NULL;
    dlb_status st = dlb_share_import(b, h.len, h.fd, 0, &u);
    if (st != DLB_OK) {
      CHECK(u == NULL);
      CHECK(dlb_last_error()[0] != '\0');
      continue;
    }
    accepted++;
    int64_t lo = 0, hi = 0;
    CHECK_OK(dlb_tensor_byte_span(&u->dl_tensor, &lo, &hi));
    volatile const uint8_t *d = u->dl_tensor.data;
    unsigned sum = 0;
    for (int64_t i = lo; i < hi; i++) sum += d[i];
    (void)sum;
    dlb_tensor_release(u);
  }
  /* Some damage is harmless (shape 3 -> 2, a flag bit): accepted. */
  CHECK(accepted > 0);
  close(h.fd);
  dlb_tensor_release(t);
}

DLB_TEST(share_hostile_device_handle_fields) {
  fixture f = fixture_new();
  /* A device handle (no descriptor) with host-only or broken fields. */
  put(f.h.bytes, 16, 2, 1);
  expect_refused(f.h.bytes, f.h.len, -1, "data_offset is 4096; device "
                 "handles have 0");
  put(f.h.bytes, 48, 0, 8);
  put(f.h.bytes, 28, (uint32_t)-1, 4);
  expect_refused(f.h.bytes, f.h.len, -1, "device_id is -1");
  put(f.h.bytes, 28, 0, 4);
  put(f.h.bytes, 40, 0, 8);
  expect_refused(f.h.bytes, f.h.len, -1, "allocation size is 0");
  put(f.h.bytes, 40, 99, 8);
  expect_refused(f.h.bytes, f.h.len, -1, "elements occupy bytes [0, 100) of "
                 "a 99-byte region");
  put(f.h.bytes, 40, (uint64_t)1 << 63, 8);
  expect_refused(f.h.bytes, f.h.len, -1,
                 "allocation size is 9223372036854775808; must be "
                 "1..2^63-1");
  /* The largest size is a valid device handle. */
  put(f.h.bytes, 40, (uint64_t)INT64_MAX, 8);
  dlb__share_meta m;
  CHECK_OK(dlb__share_decode(f.h.bytes, f.h.len, 0, &m));
  CHECK_EQ_INT(m.size, INT64_MAX);
  CHECK_EQ_INT(m.kind, DLB__SHARE_CUDA);
  fixture_free(&f);
}

DLB_TEST(share_hostile_data_offset_against_the_memory_header) {
  /* Three pages of file: a handle may claim the data starts a page later,
   * which its sizes allow but the memory's own header contradicts. */
  DLManagedTensorVersioned *t = share_bytes(2 * 4096);
  share_handle h = share_export(t);
  put(h.bytes, 208, 100, 8);
  put(h.bytes, 48, 8192, 8);
  expect_refused(h.bytes, h.len, h.fd, "data_offset is 8192 but the memory's "
                 "header says 4096");
  close(h.fd);
  dlb_tensor_release(t);
}

/* A handle whose last byte is the last readable byte: the decoder reads
 * nothing past the length it is given, whole or cut short. */
DLB_TEST(share_hostile_handle_at_the_end_of_readable_memory) {
  fixture f = fixture_new();
  const size_t page = (size_t)sysconf(_SC_PAGESIZE);
  uint8_t *m = mmap(NULL, 2 * page, PROT_READ | PROT_WRITE,
                    MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  CHECK(m != MAP_FAILED);
  CHECK(mprotect(m + page, page, PROT_NONE) == 0);
  uint8_t *end = m + page;
  memcpy(end - f.h.len, f.h.bytes, f.h.len);
  DLManagedTensorVersioned *u = NULL;
  CHECK_OK(dlb_share_import(end - f.h.len, f.h.len, f.h.fd, 0, &u));
  CHECK_EQ_INT(u->dl_tensor.shape[0], 100);
  dlb_tensor_release(u);
  for (size_t n = 0; n < 16; n++) {
    memcpy(end - n, f.h.bytes, n);
    expect_refused(end - n, n, f.h.fd, "is truncated");
  }
  CHECK(munmap(m, 2 * page) == 0);
  fixture_free(&f);
}

/* Sealed memory of size bytes with a dlbridge header giving identity id
 * and data_offset off, as a hostile sender could make it. */
static int forged_memory(uint64_t size, uint64_t off, const uint8_t *id) {
  int fd = memfd_create("forged", MFD_CLOEXEC | MFD_ALLOW_SEALING);
  CHECK(fd >= 0);
  CHECK(ftruncate(fd, (off_t)size) == 0);
  uint8_t h[DLB__SHM_HEADER_BYTES];
  memset(h, 0, sizeof h);
  memcpy(h, DLB__SHM_MAGIC, 8);
  h[8] = 1;
  memcpy(h + 16, id, DLB__SHARE_ID_BYTES);
  put(h, 32, off, 8);
  put(h, 40, size - off, 8);
  CHECK(pwrite(fd, h, sizeof h, 0) == (ssize_t)sizeof h);
  CHECK(fcntl(fd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW) == 0);
  return fd;
}

/* The data may start at most 16 MiB into the memory, and must leave a
 * region after it, even for a tensor without elements; memory whose own
 * header agrees with the handle changes neither. */
DLB_TEST(share_hostile_data_offset_limits_with_agreeing_memory) {
  fixture f = fixture_new();
  const uint64_t page = (uint64_t)sysconf(_SC_PAGESIZE);
  const uint64_t most = (uint64_t)1 << 24;
  for (int k = 0; k < 2; k++) {
    const uint64_t off = most + (uint64_t)k * page;
    int fd = forged_memory(off + page, off, f.h.bytes + 64);
    put(f.h.bytes, 40, off + page, 8);
    put(f.h.bytes, 48, off, 8);
    if (k == 0) {
      DLManagedTensorVersioned *u = NULL;
      CHECK_OK(dlb_share_import(f.h.bytes, f.h.len, fd, 0, &u));
      CHECK_EQ_INT(((volatile uint8_t *)u->dl_tensor.data)[99], 0);
      dlb_tensor_release(u);
    } else {
      expect_refused(f.h.bytes, f.h.len, fd, "of at most 16 MiB");
    }
    close(fd);
  }
  /* Memory that is all header page: no region for even an empty tensor. */
  int fd = forged_memory(page, page, f.h.bytes + 64);
  put(f.h.bytes, 40, page, 8);
  put(f.h.bytes, 48, page, 8);
  put(f.h.bytes, 208, 0, 8);
  expect_refused(f.h.bytes, f.h.len, fd, "leaves no data in 4096 bytes");
  close(fd);
  fixture_free(&f);
}

/* A header of another version is no header this library can read. */
DLB_TEST(share_hostile_memory_header_of_another_version) {
  fixture f = fixture_new();
  const uint64_t page = (uint64_t)sysconf(_SC_PAGESIZE);
  int fd = forged_memory(2 * page, page, f.h.bytes + 64);
  DLManagedTensorVersioned *u = NULL;
  CHECK_OK(dlb_share_import(f.h.bytes, f.h.len, fd, 0, &u));
  dlb_tensor_release(u);
  const uint8_t two = 2;
  CHECK(pwrite(fd, &two, 1, 8) == 1);
  expect_refused(f.h.bytes, f.h.len, fd, "no dlbridge header");
  close(fd);
  fixture_free(&f);
}
