// TCP transport: one non-blocking stream socket per peer carries the data.
#pragma once

#include "common/fd.h"
#include "transport/transport.h"

namespace omniccl::transport {

class TcpLink final : public Link {
 public:
  /// Takes a connected socket (made non-blocking here); `peer` for messages.
  TcpLink(UniqueFd fd, int peer);
  size_t try_send(const void* data, size_t n) override { return try_sendv(data, n, nullptr, 0); }
  size_t try_sendv(const void* a, size_t na, const void* b, size_t nb) override;
  size_t try_recv(void* data, size_t n) override;
  bool arm_send_wait() override { return true; }
  bool arm_recv_wait() override { return true; }
  void disarm() override {}
  int poll_fd() const override { return fd_.get(); }
  const char* kind() const override { return "tcp"; }

 private:
  UniqueFd fd_;
  int peer_;
};

}  // namespace omniccl::transport
