// Where a staged call's time goes (OMNICCL_STAGED_PROFILE=1): each
// communicator sums the phases of its staged calls (CUDA tensors through
// host memory, collective/staging.h) and logs their means when it is
// destroyed, so that a run on a GPU says which part of a small call's
// microseconds is the stream's copies, the worker's wake-up, the host
// collective or the copy back.
#pragma once

#include <array>
#include <atomic>
#include <cstdint>
#include <string>

#include "common/status.h"

namespace omniccl {

class StagedProfile {
 public:
  enum Phase : int {
    kEnqueue,  ///< the caller puts the copies and waits on the stream (Staging::start)
    kQueued,   ///< from then until the worker takes the call up
    kInputs,   ///< the worker waits until the stream has copied the inputs
    kHost,     ///< the collective on the host copies (every slice, its waits included)
    kOutputs,  ///< the worker waits until the stream has copied the results back
    kPhases
  };
  static constexpr std::array<const char*, kPhases> kNames{"enqueue", "queued", "inputs", "host", "outputs"};

  /// One finished call's phases, in nanoseconds (a failed call is not counted).
  void add(const std::array<int64_t, kPhases>& ns) {
    for (int p = 0; p < kPhases; ++p) ns_[size_t(p)].fetch_add(ns[size_t(p)], std::memory_order_relaxed);
    calls_.fetch_add(1, std::memory_order_relaxed);
  }
  uint64_t calls() const { return calls_.load(std::memory_order_relaxed); }
  /// Phase p's mean over the calls, in microseconds (0 without calls).
  double mean_us(Phase p) const {
    const uint64_t n = calls();
    return n == 0 ? 0.0 : double(ns_[size_t(p)].load(std::memory_order_relaxed)) / 1e3 / double(n);
  }
  /// "N staged calls, mean per call: enqueue 3.1 us, queued ..., total ... us".
  std::string summary() const {
    std::string out = str_cat(calls(), " staged calls, mean per call:");
    double total = 0;
    for (int p = 0; p < kPhases; ++p) {
      const double us = mean_us(Phase(p));
      total += us;
      out += str_cat(p == 0 ? " " : ", ", kNames[size_t(p)], " ", fixed1(us), " us");
    }
    return out + str_cat(", total ", fixed1(total), " us");
  }

 private:
  /// `us` with one decimal.
  static std::string fixed1(double us) {
    const int64_t t = int64_t(us * 10 + 0.5);
    return str_cat(t / 10, ".", t % 10);
  }
  std::array<std::atomic<int64_t>, kPhases> ns_{};
  std::atomic<uint64_t> calls_{0};
};

}  // namespace omniccl
