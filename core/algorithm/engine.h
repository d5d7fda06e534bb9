// Engine: moves the transfers of one algorithm step through the Mesh.
//
// Words used by every algorithm:
//   transfer  one message to or from one peer: a WireHeader, then `bytes` of
//             payload. Kinds: send, recv (copy into dst), recv-reduce
//             (dst = op(src, incoming), dst may equal src).
//   step      a set of transfers that make progress together; run() returns
//             when all are complete. Transfers to the same peer in the same
//             direction complete in the order given.
// Every message header carries the operation's signature (kind, sequence
// number, dtype, count, root, reduce op, algorithm, step), so calls that do
// not match across ranks are detected and reported with the differing fields
// instead of corrupting data.
#pragma once

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "common/small_copy.h"
#include "common/time.h"
#include "algorithm/op.h"
#include "algorithm/wire.h"
#include "executor/executor.h"
#include "tensor/tensor.h"
#include "transport/mesh.h"

namespace omniccl {

struct Transfer {
  /// kListen (point-to-point batches only): receive the next message from
  /// `peer`, whatever its tag and size; the feed decides where its payload
  /// goes once its header has arrived (TransferFeed::land).
  enum class Kind : uint8_t { kSend, kRecv, kRecvReduce, kListen };
  Kind kind = Kind::kSend;
  int peer = -1;
  const char* src = nullptr;  ///< send payload, or local operand of recv-reduce
  char* dst = nullptr;        ///< recv / recv-reduce destination
  size_t bytes = 0;
  uint32_t step = 0;  ///< algorithm step; both sides must use the same

  static Transfer send(int peer, const void* src, size_t bytes, uint32_t step) {
    return {Kind::kSend, peer, static_cast<const char*>(src), nullptr, bytes, step};
  }
  static Transfer recv(int peer, void* dst, size_t bytes, uint32_t step) {
    return {Kind::kRecv, peer, nullptr, static_cast<char*>(dst), bytes, step};
  }
  static Transfer listen(int peer) { return {Kind::kListen, peer, nullptr, nullptr, 0, 0}; }
  static Transfer recv_reduce(int peer, const void* local, void* dst, size_t bytes, uint32_t step) {
    return {Kind::kRecvReduce, peer, static_cast<const char*>(local), static_cast<char*>(dst), bytes, step};
  }
};

/// Appends a transfer to a step list, built in place. (Built on the stack
/// and copied in, it would be read back with wider loads than it was written
/// with; such a load waits until every earlier store of the call has
/// reached the cache, on shared memory behind the last record written into
/// a peer's ring: a transfer between cores in each small operation.)
inline Transfer& add_transfer(std::vector<Transfer>& ts, Transfer::Kind kind, int peer, const char* src, char* dst,
                              size_t bytes, uint32_t step) {
  Transfer& t = ts.emplace_back();
  t.kind = kind;
  t.peer = peer;
  t.src = src;
  t.dst = dst;
  t.bytes = bytes;
  t.step = step;
  return t;
}
/// add_transfer of Transfer::send(peer, src, bytes, step).
inline void add_send(std::vector<Transfer>& ts, int peer, const void* src, size_t bytes, uint32_t step) {
  add_transfer(ts, Transfer::Kind::kSend, peer, static_cast<const char*>(src), nullptr, bytes, step);
}
/// add_transfer of Transfer::recv(peer, dst, bytes, step).
inline void add_recv(std::vector<Transfer>& ts, int peer, void* dst, size_t bytes, uint32_t step) {
  add_transfer(ts, Transfer::Kind::kRecv, peer, nullptr, static_cast<char*>(dst), bytes, step);
}
/// add_transfer of Transfer::recv_reduce(peer, local, dst, bytes, step).
inline void add_recv_reduce(std::vector<Transfer>& ts, int peer, const void* local, void* dst, size_t bytes,
                            uint32_t step) {
  add_transfer(ts, Transfer::Kind::kRecvReduce, peer, static_cast<const char*>(local), static_cast<char*>(dst), bytes,
               step);
}

/// A queue of point-to-point transfers that join a running step (see
/// Engine::run_feed). Implemented by the communicator over its task queue.
class TransferFeed {
 public:
  virtual ~TransferFeed() = default;
  /// Takes the next queued transfer if the queue's head is one: fills the
  /// transfer, its signature (kind kSendRecv, per-pair number) and deadline,
  /// and a tag for done(). Returns false when there is none now.
  virtual bool next(Transfer& t, OpSignature& sig, Deadline& deadline, size_t& tag) = 0;
  /// The transfer with this tag has completed.
  virtual void done(size_t tag) = 0;

  /// A point-to-point message as its header announces it (kListen).
  struct Arrival {
    int peer = -1;
    int32_t tag = 0;  ///< the sender's tag
    DType dtype = DType::kUInt8;
    uint64_t count = 0;  ///< elements of dtype
    uint64_t bytes = 0;  ///< payload bytes
    uint64_t seq = 0;    ///< the sender's per-pair message number
    uint8_t flags = 0;   ///< kP2PSync, kP2PAck
  };
  /// A listen on arrival.peer has read a message header: returns where its
  /// arrival.bytes payload goes (room for all of it) and a token for landed().
  /// Throws to fail the step (e.g. no room for an unexpected message).
  virtual char* land(const Arrival& arrival, size_t& token) {
    (void)arrival;
    (void)token;
    return nullptr;
  }
  /// The payload announced by land() (with this token) is complete.
  virtual void landed(size_t token) { (void)token; }
  /// Whether a receive is waiting that a message from `peer` could match; a
  /// listen that has not started reading a header ends when none is.
  virtual bool listening(int peer) {
    (void)peer;
    return false;
  }
  /// The listen on `peer` has ended: no receive wanted it any more, or
  /// (`parked`) the peer's next message is a collective's (it has moved on;
  /// the header is kept for that operation).
  virtual void listen_ended(int peer, bool parked) {
    (void)peer;
    (void)parked;
  }
  /// A listen on `peer` has read everything that peer has sent so far (no
  /// header byte is waiting); a probe that must not wait uses it.
  virtual void quiet(int peer) { (void)peer; }
  /// Whether a receive is waiting for `peer` by name (not only through
  /// ANY_SOURCE): if not, a listen on a peer that has left just ends.
  virtual bool named(int peer) {
    (void)peer;
    return true;
  }
  /// Whether next() has a transfer that should join now rather than when
  /// the step next waits (an ack a synchronous sender waits for).
  virtual bool owes() { return false; }
};

class Engine {
 public:
  explicit Engine(transport::Mesh& mesh);
  ~Engine();
  Engine(const Engine&) = delete;
  Engine& operator=(const Engine&) = delete;

  /// Starts an operation: sets its signature, reduce op and deadline.
  void begin(const OpSignature& sig, RedOp combine, Deadline deadline);
  /// Starts an operation whose deadline is `timeout_ms` after it first has
  /// to wait (read from the clock then, not at every call's start).
  void begin(const OpSignature& sig, RedOp combine, int64_t timeout_ms);
  /// begin(sig, combine, timeout_ms) for a signature the caller writes into
  /// the returned one, field by field, before the first step: a signature
  /// built elsewhere and copied in is read back with wider loads than it was
  /// written with, and such a load waits until the stores reach the cache
  /// (behind the previous operation's ring stores, on shared memory).
  OpSignature& begin_in_place(RedOp combine, int64_t timeout_ms);
  /// Replaces the current operation's deadline (after begin): the slices of
  /// one call share the call's.
  void set_deadline(Deadline deadline) {
    deadline_ = deadline;
    lazy_timeout_ms_ = -1;
  }
  /// Runs one step to completion (or throws: kTimeout, kPeerFailure,
  /// kMismatch, kAborted). An empty step returns at once.
  void run(std::span<const Transfer> transfers);
  /// Convenience: one step of a send and/or a recv.
  void run(std::initializer_list<Transfer> transfers);
  /// This rank rejected collective `seq` for its arguments: sends every peer
  /// the call's withdrawal mark (wire.h kWithdrawMark), so that a peer still
  /// in that call withdraws it and one past it drops what it receives of
  /// it. Waits at most `timeout_ms` for room on the links.
  void send_withdrawal_marks(uint64_t seq, int64_t timeout_ms);
  /// Runs point-to-point transfers from `feed` as one growing step: transfers
  /// queued while it runs join it, so sends and receives posted one after the
  /// other progress together (isend then recv on both sides of a pair works
  /// for any size). Returns when all are done and the feed has no more.
  void run_feed(TransferFeed& feed);

  /// Scratch memory on the operation's device (its executor's), grown on
  /// demand and reused across operations (no allocation per operation in
  /// steady state). `slot` selects independent buffers.
  char* scratch(size_t bytes, int slot = 0);

  /// The executor of the operation's device: every copy, reduction and
  /// scaling of tensor memory goes through it (executor/executor.h).
  Executor& exec() { return *exec_; }
  /// Picks the executor for an operation whose tensors are on `device`
  /// (coll::Staging); throws kUnsupported for a device without one.
  void use_device(DeviceKind device);
  /// use_device(DeviceKind::kCPU), inline (host memory has an executor).
  void use_cpu() {
    exec_ = &cpu_;
    device_ = DeviceKind::kCPU;
  }

  /// Lets this operation's sends go by reference where the link can (see
  /// transport::Message::may_reference); begin() turns it off.
  void set_single_copy(bool on) { single_copy_ = on; }
  /// Lets this operation's receives and local copies of `min_bytes` and more
  /// store their data past the caches where the link or the executor can
  /// (streaming stores; 0: never; see transport::Message::stream and
  /// Executor::copy_streaming); begin() turns it off.
  void set_stream_min(uint64_t min_bytes) { stream_min_ = min_bytes; }
  /// Whether a transfer of `bytes` stores its result past the caches.
  bool streams(uint64_t bytes) const { return stream_min_ > 0 && bytes >= stream_min_; }
  /// The caller's interrupt check for this operation (a blocking call's
  /// occl_options_t.interrupt): asked before each sleep; when it fires the
  /// operation fails with kInterrupted. begin() clears it.
  void set_interrupt(InterruptHook hook) { interrupt_ = hook; }
  /// Whether this host runs more of the communicator's ranks than they may
  /// use cores between them (Mesh::local_cpus; then waits cannot spin long,
  /// and every hand-off between ranks may need a context switch).
  bool oversubscribed() const { return oversubscribed_; }
  /// Turns the small-step path (run_quick; OMNICCL_SMALL_PATH) on or off.
  /// Either way the same messages cross: ranks may differ in it.
  void set_small_path(bool on) { quick_on_ = on; }
  /// Lets the senders of payloads this operation receives by reference copy
  /// part of them into its buffers while it copies the rest
  /// (OMNICCL_SHM_SPLIT_COPY; transport::Message::may_split); begin() turns it
  /// off. Either way the same messages cross.
  void set_split_copy(bool on) { split_copy_ = on; }
  /// Waits, spinning, at most `max_ns`, until the peers have read every
  /// byte this rank sent them (Link::sends_unread): an operation timed to
  /// choose between ways of running it then counts a send through the
  /// shared-memory rings until its receiver took it, as a send by reference
  /// does (which returns only once it was read). Spinning: only where every
  /// rank of the host has a core (OpTuner measures nowhere else).
  void wait_sends_read(uint64_t max_ns);
  /// Steps the small-step path took: `done` ended there, `handed_over`
  /// had to wait longer and finished in the general loop.
  /// Of `done`, `direct` moved every message whole through the links'
  /// direct calls (run_direct; shared memory), without the transfers' state.
  struct SmallPathStats {
    uint64_t done = 0;
    uint64_t handed_over = 0;
    uint64_t direct = 0;
  };
  const SmallPathStats& small_path_stats() const { return quick_stats_; }

  /// Copies `bytes` from src to dst (this rank's own block of a gather, a
  /// scatter or an all-to-all) during the next step run(): in slices of
  /// kIdleSlice while that step's transfers wait on peers (a pass that moved
  /// nothing), the rest once they are done, so the copy takes the time the
  /// rank would spend waiting. Done at once where slicing cannot help: a
  /// step small enough for the small-step path, overlapping buffers, or a
  /// device executor. Streams past the caches as a local copy of its size
  /// would (streams()).
  void copy_while_waiting(char* dst, const char* src, size_t bytes) {
    if (copy_small_now(dst, src, bytes)) {  // an 8-byte operation's own block: here
      idle_stats_.at_once += bytes;
      return;
    }
    copy_while_waiting_large(dst, src, bytes);
  }
  /// Copies `bytes` from src to dst now (nothing when they are the same
  /// buffer; memmove where they overlap). A block from the streaming
  /// threshold up is not read again soon: it goes past the caches where
  /// streams() says and the buffers are apart, as the links store large
  /// receives (2 ranks, all_gather 16 MiB: 4.4-7.4 -> 4.0-6.4 ms).
  void copy_now(char* dst, const char* src, size_t bytes);
  /// Slice of a copy_while_waiting copy moved per pass without progress.
  static constexpr size_t kIdleSlice = size_t(128) << 10;
  /// Bytes of copy_while_waiting copies by when they moved: at once, in
  /// waits of their step, or after its transfers were done.
  struct IdleCopyStats {
    uint64_t at_once = 0;
    uint64_t while_waiting = 0;
    uint64_t after = 0;
  };
  const IdleCopyStats& idle_copy_stats() const { return idle_stats_; }

  /// A wait's yield phase before its first sleep, normally (and after each
  /// wake-up from sleep, always).
  static constexpr std::chrono::microseconds kYieldFor{50};
  /// The yield phase before the first sleep after a wait that slept and
  /// still ended within this long (from its first pass without progress):
  /// waking a sleeping rank can take longer than kYieldFor, and two ranks
  /// that each sleep until the other wakes them take that long a call.
  static constexpr std::chrono::microseconds kYieldAwake{1000};
  /// The yield phase the next wait takes before its first sleep: kYieldFor,
  /// or kYieldAwake after such a wait (until a wait that slept takes longer).
  std::chrono::nanoseconds first_yield() const { return first_yield_; }
  /// A yield (ranks that each have a core) that took this long gave the
  /// core to another process: one that competes for this rank's core
  /// (a thread of the application, a neighbour's job) runs for a scheduler
  /// slice, milliseconds, when the rank yields to it.
  static constexpr std::chrono::microseconds kYieldStolen{200};
  /// After such a yield, the waits spin through their yield phase for this
  /// long instead of yielding (then they try a yield again): the rank keeps
  /// its core while it expects its peer within the phase, and still sleeps
  /// after it, as before.
  static constexpr std::chrono::seconds kNoYieldFor{1};
  /// How the general loop waited: its sleeps (futex or poll calls; a sleep
  /// step that found a transfer ready at arming does not count), the waits
  /// that slept (counted when they ended) by whether they took kYieldAwake
  /// or less, and its yields that took kYieldStolen or more.
  struct WaitStats {
    uint64_t sleeps = 0;
    uint64_t short_slept_waits = 0;
    uint64_t long_slept_waits = 0;
    uint64_t stolen_yields = 0;
  };
  const WaitStats& wait_stats() const { return wait_stats_; }

  /// An empty transfer list to build a step in, reused across operations
  /// (no allocation in steady state). Valid until the next call.
  std::vector<Transfer>& step_list() {
    step_list_.clear();
    return step_list_;
  }

  /// Whether messages to or from `peer` go through a socket (Link::socket).
  bool over_socket(int peer) { return peer != mesh_.rank() && mesh_.link(peer).socket(); }

  int rank() const { return mesh_.rank(); }
  int size() const { return mesh_.size(); }
  const OpSignature& signature() const { return sig_; }
  transport::Mesh& mesh() { return mesh_; }

 private:
  struct State;
  bool advance(State& s);
  size_t reduce_next(State& s, const char* from, size_t n);
  /// Whether the header received for `s` is the one expected; false when it
  /// is a withdrawn call's message that `s` now drops (discard_message).
  bool check_header(State& s);
  /// check_header past the common case: a withdrawn call's message or mark
  /// to drop (false), the running call's own mark (throws RejectedCall),
  /// else a mismatch (fail_header).
  [[gnu::cold, gnu::noinline]] bool unexpected_header(State& s);
  /// check_header's error: what differs, told to every rank (throws).
  [[noreturn, gnu::cold, gnu::noinline]] void fail_header(const State& s);
  /// Receives the rest of the message `s` drops (its header is read),
  /// continuing in discard_[peer] while `s` waits for the next header.
  void start_discard(State& s, bool ends_receive);
  /// What the rank that rejected collective `seq` said, waiting up to
  /// kNoticeWaitMs for its notice; nullptr if it did not come.
  const std::string* rejection_text(uint64_t seq);
  static constexpr int kNoticeWaitMs = 500;
  /// Moves the dropped message on; true if anything moved.
  [[gnu::cold, gnu::noinline]] bool discard_message(State& s);
  /// The message a receive `s` is moving now (its own, or one it drops).
  const transport::Message& recv_message(const State& s) const;
  /// The running collective was rejected by a peer (`r`): finishes the
  /// messages of its step that are under way, sends every peer its
  /// withdrawal mark, and throws CallWithdrawn (the links are in step; the
  /// communicator stays usable), or the error that stopped it.
  [[noreturn]] void withdraw(const transport::RejectedCall& r);
  /// Keeps, of the failed step's transfers, its receives (each ends with
  /// its message or the sender's mark) and the sends that have started.
  void keep_step_for_withdrawal();
  /// Peers may still send messages of withdrawn collective `seq` (their
  /// sends under way when they withdrew it, or completed ones of a call
  /// this rank rejected): drain_stale drops them while this rank waits.
  void expect_stale(uint64_t seq);
  /// While a step waits: drops the withdrawn calls' messages that peers this
  /// step does not receive from have sent (a sender finishing its message
  /// waits for room until they are read); true if anything moved.
  bool drain_stale();
  bool drain_peer(int peer);
  bool receiving_from(int peer) const;
  /// Per peer: the latest withdrawn collective whose messages may still
  /// come from it (0: none).
  std::vector<uint64_t> stale_from_;
  bool any_stale_ = false;
  bool p2p_used_ = false;  ///< run_feed has run: drains could meet point-to-point messages
  /// A payload sink that drops everything.
  struct DropSink final : transport::PayloadSink {
    size_t take(const char* /*data*/, size_t n) override { return n; }
  };
  DropSink drop_sink_;
  std::vector<transport::Message> discard_;  ///< per peer: the message being dropped
  std::vector<char> discard_stage_;
  WireHeader discard_hdr_{};
  bool withdrawing_ = false;  ///< withdraw() runs its step
  bool quick_live_ = false;   ///< the failing step's states are quick_'s (run_quick), not states_
  size_t quick_n_ = 0;
  void flush_links();
  /// What each operation sets anew (copy choices, interrupt check, probe
  /// state) back to off: begin() and run_feed() start from here.
  void reset_op_options();
  /// After a failure: every split receive still open is closed to its sender
  /// (transport::Link::abandon) before the caller gets its buffers back.
  void abandon_receives() noexcept;
  bool advance_listen(State& s, TransferFeed& feed);
  bool listen_over(State& s, TransferFeed& feed);
  void hold_message(State& s, TransferFeed& feed);
  void land_message(State& s, TransferFeed& feed);
  /// A collective's message whose header a point-to-point listen read, given
  /// to the next receive from that peer (take_held).
  struct Held;
  bool take_held(int peer, State& s);
  std::vector<Held> held_;        ///< per peer
  TransferFeed* feed_ = nullptr;  ///< the running step's feed (point-to-point steps)
  /// `quick`: quick_fits(transfers), as run() found it.
  void run_guarded(std::span<const Transfer> transfers, TransferFeed* feed, bool quick);
  /// run({t}) when t can move at once as one whole message (the small path's
  /// first try for one transfer): returns false, having moved nothing, when
  /// it cannot.
  bool run_one_now(const Transfer& t);
  /// Called in a handler of a step's failure: abandons its receives, tells
  /// the other ranks (unless a peer reported it or it is an abort), rethrows.
  [[noreturn]] void step_failed();
  /// copy_while_waiting past its small case.
  void copy_while_waiting_large(char* dst, const char* src, size_t bytes);
  /// Copies a block of at most kSmallCopyMax bytes between host buffers
  /// apart with a few moves (copy_small); false, having done nothing, for
  /// any other (copy_now's and copy_while_waiting's first case).
  bool copy_small_now(char* dst, const char* src, size_t bytes) {
    if (bytes > kSmallCopyMax || exec_ != &cpu_ || !(dst + bytes <= src || src + bytes <= dst)) return false;
    copy_small(dst, src, bytes);
    return true;
  }
  /// One transfer of a step quick_fits takes (its size, its kind, no header
  /// held for it: a collective's header a point-to-point listen read waits
  /// in held_, and the general loop hands it over).
  bool quick_transfer(const Transfer& t) const;
  /// direct_one(t), then the flush and the small path's counts when it moved:
  /// true; false when it cannot move at once.
  bool direct_done(const Transfer& t);
  /// The small-step path: a step of at most kQuickTransfers transfers of at
  /// most kQuickBytes each (a <= 1 KiB operation's messages), no feed, host
  /// memory, moved straight through the links (one record per message on
  /// shared memory) while the wait policy would spin, without building the
  /// step's state queue. Returns true when every transfer completed; false
  /// when one has to wait longer (yield or sleep): the general loop then
  /// adopts their progress (run_impl with `adopt`).
  bool run_quick(std::span<const Transfer> transfers);
  /// The small path's first part: each transfer moves as one whole message
  /// through the link's direct calls (Link::send_whole, peek_whole), with no
  /// transfer state, while the wait policy would spin. Returns how many
  /// transfers are left (copied to `rest`, in their order; none of them has
  /// moved) and sets `spun` when they are left because the spin phase ended
  /// (not because a link or message needs the general calls).
  size_t run_direct(std::span<const Transfer> transfers, std::span<Transfer> rest, bool& spun);
  void flush_done(std::span<const Transfer> transfers, uint32_t done);
  /// One transfer of run_direct.
  transport::Whole direct_one(const Transfer& t);
  bool quick_fits(std::span<const Transfer> transfers) const;
  struct QuickSet;                   // the small path's transfers, defined in engine.cc
  std::unique_ptr<QuickSet> quick_;  ///< reused across steps
  bool whole_links_ = false;         ///< a link to some peer takes whole messages (run_direct)
  bool quick_on_ = true;             ///< OMNICCL_SMALL_PATH (default on)
  SmallPathStats quick_stats_;
  // One step: run_impl alternates progress passes with the wait policy.
  class WaitPolicy;
  struct Pass {
    bool all_done = true;     ///< every transfer is complete
    bool progressed = false;  ///< something moved in this pass
  };
  /// `spun`: the small path has spun on these transfers already (then the
  /// wait starts with yielding).
  void run_impl(std::span<const Transfer> transfers, TransferFeed* feed, bool adopt = false, bool spun = false);
  /// run_impl's loop over the states loaded (`woke`: start the wait by yielding).
  void run_loop(TransferFeed* feed, bool woke);
  void load_states(std::span<const Transfer> transfers, bool adopt);
  State& add_transfer(const Transfer& t, const OpSignature& sig, Deadline deadline);
  /// Resets `s` to transfer t of operation sig (add_transfer's part, also
  /// the small path's).
  void init_state(State& s, const Transfer& t, const OpSignature& sig, Deadline deadline);
  /// Sizes the recv-reduce staging for `transfers` and restarts its slots.
  void prepare_staging(std::span<const Transfer> transfers);
  /// Takes every transfer queued behind this step; true if any arrived.
  bool pull_feed(TransferFeed* feed);
  /// Moves each transfer that can move (the first of each peer and direction).
  Pass progress_pass(TransferFeed* feed);
  /// After kProbeAfter without progress, asks peers for their signatures
  /// (calls that differ only where no message flows, e.g. the root).
  void probe_if_stalled();
  /// Arms every pending transfer's link and sleeps until one can move, a
  /// control message or wake-up arrives, or a deadline (which fails). With
  /// `futex` and only shared-memory links to wait on, sleeps on this rank's
  /// futex word for at most kFutexSlice; else in Mesh::sleep (doorbells).
  void sleep_step(bool futex);
  bool collect_waiting();
  bool arm_waiting(transport::WakeBy by);
  /// After a wait of the general loop made progress: sets first_yield_ from
  /// how long it took where it slept (WaitPolicy::progressed; zero: it did
  /// not sleep, nothing changes).
  void waited(std::chrono::nanoseconds slept_wait);
  /// The general loop's yield (WaitPolicy::Action::kYield).
  void yield_step();
  State* earliest_deadline(std::vector<State*>& waiting);
  [[noreturn]] void fail_deadline(const State& first, const std::vector<State*>& waiting);
  void probe_signatures();
  [[noreturn]] void fail_mismatch(const std::string& diff);
  std::string op_text() const { return op_text(sig_); }
  static std::string op_text(const OpSignature& sig);

  transport::Mesh& mesh_;
  OpSignature sig_;
  RedOp combine_ = RedOp::kSum;
  Deadline deadline_ = Deadline::never();
  bool probed_ = false;  ///< peers were asked for their signatures in this op
  bool single_copy_ = false;
  bool split_copy_ = false;
  uint64_t stream_min_ = 0;
  /// copy_while_waiting's copy, still to do (bytes 0: none).
  struct IdleCopy {
    char* dst = nullptr;
    const char* src = nullptr;
    size_t bytes = 0;
    bool streaming = false;
  };
  IdleCopy idle_;
  IdleCopyStats idle_stats_;
  /// Copies up to `most` bytes of idle_, counted in `*count`; returns
  /// whether it copied any.
  bool idle_copy_step(size_t most, uint64_t* count);
  InterruptHook interrupt_;
  int64_t lazy_timeout_ms_ = -1;  ///< >= 0: deadline_ not computed yet
  const Deadline& op_deadline() {
    if (lazy_timeout_ms_ >= 0) {
      deadline_ = Deadline::after_ms(lazy_timeout_ms_);
      lazy_timeout_ms_ = -1;
    }
    return deadline_;
  }
  // Reused across steps so that steady state allocates nothing.
  struct StateQueue;  // a std::deque<State>, defined in engine.cc
  std::unique_ptr<StateQueue> states_;
  /// The (peer, direction) pairs already served in a pass: a bit each, in
  /// one word up to 64 pairs (32 ranks; clearing it is one store), else a
  /// byte each.
  class PairSet {
   public:
    /// Empties the set and sizes it for `pairs` pairs.
    void reset(size_t pairs) {
      small_ = pairs <= 64;
      bits_ = 0;
      if (!small_) bytes_.assign(pairs, 0);
    }
    /// Empties the set.
    void clear() {
      if (small_) {
        bits_ = 0;
      } else {
        std::fill(bytes_.begin(), bytes_.end(), 0);
      }
    }
    /// Whether pair k is in the set.
    bool has(size_t k) const { return small_ ? ((bits_ >> k) & 1) != 0 : bytes_[k] != 0; }
    /// Adds pair k.
    void add(size_t k) {
      if (small_) {
        bits_ |= uint64_t{1} << k;
      } else {
        bytes_[k] = 1;
      }
    }
    /// Removes pair k.
    void remove(size_t k) {
      if (small_) {
        bits_ &= ~(uint64_t{1} << k);
      } else {
        bytes_[k] = 0;
      }
    }

   private:
    bool small_ = true;
    uint64_t bits_ = 0;
    std::vector<uint8_t> bytes_;
  };
  PairSet busy_;
  std::vector<pollfd> fds_;
  std::vector<State*> waiting_;
  std::vector<Transfer> step_list_;
  size_t stage_used_ = 0;              ///< recv-reduce staging slots taken this step
  Clock::time_point stalled_since_{};  ///< first sleep without progress (mismatch probing)
  std::chrono::nanoseconds spin_for_{0};
  std::chrono::nanoseconds first_yield_{kYieldFor};  ///< see first_yield()
  Clock::time_point no_yield_until_{};               ///< kNoYieldFor after a stolen yield
  WaitStats wait_stats_;
  bool oversubscribed_ = false;
  CpuExecutor cpu_;
  Executor* exec_ = &cpu_;
  DeviceKind device_ = DeviceKind::kCPU;  ///< where the operation's tensors live (use_device)
  std::vector<char> staging_;
};

}  // namespace omniccl
