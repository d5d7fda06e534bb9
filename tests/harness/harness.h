// Multi-process test harness: runs N ranks as forked processes on this
// machine, each with its own communicator, and collects how each ended.
//
//   auto res = omniccl::testing::run_ranks({.nranks = 4}, [](occl_comm_t comm, int rank, int n) {
//     ... return 0 on success, non-zero on failure ...
//   });
//   EXPECT_TRUE(res.ok()) << res.summary();
//
// Every job is bounded in time: ranks still running at the deadline are
// killed and reported.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "omniccl/omniccl.h"

namespace omniccl::testing {

struct JobOptions {
  int nranks = 2;
  /// "auto", "shm" or "tcp" (occl_config_t.transport); "tcpN" is "tcp"
  /// with OMNICCL_TCP_STREAMS=N (N data sockets per pair; processes only).
  std::string transport = "auto";
  /// Rendezvous: "tcp" (tcp://127.0.0.1:port), "file" (file:// temp dir),
  /// "uid" (unique id made by the parent) or "env" (env:// variables).
  std::string init = "tcp";
  /// Algorithm override (occl_config_t.algorithm); empty = tuned.
  std::string algorithm;
  /// Per-call deadline in ms (occl_config_t.timeout_ms).
  long long timeout_ms = 60000;
  /// Wall-clock limit for the whole job; ranks still running are killed.
  int job_timeout_s = 180;
  /// Extra environment variables set in every rank.
  std::map<std::string, std::string> env;
  /// Set after `env` in the odd-numbered ranks only (ranks that differ in a
  /// setting).
  std::map<std::string, std::string> env_odd_ranks;
  /// When false, the ranks call fn with a NULL communicator and create it
  /// themselves (for init tests); init information is then in the
  /// environment: OCCL_TEST_INIT (init method), RANK, WORLD_SIZE.
  bool create_comm = true;
  /// Ranks as threads of this process instead of forked processes (the
  /// in-process test mesh): each thread has its own communicator. Needs
  /// create_comm, no env and init "tcp", "file" or "uid" (nothing per rank
  /// lives in the environment). Threads cannot be killed: every call is
  /// bounded by timeout_ms instead of job_timeout_s.
  bool threads = false;
};

struct RankResult {
  int exit_code = -1;  ///< exit status, or -1 if killed by a signal
  int signal = 0;      ///< terminating signal, 0 if it exited
  double seconds = 0;  ///< wall time from fork to exit
  bool timed_out = false;
};

struct JobResult {
  std::vector<RankResult> ranks;
  /// True if every rank exited with status 0.
  bool ok() const;
  /// One line per rank, for failure messages.
  std::string summary() const;
};

/// Options for a job of `nranks` ranks over `transport` ("auto", "shm",
/// "tcp"), each call bounded by timeout_ms and the whole job by
/// job_timeout_s: what most tests ask for.
JobOptions job_options(int nranks, const std::string& transport = "auto", long long timeout_ms = 30000,
                       int job_timeout_s = 90);

/// fn(comm, rank, nranks) runs in each child; its return value is the exit
/// status (0 = success). Exceptions and crashes count as failures.
using RankFn = std::function<int(occl_comm_t comm, int rank, int nranks)>;
JobResult run_ranks(const JobOptions& opts, const RankFn& fn);

/// A 1-D CPU DLTensor over data (shape storage kept in the returned object).
struct Tensor1D {
  DLTensor t;
  int64_t shape[1];
  Tensor1D(void* data, int64_t count, DLDataType dtype);
  Tensor1D(const Tensor1D&) = delete;
  Tensor1D& operator=(const Tensor1D&) = delete;
  const DLTensor* operator&() const { return &t; }
  DLTensor* get() { return &t; }
};

/// DLPack dtype helpers.
DLDataType dl_int(int bits);
DLDataType dl_uint(int bits);
DLDataType dl_float(int bits);
DLDataType dl_bfloat16();
DLDataType dl_bool();

/// In a rank function: an all_reduce SUM over comm of `count` int64
/// elements, (rank + 1) * (i + 1) on each rank, checked against the closed
/// form n (n + 1) / 2 * (i + 1): the communicator still works and its ranks
/// are in step. Returns 0, or prints what went wrong and returns 1.
int all_reduce_works(occl_comm_t comm, int rank, int nranks, int64_t count = 1);

/// Case-insensitive substring test, for checking error messages.
bool contains_ci(const std::string& hay, const std::string& needle);
/// Seconds elapsed since t0 (steady clock).
double seconds_since(std::chrono::steady_clock::time_point t0);

/// Prints "rank R: CHECK FAILED at file:line: text" to stderr and returns
/// false when cond is false.
bool check(bool cond, int rank, const char* file, int line, const std::string& text);

}  // namespace omniccl::testing

/// In a rank function: on failure print and return 1 from the function.
#define RANK_CHECK(cond, rank, text)                                                      \
  do {                                                                                    \
    if (!::omniccl::testing::check((cond), (rank), __FILE__, __LINE__, (text))) return 1; \
  } while (0)
/// In a rank function: an occl call that must succeed.
#define RANK_OK(call, rank)                                                                      \
  do {                                                                                           \
    occl_status_t s_ = (call);                                                                   \
    RANK_CHECK(s_ == OCCL_SUCCESS, (rank),                                                       \
               std::string(#call) + " -> " + occl_status_string(s_) + ": " + occl_last_error()); \
  } while (0)
