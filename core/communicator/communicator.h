// Communicator: a group of ranks, its mesh, its operation queue and its
// sequence numbers.
//
// Operations run one at a time in the order they were issued: blocking calls
// run on the caller's thread once the queue of asynchronous ones is empty;
// asynchronous calls run on one worker thread per communicator. After an
// operation fails (timeout, peer failure, mismatch) the byte streams between
// ranks are no longer in step, so the communicator refuses later operations
// with kCommFailed and the first error's message.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "algorithm/device/device_engine.h"
#include "algorithm/engine.h"
#include "algorithm/registry.h"
#include "bootstrap/rendezvous.h"
#include "common/time.h"
#include "communicator/issuer.h"
#include "communicator/p2p_match.h"
#include "communicator/staged_profile.h"
#include "communicator/work.h"
#include "tensor/tensor.h"
#include "transport/mesh.h"
#include "tuning/copy_calibration.h"
#include "tuning/op_tuner.h"
#include "tuning/planner.h"
#include "tuning/tuning.h"

namespace omniccl {

namespace bootstrap {
class TcpStoreServer;
}

/// Resolved communicator options (config struct over environment over defaults).
struct CommConfig {
  int64_t timeout_ms = 600000;
  std::string transport = "auto";
  std::string algorithm;  ///< empty: tuned
  std::string algorithm_source = "OMNICCL_ALGO";
  /// OMNICCL_SHM_SINGLE_COPY=0/1; nullopt (auto): decided by calibration
  /// (tuning/copy_calibration.h) when a communicator with shared memory is created.
  std::optional<bool> single_copy;
  /// What this communicator's shared-memory links may move by reference;
  /// set when it is created (nullopt: none, no shared memory possible).
  std::optional<SingleCopyChoice> copy_choice;
  bool blocking = true;  ///< occl_config_t.blocking: creation waits until ready
  int tcp_streams = 0;   ///< OMNICCL_TCP_STREAMS: data sockets per TCP peer; 0: auto
  /// OMNICCL_TCP_CONGESTION: "auto", "system" or an algorithm's name
  /// (transport::apply_congestion).
  std::string tcp_congestion = "auto";
  bool small_path = true;  ///< OMNICCL_SMALL_PATH: small steps skip the engine's step state
  /// OMNICCL_SHM_SPLIT_COPY: a payload this rank reads by reference is copied
  /// half by its sender (process_vm_writev) while this rank copies the rest.
  bool split_copy = true;
  /// OMNICCL_DEVICE_TRANSPORT: "auto", "cuda_ipc" or "staged" (how CUDA
  /// tensors move between ranks of one host: transport/cuda_ipc/).
  std::string device_transport = "auto";
  /// OMNICCL_CUDA_IPC_BUFFER: each rank's device scratch buffer, bytes.
  size_t cuda_ipc_buffer = size_t{4} << 20;
  /// OMNICCL_STAGED_SLICE and OMNICCL_STAGED_GPU_REDUCE: how large calls
  /// are sliced where some rank uses a GPU (rank 0's settings hold).
  transport::StagedSlicing slicing;
  /// OMNICCL_STAGED_PROFILE: time the phases of staged calls (StagedProfile).
  bool staged_profile = false;

  /// Defaults overridden by OMNICCL_TIMEOUT / OMNICCL_TRANSPORT / OMNICCL_ALGO /
  /// OMNICCL_SHM_SINGLE_COPY / OMNICCL_TCP_STREAMS / OMNICCL_TCP_CONGESTION /
  /// OMNICCL_SMALL_PATH / OMNICCL_SHM_SPLIT_COPY / OMNICCL_DEVICE_TRANSPORT /
  /// OMNICCL_CUDA_IPC_BUFFER / OMNICCL_STAGED_SLICE / OMNICCL_STAGED_GPU_REDUCE /
  /// OMNICCL_STAGED_PROFILE.
  static CommConfig from_environment();
  /// Validates every field (throws kInvalidArgument naming the bad one).
  void validate() const;
};

/// How one operation is issued: the C ABI's work argument (async) and its
/// occl_options_t.
struct CallOptions {
  bool async = false;
  int64_t timeout_ms = 0;   ///< > 0: this call's deadline; else the communicator's
  void* stream = nullptr;   ///< CUDA stream for CUDA tensors (unused on CPU)
  InterruptHook interrupt;  ///< blocking calls only: asked while they wait
};

/// A point-to-point operation as queued (see Communicator::submit_p2p).
struct P2POp {
  bool is_send = true;
  int peer = -1;  ///< a recv's source may be kAnySource (p2p_match.h)
  TensorView tensor;
  int64_t timeout_ms = 0;        ///< > 0: this operation's deadline; else the communicator's
  int tag = 0;                   ///< >= 0; a recv's may be kAnyTag
  RecvStatus* status = nullptr;  ///< blocking recv: filled when it ends (also on error)
  /// kNone: a send or recv (is_send). Else a probe (is_send false, tensor
  /// unused): kProbe waits for a matching message; kIprobe reads what has
  /// arrived and ends (its status's source is kAnySource if none matched).
  enum class Probe : uint8_t { kNone, kProbe, kIprobe };
  Probe probe = Probe::kNone;
  /// A send only: synchronous (MPI_Ssend), complete once a receive has matched it.
  bool synchronous = false;
  /// Set by submit_p2p: the caller waits for it (call.async false).
  bool blocking = false;
  /// Set: not a transfer but MPI_Cancel of this operation (see P2PMatcher::cancel).
  std::shared_ptr<Work> cancel;
  /// A probe only: a matched probe (MPI_Mprobe), which takes the message it finds.
  bool claim = false;
  /// A recv only, >= kFirstMessage: MPI_Mrecv of the message a matched probe took.
  uint64_t mrecv = 0;
};

class Communicator {
 public:
  /// Creates a communicator through a rendezvous; collective over all ranks.
  /// Setting *cancel (if given) ends it promptly with kAborted.
  static std::shared_ptr<Communicator> create(const bootstrap::RendezvousSpec& spec, const CommConfig& config,
                                              const std::atomic<bool>* cancel = nullptr);
  ~Communicator();
  Communicator(const Communicator&) = delete;
  Communicator& operator=(const Communicator&) = delete;

  /// occl_comm_split: collective over this communicator; nullptr for
  /// ranks passing a negative color.
  std::shared_ptr<Communicator> split(int color, int key, const CommConfig* config);
  /// The body of split, to run inside an operation on this communicator
  /// (submit); setting *cancel ends it with kAborted (and, as any failed
  /// operation, leaves this communicator unusable).
  std::shared_ptr<Communicator> split_in_op(int color, int key, const CommConfig& config,
                                            const std::atomic<bool>* cancel);
  /// The error that made this communicator unusable (kSuccess if none), with
  /// its message: NCCL's async error. Any thread.
  Status async_error(std::string& message) const;
  /// Throws kAborted after abort, kCommFailed (naming the first error) once
  /// an operation has failed; what every operation checks before it runs.
  void check_usable() const;
  /// check_usable's test: not aborted, no error recorded.
  bool usable() const {
    return !mesh_->aborted() && failed_status_.load(std::memory_order_acquire) == Status::kSuccess;
  }

  int rank() const { return rank_; }
  int size() const { return size_; }
  /// The device path for CUDA tensors (algorithm/device/), or null: CUDA
  /// tensors are then staged through host memory (collective/staging.h).
  algo::DeviceEngine* device_engine() const { return device_.get(); }
  /// occl_comm_window_register: collective; every rank registers a buffer
  /// of its CUDA memory (its own size and place), in the same order. On the
  /// device path, operations whose buffers lie in registered ones on every
  /// rank then read the peers' in place; elsewhere (staged CUDA tensors, CPU
  /// communicators) registering changes nothing and says so in the log.
  /// Returns the handle (never 0). Throws, on every rank alike, when a rank
  /// cannot share its buffer, naming the rank and why; a non-empty
  /// `refused` is this rank's own argument error (it still takes part, so
  /// that its peers fail with it instead of waiting).
  uint64_t register_window(const void* p, size_t bytes, const std::string& refused = {});
  /// occl_comm_window_deregister: collective, in the same order on every
  /// rank; waits (bounded by the timeout) for the operations that may read
  /// the buffer, then unmaps the peers' buffers. `refused` as above.
  void deregister_window(uint64_t handle, const std::string& refused = {});
  const char* transport_name() const { return mesh_->transport_name(); }
  /// Whether large calls run in slices (collective/common.h,
  /// launch_sliced): where some rank had a GPU in use when the communicator
  /// was made, so that CPU-only jobs never pay for it.
  bool slices_large_calls() const { return mesh_->any_rank_uses_gpu(); }
  /// How they are sliced: rank 0's settings, on every rank.
  const transport::StagedSlicing& slicing() const { return mesh_->slicing(); }
  /// The phases of staged calls, summed (OMNICCL_STAGED_PROFILE=1), else nullptr.
  StagedProfile* staged_profile() const { return staged_profile_.get(); }
  const CommConfig& config() const { return config_; }
  void set_timeout(int64_t ms);

  /// Runs fn(engine) in issue order. Blocking (async == false): on this
  /// thread, rethrowing its error, returns nullptr. Async: queued; returns
  /// the Work to wait on: `work` when given (made here otherwise), so that
  /// fn may record in it what a receive got before the worker completes it.
  std::shared_ptr<Work> submit(std::function<void(Engine&)> fn, bool async, std::shared_ptr<Work> work = nullptr);
  /// Marks this thread as the one issuing on the communicator for its
  /// lifetime; a second thread issuing meanwhile gets kInvalidArgument (the
  /// ranks would pair the two threads' operations in different orders and
  /// mix their data). Re-entrant on one thread (split issues internally;
  /// the C API holds one for a whole call), and free of atomic
  /// read-modify-writes when nested or when the thread keeps issuing
  /// (issuer.h). abort() waits for the issuer to leave, so a caller that
  /// holds one may use the communicator without owning a reference to it.
  class IssueGuard {
   public:
    explicit IssueGuard(Communicator& c);
    ~IssueGuard();
    IssueGuard(const IssueGuard&) = delete;
    IssueGuard& operator=(const IssueGuard&) = delete;

   private:
    Communicator& c_;
    Issuer::Entry how_;
  };
  /// The blocking form of submit without a std::function (no allocation):
  /// runs fn(engine) on this thread after queued operations, rethrowing.
  template <typename Fn>
  void run_blocking(Fn& fn, InterruptHook interrupt = {}) {
    run_blocking_ref(OpRef{&fn, [](void* f, Engine& e) { (*static_cast<Fn*>(f))(e); }}, interrupt);
  }
  /// run_blocking for a caller that already holds an IssueGuard on this
  /// communicator on this thread (a collective: the C API's call holds one
  /// for its whole length), without entering the issuer a second time.
  template <typename Fn>
  void run_blocking_issued(Fn& fn, InterruptHook interrupt = {}) {
    // The common case here, so that fn's body joins the caller's (no
    // closure built in memory, no calls through run_issued_ref): nothing
    // queued, the communicator usable (check_usable's test).
    if (idle_.load(std::memory_order_acquire) && usable() && !mesh_->notice_pending()) [[likely]] {
      try {
        fn(engine_);
      } catch (...) {
        op_failed();
      }
      if (failed_status_.load(std::memory_order_acquire) != Status::kSuccess) [[unlikely]] {
        fail_used_meanwhile();
      }
      return;
    }
    run_issued_ref(OpRef{&fn, [](void* f, Engine& e) { (*static_cast<Fn*>(f))(e); }}, interrupt);
  }

  /// A collective call (`call`, e.g. "gatherv") that this rank rejected for
  /// its arguments (`why`) before issuing it: in issue order, takes the
  /// number the call would have had and tells every peer, whose matching
  /// call then fails naming the rejection (a call every rank rejects leaves
  /// every communicator usable). Nothing when the communicator has failed.
  void reject_collective(const char* call, const std::string& why);

  /// Queues a send or recv. Point-to-point operations queued one after
  /// another run as one step (Engine::run_feed), so they progress together;
  /// a blocking one (async == false) waits for its own completion and
  /// rethrows its error.
  /// A blocking one with call.interrupt set that is interrupted aborts the
  /// communicator (the transfer must not outlive the call) and throws
  /// kInterrupted.
  std::shared_ptr<Work> submit_p2p(const P2POp& op, const CallOptions& call);
  /// Inside an operation running on the worker (submit): runs `op` as a
  /// point-to-point step of its own on `engine` (with the point-to-point
  /// operations queued right after it, which join it as they would join a
  /// batch), until it has completed. Returns what a receive got; throws the
  /// operation's error (which, as any failed operation, fails the
  /// communicator). The staged path's send and recv (collective/staging.h)
  /// run this way between their waits for the stream.
  RecvStatus run_p2p_step(Engine& engine, P2POp op);

  /// MPI_Iprobe: reads what point-to-point messages have arrived from the
  /// ranks that could match (source: a rank, kAnySource or kProcNull; tag:
  /// >= 0 or kAnyTag), keeping them as unexpected, and returns the status of
  /// the first matching message in arrival order without receiving it
  /// (bytes: the whole message; elem_bytes: the sender's element size), or
  /// nullopt. A later receive naming that source and tag gets that message.
  /// kProcNull: the PROC_NULL status at once. Blocking call (call.async is
  /// ignored); throws kInvalidArgument for a bad source or tag.
  std::optional<RecvStatus> iprobe(int source, int tag, const CallOptions& call);
  /// MPI_Probe: as iprobe, but waits until a matching message is there
  /// (call.timeout_ms or the communicator's timeout; call.interrupt as a
  /// blocking receive takes it). Throws kMismatch when every rank it could
  /// hear from moved on without a matching send.
  RecvStatus probe(int source, int tag, const CallOptions& call);
  /// MPI_Cancel: cancels `work` if it is a receive still posted or a
  /// synchronous send to this rank itself not yet matched (it then completes
  /// with status kSuccess and RecvStatus::cancelled); else leaves it alone.
  /// Runs in issue order after the operations queued before it. Returns
  /// whether it was cancelled.
  bool cancel(const std::shared_ptr<Work>& work);
  /// MPI_Improbe / MPI_Mprobe: as iprobe / probe, but the message found is
  /// taken out of matching (no other receive or probe gets it) and the
  /// status's `message` names it for mrecv. PROC_NULL: the PROC_NULL status
  /// with message kMessageNoProc.
  std::optional<RecvStatus> improbe(int source, int tag, const CallOptions& call);
  RecvStatus mprobe(int source, int tag, const CallOptions& call);
  /// MPI_Mrecv / MPI_Imrecv: receives message `message` (from improbe or
  /// mprobe on this communicator) into t, as a receive from its source and
  /// tag would (t an upper bound; kTruncated, kMismatch as a recv). A
  /// blocking one (call.async false) fills *status and returns nullptr.
  /// kMessageNoProc: the PROC_NULL status at once. Throws kInvalidArgument
  /// for kMessageNull; a message not held fails the operation with it.
  std::shared_ptr<Work> mrecv(uint64_t message, const TensorView& t, const CallOptions& call, RecvStatus* status);
  /// The status the matched probe gave for `message` (improbe, mprobe: what
  /// mrecv reports before the message is received, as a staged one must),
  /// forgotten by this call; nullopt for a message this communicator does
  /// not hold. Any thread.
  std::optional<RecvStatus> take_claimed(uint64_t message);

  /// Sequence numbers: call only from inside a submitted function.
  uint64_t next_collective_seq() { return ++collective_seq_; }
  uint64_t next_send_seq(int peer) { return ++send_seq_[peer]; }
  uint64_t next_recv_seq(int peer) { return ++recv_seq_[peer]; }
  /// Deadline for an operation starting now.
  Deadline op_deadline() const { return Deadline::after_ms(timeout_ms_.load()); }
  /// The per-operation timeout now in force.
  int64_t timeout_ms() const { return timeout_ms_.load(std::memory_order_relaxed); }
  const AlgoOverride& algo_override() const { return planner_.algo_override(); }
  /// How each operation runs (algorithm, single copy, streaming stores, the
  /// arm it measures): the collectives apply its plan. Call only from inside
  /// a submitted function.
  Planner& planner() { return planner_; }

  /// Reduce ops: built-in values 0..13 (the occl_red_op_t values, which are
  /// RedOp's) or ones from create_premul_sum.
  ReduceSpec reduce_spec(int op) const;
  int create_premul_sum(double scalar);
  void destroy_reduce_op(int op);

  /// Local and bounded: interrupts the running operation, fails queued ones
  /// with kAborted, and waits for the worker to stop. With `as_failure`
  /// (occl_comm_abort) the peers are later told this rank failed, not that it
  /// left in order (no goodbye when the communicator is freed).
  void abort(bool as_failure = false);

 private:
  /// iprobe and probe: checks the arguments, then runs the probe as a
  /// blocking point-to-point operation; the status it filled.
  RecvStatus run_probe(P2POp::Probe kind, int source, int tag, const CallOptions& call, bool claim = false);
  Communicator(int rank, int size, CommConfig config, std::unique_ptr<transport::Mesh> mesh, uint64_t session);
  void worker_loop();
  class QueueFeed;
  /// A non-owning reference to a callable taking the engine.
  struct OpRef {
    void* obj;
    void (*call)(void*, Engine&);
    void operator()(Engine& e) const { call(obj, e); }
  };
  static OpRef ref_of(const std::function<void(Engine&)>& fn) {
    return OpRef{const_cast<std::function<void(Engine&)>*>(&fn),
                 [](void* f, Engine& e) { (*static_cast<const std::function<void(Engine&)>*>(f))(e); }};
  }
  void run_blocking_ref(OpRef fn, InterruptHook interrupt);
  /// run_blocking_ref's body, for a thread that holds the issuer.
  void run_issued_ref(OpRef fn, InterruptHook interrupt);
  /// A second thread issued while another was in a call: fails the
  /// communicator (the ranks may have paired the two threads' operations
  /// differently), including the call running, and throws kInvalidArgument.
  [[noreturn]] void refuse_second_thread();
  /// The operation just run succeeded, but the communicator failed meanwhile
  /// (refuse_second_thread): its result may mix another thread's operation
  /// on a peer; tells every peer and throws.
  [[noreturn]] void fail_used_meanwhile();
  /// Records the first error that makes the communicator unusable.
  void set_failed(Status st, const std::string& message);
  Issuer issuer_;
  void run_one(OpRef fn);
  /// Called in a handler of an operation's failure: records it as the
  /// communicator's error (an allocation failure as kOutOfMemory), rethrows.
  [[noreturn]] void op_failed();
  std::vector<std::string> internal_all_gather(const std::string& mine, const Deadline& deadline);

  int rank_;
  int size_;
  CommConfig config_;
  std::atomic<int64_t> timeout_ms_;
  uint64_t session_;
  std::string tcp_ip_;  ///< address this rank listens on for TCP peers
  std::string token_;   ///< the job token setup connections prove (splits too)
  std::unique_ptr<bootstrap::TcpStoreServer> store_server_;
  std::unique_ptr<transport::Mesh> mesh_;
  /// Collectives on CUDA tensors over the mesh's device window (null without
  /// one); destroyed before the mesh, whose window it uses.
  std::unique_ptr<algo::DeviceEngine> device_;
  std::unique_ptr<StagedProfile> staged_profile_;  ///< logged when destroyed
  /// Registered buffers: handle -> the device engine's region (0: none,
  /// registered where there is no device path).
  std::map<uint64_t, uint32_t> registered_;
  uint64_t registrations_ = 0;
  /// register_window's steps (registration.cc).
  std::vector<std::string> agree(const std::string& mine, const char* what);
  static std::string refusal(const std::string& refused, bool bad, const std::string& why);
  algo::DeviceRegion import_regions(const void* p, size_t bytes, const std::vector<std::string>& records);
  Engine engine_;
  Planner planner_;  ///< used by the operation running only

  /// Point-to-point matching (posted receives, unexpected messages); used
  /// only by the operation running (under exec_mu_, or by the issuer).
  P2PMatcher matcher_;
  /// The statuses of the messages matched probes took and no mrecv has
  /// yet (take_claimed): the matcher is the worker's, these the callers'.
  std::mutex claimed_mu_;
  std::map<uint64_t, RecvStatus> claimed_;

  uint64_t collective_seq_ = 0;
  uint64_t split_count_ = 0;
  std::vector<uint64_t> send_seq_, recv_seq_;

  mutable std::mutex ops_mu_;
  std::map<int, double> premul_ops_;
  int next_op_ = 64;

  /// Held while the worker runs a queued operation, and by abort() (a
  /// blocking call runs with nothing queued, as the issuer, without it).
  /// Unlocking is a plain release store: a
  /// mutex's locked instruction there would wait for the operation's last
  /// shared-memory writes to reach the peer, which the next call need not do.
  /// Contention (abort, several threads on one communicator) is rare: waiters
  /// spin briefly, then yield, then sleep in short naps.
  class ExecLock {
   public:
    void lock() {
      for (unsigned i = 0; held_.exchange(true, std::memory_order_acquire); ++i) {
        while (held_.load(std::memory_order_relaxed)) backoff(i++);
      }
    }
    void unlock() { held_.store(false, std::memory_order_release); }

   private:
    std::atomic<bool> held_{false};
  };
  // Execution: exec_mu_ is held while a queued operation runs; mu_ guards the queue.
  ExecLock exec_mu_;
  std::mutex mu_;
  std::condition_variable cv_;
  struct Task {
    std::function<void(Engine&)> fn;
    std::shared_ptr<Work> work;
    std::optional<P2POp> p2p;  ///< set for send/recv, which run batched
  };
  /// Runs a batch of point-to-point tasks, `task` first (p2p.cc).
  void run_p2p_batch(Task task);
  /// Runs fn under exec_mu_ (run_one) and returns its status and message.
  Status run_captured(const std::function<void(Engine&)>& fn, std::string& message);
  std::deque<Task> queue_;
  bool worker_busy_ = false;
  /// queue_ empty and no worker task running (written under mu_): a blocking
  /// call may then skip mu_ and run.
  std::atomic<bool> idle_{true};
  bool stopping_ = false;
  std::thread worker_;
  /// Written by set_failed (under failed_mu_ for the message); the status
  /// is read without the lock on every operation.
  std::atomic<Status> failed_status_{Status::kSuccess};
  mutable std::mutex failed_mu_;
  std::string failed_message_;
};

}  // namespace omniccl
