// Tests of the C API surface with real ranks: versions, status strings,
// every rendezvous, communicator queries, split, async work handles,
// send/recv, PREMUL_SUM op lifetime and DLPack layouts.
#include <gtest/gtest.h>
#include <dirent.h>
#include <linux/capability.h>
#include <linux/tcp.h>
#include <netinet/in.h>
#include <sched.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/stat.h>
#include <sys/utsname.h>
#include <unistd.h>

#include <atomic>
#include <cctype>
#include <cstddef>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <functional>
#include <map>
#include <iterator>
#include <memory>
#include <new>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "harness.h"
#include "reference.h"

namespace {

using namespace occl_ref;
using omniccl::testing::all_reduce_works;
using omniccl::testing::dl_float;
using omniccl::testing::dl_int;
using omniccl::testing::dl_uint;
using omniccl::testing::job_options;
using omniccl::testing::JobOptions;
using omniccl::testing::JobResult;
using omniccl::testing::run_ranks;
using omniccl::testing::Tensor1D;

/// A job of this suite: job_options with its longer limits (120 s a call,
/// 300 s a job).
JobOptions opts(int n, const std::string& transport = "auto") { return job_options(n, transport, 120000, 300); }

// ---------------------------------------------------------------------------
// Versions and status strings (no ranks needed)

TEST(Api, VersionMatchesHeader) {
  int v = -1;
  ASSERT_EQ(occl_get_version(&v), OCCL_SUCCESS);
  EXPECT_EQ(v, OCCL_VERSION_CODE);
  EXPECT_EQ(OCCL_VERSION_CODE, OCCL_VERSION_MAJOR * 10000 + OCCL_VERSION_MINOR * 100 + OCCL_VERSION_PATCH);
  EXPECT_EQ(occl_get_version(nullptr), OCCL_ERR_INVALID_ARGUMENT);
  EXPECT_STRNE(occl_last_error(), "");
}

TEST(Api, InitCheck) {
  EXPECT_EQ(OCCL_INIT_CHECK(), OCCL_SUCCESS) << occl_last_error();
  EXPECT_EQ(occl_init_check(OCCL_ABI_VERSION + 1, OCCL_VERSION_CODE), OCCL_ERR_VERSION);
  std::string msg = occl_last_error();
  EXPECT_NE(msg.find(std::to_string(OCCL_VERSION_CODE)), std::string::npos) << msg;
  EXPECT_EQ(occl_init_check(OCCL_ABI_VERSION - 1, OCCL_VERSION_CODE), OCCL_ERR_VERSION);
  // A header newer than the library does not fit; an older one does.
  EXPECT_EQ(occl_init_check(OCCL_ABI_VERSION, OCCL_VERSION_CODE + 1), OCCL_ERR_VERSION);
  if (OCCL_VERSION_CODE > 0) {
    EXPECT_EQ(occl_init_check(OCCL_ABI_VERSION, OCCL_VERSION_CODE - 1), OCCL_SUCCESS);
  }
}

TEST(Api, StatusStrings) {
  const std::pair<occl_status_t, const char*> codes[] = {
      {OCCL_SUCCESS, "OCCL_SUCCESS"},
      {OCCL_ERR_INVALID_ARGUMENT, "OCCL_ERR_INVALID_ARGUMENT"},
      {OCCL_ERR_UNSUPPORTED, "OCCL_ERR_UNSUPPORTED"},
      {OCCL_ERR_TIMEOUT, "OCCL_ERR_TIMEOUT"},
      {OCCL_ERR_PEER_FAILURE, "OCCL_ERR_PEER_FAILURE"},
      {OCCL_ERR_MISMATCH, "OCCL_ERR_MISMATCH"},
      {OCCL_ERR_SYSTEM, "OCCL_ERR_SYSTEM"},
      {OCCL_ERR_INTERNAL, "OCCL_ERR_INTERNAL"},
      {OCCL_ERR_ABORTED, "OCCL_ERR_ABORTED"},
      {OCCL_ERR_IN_PROGRESS, "OCCL_ERR_IN_PROGRESS"},
      {OCCL_ERR_VERSION, "OCCL_ERR_VERSION"},
      {OCCL_ERR_OUT_OF_MEMORY, "OCCL_ERR_OUT_OF_MEMORY"},
      {OCCL_ERR_COMM_FAILED, "OCCL_ERR_COMM_FAILED"},
  };
  std::set<std::string> seen;
  for (const auto& [code, name] : codes) {
    const char* s = occl_status_string(code);
    ASSERT_NE(s, nullptr);
    std::string str = s;
    EXPECT_EQ(str.rfind(std::string(name) + ":", 0), 0u) << str;
    EXPECT_GT(str.size(), std::string(name).size() + 2) << "no description: " << str;
    seen.insert(str);
  }
  EXPECT_EQ(seen.size(), std::size(codes));
  // Fixed values, never renumbered.
  EXPECT_EQ(OCCL_ERR_TIMEOUT, 3);
  EXPECT_EQ(OCCL_ERR_COMM_FAILED, 12);
  EXPECT_STREQ(occl_status_string(static_cast<occl_status_t>(99)), "unknown status");
  EXPECT_STREQ(occl_status_string(static_cast<occl_status_t>(-1)), "unknown status");
  EXPECT_STREQ(occl_status_string(OCCL_ERR_TIMEOUT), "OCCL_ERR_TIMEOUT: a deadline passed");
}

TEST(Api, DestroyAndAbortAcceptNull) {
  EXPECT_EQ(occl_comm_destroy(nullptr), OCCL_SUCCESS);
  EXPECT_EQ(occl_comm_abort(nullptr), OCCL_SUCCESS);
  EXPECT_EQ(occl_work_free(nullptr), OCCL_SUCCESS);
  EXPECT_EQ(occl_work_wait(nullptr), OCCL_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(occl_work_test(nullptr), OCCL_ERR_INVALID_ARGUMENT);
  int r = 0;
  EXPECT_EQ(occl_comm_rank(nullptr, &r), OCCL_ERR_INVALID_ARGUMENT);
}

// ---------------------------------------------------------------------------
// Rendezvous methods and communicator queries

class Rendezvous : public ::testing::TestWithParam<std::string> {};

TEST_P(Rendezvous, CreatesWorkingCommunicator) {
  for (int n : {1, 3}) {
    JobOptions o = opts(n);
    o.init = GetParam();
    JobResult res = run_ranks(o, [](occl_comm_t comm, int rank, int nr) {
      int r = -1, s = -1;
      RANK_OK(occl_comm_rank(comm, &r), rank);
      RANK_OK(occl_comm_size(comm, &s), rank);
      RANK_CHECK(r == rank && s == nr, rank, cat("rank/size ", r, "/", s));
      return all_reduce_works(comm, rank, nr, 5);
    });
    EXPECT_TRUE(res.ok()) << "init=" << GetParam() << " nranks=" << n << res.summary();
  }
}

INSTANTIATE_TEST_SUITE_P(Api, Rendezvous, ::testing::Values("tcp", "file", "uid", "env"),
                         [](const auto& info) { return info.param; });

TEST(Api, RankSizeTransport) {
  struct Case {
    int n;
    std::string asked, want;
  };
  for (const Case& k : {Case{2, "auto", "shm"}, Case{4, "auto", "shm"}, Case{3, "shm", "shm"}, Case{2, "tcp", "tcp"},
                        Case{4, "tcp", "tcp"}, Case{1, "auto", ""}}) {
    JobResult res = run_ranks(opts(k.n, k.asked), [&](occl_comm_t comm, int rank, int n) {
      int r = -1, s = -1;
      const char* name = nullptr;
      RANK_OK(occl_comm_rank(comm, &r), rank);
      RANK_OK(occl_comm_size(comm, &s), rank);
      RANK_OK(occl_comm_transport(comm, &name), rank);
      RANK_CHECK(r == rank, rank, cat("occl_comm_rank gave ", r));
      RANK_CHECK(s == n, rank, cat("occl_comm_size gave ", s));
      RANK_CHECK(name != nullptr && *name != '\0', rank, "transport name is empty");
      if (!k.want.empty()) RANK_CHECK(k.want == name, rank, cat("transport '", name, "', want '", k.want, "'"));
      RANK_CHECK(occl_comm_rank(comm, nullptr) == OCCL_ERR_INVALID_ARGUMENT, rank, "rank(NULL)");
      RANK_CHECK(occl_comm_size(comm, nullptr) == OCCL_ERR_INVALID_ARGUMENT, rank, "size(NULL)");
      RANK_CHECK(occl_comm_transport(comm, nullptr) == OCCL_ERR_INVALID_ARGUMENT, rank, "transport(NULL)");
      RANK_CHECK(occl_comm_set_timeout(comm, 0) == OCCL_ERR_INVALID_ARGUMENT, rank, "set_timeout(0)");
      RANK_CHECK(occl_comm_set_timeout(comm, -5) == OCCL_ERR_INVALID_ARGUMENT, rank, "set_timeout(-5)");
      RANK_OK(occl_comm_set_timeout(comm, 90000), rank);
      return all_reduce_works(comm, rank, n, 5);
    });
    EXPECT_TRUE(res.ok()) << "nranks=" << k.n << " transport=" << k.asked << res.summary();
  }
}

// ---------------------------------------------------------------------------
// Split

/// Checks a communicator made by split: its size, this rank's place, and
/// that an all_reduce and an all_gather of old ranks give the member order.
int check_sub(occl_comm_t sub, int rank, const std::vector<int>& members, const char* what) {
  int r = -1, s = -1;
  RANK_OK(occl_comm_rank(sub, &r), rank);
  RANK_OK(occl_comm_size(sub, &s), rank);
  RANK_CHECK(s == int(members.size()), rank, cat(what, ": size ", s, ", want ", members.size()));
  RANK_CHECK(r >= 0 && r < s && members[r] == rank, rank, cat(what, ": new rank ", r, " is not this rank's place"));
  // Sum of old ranks + 1 over the members.
  int64_t v = rank + 1, want = 0;
  for (int m : members) want += m + 1;
  Tensor1D t(&v, 1, dl_int(64));
  RANK_OK(occl_all_reduce(&t, &t, OCCL_SUM, sub, nullptr), rank);
  RANK_CHECK(v == want, rank, cat(what, ": all_reduce gave ", v, ", want ", want));
  // Old ranks in new-rank order.
  int32_t mine = rank;
  std::vector<int32_t> all(members.size(), -1);
  Tensor1D st(&mine, 1, dl_int(32)), rt(all.data(), int64_t(all.size()), dl_int(32));
  RANK_OK(occl_all_gather(&st, &rt, sub, nullptr), rank);
  for (size_t i = 0; i < members.size(); ++i) {
    RANK_CHECK(all[i] == members[i], rank, cat(what, ": member ", i, " is old rank ", all[i], ", want ", members[i]));
  }
  return 0;
}

TEST(Api, SplitByParityReversedKeysNoColorAndSplitOfSplit) {
  for (const std::string transport : {"shm", "tcp"}) {
    for (int n : {5, 8}) {
      JobResult res = run_ranks(opts(n, transport), [&](occl_comm_t comm, int rank, int nr) {
        // The last rank opts out; the others split by parity, keys reversed.
        const bool out = rank == nr - 1;
        const int color = out ? OCCL_SPLIT_NOCOLOR : rank % 2;
        occl_comm_t sub = reinterpret_cast<occl_comm_t>(0x1);  // must be overwritten
        RANK_OK(occl_comm_split(comm, color, nr - rank, nullptr, &sub), rank);
        if (out) {
          RANK_CHECK(sub == nullptr, rank, "OCCL_SPLIT_NOCOLOR rank got a communicator");
        } else {
          RANK_CHECK(sub != nullptr, rank, "split gave NULL");
          std::vector<int> members;  // old ranks with our color, by descending old rank
          for (int p = nr - 2; p >= 0; --p) {
            if (p % 2 == color) members.push_back(p);
          }
          if (check_sub(sub, rank, members, "parity split") != 0) return 1;
          const char* tname = nullptr;
          RANK_OK(occl_comm_transport(sub, &tname), rank);
          if (members.size() > 1) {
            RANK_CHECK(transport == tname, rank, cat("sub-communicator transport ", tname, " (inherited config)"));
          }
          // Split of the split: halves by new rank, keys = new rank (ties
          // none), every member keeps a color.
          int sr = -1;
          RANK_OK(occl_comm_rank(sub, &sr), rank);
          const int half = int(members.size() + 1) / 2;
          occl_comm_t subsub = nullptr;
          RANK_OK(occl_comm_split(sub, sr < half ? 7 : 3, sr, nullptr, &subsub), rank);
          RANK_CHECK(subsub != nullptr, rank, "split of split gave NULL");
          std::vector<int> members2;
          for (size_t i = 0; i < members.size(); ++i) {
            if ((int(i) < half) == (sr < half)) members2.push_back(members[i]);
          }
          if (check_sub(subsub, rank, members2, "split of split") != 0) return 1;
          RANK_OK(occl_comm_destroy(subsub), rank);
          RANK_OK(occl_barrier(sub, nullptr), rank);
          RANK_OK(occl_comm_destroy(sub), rank);
        }
        // The parent still works, and a split with equal keys keeps old order
        // and a config can force another transport.
        if (all_reduce_works(comm, rank, nr, 5) != 0) return 1;
        occl_config_t cfg = OCCL_CONFIG_INIT;
        cfg.transport = "tcp";
        occl_comm_t all = nullptr;
        RANK_OK(occl_comm_split(comm, 0, 0, &cfg, &all), rank);
        RANK_CHECK(all != nullptr, rank, "split with one color gave NULL");
        std::vector<int> everyone;
        for (int p = 0; p < nr; ++p) everyone.push_back(p);
        if (check_sub(all, rank, everyone, "single-color split") != 0) return 1;
        const char* tname = nullptr;
        RANK_OK(occl_comm_transport(all, &tname), rank);
        RANK_CHECK(std::string(tname) == "tcp", rank, cat("split with config.transport=tcp gave ", tname));
        RANK_OK(occl_barrier(all, nullptr), rank);
        RANK_OK(occl_comm_destroy(all), rank);
        // Everyone opting out: everyone gets NULL.
        occl_comm_t none = reinterpret_cast<occl_comm_t>(0x1);
        RANK_OK(occl_comm_split(comm, OCCL_SPLIT_NOCOLOR, rank, nullptr, &none), rank);
        RANK_CHECK(none == nullptr, rank, "all-NOCOLOR split gave a communicator");
        RANK_OK(occl_barrier(comm, nullptr), rank);
        return 0;
      });
      EXPECT_TRUE(res.ok()) << "nranks=" << n << " transport=" << transport << res.summary();
    }
  }
}

// ---------------------------------------------------------------------------
// Async work handles

/// Polls until done; returns the first answer other than IN_PROGRESS.
occl_status_t poll_until_done(occl_work_t w) {
  occl_status_t s;
  while ((s = occl_work_test(w)) == OCCL_ERR_IN_PROGRESS) sched_yield();
  return s;
}

TEST(Api, AsyncOpsBackToBack) {
  for (const std::string transport : {"shm", "tcp"}) {
    for (int n : {3, 4}) {
      JobResult res = run_ranks(opts(n, transport), [](occl_comm_t comm, int rank, int nr) {
        // Rank 0 arrives late, so nothing the others issue can finish yet.
        if (rank == 0) std::this_thread::sleep_for(std::chrono::milliseconds(300));
        const int64_t k = 6;
        std::vector<int32_t> ar(k), bc(k), ag_in(k), ag_out(k * nr), rs_in(k * nr), rs_out(k), red_in(k),
            red_out(k, -1), a2a_in(k * nr), a2a_out(k * nr);
        for (int64_t i = 0; i < k; ++i) {
          ar[i] = rank * 100 + int32_t(i);
          bc[i] = rank == 1 ? 7000 + int32_t(i) : -1;
          ag_in[i] = rank * 10 + int32_t(i);
          red_in[i] = rank + int32_t(i);
        }
        for (int64_t i = 0; i < k * nr; ++i) {
          rs_in[i] = rank + int32_t(i);
          a2a_in[i] = rank * 1000 + int32_t(i);
        }
        Tensor1D t_ar(ar.data(), k, dl_int(32)), t_bc(bc.data(), k, dl_int(32)), t_agi(ag_in.data(), k, dl_int(32)),
            t_ago(ag_out.data(), k * nr, dl_int(32)), t_rsi(rs_in.data(), k * nr, dl_int(32)),
            t_rso(rs_out.data(), k, dl_int(32)), t_redi(red_in.data(), k, dl_int(32)),
            t_redo(red_out.data(), k, dl_int(32)), t_a2ai(a2a_in.data(), k * nr, dl_int(32)),
            t_a2ao(a2a_out.data(), k * nr, dl_int(32));
        std::vector<occl_work_t> w(7, nullptr);
        RANK_OK(occl_all_reduce(&t_ar, &t_ar, OCCL_SUM, comm, &w[0]), rank);
        RANK_CHECK(w[0] != nullptr, rank, "no work handle");
        if (rank != 0) {
          RANK_CHECK(occl_work_test(w[0]) == OCCL_ERR_IN_PROGRESS, rank,
                     "all_reduce reported done before rank 0 joined");
        }
        RANK_OK(occl_broadcast(&t_bc, 1, comm, &w[1]), rank);
        RANK_OK(occl_all_gather(&t_agi, &t_ago, comm, &w[2]), rank);
        RANK_OK(occl_reduce_scatter(&t_rsi, &t_rso, OCCL_MAX, comm, &w[3]), rank);
        RANK_OK(occl_reduce(&t_redi, &t_redo, OCCL_SUM, nr - 1, comm, &w[4]), rank);
        RANK_OK(occl_barrier(comm, &w[5]), rank);
        RANK_OK(occl_all_to_all(&t_a2ai, &t_a2ao, comm, &w[6]), rank);
        for (occl_work_t x : w) RANK_CHECK(x != nullptr, rank, "no work handle");
        // Poll the last one to completion, then wait on all in reverse order.
        occl_status_t s = poll_until_done(w[6]);
        RANK_CHECK(s == OCCL_SUCCESS, rank, cat("all_to_all work: ", occl_status_string(s), ": ", occl_last_error()));
        for (int i = 6; i >= 0; --i) {
          RANK_OK(occl_work_wait(w[i]), rank);
          RANK_OK(occl_work_test(w[i]), rank);  // finished handles answer success
        }
        for (occl_work_t x : w) RANK_OK(occl_work_free(x), rank);
        // Results.
        for (int64_t i = 0; i < k; ++i) {
          RANK_CHECK(ar[i] == 100 * nr * (nr - 1) / 2 + nr * int32_t(i), rank, cat("all_reduce[", i, "] = ", ar[i]));
          RANK_CHECK(bc[i] == 7000 + int32_t(i), rank, cat("broadcast[", i, "] = ", bc[i]));
          RANK_CHECK(rs_out[i] == (nr - 1) + rank * int32_t(k) + int32_t(i), rank, cat("reduce_scatter[", i, "]"));
          if (rank == nr - 1) {
            RANK_CHECK(red_out[i] == nr * (nr - 1) / 2 + nr * int32_t(i), rank, cat("reduce[", i, "] = ", red_out[i]));
          }
        }
        for (int r = 0; r < nr; ++r) {
          for (int64_t i = 0; i < k; ++i) {
            RANK_CHECK(ag_out[r * k + i] == r * 10 + int32_t(i), rank, cat("all_gather block ", r));
            RANK_CHECK(a2a_out[r * k + i] == r * 1000 + rank * int32_t(k) + int32_t(i), rank,
                       cat("all_to_all part ", r));
          }
        }
        // A blocking call after async ones runs after them, in order.
        std::vector<occl_work_t> more(3, nullptr);
        std::vector<int64_t> x(3, rank + 1), y(3, rank + 1), z(3, rank + 1);
        Tensor1D tx(x.data(), 3, dl_int(64)), ty(y.data(), 3, dl_int(64)), tz(z.data(), 3, dl_int(64));
        RANK_OK(occl_all_reduce(&tx, &tx, OCCL_SUM, comm, &more[0]), rank);
        RANK_OK(occl_all_reduce(&ty, &ty, OCCL_PROD, comm, &more[1]), rank);
        // Freed at once: keeps running, no longer waitable.
        RANK_OK(occl_all_reduce(&tz, &tz, OCCL_MAX, comm, &more[2]), rank);
        RANK_OK(occl_work_free(more[2]), rank);
        int64_t b = rank + 1;
        Tensor1D tb(&b, 1, dl_int(64));
        RANK_OK(occl_all_reduce(&tb, &tb, OCCL_MIN, comm, nullptr), rank);
        int64_t fact = 1;
        for (int r = 1; r <= nr; ++r) fact *= r;
        for (int i = 0; i < 3; ++i) {
          RANK_CHECK(x[i] == int64_t(nr) * (nr + 1) / 2, rank, cat("async SUM before a blocking call: ", x[i]));
          RANK_CHECK(y[i] == fact, rank, cat("async PROD before a blocking call: ", y[i]));
          RANK_CHECK(z[i] == nr, rank, cat("freed async MAX: ", z[i]));
        }
        RANK_CHECK(b == 1, rank, cat("blocking MIN: ", b));
        RANK_OK(occl_work_wait(more[0]), rank);
        RANK_OK(occl_work_wait(more[1]), rank);
        RANK_OK(occl_work_free(more[0]), rank);
        RANK_OK(occl_work_free(more[1]), rank);
        return 0;
      });
      EXPECT_TRUE(res.ok()) << "nranks=" << n << " transport=" << transport << res.summary();
    }
  }
}

TEST(Api, WorkHandlesWaitedFromAnotherThread) {
  JobResult res = run_ranks(opts(3), [](occl_comm_t comm, int rank, int n) {
    std::vector<int64_t> a(100, rank), b(100, rank);
    Tensor1D ta(a.data(), 100, dl_int(64)), tb(b.data(), 100, dl_int(64));
    occl_work_t wa = nullptr, wb = nullptr;
    RANK_OK(occl_all_reduce(&ta, &ta, OCCL_SUM, comm, &wa), rank);
    RANK_OK(occl_all_reduce(&tb, &tb, OCCL_MAX, comm, &wb), rank);
    occl_status_t sa = OCCL_ERR_INTERNAL, sb = OCCL_ERR_INTERNAL;
    std::thread waiter([&] { sa = occl_work_wait(wa); });
    std::thread tester([&] { sb = poll_until_done(wb); });
    waiter.join();
    tester.join();
    RANK_CHECK(sa == OCCL_SUCCESS && sb == OCCL_SUCCESS, rank,
               cat("waited from other threads: ", occl_status_string(sa), ", ", occl_status_string(sb)));
    RANK_OK(occl_work_free(wa), rank);
    RANK_OK(occl_work_free(wb), rank);
    for (int i = 0; i < 100; ++i) {
      RANK_CHECK(a[i] == n * (n - 1) / 2 && b[i] == n - 1, rank, cat("element ", i, ": ", a[i], ", ", b[i]));
    }
    return 0;
  });
  EXPECT_TRUE(res.ok()) << res.summary();
}

/// Shared flag between the ranks of one job (mapped before fork).
struct SharedFlag {
  std::atomic<int> value;
};
SharedFlag* map_flag() {
  void* p = ::mmap(nullptr, 4096, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  return p == MAP_FAILED ? nullptr : new (p) SharedFlag{};
}

TEST(Api, DestroyCompletesPendingWorkWithAborted) {
  SharedFlag* flag = map_flag();
  ASSERT_NE(flag, nullptr);
  JobOptions o = opts(2);
  o.create_comm = false;
  JobResult res = run_ranks(o, [flag](occl_comm_t, int rank, int) {
    const char* init = std::getenv("OCCL_TEST_INIT");
    RANK_CHECK(init != nullptr, rank, "OCCL_TEST_INIT is not set");
    occl_config_t cfg = OCCL_CONFIG_INIT;
    cfg.timeout_ms = 120000;
    occl_comm_t comm = nullptr;
    // Rank and size from RANK / WORLD_SIZE.
    RANK_OK(occl_comm_init(&comm, init, OCCL_FROM_ENV, OCCL_FROM_ENV, &cfg), rank);
    int r = -1, s = -1;
    RANK_OK(occl_comm_rank(comm, &r), rank);
    RANK_OK(occl_comm_size(comm, &s), rank);
    RANK_CHECK(r == rank && s == 2, rank, cat("rank/size from the environment: ", r, "/", s));
    RANK_OK(occl_barrier(comm, nullptr), rank);
    if (rank == 0) {
      int32_t v = 0;
      Tensor1D t(&v, 1, dl_int(32));
      occl_work_t recv = nullptr, bar = nullptr;
      RANK_OK(occl_recv(&t, 1, comm, &recv), rank);  // rank 1 never sends
      RANK_OK(occl_barrier(comm, &bar), rank);       // queued behind it
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
      RANK_CHECK(occl_work_test(recv) == OCCL_ERR_IN_PROGRESS, rank, "recv finished without a send");
      RANK_OK(occl_comm_destroy(comm), rank);
      occl_status_t s1 = occl_work_wait(recv), s2 = occl_work_wait(bar);
      flag->value.store(1);
      RANK_CHECK(s1 == OCCL_ERR_ABORTED, rank, cat("pending recv after destroy: ", occl_status_string(s1)));
      RANK_CHECK(s2 == OCCL_ERR_ABORTED, rank, cat("queued barrier after destroy: ", occl_status_string(s2)));
      RANK_OK(occl_work_free(recv), rank);
      RANK_OK(occl_work_free(bar), rank);
      return 0;
    }
    // Rank 1 stays until rank 0 has checked its handles.
    for (int i = 0; i < 60000 && flag->value.load() == 0; ++i)
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    RANK_CHECK(flag->value.load() == 1, rank, "rank 0 never finished");
    RANK_OK(occl_comm_destroy(comm), rank);
    return 0;
  });
  ::munmap(flag, 4096);
  EXPECT_TRUE(res.ok()) << res.summary();
}

TEST(Api, WorkWaitForWaitsInSlices) {
  SharedFlag* flag = map_flag();
  ASSERT_NE(flag, nullptr);
  JobResult res = run_ranks(opts(2), [flag](occl_comm_t comm, int rank, int) {
    int32_t v = rank == 1 ? 42 : 0;
    Tensor1D t(&v, 1, dl_int(32));
    if (rank == 1) {
      // Send only after rank 0 has seen its wait time out once.
      for (int i = 0; i < 20000 && flag->value.load() == 0; ++i)
        std::this_thread::sleep_for(std::chrono::milliseconds(1));
      RANK_CHECK(flag->value.load() == 1, rank, "rank 0 never reported its first slice");
      RANK_OK(occl_send(&t, 0, comm, nullptr), rank);
      return 0;
    }
    occl_work_t w = nullptr;
    RANK_OK(occl_recv(&t, 1, comm, &w), rank);
    RANK_CHECK(occl_work_wait_for(w, -1) == OCCL_ERR_INVALID_ARGUMENT, rank, "negative timeout accepted");
    auto t0 = std::chrono::steady_clock::now();
    occl_status_t s = occl_work_wait_for(w, 100);
    double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
    RANK_CHECK(s == OCCL_ERR_IN_PROGRESS, rank, cat("first slice: ", occl_status_string(s)));
    RANK_CHECK(ms >= 90 && ms < 5000, rank, cat("first slice took ", ms, " ms"));
    flag->value.store(1);
    s = occl_work_wait_for(w, 20000);
    RANK_CHECK(s == OCCL_SUCCESS, rank, cat("second slice: ", occl_status_string(s), ": ", occl_last_error()));
    RANK_CHECK(v == 42, rank, cat("received ", v));
    RANK_OK(occl_work_free(w), rank);
    return 0;
  });
  ::munmap(flag, 4096);
  EXPECT_TRUE(res.ok()) << res.summary();
}

// ---------------------------------------------------------------------------
// send / recv

TEST(Api, SendRecvRingSmallMessages) {
  for (const std::string transport : {"shm", "tcp"}) {
    for (int n : {2, 3, 5}) {
      JobResult res = run_ranks(opts(n, transport), [](occl_comm_t comm, int rank, int nr) {
        const int right = (rank + 1) % nr, left = (rank + nr - 1) % nr;
        uint64_t cs = 0;
        // Several messages in a row to the same peer arrive in order.
        for (int round = 0; round < 2; ++round) {
          const size_t sizes[] = {0, 1, 13, 1000};
          std::vector<Buf> out, in;
          for (size_t sz : sizes) {
            out.emplace_back(DT::kI32, sz);
            in.emplace_back(DT::kI32, sz);
            fill_pattern(DT::kI32, out.back().data(), sz, 0, rank, cs + sz);
          }
          auto sends = [&]() -> int {
            for (size_t i = 0; i < out.size(); ++i) {
              Tensor1D t(out[i].data(), int64_t(out[i].count), dl_int(32));
              RANK_OK(occl_send(&t, right, comm, nullptr), rank);
            }
            return 0;
          };
          auto recvs = [&]() -> int {
            for (size_t i = 0; i < in.size(); ++i) {
              Tensor1D t(in[i].data(), int64_t(in[i].count), dl_int(32));
              RANK_OK(occl_recv(&t, left, comm, nullptr), rank);
            }
            return 0;
          };
          if (round == 0) {
            // Blocking: even ranks send first, odd ranks receive first.
            if (rank % 2 == 0 ? (sends() || recvs()) : (recvs() || sends())) return 1;
          } else {
            // Async: everyone issues its sends then its receives, then waits.
            std::vector<occl_work_t> ws;
            std::vector<std::unique_ptr<Tensor1D>> ts;
            for (size_t i = 0; i < out.size(); ++i) {
              ts.push_back(std::make_unique<Tensor1D>(out[i].data(), int64_t(out[i].count), dl_int(32)));
              occl_work_t w = nullptr;
              RANK_OK(occl_send(&*ts.back(), right, comm, &w), rank);
              ws.push_back(w);
            }
            for (size_t i = 0; i < in.size(); ++i) {
              ts.push_back(std::make_unique<Tensor1D>(in[i].data(), int64_t(in[i].count), dl_int(32)));
              occl_work_t w = nullptr;
              RANK_OK(occl_recv(&*ts.back(), left, comm, &w), rank);
              ws.push_back(w);
            }
            for (occl_work_t w : ws) {
              RANK_OK(occl_work_wait(w), rank);
              RANK_OK(occl_work_free(w), rank);
            }
          }
          for (size_t i = 0; i < in.size(); ++i) {
            std::string err = check_pattern(DT::kI32, in[i].data(), in[i].count, 0, left, cs + sizes[i]);
            RANK_CHECK(err.empty(), rank, cat("round ", round, " message ", i, ": ", err));
            err = check_pattern(DT::kI32, out[i].data(), out[i].count, 0, rank, cs + sizes[i]);
            RANK_CHECK(err.empty(), rank, cat("round ", round, " sendbuf ", i, " changed: ", err));
          }
          cs += 10000;
        }
        // Out-of-range peers are errors; a send to self is matched by a
        // receive from self (p2p_test.cc covers it in detail).
        int32_t v = rank + 7, back = 0;
        Tensor1D t(&v, 1, dl_int(32)), tb(&back, 1, dl_int(32));
        RANK_OK(occl_send(&t, rank, comm, nullptr), rank);
        RANK_OK(occl_recv(&tb, rank, comm, nullptr), rank);
        RANK_CHECK(back == rank + 7, rank, cat("recv from self got ", back));
        RANK_CHECK(occl_recv(&t, nr, comm, nullptr) == OCCL_ERR_INVALID_ARGUMENT, rank, "recv from rank n");
        RANK_CHECK(occl_send(&t, -1, comm, nullptr) == OCCL_ERR_INVALID_ARGUMENT, rank, "send to rank -1");
        RANK_OK(occl_barrier(comm, nullptr), rank);
        return 0;
      });
      EXPECT_TRUE(res.ok()) << "nranks=" << n << " transport=" << transport << res.summary();
    }
  }
}

// Point-to-point operations issued one after another progress together:
// isend(big) then a blocking recv on both sides of every pair completes for
// messages far larger than the transport's buffers (MPI / torch semantics).
class P2PConcurrency : public ::testing::TestWithParam<const char*> {};

TEST_P(P2PConcurrency, IsendThenBlockingRecvAndIrecvThenBlockingSend) {
  JobOptions o = opts(3);
  o.transport = GetParam();
  JobResult res = run_ranks(o, [](occl_comm_t comm, int rank, int n) {
    const int64_t count = 2 << 20;  // 8 MiB of int32
    const int right = (rank + 1) % n, left = (rank - 1 + n) % n;
    std::vector<int32_t> out(count), in(count, -1);
    for (int64_t i = 0; i < count; ++i) out[i] = static_cast<int32_t>(rank * 1000003 + i);
    Tensor1D to(out.data(), count, dl_int(32)), ti(in.data(), count, dl_int(32));
    // Pattern 1: isend to the right, then a blocking recv from the left.
    occl_work_t w = nullptr;
    RANK_OK(occl_send(&to, right, comm, &w), rank);
    RANK_OK(occl_recv(&ti, left, comm, nullptr), rank);
    RANK_OK(occl_work_wait(w), rank);
    RANK_OK(occl_work_free(w), rank);
    int64_t bad1 = -1;
    for (int64_t i = 0; i < count && bad1 < 0; ++i) {
      if (in[i] != static_cast<int32_t>(left * 1000003 + i)) bad1 = i;
    }
    RANK_CHECK(bad1 < 0, rank, cat("pattern 1: wrong element ", bad1));
    // Pattern 2: irecv from the left, then a blocking send to the right.
    std::fill(in.begin(), in.end(), -1);
    RANK_OK(occl_recv(&ti, left, comm, &w), rank);
    RANK_OK(occl_send(&to, right, comm, nullptr), rank);
    RANK_OK(occl_work_wait(w), rank);
    RANK_OK(occl_work_free(w), rank);
    int64_t bad2 = -1;
    for (int64_t i = 0; i < count && bad2 < 0; ++i) {
      if (in[i] != static_cast<int32_t>(left * 1000003 + i)) bad2 = i;
    }
    RANK_CHECK(bad2 < 0, rank, cat("pattern 2: wrong element ", bad2));
    // A collective after the batch still lines up.
    RANK_OK(occl_barrier(comm, nullptr), rank);
    return 0;
  });
  EXPECT_TRUE(res.ok()) << res.summary();
}

INSTANTIATE_TEST_SUITE_P(Transports, P2PConcurrency, ::testing::Values("shm", "tcp"),
                         [](const ::testing::TestParamInfo<const char*>& p) { return std::string(p.param); });

TEST(Api, SendRecvLarge) {
  for (const std::string transport : {"shm", "tcp"}) {
    JobResult res = run_ranks(opts(2, transport), [](occl_comm_t comm, int rank, int) {
      const size_t bytes = (size_t(8) << 20) + 3;    // 8 MiB + 3, uint8
      const size_t doubles = (size_t(1) << 20) + 1;  // 8 MiB + 8, float64
      Buf a(DT::kU8, bytes), b(DT::kF64, doubles);
      Tensor1D ta(a.data(), int64_t(bytes), dl_uint(8)), tb(b.data(), int64_t(doubles), dl_float(64));
      // 0 -> 1 blocking.
      if (rank == 0) {
        fill_pattern(DT::kU8, a.data(), bytes, 0, 0, 1);
        RANK_OK(occl_send(&ta, 1, comm, nullptr), rank);
        std::string err = check_pattern(DT::kU8, a.data(), bytes, 0, 0, 1);
        RANK_CHECK(err.empty(), rank, "sendbuf changed: " + err);
      } else {
        RANK_OK(occl_recv(&ta, 0, comm, nullptr), rank);
        std::string err = check_pattern(DT::kU8, a.data(), bytes, 0, 0, 1);
        RANK_CHECK(err.empty(), rank, "8 MiB message 0 -> 1: " + err);
      }
      // 1 -> 0 async, the receiver polling with occl_work_test.
      occl_work_t w = nullptr;
      if (rank == 1) {
        fill_pattern(DT::kF64, b.data(), doubles, 0, 1, 2);
        RANK_OK(occl_send(&tb, 0, comm, &w), rank);
        RANK_OK(occl_work_wait(w), rank);
      } else {
        RANK_OK(occl_recv(&tb, 1, comm, &w), rank);
        occl_status_t s;
        while ((s = occl_work_test(w)) == OCCL_ERR_IN_PROGRESS) sched_yield();
        RANK_CHECK(s == OCCL_SUCCESS, rank, cat("large async recv: ", occl_status_string(s), ": ", occl_last_error()));
        std::string err = check_pattern(DT::kF64, b.data(), doubles, 0, 1, 2);
        RANK_CHECK(err.empty(), rank, "8 MiB message 1 -> 0: " + err);
      }
      RANK_OK(occl_work_free(w), rank);
      RANK_OK(occl_barrier(comm, nullptr), rank);
      return 0;
    });
    EXPECT_TRUE(res.ok()) << "transport=" << transport << res.summary();
  }
}

// ---------------------------------------------------------------------------
// PREMUL_SUM ops

TEST(Api, PremulOpCreateUseDestroy) {
  JobResult res = run_ranks(opts(3), [](occl_comm_t comm, int rank, int n) {
    occl_red_op_t two = OCCL_SUM, half = OCCL_SUM;
    RANK_OK(occl_red_op_create_premul_sum(comm, 2.0, &two), rank);
    RANK_OK(occl_red_op_create_premul_sum(comm, 0.5, &half), rank);
    RANK_CHECK(two >= OCCL_RED_OP_CUSTOM_BASE && half >= OCCL_RED_OP_CUSTOM_BASE && two != half, rank,
               cat("created ops ", int(two), ", ", int(half)));
    RANK_CHECK(occl_red_op_create_premul_sum(comm, 2.0, nullptr) == OCCL_ERR_INVALID_ARGUMENT, rank,
               "create with NULL op");
    const int32_t sum_ranks = n * (n - 1) / 2;
    // int32 x 2
    int32_t iv[4];
    for (int i = 0; i < 4; ++i) iv[i] = rank + i;
    Tensor1D ti(iv, 4, dl_int(32));
    RANK_OK(occl_all_reduce(&ti, &ti, two, comm, nullptr), rank);
    for (int i = 0; i < 4; ++i) RANK_CHECK(iv[i] == 2 * (sum_ranks + n * i), rank, cat("PREMUL(2) int32: ", iv[i]));
    // float32 x 0.5, and the plain OCCL_PREMUL_SUM (scalar 1)
    float fv[4], gv[4];
    for (int i = 0; i < 4; ++i) fv[i] = gv[i] = float(rank + i);
    Tensor1D tf(fv, 4, dl_float(32)), tg(gv, 4, dl_float(32));
    RANK_OK(occl_all_reduce(&tf, &tf, half, comm, nullptr), rank);
    RANK_OK(occl_all_reduce(&tg, &tg, OCCL_PREMUL_SUM, comm, nullptr), rank);
    for (int i = 0; i < 4; ++i) {
      RANK_CHECK(fv[i] == 0.5f * float(sum_ranks + n * i), rank, cat("PREMUL(0.5) float32: ", fv[i]));
      RANK_CHECK(gv[i] == float(sum_ranks + n * i), rank, cat("OCCL_PREMUL_SUM float32: ", gv[i]));
    }
    // A non-integral scalar with an integer dtype is an error on every rank.
    RANK_CHECK(occl_all_reduce(&ti, &ti, half, comm, nullptr) == OCCL_ERR_INVALID_ARGUMENT, rank,
               "PREMUL(0.5) on int32 was accepted");
    // Destroy; then use, destroy again, destroy a built-in: errors.
    RANK_OK(occl_red_op_destroy(comm, two), rank);
    occl_status_t s = occl_all_reduce(&ti, &ti, two, comm, nullptr);
    RANK_CHECK(s == OCCL_ERR_INVALID_ARGUMENT, rank, cat("all_reduce with a destroyed op: ", occl_status_string(s)));
    RANK_CHECK(std::string(occl_last_error()).find(std::to_string(int(two))) != std::string::npos, rank,
               cat("message does not name the op: ", occl_last_error()));
    s = occl_reduce(&ti, &ti, two, 0, comm, nullptr);
    RANK_CHECK(s == OCCL_ERR_INVALID_ARGUMENT, rank, cat("reduce with a destroyed op: ", occl_status_string(s)));
    RANK_CHECK(occl_red_op_destroy(comm, two) != OCCL_SUCCESS, rank, "destroying twice succeeded");
    RANK_CHECK(occl_red_op_destroy(comm, OCCL_SUM) != OCCL_SUCCESS, rank, "destroying OCCL_SUM succeeded");
    RANK_CHECK(occl_red_op_destroy(nullptr, half) != OCCL_SUCCESS, rank, "destroy with NULL comm succeeded");
    // The other op and the communicator still work.
    for (int i = 0; i < 4; ++i) fv[i] = float(rank + i);
    RANK_OK(occl_all_reduce(&tf, &tf, half, comm, nullptr), rank);
    for (int i = 0; i < 4; ++i) RANK_CHECK(fv[i] == 0.5f * float(sum_ranks + n * i), rank, "PREMUL(0.5) again");
    RANK_OK(occl_red_op_destroy(comm, half), rank);
    return all_reduce_works(comm, rank, n, 5);
  });
  EXPECT_TRUE(res.ok()) << res.summary();
}

// ---------------------------------------------------------------------------
// fp8 through DLPack (kDLFloat8_e4m3fn = 10, kDLFloat8_e5m2 = 12). Inputs are
// exact, and so is every partial sum, so the results do not depend on the
// order in which an algorithm adds; expected bits worked out by hand.

TEST(Api, Fp8AllReduceThroughDlpack) {
  JobResult res = run_ranks(opts(3), [](occl_comm_t comm, int rank, int n) {
    const DLDataType e4m3 = {kDLFloat8_e4m3fn, 8, 1}, e5m2 = {kDLFloat8_e5m2, 8, 1};
    // Ranks 0, 1, 2 give 1.0, 2.0, 0.5.
    const uint8_t e4m3_in[3] = {0x38, 0x40, 0x30}, e5m2_in[3] = {0x3c, 0x40, 0x38};
    struct Case {
      DLDataType dt;
      occl_red_op_t op;
      uint8_t in, want;
      const char* what;
    };
    const Case cases[] = {
        {e4m3, OCCL_SUM, e4m3_in[rank], 0x46, "e4m3fn SUM = 3.5 (0 1000 110)"},
        {e4m3, OCCL_MAX, e4m3_in[rank], 0x40, "e4m3fn MAX = 2"},
        {e4m3, OCCL_MIN, e4m3_in[rank], 0x30, "e4m3fn MIN = 0.5"},
        {e4m3, OCCL_AVG, e4m3_in[rank], 0x39, "e4m3fn AVG = 3.5/3 = 1.1667 -> 1.125"},
        {e4m3, OCCL_SUM, 0x7e, 0x7f, "e4m3fn 448 * 3 overflows to NaN (0x7f)"},
        {e5m2, OCCL_SUM, e5m2_in[rank], 0x43, "e5m2 SUM = 3.5 (0 10000 11)"},
        {e5m2, OCCL_PROD, e5m2_in[rank], 0x3c, "e5m2 PROD = 1"},
        {e5m2, OCCL_SUM, 0x7b, 0x7c, "e5m2 57344 * 3 overflows to Inf (0x7c)"},
    };
    for (const Case& c : cases) {
      uint8_t buf[5];
      for (uint8_t& b : buf) b = c.in;
      Tensor1D t(buf, 5, c.dt);
      RANK_OK(occl_all_reduce(&t, &t, c.op, comm, nullptr), rank);
      for (uint8_t b : buf) RANK_CHECK(b == c.want, rank, cat(c.what, ": got ", int(b)));
    }
    // Bitwise ops are undefined on fp8.
    uint8_t x = 0x38;
    Tensor1D tx(&x, 1, e4m3);
    occl_status_t s = occl_all_reduce(&tx, &tx, OCCL_BXOR, comm, nullptr);
    RANK_CHECK(s == OCCL_ERR_INVALID_ARGUMENT, rank, cat("BXOR on fp8: ", occl_status_string(s)));
    RANK_CHECK(std::string(occl_last_error()).find("float8_e4m3fn") != std::string::npos, rank,
               cat("message does not name the dtype: ", occl_last_error()));
    return all_reduce_works(comm, rank, n, 5);
  });
  EXPECT_TRUE(res.ok()) << res.summary();
}

// ---------------------------------------------------------------------------
// DLPack layouts

TEST(Api, EmptyTensorsMayHaveNullData) {
  JobResult res = run_ranks(opts(3), [](occl_comm_t comm, int rank, int n) {
    DLTensor t{};
    int64_t zero = 0, parts = 0;
    t.data = nullptr;
    t.device = {kDLCPU, 0};
    t.ndim = 1;
    t.dtype = dl_float(32);
    t.shape = &zero;
    DLTensor all = t;
    all.shape = &parts;
    RANK_OK(occl_all_reduce(&t, &t, OCCL_SUM, comm, nullptr), rank);
    RANK_OK(occl_broadcast(&t, n - 1, comm, nullptr), rank);
    RANK_OK(occl_all_gather(&t, &all, comm, nullptr), rank);
    RANK_OK(occl_reduce_scatter(&all, &t, OCCL_MAX, comm, nullptr), rank);
    RANK_OK(occl_reduce(&t, &t, OCCL_SUM, 0, comm, nullptr), rank);
    RANK_OK(occl_all_to_all(&t, &all, comm, nullptr), rank);
    const int right = (rank + 1) % n, left = (rank + n - 1) % n;
    if (rank % 2 == 0) {
      RANK_OK(occl_send(&t, right, comm, nullptr), rank);
      RANK_OK(occl_recv(&t, left, comm, nullptr), rank);
    } else {
      RANK_OK(occl_recv(&t, left, comm, nullptr), rank);
      RANK_OK(occl_send(&t, right, comm, nullptr), rank);
    }
    // A NULL data pointer with elements is an error on every rank.
    int64_t one = 1;
    DLTensor bad = t;
    bad.shape = &one;
    RANK_CHECK(occl_all_reduce(&bad, &bad, OCCL_SUM, comm, nullptr) == OCCL_ERR_INVALID_ARGUMENT, rank,
               "NULL data with one element was accepted");
    return all_reduce_works(comm, rank, n, 5);
  });
  EXPECT_TRUE(res.ok()) << res.summary();
}

TEST(Api, DlpackShapesStridesByteOffset) {
  JobResult res = run_ranks(opts(2), [](occl_comm_t comm, int rank, int n) {
    // 2-D {3, 5}, NULL strides and explicit compact strides.
    int64_t shape[2] = {3, 5}, compact[2] = {5, 1}, transposed[2] = {1, 3};
    for (int variant = 0; variant < 2; ++variant) {
      std::vector<int32_t> v(15);
      for (int i = 0; i < 15; ++i) v[i] = rank * 100 + i;
      DLTensor t{};
      t.data = v.data();
      t.device = {kDLCPU, 0};
      t.ndim = 2;
      t.dtype = dl_int(32);
      t.shape = shape;
      t.strides = variant == 0 ? nullptr : compact;
      RANK_OK(occl_all_reduce(&t, &t, OCCL_SUM, comm, nullptr), rank);
      for (int i = 0; i < 15; ++i) RANK_CHECK(v[i] == 100 * (n - 1) * n / 2 + n * i, rank, cat("2-D element ", i));
    }
    // byte_offset: the tensor starts 16 bytes into the allocation; the bytes
    // before and after stay untouched.
    {
      std::vector<int64_t> raw(2 + 4 + 2, -7);
      for (int i = 0; i < 4; ++i) raw[2 + i] = rank + i;
      DLTensor t{};
      t.data = raw.data();
      t.byte_offset = 16;
      t.device = {kDLCPU, 0};
      t.ndim = 1;
      t.dtype = dl_int(64);
      int64_t len = 4;
      t.shape = &len;
      RANK_OK(occl_all_reduce(&t, &t, OCCL_SUM, comm, nullptr), rank);
      for (int i = 0; i < 4; ++i)
        RANK_CHECK(raw[2 + i] == n * (n - 1) / 2 + n * i, rank, cat("byte_offset element ", i));
      for (int i : {0, 1, 6, 7})
        RANK_CHECK(raw[i] == -7, rank, cat("byte_offset: element ", i, " outside was written"));
    }
    // 0-d tensor: one element.
    {
      double x = rank + 0.5;
      DLTensor t{};
      t.data = &x;
      t.device = {kDLCPU, 0};
      t.ndim = 0;
      t.dtype = dl_float(64);
      RANK_OK(occl_all_reduce(&t, &t, OCCL_SUM, comm, nullptr), rank);
      RANK_CHECK(x == n * (n - 1) / 2.0 + 0.5 * n, rank, cat("0-d all_reduce: ", x));
    }
    // Non-contiguous strides are rejected on every rank before anything is sent.
    {
      std::vector<int32_t> v(15, rank);
      DLTensor t{};
      t.data = v.data();
      t.device = {kDLCPU, 0};
      t.ndim = 2;
      t.dtype = dl_int(32);
      t.shape = shape;
      t.strides = transposed;
      occl_status_t s = occl_all_reduce(&t, &t, OCCL_SUM, comm, nullptr);
      RANK_CHECK(s == OCCL_ERR_INVALID_ARGUMENT, rank, cat("non-contiguous tensor: ", occl_status_string(s)));
      for (int i = 0; i < 15; ++i) RANK_CHECK(v[i] == rank, rank, "rejected tensor was modified");
    }
    return all_reduce_works(comm, rank, n, 5);
  });
  EXPECT_TRUE(res.ok()) << res.summary();
}

// ---------------------------------------------------------------------------
// Single copy on shared memory (process_vm_readv), seen through the link's
// INFO log lines: it must be taken where the OS allows it, and everything
// must still arrive when the start-up probe fails.

/// Runs fn with this process's stderr going to a file; returns the file.
std::string capture_stderr(int rank, const std::function<int()>& fn, int* rc) {
  char path[] = "/tmp/omniccl-stderr-XXXXXX";
  int fd = ::mkstemp(path);
  if (fd < 0) {
    *rc = 1;
    return {};
  }
  ::fflush(stderr);
  int saved = ::dup(2);
  ::dup2(fd, 2);
  *rc = fn();
  ::fflush(stderr);
  ::dup2(saved, 2);
  ::close(saved);
  ::close(fd);
  std::ifstream in(path);
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  ::unlink(path);
  if (*rc != 0) std::fprintf(stderr, "rank %d stderr:\n%s", rank, text.c_str());
  return text;
}

/// Three all_gathers of `per_rank` floats per rank and one all_reduce of the
/// same size, results checked; returns 0 on success.
/// In a rank: a communicator over shared memory from OCCL_TEST_INIT (rank
/// and size from the environment), with a 120 s timeout.
occl_status_t init_shm_comm(occl_comm_t* comm) {
  const char* init = std::getenv("OCCL_TEST_INIT");
  if (init == nullptr) {
    std::fprintf(stderr, "OCCL_TEST_INIT is not set\n");
    return OCCL_ERR_INVALID_ARGUMENT;
  }
  occl_config_t cfg = OCCL_CONFIG_INIT;
  cfg.timeout_ms = 120000;
  cfg.transport = "shm";
  return occl_comm_init(comm, init, OCCL_FROM_ENV, OCCL_FROM_ENV, &cfg);
}

int gather_and_reduce(int rank, size_t per_rank) {
  occl_comm_t comm = nullptr;
  RANK_OK(init_shm_comm(&comm), rank);
  Buf send(DT::kF32, per_rank), recv(DT::kF32, 2 * per_rank), sum(DT::kF32, per_rank);
  Tensor1D ts(send.data(), int64_t(per_rank), dl_float(32)), tr(recv.data(), int64_t(2 * per_rank), dl_float(32));
  Tensor1D tsum(sum.data(), int64_t(per_rank), dl_float(32));
  for (int round = 0; round < 3; ++round) {
    fill_pattern(DT::kF32, send.data(), per_rank, 0, rank, uint64_t(round));
    RANK_OK(occl_all_gather(&ts, &tr, comm, nullptr), rank);
    for (int p = 0; p < 2; ++p) {
      std::string err = check_pattern(DT::kF32, recv.data() + p * per_rank * 4, per_rank, 0, p, uint64_t(round));
      RANK_CHECK(err.empty(), rank, cat("all_gather round ", round, ", block of rank ", p, ": ", err));
    }
  }
  auto* in = reinterpret_cast<float*>(send.data());
  for (size_t i = 0; i < per_rank; ++i) in[i] = float(i % 1000) + float(rank);
  RANK_OK(occl_all_reduce(&ts, &tsum, OCCL_SUM, comm, nullptr), rank);
  auto* out = reinterpret_cast<const float*>(sum.data());
  for (size_t i = 0; i < per_rank; ++i) {
    RANK_CHECK(out[i] == 2 * float(i % 1000) + 1, rank, cat("all_reduce element ", i, ": ", out[i]));
  }
  RANK_OK(occl_comm_destroy(comm), rank);
  return 0;
}

constexpr size_t kSingleCopyFloats = 256 * 1024;  // 1 MiB per rank: above the by-reference threshold

JobOptions single_copy_job(const std::string& on) {
  JobOptions o = opts(2, "shm");
  o.create_comm = false;
  o.env = {{"OMNICCL_DEBUG", "INFO"}, {"OMNICCL_DEBUG_SUBSYS", "TRANSPORT"}, {"OMNICCL_SHM_SINGLE_COPY", on}};
  return o;
}

/// In a rank: runs gather_and_reduce with stderr captured, then checks that
/// the log has a line containing `mode`, one containing `counts`, and
/// `also` somewhere.
int run_and_check_log(int rank, const std::string& mode, const std::string& counts, const std::string& also = "") {
  int rc = 0;
  std::string log = capture_stderr(
      rank, [rank] { return gather_and_reduce(rank, kSingleCopyFloats); }, &rc);
  if (rc != 0) return rc;
  RANK_CHECK(log.find(mode) != std::string::npos, rank, "no '" + mode + "' line in:\n" + log);
  RANK_CHECK(log.find(also) != std::string::npos, rank, "no '" + also + "' in:\n" + log);
  RANK_CHECK(log.find(counts) != std::string::npos, rank, "expected '" + counts + "' in:\n" + log);
  return 0;
}

const std::string kNoRefs = "0 payload(s) sent by reference, 0 (0 bytes) read by reference";

TEST(SingleCopy, LargeAllGatherGoesByReference) {
  // Yama's ptrace_scope 1 or more forbids reads between sibling processes
  // without CAP_SYS_PTRACE: single copy is then rightly off.
  std::ifstream yama("/proc/sys/kernel/yama/ptrace_scope");
  int scope = 0;
  if (yama >> scope && scope >= 1 && ::geteuid() != 0) {
    GTEST_SKIP() << "kernel.yama.ptrace_scope=" << scope << " and not root: ranks may not read each other's memory";
  }
  JobResult res = run_ranks(single_copy_job("1"), [](occl_comm_t, int rank, int) {
    // Each rank reads the other's 1 MiB block once per all_gather, alone (an
    // exchange does not split its copies, though OMNICCL_SHM_SPLIT_COPY is
    // on); the all_reduce moves nothing by reference.
    return run_and_check_log(rank, "single copy on",
                             cat("3 payload(s) sent by reference, 3 (", 3 * kSingleCopyFloats * 4,
                                 " bytes) read by reference, 0 of them split with the sender; 0 chunk(s) written"));
  });
  EXPECT_TRUE(res.ok()) << res.summary();
}

TEST(SingleCopy, OffByEnvironment) {
  JobResult res = run_ranks(single_copy_job("0"), [](occl_comm_t, int rank, int) {
    return run_and_check_log(rank, "single copy off", kNoRefs);
  });
  EXPECT_TRUE(res.ok()) << res.summary();
}

/// Two ranks over TCP, each with OMNICCL_TCP_STREAMS set to its entry of
/// `values` (nullptr: unset) and, where `tcp_cache` is not empty, the TCP
/// calibration cache at that path: both must log the link to the other with
/// `streams` data streams at INFO (", N data streams" where N > 1, nothing
/// where 1), and a 3 MiB all_reduce (twelve stripes of 256 KiB) must arrive
/// intact.
void expect_streams(const char* const (&values)[2], int streams, const std::string& tcp_cache = "") {
  JobOptions o = opts(2, "tcp");
  o.create_comm = false;
  o.env = {{"OMNICCL_DEBUG", "INFO"}, {"OMNICCL_DEBUG_SUBSYS", "TRANSPORT"}};
  if (!tcp_cache.empty()) o.env["OMNICCL_TCP_CALIBRATION_FILE"] = tcp_cache;
  JobResult res = run_ranks(o, [&values, streams](occl_comm_t, int rank, int n) {
    if (values[rank] != nullptr) {
      ::setenv("OMNICCL_TCP_STREAMS", values[rank], 1);
    } else {
      ::unsetenv("OMNICCL_TCP_STREAMS");
    }
    int rc = 0;
    occl_comm_t comm = nullptr;
    std::string log = capture_stderr(
        rank,
        [&] {
          occl_config_t cfg = OCCL_CONFIG_INIT;
          cfg.timeout_ms = 60000;
          cfg.transport = "tcp";
          return occl_comm_init(&comm, std::getenv("OCCL_TEST_INIT"), OCCL_FROM_ENV, OCCL_FROM_ENV, &cfg) ==
                         OCCL_SUCCESS
                     ? 0
                     : 1;
        },
        &rc);
    RANK_CHECK(rc == 0, rank, cat("occl_comm_init: ", occl_last_error()));
    const std::string line = cat("-> rank ", 1 - rank, ": tcp (OMNICCL_TRANSPORT=tcp)",
                                 streams > 1 ? cat(", ", streams, " data streams") : std::string(), "\n");
    RANK_CHECK(log.find(line) != std::string::npos, rank, cat("no line ending '", line, "' in:\n", log));
    const int rc2 = all_reduce_works(comm, rank, n, int64_t(3) << 18);
    RANK_OK(occl_comm_destroy(comm), rank);
    return rc2;
  });
  EXPECT_TRUE(res.ok()) << res.summary();
}

// OMNICCL_TCP_STREAMS differs between the ranks (2 and 5): the pair uses
// the smaller count, says so at INFO, and striped payloads arrive intact.
TEST(TcpStreams, APairUsesTheSmallerCountOfItsRanks) { expect_streams({"2", "5"}, 2); }

/// Bytes each TCP socket of this process has had acknowledged (sent) and
/// received (TCP_INFO), by descriptor.
std::map<int, std::pair<uint64_t, uint64_t>> tcp_byte_counts() {
  std::map<int, std::pair<uint64_t, uint64_t>> out;
  DIR* d = ::opendir("/proc/self/fd");
  if (d == nullptr) return out;
  while (dirent* e = ::readdir(d)) {
    const int fd = std::atoi(e->d_name);
    if (e->d_name[0] == '.' || fd == ::dirfd(d)) continue;
    tcp_info info{};
    socklen_t len = sizeof info;
    if (::getsockopt(fd, IPPROTO_TCP, TCP_INFO, &info, &len) != 0) continue;  // not a TCP socket
    if (len < offsetof(tcp_info, tcpi_bytes_received) + sizeof info.tcpi_bytes_received) continue;
    out[fd] = {info.tcpi_bytes_acked, info.tcpi_bytes_received};
  }
  ::closedir(d);
  return out;
}

// OMNICCL_TCP_STREAMS=3: a 16 MiB message each way (64 stripes of 256 KiB,
// dealt round-robin) moves at least 4 MiB on each of the pair's three data
// sockets, in each direction (the kernel's own byte counters, TCP_INFO, since
// the sockets were made: before this exchange they carried only the
// handshake, and a snapshot taken then could race with the peer's first
// bytes). With striping off (every stripe on socket 0) one socket carries it
// all and this fails.
TEST(TcpStreams, EveryDataSocketCarriesAShareOf16MiB) {
  JobResult res = run_ranks(job_options(2, "tcp3", 60000, 120), [](occl_comm_t comm, int rank, int) {
    constexpr int64_t kCount = int64_t(4) << 20;  // int32: 16 MiB
    constexpr uint64_t kShare = uint64_t(4) << 20;
    std::vector<int32_t> out(size_t(kCount), rank + 1), in(size_t(kCount), 0);
    Tensor1D to(out.data(), kCount, dl_int(32)), ti(in.data(), kCount, dl_int(32));
    if (rank == 0) {
      RANK_OK(occl_send_tagged(&to, 1, 1, comm, nullptr, nullptr), rank);
      RANK_OK(occl_recv_tagged(&ti, 1, 1, comm, nullptr, nullptr, nullptr), rank);
    } else {
      RANK_OK(occl_recv_tagged(&ti, 0, 1, comm, nullptr, nullptr, nullptr), rank);
      RANK_OK(occl_send_tagged(&to, 0, 1, comm, nullptr, nullptr), rank);
    }
    RANK_CHECK(in.front() == 2 - rank && in.back() == 2 - rank, rank, "the 16 MiB message arrived wrong");
    RANK_OK(occl_barrier(comm, nullptr), rank);                   // the peer has read every byte: acknowledged by now
    std::this_thread::sleep_for(std::chrono::milliseconds(100));  // and delayed acks are in
    int carrying = 0;
    std::string seen;
    for (const auto& [fd, counts] : tcp_byte_counts()) {
      seen += cat(" fd ", fd, ": ", counts.first, " B sent, ", counts.second, " B received;");
      carrying += counts.first >= kShare && counts.second >= kShare;
    }
    RANK_CHECK(carrying == 3, rank,
               cat(carrying, " TCP sockets carried >= 4 MiB each way, want 3 (OMNICCL_TCP_STREAMS=3):", seen));
    return 0;
  });
  EXPECT_TRUE(res.ok()) << res.summary();
}

/// Makes this process's memory unreadable to its siblings: not dumpable, and
/// without CAP_SYS_PTRACE (which would override that) in the effective set.
bool forbid_memory_reads() {
  if (::prctl(PR_SET_DUMPABLE, 0, 0, 0, 0) != 0) return false;
  __user_cap_header_struct hdr{_LINUX_CAPABILITY_VERSION_3, 0};
  __user_cap_data_struct data[2]{};
  if (::syscall(SYS_capget, &hdr, data) != 0) return false;
  data[0].effective &= ~(1u << CAP_SYS_PTRACE);
  return ::syscall(SYS_capset, &hdr, data) == 0;
}

TEST(SingleCopy, FallsBackToTwoCopiesWhenThePeerCannotBeRead) {
  JobResult res = run_ranks(single_copy_job("1"), [](occl_comm_t, int rank, int) {
    RANK_CHECK(forbid_memory_reads(), rank, cat("prctl/capset: ", std::strerror(errno)));
    return run_and_check_log(rank, "single copy unavailable, two copies (process_vm_readv", kNoRefs);
  });
  EXPECT_TRUE(res.ok()) << res.summary();
}

// ---------------------------------------------------------------------------
// Calibration (OMNICCL_SHM_SINGLE_COPY=auto): the first job on a host
// measures and writes the cache, the next job reads it; a planted cache
// decides each outcome, and results are right in every case.

/// A fresh directory for a cache file; removed by the destructor.
struct TempDir {
  std::string path;
  TempDir() {
    char d[] = "/tmp/omniccl-calib-XXXXXX";
    path = ::mkdtemp(d) != nullptr ? d : "";
  }
  ~TempDir() {
    if (!path.empty()) std::system(("rm -rf '" + path + "'").c_str());
  }
};

JobOptions calibrated_job(const std::string& cache) {
  JobOptions o = single_copy_job("auto");
  o.env["OMNICCL_SHM_CALIBRATION_FILE"] = cache;
  return o;
}

/// The link-pair probe lines of a cache: ring, by reference and split, GB/s
/// at 1 and 8 MiB.
const std::string kRingWins =
    "link_ring_1m_gbps 20\nlink_ring_8m_gbps 10\nlink_ref_1m_gbps 8\nlink_ref_8m_gbps 4\nlink_split_1m_gbps "
    "15\nlink_split_8m_gbps 8\n";
const std::string kRefWins =
    "link_ring_1m_gbps 10\nlink_ring_8m_gbps 5\nlink_ref_1m_gbps 12\nlink_ref_8m_gbps 6\nlink_split_1m_gbps "
    "20\nlink_split_8m_gbps 9\n";
/// The ring ahead at 1 MiB, split copies (only) ahead at 8 MiB.
const std::string kSplitWinsLarge =
    "link_ring_1m_gbps 22\nlink_ring_8m_gbps 6\nlink_ref_1m_gbps 5\nlink_ref_8m_gbps 4\nlink_split_1m_gbps "
    "10\nlink_split_8m_gbps 9\n";

/// The cache text for this machine (uname), with the given rates (streaming
/// stores no faster than memcpy).
std::string planted_cache(const std::string& readv, const std::string& ring, const std::string& links = kRingWins) {
  utsname u{};
  ::uname(&u);
  std::string key = cat(u.nodename, " ", u.release, " ", u.version);
  for (char& c : key) {
    if (c == '\n') c = ' ';
  }
  return cat("omniccl-shm-calibration 5\nmachine ", key, "\nreadv_gbps ", readv, "\nring_gbps ", ring,
             "\ncopy_gbps 5\nstream_gbps 5\n", links);
}

/// A TCP calibration cache for this machine (uname) with the given rates
/// of one data socket and two.
std::string planted_tcp_cache(const std::string& one, const std::string& two) {
  utsname u{};
  ::uname(&u);
  std::string key = cat(u.nodename, " ", u.release, " ", u.version);
  for (char& c : key) {
    if (c == '\n') c = ' ';
  }
  return cat("omniccl-tcp-calibration 1\nmachine ", key, "\none_socket_gbps ", one, "\ntwo_sockets_gbps ", two, "\n");
}

/// Writes `text` to `path`, private to this user (as a cache must be).
void plant(const std::string& path, const std::string& text) {
  {
    std::ofstream out(path);
    out << text;
  }
  ::chmod(path.c_str(), 0600);
}

// OMNICCL_TCP_STREAMS unset (auto), ranks of one host: the pair uses two data
// sockets where the host's calibration found two faster over loopback ...
TEST(TcpStreams, AutoTakesTwoStreamsOnOneHostWhereTheCalibrationFoundTwoFaster) {
  TempDir dir;
  ASSERT_FALSE(dir.path.empty());
  plant(dir.path + "/tcp", planted_tcp_cache("6", "8"));
  expect_streams({nullptr, nullptr}, 2, dir.path + "/tcp");
}

// ... and one where it found one faster (on one machine two took up to 1.7x
// as long) ...
TEST(TcpStreams, AutoTakesOneStreamOnOneHostWhereTheCalibrationFoundOneFaster) {
  TempDir dir;
  ASSERT_FALSE(dir.path.empty());
  plant(dir.path + "/tcp", planted_tcp_cache("13", "11"));
  expect_streams({nullptr, nullptr}, 1, dir.path + "/tcp");
}

// ... while a count set by OMNICCL_TCP_STREAMS wins over the calibration.
TEST(TcpStreams, ASetCountWinsOverTheCalibration) {
  TempDir dir;
  ASSERT_FALSE(dir.path.empty());
  plant(dir.path + "/tcp", planted_tcp_cache("13", "11"));
  expect_streams({"2", "2"}, 2, dir.path + "/tcp");
}

bool ranks_may_read_each_other() {
  std::ifstream yama("/proc/sys/kernel/yama/ptrace_scope");
  int scope = 0;
  return !(yama >> scope && scope >= 1 && ::geteuid() != 0);
}

/// broadcast (root 0), gather (root 0) and scatter (root 1) of `per_rank`
/// floats per rank, results checked; then the link's closing log line must
/// show payloads sent and read by reference (refs = true) or none (false).
int rooted_ops(int rank, size_t per_rank, bool refs) {
  int rc = 0;
  std::string log = capture_stderr(
      rank,
      [rank, per_rank] {
        occl_comm_t comm = nullptr;
        RANK_OK(init_shm_comm(&comm), rank);
        Buf one(DT::kF32, per_rank), all(DT::kF32, 2 * per_rank);
        Tensor1D t1(one.data(), int64_t(per_rank), dl_float(32)), t2(all.data(), int64_t(2 * per_rank), dl_float(32));
        fill_pattern(DT::kF32, one.data(), per_rank, 0, rank == 0 ? 0 : 99, 1);
        RANK_OK(occl_broadcast(&t1, 0, comm, nullptr), rank);
        std::string err = check_pattern(DT::kF32, one.data(), per_rank, 0, 0, 1);
        RANK_CHECK(err.empty(), rank, "broadcast: " + err);
        fill_pattern(DT::kF32, one.data(), per_rank, 0, rank, 2);
        RANK_OK(occl_gather(&t1, &t2, 0, comm, nullptr), rank);
        for (int p = 0; rank == 0 && p < 2; ++p) {
          err = check_pattern(DT::kF32, all.data() + p * per_rank * 4, per_rank, 0, p, 2);
          RANK_CHECK(err.empty(), rank, cat("gather, block of rank ", p, ": ", err));
        }
        if (rank == 1) {
          for (int p = 0; p < 2; ++p) fill_pattern(DT::kF32, all.data() + p * per_rank * 4, per_rank, 0, p, 3);
        }
        RANK_OK(occl_scatter(&t2, &t1, 1, comm, nullptr), rank);
        err = check_pattern(DT::kF32, one.data(), per_rank, 0, rank, 3);
        RANK_CHECK(err.empty(), rank, "scatter: " + err);
        RANK_OK(occl_comm_destroy(comm), rank);
        return 0;
      },
      &rc);
  if (rc != 0) return rc;
  const size_t at = log.find("payload(s) sent by reference, ");
  RANK_CHECK(at != std::string::npos, rank, "no closing link line in:\n" + log);
  const size_t line = log.rfind(": ", at);
  unsigned long sent = 0, read = 0;
  RANK_CHECK(std::sscanf(log.c_str() + line, ": %lu payload(s) sent by reference, %lu", &sent, &read) == 2, rank,
             "unreadable closing line in:\n" + log);
  RANK_CHECK(refs ? (sent > 0 && read > 0) : (sent == 0 && read == 0), rank,
             cat(sent, " sent and ", read, " read by reference, expected ", refs ? "some" : "none", ":\n", log));
  return 0;
}

TEST(SingleCopy, RootedCollectivesForcedOnGoByReference) {
  if (!ranks_may_read_each_other()) GTEST_SKIP() << "kernel.yama.ptrace_scope forbids reads between ranks";
  JobResult res = run_ranks(single_copy_job("1"),
                            [](occl_comm_t, int rank, int) { return rooted_ops(rank, kSingleCopyFloats, true); });
  EXPECT_TRUE(res.ok()) << res.summary();
}

TEST(SingleCopy, RootedCollectivesForcedOffCopyTwice) {
  JobResult res = run_ranks(single_copy_job("0"),
                            [](occl_comm_t, int rank, int) { return rooted_ops(rank, kSingleCopyFloats, false); });
  EXPECT_TRUE(res.ok()) << res.summary();
}

/// Resident KiB of this process's mappings of OmniCCL's shared-memory
/// segments (/proc/self/smaps).
long shm_resident_kib() {
  std::ifstream smaps("/proc/self/smaps");
  std::string line;
  bool inside = false;
  long kib = 0;
  while (std::getline(smaps, line)) {
    if (!line.empty() && std::isxdigit(static_cast<unsigned char>(line[0])) && line.find('-') != std::string::npos &&
        line.find(' ') > line.find('-')) {
      inside = line.find("/dev/shm/omniccl.") != std::string::npos;
    } else if (inside && line.rfind("Rss:", 0) == 0) {
      kib += std::atol(line.c_str() + 4);
    }
  }
  return kib;
}

// The first pass over a ring used to take a page fault per 4 KiB on each
// side (0.3-0.7 us per small operation for its first ~16,000 operations), so
// whichever sizes a benchmark ran first looked slower than the next larger
// ones (a 1.7x "cliff" at 256 B all_reduce). The rings are mapped in when a
// link is created; this pins that.
TEST(ShmRings, AreMappedInWhenTheCommunicatorIsCreated) {
  void* probe = ::mmap(nullptr, 4096, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  ASSERT_NE(probe, MAP_FAILED);
  const bool populate_ok = ::madvise(probe, 4096, MADV_POPULATE_WRITE) == 0;
  ::munmap(probe, 4096);
  if (!populate_ok) GTEST_SKIP() << "this kernel has no MADV_POPULATE_WRITE (Linux 5.14+)";
  JobResult res = run_ranks(opts(2, "shm"), [](occl_comm_t, int rank, int) {
    // This rank's incoming ring (its segment) and outgoing ring (the
    // peer's), 2 MiB each, before any operation ran.
    const long kib = shm_resident_kib();
    RANK_CHECK(kib >= 2 * 2048, rank, cat("only ", kib, " KiB of the shared-memory rings are mapped in"));
    return 0;
  });
  EXPECT_TRUE(res.ok()) << res.summary();
}

TEST(SingleCopyCalibration, FirstJobMeasuresAndTheNextReadsTheCache) {
  TempDir dir;
  ASSERT_FALSE(dir.path.empty());
  const std::string cache = dir.path + "/cache";
  JobResult first = run_ranks(calibrated_job(cache), [&](occl_comm_t, int rank, int) {
    int rc = 0;
    std::string log = capture_stderr(
        rank, [rank] { return gather_and_reduce(rank, kSingleCopyFloats); }, &rc);
    if (rc != 0) return rc;
    // One rank measures (under the lock); the other finds its result.
    RANK_CHECK(log.find("cached in " + cache) != std::string::npos ||
                   log.find("(from the cache " + cache + ")") != std::string::npos,
               rank, "no calibration line in:\n" + log);
    return 0;
  });
  ASSERT_TRUE(first.ok()) << first.summary();
  std::ifstream in(cache);
  std::string magic;
  ASSERT_TRUE(std::getline(in, magic)) << "no cache file at " << cache;
  EXPECT_EQ(magic, "omniccl-shm-calibration 5");
  JobResult second = run_ranks(calibrated_job(cache), [&](occl_comm_t, int rank, int) {
    int rc = 0;
    std::string log = capture_stderr(
        rank, [rank] { return gather_and_reduce(rank, kSingleCopyFloats); }, &rc);
    if (rc != 0) return rc;
    RANK_CHECK(log.find("(from the cache " + cache + ")") != std::string::npos, rank,
               "the second job did not reuse the cache:\n" + log);
    RANK_CHECK(log.find("calibrated:") == std::string::npos, rank, "the second job measured again:\n" + log);
    return 0;
  });
  EXPECT_TRUE(second.ok()) << second.summary();
}

// Exchanges start from the calibration's answer and measure the other way
// while they run (OpTuner): of the three all_gathers of 2 MiB, the first and
// the third go the calibration's way, the second the other way.
const std::string kTunedExchanges =
    "broadcast, gather, scatter, all_gather and all_to_all of 512 KiB and more measure single copy against the rings";

/// A job of gather_and_reduce on a cache planted with (readv, ring, links):
/// each rank's log must name `mode`, and `refs` payloads each way by
/// reference, and hold `also`.
void expect_calibrated_refs(const std::string& readv, const std::string& ring, const std::string& links,
                            const std::string& mode, size_t refs, const std::string& also = "") {
  if (!ranks_may_read_each_other()) GTEST_SKIP() << "kernel.yama.ptrace_scope forbids reads between ranks";
  TempDir dir;
  const std::string cache = dir.path + "/cache";
  std::ofstream(cache) << planted_cache(readv, ring, links);
  const std::string counts = cat(refs, " payload(s) sent by reference, ", refs, " (", refs * kSingleCopyFloats * 4,
                                 " bytes) read by reference");
  JobResult res = run_ranks(calibrated_job(cache),
                            [&](occl_comm_t, int rank, int) { return run_and_check_log(rank, mode, counts, also); });
  EXPECT_TRUE(res.ok()) << res.summary();
}

TEST(SingleCopyCalibration, SlowReadvStartsWithTwoCopies) {
  expect_calibrated_refs("0.5", "10", kRingWins,
                         "for all_gather and all_to_all: off (process_vm_readv 0.5 GB/s < 0.35 x ring 10 GB/s)", 1,
                         kTunedExchanges);
}

TEST(SingleCopyCalibration, FastReadvStartsWithSingleCopy) {
  expect_calibrated_refs("20", "10", kRefWins,
                         "for all_gather and all_to_all: on (process_vm_readv 20 GB/s >= 0.35 x ring 10 GB/s)", 2);
}

TEST(SingleCopyCalibration, SomewhatSlowerReadvStartsAllGatherWithSingleCopy) {
  expect_calibrated_refs("4", "10", kRingWins,
                         "for all_gather and all_to_all: on (process_vm_readv 4 GB/s >= 0.35 x ring 10 GB/s)", 2);
}

// Where a host's ranks outnumber its cores (here both ranks on one CPU),
// all_to_all follows the calibration as everywhere: a cache that keeps
// exchanges on the rings (process_vm_readv well below the ring) sends
// nothing by reference. Measured and not measured while running alike (the
// tuner does not try single copy there): on a VM where the rings
// were faster for 4 ranks on 2 cores at 1 and 16 MiB in every round.
TEST(SingleCopyCalibration, ExchangesFollowTheCalibrationWhereRanksOutnumberCores) {
  if (!ranks_may_read_each_other()) GTEST_SKIP() << "kernel.yama.ptrace_scope forbids reads between ranks";
  TempDir dir;
  const std::string cache = dir.path + "/cache";
  std::ofstream(cache) << planted_cache("0.5", "10");
  JobResult res = run_ranks(calibrated_job(cache), [](occl_comm_t, int rank, int) {
    // Both ranks on the first CPU this process may use.
    cpu_set_t mask;
    CPU_ZERO(&mask);
    RANK_CHECK(::sched_getaffinity(0, sizeof mask, &mask) == 0, rank, "sched_getaffinity failed");
    int first = 0;
    while (first < CPU_SETSIZE && !CPU_ISSET(first, &mask)) ++first;
    CPU_ZERO(&mask);
    CPU_SET(first, &mask);
    RANK_CHECK(::sched_setaffinity(0, sizeof mask, &mask) == 0, rank, "sched_setaffinity failed");
    int rc = 0;
    std::string log = capture_stderr(
        rank,
        [rank] {
          occl_comm_t comm = nullptr;
          RANK_OK(init_shm_comm(&comm), rank);
          const size_t per = kSingleCopyFloats;
          Buf send(DT::kF32, 2 * per), recv(DT::kF32, 2 * per);
          Tensor1D ts(send.data(), int64_t(2 * per), dl_float(32)), tr(recv.data(), int64_t(2 * per), dl_float(32));
          for (int round = 0; round < 3; ++round) {
            // Block p of rank r's send: the pattern of (r, p, round).
            for (int p = 0; p < 2; ++p) {
              fill_pattern(DT::kF32, send.data() + p * per * 4, per, 0, 10 * rank + p, uint64_t(round));
            }
            std::memset(recv.data(), 0, 2 * per * 4);
            RANK_OK(occl_all_to_all(&ts, &tr, comm, nullptr), rank);
            for (int p = 0; p < 2; ++p) {
              std::string err =
                  check_pattern(DT::kF32, recv.data() + p * per * 4, per, 0, 10 * p + rank, uint64_t(round));
              RANK_CHECK(err.empty(), rank, cat("all_to_all round ", round, ", block from rank ", p, ": ", err));
            }
          }
          RANK_OK(occl_comm_destroy(comm), rank);
          return 0;
        },
        &rc);
    if (rc != 0) return rc;
    RANK_CHECK(log.find("for all_gather and all_to_all: off (process_vm_readv 0.5 GB/s < 0.35 x ring 10 GB/s)") !=
                   std::string::npos,
               rank, "no calibration line in:\n" + log);
    RANK_CHECK(log.find(kNoRefs) != std::string::npos, rank, "expected '" + kNoRefs + "' in:\n" + log);
    return 0;
  });
  EXPECT_TRUE(res.ok()) << res.summary();
}

/// In a rank: `rounds` gathers to rank 0 (else all_gathers) of `floats`
/// floats per rank over shared memory, results checked, with stderr captured
/// into *log; returns 0 on success.
int gathers(int rank, bool all, size_t floats, int rounds, std::string* log) {
  int rc = 0;
  *log = capture_stderr(
      rank,
      [=] {
        occl_comm_t comm = nullptr;
        RANK_OK(init_shm_comm(&comm), rank);
        Buf send(DT::kF32, floats), recv(DT::kF32, 2 * floats);
        Tensor1D ts(send.data(), int64_t(floats), dl_float(32));
        Tensor1D tr(recv.data(), int64_t(2 * floats), dl_float(32));
        const char* what = all ? "all_gather" : "gather";
        for (int round = 0; round < rounds; ++round) {
          fill_pattern(DT::kF32, send.data(), floats, 0, rank, uint64_t(round));
          std::memset(recv.data(), 0, 2 * floats * 4);
          RANK_OK(all ? occl_all_gather(&ts, &tr, comm, nullptr) : occl_gather(&ts, &tr, 0, comm, nullptr), rank);
          for (int p = 0; (all || rank == 0) && p < 2; ++p) {
            std::string err = check_pattern(DT::kF32, recv.data() + p * floats * 4, floats, 0, p, uint64_t(round));
            RANK_CHECK(err.empty(), rank, cat(what, " round ", round, ", block of rank ", p, ": ", err));
          }
        }
        RANK_OK(occl_comm_destroy(comm), rank);
        return 0;
      },
      &rc);
  return rc;
}

// Whether the tuner's log names a decision of single copy `way` for `band`.
// The winner counts its fastest time, or its slowest where it is a long
// challenger (2 ms or more, as a loaded machine makes a 4 MiB call) that a
// second trial confirmed.
bool tuner_chose(const std::string& log, const std::string& band, const char* way) {
  const std::string head = cat(band, ": single copy ", way, " (");
  return log.find(head + "fastest ") != std::string::npos || log.find(head + "slowest ") != std::string::npos;
}

// Six all_gathers of 2 MiB (calibration: single copy on): two each way (the
// rings once only, if that took 1.25 times single copy's fastest), then the
// way rank 0 found faster, which its log names: rank 0 sends 2 payloads by
// reference in the first four, then 2 more if single copy won (3 more after
// a single call through the rings). Rank 1 follows rank 0 from the
// operation after rank 0's decision is published (or the one after that,
// when it starts that one first); before that it may log a decision of its
// own (its own durations), never two. Its own may come a call early (its
// single trial through the rings took 2 ms or more and lost) or a call late,
// so it sends within two of what it reads.
TEST(SingleCopyCalibration, ExchangesKeepTheFasterWayAndSayWhich) {
  if (!ranks_may_read_each_other()) GTEST_SKIP() << "kernel.yama.ptrace_scope forbids reads between ranks";
  TempDir dir;
  const std::string cache = dir.path + "/cache";
  std::ofstream(cache) << planted_cache("20", "10");
  JobOptions o = calibrated_job(cache);
  o.env["OMNICCL_DEBUG_SUBSYS"] = "TRANSPORT,TUNING";
  JobResult res = run_ranks(o, [](occl_comm_t, int rank, int) {
    std::string log;
    if (int rc = gathers(rank, true, kSingleCopyFloats, 6, &log); rc != 0) return rc;
    const bool on = tuner_chose(log, "all_gather of 2-4 MiB", "on");
    const bool off = tuner_chose(log, "all_gather of 2-4 MiB", "off");
    RANK_CHECK(rank == 0 ? on != off : !(on && off), rank, "no single decision for all_gather of 2-4 MiB in:\n" + log);
    const size_t at = log.find("payload(s) sent by reference, ");
    RANK_CHECK(at != std::string::npos, rank, "no closing link line in:\n" + log);
    unsigned long sent = 0, read = 0;
    RANK_CHECK(
        std::sscanf(log.c_str() + log.rfind(": ", at), ": %lu payload(s) sent by reference, %lu", &sent, &read) == 2,
        rank, "unreadable closing line in:\n" + log);
    const unsigned long leader = rank == 0 ? sent : read, follower = rank == 0 ? read : sent;
    RANK_CHECK(leader == 2 || leader == 4 || leader == 5, rank,
               cat(leader, " payloads of rank 0 by reference, not 2, 4 or 5:\n", log));
    RANK_CHECK(follower + 2 >= leader && follower <= leader + 2, rank,
               cat(follower, " payloads of rank 1 by reference against rank 0's ", leader, ":\n", log));
    RANK_CHECK(rank != 0 || (on ? sent >= 4 : sent == 2), rank,
               cat(sent, " sent by reference against the decision:\n", log));
    return 0;
  });
  EXPECT_TRUE(res.ok()) << res.summary();
}

/// In a rank: broadcasts (root 0) of `sizes` floats, checked, with stderr
/// captured into *log. By default one of 1 MiB and one of 4 MiB: each the
/// first of its size band, which goes the calibration's way (later ones of
/// a band measure the other way too: OneWayOperationsKeepTheFasterWay...).
int broadcasts(int rank, std::string* log,
               const std::vector<size_t>& sizes = {kSingleCopyFloats, 4 * kSingleCopyFloats}) {
  int rc = 0;
  *log = capture_stderr(
      rank,
      [rank, &sizes] {
        occl_comm_t comm = nullptr;
        RANK_OK(init_shm_comm(&comm), rank);
        for (size_t floats : sizes) {
          Buf b(DT::kF32, floats);
          Tensor1D t(b.data(), int64_t(floats), dl_float(32));
          fill_pattern(DT::kF32, b.data(), floats, 0, rank == 0 ? 0 : 99, floats);
          RANK_OK(occl_broadcast(&t, 0, comm, nullptr), rank);
          std::string err = check_pattern(DT::kF32, b.data(), floats, 0, 0, floats);
          RANK_CHECK(err.empty(), rank, cat("broadcast of ", floats, " floats: ", err));
        }
        RANK_OK(occl_comm_destroy(comm), rank);
        return 0;
      },
      &rc);
  return rc;
}

// Where the link probes found the ring faster at both sizes, broadcasts of
// every size start through the ring, as gather and scatter do: neither the
// 1 MiB broadcast nor the 4 MiB one is read by reference, while all_gather
// and all_to_all still may (process_vm_readv at half the ring).
TEST(SingleCopyCalibration, RingAheadKeepsBroadcastsOnTheRing) {
  if (!ranks_may_read_each_other()) GTEST_SKIP() << "kernel.yama.ptrace_scope forbids reads between ranks";
  TempDir dir;
  const std::string cache = dir.path + "/cache";
  std::ofstream(cache) << planted_cache("5", "10");
  JobResult res = run_ranks(calibrated_job(cache), [](occl_comm_t, int rank, int) {
    std::string log;
    if (int rc = broadcasts(rank, &log); rc != 0) return rc;
    RANK_CHECK(log.find("single copy for broadcast, gather and scatter: never") != std::string::npos &&
                   log.find("for all_gather and all_to_all: on (process_vm_readv 5 GB/s") != std::string::npos,
               rank, "no single-copy choice for exchanges only in:\n" + log);
    RANK_CHECK(log.find(kNoRefs) != std::string::npos, rank, "expected '" + kNoRefs + "' in:\n" + log);
    return 0;
  });
  EXPECT_TRUE(res.ok()) << res.summary();
}

// Where only split copies at 8 MiB beat the ring: the 1 MiB broadcast takes
// the ring, the 4 MiB one goes by reference and rank 1 splits its copy with
// rank 0; with OMNICCL_SHM_SPLIT_COPY=0 (one-sided reads, behind the ring at
// both sizes) none goes by reference.
TEST(SingleCopyCalibration, SplitCopiesAheadAtEightMiBTakeBroadcastsFromFourMiB) {
  if (!ranks_may_read_each_other()) GTEST_SKIP() << "kernel.yama.ptrace_scope forbids reads between ranks";
  for (const char* split : {"1", "0"}) {
    TempDir dir;
    const std::string cache = dir.path + "/cache";
    std::ofstream(cache) << planted_cache("5", "10", kSplitWinsLarge);
    JobOptions o = calibrated_job(cache);
    o.env["OMNICCL_SHM_SPLIT_COPY"] = split;
    const bool on = std::string(split) == "1";
    JobResult res = run_ranks(o, [on](occl_comm_t, int rank, int) {
      std::string log;
      if (int rc = broadcasts(rank, &log); rc != 0) return rc;
      RANK_CHECK(log.find("single copy for broadcast, gather and scatter: from 4 MiB") != std::string::npos, rank,
                 "no choice from 4 MiB in:\n" + log);
      if (!on) {
        RANK_CHECK(log.find(kNoRefs) != std::string::npos, rank, "expected '" + kNoRefs + "' in:\n" + log);
        return 0;
      }
      // The 4 MiB broadcast (in pieces, as its algorithm sends it) went by
      // reference, and rank 1 split every piece it read.
      const size_t at = log.find("payload(s) sent by reference, ");
      RANK_CHECK(at != std::string::npos, rank, "no closing link line in:\n" + log);
      unsigned long sent = 0, read = 0, bytes = 0, split_read = 0;
      RANK_CHECK(std::sscanf(log.c_str() + log.rfind(": ", at),
                             ": %lu payload(s) sent by reference, %lu (%lu bytes) read by reference, %lu of them split",
                             &sent, &read, &bytes, &split_read) == 4,
                 rank, "unreadable closing line in:\n" + log);
      if (rank == 0) {
        RANK_CHECK(sent > 0 && read == 0, rank, "rank 0 sent nothing by reference:\n" + log);
      } else {
        RANK_CHECK(sent == 0 && read > 0 && split_read == read && bytes == 16 * kSingleCopyFloats, rank,
                   "rank 1 did not read the 4 MiB broadcast by reference, split:\n" + log);
      }
      return 0;
    });
    EXPECT_TRUE(res.ok()) << "OMNICCL_SHM_SPLIT_COPY=" << split << res.summary();
  }
}

// Broadcast, gather and scatter measure too: six broadcasts of 4 MiB from
// rank 0, on a calibration that sends them by reference (split copies ahead
// at both sizes), go two each way, the calibration's first (through the
// rings once only if that took 2 ms or more, or 1.25 times the fastest by
// reference), then the way rank 0 found
// faster, which its log names. Rank 0 decides and sends, so rank 1 reads 2
// of them by reference if the rings won, else 4 (5 after a single call
// through the rings); each rank checks the broadcast's data every time.
TEST(SingleCopyCalibration, OneWayOperationsKeepTheFasterWayAndSayWhich) {
  if (!ranks_may_read_each_other()) GTEST_SKIP() << "kernel.yama.ptrace_scope forbids reads between ranks";
  TempDir dir;
  const std::string cache = dir.path + "/cache";
  std::ofstream(cache) << planted_cache("20", "10", kRefWins);
  JobOptions o = calibrated_job(cache);
  o.env["OMNICCL_DEBUG_SUBSYS"] = "TRANSPORT,TUNING";
  JobResult res = run_ranks(o, [](occl_comm_t, int rank, int) {
    std::string log;
    if (int rc = broadcasts(rank, &log, std::vector<size_t>(6, 4 * kSingleCopyFloats)); rc != 0) return rc;
    RANK_CHECK(log.find("single copy for broadcast, gather and scatter: on (") != std::string::npos, rank,
               "no choice of single copy at every size in:\n" + log);
    const size_t at = log.find("payload(s) sent by reference, ");
    RANK_CHECK(at != std::string::npos, rank, "no closing link line in:\n" + log);
    unsigned long sent = 0, read = 0, bytes = 0;
    RANK_CHECK(
        std::sscanf(log.c_str() + log.rfind(": ", at),
                    ": %lu payload(s) sent by reference, %lu (%lu bytes) read by reference", &sent, &read, &bytes) == 3,
        rank, "unreadable closing line in:\n" + log);
    if (rank == 1) {
      const unsigned long whole = bytes / (16 * kSingleCopyFloats);
      RANK_CHECK(sent == 0 && bytes % (16 * kSingleCopyFloats) == 0 && (whole == 2 || whole == 4 || whole == 5), rank,
                 cat(whole, " broadcasts of 4 MiB read by reference (", bytes, " bytes), not 2, 4 or 5:\n", log));
      return 0;
    }
    const bool on = tuner_chose(log, "broadcast of 4-8 MiB", "on");
    const bool off = tuner_chose(log, "broadcast of 4-8 MiB", "off");
    RANK_CHECK(on != off, rank, "no single decision for broadcast of 4-8 MiB in:\n" + log);
    RANK_CHECK(sent > 0 && read == 0, rank, "rank 0 sent nothing by reference:\n" + log);
    return 0;
  });
  EXPECT_TRUE(res.ok()) << res.summary();
}

// Streaming stores (OMNICCL_STREAM_STORES=auto): gathers of 8 MiB per rank
// are tuned while they run. The root (rank 0) tries the calibration's answer (a cache
// that finds streaming stores no faster: off), then streaming stores (each
// with and without single copy, also measured), and logs which was faster; results are right with either. With the
// setting 0 or 1 nothing is measured.
TEST(StreamTuning, LargeGathersTryBothStoresAndSayWhichWon) {
  constexpr size_t kFloats = size_t(2) << 20;  // 8 MiB per rank
  for (const char* stores : {"auto", "0", "1"}) {
    TempDir dir;
    const std::string cache = dir.path + "/cache";
    std::ofstream(cache) << planted_cache("5", "10");
    JobOptions o = calibrated_job(cache);
    o.env["OMNICCL_DEBUG_SUBSYS"] = "TRANSPORT,TUNING";
    o.env["OMNICCL_STREAM_STORES"] = stores;
    const bool tuned = std::string(stores) == "auto";
    JobResult res = run_ranks(o, [tuned](occl_comm_t, int rank, int) {
      std::string log;
      // Eight: four arms (single copy is measured too), at most two each.
      if (int rc = gathers(rank, false, kFloats, 8, &log); rc != 0) return rc;
      const bool said = log.find("gather of 8-16 MiB: streaming stores o") != std::string::npos;
      const bool promised = log.find("measure both while they run") != std::string::npos;
      RANK_CHECK(promised == tuned, rank, cat(tuned ? "no" : "a", " promise to measure streaming stores in:\n", log));
      // Rank 0 (the root, the host's lowest rank) decides. Rank 1 follows
      // rank 0's choice from the operation after it is published, so it
      // logs a choice of its own only if its own arms were all measured by
      // then (they may not be: its durations are a sender's, and settle
      // otherwise), and never when nothing is tuned.
      RANK_CHECK(rank == 0 ? said == tuned : !said || tuned, rank,
                 cat(said ? "a" : "no", " tuned streaming-store choice in:\n", log));
      return 0;
    });
    EXPECT_TRUE(res.ok()) << "OMNICCL_STREAM_STORES=" << stores << res.summary();
  }
}

}  // namespace
