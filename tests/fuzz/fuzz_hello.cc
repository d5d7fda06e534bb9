// Fuzzes what a mesh reads from peers before and after setup: the 24-byte
// hello (as rank 0..3 of a 4-rank mesh), the job-token handshake of a setup
// connection (transport/auth.h: the input arrives on a socket pair, with and
// without a token, then the sender closes), and the control-socket framing
// with the error-notice and status-answer payloads.
#include <sys/socket.h>
#include <unistd.h>

#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <string>

#include "common/status.h"
#include "transport/auth.h"
#include "transport/control_wire.h"

namespace {

/// Feeds `data` to a Responder through a socket pair; returns its state.
omniccl::transport::auth::Responder::State respond(const uint8_t* data, size_t size, const std::string& token) {
  using omniccl::transport::auth::Responder;
  int fds[2];
  if (::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, fds) != 0) std::abort();
  Responder::State st;
  {
    Responder r(fds[0], token);
    const size_t n = size < 4096 ? size : 4096;  // fits the socket buffer
    if (n > 0 && ::send(fds[1], data, n, MSG_NOSIGNAL) != static_cast<ssize_t>(n)) std::abort();
    ::shutdown(fds[1], SHUT_WR);
    st = r.on_readable();
    // Without a token a complete hello is all it takes; with one, no input
    // can carry a valid proof for a fresh random challenge.
    if (st == Responder::State::kMore) std::abort();  // the peer closed: never "more"
    if (token.empty() && (st == Responder::State::kDone) != (size >= sizeof(omniccl::transport::wire::Hello))) {
      std::abort();
    }
    if (!token.empty() && st == Responder::State::kDone) std::abort();
  }
  ::close(fds[0]);
  ::close(fds[1]);
  return st;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace omniccl;
  using namespace omniccl::transport;
  if (size >= sizeof(wire::Hello)) {
    wire::Hello h;
    std::memcpy(&h, data, sizeof h);
    for (int me = 0; me < 4; ++me) {
      const bool ok = wire::check_hello(h, 0x5eed, me, 4).empty();
      // Accepted only from a higher rank of this mesh, on a known channel
      // (0 control, 1..kMaxLinkSockets data).
      if (ok && (h.magic != wire::kHelloMagic || h.session != 0x5eed || h.rank <= me || h.rank >= 4 ||
                 h.channel > uint32_t(kMaxLinkSockets))) {
        std::abort();
      }
    }
  }
  (void)respond(data, size, "");
  (void)respond(data, size, "fuzz token");
  const std::string buf(reinterpret_cast<const char*>(data), size);
  size_t pos = 0;
  try {
    for (;;) {
      char type = 0;
      std::string payload;
      size_t used = wire::next_control_message(buf, pos, &type, &payload);
      if (used == 0) break;
      if (used < 5 || used > buf.size() - pos) std::abort();
      pos += used;
      Status st = wire::error_status_of(payload);
      if (st == Status::kSuccess || st == Status::kInProgress) std::abort();
      (void)wire::answer_seq(payload);
    }
  } catch (const Error&) {}
  return 0;
}
