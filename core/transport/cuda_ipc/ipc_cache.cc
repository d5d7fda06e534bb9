#include "transport/cuda_ipc/ipc_cache.h"

#include <cstring>

#include "common/log.h"
#include "common/status.h"

namespace omniccl::transport {

IpcCache::~IpcCache() {
  for (const Entry& e : entries_) close(e);
}

char* IpcCache::reuse(const std::function<bool(const Entry&)>& match) {
  for (auto it = entries_.begin(); it != entries_.end(); ++it) {
    if (!match(*it)) continue;
    ++it->users;
    entries_.splice(entries_.begin(), entries_, it);
    return it->base;
  }
  return nullptr;
}

char* IpcCache::acquire(int peer, const GpuIpcHandle& h) {
  char* found = reuse([&](const Entry& e) {
    return e.peer == peer && e.vmm_key.empty() && std::memcmp(e.handle.bytes, h.bytes, sizeof h.bytes) == 0;
  });
  if (found != nullptr) return found;
  Entry e;
  e.peer = peer;
  e.handle = h;
  e.base = static_cast<char*>(rt_.ipc_open(h));
  e.users = 1;
  entries_.push_front(e);
  return e.base;
}

char* IpcCache::acquire_vmm(int peer, const std::string& key, size_t bytes, const std::function<UniqueFd()>& fetch) {
  char* found = reuse([&](const Entry& e) { return e.peer == peer && e.vmm_key == key; });
  if (found != nullptr) return found;
  const UniqueFd fd = fetch();
  Entry e;
  e.peer = peer;
  e.vmm_key = key;
  e.vmm_bytes = bytes;
  e.base = static_cast<char*>(rt_.vmm_import(fd.get(), bytes));
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
    if (e.vmm_key.empty()) {
      rt_.ipc_close(e.base);
    } else {
      rt_.vmm_close(e.base, e.vmm_bytes);
    }
  } catch (const std::exception& err) {
    OCCL_LOG(kWarn, kTransport, "closing rank ", e.peer, "'s registered GPU memory: ", err.what());
  }
}

}  // namespace omniccl::transport
