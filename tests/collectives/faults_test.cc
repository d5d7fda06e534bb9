// Failure is an answer, never a hang (DESIGN.md section 6).
//
// Each test provokes one kind of fault - a rank killed with SIGKILL in the
// middle of an all_reduce (shm and tcp, 2 and 4 ranks), a rank that never
// calls (or never joins the rendezvous), calls that do not match (dtype,
// count, operation, reduce op, v-counts, root), an abort from another thread,
// a peer that destroys its communicator, garbage from a stray client - and
// asserts both the status every rank gets and how long it took. Every job is
// bounded (job_timeout_s, and every wait between ranks is capped at 20 s), so
// a regression shows up as a failure, not a stuck suite.
//
// Ranks measure time with std::chrono::steady_clock (CLOCK_MONOTONIC, the
// same clock in every process of the machine), exchange timestamps and
// results through an anonymous MAP_SHARED block created before the fork, and
// exit 0 only if every check passed. The test process prints what each rank
// got (status, seconds, message).
#include <arpa/inet.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cctype>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <new>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "harness.h"
#include "omniccl/omniccl.h"

namespace {

using omniccl::testing::contains_ci;
using omniccl::testing::dl_float;
using omniccl::testing::dl_int;
using omniccl::testing::JobOptions;
using omniccl::testing::JobResult;
using omniccl::testing::run_ranks;
using omniccl::testing::seconds_since;
using omniccl::testing::Tensor1D;
using Clock = std::chrono::steady_clock;

// ---------------------------------------------------------------------------
// Helpers
// ---------------------------------------------------------------------------

constexpr int kMaxRanks = 8;

long long now_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(Clock::now().time_since_epoch()).count();
}

/// What one rank saw; written by the rank, printed by the test process.
struct Report {
  std::atomic<int> filled{0};
  int status = -1;
  double seconds = -1;   ///< time to the failure (from the event or the call)
  int next_status = -1;  ///< the call after the failure
  double next_seconds = -1;
  int iterations = 0;
  char message[1024] = {};
};

/// Shared by all ranks of one job (anonymous MAP_SHARED mapping).
struct Shared {
  std::atomic<long long> event_ns{0};  ///< when the fault was injected (kill, destroy, abort)
  std::atomic<int> done{0};            ///< ranks that have finished their checks
  std::atomic<int> flag{0};            ///< test-specific signal
  std::atomic<int> ready{0};           ///< ranks through the setup barrier
  std::atomic<int> abandoned{0};       ///< set when a rank gives up early: stop waiting for it
  std::atomic<int> pid[kMaxRanks] = {};
  Report report[kMaxRanks];

  void record(int rank, occl_status_t st, double seconds, const std::string& msg) {
    Report& r = report[rank];
    r.status = st;
    r.seconds = seconds;
    std::snprintf(r.message, sizeof r.message, "%s", msg.c_str());
    r.filled.store(1);
  }

  /// What a timed call returned.
  struct Outcome {
    occl_status_t st;
    double elapsed;   ///< seconds the call took
    std::string msg;  ///< occl_last_error() after it
  };
  /// Runs call() (returning an occl_status_t), times it, and records the
  /// outcome for `rank`'s report.
  template <typename Call>
  Outcome timed(int rank, Call&& call) {
    const auto t0 = std::chrono::steady_clock::now();
    const occl_status_t st = call();
    Outcome o{st, omniccl::testing::seconds_since(t0), occl_last_error()};
    record(rank, o.st, o.elapsed, o.msg);
    return o;
  }
};

class SharedBlock {
 public:
  SharedBlock() {
    void* p = ::mmap(nullptr, sizeof(Shared), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    if (p != MAP_FAILED) sh_ = new (p) Shared();
  }
  ~SharedBlock() {
    if (sh_ != nullptr) {
      sh_->~Shared();
      ::munmap(sh_, sizeof(Shared));
    }
  }
  SharedBlock(const SharedBlock&) = delete;
  SharedBlock& operator=(const SharedBlock&) = delete;
  Shared* operator->() const { return sh_; }
  Shared* get() const { return sh_; }

 private:
  Shared* sh_ = nullptr;
};

/// Polls pred every 5 ms for at most timeout_s; returns its last value.
bool wait_until(const std::function<bool()>& pred, double timeout_s) {
  const auto t0 = Clock::now();
  while (!pred()) {
    if (seconds_since(t0) > timeout_s) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  return true;
}

/// Waits (at most timeout_s) until `target` ranks have finished their checks
/// or one gave up. Bounded well below the job time limit.
void wait_done(Shared* s, int target, double timeout_s = 20.0) {
  wait_until([&] { return s->done.load() >= target || s->abandoned.load() != 0; }, timeout_s);
}

/// A barrier on comm, then a rendezvous of all ranks through shared memory:
/// afterwards no rank is still inside the barrier, so a fault injected next
/// cannot reach a rank that has not yet left it. Returns false (and releases
/// the other ranks' waits) if the barrier failed.
bool setup_barrier(Shared* s, occl_comm_t comm, int rank, int n) {
  occl_status_t st = occl_barrier(comm, nullptr);
  if (st != OCCL_SUCCESS) {
    std::fprintf(stderr, "rank %d: setup barrier failed: %s: %s\n", rank, occl_status_string(st), occl_last_error());
    s->abandoned.store(1);
    return false;
  }
  s->ready.fetch_add(1);
  wait_until([&] { return s->ready.load() >= n || s->abandoned.load() != 0; }, 20.0);
  return s->abandoned.load() == 0;
}

/// The state letter of a process from /proc/<pid>/stat ('S', 'R', 'T', ...),
/// or '?' if it cannot be read.
char process_state(pid_t pid) {
  const std::string path = "/proc/" + std::to_string(pid) + "/stat";
  FILE* f = std::fopen(path.c_str(), "r");
  if (f == nullptr) return '?';
  char buf[512] = {};
  size_t n = std::fread(buf, 1, sizeof buf - 1, f);
  std::fclose(f);
  const char* close = std::strrchr(buf, ')');  // the command name may hold spaces
  if (n == 0 || close == nullptr || close[1] == '\0' || close[2] == '\0') return '?';
  return close[2];
}

/// Collects failed checks in a rank; the rank function returns rc().
class Checks {
 public:
  explicit Checks(int rank) : rank_(rank) {}
  bool ok(bool cond, const char* file, int line, const std::string& text) {
    if (!cond) {
      std::fprintf(stderr, "rank %d: CHECK FAILED at %s:%d: %s\n", rank_, file, line, text.c_str());
      ++failures_;
    }
    return cond;
  }
  int rc() const { return failures_ == 0 ? 0 : 1; }

 private:
  int rank_;
  int failures_ = 0;
};
#define CK_TRUE(ck, cond, text) (ck).ok((cond), __FILE__, __LINE__, (text))

std::string status_text(int st) { return occl_status_string(static_cast<occl_status_t>(st)); }

/// Prints every rank's report (and the harness's view of each rank).
void print_reports(const std::string& title, const Shared* sh, const JobResult& res) {
  std::printf("[ %s ]\n", title.c_str());
  for (size_t r = 0; r < res.ranks.size() && r < kMaxRanks; ++r) {
    const auto& rr = res.ranks[r];
    const Report& rep = sh->report[r];
    if (rep.filled.load() != 0) {
      std::printf("  rank %zu: %s after %.3f s", r, status_text(rep.status).c_str(), rep.seconds);
      if (rep.iterations > 0) std::printf(" (iteration %d)", rep.iterations);
      if (rep.next_status >= 0) {
        std::printf("; next call %s after %.4f s", status_text(rep.next_status).c_str(), rep.next_seconds);
      }
      std::printf("\n      message: %s\n", rep.message);
    } else {
      std::printf("  rank %zu: no report;", r);
      if (rr.timed_out)
        std::printf(" killed at the job time limit\n");
      else if (rr.signal)
        std::printf(" killed by signal %d\n", rr.signal);
      else
        std::printf(" exit %d\n", rr.exit_code);
    }
  }
  std::fflush(stdout);
}

JobOptions job(int nranks, long long timeout_ms) {
  JobOptions o;
  o.nranks = nranks;
  o.timeout_ms = timeout_ms;
  o.job_timeout_s = 60;
  return o;
}

/// A small float32 all_reduce (used as "the next call").
occl_status_t small_all_reduce(occl_comm_t comm) {
  float s[16] = {}, r[16] = {};
  Tensor1D ts(s, 16, dl_float(32)), tr(r, 16, dl_float(32));
  return occl_all_reduce(&ts, &tr, OCCL_SUM, comm, nullptr);
}

/// After a failure: the next call must fail fast with COMM_FAILED.
void check_next_call_fails_fast(Checks& ck, Shared* sh, int rank, occl_comm_t comm) {
  const auto t = Clock::now();
  occl_status_t st = small_all_reduce(comm);
  const double s = seconds_since(t);
  std::string msg = occl_last_error();
  sh->report[rank].next_status = st;
  sh->report[rank].next_seconds = s;
  CK_TRUE(ck, st == OCCL_ERR_COMM_FAILED, "next call returned " + status_text(st) + ": " + msg);
  CK_TRUE(ck, s < 0.5, "next call took " + std::to_string(s) + " s (must fail fast)");
}

/// occl_comm_init from the environment of a create_comm=false job.
occl_status_t init_own_comm(occl_comm_t* comm, int rank, int n, long long timeout_ms) {
  occl_config_t cfg = OCCL_CONFIG_INIT;
  cfg.timeout_ms = timeout_ms;
  const char* init = std::getenv("OCCL_TEST_INIT");
  return occl_comm_init(comm, init != nullptr ? init : "", rank, n, &cfg);
}

/// The ranks listed after "did not arrive" in a timeout message, or {-1} if
/// the message has no such list.
std::set<int> ranks_not_arrived(const std::string& msg) {
  size_t p = msg.find("did not arrive");
  if (p == std::string::npos) return {-1};
  size_t colon = msg.find(':', p);
  if (colon == std::string::npos) return {-1};
  size_t end = msg.find_first_of(";.", colon);
  std::string list = msg.substr(colon + 1, end == std::string::npos ? std::string::npos : end - colon - 1);
  std::set<int> out;
  int cur = -1;
  for (char c : list + " ") {
    if (std::isdigit(static_cast<unsigned char>(c))) {
      cur = (cur < 0 ? 0 : cur * 10) + (c - '0');
    } else if (cur >= 0) {
      out.insert(cur);
      cur = -1;
    }
  }
  return out;
}

// ---------------------------------------------------------------------------
// A rank killed with SIGKILL in the middle of an all_reduce
// ---------------------------------------------------------------------------

struct KillCase {
  const char* transport;
  int nranks;
};

class KillTest : public ::testing::TestWithParam<KillCase> {};

TEST_P(KillTest, SurvivorsGetPeerFailure) {
  const KillCase kc = GetParam();
  constexpr int kVictim = 1;
  SharedBlock sh;
  ASSERT_NE(sh.get(), nullptr);
  JobOptions o = job(kc.nranks, 60000);
  o.transport = kc.transport;
  Shared* s = sh.get();
  JobResult res = run_ranks(o, [s, kc](occl_comm_t comm, int rank, int n) {
    Checks ck(rank);
    const char* transport = "";
    occl_comm_transport(comm, &transport);
    const int64_t count = int64_t(1) << 20;  // 4 MiB of float32: many chunks, ring algorithm
    std::vector<float> send(count, 1.0f), recv(count, 0.0f);
    Tensor1D ts(send.data(), count, dl_float(32)), tr(recv.data(), count, dl_float(32));
    if (rank == kVictim) {
      std::atomic<int> iters{0};
      std::thread killer([&] {
        if (!wait_until([&] { return iters.load() >= 3; }, 20.0)) {
          std::fprintf(stderr, "rank %d: the all_reduces did not get going\n", rank);
          ::_exit(2);
        }
        std::this_thread::sleep_for(std::chrono::milliseconds(2));  // inside the next all_reduce
        s->event_ns.store(now_ns());
        ::raise(SIGKILL);
      });
      killer.detach();
      for (;;) {
        occl_status_t st = occl_all_reduce(&ts, &tr, OCCL_SUM, comm, nullptr);
        if (st != OCCL_SUCCESS) {
          std::fprintf(stderr, "rank %d: all_reduce failed before the kill: %s\n", rank, occl_last_error());
          ::_exit(3);
        }
        iters.fetch_add(1);
      }
    }
    // Survivors: loop until the failure.
    const auto start = Clock::now();
    occl_status_t st = OCCL_SUCCESS;
    int it = 0;
    while (st == OCCL_SUCCESS && seconds_since(start) < 40.0) {
      st = occl_all_reduce(&ts, &tr, OCCL_SUM, comm, nullptr);
      ++it;
    }
    const long long t_err = now_ns();
    const std::string msg = occl_last_error();
    const long long t_kill = s->event_ns.load();
    const double elapsed = t_kill != 0 ? static_cast<double>(t_err - t_kill) / 1e9 : -1.0;
    s->record(rank, st, elapsed, msg);
    s->report[rank].iterations = it;
    // "tcp3" (three data sockets per pair) is the tcp transport.
    const std::string want = std::string(kc.transport).substr(0, 3);
    CK_TRUE(ck, transport != nullptr && std::string(transport) == want,
            std::string("communicator uses transport ") + (transport ? transport : "?"));
    CK_TRUE(ck, st == OCCL_ERR_PEER_FAILURE, "got " + status_text(st) + ": " + msg);
    CK_TRUE(ck, t_kill != 0, "the failure came before the victim was killed");
    CK_TRUE(ck, elapsed >= 0 && elapsed < 10.0, "took " + std::to_string(elapsed) + " s from the kill");
    CK_TRUE(ck, contains_ci(msg, "rank " + std::to_string(kVictim)), "message does not name the victim: " + msg);
    check_next_call_fails_fast(ck, s, rank, comm);
    // Stay until every survivor has its answer, so that no survivor's exit is
    // what another one reports.
    s->done.fetch_add(1);
    wait_done(s, n - 1);
    return ck.rc();
  });
  print_reports(
      std::string("kill -9 rank 1 of ") + std::to_string(kc.nranks) + " during all_reduce over " + kc.transport, s,
      res);
  ASSERT_EQ(res.ranks.size(), static_cast<size_t>(kc.nranks));
  EXPECT_EQ(res.ranks[kVictim].signal, SIGKILL) << res.summary();
  for (int r = 0; r < kc.nranks; ++r) {
    if (r == kVictim) continue;
    EXPECT_EQ(res.ranks[r].exit_code, 0) << "survivor " << r << " failed its checks (stderr above)" << res.summary();
  }
}

INSTANTIATE_TEST_SUITE_P(Transports, KillTest,
                         ::testing::Values(KillCase{"shm", 2}, KillCase{"shm", 4}, KillCase{"tcp", 2},
                                           KillCase{"tcp", 4}, KillCase{"tcp3", 2}),
                         [](const ::testing::TestParamInfo<KillCase>& p) {
                           return std::string(p.param.transport) + "_" + std::to_string(p.param.nranks) + "ranks";
                         });

// ---------------------------------------------------------------------------
// A rank that never calls: TIMEOUT naming it
// ---------------------------------------------------------------------------

// 4 ranks, deadline 2 s; rank 3 sleeps past the deadline (until the others
// have their answer), then exits. Ranks 0-2 must get TIMEOUT within ~2-5 s
// whose message says rank 3 - and only rank 3 - did not arrive.
TEST(FaultsTest, StalledRankTimesOutAndIsNamed) {
  constexpr int kStalled = 3;
  SharedBlock sh;
  ASSERT_NE(sh.get(), nullptr);
  Shared* s = sh.get();
  JobResult res = run_ranks(job(4, 2000), [s](occl_comm_t comm, int rank, int n) {
    Checks ck(rank);
    if (!setup_barrier(s, comm, rank, n)) return 1;
    if (rank == kStalled) {
      // Never calls; leaves once the others have their answer (or after 20 s).
      wait_done(s, n - 1);
      return 0;
    }
    const auto [st, elapsed, msg] = s->timed(rank, [&] { return small_all_reduce(comm); });
    CK_TRUE(ck, st == OCCL_ERR_TIMEOUT, "got " + status_text(st) + ": " + msg);
    CK_TRUE(ck, elapsed >= 1.9 && elapsed < 5.0, "TIMEOUT after " + std::to_string(elapsed) + " s (deadline 2 s)");
    CK_TRUE(ck, contains_ci(msg, "did not arrive"), "message does not say who did not arrive: " + msg);
    const std::set<int> absent = ranks_not_arrived(msg);
    CK_TRUE(ck, absent == std::set<int>{kStalled}, "message must name rank 3, and only rank 3, as not arrived: " + msg);
    check_next_call_fails_fast(ck, s, rank, comm);
    s->done.fetch_add(1);
    wait_done(s, n - 1);
    return ck.rc();
  });
  print_reports("rank 3 of 4 never calls all_reduce; timeout 2 s", s, res);
  EXPECT_TRUE(res.ok()) << res.summary();
}

// Rank 2 of 3 never calls; ranks 0 and 1 wait in the same all_reduce with
// different deadlines (1.5 s and 3.5 s). When rank 1's deadline passes, rank
// 0 has already given up on this very operation: the culprit is still rank
// 2 alone, and rank 1's message must not claim that rank 0 "did not arrive".
TEST(FaultsTest, TimeoutDoesNotBlameRanksThatAlreadyTimedOut) {
  SharedBlock sh;
  ASSERT_NE(sh.get(), nullptr);
  Shared* s = sh.get();
  JobResult res = run_ranks(job(3, 60000), [s](occl_comm_t comm, int rank, int n) {
    Checks ck(rank);
    if (!setup_barrier(s, comm, rank, n)) return 1;
    if (rank == 2) {
      wait_done(s, n - 1);
      return 0;
    }
    occl_comm_set_timeout(comm, rank == 0 ? 1500 : 3500);
    const auto [st, elapsed, msg] = s->timed(rank, [&] { return small_all_reduce(comm); });
    CK_TRUE(ck, st == OCCL_ERR_TIMEOUT, "got " + status_text(st) + ": " + msg);
    CK_TRUE(ck, elapsed < 6.0, "TIMEOUT after " + std::to_string(elapsed) + " s");
    CK_TRUE(ck, ranks_not_arrived(msg) == std::set<int>{2},
            "message must name rank 2, and only rank 2, as not arrived: " + msg);
    s->done.fetch_add(1);
    wait_done(s, n - 1);
    return ck.rc();
  });
  print_reports("rank 2 of 3 never calls; deadlines 1.5 s (rank 0) and 3.5 s (rank 1)", s, res);
  EXPECT_TRUE(res.ok()) << res.summary();
}

// The per-call deadline set with occl_comm_set_timeout applies, and after the
// TIMEOUT every kind of call on the communicator fails fast with COMM_FAILED
// (blocking and async), carrying the first error's message.
TEST(FaultsTest, SetTimeoutThenEveryCallFailsFast) {
  SharedBlock sh;
  ASSERT_NE(sh.get(), nullptr);
  Shared* s = sh.get();
  JobResult res = run_ranks(job(2, 60000), [s](occl_comm_t comm, int rank, int n) {
    Checks ck(rank);
    if (!setup_barrier(s, comm, rank, n)) return 1;
    if (rank == 1) {
      wait_done(s, 1);
      return 0;
    }
    if (occl_comm_set_timeout(comm, 1000) != OCCL_SUCCESS) {
      s->abandoned.store(1);
      return 1;
    }
    float buf[64] = {};
    Tensor1D t(buf, 64, dl_float(32)), t2(buf, 32, dl_float(32)), t1(buf, 16, dl_float(32));
    const auto [st, elapsed, msg] = s->timed(rank, [&] { return occl_all_reduce(&t, &t, OCCL_SUM, comm, nullptr); });
    CK_TRUE(ck, st == OCCL_ERR_TIMEOUT, "got " + status_text(st) + ": " + msg);
    CK_TRUE(ck, elapsed >= 0.9 && elapsed < 3.5, "TIMEOUT after " + std::to_string(elapsed) + " s (deadline 1 s)");
    CK_TRUE(ck, ranks_not_arrived(msg) == std::set<int>{1}, "message must name rank 1 as not arrived: " + msg);

    struct Call {
      const char* name;
      std::function<occl_status_t(occl_work_t*)> fn;
    };
    const std::vector<Call> calls = {
        {"all_reduce", [&](occl_work_t* w) { return occl_all_reduce(&t, &t, OCCL_SUM, comm, w); }},
        {"barrier", [&](occl_work_t* w) { return occl_barrier(comm, w); }},
        {"broadcast", [&](occl_work_t* w) { return occl_broadcast(&t, 0, comm, w); }},
        {"reduce", [&](occl_work_t* w) { return occl_reduce(&t, &t, OCCL_SUM, 0, comm, w); }},
        {"all_gather", [&](occl_work_t* w) { return occl_all_gather(&t1, &t2, comm, w); }},
        {"send", [&](occl_work_t* w) { return occl_send(&t, 1, comm, w); }},
        {"recv", [&](occl_work_t* w) { return occl_recv(&t, 1, comm, w); }},
    };
    double slowest = 0;
    for (const Call& c : calls) {
      for (int async = 0; async < 2; ++async) {
        const auto tc = Clock::now();
        occl_status_t cs;
        if (async) {
          occl_work_t w = nullptr;
          cs = c.fn(&w);
          if (cs == OCCL_SUCCESS) {
            cs = occl_work_wait(w);
            occl_status_t ts = occl_work_test(w);
            CK_TRUE(ck, ts == cs, std::string("work_test after wait disagrees for ") + c.name);
            occl_work_free(w);
          }
        } else {
          cs = c.fn(nullptr);
        }
        const double d = seconds_since(tc);
        slowest = std::max(slowest, d);
        const std::string m = occl_last_error();
        const std::string what = std::string(async ? "async " : "") + c.name;
        CK_TRUE(ck, cs == OCCL_ERR_COMM_FAILED, what + " returned " + status_text(cs) + ": " + m);
        CK_TRUE(ck, d < 0.2, what + " took " + std::to_string(d) + " s");
        CK_TRUE(ck, contains_ci(m, "timed out"), what + ": message does not carry the first error: " + m);
      }
    }
    s->report[rank].next_status = OCCL_ERR_COMM_FAILED;
    s->report[rank].next_seconds = slowest;
    s->done.fetch_add(1);
    return ck.rc();
  });
  print_reports("occl_comm_set_timeout(1000 ms); rank 1 never calls (next call: slowest of 14 follow-up calls)", s,
                res);
  EXPECT_TRUE(res.ok()) << res.summary();
}

// ---------------------------------------------------------------------------
// Mismatched calls: MISMATCH on every rank, fast, naming the field
// ---------------------------------------------------------------------------

using MismatchCall = std::function<occl_status_t(occl_comm_t comm, int rank, int n)>;

/// Every rank runs a barrier, then `call`; each must get MISMATCH within
/// max_seconds (long before the deadline timeout_ms) with a message that
/// contains every needle, and then COMM_FAILED at once.
///
/// allow_late: a rank that has nothing to receive that could differ may
/// finish the call before the others' notice arrives (eager sends, like the
/// sender of a mismatched send/recv); it may then return SUCCESS, but its
/// next call must fail with MISMATCH (the notice) or COMM_FAILED.
void expect_mismatch_everywhere(const std::string& title, int nranks, long long timeout_ms, double max_seconds,
                                const MismatchCall& call, const std::vector<std::string>& needles,
                                bool allow_late = false) {
  SharedBlock sh;
  ASSERT_NE(sh.get(), nullptr);
  Shared* s = sh.get();
  JobResult res = run_ranks(job(nranks, timeout_ms), [&](occl_comm_t comm, int rank, int n) {
    Checks ck(rank);
    if (!setup_barrier(s, comm, rank, n)) return 1;
    const auto [st, elapsed, msg] = s->timed(rank, [&] { return call(comm, rank, n); });
    if (allow_late && st == OCCL_SUCCESS) {
      const auto t1 = Clock::now();
      occl_status_t next = small_all_reduce(comm);
      const double d = seconds_since(t1);
      const std::string m = occl_last_error();
      s->report[rank].next_status = next;
      s->report[rank].next_seconds = d;
      std::snprintf(s->report[rank].message, sizeof s->report[rank].message, "(next call) %s", m.c_str());
      CK_TRUE(ck, next == OCCL_ERR_MISMATCH || next == OCCL_ERR_COMM_FAILED,
              "call succeeded and the next call returned " + status_text(next) + ": " + m);
      CK_TRUE(ck, d < max_seconds, "next call took " + std::to_string(d) + " s");
      s->done.fetch_add(1);
      wait_done(s, n);
      return ck.rc();
    }
    CK_TRUE(ck, st == OCCL_ERR_MISMATCH, "got " + status_text(st) + (st == OCCL_SUCCESS ? "" : ": " + msg));
    CK_TRUE(ck, elapsed < max_seconds,
            "took " + std::to_string(elapsed) + " s (deadline " + std::to_string(timeout_ms / 1000) + " s)");
    if (st != OCCL_SUCCESS) {
      for (const auto& nd : needles) CK_TRUE(ck, contains_ci(msg, nd), "message lacks '" + nd + "': " + msg);
      check_next_call_fails_fast(ck, s, rank, comm);
    }
    // Stay until every rank has its answer: what a rank reports must come
    // from the mismatch, not from another rank leaving.
    s->done.fetch_add(1);
    wait_done(s, n);
    return ck.rc();
  });
  print_reports(title, s, res);
  EXPECT_TRUE(res.ok()) << res.summary();
}

TEST(FaultsTest, MismatchedDtype) {
  // Rank 1 passes int32 where the others pass float32: same byte size.
  expect_mismatch_everywhere("all_reduce: rank 1 int32, others float32 (deadline 60 s)", 4, 60000, 5.0,
                             [](occl_comm_t comm, int rank, int) {
                               alignas(8) unsigned char a[256] = {}, b[256] = {};
                               const DLDataType dt = rank == 1 ? dl_int(32) : dl_float(32);
                               Tensor1D ta(a, 64, dt), tb(b, 64, dt);
                               return occl_all_reduce(&ta, &tb, OCCL_SUM, comm, nullptr);
                             },
                             {"dtype", "int32", "float32"});
}

TEST(FaultsTest, MismatchedCount) {
  expect_mismatch_everywhere("all_reduce: rank 1 32 elements, others 64 (deadline 60 s)", 4, 60000, 5.0,
                             [](occl_comm_t comm, int rank, int) {
                               float a[64] = {}, b[64] = {};
                               const int64_t count = rank == 1 ? 32 : 64;
                               Tensor1D ta(a, count, dl_float(32)), tb(b, count, dl_float(32));
                               return occl_all_reduce(&ta, &tb, OCCL_SUM, comm, nullptr);
                             },
                             {"count", "32", "64"});
}

TEST(FaultsTest, MismatchedAllToAllCountNamesBlockCounts) {
  // all_to_all's count is a block's (a rank's share), as NCCL's: rank 1's
  // 32 elements are blocks of 8, the others' 64 blocks of 16.
  expect_mismatch_everywhere("all_to_all: rank 1 32 elements, others 64 (deadline 60 s)", 4, 60000, 5.0,
                             [](occl_comm_t comm, int rank, int) {
                               float a[64] = {}, b[64] = {};
                               const int64_t count = rank == 1 ? 32 : 64;
                               Tensor1D ta(a, count, dl_float(32)), tb(b, count, dl_float(32));
                               return occl_all_to_all(&ta, &tb, comm, nullptr);
                             },
                             {"count", "8", "16"});
}

TEST(FaultsTest, MismatchedOperation) {
  // Rank 0 calls all_gather while the others call all_reduce.
  expect_mismatch_everywhere("rank 0 all_gather, others all_reduce (deadline 60 s)", 4, 60000, 5.0,
                             [](occl_comm_t comm, int rank, int n) {
                               std::vector<float> a(64, 1.0f), b(64 * n, 0.0f);
                               Tensor1D ta(a.data(), 64, dl_float(32)), tb(b.data(), 64, dl_float(32)),
                                   tg(b.data(), 64 * n, dl_float(32));
                               if (rank == 0) return occl_all_gather(&ta, &tg, comm, nullptr);
                               return occl_all_reduce(&ta, &tb, OCCL_SUM, comm, nullptr);
                             },
                             {"all_gather", "all_reduce"});
}

TEST(FaultsTest, MismatchedReduceOp) {
  expect_mismatch_everywhere("all_reduce: rank 2 MAX, others SUM (deadline 60 s)", 4, 60000, 5.0,
                             [](occl_comm_t comm, int rank, int) {
                               float a[64] = {}, b[64] = {};
                               Tensor1D ta(a, 64, dl_float(32)), tb(b, 64, dl_float(32));
                               return occl_all_reduce(&ta, &tb, rank == 2 ? OCCL_MAX : OCCL_SUM, comm, nullptr);
                             },
                             {"reduce op", "MAX", "SUM"});
}

TEST(FaultsTest, MismatchedVectorCounts) {
  // all_gatherv: rank 1 contributes 5 elements (and says so), the others
  // expect 4 from it. Rank 1 receives exactly what it expects, so it may
  // finish first; the others detect the size and notify it.
  expect_mismatch_everywhere(
      "all_gatherv: rank 1 sends 5 elements, the others expect 4 (deadline 60 s)", 4, 60000, 5.0,
      [](occl_comm_t comm, int rank, int n) {
        std::vector<float> a(8, 1.0f), b(8 * n, 0.0f);
        std::vector<int64_t> counts(n, 4);
        if (rank == 1) counts[1] = 5;
        Tensor1D ta(a.data(), counts[rank], dl_float(32)), tb(b.data(), 8 * n, dl_float(32));
        return occl_all_gatherv(&ta, &tb, counts.data(), nullptr, comm, nullptr);
      },
      {"size"}, /*allow_late=*/true);
}

// Mismatched roots. DESIGN.md 6: "Mismatched calls (different op, dtype,
// count, root or reduce op across ranks) are detected always". The deadline
// is kept short (5 s) so that a failure to detect costs little time; the
// answer is still required well before it.
TEST(FaultsTest, MismatchedRootBroadcast) {
  // Rank 0 passes root 1, ranks 1-3 pass root 0.
  expect_mismatch_everywhere("broadcast: rank 0 root 1, others root 0 (deadline 5 s)", 4, 5000, 2.5,
                             [](occl_comm_t comm, int rank, int) {
                               float a[64] = {};
                               Tensor1D ta(a, 64, dl_float(32));
                               return occl_broadcast(&ta, rank == 0 ? 1 : 0, comm, nullptr);
                             },
                             {"root"});
}

TEST(FaultsTest, MismatchedRootReduce) {
  // Two ranks, each naming itself the root.
  expect_mismatch_everywhere("reduce: each of 2 ranks passes itself as root (deadline 5 s)", 2, 5000, 2.5,
                             [](occl_comm_t comm, int rank, int) {
                               float a[64] = {}, b[64] = {};
                               Tensor1D ta(a, 64, dl_float(32)), tb(b, 64, dl_float(32));
                               return occl_reduce(&ta, &tb, OCCL_SUM, rank, comm, nullptr);
                             },
                             {"root"});
}

// ---------------------------------------------------------------------------
// A rank that never joins the rendezvous
// ---------------------------------------------------------------------------

class InitTimeoutTest : public ::testing::TestWithParam<const char*> {};

// Rank 2 of 3 never calls occl_comm_init: ranks 0 and 1 must get TIMEOUT
// after the 2 s deadline (not a hang, not another error), naming rank 2.
// Rank 1 starts 300 ms after rank 0, so with tcp:// its deadline passes
// after that of rank 0, which hosts the rendezvous server.
TEST_P(InitTimeoutTest, MissingRankIsNamed) {
  SharedBlock sh;
  ASSERT_NE(sh.get(), nullptr);
  Shared* s = sh.get();
  JobOptions o = job(3, 2000);
  o.create_comm = false;
  o.init = GetParam();
  JobResult res = run_ranks(o, [s](occl_comm_t, int rank, int n) {
    Checks ck(rank);
    if (rank == 2) {
      wait_done(s, 2);
      return 0;
    }
    if (rank == 1) std::this_thread::sleep_for(std::chrono::milliseconds(300));
    occl_comm_t comm = nullptr;
    const auto [st, elapsed, msg] = s->timed(rank, [&] { return init_own_comm(&comm, rank, n, 2000); });
    CK_TRUE(ck, comm == nullptr, "*comm not NULL after a failed init");
    // With tcp://, rank 0 serves the rendezvous; when it gives up at its own
    // deadline, a rank that started later learns that the server went away
    // (PEER_FAILURE naming the rendezvous server) before its own deadline.
    const bool server_gone = std::string(GetParam()) == "tcp" && rank != 0 && st == OCCL_ERR_PEER_FAILURE &&
                             contains_ci(msg, "rendezvous server");
    if (server_gone) {
      CK_TRUE(ck, elapsed >= 1.5 && elapsed < 5.0, "init failed after " + std::to_string(elapsed) + " s");
    } else {
      CK_TRUE(ck, st == OCCL_ERR_TIMEOUT, "init returned " + status_text(st) + ": " + msg);
      CK_TRUE(ck, elapsed >= 1.9 && elapsed < 5.0,
              "init failed after " + std::to_string(elapsed) + " s (deadline 2 s)");
      CK_TRUE(ck, contains_ci(msg, "2") && contains_ci(msg, "did not join"), "message does not name rank 2: " + msg);
    }
    if (comm != nullptr) occl_comm_destroy(comm);
    s->done.fetch_add(1);
    wait_done(s, 2);
    return ck.rc();
  });
  print_reports(std::string("rank 2 of 3 never joins the ") + GetParam() + " rendezvous; timeout 2 s", s, res);
  EXPECT_TRUE(res.ok()) << res.summary();
}

INSTANTIATE_TEST_SUITE_P(Rendezvous, InitTimeoutTest, ::testing::Values("tcp", "file"),
                         [](const ::testing::TestParamInfo<const char*>& p) { return std::string(p.param); });

// ---------------------------------------------------------------------------
// An error notice must not fail an operation it does not belong to
// ---------------------------------------------------------------------------

// Rank 1 waits in a recv from rank 0. While rank 1 is asleep (held with
// SIGSTOP so the order of events is fixed), rank 0 sends the message - the
// recv now has all its data - and then ranks 0 and 2 call a mismatched
// all_reduce, whose error notice reaches rank 1 as well. When rank 1 runs
// again, its recv, which matched its send and is complete, must succeed; the
// mismatch belongs to the all_reduce, which rank 1 has not entered yet, and
// must be reported there. (Seen under CPU load as a setup barrier failing
// with another operation's MISMATCH.)
TEST(FaultsTest, LaterOperationsErrorDoesNotFailAnEarlierOperation) {
  SharedBlock sh;
  ASSERT_NE(sh.get(), nullptr);
  Shared* s = sh.get();
  JobOptions o = job(3, 20000);
  o.algorithm = "all_reduce=direct";  // every rank exchanges with every rank
  JobResult res = run_ranks(o, [s](occl_comm_t comm, int rank, int n) {
    Checks ck(rank);
    if (!setup_barrier(s, comm, rank, n)) return 1;
    int32_t msg_buf[16];
    float a[16] = {}, b[16] = {};
    Tensor1D tmsg(msg_buf, 16, dl_int(32));
    if (rank == 1) {
      std::fill(msg_buf, msg_buf + 16, -1);
      s->pid[1].store(static_cast<int>(::getpid()));
      s->flag.store(1);
      const auto t0 = Clock::now();
      occl_status_t st = occl_recv(&tmsg, 0, comm, nullptr);
      std::string m = occl_last_error();
      s->record(rank, st, seconds_since(t0), st == OCCL_SUCCESS ? "recv: success" : "recv: " + m);
      CK_TRUE(ck, st == OCCL_SUCCESS, "the complete, matching recv returned " + status_text(st) + ": " + m);
      if (st == OCCL_SUCCESS) {
        CK_TRUE(ck, std::all_of(msg_buf, msg_buf + 16, [](int32_t v) { return v == 42; }), "recv data wrong");
      }
      Tensor1D ta(a, 16, dl_float(32)), tb(b, 16, dl_float(32));
      const auto t1 = Clock::now();
      occl_status_t next = occl_all_reduce(&ta, &tb, OCCL_SUM, comm, nullptr);
      s->report[rank].next_status = next;
      s->report[rank].next_seconds = seconds_since(t1);
      CK_TRUE(ck, next == OCCL_ERR_MISMATCH || next == OCCL_ERR_COMM_FAILED,
              "the mismatched all_reduce returned " + status_text(next) + ": " + occl_last_error());
    } else {
      wait_until([&] { return s->flag.load() != 0; }, 10.0);
      std::this_thread::sleep_for(std::chrono::milliseconds(300));  // rank 1 is asleep in its recv
      const pid_t victim = static_cast<pid_t>(s->pid[1].load());
      if (rank == 0) {
        ::kill(victim, SIGSTOP);
        // Continue only once rank 1 is really stopped (state T in /proc).
        const bool stopped = wait_until([&] { return process_state(victim) == 'T'; }, 2.0);
        CK_TRUE(ck, stopped, "rank 1 did not stop");
        std::fill(msg_buf, msg_buf + 16, 42);
        occl_status_t ss = occl_send(&tmsg, 1, comm, nullptr);
        CK_TRUE(ck, ss == OCCL_SUCCESS, "send returned " + status_text(ss) + ": " + occl_last_error());
        s->flag.store(2);
      } else {
        wait_until([&] { return s->flag.load() >= 2; }, 10.0);
      }
      // Ranks 0 and 2 disagree on the dtype.
      Tensor1D ta(a, 16, rank == 0 ? dl_float(32) : dl_int(32)), tb(b, 16, rank == 0 ? dl_float(32) : dl_int(32));
      const auto t0 = Clock::now();
      occl_status_t st = occl_all_reduce(&ta, &tb, OCCL_SUM, comm, nullptr);
      std::string m = occl_last_error();
      s->record(rank, st, seconds_since(t0), m);
      CK_TRUE(ck, st == OCCL_ERR_MISMATCH, "all_reduce returned " + status_text(st) + ": " + m);
      if (rank == 0) {
        std::this_thread::sleep_for(std::chrono::milliseconds(200));  // let every notice arrive
        ::kill(victim, SIGCONT);
      }
    }
    s->done.fetch_add(1);
    wait_done(s, n);
    return ck.rc();
  });
  print_reports("rank 1 in a complete recv when the error notice of a later all_reduce arrives", s, res);
  EXPECT_TRUE(res.ok()) << res.summary();
}

// ---------------------------------------------------------------------------
// Garbage from a stray client
// ---------------------------------------------------------------------------

/// A TCP connection to 127.0.0.1:port, retried until the deadline; -1 if none.
int connect_local(int port, double timeout_s) {
  const auto t0 = Clock::now();
  for (;;) {
    int fd = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in in{};
    in.sin_family = AF_INET;
    in.sin_port = htons(static_cast<uint16_t>(port));
    in.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (fd >= 0 && ::connect(fd, reinterpret_cast<sockaddr*>(&in), sizeof in) == 0) return fd;
    if (fd >= 0) ::close(fd);
    if (seconds_since(t0) > timeout_s) return -1;
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
}

/// Sends each of several kinds of garbage to the rendezvous server on its
/// own connection; returns a connection left open in the middle of a header.
int send_garbage(int port) {
  std::vector<std::string> junk;
  junk.push_back("GET / HTTP/1.1\r\nHost: omniccl\r\n\r\n");
  // Right magic and version, absurd lengths: must be refused before allocating.
  std::string huge("OCST\x01\x00\x01\x00", 8);
  huge += std::string("\xff\xff\xff\xff", 4) + std::string("\xff\xff\xff\xff\xff\xff\xff\x7f", 8);
  junk.push_back(huge);
  std::string future("OCST\x63\x00\x02\x00\x04\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00keys", 24);
  junk.push_back(future);
  std::string noise(256 * 1024, '\0');
  uint32_t x = 12345;
  for (char& c : noise) {
    x = x * 1103515245u + 12345u;
    c = static_cast<char>(x >> 24);
  }
  junk.push_back(noise);
  for (const auto& j : junk) {
    int fd = connect_local(port, 5.0);
    if (fd < 0) return -1;
    ssize_t w = ::send(fd, j.data(), j.size(), MSG_NOSIGNAL);
    (void)w;
    ::close(fd);
  }
  int slow = connect_local(port, 5.0);
  if (slow >= 0) {
    ssize_t w = ::send(slow, "OCST\x01\x00", 6, MSG_NOSIGNAL);  // half a header, then silence
    (void)w;
  }
  return slow;
}

// A stray client sends garbage (and keeps a half-sent header open) to the
// tcp:// rendezvous server while the ranks initialise, and again afterwards:
// no rank may crash or hang, and the job works.
TEST(FaultsTest, StrayClientGarbageDoesNotDisturbTheJob) {
  JobOptions o = job(2, 10000);
  o.create_comm = false;
  o.init = "tcp";
  JobResult res = run_ranks(o, [](occl_comm_t, int rank, int n) {
    Checks ck(rank);
    const char* init = std::getenv("OCCL_TEST_INIT");
    const std::string method = init != nullptr ? init : "";
    const int port = std::atoi(method.substr(method.rfind(':') + 1).c_str());
    int slow = -1;
    if (rank == 1) {
      slow = send_garbage(port);  // waits for rank 0's server to come up
      CK_TRUE(ck, slow >= 0, "could not reach the rendezvous server");
    }
    occl_comm_t comm = nullptr;
    const auto t0 = Clock::now();
    occl_status_t st = init_own_comm(&comm, rank, n, 10000);
    CK_TRUE(ck, st == OCCL_SUCCESS, "init returned " + status_text(st) + ": " + occl_last_error());
    CK_TRUE(ck, seconds_since(t0) < 5.0, "init took " + std::to_string(seconds_since(t0)) + " s");
    if (comm == nullptr) return ck.rc();
    if (rank == 1) {
      int again = send_garbage(port);  // the server lives on in rank 0
      if (again >= 0) ::close(again);
    }
    for (int i = 0; i < 3; ++i) {
      float a[256], b[256];
      std::fill(a, a + 256, static_cast<float>(rank + 1));
      Tensor1D ta(a, 256, dl_float(32)), tb(b, 256, dl_float(32));
      occl_status_t as = occl_all_reduce(&ta, &tb, OCCL_SUM, comm, nullptr);
      CK_TRUE(ck, as == OCCL_SUCCESS && b[255] == 3.0f, "all_reduce after garbage: " + status_text(as));
    }
    CK_TRUE(ck, occl_barrier(comm, nullptr) == OCCL_SUCCESS, "final barrier");
    if (slow >= 0) ::close(slow);
    occl_comm_destroy(comm);
    return ck.rc();
  });
  EXPECT_TRUE(res.ok()) << res.summary();
}

// ---------------------------------------------------------------------------
// occl_comm_abort from another thread
// ---------------------------------------------------------------------------

// Rank 0 blocks in an all_reduce that rank 1 never joins; another thread of
// rank 0 aborts the communicator. The blocked call returns ABORTED within
// 1 s and the abort itself returns promptly. The abort comes 300 ms into the
// call (the rank sleeps in poll() on its control sockets by then) or 30 ms
// into it (it sleeps on its futex word then).
class AbortTest : public ::testing::TestWithParam<int> {};

TEST_P(AbortTest, FromAnotherThreadUnblocksCall) {
  const int abort_after_ms = GetParam();
  SharedBlock sh;
  ASSERT_NE(sh.get(), nullptr);
  Shared* s = sh.get();
  JobOptions o = job(2, 60000);
  o.create_comm = false;  // rank 0's communicator is freed by the abort
  JobResult res = run_ranks(o, [s, abort_after_ms](occl_comm_t, int rank, int n) {
    Checks ck(rank);
    occl_comm_t comm = nullptr;
    if (init_own_comm(&comm, rank, n, 60000) != OCCL_SUCCESS) {
      std::fprintf(stderr, "rank %d: init failed: %s\n", rank, occl_last_error());
      s->abandoned.store(1);
      return 1;
    }
    if (!setup_barrier(s, comm, rank, n)) return 1;
    if (rank == 1) {  // never joins; leaves after rank 0 is done
      wait_done(s, 1);
      occl_comm_destroy(comm);
      return 0;
    }
    std::atomic<int> entered{0}, returned{0};
    std::atomic<long long> returned_ns{0};
    occl_status_t st = OCCL_SUCCESS;
    std::string msg;
    std::thread blocked([&] {
      float buf[1024] = {};
      Tensor1D t(buf, 1024, dl_float(32));
      entered.store(1);
      st = occl_all_reduce(&t, &t, OCCL_SUM, comm, nullptr);
      returned_ns.store(now_ns());
      msg = occl_last_error();  // thread-local: read on this thread
      returned.store(1);
    });
    wait_until([&] { return entered.load() != 0; }, 5.0);
    std::this_thread::sleep_for(std::chrono::milliseconds(abort_after_ms));  // inside the all_reduce
    CK_TRUE(ck, returned.load() == 0, "the all_reduce returned before the abort");
    const long long t_abort = now_ns();
    const auto a0 = Clock::now();
    occl_status_t as = occl_comm_abort(comm);
    const double abort_s = seconds_since(a0);
    if (!wait_until([&] { return returned.load() != 0; }, 10.0)) {
      std::fprintf(stderr, "rank 0: CHECK FAILED: the blocked all_reduce did not return 10 s after the abort\n");
      ::_exit(5);  // cannot join a hung thread
    }
    blocked.join();
    const double unblock_s = static_cast<double>(returned_ns.load() - t_abort) / 1e9;
    s->record(rank, st, unblock_s, msg);
    s->report[rank].next_status = as;
    s->report[rank].next_seconds = abort_s;
    CK_TRUE(ck, as == OCCL_SUCCESS, std::string("occl_comm_abort returned ") + status_text(as));
    CK_TRUE(ck, abort_s < 1.0, "occl_comm_abort took " + std::to_string(abort_s) + " s");
    CK_TRUE(ck, st == OCCL_ERR_ABORTED, "blocked call returned " + status_text(st) + ": " + msg);
    CK_TRUE(ck, unblock_s < 1.0, "blocked call returned " + std::to_string(unblock_s) + " s after the abort");
    CK_TRUE(ck, contains_ci(msg, "abort"), "message does not mention the abort: " + msg);
    s->done.fetch_add(1);
    return ck.rc();
  });
  print_reports("occl_comm_abort from another thread (report: blocked call; 'next call' = the abort itself)", s, res);
  EXPECT_TRUE(res.ok()) << res.summary();
}

INSTANTIATE_TEST_SUITE_P(FaultsTest, AbortTest, ::testing::Values(300, 30), [](const ::testing::TestParamInfo<int>& p) {
  return p.param >= 100 ? std::string("SleepingInPoll") : std::string("SleepingOnFutex");
});

// The same with async operations: their work handles stay valid and complete
// with ABORTED, after occl_comm_abort and after occl_comm_destroy alike.
class PendingWorkTest : public ::testing::TestWithParam<bool> {};

TEST_P(PendingWorkTest, CompletesWithAborted) {
  const bool use_destroy = GetParam();
  SharedBlock sh;
  ASSERT_NE(sh.get(), nullptr);
  Shared* s = sh.get();
  JobOptions o = job(2, 60000);
  o.create_comm = false;
  JobResult res = run_ranks(o, [s, use_destroy](occl_comm_t, int rank, int n) {
    Checks ck(rank);
    occl_comm_t comm = nullptr;
    if (init_own_comm(&comm, rank, n, 60000) != OCCL_SUCCESS) {
      std::fprintf(stderr, "rank %d: init failed: %s\n", rank, occl_last_error());
      s->abandoned.store(1);
      return 1;
    }
    if (!setup_barrier(s, comm, rank, n)) return 1;
    if (rank == 1) {
      wait_done(s, 1);
      occl_comm_destroy(comm);
      return 0;
    }
    std::vector<float> buf(4096, 1.0f);
    Tensor1D t(buf.data(), 4096, dl_float(32));
    occl_work_t w1 = nullptr, w2 = nullptr;
    CK_TRUE(ck, occl_all_reduce(&t, &t, OCCL_SUM, comm, &w1) == OCCL_SUCCESS && w1 != nullptr, "async start");
    CK_TRUE(ck, occl_barrier(comm, &w2) == OCCL_SUCCESS && w2 != nullptr, "second async start (queued)");
    std::this_thread::sleep_for(std::chrono::milliseconds(300));
    CK_TRUE(ck, occl_work_test(w1) == OCCL_ERR_IN_PROGRESS, "work finished without the peer");
    const auto a0 = Clock::now();
    occl_status_t as = use_destroy ? occl_comm_destroy(comm) : occl_comm_abort(comm);
    const double abort_s = seconds_since(a0);
    const std::string fn = use_destroy ? "occl_comm_destroy" : "occl_comm_abort";
    // Work handles stay valid after the abort; wait on them from a helper
    // thread so that a hang is reported instead of blocking the rank.
    std::atomic<int> waited{0};
    occl_status_t s1 = OCCL_SUCCESS, s2 = OCCL_SUCCESS;
    std::string m1;
    std::thread waiter([&] {
      s1 = occl_work_wait(w1);
      m1 = occl_last_error();
      s2 = occl_work_wait(w2);
      waited.store(1);
    });
    if (!wait_until([&] { return waited.load() != 0; }, 5.0)) {
      std::fprintf(stderr, "rank 0: CHECK FAILED: work handles did not complete 5 s after the abort\n");
      ::_exit(5);
    }
    waiter.join();
    const double done_s = seconds_since(a0);
    s->record(rank, s1, done_s, m1);
    s->report[rank].next_status = s2;
    s->report[rank].next_seconds = done_s;
    CK_TRUE(ck, as == OCCL_SUCCESS, fn + " returned " + status_text(as));
    CK_TRUE(ck, abort_s < 1.0, fn + " took " + std::to_string(abort_s) + " s");
    CK_TRUE(ck, s1 == OCCL_ERR_ABORTED, "in-flight work completed with " + status_text(s1) + ": " + m1);
    CK_TRUE(ck, s2 == OCCL_ERR_ABORTED, "queued work completed with " + status_text(s2));
    CK_TRUE(ck, done_s < 1.0, "work completed " + std::to_string(done_s) + " s after the abort");
    occl_work_free(w1);
    occl_work_free(w2);
    s->done.fetch_add(1);
    return ck.rc();
  });
  print_reports(std::string(use_destroy ? "occl_comm_destroy" : "occl_comm_abort") +
                    " with pending async work (report: in-flight work; next = queued work)",
                s, res);
  EXPECT_TRUE(res.ok()) << res.summary();
}

INSTANTIATE_TEST_SUITE_P(AbortAndDestroy, PendingWorkTest, ::testing::Values(false, true),
                         [](const ::testing::TestParamInfo<bool>& p) {
                           return std::string(p.param ? "destroy" : "abort");
                         });

// ---------------------------------------------------------------------------
// A peer that destroys its communicator early
// ---------------------------------------------------------------------------

/// `leaver` destroys its communicator after a barrier (after `delay_ms`);
/// the others call an all_reduce (before or after the destroy) and must get
/// PEER_FAILURE naming the leaver within max_seconds of the destroy.
void expect_departure_reported(const std::string& title, int nranks, int leaver, bool call_before_destroy, int delay_ms,
                               double max_seconds, long long timeout_ms) {
  SharedBlock sh;
  ASSERT_NE(sh.get(), nullptr);
  Shared* s = sh.get();
  JobOptions o = job(nranks, timeout_ms);
  o.create_comm = false;
  JobResult res = run_ranks(o, [&](occl_comm_t, int rank, int n) {
    Checks ck(rank);
    occl_comm_t comm = nullptr;
    if (init_own_comm(&comm, rank, n, timeout_ms) != OCCL_SUCCESS) {
      std::fprintf(stderr, "rank %d: init failed: %s\n", rank, occl_last_error());
      s->abandoned.store(1);
      return 1;
    }
    if (!setup_barrier(s, comm, rank, n)) return 1;
    if (rank == leaver) {
      std::this_thread::sleep_for(std::chrono::milliseconds(delay_ms));
      s->event_ns.store(now_ns());
      occl_status_t ds = occl_comm_destroy(comm);
      s->flag.store(1);
      CK_TRUE(ck, ds == OCCL_SUCCESS, "destroy returned " + status_text(ds));
      // The process stays: what the others see is the destroy, not an exit.
      wait_done(s, n - 1);
      return ck.rc();
    }
    if (!call_before_destroy) wait_until([&] { return s->flag.load() != 0 || s->abandoned.load() != 0; }, 10.0);
    occl_status_t st = small_all_reduce(comm);
    const long long t_err = now_ns();
    const std::string msg = occl_last_error();
    const double elapsed = static_cast<double>(t_err - s->event_ns.load()) / 1e9;
    s->record(rank, st, elapsed, msg);
    CK_TRUE(ck, st == OCCL_ERR_PEER_FAILURE, "got " + status_text(st) + ": " + msg);
    CK_TRUE(ck, elapsed < max_seconds, "answer came " + std::to_string(elapsed) + " s after the destroy");
    CK_TRUE(ck, contains_ci(msg, "rank " + std::to_string(leaver)), "message does not name the leaver: " + msg);
    CK_TRUE(ck, contains_ci(msg, "destroy"), "message does not say the communicator was destroyed: " + msg);
    check_next_call_fails_fast(ck, s, rank, comm);
    s->done.fetch_add(1);
    wait_done(s, n - 1);
    occl_comm_destroy(comm);
    return ck.rc();
  });
  print_reports(title, s, res);
  EXPECT_TRUE(res.ok()) << res.summary();
}

TEST(FaultsTest, PeerDestroyedBeforeTheCall) {
  expect_departure_reported("rank 1 of 2 destroys its communicator, then rank 0 calls all_reduce", 2, 1, false, 0, 2.0,
                            60000);
}

TEST(FaultsTest, PeerDestroyedDuringTheCall) {
  expect_departure_reported("rank 0 blocked in all_reduce; rank 1 of 2 destroys its communicator", 2, 1, true, 300, 1.0,
                            60000);
}

TEST(FaultsTest, PeerDestroyedEverySurvivorReports) {
  // Three ranks: every survivor, not only those exchanging data with the
  // leaver at that moment, must get PEER_FAILURE naming it, within seconds.
  expect_departure_reported("rank 2 of 3 destroys its communicator; ranks 0 and 1 call all_reduce", 3, 2, false, 0, 3.0,
                            8000);
}

}  // namespace
