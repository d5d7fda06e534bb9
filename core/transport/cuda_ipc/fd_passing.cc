// See fd_passing.h.
#include "transport/cuda_ipc/fd_passing.h"

#include <poll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <random>

#include "common/log.h"
#include "common/net.h"
#include "common/status.h"

namespace omniccl::transport {

namespace {

constexpr char kRequestMagic[4] = {'O', 'C', 'F', 'D'};
constexpr char kGranted[4] = {'O', 'C', 'O', 'K'};
constexpr char kNoOffer[4] = {'O', 'C', 'N', 'O'};
constexpr size_t kRequestBytes = 12;
/// How long a trusted peer may take to send its request once connected: the
/// server's one thread waits for nobody longer.
constexpr int kRequestMs = 2000;

/// The kernel's record of who is at the other end of unix socket `fd`.
ucred peer_credentials(int fd) {
  ucred cred{};
  socklen_t len = sizeof cred;
  if (::getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &len) != 0) fail_errno("getsockopt(SO_PEERCRED)", errno);
  return cred;
}

std::string fresh_name() {
  std::random_device rd;
  const uint64_t r = uint64_t(rd()) << 32 | rd();
  char hex[17];
  std::snprintf(hex, sizeof hex, "%016llx", static_cast<unsigned long long>(r));
  return str_cat("omniccl-fd-", ::getpid(), "-", hex);
}

/// Sends the 4-byte answer `tag`, with `fd` attached unless it is -1. Never
/// blocks: a fresh unix socket always has room for it.
bool send_answer(int sock, const char (&tag)[4], int fd) {
  char bytes[4];
  std::memcpy(bytes, tag, 4);
  iovec iov{bytes, sizeof bytes};
  msghdr msg{};
  msg.msg_iov = &iov;
  msg.msg_iovlen = 1;
  alignas(cmsghdr) char control[CMSG_SPACE(sizeof(int))] = {};
  if (fd >= 0) {
    msg.msg_control = control;
    msg.msg_controllen = sizeof control;
    cmsghdr* c = CMSG_FIRSTHDR(&msg);
    c->cmsg_level = SOL_SOCKET;
    c->cmsg_type = SCM_RIGHTS;
    c->cmsg_len = CMSG_LEN(sizeof(int));
    std::memcpy(CMSG_DATA(c), &fd, sizeof fd);
  }
  return ::sendmsg(sock, &msg, MSG_NOSIGNAL | MSG_DONTWAIT) == ssize_t(sizeof bytes);
}

/// The descriptor attached to `msg`, owned (every one attached, should a
/// sender attach several, is closed but the first).
UniqueFd attached_fd(msghdr& msg) {
  UniqueFd first;
  for (cmsghdr* c = CMSG_FIRSTHDR(&msg); c != nullptr; c = CMSG_NXTHDR(&msg, c)) {
    if (c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS) continue;
    const size_t n = (c->cmsg_len - CMSG_LEN(0)) / sizeof(int);
    for (size_t i = 0; i < n; ++i) {
      int fd = -1;
      std::memcpy(&fd, CMSG_DATA(c) + i * sizeof(int), sizeof fd);
      UniqueFd owned(fd);
      if (!first.valid()) first = std::move(owned);
    }
  }
  return first;
}

/// Waits for the server's answer on `sock` and returns the descriptor.
UniqueFd receive_answer(int sock, Deadline deadline, const std::function<void()>& tick, const std::string& what) {
  for (;;) {
    char tag[4] = {};
    iovec iov{tag, sizeof tag};
    alignas(cmsghdr) char control[CMSG_SPACE(sizeof(int) * 4)] = {};
    msghdr msg{};
    msg.msg_iov = &iov;
    msg.msg_iovlen = 1;
    msg.msg_control = control;
    msg.msg_controllen = sizeof control;
    const ssize_t n = ::recvmsg(sock, &msg, MSG_DONTWAIT | MSG_CMSG_CLOEXEC);
    UniqueFd fd = n > 0 ? attached_fd(msg) : UniqueFd();
    if (n == 0 || (n < 0 && errno == ECONNRESET)) fail(Status::kPeerFailure, what, ": the peer closed the connection");
    if (n < 0 && errno != EAGAIN && errno != EINTR) fail_errno(what, errno);
    if (n == ssize_t(sizeof tag) && std::memcmp(tag, kGranted, 4) == 0 && fd.valid()) return fd;
    if (n == ssize_t(sizeof tag) && std::memcmp(tag, kNoOffer, 4) == 0) {
      fail(Status::kInvalidArgument, what, ": the peer offers no such descriptor (withdrawn already?)");
    }
    if (n > 0) fail(Status::kPeerFailure, what, ": the peer's answer is malformed");
    if (deadline.expired()) fail(Status::kTimeout, what, ": no answer before the deadline");
    pollfd p{sock, POLLIN, 0};
    (void)::poll(&p, 1, deadline.remaining_ms(100));
    if (tick) tick();
  }
}

}  // namespace

FdServer::FdServer(std::vector<pid_t> trusted) : trusted_(std::move(trusted)), name_(fresh_name()) {
  net::SocketAddress addr;
  listener_ = net::listen_unix(name_, addr);
  stop_.reset(::eventfd(0, EFD_CLOEXEC));
  if (!stop_.valid()) fail_errno("eventfd", errno);
  thread_ = std::thread([this] { serve(); });
}

FdServer::~FdServer() {
  const uint64_t one = 1;
  (void)!::write(stop_.get(), &one, sizeof one);
  thread_.join();
}

uint64_t FdServer::offer(UniqueFd fd) {
  std::lock_guard lock(mu_);
  const uint64_t id = ++next_id_;
  offers_[id] = std::move(fd);
  return id;
}

void FdServer::withdraw_all() {
  std::lock_guard lock(mu_);
  offers_.clear();
}

void FdServer::serve() {
  for (;;) {
    pollfd p[2] = {{listener_.get(), POLLIN, 0}, {stop_.get(), POLLIN, 0}};
    if (::poll(p, 2, -1) < 0 && errno != EINTR) {
      OCCL_LOG(kWarn, kTransport, "descriptor server: poll: ", std::strerror(errno));
      return;
    }
    if (p[1].revents != 0) return;
    int err = 0;
    UniqueFd conn = net::accept_now(listener_.get(), &err);
    if (conn.valid()) {
      try {
        answer(std::move(conn));
      } catch (const std::exception& e) {  // nothing may leave the thread
        OCCL_LOG(kWarn, kTransport, "descriptor server: ", e.what());
      }
    } else if (err != EAGAIN) {
      // Out of descriptors: wait a little rather than spin on a full queue.
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
  }
}

void FdServer::answer(UniqueFd conn) {
  const ucred cred = peer_credentials(conn.get());
  if (cred.uid != ::geteuid() || std::find(trusted_.begin(), trusted_.end(), cred.pid) == trusted_.end()) {
    ++strangers_;
    OCCL_LOG(kWarn, kTransport, "descriptor server ", name_, ": closed a connection from pid ", cred.pid, " (uid ",
             cred.uid, "), which is no peer of this communicator on this host");
    return;
  }
  char request[kRequestBytes];
  try {
    net::read_all(conn.get(), request, sizeof request, Deadline::after_ms(kRequestMs), "a descriptor request");
  } catch (const Error& e) {
    OCCL_LOG(kInfo, kTransport, "descriptor server: pid ", cred.pid, ": ", e.what());
    return;
  }
  if (std::memcmp(request, kRequestMagic, 4) != 0) {
    OCCL_LOG(kWarn, kTransport, "descriptor server: pid ", cred.pid, " sent a malformed request");
    return;
  }
  uint64_t id = 0;
  std::memcpy(&id, request + 4, sizeof id);
  // Under the lock: withdraw_all cannot close the descriptor while it goes.
  std::lock_guard lock(mu_);
  auto it = offers_.find(id);
  const bool sent =
      it == offers_.end() ? send_answer(conn.get(), kNoOffer, -1) : send_answer(conn.get(), kGranted, it->second.get());
  if (!sent) OCCL_LOG(kInfo, kTransport, "descriptor server: answering pid ", cred.pid, ": ", std::strerror(errno));
}

UniqueFd fetch_fd(const std::string& name, pid_t owner, uint64_t id, Deadline deadline,
                  const std::function<void()>& tick, const std::string& what) {
  UniqueFd conn = net::connect_to(net::SocketAddress{"unix:@" + name}, deadline, tick);
  const ucred cred = peer_credentials(conn.get());
  if (cred.pid != owner || cred.uid != ::geteuid()) {
    fail(Status::kPeerFailure, what, ": the socket ", name, " belongs to pid ", cred.pid, " (uid ", cred.uid,
         "), not to pid ", owner, ": another process took its name");
  }
  char request[kRequestBytes];
  std::memcpy(request, kRequestMagic, 4);
  std::memcpy(request + 4, &id, sizeof id);
  net::write_all(conn.get(), request, sizeof request, deadline, what);
  return receive_answer(conn.get(), deadline, tick, what);
}

}  // namespace omniccl::transport
