// A GPU runtime for tests on machines without a GPU (common/gpu_runtime.h):
// "device memory" is ordinary host memory and each stream is a thread that
// runs its queued work in order, as a CUDA stream does. It lets the staged
// data path's ordering (the call returns before the stream reaches it; work
// queued after it sees its results; the host is not blocked) and its failure
// handling (the stream is always released) be checked without a GPU. It
// says nothing about the CUDA calls themselves: the `gpu` suites do, on a
// GPU.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <functional>
#include <mutex>
#include <new>
#include <thread>

#include "common/gpu_runtime.h"

namespace omniccl::test {

/// A stream: a thread running queued work in order.
class EmuStream {
 public:
  EmuStream() : thread_([this] { loop(); }) {}
  ~EmuStream() {
    {
      std::lock_guard lock(mu_);
      stop_ = true;
    }
    cv_.notify_all();
    thread_.join();
  }
  EmuStream(const EmuStream&) = delete;
  EmuStream& operator=(const EmuStream&) = delete;

  void enqueue(std::function<void()> fn) {
    {
      std::lock_guard lock(mu_);
      queue_.push_back(std::move(fn));
      ++queued_;
    }
    cv_.notify_all();
  }
  /// Waits until everything queued so far has run; false after timeout_ms.
  bool sync(int timeout_ms = 20000) {
    std::unique_lock lock(mu_);
    const uint64_t target = queued_;
    return cv_.wait_for(lock, std::chrono::milliseconds(timeout_ms), [&] { return ran_ >= target; });
  }
  /// Queues a wait for open_gate(): work queued after it does not run before.
  void close_gate() {
    {
      std::lock_guard lock(mu_);
      gate_open_ = false;
    }
    enqueue([this] {
      std::unique_lock lock(mu_);
      cv_.wait(lock, [&] { return gate_open_ || stop_; });
    });
  }
  void open_gate() {
    {
      std::lock_guard lock(mu_);
      gate_open_ = true;
    }
    cv_.notify_all();
  }

 private:
  void loop() {
    std::unique_lock lock(mu_);
    for (;;) {
      cv_.wait(lock, [&] { return stop_ || !queue_.empty(); });
      if (queue_.empty()) return;
      auto fn = std::move(queue_.front());
      queue_.pop_front();
      lock.unlock();
      fn();
      lock.lock();
      ++ran_;
      cv_.notify_all();
    }
  }

  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<std::function<void()>> queue_;
  uint64_t queued_ = 0;
  uint64_t ran_ = 0;
  bool stop_ = false;
  bool gate_open_ = true;
  std::thread thread_;
};

struct EmuEvent {
  std::atomic<uint64_t> recorded{0};
  std::atomic<uint64_t> reached{0};
};

/// The runtime: `devices` devices; the default stream (nullptr) is one
/// EmuStream of its own.
class EmulatedGpu final : public GpuRuntime {
 public:
  explicit EmulatedGpu(int devices = 1) : devices_(devices) {}
  /// How many stream waits for a host word ran out of patience (a word never
  /// written): the staged path must keep this 0.
  static std::atomic<int>& stuck_waits() {
    static std::atomic<int> n{0};
    return n;
  }
  EmuStream& default_stream() { return default_; }

  std::string unavailable_reason() override { return ""; }
  int device_count() override { return devices_; }
  int current_device() override { return current(); }
  void set_device(int device) override { current() = device; }
  /// Bytes of "page-locked" host memory host_alloc has handed out.
  static std::atomic<size_t>& host_bytes() {
    static std::atomic<size_t> n{0};
    return n;
  }
  void* host_alloc(size_t bytes) override {
    host_bytes() += bytes;
    return ::operator new(bytes == 0 ? 1 : bytes, std::align_val_t(64));
  }
  void host_free(void* p) override { ::operator delete(p, std::align_val_t(64)); }
  void copy_async(void* dst, const void* src, size_t bytes, Stream s) override {
    stream(s).enqueue([=] { std::memmove(dst, src, bytes); });
  }
  Event event_create() override { return new EmuEvent(); }
  void event_destroy(Event e) override { delete static_cast<EmuEvent*>(e); }
  void event_record(Event e, Stream s) override {
    auto* ev = static_cast<EmuEvent*>(e);
    const uint64_t n = ev->recorded.fetch_add(1) + 1;
    stream(s).enqueue([ev, n] { ev->reached.store(n); });
  }
  bool event_done(Event e) override {
    auto* ev = static_cast<EmuEvent*>(e);
    return ev->reached.load() >= ev->recorded.load();
  }
  void stream_wait_flag(Stream s, const uint32_t* flag, uint32_t value) override {
    stream(s).enqueue([flag, value] {
      const auto give_up = std::chrono::steady_clock::now() + std::chrono::seconds(60);
      while (std::atomic_ref<const uint32_t>(*flag).load(std::memory_order_acquire) < value) {
        if (std::chrono::steady_clock::now() > give_up) {
          ++stuck_waits();
          return;
        }
        std::this_thread::sleep_for(std::chrono::microseconds(50));
      }
    });
  }

 private:
  static int& current() {
    thread_local int device = 0;
    return device;
  }
  EmuStream& stream(Stream s) { return s == nullptr ? default_ : *static_cast<EmuStream*>(s); }

  int devices_;
  EmuStream default_;
};

}  // namespace omniccl::test
