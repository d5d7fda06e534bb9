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

#include "common/status.h"

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

  // Single copy (payloads by reference): the sender sends only the address of
  // its payload; the receiver copies it straight from the sender's memory and
  // then says so, and only then is the send complete.
  /// Whether a payload of `bytes` may go by reference on this link.
  virtual bool by_reference(size_t bytes) const {
    (void)bytes;
    return false;
  }
  /// Sender: the number of a new payload sent by reference.
  virtual uint64_t next_ticket() { return 0; }
  /// Sender: whether the receiver has finished copying payload `ticket`.
  virtual bool ticket_done(uint64_t ticket) {
    (void)ticket;
    return true;
  }
  /// Sender: about to sleep until ticket_done(ticket); false when it is.
  virtual bool arm_ticket_wait(uint64_t ticket) {
    (void)ticket;
    return false;
  }
  /// Receiver: copies n bytes at address `remote` of the sender into dst.
  /// Throws Error(kPeerFailure) when the sender is gone.
  virtual void read_remote(void* dst, uint64_t remote, size_t n) {
    (void)dst;
    (void)remote;
    (void)n;
    fail(Status::kInternal, "a payload by reference arrived on a ", kind(), " link, which cannot read it");
  }
  /// Receiver: the payload by reference being read is complete (in order).
  virtual void finish_remote() {}
};

}  // namespace omniccl::transport
