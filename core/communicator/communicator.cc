#include "communicator/communicator.h"

#include <unistd.h>

#include <algorithm>
#include <bit>
#include <cctype>
#include <cerrno>
#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <future>
#include <new>
#include <optional>
#include <system_error>
#include <thread>

#include "algorithm/algorithms.h"
#include "bootstrap/store.h"
#include "common/gpu_runtime.h"
#include "common/log.h"
#include "common/settings.h"
#include "common/signal_cleanup.h"
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
  o.transports.cuda_ipc.mode = resolved.device_transport;
  o.transports.cuda_ipc.buffer_bytes = resolved.cuda_ipc_buffer;
  o.slicing = resolved.slicing;
  o.host_shared_bytes = sizeof(HostChoices);
  return o;
}

}  // namespace

namespace {

/// Setting `name`'s number of bytes, if set.
std::optional<size_t> bytes_setting(const char* name) {
  auto v = get_setting(name);
  if (!v) return std::nullopt;
  char* end = nullptr;
  errno = 0;
  const unsigned long long n = std::strtoull(v->c_str(), &end, 10);
  check_arg(std::isdigit(static_cast<unsigned char>(v->front())) && *end == '\0' && errno == 0 && n <= SIZE_MAX, name,
            " is '", *v, "'; use a number of bytes");
  return size_t(n);
}

/// OMNICCL_DEVICE_TRANSPORT, OMNICCL_CUDA_IPC_BUFFER and the slicing settings
/// (checked by validate()).
void device_settings(CommConfig& c) {
  if (auto v = get_setting("OMNICCL_DEVICE_TRANSPORT")) c.device_transport = *v;
  if (auto n = bytes_setting("OMNICCL_CUDA_IPC_BUFFER")) c.cuda_ipc_buffer = *n;
  if (auto n = bytes_setting("OMNICCL_STAGED_SLICE")) c.slicing.slice_bytes = *n;
  if (auto n = bytes_setting("OMNICCL_STAGED_GPU_REDUCE")) c.slicing.gpu_reduce_bytes = *n;
  if (auto v = get_setting("OMNICCL_STAGED_PROFILE")) {
    check_arg(*v == "0" || *v == "1", "OMNICCL_STAGED_PROFILE is '", *v, "'; use 1 (on) or 0 (off)");
    c.staged_profile = *v == "1";
  }
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
  device_settings(c);
  // Read when the first segment is made; a typo is an error here, at creation.
  (void)signal_cleanup_enabled();
  return c;
}

void CommConfig::validate() const {
  check_arg(timeout_ms > 0, "timeout must be positive, got ", timeout_ms, " ms");
  check_arg(transport == "auto" || transport == "shm" || transport == "tcp", "transport '", transport,
            "' is unknown (use auto, shm or tcp; OMNICCL_TRANSPORT or occl_config_t.transport)");
  if (!algorithm.empty()) AlgoOverride::parse(algorithm, algorithm_source);
  transport::CudaIpcOptions{device_transport, cuda_ipc_buffer}.validate();
  using transport::StagedSlicing;
  check_arg(
      slicing.slice_bytes >= StagedSlicing::kMinSliceBytes && slicing.slice_bytes <= StagedSlicing::kMaxSliceBytes,
      "OMNICCL_STAGED_SLICE is ", slicing.slice_bytes, " bytes; use ", StagedSlicing::kMinSliceBytes, " (64 KiB) to ",
      StagedSlicing::kMaxSliceBytes, " (1 GiB)");
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
  if (config_.staged_profile) staged_profile_ = std::make_unique<StagedProfile>();
  if (transport::DeviceWindow* w = mesh_->device_window(); w != nullptr && gpu_runtime() != nullptr) {
    device_ = std::make_unique<algo::DeviceEngine>(*w, *gpu_runtime(), rank, size,
                                                   [this](Status st, const std::string& m) { set_failed(st, m); });
  }
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

Communicator::~Communicator() {
  abort();
  // Asked for by OMNICCL_STAGED_PROFILE=1, so shown at the default level.
  if (staged_profile_ != nullptr && staged_profile_->calls() > 0) {
    OCCL_LOG(kWarn, kColl, "rank ", rank_, " of ", size_, ": ", staged_profile_->summary());
  }
}

void Communicator::set_timeout(int64_t ms) {
  check_arg(ms > 0, "timeout must be positive, got ", ms, " ms");
  timeout_ms_.store(ms);
}

ReduceSpec Communicator::reduce_spec(int op) const {
  if (op >= 0 && op < kernels::kNumRedOps) return ReduceSpec{static_cast<RedOp>(op), 1.0};
  std::lock_guard<std::mutex> lock(ops_mu_);
  auto it = premul_ops_.find(op);
  check_arg(it != premul_ops_.end(), "reduce op ", op, " is unknown (built-in ops are 0..", kernels::kNumRedOps - 1,
            "; custom ops must come from occl_red_op_create_premul_sum on this "
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
    // What peers reported since the last operation: a call of this rank's
    // that they found wrong after it had returned fails the next one.
    if (mesh_->notice_pending()) mesh_->take_notices(collective_seq_);
    fn(engine_);
  } catch (...) {
    op_failed();
  }
  if (failed_status_.load(std::memory_order_acquire) != Status::kSuccess) [[unlikely]] {
    fail_used_meanwhile();
  }
}

void Communicator::op_failed() {
  try {
    throw;
  } catch (const transport::CallWithdrawn&) {
    throw;  // a peer rejected the call; every link is in step: still usable
  } catch (const Error& e) {
    set_failed(e.status(), e.what());
    throw;
  } catch (const std::bad_alloc&) {
    set_failed(Status::kOutOfMemory, "out of memory during an operation");
    throw Error(Status::kOutOfMemory, "out of memory during an operation");
  }
}

Communicator::IssueGuard::IssueGuard(Communicator& c) : c_(c), how_(c.issuer_.enter()) {
  if (how_ == Issuer::Entry::kBusy) c.refuse_second_thread();
}

void Communicator::refuse_second_thread() {
  // Which thread won may differ between ranks, so the winners' operations
  // may pair across ranks with data of the wrong threads: the call running
  // must fail too, and with it every peer (told by the failing call).
  const std::string msg = str_cat(
      "comm is in use by another thread: operations on one communicator must be issued by one thread at a time "
      "(from two threads at once the ranks could pair different operations and mix their data), so the operation "
      "running on the other thread fails too and the communicator is unusable on every rank; serialise the calls, "
      "or give each thread its own communicator (occl_comm_split)");
  set_failed(Status::kInvalidArgument, msg);
  mesh_->fail_from_another_thread(Status::kInvalidArgument, msg);
  fail(Status::kInvalidArgument, msg);
}

void Communicator::fail_used_meanwhile() {
  std::string msg;
  const Status st = async_error(msg);
  mesh_->broadcast_error(st, msg);
  throw transport::PeerReportedError(st, msg);  // told everyone
}

void Communicator::reject_collective(const char* call, const std::string& why) {
  if (!usable()) return;
  try {
    submit(
        [&](Engine& e) {
          const uint64_t seq = next_collective_seq();
          mesh_->reject_call(seq, str_cat("rank ", rank_, " rejected the arguments of its ", call, " #", seq,
                                          " before sending anything: ", why));
          e.send_withdrawal_marks(seq, timeout_ms());
        },
        false);
  } catch (const Error&) {
    // The communicator failed first (a peer's notice): its next call says why.
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

std::shared_ptr<Work> Communicator::submit(std::function<void(Engine&)> fn, bool async, std::shared_ptr<Work> work) {
  if (!async) {
    run_blocking_ref(ref_of(fn), {});
    return nullptr;
  }
  IssueGuard issuing(*this);
  if (work == nullptr) work = std::make_shared<Work>();
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
      run_p2p_batch(std::move(task));
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
  // A healthy communicator's destruction lets operations already on the
  // streams finish (the device engine's destructor waits for them).
  if (device_ && as_failure) device_->abort();
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
