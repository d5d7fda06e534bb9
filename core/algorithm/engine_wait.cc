// The engine's waiting policy, in one place for every transport: spin, then
// yield, then sleep on a futex word or in poll() until a transport says it
// can move again; deadlines and the probes that find mismatched calls while
// waiting (the constants and their reasons: engine_internal.h).
#include <sched.h>

#include <algorithm>
#include <array>
#include <chrono>
#include <cstring>
#include <optional>
#include <vector>

#include "algorithm/engine_internal.h"

namespace omniccl {

void Engine::probe_if_stalled() {
  if (sig_.kind == OpKind::kSendRecv) return;
  auto now = Clock::now();
  if (stalled_since_ == Clock::time_point{}) stalled_since_ = now;
  if (!probed_ && now - stalled_since_ > kProbeAfter) {
    mesh_.send_queries(sig_.seq);
    probed_ = true;
  }
  if (probed_) probe_signatures();
}

// The transfers that wait (the first incomplete one of each peer and
// direction) into waiting_; true when one turned out complete already (a
// listen whose peer has left), so that no sleep is due.
bool Engine::collect_waiting() {
  std::vector<State*>& waiting = waiting_;
  waiting.clear();
  bool ready = false;
  busy_.clear();
  for (auto& s : *states_) {
    if (s.complete) continue;
    bool sending = s.t.kind == Transfer::Kind::kSend;
    size_t key = size_t(s.t.peer) * 2 + sending;
    if (busy_.has(key)) continue;
    busy_.add(key);
    if (s.t.kind == Transfer::Kind::kListen && s.msg.header_done == 0 && feed_ != nullptr && !feed_->named(s.t.peer)) {
      // Only ANY_SOURCE receives listen here: a peer that has left ends
      // this listen, not the step (the others may still send).
      try {
        mesh_.check_peer(s.t.peer);
      } catch (const Error&) {
        s.complete = true;
        feed_->listen_ended(s.t.peer, true);
        ready = true;
        continue;
      }
    }
    waiting.push_back(&s);
    mesh_.check_peer(s.t.peer);
  }
  return ready;
}

// Arms the waiting transfers' links, to be woken as `by` says, and collects
// the descriptors to poll into fds_; true when one can move now (no sleep).
bool Engine::arm_waiting(transport::WakeBy by) {
  fds_.clear();
  for (State* s : waiting_) {
    transport::Link& link = mesh_.link(s->t.peer);
    const transport::WaitOn w =
        s->t.kind == Transfer::Kind::kSend ? link.arm_send(s->msg, by) : link.arm_recv(recv_message(*s), by);
    switch (w.how) {
      case transport::WaitOn::How::kReady: return true;  // the rest need not be armed
      case transport::WaitOn::How::kPoll: fds_.push_back({w.fd, w.events, 0}); break;
      case transport::WaitOn::How::kDoorbell: break;  // Mesh::sleep polls the control sockets
      case transport::WaitOn::How::kFutex: break;     // Mesh::sleep_on_futex waits on the word
    }
  }
  return false;
}

void Engine::sleep_step(bool futex) {
  // Arm every pending transfer's link, re-check, then sleep until one can
  // move or a deadline.
  flush_links();
  fds_.clear();
  bool ready = collect_waiting();
  std::vector<State*>& waiting = waiting_;
  // Every transfer may have completed during the last pass (it started
  // with one incomplete): nothing to sleep on, the next pass sees it done.
  if (!ready && waiting.empty()) return;
  // The futex word wakes only from links that can bump it: with a TCP link
  // among them, every link rings (doorbells) and this rank polls.
  futex = futex && mesh_.sleeps_on_futex();
  for (State* s : waiting) futex = futex && mesh_.link(s->t.peer).wakes_futex();
  const transport::WakeBy by = futex ? transport::WakeBy::kFutex : transport::WakeBy::kDoorbell;
  const uint32_t seq = futex ? mesh_.futex_seq() : 0;  // before arming: a wake after it changes the word
  if (!ready) ready = arm_waiting(by);
  if (!ready) {
    State* first = earliest_deadline(waiting);
    if (first->deadline.expired()) {
      for (State* s : waiting) mesh_.link(s->t.peer).disarm();
      fail_deadline(*first, waiting);
    }
    const int timeout_ms = first->deadline.remaining_ms(interrupt_ ? 50 : 200);
    ++wait_stats_.sleeps;
    if (futex) {
      mesh_.sleep_on_futex(seq, std::min(timeout_ms, kFutexSliceMs));
    } else {
      mesh_.sleep(fds_, timeout_ms);
    }
  }
  for (State* s : waiting) mesh_.link(s->t.peer).disarm();
}

Engine::State* Engine::earliest_deadline(std::vector<State*>& waiting) {
  // Collective transfers share the operation's deadline; fed ones
  // (send/recv) carry their own.
  for (State* s : waiting) {
    if (!s->from_feed) s->deadline = op_deadline();
  }
  State* first = waiting.front();
  for (State* s : waiting) {
    if (s->deadline.time() < first->deadline.time()) first = s;
  }
  return first;
}

void Engine::fail_deadline(const State& first, const std::vector<State*>& waiting) {
  std::vector<int> peers;
  for (State* s : waiting) {
    if (std::find(peers.begin(), peers.end(), s->t.peer) == peers.end()) peers.push_back(s->t.peer);
  }
  mesh_.fail_timeout(op_text(first.sig), first.sig.seq, peers);
}

void Engine::yield_step() {
  if (oversubscribed_) {
    // Ranks outnumber cores: the awaited peer may need this very core.
    sched_yield();
    return;
  }
  const auto before = Clock::now();
  if (before < no_yield_until_) {
    // A yield gave the core away lately: spin through the yield phase.
    cpu_relax();
    return;
  }
  sched_yield();
  const auto after = Clock::now();
  if (after - before >= kYieldStolen) {
    ++wait_stats_.stolen_yields;
    no_yield_until_ = after + kNoYieldFor;
  }
}

void Engine::waited(std::chrono::nanoseconds slept_wait) {
  if (slept_wait.count() == 0) return;
  const bool short_wait = slept_wait <= kYieldAwake;
  ++(short_wait ? wait_stats_.short_slept_waits : wait_stats_.long_slept_waits);
  first_yield_ = short_wait ? std::chrono::nanoseconds(kYieldAwake) : kYieldFor;
}

void Engine::wait_sends_read(uint64_t max_ns) {
  const auto until = std::chrono::steady_clock::now() + std::chrono::nanoseconds(max_ns);
  for (int p = 0; p < mesh_.size(); ++p) {
    if (p == mesh_.rank()) continue;
    const transport::Link& link = mesh_.link(p);
    for (unsigned i = 0; link.sends_unread(); ++i) {
      cpu_relax();
      if (i % 64 == 63 && std::chrono::steady_clock::now() >= until) return;
    }
  }
}

}  // namespace omniccl
