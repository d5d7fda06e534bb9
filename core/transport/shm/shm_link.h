// Shared-memory transport: one single-producer/single-consumer ring per
// ordered pair of ranks, inside the receiver's segment.
//
// Segment of rank r (created by r, mapped by every same-host peer):
//   [SegmentHeader][ring from peer 0][ring from peer 1]...  (ring r unused)
// Ring from p: [RingHeader][capacity bytes], holding records. A record starts
// on a 64-byte line: an 8-byte ready word (0 = not yet written, kSkipWord =
// continue at the start of the ring, else payload length + 1), then the
// payload, padded to whole lines. The producer writes the payload, then a 0
// word where the next record will start, then this record's word (release),
// so the consumer polls one word that shares its line with the first 56
// payload bytes: a small message costs one cache-line transfer, not a
// head-index line and a data line. `tail` counts bytes the consumer has
// freed (the producer reads it only when the room it last saw is short).
// Sleep flags implement the doorbell handshake (see transport.h): the sleeper
// sets its flag, fences and re-checks; the other side, in flush(), checks the
// flag after its writes and rings the doorbell if it finds it set. Where the
// kernel offers membarrier(GLOBAL_EXPEDITED) the sleeper's fence is that
// system call, which also orders the other side's writes and reads, so
// flush() needs no fence of its own (an asymmetric fence: the rare side, going
// to sleep, pays for the common side, which sends and receives).
// A sleep flag holds how the sleeper wants to be woken (kSleepDoorbell or
// kSleepFutex): with the futex, the waker bumps the sleeper's wake word (in the
// sleeper's segment header) and FUTEX_WAKEs it, and the sleeper waits in
// FUTEX_WAIT on that one word whichever of its links it armed. The word is in
// a shared mapping of separate processes, so the futex calls are not private.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string>

#include "common/shared_memory.h"
#include "transport/transport.h"

namespace omniccl::transport {

inline constexpr size_t kShmRingBytes = size_t(1) << 21;  // 2 MiB per ordered pair

/// Values of RingHeader's sleep flags (bits): how the sleeper asked to be woken.
inline constexpr uint32_t kSleepDoorbell = 1;
inline constexpr uint32_t kSleepFutex = 2;
/// Low bits of RingHeader::split_claim that count claimed chunks.
inline constexpr int kSplitIndexBits = 24;
/// The chunk of a split by-reference copy of `bytes` (each side claims one at
/// a time): about an eighth, from 64 KiB to 256 KiB, whole pages, and never
/// more than 2^16 chunks. Both sides compute it from the payload's size.
constexpr size_t split_chunk(size_t bytes) {
  size_t c = bytes / 8;
  c = c < (size_t(64) << 10) ? size_t(64) << 10 : c > (size_t(256) << 10) ? size_t(256) << 10 : c;
  if (c < (bytes >> 16)) c = bytes >> 16;
  return (c + 4095) / 4096 * 4096;
}

struct alignas(64) RingHeader {
  /// Set once by a side that arms its waits with membarrier() (see flush()).
  alignas(64) std::atomic<uint32_t> consumer_membarrier;
  std::atomic<uint32_t> producer_membarrier;
  /// Set once by the consumer when it can read the producer's memory
  /// (process_vm_readv): large payloads may then go by reference.
  std::atomic<uint32_t> consumer_reads_refs;
  /// Set once by the producer when it can write into the consumer's memory
  /// (process_vm_writev): the consumer may then split by-reference copies.
  std::atomic<uint32_t> producer_writes_refs;
  /// Payloads sent by reference that the consumer has finished copying.
  std::atomic<uint64_t> refs_done;
  /// The by-reference payload the consumer splits with the producer: its
  /// ticket and the chunks claimed so far by either side, one word
  /// (ticket << kSplitIndexBits | claimed), so that a claim is one CAS that
  /// fails once the consumer has moved to another payload.
  alignas(64) std::atomic<uint64_t> split_claim;
  /// Its destination in the consumer's memory (set before split_claim).
  std::atomic<uint64_t> split_dst;
  /// Chunks of it the producer has written (reset before split_claim).
  std::atomic<uint64_t> split_written;
  alignas(64) std::atomic<uint64_t> tail;
  alignas(64) std::atomic<uint32_t> consumer_sleeping;
  alignas(64) std::atomic<uint32_t> producer_sleeping;
};

/// The layout of segments, ring headers and records this build writes. A
/// peer's segment of another layout (made by another OmniCCL version) is
/// refused when it is opened. Raise it with any change to them.
inline constexpr uint64_t kShmLayout = 6;

/// Start of every segment: lets a peer check that it can read its creator's
/// memory (it reads `probe_addr` in process `pid` and expects `probe_value`).
struct SegmentHeader {
  uint64_t pid;
  uint64_t probe_addr;
  uint64_t probe_value;
  /// The owner's futex word: a peer that finds the owner asleep with
  /// kSleepFutex adds one and wakes it (wake_futex); the owner sleeps while
  /// it holds the value read before arming (futex_wait).
  alignas(64) std::atomic<uint32_t> wake_word;
  /// kShmLayout of the build that made the segment (0: a build from before
  /// this field).
  alignas(64) uint64_t layout;
};

static_assert(std::atomic<uint64_t>::is_always_lock_free, "shared-memory rings need lock-free atomics");

/// A rank's mapped shared-memory segment (its rings, from every peer).
class ShmSegment {
 public:
  /// Creates and maps the segment of `nranks` rings named `name`.
  static std::unique_ptr<ShmSegment> create(const std::string& name, int nranks);
  /// Maps an existing segment created by a peer.
  static std::unique_ptr<ShmSegment> open(const std::string& name, int nranks);
  ~ShmSegment();
  ShmSegment(const ShmSegment&) = delete;
  ShmSegment& operator=(const ShmSegment&) = delete;

  /// Ring carrying bytes from rank `from` to this segment's owner.
  RingHeader* ring(int from) const;
  char* ring_data(int from) const;
  const SegmentHeader& header() const { return *static_cast<const SegmentHeader*>(base()); }
  /// The owner's futex word (SegmentHeader::wake_word).
  std::atomic<uint32_t>& wake_word() const { return static_cast<SegmentHeader*>(base())->wake_word; }
  /// Removes the name (mapping stays valid). Idempotent.
  void unlink();
  static size_t bytes_for(int nranks);
  /// The name of this process's segment for (session, rank)
  /// (shm_object_name: leftovers can be traced to the process that made them).
  static std::string name_for(const std::string& session, int rank);

 private:
  explicit ShmSegment(std::unique_ptr<SharedMapping> map) : map_(std::move(map)) {}
  void* base() const { return map_->data(); }
  std::unique_ptr<SharedMapping> map_;
};

/// What a ShmLink keeps of a message (Message::link_state; tests read it
/// through link_state<ShmMessage>).
struct ShmMessage {
  uint64_t ticket;      ///< by reference: the sender's number for the payload
  uint64_t remote;      ///< by reference, receive: the payload's address at the sender
  uint32_t split_mine;  ///< split receive: chunks this side copied
  bool by_reference;    ///< the payload goes (or came) by reference
  bool split;           ///< receive by reference shared with the sender (published)
  bool split_claimed;   ///< split receive: every chunk is taken by one side or the other
};

/// A Link over two rings: `out` (in the peer's segment) and `in` (in ours).
/// A message is its header then its payload as records; one sent by
/// reference is a single record, marked so in its ready word, holding the
/// header, the payload's address and its ticket (the receiver reads the
/// payload from the sender's memory and counts it in `refs_done`, which
/// completes the send). A receive that may split (Message::may_split, into
/// memory) from a sender that can write into it publishes its destination
/// (RingHeader::split_claim): then both sides take chunks of the payload in
/// turn, the receiver reading them (process_vm_readv) and the sender, while
/// it waits for its ticket, writing them (process_vm_writev), so that both
/// cores copy; the receive completes when every chunk is in.
/// `doorbell` rings the peer over its control socket; a peer that sleeps on
/// its futex word instead is woken through `peer_segment`. With `single_copy`,
/// large payloads of collectives may go by reference: the receiver copies
/// them straight from the sender's memory with process_vm_readv (one copy
/// instead of two), when a probe of `peer_segment`'s header shows it can.
/// The link keeps the peer's segment mapped (its rings live there).
/// `peer` (the peer's rank) names it in log lines: at INFO (subsystem
/// TRANSPORT) the link says whether single copy is on, and on destruction how
/// many payloads went by reference each way.
class ShmLink final : public Link {
 public:
  /// `quiet`: no log lines (the calibration's links inside one process).
  ShmLink(int peer, RingHeader* out, char* out_data, RingHeader* in, char* in_data, std::function<void()> doorbell,
          std::unique_ptr<ShmSegment> peer_segment, bool single_copy, bool quiet = false);
  ~ShmLink() override;
  ShmLink(const ShmLink&) = delete;
  ShmLink& operator=(const ShmLink&) = delete;
  bool send(Message& m) override;
  bool recv_header(Message& m) override;
  bool recv_payload(Message& m) override;
  Whole send_whole(const void* header, size_t header_bytes, const void* payload, size_t bytes) override;
  const char* peek_whole(size_t bytes, Whole& why) override;
  void take_whole(size_t bytes) override;
  bool whole_messages() const override { return true; }
  WaitOn arm_send(const Message& m, WakeBy by) override;
  WaitOn arm_recv(const Message& m, WakeBy by) override;
  bool wakes_futex() const override { return true; }
  void disarm() override;
  /// Closes a split receive to the sender (no chunk left to claim) and waits,
  /// at most a few seconds, for a chunk the sender is writing now.
  void abandon(Message& m) noexcept override;
  void flush() override;
  bool sends_unread() const override { return out_->tail.load(std::memory_order_acquire) != head_; }
  int poll_fd() const override { return -1; }
  const char* kind() const override { return "shm"; }
  /// Counts for tests and the log: payloads this side read split with its
  /// sender, and chunks this side wrote into its receiver's buffers.
  struct SplitStats {
    uint64_t split_reads = 0;
    uint64_t chunks_written = 0;
  };
  SplitStats split_stats() const { return {split_reads_, split_chunks_written_}; }

 private:
  RingHeader* out_;
  char* out_data_;
  RingHeader* in_;
  char* in_data_;
  std::function<void()> doorbell_;
  std::unique_ptr<ShmSegment> peer_segment_;
  /// Writes a then b as records (the first marked with `flags`); returns
  /// the bytes written (fewer when the ring is full).
  size_t write_records(const char* a, size_t na, const char* b, size_t nb, uint64_t flags = 0);
  /// Zero-copy receive: the bytes of the current record not yet taken, in
  /// the ring (empty when none); `*by_ref` tells a by-reference record.
  std::span<const char> peek(bool* by_ref = nullptr);
  /// Marks the first n bytes of peek() as read.
  void consume(size_t n);
  /// Moves past the current record (`len` bytes of data), giving its room back.
  void next_record(size_t len);
  /// Copies up to n available bytes out of the ring; returns how many.
  size_t try_recv(void* data, size_t n);
  bool send_by_reference(Message& m);
  bool recv_by_reference(Message& m);
  /// Receiver of a split by-reference payload: publishes it, then copies one
  /// chunk per call, then waits for the sender's chunks.
  bool recv_split(Message& m);
  /// Sender waiting for ticket m.ticket: writes one chunk of a split the
  /// receiver published for it, if one is left; true if it did.
  bool help_split(const Message& m);
  /// Whether a split of m.ticket has a chunk left to claim.
  bool split_open(const Message& m) const;
  /// Moves n bytes between `local` here and address `remote` in the peer
  /// (process_vm_writev when `write`, else process_vm_readv), in as many
  /// calls as it takes; throws Error(kPeerFailure) when the peer is gone.
  void copy_remote(bool write, char* local, uint64_t remote, size_t n);
  /// Whether a payload of `bytes` may go by reference on this link.
  bool by_reference(size_t bytes) const;
  bool ticket_done(uint64_t ticket) const;
  /// Copies n bytes at address `remote` of the sender into dst.
  void read_remote(void* dst, uint64_t remote, size_t n);
  /// Arms the wait for room for the next record of a message with
  /// `remaining` bytes left to write (false: there is room now).
  bool arm_room_wait(size_t remaining, uint32_t flag);
  bool arm_ticket_wait(uint64_t ticket, uint32_t flag);
  /// Wakes the peer found asleep as `flags` say (kSleepDoorbell, kSleepFutex bits).
  void wake_peer(uint32_t flags);
  void announce_membarrier();
  /// Full barrier before re-checking after arming a wait.
  void sleeper_fence() const;
  int peer_ = -1;
  int peer_pid_ = 0;
  uint64_t tickets_ = 0;    ///< producer: payloads sent by reference
  uint64_t refs_read_ = 0;  ///< consumer: payloads read by reference
  uint64_t ref_bytes_read_ = 0;
  uint64_t split_reads_ = 0;           ///< consumer: payloads read split with the sender
  uint64_t split_chunks_written_ = 0;  ///< producer: chunks written into the peer's buffers
  bool can_write_peer_ = false;        ///< producer: process_vm_writev into the peer works
  bool quiet_ = false;
  uint64_t head_ = 0;              ///< producer: bytes written (records and padding)
  uint64_t tail_seen_ = 0;         ///< producer: last tail read (room is at least this)
  uint64_t read_pos_ = 0;          ///< consumer: start of the current record
  size_t read_off_ = 0;            ///< consumer: payload bytes of it already taken
  bool self_barrier_ = false;      ///< this process registered for membarrier(GLOBAL_EXPEDITED)
  bool consumer_barrier_ = false;  ///< the peer, as consumer, arms its waits with membarrier
  bool producer_barrier_ = false;  ///< the peer, as producer, arms its waits with membarrier
  bool owe_consumer_ = false;      ///< data published since the last flush
  bool owe_producer_ = false;      ///< room made since the last flush
};

}  // namespace omniccl::transport
