// Deadlines: every blocking wait in OmniCCL is bounded by one of these.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <thread>

#include "common/status.h"

namespace omniccl {

using Clock = std::chrono::steady_clock;

/// A point in time after which a blocking call gives up. It may also carry a
/// cancel flag (cancelled_by): once the flag is set, expired() throws
/// kAborted, so every wait bounded by the deadline ends promptly when the
/// owner is aborted (non-blocking creation, see communicator/pending.h).
class Deadline {
 public:
  /// A deadline `ms` milliseconds from now (ms <= 0 means already expired).
  /// Saturates: a timeout too long for the clock (INT64_MAX ms, or 1e10 s,
  /// whose nanoseconds overflow) is a deadline that never passes, not one
  /// that wrapped into the past.
  static Deadline after_ms(int64_t ms) {
    const auto now = Clock::now();
    if (ms <= 0) return Deadline(now);
    const auto room = std::chrono::duration_cast<std::chrono::milliseconds>(Clock::time_point::max() - now).count();
    if (ms >= room) return never();
    return Deadline(now + std::chrono::milliseconds(ms));
  }
  static Deadline never() { return Deadline(Clock::time_point::max()); }
  explicit Deadline(Clock::time_point t) : t_(t) {}

  /// The same deadline, also ended when *flag becomes true.
  Deadline cancelled_by(const std::atomic<bool>* flag) const {
    Deadline d = *this;
    d.cancel_ = flag;
    return d;
  }

  /// True once the time has passed; throws kAborted once the cancel flag is set.
  bool expired() const {
    if (cancel_ != nullptr && cancel_->load(std::memory_order_acquire)) {
      fail(Status::kAborted, "aborted while the communicator was being created");
    }
    return Clock::now() >= t_;
  }
  Clock::time_point time() const { return t_; }
  /// Milliseconds left, clamped to [0, cap_ms] (and to 50 when a cancel flag
  /// must be watched); for poll() timeouts.
  int remaining_ms(int cap_ms) const {
    if (cancel_ != nullptr && cap_ms > kCancelPollMs) cap_ms = kCancelPollMs;
    auto now = Clock::now();
    if (now >= t_) return 0;
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(t_ - now).count() + 1;
    return left > cap_ms ? cap_ms : static_cast<int>(left);
  }
  /// The earlier of two deadlines, watching the cancel flag of either.
  static Deadline min(Deadline a, Deadline b) {
    Deadline d = a.t_ < b.t_ ? a : b;
    if (d.cancel_ == nullptr) d.cancel_ = a.cancel_ != nullptr ? a.cancel_ : b.cancel_;
    return d;
  }

 private:
  static constexpr int kCancelPollMs = 50;
  Clock::time_point t_;
  const std::atomic<bool>* cancel_ = nullptr;
};

/// One turn of a spin loop: tells the core this thread is waiting.
inline void cpu_relax() {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#elif defined(__aarch64__)
  asm volatile("yield");
#endif
}

/// Step i of a wait for another thread (a lock, a call to return): a pause
/// for the first 64 steps, then a yield up to 256, then naps of 50 us.
inline void backoff(unsigned i) {
  if (i < 64) {
    cpu_relax();
  } else if (i < 256) {
    std::this_thread::yield();
  } else {
    std::this_thread::sleep_for(std::chrono::microseconds(50));
  }
}

/// A caller's "stop waiting?" check (occl_options_t.interrupt): asked by a
/// blocking call before each sleep, so at least every 50 ms while it waits.
struct InterruptHook {
  int (*fn)(void*) = nullptr;
  void* data = nullptr;
  explicit operator bool() const { return fn != nullptr; }
  /// True when the caller asks to stop.
  bool fired() const { return fn != nullptr && fn(data) != 0; }
};

}  // namespace omniccl
