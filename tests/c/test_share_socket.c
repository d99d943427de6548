/* test_share_socket.c -- handles over Unix sockets (stream, seqpacket,
 * datagram), refused messages closing every descriptor they brought, and
 * every allocating sharing call failing in turn. */
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <sys/syscall.h>
#include <unistd.h>
#include <sys/mman.h>
#include <sys/resource.h>

#include "share_util.h"

static void round_trip(int type) {
  int sv[2];
  share_socketpair(type, sv);
  DLManagedTensorVersioned *t = share_bytes(5000);
  uint8_t *a = t->dl_tensor.data;
  for (int i = 0; i < 5000; i++) a[i] = (uint8_t)(i * 13);
  int fds = dlb_test_count_fds();
  CHECK_OK(dlb_share_send(sv[0], t));
  CHECK_OK(dlb_share_send(sv[0], t));
  /* The sender keeps no descriptor per message. */
  CHECK_EQ_INT(dlb_test_count_fds(), fds);
  DLManagedTensorVersioned *u = NULL, *w = NULL;
  CHECK_OK(dlb_share_recv(sv[1], 0, &u));
  /* Two messages back to back: the first read takes only its own. */
  CHECK_OK(dlb_share_recv(sv[1], 0, &w));
  for (int i = 0; i < 5000; i++)
    CHECK_EQ_INT(((uint8_t *)u->dl_tensor.data)[i], (uint8_t)(i * 13));
  ((uint8_t *)w->dl_tensor.data)[4999] = 1;
  CHECK_EQ_INT(a[4999], 1);
  /* One descriptor per memory held, none per message, and one mapping:
   * the second import shares the first's. */
  CHECK_EQ_INT(dlb_test_count_fds(), fds + 1);
  CHECK(u->dl_tensor.data == w->dl_tensor.data);
  dlb_tensor_release(u);
  dlb_tensor_release(w);
  dlb_tensor_release(t);
  CHECK_EQ_INT(dlb_test_count_fds(), fds - 1);
  close(sv[0]);
  close(sv[1]);
}

DLB_TEST(share_socket_stream) { round_trip(SOCK_STREAM); }
DLB_TEST(share_socket_seqpacket) { round_trip(SOCK_SEQPACKET); }
DLB_TEST(share_socket_dgram) { round_trip(SOCK_DGRAM); }

DLB_TEST(share_socket_received_fds_are_cloexec) {
  int sv[2];
  share_socketpair(SOCK_STREAM, sv);
  DLManagedTensorVersioned *t = share_bytes(10);
  CHECK_OK(dlb_share_send(sv[0], t));
  DLManagedTensorVersioned *u = NULL;
  CHECK_OK(dlb_share_recv(sv[1], 0, &u));
  /* The descriptor an import keeps is close-on-exec. */
  int found = 0;
  for (int fd = 3; fd < 1024; fd++) {
    char path[64], target[256];
    snprintf(path, sizeof path, "/proc/self/fd/%d", fd);
    ssize_t n = readlink(path, target, sizeof target - 1);
    if (n <= 0) continue;
    target[n] = '\0';
    if (strstr(target, "memfd:dlbridge-shared") == NULL) continue;
    found++;
    CHECK_EQ_INT(fcntl(fd, F_GETFD) & FD_CLOEXEC, FD_CLOEXEC);
  }
  CHECK_EQ_INT(found, 2);
  dlb_tensor_release(u);
  dlb_tensor_release(t);
}

/* This binary's sendmsg: the system call itself, taking at most
 * send_cap bytes a call when send_cap is set, as a stream socket does
 * when a signal interrupts a send that is partly done. */
static size_t send_cap;
static long send_calls;

ssize_t sendmsg(int sock, const struct msghdr *msg, int flags) {
  send_calls++;
  struct msghdr m = *msg;
  struct iovec iov;
  if (send_cap > 0 && m.msg_iovlen == 1 && m.msg_iov[0].iov_len > send_cap) {
    iov = m.msg_iov[0];
    iov.iov_len = send_cap;
    m.msg_iov = &iov;
  }
  return (ssize_t)syscall(SYS_sendmsg, sock, &m, flags);
}

/* A send taken in parts: the descriptor goes with the first part only,
 * each later part starts where the last one ended, and the receiver gets
 * the handle whole with the next one right behind it. */
DLB_TEST(share_socket_stream_send_taken_in_parts) {
  int sv[2];
  share_socketpair(SOCK_STREAM, sv);
  DLManagedTensorVersioned *t = share_bytes(10);
  ((uint8_t *)t->dl_tensor.data)[3] = 77;
  int fds = dlb_test_count_fds();
  /* Parts of 5 to 9 bytes: at least one size leaves a shorter last part. */
  for (size_t cap = 5; cap <= 9; cap++) {
    send_cap = cap;
    send_calls = 0;
    CHECK_OK(dlb_share_send(sv[0], t));
    CHECK(send_calls > 2);
    send_cap = 0;
    CHECK_OK(dlb_share_send(sv[0], t));
    DLManagedTensorVersioned *u = NULL, *w = NULL;
    CHECK_OK(dlb_share_recv(sv[1], 0, &u));
    CHECK_OK(dlb_share_recv(sv[1], 0, &w));
    CHECK_EQ_INT(((uint8_t *)u->dl_tensor.data)[3], 77);
    CHECK_EQ_INT(((uint8_t *)w->dl_tensor.data)[3], 77);
    CHECK_EQ_INT(dlb_test_count_fds(), fds + 1);
    dlb_tensor_release(u);
    dlb_tensor_release(w);
    CHECK_EQ_INT(dlb_test_count_fds(), fds);
  }
  close(sv[0]);
  close(sv[1]);
  dlb_tensor_release(t);
}

/* Sends raw bytes with n descriptors of fd attached. */
static void send_raw(int sock, const void *bytes, size_t len, int fd, int n) {
  struct iovec iov = {(void *)(uintptr_t)bytes, len};
  union {
    char b[CMSG_SPACE(32 * sizeof(int))];
    struct cmsghdr align;
  } control;
  memset(&control, 0, sizeof control);
  struct msghdr msg;
  memset(&msg, 0, sizeof msg);
  msg.msg_iov = &iov;
  msg.msg_iovlen = 1;
  if (n > 0) {
    msg.msg_control = control.b;
    msg.msg_controllen = CMSG_SPACE((size_t)n * sizeof(int));
    struct cmsghdr *c = CMSG_FIRSTHDR(&msg);
    c->cmsg_level = SOL_SOCKET;
    c->cmsg_type = SCM_RIGHTS;
    c->cmsg_len = CMSG_LEN((size_t)n * sizeof(int));
    for (int i = 0; i < n; i++)
      memcpy(CMSG_DATA(c) + (size_t)i * sizeof(int), &fd, sizeof fd);
  }
  CHECK(sendmsg(sock, &msg, 0) == (ssize_t)len);
}

/* The received message is refused with status and every descriptor it
 * brought is closed again; the message after it is received whole (a
 * stream's refused message was read to its end). */
static void refused(int type, int nfds, dlb_status want, const char *why) {
  int sv[2];
  share_socketpair(type, sv);
  DLManagedTensorVersioned *t = share_bytes(10);
  share_handle h = share_export(t);
  int fds = dlb_test_count_fds();
  send_raw(sv[0], h.bytes, h.len, h.fd, nfds);
  send_raw(sv[0], h.bytes, h.len, h.fd, 1);
  DLManagedTensorVersioned *u = (DLManagedTensorVersioned *)(uintptr_t)1;
  CHECK_STATUS(dlb_share_recv(sv[1], 0, &u), want);
  CHECK_ERROR_MENTIONS(why);
  CHECK(u == (DLManagedTensorVersioned *)(uintptr_t)1);
  CHECK_EQ_INT(dlb_test_count_fds(), fds);
  CHECK_OK(dlb_share_recv(sv[1], 0, &u));
  CHECK_EQ_INT((int)u->dl_tensor.shape[0], 10);
  dlb_tensor_release(u);
  CHECK_EQ_INT(dlb_test_count_fds(), fds);
  close(h.fd);
  close(sv[0]);
  close(sv[1]);
  dlb_tensor_release(t);
}

DLB_TEST(share_socket_refuses_two_fds) {
  refused(SOCK_STREAM, 2, DLB_E_HANDLE, "2 descriptors");
  refused(SOCK_SEQPACKET, 3, DLB_E_HANDLE, "3 descriptors");
}

DLB_TEST(share_socket_refuses_cut_control_message) {
  refused(SOCK_SEQPACKET, 30, DLB_E_HANDLE, "more than 8 descriptors");
  refused(SOCK_STREAM, 30, DLB_E_HANDLE, "more than 8 descriptors");
  /* Fewer than the control buffer holds are counted and named. */
  refused(SOCK_SEQPACKET, 12, DLB_E_HANDLE, "12 descriptors came with it");
}

/* A receiver whose descriptor table is full cannot take the descriptor:
 * the kernel drops it and marks the message MSG_CTRUNC. That is this
 * process's limit, not a bad handle (DLB_E_SYSTEM), and the message says
 * so. */
DLB_TEST(share_socket_receiver_with_a_full_descriptor_table) {
  int sv[2];
  share_socketpair(SOCK_SEQPACKET, sv);
  DLManagedTensorVersioned *t = share_bytes(10);
  share_handle h = share_export(t);
  send_raw(sv[0], h.bytes, h.len, h.fd, 1);
  close(h.fd);
  int top = 0;
  for (int fd = 0; fd < 4096; fd++)
    if (fcntl(fd, F_GETFD) >= 0) top = fd;
  struct rlimit lim;
  CHECK(getrlimit(RLIMIT_NOFILE, &lim) == 0);
  struct rlimit low = {(rlim_t)top + 1, lim.rlim_max};
  CHECK(setrlimit(RLIMIT_NOFILE, &low) == 0);
  int extra[4096], n = 0;
  while (n < 4096 && (extra[n] = dup(sv[0])) >= 0) n++;
  CHECK(errno == EMFILE);
  DLManagedTensorVersioned *u = (DLManagedTensorVersioned *)(uintptr_t)1;
  CHECK_STATUS(dlb_share_recv(sv[1], 0, &u), DLB_E_SYSTEM);
  /* Under valgrind, which keeps descriptors of its own above the limit,
   * the kernel still delivers it and the import's duplicate fails. */
  const char *why = dlb_last_error();
  CHECK(strstr(why, "descriptor table is full") != NULL ||
        strstr(why, "Too many open files") != NULL);
  CHECK(u == (DLManagedTensorVersioned *)(uintptr_t)1);
  for (int i = 0; i < n; i++) close(extra[i]);
  CHECK(setrlimit(RLIMIT_NOFILE, &lim) == 0);
  close(sv[0]);
  close(sv[1]);
  dlb_tensor_release(t);
}

/* A stream read stops at bytes that bring descriptors, so a peer that
 * sends the descriptor with fewer bytes than the prefix is read on. */
DLB_TEST(share_socket_stream_descriptor_with_the_first_bytes_alone) {
  DLManagedTensorVersioned *t = share_bytes(10);
  ((uint8_t *)t->dl_tensor.data)[3] = 77;
  share_handle h = share_export(t);
  static const size_t firsts[] = {1, 5, 15};
  for (size_t i = 0; i < sizeof firsts / sizeof firsts[0]; i++) {
    int sv[2];
    share_socketpair(SOCK_STREAM, sv);
    int fds = dlb_test_count_fds();
    send_raw(sv[0], h.bytes, firsts[i], h.fd, 1);
    send_raw(sv[0], h.bytes + firsts[i], h.len - firsts[i], -1, 0);
    DLManagedTensorVersioned *u = NULL;
    CHECK_OK(dlb_share_recv(sv[1], 0, &u));
    CHECK_EQ_INT(((uint8_t *)u->dl_tensor.data)[3], 77);
    dlb_tensor_release(u);
    /* Descriptors in the prefix's later bytes count too. */
    send_raw(sv[0], h.bytes, 3, h.fd, 1);
    send_raw(sv[0], h.bytes + 3, h.len - 3, h.fd, 1);
    CHECK_STATUS(dlb_share_recv(sv[1], 0, &u), DLB_E_HANDLE);
    CHECK_ERROR_MENTIONS("2 descriptors");
    CHECK_EQ_INT(dlb_test_count_fds(), fds);
    close(sv[0]);
    close(sv[1]);
  }
  close(h.fd);
  dlb_tensor_release(t);
}

/* A stream peer that attaches a descriptor to each byte of the prefix
 * sends more than fit the receiver's list of them (8), over as many reads:
 * those past it are counted and closed, none is kept or written past the
 * list, and the stream goes on at the next message. */
DLB_TEST(share_socket_stream_descriptor_with_every_prefix_byte) {
  DLManagedTensorVersioned *t = share_bytes(10);
  share_handle h = share_export(t);
  int sv[2];
  share_socketpair(SOCK_STREAM, sv);
  int fds = dlb_test_count_fds();
  for (size_t i = 0; i < 16; i++) send_raw(sv[0], h.bytes + i, 1, h.fd, 1);
  send_raw(sv[0], h.bytes + 16, h.len - 16, -1, 0);
  send_raw(sv[0], h.bytes, h.len, h.fd, 1);
  DLManagedTensorVersioned *u = NULL;
  CHECK_STATUS(dlb_share_recv(sv[1], 0, &u), DLB_E_HANDLE);
  CHECK_ERROR_MENTIONS("16 descriptors came with it");
  CHECK(u == NULL);
  CHECK_EQ_INT(dlb_test_count_fds(), fds);
  CHECK_OK(dlb_share_recv(sv[1], 0, &u));
  CHECK_EQ_INT((int)u->dl_tensor.shape[0], 10);
  dlb_tensor_release(u);
  CHECK_EQ_INT(dlb_test_count_fds(), fds);
  close(sv[0]);
  close(sv[1]);
  close(h.fd);
  dlb_tensor_release(t);
}

static void on_signal(int sig) { (void)sig; }

typedef struct slow_sender {
  int sock;
  pthread_t receiver;
  share_handle h;
} slow_sender;

/* Interrupts the receiver while it waits for the prefix, sends the prefix
 * with the descriptor, interrupts it while it waits for the rest, then
 * sends the rest. */
static void *send_slowly(void *arg) {
  slow_sender *s = arg;
  usleep(200000);
  pthread_kill(s->receiver, SIGUSR1);
  usleep(50000);
  send_raw(s->sock, s->h.bytes, 16, s->h.fd, 1);
  usleep(200000);
  pthread_kill(s->receiver, SIGUSR1);
  usleep(50000);
  send_raw(s->sock, s->h.bytes + 16, s->h.len - 16, -1, 0);
  return NULL;
}

/* A signal whose handler does not restart calls (no SA_RESTART) while the
 * receiver waits for the prefix or for the rest of a stream's message:
 * the wait goes on, and the message is received whole. */
DLB_TEST(share_socket_stream_receive_interrupted_by_signals) {
  struct sigaction sa;
  memset(&sa, 0, sizeof sa);
  sa.sa_handler = on_signal;
  sigemptyset(&sa.sa_mask);
  CHECK_EQ_INT(sigaction(SIGUSR1, &sa, NULL), 0);
  DLManagedTensorVersioned *t = share_bytes(10);
  ((uint8_t *)t->dl_tensor.data)[3] = 77;
  int sv[2];
  share_socketpair(SOCK_STREAM, sv);
  slow_sender s = {sv[0], pthread_self(), share_export(t)};
  pthread_t th;
  CHECK_EQ_INT(pthread_create(&th, NULL, send_slowly, &s), 0);
  DLManagedTensorVersioned *u = NULL;
  CHECK_OK(dlb_share_recv(sv[1], 0, &u));
  CHECK_EQ_INT(pthread_join(th, NULL), 0);
  CHECK_EQ_INT(((uint8_t *)u->dl_tensor.data)[3], 77);
  dlb_tensor_release(u);
  close(s.h.fd);
  close(sv[0]);
  close(sv[1]);
  dlb_tensor_release(t);
}

#ifndef SO_PASSPIDFD
#define SO_PASSPIDFD 76 /* Linux 6.5 */
#endif

/* A receiving socket that asks for the sender's credentials
 * (SO_PASSCRED: SCM_CREDENTIALS) or a pidfd of the sender (SO_PASSPIDFD:
 * SCM_PIDFD, a descriptor) gets them with every message: the handle is
 * received as from any other socket, and the pidfd is no descriptor of
 * the handle and is closed. */
static void receive_with_option(int option) {
  static const int types[] = {SOCK_STREAM, SOCK_SEQPACKET, SOCK_DGRAM};
  DLManagedTensorVersioned *t = share_bytes(10);
  ((uint8_t *)t->dl_tensor.data)[3] = 77;
  for (int i = 0; i < 3; i++) {
    int sv[2];
    share_socketpair(types[i], sv);
    int on = 1;
    if (setsockopt(sv[1], SOL_SOCKET, option, &on, sizeof on) != 0) {
      CHECK_EQ_INT(option, SO_PASSPIDFD); /* older kernels lack it */
      close(sv[0]);
      close(sv[1]);
      break;
    }
    int fds = dlb_test_count_fds();
    CHECK_OK(dlb_share_send(sv[0], t));
    DLManagedTensorVersioned *u = NULL;
    CHECK_OK(dlb_share_recv(sv[1], 0, &u));
    CHECK_EQ_INT(((uint8_t *)u->dl_tensor.data)[3], 77);
    CHECK_EQ_INT(dlb_test_count_fds(), fds + 1);
    dlb_tensor_release(u);
    CHECK_EQ_INT(dlb_test_count_fds(), fds);
    close(sv[0]);
    close(sv[1]);
  }
  dlb_tensor_release(t);
}

DLB_TEST(share_socket_receiver_asking_for_credentials) {
  receive_with_option(SO_PASSCRED);
}

DLB_TEST(share_socket_receiver_asking_for_a_pidfd) {
  receive_with_option(SO_PASSPIDFD);
}

/* The largest handle (DLB_MAX_NDIM dimensions) goes through a stream
 * whole, and the next one after it. */
DLB_TEST(share_socket_stream_largest_handle) {
  int64_t shape[DLB_MAX_NDIM];
  for (int i = 0; i < DLB_MAX_NDIM; i++) shape[i] = 1;
  shape[0] = 3;
  DLManagedTensorVersioned *t = NULL;
  CHECK_OK(dlb_shared_alloc(share_u8, DLB_MAX_NDIM, shape, &t));
  ((uint8_t *)t->dl_tensor.data)[2] = 77;
  share_handle h = share_export(t);
  CHECK(h.len <= DLB_SHARE_HANDLE_MAX);
  close(h.fd);
  int sv[2];
  share_socketpair(SOCK_STREAM, sv);
  CHECK_OK(dlb_share_send(sv[0], t));
  CHECK_OK(dlb_share_send(sv[0], t));
  for (int k = 0; k < 2; k++) {
    DLManagedTensorVersioned *u = NULL;
    CHECK_OK(dlb_share_recv(sv[1], 0, &u));
    CHECK_EQ_INT(u->dl_tensor.ndim, DLB_MAX_NDIM);
    CHECK_EQ_INT(((uint8_t *)u->dl_tensor.data)[2], 77);
    dlb_tensor_release(u);
  }
  close(sv[0]);
  close(sv[1]);
  dlb_tensor_release(t);
}

DLB_TEST(share_socket_refuses_oversized_and_truncated_messages) {
  int sv[2];
  share_socketpair(SOCK_SEQPACKET, sv);
  uint8_t big[DLB_SHARE_HANDLE_MAX + 100];
  memset(big, 0, sizeof big);
  send_raw(sv[0], big, sizeof big, -1, 0);
  DLManagedTensorVersioned *u = NULL;
  CHECK_STATUS(dlb_share_recv(sv[1], 0, &u), DLB_E_HANDLE);
  CHECK_ERROR_MENTIONS("oversized");
  close(sv[0]);
  close(sv[1]);
  /* A stream that ends inside a message. */
  share_socketpair(SOCK_STREAM, sv);
  DLManagedTensorVersioned *t = share_bytes(10);
  share_handle h = share_export(t);
  send_raw(sv[0], h.bytes, 100, h.fd, 1);
  close(sv[0]);
  int fds = dlb_test_count_fds();
  CHECK_STATUS(dlb_share_recv(sv[1], 0, &u), DLB_E_HANDLE);
  CHECK_ERROR_MENTIONS("after 100 of 224 bytes (truncated)");
  CHECK_EQ_INT(dlb_test_count_fds(), fds);
  close(sv[1]);
  /* A length of exactly DLB_SHARE_HANDLE_MAX is read whole before the
   * handle is judged, so the stream goes on at the next message. */
  share_socketpair(SOCK_STREAM, sv);
  uint8_t longest[DLB_SHARE_HANDLE_MAX];
  memset(longest, 0, sizeof longest);
  memcpy(longest, h.bytes, h.len);
  longest[12] = DLB_SHARE_HANDLE_MAX & 0xff;
  longest[13] = DLB_SHARE_HANDLE_MAX >> 8;
  send_raw(sv[0], longest, sizeof longest, -1, 0);
  send_raw(sv[0], h.bytes, h.len, h.fd, 1);
  CHECK_STATUS(dlb_share_recv(sv[1], 0, &u), DLB_E_HANDLE);
  CHECK_OK(dlb_share_recv(sv[1], 0, &u));
  CHECK_EQ_INT((int)u->dl_tensor.shape[0], 10);
  dlb_tensor_release(u);
  u = NULL;
  close(sv[0]);
  close(sv[1]);
  /* A stream whose length field is out of range. */
  share_socketpair(SOCK_STREAM, sv);
  h.bytes[12] = 0xff;
  h.bytes[13] = 0xff;
  send_raw(sv[0], h.bytes, h.len, h.fd, 1);
  CHECK_STATUS(dlb_share_recv(sv[1], 0, &u), DLB_E_HANDLE);
  CHECK_ERROR_MENTIONS("65535 bytes");
  /* One socket closed, two opened. */
  CHECK_EQ_INT(dlb_test_count_fds(), fds + 1);
  close(sv[0]);
  close(sv[1]);
  /* Each of the length's four bytes counts, the last one too. */
  share_socketpair(SOCK_STREAM, sv);
  h.bytes[12] = 0x10;
  h.bytes[13] = 0x00;
  h.bytes[14] = 0x00;
  h.bytes[15] = 0x81;
  send_raw(sv[0], h.bytes, 16, -1, 0);
  CHECK_STATUS(dlb_share_recv(sv[1], 0, &u), DLB_E_HANDLE);
  CHECK_ERROR_MENTIONS("it says it is 2164260880 bytes");
  close(sv[0]);
  close(sv[1]);
  close(h.fd);
  dlb_tensor_release(t);
  CHECK(u == NULL);
}

DLB_TEST(share_socket_peer_closed_and_bad_socket) {
  int sv[2];
  share_socketpair(SOCK_STREAM, sv);
  close(sv[0]);
  DLManagedTensorVersioned *u = NULL;
  CHECK_STATUS(dlb_share_recv(sv[1], 0, &u), DLB_E_STATE);
  CHECK_ERROR_MENTIONS("closed");
  close(sv[1]);
  /* A message of no bytes: on a datagram socket only that, on a seqpacket
   * one also what a closed peer reads as. */
  static const struct {
    int type;
    dlb_status status;
    const char *why;
  } empty[2] = {
      {SOCK_DGRAM, DLB_E_HANDLE, "share handle: an empty datagram"},
      {SOCK_SEQPACKET, DLB_E_STATE, "or sent an empty message"},
  };
  for (int i = 0; i < 2; i++) {
    share_socketpair(empty[i].type, sv);
    send_raw(sv[0], (const uint8_t *)"", 0, -1, 0);
    CHECK_STATUS(dlb_share_recv(sv[1], 0, &u), empty[i].status);
    CHECK_ERROR_MENTIONS(empty[i].why);
    close(sv[0]);
    close(sv[1]);
  }
  CHECK(u == NULL);
  /* Sending to a closed peer is a status, not SIGPIPE. */
  DLManagedTensorVersioned *t = share_bytes(10);
  share_socketpair(SOCK_STREAM, sv);
  close(sv[1]);
  CHECK_STATUS(dlb_share_send(sv[0], t), DLB_E_SYSTEM);
  CHECK_ERROR_MENTIONS("errno 32");
  close(sv[0]);
  CHECK_STATUS(dlb_share_recv(-1, 0, &u), DLB_E_SYSTEM);
  CHECK_STATUS(dlb_share_send(-1, t), DLB_E_SYSTEM);
  CHECK_STATUS(dlb_share_recv(0, 0, NULL), DLB_E_INVAL);
  dlb_tensor_release(t);
}

/* ---- allocation failures ---- */

#define UNTOUCHED ((DLManagedTensorVersioned *)(uintptr_t)0x5a5a)

static dlb_status body_shared_alloc(void *ctx) {
  (void)ctx;
  int64_t shape[2] = {3, 5};
  DLManagedTensorVersioned *t = UNTOUCHED;
  dlb_status st = dlb_shared_alloc(share_i32, 2, shape, &t);
  if (st != DLB_OK) {
    CHECK(t == UNTOUCHED);
    return st;
  }
  ((int32_t *)t->dl_tensor.data)[14] = 3;
  dlb_tensor_release(t);
  return DLB_OK;
}

DLB_TEST(share_oom_alloc) {
  int fds = dlb_test_count_fds();
  /* The memory's context and the tensor block (its owner is in it). */
  CHECK_EQ_INT(dlb_test_oom_loop(body_shared_alloc, NULL), 2);
  CHECK_EQ_INT(dlb_test_count_fds(), fds);
}

static dlb_status body_import(void *ctx) {
  share_handle *h = ctx;
  DLManagedTensorVersioned *u = UNTOUCHED;
  dlb_status st = dlb_share_import(h->bytes, h->len, h->fd, 0, &u);
  if (st != DLB_OK) {
    CHECK(u == UNTOUCHED);
    return st;
  }
  CHECK_EQ_INT(((uint8_t *)u->dl_tensor.data)[3], 9);
  dlb_tensor_release(u);
  return DLB_OK;
}

DLB_TEST(share_oom_import) {
  DLManagedTensorVersioned *t = share_bytes(10);
  ((uint8_t *)t->dl_tensor.data)[3] = 9;
  share_handle h = share_export(t);
  int fds = dlb_test_count_fds();
  CHECK_EQ_INT(dlb_test_oom_loop(body_import, &h), 2);
  CHECK_EQ_INT(dlb_test_count_fds(), fds);
  close(h.fd);
  dlb_tensor_release(t);
}

static dlb_status body_export(void *ctx) {
  share_handle h;
  dlb_status st = dlb_share_export(ctx, h.bytes, sizeof h.bytes, &h.len, &h.fd);
  if (st == DLB_OK) close(h.fd);
  return st;
}

DLB_TEST(share_oom_export_allocates_nothing) {
  DLManagedTensorVersioned *t = share_bytes(10);
  CHECK_EQ_INT(dlb_test_oom_loop(body_export, t), 0);
  dlb_tensor_release(t);
}

static dlb_status body_send_recv(void *ctx) {
  DLManagedTensorVersioned *t = ctx;
  int sv[2];
  share_socketpair(SOCK_STREAM, sv);
  dlb_status st = dlb_share_send(sv[0], t);
  DLManagedTensorVersioned *u = UNTOUCHED;
  if (st == DLB_OK) st = dlb_share_recv(sv[1], 0, &u);
  close(sv[0]);
  close(sv[1]);
  if (st != DLB_OK) {
    CHECK(u == UNTOUCHED);
    return st;
  }
  dlb_tensor_release(u);
  return DLB_OK;
}

DLB_TEST(share_oom_send_recv) {
  DLManagedTensorVersioned *t = share_bytes(10);
  int fds = dlb_test_count_fds();
  CHECK_EQ_INT(dlb_test_oom_loop(body_send_recv, t), 2);
  CHECK_EQ_INT(dlb_test_count_fds(), fds);
  dlb_tensor_release(t);
}
