// Collectives on CUDA tensors over a device transport's DeviceWindow (every
// rank's device block mapped into every rank): everything is enqueued on the
// caller's stream, and ranks synchronise through 64-bit flag words in device
// memory that streams write (GpuRuntime::stream_write_value) and await
// (stream_wait_value), as NCCL's copy-engine collectives do. No host thread
// waits per call: the call returns once its work is enqueued.
//
// The protocol, per piece of an operation (step s, the same count of steps
// on every rank, since all ranks run the same operations):
//   post(to, s)   this rank's stream writes s into posted[me] of `to`'s block
//                 (its data of step s is in its scratch buffer, or it has
//                 consumed the data `to` posted);
//   ack(to, s)    writes s into acked[me] of `to`'s block (it has read what
//                 `to` posted, whose scratch may be reused);
//   wait_*(p, s)  this rank's stream waits until its own word from p >= s.
// Every rank writes into peers' blocks and waits only on its own block, so
// that the host can release its own stream's waits (below). Owners wait for
// the readers' acks before an operation ends, so each operation is
// self-contained. Only copies, reductions and waits are queued; no kernel
// waits for another process's kernel to run, so ranks sharing one GPU are
// correct without MPS (their kernels time-slice).
//
// Reductions: all_reduce by one leader (rank 0), which reduces every rank's
// piece in rank order; every rank copies the leader's result, so results are
// bit-identical on every rank. reduce: the root does the same.
// reduce_scatter: each rank reduces its own block in rank order.
//
// Registered buffers (add_region): where an operation's buffers lie in
// registered ones on every rank, ranks read each other's buffers in place,
// in one step: post that the own input is ready, read (or reduce) the
// peers', ack, and wait for the peers' acks before the operation ends.
// all_reduce is then one-shot below kTwoShotMin bytes (rank 0 reduces all,
// the others copy its result) and two-shot from there (each rank reduces
// its 1/n slice from every rank's input, then copies the others' slices).
// Every element is still reduced once, in rank order: results stay
// bit-identical on every rank and equal to the unregistered path's.
//
// Mismatched calls: each operation starts with every rank writing its call's
// signature (sequence number, hash of kind, dtype, count, root, op) into every
// peer's block and its stream checking the peers' (a one-thread kernel):
// on a difference it sets its error word and releases its own waits.
//
// Bounded: a watchdog thread follows the enqueued operations (an event at
// each one's start and end). When one has ended with the error word set, has
// not ended `timeout` after its start was reached, a peer's process has
// ended, the communicator was aborted, or a peer reported a failure, it writes a value above every step into
// its own flag words (its stream's waits all pass: the outputs are then
// undefined, as with NCCL), tells the peers (their error word), completes
// the operation with the error and reports it (the communicator's async
// error). The stream is never left waiting.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "algorithm/op.h"
#include "common/gpu_runtime.h"
#include "common/status.h"
#include "transport/transport.h"

namespace omniccl::algo {

/// One rank's block of a v-variant: sent to or received from `peer`.
struct DevicePart {
  int peer = 0;
  const char* src = nullptr;  ///< a send's data
  char* dst = nullptr;        ///< a receive's destination
  uint64_t bytes = 0;
};

/// One operation on CUDA tensors, as the collective layer describes it.
struct DeviceCall {
  OpKind kind = OpKind::kAllReduce;
  DType dtype = DType::kFloat32;
  /// The element operation (SUM for AVG and PREMUL_SUM).
  RedOp op = RedOp::kSum;
  bool average = false;  ///< AVG: divide the sum by the rank count
  double premul = 0;     ///< PREMUL_SUM: each input times this first (0: none)
  int root = -1;
  /// Elements per rank block: all_reduce/broadcast/reduce the tensor's count;
  /// all_gather, gather, reduce_scatter, scatter and all_to_all the count of
  /// one rank's block.
  uint64_t count = 0;
  const char* send = nullptr;
  char* recv = nullptr;
  GpuRuntime::Stream stream = nullptr;
  int64_t timeout_ms = 0;
  /// The v-variants (all_gatherv, all_to_allv, gatherv, scatterv): the
  /// blocks this rank sends and receives (its own block in both, with its
  /// own rank as peer), moved as messages over the point-to-point slots.
  std::vector<DevicePart> sends, recvs;
};

/// A point-to-point transfer on CUDA tensors: matched in order per pair of
/// ranks (as NCCL's send/recv), sizes and tags checked on the receiver's
/// stream.
struct DeviceP2P {
  bool is_send = true;
  bool synchronous = false;  ///< ssend: completes once the receiver has the last piece
  int peer = 0;
  int tag = 0;
  uint64_t bytes = 0;
  char* buf = nullptr;
  GpuRuntime::Stream stream = nullptr;
  int64_t timeout_ms = 0;
};

/// A buffer registered on every rank (occl_comm_window_register): operations
/// whose buffers lie in registered ones on every rank read the peers' data
/// in place, instead of through the peers' scratch buffers.
struct DeviceRegion {
  uint32_t id = 0;  ///< assigned by add_region, the same on every rank
  const char* base = nullptr;
  uint64_t bytes = 0;
  /// Every rank's buffer as mapped here (this rank's: base).
  std::vector<char*> at;
};

/// Completes one enqueued operation: kSuccess or the error and its message.
using DeviceDone = std::function<void(Status, const std::string&)>;

class DeviceEngine {
 public:
  /// `on_fail` records an error as the communicator's (any thread).
  DeviceEngine(transport::DeviceWindow& window, GpuRuntime& rt, int rank, int size,
               std::function<void(Status, const std::string&)> on_fail);
  /// Releases this rank's stream waits if operations are still pending,
  /// waits (bounded) until its streams have passed them, stops the watchdog.
  ~DeviceEngine();
  DeviceEngine(const DeviceEngine&) = delete;
  DeviceEngine& operator=(const DeviceEngine&) = delete;

  /// Whether `kind` on tensors of `device` runs here (else: the staged path).
  bool accepts(OpKind kind, int device) const;
  /// Enqueues the operation on call.stream; `done` (may be empty) runs on the
  /// watchdog thread once the stream has passed it or it failed. Throws
  /// Error(kCommFailed) once an operation has failed.
  void enqueue(const DeviceCall& call, DeviceDone done);
  /// Enqueues a send or receive on call.stream (as enqueue). A sender writes
  /// its pieces straight into the receiver's slot for it and waits for the
  /// receiver's ack of the slot's previous piece: a send larger than one slot
  /// (p2p_slot() bytes) ends only as its receiver takes it.
  void enqueue_p2p(const DeviceP2P& call, DeviceDone done);
  /// Fails every pending operation with kAborted (occl_comm_abort).
  void abort();
  /// Adds a registered buffer (the same on every rank, in the same order);
  /// returns its id.
  uint32_t add_region(DeviceRegion r);
  /// Takes region `id` out once no operation enqueued before may still use
  /// it (waits for them, at most timeout_ms: kTimeout); returns it, for its
  /// mappings to be given back. Throws kInvalidArgument for an unknown id.
  DeviceRegion remove_region(uint32_t id, int64_t timeout_ms);
  /// How many buffers are registered.
  size_t regions() const;
  /// Flag steps enqueued so far (every rank numbers them alike): how the
  /// operations were split, which tests compare between the paths.
  uint64_t steps() const {
    std::lock_guard lock(mu_);
    return step_;
  }
  /// The device the window's memory is on.
  int device() const { return window_.device(); }

  /// The flag words, as laid out in each block: the error word, then per
  /// peer the collectives' posted, acked and signature words, the
  /// point-to-point posted, acked and message words, and the word a peer
  /// sets when it leaves in order (its part of every operation done).
  static constexpr size_t kErrorWord = 0;
  static size_t flag_words(int size) { return 1 + 7 * size_t(size); }
  size_t posted_word(int from) const { return word(0, from); }
  size_t acked_word(int from) const { return word(1, from); }
  size_t sig_word(int from) const { return word(2, from); }
  size_t p2p_posted_word(int from) const { return word(3, from); }
  size_t p2p_acked_word(int from) const { return word(4, from); }
  size_t p2p_meta_word(int from) const { return word(5, from); }
  size_t bye_word(int from) const { return word(6, from); }
  /// The scratch bytes collectives move their pieces through (the first
  /// half of each block's scratch); the second half holds one slot per
  /// sender for point-to-point pieces.
  size_t coll_bytes() const { return window_.scratch_bytes() / 2 / 256 * 256; }
  size_t p2p_slot() const { return window_.scratch_bytes() / 2 / size_t(size_) / 256 * 256; }
  /// Receiver r's slot for pieces from `sender`, as mapped here.
  char* p2p_slot_of(int r, int sender) const { return window_.scratch(r) + coll_bytes() + size_t(sender) * p2p_slot(); }
  /// Above every step: what a released wait reads.
  static constexpr uint64_t kReleased = uint64_t{1} << 62;
  /// Registered all_reduce of this many bytes and more is two-shot.
  static constexpr uint64_t kTwoShotMin = uint64_t{256} << 10;

 private:
  size_t word(int kind, int from) const { return 1 + size_t(kind) * size_t(size_) + size_t(from); }
  struct Pending {
    uint64_t seq = 0;
    int peer = -1;  ///< point-to-point: the peer (-1: a collective)
    uint32_t sig = 0;
    std::string what;  ///< "all_reduce #3 (1024 float32)"
    GpuRuntime::Event begin = nullptr;
    GpuRuntime::Event end = nullptr;
    std::chrono::steady_clock::time_point started{};  ///< when begin was seen passed (epoch: not yet)
    int64_t timeout_ms = 0;
    DeviceDone done;
  };
  class Run;  // one operation's enqueueing (device_engine.cc)
  /// Where the peers' buffers of an operation on registered buffers lie
  /// (on = false: through the scratch buffers).
  struct Direct {
    bool on = false;
    std::vector<const char*> send;
    std::vector<char*> recv;
    uint64_t tag = 0;  ///< which regions and offsets, for the signature
  };
  Direct direct_for(const DeviceCall& c) const;
  const DeviceRegion* region_of(const void* p, uint64_t bytes) const;

  void check_signatures(const Pending& p, GpuRuntime::Stream stream);
  void p2p_send(const DeviceP2P& c);
  void p2p_recv(const DeviceP2P& c, uint64_t meta);
  void send_piece(int peer, const char* src, size_t bytes, GpuRuntime::Stream stream);
  void recv_piece(int peer, char* dst, size_t bytes, GpuRuntime::Stream stream);
  void expect_message(int peer, uint64_t meta, GpuRuntime::Stream stream);
  void exchange(const DeviceCall& c);
  void track(Pending p, GpuRuntime::Stream stream);
  void watch();
  bool check_front(Pending& p);
  bool check_error_word(const Pending& p);
  std::string missing(const Pending& p);
  void fail_all(Status st, const std::string& message, bool tell_peers);
  void release_own_waits();
  int dead_peer();
  void leave_in_order();
  GpuRuntime::Event take_event();

  transport::DeviceWindow& window_;
  GpuRuntime& rt_;
  int rank_;
  int size_;
  std::function<void(Status, const std::string&)> on_fail_;
  uint64_t step_ = 0;  ///< the last step enqueued (enqueue holds mu_)
  uint64_t seq_ = 0;   ///< the last collective enqueued
  /// Point-to-point counters per peer: pieces and messages sent and received.
  std::vector<uint64_t> send_steps_, recv_steps_, send_msgs_, recv_msgs_;
  std::vector<DeviceRegion> regions_;
  uint32_t region_ids_ = 0;
  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::deque<Pending> pending_;
  std::vector<GpuRuntime::Event> free_events_;
  std::vector<GpuRuntime::Event> draining_;  ///< of failed operations: destroyed once passed
  Status failed_ = Status::kSuccess;
  std::string failed_message_;
  bool stop_ = false;
  bool aborted_ = false;
  std::thread watchdog_;
};

}  // namespace omniccl::algo
