// Private: the setup hello and the control-socket framing of the mesh
// (mesh.cc, its fuzzer and tests). Pure functions over bytes, so every
// parser of peer input can be fuzzed without sockets.
//
// Hello (first bytes on every mesh connection, fixed 24 bytes, host order):
//   magic u32 "OCH3", channel u32 (0 control, 1 data), session u64, rank i32, pad i32.
// Control messages: type (1 byte), payload length (u32, host order,
// at most kMaxControlPayload), payload.
#pragma once

#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <string>

#include "common/status.h"
#include "transport/transport.h"

namespace omniccl::transport::wire {

inline constexpr uint32_t kHelloMagic = 0x4f434833;  // "OCH3" (answered with a verdict, transport/auth.h)
inline constexpr uint32_t kMaxControlPayload = 1 << 20;
/// A control message: the sender rejected a collective for its arguments;
/// payload "SEQ TEXT" (decimal number, a space, the reason). Only the rank
/// that rejected the call sends it, to every peer, and no rank passes it
/// on: the receiver takes the sender for the rank that rejected the call
/// (RejectedCall::by), so the payload does not name it.
inline constexpr char kRejectedCall = 'J';

struct Hello {
  uint32_t magic;
  uint32_t channel;  // 0 control, 1 + i data stream i
  uint64_t session;
  int32_t rank;
  int32_t pad;
};
static_assert(sizeof(Hello) == 24, "the hello is 24 bytes on the wire");

/// Why a hello received by `my_rank` of a `size`-rank mesh of `session` is
/// unacceptable, or "" when it comes from a higher rank of this mesh.
inline std::string check_hello(const Hello& h, uint64_t session, int my_rank, int size) {
  if (h.magic != kHelloMagic) return "bad magic";
  if (h.session != session) return "another session";
  if (h.channel > uint32_t(kMaxLinkSockets)) return str_cat("unknown channel ", h.channel);
  if (h.rank <= my_rank || h.rank >= size) return str_cat("rank ", h.rank, " may not connect to rank ", my_rank);
  return {};
}

/// Decodes the control message starting at buf[pos]: sets type/payload and
/// returns the bytes it spans, or 0 when it is not complete yet. Throws
/// Error(kInternal) for a length above kMaxControlPayload.
inline size_t next_control_message(const std::string& buf, size_t pos, char* type, std::string* payload) {
  if (pos > buf.size() || buf.size() - pos < 5) return 0;
  uint32_t len;
  std::memcpy(&len, buf.data() + pos + 1, 4);
  if (len > kMaxControlPayload) fail(Status::kInternal, "corrupt control message (length ", len, ")");
  if (buf.size() - pos - 5 < len) return 0;
  *type = buf[pos];
  payload->assign(buf, pos + 5, len);
  return 5 + static_cast<size_t>(len);
}

/// The status carried by an error notice's first byte; anything that is not
/// a failure status (success, unknown values) is reported as kInternal.
inline Status error_status_of(const std::string& payload) {
  if (payload.empty()) return Status::kInternal;
  const int v = static_cast<unsigned char>(payload[0]);
  if (v < static_cast<int>(Status::kInvalidArgument) || v > static_cast<int>(Status::kCommFailed) ||
      v == static_cast<int>(Status::kInProgress)) {
    return Status::kInternal;
  }
  return static_cast<Status>(v);
}

/// The sequence number at the start of a status answer (decimal; 0 when
/// absent or malformed).
inline uint64_t answer_seq(const std::string& field) {
  char* end = nullptr;
  unsigned long long v = std::strtoull(field.c_str(), &end, 10);
  return end == field.c_str() ? 0 : static_cast<uint64_t>(v);
}

}  // namespace omniccl::transport::wire
