// A GPU runtime for tests on machines without a GPU (common/gpu_runtime.h):
// "device memory" is ordinary host memory and each stream is a thread that
// runs its queued work in order, as a CUDA stream does. It lets the staged
// data path's ordering (the call returns before the stream reaches it; work
// queued after it sees its results; the host is not blocked) and its failure
// handling (the stream is always released) be checked without a GPU. It
// says nothing about the CUDA calls themselves: the `gpu` suites do, on a
// GPU.
//
// For the device transport (transport/cuda_ipc), "device memory" from
// device_alloc is a memfd mapped shared, so that other processes (ranks are
// forked processes) map it as CUDA IPC maps a peer's memory: its handle
// names the exporting process and descriptor, and ipc_open maps
// /proc/<pid>/fd/<fd>. VMM memory (vmm_memory) is refused by ipc_export, as
// cudaIpcGetMemHandle refuses it; its vmm_export is a duplicate of the memfd
// (the POSIX descriptor cuMemExportToShareableHandle gives) and vmm_import
// maps the descriptor it is handed. Stream writes and waits of 64-bit words are atomic
// stores and polling loads on the stream's thread; reductions run the CPU
// kernels on it (whose results the CUDA kernels match bit for bit).
#pragma once

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

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

#include <map>
#include <string>

#include "common/gpu_runtime.h"
#include "common/status.h"
#include "kernels/cpu/reduce.h"

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
  void set_device_count(int n) { devices_ = n; }
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
  /// How many copies copy_async has enqueued (the staged path's plan).
  static std::atomic<size_t>& copies() {
    static std::atomic<size_t> n{0};
    return n;
  }
  /// Milliseconds each copy takes on its stream before it is done (a slow
  /// copy engine); 0 by default.
  static std::atomic<int>& copy_delay_ms() {
    static std::atomic<int> n{0};
    return n;
  }
  void copy_async(void* dst, const void* src, size_t bytes, Stream s) override {
    ++copies();
    const int delay = copy_delay_ms().load();
    stream(s).enqueue([=] {
      std::this_thread::sleep_for(std::chrono::milliseconds(delay));
      std::memmove(dst, src, bytes);
    });
  }
  /// One copy, as cudaMemcpy2DAsync is.
  void copy_2d_async(void* dst, size_t dpitch, const void* src, size_t spitch, size_t width, size_t height,
                     Stream s) override {
    ++copies();
    const int delay = copy_delay_ms().load();
    stream(s).enqueue([=] {
      std::this_thread::sleep_for(std::chrono::milliseconds(delay));
      for (size_t i = 0; i < height; ++i) {
        std::memmove(static_cast<char*>(dst) + i * dpitch, static_cast<const char*>(src) + i * spitch, width);
      }
    });
  }
  /// At once, on the caller's thread: behind no stream, as the CUDA
  /// runtime's non-blocking stream is.
  void copy_now(void* dst, const void* src, size_t bytes) override {
    ++copies_now();
    std::memmove(dst, src, bytes);
  }
  /// How many copies copy_now has made.
  static std::atomic<size_t>& copies_now() {
    static std::atomic<size_t> n{0};
    return n;
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
  // --- the device transport's part ---
  /// Whether peers' devices can reach each other (a test of the fallback).
  bool peer_access = true;
  /// Whether ipc_open fails (a container without the host's IPC namespace).
  bool ipc_open_fails = false;
  /// Whether device_alloc memory is VMM memory (cuMemCreate), which
  /// ipc_export refuses, as cudaIpcGetMemHandle does.
  bool vmm_memory = false;
  /// Whether that VMM memory was made shareable as a POSIX descriptor (else
  /// it cannot be shared at all).
  bool vmm_fd_shareable = true;
  /// Runs at the start of each ipc_open (a test's way into the moment).
  std::function<void()> before_ipc_open;
  std::string device_uuid(int device) override { return "emu-gpu-" + std::to_string(device); }
  bool driver_loaded() override { return true; }
  /// Whether the process "has its GPU in use" when a communicator is made
  /// (a program that touches CUDA only later says no).
  bool in_use = true;
  bool device_in_use(int) override { return in_use; }
  bool can_access_peer(int device, int peer) override { return device == peer || peer_access; }
  void* device_alloc(size_t bytes) override;
  void device_free(void* p) override;
  GpuIpcHandle ipc_export(void* base) override;
  void* ipc_open(const GpuIpcHandle& h) override;
  void ipc_close(void* mapped) override;
  UniqueFd vmm_export(void* base) override;
  void* vmm_import(int fd, size_t bytes) override;
  void vmm_close(void* mapped, size_t bytes) override;
  GpuAllocation allocation_of(const void* p) override;
  /// How many peer mappings are open (ipc_open or vmm_import, not closed).
  int open_mappings() {
    std::lock_guard lock(mem_mu_);
    return int(opened_.size());
  }
  /// How many of them came from vmm_import.
  int open_vmm_mappings() {
    std::lock_guard lock(mem_mu_);
    int n = 0;
    for (const auto& [at, m] : opened_) n += m.vmm ? 1 : 0;
    return n;
  }
  void stream_write_value(Stream s, uint64_t* addr, uint64_t value) override {
    stream(s).enqueue([addr, value] { std::atomic_ref<uint64_t>(*addr).store(value, std::memory_order_release); });
  }
  void stream_wait_value(Stream s, const uint64_t* addr, uint64_t value) override {
    stream(s).enqueue([addr, value] {
      const auto give_up = std::chrono::steady_clock::now() + std::chrono::seconds(60);
      auto* word = const_cast<uint64_t*>(addr);
      while (std::atomic_ref<uint64_t>(*word).load(std::memory_order_acquire) < value) {
        if (std::chrono::steady_clock::now() > give_up) {
          ++stuck_waits();
          return;
        }
        std::this_thread::sleep_for(std::chrono::microseconds(20));
      }
    });
  }
  void check_words_async(const uint64_t* words, int n, int self, uint64_t expected, uint64_t* release,
                         size_t release_count, uint64_t released, uint64_t* error, uint32_t code, Stream s) override {
    stream(s).enqueue([=] {
      for (int i = 0; i < n; ++i) {
        const uint64_t w = std::atomic_ref<uint64_t>(*const_cast<uint64_t*>(words + i)).load(std::memory_order_acquire);
        if (i == self || (w >> 24) != (expected >> 24) || w == expected) continue;
        std::atomic_ref<uint64_t>(*error).store(uint64_t(i + 1) << 8 | code, std::memory_order_release);
        for (size_t k = 0; k < release_count; ++k) {
          std::atomic_ref<uint64_t>(release[k]).store(released, std::memory_order_release);
        }
        return;
      }
    });
  }
  void write_value(uint64_t* addr, uint64_t value) override {
    std::atomic_ref<uint64_t>(*addr).store(value, std::memory_order_release);
  }
  uint64_t read_value(const uint64_t* addr) override {
    return std::atomic_ref<uint64_t>(*const_cast<uint64_t*>(addr)).load(std::memory_order_acquire);
  }
  /// How many reductions reduce_async has enqueued (staged calls that
  /// reduce on the GPU).
  static std::atomic<size_t>& reductions() {
    static std::atomic<size_t> n{0};
    return n;
  }
  void reduce_async(void* out, const void* a, const void* b, size_t count, kernels::DType t, kernels::RedOp op,
                    Stream s) override {
    ++reductions();
    stream(s).enqueue([=] { kernels::cpu::reduce(out, a, b, count, t, op); });
  }
  void scale_divide_async(void* data, size_t count, kernels::DType t, int64_t divisor, Stream s) override {
    stream(s).enqueue([=] { kernels::cpu::scale_divide(data, count, t, divisor); });
  }
  void scale_multiply_async(void* out, const void* in, size_t count, kernels::DType t, double scalar,
                            Stream s) override {
    stream(s).enqueue([=] { kernels::cpu::scale_multiply(out, in, count, t, scalar); });
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

  struct Mapping {
    int fd = -1;  ///< device_alloc memory: its memfd; peers' mappings: -1
    size_t bytes = 0;
    /// Which allocation (a serial per process, as CUDA's handles carry an
    /// identity of the allocation: memory freed and allocated again at the
    /// same address, even with the same descriptor, has another handle).
    uint64_t serial = 0;
    int pid = 0;       ///< peers' mappings: the exporting process
    bool vmm = false;  ///< peers' mappings: made by vmm_import
  };
  uint64_t serials_ = 0;
  int devices_;
  EmuStream default_;
  std::mutex mem_mu_;
  std::map<void*, Mapping> owned_;   ///< device_alloc
  std::map<void*, Mapping> opened_;  ///< ipc_open
};

/// The handle's bytes: "EMU1", the exporting pid, its memfd, the size, the
/// allocation's serial.
struct EmuHandle {
  char magic[4];
  int32_t pid;
  int32_t fd;
  uint64_t bytes;
  uint64_t serial;
};
static_assert(sizeof(EmuHandle) <= sizeof(GpuIpcHandle::bytes));

inline void* EmulatedGpu::device_alloc(size_t bytes) {
  const int fd = ::memfd_create("omniccl-emulated-device", MFD_CLOEXEC);
  if (fd < 0 || ::ftruncate(fd, off_t(bytes)) != 0) throw std::bad_alloc();
  void* p = ::mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  if (p == MAP_FAILED) throw std::bad_alloc();
  std::lock_guard lock(mem_mu_);
  owned_[p] = Mapping{fd, bytes, ++serials_, 0};
  return p;
}

inline void EmulatedGpu::device_free(void* p) {
  std::lock_guard lock(mem_mu_);
  auto it = owned_.find(p);
  if (it == owned_.end()) return;
  ::munmap(p, it->second.bytes);
  ::close(it->second.fd);
  owned_.erase(it);
}

inline GpuIpcHandle EmulatedGpu::ipc_export(void* base) {
  std::lock_guard lock(mem_mu_);
  auto it = owned_.find(base);
  if (it == owned_.end()) fail(Status::kSystem, "ipc_export: not the base of device_alloc memory");
  if (vmm_memory) fail(Status::kSystem, "ipc_export: VMM memory (emulating cudaIpcGetMemHandle's refusal)");
  EmuHandle e{{'E', 'M', 'U', '1'}, int32_t(::getpid()), int32_t(it->second.fd), it->second.bytes, it->second.serial};
  GpuIpcHandle h;
  std::memcpy(h.bytes, &e, sizeof e);
  return h;
}

inline void* EmulatedGpu::ipc_open(const GpuIpcHandle& h) {
  if (before_ipc_open) before_ipc_open();
  if (ipc_open_fails) fail(Status::kSystem, "ipc_open: refused (emulating another IPC namespace)");
  EmuHandle e;
  std::memcpy(&e, h.bytes, sizeof e);
  if (std::memcmp(e.magic, "EMU1", 4) != 0) fail(Status::kSystem, "ipc_open: not an emulated handle");
  {
    // CUDA refuses to open one handle twice in a process: a cache of opened
    // handles must hand out the mapping it has.
    std::lock_guard lock(mem_mu_);
    for (const auto& [at, m] : opened_) {
      if (m.pid == e.pid && m.serial == e.serial) fail(Status::kSystem, "ipc_open: this handle is already open here");
    }
  }
  const std::string path = "/proc/" + std::to_string(e.pid) + "/fd/" + std::to_string(e.fd);
  const int fd = ::open(path.c_str(), O_RDWR | O_CLOEXEC);
  if (fd < 0) fail(Status::kSystem, "ipc_open: cannot open ", path);
  void* p = ::mmap(nullptr, e.bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  ::close(fd);
  if (p == MAP_FAILED) fail(Status::kSystem, "ipc_open: cannot map ", path);
  std::lock_guard lock(mem_mu_);
  opened_[p] = Mapping{-1, e.bytes, e.serial, e.pid};
  return p;
}

inline GpuAllocation EmulatedGpu::allocation_of(const void* p) {
  std::lock_guard lock(mem_mu_);
  const auto* at = static_cast<const char*>(p);
  auto it = owned_.upper_bound(const_cast<void*>(p));
  if (it != owned_.begin()) {
    --it;
    const auto* base = static_cast<const char*>(it->first);
    if (at >= base && at < base + it->second.bytes) {
      const GpuMemoryKind kind = !vmm_memory        ? GpuMemoryKind::kLegacyIpc
                                 : vmm_fd_shareable ? GpuMemoryKind::kVmmFd
                                                    : GpuMemoryKind::kUnshareable;
      return GpuAllocation{it->first, it->second.bytes, kind, it->second.serial};
    }
  }
  fail(Status::kInvalidArgument, "not emulated device memory of this process");
}

inline void EmulatedGpu::ipc_close(void* mapped) {
  std::lock_guard lock(mem_mu_);
  auto it = opened_.find(mapped);
  if (it == opened_.end()) return;
  if (it->second.vmm) fail(Status::kSystem, "ipc_close: a vmm_import mapping");
  ::munmap(mapped, it->second.bytes);
  opened_.erase(it);
}

inline UniqueFd EmulatedGpu::vmm_export(void* base) {
  std::lock_guard lock(mem_mu_);
  auto it = owned_.find(base);
  if (it == owned_.end()) fail(Status::kSystem, "vmm_export: not the base of device_alloc memory");
  if (!vmm_memory || !vmm_fd_shareable) fail(Status::kSystem, "vmm_export: not VMM memory shareable as a descriptor");
  UniqueFd fd(::fcntl(it->second.fd, F_DUPFD_CLOEXEC, 0));
  if (!fd.valid()) fail(Status::kSystem, "vmm_export: dup failed");
  return fd;
}

inline void* EmulatedGpu::vmm_import(int fd, size_t bytes) {
  struct stat st {};
  if (::fstat(fd, &st) != 0 || size_t(st.st_size) < bytes)
    fail(Status::kSystem, "vmm_import: not a descriptor of ", bytes, " bytes");
  void* p = ::mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  if (p == MAP_FAILED) fail(Status::kSystem, "vmm_import: cannot map the descriptor");
  std::lock_guard lock(mem_mu_);
  Mapping m{-1, bytes, 0, 0};
  m.vmm = true;
  opened_[p] = m;
  return p;
}

inline void EmulatedGpu::vmm_close(void* mapped, size_t bytes) {
  std::lock_guard lock(mem_mu_);
  auto it = opened_.find(mapped);
  if (it == opened_.end() || !it->second.vmm || it->second.bytes != bytes) {
    fail(Status::kSystem, "vmm_close: not a vmm_import mapping of ", bytes, " bytes");
  }
  ::munmap(mapped, bytes);
  opened_.erase(it);
}

}  // namespace omniccl::test
