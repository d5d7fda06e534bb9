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

Issuer::Entry Issuer::enter() {
  const uintptr_t me = self();
  uintptr_t w = word_.load(std::memory_order_relaxed);
  if (w == me) return Entry::kNested;
  if (w == (me | kKeeps)) {
    // Only this thread writes busy_ while it keeps the issuer.
    if (busy_.load(std::memory_order_relaxed)) return Entry::kNested;
    busy_.store(true, std::memory_order_relaxed);
    // A thread taking the issuer runs a process-wide barrier between its
    // compare-and-swap and its look at busy_: either it sees busy_, or
    // this load sees that the issuer was taken.
    std::atomic_signal_fence(std::memory_order_seq_cst);
    if (word_.load(std::memory_order_relaxed) == (me | kKeeps)) return Entry::kEnteredKept;
    busy_.store(false, std::memory_order_release);
    w = word_.load(std::memory_order_relaxed);
  }
  for (;;) {
    if (w == 0) {
      if (word_.compare_exchange_weak(w, me, std::memory_order_acquire, std::memory_order_relaxed)) break;
      continue;
    }
    if ((w & kKeeps) == 0) return Entry::kBusy;  // another thread is in a call
    // Another thread keeps it: take it, unless that thread is in a call.
    const uintptr_t keeper = w;
    if (!word_.compare_exchange_weak(w, me, std::memory_order_acquire, std::memory_order_relaxed)) continue;
    process_barrier();
    if (busy_.load(std::memory_order_acquire)) {
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
    busy_.store(false, std::memory_order_release);
    return;
  }
  const uintptr_t me = self();
  const bool keep = run_ >= kKeepAfter && private_barrier_ready();
  word_.store(keep ? (me | kKeeps) : uintptr_t{0}, std::memory_order_release);
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
    for (unsigned j = 0; busy_.load(std::memory_order_acquire); ++j) backoff(j);
    last_ = me;
    run_ = 0;
    word_.store(0, std::memory_order_release);
    return;
  }
}

}  // namespace omniccl
