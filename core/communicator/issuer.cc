#include "communicator/issuer.h"

#include <linux/membarrier.h>
#include <pthread.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "common/time.h"

namespace omniccl {

namespace {

constexpr uintptr_t kKeeps = 1;

// The thread's name: its pthread_t, the address of its descriptor in glibc
// and musl (aligned: the low bit is free for kKeeps), read without the
// __tls_get_addr call a thread_local of a shared library costs. A thread
// that ended may leave it to a new one, which then finds itself the keeper:
// harmless, as the old one cannot be in a call.
uintptr_t self() { return static_cast<uintptr_t>(::pthread_self()) & ~kKeeps; }

// Set once private_barrier_ready() knows its answer.
std::atomic<bool> barrier_known{false};

bool private_barrier_ready() {
  static const bool ok = [] {
    const long cmds = ::syscall(__NR_membarrier, MEMBARRIER_CMD_QUERY, 0, 0);
    const bool registered = cmds >= 0 && (cmds & MEMBARRIER_CMD_PRIVATE_EXPEDITED) != 0 &&
                            ::syscall(__NR_membarrier, MEMBARRIER_CMD_REGISTER_PRIVATE_EXPEDITED, 0, 0) == 0;
    barrier_known.store(true, std::memory_order_release);
    return registered;
  }();
  return ok;
}

// Every thread of this process passes a full barrier (only called once
// private_barrier_ready() has registered, which is before any thread keeps
// the issuer).
void process_barrier() {
  if (::syscall(__NR_membarrier, MEMBARRIER_CMD_PRIVATE_EXPEDITED, 0, 0) != 0) {
    std::atomic_thread_fence(std::memory_order_seq_cst);  // not reached once registered
  }
}

}  // namespace

bool Issuer::can_keep() { return private_barrier_ready(); }

bool Issuer::prepared() { return barrier_known.load(std::memory_order_acquire); }

bool Issuer::kept_by_this_thread() const { return word_.load(std::memory_order_relaxed) == (self() | kKeeps); }

Issuer::Slot* Issuer::slot_of(uintptr_t me) {
  for (Slot& s : slots_) {
    if (s.owner.load(std::memory_order_relaxed) == me) return &s;
  }
  return nullptr;
}

Issuer::Slot* Issuer::slot_for(uintptr_t me) {
  if (Slot* s = slot_of(me)) return s;
  // Only the thread holding word_ claims slots, so no two claim at once.
  for (Slot& s : slots_) {
    if (s.owner.load(std::memory_order_relaxed) == 0) {
      s.owner.store(me, std::memory_order_relaxed);
      return &s;
    }
  }
  return nullptr;
}

Issuer::Entry Issuer::enter() {
  // The keeper's slot before the word: a thread that becomes keeper names
  // its slot before its word (release, both), so a word read after a slot
  // is never older than that slot's keeper; a thread that reads its own
  // keeper word therefore reads its own slot (or, having lost the issuer
  // since, a later one, whose owner is not this thread).
  Slot* seen = keeper_slot_.load(std::memory_order_acquire);
  return enter_seen(seen, word_.load(std::memory_order_acquire));
}

Issuer::Entry Issuer::enter_as_former_keeper() { return enter_seen(slot_of(self()), self() | kKeeps); }

Issuer::Entry Issuer::enter_seen(Slot* seen, uintptr_t w) {
  const uintptr_t me = self();
  if (w == me) return Entry::kNested;
  if (w == (me | kKeeps) && seen != nullptr && seen->owner.load(std::memory_order_relaxed) == me) {
    // Only this thread writes its slot's busy flag.
    if (seen->busy.load(std::memory_order_relaxed)) return Entry::kNested;
    seen->busy.store(true, std::memory_order_relaxed);
    // A thread taking the issuer runs a process-wide barrier between its
    // compare-and-swap and its look at the keeper's flag: either it sees
    // the flag, or this load sees that the issuer was taken.
    std::atomic_signal_fence(std::memory_order_seq_cst);
    if (word_.load(std::memory_order_relaxed) == (me | kKeeps)) return Entry::kEnteredKept;
    seen->busy.store(false, std::memory_order_release);
    w = word_.load(std::memory_order_relaxed);
  }
  for (;;) {
    if (w == 0) {
      if (word_.compare_exchange_weak(w, me, std::memory_order_acquire, std::memory_order_relaxed)) break;
      continue;
    }
    if ((w & kKeeps) == 0) return Entry::kBusy;  // another thread is in a call
    // A thread keeps it: take it, unless that thread is in a call.
    const uintptr_t keeper = w;
    if (!word_.compare_exchange_weak(w, me, std::memory_order_acquire, std::memory_order_relaxed)) continue;
    process_barrier();
    // keeper_slot_ is the keeper's: only a thread holding word_ changes it.
    if (keeper_slot_.load(std::memory_order_relaxed)->busy.load(std::memory_order_acquire)) {
      word_.store(keeper, std::memory_order_release);  // give it back: only a holder writes word_
      return Entry::kBusy;
    }
    break;
  }
  if (last_ != me) {
    last_ = me;
    run_ = 0;
  }
  if (run_ < kKeepAfter) ++run_;
  return Entry::kEntered;
}

void Issuer::leave(Entry how) {
  if (how == Entry::kEnteredKept) {
    // keeper_slot_ is this thread's while it is in a kept call: a thread
    // taking the issuer meanwhile gives it back without changing it.
    keeper_slot_.load(std::memory_order_relaxed)->busy.store(false, std::memory_order_release);
    return;
  }
  const uintptr_t me = self();
  if (run_ >= kKeepAfter && private_barrier_ready()) {
    if (Slot* s = slot_for(me)) {
      keeper_slot_.store(s, std::memory_order_release);
      word_.store(me | kKeeps, std::memory_order_release);
      return;
    }
  }
  word_.store(0, std::memory_order_release);
}

void Issuer::drain() {
  const uintptr_t me = self();
  for (unsigned i = 0;; ++i) {
    uintptr_t w = word_.load(std::memory_order_acquire);
    if (w == 0 || w == me || w == (me | kKeeps)) return;
    if ((w & kKeeps) == 0) {  // a call entered by compare-and-swap: wait for it
      backoff(i);
      continue;
    }
    // Take it from its keeper, then wait for the keeper's call (if any).
    if (!word_.compare_exchange_strong(w, me, std::memory_order_acquire, std::memory_order_relaxed)) continue;
    process_barrier();
    const Slot* keeper = keeper_slot_.load(std::memory_order_relaxed);
    for (unsigned j = 0; keeper->busy.load(std::memory_order_acquire); ++j) backoff(j);
    last_ = me;
    run_ = 0;
    word_.store(0, std::memory_order_release);
    return;
  }
}

}  // namespace omniccl
