// Point-to-point matching, as MPI defines it.
//
// Words:
//   posted      a receive waiting for a message: (source, tag), a buffer of
//               `capacity` bytes, its Work. source may be kAnySource, tag
//               kAnyTag.
//   unexpected  a message that arrived (or was sent to this rank itself)
//               before a receive matching it was posted; kept, in arrival
//               order, up to OMNICCL_P2P_UNEXPECTED_BYTES in all.
//   match       a message (source s, tag t) matches a receive whose source is
//               s or kAnySource and whose tag is t or kAnyTag.
// Order (MPI's non-overtaking rule): a new receive takes the first matching
// unexpected message in arrival order; an arriving message goes to the first
// matching posted receive in posting order. Messages from one rank arrive in
// the order it sent them, so two messages from one source that both match a
// receive are received in send order. A message counts as arrived when its
// header has been read: one whose payload is still coming when a matching
// receive is posted goes to that receive once it has all come.
// A receive's capacity is an upper bound: a smaller message succeeds and the
// status says how many bytes came; a larger one fills the buffer and fails
// that receive with kTruncated (the message is consumed whole, so the
// communicator stays usable).
// A probe (MPI_Probe / MPI_Iprobe) is posted like a receive but receives
// nothing: the first matching unexpected message, or the first arriving
// message it matches in posting order, completes it with that message's
// status, and the message is kept as unexpected (within the budget), so a
// receive naming the status's source and tag then gets exactly it. A probe
// that found nothing completes with source kAnySource (never a sender).
//
// Synchronous sends (MPI_Ssend / MPI_Issend) complete only once a receive has
// matched their message:
//   to another rank  the message's header carries kP2PSync (engine.h); the
//                    receiving rank, once a receive has matched it and its
//                    payload is all there, owes the sender an ack: a
//                    payload-less message flagged kP2PAck whose count field
//                    is the acknowledged message's per-pair number. The
//                    sender awaits it (listening to that peer) and completes
//                    the send when it has both sent the payload and read the
//                    ack. Ordinary sends set no flag and cause no ack.
//   to this rank     the kept message holds the send's Work, completed when
//                    a receive takes it.
// A matched probe (MPI_Mprobe / MPI_Improbe) is a probe that also takes the
// message it found out of matching: no other receive or probe can get it,
// and only mrecv (MPI_Mrecv) with the number the probe's status carries
// (RecvStatus::message, from kFirstMessage up) receives it.
// Cancel (MPI_Cancel) removes a posted receive, or a synchronous send to this
// rank itself that no receive has matched yet, and completes its Work as
// cancelled (RecvStatus::cancelled, status kSuccess). A receive already
// matched, or a message already sent to another rank, cannot be cancelled.
#pragma once

#include <cstdint>
#include <deque>
#include <memory>
#include <string>
#include <vector>

#include "algorithm/engine.h"
#include "executor/executor.h"
#include "common/time.h"
#include "communicator/work.h"
#include "tensor/tensor.h"

namespace omniccl {

constexpr int kAnySource = -1;          ///< OCCL_ANY_SOURCE
constexpr int kProcNull = -2;           ///< OCCL_PROC_NULL
constexpr int kAnyTag = -1;             ///< OCCL_ANY_TAG
constexpr uint64_t kMessageNull = 0;    ///< OCCL_MESSAGE_NULL: no message
constexpr uint64_t kMessageNoProc = 1;  ///< OCCL_MESSAGE_NO_PROC: a matched probe of PROC_NULL
constexpr uint64_t kFirstMessage = 2;   ///< matched probes number their messages from here

class P2PMatcher {
 public:
  struct Posted {
    int source = kAnySource;
    int tag = kAnyTag;
    char* dst = nullptr;
    uint64_t capacity = 0;  ///< bytes
    DType dtype = DType::kUInt8;
    std::shared_ptr<Work> work;
    RecvStatus* status = nullptr;           ///< also filled when it completes (blocking calls)
    bool blocking = false;                  ///< its caller waits for it (nothing else can be issued meanwhile)
    Deadline deadline = Deadline::never();  ///< for the listens it needs
    bool probe = false;                     ///< a probe: completes with a status, receives nothing
    bool once = false;                      ///< a probe that must not wait (iprobe): end_probe ends it
    bool claim = false;                     ///< a matched probe: takes the message it finds out of matching
  };

  /// `rank` is this rank; the unexpected-message budget is read from
  /// OMNICCL_P2P_UNEXPECTED_BYTES (default 256 MiB). Payloads held here are
  /// copied into receive buffers through `exec` (the engine's executor;
  /// null: a CPU executor of the matcher's own).
  P2PMatcher(int rank, int size, Executor* exec = nullptr);

  /// Posts a receive. If an unexpected message matches, it is delivered and
  /// the receive completed now (returns true); else it waits (false).
  bool post(Posted r);
  /// Cancels the posted receive or the unmatched synchronous send to this
  /// rank itself whose Work is `w`: completes it as cancelled and returns
  /// true; false if there is none (already matched, or never cancellable).
  bool cancel(const Work* w);
  /// MPI_Mrecv: receives into r the message a matched probe took (its
  /// number `message`), completing r (and a synchronous sender); false (r
  /// untouched) if no such message is held.
  bool mrecv(uint64_t message, Posted& r);
  /// Ends the posted probe that must not wait (if it is still posted): completes it with the
  /// first matching unexpected message's status if there is one now, else
  /// with source kAnySource (nothing found). Returns whether it was posted.
  bool end_probe();
  /// A send to this rank itself: delivered to the first matching posted
  /// receive, else kept as unexpected (throws kOutOfMemory over budget).
  /// Returns whether a receive took it now. `sync` (a synchronous send's
  /// Work): kept with the message and completed when a receive takes it;
  /// with `must_match` (a blocking synchronous send, whose caller can post
  /// no receive meanwhile) an unmatched message is refused (kMismatch).
  bool send_to_self(int tag, const char* src, uint64_t bytes, DType dtype, uint64_t count,
                    const std::shared_ptr<Work>& sync = nullptr, bool must_match = false);

  /// A synchronous send to `peer`, message number `seq`, has been started:
  /// its Work completes when it has been sent (sent()) and the ack has come.
  void await_ack(int peer, uint64_t seq, std::shared_ptr<Work> work);
  /// The synchronous send with Work `w` has been sent whole.
  void sent(const Work* w);
  /// Whether an ack from `peer` is awaited.
  bool awaits(int peer) const;
  /// Whether any ack is awaited.
  bool any_awaited() const { return !awaiting_.empty(); }
  /// Fails every awaited synchronous send with `st`; `why(peer)` explains.
  template <typename Why>
  void fail_awaiting(Status st, Why&& why) {
    for (Awaiting& a : awaiting_) a.work->complete(st, why(a.peer));
    awaiting_.clear();
  }
  /// An ack this rank owes: the peer and the acknowledged message's number.
  struct Ack {
    int peer = -1;
    uint64_t seq = 0;
  };
  /// Whether an ack is owed and not yet taken.
  bool owes_ack() const { return !acks_.empty(); }
  /// Takes the oldest owed ack (false if none).
  bool take_ack(Ack& a);

  /// A message from another rank has announced itself: returns where its
  /// payload goes and a token for landed() (see TransferFeed::land). Checks
  /// the per-pair number `expected_seq`. Throws kOutOfMemory when an
  /// unexpected message would exceed the budget.
  char* land(const TransferFeed::Arrival& a, uint64_t expected_seq, size_t& token);
  /// The payload announced with `token` is complete: completes its receive
  /// or keeps it as unexpected.
  void landed(size_t token);

  /// Whether a posted receive could match a message from `peer`.
  bool wants(int peer) const;
  /// Whether a posted receive names `peer` as its source.
  bool names(int peer) const;
  /// Whether any receive is posted.
  bool any_posted() const { return !posted_.empty(); }
  /// Fails the posted receives for which `doomed(p)` is true with `st`;
  /// `why(p)` explains each. The others stay posted.
  template <typename Doomed, typename Why>
  void fail_posted(Status st, Doomed&& doomed, Why&& why) {
    for (auto it = posted_.begin(); it != posted_.end();) {
      if (doomed(*it)) {
        finish(*it, st, why(*it), RecvStatus{});
        it = posted_.erase(it);
      } else {
        ++it;
      }
    }
  }
  /// The posted receives (oldest first).
  const std::deque<Posted>& posted() const { return posted_; }
  /// Fails every posted receive and every one being delivered (the
  /// operation running them failed).
  void fail_all(Status st, const std::string& message);
  /// Bytes held by unexpected messages now.
  uint64_t unexpected_bytes() const { return unexpected_bytes_; }

 private:
  struct Message {
    int source = -1;
    int tag = 0;
    DType dtype = DType::kUInt8;
    uint64_t count = 0;
    std::vector<char> data;
    bool sync = false;                ///< from a synchronous send: its sender waits for the match
    uint64_t seq = 0;                 ///< the sender's per-pair number (acks name it)
    std::shared_ptr<Work> sync_work;  ///< a synchronous send to this rank itself
  };
  /// A synchronous send to another rank waiting for its ack.
  struct Awaiting {
    int peer = -1;
    uint64_t seq = 0;
    std::shared_ptr<Work> work;
    bool sent = false;   ///< the payload has gone
    bool acked = false;  ///< the ack has come
  };
  /// A receive took m: a synchronous sender learns of it.
  void matched(Message& m);
  /// The awaited send (peer, seq) got its ack.
  void acked(int peer, uint64_t seq);
  /// The message just kept as unexpected (the last one) began to land
  /// before any posted receive matched it: the receives and probes posted
  /// while its payload was read get it now, as post() would have given it
  /// to them (in posting order: probes see it, the first receive takes it).
  void offer_to_posted();
  /// A message whose payload is being read (one per peer at a time).
  struct Landing {
    bool active = false;
    bool direct = false;  ///< straight into posted.dst
    bool probed = false;  ///< posted is a probe: the message is kept as unexpected
    bool ack = false;     ///< an ack for a synchronous send of this rank (no payload)
    uint64_t ack_seq = 0;
    uint64_t bytes = 0;
    Posted posted;  ///< the receive it matched, if any (work set)
    Message msg;    ///< unexpected, or the staging of a truncated one
  };
  static bool matches(const Posted& p, int source, int tag) {
    return (p.source == kAnySource || p.source == source) && (p.tag == kAnyTag || p.tag == tag);
  }
  /// Copies what fits of `m` into r's buffer and completes r (kTruncated
  /// when it does not all fit, kMismatch when the dtypes differ).
  void deliver(Posted& r, const Message& m);
  void finish(Posted& r, Status st, std::string message, RecvStatus rs);
  void reserve_unexpected(uint64_t bytes, int source, int tag);
  /// Completes probe r with the status of the unexpected message at `it`;
  /// the message stays there, or for a matched probe moves to claimed_.
  void answer_probe(Posted& r, std::deque<Message>::iterator it);

  int rank_;
  CpuExecutor own_exec_;  ///< when the constructor was given none
  Executor* exec_;
  uint64_t budget_;
  uint64_t unexpected_bytes_ = 0;
  std::deque<Posted> posted_;
  std::deque<Message> unexpected_;
  std::vector<Landing> landing_;                      ///< per peer
  std::deque<Ack> acks_;                              ///< acks owed, oldest first
  std::deque<std::pair<uint64_t, Message>> claimed_;  ///< taken by matched probes, not yet received
  uint64_t next_message_ = kFirstMessage;
  std::vector<Awaiting> awaiting_;
};

}  // namespace omniccl
