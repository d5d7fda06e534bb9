// Private helpers shared by the bootstrap sources (not part of store.h).
#pragma once

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

/// Once per process, unless OMNICCL_RAISE_NOFILE=0: raises the soft
/// open-file limit to the hard one, so that the job's own descriptors (a
/// socket or two and a segment per peer, per communicator and split; the
/// rendezvous server's share on rank 0) run out only at the hard limit.
void raise_open_file_limit();

}  // namespace omniccl::bootstrap::detail
