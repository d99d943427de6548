/*
 * loader.c -- the part of loading a GPU runtime that CUDA and HIP share:
 * which library to open, once per process, and what to say when none is.
 */
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "loader.h"

dlb_status dlb__loader_fail(dlb__loader *l, dlb_status s, const char *fmt,
                            ...) {
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(l->message, sizeof l->message, fmt, ap);
  va_end(ap);
  return s;
}

static void *open_named(dlb__loader *l, const char *name) {
  void *h = dlopen(name, RTLD_NOW | RTLD_LOCAL);
  if (h != NULL) snprintf(l->path, sizeof l->path, "%s", name);
  return h;
}

/* The message names every library tried and both ways to provide one. */
static dlb_status not_found(dlb__loader *l) {
  char tried[DLB__LOADER_MESSAGE_MAX / 2] = "";
  size_t used = 0;
  for (size_t i = 0; l->names[i] != NULL; i++) {
    const char *sep = i == 0 ? "" : l->names[i + 1] == NULL ? " and " : ", ";
    int n = snprintf(tried + used, sizeof tried - used, "%s%s", sep,
                     l->names[i]);
    if (n < 0 || (size_t)n >= sizeof tried - used) break;
    used += (size_t)n;
  }
  return dlb__loader_fail(l, DLB_E_NO_RUNTIME,
                          "%s not found: tried %s (%s, or set %s to its path)",
                          l->runtime, tried, l->install, l->env_var);
}

static void *open_library(dlb__loader *l, dlb_status *status) {
  const char *env = getenv(l->env_var);
  if (env != NULL && env[0] != '\0') {
    void *h = open_named(l, env);
    if (h == NULL) {
      const char *e = dlerror();
      *status = dlb__loader_fail(l, DLB_E_NO_RUNTIME,
                                 "%s not loaded from %s=\"%.200s\": %.200s",
                                 l->runtime, l->env_var, env,
                                 e != NULL ? e : "unknown error");
    }
    return h;
  }
  for (size_t i = 0; l->names[i] != NULL; i++) {
    void *h = open_named(l, l->names[i]);
    if (h != NULL) return h;
  }
  *status = not_found(l);
  return NULL;
}

void dlb__loader_open(dlb__loader *l) {
  dlb_status s = DLB_OK;
  void *h = open_library(l, &s);
  if (h == NULL) {
    l->status = s;
    return;
  }
  l->status = l->start(h);
  if (l->status != DLB_OK) {
    memset(l->api, 0, l->api_size);
    dlclose(h);
  }
}

dlb_status dlb__loader_load(dlb__loader *l) {
  pthread_once(&l->once, l->open_once);
  if (l->status != DLB_OK) return dlb__fail(l->status, "%s", l->message);
  return DLB_OK;
}

int dlb__loader_ready(dlb__loader *l) {
  pthread_once(&l->once, l->open_once);
  return l->status == DLB_OK;
}
