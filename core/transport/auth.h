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
//
// Every handshake ends with the acceptor's verdict, 4 bytes, with or without
// a token: "OCOK" (the connection is this rank's now), "OCNO" then close
// (refused: a wrong token or hello; the connector fails, naming why) or
// "OCTO" then close (the acceptor's short handshake timeout passed before the
// connector's part arrived: a slow or lossy network). A connection closed
// without a verdict (too many handshakes pending) or timed out is made again
// by connect_hello, so one lost packet cannot leave the acceptor waiting for
// a rank that believes it is connected.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>

#include "common/fd.h"
#include "common/sha256.h"
#include "common/time.h"
#include "transport/control_wire.h"

namespace omniccl::transport::auth {

inline constexpr char kChallengeMagic[4] = {'O', 'C', 'M', 'A'};
inline constexpr size_t kNonceBytes = 32;
inline constexpr size_t kMacBytes = 32;
inline constexpr char kConnectorLabel[] = "omniccl mesh connector";
inline constexpr char kAcceptorLabel[] = "omniccl mesh acceptor";

inline constexpr char kAcceptedMagic[4] = {'O', 'C', 'O', 'K'};
inline constexpr char kRefusedMagic[4] = {'O', 'C', 'N', 'O'};
inline constexpr char kTimedOutMagic[4] = {'O', 'C', 'T', 'O'};

/// How the acceptor answered a hello (read_verdict).
enum class Verdict {
  kAccepted,  ///< "OCOK": the connection is this rank's
  kDropped,   ///< "OCTO" or closed without a verdict: connect again
};

/// Connector side of one connection: sends `hello` on the freshly connected
/// fd, after proving the token when `token` is not empty and checking the
/// acceptor's proof. Returns false when the acceptor dropped the connection
/// before that (connect again); throws Error(kPeerFailure) naming `what`
/// when the acceptor refuses the token, does not follow the protocol, cannot
/// prove the token, or asks for a token this rank lacks (or lacks one this
/// rank has). Bounded by deadline; `tick` (may be empty; may throw) runs at
/// least every 100 ms while it waits.
bool send_hello(int fd, const wire::Hello& hello, const std::string& token, Deadline deadline,
                const std::function<void()>& tick, const std::string& what);

/// Reads the acceptor's verdict on the hello sent on fd: kAccepted, or
/// kDropped (timed out there, or closed without a verdict: connect again);
/// a refusal throws Error(kPeerFailure) naming why. Bounds as send_hello.
Verdict read_verdict(int fd, Deadline deadline, const std::function<void()>& tick, const std::string& what);

/// Connects (`connect` makes one connection, bounded by the same deadline)
/// and sends `hello` until an acceptor has taken it, without waiting for its
/// verdict: a caller with several connections to make sends every hello
/// first, then reads the verdicts (no round trip each). Dropped attempts
/// are logged and made again after a short pause; throws what connect and
/// send_hello throw, or Error(kTimeout) at the deadline.
UniqueFd connect_and_hello(const std::function<UniqueFd()>& connect, const wire::Hello& hello, const std::string& token,
                           Deadline deadline, const std::function<void()>& tick, const std::string& what);

/// connect_and_hello, then the verdict; again until the acceptor accepts.
UniqueFd connect_hello(const std::function<UniqueFd()>& connect, const wire::Hello& hello, const std::string& token,
                       Deadline deadline, const std::function<void()>& tick, const std::string& what);

/// Acceptor side: writes a verdict (kAcceptedMagic, kRefusedMagic or
/// kTimedOutMagic) without blocking; a full or broken socket is ignored
/// (the connector then sees the connection close).
void send_verdict(int fd, const char (&verdict)[4]);

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
