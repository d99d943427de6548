/*
 * npy.c -- .npy files: the header parser and the read-only mapping.
 *
 * The header is read and parsed; the tensor maps the header and the data,
 * whatever else the file holds. Only the
 * dictionary NumPy writes is accepted: the keys 'descr', 'fortran_order'
 * and 'shape', once each, with a simple dtype string, a bool and a tuple
 * of integers; anything else is refused rather than guessed at.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "internal.h"

/* Longest header dlbridge reads: NumPy's own reader stops at 10000 bytes
 * unless told otherwise; a megabyte leaves room and bounds the work. */
#define NPY_HEADER_MAX (1u << 20)

typedef struct npy_text {
  const char *p;
  const char *end;
} npy_text;

static void skip_space(npy_text *t) {
  while (t->p < t->end && (*t->p == ' ' || *t->p == '\t' || *t->p == '\n' ||
                           *t->p == '\r'))
    t->p++;
}

/* Consumes c after optional spaces; 1 when it was there. */
static int accept(npy_text *t, char c) {
  skip_space(t);
  if (t->p < t->end && *t->p == c) {
    t->p++;
    return 1;
  }
  return 0;
}

static dlb_status syntax(const npy_text *t, const char *start,
                         const char *what) {
  return dlb__fail(DLB_E_INVAL, ".npy header: %s at byte %td of the "
                   "dictionary", what, t->p - start);
}

/* A quoted string without escapes into buf (size bytes). */
static dlb_status quoted(npy_text *t, const char *start, char *buf,
                         size_t size, const char *what) {
  skip_space(t);
  if (t->p >= t->end || (*t->p != '\'' && *t->p != '"'))
    return syntax(t, start, what);
  char q = *t->p++;
  size_t n = 0;
  while (t->p < t->end && *t->p != q) {
    if (*t->p == '\\' || (unsigned char)*t->p < 0x20 ||
        (unsigned char)*t->p >= 0x7f)
      return syntax(t, start, "an escape or non-ASCII character in a string");
    if (n + 1 >= size) return syntax(t, start, "a string too long for a key "
                                     "or a simple dtype");
    buf[n++] = *t->p++;
  }
  if (t->p >= t->end) return syntax(t, start, "an unterminated string");
  t->p++;
  buf[n] = '\0';
  return DLB_OK;
}

static dlb_status parse_bool(npy_text *t, const char *start, int *out) {
  skip_space(t);
  size_t left = (size_t)(t->end - t->p);
  if (left >= 4 && memcmp(t->p, "True", 4) == 0) {
    t->p += 4;
    *out = 1;
    return DLB_OK;
  }
  if (left >= 5 && memcmp(t->p, "False", 5) == 0) {
    t->p += 5;
    *out = 0;
    return DLB_OK;
  }
  return syntax(t, start, "'fortran_order' is not True or False");
}

static dlb_status parse_shape(npy_text *t, const char *start, int32_t *ndim,
                              int64_t *shape) {
  if (!accept(t, '(')) return syntax(t, start, "'shape' is not a tuple");
  int32_t n = 0;
  for (;;) {
    if (accept(t, ')')) break;
    skip_space(t);
    if (t->p >= t->end || *t->p < '0' || *t->p > '9')
      return syntax(t, start, "a 'shape' entry is not a non-negative integer");
    /* A Python integer: a leading zero only in zero itself (00 is 0). */
    if (*t->p == '0') {
      const char *q = t->p;
      while (q < t->end && *q == '0') q++;
      if (q < t->end && *q >= '1' && *q <= '9')
        return syntax(t, start, "a 'shape' entry has a leading zero");
    }
    uint64_t v = 0;
    while (t->p < t->end && *t->p >= '0' && *t->p <= '9') {
      const uint64_t digit = (uint64_t)(*t->p - '0');
      /* Checked before it is computed: v * 10 + digit can wrap. */
      if (v > ((uint64_t)INT64_MAX - digit) / 10)
        return dlb__fail(DLB_E_OVERFLOW, ".npy header: shape[%d] exceeds "
                         "INT64_MAX", (int)n);
      v = v * 10 + digit;
      t->p++;
    }
    if (n == DLB_MAX_NDIM)
      return dlb__fail(DLB_E_LAYOUT, ".npy header: shape has more than %d "
                       "dimensions", DLB_MAX_NDIM);
    shape[n++] = (int64_t)v;
    /* (5) is an integer in parentheses, not a tuple (NumPy refuses it):
     * a one-element tuple is written (5,); a trailing comma may follow
     * any tuple. */
    if (accept(t, ')')) {
      if (n == 1)
        return syntax(t, start, "'shape' is an integer in parentheses, not "
                      "a tuple (a one-element shape is written (n,))");
      break;
    }
    if (!accept(t, ',')) return syntax(t, start, "'shape' lacks a comma");
  }
  *ndim = n;
  return DLB_OK;
}

/* Turns descr into a DLPack dtype; *align is the element's alignment. */
static dlb_status parse_descr(const char *descr, DLDataType *out,
                              unsigned *align) {
  char order = descr[0];
  const char *kind = descr;
  if (order == '<' || order == '>' || order == '|' || order == '=')
    kind++;
  else
    order = '=';
  char k = kind[0];
  char *endp = NULL;
  unsigned long size = 0;
  if (k != '\0' && kind[1] >= '1' && kind[1] <= '9') {
    errno = 0;
    size = strtoul(kind + 1, &endp, 10);
    if (errno != 0 || *endp != '\0') size = 0;
  }
  static const struct {
    char kind;
    unsigned long size;
    uint8_t code;
  } known[] = {
      {'b', 1, kDLBool},    {'i', 1, kDLInt},     {'i', 2, kDLInt},
      {'i', 4, kDLInt},     {'i', 8, kDLInt},     {'u', 1, kDLUInt},
      {'u', 2, kDLUInt},    {'u', 4, kDLUInt},    {'u', 8, kDLUInt},
      {'f', 2, kDLFloat},   {'f', 4, kDLFloat},   {'f', 8, kDLFloat},
      {'c', 8, kDLComplex}, {'c', 16, kDLComplex},
  };
  size_t i = 0;
  while (i < sizeof known / sizeof known[0] &&
         (known[i].kind != k || known[i].size != size))
    i++;
  if (i == sizeof known / sizeof known[0]) {
    const char *why = k == 'O'                ? " (Python objects)"
                      : k == 'V'              ? " (raw or structured records)"
                      : k == 'S' || k == 'a'  ? " (byte strings)"
                      : k == 'U'              ? " (Unicode strings)"
                      : k == 'M' || k == 'm'  ? " (dates and times)"
                      : k == 'f' && size > 8  ? " (long double)"
                                              : "";
    return dlb__fail(DLB_E_DTYPE, ".npy header: 'descr' is '%s'%s; dlbridge "
                     "maps bool (b1), int and uint (1, 2, 4, 8 bytes), float "
                     "(f2, f4, f8) and complex (c8, c16)", descr, why);
  }
  const uint16_t probe = 1;
  const char native = *(const char *)&probe == 1 ? '<' : '>';
  if (size > 1 && order == '|')
    return dlb__fail(DLB_E_INVAL, ".npy header: 'descr' is '%s': a "
                     "multi-byte dtype needs a byte order", descr);
  if (size > 1 && order != '=' && order != native)
    return dlb__fail(DLB_E_UNSUPPORTED, ".npy header: 'descr' is '%s', %s "
                     "data on a %s machine; convert it first (NumPy: "
                     "a.astype(a.dtype.newbyteorder('='))", descr,
                     order == '>' ? "big-endian" : "little-endian",
                     native == '<' ? "little-endian" : "big-endian");
  out->code = known[i].code;
  out->bits = (uint8_t)(size * 8);
  out->lanes = 1;
  *align = (unsigned)(k == 'c' ? size / 2 : size);
  return DLB_OK;
}

/* Parses the dictionary text[0, len) into h (its dtype fields, order and
 * shape); *align receives the element alignment. */
static dlb_status parse_dict(const char *text, size_t len, dlb_npy_header *h,
                             unsigned *align) {
  npy_text t = {text, text + len};
  int have_descr = 0, have_order = 0, have_shape = 0;
  if (!accept(&t, '{')) return syntax(&t, text, "the header is not a "
                                      "dictionary");
  for (;;) {
    if (accept(&t, '}')) break;
    char key[16];
    dlb_status s = quoted(&t, text, key, sizeof key, "a key is not a string");
    if (s != DLB_OK) return s;
    if (!accept(&t, ':')) return syntax(&t, text, "a key lacks its ':'");
    if (strcmp(key, "descr") == 0 && !have_descr) {
      skip_space(&t);
      if (t.p < t.end && (*t.p == '[' || *t.p == '{'))
        return dlb__fail(DLB_E_DTYPE, ".npy header: 'descr' is a structured "
                         "dtype (a list of fields); dlbridge maps only "
                         "arrays of one numeric type");
      s = quoted(&t, text, h->descr, sizeof h->descr,
                 "'descr' is not a simple dtype string");
      if (s == DLB_OK) s = parse_descr(h->descr, &h->dtype, align);
      have_descr = 1;
    } else if (strcmp(key, "fortran_order") == 0 && !have_order) {
      s = parse_bool(&t, text, &h->fortran_order);
      have_order = 1;
    } else if (strcmp(key, "shape") == 0 && !have_shape) {
      s = parse_shape(&t, text, &h->ndim, h->shape);
      have_shape = 1;
    } else {
      return dlb__fail(DLB_E_INVAL, ".npy header: key '%s' is %s; NumPy "
                       "writes 'descr', 'fortran_order' and 'shape' once each",
                       key, strcmp(key, "descr") == 0 ||
                       strcmp(key, "fortran_order") == 0 ||
                       strcmp(key, "shape") == 0 ? "repeated" : "unknown");
    }
    if (s != DLB_OK) return s;
    if (accept(&t, '}')) break;
    if (!accept(&t, ',')) return syntax(&t, text, "entries lack a comma");
  }
  skip_space(&t);
  if (t.p != t.end)
    return syntax(&t, text, "text after the dictionary");
  if (!have_descr || !have_order || !have_shape)
    return dlb__fail(DLB_E_INVAL, ".npy header: the dictionary lacks '%s'",
                     !have_descr ? "descr" : !have_order ? "fortran_order"
                                                         : "shape");
  return DLB_OK;
}

/* Checks the fixed start of a .npy file of size bytes (its first
 * min(size, 12), size >= 10) and fills in r's version, *start (where the
 * dictionary starts) and *len (its length). */
static dlb_status parse_prefix(const unsigned char *base, uint64_t size,
                               dlb_npy_header *r, uint64_t *start,
                               uint64_t *len) {
  static const unsigned char magic[6] = {0x93, 'N', 'U', 'M', 'P', 'Y'};
  if (memcmp(base, magic, sizeof magic) != 0)
    return dlb__fail(DLB_E_INVAL, ".npy file: the magic string (byte 0x93, "
                     "then NUMPY) is missing");
  r->major = base[6];
  r->minor = base[7];
  if (r->major < 1 || r->major > 3 || r->minor != 0)
    return dlb__fail(DLB_E_INVAL, ".npy file: format version %d.%d; dlbridge "
                     "reads 1.0, 2.0 and 3.0", r->major, r->minor);
  if (r->major == 1) {
    *len = (uint64_t)base[8] | (uint64_t)base[9] << 8;
    *start = 10;
  } else {
    if (size < 12)
      return dlb__fail(DLB_E_INVAL, ".npy file: %llu bytes, shorter than "
                       "a version %d header's 12", (unsigned long long)size,
                       r->major);
    *len = (uint64_t)base[8] | (uint64_t)base[9] << 8 |
           (uint64_t)base[10] << 16 | (uint64_t)base[11] << 24;
    *start = 12;
  }
  if (*len > size - *start)
    return dlb__fail(DLB_E_INVAL, ".npy file: header_len %llu runs past the "
                     "end of the file (%llu bytes)", (unsigned long long)*len,
                     (unsigned long long)size);
  if (*len > NPY_HEADER_MAX)
    return dlb__fail(DLB_E_INVAL, ".npy file: header_len %llu exceeds the "
                     "%u bytes dlbridge reads", (unsigned long long)*len,
                     NPY_HEADER_MAX);
  return DLB_OK;
}

/* Parses the dictionary text (len bytes, starting at byte start of a file
 * of size bytes) into r, whose version is set, and checks the data it
 * describes against the file's size. */
static dlb_status parse_header(const char *text, uint64_t start,
                               uint64_t len, uint64_t size,
                               dlb_npy_header *r) {
  unsigned align = 1;
  dlb_status s = parse_dict(text, (size_t)len, r, &align);
  if (s != DLB_OK) return s;
  r->data_offset = start + len;
  int64_t numel = 0;
  s = dlb_shape_numel(r->ndim, r->shape, &numel);
  if (s != DLB_OK) return dlb__fail_within(s, ".npy header: 'shape'");
  uint64_t itemsize = r->dtype.bits / 8u;
  if ((uint64_t)numel > UINT64_MAX / itemsize ||
      (uint64_t)numel * itemsize > (uint64_t)INT64_MAX)
    return dlb__fail(DLB_E_OVERFLOW, ".npy file: %lld elements of %llu "
                     "bytes overflow", (long long)numel,
                     (unsigned long long)itemsize);
  r->data_bytes = (uint64_t)numel * itemsize;
  if (r->data_bytes > size - r->data_offset)
    return dlb__fail(DLB_E_LAYOUT, ".npy file: the shape needs %llu bytes of "
                     "data but the file holds %llu after the header",
                     (unsigned long long)r->data_bytes,
                     (unsigned long long)(size - r->data_offset));
  if (r->data_offset % align != 0)
    return dlb__fail(DLB_E_LAYOUT, ".npy file: data starts at byte %llu, not "
                     "a multiple of the %u-byte alignment of '%s'",
                     (unsigned long long)r->data_offset, align, r->descr);
  return DLB_OK;
}

typedef struct npy_map {
  void *base;
  size_t size;
} npy_map;

/* A path in a message: its first PATH_SHOWN bytes, then "..." when it is
 * longer, so that the reason after it still fits the error buffer (a path
 * may be PATH_MAX long). */
#define PATH_SHOWN 200
#define PATH_FMT "'%.*s%s'"
#define PATH_ARGS(p) path_shown_length(p), (p), \
                     strlen(p) > PATH_SHOWN ? "..." : ""
static int path_shown_length(const char *path) {
  size_t n = strlen(path);
  return (int)(n > PATH_SHOWN ? PATH_SHOWN : n);
}

/* Opens the regular file at path read-only and sizes it. O_NONBLOCK:
 * opening a FIFO would otherwise wait for a writer (it has no effect on a
 * regular file). */
static dlb_status open_file(const char *path, int *fd_out, uint64_t *size) {
  int fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK);
  if (fd < 0)
    return dlb__fail(DLB_E_INVAL, "cannot open " PATH_FMT ": %s",
                     PATH_ARGS(path), strerror(errno));
  struct stat st;
  dlb_status s = DLB_OK;
  if (fstat(fd, &st) != 0)
    s = dlb__fail(DLB_E_INVAL, "cannot stat " PATH_FMT ": %s",
                  PATH_ARGS(path), strerror(errno));
  else if (!S_ISREG(st.st_mode))
    s = dlb__fail(DLB_E_INVAL, PATH_FMT " is not a regular file",
                  PATH_ARGS(path));
  else if (st.st_size < 10)
    s = dlb__fail(DLB_E_INVAL, ".npy file " PATH_FMT ": %lld bytes, shorter "
                  "than the 10 bytes of the smallest header", PATH_ARGS(path),
                  (long long)st.st_size);
  else if ((uint64_t)st.st_size > SIZE_MAX)
    s = dlb__fail(DLB_E_OVERFLOW, PATH_FMT " is too large to map",
                  PATH_ARGS(path));
  if (s != DLB_OK) {
    close(fd);
    return s;
  }
  *fd_out = fd;
  *size = (uint64_t)st.st_size;
  return DLB_OK;
}

/* Maps the first len bytes of fd read-only. */
static dlb_status map_bytes(int fd, const char *path, uint64_t len,
                            npy_map *out) {
  void *p = mmap(NULL, (size_t)len, PROT_READ, MAP_SHARED, fd, 0);
  if (p == MAP_FAILED)
    return dlb__fail(errno == ENOMEM ? DLB_E_NOMEM : DLB_E_INVAL,
                     "cannot map " PATH_FMT ": %s", PATH_ARGS(path),
                     strerror(errno));
  *out = (npy_map){p, (size_t)len};
  return DLB_OK;
}

/* Reads len bytes at offset off of fd into buf. The header is read, not
 * mapped: a file cut shorter since it was sized (another process
 * truncating it) then reads short, which is refused, where a read of a
 * lost page of a mapping would kill the process with SIGBUS. */
static dlb_status read_bytes(int fd, const char *path, uint64_t off,
                             void *buf, size_t len) {
  size_t done = 0;
  while (done < len) {
    ssize_t n = pread(fd, (char *)buf + done, len - done,
                      (off_t)(off + done));
    if (n < 0 && errno == EINTR) continue;
    if (n < 0)
      return dlb__fail(DLB_E_INVAL, "cannot read " PATH_FMT ": %s",
                       PATH_ARGS(path), strerror(errno));
    if (n == 0)
      return dlb__fail(DLB_E_INVAL, ".npy file " PATH_FMT ": ends at byte "
                       "%llu, shorter than when it was opened (it changed "
                       "while read)", PATH_ARGS(path),
                       (unsigned long long)(off + done));
    done += (size_t)n;
  }
  return DLB_OK;
}

/* Reads and checks the header of the file open as fd (size bytes) into
 * *h, written only on success. */
static dlb_status read_header(int fd, const char *path, uint64_t size,
                              dlb_npy_header *h) {
  unsigned char prefix[12];
  const size_t have = size < sizeof prefix ? (size_t)size : sizeof prefix;
  dlb_status s = read_bytes(fd, path, 0, prefix, have);
  if (s != DLB_OK) return s;
  dlb_npy_header r;
  memset(&r, 0, sizeof r);
  uint64_t start = 0, len = 0;
  s = parse_prefix(prefix, size, &r, &start, &len);
  if (s != DLB_OK) return s;
  char *text = dlb__malloc(len > 0 ? (size_t)len : 1);
  if (text == NULL) return DLB_E_NOMEM;
  s = read_bytes(fd, path, start, text, (size_t)len);
  if (s == DLB_OK) s = parse_header(text, start, len, size, &r);
  dlb__free(text);
  if (s == DLB_OK) *h = r;
  return s;
}

/* Reads the header of the file at path into *h; with want_data, *m then
 * maps the header and the data after it (and no more of the file: the
 * rest is no part of the tensor). */
static dlb_status map_file(const char *path, int want_data, npy_map *m,
                           dlb_npy_header *h) {
  int fd = -1;
  uint64_t size = 0;
  dlb_status s = open_file(path, &fd, &size);
  if (s != DLB_OK) return s;
  s = read_header(fd, path, size, h);
  /* The tensor reads [data_offset, data_offset + data_bytes) of this
   * mapping whatever the file holds by now. */
  if (s == DLB_OK && want_data)
    s = map_bytes(fd, path, h->data_offset + h->data_bytes, m);
  close(fd);
  return s;
}

dlb_status dlb_npy_read_header(const char *path, dlb_npy_header *out) {
  if (path == NULL || out == NULL)
    return dlb__fail(DLB_E_INVAL, "dlb_npy_read_header: %s is NULL",
                     path == NULL ? "path" : "out");
  npy_map m = {NULL, 0};
  return map_file(path, 0, &m, out);
}

static void unmap(void *ctx) {
  npy_map *m = ctx;
  munmap(m->base, m->size);
  dlb__free(m);
}

dlb_status dlb_tensor_map_npy(const char *path, unsigned flags,
                              DLManagedTensorVersioned **out) {
  if (path == NULL || out == NULL)
    return dlb__fail(DLB_E_INVAL, "dlb_tensor_map_npy: %s is NULL",
                     path == NULL ? "path" : "out");
  if ((flags & ~(DLB_NPY_PIN_CUDA | DLB_NPY_PIN_ROCM)) != 0 ||
      flags == (DLB_NPY_PIN_CUDA | DLB_NPY_PIN_ROCM))
    return dlb__fail(DLB_E_INVAL, "dlb_tensor_map_npy: flags 0x%x; allowed "
                     "are 0, DLB_NPY_PIN_CUDA (1) and DLB_NPY_PIN_ROCM (2)",
                     flags);
  npy_map *m = dlb__malloc(sizeof *m);
  if (m == NULL) return DLB_E_NOMEM;
  m->base = NULL;
  dlb_npy_header h;
  dlb_status s = map_file(path, 1, m, &h);
  if (s != DLB_OK) {
    dlb__free(m);
    return s;
  }
  int64_t strides[DLB_MAX_NDIM];
  int64_t numel = (int64_t)(h.data_bytes / (h.dtype.bits / 8u));
  /* data is the first element, not the mapping's start: the header is no
   * part of the tensor, and pinning registers only the elements, so every
   * consumer that classifies data finds it pinned. */
  DLTensor desc = {
      .data = (char *)m->base + h.data_offset,
      .device = {kDLCPU, 0},
      .ndim = h.ndim,
      .dtype = h.dtype,
      .shape = h.shape,
      .strides = NULL,
      .byte_offset = 0,
  };
  /* Without elements NULL strides let dlb_tensor_wrap pick safe ones. */
  if (h.fortran_order && numel > 0) {
    int64_t step = 1;
    for (int32_t i = 0; i < h.ndim; i++) {
      strides[i] = step;
      step *= h.shape[i];
    }
    desc.strides = strides;
  }
  DLManagedTensorVersioned *t = NULL;
  s = dlb_tensor_wrap(&desc, DLPACK_FLAG_BITMASK_READ_ONLY, unmap, m, &t);
  if (s != DLB_OK) {
    unmap(m);
    return s;
  }
  if (flags == 0) {
    *out = t;
    return DLB_OK;
  }
  DLManagedTensorVersioned *pinned = NULL;
  s = dlb_tensor_pin(t, flags == DLB_NPY_PIN_CUDA ? kDLCUDAHost : kDLROCMHost,
                     &pinned);
  dlb_tensor_release(t);
  if (s == DLB_OK) *out = pinned;
  return s;
}
