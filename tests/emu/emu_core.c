/* emu_core.c -- configuration, failure injection, regions and streams. */
#include "emu_core.h"

/* The library's reading of the process's mappings, compiled in. */
#include "backend/host_maps.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

emu_config emu_cfg;

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_once_t configured = PTHREAD_ONCE_INIT;
static const char *cfg_prefix;
static int cfg_default_version;

/* ---- calls and failures ---- */

#define MAX_NAMES 256

typedef struct name_count {
  char name[48];
  long calls;
  int version;
} name_count;

static name_count names[MAX_NAMES];
static int nnames;
static long total_calls;
static char fail_name[48];
static int fail_any;
static int fail_left;
static int fail_result;
static int fail_did;

static name_count *slot(const char *name) {
  for (int i = 0; i < nnames; i++)
    if (strcmp(names[i].name, name) == 0) return &names[i];
  if (nnames == MAX_NAMES) return NULL;
  name_count *n = &names[nnames++];
  snprintf(n->name, sizeof n->name, "%s", name);
  return n;
}

static void maybe_slow(const char *name);

int emu_enter(const char *name, int quiet) {
  maybe_slow(name);
  pthread_mutex_lock(&lock);
  name_count *n = slot(name);
  if (n != NULL) n->calls++;
  total_calls++;
  if (fail_left > 0 &&
      ((fail_any && !quiet) || (!fail_any && strcmp(fail_name, name) == 0)) &&
      --fail_left == 0) {
    fail_did = 1;
    pthread_mutex_unlock(&lock);
    return fail_result;
  }
  return 0;
}

void emu_leave(void) { pthread_mutex_unlock(&lock); }

void emu_fail(const char *name, int nth, int result) {
  pthread_mutex_lock(&lock);
  fail_any = name == NULL;
  snprintf(fail_name, sizeof fail_name, "%s", name != NULL ? name : "");
  fail_left = nth;
  fail_result = result;
  fail_did = 0;
  pthread_mutex_unlock(&lock);
}

int emu_fail_fired(void) {
  pthread_mutex_lock(&lock);
  int r = fail_did;
  pthread_mutex_unlock(&lock);
  return r;
}

long emu_calls(const char *name) {
  pthread_mutex_lock(&lock);
  long r = 0;
  if (name == NULL) {
    r = total_calls;
  } else {
    for (int i = 0; i < nnames; i++)
      if (strcmp(names[i].name, name) == 0) r = names[i].calls;
  }
  pthread_mutex_unlock(&lock);
  return r;
}

void emu_record_version(const char *symbol, int version) {
  char key[48];
  snprintf(key, sizeof key, "?%s", symbol);
  name_count *n = slot(key);
  /* The highest asked for: fallbacks are looked up after the newest. */
  if (n != NULL && version > n->version) n->version = version;
}

int emu_requested_version(const char *symbol) {
  char key[48];
  snprintf(key, sizeof key, "?%s", symbol);
  pthread_mutex_lock(&lock);
  int r = 0;
  for (int i = 0; i < nnames; i++)
    if (strcmp(names[i].name, key) == 0) r = names[i].version;
  pthread_mutex_unlock(&lock);
  return r;
}

/* ---- configuration ---- */

static long long env_number(const char *what, long long fallback) {
  char key[64];
  snprintf(key, sizeof key, "%s%s", cfg_prefix, what);
  const char *v = getenv(key);
  if (v == NULL || v[0] == '\0') return fallback;
  return strtoll(v, NULL, 0);
}

static void read_config(void) {
  emu_cfg.devices = (int)env_number("DEVICES", 2);
  if (emu_cfg.devices < 0) emu_cfg.devices = 0;
  if (emu_cfg.devices > EMU_MAX_DEVICES) emu_cfg.devices = EMU_MAX_DEVICES;
  emu_cfg.reported = (int)env_number("REPORTED_DEVICES", -1);
  emu_cfg.read_only_register = (int)env_number("READ_ONLY_REGISTER", 1);
  emu_cfg.version = (int)env_number("VERSION", cfg_default_version);
  emu_cfg.device_memory = (size_t)env_number("DEVICE_MEMORY", 1LL << 30);
  emu_cfg.max_pitch = (int)env_number("MAX_PITCH", 2147483647);
  emu_cfg.concurrent_managed = (int)env_number("CONCURRENT_MANAGED", 1);
  emu_cfg.managed_memory = (int)env_number("MANAGED_MEMORY", 1);
  emu_cfg.d2d_pitch_align = (size_t)env_number("D2D_PITCH_ALIGN", 1);
  if (emu_cfg.d2d_pitch_align == 0) emu_cfg.d2d_pitch_align = 1;
  emu_cfg.fill = (int)env_number("FILL", -1);
  char key[64];
  snprintf(key, sizeof key, "%sHIDE", cfg_prefix);
  const char *hide = getenv(key);
  snprintf(emu_cfg.hide, sizeof emu_cfg.hide, "%s", hide != NULL ? hide : "");
  snprintf(key, sizeof key, "%sNAME", cfg_prefix);
  const char *name = getenv(key);
  snprintf(emu_cfg.name, sizeof emu_cfg.name, "%s", name != NULL ? name : "");
  /* NAME:N arms a failure as emu_fail(NAME, N, 1) does. */
  snprintf(key, sizeof key, "%sFAIL", cfg_prefix);
  const char *fail = getenv(key);
  const char *colon = fail != NULL ? strchr(fail, ':') : NULL;
  if (colon != NULL) {
    snprintf(fail_name, sizeof fail_name, "%.*s", (int)(colon - fail), fail);
    fail_left = atoi(colon + 1);
    fail_result = 1;
  }
  snprintf(key, sizeof key, "%sSLOW", cfg_prefix);
  const char *slow = getenv(key);
  snprintf(emu_cfg.slow, sizeof emu_cfg.slow, ",%s,", slow != NULL ? slow : "");
  emu_cfg.slow_ms = (long)env_number("SLOW_MS", 0);
}

/* Sleeps SLOW_MS before an entry point named in SLOW (not holding the
 * lock: other threads may call meanwhile). */
static void maybe_slow(const char *name) {
  if (emu_cfg.slow_ms <= 0) return;
  char key[72];
  snprintf(key, sizeof key, ",%s,", name);
  if (strstr(emu_cfg.slow, key) == NULL) return;
  struct timespec ts = {emu_cfg.slow_ms / 1000,
                        (emu_cfg.slow_ms % 1000) * 1000000L};
  while (nanosleep(&ts, &ts) != 0 && errno == EINTR) {
  }
}

void emu_configure(const char *prefix, int default_version) {
  cfg_prefix = prefix;
  cfg_default_version = default_version;
  pthread_once(&configured, read_config);
}

/* ---- regions ---- */

static emu_region *regions;
static size_t device_used[EMU_MAX_DEVICES];
static long live[7];
static long events_live;

static size_t page_size(void) { return (size_t)sysconf(_SC_PAGESIZE); }

static size_t round_pages(size_t n) {
  size_t pg = page_size();
  return (n + pg - 1) / pg * pg;
}

/* Maps fd twice as device memory: no access at the address handed out,
 * read-write at the shadow. Takes fd on success. */
static int device_map(emu_region *r, int fd, size_t mapped) {
  void *dev = mmap(NULL, mapped, PROT_NONE, MAP_SHARED, fd, 0);
  void *rw = mmap(NULL, mapped, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  if (dev == MAP_FAILED || rw == MAP_FAILED) {
    if (dev != MAP_FAILED) munmap(dev, mapped);
    if (rw != MAP_FAILED) munmap(rw, mapped);
    return 0;
  }
  r->base = dev;
  r->shadow = rw;
  r->fd = fd;
  return 1;
}

emu_region *emu_region_new(emu_kind kind, size_t size, int device,
                           unsigned flags) {
  size_t mapped = round_pages(size);
  int counted = kind == EMU_DEVICE || kind == EMU_MANAGED;
  if (counted && (device < 0 || device >= EMU_MAX_DEVICES ||
                  mapped > emu_cfg.device_memory - device_used[device]))
    return NULL;
  emu_region *r = calloc(1, sizeof *r);
  if (r == NULL) return NULL;
  r->fd = -1;
  if (kind == EMU_DEVICE) {
    /* The memfd stays open: an IPC handle names it, and another process
     * maps it through /proc/PID/fd. */
    int fd = memfd_create("emu-device", MFD_CLOEXEC);
    if (fd < 0 || ftruncate(fd, (off_t)mapped) != 0 ||
        !device_map(r, fd, mapped)) {
      if (fd >= 0) close(fd);
      free(r);
      return NULL;
    }
  } else {
    void *p = mmap(NULL, mapped, PROT_READ | PROT_WRITE,
                   MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) {
      free(r);
      return NULL;
    }
    r->base = r->shadow = p;
  }
  if (emu_cfg.fill >= 0) memset(r->shadow, emu_cfg.fill & 0xff, mapped);
  r->kind = kind;
  r->size = size;
  r->mapped = mapped;
  r->device = device;
  r->flags = flags;
  r->prefetch = EMU_NO_PREFETCH;
  r->advice_location = EMU_NO_PREFETCH;
  if (counted) device_used[device] += mapped;
  r->next = regions;
  regions = r;
  live[kind]++;
  return r;
}

emu_region *emu_region_import(int fd, size_t size, int device, long pid,
                              uintptr_t base) {
  emu_region *r = calloc(1, sizeof *r);
  if (r == NULL) return NULL;
  size_t mapped = round_pages(size);
  if (!device_map(r, fd, mapped)) {
    free(r);
    return NULL;
  }
  r->kind = EMU_DEVICE;
  r->size = size;
  r->mapped = mapped;
  r->device = device;
  r->prefetch = EMU_NO_PREFETCH;
  r->advice_location = EMU_NO_PREFETCH;
  r->ipc_refs = 1;
  r->ipc_pid = pid;
  r->ipc_base = base;
  r->next = regions;
  regions = r;
  live[EMU_DEVICE]++;
  return r;
}

emu_region *emu_region_register(void *p, size_t size, unsigned flags) {
  emu_region *r = calloc(1, sizeof *r);
  if (r == NULL) return NULL;
  r->fd = -1;
  r->kind = EMU_REGISTERED;
  r->base = r->shadow = p;
  r->size = size;
  r->device = 0;
  r->flags = flags;
  r->prefetch = EMU_NO_PREFETCH;
  r->advice_location = EMU_NO_PREFETCH;
  r->next = regions;
  regions = r;
  live[EMU_REGISTERED]++;
  return r;
}

void emu_region_free(emu_region *r) {
  emu_region **link = &regions;
  while (*link != r) link = &(*link)->next;
  *link = r->next;
  live[r->kind]--;
  if ((r->kind == EMU_DEVICE && r->ipc_pid == 0) || r->kind == EMU_MANAGED)
    device_used[r->device] -= r->mapped;
  if (r->fd >= 0) close(r->fd);
  if (r->kind != EMU_REGISTERED) munmap(r->base, r->mapped);
  if (r->kind == EMU_DEVICE) munmap(r->shadow, r->mapped);
  free(r);
}

emu_region *emu_region_find(const void *p) {
  const char *c = p;
  for (emu_region *r = regions; r != NULL; r = r->next)
    if (c >= r->base && c < r->base + r->size) return r;
  return NULL;
}

emu_region *emu_region_ipc(long pid, uintptr_t base) {
  for (emu_region *r = regions; r != NULL; r = r->next)
    if (r->ipc_pid == pid && r->ipc_base == base) return r;
  return NULL;
}

emu_region *emu_region_at(const void *p, unsigned mask) {
  for (emu_region *r = regions; r != NULL; r = r->next)
    if (r->base == p && (mask & (1u << r->kind)) != 0) return r;
  return NULL;
}

int emu_region_overlaps(const void *p, size_t size, unsigned mask) {
  const char *c = p;
  for (emu_region *r = regions; r != NULL; r = r->next)
    if ((mask & (1u << r->kind)) != 0 && c < r->base + r->size &&
        r->base < c + size)
      return 1;
  return 0;
}

int emu_range_writable(const void *p, size_t size) {
  return dlb__range_writable(p, size) == 1;
}

int emu_range_mapped(const void *p, size_t size) {
  size_t pg = page_size();
  uintptr_t start = (uintptr_t)p / pg * pg;
  uintptr_t end = ((uintptr_t)p + size + pg - 1) / pg * pg;
  unsigned char vec[64];
  for (uintptr_t a = start; a < end; a += 64 * pg) {
    size_t len = end - a < 64 * pg ? end - a : 64 * pg;
    if (mincore((void *)a, len, vec) != 0) return 0;
  }
  return 1;
}

char *emu_resolve(const void *p, size_t size, int must_be_device,
                  int must_be_host) {
  if (p == NULL) return NULL;
  emu_region *r = emu_region_find(p);
  const char *c = p;
  int device = r != NULL && (r->kind == EMU_DEVICE || r->kind == EMU_MANAGED);
  if (must_be_device && !device) return NULL;
  if (must_be_host && r != NULL && r->kind == EMU_DEVICE) return NULL;
  if (r == NULL) return (char *)(uintptr_t)p;
  if (r->kind == EMU_DEVICE || r->kind == EMU_MANAGED) {
    if (size > (size_t)(r->base + r->size - c)) return NULL;
  }
  return r->shadow + (c - r->base);
}

void *emu_shadow(const void *p) {
  pthread_mutex_lock(&lock);
  emu_region *r = emu_region_find(p);
  void *s = r != NULL ? r->shadow + ((const char *)p - r->base)
                      : (void *)(uintptr_t)p;
  pthread_mutex_unlock(&lock);
  return s;
}

int emu_prefetch_location(const void *p) {
  pthread_mutex_lock(&lock);
  emu_region *r = emu_region_find(p);
  int v = r != NULL ? r->prefetch : EMU_NO_PREFETCH;
  pthread_mutex_unlock(&lock);
  return v;
}

size_t emu_prefetch_span(const void *p, const void **start) {
  pthread_mutex_lock(&lock);
  emu_region *r = emu_region_find(p);
  size_t n = r != NULL ? r->prefetch_bytes : 0;
  if (start != NULL) *start = r != NULL ? r->prefetch_at : NULL;
  pthread_mutex_unlock(&lock);
  return n;
}

unsigned emu_advice(const void *p, int *location) {
  pthread_mutex_lock(&lock);
  emu_region *r = emu_region_find(p);
  unsigned v = r != NULL ? r->advice : 0;
  if (location != NULL)
    *location = r != NULL ? r->advice_location : EMU_NO_PREFETCH;
  pthread_mutex_unlock(&lock);
  return v;
}

/* ---- streams ---- */

typedef struct emu_op {
  struct emu_op *next;
  int is_wait;
  emu_copy copy;
  emu_stream *wait_stream;
  long wait_seq;
} emu_op;

struct emu_stream {
  struct emu_stream *next;
  unsigned flags;
  int device;
  int destroyed;
  long queued; /* operations ever queued */
  long ran;    /* of which have run */
  emu_op *head, *tail;
};

static emu_stream *streams;

/* The bytes from a copy side's first to its last. */
static size_t extent(size_t rows, size_t pitch, const emu_copy *c) {
  if (c->width == 0 || c->height == 0 || c->depth == 0) return 0;
  return ((c->depth - 1) * rows + c->height - 1) * pitch + c->width;
}

static void do_copy(const emu_copy *c) {
  /* Copies between overlapping ranges are undefined on a GPU: these go
   * front to back a byte at a time, as a streaming engine would, so an
   * overlap shows up as wrong data rather than as memmove's answer. */
  const char *s_end = c->src + extent(c->src_rows, c->src_pitch, c);
  const char *d_end = c->dst + extent(c->dst_rows, c->dst_pitch, c);
  int overlap = c->src < d_end && c->dst < s_end;
  for (size_t z = 0; z < c->depth; z++)
    for (size_t y = 0; y < c->height; y++) {
      char *d = c->dst + (z * c->dst_rows + y) * c->dst_pitch;
      const char *s = c->src + (z * c->src_rows + y) * c->src_pitch;
      if (!overlap) {
        memcpy(d, s, c->width);
        continue;
      }
      volatile char *vd = d; /* not to be made a memmove */
      for (size_t i = 0; i < c->width; i++) vd[i] = s[i];
    }
}

void emu_run(emu_stream *s, long seq) {
  if (seq < 0) seq = s->queued;
  while (s->ran < seq && s->head != NULL) {
    emu_op *op = s->head;
    s->head = op->next;
    if (s->head == NULL) s->tail = NULL;
    if (op->is_wait)
      emu_run(op->wait_stream, op->wait_seq);
    else
      do_copy(&op->copy);
    s->ran++;
    free(op);
  }
}

int emu_done(emu_stream *s, long seq) { return s == NULL || s->ran >= seq; }

void emu_run_all(void) {
  for (emu_stream *s = streams; s != NULL; s = s->next) emu_run(s, -1);
}

/* The legacy stream waits for every blocking stream's earlier work. */
static void legacy_barrier(void) {
  for (emu_stream *s = streams; s != NULL; s = s->next)
    if ((s->flags & 1u) == 0) emu_run(s, -1);
}

int emu_stream_lookup(void *handle, emu_stream **out) {
  uintptr_t h = (uintptr_t)handle;
  if (h <= 2) {
    *out = NULL;
    return 1;
  }
  for (emu_stream *s = streams; s != NULL; s = s->next)
    if (s == handle && !s->destroyed) {
      *out = s;
      return 1;
    }
  return 0;
}

emu_stream *emu_stream_new(unsigned flags, int device) {
  emu_stream *s = calloc(1, sizeof *s);
  if (s == NULL) return NULL;
  s->flags = flags;
  s->device = device;
  s->next = streams;
  streams = s;
  live[EMU_LIVE_STREAM]++;
  return s;
}

void emu_stream_destroy(emu_stream *s) {
  /* Destroying a stream lets its work finish; the struct stays, since
   * waits queued elsewhere may still name it. */
  emu_run(s, -1);
  s->destroyed = 1;
  live[EMU_LIVE_STREAM]--;
}

int emu_stream_device(emu_stream *s) { return s->device; }

static void enqueue(emu_stream *s, emu_op *op) {
  op->next = NULL;
  if (s->tail != NULL)
    s->tail->next = op;
  else
    s->head = op;
  s->tail = op;
  s->queued++;
}

void emu_submit(void *handle, const emu_copy *c) {
  emu_stream *s = NULL;
  (void)emu_stream_lookup(handle, &s);
  if (s == NULL) {
    if ((uintptr_t)handle != 2) legacy_barrier();
    do_copy(c);
    return;
  }
  emu_op *op = calloc(1, sizeof *op);
  if (op == NULL) {
    /* Out of host memory in a test helper: run it now rather than lose
     * it. */
    emu_run(s, -1);
    do_copy(c);
    return;
  }
  op->copy = *c;
  enqueue(s, op);
}

void emu_mark(void *handle, emu_stream **stream, long *seq) {
  emu_stream *s = NULL;
  (void)emu_stream_lookup(handle, &s);
  if (s == NULL && (uintptr_t)handle != 2) legacy_barrier();
  *stream = s;
  *seq = s != NULL ? s->queued : 0;
}

void emu_wait(void *handle, emu_stream *stream, long seq) {
  emu_stream *s = NULL;
  (void)emu_stream_lookup(handle, &s);
  if (stream == NULL || emu_done(stream, seq)) return;
  emu_op *op = s != NULL ? calloc(1, sizeof *op) : NULL;
  if (op == NULL) {
    emu_run(stream, seq);
    return;
  }
  op->is_wait = 1;
  op->wait_stream = stream;
  op->wait_seq = seq;
  enqueue(s, op);
}

long emu_pending(void) {
  pthread_mutex_lock(&lock);
  long n = 0;
  for (emu_stream *s = streams; s != NULL; s = s->next) n += s->queued - s->ran;
  pthread_mutex_unlock(&lock);
  return n;
}

long emu_events_live_add(long delta) {
  events_live += delta;
  return events_live;
}

long emu_live_kind(int kind) {
  pthread_mutex_lock(&lock);
  long n = kind == EMU_LIVE_EVENT ? events_live
           : kind >= 1 && kind <= 5 ? live[kind]
                                    : 0;
  pthread_mutex_unlock(&lock);
  return n;
}

long emu_live(void) {
  long n = 0;
  for (int k = EMU_LIVE_DEVICE; k <= EMU_LIVE_EVENT; k++) n += emu_live_kind(k);
  return n;
}

/* ---- IPC ---- */

void emu_ipc_make(emu_ipc *h, const char *magic, int fd) {
  memset(h, 0, sizeof *h);
  memcpy(h->magic, magic, 8);
  h->pid = (int32_t)getpid();
  h->fd = fd;
}

int emu_ipc_open(const emu_ipc *h, const char *magic, int *out) {
  if (memcmp(h->magic, magic, 8) != 0) return EMU_IPC_FOREIGN;
  if (h->pid == (int32_t)getpid()) return EMU_IPC_SAME_PROCESS;
  char path[64];
  snprintf(path, sizeof path, "/proc/%d/fd/%d", (int)h->pid, (int)h->fd);
  int fd = open(path, O_RDWR | O_CLOEXEC);
  if (fd < 0) return EMU_IPC_GONE;
  *out = fd;
  return EMU_IPC_OK;
}
