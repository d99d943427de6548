/* test_npy.c -- .npy files: headers of every format version and order
 * mapped without a copy, pinning, and hostile files refused by name. */
#include <errno.h>
#include <ftw.h>
#include <sys/stat.h>
#include <unistd.h>

#include "../emu/emu_fns.h"
#include "test.h"

static char dir[64];
/* Where the data of the last file write_npy() wrote starts. */
static size_t last_offset;

static int remove_one(const char *path, const struct stat *st, int flag,
                      struct FTW *ftw) {
  (void)st;
  (void)flag;
  (void)ftw;
  return remove(path);
}

static void remove_dir(void) { nftw(dir, remove_one, 8, FTW_DEPTH | FTW_PHYS); }

static void make_dir(void) {
  if (dir[0] != '\0') return;
  strcpy(dir, "/tmp/dlb_npy_XXXXXX");
  CHECK(mkdtemp(dir) != NULL);
  dlb_test_at_end(remove_dir);
}

/* Writes raw bytes to a file in the scratch folder; returns its path
 * (static storage, one at a time). */
static const char *write_raw(const char *name, const void *bytes, size_t n) {
  static char path[128];
  make_dir();
  snprintf(path, sizeof path, "%s/%s", dir, name);
  FILE *f = fopen(path, "wb");
  CHECK(f != NULL);
  CHECK(fwrite(bytes, 1, n, f) == n);
  CHECK(fclose(f) == 0);
  return path;
}

/* Writes a .npy file of version major with dictionary dict (padded with
 * spaces and a newline so the data starts at a multiple of 64, plus
 * extra_pad more bytes), then data_len bytes of data. */
static const char *write_npy(const char *name, int major, const char *dict,
                             size_t extra_pad, const void *data,
                             size_t data_len) {
  unsigned char buf[8192];
  size_t pre = major == 1 ? 10 : 12;
  size_t dl = strlen(dict);
  size_t total = (pre + dl + 1 + 63) / 64 * 64 + extra_pad;
  size_t hlen = total - pre;
  CHECK(total + data_len <= sizeof buf);
  memcpy(buf, "\x93NUMPY", 6);
  buf[6] = (unsigned char)major;
  buf[7] = 0;
  buf[8] = (unsigned char)(hlen & 0xff);
  buf[9] = (unsigned char)(hlen >> 8);
  if (major != 1) buf[10] = buf[11] = 0;
  memcpy(buf + pre, dict, dl);
  memset(buf + pre + dl, ' ', hlen - dl - 1);
  buf[total - 1] = '\n';
  if (data_len > 0) memcpy(buf + total, data, data_len);
  last_offset = total;
  return write_raw(name, buf, total + data_len);
}

static const float six[6] = {0, 1, 2, 3, 4, 5};

DLB_TEST(npy_maps_c_order_without_copy) {
  for (int major = 1; major <= 3; major++) {
    const char *path = write_npy("c.npy", major,
        "{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }", 0,
        six, sizeof six);
    dlb_clear_error();
    DLManagedTensorVersioned *t = NULL;
    CHECK_OK(dlb_tensor_map_npy(path, 0, &t));
    CHECK_STR(dlb_last_error(), "");
    const DLTensor *d = &t->dl_tensor;
    CHECK_EQ_INT(t->flags, DLPACK_FLAG_BITMASK_READ_ONLY);
    CHECK_EQ_INT(d->device.device_type, kDLCPU);
    CHECK_EQ_INT(d->ndim, 2);
    CHECK_EQ_INT(d->shape[0], 2);
    CHECK_EQ_INT(d->shape[1], 3);
    CHECK_EQ_INT(d->strides[0], 3);
    CHECK_EQ_INT(d->strides[1], 1);
    /* data is the first element, last_offset bytes into the mapping. */
    CHECK_EQ_INT(d->byte_offset, 0);
    CHECK_EQ_INT(last_offset % 64, 0);
    CHECK_EQ_INT((uintptr_t)d->data % 4096, last_offset % 4096);
    CHECK(dlb_tensor_is_c_contiguous(d));
    const float *v = (const float *)d->data;
    for (int i = 0; i < 6; i++) CHECK(v[i] == six[i]);
    /* The mapping outlives the file. */
    CHECK(unlink(path) == 0);
    CHECK(v[5] == 5.0f);
    dlb_tensor_release(t);
  }
}

DLB_TEST(npy_maps_fortran_order) {
  const char *path = write_npy("f.npy", 1,
      "{'descr': '<f4', 'fortran_order': True, 'shape': (2, 3), }", 0, six,
      sizeof six);
  DLManagedTensorVersioned *t = NULL;
  CHECK_OK(dlb_tensor_map_npy(path, 0, &t));
  CHECK_EQ_INT(t->dl_tensor.strides[0], 1);
  CHECK_EQ_INT(t->dl_tensor.strides[1], 2);
  CHECK(dlb_tensor_is_f_contiguous(&t->dl_tensor));
  /* A view shares the mapping and keeps it after the base goes. */
  DLManagedTensorVersioned *row = NULL;
  CHECK_OK(dlb_tensor_select(t, 0, 1, &row));
  dlb_tensor_release(t);
  const float *v = (const float *)((const char *)row->dl_tensor.data +
                                   row->dl_tensor.byte_offset);
  CHECK(v[0] == 1.0f && v[row->dl_tensor.strides[0] * 2] == 5.0f);
  CHECK_EQ_INT(row->flags & DLPACK_FLAG_BITMASK_READ_ONLY,
               DLPACK_FLAG_BITMASK_READ_ONLY);
  dlb_tensor_release(row);
}

DLB_TEST(npy_dtypes_and_shapes) {
  static const struct {
    const char *descr;
    uint8_t code, bits;
  } cases[] = {
      {"|b1", kDLBool, 8},     {"|i1", kDLInt, 8},      {"<i2", kDLInt, 16},
      {"<i4", kDLInt, 32},     {"<i8", kDLInt, 64},     {"|u1", kDLUInt, 8},
      {"<u2", kDLUInt, 16},    {"<u4", kDLUInt, 32},    {"<u8", kDLUInt, 64},
      {"<f2", kDLFloat, 16},   {"<f8", kDLFloat, 64},   {"<c8", kDLComplex, 64},
      {"<c16", kDLComplex, 128}, {"=f4", kDLFloat, 32},
      {"f4", kDLFloat, 32},      {"i2", kDLInt, 16},
  };
  static const unsigned char zeros[64];
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    char dict[128];
    snprintf(dict, sizeof dict, "{\"descr\": \"%s\", \"fortran_order\": "
             "False, \"shape\": (3,)}", cases[i].descr);
    const char *path = write_npy("d.npy", 1, dict, 0, zeros, sizeof zeros);
    dlb_npy_header h;
    /* Whatever errno the caller left behind. */
    errno = ERANGE;
    CHECK_OK(dlb_npy_read_header(path, &h));
    CHECK_STR(h.descr, cases[i].descr);
    CHECK_EQ_INT(h.dtype.code, cases[i].code);
    CHECK_EQ_INT(h.dtype.bits, cases[i].bits);
    CHECK_EQ_INT(h.dtype.lanes, 1);
    CHECK_EQ_INT(h.ndim, 1);
    CHECK_EQ_INT(h.shape[0], 3);
    CHECK_EQ_INT(h.data_bytes, 3 * cases[i].bits / 8);
    CHECK_EQ_INT(h.data_offset, last_offset);
    CHECK_EQ_INT(h.major, 1);
    CHECK_EQ_INT(h.fortran_order, 0);
  }
  /* A scalar, and an empty array whose other extent is huge. */
  const char *path = write_npy("s.npy", 2,
      "{'descr': '<f4', 'fortran_order': False, 'shape': ()}", 0, six, 4);
  DLManagedTensorVersioned *t = NULL;
  CHECK_OK(dlb_tensor_map_npy(path, 0, &t));
  CHECK_EQ_INT(t->dl_tensor.ndim, 0);
  dlb_tensor_release(t);
  path = write_npy("e.npy", 3, "{'descr': '<f8', 'fortran_order': True, "
                   "'shape': (0, 9223372036854775807)}", 0, NULL, 0);
  CHECK_OK(dlb_tensor_map_npy(path, 0, &t));
  CHECK_EQ_INT(t->dl_tensor.shape[1], INT64_MAX);
  dlb_tensor_release(t);
  /* 00 is zero, as Python reads it. */
  path = write_npy("z.npy", 1, "{'descr': '<f8', 'fortran_order': False, "
                   "'shape': (00, 3)}", 0, NULL, 0);
  CHECK_OK(dlb_tensor_map_npy(path, 0, &t));
  CHECK_EQ_INT(t->dl_tensor.shape[0], 0);
  dlb_tensor_release(t);
}

/* The bytes of the mappings of path in this process (/proc/self/maps). */
static unsigned long long mapped_bytes_of(const char *path) {
  FILE *f = fopen("/proc/self/maps", "r");
  CHECK(f != NULL);
  unsigned long long total = 0;
  char line[512];
  while (f != NULL && fgets(line, sizeof line, f) != NULL) {
    unsigned long long lo = 0, hi = 0;
    if (strstr(line, path) != NULL && sscanf(line, "%llx-%llx", &lo, &hi) == 2)
      total += hi - lo;
  }
  if (f != NULL) fclose(f);
  return total;
}

/* The file is refused with status and a message containing needle. */
static void refused(const char *path, dlb_status status, const char *needle) {
  const int fds = dlb_test_count_fds();
  DLManagedTensorVersioned *t = (DLManagedTensorVersioned *)(uintptr_t)1;
  CHECK_STATUS(dlb_tensor_map_npy(path, 0, &t), status);
  CHECK_ERROR_MENTIONS(needle);
  CHECK(t == (DLManagedTensorVersioned *)(uintptr_t)1);
  CHECK_EQ_INT(mapped_bytes_of(path), 0);
  dlb_npy_header h;
  memset(&h, 0x5a, sizeof h);
  CHECK_STATUS(dlb_npy_read_header(path, &h), status);
  CHECK_ERROR_MENTIONS(needle);
  CHECK_EQ_INT(h.major, 0x5a5a5a5a);
  CHECK_EQ_INT(mapped_bytes_of(path), 0);
  CHECK_EQ_INT(dlb_test_count_fds(), fds);
}

static void refused_dict(const char *dict, dlb_status status,
                         const char *needle) {
  refused(write_npy("h.npy", 1, dict, 0, six, sizeof six), status, needle);
}

DLB_TEST(npy_refuses_hostile_files) {
  refused(write_raw("t.npy", "\x93NUM", 5), DLB_E_INVAL, "5 bytes");
  /* A byte short of each version's fixed part. */
  refused(write_raw("t9.npy", "\x93NUMPY\x01\x00\x00", 9), DLB_E_INVAL,
          "9 bytes, shorter than the 10 bytes");
  refused(write_raw("v2s.npy", "\x93NUMPY\x02\x00\x00\x00\x00", 11),
          DLB_E_INVAL, "11 bytes, shorter than a version 2 header's 12");
  refused(write_raw("m.npy", "\x93NUMPZ\x01\x00\x00\x00", 10), DLB_E_INVAL,
          "magic");
  refused(write_raw("v.npy", "\x93NUMPY\x04\x00\x00\x00", 10), DLB_E_INVAL,
          "version 4.0");
  refused(write_raw("v1.npy", "\x93NUMPY\x01\x01\x00\x00", 10), DLB_E_INVAL,
          "version 1.1");
  refused(write_raw("v2.npy", "\x93NUMPY\x02\x00\x00\x00", 10), DLB_E_INVAL,
          "12");
  refused(write_raw("l.npy", "\x93NUMPY\x01\x00\xff\x00{}", 12), DLB_E_INVAL,
          "header_len 255 runs past");
  refused(write_raw("l3.npy", "\x93NUMPY\x03\x00\xff\xff\xff\xff{}", 14),
          DLB_E_INVAL, "header_len 4294967295 runs past");
  refused_dict("['descr', 'f4']", DLB_E_INVAL, "not a dictionary");
  refused_dict("{'descr' '<f4', 'fortran_order': False, 'shape': (6,)}",
               DLB_E_INVAL, "':'");
  refused_dict("{'descr': '<f4' 'fortran_order': False, 'shape': (6,)}",
               DLB_E_INVAL, "comma");
  refused_dict("{'descr': '<f4', 'fortran_order': False, 'shape': (6,)",
               DLB_E_INVAL, "comma");
  refused_dict("{'descr': '<f4', 'fortran_order': False, 'shape': (6,)} x",
               DLB_E_INVAL, "text after");
  refused_dict("{'descr': '<f4', 'fortran_order': 0, 'shape': (6,)}",
               DLB_E_INVAL, "True or False");
  refused_dict("{'descr': '<f4', 'fortran_order': False, 'shape': 6}",
               DLB_E_INVAL, "not a tuple");
  refused_dict("{'descr': '<f4', 'fortran_order': False, 'shape': (-6,)}",
               DLB_E_INVAL, "non-negative");
  refused_dict("{'descr': '<f4', 'fortran_order': False, 'shape': (6 3)}",
               DLB_E_INVAL, "comma");
  /* Past 2^64, a check after the multiplication saw the wrapped value. */
  refused_dict("{'descr': '<f4', 'fortran_order': False, "
               "'shape': (18446744073709551620,)}", DLB_E_OVERFLOW,
               "shape[0] exceeds INT64_MAX");
  refused_dict("{'descr': '<f4', 'fortran_order': False, "
               "'shape': (2, 36893488147419103233)}", DLB_E_OVERFLOW,
               "shape[1] exceeds INT64_MAX");
  refused_dict("{'descr': '<f4', 'fortran_order': False, 'shape': (06,)}",
               DLB_E_INVAL, "leading zero");
  refused_dict("{'descr': '<f4', 'fortran_order': False, 'shape': (2, 006)}",
               DLB_E_INVAL, "leading zero");
  refused_dict("{'descr': '<f4', 'fortran_order': False, 'shape': (6)}",
               DLB_E_INVAL, "an integer in parentheses, not a tuple");
  refused_dict("{'descr': '<f4', 'fortran_order': False, 'shape': ( 6 )}",
               DLB_E_INVAL, "an integer in parentheses, not a tuple");
  refused_dict("{'descr': '<f\\x34', 'fortran_order': False, 'shape': (6,)}",
               DLB_E_INVAL, "escape");
  refused_dict("{'descr: '<f4', 'fortran_order': False, 'shape': (6,)}",
               DLB_E_INVAL, "");
  refused_dict("{'descr': '<f4', 'fortran_order': False}", DLB_E_INVAL,
               "lacks 'shape'");
  refused_dict("{'descr': '<f4', 'shape': (6,), 'shape': (6,)}",
               DLB_E_INVAL, "key 'shape' is repeated");
  refused_dict("{'descr': '<f4', 'fortran_order': False, 'shape': (6,), "
               "'extra': 1}", DLB_E_INVAL, "key 'extra' is unknown");
  refused_dict("{'descr': '|O', 'fortran_order': False, 'shape': (6,)}",
               DLB_E_DTYPE, "Python objects");
  refused_dict("{'descr': [('a', '<f4')], 'fortran_order': False, "
               "'shape': (6,)}", DLB_E_DTYPE, "structured");
  refused_dict("{'descr': '<U3', 'fortran_order': False, 'shape': (6,)}",
               DLB_E_DTYPE, "Unicode");
  refused_dict("{'descr': '<f16', 'fortran_order': False, 'shape': (6,)}",
               DLB_E_DTYPE, "long double");
  refused_dict("{'descr': '<f3', 'fortran_order': False, 'shape': (6,)}",
               DLB_E_DTYPE, "'<f3'");
  refused_dict("{'descr': '<f', 'fortran_order': False, 'shape': (6,)}",
               DLB_E_DTYPE, "'<f'");
  refused_dict("{'descr': '<f4x', 'fortran_order': False, 'shape': (6,)}",
               DLB_E_DTYPE, "'<f4x'");
  refused_dict("{'descr': '>f4', 'fortran_order': False, 'shape': (6,)}",
               DLB_E_UNSUPPORTED, "big-endian");
  refused_dict("{'descr': '|f4', 'fortran_order': False, 'shape': (6,)}",
               DLB_E_INVAL, "byte order");
  refused_dict("{'descr': '<f4', 'fortran_order': False, "
               "'shape': (9223372036854775808,)}", DLB_E_OVERFLOW,
               "INT64_MAX");
  refused_dict("{'descr': '<f4', 'fortran_order': False, "
               "'shape': (4294967296, 4294967296)}", DLB_E_OVERFLOW,
               ".npy header: 'shape': ");
  refused_dict("{'descr': '<f8', 'fortran_order': False, "
               "'shape': (4611686018427387904,)}", DLB_E_OVERFLOW,
               "overflow");
  refused_dict("{'descr': '<f4', 'fortran_order': False, 'shape': (7,)}",
               DLB_E_LAYOUT, "needs 28 bytes of data but the file holds 24");
  char many[512] = "{'descr': '<f4', 'fortran_order': False, 'shape': (";
  for (int i = 0; i < 65; i++) strcat(many, "1,");
  strcat(many, ")}");
  refused_dict(many, DLB_E_LAYOUT, "more than 64");
  /* Data at byte 65 cannot hold aligned doubles. */
  refused(write_npy("a.npy", 1, "{'descr': '<f8', 'fortran_order': False, "
                    "'shape': (1,)}", 1, six, 8), DLB_E_LAYOUT,
          "8-byte alignment");
  /* Complex numbers align as their two parts: c8 data at byte 68 maps,
   * c16 data there does not. */
  DLManagedTensorVersioned *t = NULL;
  CHECK_OK(dlb_tensor_map_npy(write_npy("c8.npy", 1, "{'descr': '<c8', "
                                        "'fortran_order': False, 'shape': "
                                        "(1,)}", 4, six, 8), 0, &t));
  CHECK_EQ_INT((uintptr_t)t->dl_tensor.data % 8, 4);
  CHECK(((const float *)t->dl_tensor.data)[1] == 1.0f);
  dlb_tensor_release(t);
  refused(write_npy("c16.npy", 1, "{'descr': '<c16', 'fortran_order': False, "
                    "'shape': (1,)}", 4, six, 16), DLB_E_LAYOUT,
          "8-byte alignment of '<c16'");
  make_dir();
  refused(dir, DLB_E_INVAL, "not a regular file");
  /* A FIFO with no writer is refused at once, not waited on. */
  char fifo[160];
  snprintf(fifo, sizeof fifo, "%s/fifo.npy", dir);
  CHECK(mkfifo(fifo, 0600) == 0);
  refused(fifo, DLB_E_INVAL, "not a regular file");
  refused("/nonexistent/x.npy", DLB_E_INVAL, "No such file");
}

/* A path too long for the error buffer is shown cut, with the reason
 * after it still there; a path of 200 bytes is shown whole. */
DLB_TEST(npy_long_path_keeps_the_reason) {
  char path[4000];
  memset(path, 'd', sizeof path - 1);
  path[0] = '/';
  path[sizeof path - 1] = '\0';
  refused(path, DLB_E_INVAL, "dddd...': File name too long");
  char shorter[201];
  memset(shorter, 'e', sizeof shorter - 1);
  memcpy(shorter, "/nonexistent/", 13);
  shorter[sizeof shorter - 1] = '\0';
  refused(shorter, DLB_E_INVAL, "eeee': No such file");
}

/* The dictionary's keys may come in any order. */
DLB_TEST(npy_keys_in_any_order) {
  const char *path = write_npy("o.npy", 1, "{'shape': (2, 3), "
                               "'fortran_order': True, 'descr': '<f4'}", 0,
                               six, sizeof six);
  dlb_npy_header h;
  const int fds = dlb_test_count_fds();
  CHECK_OK(dlb_npy_read_header(path, &h));
  CHECK_EQ_INT(dlb_test_count_fds(), fds);
  CHECK_STR(h.descr, "<f4");
  CHECK_EQ_INT(h.dtype.code, kDLFloat);
  CHECK_EQ_INT(h.fortran_order, 1);
  CHECK_EQ_INT(h.ndim, 2);
  CHECK_EQ_INT(h.shape[0], 2);
  CHECK_EQ_INT(h.shape[1], 3);
}

/* A version 1.0 file whose header is text alone (header_len its length,
 * no padding), followed by the bytes after. */
static const char *write_cut(const char *text, const char *after) {
  unsigned char buf[256];
  size_t n = strlen(text), m = strlen(after);
  CHECK(10 + n + m <= sizeof buf);
  memcpy(buf, "\x93NUMPY\x01\x00", 8);
  buf[8] = (unsigned char)(n & 0xff);
  buf[9] = (unsigned char)(n >> 8);
  memcpy(buf + 10, text, n);
  memcpy(buf + 10 + n, after, m);
  return write_raw("cut.npy", buf, 10 + n + m);
}

/* The dictionary ends at header_len: what follows is data, never read as
 * header text, wherever the cut falls. */
DLB_TEST(npy_header_text_ends_at_header_len) {
  static const struct {
    const char *text, *after, *what;
  } cases[] = {
      {"{'descr': '<f4', 'fortran_order': False, 'shape': (6,)", "}",
       "entries lack a comma"},
      {"{'descr': '<f4', 'fortran_order': False, 'shape': (6,)", " }",
       "entries lack a comma"},
      {"{'descr': '<f4", "', 'fortran_order': False, 'shape': (6,)}",
       "an unterminated string"},
      {"{", "'descr': '<f4', 'fortran_order': False, 'shape': (6,)}",
       "a key is not a string"},
      {"{'descr': '<f4', 'fortran_order': False, 'shape': (", "6,)}",
       "a 'shape' entry is not a non-negative integer"},
      {"{'descr': '<f4', 'fortran_order': False, 'shape': (0", "5,)}",
       "'shape' lacks a comma"},
      {"{'descr': '<f4', 'fortran_order': False, 'shape': (6", "7,)}",
       "'shape' lacks a comma"},
      {"{'descr':", "[('a', '<f4')], 'fortran_order': False, 'shape': (6,)}",
       "'descr' is not a simple dtype string"},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    char needle[128];
    snprintf(needle, sizeof needle, "%s at byte %zu of the dictionary",
             cases[i].what, strlen(cases[i].text));
    refused(write_cut(cases[i].text, cases[i].after), DLB_E_INVAL, needle);
  }
}

/* Keys, strings, shapes and dtypes refused, each by what is wrong. */
DLB_TEST(npy_refuses_keys_shapes_and_dtypes_by_name) {
  /* Keys are buffered up to 15 characters: one more is too long. */
  refused_dict("{'descr': '<f4', 'fortran_order': False, 'shape': (6,), "
               "'abcdefghijklmno': 1}", DLB_E_INVAL,
               "key 'abcdefghijklmno' is unknown");
  refused_dict("{'descr': '<f4', 'fortran_order': False, 'shape': (6,), "
               "'abcdefghijklmnop': 1}", DLB_E_INVAL, "too long");
  refused_dict("{'descr': '<f4', 'fortran_order': False, 'shape': (6,), "
               "'a\x7f': 1}", DLB_E_INVAL, "non-ASCII");
  refused_dict("{'descr': '<f4', 'fortran_order': False, 'shape': (6,), "
               "'a\x1f': 1}", DLB_E_INVAL, "non-ASCII");
  refused_dict("{'descr': '<f4', 'fortran_order': False, 'shape': (6,), "
               "'a b': 1}", DLB_E_INVAL, "key 'a b' is unknown");
  /* A version 2.0 header of 12 bytes is complete: its dictionary is
   * empty. */
  refused(write_raw("v2e.npy", "\x93NUMPY\x02\x00\x00\x00\x00\x00", 12),
          DLB_E_INVAL, "the header is not a dictionary");
  refused_dict("{'descr': '<f4', 'descr': '<f4', 'fortran_order': False, "
               "'shape': (6,)}", DLB_E_INVAL, "key 'descr' is repeated");
  refused_dict("{'descr': '<f4', 'fortran_order': False, 'fortran_order': "
               "False, 'shape': (6,)}", DLB_E_INVAL,
               "key 'fortran_order' is repeated");
  refused_dict("{'fortran_order': False, 'shape': (6,)}", DLB_E_INVAL,
               "lacks 'descr'");
  refused_dict("{'descr': '<f4', 'shape': (6,)}", DLB_E_INVAL,
               "lacks 'fortran_order'");
  refused_dict("{'descr': '<f4', 'fortran_order': False, 'shape': (01,)}",
               DLB_E_INVAL, "leading zero");
  refused_dict("{'descr': '<f4', 'fortran_order': False, 'shape': (2, 09)}",
               DLB_E_INVAL, "leading zero");
  static const struct {
    const char *descr, *why;
  } dtypes[] = {
      {"|S3", "(byte strings)"},      {"|a3", "(byte strings)"},
      {"<M8", "(dates and times)"},   {"<m8", "(dates and times)"},
      {"|V4", "(raw or structured records)"},
      {"<f12", "(long double)"},      {"<i16", "'<i16'; dlbridge maps"},
      {"|i1x", "'|i1x'; dlbridge maps"},
  };
  for (size_t i = 0; i < sizeof dtypes / sizeof dtypes[0]; i++) {
    char dict[128];
    snprintf(dict, sizeof dict, "{'descr': '%s', 'fortran_order': False, "
             "'shape': (6,)}", dtypes[i].descr);
    refused_dict(dict, DLB_E_DTYPE, dtypes[i].why);
  }
  /* Sixteen-byte integers are no long double. */
  CHECK(strstr(dlb_last_error(), "long double") == NULL);
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
  refused_dict("{'descr': '>f4', 'fortran_order': False, 'shape': (6,)}",
               DLB_E_UNSUPPORTED, "big-endian data on a little-endian "
               "machine");
#endif
  /* INT64_MAX one-byte elements fit in int64_t; the file just lacks them. */
  refused_dict("{'descr': '|u1', 'fortran_order': False, "
               "'shape': (9223372036854775807,)}", DLB_E_LAYOUT,
               "needs 9223372036854775807 bytes of data");
}

/* A header of 2^20 bytes is read, one of 2^20 + 64 is not; reading the
 * longest header leaves nothing mapped. */
DLB_TEST(npy_header_of_a_mebibyte) {
  const size_t hlen = (size_t)1 << 20, total = 12 + hlen + 64 + sizeof six;
  unsigned char *buf = malloc(total);
  CHECK(buf != NULL);
  const char *dict = "{'descr': '<f4', 'fortran_order': False, "
                     "'shape': (6,)}";
  for (int longer = 0; longer < 2; longer++) {
    const size_t len = hlen + (longer ? 64 : 0);
    memcpy(buf, "\x93NUMPY\x02\x00", 8);
    for (int b = 0; b < 4; b++) buf[8 + b] = (unsigned char)(len >> (8 * b));
    memset(buf + 12, ' ', len);
    memcpy(buf + 12, dict, strlen(dict));
    buf[12 + len - 1] = '\n';
    memcpy(buf + 12 + len, six, sizeof six);
    char path[128];
    snprintf(path, sizeof path, "%s",
             write_raw("mib.npy", buf, 12 + len + sizeof six));
    if (longer) {
      refused(path, DLB_E_INVAL, "header_len 1048640 exceeds the 1048576 "
              "bytes dlbridge reads");
      continue;
    }
    dlb_npy_header h;
    CHECK_OK(dlb_npy_read_header(path, &h));
    CHECK_EQ_INT(h.data_offset, 12 + hlen);
    CHECK_EQ_INT(mapped_bytes_of(path), 0);
    DLManagedTensorVersioned *t = NULL;
    CHECK_OK(dlb_tensor_map_npy(path, 0, &t));
    CHECK(((const float *)t->dl_tensor.data)[5] == 5.0f);
    dlb_tensor_release(t);
    CHECK_EQ_INT(mapped_bytes_of(path), 0);
  }
  free(buf);
}

/* Only the header and the data are mapped, not what follows them in the
 * file: a file of a few bytes of data and a large sparse tail reads in a
 * small address space too. */
DLB_TEST(npy_maps_the_header_and_data_only) {
  const off_t tail = (off_t)64 << 20;
  const char *dict = "{'descr': '<f4', 'fortran_order': False, "
                     "'shape': (6,), }";
  char path[128];
  snprintf(path, sizeof path, "%s", write_npy("tail.npy", 1, dict, 0, six,
                                              sizeof six));
  CHECK(truncate(path, tail) == 0);
  dlb_npy_header h;
  CHECK_OK(dlb_npy_read_header(path, &h));
  CHECK_EQ_INT(h.data_bytes, sizeof six);
  CHECK_EQ_INT(mapped_bytes_of(path), 0);
  DLManagedTensorVersioned *t = NULL;
  CHECK_OK(dlb_tensor_map_npy(path, 0, &t));
  CHECK(((const float *)t->dl_tensor.data)[5] == 5.0f);
  const unsigned long long small = mapped_bytes_of(path);
  CHECK(small > 0 && small <= (unsigned long long)sysconf(_SC_PAGESIZE));
  dlb_tensor_release(t);
  CHECK_EQ_INT(mapped_bytes_of(path), 0);
  /* Data past the first mebibyte: header and data mapped, the tail not. */
  const int64_t n = (int64_t)3 << 20;
  char big[128];
  snprintf(big, sizeof big, "{'descr': '|u1', 'fortran_order': False, "
           "'shape': (%lld,), }", (long long)n);
  snprintf(path, sizeof path, "%s", write_npy("big.npy", 1, big, 0, NULL, 0));
  CHECK(truncate(path, 2 * tail) == 0);
  FILE *f = fopen(path, "r+b");
  CHECK(f != NULL);
  CHECK(fseek(f, (long)(last_offset + (size_t)n - 1), SEEK_SET) == 0);
  CHECK(fputc(7, f) == 7);
  CHECK(fclose(f) == 0);
  CHECK_OK(dlb_npy_read_header(path, &h));
  CHECK_EQ_INT(h.data_bytes, n);
  CHECK_EQ_INT(mapped_bytes_of(path), 0);
  CHECK_OK(dlb_tensor_map_npy(path, 0, &t));
  CHECK_EQ_INT(((const uint8_t *)t->dl_tensor.data)[n - 1], 7);
  CHECK_EQ_INT(((const uint8_t *)t->dl_tensor.data)[0], 0);
  const unsigned long long mapped = mapped_bytes_of(path);
  CHECK(mapped >= last_offset + (size_t)n && mapped < ((size_t)4 << 20));
  dlb_tensor_release(t);
  CHECK(unlink(path) == 0);
}

DLB_TEST(npy_refuses_bad_arguments) {
  const char *path = write_npy("c.npy", 1, "{'descr': '<f4', "
                               "'fortran_order': False, 'shape': (6,)}", 0,
                               six, sizeof six);
  DLManagedTensorVersioned *t = NULL;
  CHECK_STATUS(dlb_tensor_map_npy(NULL, 0, &t), DLB_E_INVAL);
  CHECK_ERROR_MENTIONS("path is NULL");
  CHECK_STATUS(dlb_tensor_map_npy(path, 0, NULL), DLB_E_INVAL);
  CHECK_ERROR_MENTIONS("out is NULL");
  CHECK_STATUS(dlb_tensor_map_npy(path, 4, &t), DLB_E_INVAL);
  CHECK_ERROR_MENTIONS("flags 0x4");
  CHECK_STATUS(dlb_tensor_map_npy(path, 3, &t), DLB_E_INVAL);
  CHECK_ERROR_MENTIONS("flags 0x3");
  dlb_npy_header h;
  CHECK_STATUS(dlb_npy_read_header(NULL, &h), DLB_E_INVAL);
  CHECK_ERROR_MENTIONS("dlb_npy_read_header: path is NULL");
  CHECK_STATUS(dlb_npy_read_header(path, NULL), DLB_E_INVAL);
  CHECK_ERROR_MENTIONS("dlb_npy_read_header: out is NULL");
  CHECK(t == NULL);
}

DLB_TEST(npy_pins_for_the_gpu) {
  emu e = emu_cuda();
  const char *path = write_npy("p.npy", 1, "{'descr': '<f4', "
                               "'fortran_order': False, 'shape': (6,)}", 0,
                               six, sizeof six);
  DLManagedTensorVersioned *t = NULL;
  CHECK_OK(dlb_tensor_map_npy(path, DLB_NPY_PIN_CUDA, &t));
  CHECK_EQ_INT(t->dl_tensor.device.device_type, kDLCUDAHost);
  CHECK_EQ_INT(t->flags, DLPACK_FLAG_BITMASK_READ_ONLY);
  CHECK_EQ_INT(e.live_kind(EMU_LIVE_REGISTERED), 1);
  DLDevice d;
  CHECK_OK(dlb_device_of_pointer(t->dl_tensor.data, &d));
  CHECK_EQ_INT(d.device_type, kDLCUDAHost);
  dlb_tensor_release(t);
  CHECK_EQ_INT(e.live_kind(EMU_LIVE_REGISTERED), 0);
  CHECK_EQ_INT(mapped_bytes_of(path), 0);
}

DLB_TEST(npy_pin_without_runtime) {
  setenv("DLBRIDGE_HIP_LIBRARY", "/nonexistent/libamdhip64.so.6", 1);
  const char *path = write_npy("p.npy", 1, "{'descr': '<f4', "
                               "'fortran_order': False, 'shape': (6,)}", 0,
                               six, sizeof six);
  DLManagedTensorVersioned *t = (DLManagedTensorVersioned *)(uintptr_t)1;
  CHECK_STATUS(dlb_tensor_map_npy(path, DLB_NPY_PIN_ROCM, &t),
               DLB_E_NO_RUNTIME);
  CHECK(t == (DLManagedTensorVersioned *)(uintptr_t)1);
}

static dlb_status body_map(void *ctx) {
  const char *path = ctx;
  DLManagedTensorVersioned *t = (DLManagedTensorVersioned *)(uintptr_t)1;
  dlb_status s = dlb_tensor_map_npy(path, 0, &t);
  if (s != DLB_OK) {
    CHECK(t == (DLManagedTensorVersioned *)(uintptr_t)1);
    return s;
  }
  CHECK(((const float *)t->dl_tensor.data)[5] == 5.0f);
  dlb_tensor_release(t);
  return s;
}

/* Every allocation failing in turn: DLB_E_NOMEM, nothing left mapped or
 * allocated (the mapping's bookkeeping, the header's text while it is
 * parsed, then the tensor's block, which holds its owner). */
DLB_TEST(npy_map_out_of_memory) {
  char path[128];
  snprintf(path, sizeof path, "%s", write_npy("o.npy", 1,
           "{'descr': '<f4', 'fortran_order': True, 'shape': (2, 3)}", 0, six,
           sizeof six));
  CHECK_EQ_INT(dlb_test_oom_loop(body_map, path), 3);
}
