// Private: the job-token handshake on mesh setup connections (mesh.cc, its
// tests). Every connection to a rank's setup listener (control and data,
// unix and TCP) starts with it when the job has a token; without one, a
// connection sends only its hello (as before).
//
// With a token T, after the TCP/unix connect:
//   acceptor  -> connector: kChallengeMagic "OCMA", 32-byte nonce Na
//   connector -> acceptor : hello (24 bytes, control_wire.h),
//                           HMAC-SHA-256(T, kConnectorLabel | Na | Nc | hello),
//                           its 32-byte nonce Nc
//   acceptor  -> connector: HMAC-SHA-256(T, kAcceptorLabel | Nc | Na | hello)
// The acceptor drops (and logs) a connection whose MAC is wrong before its
// hello counts, so it cannot take a rank's place; the connector refuses an
// acceptor that cannot prove the token. T never crosses the wire, and fresh
// nonces make a recorded exchange useless. The MACs cover the hello, so a
// proof made for one rank or session does not pass for another.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include "common/sha256.h"
#include "common/time.h"
#include "transport/control_wire.h"

namespace omniccl::transport::auth {

inline constexpr char kChallengeMagic[4] = {'O', 'C', 'M', 'A'};
inline constexpr size_t kNonceBytes = 32;
inline constexpr size_t kMacBytes = 32;
inline constexpr char kConnectorLabel[] = "omniccl mesh connector";
inline constexpr char kAcceptorLabel[] = "omniccl mesh acceptor";

/// Connector side: sends `hello` on the freshly connected fd (after proving
/// the token when `token` is not empty, and checking the acceptor's proof).
/// Throws Error(kPeerFailure) naming `what` when the acceptor does not
/// follow the protocol or cannot prove the token; bounded by deadline.
void send_hello(int fd, const wire::Hello& hello, const std::string& token, Deadline deadline, const std::string& what);

/// Acceptor side of one accepted connection, driven without blocking next
/// to the listeners: the constructor sends the challenge (token set), then
/// on_readable() consumes what has arrived.
class Responder {
 public:
  enum class State { kMore, kDone, kFailed };
  /// Sends the challenge on fd (non-blocking) when token is not empty.
  Responder(int fd, std::string token);
  /// Reads what is available; kDone once a hello (and, with a token, a valid
  /// proof, answered with ours) has arrived, kFailed with why() otherwise.
  State on_readable();
  /// The hello, once kDone.
  const wire::Hello& hello() const { return hello_; }
  /// Why the connection failed (for the log).
  const std::string& why() const { return why_; }

 private:
  State failed(std::string why);
  int fd_;
  std::string token_;
  Digest nonce_{};
  std::string in_;
  wire::Hello hello_{};
  std::string why_;
};

}  // namespace omniccl::transport::auth
