/*
 * share_socket.c -- one tensor, two processes, no copy: the parent
 * allocates a tensor in shared memory and sends it over a Unix socket; the
 * child receives it, doubles every element in place and answers; the
 * parent sees the doubled values in its own tensor. Exits 0 when they
 * are right. docs/sharing.md shows this program.
 */
#include <stdio.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <dlbridge.h>

static int fail(const char *what, dlb_status st) {
  fprintf(stderr, "%s: %s: %s\n", what, dlb_status_name(st), dlb_last_error());
  return 1;
}

/* The child: receive, double in place, answer. */
static int child(int sock) {
  DLManagedTensorVersioned *t = NULL;
  dlb_status st = dlb_share_recv(sock, 0, &t);
  if (st != DLB_OK) return fail("dlb_share_recv", st);
  float *x = t->dl_tensor.data;
  for (int64_t i = 0; i < t->dl_tensor.shape[0]; i++) x[i] *= 2.0f;
  dlb_tensor_release(t);
  return write(sock, "d", 1) == 1 ? 0 : 1;
}

int main(void) {
  int sv[2];
  if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) != 0) return 1;
  pid_t pid = fork();
  if (pid == 0) _exit(child(sv[1]));

  DLDataType f32 = {kDLFloat, 32, 1};
  int64_t n = 1000;
  DLManagedTensorVersioned *t = NULL;
  dlb_status st = dlb_shared_alloc(f32, 1, &n, &t);
  if (st != DLB_OK) return fail("dlb_shared_alloc", st);
  float *x = t->dl_tensor.data;
  for (int64_t i = 0; i < n; i++) x[i] = (float)i;
  st = dlb_share_send(sv[0], t);
  if (st != DLB_OK) return fail("dlb_share_send", st);
  char done = 0;
  if (read(sv[0], &done, 1) != 1) return 1;
  int ok = 1;
  for (int64_t i = 0; i < n; i++) ok = ok && x[i] == 2.0f * (float)i;
  dlb_tensor_release(t);
  int status = 0;
  waitpid(pid, &status, 0);
  printf("%s\n", ok && status == 0 ? "the child's writes are here" : "wrong");
  return ok && status == 0 ? 0 : 1;
}
