#include "tuning/one_way_probe.h"

#include <atomic>
#include <chrono>
#include <cstdint>
#include <exception>
#include <thread>

#include "common/status.h"

namespace omniccl {

namespace {

constexpr auto kLimit = std::chrono::seconds(2);

int64_t now_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

}  // namespace

bool time_one_way(int count, const ProbeSide& send, const ProbeSide& recv, std::vector<double>* seconds,
                  std::string* error) {
  seconds->assign(size_t(count), 0.0);
  std::atomic<int> go{0}, done{0};
  std::atomic<bool> stop{false};
  std::atomic<int64_t> end_ns{0};
  std::string thread_error;
  std::thread receiver([&] {
    try {
      for (int k = 1;; ++k) {
        while (go.load(std::memory_order_acquire) < k) {
          if (stop.load(std::memory_order_relaxed)) return;
          std::this_thread::yield();
        }
        for (bool first = true;; first = false) {
          if (stop.load(std::memory_order_relaxed)) return;
          const ProbeStep s = recv(k, first);
          if (s == ProbeStep::kDone) break;
          if (s == ProbeStep::kIdle) std::this_thread::yield();
        }
        end_ns.store(now_ns(), std::memory_order_relaxed);
        done.store(k, std::memory_order_release);
      }
    } catch (const std::exception& e) {
      thread_error = e.what();
      done.store(-1, std::memory_order_release);
    }
  });
  bool ok = true;
  for (int k = 1; ok && k <= count; ++k) {
    const auto until = std::chrono::steady_clock::now() + kLimit;
    const int64_t start = now_ns();
    go.store(k, std::memory_order_release);
    try {
      for (bool first = true; std::chrono::steady_clock::now() <= until; first = false) {
        const ProbeStep s = send(k, first);
        if (s == ProbeStep::kDone) break;
        if (s == ProbeStep::kIdle) std::this_thread::yield();
      }
    } catch (const std::exception& e) {
      *error = str_cat("a calibration transfer failed: ", e.what());
      ok = false;
      break;
    }
    while (done.load(std::memory_order_acquire) != k && done.load(std::memory_order_acquire) >= 0 &&
           std::chrono::steady_clock::now() <= until) {
      std::this_thread::yield();
    }
    if (done.load(std::memory_order_acquire) != k) {
      *error = thread_error.empty() ? std::string("a calibration transfer took over 2 s")
                                    : str_cat("a calibration transfer failed: ", thread_error);
      ok = false;
      break;
    }
    (*seconds)[size_t(k - 1)] = double(end_ns.load(std::memory_order_relaxed) - start) * 1e-9;
  }
  stop.store(true);
  receiver.join();
  return ok;
}

}  // namespace omniccl
