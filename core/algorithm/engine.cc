// The engine's operations and its general step loop: beginning an
// operation, mismatch reports, transfers' states, progress passes, the
// idle-time copies. The fast paths, the waiting policy and point-to-point
// listening are units of their own (engine_internal.h lists them).
#include "algorithm/engine.h"

#include <algorithm>
#include <array>
#include <chrono>
#include <cstring>
#include <optional>

#include "algorithm/engine_internal.h"

namespace omniccl {

Engine::~Engine() {
  if (quick_stats_.done + quick_stats_.handed_over > 0) {
    OCCL_LOG(kInfo, kColl, "small-step path: ", quick_stats_.done, " steps done there (", quick_stats_.direct,
             " with whole messages only), ", quick_stats_.handed_over, " handed to the general loop to wait");
  }
}

Engine::Engine(transport::Mesh& mesh)
    : quick_(std::make_unique<QuickSet>()), mesh_(mesh), states_(std::make_unique<StateQueue>()) {
  // The union of this host's ranks' CPUs, not this rank's own mask: ranks
  // bound to a core each (mpirun's default for 2 ranks) are not oversubscribed.
  oversubscribed_ = mesh_.local_size() > mesh_.local_cpus();
  spin_for_ = oversubscribed_ ? kSpinShared : kSpinAlone;
  for (int p = 0; p < mesh_.size(); ++p) whole_links_ |= p != mesh_.rank() && mesh_.link(p).whole_messages();
  mesh_.set_op_describer([this] {
    // Point-to-point numbers are per pair, so they carry no comparable signature.
    // (A withdrawal mark's "call" neither: it is no call of the peers'.)
    bool p2p = sig_.kind == OpKind::kSendRecv || sig_.kind == kWithdrawMark;
    return transport::Mesh::OpStatus{sig_.seq, p2p ? std::string("send/recv") : op_text(),
                                     p2p ? std::string() : encode_signature(fields_of(sig_))};
  });
}

void Engine::reset_op_options() {
  idle_.bytes = 0;  // a copy no step ran (its operation failed first) is dropped
  probed_ = false;
  single_copy_ = false;
  split_copy_ = false;
  stream_min_ = 0;
  interrupt_ = {};
}

void Engine::begin(const OpSignature& sig, RedOp combine, Deadline deadline) {
  sig_ = sig;
  combine_ = combine;
  deadline_ = deadline;
  lazy_timeout_ms_ = -1;
  reset_op_options();
}

void Engine::begin(const OpSignature& sig, RedOp combine, int64_t timeout_ms) {
  begin_in_place(combine, timeout_ms) = sig;
}

OpSignature& Engine::begin_in_place(RedOp combine, int64_t timeout_ms) {
  combine_ = combine;
  lazy_timeout_ms_ = std::max<int64_t>(timeout_ms, 0);
  reset_op_options();
  return sig_;
}

void Engine::fail_mismatch(const std::string& diff) {
  std::string msg = str_cat(op_text(), ": calls do not match across ranks: ", diff);
  mesh_.broadcast_error(Status::kMismatch, msg);
  throw transport::PeerReportedError(Status::kMismatch, msg);  // already told everyone
}

void Engine::probe_signatures() {
  for (int p = 0; p < mesh_.size(); ++p) {
    const transport::PeerAnswer& a = mesh_.answers()[p];
    if (p == mesh_.rank() || !a.answered || a.seq != sig_.seq || a.signature.empty()) continue;
    SigFields theirs;
    if (!decode_signature(a.signature, theirs)) continue;
    std::string diff = diff_fields(fields_of(sig_), theirs, mesh_.rank(), p, false);
    if (!diff.empty()) fail_mismatch(diff);
  }
}

std::string Engine::op_text(const OpSignature& sig) {
  return str_cat(op_kind_name(sig.kind), " #", sig.seq,
                 sig.algo_name && *sig.algo_name ? str_cat(" (", sig.algo_name, ")") : std::string());
}

char* Engine::scratch(size_t bytes, int slot) { return exec_->scratch(bytes, slot); }

void Engine::use_device(DeviceKind device) {
  if (device != DeviceKind::kCPU) fail(Status::kUnsupported, "no executor for CUDA memory in this build");
  exec_ = &cpu_;
  device_ = device;
}

void Engine::step_failed() {
  try {
    throw;
  } catch (const transport::RejectedCall& r) {
    withdraw(r);  // its step's messages under way are finished, not abandoned
  } catch (...) {}
  abandon_receives();
  try {
    throw;
  } catch (const transport::PeerReportedError&) {
    throw;  // came from a peer, or was already sent to every peer
  } catch (const Error& e) {
    // Tell every rank, so that ranks waiting on this one fail now rather than
    // at their deadline.
    if (e.status() != Status::kAborted) mesh_.broadcast_error(e.status(), e.what());
    throw;
  }
}

void Engine::fail_header(const State& s) {
  const WireHeader& h = s.hdr;
  const int peer = s.t.peer;
  const OpSignature& mine = s.sig;
  if (h.magic != kWireMagic) {
    std::string msg = str_cat(op_text(mine), ": corrupt message from ", mesh_.describe(peer),
                              " (bad magic); the byte streams are out of step");
    mesh_.broadcast_error(Status::kInternal, msg);
    throw transport::PeerReportedError(Status::kInternal, msg);
  }
  const std::string diff = header_diff(h, mine, s.t.step, s.t.bytes, mesh_.rank(), peer);
  std::string msg = str_cat(op_text(mine), ": calls do not match across ranks: ", diff);
  mesh_.broadcast_error(Status::kMismatch, msg);
  throw transport::PeerReportedError(Status::kMismatch, msg);
}

// Recv-reduce: reduces the whole elements among the first n bytes at `from`
// (the peer's operand, next in order) into dst; returns the bytes taken.
size_t Engine::reduce_next(State& s, const char* from, size_t n) {
  const size_t esize = item_bytes(s.sig);
  n = std::min(n, s.t.bytes - s.reduced) / esize * esize;
  if (n > 0) {
    exec_->reduce(s.t.dst + s.reduced, s.t.src + s.reduced, from, n / esize, s.sig.dtype, combine_);
    s.reduced += n;
  }
  return n;
}

void Engine::flush_links() {
  for (const State& s : *states_) mesh_.link(s.t.peer).flush();
}

void Engine::copy_now(char* dst, const char* src, size_t bytes) {
  if (dst == src || bytes == 0 || copy_small_now(dst, src, bytes)) return;
  const bool apart = dst + bytes <= src || src + bytes <= dst;
  if (apart && streams(bytes)) {
    exec_->copy_streaming(dst, src, bytes);
  } else {
    exec_->copy(dst, src, bytes);
  }
}

void Engine::copy_while_waiting_large(char* dst, const char* src, size_t bytes) {
  if (dst == src || bytes == 0) return;
  const bool apart = dst + bytes <= src || src + bytes <= dst;
  if (!apart || bytes <= kIdleSlice || exec_->device() != DeviceKind::kCPU) {
    idle_stats_.at_once += bytes;
    copy_now(dst, src, bytes);
    return;
  }
  idle_ = {dst, src, bytes, streams(bytes)};
}

bool Engine::idle_copy_step(size_t most, uint64_t* count) {
  const size_t k = std::min(most, idle_.bytes);
  if (k == 0) return false;
  *count += k;
  if (idle_.streaming) {
    exec_->copy_streaming(idle_.dst, idle_.src, k);
  } else {
    exec_->copy(idle_.dst, idle_.src, k);
  }
  idle_.dst += k;
  idle_.src += k;
  idle_.bytes -= k;
  return true;
}

void Engine::run_feed(TransferFeed& feed) {
  p2p_used_ = true;
  sig_ = OpSignature{};
  sig_.kind = OpKind::kSendRecv;
  reset_op_options();  // runs on the worker: a blocking caller's interrupt check must not leak here
  run_guarded({}, &feed, false);
}

void Engine::abandon_receives() noexcept {
  // Receives whose senders may still write into the caller's buffers (split
  // copies): the caller frees or reuses them once this operation has failed.
  for (State& s : *states_) {
    if (!s.msg.complete && s.t.peer >= 0 && s.t.peer < mesh_.size()) {
      mesh_.link(s.t.peer).abandon(s.msg);
    }
  }
}

Engine::State& Engine::add_transfer(const Transfer& t, const OpSignature& sig, Deadline deadline) {
  State& s = states_->emplace_back();
  init_state(s, t, sig, deadline);
  return s;
}

void Engine::init_state(State& s, const Transfer& t, const OpSignature& sig, Deadline deadline) {
  s.engine = this;
  s.t = t;
  s.sig = sig;
  s.deadline = deadline;
  s.tag = 0;
  s.from_feed = false;
  s.reduced = 0;
  s.complete = false;
  s.land_token = 0;
  s.discarding = 0;
  if (s.t.peer < 0 || s.t.peer >= mesh_.size() || s.t.peer == mesh_.rank()) {
    fail(Status::kInternal, op_text(sig), ": transfer to invalid peer ", s.t.peer);
  }
  if (s.t.kind == Transfer::Kind::kSend) {
    s.hdr = std::bit_cast<WireHeader>(wire_words(sig, s.t.step, s.t.bytes));
  }
  transport::Message& m = s.msg;
  // Every field, as Message{} would leave it (assigning a fresh Message
  // costs twice the stores), then this transfer's.
  m.header = nullptr;
  m.sink = nullptr;
  m.stage = {};
  m.granule = 1;
  m.may_reference = false;
  m.stream = false;
  m.may_split = false;
  m.header_done = 0;
  m.done = 0;
  m.staged = 0;
  m.complete = false;
  transport::reset_link_state(m);
  m.header_bytes = sizeof(WireHeader);
  if (s.t.kind == Transfer::Kind::kSend) {
    m.payload = {const_cast<char*>(s.t.src), s.t.bytes, device_};
    // Collectives only: their steps post every receive a send waits for,
    // while point-to-point sends keep completing without the receiver
    // (buffered), as programs written for MPI's eager sends expect.
    m.may_reference = single_copy_ && sig.kind != OpKind::kSendRecv;
  } else {
    m.payload = {s.t.dst, s.t.bytes, device_};
    m.stream = streams(s.t.bytes) && device_ == DeviceKind::kCPU;
    m.may_split = split_copy_;
  }
  if (s.t.kind == Transfer::Kind::kRecvReduce) {
    m.stage = {staging_.data() + kStageBytes * stage_used_++, kStageBytes, DeviceKind::kCPU};
    m.granule = static_cast<uint32_t>(item_bytes(sig));
  }
}

void Engine::prepare_staging(std::span<const Transfer> transfers) {
  size_t n_reduce = 0;
  for (const auto& t : transfers) n_reduce += t.kind == Transfer::Kind::kRecvReduce;
  if (staging_.size() < n_reduce * kStageBytes) staging_.resize(n_reduce * kStageBytes);
  stage_used_ = 0;
}

bool Engine::pull_feed(TransferFeed* feed) {
  if (feed == nullptr) return false;
  bool any = false;
  Transfer t;
  OpSignature sig;
  Deadline dl = Deadline::never();
  size_t tag = 0;
  while (feed->next(t, sig, dl, tag)) {
    State& s = add_transfer(t, sig, dl);
    s.tag = tag;
    s.from_feed = true;
    any = true;
  }
  return any;
}

Engine::Pass Engine::progress_pass(TransferFeed* feed) {
  // (peer, direction) pairs already served this pass: only the first
  // incomplete transfer of each pair may move, keeping messages in order.
  PairSet& busy = busy_;
  busy.clear();
  Pass pass;
  for (auto& s : *states_) {
    if (s.complete) continue;
    pass.all_done = false;
    size_t key = size_t(s.t.peer) * 2 + (s.t.kind == Transfer::Kind::kSend);
    if (busy.has(key)) continue;
    busy.add(key);
    const bool listen = s.t.kind == Transfer::Kind::kListen;
    pass.progressed |= listen ? advance_listen(s, *feed) : advance(s);
    if (s.complete) {
      busy.remove(key);  // the next transfer of this pair may start in this pass
      if (s.from_feed && !listen) {
        mesh_.link(s.t.peer).flush();
        feed->done(s.tag);
      }
    }
  }
  return pass;
}

// The step's states (members, so steady state reuses their memory; references
// into states_ are not held across add_transfer: a feed may append while the
// step runs).
void Engine::load_states(std::span<const Transfer> transfers, bool adopt) {
  states_->clear();
  busy_.reset(size_t(mesh_.size()) * 2);
  if (adopt) {
    // The small path's transfers, with their progress (their staging slots
    // are still staging_'s: prepare_staging ran for these transfers).
    states_->assign(quick_->s.begin(), quick_->s.begin() + static_cast<std::ptrdiff_t>(transfers.size()));
  } else {
    prepare_staging(transfers);
    for (const auto& t : transfers) add_transfer(t, sig_, Deadline::never());  // op_deadline() applies
  }
}

void Engine::run_impl(std::span<const Transfer> transfers, TransferFeed* feed, bool adopt, bool spun) {
  load_states(transfers, adopt);
  quick_live_ = false;
  pull_feed(feed);
  feed_ = feed;
  run_loop(feed, adopt || spun);  // the small path has spun already: yield, then sleep
}

void Engine::run_loop(TransferFeed* feed, bool woke) {
  WaitPolicy wait(spin_for_, first_yield_, oversubscribed_);
  if (woke) wait.woke();
  stalled_since_ = Clock::time_point{};
  bool owe_flush = false;
  bool stalled = false;
  for (;;) {
    const Pass pass = progress_pass(feed);
    if (pass.all_done) {
      if (pull_feed(feed)) continue;
      flush_links();
      // A step that waited may have waited for a rank that rejected the call
      // (and then made room by dropping this rank's data).
      if (stalled && sig_.kind != OpKind::kSendRecv && !withdrawing_ && mesh_.notice_pending()) {
        mesh_.hear_rejection(sig_.seq);
      }
      if (idle_.bytes > 0) idle_copy_step(idle_.bytes, &idle_stats_.after);
      return;
    }
    if (pass.progressed) {
      waited(wait.progressed());
      stalled_since_ = Clock::time_point{};
      owe_flush = true;
      if (feed != nullptr && feed->owes()) pull_feed(feed);
      continue;
    }
    if (owe_flush) {
      // Waiting from here on: deliver the wake-ups owed for what moved.
      flush_links();
      owe_flush = false;
    }
    stalled = true;
    if (idle_.bytes > 0 && idle_copy_step(kIdleSlice, &idle_stats_.while_waiting)) continue;  // the peers' time, used
    switch (wait.next()) {
      case WaitPolicy::Action::kSpin: cpu_relax(); continue;
      case WaitPolicy::Action::kYield: yield_step(); continue;
      case WaitPolicy::Action::kSleep: break;
    }
    // No progress: errors reported on the control sockets apply now, and
    // the caller may ask to stop. A peer that left fails only a transfer
    // that still waits on it (sleep_step), after this pass consumed what it
    // delivered.
    mesh_.throw_if_failed();
    if (sig_.kind != OpKind::kSendRecv) mesh_.throw_if_rejected(sig_.seq);
    if (interrupt_.fired()) fail(Status::kInterrupted, op_text(), ": interrupted by the caller");
    if (pull_feed(feed)) {
      waited(wait.progressed());
      continue;
    }
    probe_if_stalled();
    if (any_stale_ && drain_stale()) continue;
    sleep_step(wait.futex_phase());
    wait.woke();
  }
}

}  // namespace omniccl
