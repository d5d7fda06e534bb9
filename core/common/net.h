// The one socket layer, for bootstrap (stores, rendezvous) and transports
// (mesh control sockets, TCP links): name resolution, listening, connecting
// and deadline-bounded reads and writes, IPv4 and IPv6 alike.
//
// Addresses a peer connects to travel as text: "tcp:1.2.3.4:5678",
// "tcp:[::1]:5678" (IPv6 literals bracketed) or "unix:@name" (an abstract
// unix socket).
#pragma once

#include <netdb.h>
#include <sys/socket.h>
#include <sys/types.h>

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "common/fd.h"
#include "common/time.h"

namespace omniccl::net {

/// An address a peer can connect to (see above).
struct SocketAddress {
  std::string text;
};

/// One resolved socket address.
struct Address {
  sockaddr_storage storage{};
  socklen_t len = 0;
  int family = AF_UNSPEC;
  /// The address as a sockaddr pointer for socket calls.
  const sockaddr* sa() const { return reinterpret_cast<const sockaddr*>(&storage); }
};

/// getaddrinfo(host, port) for stream sockets, IPv4 addresses first, then
/// IPv6. Returns an empty list with *gai_err set on failure. An empty host
/// with `passive` resolves to the wildcard address. "[v6]" is unbracketed.
std::vector<Address> resolve(const std::string& host, uint16_t port, bool passive, int* gai_err);

/// The numeric address of sa as text ("10.0.0.1" or "fe80::1").
std::string address_text(const sockaddr* sa);

/// Sets TCP_NODELAY on a TCP socket (errors ignored: it only affects latency).
void set_nodelay(int fd);
/// Makes fd non-blocking.
void set_nonblocking(int fd);
/// Large send and receive buffers (4 MiB, as net.core.wmem_max/rmem_max
/// allow) for a TCP socket that will carry data. Call it before listen() or
/// connect(): the handshake fixes the window scale and clamp, and buffers set
/// afterwards leave Linux advertising at most 64 KiB (1 MiB loopback
/// broadcasts then took 2.4x as long in most runs).
void set_data_buffers(int fd);
/// The TCP congestion control algorithm of a TCP socket ("cubic", "bbr"),
/// or "" when the kernel does not say.
std::string congestion_control(int fd);
/// Sets a TCP socket's congestion control algorithm; returns 0 or the errno
/// (ENOENT: not in this kernel; EPERM: not in
/// net.ipv4.tcp_allowed_congestion_control, for a process without
/// CAP_NET_ADMIN).
int set_congestion_control(int fd, std::string_view name);

/// Listens on TCP `ip` (an IPv4 or IPv6 literal) port 0 (any free port),
/// with the data buffers (set_data_buffers) that accepted sockets inherit.
/// Returns the fd and sets addr.
UniqueFd listen_tcp(const std::string& ip, SocketAddress& addr);
/// Listens on the abstract unix socket "@name". Sets addr.
UniqueFd listen_unix(const std::string& name, SocketAddress& addr);
/// Connects to addr, retrying refused connections (and attempts whose
/// handshake takes over 2 s: lost SYNs) until the deadline. `tick` (may be
/// empty; may throw) runs at least every 100 ms while it waits. Returns a
/// blocking socket; a TCP one has the data buffers (set before connecting)
/// and TCP_NODELAY.
UniqueFd connect_to(const SocketAddress& addr, Deadline deadline, const std::function<void()>& tick = {});
/// Accepts one connection, waiting at most until the deadline (an invalid
/// fd on timeout).
UniqueFd accept_until(int listen_fd, Deadline deadline);
/// Accepts one connection if one is queued, without waiting; else an invalid
/// fd and *err: EAGAIN (none queued, or a retryable error), or what accept
/// failed with (EMFILE, ENFILE: out of descriptors).
UniqueFd accept_now(int listen_fd, int* err);
/// Accepts the connection that `connected_fd` (a TCP socket of this process,
/// connected to `listen_fd`'s address) made: others that arrive first, from
/// anyone else who found the port, are closed. Invalid fd when it did not
/// arrive before the deadline.
UniqueFd accept_own(int listen_fd, int connected_fd, Deadline deadline);

/// Writes all bytes, bounded by the deadline.
void write_all(int fd, const void* data, size_t n, Deadline deadline, const std::string& what);
/// Reads exactly n bytes, bounded by the deadline; EOF throws kPeerFailure.
void read_all(int fd, void* data, size_t n, Deadline deadline, const std::string& what);

/// Before closing TCP sockets whose last bytes must reach the peer: shuts
/// each one's writing side (a FIN after what is queued), reads and drops what
/// the peer still sends, and waits until the peer has acknowledged every byte,
/// the peer closed or reset, or the deadline passed. A socket closed with
/// unread bytes is reset by the kernel, which throws away whatever it had not
/// yet delivered; after this, closing loses nothing the peer acknowledged.
/// Non-TCP sockets (unix: nothing is lost on close) are left untouched.
/// Never throws; the sockets stay open (the caller closes them).
void finish_sending(const std::vector<int>& fds, Deadline deadline);

/// The user that owns the other end of the accepted connection `fd` when
/// that end is a socket of this host: a unix socket's peer credentials, or
/// for TCP one exact lookup in the kernel's socket table (peer_owner.cc);
/// nullopt when it is not (another host) or the kernel cannot tell.
std::optional<uid_t> local_peer_uid(int fd);

}  // namespace omniccl::net
