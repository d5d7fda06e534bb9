// TCP transport: one or more non-blocking stream sockets per peer carry the
// data. A message is its header then its payload. With one socket (the
// default) both follow each other on it, written with one sendmsg where the
// socket takes it. With several (OMNICCL_TCP_STREAMS), a payload is cut into
// stripes of kStripeBytes dealt round-robin over the sockets: stripe j of
// every message goes on socket j % n, the header always on socket 0 with
// stripe 0. Both sides derive the socket from the bytes moved so far, so the
// link keeps no state of its own, a message shorter than one stripe uses
// socket 0 only, and the receiver takes the payload in order (a reduction
// consumes it as it comes). Several flows let the kernel and the network
// card spread one peer's traffic over several queues, cores and congestion
// windows; the engine's one thread still does every copy.
// Waits poll the socket the message goes on next.
// Socket 0 is read through a cache: a read that finds more than the message
// needs keeps the rest (up to kCacheBytes: the next messages' headers and
// small payloads), and later reads take from it first, so a stream of small
// messages (a rooted operation's non-roots, a pipeline) costs one recv for
// several, and a small message one recv instead of one for its header and
// one for its payload.
#pragma once

#include <poll.h>

#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "common/fd.h"
#include "transport/tcp/tcp_transport.h"
#include "transport/transport.h"

namespace omniccl::transport {

/// OMNICCL_TCP_CONGESTION on one data socket to rank `peer`. "auto": where
/// the peer is on this host (loopback), a pacing algorithm (bbr: the kernel
/// spaces each socket's packets with timers, which on loopback only delays
/// them) is replaced by cubic, else reno; other links keep the system's
/// default. "system": every link keeps it. A name: that algorithm on every
/// link; one the kernel refuses is an error (kInvalidArgument) naming it.
/// Returns what was changed, for the log ("" when nothing was).
std::string apply_congestion(int fd, std::string_view setting, bool same_host, int peer);

class TcpLink final : public Link {
 public:
  /// Payload bytes per stripe when a link has several sockets (the same on
  /// every rank: it decides where the receiver reads).
  static constexpr size_t kStripeBytes = size_t(256) << 10;

  /// Payloads of at least this many bytes start on a 64-byte boundary of
  /// socket 0's byte stream: zero bytes follow the header up to it (both
  /// sides know the payload's size before it moves). The kernel writes a
  /// message into its socket pages in stream order, so the payload then sits
  /// at the same place modulo 64 there as in a 64-byte aligned buffer; its
  /// receive copy (rep movsb) ran 2-3.5x slower when the two places were a
  /// few bytes apart modulo 4 KiB, as a 40-byte header put 64-byte aligned
  /// buffers. And every message ends on a 64-byte
  /// boundary: zero bytes follow its payload (on socket 0) up to one. The
  /// sending thread's socket pages are shared by every socket it writes to
  /// and restart at offset 0 only when all they held was taken, so without
  /// it a small message (a barrier's 40 bytes) shifted every later payload
  /// in them.
  static constexpr size_t kAlignedPayloadMin = 4096;

  /// Takes connected sockets, socket 0 first (made non-blocking here);
  /// `peer` for messages. At least one.
  TcpLink(std::vector<UniqueFd> fds, int peer);
  bool send(Message& m) override;
  bool recv_header(Message& m) override;
  bool recv_payload(Message& m) override;
  WaitOn arm_send(const Message& m, WakeBy) override { return {WaitOn::How::kPoll, fd_for(m), POLLOUT}; }
  WaitOn arm_recv(const Message& m, WakeBy) override {
    if (fd_for(m) == fds_[0].get() && cache_end_ > cache_begin_) return {};  // kReady: bytes are here
    return {WaitOn::How::kPoll, fd_for(m), POLLIN};
  }
  void disarm() override {}
  int poll_fd() const override { return fds_.front().get(); }
  void append_sockets(std::vector<int>& out) const override;
  const char* kind() const override { return "tcp"; }
  bool socket() const override { return true; }
  /// How many sockets carry this link.
  size_t streams() const { return fds_.size(); }
  /// Bytes of socket 0 read ahead into the cache and not yet taken (tests).
  size_t cached() const { return cache_end_ - cache_begin_; }
  /// The most socket 0 reads ahead.
  static constexpr size_t kCacheBytes = size_t(64) << 10;

 private:
  /// The socket that carries payload byte `done` (socket 0 for the header).
  int fd_at(size_t done) const {
    return fds_.size() == 1 ? fds_[0].get() : fds_[(done / kStripeBytes) % fds_.size()].get();
  }
  /// Where message m moves next (socket 0 for the header, its padding and
  /// the zeros after the payload).
  int fd_for(const Message& m) const {
    return m.header_done < m.header_bytes || m.done >= m.payload.bytes ? fds_[0].get() : fd_at(m.done);
  }
  /// Payload bytes from `done` up to the end of its stripe (or of `bytes`).
  size_t stripe_left(size_t done, size_t bytes) const {
    return fds_.size() == 1 ? bytes - done : std::min(kStripeBytes - done % kStripeBytes, bytes - done);
  }
  /// Zero bytes between m's header and its payload (kAlignedPayloadMin).
  static size_t pad_of(const Message& m) {
    return m.payload.bytes >= kAlignedPayloadMin ? (64 - m.header_bytes % 64) % 64 : 0;
  }
  /// Zero bytes after m's payload, up to a 64-byte boundary of the message.
  static size_t tail_of(const Message& m) { return (64 - (m.header_bytes + pad_of(m) + m.payload.bytes) % 64) % 64; }
  /// Reads and drops m's padding up to `upto` bytes of it (its pad_done counts
  /// the zeros before the payload, then those after); returns whether all
  /// are through, sets `progressed` when any moved.
  bool skip_padding(Message& m, size_t upto, bool& progressed);
  /// Writes up to na bytes of a, nb of b, nc of c, then nd of d on fd, as
  /// one sendmsg; returns how many.
  size_t try_sendv(int fd, const void* a, size_t na, const void* b, size_t nb, const void* c, size_t nc, const void* d,
                   size_t nd);
  /// Reads up to n available bytes from fd; returns how many (0 when none).
  size_t try_recv(int fd, void* data, size_t n);
  /// try_recv for socket 0: from the cache first, then one read that puts
  /// what follows the n bytes (if the socket has it) into the cache.
  size_t recv0(void* data, size_t n);
  /// Reads up to n bytes from fd with a readv of two parts; returns how many
  /// (0 when none), like try_recv.
  size_t try_readv(int fd, void* a, size_t na, void* b, size_t nb);
  /// Reads from fd (socket 0 through the cache) up to n bytes.
  size_t read_at(int fd, void* data, size_t n) { return fd == fds_[0].get() ? recv0(data, n) : try_recv(fd, data, n); }
  std::vector<UniqueFd> fds_;
  int peer_;
  std::unique_ptr<char[]> cache_;  ///< socket 0's read-ahead (allocated at the first read)
  size_t cache_begin_ = 0;         ///< first byte not yet taken
  size_t cache_end_ = 0;           ///< end of what was read
};

}  // namespace omniccl::transport
