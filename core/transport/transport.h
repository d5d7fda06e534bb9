// Transport vocabulary: a Link is the data path to one peer.
//
// Words used below:
//   link     an ordered, reliable, full-duplex byte stream to one peer.
//   doorbell a wake-up sent over the peer's control socket when the other side
//            said (by "arming") that it is about to sleep.
// Transports know nothing of algorithms; algorithms see only Links through
// the Engine (engine.h).
#pragma once

#include <cstddef>
#include <span>

namespace omniccl::transport {

class Link {
 public:
  virtual ~Link() = default;
  /// Copies up to n bytes into the stream without blocking; returns how many
  /// were taken (0 when there is no room). Throws Error(kPeerFailure).
  virtual size_t try_send(const void* data, size_t n) = 0;
  /// Like try_send of a followed by b, as one write where the transport
  /// allows it (one publish on shared memory, one syscall on TCP). Returns the
  /// bytes taken from the concatenation (b only after all of a).
  virtual size_t try_sendv(const void* a, size_t na, const void* b, size_t nb) {
    size_t k = try_send(a, na);
    if (k < na || nb == 0) return k;
    return k + try_send(b, nb);
  }
  /// Copies up to n available bytes out of the stream without blocking;
  /// returns how many (0 when nothing is there). Throws Error(kPeerFailure).
  virtual size_t try_recv(void* data, size_t n) = 0;
  /// About to sleep until there is room to send: asks the peer for a
  /// doorbell. Returns false when there already is room (do not sleep).
  virtual bool arm_send_wait() = 0;
  /// About to sleep until data arrives. Returns false when data is there.
  virtual bool arm_recv_wait() = 0;
  /// Delivers the wake-ups owed for data sent or room made since the last
  /// flush (a peer that armed a wait gets its doorbell). Sends and receives
  /// may defer them to here so that the fence this takes is paid once per
  /// step, while waiting, rather than once per message. Callers flush before
  /// they wait and before an operation returns.
  virtual void flush() {}
  /// Drops any armed wait (called after waking).
  virtual void disarm() = 0;
  /// A descriptor to poll for readiness (TCP), or -1 when wake-ups arrive as
  /// doorbells on the control socket (shared memory).
  virtual int poll_fd() const = 0;
  /// "shm" or "tcp".
  virtual const char* kind() const = 0;
  /// Zero-copy receive: the bytes that can be read now, contiguous, still in
  /// the transport's buffer (empty when none, or when the link cannot offer
  /// them, like TCP). Valid until consume().
  virtual std::span<const char> peek() { return {}; }
  /// Marks the first n bytes of peek() as read.
  virtual void consume(size_t n) { (void)n; }
  /// Whether peek()/consume() are supported.
  virtual bool zero_copy() const { return false; }
};

}  // namespace omniccl::transport
