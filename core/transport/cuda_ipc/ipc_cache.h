// The peers' device memory this process has opened for registered buffers
// (occl_comm_window_register), one mapping per exported allocation.
//
// Why a cache: a peer's registered buffers often lie in one allocation (a
// framework's caching allocator carves tensors out of large segments), CUDA
// refuses to open one handle twice in a process, and a buffer registered
// again every step should not be mapped again every step. An entry is keyed
// by the peer and the handle's bytes, which name the allocation, not its
// address: memory freed and allocated again at the same address comes with
// another handle, so it gets another entry and never a stale mapping.
//
// Bounds: an entry in use (registered buffers still refer to it) is never
// closed; entries no longer in use stay open for a buffer registered again,
// at most `max_idle` of them, the least recently used closed first. A
// handle whose allocation was freed by its owner keeps at most that many
// mappings of dead memory alive until they are evicted.
#pragma once

#include <cstddef>
#include <cstdint>
#include <list>

#include "common/gpu_runtime.h"

namespace omniccl::transport {

class IpcCache {
 public:
  IpcCache(GpuRuntime& rt, size_t max_idle) : rt_(rt), max_idle_(max_idle) {}
  /// Closes every mapping (the window's end: nothing is in flight then).
  ~IpcCache();
  IpcCache(const IpcCache&) = delete;
  IpcCache& operator=(const IpcCache&) = delete;

  /// The base of peer's allocation `h` as mapped here, opened on first use
  /// (throws what ipc_open throws); one more user of it.
  char* acquire(int peer, const GpuIpcHandle& h);
  /// One user fewer of what acquire returned; an entry left unused joins
  /// the idle ones, and the oldest idle ones beyond max_idle are closed.
  void release(char* base);

  /// Mappings open (in use and idle), for tests and the debug log.
  size_t open() const { return entries_.size(); }
  size_t idle() const;

 private:
  struct Entry {
    int peer = 0;
    GpuIpcHandle handle;
    char* base = nullptr;
    size_t users = 0;
  };
  void close(const Entry& e);
  void evict();

  GpuRuntime& rt_;
  size_t max_idle_;
  /// Most recently used first.
  std::list<Entry> entries_;
};

}  // namespace omniccl::transport
