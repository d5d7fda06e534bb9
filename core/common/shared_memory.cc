#include "common/shared_memory.h"

#include <dirent.h>
#include <fcntl.h>
#include <linux/futex.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <climits>
#include <ctime>

#include "common/fd.h"
#include "common/log.h"
#include "common/signal_cleanup.h"
#include "common/status.h"

namespace omniccl {

namespace {

/// The inode number of this process's pid namespace ("0" if unknown): pids
/// mean something only inside it.
const std::string& pid_namespace() {
  static const std::string ns = [] {
    char buf[64] = {};
    ssize_t n = ::readlink("/proc/self/ns/pid", buf, sizeof buf - 1);
    std::string t(buf, n > 0 ? static_cast<size_t>(n) : 0);  // "pid:[4026531836]"
    std::string digits;
    for (char c : t) {
      if (c >= '0' && c <= '9') digits.push_back(c);
    }
    return digits.empty() ? std::string("0") : digits;
  }();
  return ns;
}

/// The pid in an object name of this pid namespace ("omniccl.<ns>-<pid>.");
/// 0 when the name is not one.
pid_t pid_in_name(const std::string& name, const std::string& prefix) {
  if (name.rfind(prefix, 0) != 0) return 0;
  const size_t dot = name.find('.', prefix.size());
  if (dot == std::string::npos || dot == prefix.size()) return 0;
  const std::string pid_text = name.substr(prefix.size(), dot - prefix.size());
  if (pid_text.find_first_not_of("0123456789") != std::string::npos || pid_text.size() > 9) return 0;
  return static_cast<pid_t>(std::stol(pid_text));
}

}  // namespace

std::unique_ptr<SharedMapping> SharedMapping::create(const std::string& name, size_t bytes) {
  // Entered before the object exists, so that no signal finds it unlisted.
  const int slot = register_shm_object(name);
  UniqueFd fd(::shm_open(name.c_str(), O_CREAT | O_EXCL | O_RDWR | O_CLOEXEC, 0600));
  if (!fd.valid()) {
    const int err = errno;
    unregister_shm_object(slot);
    fail_errno(str_cat("shm_open(", name, ", O_CREAT)"), err);
  }
  auto give_up = [&](const std::string& what, int err) {
    ::shm_unlink(name.c_str());
    unregister_shm_object(slot);
    fail_errno(what, err);
  };
  if (::ftruncate(fd.get(), static_cast<off_t>(bytes)) != 0) {
    const int err = errno;
    give_up(str_cat("ftruncate(", name, ", ", bytes, ") - is /dev/shm large enough?"), err);
  }
  void* base = ::mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd.get(), 0);
  if (base == MAP_FAILED) {
    const int err = errno;
    give_up(str_cat("mmap(", name, ")"), err);
  }
  return std::unique_ptr<SharedMapping>(new SharedMapping(name, base, bytes, true, slot));
}

std::unique_ptr<SharedMapping> SharedMapping::open(const std::string& name, size_t min_bytes, size_t bytes) {
  UniqueFd fd(::shm_open(name.c_str(), O_RDWR | O_CLOEXEC, 0600));
  if (!fd.valid() && errno == ENOENT) {
    // Its creator gave up (its deadline passed) or died before this process
    // mapped it: a failed peer, not a failed system call (kSystem).
    fail(Status::kPeerFailure, "shared memory segment ", name,
         " is gone: the rank that made it left or failed before this rank mapped it");
  }
  if (!fd.valid()) fail_errno(str_cat("shm_open(", name, ")"), errno);
  struct stat st {};
  if (::fstat(fd.get(), &st) != 0 || static_cast<size_t>(st.st_size) < min_bytes) {
    fail(Status::kInternal, "shared memory segment ", name, " is smaller than expected");
  }
  const size_t mapped = std::min(bytes, static_cast<size_t>(st.st_size));
  void* base = ::mmap(nullptr, mapped, PROT_READ | PROT_WRITE, MAP_SHARED, fd.get(), 0);
  if (base == MAP_FAILED) fail_errno(str_cat("mmap(", name, ")"), errno);
  return std::unique_ptr<SharedMapping>(new SharedMapping(name, base, mapped, false, -1));
}

SharedMapping::~SharedMapping() {
  unlink();
  ::munmap(base_, bytes_);
}

void SharedMapping::unlink() {
  if (owner_ && !unlinked_) {
    ::shm_unlink(name_.c_str());
    unregister_shm_object(cleanup_slot_);
    unlinked_ = true;
  }
}

std::string shm_object_name(const std::string& session, const std::string& tail) {
  return str_cat("/omniccl.", pid_namespace(), "-", ::getpid(), ".", session, ".", tail);
}

int remove_dead_shm_objects() {
  const std::string prefix = str_cat("omniccl.", pid_namespace(), "-");
  DIR* dir = ::opendir("/dev/shm");
  if (dir == nullptr) return 0;
  int removed = 0;
  const uid_t me = ::geteuid();
  while (const dirent* e = ::readdir(dir)) {
    const std::string name = e->d_name;
    const pid_t pid = pid_in_name(name, prefix);
    struct stat st {};
    if (pid <= 0 || ::fstatat(::dirfd(dir), e->d_name, &st, AT_SYMLINK_NOFOLLOW) != 0 || st.st_uid != me) continue;
    // Only a process that no longer exists: a live one (or a reused pid) keeps it.
    if (::kill(pid, 0) == 0 || errno != ESRCH) continue;
    if (::shm_unlink(("/" + name).c_str()) == 0) ++removed;
  }
  ::closedir(dir);
  if (removed > 0) {
    OCCL_LOG(kInfo, kTransport, "removed ", removed, " shared-memory segment(s) left in /dev/shm by dead processes");
  }
  return removed;
}

static_assert(std::atomic<uint32_t>::is_always_lock_free && sizeof(std::atomic<uint32_t>) == 4,
              "a futex word is a plain 32-bit word");

void futex_wait(std::atomic<uint32_t>& word, uint32_t expected, int timeout_ms) {
  timespec ts{timeout_ms / 1000, static_cast<long>(timeout_ms % 1000) * 1000000L};
  // Not FUTEX_PRIVATE_FLAG: the word is shared with other processes. EAGAIN
  // (the word changed), EINTR and ETIMEDOUT all mean: look again.
  ::syscall(SYS_futex, reinterpret_cast<uint32_t*>(&word), FUTEX_WAIT, expected, &ts, nullptr, 0);
}

void wake_futex(std::atomic<uint32_t>& word) {
  word.fetch_add(1, std::memory_order_seq_cst);
  ::syscall(SYS_futex, reinterpret_cast<uint32_t*>(&word), FUTEX_WAKE, INT_MAX, nullptr, nullptr, 0);
}

}  // namespace omniccl
