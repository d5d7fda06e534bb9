// The engine's insides, shared by its units (engine.cc: operations and the
// step loop; engine_fast.cc: the small-step fast paths; engine_wait.cc: the
// waiting policy; engine_p2p.cc: point-to-point listening). Not for use
// outside core/algorithm/engine*.cc.
#pragma once

#include <sched.h>

#include <algorithm>
#include <array>
#include <chrono>
#include <optional>
#include <vector>

#include "algorithm/engine.h"
#include "algorithm/wire.h"
#include "common/log.h"
#include "common/small_copy.h"

namespace omniccl {

namespace {

constexpr size_t kStageBytes = 256 * 1024;  // staging per recv-reduce transfer
// The small-step path (Engine::run_quick): steps of up to this many
// transfers of up to this many bytes each. A <= 1 KiB operation's messages
// fit (a tree's gathered blocks of a few ranks included), and on shared
// memory each is one ring record.
constexpr size_t kQuickTransfers = 8;
constexpr size_t kQuickBytes = transport::kSmallPayloadMax;
// After this long without progress, ask peers for their signatures: calls that
// differ only where no message is exchanged (e.g. the root) are found this way.
constexpr auto kProbeAfter = std::chrono::milliseconds(300);
// Waiting: spin, then yield (cheap when nothing else wants the core, and it
// lets co-scheduled ranks run when ranks outnumber cores), then sleep.
// When every rank of this host has a core of its own, a rank spins 20 us (a
// peer's answer usually comes within microseconds), then yields every 16th
// pass. When ranks outnumber cores the awaited peer may need this very core:
// the rank does not spin and yields at every pass (as Open MPI's ranks do
// when oversubscribed; 4 ranks on 2 cores, 8 B, against spinning 2 us first:
// about even on a quiet machine, 0-54 % faster under load). It still
// yields before it sleeps: going to sleep at once was measured slower (8 B
// barrier ~30 us instead of ~9 us), as a core left idle takes long to wake
// (a virtual machine's idle vCPU above all).
// Sleep: first on this rank's futex word, which the peer that sends or makes
// room bumps and wakes (no socket, no poll), in waits of kFutexSliceMs, each
// that times out reading the control sockets (notices, a peer's death); after
// kFutexPhase without progress, in poll() on the control sockets until a
// doorbell, costing nothing while blocked. A rank blocked for long burns
// about spin + kYieldFor per wake-up.
// A yield that took Engine::kYieldStolen or more gave the core to another
// process (one that competes for it: a scheduler slice, milliseconds; with a
// busy process beside 2 ranks on 2 cores, the receiver's first 8 B
// broadcast after a barrier took 2.6-5.2 ms in 19 of a job's 20 trials of
// 1000 calls): for kNoYieldFor after
// it, the waits spin through their yield phase instead (Engine::yield_step),
// with ranks that each have a core.
// A wait that slept and still ended within kYieldAwake makes the next waits
// yield that long before their first sleep (Engine::first_yield): waking a
// sleeping rank took 200-250 us on a VM whose idle vCPUs wake slowly, and a
// rank that sleeps makes its peer's next wait as long, so two ranks slept in
// turn on every call (an 8 B all_reduce at 230 us a call). A
// wait longer than that turns it off; after each wake-up the yield is
// kYieldFor either way, so a blocked rank still sleeps.
constexpr auto kSpinAlone = std::chrono::microseconds(20);
constexpr auto kSpinShared = std::chrono::microseconds(0);
constexpr auto kFutexPhase = std::chrono::milliseconds(100);
constexpr int kFutexSliceMs = 10;

}  // namespace

// One transfer in a step. It is the sink of its payload when it reduces
// (the link hands the incoming operand over in pieces).
struct Engine::State final : transport::PayloadSink {
  Engine* engine = nullptr;
  Transfer t;
  OpSignature sig;  // this transfer's operation (p2p batches mix several)
  Deadline deadline = Deadline::never();
  size_t tag = 0;
  bool from_feed = false;
  WireHeader hdr{};
  transport::Message msg;  // the link's view; header and sink re-pointed before each call (states move)
  size_t reduced = 0;      // recv-reduce: payload bytes already reduced into dst
  bool complete = false;
  size_t land_token = 0;  // listen: the feed's token for the message being read
  // A receive dropping a withdrawn call's message (Engine::start_discard):
  // 1 reads the next header after it, 2 is complete after it (the peer's
  // withdrawal mark, while this rank withdraws that call too).
  uint8_t discarding = 0;

  size_t take(const char* data, size_t n) override { return engine->reduce_next(*this, data, n); }
};

struct Engine::StateQueue : std::vector<State> {};

struct Engine::QuickSet {
  std::array<State, kQuickTransfers> s;
  std::array<Transfer, kQuickTransfers> rest;  ///< run_direct's transfers left over
};

struct Engine::Held {
  bool has = false;
  WireHeader hdr{};
  transport::Message msg;  // the link's progress on that message (its header is all there)
};

// The waiting policy, in one place for every transport: after a pass that
// moved nothing, spin (cheap passes between clock readings), then yield,
// then sleep until a transport says it can move again (Engine::sleep_step).
class Engine::WaitPolicy {
 public:
  enum class Action { kSpin, kYield, kSleep };
  /// Spins `spin`, then yields for `first_yield` before the first sleep and
  /// kYieldFor after each wake-up: at every pass with `yield_each_pass`
  /// (ranks outnumber cores), else every 16th.
  WaitPolicy(std::chrono::nanoseconds spin, std::chrono::nanoseconds first_yield, bool yield_each_pass)
      : spin_(spin), first_yield_(first_yield), yield_each_pass_(yield_each_pass) {}

  /// What to do after a pass without progress.
  Action next() {
    // Reading the clock costs more than a pass over the transfers: spin (or
    // yield) a few passes between readings.
    if ((++idle_passes_ & 15) != 0 && idle_since_ != Clock::time_point{}) {
      return yielding_ && yield_each_pass_ ? Action::kYield : Action::kSpin;
    }
    const auto now = Clock::now();
    if (idle_since_ == Clock::time_point{}) idle_since_ = now;
    yielding_ = false;
    if (now - idle_since_ < spin_) return Action::kSpin;
    yielding_ = now - idle_since_ < spin_ + (asleep_since_ == Clock::time_point{} ? first_yield_ : kYieldFor);
    if (yielding_) return Action::kYield;
    if (asleep_since_ == Clock::time_point{}) {
      asleep_since_ = now;
      waited_since_ = idle_since_;
    }
    return Action::kSleep;
  }
  /// Something moved: start over. Returns how long the wait took where it
  /// slept (from its first pass without progress), else zero.
  std::chrono::nanoseconds progressed() {
    std::chrono::nanoseconds slept_wait{0};
    if (asleep_since_ != Clock::time_point{}) slept_wait = Clock::now() - waited_since_;
    idle_since_ = asleep_since_ = Clock::time_point{};
    yielding_ = false;
    return slept_wait;
  }
  /// Before a wait's first sleep (the small path spun already), or after a
  /// wake-up from sleep: yield a while, then sleep (again).
  void woke() { idle_since_ = Clock::now() - spin_; }
  /// Whether the sleep that next() asked for is still short enough for
  /// futex waits (kFutexPhase since the first sleep without progress).
  bool futex_phase() const { return Clock::now() - asleep_since_ < kFutexPhase; }

 private:
  std::chrono::nanoseconds spin_;
  std::chrono::nanoseconds first_yield_;
  bool yield_each_pass_;
  bool yielding_ = false;             // in the yield phase (as of the last clock reading)
  Clock::time_point idle_since_{};    // first pass without progress (epoch = progressing)
  Clock::time_point asleep_since_{};  // first sleep without progress (epoch = none yet)
  Clock::time_point waited_since_{};  // idle_since_ when the first sleep came
  unsigned idle_passes_ = 0;
};

inline bool Engine::advance(State& s) {
  transport::Link& link = mesh_.link(s.t.peer);
  transport::Message& m = s.msg;
  m.header = &s.hdr;
  if (s.t.kind == Transfer::Kind::kSend) {
    bool progressed = link.send(m);
    s.complete = m.complete;
    return progressed;
  }
  if (s.discarding != 0) [[unlikely]] {
    return discard_message(s);
  }
  bool progressed = false;
  if (m.header_done < sizeof(WireHeader)) {
    if (m.header_done == 0 && take_held(s.t.peer, s)) {
      progressed = true;
    } else {
      progressed = link.recv_header(m);
      if (m.header_done < sizeof(WireHeader)) return progressed;
    }
    if (!check_header(s)) [[unlikely]] {
      discard_message(s);
      return true;
    }
  }
  if (s.t.kind == Transfer::Kind::kRecvReduce) m.sink = &s;
  progressed |= link.recv_payload(m);
  s.complete = m.complete;
  return progressed;
}

}  // namespace omniccl
