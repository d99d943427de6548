/*
 * share_worker.h -- the part a worker process plays in the multi-process
 * sharing tests, run in forked children and in the exec'd dlb_share_child.
 */
#ifndef DLB_TESTS_SHARE_WORKER_H
#define DLB_TESTS_SHARE_WORKER_H

#include <stdint.h>

/* The byte worker `index` writes at position k of the shared tensor. */
static inline uint8_t share_worker_byte(int index, int64_t k) {
  return (uint8_t)(k * 31 + index * 7 + 1);
}

/*
 * Receives a shared uint8 tensor on sock (with import flags), writes
 * share_worker_byte(index, k) into its part (nworkers equal parts), sends
 * 'w', waits for a byte from the peer, then checks every byte of the
 * tensor against what each worker wrote and sends 'k' (all right) or 'F'.
 * Returns the exit status for the process: 0 when all was right.
 */
int share_worker_run(int sock, int index, int nworkers, uint64_t flags);

#endif /* DLB_TESTS_SHARE_WORKER_H */
