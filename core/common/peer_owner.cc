// Who owns the other end of an accepted connection, when it is a socket of
// this host (and network namespace). A unix socket carries its peer's
// credentials (SO_PEERCRED). For TCP the kernel's socket table knows, and
// answers one exact lookup by address and port over a sock_diag netlink
// socket (inet_diag_req_v2 without NLM_F_DUMP: the kernel finds that one
// socket, the cost of one system call pair whatever the number of sockets;
// scanning /proc/net/tcp would grow with them, which a flood of connections
// would turn against the server).
#include <arpa/inet.h>
#include <linux/inet_diag.h>
#include <linux/netlink.h>
#include <linux/sock_diag.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstring>

#include "common/fd.h"
#include "common/net.h"

namespace omniccl::net {

namespace {

/// Fills the request's id with the peer's socket as seen from its side:
/// source = the peer's address and port, destination = ours. IPv4 peers of
/// a dual-stack listener (::ffff:a.b.c.d) are looked up as IPv4 sockets.
bool fill_id(const sockaddr_storage& local, const sockaddr_storage& peer, inet_diag_req_v2& r) {
  if (peer.ss_family == AF_INET) {
    const auto& l = reinterpret_cast<const sockaddr_in&>(local);
    const auto& p = reinterpret_cast<const sockaddr_in&>(peer);
    r.sdiag_family = AF_INET;
    r.id.idiag_sport = p.sin_port;
    r.id.idiag_dport = l.sin_port;
    std::memcpy(r.id.idiag_src, &p.sin_addr, 4);
    std::memcpy(r.id.idiag_dst, &l.sin_addr, 4);
    return true;
  }
  if (peer.ss_family != AF_INET6) return false;
  const auto& l = reinterpret_cast<const sockaddr_in6&>(local);
  const auto& p = reinterpret_cast<const sockaddr_in6&>(peer);
  r.id.idiag_sport = p.sin6_port;
  r.id.idiag_dport = l.sin6_port;
  if (IN6_IS_ADDR_V4MAPPED(&p.sin6_addr) && IN6_IS_ADDR_V4MAPPED(&l.sin6_addr)) {
    r.sdiag_family = AF_INET;
    std::memcpy(r.id.idiag_src, &p.sin6_addr.s6_addr[12], 4);
    std::memcpy(r.id.idiag_dst, &l.sin6_addr.s6_addr[12], 4);
    return true;
  }
  r.sdiag_family = AF_INET6;
  std::memcpy(r.id.idiag_src, &p.sin6_addr, 16);
  std::memcpy(r.id.idiag_dst, &l.sin6_addr, 16);
  return true;
}

}  // namespace

std::optional<uid_t> local_peer_uid(int fd) {
  sockaddr_storage local{}, peer{};
  socklen_t llen = sizeof local, plen = sizeof peer;
  if (::getsockname(fd, reinterpret_cast<sockaddr*>(&local), &llen) != 0 ||
      ::getpeername(fd, reinterpret_cast<sockaddr*>(&peer), &plen) != 0) {
    return std::nullopt;
  }
  if (local.ss_family == AF_UNIX) {
    ucred cred{};
    socklen_t len = sizeof cred;
    if (::getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &len) != 0) return std::nullopt;
    return cred.uid;
  }
  struct {
    nlmsghdr nlh;
    inet_diag_req_v2 r;
  } req{};
  if (!fill_id(local, peer, req.r)) return std::nullopt;
  req.nlh.nlmsg_len = sizeof req;
  req.nlh.nlmsg_type = SOCK_DIAG_BY_FAMILY;
  req.nlh.nlmsg_flags = NLM_F_REQUEST;
  req.r.sdiag_protocol = IPPROTO_TCP;
  req.r.idiag_states = ~0u;
  req.r.id.idiag_cookie[0] = INET_DIAG_NOCOOKIE;
  req.r.id.idiag_cookie[1] = INET_DIAG_NOCOOKIE;
  UniqueFd nl(::socket(AF_NETLINK, SOCK_DGRAM | SOCK_CLOEXEC, NETLINK_SOCK_DIAG));
  if (!nl.valid()) return std::nullopt;
  timeval tv{1, 0};  // the kernel answers at once; never wait long in the server's thread
  (void)::setsockopt(nl.get(), SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  sockaddr_nl kernel{};
  kernel.nl_family = AF_NETLINK;
  if (::sendto(nl.get(), &req, sizeof req, 0, reinterpret_cast<sockaddr*>(&kernel), sizeof kernel) < 0) {
    return std::nullopt;
  }
  alignas(nlmsghdr) char buf[8192];
  const ssize_t n = ::recv(nl.get(), buf, sizeof buf, 0);
  if (n < static_cast<ssize_t>(sizeof(nlmsghdr))) return std::nullopt;
  const auto* h = reinterpret_cast<const nlmsghdr*>(buf);
  // NLMSG_ERROR: no such socket here (the peer is on another host).
  if (!NLMSG_OK(h, static_cast<unsigned>(n)) || h->nlmsg_type != SOCK_DIAG_BY_FAMILY ||
      h->nlmsg_len < NLMSG_LENGTH(sizeof(inet_diag_msg))) {
    return std::nullopt;
  }
  return static_cast<uid_t>(static_cast<const inet_diag_msg*>(NLMSG_DATA(h))->idiag_uid);
}

}  // namespace omniccl::net
