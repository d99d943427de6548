/*
 * pool.c -- the copy thread pool.
 *
 * Workers start on the first large copy that wants them and wait for jobs
 * on a condition variable. One job runs at a time; a caller that finds the
 * pool busy copies alone rather than queueing behind another's job. The
 * caller works on its own job too, so a pool of n - 1 workers gives n
 * threads.
 *
 * fork: a child has none of the parent's workers. The pool's lock is held
 * across fork (pthread_atfork, through core/fork.c), so the child inherits
 * a consistent state, which it resets to "no workers"; its first large
 * copy starts its own.
 * exit: a destructor stops and joins the workers, so none runs while the
 * library is unloaded or the process's memory is checked for leaks.
 */
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdatomic.h>
#include <unistd.h>

#include "copy/copy_internal.h"

/* The most threads a copy may use, the caller included. */
#define DLB__POOL_MAX_THREADS 64

typedef void (*dlb__part_fn)(void *ctx, int64_t part);

static struct {
  pthread_mutex_t mu;
  pthread_cond_t wake; /* workers: a new job, or quit */
  pthread_cond_t done; /* the caller: every part finished */
  pthread_t workers[DLB__POOL_MAX_THREADS - 1];
  uint64_t seen[DLB__POOL_MAX_THREADS - 1]; /* the last job each looked at */
  int nworkers;
  int quit;
  int busy;
  uint64_t job; /* incremented per job */
  dlb__part_fn fn;
  void *ctx;
  int64_t nparts, next, finished;
  int wanted; /* workers with an index below it join the job */
} dlb__pool = {
    .mu = PTHREAD_MUTEX_INITIALIZER,
    .wake = PTHREAD_COND_INITIALIZER,
    .done = PTHREAD_COND_INITIALIZER,
};

static atomic_int dlb__threads_setting;
static _Thread_local int dlb__last_threads = 1;
static pthread_once_t dlb__pool_once = PTHREAD_ONCE_INIT;

/* Takes parts until none is left; the lock is held on entry and exit. */
static void take_parts(void) {
  while (dlb__pool.next < dlb__pool.nparts) {
    int64_t part = dlb__pool.next++;
    dlb__part_fn fn = dlb__pool.fn;
    void *ctx = dlb__pool.ctx;
    pthread_mutex_unlock(&dlb__pool.mu);
    fn(ctx, part);
    pthread_mutex_lock(&dlb__pool.mu);
    if (++dlb__pool.finished == dlb__pool.nparts)
      pthread_cond_broadcast(&dlb__pool.done);
  }
}

static void *worker_main(void *arg) {
  const int me = (int)(intptr_t)arg;
  pthread_mutex_lock(&dlb__pool.mu);
  for (;;) {
    while (!dlb__pool.quit && dlb__pool.seen[me] == dlb__pool.job)
      pthread_cond_wait(&dlb__pool.wake, &dlb__pool.mu);
    if (dlb__pool.quit) break;
    dlb__pool.seen[me] = dlb__pool.job;
    if (me < dlb__pool.wanted) take_parts();
  }
  pthread_mutex_unlock(&dlb__pool.mu);
  return NULL;
}

/* Starts worker `index` with every signal blocked, so signals meant for
 * the process reach the application's own threads. Lock held. */
static int start_worker(int index) {
  sigset_t all, old;
  sigfillset(&all);
  pthread_sigmask(SIG_SETMASK, &all, &old);
  /* It must not take the job about to be published for an old one. */
  dlb__pool.seen[index] = dlb__pool.job;
  int rc = pthread_create(&dlb__pool.workers[index], NULL, worker_main,
                          (void *)(intptr_t)index);
  pthread_sigmask(SIG_SETMASK, &old, NULL);
  return rc;
}

/* fork()'s handlers, which core/fork.c runs. */
void dlb__pool_before_fork(void) { pthread_mutex_lock(&dlb__pool.mu); }

void dlb__pool_after_fork_parent(void) {
  pthread_mutex_unlock(&dlb__pool.mu);
}

void dlb__pool_after_fork_child(void) {
  /* Only the forking thread exists here: no worker, no job in flight, no
   * waiter on either condition variable. */
  dlb__pool.nworkers = 0;
  dlb__pool.busy = 0;
  pthread_cond_init(&dlb__pool.wake, NULL);
  pthread_cond_init(&dlb__pool.done, NULL);
  pthread_mutex_unlock(&dlb__pool.mu);
}

static void pool_init(void) { dlb__fork_guard(); }

__attribute__((destructor)) static void pool_shutdown(void) {
  pthread_mutex_lock(&dlb__pool.mu);
  dlb__pool.quit = 1;
  int n = dlb__pool.nworkers;
  pthread_cond_broadcast(&dlb__pool.wake);
  pthread_mutex_unlock(&dlb__pool.mu);
  for (int i = 0; i < n; i++) pthread_join(dlb__pool.workers[i], NULL);
  pthread_mutex_lock(&dlb__pool.mu);
  dlb__pool.nworkers = 0;
  pthread_mutex_unlock(&dlb__pool.mu);
}

static int run_alone(dlb__part_fn fn, void *ctx, int64_t nparts) {
  for (int64_t part = 0; part < nparts; part++) fn(ctx, part);
  return 1;
}

int dlb__pool_run(dlb__part_fn fn, void *ctx, int64_t nparts, int threads) {
  if (threads > DLB__POOL_MAX_THREADS) threads = DLB__POOL_MAX_THREADS;
  if (threads <= 1 || nparts <= 1) return run_alone(fn, ctx, nparts);
  pthread_once(&dlb__pool_once, pool_init);
  pthread_mutex_lock(&dlb__pool.mu);
  if (dlb__pool.busy || dlb__pool.quit) {
    pthread_mutex_unlock(&dlb__pool.mu);
    return run_alone(fn, ctx, nparts);
  }
  int want = threads - 1;
  if ((int64_t)want > nparts - 1) want = (int)(nparts - 1);
  /* A worker that cannot start leaves the job to those that did. */
  while (dlb__pool.nworkers < want && start_worker(dlb__pool.nworkers) == 0)
    dlb__pool.nworkers++;
  if (dlb__pool.nworkers == 0) {
    pthread_mutex_unlock(&dlb__pool.mu);
    return run_alone(fn, ctx, nparts);
  }
  dlb__pool.busy = 1;
  dlb__pool.fn = fn;
  dlb__pool.ctx = ctx;
  dlb__pool.nparts = nparts;
  dlb__pool.next = 0;
  dlb__pool.finished = 0;
  dlb__pool.wanted = want < dlb__pool.nworkers ? want : dlb__pool.nworkers;
  const int shared = dlb__pool.wanted + 1;
  dlb__pool.job++;
  pthread_cond_broadcast(&dlb__pool.wake);
  take_parts();
  while (dlb__pool.finished < dlb__pool.nparts)
    pthread_cond_wait(&dlb__pool.done, &dlb__pool.mu);
  dlb__pool.busy = 0;
  pthread_mutex_unlock(&dlb__pool.mu);
  return shared;
}

/* The CPUs this process may run on. */
static int cpu_count(void) {
  cpu_set_t set;
  if (sched_getaffinity(0, sizeof set, &set) == 0) {
    int n = CPU_COUNT(&set);
    if (n > 0) return n;
  }
  long n = sysconf(_SC_NPROCESSORS_ONLN);
  return n < 1 ? 1 : n > DLB__POOL_MAX_THREADS ? DLB__POOL_MAX_THREADS : (int)n;
}

void dlb_copy_set_threads(int threads) {
  atomic_store(&dlb__threads_setting, threads > 0 ? threads : 0);
}

int dlb_copy_get_threads(void) {
  int n = atomic_load(&dlb__threads_setting);
  if (n == 0) n = cpu_count();
  return n < DLB__POOL_MAX_THREADS ? n : DLB__POOL_MAX_THREADS;
}

int dlb__copy_last_threads(void) { return dlb__last_threads; }

void dlb__copy_set_last_threads(int threads) { dlb__last_threads = threads; }
