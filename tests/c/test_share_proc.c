/* test_share_proc.c -- one shared tensor in several processes: forked and
 * exec'd workers each write their part and check every byte; a holder
 * killed with SIGKILL mid-use leaves the others working and, once all
 * are gone, no memory, descriptor or file behind. */
#include <limits.h>
#include <sys/stat.h>
#include <signal.h>
#include <sys/wait.h>
#include <time.h>

#include "share_util.h"
#include "share_worker.h"

#define WORKERS 4

/* Starts worker i on its end of a socket pair, forked or exec'd. */
static pid_t start_worker(int i, int exec, uint64_t flags, int *parent_end) {
  int sv[2];
  share_socketpair(SOCK_STREAM, sv);
  fflush(NULL);
  pid_t pid = fork();
  CHECK(pid >= 0);
  if (pid == 0) {
    close(sv[0]);
    if (!exec) _exit(share_worker_run(sv[1], i, WORKERS, flags));
    char exe[PATH_MAX], path[PATH_MAX + 32];
    ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
    if (n <= 0) _exit(3);
    exe[n] = '\0';
    *strrchr(exe, '/') = '\0';
    snprintf(path, sizeof path, "%s/dlb_share_child", exe);
    /* Only the worker's socket crosses exec. */
    if (fcntl(sv[1], F_SETFD, 0) != 0) _exit(3);
    char a1[16], a2[16], a3[16], a4[32];
    snprintf(a1, sizeof a1, "%d", sv[1]);
    snprintf(a2, sizeof a2, "%d", i);
    snprintf(a3, sizeof a3, "%d", WORKERS);
    snprintf(a4, sizeof a4, "%llu", (unsigned long long)flags);
    execl(path, path, a1, a2, a3, a4, (char *)NULL);
    _exit(4);
  }
  close(sv[1]);
  *parent_end = sv[0];
  return pid;
}

static char read_byte(int fd) {
  char c = 0;
  CHECK(read(fd, &c, 1) == 1);
  return c;
}


/* Every worker writes its quarter of one tensor and checks all of it;
 * the parent checks every byte afterwards as well. */
void share_run_workers(int exec, int64_t n, uint64_t flags) {
  int fds = dlb_test_count_fds();
  DLManagedTensorVersioned *t = share_bytes(n);
  pid_t pids[WORKERS];
  int socks[WORKERS];
  for (int i = 0; i < WORKERS; i++) {
    pids[i] = start_worker(i, exec, flags, &socks[i]);
    CHECK_OK(dlb_share_send(socks[i], t));
  }
  for (int i = 0; i < WORKERS; i++) CHECK_EQ_INT(read_byte(socks[i]), 'w');
  const uint8_t *d = t->dl_tensor.data;
  for (int64_t k = 0; k < n; k++)
    if (d[k] != share_worker_byte((int)(k / (n / WORKERS)), k))
      dlb_test_failed(__FILE__, __LINE__, "byte %lld is %u", (long long)k,
                      d[k]);
  for (int i = 0; i < WORKERS; i++) CHECK(write(socks[i], "g", 1) == 1);
  for (int i = 0; i < WORKERS; i++) {
    CHECK_EQ_INT(read_byte(socks[i]), 'k');
    int st = 0;
    CHECK(waitpid(pids[i], &st, 0) == pids[i]);
    CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0);
    close(socks[i]);
  }
  dlb_tensor_release(t);
  CHECK_EQ_INT(dlb_test_count_fds(), fds);
}

DLB_TEST(share_proc_four_forked_workers) { share_run_workers(0, 4 << 20, 0); }
DLB_TEST(share_proc_four_execd_workers) { share_run_workers(1, 4 << 20, 0); }

/* Shmem of /proc/meminfo, in KiB. */
static long long shmem_kib(void) {
  FILE *f = fopen("/proc/meminfo", "r");
  CHECK(f != NULL);
  char line[256];
  long long v = -1;
  while (fgets(line, sizeof line, f) != NULL)
    if (sscanf(line, "Shmem: %lld kB", &v) == 1) break;
  fclose(f);
  CHECK(v >= 0);
  return v;
}

static void sleep_ms(long ms) {
  struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
  nanosleep(&ts, NULL);
}

/* The device and inode of t's memory file. */
static struct stat memory_identity(const DLManagedTensorVersioned *t) {
  share_handle h = share_export(t);
  struct stat st;
  CHECK(fstat(h.fd, &st) == 0);
  close(h.fd);
  return st;
}

/* Processes of this machine that hold the memory file id by a descriptor
 * or a mapping (those this test may look into: all, when run as root, and
 * always its own children). */
static int holders(const struct stat *id) {
  DIR *procs = opendir("/proc");
  CHECK(procs != NULL);
  int n = 0;
  char path[600], line[512];
  for (struct dirent *p = readdir(procs); p != NULL; p = readdir(procs)) {
    if (p->d_name[0] < '0' || p->d_name[0] > '9') continue;
    int held = 0;
    snprintf(path, sizeof path, "/proc/%s/fd", p->d_name);
    DIR *fds = opendir(path);
    for (struct dirent *f = fds ? readdir(fds) : NULL; f != NULL && !held;
         f = readdir(fds)) {
      struct stat st;
      snprintf(path, sizeof path, "/proc/%s/fd/%s", p->d_name, f->d_name);
      held = f->d_name[0] != '.' && stat(path, &st) == 0 &&
             st.st_ino == id->st_ino && st.st_dev == id->st_dev;
    }
    if (fds != NULL) closedir(fds);
    snprintf(path, sizeof path, "/proc/%s/maps", p->d_name);
    FILE *maps = held ? NULL : fopen(path, "r");
    while (maps != NULL && !held && fgets(line, sizeof line, maps) != NULL) {
      unsigned long long ino = 0;
      held = sscanf(line, "%*s %*s %*s %*s %llu", &ino) == 1 &&
             ino == (unsigned long long)id->st_ino &&
             strstr(line, "memfd:dlbridge-shared") != NULL;
    }
    if (maps != NULL) fclose(maps);
    n += held;
  }
  closedir(procs);
  return n;
}

/* A holder that keeps writing its counter into the tensor until told to
 * stop, then checks its region. */
static int holder(int sock, int index) {
  DLManagedTensorVersioned *t = NULL;
  if (dlb_share_recv(sock, 0, &t) != DLB_OK) return 1;
  volatile uint64_t *slot = (uint64_t *)t->dl_tensor.data + index;
  if (write(sock, "r", 1) != 1) return 1;
  fcntl(sock, F_SETFL, O_NONBLOCK);
  char c;
  while (read(sock, &c, 1) != 1) *slot += 1;
  uint8_t *big = (uint8_t *)t->dl_tensor.data + 4096;
  big[index] = (uint8_t)(index + 1);
  dlb_tensor_release(t);
  return write(sock, "k", 1) == 1 ? 0 : 1;
}

DLB_TEST(share_proc_sigkill_of_a_holder) {
  const int64_t n = 256 << 20;
  int fds = dlb_test_count_fds();
  int dev_shm = share_count_dev_shm();
  long long before = shmem_kib();
  DLManagedTensorVersioned *t = share_bytes(n);
  /* The pages are reserved at allocation: Shmem shows them at once. */
  CHECK(shmem_kib() - before > (n >> 10) * 3 / 4);
  struct stat id = memory_identity(t);
  enum { H = 3 };
  pid_t pids[H];
  int socks[H];
  for (int i = 0; i < H; i++) {
    int sv[2];
    share_socketpair(SOCK_STREAM, sv);
    fflush(NULL);
    pids[i] = fork();
    CHECK(pids[i] >= 0);
    if (pids[i] == 0) {
      close(sv[0]);
      /* The fork inherited the parent's tensor: let go of it so the
       * process holds only what it received. */
      dlb_tensor_release(t);
      _exit(holder(sv[1], i));
    }
    close(sv[1]);
    socks[i] = sv[0];
    CHECK_OK(dlb_share_send(socks[i], t));
    CHECK_EQ_INT(read_byte(socks[i]), 'r');
  }
  volatile uint64_t *slots = t->dl_tensor.data;
  /* Kill holder 0 while it writes. */
  while (slots[0] < 1000) {
  }
  CHECK(kill(pids[0], SIGKILL) == 0);
  int st = 0;
  CHECK(waitpid(pids[0], &st, 0) == pids[0]);
  CHECK(WIFSIGNALED(st) && WTERMSIG(st) == SIGKILL);
  close(socks[0]);
  /* The others keep writing. */
  uint64_t a = slots[1], b = slots[2];
  for (int tries = 0; tries < 500 && (slots[1] == a || slots[2] == b); tries++)
    sleep_ms(2);
  CHECK(slots[1] != a && slots[2] != b);
  for (int i = 1; i < H; i++) {
    CHECK(write(socks[i], "s", 1) == 1);
    CHECK_EQ_INT(read_byte(socks[i]), 'k');
    CHECK(waitpid(pids[i], &st, 0) == pids[i]);
    CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0);
    close(socks[i]);
  }
  const uint8_t *big = (const uint8_t *)t->dl_tensor.data + 4096;
  CHECK_EQ_INT(big[0], 0);
  CHECK_EQ_INT(big[1], 2);
  CHECK_EQ_INT(big[2], 3);
  /* The last holder lets go: no process holds the memory any more, and
   * Shmem falls by its size (other programs move Shmem too, so allow
   * them a quarter of it while this happens). */
  CHECK(holders(&id) >= 1);
  long long held = shmem_kib();
  dlb_tensor_release(t);
  CHECK_EQ_INT(holders(&id), 0);
  long long after = shmem_kib();
  for (int tries = 0; tries < 100 && held - after < (n >> 10) * 3 / 4;
       tries++) {
    sleep_ms(20);
    after = shmem_kib();
  }
  CHECK(held - after >= (n >> 10) * 3 / 4);
  CHECK_EQ_INT(dlb_test_count_fds(), fds);
  CHECK_EQ_INT(share_count_dev_shm(), dev_shm);
}

/* The program docs/sharing.md shows runs and says its child's writes
 * arrived. */
DLB_TEST(share_example_socket) {
  char exe[PATH_MAX], cmd[PATH_MAX + 64];
  ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
  CHECK(n > 0);
  exe[n] = '\0';
  *strrchr(exe, '/') = '\0';
  snprintf(cmd, sizeof cmd, "%s/../../examples/share_socket", exe);
  FILE *p = popen(cmd, "r");
  CHECK(p != NULL);
  char line[128] = "";
  CHECK(fgets(line, sizeof line, p) != NULL);
  CHECK_EQ_INT(pclose(p), 0);
  CHECK_STR(line, "the child's writes are here\n");
}
