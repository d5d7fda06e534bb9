// A collective that one rank rejected for its arguments, withdrawn on every
// rank with every link left in step, so that each communicator stays usable.
//
// The rejecting rank sends nothing of the call: it tells every peer (a
// control notice) and sends each a withdrawal mark (wire.h kWithdrawMark)
// on the data link. A peer still in the call hears of it (the notice while
// it waits, or the mark in place of a message) and withdraws the call too:
// it finishes the messages of its step that are under way (a message
// half-sent would leave the byte stream out of step), starts no other,
// sends its own marks and fails the call with the rejection's message. A
// rank that receives a message of a withdrawn call later, or a mark of a
// call it has passed, drops it and reads the next. A rank whose part was
// only to send may have completed the call before it heard: its data is
// dropped by the receiver, and the notice is logged at its next call.
#include <poll.h>

#include <algorithm>
#include <utility>
#include <vector>

#include "algorithm/engine_internal.h"

namespace omniccl {

bool Engine::check_header(State& s) {
  // The common case, everything equal, without building a description: the
  // header this rank would have sent, compared whole (no padding in it).
  if (header_is(&s.hdr, wire_words(s.sig, s.t.step, s.t.bytes))) [[likely]] {
    return true;
  }
  return unexpected_header(s);
}

bool Engine::unexpected_header(State& s) {
  const WireHeader& h = s.hdr;
  const uint64_t mine = s.sig.seq;
  const bool collective = s.sig.kind != OpKind::kSendRecv && h.kind != uint8_t(OpKind::kSendRecv);
  if (h.magic != kWireMagic || !collective) fail_header(s);
  const bool mark = OpKind(h.kind) == kWithdrawMark;
  if (mark && h.seq == mine) {
    // The running call: the sender withdrew it (a rank rejected it).
    start_discard(s, true);  // nothing more of this call comes from that peer
    if (withdrawing_) return false;
    const std::string* why = rejection_text(h.seq);
    throw transport::RejectedCall{
        h.seq,
        why != nullptr
            ? *why
            : str_cat(h.root >= 0 ? str_cat("rank ", h.root) : "a rank", " rejected the arguments of its ",
                      op_kind_name(s.sig.kind), " #", h.seq, " (", mesh_.describe(s.t.peer), " withdrew it)"),
        h.root};
  }
  if ((mark && h.seq < mine) || (h.seq < mine && mesh_.withdrawn(h.seq))) {
    const size_t p = size_t(s.t.peer);
    if (mark && p < stale_from_.size() && h.seq >= stale_from_[p]) stale_from_[p] = 0;  // the last of it
    start_discard(s, false);
    return false;
  }
  fail_header(s);
}

const std::string* Engine::rejection_text(uint64_t seq) {
  // The rejecting rank sent its notice before its marks, and a rank that
  // withdrew the call heard of it first: it is on its way, if not here.
  const Deadline wait = Deadline::after_ms(kNoticeWaitMs);
  const std::string* why = mesh_.peer_rejection(seq);
  std::vector<pollfd> none;
  while (why == nullptr && !wait.expired()) {
    mesh_.sleep(none, 1);
    why = mesh_.peer_rejection(seq);
  }
  return why;
}

void Engine::start_discard(State& s, bool ends_receive) {
  if (discard_.size() < size_t(mesh_.size())) discard_.resize(size_t(mesh_.size()));
  if (discard_stage_.empty()) discard_stage_.resize(kStageBytes);
  transport::Message& d = discard_[size_t(s.t.peer)];
  d = transport::Message{};
  transport::move_progress(d, s.msg);
  d.header_bytes = sizeof(WireHeader);
  d.payload = {nullptr, s.hdr.bytes, DeviceKind::kCPU};
  d.stage = {discard_stage_.data(), discard_stage_.size(), DeviceKind::kCPU};
  d.granule = 1;
  OCCL_LOG(kDebug, kColl, op_text(s.sig), ": dropping ", op_kind_name(OpKind(s.hdr.kind)), " #", s.hdr.seq, " (",
           s.hdr.bytes, " bytes) from ", mesh_.describe(s.t.peer), ", a withdrawn call's");
  // This receive starts over at the next header.
  transport::Message& m = s.msg;
  m.header_done = 0;
  m.done = 0;
  m.staged = 0;
  m.complete = false;
  transport::reset_link_state(m);
  s.discarding = ends_receive ? 2 : 1;
}

bool Engine::discard_message(State& s) {
  transport::Message& d = discard_[size_t(s.t.peer)];
  d.header = &discard_hdr_;
  d.sink = &drop_sink_;
  const bool moved = mesh_.link(s.t.peer).recv_payload(d);
  if (!d.complete) return moved;
  s.complete = s.discarding == 2;
  s.discarding = 0;
  return true;
}

const transport::Message& Engine::recv_message(const State& s) const {
  return s.discarding != 0 ? discard_[size_t(s.t.peer)] : s.msg;
}

void Engine::keep_step_for_withdrawal() {
  std::vector<State> kept;
  auto keep = [&](const State& s) {
    if (s.complete || s.t.kind == Transfer::Kind::kListen) return;
    if (s.t.kind != Transfer::Kind::kSend || s.msg.header_done > 0) kept.push_back(s);
  };
  if (quick_live_) {
    for (size_t i = 0; i < quick_n_; ++i) keep(quick_->s[i]);
  } else {
    for (const State& s : *states_) keep(s);
  }
  states_->assign(kept.begin(), kept.end());
  busy_.reset(size_t(mesh_.size()) * 2);
}

void Engine::expect_stale(uint64_t seq) {
  stale_from_.resize(size_t(mesh_.size()), 0);
  for (int p = 0; p < mesh_.size(); ++p) {
    if (p != mesh_.rank()) stale_from_[size_t(p)] = std::max(stale_from_[size_t(p)], seq);
  }
  any_stale_ = true;
}

bool Engine::receiving_from(int peer) const {
  for (const State& s : *states_) {
    if (!s.complete && s.t.peer == peer && s.t.kind != Transfer::Kind::kSend) return true;
  }
  return false;
}

bool Engine::drain_stale() {
  // Only where a header comes whole (shared memory: one record) and no
  // point-to-point message can be among them (it could not be held for a
  // receive): elsewhere the stale messages wait for the next receive.
  if (p2p_used_) return false;
  bool moved = false;
  bool left = false;
  for (int p = 0; p < mesh_.size(); ++p) {
    if (stale_from_[size_t(p)] == 0) continue;
    if (!mesh_.link(p).whole_messages() || receiving_from(p)) {
      left = true;
      continue;
    }
    moved |= drain_peer(p);
    left |= stale_from_[size_t(p)] != 0;
  }
  any_stale_ = left;
  return moved;
}

bool Engine::drain_peer(int peer) {
  if (held_.size() < size_t(mesh_.size())) held_.resize(size_t(mesh_.size()));
  Held& h = held_[size_t(peer)];
  transport::Link& link = mesh_.link(peer);
  uint64_t& stale = stale_from_[size_t(peer)];
  bool moved = false;
  while (stale != 0) {
    if (!h.has) {
      h.msg = transport::Message{};
      h.msg.header_bytes = sizeof(WireHeader);
      h.msg.header = &h.hdr;
      link.recv_header(h.msg);
      if (h.msg.header_done == 0) return moved;
      if (h.msg.header_done < sizeof(WireHeader)) fail(Status::kInternal, "a partial header on a whole-message link");
      h.has = true;
      moved = true;
    }
    const bool mark = OpKind(h.hdr.kind) == kWithdrawMark;
    const bool dropped = h.hdr.magic == kWireMagic && h.hdr.kind != uint8_t(OpKind::kSendRecv) && h.hdr.seq <= stale &&
                         (mark || mesh_.withdrawn(h.hdr.seq));
    if (!dropped) {  // the peer is past the withdrawn call: its next message waits here
      stale = 0;
      return moved;
    }
    transport::Message& m = h.msg;
    m.header = &h.hdr;
    m.payload = {nullptr, h.hdr.bytes, DeviceKind::kCPU};
    m.sink = &drop_sink_;
    if (discard_stage_.empty()) discard_stage_.resize(kStageBytes);
    m.stage = {discard_stage_.data(), discard_stage_.size(), DeviceKind::kCPU};
    m.granule = 1;
    moved |= link.recv_payload(m);
    if (!m.complete) return moved;
    h.has = false;
    if (mark && h.hdr.seq == stale) stale = 0;  // the last of it
  }
  return moved;
}

void Engine::withdraw(const transport::RejectedCall& r) {
  mesh_.note_withdrawn(r.seq);
  keep_step_for_withdrawal();
  expect_stale(r.seq);
  OpSignature mark;
  mark.kind = kWithdrawMark;
  mark.seq = r.seq;
  mark.root = r.by;
  single_copy_ = false;
  idle_.bytes = 0;  // the call's own copy: its result is not wanted
  for (int p = 0; p < mesh_.size(); ++p) {
    if (p != mesh_.rank()) add_transfer(Transfer::send(p, nullptr, 0, 0), mark, Deadline::never());
  }
  withdrawing_ = true;
  try {
    run_loop(nullptr, true);
  } catch (...) {
    withdrawing_ = false;
    step_failed();
  }
  withdrawing_ = false;
  OCCL_LOG(kInfo, kColl, op_text(), " withdrawn: ", r.why);
  throw transport::CallWithdrawn(Status::kMismatch,
                                 str_cat(op_text(), ": calls do not match across ranks: ", r.why,
                                         " (the call was withdrawn on every rank; the communicator is still usable)"));
}

void Engine::send_withdrawal_marks(uint64_t seq, int64_t timeout_ms) {
  OpSignature& sig = begin_in_place(RedOp::kSum, timeout_ms);
  sig = OpSignature{};
  sig.kind = kWithdrawMark;
  sig.seq = seq;
  sig.root = mesh_.rank();
  use_cpu();
  expect_stale(seq);
  std::vector<Transfer>& ts = step_list();
  for (int p = 0; p < mesh_.size(); ++p) {
    if (p != mesh_.rank()) add_send(ts, p, nullptr, 0, 0);
  }
  run(std::span<const Transfer>(ts));
}

}  // namespace omniccl
