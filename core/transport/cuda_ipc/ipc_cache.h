// The peers' device memory this process has opened for registered buffers
// (occl_comm_window_register), one mapping per exported allocation.
//
// Why a cache: a peer's registered buffers often lie in one allocation (a
// framework's caching allocator carves tensors out of large segments), CUDA
// refuses to open one handle twice in a process, and a buffer registered
// again every step should not be mapped again every step. An entry is keyed
// by the peer and the handle's bytes, which name the allocation, not its
// address: memory freed and allocated again at the same address comes with
// another handle, so it gets another entry and never a stale mapping. VMM
// memory (cuMemCreate) has no such handle: its entries are keyed by the
// peer and a key the exporter gives the allocation (its buffer id, which a
// new allocation never shares), and are mapped from a POSIX descriptor
// fetched from the peer only when there is no entry yet.
//
// Bounds: an entry in use (registered buffers still refer to it) is never
// closed; entries no longer in use stay open for a buffer registered again,
// at most `max_idle` of them, the least recently used closed first. A
// handle whose allocation was freed by its owner keeps at most that many
// mappings of dead memory alive until they are evicted.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <list>
#include <string>

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
  /// As acquire, for peer's VMM allocation `key` of `bytes` bytes: on first
  /// use `fetch` gives its descriptor (throws what fetch and vmm_import
  /// throw; nothing is kept then), which is closed once mapped.
  char* acquire_vmm(int peer, const std::string& key, size_t bytes, const std::function<UniqueFd()>& fetch);
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
    std::string vmm_key;   ///< VMM memory: the exporter's key ("" for cudaIpc memory)
    size_t vmm_bytes = 0;  ///< VMM memory: what vmm_close is given
    char* base = nullptr;
    size_t users = 0;
  };
  void close(const Entry& e);
  /// The entry that matches, moved to the front with one more user; nullptr
  /// when none does.
  char* reuse(const std::function<bool(const Entry&)>& match);
  void evict();

  GpuRuntime& rt_;
  size_t max_idle_;
  /// Most recently used first.
  std::list<Entry> entries_;
};

}  // namespace omniccl::transport
