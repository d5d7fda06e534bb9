// The engine's entry points and its fast paths for small steps: a step whose
// messages are small moves them as whole messages where the links can
// (run_direct), else through a short loop without the general step's
// bookkeeping (run_quick); what is still waiting after the spin goes to the
// general loop (run_impl, engine.cc) with its progress.
#include <sched.h>

#include <algorithm>
#include <array>
#include <chrono>
#include <cstring>
#include <optional>
#include <vector>

#include "algorithm/engine_internal.h"

namespace omniccl {

// Inline in its two callers (run_one_now, run_guarded).
[[gnu::always_inline]] inline bool Engine::direct_done(const Transfer& t) {
  if (direct_one(t) != transport::Whole::kDone) return false;
  mesh_.link(t.peer).flush();
  ++quick_stats_.done;
  ++quick_stats_.direct;
  return true;
}

inline bool Engine::quick_transfer(const Transfer& t) const {
  return t.bytes <= kQuickBytes && t.kind != Transfer::Kind::kListen &&
         (held_.empty() || t.peer < 0 || t.peer >= mesh_.size() || !held_[size_t(t.peer)].has);
}

// Inline in run(initializer_list), its one caller.
[[gnu::always_inline]] inline bool Engine::run_one_now(const Transfer& t) {
  // quick_fits for one transfer, and run_guarded's first try.
  if (!whole_links_ || !quick_on_ || device_ != DeviceKind::kCPU || !quick_transfer(t)) return false;
  try {
    return direct_done(t);
  } catch (...) {
    step_failed();
  }
}

void Engine::run(std::initializer_list<Transfer> transfers) {
  // One message with no copy to make beside it (a 2-rank rooted operation's
  // step, a pairwise round): moved at once when it can, without the span
  // path's layers (run, quick_fits, run_guarded) in between.
  if (transfers.size() == 1 && idle_.bytes == 0 && run_one_now(*transfers.begin())) return;
  run(std::span<const Transfer>(transfers.begin(), transfers.size()));
}

void Engine::run(std::span<const Transfer> transfers) {
  const bool quick = quick_fits(transfers);
  if (idle_.bytes > 0 && (transfers.empty() || quick)) {
    idle_copy_step(idle_.bytes, &idle_stats_.at_once);  // nothing worth waiting for
  }
  if (transfers.empty()) return;
  run_guarded(transfers, nullptr, quick);
}

void Engine::run_guarded(std::span<const Transfer> transfers, TransferFeed* feed, bool quick) {
  try {
    bool adopt = false;
    bool spun = false;
    if (feed == nullptr && quick) {
      // One message that can move now (a send, or a receive already here):
      // moved without run_direct's loop.
      if (transfers.size() == 1 && whole_links_ && direct_done(transfers[0])) return;
      std::array<Transfer, kQuickTransfers>& rest = quick_->rest;
      const size_t left = run_direct(transfers, rest, spun);
      if (left == 0) {
        ++quick_stats_.done;
        ++quick_stats_.direct;
        return;
      }
      transfers = std::span<const Transfer>(rest.data(), left);
      if (!spun) {
        if (run_quick(transfers)) {
          ++quick_stats_.done;
          return;
        }
        adopt = true;
      }
      ++quick_stats_.handed_over;
    }
    run_impl(transfers, feed, adopt, spun);
  } catch (...) {
    step_failed();
  }
}

bool Engine::quick_fits(std::span<const Transfer> transfers) const {
  if (!quick_on_ || transfers.size() > kQuickTransfers || device_ != DeviceKind::kCPU) return false;
  for (const Transfer& t : transfers) {
    if (!quick_transfer(t)) return false;
  }
  return true;
}

bool Engine::run_quick(std::span<const Transfer> transfers) {
  std::array<State, kQuickTransfers>& qs = quick_->s;
  const size_t n = transfers.size();
  size_t n_reduce = 0;
  for (size_t i = 0; i < n; ++i) n_reduce += transfers[i].kind == Transfer::Kind::kRecvReduce;
  // (Before any state points into the staging; it restarts the slots, which
  // only recv-reduce transfers take.)
  if (n_reduce > 0) prepare_staging(transfers);
  for (size_t i = 0; i < n; ++i) init_state(qs[i], transfers[i], sig_, Deadline::never());  // op_deadline() applies
  quick_live_ = true;  // a withdrawal finds the step's states here
  quick_n_ = n;
  // The pairs served in a pass (one transfer alone needs no bookkeeping).
  if (n > 1) busy_.reset(size_t(mesh_.size()) * 2);
  std::optional<WaitPolicy> wait;  // built at the first pass that moves nothing
  size_t remaining = n;
  bool owe_flush = false;
  for (;;) {
    // As progress_pass: only the first incomplete transfer of each peer and
    // direction moves (one transfer alone needs no bookkeeping).
    bool progressed = false;
    if (n == 1) {
      progressed = advance(qs[0]);
      remaining = qs[0].complete ? 0 : 1;
    } else {
      busy_.clear();
      for (size_t i = 0; i < n; ++i) {
        State& s = qs[i];
        if (s.complete) continue;
        const size_t key = size_t(s.t.peer) * 2 + (s.t.kind == Transfer::Kind::kSend);
        if (busy_.has(key)) continue;
        busy_.add(key);
        progressed |= advance(s);
        if (s.complete) {
          busy_.remove(key);
          --remaining;
        }
      }
    }
    if (remaining == 0) {
      for (size_t i = 0; i < n; ++i) mesh_.link(qs[i].t.peer).flush();
      return true;
    }
    if (progressed) {
      if (wait) wait->progressed();
      owe_flush = true;
      continue;
    }
    if (owe_flush) {
      for (size_t i = 0; i < n; ++i) mesh_.link(qs[i].t.peer).flush();
      owe_flush = false;
    }
    // Past the spin phase the general loop waits (yield, sleep, deadlines,
    // errors, probes), from where these transfers are.
    if (!wait) wait.emplace(spin_for_, first_yield_, oversubscribed_);
    if (wait->next() != WaitPolicy::Action::kSpin) return false;
    cpu_relax();
  }
}

transport::Whole Engine::direct_one(const Transfer& t) {
  if (t.peer < 0 || t.peer >= mesh_.size() || t.peer == mesh_.rank())
    return transport::Whole::kNo;  // (init_state names it)
  transport::Link& link = mesh_.link(t.peer);
  // The header this rank sends, or expects (check_header's comparison).
  const WireWords h = wire_words(sig_, t.step, t.bytes);
  if (t.kind == Transfer::Kind::kSend) return link.send_whole(h.data(), sizeof h, t.src, t.bytes);
  transport::Whole why = transport::Whole::kNo;
  const char* at = link.peek_whole(sizeof h + t.bytes, why);
  if (at == nullptr) return why;
  // Another header: the general loop reads it and names what differs.
  if (!header_is(at, h)) return transport::Whole::kNo;
  const char* payload = at + sizeof h;
  if (t.kind == Transfer::Kind::kRecv) {
    copy_apart(t.dst, payload, t.bytes);
  } else {
    const size_t esize = item_bytes(sig_);
    if (t.bytes % esize != 0) return transport::Whole::kNo;
    if (t.bytes > 0) exec_->reduce(t.dst, t.src, payload, t.bytes / esize, sig_.dtype, combine_);
  }
  link.take_whole(sizeof h + t.bytes);
  return transport::Whole::kDone;
}

// The links of the transfers in `done` (a bit per transfer) deliver their wake-ups.
void Engine::flush_done(std::span<const Transfer> transfers, uint32_t done) {
  for (size_t i = 0; i < transfers.size(); ++i) {
    if (((done >> i) & 1) != 0) mesh_.link(transfers[i].peer).flush();
  }
}

size_t Engine::run_direct(std::span<const Transfer> transfers, std::span<Transfer> rest, bool& spun) {
  const size_t n = transfers.size();
  spun = false;
  // Keys (peer, direction) in one word: transfers behind one that has not
  // moved keep their order.
  const bool keyed = n > 1;
  if (!whole_links_ || (keyed && mesh_.size() > 32)) {
    std::copy(transfers.begin(), transfers.end(), rest.begin());
    return n;
  }
  uint32_t done = 0;
  const uint32_t all = (uint32_t{1} << n) - 1;
  std::optional<WaitPolicy> wait;  // built at the first pass that moves nothing
  bool owe_flush = false;
  bool refused = false;
  for (;;) {
    uint64_t blocked = 0;
    bool progressed = false;
    for (size_t i = 0; i < n; ++i) {
      if ((done >> i) & 1) continue;
      const Transfer& t = transfers[i];
      const uint64_t key = keyed ? uint64_t{1} << (unsigned(t.peer) * 2 + (t.kind == Transfer::Kind::kSend)) : 0;
      if ((blocked & key) != 0) continue;
      const transport::Whole w = direct_one(t);
      if (w == transport::Whole::kDone) {
        done |= uint32_t{1} << i;
        progressed = true;
        continue;
      }
      blocked |= key;
      refused |= w == transport::Whole::kNo;
    }
    if (done == all) {
      for (const Transfer& t : transfers) mesh_.link(t.peer).flush();
      return 0;
    }
    if (progressed) {
      if (wait) wait->progressed();
      owe_flush = true;
      if (!refused) continue;
    }
    if (owe_flush) {
      flush_done(transfers, done);
      owe_flush = false;
    }
    if (refused) break;
    if (!wait) wait.emplace(spin_for_, first_yield_, oversubscribed_);
    if (wait->next() != WaitPolicy::Action::kSpin) {
      spun = true;
      break;
    }
    cpu_relax();
  }
  size_t left = 0;
  for (size_t i = 0; i < n; ++i) {
    if (((done >> i) & 1) == 0) rest[left++] = transfers[i];
  }
  return left;
}

}  // namespace omniccl
