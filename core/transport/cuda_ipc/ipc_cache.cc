#include "transport/cuda_ipc/ipc_cache.h"

#include <cstring>

#include "common/log.h"
#include "common/status.h"

namespace omniccl::transport {

IpcCache::~IpcCache() {
  for (const Entry& e : entries_) close(e);
}

char* IpcCache::acquire(int peer, const GpuIpcHandle& h) {
  for (auto it = entries_.begin(); it != entries_.end(); ++it) {
    if (it->peer != peer || std::memcmp(it->handle.bytes, h.bytes, sizeof h.bytes) != 0) continue;
    ++it->users;
    entries_.splice(entries_.begin(), entries_, it);
    return it->base;
  }
  Entry e;
  e.peer = peer;
  e.handle = h;
  e.base = static_cast<char*>(rt_.ipc_open(h));
  e.users = 1;
  entries_.push_front(e);
  return e.base;
}

void IpcCache::release(char* base) {
  for (auto it = entries_.begin(); it != entries_.end(); ++it) {
    if (it->base != base) continue;
    if (it->users == 0) fail(Status::kInternal, "IpcCache::release of a mapping nobody uses");
    if (--it->users == 0) entries_.splice(entries_.begin(), entries_, it);
    evict();
    return;
  }
  fail(Status::kInternal, "IpcCache::release of a mapping it did not open");
}

size_t IpcCache::idle() const {
  size_t n = 0;
  for (const Entry& e : entries_) n += e.users == 0 ? 1 : 0;
  return n;
}

// Closes the least recently used idle entries beyond max_idle_ (those
// nearest the list's end).
void IpcCache::evict() {
  size_t idle_seen = 0;
  for (auto it = entries_.begin(); it != entries_.end();) {
    if (it->users != 0 || ++idle_seen <= max_idle_) {
      ++it;
      continue;
    }
    close(*it);
    it = entries_.erase(it);
  }
}

void IpcCache::close(const Entry& e) {
  try {
    rt_.ipc_close(e.base);
  } catch (const std::exception& err) {
    OCCL_LOG(kWarn, kTransport, "closing rank ", e.peer, "'s registered GPU memory: ", err.what());
  }
}

}  // namespace omniccl::transport
