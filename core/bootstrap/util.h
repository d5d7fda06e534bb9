// Private helpers shared by the bootstrap sources (not part of store.h).
#pragma once

#include <netdb.h>
#include <sys/socket.h>

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace omniccl::bootstrap::detail {

/// "host:port", with IPv6 literals bracketed ("[::1]:29500").
std::string host_port(const std::string& host, uint16_t port);

/// A key made safe for an error message: non-printable bytes become \xNN,
/// and keys longer than 200 bytes are shortened with "...".
std::string printable(const std::string& key);

/// Whether host names this machine's loopback ("localhost", "127.x.y.z",
/// "::1", "ip6-localhost").
bool is_loopback_name(const std::string& host);

/// Deadline for store operations that take none (set, add, check, erase):
/// OMNICCL_TIMEOUT, 600 s by default.
int64_t default_op_timeout_ms();

/// Parses the whole of text as a decimal int64; nullopt if it is not one.
std::optional<int64_t> parse_int64(const std::string& text);

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

}  // namespace omniccl::bootstrap::detail
