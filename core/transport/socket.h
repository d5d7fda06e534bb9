// Thin, deadline-bounded socket helpers shared by the transports.
#pragma once

#include <sys/socket.h>

#include <cstdint>
#include <string>

#include "common/fd.h"
#include "common/time.h"

namespace omniccl::transport {

/// An address a peer can connect to: "tcp:1.2.3.4:5678" or "unix:@name"
/// (abstract unix socket).
struct SocketAddress {
  std::string text;
};

/// Listens on TCP `ip` port 0 (any free port). Returns the fd and sets addr.
UniqueFd listen_tcp(const std::string& ip, SocketAddress& addr);
/// Listens on the abstract unix socket "@name". Sets addr.
UniqueFd listen_unix(const std::string& name, SocketAddress& addr);
/// Connects to addr, retrying refused connections until the deadline.
/// Returns a blocking socket with TCP_NODELAY where relevant.
UniqueFd connect_to(const SocketAddress& addr, Deadline deadline);
/// Accepts one connection, waiting at most until the deadline (nullopt-like
/// invalid fd on timeout).
UniqueFd accept_until(int listen_fd, Deadline deadline);

/// Writes all bytes (blocking socket), bounded by the deadline.
void write_all(int fd, const void* data, size_t n, Deadline deadline, const std::string& what);
/// Reads exactly n bytes, bounded by the deadline; EOF throws kPeerFailure.
void read_all(int fd, void* data, size_t n, Deadline deadline, const std::string& what);

/// Makes fd non-blocking.
void set_nonblocking(int fd);
/// Large socket buffers and TCP_NODELAY for a data socket.
void tune_data_socket(int fd);

}  // namespace omniccl::transport
