#include "transport/tcp/tcp_link.h"

#include <sys/socket.h>
#include <sys/uio.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "common/net.h"
#include "common/status.h"
#include "kernels/cpu/copy.h"

namespace omniccl::transport {

namespace {
/// The padding between a header and a payload that starts on a 64-byte boundary.
constexpr char kZeros[64] = {};

/// What a TcpLink keeps of a message (Message::link_state): the bytes moved
/// of its padding, the zeros before the payload then those after it.
struct TcpMessage {
  uint32_t pad_done;
};
uint32_t& pad_done(Message& m) { return link_state<TcpMessage>(m).pad_done; }
}  // namespace

std::string apply_congestion(int fd, std::string_view setting, bool same_host, int peer) {
  if (setting == "system") return {};
  const std::string before = net::congestion_control(fd);
  if (setting == "auto" || setting.empty()) {
    if (!same_host || before.rfind("bbr", 0) != 0) return {};
    for (const char* loss_based : {"cubic", "reno"}) {
      if (net::set_congestion_control(fd, loss_based) == 0) {
        return str_cat(before, " -> ", loss_based, " (same host: ", before,
                       " paces each socket's packets with timers; OMNICCL_TCP_CONGESTION=system keeps it)");
      }
    }
    return {};  // neither allowed: the default stays
  }
  if (const int err = net::set_congestion_control(fd, setting); err != 0) {
    fail(Status::kInvalidArgument, "OMNICCL_TCP_CONGESTION=", setting, ": the kernel refused it for the link to rank ",
         peer, " (", std::strerror(err),
         "); see /proc/sys/net/ipv4/tcp_available_congestion_control, and tcp_allowed_congestion_control for "
         "processes without CAP_NET_ADMIN");
  }
  return str_cat(before, " -> ", setting, " (OMNICCL_TCP_CONGESTION=", setting, ")");
}

TcpLink::TcpLink(std::vector<UniqueFd> fds, int peer) : fds_(std::move(fds)), peer_(peer) {
  if (fds_.empty()) fail(Status::kInternal, "a TCP link to rank ", peer, " needs at least one socket");
  for (const UniqueFd& fd : fds_) {
    net::set_nonblocking(fd.get());
    net::set_nodelay(fd.get());  // its buffers were set before it connected (net::set_data_buffers)
  }
}

void TcpLink::append_sockets(std::vector<int>& out) const {
  for (const UniqueFd& fd : fds_) out.push_back(fd.get());
}

size_t TcpLink::try_sendv(int fd, const void* a, size_t na, const void* b, size_t nb, const void* c, size_t nc,
                          const void* d, size_t nd) {
  iovec iov[4];
  size_t n = 0;
  for (const auto& [p, len] : {std::pair{a, na}, std::pair{b, nb}, std::pair{c, nc}, std::pair{d, nd}}) {
    if (len > 0) iov[n++] = {const_cast<void*>(p), len};
  }
  if (n == 0) return 0;
  msghdr msg{};
  msg.msg_iov = iov;
  msg.msg_iovlen = n;
  ssize_t w = ::sendmsg(fd, &msg, MSG_NOSIGNAL | MSG_DONTWAIT);
  if (w >= 0) return static_cast<size_t>(w);
  if (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR) return 0;
  if (errno == EPIPE || errno == ECONNRESET) {
    fail(Status::kPeerFailure, "rank ", peer_,
         " closed its TCP data connection (it exited, was killed, or destroyed its communicator)");
  }
  fail_errno(str_cat("send to rank ", peer_), errno);
}

size_t TcpLink::try_recv(int fd, void* data, size_t n) { return try_readv(fd, data, n, nullptr, 0); }

size_t TcpLink::try_readv(int fd, void* a, size_t na, void* b, size_t nb) {
  if (na + nb == 0) return 0;
  ssize_t r;
  if (nb == 0) {
    r = ::recv(fd, a, na, MSG_DONTWAIT);
  } else {
    iovec iov[2] = {{a, na}, {b, nb}};
    msghdr msg{};
    msg.msg_iov = na > 0 ? iov : iov + 1;
    msg.msg_iovlen = na > 0 ? 2 : 1;
    r = ::recvmsg(fd, &msg, MSG_DONTWAIT);
  }
  if (r > 0) return static_cast<size_t>(r);
  if (r == 0) {
    fail(Status::kPeerFailure, "rank ", peer_,
         " closed its TCP data connection (it exited, was killed, or destroyed its communicator)");
  }
  if (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR) return 0;
  if (errno == ECONNRESET) fail(Status::kPeerFailure, "rank ", peer_, " reset its TCP data connection");
  fail_errno(str_cat("recv from rank ", peer_), errno);
}

size_t TcpLink::recv0(void* data, size_t n) {
  if (n == 0) return 0;
  char* out = static_cast<char*>(data);
  size_t k = std::min(n, cache_end_ - cache_begin_);
  if (k > 0) {
    kernels::cpu::copy(out, cache_.get() + cache_begin_, k);  // no slow distance (kernels/cpu/copy.h)
    cache_begin_ += k;
    if (k == n) return k;
  }
  // The cache is empty here: one read for the rest, and what follows it.
  if (!cache_) cache_ = std::make_unique<char[]>(kCacheBytes);
  cache_begin_ = cache_end_ = 0;
  const size_t r = try_readv(fds_[0].get(), out + k, n - k, cache_.get(), kCacheBytes);
  if (r > n - k) cache_end_ = r - (n - k);
  return k + std::min(r, n - k);
}

bool TcpLink::send(Message& m) {
  bool progressed = false;
  const char* header = static_cast<const char*>(m.header);
  const size_t pad = pad_of(m), all_pad = pad + tail_of(m);
  while (m.header_done < m.header_bytes || pad_done(m) < all_pad || m.done < m.payload.bytes) {
    // The header, its padding, stripe 0 and the zeros after the payload share
    // socket 0; each write stays in one stripe, and the tail follows the
    // payload's last byte in the same write where that is on socket 0.
    const int fd = fd_for(m);
    const size_t hdr_left = m.header_bytes - m.header_done;
    const size_t pad_left = pad_done(m) < pad ? pad - pad_done(m) : 0;
    const size_t body = stripe_left(m.done, m.payload.bytes);
    const bool tail_here = m.done + body == m.payload.bytes && fd == fds_[0].get();
    const size_t tail_done = pad_done(m) > pad ? pad_done(m) - pad : 0;
    const size_t tail_left = tail_here ? all_pad - pad - tail_done : 0;
    size_t k = try_sendv(fd, header + m.header_done, hdr_left, kZeros + (pad - pad_left), pad_left,
                         m.payload.ptr + m.done, body, kZeros + tail_done, tail_left);
    if (k == 0) break;
    const size_t kh = std::min(k, hdr_left);
    const size_t kp = std::min(k - kh, pad_left);
    const size_t kb = std::min(k - kh - kp, body);
    m.header_done += kh;
    m.done += kb;
    pad_done(m) += static_cast<uint32_t>(kp + (k - kh - kp - kb));
    progressed = true;
  }
  m.complete = m.header_done == m.header_bytes && pad_done(m) == all_pad && m.done == m.payload.bytes;
  return progressed;
}

bool TcpLink::recv_header(Message& m) {
  size_t k = recv0(static_cast<char*>(m.header) + m.header_done, m.header_bytes - m.header_done);
  m.header_done += k;
  return k > 0;
}

bool TcpLink::skip_padding(Message& m, size_t upto, bool& progressed) {
  while (pad_done(m) < upto) {
    char skipped[64];
    const size_t k = recv0(skipped, upto - pad_done(m));
    if (k == 0) return false;
    pad_done(m) += static_cast<uint32_t>(k);
    progressed = true;
  }
  return true;
}

bool TcpLink::recv_payload(Message& m) {
  bool progressed = false;
  const size_t bytes = m.payload.bytes;
  const size_t pad = pad_of(m), all_pad = pad + tail_of(m);
  if (!skip_padding(m, pad, progressed)) return progressed;  // m.complete stays false
  if (m.sink == nullptr) {
    while (m.done < bytes) {
      size_t k = read_at(fd_at(m.done), m.payload.ptr + m.done, stripe_left(m.done, bytes));
      if (k == 0) break;
      m.done += k;
      progressed = true;
    }
    m.complete = m.done == bytes && skip_padding(m, all_pad, progressed);
    return progressed;
  }
  // Through the stage: the sink takes whole granules, the rest waits there.
  while (m.done < bytes) {
    size_t want = std::min(m.stage.bytes - m.staged, stripe_left(m.done, bytes));
    size_t k = want > 0 ? read_at(fd_at(m.done), m.stage.ptr + m.staged, want) : 0;
    take_staged(m, k);
    if (k > 0) progressed = true;
    if (k == 0) break;
  }
  m.complete = m.done == bytes && m.staged == 0 && skip_padding(m, all_pad, progressed);
  return progressed;
}

}  // namespace omniccl::transport
