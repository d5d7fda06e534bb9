/*
 * stall_connect: an LD_PRELOAD shim for the rank-death tests. It stops a
 * rank at a precise point of communicator setup so that the test can kill it
 * there: the first stream connect() to a mesh peer (an abstract unix socket,
 * or a TCP port other than MASTER_PORT and MASTER_PORT+1) after skipping
 * STALL_SKIP such connects (default 0) prints "stall_connect: stalled" to
 * stderr and sleeps forever instead of connecting. Connects to the
 * rendezvous store and datagram sockets pass through.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

typedef int (*connect_fn)(int, const struct sockaddr*, socklen_t);

static int is_mesh_peer(int fd, const struct sockaddr* addr) {
  int type = 0;
  socklen_t len = sizeof type;
  if (getsockopt(fd, SOL_SOCKET, SO_TYPE, &type, &len) != 0 || type != SOCK_STREAM) return 0;
  if (addr->sa_family == AF_UNIX) return 1;
  int master = 0;
  const char* mp = getenv("MASTER_PORT");
  if (mp != NULL) master = atoi(mp);
  int port = 0;
  if (addr->sa_family == AF_INET) port = ntohs(((const struct sockaddr_in*)addr)->sin_port);
  if (addr->sa_family == AF_INET6) port = ntohs(((const struct sockaddr_in6*)addr)->sin6_port);
  return port != 0 && port != master && port != master + 1;
}

int connect(int fd, const struct sockaddr* addr, socklen_t len) {
  static connect_fn real = NULL;
  static int seen = 0;
  if (real == NULL) real = (connect_fn)dlsym(RTLD_NEXT, "connect");
  if (addr != NULL && is_mesh_peer(fd, addr)) {
    const char* skip = getenv("STALL_SKIP");
    if (seen++ >= (skip != NULL ? atoi(skip) : 0)) {
      fprintf(stderr, "stall_connect: stalled\n");
      fflush(stderr);
      for (;;) pause();
    }
  }
  return real(fd, addr, len);
}
