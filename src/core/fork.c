/*
 * fork.c -- the library's locks across fork().
 *
 * Some locks are held across runtime calls that can take long: pinning a
 * range, opening another process's allocation, retaining a context,
 * recording an interprocess event, a staged copy. A thread that forks
 * meanwhile would leave such a lock taken in the child, where nobody can
 * release it: the child's first pin, import or release of a pinned or
 * imported tensor would wait forever. So before fork the forking thread
 * takes every one, outer first in the order they nest, and afterwards
 * releases them on both sides: the child inherits them free, and the state
 * they guard whole. The copy pool's lock comes last (a staged copy holds
 * its buffer while it copies through the pool), and the pool resets its
 * workers in the child.
 */
#include <pthread.h>

#include "internal.h"

static pthread_mutex_t *const dlb__fork_locks[] = {
    &dlb__pin_lock,        &dlb__ipc_lock,       &dlb__cuda_event_lock,
    &dlb__hip_event_lock,  &dlb__cuda_ctx_lock,
};
#define DLB__FORK_NLOCKS \
  (sizeof dlb__fork_locks / sizeof dlb__fork_locks[0])

static void before_fork(void) {
  pthread_mutex_lock(&dlb__pin_lock);
  pthread_mutex_lock(&dlb__ipc_lock);
  dlb__stage_locks(1);
  for (size_t i = 2; i < DLB__FORK_NLOCKS; i++)
    pthread_mutex_lock(dlb__fork_locks[i]);
  dlb__pool_before_fork();
}

static void release_all(void) {
  for (size_t i = DLB__FORK_NLOCKS; i-- > 2;)
    pthread_mutex_unlock(dlb__fork_locks[i]);
  dlb__stage_locks(0);
  pthread_mutex_unlock(&dlb__ipc_lock);
  pthread_mutex_unlock(&dlb__pin_lock);
}

static void after_fork_parent(void) {
  dlb__pool_after_fork_parent();
  release_all();
}

static void after_fork_child(void) {
  dlb__pool_after_fork_child();
  release_all();
}

static pthread_once_t dlb__fork_once = PTHREAD_ONCE_INIT;

static void register_handlers(void) {
  (void)pthread_atfork(before_fork, after_fork_parent, after_fork_child);
}

void dlb__fork_guard(void) { pthread_once(&dlb__fork_once, register_handlers); }
