// Fuzzes what a mesh reads from peers before and after setup: the 24-byte
// hello (as rank 0..3 of a 4-rank mesh) and the control-socket framing with
// the error-notice and status-answer payloads.
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <string>

#include "common/status.h"
#include "transport/control_wire.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace omniccl;
  using namespace omniccl::transport;
  if (size >= sizeof(wire::Hello)) {
    wire::Hello h;
    std::memcpy(&h, data, sizeof h);
    for (int me = 0; me < 4; ++me) {
      const bool ok = wire::check_hello(h, 0x5eed, me, 4).empty();
      // Accepted only from a higher rank of this mesh, on a known channel.
      if (ok && (h.magic != wire::kHelloMagic || h.session != 0x5eed || h.rank <= me || h.rank >= 4 || h.channel > 1)) {
        std::abort();
      }
    }
  }
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
  } catch (const Error&) {
  }
  return 0;
}
