/*
 * fork.c -- the library's locks across fork().
 *
 * Some locks are held across runtime calls that can take long: pinning a
 * range, opening another process's allocation, retaining a context,
 * recording an interprocess event, a staged copy. A thread that forks
 * meanwhile would leave such a lock taken in the child, where no thread
 * will ever release it: the child's first pin, import or release of a
 * pinned or imported tensor would wait forever. Taking them before fork
 * is no cure: fork would wait as long as the call, and the call may wait
 * for the forking thread (a staged copy's stream for a host callback that
 * needs the GIL, which Python's os.fork holds), a deadlock. So the child
 * makes them anew instead. What they guard changes only outside the
 * runtime calls, by single stores (an entry linked into or out of a
 * list), so the child finds each list whole; an entry a thread of the
 * parent was adding may be missing, and belongs to a call that never
 * returns in the child.
 *
 * The copy pool's lock guards no runtime call and is held only briefly:
 * it is taken before fork and released on both sides, and the child
 * resets the pool's workers (copy/pool.c).
 */
#include <pthread.h>

#include "internal.h"

static void after_fork_child(void) {
  pthread_mutex_t *const locks[] = {&dlb__pin_lock, &dlb__ipc_lock,
                                    &dlb__shm_lock,
                                    &dlb__cuda_event_lock,
                                    &dlb__hip_event_lock,
                                    &dlb__cuda_ctx_lock};
  for (size_t i = 0; i < sizeof locks / sizeof locks[0]; i++)
    pthread_mutex_init(locks[i], NULL);
  dlb__stage_locks_renew();
  dlb__pool_after_fork_child();
}

static pthread_once_t dlb__fork_once = PTHREAD_ONCE_INIT;

static void register_handlers(void) {
  (void)pthread_atfork(dlb__pool_before_fork, dlb__pool_after_fork_parent,
                       after_fork_child);
}

void dlb__fork_guard(void) { pthread_once(&dlb__fork_once, register_handlers); }
