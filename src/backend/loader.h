/*
 * loader.h -- opening an optional GPU runtime once per process: the
 * library an environment variable names, else the usual names in turn,
 * and the status and message that every later call reports. Resolving the
 * entry points and starting the runtime stay in the runtime's own file
 * (cuda_load.c, hip_load.c). Not installed.
 */
#ifndef DLB_BACKEND_LOADER_H
#define DLB_BACKEND_LOADER_H

#include <limits.h>
#include <pthread.h>
#include <string.h>

#include "internal.h"

#define DLB__LOADER_MESSAGE_MAX 512
/* Any path the system can open: dlb_runtime_library() names it whole. */
#define DLB__LOADER_PATH_MAX PATH_MAX

typedef struct dlb__loader {
  /* Set by the runtime's file. */
  const char *runtime;      /* "CUDA driver", "HIP runtime": starts messages */
  const char *env_var;      /* when set and not empty, the only library tried */
  const char *const *names; /* the usual names in the order tried; NULL ends */
  const char *install;      /* what provides them, for the not-found message */
  void *api;                /* the entry-point table, zeroed when start fails */
  size_t api_size;
  /* The pthread_once routine: calls dlb__loader_open on this loader. */
  void (*open_once)(void);
  /* Resolves the entry points from handle and starts the runtime; a failure
   * returns through dlb__loader_fail, and the library is closed again. */
  dlb_status (*start)(void *handle);
  /* Filled by dlb__loader_open, read-only afterwards. */
  pthread_once_t once;
  dlb_status status;
  char path[DLB__LOADER_PATH_MAX];       /* the library opened, "" if none */
  char message[DLB__LOADER_MESSAGE_MAX]; /* why loading failed */
} dlb__loader;

/* Opens and starts the runtime; only ever called through l->open_once. */
void dlb__loader_open(dlb__loader *l);

/* Runs l->open_once once per process, then returns the status it left,
 * recording its message when that is not DLB_OK. */
dlb_status dlb__loader_load(dlb__loader *l);

/* As dlb__loader_load, but returns 1 when loaded, else 0, and leaves
 * dlb_last_error() alone. */
int dlb__loader_ready(dlb__loader *l);

/* Keeps the message for every later load and returns s; for l->start. */
dlb_status dlb__loader_fail(dlb__loader *l, dlb_status s, const char *fmt,
                            ...) DLB__PRINTF(3, 4);

/* ISO C has no conversion between object and function pointers; dlsym
 * and the runtimes' lookups hand out the latter as the former. */
_Static_assert(sizeof(void *) == sizeof(void (*)(void)),
               "function pointers must be pointer-sized");
static inline void dlb__store_fn(void *field, void *p) {
  memcpy(field, &p, sizeof p);
}

#endif /* DLB_BACKEND_LOADER_H */
