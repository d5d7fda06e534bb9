// Mesh: every rank's connections to every other rank of one communicator.
//
// Each pair of ranks has
//   - a control socket (abstract unix socket on one host, TCP across hosts):
//     liveness (EOF = the peer exited), error notices, doorbells for
//     shared-memory waits, and status queries used to name stalled ranks;
//   - a data Link from the transport the registry chose for the pair
//     (registry.h): the mesh hands each transport the endpoints, the
//     sockets it asks for and a doorbell, and knows nothing of its links'
//     insides.
// Waiting never burns a core: callers spin briefly, yield, then sleep in
// poll() on the control sockets and links' descriptors (Mesh::sleep), or on
// a futex word a transport offers (Mesh::sleep_on_futex).
#pragma once

#include <poll.h>

#include <atomic>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <span>
#include <string>
#include <vector>

#include "common/fd.h"
#include "common/shared_memory.h"
#include "common/status.h"
#include "common/time.h"
#include "transport/registry.h"
#include "transport/transport.h"

namespace omniccl::transport {

/// An error another rank reported over its control socket (not re-broadcast).
class PeerReportedError : public Error {
 public:
  using Error::Error;
};

/// A collective withdrawn on this rank because a peer rejected its
/// arguments: every link is back in step, so the communicator stays usable
/// (the caller does not mark it failed).
class CallWithdrawn : public PeerReportedError {
 public:
  using PeerReportedError::PeerReportedError;
};

/// Thrown inside a step (not an Error: the engine catches it) when the
/// collective running, number `seq`, turns out to be rejected by a peer:
/// its notice arrived, or its withdrawal mark came in place of a message.
struct RejectedCall {
  uint64_t seq = 0;
  std::string why;
  int by = -1;  ///< the rank that rejected it: its notice's sender, or a withdrawal mark's root
};

/// What a peer answered to a status query: the operation it is in.
struct PeerAnswer {
  bool answered = false;
  uint64_t seq = 0;
  std::string desc;       ///< "all_reduce #7 (ring)"
  std::string signature;  ///< opaque signature text (see OpStatus)
};

/// Exchanges one blob per member and returns all of them in member order.
using AllGatherFn = std::function<std::vector<std::string>(const std::string&)>;

struct MeshOptions {
  int rank = 0;
  int size = 1;
  uint64_t session = 0;  ///< unique per communicator; names sockets and segments
  std::string tcp_ip;    ///< IP to listen on for TCP
  /// Every transport's settings, and the one forced.
  TransportOptions transports;
  /// The transports to choose from (a test may add its own).
  std::span<const TransportFactory> table = transport_table();
  /// Bytes of the block shared by this rank and the peers of its host that
  /// it reaches through shared memory (host_shared); 0: none.
  size_t host_shared_bytes = 0;
  /// This rank's slicing settings, sent in its record (rank 0's hold).
  StagedSlicing slicing;
  Deadline deadline = Deadline::never();
  /// Called often (every <= 100 ms) while create() waits for peers to
  /// connect, to accept, or to be ready; throws to end the setup at once when a member is
  /// known to be gone (its rendezvous connection or its parent
  /// communicator's control socket closed). Empty: no check.
  std::function<void()> check_peers;
  /// The same for the setup barrier, where some members may be done and
  /// have closed what check_peers watches; empty: check_peers.
  std::function<void()> check_ready;
  /// The job token: every setup connection proves it (transport/auth.h).
  /// Empty: no authentication (hello only).
  std::string token;
};

class Mesh {
 public:
  /// Builds the mesh, collective over all members, in four parts: exchange
  /// (listen, then swap endpoints through `exchange` and choose a transport
  /// per peer from the registry, logged at INFO), connect (control sockets,
  /// and data sockets for transports that need them), make links (each
  /// transport's factory), barrier (every peer is ready).
  static std::unique_ptr<Mesh> create(const MeshOptions& opts, const AllGatherFn& exchange);
  ~Mesh();
  Mesh(const Mesh&) = delete;
  Mesh& operator=(const Mesh&) = delete;

  int rank() const { return rank_; }
  int size() const { return size_; }
  /// Data link to peer (peer != rank).
  Link& link(int peer) { return *links_[peer]; }
  /// "self" (1 rank), "shm", "tcp" or "mixed".
  const char* transport_name() const { return transport_name_; }
  /// Whether some rank had a GPU in use when it joined (Endpoint::gpu): the
  /// same answer on every rank.
  bool any_rank_uses_gpu() const { return any_gpu_; }
  /// How large calls are sliced: rank 0's settings, on every rank.
  const StagedSlicing& slicing() const { return slicing_; }
  /// Ranks of this mesh on this host, this one included (whatever the link).
  int local_size() const { return local_size_; }
  /// Distinct CPUs the ranks of this mesh on this host may run on between
  /// them: the union of their affinity masks, swapped at setup (a launcher
  /// that binds each rank to a core of its own gives each a one-CPU mask, and
  /// the ranks still have a core each). local_size() > local_cpus(): the
  /// ranks of this host outnumber their cores.
  int local_cpus() const { return local_cpus_; }
  /// Whether the ranks of some host of this mesh outnumber their cores (as
  /// local_size() > local_cpus() judges it there), from the records every
  /// rank got at setup: the same on every rank, so choices that all ranks
  /// must share may depend on it.
  bool any_host_oversubscribed() const { return any_host_oversubscribed_; }
  /// The block of MeshOptions::host_shared_bytes (zeroed when made) that
  /// this rank shares with the peers of its host that it reaches through
  /// shared memory (Transport::shares_host_memory): made by the
  /// lowest-ranked of them, mapped by the others; null without such peers.
  /// host_leader(): that member is this rank.
  void* host_shared() const { return host_block_ ? host_block_->data() : nullptr; }
  bool host_leader() const { return host_leader_; }
  /// Every rank's device memory, when a device transport joins every pair
  /// (CUDA tensors then move directly: algorithm/device/); null otherwise.
  DeviceWindow* device_window() const { return device_window_.get(); }
  /// Description of a peer for messages: "rank 3 (pid 1234 on hostA)".
  std::string describe(int peer) const;

  /// Describes the operation in progress for peers' status queries:
  /// returns {sequence number, "all_reduce #7 (ring)", signature text}.
  /// Called only when a query arrives (on the thread that sleeps), so
  /// starting an operation costs nothing.
  struct OpStatus {
    uint64_t seq = 0;
    std::string desc;
    std::string signature;  ///< lets peers detect mismatched calls; "" = none
  };
  void set_op_describer(std::function<OpStatus()> describer) { describer_ = std::move(describer); }
  /// Throws kPeerFailure if peer has left (destroyed its communicator) or
  /// failed (its control socket closed without goodbye), and the data link
  /// cannot tell by itself (a TCP link's EOF comes after the bytes still in
  /// flight). A departure is an error only for a wait that still needs the
  /// peer: callers ask this about the peers of transfers that are still
  /// waiting after a progress pass that followed the notice (Mesh::sleep), so
  /// whatever the peer delivered before it left has been consumed first.
  void check_peer(int peer);
  /// throw_if_failed, then the first peer noticed to have failed (closed
  /// without goodbye, whatever the link): for splits, which need every
  /// member, and for explaining a timeout.
  void throw_if_peer_failed();
  /// Sleeps in poll() until a control message, a TCP link event in `fds`,
  /// a wake() or timeout_ms, and handles control messages. A peer's error
  /// notice does not throw here: it becomes the pending error
  /// (throw_if_failed), so data that already arrived can still complete the
  /// operation it belongs to; a closed connection marks its peer gone
  /// (check_peer). Throws only kAborted.
  void sleep(std::vector<pollfd>& fds, int timeout_ms);
  /// Whether this rank has a futex word that its links can wake (one of
  /// its transports has one: Transport::wake_word).
  bool sleeps_on_futex() const { return wake_word_ != nullptr; }
  /// The futex word's value: read before arming links with WakeBy::kFutex,
  /// then handed to sleep_on_futex.
  uint32_t futex_seq() const;
  /// Sleeps in FUTEX_WAIT while the futex word still holds `seq` (a link's
  /// peer or wake() bumps it), at most timeout_ms. When it was not woken,
  /// then handles what arrived on the control sockets as sleep() does
  /// (without waiting for it: keep timeout_ms short, so that notices and a
  /// peer's death are seen soon). Throws only kAborted.
  void sleep_on_futex(uint32_t seq, int timeout_ms);
  /// Throws the first error reported on the control sockets (an error
  /// notice, a heartbeat watch) or kAborted, if any. A peer that left is not
  /// one by itself (check_peer, throw_if_peer_failed).
  void throw_if_failed();
  /// Whether a peer may have sent a notice (an error report, a rejected
  /// call) that no wait has read yet. A peer that shares this rank's host
  /// block bumps this rank's word there after each notice, so the check is
  /// one load; with a peer elsewhere it is always true (its control socket
  /// has to be read). Operations ask it before they start (mesh_notices.cc).
  bool notice_pending() const {
    return poll_notices_ || rejections_waiting_ ||
           (notice_word_ != nullptr && notice_word_->load(std::memory_order_relaxed) != notices_seen_);
  }
  /// Reads the control sockets without waiting, then throws a peer's error
  /// (throw_if_failed). A peer's rejection of a collective numbered <=
  /// done_seq came after this rank's call had completed (its part was only
  /// to send): it is logged and dropped, the peer having dropped the data.
  void take_notices(uint64_t done_seq);
  /// This rank rejected collective number `seq` for its arguments before
  /// sending anything (`why` says so, naming this rank): tells every peer,
  /// whose call `seq` is then withdrawn with `why`, and remembers it, so
  /// that a peer's message of that call is dropped (withdrawn).
  void reject_call(uint64_t seq, const std::string& why);
  /// Throws RejectedCall when a peer rejected collective `seq` (the one
  /// running) and this rank did not reject it too; drops rejections of
  /// earlier calls as take_notices does.
  void throw_if_rejected(uint64_t seq);
  /// After a wait (the call's step has completed): reads the control
  /// sockets without waiting, then throw_if_rejected(seq). A rank whose part
  /// was only to send waited for room, and the receiver that rejected the
  /// call made it by dropping the data: the call fails too.
  void hear_rejection(uint64_t seq);
  /// What a peer said when it rejected collective `seq`, or nullptr.
  const std::string* peer_rejection(uint64_t seq) const;
  /// This rank withdrew collective `seq` (a peer rejected it): its messages
  /// that peers still send are dropped from here on (withdrawn).
  void note_withdrawn(uint64_t seq);
  /// Whether collective `seq` was rejected by this rank or withdrawn here:
  /// a message of it that arrives later is dropped, not a mismatch.
  bool withdrawn(uint64_t seq) const { return own_rejections_.count(seq) != 0 || withdrawn_.count(seq) != 0; }
  /// From a thread other than the one running operations: the operation
  /// running fails with status/message at its next wait (throw_if_failed,
  /// as an error of this rank, so every peer is told).
  void fail_from_another_thread(Status status, const std::string& message);
  /// Asks every peer what it is doing (answers arrive during sleep()).
  void send_queries(uint64_t seq);
  /// Answers received since the last send_queries, by rank.
  const std::vector<PeerAnswer>& answers() const { return answers_; }
  /// Asks every peer what it is doing, then throws Error(kTimeout) naming
  /// the ranks that did not arrive at operation `seq`.
  [[noreturn]] void fail_timeout(const std::string& what, uint64_t seq, const std::vector<int>& waiting_on);
  /// Bytes of the host block for `user_bytes` of MeshOptions::host_shared_bytes
  /// and `size` ranks: those, then a notice word per rank (mesh_notices.cc).
  static size_t host_block_bytes(size_t user_bytes, int size);
  /// Tells every peer (best effort, never blocks long) that this rank failed
  /// with status/message, so that they fail too instead of waiting.
  void broadcast_error(Status status, const std::string& message);
  /// Interrupts a sleep() or sleep_on_futex() on another thread (abort).
  void wake();
  /// Set by abort: sleeping and progressing operations throw kAborted.
  void set_aborted() {
    aborted_.store(true);
    wake();
  }
  bool aborted() const { return aborted_.load(std::memory_order_relaxed); }
  /// When destroyed, close the connections without BYE: the peers then
  /// report that this rank failed (occl_comm_abort), not that it left.
  void leave_without_goodbye() { no_goodbye_.store(true); }
  /// When destroyed, say goodbye and make sure it and the last data arrive
  /// (shut the writing sides, drop what still arrives, wait a bounded time
  /// for the peers' acknowledgement) even though set_aborted was called to
  /// stop the work still queued: occl_comm_destroy of a healthy
  /// communicator. Without it an aborted mesh only says goodbye.
  void leave_in_order() { in_order_.store(true); }

  /// Liveness while this mesh's members create another communicator (a
  /// split; mesh_liveness.cc). From now until stop_heartbeat(), a thread
  /// sends a heartbeat tagged `generation` on every control socket several
  /// times per timeout_ms, and sleep() watches the peers': a peer whose
  /// heartbeat of this generation arrived once, is expected
  /// (expect_heartbeats), and then stays silent for timeout_ms becomes the
  /// pending error "rank P (pid ...) stopped responding during <what>". A
  /// peer that has not sent one is not in the split yet: on this host, one
  /// whose process is stopped (SIGSTOP, a debugger: /proc/PID/stat) for
  /// timeout_ms is named too; a live one (busy elsewhere), or one on
  /// another host, is left to the deadline. timeout_ms 0: nothing.
  /// Only the thread that issues operations calls these.
  void start_heartbeat(uint64_t generation, int64_t timeout_ms, const std::string& what);
  /// Watches only these peers from now on (the new communicator's members;
  /// the others may finish the split and go quiet).
  void expect_heartbeats(const std::vector<int>& peers);
  /// Ends the heartbeat thread and the watch.
  void stop_heartbeat();

  struct Peer;

 private:
  Mesh() = default;
  struct Setup;  // what the parts of create() hand on (mesh.cc)
  Endpoint own_endpoint(Setup& s);
  void exchange_endpoints(Setup& s, const AllGatherFn& exchange);
  void add_peer(Setup& s, int p);
  void note_cpus(const std::string& own_host, const std::string& own_cpus,
                 const std::map<std::string, std::vector<std::string>>& cpus_by_host);
  void adopt_slicing(const StagedSlicing& own, const StagedSlicing& rank0);
  int host_leader_rank(const Setup& s) const;
  void connect_peers(Setup& s);
  void accept_peers(Setup& s);
  struct PendingHello;  // mesh.cc
  void take_connection(Setup& s, int listen_fd, std::vector<PendingHello>& pending, uint64_t& dropped);
  enum class HelloState { kPending, kAccepted, kDropped };
  HelloState settle_hello(Setup& s, PendingHello& c, bool readable);
  void log_dropped(const std::string& why) const;
  void make_links(Setup& s);
  void open_device_window(Setup& s);
  void agree_on_device_window();
  /// After the exchange: the host's leader makes the shared block.
  void make_host_block(Setup& s);
  /// After connecting: the others map it.
  void open_host_block(Setup& s);
  void ready_barrier(const Deadline& deadline, const std::function<void()>& check_peers);
  void send_control(int peer, char type, const std::string& payload, bool best_effort);
  void doorbell(int peer);
  /// Throws kPeerFailure saying how peer went (failed or destroyed).
  [[noreturn]] void fail_departed(int peer);
  void handle_control(int peer);
  void process_message(int peer, char type, const std::string& payload);
  void note_heartbeat(int peer, const std::string& payload);
  /// The notice words in the host block (mesh_notices.cc).
  /// on_block[p]: peer p maps the host block; user_bytes: its part before
  /// the words (MeshOptions::host_shared_bytes).
  void setup_notices(const std::vector<bool>& on_block, size_t user_bytes);
  void ring_notice(int peer);
  void note_rejection(int peer, const std::string& payload);
  void adopt_foreign_failure();
  std::vector<int> control_fds() const;
  void check_heartbeats();
  /// The pid of a peer on this host as this process sees it (its control
  /// socket's credentials; 0 when not on this host or unknown).
  int local_pid(int peer) const;
  /// Whether a peer that has not entered the split has been stopped (as
  /// /proc says) for the liveness timeout; sets the pending error then.
  bool stopped_outside(int peer, Clock::time_point now);

  int rank_ = 0;
  int size_ = 1;
  int local_size_ = 1;
  int local_cpus_ = 1;
  bool any_host_oversubscribed_ = false;
  const char* transport_name_ = "self";
  bool any_gpu_ = false;
  StagedSlicing slicing_;
  std::vector<std::unique_ptr<Peer>> peers_;
  /// This communicator's transports; declared before links_, which may use
  /// them, so that they outlive the links.
  std::vector<std::unique_ptr<Transport>> transports_;
  std::vector<std::unique_ptr<Link>> links_;
  std::atomic<uint32_t>* wake_word_ = nullptr;  ///< Transport::wake_word, if one has it
  std::unique_ptr<SharedMapping> host_block_;
  bool host_leader_ = false;
  std::unique_ptr<DeviceWindow> device_window_;
  UniqueFd wake_fd_;
  std::atomic<bool> aborted_{false};
  std::atomic<bool> no_goodbye_{false};
  std::atomic<bool> in_order_{false};
  std::function<OpStatus()> describer_;
  std::vector<PeerAnswer> answers_;
  struct Liveness;  // mesh_liveness.cc
  std::unique_ptr<Liveness> liveness_;
  std::mutex send_mu_;        ///< control sends, while a heartbeat thread runs
  bool send_locked_ = false;  ///< (set and cleared with no heartbeat thread running)
  // First error seen on the control sockets (status kSuccess = none).
  Status pending_status_ = Status::kSuccess;
  std::string pending_message_;
  bool pending_remote_ = false;
  int first_failed_ = -1;  ///< the first peer whose control socket closed without goodbye
  // Notices (mesh_notices.cc): this rank's word in the host block and the
  // peers' (nullptr: not on this block), the value last read, whether some
  // peer can only be heard on its socket.
  std::atomic<uint32_t>* notice_word_ = nullptr;
  std::vector<std::atomic<uint32_t>*> peer_notice_word_;
  uint32_t notices_seen_ = 0;
  bool poll_notices_ = false;
  // Collectives rejected for their arguments, by number: by this rank, and
  // by peers (for calls this rank has not rejected), with the rejecting
  // rank and its message. Only the numbers of the calls this rank rejected
  // or withdrew are asked for later (withdrawn()). Each is bounded: a
  // notice or a late message names a call only a few calls back.
  struct PeerRejection {
    int by = -1;  ///< the rank that sent the notice: the one that rejected the call
    std::string why;
  };
  std::set<uint64_t> own_rejections_;
  std::map<uint64_t, PeerRejection> peer_rejections_;
  bool rejections_waiting_ = false;  ///< peer_rejections_ is not empty
  std::set<uint64_t> withdrawn_;     ///< calls withdrawn here (note_withdrawn)
  /// Drops the peers' rejections of collectives numbered <= seq (calls this
  /// rank completed before it heard of them), logging each.
  void drop_rejections_upto(uint64_t seq);
  std::atomic<bool> foreign_failed_{false};
  std::mutex foreign_mu_;
  Status foreign_status_ = Status::kSuccess;
  std::string foreign_message_;
};

}  // namespace omniccl::transport
