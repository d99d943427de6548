/*
 * emu_core.h -- what the emulated CUDA driver and HIP runtime share:
 * configuration, call counting and failure injection, memory regions,
 * and streams that run their work when someone waits for it.
 *
 * Every entry point takes the one lock (emu_enter), so the emulators are
 * thread-safe and need not be fast.
 */
#ifndef DLB_TESTS_EMU_CORE_H
#define DLB_TESTS_EMU_CORE_H

#include <stddef.h>
#include <stdint.h>

#define EMU_BUILDING
#include "emu_control.h"

#define EMU_MAX_DEVICES 16

/* Set from the environment at the first call; see emu_control.h. */
typedef struct emu_config {
  int devices;
  int reported; /* the device count answered; -1: devices */
  int read_only_register; /* READ_ONLY_HOST_REGISTER_SUPPORTED */
  int version;
  size_t device_memory;
  int max_pitch;
  int concurrent_managed;
  int managed_memory; /* CUDA's MANAGED_MEMORY */
  size_t d2d_pitch_align;
  int fill; /* byte new allocations hold, or -1: zeros */
  char hide[64];
  char name[256]; /* every GPU's name, or "": the default */
  char slow[128]; /* ",name,name," */
  long slow_ms;
} emu_config;

extern emu_config emu_cfg;

/* Takes the lock, counts the call and returns the armed failure's result
 * when it is due (lock released then), else 0 with the lock held. Pass
 * quiet = 1 for queries and releases, which only a failure armed for
 * them by name reaches. */
int emu_enter(const char *name, int quiet);
void emu_leave(void);
/* Reads the configuration once; default_version is the runtime's. */
void emu_configure(const char *prefix, int default_version);
void emu_record_version(const char *symbol, int version);

typedef enum emu_kind {
  EMU_DEVICE = EMU_LIVE_DEVICE,
  EMU_HOST = EMU_LIVE_HOST,
  EMU_MANAGED = EMU_LIVE_MANAGED,
  EMU_REGISTERED = EMU_LIVE_REGISTERED,
} emu_kind;

typedef struct emu_region {
  struct emu_region *next;
  emu_kind kind;
  char *base;   /* the address handed out */
  size_t size;  /* bytes asked for */
  size_t mapped;
  char *shadow; /* read-write view: base itself except for device memory */
  int device;
  unsigned flags;
  int prefetch;
  char *prefetch_at; /* the range the last prefetch asked for */
  size_t prefetch_bytes;
  unsigned advice;
  int advice_location;
  int fd;          /* device memory: the memfd behind both mappings */
  int ipc_refs;    /* imported by IPC: opens not yet closed, else 0 */
  long ipc_pid;    /* imported: the exporting process and its address */
  uintptr_t ipc_base;
} emu_region;

/* New region of size bytes (> 0), or NULL when out of memory (device and
 * managed memory count against the device's memory). */
emu_region *emu_region_new(emu_kind kind, size_t size, int device,
                           unsigned flags);
/* Maps device memory another process exported (its memfd, fd, which the
 * region takes over) as a device region of this one, with ipc_refs 1. */
emu_region *emu_region_import(int fd, size_t size, int device, long pid,
                              uintptr_t base);
/* The region imported from process pid's allocation at base, or NULL. */
emu_region *emu_region_ipc(long pid, uintptr_t base);
/* Records a registration of existing memory. */
emu_region *emu_region_register(void *p, size_t size, unsigned flags);
void emu_region_free(emu_region *r);
/* The region containing p (any kind), or NULL. */
emu_region *emu_region_find(const void *p);
/* The region whose base is p and of one of the kinds in mask (bit
 * 1 << kind). */
emu_region *emu_region_at(const void *p, unsigned mask);
/* 1 when [p, p + size) overlaps a region of a kind in mask. */
int emu_region_overlaps(const void *p, size_t size, unsigned mask);
/* 1 when every page of [p, p + size) is mapped in this process. */
int emu_range_mapped(const void *p, size_t size);
/* 1 when every byte of the range lies in a mapping the process may write. */
int emu_range_writable(const void *p, size_t size);

/*
 * Resolves [p, p + size) to the emulator's read-write view. must_be_device
 * requires device or managed memory; must_be_host forbids device memory.
 * Returns NULL for a range that leaves its device region or breaks those
 * rules.
 */
char *emu_resolve(const void *p, size_t size, int must_be_device,
                  int must_be_host);

/* Streams. NULL and the special handles 1 (legacy) and 2 (per-thread) run
 * work at once, the legacy ones after every blocking stream's pending
 * work; created streams queue it until someone waits. */
typedef struct emu_stream emu_stream;

/* A pitched copy between read-write views (see dlb__pitched). */
typedef struct emu_copy {
  char *dst;
  const char *src;
  size_t width, height, depth;
  size_t dst_pitch, src_pitch;
  size_t dst_rows, src_rows;
} emu_copy;

/* The stream behind a handle: *out is NULL for the special handles.
 * Returns 0 for a handle that is neither special nor a live stream. */
int emu_stream_lookup(void *handle, emu_stream **out);
emu_stream *emu_stream_new(unsigned flags, int device);
void emu_stream_destroy(emu_stream *s);
int emu_stream_device(emu_stream *s);
void emu_submit(void *handle, const emu_copy *c);
/* Where the work queued so far on handle ends. */
void emu_mark(void *handle, emu_stream **stream, long *seq);
/* handle's later work waits for stream's work up to seq. */
void emu_wait(void *handle, emu_stream *stream, long seq);
/* Runs stream's work up to seq (all of it for seq < 0). */
void emu_run(emu_stream *s, long seq);
/* 1 when stream's work up to seq has run. */
int emu_done(emu_stream *s, long seq);
void emu_run_all(void);

long emu_events_live_add(long delta);

/* The bytes of an emulated IPC handle (the runtimes' handles are 64
 * bytes): it names the exporter's memfd by process and descriptor number,
 * and an importer opens it through /proc, so it works between two
 * processes of one user while the exporter lives, as real handles do. */
typedef struct emu_ipc {
  char magic[8]; /* "EMUIPC1" for memory, "EMUEVT1" for events */
  int32_t pid;
  int32_t fd;
  uint64_t size;
  int32_t device;
  int32_t zero;
  uint64_t base;
} emu_ipc;

/* What emu_ipc_open() found wrong. */
enum { EMU_IPC_OK, EMU_IPC_FOREIGN, EMU_IPC_SAME_PROCESS, EMU_IPC_GONE };

/* Fills h for this process's descriptor fd. */
void emu_ipc_make(emu_ipc *h, const char *magic, int fd);
/* Opens the descriptor h names into *out; EMU_IPC_FOREIGN for another
 * magic, EMU_IPC_SAME_PROCESS when this process made it (the runtimes
 * refuse that), EMU_IPC_GONE when it cannot be opened. */
int emu_ipc_open(const emu_ipc *h, const char *magic, int *out);

#endif /* DLB_TESTS_EMU_CORE_H */
