// The soak test's run options, the memory its ranks report through, the
// faults it injects and the rules a round is judged by.
#pragma once

#include <dirent.h>
#include <signal.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <new>
#include <string>
#include <thread>
#include <vector>

#include "harness.h"
#include "schedule.h"

namespace soak {

using occl_ref::cat;

/// A round's ranks still running after this long are killed: a hang.
constexpr int kRoundLimitS = 120;
/// After a kill, every survivor must have its error within this time.
constexpr double kKillBoundS = 15.0;
/// Added to the deadline (and the stop) for a busy two-core host.
constexpr double kSlackS = 10.0;
constexpr int kMaxRanks = 16;

inline long long now_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

struct Options {
  uint64_t seed = 1;
  long ops = 1L << 40;  // stop after this many schedule entries ...
  double seconds = 60;  // ... or this long, whichever comes first
  int max_ranks = 5;
  bool faults = true;
  bool netns = false;    // run in a network namespace of its own and drop packets
  long only_round = -1;  // run this round only
  bool verbose = false;
  std::string argv0 = "soak";

  std::string command_line() const {
    return cat(argv0, " --seed ", seed, " --ranks ", max_ranks, " --faults ", faults ? "on" : "off",
               netns ? " --netns" : "");
  }
};

/// What one rank reports to the parent (in memory shared across the fork).
struct RankReport {
  int pid = 0;
  int ops_ok = 0;
  int discrepancies = 0;
  int entries = 0;  // schedule entries started
  occl_status_t error_status = OCCL_SUCCESS;
  int error_op = 0;
  long long error_ns = 0;
  long long max_call_ns = 0;
  char msg[400] = {};

  void record_error(occl_status_t st, int op, const char* text) {
    error_status = st;
    error_op = op;
    error_ns = now_ns();
    std::snprintf(msg, sizeof msg, "%s", text ? text : "");
  }
  void note_call(long long ns) { max_call_ns = std::max(max_call_ns, ns); }
};

struct Shared {
  std::atomic<long long> fault_ns{0};  // when the fault was injected (steady clock)
  RankReport rank[kMaxRanks];
  /// Schedule entries of the round: the most any rank started.
  long entries_run(int n) const {
    int most = 0;
    for (int r = 0; r < n; ++r) most = std::max(most, rank[r].entries);
    return most;
  }
};

/// A Shared in anonymous shared memory, so the forked ranks write the
/// parent's copy.
class SharedBlock {
 public:
  SharedBlock() {
    void* p = ::mmap(nullptr, sizeof(Shared), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) {
      std::perror("mmap");
      std::abort();
    }
    sh_ = new (p) Shared();
  }
  ~SharedBlock() {
    sh_->~Shared();
    ::munmap(sh_, sizeof(Shared));
  }
  SharedBlock(const SharedBlock&) = delete;
  SharedBlock& operator=(const SharedBlock&) = delete;
  Shared* get() { return sh_; }

 private:
  Shared* sh_;
};

inline void sleep_us(long us) { std::this_thread::sleep_for(std::chrono::microseconds(us)); }

/// Every TCP packet of the namespace dropped (true) or let through again.
inline void set_drop(bool on) {
  const char* cmd =
      on ? "nft add table inet soak && nft add chain inet soak out "
           "'{ type filter hook output priority 0 ; }' && nft add rule inet soak out meta l4proto tcp drop"
         : "nft delete table inet soak 2>/dev/null";
  if (std::system(cmd) != 0 && on) std::fprintf(stderr, "soak: could not drop packets (nft failed)\n");
}

/// The thread of a drop fault; joined before the victim leaves, so the
/// packets flow again before the next round.
inline std::thread& drop_thread() {
  static std::thread t;
  return t;
}

/// The fault of the round, if the victim (the caller) is at its operation.
inline void inject_fault(const Plan& p, Shared* sh, int op) {
  if (p.fault == Fault::kSlow && op >= p.fault_op && hash3(p.seed, 0x51, static_cast<uint64_t>(op)) % 2 == 0) {
    long long zero = 0;
    sh->fault_ns.compare_exchange_strong(zero, now_ns());
    sleep_us(p.fault_ms * 1000L);
    return;
  }
  if (op != p.fault_op) return;
  auto at_fault = [p, sh] {
    sleep_us(p.fault_delay_us);  // inside the operation, or just after it
    sh->fault_ns.store(now_ns());
  };
  if (p.fault == Fault::kKill) {
    std::thread([=] {
      at_fault();
      ::raise(SIGKILL);
    }).detach();
  } else if (p.fault == Fault::kStop) {
    std::thread([=] {
      at_fault();
      // A child sends SIGCONT later: nothing in a stopped process can.
      if (::fork() == 0) {
        const timespec ts{p.fault_ms / 1000, (p.fault_ms % 1000) * 1000000L};
        ::nanosleep(&ts, nullptr);
        ::kill(::getppid(), SIGCONT);
        ::_exit(0);
      }
      ::kill(::getpid(), SIGSTOP);
    }).detach();
  } else if (p.fault == Fault::kDrop) {
    drop_thread() = std::thread([=] {
      at_fault();
      set_drop(true);
      sleep_us(p.fault_ms * 1000L);
      set_drop(false);
    });
  }
}

inline void finish_fault() {
  if (drop_thread().joinable()) drop_thread().join();
}

/// The errors a rank may end with after a fault.
inline bool fault_status(occl_status_t st) {
  return st == OCCL_ERR_PEER_FAILURE || st == OCCL_ERR_TIMEOUT || st == OCCL_ERR_COMM_FAILED;
}

/// The /dev/shm entries of process pid ("omniccl.<ns>-<pid>.*").
inline std::vector<std::string> shm_left_by(int pid) {
  std::vector<std::string> out;
  DIR* d = ::opendir("/dev/shm");
  if (d == nullptr) return out;
  const std::string tail = "-" + std::to_string(pid) + ".";
  while (const dirent* e = ::readdir(d)) {
    const std::string name = e->d_name;
    const size_t dash = name.find('-');
    if (name.starts_with("omniccl.") && dash != std::string::npos && name.compare(dash, tail.size(), tail) == 0) {
      out.push_back(name);
    }
  }
  ::closedir(d);
  return out;
}

/// Segments of killed ranks of earlier rounds that are still there after
/// a round whose ranks set up shared memory (which removes those of dead
/// processes); clears `left`.
inline void check_removed(std::vector<std::string>& left, std::vector<std::string>& out) {
  for (const auto& name : left) {
    if (::access(("/dev/shm/" + name).c_str(), F_OK) == 0) {
      out.push_back("a killed rank's segment outlived the next job on shared memory: " + name);
    }
  }
  left.clear();
}

/// The problems of rank r's error, if it had one.
inline void judge_error(const Plan& p, const Shared& sh, int r, std::vector<std::string>& out) {
  const RankReport& rep = sh.rank[r];
  if (rep.error_status == OCCL_SUCCESS) return;
  const std::string what =
      cat("rank ", r, ": ", occl_status_string(rep.error_status), " at op ", rep.error_op, ": ", rep.msg);
  const long long fault = sh.fault_ns.load();
  if (p.fault == Fault::kNone || p.fault == Fault::kSlow) {
    out.push_back("unexpected error: " + what);
  } else if (fault == 0 || rep.error_ns < fault) {
    out.push_back("error before the fault: " + what);
  } else if (!fault_status(rep.error_status)) {
    out.push_back("wrong status after the fault: " + what);
  } else {
    const double took = static_cast<double>(rep.error_ns - fault) / 1e9;
    const double bound = p.fault == Fault::kKill ? kKillBoundS : (p.timeout_ms + p.fault_ms) / 1000.0 + kSlackS;
    if (took > bound) out.push_back(cat("error ", took, " s after the fault (bound ", bound, " s): ", what));
  }
}

/// Everything wrong with a finished round; empty when it passed.
/// Discrepancies are counted (and printed by the ranks) apart. A rank killed
/// during link setup (of a split) may leave its segments, which the next
/// job's shared-memory setup removes (docs/concepts/errors.md): those go to
/// *killed_left, to be checked after the next round on shared memory.
inline std::vector<std::string> judge(const Plan& p, const Shared& sh, const omniccl::testing::JobResult& res,
                                      std::vector<std::string>* killed_left) {
  std::vector<std::string> out;
  if (res.ranks.size() != static_cast<size_t>(p.nranks)) return {"the ranks did not start"};
  for (int r = 0; r < p.nranks; ++r) {
    const auto& rr = res.ranks[static_cast<size_t>(r)];
    const bool victim_killed = p.fault == Fault::kKill && r == p.victim;
    if (rr.timed_out) {
      out.push_back(cat("rank ", r, " hung: still running after ", kRoundLimitS, " s"));
    } else if (victim_killed && rr.signal != SIGKILL) {
      out.push_back(cat("the victim, rank ", r, ", was not killed"));
    } else if (!victim_killed && (rr.signal != 0 || rr.exit_code != 0)) {
      out.push_back(cat("rank ", r, " ended with ", rr.signal ? "signal " : "exit status ",
                        rr.signal ? rr.signal : rr.exit_code));
    }
    if (sh.rank[r].discrepancies > 0) out.push_back(cat("rank ", r, ": ", sh.rank[r].discrepancies, " discrepancies"));
    if (!victim_killed) judge_error(p, sh, r, out);
    for (const auto& name : shm_left_by(sh.rank[r].pid)) {
      if (victim_killed) {
        killed_left->push_back(name);
      } else {
        out.push_back(cat("left in /dev/shm by rank ", r, ": ", name));
      }
    }
  }
  return out;
}

}  // namespace soak
