#include "communicator/communicator.h"

#include <unistd.h>

#include <algorithm>
#include <bit>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <future>
#include <new>
#include <system_error>
#include <thread>

#include "algorithm/algorithms.h"
#include "bootstrap/store.h"
#include "common/log.h"
#include "common/settings.h"
#include "tuning/tcp_calibration.h"

namespace omniccl {

namespace {

uint64_t mix(uint64_t a, uint64_t b) {
  uint64_t x = a ^ (b + 0x9e3779b97f4a7c15ull + (a << 6) + (a >> 2));
  x ^= x >> 33;
  x *= 0xff51afd7ed558ccdull;
  x ^= x >> 33;
  return x == 0 ? 1 : x;
}

/// TcpOptions::local_streams for a communicator of `size` ranks: the
/// loopback calibration's count where ranks of one host talk over TCP
/// (OMNICCL_TRANSPORT=tcp) and OMNICCL_TCP_STREAMS is auto; else 0.
int local_tcp_streams(const CommConfig& c, int size) {
  return c.tcp_streams == 0 && size > 1 && c.transport == "tcp" ? decide_local_tcp_streams().streams : 0;
}

/// The old ranks of the members of `color` (none for a negative color), in
/// their new order (by key, then old rank), from every rank's "color key"
/// record of a split.
std::vector<int> split_members(const std::vector<std::string>& records, int color) {
  struct Member {
    int key, old_rank;
  };
  std::vector<Member> members;
  for (size_t p = 0; p < records.size(); ++p) {
    int c = 0, k = 0;
    std::istringstream(records[p]) >> c >> k;
    if (color >= 0 && c == color) members.push_back({k, int(p)});
  }
  std::stable_sort(members.begin(), members.end(), [](const Member& a, const Member& b) {
    return a.key != b.key ? a.key < b.key : a.old_rank < b.old_rank;
  });
  std::vector<int> ranks;
  for (const Member& m : members) ranks.push_back(m.old_rank);
  return ranks;
}

/// While a split's new mesh connects: a member that dies closes its control
/// socket of the parent communicator (`mesh`): end the split then, naming it,
/// and tell the other members too (they may be waiting on another rank).
void check_split_members(transport::Mesh& mesh) {
  std::vector<pollfd> none;
  mesh.sleep(none, 0);
  try {
    mesh.throw_if_peer_failed();
  } catch (const transport::PeerReportedError&) {
    throw;
  } catch (const Error& e) {
    if (e.status() != Status::kAborted) mesh.broadcast_error(e.status(), e.what());
    throw;
  }
}

/// What the planner of a communicator with `config` over `mesh` knows.
PlannerSetup planner_setup(const CommConfig& config, const transport::Mesh& mesh, bool oversubscribed) {
  PlannerSetup p;
  p.size = mesh.size();
  if (!config.algorithm.empty()) p.algo_override = AlgoOverride::parse(config.algorithm, config.algorithm_source);
  p.copy = config.copy_choice;
  p.split_copy = config.split_copy;
  p.oversubscribed = oversubscribed;
  p.any_host_oversubscribed = mesh.any_host_oversubscribed();
  p.host = std::launder(static_cast<HostChoices*>(mesh.host_shared()));
  p.host_leader = mesh.host_leader();
  return p;
}

/// The mesh's options for this rank of `size` from `resolved`, whose
/// single-copy choice it settles first: calibrated (or read from the cache)
/// only where there can be links between ranks of one host.
transport::MeshOptions mesh_options(CommConfig& resolved, int rank, int size, uint64_t session) {
  transport::MeshOptions o;
  o.rank = rank;
  o.size = size;
  o.session = session;
  if (!resolved.copy_choice && size > 1 && resolved.transport != "tcp") {
    resolved.copy_choice = decide_single_copy(resolved.single_copy);
  }
  o.transports.forced = resolved.transport;
  o.transports.shm.single_copy = resolved.copy_choice && resolved.copy_choice->any();
  o.transports.tcp.streams = resolved.tcp_streams;
  o.transports.tcp.local_streams = local_tcp_streams(resolved, size);
  o.transports.tcp.congestion = resolved.tcp_congestion;
  o.host_shared_bytes = sizeof(HostChoices);
  return o;
}

}  // namespace

CommConfig CommConfig::from_environment() {
  CommConfig c;
  if (auto v = get_setting("OMNICCL_TIMEOUT")) c.timeout_ms = parse_duration_ms(*v, "OMNICCL_TIMEOUT");
  if (auto v = get_setting("OMNICCL_TRANSPORT")) c.transport = *v;
  if (auto v = get_setting("OMNICCL_ALGO")) c.algorithm = *v;
  if (auto v = get_setting("OMNICCL_SHM_SINGLE_COPY")) {
    check_arg(*v == "0" || *v == "1" || *v == "auto", "OMNICCL_SHM_SINGLE_COPY is '", *v, "'; use 0, 1 or auto");
    if (*v != "auto") c.single_copy = *v == "1";
  }
  if (auto v = get_setting("OMNICCL_TCP_STREAMS"); v && *v != "auto") {
    char* end = nullptr;
    const long n = std::strtol(v->c_str(), &end, 10);
    check_arg(*end == '\0' && n >= 1 && n <= transport::kMaxTcpStreams, "OMNICCL_TCP_STREAMS is '", *v,
              "'; use a number of sockets from 1 to ", transport::kMaxTcpStreams, ", or auto");
    c.tcp_streams = static_cast<int>(n);
  }
  if (auto v = get_setting("OMNICCL_TCP_CONGESTION")) {
    transport::check_congestion_setting(*v);
    c.tcp_congestion = *v;
  }
  if (auto v = get_setting("OMNICCL_SMALL_PATH")) {
    check_arg(*v == "0" || *v == "1", "OMNICCL_SMALL_PATH is '", *v, "'; use 1 (on) or 0 (off)");
    c.small_path = *v == "1";
  }
  if (auto v = get_setting("OMNICCL_SHM_SPLIT_COPY")) {
    check_arg(*v == "0" || *v == "1", "OMNICCL_SHM_SPLIT_COPY is '", *v, "'; use 1 (on) or 0 (off)");
    c.split_copy = *v == "1";
  }
  return c;
}

void CommConfig::validate() const {
  check_arg(timeout_ms > 0, "timeout must be positive, got ", timeout_ms, " ms");
  check_arg(transport == "auto" || transport == "shm" || transport == "tcp", "transport '", transport,
            "' is unknown (use auto, shm or tcp; OMNICCL_TRANSPORT or occl_config_t.transport)");
  if (!algorithm.empty()) AlgoOverride::parse(algorithm, algorithm_source);
}

Communicator::Communicator(int rank, int size, CommConfig config, std::unique_ptr<transport::Mesh> mesh,
                           uint64_t session)
    : rank_(rank),
      size_(size),
      config_(std::move(config)),
      timeout_ms_(config_.timeout_ms),
      session_(session),
      mesh_(std::move(mesh)),
      engine_(*mesh_),
      planner_(planner_setup(config_, *mesh_, engine_.oversubscribed())),
      matcher_(rank, size, &engine_.exec()),
      send_seq_(size, 0),
      recv_seq_(size, 0) {
  engine_.set_small_path(config_.small_path);
  log::set_rank(rank);
}

std::shared_ptr<Communicator> Communicator::create(const bootstrap::RendezvousSpec& spec, const CommConfig& config,
                                                   const std::atomic<bool>* cancel) {
  config.validate();
  check_arg(spec.world_size >= 1, "world size must be at least 1, got ", spec.world_size);
  check_arg(spec.rank >= 0 && spec.rank < spec.world_size, "rank ", spec.rank, " is outside world size ",
            spec.world_size);
  const Deadline deadline = Deadline::after_ms(config.timeout_ms).cancelled_by(cancel);
  const int rank = spec.rank, n = spec.world_size;
  // Once per process, beside the rendezvous: the registration that lets a
  // thread keep the issuer waits for an RCU grace period (Issuer::prepared).
  std::future<bool> barrier;
  if (!Issuer::prepared()) {
    try {
      barrier = std::async(std::launch::async, &Issuer::can_keep);
    } catch (const std::system_error&) {  // no thread to spare: the first kept call registers
    }
  }

  bootstrap::Rendezvous rendezvous(spec, deadline, config.timeout_ms);
  const uint64_t session = rendezvous.session();
  const std::string tcp_ip = rendezvous.local_ip();
  CommConfig resolved = config;
  transport::MeshOptions opts = mesh_options(resolved, rank, n, session);
  opts.tcp_ip = tcp_ip;
  opts.deadline = deadline;
  opts.check_peers = [&rendezvous] { rendezvous.check_members(); };
  opts.check_ready = [&rendezvous] { rendezvous.check_members(/*server_may_close=*/true); };
  opts.token = spec.secret;
  auto mesh = transport::Mesh::create(opts, [&](const std::string& blob) { return rendezvous.exchange(blob); });
  if (n == 1) rendezvous.exchange("");
  rendezvous.finish();
  std::shared_ptr<Communicator> comm(new Communicator(rank, n, resolved, std::move(mesh), session));
  comm->tcp_ip_ = tcp_ip;
  comm->token_ = spec.secret;
  comm->store_server_ = rendezvous.release_server();
  if (barrier.valid()) barrier.wait();
  OCCL_LOG(kInfo, kInit, "communicator ready: rank ", rank, " of ", n, " over ", comm->transport_name());
  return comm;
}

Communicator::~Communicator() { abort(); }

void Communicator::set_timeout(int64_t ms) {
  check_arg(ms > 0, "timeout must be positive, got ", ms, " ms");
  timeout_ms_.store(ms);
}

ReduceSpec Communicator::reduce_spec(int op) const {
  if (op >= 0 && op <= 8) return ReduceSpec{static_cast<RedOp>(op), 1.0};
  std::lock_guard<std::mutex> lock(ops_mu_);
  auto it = premul_ops_.find(op);
  check_arg(it != premul_ops_.end(), "reduce op ", op,
            " is unknown (built-in ops are 0..8; custom ops must come from occl_red_op_create_premul_sum on this "
            "communicator and not be destroyed)");
  return ReduceSpec{RedOp::kPreMulSum, it->second};
}

int Communicator::create_premul_sum(double scalar) {
  std::lock_guard<std::mutex> lock(ops_mu_);
  int id = next_op_++;
  premul_ops_[id] = scalar;
  return id;
}

void Communicator::destroy_reduce_op(int op) {
  std::lock_guard<std::mutex> lock(ops_mu_);
  check_arg(premul_ops_.erase(op) == 1, "reduce op ", op, " was not created by occl_red_op_create_premul_sum");
}

void Communicator::set_failed(Status st, const std::string& message) {
  std::lock_guard<std::mutex> lock(failed_mu_);
  if (failed_status_.load(std::memory_order_relaxed) != Status::kSuccess) return;
  failed_message_ = message;
  failed_status_.store(st, std::memory_order_release);
}

Status Communicator::async_error(std::string& message) const {
  std::lock_guard<std::mutex> lock(failed_mu_);
  message = failed_message_;
  return failed_status_.load(std::memory_order_relaxed);
}

void Communicator::check_usable() const {
  if (usable()) return;
  if (mesh_->aborted()) fail(Status::kAborted, "the communicator was aborted");
  if (Status st = failed_status_.load(std::memory_order_acquire); st != Status::kSuccess) {
    std::string msg;
    async_error(msg);
    fail(Status::kCommFailed, "this communicator is unusable after an earlier error (", status_name(st), "): ", msg);
  }
}

void Communicator::run_one(OpRef fn) {
  check_usable();
  try {
    fn(engine_);
  } catch (...) {
    op_failed();
  }
}

void Communicator::op_failed() {
  try {
    throw;
  } catch (const Error& e) {
    set_failed(e.status(), e.what());
    throw;
  } catch (const std::bad_alloc&) {
    set_failed(Status::kOutOfMemory, "out of memory during an operation");
    throw Error(Status::kOutOfMemory, "out of memory during an operation");
  }
}

Communicator::IssueGuard::IssueGuard(Communicator& c) : c_(c), how_(c.issuer_.enter()) {
  if (how_ == Issuer::Entry::kBusy) {
    fail(Status::kInvalidArgument,
         "comm is in use by another thread: operations on one communicator must be issued "
         "by one thread at a time (from two threads at once the ranks could pair different operations and mix "
         "their data); serialise the calls, or give each thread its own communicator (occl_comm_split)");
  }
}

Communicator::IssueGuard::~IssueGuard() {
  if (how_ == Issuer::Entry::kEntered || how_ == Issuer::Entry::kEnteredKept) c_.issuer_.leave(how_);
}

void Communicator::run_blocking_ref(OpRef fn, InterruptHook interrupt) {
  IssueGuard issuing(*this);
  run_issued_ref(fn, interrupt);
}

void Communicator::run_issued_ref(OpRef fn, InterruptHook interrupt) {
  if (!idle_.load(std::memory_order_acquire)) {
    // Queued asynchronous operations run first; an interruptible caller
    // waits for them in slices.
    // (The check is asked before the first wait too: a binding may give up
    // its interpreter lock there.)
    std::unique_lock<std::mutex> lock(mu_);
    auto drained = [&] { return (queue_.empty() && !worker_busy_) || stopping_; };
    while (!drained()) {
      if (interrupt) {
        lock.unlock();
        bool stop = interrupt.fired();
        lock.lock();
        if (stop) fail(Status::kInterrupted, "interrupted by the caller while earlier asynchronous operations ran");
      }
      cv_.wait_for(lock, std::chrono::milliseconds(interrupt ? 50 : 200), drained);
    }
    if (stopping_) fail(Status::kAborted, "the communicator was aborted");
  }
  // The worker has finished every task (idle_, or the wait above) and none
  // can be queued while this thread is the issuer; abort() waits for the
  // issuer. So nothing else runs the engine now: no lock to take (its
  // atomic exchange, a full barrier, waited on every call for this rank's
  // last writes into a peer's ring, about 5% of an 8-byte broadcast).
  run_one(fn);
}

std::shared_ptr<Work> Communicator::submit(std::function<void(Engine&)> fn, bool async) {
  if (!async) {
    run_blocking_ref(ref_of(fn), {});
    return nullptr;
  }
  IssueGuard issuing(*this);
  auto work = std::make_shared<Work>();
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (stopping_) {
      work->complete(Status::kAborted, "the communicator was aborted");
      return work;
    }
    queue_.push_back(Task{std::move(fn), work});
    idle_.store(false, std::memory_order_release);
    if (!worker_.joinable()) worker_ = std::thread([this] { worker_loop(); });
  }
  cv_.notify_all();
  return work;
}

std::shared_ptr<Work> Communicator::submit_p2p(const P2POp& op, const CallOptions& call) {
  IssueGuard issuing(*this);
  auto work = std::make_shared<Work>();
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (stopping_) fail(Status::kAborted, "the communicator was aborted");
    queue_.push_back(Task{nullptr, work, op});
    queue_.back().p2p->blocking = !call.async;
    idle_.store(false, std::memory_order_release);
    if (!worker_.joinable()) worker_ = std::thread([this] { worker_loop(); });
  }
  cv_.notify_all();
  mesh_->wake();  // a running batch sleeping in poll() picks the new transfer up
  if (call.async) return work;
  if (call.interrupt) {
    // Asked before the first wait too (a binding may give up its
    // interpreter lock there), then every 50 ms.
    while (!work->done()) {
      if (!call.interrupt.fired()) {
        work->wait_for(50);
        continue;
      }
      // The transfer runs on the worker and uses the caller's buffer: stop
      // the communicator so it ends before this call returns.
      set_failed(Status::kInterrupted, "a blocking send/recv was interrupted by the caller");
      mesh_->set_aborted();
      work->wait();
      const char* what = op.probe != P2POp::Probe::kNone ? "probe" : op.is_send ? "send" : "recv";
      fail(Status::kInterrupted, what, " to/from rank ", op.peer,
           " was interrupted by the caller; the communicator is unusable now");
    }
  }
  Status st = work->wait();
  if (op.status != nullptr) *op.status = work->recv_status();
  if (st != Status::kSuccess) throw Error(st, work->message());
  return nullptr;
}

namespace {

void check_probe_args(const Communicator& c, const char* what, int source, int tag) {
  check_arg(source == kProcNull || source == kAnySource || (source >= 0 && source < c.size()), what, ": source ",
            source, " is out of range for a communicator of ", c.size(), " ranks (or ANY_SOURCE, PROC_NULL)");
  check_arg(tag >= 0 || tag == kAnyTag, what, ": tag ", tag, " is negative; a probe's tag is >= 0 or ANY_TAG");
}

}  // namespace

RecvStatus Communicator::run_probe(P2POp::Probe kind, int source, int tag, const CallOptions& call, bool claim) {
  const bool once = kind == P2POp::Probe::kIprobe;
  check_probe_args(*this, claim ? (once ? "improbe" : "mprobe") : (once ? "iprobe" : "probe"), source, tag);
  RecvStatus rs;  // PROC_NULL's: source kProcNull, tag kAnyTag, 0 bytes
  if (source == kProcNull) {
    if (claim) rs.message = kMessageNoProc;
    return rs;
  }
  P2POp op;
  op.is_send = false;
  op.peer = source;
  op.timeout_ms = call.timeout_ms;
  op.tag = tag;
  op.status = &rs;
  op.probe = kind;
  op.claim = claim;
  CallOptions blocking = call;
  blocking.async = false;
  submit_p2p(op, blocking);
  return rs;
}

std::optional<RecvStatus> Communicator::iprobe(int source, int tag, const CallOptions& call) {
  RecvStatus rs = run_probe(P2POp::Probe::kIprobe, source, tag, call);
  if (source != kProcNull && rs.source == kAnySource) return std::nullopt;  // nothing there yet
  return rs;
}

RecvStatus Communicator::probe(int source, int tag, const CallOptions& call) {
  return run_probe(P2POp::Probe::kProbe, source, tag, call);
}

std::optional<RecvStatus> Communicator::improbe(int source, int tag, const CallOptions& call) {
  RecvStatus rs = run_probe(P2POp::Probe::kIprobe, source, tag, call, true);
  if (source != kProcNull && rs.source == kAnySource) return std::nullopt;  // nothing there yet
  return rs;
}

RecvStatus Communicator::mprobe(int source, int tag, const CallOptions& call) {
  return run_probe(P2POp::Probe::kProbe, source, tag, call, true);
}

std::shared_ptr<Work> Communicator::mrecv(uint64_t message, const TensorView& t, const CallOptions& call,
                                          RecvStatus* status) {
  check_arg(message != kMessageNull, "mrecv: the message is MESSAGE_NULL (already received, or no matched probe)");
  if (message == kMessageNoProc) {
    RecvStatus none;  // a receive from PROC_NULL
    if (status != nullptr) *status = none;
    if (!call.async) return nullptr;
    auto work = std::make_shared<Work>();
    work->complete(Status::kSuccess, "", none);
    return work;
  }
  P2POp op;
  op.is_send = false;
  op.peer = rank_;  // unused: the message names its source
  op.tensor = t;
  op.timeout_ms = call.timeout_ms;
  op.status = call.async ? nullptr : status;
  op.mrecv = message;
  return submit_p2p(op, call);
}

bool Communicator::cancel(const std::shared_ptr<Work>& work) {
  check_arg(work != nullptr, "cancel: the operation is NULL");
  if (work->done()) return false;
  RecvStatus rs;
  P2POp op;
  op.is_send = false;
  op.peer = rank_;
  op.status = &rs;
  op.cancel = work;
  CallOptions blocking;
  submit_p2p(op, blocking);
  return rs.cancelled;
}

/// Feeds queued send/recv tasks into a running engine step, in queue order,
/// for as long as the head of the queue is one. Sends go to the engine as
/// they are (to this rank itself: straight to the matcher); receives are
/// posted to the matcher (p2p_match.h), and each peer a posted receive could
/// hear from gets one listen, which reads that peer's messages and lands them
/// where the matcher says.
class Communicator::QueueFeed final : public TransferFeed {
 public:
  QueueFeed(Communicator& c, Task first) : c_(c), listening_(size_t(c.size()), 0), parked_(size_t(c.size()), 0) {
    pending_.push_back(std::move(first));
  }

  bool next(Transfer& t, OpSignature& sig, Deadline& deadline, size_t& tag) override {
    for (;;) {
      sig = OpSignature{};
      sig.kind = OpKind::kSendRecv;
      if (next_listen(t, deadline, tag) || next_ack(t, sig, deadline, tag)) return true;
      Task task;
      if (!take_task(task)) return false;
      const P2POp& op = *task.p2p;
      deadline = op.timeout_ms > 0 ? Deadline::after_ms(op.timeout_ms) : c_.op_deadline();
      if (settled_here(task)) continue;
      if (op.is_send) {
        start_send(task, t, sig, deadline, tag);
        return true;
      }
      post_recv(task, deadline);
    }
  }

  /// Receives posted in an earlier step that are still waiting (a
  /// non-blocking receive from this rank itself or from ANY_SOURCE) get
  /// their listens again.
  void resume_posted() {
    for (const P2PMatcher::Posted& p : c_.matcher_.posted()) listen_for(p.source, p.deadline);
  }

  bool owes() override { return c_.matcher_.owes_ack(); }

  void listen_for(int source, const Deadline& deadline) {
    for (int p = 0; p < c_.size(); ++p) {
      if (p == c_.rank() || (source != kAnySource && source != p)) continue;
      if (listening_[size_t(p)] || parked_[size_t(p)]) continue;
      listening_[size_t(p)] = 1;
      to_listen_.emplace_back(p, deadline);
    }
  }

  /// An iprobe found nothing among the unexpected messages: it waits only
  /// until every peer it could hear from has been read up to what has
  /// arrived (quiet), then ends (P2PMatcher::end_probe).
  void start_iprobe(int source) {
    iprobe_peers_ = 0;
    iprobe_wait_.assign(size_t(c_.size()), 0);
    for (int p = 0; p < c_.size(); ++p) {
      if (p == c_.rank() || (source != kAnySource && source != p) || parked_[size_t(p)]) continue;
      iprobe_wait_[size_t(p)] = 1;
      ++iprobe_peers_;
    }
    if (iprobe_peers_ == 0) c_.matcher_.end_probe();
  }
  void iprobe_heard(int peer) {
    if (iprobe_peers_ == 0 || !iprobe_wait_[size_t(peer)]) return;
    iprobe_wait_[size_t(peer)] = 0;
    if (--iprobe_peers_ == 0) c_.matcher_.end_probe();
  }
  void quiet(int peer) override { iprobe_heard(peer); }

  void done(size_t tag) override {
    Task& task = taken_[tag];
    if (!task.work) return;  // an ack
    if (task.p2p && task.p2p->synchronous) {
      c_.matcher_.sent(task.work.get());  // completes once the ack has come too
    } else {
      task.work->complete(Status::kSuccess, "");
    }
    task.work.reset();
  }

  char* land(const Arrival& a, size_t& token) override { return c_.matcher_.land(a, c_.next_recv_seq(a.peer), token); }
  void landed(size_t token) override { c_.matcher_.landed(token); }
  bool listening(int peer) override { return c_.matcher_.wants(peer) || c_.matcher_.awaits(peer); }
  bool named(int peer) override { return c_.matcher_.names(peer) || c_.matcher_.awaits(peer); }
  void listen_ended(int peer, bool parked) override {
    iprobe_heard(peer);
    listening_[size_t(peer)] = 0;
    if (parked) parked_[size_t(peer)] = 1;
  }

  /// The step ended with receives still posted: no other rank they could
  /// hear from has a point-to-point message next. A non-blocking one that a
  /// later send to this rank itself can match stays posted (MPI's irecv
  /// before its send); the others fail (a blocking one's caller can issue
  /// nothing that would match it).
  void finish() {
    // Synchronous sends whose receiver moved on (to a collective, or left)
    // before a receive matched them: MPI would leave them pending across
    // that collective; here they fail, as receives posted before one do.
    c_.matcher_.fail_awaiting(Status::kMismatch, [&](int peer) {
      return str_cat("ssend to rank ", peer,
                     ": no receive matched it before that rank moved on (to a collective operation, or it left); a "
                     "synchronous send must be matched before the operations issued after it on its receiver");
    });
    if (!c_.matcher_.any_posted()) return;
    const int me = c_.rank();
    auto doomed = [&](const P2PMatcher::Posted& p) { return p.blocking || (p.source != me && p.source != kAnySource); };
    c_.matcher_.fail_posted(Status::kMismatch, doomed, [&](const P2PMatcher::Posted& p) {
      std::string from = p.source == kAnySource ? std::string("ANY_SOURCE") : str_cat("rank ", p.source);
      std::string tag = p.tag == kAnyTag ? std::string("ANY_TAG") : std::to_string(p.tag);
      std::string why;
      if (p.source == c_.rank()) {
        why = "no send to this rank itself was posted before it (a blocking receive from itself can never match)";
      } else if (c_.size() == 1) {
        why = "no send to this rank itself was posted before it";
      } else {
        why =
            "every rank it could hear from has moved on (to a collective operation, or it has left) without a "
            "matching send";
      }
      return str_cat(p.probe ? "probe for a message from " : "recv from ", from, " (tag ", tag,
                     ") cannot be matched: ", why);
    });
  }

  /// Fails every task taken but not completed, and any not yet taken.
  void fail_rest(Status st, const std::string& msg) {
    for (auto& t : taken_) {
      if (t.work) t.work->complete(st, msg);  // (awaited synchronous sends among them: fail_all below again)
    }
    for (auto& t : pending_) t.work->complete(st, msg);
    c_.matcher_.fail_all(st, msg);
  }

 private:
  /// A peer to listen to, queued by a receive or a synchronous send.
  bool next_listen(Transfer& t, Deadline& deadline, size_t& tag) {
    if (to_listen_.empty()) return false;
    const int peer = to_listen_.front().first;
    deadline = to_listen_.front().second;
    to_listen_.pop_front();
    t = Transfer::listen(peer);
    tag = SIZE_MAX;
    return true;
  }
  /// A synchronous send from ack.peer was matched here: tell it.
  bool next_ack(Transfer& t, OpSignature& sig, Deadline& deadline, size_t& tag) {
    P2PMatcher::Ack ack;
    if (!c_.matcher_.take_ack(ack)) return false;
    sig.algo = kP2PAck;
    sig.count = ack.seq;
    sig.seq = c_.next_send_seq(ack.peer);
    deadline = c_.op_deadline();
    t = Transfer::send(ack.peer, nullptr, 0, 0);
    tag = taken_.size();
    taken_.push_back(Task{});
    return true;
  }
  /// The first task handed over, else the next point-to-point one queued.
  bool take_task(Task& task) {
    if (!pending_.empty()) {
      task = std::move(pending_.back());
      pending_.clear();
      return true;
    }
    std::lock_guard<std::mutex> lock(c_.mu_);
    if (c_.queue_.empty() || !c_.queue_.front().p2p) return false;
    task = std::move(c_.queue_.front());
    c_.queue_.pop_front();
    return true;
  }
  /// Completes a task that moves nothing between ranks (a cancel, a matched
  /// receive of a held message, a send to this rank itself); false for others.
  bool settled_here(Task& task) {
    const P2POp& op = *task.p2p;
    if (op.cancel) {
      RecvStatus rs;
      rs.cancelled = c_.matcher_.cancel(op.cancel.get());
      if (op.status != nullptr) *op.status = rs;
      task.work->complete(Status::kSuccess, "", rs);
      return true;
    }
    if (op.mrecv != 0) {
      P2PMatcher::Posted r;
      r.dst = op.tensor.bytes_ptr();
      r.capacity = op.tensor.bytes();
      r.dtype = op.tensor.dtype;
      r.work = task.work;
      r.status = op.status;
      if (!c_.matcher_.mrecv(op.mrecv, r)) {
        task.work->complete(Status::kInvalidArgument,
                            str_cat("mrecv: message #", op.mrecv,
                                    " is not held by this communicator (already received, or from a matched probe "
                                    "on another communicator)"));
      }
      return true;
    }
    if (!op.is_send || op.peer != c_.rank()) return false;
    try {
      const bool sync = op.synchronous;
      const bool taken = c_.matcher_.send_to_self(op.tag, op.tensor.bytes_ptr(), op.tensor.bytes(), op.tensor.dtype,
                                                  op.tensor.count, sync ? task.work : nullptr, sync && op.blocking);
      // A synchronous one not yet received completes when a receive takes it.
      if (!sync || taken) task.work->complete(Status::kSuccess, "");
    } catch (const Error& e) {
      task.work->complete(e.status(), str_cat(op.synchronous ? "ssend" : "send", " to self: ", e.what()));
    }
    return true;
  }
  /// A send to another rank: its transfer (a synchronous one also listens
  /// for the ack).
  void start_send(Task& task, Transfer& t, OpSignature& sig, const Deadline& deadline, size_t& tag) {
    const P2POp& op = *task.p2p;
    sig.dtype = op.tensor.dtype;
    sig.count = op.tensor.count;
    sig.root = op.tag;  // a point-to-point header carries the tag here
    sig.seq = c_.next_send_seq(op.peer);
    if (op.synchronous) {
      sig.algo = kP2PSync;
      c_.matcher_.await_ack(op.peer, sig.seq, task.work);
      listen_for(op.peer, deadline);  // for the ack
    }
    t = Transfer::send(op.peer, op.tensor.bytes_ptr(), op.tensor.bytes(), 0);
    tag = taken_.size();
    taken_.push_back(std::move(task));
  }
  /// A receive or probe: posted to the matcher, which may match a message
  /// already held; else its source is listened to.
  void post_recv(const Task& task, const Deadline& deadline) {
    const P2POp& op = *task.p2p;
    P2PMatcher::Posted r;
    r.source = op.peer;
    r.tag = op.tag;
    r.dst = op.tensor.bytes_ptr();
    r.capacity = op.tensor.bytes();
    r.dtype = op.tensor.dtype;
    r.work = task.work;
    r.status = op.status;
    r.blocking = op.status != nullptr;
    r.deadline = deadline;
    r.probe = op.probe != P2POp::Probe::kNone;
    r.once = op.probe == P2POp::Probe::kIprobe;
    r.claim = op.claim;
    if (c_.matcher_.post(std::move(r))) return;  // an unexpected message matched
    if (op.probe == P2POp::Probe::kIprobe) start_iprobe(op.peer);
    listen_for(op.peer, deadline);
  }
  Communicator& c_;
  std::vector<Task> pending_;  // the task the worker popped to start the batch
  std::vector<Task> taken_;
  std::deque<std::pair<int, Deadline>> to_listen_;  // listens to hand to the engine
  std::vector<uint8_t> listening_;                  // per peer: a listen runs
  std::vector<uint8_t> parked_;                     // per peer: its next message is a collective's
  std::vector<uint8_t> iprobe_wait_;                // per peer: the running iprobe has not heard it yet
  int iprobe_peers_ = 0;                            // peers the running iprobe waits to hear
};

Status Communicator::run_captured(const std::function<void(Engine&)>& fn, std::string& message) {
  std::lock_guard<ExecLock> exec(exec_mu_);
  try {
    run_one(ref_of(fn));
    return Status::kSuccess;
  } catch (const Error& e) {
    message = e.what();
    return e.status();
  } catch (const std::exception& e) {
    message = e.what();
    return Status::kInternal;
  }
}

void Communicator::worker_loop() {
  for (;;) {
    Task task;
    {
      std::unique_lock<std::mutex> lock(mu_);
      cv_.wait(lock, [&] { return !queue_.empty() || stopping_; });
      if (queue_.empty()) return;
      task = std::move(queue_.front());
      queue_.pop_front();
      worker_busy_ = true;
    }
    std::string msg;
    if (task.p2p) {
      QueueFeed feed(*this, std::move(task));
      feed.resume_posted();
      Status st = run_captured([&](Engine& e) { e.run_feed(feed); }, msg);
      if (st != Status::kSuccess) {
        feed.fail_rest(st, msg);
      } else {
        feed.finish();
      }
    } else {
      Status st = run_captured(task.fn, msg);
      task.work->complete(st, msg);
    }
    {
      std::lock_guard<std::mutex> lock(mu_);
      worker_busy_ = false;
      idle_.store(queue_.empty(), std::memory_order_release);
    }
    cv_.notify_all();
  }
}

void Communicator::abort(bool as_failure) {
  if (as_failure) {
    mesh_->leave_without_goodbye();
  } else if (!mesh_->aborted() && failed_status_.load(std::memory_order_acquire) == Status::kSuccess) {
    // occl_comm_destroy of a communicator that has not failed: its goodbye
    // and last data must reach peers still finishing (the mesh lingers when
    // destroyed), although the abort below stops any work still queued.
    mesh_->leave_in_order();
  }
  mesh_->set_aborted();
  {
    std::lock_guard<std::mutex> lock(mu_);
    stopping_ = true;
  }
  cv_.notify_all();
  if (worker_.joinable() && worker_.get_id() != std::this_thread::get_id()) worker_.join();
  // Wait for a call on another thread to notice the abort and return: its
  // thread is the issuer until then (IssueGuard; the C API holds it for the
  // whole call, which may use the communicator without a reference).
  issuer_.drain();
  std::lock_guard<ExecLock> exec(exec_mu_);
  matcher_.fail_all(Status::kAborted, "the communicator was aborted before a matching message arrived");
}

std::vector<std::string> Communicator::internal_all_gather(const std::string& mine, const Deadline& deadline) {
  const int n = size_;
  OpSignature sig;
  sig.kind = OpKind::kInternal;
  sig.algo = uint8_t(Algo::kDirect);
  sig.algo_name = "direct";
  sig.seq = next_collective_seq();
  engine_.begin(sig, RedOp::kSum, deadline);
  std::vector<uint64_t> lens(n);
  uint64_t len = mine.size();
  algo::all_gather_direct(engine_, reinterpret_cast<const char*>(&len), reinterpret_cast<char*>(lens.data()), 8);
  std::vector<uint64_t> displs(n);
  uint64_t total = 0;
  for (int p = 0; p < n; ++p) {
    displs[p] = total;
    total += lens[p];
  }
  std::string all(total, '\0');
  sig.seq = next_collective_seq();
  engine_.begin(sig, RedOp::kSum, deadline);
  algo::all_gatherv_direct(engine_, mine.data(), all.data(), lens.data(), displs.data());
  std::vector<std::string> out(n);
  for (int p = 0; p < n; ++p) out[p] = all.substr(displs[p], lens[p]);
  return out;
}

std::shared_ptr<Communicator> Communicator::split(int color, int key, const CommConfig* config) {
  IssueGuard issuing(*this);
  CommConfig cfg = config ? *config : config_;
  cfg.validate();
  std::shared_ptr<Communicator> result;
  submit([&](Engine&) { result = split_in_op(color, key, cfg, nullptr); }, false);
  return result;
}

std::shared_ptr<Communicator> Communicator::split_in_op(int color, int key, const CommConfig& cfg,
                                                        const std::atomic<bool>* cancel) {
  const Deadline deadline = op_deadline().cancelled_by(cancel);
  deadline.expired();  // throws kAborted if cancelled before it started
  // Liveness: a member that stops during the split (SIGSTOP, hung) is named
  // within OMNICCL_SETUP_HEARTBEAT_TIMEOUT (transport/mesh_liveness.cc).
  // Every rank counts its splits alike, so the count tags this one.
  struct HeartbeatGuard {
    transport::Mesh& mesh;
    ~HeartbeatGuard() { mesh.stop_heartbeat(); }
  } heartbeat{*mesh_};
  mesh_->start_heartbeat(split_count_ + 1, setup_heartbeat_timeout_ms(),
                         str_cat("a split of the communicator of ", size_, " ranks"));
  const std::vector<int> members = split_members(internal_all_gather(str_cat(color, " ", key), deadline), color);
  // From here on, ranks of other colors may finish first and go quiet.
  mesh_->expect_heartbeats(members);
  uint64_t session = mix(mix(session_, ++split_count_), uint64_t(uint32_t(color)));
  if (color < 0) {
    internal_all_gather("", deadline);
    return nullptr;
  }
  const int new_rank = static_cast<int>(std::find(members.begin(), members.end(), rank_) - members.begin());
  bool exchanged = false;
  auto exchange = [&](const std::string& blob) {
    exchanged = true;
    auto all = internal_all_gather(blob, deadline);
    std::vector<std::string> mine;
    for (int old_rank : members) mine.push_back(all[size_t(old_rank)]);
    return mine;
  };
  CommConfig resolved = cfg;
  transport::MeshOptions opts = mesh_options(resolved, new_rank, static_cast<int>(members.size()), session);
  opts.tcp_ip = tcp_ip_;
  opts.deadline = deadline;
  opts.token = token_;
  opts.check_peers = [this] { check_split_members(*mesh_); };
  auto mesh = transport::Mesh::create(opts, exchange);
  if (!exchanged) internal_all_gather("", deadline);
  std::shared_ptr<Communicator> result(new Communicator(new_rank, opts.size, resolved, std::move(mesh), session));
  result->tcp_ip_ = tcp_ip_;
  result->token_ = token_;
  log::set_rank(rank_);
  return result;
}

}  // namespace omniccl
