// Deadlines: every blocking wait in OmniCCL is bounded by one of these.
#pragma once

#include <chrono>
#include <cstdint>

namespace omniccl {

using Clock = std::chrono::steady_clock;

/// A point in time after which a blocking call gives up.
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

  bool expired() const { return Clock::now() >= t_; }
  Clock::time_point time() const { return t_; }
  /// Milliseconds left, clamped to [0, cap_ms]; for poll() timeouts.
  int remaining_ms(int cap_ms) const {
    auto now = Clock::now();
    if (now >= t_) return 0;
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(t_ - now).count() + 1;
    return left > cap_ms ? cap_ms : static_cast<int>(left);
  }
  /// The earlier of two deadlines.
  static Deadline min(Deadline a, Deadline b) { return a.t_ < b.t_ ? a : b; }

 private:
  Clock::time_point t_;
};

}  // namespace omniccl
