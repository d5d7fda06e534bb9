#include "common/net.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <linux/sockios.h>
#include <poll.h>
#include <sys/ioctl.h>
#include <sys/un.h>
#include <unistd.h>

#include <cerrno>
#include <cstddef>
#include <cstring>
#include <thread>

#include "common/status.h"

namespace omniccl::net {

namespace {

struct Parsed {
  bool is_unix = false;
  sockaddr_storage ss{};
  socklen_t len = 0;
};

/// Fills ss/len from an IPv4 or IPv6 literal; false if it is neither.
bool ip_literal(const std::string& ip, uint16_t port, sockaddr_storage& ss, socklen_t& len) {
  auto* in = reinterpret_cast<sockaddr_in*>(&ss);
  if (inet_pton(AF_INET, ip.c_str(), &in->sin_addr) == 1) {
    in->sin_family = AF_INET;
    in->sin_port = htons(port);
    len = sizeof(sockaddr_in);
    return true;
  }
  auto* in6 = reinterpret_cast<sockaddr_in6*>(&ss);
  if (inet_pton(AF_INET6, ip.c_str(), &in6->sin6_addr) == 1) {
    in6->sin6_family = AF_INET6;
    in6->sin6_port = htons(port);
    len = sizeof(sockaddr_in6);
    return true;
  }
  return false;
}

Parsed parse(const SocketAddress& addr) {
  Parsed p;
  const std::string& t = addr.text;
  if (t.rfind("unix:@", 0) == 0) {
    p.is_unix = true;
    auto* un = reinterpret_cast<sockaddr_un*>(&p.ss);
    un->sun_family = AF_UNIX;
    std::string name = t.substr(6);
    if (name.size() + 1 > sizeof(un->sun_path)) fail(Status::kInternal, "unix socket name too long: ", name);
    un->sun_path[0] = '\0';
    std::memcpy(un->sun_path + 1, name.data(), name.size());
    p.len = static_cast<socklen_t>(offsetof(sockaddr_un, sun_path) + 1 + name.size());
    return p;
  }
  if (t.rfind("tcp:", 0) == 0) {
    std::string rest = t.substr(4);
    auto colon = rest.rfind(':');
    if (colon == std::string::npos) fail(Status::kInvalidArgument, "bad peer address '", t, "'");
    std::string ip = rest.substr(0, colon);
    if (ip.size() >= 2 && ip.front() == '[' && ip.back() == ']') ip = ip.substr(1, ip.size() - 2);
    int port = std::atoi(rest.c_str() + colon + 1);
    if (!ip_literal(ip, static_cast<uint16_t>(port), p.ss, p.len)) {
      fail(Status::kInvalidArgument, "bad peer IP address '", ip, "' in '", t, "'");
    }
    return p;
  }
  fail(Status::kInvalidArgument, "bad peer address '", t, "'");
}

}  // namespace

void set_nonblocking(int fd) {
  int flags = fcntl(fd, F_GETFL, 0);
  if (flags < 0 || fcntl(fd, F_SETFL, flags | O_NONBLOCK) < 0) fail_errno("fcntl(O_NONBLOCK)", errno);
}

void set_data_buffers(int fd) {
  int buf = 4 << 20;
  (void)setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &buf, sizeof buf);
  (void)setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &buf, sizeof buf);
}

std::string congestion_control(int fd) {
  char name[64] = {};
  socklen_t len = sizeof name - 1;
  if (::getsockopt(fd, IPPROTO_TCP, TCP_CONGESTION, name, &len) != 0) return {};
  return std::string(name, ::strnlen(name, len));
}

int set_congestion_control(int fd, std::string_view name) {
  return ::setsockopt(fd, IPPROTO_TCP, TCP_CONGESTION, name.data(), static_cast<socklen_t>(name.size())) == 0 ? 0
                                                                                                              : errno;
}

UniqueFd listen_tcp(const std::string& ip, SocketAddress& addr) {
  std::string bare = ip;
  if (bare.size() >= 2 && bare.front() == '[' && bare.back() == ']') bare = bare.substr(1, bare.size() - 2);
  sockaddr_storage ss{};
  socklen_t len = 0;
  if (!ip_literal(bare, 0, ss, len)) {
    fail(Status::kInvalidArgument, "listen address '", ip, "' is not an IPv4 or IPv6 address (OMNICCL_SOCKET_ADDR?)");
  }
  UniqueFd fd(::socket(ss.ss_family, SOCK_STREAM | SOCK_CLOEXEC, 0));
  if (!fd.valid()) fail_errno(ss.ss_family == AF_INET6 ? "socket(AF_INET6)" : "socket(AF_INET)", errno);
  int one = 1;
  setsockopt(fd.get(), SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  set_data_buffers(fd.get());  // before listen(): accepted sockets inherit them
  if (::bind(fd.get(), reinterpret_cast<sockaddr*>(&ss), len) != 0) fail_errno(str_cat("bind(", ip, ":0)"), errno);
  if (::listen(fd.get(), 1024) != 0) fail_errno("listen", errno);
  socklen_t got = sizeof ss;
  getsockname(fd.get(), reinterpret_cast<sockaddr*>(&ss), &got);
  const uint16_t port = ntohs(ss.ss_family == AF_INET6 ? reinterpret_cast<sockaddr_in6*>(&ss)->sin6_port
                                                       : reinterpret_cast<sockaddr_in*>(&ss)->sin_port);
  addr.text = ss.ss_family == AF_INET6 ? str_cat("tcp:[", bare, "]:", port) : str_cat("tcp:", bare, ":", port);
  return fd;
}

UniqueFd listen_unix(const std::string& name, SocketAddress& addr) {
  addr.text = "unix:@" + name;
  Parsed p = parse(addr);
  UniqueFd fd(::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0));
  if (!fd.valid()) fail_errno("socket(AF_UNIX)", errno);
  if (::bind(fd.get(), reinterpret_cast<sockaddr*>(&p.ss), p.len) != 0) {
    fail_errno(str_cat("bind(unix:@", name, ")"), errno);
  }
  if (::listen(fd.get(), 1024) != 0) fail_errno("listen", errno);
  return fd;
}

namespace {

/// How long one connection attempt may wait for its handshake before a new
/// socket tries again: a lost SYN is resent by the kernel after 1 s, then 3,
/// 7, 15 s...; a fresh attempt keeps the retries at about a second apart.
constexpr int kConnectAttemptMs = 2000;

/// Waits for a non-blocking connect on fd to finish; returns 0 once
/// connected, else the error (ETIMEDOUT when this attempt's time is up).
int wait_connected(int fd, Deadline deadline, const std::function<void()>& tick) {
  const Deadline attempt = Deadline::min(deadline, Deadline::after_ms(kConnectAttemptMs));
  for (;;) {
    pollfd p{fd, POLLOUT, 0};
    int r = ::poll(&p, 1, attempt.remaining_ms(100));
    if (r < 0 && errno != EINTR) return errno;
    if (r > 0) {
      int so_error = 0;
      socklen_t len = sizeof so_error;
      if (::getsockopt(fd, SOL_SOCKET, SO_ERROR, &so_error, &len) != 0) return errno;
      return so_error;
    }
    if (attempt.expired()) return ETIMEDOUT;
    if (tick) tick();
  }
}

}  // namespace

UniqueFd connect_to(const SocketAddress& addr, Deadline deadline, const std::function<void()>& tick) {
  Parsed p = parse(addr);
  int delay_ms = 1;
  for (;;) {
    UniqueFd fd(::socket(p.ss.ss_family, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0));
    if (!fd.valid()) fail_errno("socket", errno);
    if (!p.is_unix) set_data_buffers(fd.get());  // before the handshake fixes the window
    int err = 0;
    if (::connect(fd.get(), reinterpret_cast<sockaddr*>(&p.ss), p.len) != 0) {
      err = errno;
      if (err == EINPROGRESS || err == EINTR) err = wait_connected(fd.get(), deadline, tick);
    }
    if (err == 0) {
      const int flags = ::fcntl(fd.get(), F_GETFL);
      if (flags >= 0) (void)::fcntl(fd.get(), F_SETFL, flags & ~O_NONBLOCK);
      if (!p.is_unix) set_nodelay(fd.get());
      return fd;
    }
    bool retry =
        err == ECONNREFUSED || err == EAGAIN || err == ETIMEDOUT || err == ENOENT || err == EINTR || err == ECONNRESET;
    if (!retry) fail_errno(str_cat("connect(", addr.text, ")"), err);
    if (deadline.expired()) {
      fail(Status::kTimeout, "could not connect to ", addr.text,
           " before the deadline (last error: ", std::strerror(err), ")");
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(std::min(delay_ms, deadline.remaining_ms(delay_ms))));
    delay_ms = std::min(delay_ms * 2, 50);
    if (tick) tick();
  }
}

UniqueFd accept_now(int listen_fd, int* err) {
  *err = EAGAIN;
  pollfd pfd{listen_fd, POLLIN, 0};
  if (::poll(&pfd, 1, 0) <= 0) return UniqueFd();  // nothing queued (the listener may block)
  const int fd = ::accept4(listen_fd, nullptr, nullptr, SOCK_CLOEXEC);
  if (fd >= 0) return UniqueFd(fd);
  if (errno != EAGAIN && errno != EINTR && errno != ECONNABORTED) *err = errno;
  return UniqueFd();
}

UniqueFd accept_until(int listen_fd, Deadline deadline) {
  for (;;) {
    pollfd pfd{listen_fd, POLLIN, 0};
    int r = ::poll(&pfd, 1, deadline.remaining_ms(100));
    if (r < 0 && errno != EINTR) fail_errno("poll(listen)", errno);
    if (r > 0) {
      int fd = ::accept4(listen_fd, nullptr, nullptr, SOCK_CLOEXEC);
      if (fd >= 0) return UniqueFd(fd);
      if (errno != EAGAIN && errno != EINTR && errno != ECONNABORTED) fail_errno("accept", errno);
    }
    if (deadline.expired()) return UniqueFd();
  }
}

namespace {

/// A socket's own end (`peer` false) or the other end's, as text
/// ("127.0.0.1:41234"); empty where it has none.
std::string end_text(int fd, bool peer) {
  sockaddr_storage ss{};
  socklen_t n = sizeof ss;
  auto* sa = reinterpret_cast<sockaddr*>(&ss);
  if ((peer ? ::getpeername(fd, sa, &n) : ::getsockname(fd, sa, &n)) != 0) return {};
  const uint16_t port = ss.ss_family == AF_INET    ? ntohs(reinterpret_cast<sockaddr_in*>(sa)->sin_port)
                        : ss.ss_family == AF_INET6 ? ntohs(reinterpret_cast<sockaddr_in6*>(sa)->sin6_port)
                                                   : 0;
  return port == 0 ? std::string() : str_cat(address_text(sa), ":", port);
}

}  // namespace

UniqueFd accept_own(int listen_fd, int connected_fd, Deadline deadline) {
  const std::string mine = end_text(connected_fd, /*peer=*/false);
  if (mine.empty()) return UniqueFd();
  for (;;) {
    UniqueFd fd = accept_until(listen_fd, deadline);
    if (!fd.valid() || end_text(fd.get(), /*peer=*/true) == mine) return fd;
  }
}

void write_all(int fd, const void* data, size_t n, Deadline deadline, const std::string& what) {
  const char* p = static_cast<const char*>(data);
  while (n > 0) {
    ssize_t w = ::send(fd, p, n, MSG_NOSIGNAL | MSG_DONTWAIT);
    if (w > 0) {
      p += w;
      n -= static_cast<size_t>(w);
      continue;
    }
    if (w < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR) {
      if (errno == EPIPE || errno == ECONNRESET) fail(Status::kPeerFailure, what, ": connection closed by peer");
      fail_errno(what, errno);
    }
    pollfd pfd{fd, POLLOUT, 0};
    if (deadline.expired()) fail(Status::kTimeout, what, ": timed out writing");
    ::poll(&pfd, 1, deadline.remaining_ms(100));
  }
}

namespace {

bool is_tcp(int fd) {
  int domain = 0, type = 0;
  socklen_t len = sizeof domain;
  if (::getsockopt(fd, SOL_SOCKET, SO_DOMAIN, &domain, &len) != 0) return false;
  len = sizeof type;
  if (::getsockopt(fd, SOL_SOCKET, SO_TYPE, &type, &len) != 0) return false;
  return (domain == AF_INET || domain == AF_INET6) && type == SOCK_STREAM;
}

/// Reads and drops what is readable; false once the peer closed or reset
/// (nothing more to wait for on this socket).
bool drop_input(int fd) {
  char buf[4096];
  for (;;) {
    ssize_t r = ::recv(fd, buf, sizeof buf, MSG_DONTWAIT);
    if (r > 0) continue;
    if (r == 0) return false;
    if (errno == EINTR) continue;
    return errno == EAGAIN || errno == EWOULDBLOCK;
  }
}

/// True while the peer has not acknowledged every byte (and the FIN) sent.
bool unacknowledged(int fd) {
  int queued = 0;
  if (::ioctl(fd, SIOCOUTQ, &queued) != 0) return false;
  return queued > 0;
}

}  // namespace

void finish_sending(const std::vector<int>& fds, Deadline deadline) {
  std::vector<int> pending;
  for (int fd : fds) {
    if (fd < 0 || !is_tcp(fd)) continue;
    if (::shutdown(fd, SHUT_WR) != 0) continue;  // not connected any more
    pending.push_back(fd);
  }
  std::vector<pollfd> pfds;
  int wait_ms = 1;
  for (;;) {
    size_t kept = 0;
    for (int fd : pending) {
      if (drop_input(fd) && unacknowledged(fd)) pending[kept++] = fd;
    }
    pending.resize(kept);
    if (pending.empty()) return;
    int ms;
    try {
      if (deadline.expired()) return;
      ms = deadline.remaining_ms(wait_ms);
    } catch (const Error&) {
      return;  // cancelled: stop lingering
    }
    // Acknowledgements wake nobody: poll for input with short, growing naps.
    pfds.clear();
    for (int fd : pending) pfds.push_back({fd, POLLIN, 0});
    ::poll(pfds.data(), pfds.size(), ms);
    wait_ms = wait_ms < 32 ? wait_ms * 2 : 50;
  }
}

void read_all(int fd, void* data, size_t n, Deadline deadline, const std::string& what) {
  char* p = static_cast<char*>(data);
  while (n > 0) {
    ssize_t r = ::recv(fd, p, n, MSG_DONTWAIT);
    if (r > 0) {
      p += r;
      n -= static_cast<size_t>(r);
      continue;
    }
    if (r == 0) fail(Status::kPeerFailure, what, ": connection closed by peer");
    if (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR) {
      if (errno == ECONNRESET) fail(Status::kPeerFailure, what, ": connection reset by peer");
      fail_errno(what, errno);
    }
    if (deadline.expired()) fail(Status::kTimeout, what, ": timed out reading");
    pollfd pfd{fd, POLLIN, 0};
    ::poll(&pfd, 1, deadline.remaining_ms(100));
  }
}

std::vector<Address> resolve(const std::string& host, uint16_t port, bool passive, int* gai_err) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_NUMERICSERV | (passive ? AI_PASSIVE : 0);
  std::string h = host;
  if (h.size() >= 2 && h.front() == '[' && h.back() == ']') h = h.substr(1, h.size() - 2);
  const std::string service = std::to_string(port);
  addrinfo* res = nullptr;
  int rc = getaddrinfo(h.empty() && passive ? nullptr : h.c_str(), service.c_str(), &hints, &res);
  *gai_err = rc;
  std::vector<Address> out;
  if (rc != 0) return out;
  for (int pass = 0; pass < 2; ++pass) {  // IPv4 first
    for (const addrinfo* p = res; p != nullptr; p = p->ai_next) {
      if ((p->ai_family == AF_INET) != (pass == 0)) continue;
      if (p->ai_addrlen > sizeof(sockaddr_storage)) continue;
      Address a;
      std::memcpy(&a.storage, p->ai_addr, p->ai_addrlen);
      a.len = p->ai_addrlen;
      a.family = p->ai_family;
      out.push_back(a);
    }
  }
  freeaddrinfo(res);
  if (out.empty()) *gai_err = EAI_NONAME;
  return out;
}

std::string address_text(const sockaddr* sa) {
  char buf[INET6_ADDRSTRLEN] = {};
  if (sa->sa_family == AF_INET) {
    inet_ntop(AF_INET, &reinterpret_cast<const sockaddr_in*>(sa)->sin_addr, buf, sizeof buf);
  } else if (sa->sa_family == AF_INET6) {
    inet_ntop(AF_INET6, &reinterpret_cast<const sockaddr_in6*>(sa)->sin6_addr, buf, sizeof buf);
  } else {
    return "?";
  }
  return buf;
}

void set_nodelay(int fd) {
  int one = 1;
  (void)setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
}

}  // namespace omniccl::net
