// A process ended by SIGTERM, SIGINT, SIGHUP or SIGQUIT while it holds
// shared-memory names removes them and still dies by that signal
// (common/signal_cleanup.h); an application's handler and an ignored signal
// are kept; OMNICCL_SIGNAL_CLEANUP=0 installs nothing, and a malformed value
// is an error. Each case runs in a forked child: dispositions belong to a
// process, and the handlers are installed once per process.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "common/shared_memory.h"
#include "common/signal_cleanup.h"
#include "common/status.h"

namespace omniccl {
namespace {

constexpr int kSignals[] = {SIGTERM, SIGINT, SIGHUP, SIGQUIT};

/// A name for object `i` of this test run.
std::string test_name(const std::string& run, int i) { return str_cat("/omniccl-signal-test.", run, ".", i); }

bool exists(const std::string& name) { return ::access(("/dev/shm" + name).c_str(), F_OK) == 0; }

/// The child's wait status, waiting at most 20 s (then it is killed, and
/// the status says so).
int wait_bounded(pid_t child) {
  int status = 0;
  for (int i = 0; i < 2000; ++i) {
    if (::waitpid(child, &status, WNOHANG) == child) return status;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  ::kill(child, SIGKILL);
  ::waitpid(child, &status, 0);
  return status;
}

/// Runs `body` in a child whose four signals start at SIG_DFL (whatever the
/// test runner left) and whose core dumps are off (SIGQUIT); its status.
template <typename Body>
int in_child(Body body) {
  const pid_t child = ::fork();
  if (child == 0) {
    for (int sig : kSignals) ::signal(sig, SIG_DFL);
    rlimit no_core{0, 0};
    ::setrlimit(RLIMIT_CORE, &no_core);
    ::_exit(body());
  }
  return child > 0 ? wait_bounded(child) : -1;
}

bool is_default(int sig) {
  struct sigaction sa {};
  return ::sigaction(sig, nullptr, &sa) == 0 && (sa.sa_flags & SA_SIGINFO) == 0 && sa.sa_handler == SIG_DFL;
}

std::string fresh_run() { return std::to_string(::getpid()) + "-" + std::to_string(std::random_device{}()); }

TEST(SignalCleanup, EachSignalRemovesTheSegmentsHeldAndStillKills) {
  for (int sig : kSignals) {
    const std::string run = fresh_run();
    const int status = in_child([&] {
      // More creations than the table has slots, each unlinked as setup
      // does: slots are given back.
      for (int i = 0; i < 300; ++i) SharedMapping::create(test_name(run, 100 + i), 4096)->unlink();
      std::vector<std::unique_ptr<SharedMapping>> held;
      for (int i = 0; i < 3; ++i) held.push_back(SharedMapping::create(test_name(run, i), 4096));
      if (registered_shm_objects() != 3) return 10;
      ::kill(::getpid(), sig);
      return 11;  // not killed
    });
    EXPECT_TRUE(WIFSIGNALED(status) && WTERMSIG(status) == sig)
        << strsignal(sig) << ": status " << status << " (11: not killed)";
    for (int i = 0; i < 3; ++i) {
      EXPECT_FALSE(exists(test_name(run, i))) << strsignal(sig) << " left " << test_name(run, i);
      ::shm_unlink(test_name(run, i).c_str());
    }
  }
}

// The signal may arrive in any thread: here a helper thread of the process
// sends it while the main thread sleeps in a system call.
TEST(SignalCleanup, SignalFromAnotherThreadRemovesThemToo) {
  const std::string run = fresh_run();
  const int status = in_child([&] {
    auto held = SharedMapping::create(test_name(run, 0), 4096);
    std::thread([] { ::kill(::getpid(), SIGTERM); }).detach();
    ::sleep(10);
    return 11;
  });
  EXPECT_TRUE(WIFSIGNALED(status) && WTERMSIG(status) == SIGTERM) << "status " << status;
  EXPECT_FALSE(exists(test_name(run, 0)));
  ::shm_unlink(test_name(run, 0).c_str());
}

volatile sig_atomic_t own_handler_calls = 0;
void own_handler(int) { own_handler_calls = 1; }

// An application's SIGTERM handler and an ignored SIGHUP are kept; SIGINT
// and SIGQUIT, still at their default, get the cleanup handler.
TEST(SignalCleanup, KeepsAnApplicationsHandlerAndIgnoredSignals) {
  const std::string run = fresh_run();
  const int status = in_child([&] {
    ::signal(SIGTERM, own_handler);
    ::signal(SIGHUP, SIG_IGN);
    auto held = SharedMapping::create(test_name(run, 0), 4096);
    struct sigaction term {};
    struct sigaction hup {};
    ::sigaction(SIGTERM, nullptr, &term);
    ::sigaction(SIGHUP, nullptr, &hup);
    if (term.sa_handler != own_handler) return 20;
    if (hup.sa_handler != SIG_IGN) return 21;
    if (is_default(SIGINT) || is_default(SIGQUIT)) return 22;
    ::kill(::getpid(), SIGTERM);
    return own_handler_calls == 1 && exists(test_name(run, 0)) ? 0 : 23;
  });
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << "status " << status;
  ::shm_unlink(test_name(run, 0).c_str());
}

TEST(SignalCleanup, OffLeavesTheDefaultActions) {
  const std::string run = fresh_run();
  const int status = in_child([&] {
    ::setenv("OMNICCL_SIGNAL_CLEANUP", "0", 1);
    auto held = SharedMapping::create(test_name(run, 0), 4096);
    for (int sig : kSignals) {
      if (!is_default(sig)) return 30;
    }
    ::kill(::getpid(), SIGTERM);
    return 31;
  });
  EXPECT_TRUE(WIFSIGNALED(status) && WTERMSIG(status) == SIGTERM) << "status " << status;
  EXPECT_TRUE(exists(test_name(run, 0))) << "removed with OMNICCL_SIGNAL_CLEANUP=0";
  ::shm_unlink(test_name(run, 0).c_str());
}

TEST(SignalCleanup, MalformedSettingIsAnError) {
  const std::string run = fresh_run();
  const int status = in_child([&] {
    ::setenv("OMNICCL_SIGNAL_CLEANUP", "yes", 1);
    try {
      SharedMapping::create(test_name(run, 0), 4096);
    } catch (const Error& e) {
      const bool named = std::string(e.what()).find("OMNICCL_SIGNAL_CLEANUP is 'yes'") != std::string::npos;
      return e.status() == Status::kInvalidArgument && named && !exists(test_name(run, 0)) ? 0 : 40;
    }
    return 41;
  });
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << "status " << status;
  ::shm_unlink(test_name(run, 0).c_str());
}

}  // namespace
}  // namespace omniccl
