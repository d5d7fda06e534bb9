#include "transport/tcp/tcp_link.h"

#include <sys/socket.h>
#include <sys/uio.h>

#include <cerrno>

#include "common/net.h"
#include "common/status.h"

namespace omniccl::transport {

TcpLink::TcpLink(UniqueFd fd, int peer) : fd_(std::move(fd)), peer_(peer) {
  net::set_nonblocking(fd_.get());
  net::tune_data_socket(fd_.get());
}

size_t TcpLink::try_sendv(const void* a, size_t na, const void* b, size_t nb) {
  iovec iov[2] = {{const_cast<void*>(a), na}, {const_cast<void*>(b), nb}};
  msghdr msg{};
  msg.msg_iov = na > 0 ? iov : iov + 1;
  msg.msg_iovlen = (na > 0) + (nb > 0);
  if (msg.msg_iovlen == 0) return 0;
  ssize_t w = ::sendmsg(fd_.get(), &msg, MSG_NOSIGNAL | MSG_DONTWAIT);
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
