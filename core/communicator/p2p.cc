// Point-to-point operations of a communicator: sends, receives, probes,
// matched probes and cancels are queued as tasks; the worker runs a batch of
// them as one engine step (Engine::run_feed) fed by a QueueFeed, the one hook
// between matching and the engine (TransferFeed): the feed posts receives to
// the matcher (p2p_match.h), hands sends and listens to the engine, and lands
// each arriving message where the matcher says (engine_p2p.cc reads them).
#include <algorithm>
#include <chrono>
#include <cstdint>
#include <deque>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "common/log.h"
#include "communicator/communicator.h"

namespace omniccl {

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
  if (claim && rs.message != kMessageNull) {
    std::lock_guard<std::mutex> lock(claimed_mu_);
    claimed_[rs.message] = rs;
  }
  return rs;
}

std::optional<RecvStatus> Communicator::take_claimed(uint64_t message) {
  std::lock_guard<std::mutex> lock(claimed_mu_);
  auto it = claimed_.find(message);
  if (it == claimed_.end()) return std::nullopt;
  RecvStatus rs = it->second;
  claimed_.erase(it);
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
  take_claimed(message);  // only the matcher's copy is needed here
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

void Communicator::run_p2p_batch(Task task) {
  std::string msg;
  QueueFeed feed(*this, std::move(task));
  feed.resume_posted();
  Status st = run_captured([&](Engine& e) { e.run_feed(feed); }, msg);
  if (st != Status::kSuccess) {
    feed.fail_rest(st, msg);
  } else {
    feed.finish();
  }
}

RecvStatus Communicator::run_p2p_step(Engine& engine, P2POp op) {
  auto work = std::make_shared<Work>();
  RecvStatus got;
  // Blocking on the worker: a receive still posted when the step ends fails
  // (as a blocking caller's would) rather than outliving this operation.
  op.status = &got;
  op.blocking = true;
  QueueFeed feed(*this, Task{nullptr, work, op});
  feed.resume_posted();
  try {
    engine.run_feed(feed);
  } catch (const Error& e) {
    feed.fail_rest(e.status(), e.what());
    throw;
  } catch (...) {
    feed.fail_rest(Status::kInternal, "a point-to-point step failed");  // none may keep pointing at `got`
    throw;
  }
  feed.finish();
  if (!work->done()) fail(Status::kInternal, "a point-to-point step ended before its operation");
  if (work->status() != Status::kSuccess) throw Error(work->status(), work->message());
  return op.is_send ? RecvStatus{} : got;
}

}  // namespace omniccl
