/*
 * idle_flood: a stranger on this host that keeps up to N idle TCP
 * connections open to 127.0.0.1:PORT for SECONDS seconds, opening a new one
 * whenever the server closes one. It never sends a byte: the connections
 * cost the server a descriptor each and prove nothing.
 *
 * Usage: idle_flood PORT N SECONDS [STATUS_FILE]
 * Every 100 ms it rewrites STATUS_FILE (if given) with
 * "open O opened T closed_by_server C" and prints the final line at exit.
 * Its own descriptor limit is raised to the hard limit first.
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

static long now_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec * 1000L + ts.tv_nsec / 1000000L;
}

/* A non-blocking connect to 127.0.0.1:port; -1 when no descriptor is left. */
static int open_one(int port) {
  int fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (fd < 0) return -1;
  struct sockaddr_in a;
  memset(&a, 0, sizeof a);
  a.sin_family = AF_INET;
  a.sin_port = htons((unsigned short)port);
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (connect(fd, (struct sockaddr*)&a, sizeof a) != 0 && errno != EINPROGRESS) {
    close(fd);
    return -1;
  }
  return fd;
}

static void report(const char* path, long open, long opened, long closed) {
  if (path == NULL) return;
  FILE* f = fopen(path, "w");
  if (f == NULL) return;
  fprintf(f, "open %ld opened %ld closed_by_server %ld\n", open, opened, closed);
  fclose(f);
}

int main(int argc, char** argv) {
  if (argc < 4) {
    fprintf(stderr, "usage: %s PORT N SECONDS [STATUS_FILE]\n", argv[0]);
    return 2;
  }
  const int port = atoi(argv[1]);
  const long want = atol(argv[2]);
  const long end = now_ms() + atol(argv[3]) * 1000L;
  const char* status = argc > 4 ? argv[4] : NULL;
  struct rlimit rl;
  if (getrlimit(RLIMIT_NOFILE, &rl) == 0) {
    rl.rlim_cur = rl.rlim_max;
    (void)setrlimit(RLIMIT_NOFILE, &rl);
  }
  struct pollfd* pfds = calloc((size_t)want, sizeof *pfds);
  if (pfds == NULL) return 2;
  long open = 0, opened = 0, closed = 0, last_report = 0;
  char buf[256];
  while (now_ms() < end) {
    /* Top up, at most 500 per round so closures are noticed too. */
    for (int i = 0; open < want && i < 500; ++i) {
      int fd = open_one(port);
      if (fd < 0) break;
      pfds[open].fd = fd;
      pfds[open].events = POLLIN;
      ++open;
      ++opened;
    }
    int n = poll(pfds, (nfds_t)open, 20);
    for (long i = open; n > 0 && i-- > 0;) {
      if (pfds[i].revents == 0) continue;
      /* Readable on a connection that sends nothing: the server closed it. */
      if (recv(pfds[i].fd, buf, sizeof buf, MSG_DONTWAIT) > 0) continue;
      close(pfds[i].fd);
      pfds[i] = pfds[--open];
      ++closed;
    }
    if (now_ms() - last_report >= 100) {
      last_report = now_ms();
      report(status, open, opened, closed);
    }
  }
  report(status, open, opened, closed);
  printf("idle_flood: open %ld opened %ld closed_by_server %ld\n", open, opened, closed);
  return 0;
}
