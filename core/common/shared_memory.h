// Memory shared by the processes of one host: named POSIX shared-memory
// objects (RAII mappings of them), their names, the removal of those that
// dead processes left, and futex waits on words inside them.
//
// Every object this library makes is named
//   /omniccl.<pid namespace>-<pid>.<session>.<tail>
// so that a leftover can be traced to the process that made it: a process
// that died before it could unlink its objects (a job killed during setup)
// leaves them, and the next job on the host removes them. One ended by
// SIGTERM, SIGINT, SIGHUP or SIGQUIT removes its own first (signal_cleanup.h).
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

namespace omniccl {

/// A mapped shared-memory object (unmapped on destruction; the creator's
/// name is removed then too, unless unlink() already did).
class SharedMapping {
 public:
  /// Creates (exclusively), sizes (zero-filled) and maps object `name` of
  /// `bytes`; throws Error naming the system call that failed. Until its
  /// name is removed, a terminating signal removes it (signal_cleanup.h).
  static std::unique_ptr<SharedMapping> create(const std::string& name, size_t bytes);
  /// Maps an existing object of at least `min_bytes`, and at most `bytes`
  /// of it; throws Error(kInternal) when it is smaller, and
  /// Error(kPeerFailure) when there is no such object: every object opened
  /// is a peer's, which unlinks it only once every rank has mapped it, or
  /// when it gives up or dies first.
  static std::unique_ptr<SharedMapping> open(const std::string& name, size_t min_bytes, size_t bytes);
  ~SharedMapping();
  SharedMapping(const SharedMapping&) = delete;
  SharedMapping& operator=(const SharedMapping&) = delete;

  void* data() const { return base_; }
  size_t size() const { return bytes_; }
  const std::string& name() const { return name_; }
  /// Removes the name (the mapping stays valid); only the creator's does.
  /// Idempotent.
  void unlink();

 private:
  SharedMapping(std::string name, void* base, size_t bytes, bool owner, int cleanup_slot)
      : name_(std::move(name)), base_(base), bytes_(bytes), owner_(owner), cleanup_slot_(cleanup_slot) {}
  std::string name_;
  void* base_;
  size_t bytes_;
  bool owner_;
  int cleanup_slot_;  ///< the creator's entry in the signal cleanup table (-1: none)
  bool unlinked_ = false;
};

/// The name of this process's object `tail` of `session`:
/// "/omniccl.<pid namespace>-<pid>.<session>.<tail>".
std::string shm_object_name(const std::string& session, const std::string& tail);

/// Unlinks the objects in /dev/shm that this user's processes of this pid
/// namespace made and left when they died. Returns how many were removed.
int remove_dead_shm_objects();

/// Sleeps in FUTEX_WAIT while `word` holds `expected`, at most timeout_ms:
/// returns on a wake, a change of the word, a signal or the timeout. The
/// word may be shared with other processes.
void futex_wait(std::atomic<uint32_t>& word, uint32_t expected, int timeout_ms);
/// Bumps `word` and wakes every process sleeping on it.
void wake_futex(std::atomic<uint32_t>& word);

}  // namespace omniccl
