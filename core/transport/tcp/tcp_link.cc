#include "transport/tcp/tcp_link.h"

#include <sys/socket.h>

#include <cerrno>

#include "common/status.h"
#include "transport/socket.h"

namespace omniccl::transport {

TcpLink::TcpLink(UniqueFd fd, int peer) : fd_(std::move(fd)), peer_(peer) {
  set_nonblocking(fd_.get());
  tune_data_socket(fd_.get());
}

size_t TcpLink::try_send(const void* data, size_t n) {
  if (n == 0) return 0;
  ssize_t w = ::send(fd_.get(), data, n, MSG_NOSIGNAL | MSG_DONTWAIT);
  if (w >= 0) return static_cast<size_t>(w);
  if (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR) return 0;
  if (errno == EPIPE || errno == ECONNRESET) {
    fail(Status::kPeerFailure, "rank ", peer_, " closed its TCP data connection (it exited, was killed, or destroyed its communicator)");
  }
  fail_errno(str_cat("send to rank ", peer_), errno);
}

size_t TcpLink::try_recv(void* data, size_t n) {
  if (n == 0) return 0;
  ssize_t r = ::recv(fd_.get(), data, n, MSG_DONTWAIT);
  if (r > 0) return static_cast<size_t>(r);
  if (r == 0) {
    fail(Status::kPeerFailure, "rank ", peer_, " closed its TCP data connection (it exited, was killed, or destroyed its communicator)");
  }
  if (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR) return 0;
  if (errno == ECONNRESET) fail(Status::kPeerFailure, "rank ", peer_, " reset its TCP data connection");
  fail_errno(str_cat("recv from rank ", peer_), errno);
}

}  // namespace omniccl::transport
