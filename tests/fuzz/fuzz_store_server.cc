// Fuzzes the TCP store server's wire protocol: each input is sent as one
// client's byte stream to an in-process server with small limits. The server
// must never crash, and must still serve a well-behaved client afterwards.
#include <poll.h>
#include <sys/socket.h>

#include <cstdint>
#include <cstdlib>
#include <memory>
#include <string>

#include "bootstrap/store.h"
#include "common/net.h"
#include "common/status.h"

namespace {

using namespace omniccl;

bootstrap::TcpStoreServer& server() {
  static auto* s = [] {
    bootstrap::StoreLimits l;
    l.max_connections = 64;
    l.max_total_bytes = 8u << 20;
    l.max_client_bytes = 2u << 20;
    l.idle_timeout_ms = 200;
    return new bootstrap::TcpStoreServer("127.0.0.1", 0, l);
  }();
  return *s;
}

void check_still_serves(uint64_t round) {
  auto c = bootstrap::connect_tcp_store("127.0.0.1", server().port(), Deadline::after_ms(5000));
  const std::string key = "fuzz-check-" + std::to_string(round);
  c->set(key, "alive");
  if (c->get(key, Deadline::after_ms(5000)) != "alive") std::abort();
  c->erase(key);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static uint64_t round = 0;
  net::SocketAddress addr{"tcp:127.0.0.1:" + std::to_string(server().port())};
  UniqueFd fd = net::connect_to(addr, Deadline::after_ms(5000));
  // Send what the server takes (it may drop us early), then read replies
  // until it closes or goes quiet for a moment.
  size_t off = 0;
  const Deadline d = Deadline::after_ms(500);
  while (off < size && !d.expired()) {
    ssize_t r = ::send(fd.get(), data + off, size - off, MSG_NOSIGNAL | MSG_DONTWAIT);
    if (r > 0) {
      off += static_cast<size_t>(r);
      continue;
    }
    if (r < 0 && errno != EAGAIN && errno != EINTR) break;
    pollfd p{fd.get(), POLLOUT, 0};
    (void)::poll(&p, 1, 20);
  }
  char buf[4096];
  for (;;) {
    pollfd p{fd.get(), POLLIN, 0};
    if (::poll(&p, 1, 20) <= 0) break;
    if (::recv(fd.get(), buf, sizeof buf, MSG_DONTWAIT) <= 0) break;
  }
  fd.reset();
  if (++round % 512 == 0) check_still_serves(round);
  return 0;
}
