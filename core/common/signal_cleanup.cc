#include "common/signal_cleanup.h"

#include <signal.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstddef>
#include <cstdint>
#include <mutex>
#include <string_view>

#include "common/settings.h"
#include "common/status.h"

namespace omniccl {

namespace {

// Objects a process holds at once: one segment per communicator being set
// up (two for a calibration's loopback pair) and its host's block; names are
// about 60 bytes ("/dev/shm/omniccl.<ns>-<pid>.<session>.<tail>").
constexpr int kSlots = 128;
constexpr size_t kPathBytes = 160;
constexpr char kShmDir[] = "/dev/shm";

// A slot's word: a generation, bumped at every claim, times 4 plus the
// state. The handler copies a live slot's path and then reads the word
// again: a slot released (and perhaps claimed for another name) meanwhile
// changed it, and that copy is dropped rather than trusted half-written.
constexpr uint32_t kFree = 0, kClaimed = 1, kLive = 2, kStateMask = 3;

struct Slot {
  std::atomic<uint32_t> word{0};
  std::atomic<pid_t> creator{0};  ///< a forked child must not unlink its parent's names
  char path[kPathBytes] = {};     ///< read and written only through std::atomic_ref
};

Slot g_slots[kSlots];
std::atomic<int> g_registered{0};

/// Unlinks every live entry's path; async-signal-safe (atomics, getpid and
/// unlink only).
void unlink_registered() {
  const pid_t me = ::getpid();
  for (Slot& s : g_slots) {
    const uint32_t before = s.word.load(std::memory_order_acquire);
    if ((before & kStateMask) != kLive || s.creator.load(std::memory_order_relaxed) != me) continue;
    char path[kPathBytes];
    for (size_t i = 0; i < kPathBytes; ++i) path[i] = std::atomic_ref<char>(s.path[i]).load(std::memory_order_relaxed);
    std::atomic_thread_fence(std::memory_order_acquire);
    if (s.word.load(std::memory_order_relaxed) != before) continue;
    path[kPathBytes - 1] = '\0';
    ::unlink(path);  // shm_unlink is not async-signal-safe; on Linux it is this unlink
  }
}

void on_terminating_signal(int sig) {
  const int saved_errno = errno;
  unlink_registered();
  // Die as the signal would have killed us: default action, raised again;
  // it is blocked while this handler runs and is delivered as it returns.
  struct sigaction dfl {};
  dfl.sa_handler = SIG_DFL;
  sigemptyset(&dfl.sa_mask);
  ::sigaction(sig, &dfl, nullptr);
  ::raise(sig);
  errno = saved_errno;
}

void install_handlers() {
  if (!signal_cleanup_enabled()) return;
  for (int sig : {SIGTERM, SIGINT, SIGHUP, SIGQUIT}) {
    struct sigaction old {};
    if (::sigaction(sig, nullptr, &old) != 0) continue;
    // Only the default: an application's handler and an ignored signal stay.
    if ((old.sa_flags & SA_SIGINFO) != 0 || old.sa_handler != SIG_DFL) continue;
    struct sigaction sa {};
    sa.sa_handler = on_terminating_signal;
    sigemptyset(&sa.sa_mask);
    sa.sa_flags = SA_RESTART;  // other threads' system calls go on while it runs
    ::sigaction(sig, &sa, nullptr);
  }
}

}  // namespace

bool signal_cleanup_enabled() {
  const auto v = get_setting("OMNICCL_SIGNAL_CLEANUP");
  if (!v) return true;
  check_arg(*v == "0" || *v == "1", "OMNICCL_SIGNAL_CLEANUP is '", *v, "'; use 1 (on) or 0 (off)");
  return *v == "1";
}

int register_shm_object(const std::string& name) {
  static std::once_flag once;
  std::call_once(once, install_handlers);
  const size_t dir_len = sizeof kShmDir - 1;
  if (dir_len + name.size() + 1 > kPathBytes) return -1;
  for (int i = 0; i < kSlots; ++i) {
    Slot& s = g_slots[i];
    uint32_t w = s.word.load(std::memory_order_relaxed);
    const uint32_t claimed = ((w >> 2) + 1) << 2 | kClaimed;
    if ((w & kStateMask) != kFree || !s.word.compare_exchange_strong(w, claimed, std::memory_order_acquire)) continue;
    // The new generation is visible before any character of the new path.
    std::atomic_thread_fence(std::memory_order_release);
    size_t n = 0;
    for (char c : std::string_view(kShmDir)) std::atomic_ref<char>(s.path[n++]).store(c, std::memory_order_relaxed);
    for (char c : name) std::atomic_ref<char>(s.path[n++]).store(c, std::memory_order_relaxed);
    std::atomic_ref<char>(s.path[n]).store('\0', std::memory_order_relaxed);
    s.creator.store(::getpid(), std::memory_order_relaxed);
    s.word.store((claimed & ~kStateMask) | kLive, std::memory_order_release);
    g_registered.fetch_add(1, std::memory_order_relaxed);
    return i;
  }
  return -1;
}

void unregister_shm_object(int slot) {
  if (slot < 0 || slot >= kSlots) return;
  Slot& s = g_slots[slot];
  s.word.store(s.word.load(std::memory_order_relaxed) & ~kStateMask, std::memory_order_release);
  g_registered.fetch_sub(1, std::memory_order_relaxed);
}

int registered_shm_objects() { return g_registered.load(std::memory_order_relaxed); }

}  // namespace omniccl
