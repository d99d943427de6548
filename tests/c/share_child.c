/*
 * share_child.c -- dlb_share_child SOCKFD INDEX NWORKERS [FLAGS]: a worker
 * of the multi-process sharing tests started with exec, so that it shares
 * nothing with the test but what arrives on the socket it inherits.
 */
#include <stdio.h>
#include <stdlib.h>

#include "share_worker.h"

int main(int argc, char **argv) {
  if (argc < 4) {
    fprintf(stderr, "usage: dlb_share_child SOCKFD INDEX NWORKERS [FLAGS]\n");
    return 2;
  }
  uint64_t flags = argc > 4 ? strtoull(argv[4], NULL, 0) : 0;
  return share_worker_run(atoi(argv[1]), atoi(argv[2]), atoi(argv[3]), flags);
}
