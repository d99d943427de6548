/*
 * shm.c -- tensors in anonymous shared memory (sealed memfds), their
 * export as a descriptor plus metadata, and their import.
 *
 * A shared memory file starts with a header page holding a random identity
 * and where the data starts; the data region follows. Handles carry the
 * identity too, so a handle is only accepted with the memory it was made
 * for. Every process keeps one descriptor of a memory (for later exports)
 * and one mapping of its data region, however many tensors over it it
 * imports: imports of a memory mapped here already (the same file, as
 * writable or as read-only as before) share them. Both go when its last
 * tensor over the memory is released, and the kernel frees the memory when
 * no process has either left.
 */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/random.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/sysinfo.h>
#include <unistd.h>

#include "backend/backend.h"
#include "core/tensor_internal.h"
#include "share/share_internal.h"

struct dlb__shm {
  int fd;        /* kept for later exports; read-only when read_only */
  int read_only; /* the descriptor and the mapping are read-only */
  void *map;     /* the data region */
  size_t map_len;
  uint64_t file_size;
  uint64_t data_offset;
  uint8_t id[DLB__SHARE_ID_BYTES];
  /* Imported memory is listed, so a later import of it shares the
   * descriptor and the mapping; refs counts the owners of the tensors
   * over it (under dlb__shm_lock). Allocated memory is not listed. */
  int listed;
  long refs;
  dev_t dev;
  ino_t ino;
  struct dlb__shm *next;
};

pthread_mutex_t dlb__shm_lock = PTHREAD_MUTEX_INITIALIZER;
static dlb__shm *imported;

static dlb_status sys_fail(dlb_status st, const char *what, int err) {
  char buf[128];
  const char *msg = strerror_r(err, buf, sizeof buf);
  return dlb__fail(st, "%s: %s (errno %d)", what, msg, err);
}

/* Out of memory for the system's refusals that mean it. */
static dlb_status sys_status(int err) {
  return err == ENOMEM || err == ENOSPC ? DLB_E_NOMEM : DLB_E_SYSTEM;
}

static void shm_release(void *ctx) {
  dlb__shm *s = ctx;
  if (s->listed) {
    pthread_mutex_lock(&dlb__shm_lock);
    const int last = --s->refs == 0;
    if (last) {
      dlb__shm **link = &imported;
      while (*link != s) link = &(*link)->next;
      *link = s->next;
    }
    pthread_mutex_unlock(&dlb__shm_lock);
    if (!last) return;
  }
  munmap(s->map, s->map_len);
  close(s->fd);
  dlb__free(s);
}

const dlb__shm *dlb__shm_of(const DLManagedTensorVersioned *t) {
  /* A pinned tensor wraps a share of the tensor it pinned; a pinned tensor
   * is never pinned again (only cpu tensors are), so one step suffices. */
  for (int step = 0; step < 2 && t != NULL; step++) {
    const dlb__tensor *ours = dlb__tensor_of(t);
    if (ours == NULL) return NULL;
    const dlb__owner *o = ours->owner;
    if (o->kind == DLB__OWNER_CALLBACK && o->u.callback.fn == shm_release)
      return o->u.callback.ctx;
    t = dlb__pin_source(t);
  }
  return NULL;
}

static void header_encode(const dlb__shm *s, uint8_t *h) {
  memset(h, 0, DLB__SHM_HEADER_BYTES);
  memcpy(h, DLB__SHM_MAGIC, 8);
  h[8] = 1;
  memcpy(h + 16, s->id, DLB__SHARE_ID_BYTES);
  for (int i = 0; i < 8; i++) h[32 + i] = (uint8_t)(s->data_offset >> (8 * i));
  uint64_t data = s->file_size - s->data_offset;
  for (int i = 0; i < 8; i++) h[40 + i] = (uint8_t)(data >> (8 * i));
}

/* The memory the system could still give, in bytes: MemAvailable and
 * SwapFree of /proc/meminfo. 0 when it cannot tell. Reading the file
 * costs about as much as a small share itself, so a size within half of
 * the free memory and swap sysinfo() counts (less than what is available:
 * no cache is counted) is answered with that size at once. */
static uint64_t memory_available(uint64_t size) {
  struct sysinfo si;
  if (sysinfo(&si) == 0) {
    const uint64_t unit = si.mem_unit != 0 ? si.mem_unit : 1;
    const uint64_t free_now = ((uint64_t)si.freeram + si.freeswap) * unit;
    if (size <= free_now / 2) return size;
  }
  FILE *f = fopen("/proc/meminfo", "re");
  if (f == NULL) return 0;
  char line[128];
  unsigned long long kb, total = 0;
  int found = 0;
  while (fgets(line, sizeof line, f) != NULL)
    if (sscanf(line, "MemAvailable: %llu kB", &kb) == 1 ||
        sscanf(line, "SwapFree: %llu kB", &kb) == 1) {
      total += kb;
      found++;
    }
  fclose(f);
  return found == 2 ? (uint64_t)total * 1024 : 0;
}

/* Creates, sizes, fills the header of and seals a memory file of
 * data_len bytes of data after one page of header. */
static dlb_status shm_create(dlb__shm *s, size_t page, size_t data_len) {
  s->data_offset = page;
  s->file_size = (uint64_t)page + data_len;
  if (getrandom(s->id, sizeof s->id, 0) != (ssize_t)sizeof s->id)
    return sys_fail(DLB_E_SYSTEM, "getrandom for the share identity", errno);
  s->fd = memfd_create("dlbridge-shared", MFD_CLOEXEC | MFD_ALLOW_SEALING);
  if (s->fd < 0)
    return sys_fail(sys_status(errno), "memfd_create", errno);
  /* ftruncate past the file size limit raises SIGXFSZ, which ends the
   * process unless it is caught: a refusal is the caller's to handle. */
  struct rlimit lim;
  if (getrlimit(RLIMIT_FSIZE, &lim) == 0 && lim.rlim_cur != RLIM_INFINITY &&
      s->file_size > (uint64_t)lim.rlim_cur)
    return dlb__fail(DLB_E_SYSTEM, "shared memory of %llu bytes (a page of "
                     "header and the data) exceeds this process's file size "
                     "limit, %llu bytes (RLIMIT_FSIZE), which ftruncate "
                     "enforces", (unsigned long long)s->file_size,
                     (unsigned long long)lim.rlim_cur);
  /* Memory files are limited by nothing but memory: reserving more than
   * the system has would end in its out-of-memory killer, which picks any
   * process, not in a refusal. */
  const uint64_t available = memory_available(s->file_size);
  if (available != 0 && s->file_size > available)
    return dlb__fail(DLB_E_NOMEM, "shared memory of %llu bytes exceeds the "
                     "memory this system has available, %llu bytes "
                     "(MemAvailable and SwapFree in /proc/meminfo)",
                     (unsigned long long)s->file_size,
                     (unsigned long long)available);
  /* Reserving the pages now turns a shortage into this status instead of
   * a SIGBUS at the first touch of a page that cannot be had. */
  int err = 0;
  if (ftruncate(s->fd, (off_t)s->file_size) != 0)
    return sys_fail(sys_status(errno), "ftruncate of shared memory", errno);
  err = posix_fallocate(s->fd, 0, (off_t)s->file_size);
  if (err != 0)
    return sys_fail(sys_status(err), "reserving shared memory", err);
  uint8_t h[DLB__SHM_HEADER_BYTES];
  header_encode(s, h);
  if (pwrite(s->fd, h, sizeof h, 0) != (ssize_t)sizeof h)
    return sys_fail(DLB_E_SYSTEM, "writing the shared memory header", errno);
  /* Not F_SEAL_SEAL yet: the first read-only export adds
   * F_SEAL_FUTURE_WRITE (seal_read_only). */
  if (fcntl(s->fd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW) != 0)
    return sys_fail(DLB_E_SYSTEM, "sealing shared memory", errno);
  void *map = mmap(NULL, data_len, PROT_READ | PROT_WRITE, MAP_SHARED, s->fd,
                   (off_t)page);
  if (map == MAP_FAILED)
    return sys_fail(sys_status(errno), "mapping shared memory", errno);
  s->map = map;
  s->map_len = data_len;
  return DLB_OK;
}

dlb_status dlb_shared_alloc(DLDataType dtype, int32_t ndim,
                            const int64_t *shape,
                            DLManagedTensorVersioned **out) {
  if (out == NULL) return dlb__fail(DLB_E_INVAL, "out is NULL");
  int64_t numel = 0, bytes = 0;
  dlb_status st = dlb__alloc_request(dtype, ndim, shape, &numel, &bytes);
  if (st != DLB_OK) return st;
  size_t page = (size_t)sysconf(_SC_PAGESIZE);
  /* At least one page of data, so data is never NULL even when empty. */
  if ((uint64_t)bytes > (uint64_t)INT64_MAX - 2 * page)
    return dlb__fail(DLB_E_OVERFLOW, "%lld bytes of shared memory overflow "
                     "the file size", (long long)bytes);
  size_t data_len =
      bytes == 0 ? page : ((size_t)bytes + page - 1) / page * page;

  dlb__shm *s = dlb__calloc(sizeof *s);
  if (s == NULL) return DLB_E_NOMEM;
  s->fd = -1;
  st = shm_create(s, page, data_len);
  if (st != DLB_OK) {
    if (s->fd >= 0) close(s->fd);
    dlb__free(s);
    return st;
  }
  DLTensor desc;
  memset(&desc, 0, sizeof desc);
  desc.data = s->map;
  desc.device.device_type = kDLCPU;
  desc.ndim = ndim;
  desc.dtype = dtype;
  desc.shape = (int64_t *)(uintptr_t)shape;
  st = dlb_tensor_wrap(&desc, 0, shm_release, s, out);
  if (st != DLB_OK) shm_release(s);
  return st;
}

/* Seals that refuse new writable mappings and writes through descriptors. */
#define WRITE_SEALS (F_SEAL_WRITE | F_SEAL_FUTURE_WRITE)

/* Whether seals (F_GET_SEALS's answer, negative on failure) hold one. */
static int write_sealed(int seals) {
  return seals >= 0 && (seals & WRITE_SEALS) != 0;
}

/*
 * Makes the memory read-only for every mapping made from now on, in any
 * process: a read-only descriptor alone stops nobody, since a process can
 * reopen it writable through /proc/self/fd/N. Mappings that exist keep
 * writing (the allocating process's, earlier writable importers'). Then
 * seals it for good, so nobody can add seals the other processes would
 * trip on. Idempotent, and safe when another thread seals it first.
 */
static dlb_status seal_read_only(int fd) {
  if (write_sealed(fcntl(fd, F_GET_SEALS))) return DLB_OK;
  if (fcntl(fd, F_ADD_SEALS, F_SEAL_FUTURE_WRITE | F_SEAL_SEAL) == 0)
    return DLB_OK;
  int err = errno;
  if (write_sealed(fcntl(fd, F_GET_SEALS))) return DLB_OK;
  return sys_fail(DLB_E_SYSTEM, "sealing shared memory against writes "
                  "(F_SEAL_FUTURE_WRITE, Linux 5.1) for a read-only share",
                  err);
}

dlb_status dlb__shm_export(const dlb__shm *s,
                           const DLManagedTensorVersioned *t,
                           dlb__share_meta *m, int *fd) {
  dlb__span span;
  dlb_status st = dlb__managed_validate_span(t, &span);
  if (st != DLB_OK) return st;
  int read_only = (t->flags & DLPACK_FLAG_BITMASK_READ_ONLY) != 0;
  if (s->read_only && !read_only)
    return dlb__fail(DLB_E_READONLY, "t's memory was imported read-only but "
                     "t->flags lacks READ_ONLY; export it read-only");
  /* The mapping bounds the region. An empty tensor has nothing to place:
   * it goes out at the region's start, whatever data and byte_offset say. */
  int64_t offset = 0; /* of t's first element from the region's start */
  if (span.numel > 0) {
    const int64_t delta =
        (int64_t)((uintptr_t)t->dl_tensor.data - (uintptr_t)s->map);
    int64_t lo = 0, hi = 0;
    if (dlb__add_overflow(delta, span.lo, &lo) ||
        dlb__add_overflow(delta, span.hi, &hi))
      return dlb__fail(DLB_E_LAYOUT, "t's data (%p) lies outside its "
                       "%zu-byte shared region", t->dl_tensor.data,
                       s->map_len);
    if (lo < 0 || hi > (int64_t)s->map_len)
      return dlb__fail(DLB_E_LAYOUT, "t's elements occupy bytes [%lld, "
                       "%lld) of a %zu-byte shared region",
                       (long long)lo, (long long)hi, s->map_len);
    /* The first element lies in [lo, hi). */
    offset = delta + (int64_t)t->dl_tensor.byte_offset;
  }
  if (!read_only) {
    const int seals = fcntl(s->fd, F_GET_SEALS);
    if (write_sealed(seals))
      return dlb__fail(DLB_E_READONLY, "t's memory was shared read-only "
                       "before (seals 0x%x), so no new writable mapping of it "
                       "can be made; export t read-only", (unsigned)seals);
  }
  m->kind = DLB__SHARE_HOST;
  m->flags = t->flags | (s->read_only ? DLPACK_FLAG_BITMASK_READ_ONLY : 0);
  m->size = s->file_size;
  m->data_offset = s->data_offset;
  m->byte_offset = (uint64_t)offset;
  m->device_id = 0;
  memcpy(m->id, s->id, sizeof m->id);
  int nfd = -1;
  if (read_only && !s->read_only) {
    /* Sealed against new writable mappings first, then a new open file,
     * read-only. */
    dlb_status sealed = seal_read_only(s->fd);
    if (sealed != DLB_OK) return sealed;
    char path[64];
    snprintf(path, sizeof path, "/proc/self/fd/%d", s->fd);
    nfd = open(path, O_RDONLY | O_CLOEXEC);
    if (nfd < 0)
      return sys_fail(DLB_E_SYSTEM, "reopening shared memory read-only "
                      "through /proc/self/fd", errno);
  } else {
    nfd = fcntl(s->fd, F_DUPFD_CLOEXEC, 0);
    if (nfd < 0)
      return sys_fail(DLB_E_SYSTEM, "duplicating the shared memory "
                      "descriptor", errno);
  }
  *fd = nfd;
  return DLB_OK;
}

#define BAD(...) dlb__fail(DLB_E_HANDLE, "share handle: " __VA_ARGS__)

/* What must hold of a descriptor before its size is believed; *seals
 * gets its seals. */
static dlb_status check_fd(int fd, struct stat *st, int *seals_out) {
  if (fstat(fd, st) != 0) {
    int err = errno;
    if (err == EBADF) return BAD("fd %d is not an open descriptor", fd);
    return sys_fail(DLB_E_SYSTEM, "fstat of the shared memory", err);
  }
  if (!S_ISREG(st->st_mode))
    return BAD("fd %d is not shared memory (file mode 0%o)", fd,
               (unsigned)st->st_mode);
  int seals = fcntl(fd, F_GET_SEALS);
  if (seals < 0)
    return BAD("fd %d is not sealable shared memory (F_GET_SEALS: errno %d)",
               fd, errno);
  int need = F_SEAL_SHRINK | F_SEAL_GROW;
  if ((seals & need) != need)
    return BAD("fd %d is not sealed against shrinking and growing (seals "
               "0x%x)", fd, (unsigned)seals);
  *seals_out = seals;
  return DLB_OK;
}

/* The header in the memory must name the identity in the handle. */
static dlb_status check_header(int fd, const dlb__share_meta *m) {
  uint8_t h[DLB__SHM_HEADER_BYTES];
  ssize_t n = pread(fd, h, sizeof h, 0);
  if (n != (ssize_t)sizeof h)
    return BAD("the memory's header cannot be read (%zd of %zu bytes)", n,
               sizeof h);
  if (memcmp(h, DLB__SHM_MAGIC, 8) != 0 || h[8] != 1)
    return BAD("the memory has no dlbridge header; not dlbridge shared "
               "memory");
  if (memcmp(h + 16, m->id, DLB__SHARE_ID_BYTES) != 0)
    return BAD("identity does not match the memory's: a handle replayed "
               "with other memory");
  uint64_t off = 0;
  for (int i = 0; i < 8; i++) off |= (uint64_t)h[32 + i] << (8 * i);
  if (off != m->data_offset)
    return BAD("data_offset is %llu but the memory's header says %llu",
               (unsigned long long)m->data_offset, (unsigned long long)off);
  return DLB_OK;
}

/* The checks of dlb__shm_import on own, a duplicate of the caller's fd
 * (named fd in messages); fills *m and *s_out, which then holds own (or,
 * for a read-only handle with a writable descriptor, a read-only open of
 * it, own closed). */
static dlb_status shm_checked(const void *buf, size_t len, int fd, int own,
                              dlb__share_meta *m, dlb__shm **s_out) {
  struct stat stt;
  int seals = 0;
  dlb_status st = check_fd(own, &stt, &seals);
  if (st != DLB_OK) return st;
  st = dlb__share_decode(buf, len, (uint64_t)stt.st_size, m);
  if (st != DLB_OK) return st;
  if (m->kind != DLB__SHARE_HOST)
    return BAD("a device handle (kind %d) came with fd %d; device handles "
               "carry no descriptor", (int)m->kind, fd);
  int read_only = (m->flags & DLPACK_FLAG_BITMASK_READ_ONLY) != 0;
  int acc = fcntl(own, F_GETFL);
  if (acc < 0) return sys_fail(DLB_E_SYSTEM, "F_GETFL of the descriptor", errno);
  if (!read_only && (acc & O_ACCMODE) == O_RDONLY)
    return BAD("the handle is writable but fd %d is read-only", fd);
  if (!read_only && write_sealed(seals))
    return BAD("the handle is writable but fd %d's memory is sealed against "
               "writes (seals 0x%x)", fd, (unsigned)seals);
  st = check_header(own, m);
  if (st != DLB_OK) return st;
  int keep = own;
  if (read_only && (acc & O_ACCMODE) != O_RDONLY) {
    /* A read-only share keeps (and passes on) a read-only descriptor
     * only, whatever descriptor came with it. */
    char path[64];
    snprintf(path, sizeof path, "/proc/self/fd/%d", own);
    keep = open(path, O_RDONLY | O_CLOEXEC);
    if (keep < 0)
      return sys_fail(DLB_E_SYSTEM, "reopening the received shared memory "
                      "read-only through /proc/self/fd (the handle is "
                      "read-only, its descriptor writable)", errno);
  }
  dlb__shm *s = dlb__calloc(sizeof *s);
  if (s == NULL) {
    if (keep != own) close(keep);
    return DLB_E_NOMEM;
  }
  if (keep != own) close(own);
  s->read_only = read_only;
  s->dev = stt.st_dev;
  s->ino = stt.st_ino;
  s->file_size = m->size;
  s->data_offset = m->data_offset;
  s->map_len = (size_t)(m->size - m->data_offset);
  memcpy(s->id, m->id, sizeof s->id);
  s->fd = keep;
  *s_out = s;
  return DLB_OK;
}

/*
 * *sp (checked, not mapped) as listed memory with one reference more: the
 * memory of the same file mapped here before, as read-only as *sp, whose
 * descriptor and mapping it shares (*sp is freed and replaced), or else
 * *sp itself, mapped and listed. Frees *sp and its descriptor on failure.
 */
static dlb_status shm_listed(dlb__shm **sp, off_t data_offset) {
  dlb__shm *s = *sp;
  dlb__fork_guard();
  pthread_mutex_lock(&dlb__shm_lock);
  dlb__shm *e = imported;
  while (e != NULL && (e->dev != s->dev || e->ino != s->ino ||
                       e->read_only != s->read_only))
    e = e->next;
  dlb_status st = DLB_OK;
  if (e != NULL) {
    e->refs++;
  } else {
    int prot = s->read_only ? PROT_READ : PROT_READ | PROT_WRITE;
    void *map = mmap(NULL, s->map_len, prot, MAP_SHARED, s->fd, data_offset);
    if (map == MAP_FAILED) {
      st = sys_fail(sys_status(errno), "mapping the received shared memory",
                    errno);
    } else {
      s->map = map;
      s->listed = 1;
      s->refs = 1;
      s->next = imported;
      imported = s;
    }
  }
  pthread_mutex_unlock(&dlb__shm_lock);
  if (e != NULL || st != DLB_OK) {
    close(s->fd);
    dlb__free(s);
  }
  if (e != NULL) *sp = e;
  return st;
}

dlb_status dlb__shm_import(const void *buf, size_t len, int fd,
                           uint64_t flags, DLManagedTensorVersioned **out) {
  /* Everything is checked on a descriptor of our own: the caller's number
   * could be closed and reused for other memory while we look. */
  const int own = fcntl(fd, F_DUPFD_CLOEXEC, 0);
  if (own < 0) {
    if (errno == EBADF) return BAD("fd %d is not an open descriptor", fd);
    return sys_fail(DLB_E_SYSTEM, "duplicating the received descriptor",
                    errno);
  }
  dlb__share_meta m;
  dlb__shm *s = NULL;
  dlb_status st = shm_checked(buf, len, fd, own, &m, &s);
  if (st != DLB_OK) {
    close(own);
    return st;
  }
  st = shm_listed(&s, (off_t)m.data_offset);
  if (st != DLB_OK) return st;
  DLTensor desc;
  memset(&desc, 0, sizeof desc);
  desc.data = s->map;
  desc.device.device_type = kDLCPU;
  desc.ndim = m.ndim;
  desc.dtype = m.dtype;
  desc.shape = m.shape;
  desc.strides = m.strides;
  desc.byte_offset = m.byte_offset;
  DLManagedTensorVersioned *t = NULL;
  st = dlb_tensor_wrap(&desc, m.flags, shm_release, s, &t);
  if (st != DLB_OK) {
    shm_release(s);
    return st;
  }
  if (flags & (DLB_SHARE_PIN_CUDA | DLB_SHARE_PIN_ROCM)) {
    DLManagedTensorVersioned *p = NULL;
    st = dlb_tensor_pin(t, flags & DLB_SHARE_PIN_CUDA ? kDLCUDAHost
                                                      : kDLROCMHost, &p);
    dlb_tensor_release(t);
    if (st != DLB_OK) return st;
    t = p;
  }
  *out = t;
  return DLB_OK;
}
