/*
 * socket.c -- handles over Unix sockets: the handle's bytes as one
 * message, its descriptor (if any) as SCM_RIGHTS with the first byte.
 *
 * On a stream socket the receiver reads the handle's fixed prefix first
 * and then exactly the length it states, so it never reads into the next
 * message; on seqpacket and datagram sockets one recvmsg takes the whole
 * message and a cut one is refused.
 */
#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "share/share_internal.h"

/* The handle's first 16 bytes: magic, version, fixed size, whole size. */
#define PREFIX 16
/* Descriptors kept of a refused message; more are counted and closed,
 * and past what the control buffer holds the kernel cuts them
 * (MSG_CTRUNC). */
#define MAX_FDS 8
/* A descriptor of the sender's process (Linux 6.5), which a receiving
 * socket with SO_PASSPIDFD gets with every message. */
#ifndef SCM_PIDFD
#define SCM_PIDFD 0x04
#endif

static dlb_status sock_fail(const char *what, int err) {
  char buf[128];
  const char *msg = strerror_r(err, buf, sizeof buf);
  return dlb__fail(DLB_E_SYSTEM, "%s: %s (errno %d)", what, msg, err);
}

dlb_status dlb_share_send(int sock, const DLManagedTensorVersioned *t) {
  uint8_t buf[DLB_SHARE_HANDLE_MAX];
  size_t len = 0;
  int fd = -1;
  dlb_status st = dlb_share_export(t, buf, sizeof buf, &len, &fd);
  if (st != DLB_OK) return st;
  struct iovec iov = {buf, len};
  union {
    char bytes[CMSG_SPACE(sizeof(int))];
    struct cmsghdr align;
  } control;
  memset(&control, 0, sizeof control);
  struct msghdr msg;
  memset(&msg, 0, sizeof msg);
  msg.msg_iov = &iov;
  msg.msg_iovlen = 1;
  if (fd >= 0) {
    msg.msg_control = control.bytes;
    msg.msg_controllen = sizeof control.bytes;
    struct cmsghdr *c = CMSG_FIRSTHDR(&msg);
    c->cmsg_level = SOL_SOCKET;
    c->cmsg_type = SCM_RIGHTS;
    c->cmsg_len = CMSG_LEN(sizeof(int));
    memcpy(CMSG_DATA(c), &fd, sizeof fd);
  }
  size_t sent = 0;
  while (sent < len) {
    ssize_t n = sendmsg(sock, &msg, MSG_NOSIGNAL);
    if (n < 0) {
      if (errno == EINTR) continue;
      st = sock_fail("sending the share handle", errno);
      break;
    }
    /* The descriptor went with the first byte; a stream socket may take
     * the rest in later calls. */
    sent += (size_t)n;
    iov.iov_base = buf + sent;
    iov.iov_len = len - sent;
    msg.msg_control = NULL;
    msg.msg_controllen = 0;
  }
  if (fd >= 0) close(fd);
  return st;
}

/* Collects the descriptors of one received control buffer into fds,
 * counting them in *n; those past MAX_FDS are counted and closed, and so
 * is a pidfd of the sender, which is none of the handle's. */
static void take_fds(struct msghdr *msg, int *fds, int *n) {
  for (struct cmsghdr *c = CMSG_FIRSTHDR(msg); c != NULL;
       c = CMSG_NXTHDR(msg, c)) {
    if (c->cmsg_level != SOL_SOCKET ||
        (c->cmsg_type != SCM_RIGHTS && c->cmsg_type != SCM_PIDFD))
      continue;
    size_t count = (c->cmsg_len - CMSG_LEN(0)) / sizeof(int);
    for (size_t i = 0; i < count; i++) {
      int fd;
      memcpy(&fd, CMSG_DATA(c) + i * sizeof(int), sizeof(int));
      if (c->cmsg_type == SCM_PIDFD) {
        close(fd);
        continue;
      }
      if (*n < MAX_FDS)
        fds[*n] = fd;
      else
        close(fd);
      (*n)++;
    }
  }
}

static void close_all(const int *fds, int n) {
  for (int i = 0; i < n && i < MAX_FDS; i++) close(fds[i]);
}

/* Reads a stream's message into buf up to total bytes, got of them
 * already there. */
static dlb_status read_rest(int sock, uint8_t *buf, size_t got,
                            size_t total) {
  while (got < total) {
    ssize_t n = recv(sock, buf + got, total - got, MSG_WAITALL);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return sock_fail("receiving the share handle", errno);
    if (n == 0)
      return dlb__fail(DLB_E_HANDLE, "share handle: the peer closed the "
                       "connection after %zu of %zu bytes (truncated)", got,
                       total);
    got += (size_t)n;
  }
  return DLB_OK;
}

dlb_status dlb_share_recv(int sock, uint64_t flags,
                          DLManagedTensorVersioned **out) {
  if (out == NULL) return dlb__fail(DLB_E_INVAL, "out is NULL");
  int type = 0;
  socklen_t tlen = sizeof type;
  if (getsockopt(sock, SOL_SOCKET, SO_TYPE, &type, &tlen) != 0)
    return sock_fail("asking the socket's type", errno);
  int stream = type == SOCK_STREAM;
  uint8_t buf[DLB_SHARE_HANDLE_MAX];
  /* Room for MAX_FDS descriptors and for what the socket may have asked
   * for besides: the sender's credentials (SO_PASSCRED) and a pidfd of it
   * (SO_PASSPIDFD), which would otherwise cut the descriptors short. */
  union {
    char bytes[CMSG_SPACE(MAX_FDS * sizeof(int)) +
               CMSG_SPACE(sizeof(struct ucred)) + CMSG_SPACE(sizeof(int))];
    struct cmsghdr align;
  } control;
  /* A stream's read stops early at bytes that bring descriptors (a peer
   * may send the descriptor with the first byte alone): its prefix is
   * read, descriptors and all, until it is whole or the stream ends. */
  const size_t want = stream ? PREFIX : sizeof buf;
  int fds[MAX_FDS];
  int nfds = 0;
  int mflags = 0;
  size_t len = 0;
  for (;;) {
    struct iovec iov = {buf + len, want - len};
    struct msghdr msg;
    memset(&msg, 0, sizeof msg);
    msg.msg_iov = &iov;
    msg.msg_iovlen = 1;
    msg.msg_control = control.bytes;
    msg.msg_controllen = sizeof control.bytes;
    ssize_t n =
        recvmsg(sock, &msg, MSG_CMSG_CLOEXEC | (stream ? MSG_WAITALL : 0));
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      int err = errno;
      close_all(fds, nfds);
      return sock_fail("receiving the share handle", err);
    }
    take_fds(&msg, fds, &nfds);
    mflags |= msg.msg_flags;
    len += (size_t)n;
    if (!stream || n == 0 || len == want) break;
  }
  /* A stream's message is read whole before it is judged, so that a
   * refusal leaves the stream at the next message (a sender that stops
   * after the prefix is waited for, as for any message); only a prefix
   * whose length is impossible leaves the stream where it cannot be
   * followed. */
  size_t total = len;
  int total_ok = 0;
  dlb_status rest = DLB_OK;
  if (stream && len == PREFIX) {
    total = (size_t)buf[12] | (size_t)buf[13] << 8 | (size_t)buf[14] << 16 |
            (size_t)buf[15] << 24;
    total_ok = total >= PREFIX && total <= sizeof buf;
    if (total_ok) rest = read_rest(sock, buf, PREFIX, total);
  }
  dlb_status st = DLB_OK;
  if (len == 0 && nfds == 0) {
    /* A stream's end; a datagram of no bytes, which seqpacket sockets
     * also return once the peer has closed. */
    if (type == SOCK_DGRAM)
      st = dlb__fail(DLB_E_HANDLE, "share handle: an empty datagram (0 bytes "
                     "is truncated)");
    else if (type == SOCK_SEQPACKET)
      st = dlb__fail(DLB_E_STATE, "the peer closed the connection, or sent "
                     "an empty message");
    else
      st = dlb__fail(DLB_E_STATE, "the peer closed the connection");
  } else if ((mflags & MSG_CTRUNC) && nfds >= MAX_FDS) {
    st = dlb__fail(DLB_E_HANDLE, "share handle: its control message was cut "
                   "short (MSG_CTRUNC): more than %d descriptors came with "
                   "it; a handle has at most one", MAX_FDS);
  } else if (mflags & MSG_CTRUNC) {
    /* Room for them all, so the kernel could not give this process one:
     * its descriptor table is full. */
    st = dlb__fail(DLB_E_SYSTEM, "receiving the share handle: its "
                   "descriptor could not be taken (MSG_CTRUNC with %d "
                   "received): this process's descriptor table is full "
                   "(RLIMIT_NOFILE)", nfds);
  } else if (mflags & MSG_TRUNC) {
    st = dlb__fail(DLB_E_HANDLE, "share handle: the message is longer than "
                   "%d bytes (oversized)", DLB_SHARE_HANDLE_MAX);
  } else if (nfds > 1) {
    st = dlb__fail(DLB_E_HANDLE, "share handle: %d descriptors came with it; "
                   "a handle has at most one", nfds);
  } else if (stream) {
    if (len < PREFIX) {
      st = dlb__fail(DLB_E_HANDLE, "share handle: the peer closed the "
                     "connection after %zu bytes (truncated)", len);
    } else if (!total_ok) {
      st = dlb__fail(DLB_E_HANDLE, "share handle: it says it is %zu bytes; "
                     "a handle has %d to %d", total, PREFIX,
                     DLB_SHARE_HANDLE_MAX);
    } else {
      st = rest;
      len = total;
    }
  }
  if (st == DLB_OK)
    st = dlb_share_import(buf, len, nfds == 1 ? fds[0] : -1, flags, out);
  close_all(fds, nfds);
  return st;
}
