// TCP transport: one non-blocking stream socket per peer carries the data.
// A message is its header then its payload on the stream, written with one
// sendmsg where the socket takes it; waits poll the socket.
#pragma once

#include <poll.h>

#include "common/fd.h"
#include "transport/transport.h"

namespace omniccl::transport {

class TcpLink final : public Link {
 public:
  /// Takes a connected socket (made non-blocking here); `peer` for messages.
  TcpLink(UniqueFd fd, int peer);
  bool send(Message& m) override;
  bool recv_header(Message& m) override;
  bool recv_payload(Message& m) override;
  WaitOn arm_send(const Message&, WakeBy) override { return {WaitOn::How::kPoll, fd_.get(), POLLOUT}; }
  WaitOn arm_recv(const Message&, WakeBy) override { return {WaitOn::How::kPoll, fd_.get(), POLLIN}; }
  void disarm() override {}
  int poll_fd() const override { return fd_.get(); }
  const char* kind() const override { return "tcp"; }

 private:
  /// Writes up to na bytes of a then nb of b, as one sendmsg; returns how many.
  size_t try_sendv(const void* a, size_t na, const void* b, size_t nb);
  /// Reads up to n available bytes; returns how many (0 when none).
  size_t try_recv(void* data, size_t n);
  UniqueFd fd_;
  int peer_;
};

}  // namespace omniccl::transport
