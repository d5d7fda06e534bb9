// Reliability: a failure that only some ranks see must reach every rank
// involved, promptly and with the message that explains it, never leave a
// silently wrong result or a rank waiting out its deadline:
//   - a call one rank rejects for its arguments (the others' matching call
//     fails, naming the rejection; ranks that all reject stay usable);
//   - a mismatch found by the receivers (the rank whose call diverged hears
//     of it, at the latest at its next call);
//   - two threads issuing on one communicator at once (every operation
//     involved fails, on every rank).
//
// Checks run in forked ranks (tests/harness); a rank prints each failed
// check to stderr and exits non-zero, which fails the test.
#include <sys/mman.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdio>
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

/// Counters shared by the forked ranks (mapped before the fork).
struct Shared {
  std::atomic<int> reported{0};
  std::atomic<int> done{0};
};

/// Waits (at most 10 s) until `counter` reaches `want`: ranks that stay
/// until the others have their answers, so that no answer comes from a rank
/// that left.
void wait_for(const std::atomic<int>& counter, int want) {
  const auto t0 = Clock::now();
  while (counter.load() < want && seconds_since(t0) < 10) std::this_thread::sleep_for(std::chrono::milliseconds(5));
}

class SharedBlock {
 public:
  SharedBlock() {
    void* p = ::mmap(nullptr, sizeof(Shared), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    if (p != MAP_FAILED) s_ = new (p) Shared();
  }
  ~SharedBlock() {
    if (s_ != nullptr) ::munmap(s_, sizeof(Shared));
  }
  SharedBlock(const SharedBlock&) = delete;
  SharedBlock& operator=(const SharedBlock&) = delete;
  Shared* get() const { return s_; }

 private:
  Shared* s_ = nullptr;
};

/// Deadline 20 s per call: a rank that is not told waits that long, and the
/// checks below want its answer within a few seconds.
JobOptions job(int nranks) {
  JobOptions o;
  o.nranks = nranks;
  o.timeout_ms = 20000;
  o.job_timeout_s = 60;
  return o;
}

/// `st` is an error other than success whose message has every needle.
bool failed_with(int rank, const char* what, occl_status_t st, const std::vector<std::string>& needles) {
  const std::string msg = occl_last_error();
  bool ok = st != OCCL_SUCCESS;
  for (const auto& n : needles) ok = ok && contains_ci(msg, n);
  if (!ok) std::fprintf(stderr, "rank %d: %s returned %s: %s\n", rank, what, occl_status_string(st), msg.c_str());
  return ok;
}

/// A small all_reduce; its status (the communicator's next use).
occl_status_t next_call(occl_comm_t comm) {
  float x[4] = {1, 1, 1, 1};
  Tensor1D t(x, 4, dl_float(32));
  return occl_all_reduce(&t, &t, OCCL_SUM, comm, nullptr);
}

// ---------------------------------------------------------------------------
// A call one rank rejects
// ---------------------------------------------------------------------------

// gatherv of 2 ranks: the root's receive layout has the two parts overlap,
// which it rejects before sending anything; rank 1's call is valid. Rank 1's
// part is only to send, which may complete before the root's word arrives:
// then one of its next two calls fails, naming the rejection (the first may
// pair with the root's next call before the word arrives). Either way no rank waits
// for its deadline, and each learns why. `elems`: rank 1's part (a large one
// does not fit the link's buffers, so rank 1 waits in the call).
void root_rejects_gatherv(int64_t elems) {
  SharedBlock sh;
  ASSERT_NE(sh.get(), nullptr);
  Shared* shared = sh.get();
  JobResult res = run_ranks(job(2), [elems, shared](occl_comm_t comm, int rank, int n) {
    if (occl_barrier(comm, nullptr) != OCCL_SUCCESS) return 1;
    std::vector<int32_t> send(static_cast<size_t>(elems), rank), recv(static_cast<size_t>(2 * elems), -1);
    Tensor1D ts(send.data(), elems, dl_int(32)), tr(recv.data(), 2 * elems, dl_int(32));
    int64_t counts[2] = {elems, elems}, displs[2] = {0, elems / 2};  // the parts overlap
    const auto t0 = Clock::now();
    occl_status_t st = occl_gatherv(&ts, &tr, counts, displs, 0, comm, nullptr);
    bool ok = true;
    if (rank == 0) {
      ok &= st == OCCL_ERR_INVALID_ARGUMENT && contains_ci(occl_last_error(), "overlap");
      if (!ok) std::fprintf(stderr, "rank 0: gatherv returned %s: %s\n", occl_status_string(st), occl_last_error());
    } else if (st == OCCL_SUCCESS) {
      // The root's word may come after rank 1's next call has paired with
      // the root's: at the latest the call after that one fails.
      occl_status_t next = next_call(comm);
      if (next == OCCL_SUCCESS) next = next_call(comm);
      ok &= failed_with(rank, "the calls after gatherv", next, {"rank 0", "rejected", "gatherv", "overlap"});
    } else {
      ok &= failed_with(rank, "gatherv", st, {"rank 0", "rejected", "gatherv", "overlap"});
    }
    if (rank == 0) {
      // Rank 1's call failed (or will fail at its next use): rank 0's next
      // call hears of it rather than waiting for a partner that gave up.
      ok &= failed_with(rank, "the call after gatherv", next_call(comm), {"rejected"});
    }
    const double s = seconds_since(t0);
    if (s > 5.0) std::fprintf(stderr, "rank %d: the answers took %.1f s (deadline 20 s)\n", rank, s);
    // Each stays until both have their answers: they must come from the
    // rejection, not from the other rank leaving.
    shared->reported.fetch_add(1);
    wait_for(shared->reported, n);
    return ok && s < 5.0 ? 0 : 1;
  });
  EXPECT_TRUE(res.ok()) << res.summary();
}

TEST(RejectedCall, RootRejectsGathervPeerTold) { root_rejects_gatherv(4); }
TEST(RejectedCall, RootRejectsLargeGathervPeerDoesNotWait) { root_rejects_gatherv(1 << 20); }

// all_reduce of 3 ranks where rank 1 passes BXOR on float32 (undefined):
// ranks 0 and 2 wait for rank 1's data, and must hear of the rejection
// instead of waiting out their deadline.
TEST(RejectedCall, OthersOfAnAllReduceAreTold) {
  SharedBlock sh;
  ASSERT_NE(sh.get(), nullptr);
  Shared* s = sh.get();
  JobResult res = run_ranks(job(3), [s](occl_comm_t comm, int rank, int n) {
    if (occl_barrier(comm, nullptr) != OCCL_SUCCESS) return 1;
    float x[16] = {};
    Tensor1D t(x, 16, dl_float(32));
    const auto t0 = Clock::now();
    occl_status_t st = occl_all_reduce(&t, &t, rank == 1 ? OCCL_BXOR : OCCL_SUM, comm, nullptr);
    bool ok = rank == 1 ? failed_with(rank, "all_reduce", st, {"BXOR"})
                        : failed_with(rank, "all_reduce", st, {"rank 1", "rejected", "all_reduce", "BXOR"});
    const double took = seconds_since(t0);
    if (took > 5.0) std::fprintf(stderr, "rank %d: the answer took %.1f s (deadline 20 s)\n", rank, took);
    // Rank 1 stays until the others have their answer: it must come from
    // the rejection, not from rank 1 leaving.
    s->reported.fetch_add(1);
    wait_for(s->reported, n);
    return ok && took < 5.0 ? 0 : 1;
  });
  EXPECT_TRUE(res.ok()) << res.summary();
}

// Every rank rejects the same call: nobody is left waiting, so every
// communicator stays usable (the notices of the others' rejections are not
// errors for a rank that rejected that call too).
TEST(RejectedCall, AllRanksRejectingStayUsable) {
  JobResult res = run_ranks(job(3), [](occl_comm_t comm, int rank, int n) {
    float x[16] = {};
    Tensor1D t(x, 16, dl_float(32));
    for (int i = 0; i < 3; ++i) {
      occl_status_t st = occl_all_reduce(&t, &t, OCCL_BXOR, comm, nullptr);
      if (st != OCCL_ERR_INVALID_ARGUMENT) return 1;
      if (omniccl::testing::all_reduce_works(comm, rank, n, 8) != 0) return 1;
    }
    return 0;
  });
  EXPECT_TRUE(res.ok()) << res.summary();
}

// ---------------------------------------------------------------------------
// A mismatch reaches the rank whose call diverged
// ---------------------------------------------------------------------------

// Rank 0 broadcasts (root 0) where ranks 1-3 call all_reduce. The receivers
// report MISMATCH naming both calls; rank 0's broadcast only sends, so it may
// return first, but its next call (another broadcast, which also only
// sends) must fail with the same report.
// Over shared memory the root reads a word its peers bump; over TCP it
// reads its control sockets before each call.
class MismatchReachesEveryRank : public ::testing::TestWithParam<const char*> {};

TEST_P(MismatchReachesEveryRank, BroadcastRootHearsOfIt) {
  SharedBlock sh;
  ASSERT_NE(sh.get(), nullptr);
  Shared* s = sh.get();
  JobOptions o = job(4);
  o.transport = GetParam();
  JobResult res = run_ranks(o, [s](occl_comm_t comm, int rank, int n) {
    if (occl_barrier(comm, nullptr) != OCCL_SUCCESS) return 1;
    float x[64] = {};
    Tensor1D t(x, 64, dl_float(32));
    const std::vector<std::string> needles = {"broadcast", "all_reduce", "do not match"};
    if (rank != 0) {
      bool ok = failed_with(rank, "all_reduce", occl_all_reduce(&t, &t, OCCL_SUM, comm, nullptr), needles);
      s->reported.fetch_add(1);
      wait_for(s->reported, n - 1);
      wait_for(s->done, 1);
      return ok ? 0 : 1;
    }
    occl_status_t st = occl_broadcast(&t, 0, comm, nullptr);
    bool ok = true;
    if (st != OCCL_SUCCESS) {
      ok = failed_with(rank, "broadcast", st, needles);
    } else {
      wait_for(s->reported, n - 1);
      std::this_thread::sleep_for(std::chrono::milliseconds(50));  // the notices are on their way
      st = occl_broadcast(&t, 0, comm, nullptr);
      ok = failed_with(rank, "the broadcast after the mismatch", st, needles) && st == OCCL_ERR_MISMATCH;
    }
    s->done.store(1);
    return ok ? 0 : 1;
  });
  EXPECT_TRUE(res.ok()) << res.summary();
}

INSTANTIATE_TEST_SUITE_P(Transports, MismatchReachesEveryRank, ::testing::Values("shm", "tcp"),
                         [](const ::testing::TestParamInfo<const char*>& p) { return std::string(p.param); });

// ---------------------------------------------------------------------------
// Two threads on one communicator
// ---------------------------------------------------------------------------

// Each of 2 ranks has two threads that all_reduce (int64, 64 elements, in
// place) on the same communicator; thread k of rank r contributes
// (r + 1) * (k + 1), so thread k expects 3 (k + 1), and a result that mixes
// the threads (1 + 4 = 5) is wrong. Rank 0's thread 0 enters first and waits
// for its peer; rank 0's thread 1 comes 100 ms later (the overlap, found
// there); rank 1's thread 1 then enters at 200 ms, its thread 0 at 300 ms.
// Without more, rank 0's thread 0 pairs with rank 1's thread 1 and both
// "succeed" with 5. Every operation involved must fail instead, promptly.
TEST(TwoThreadsOnOneCommunicator, EveryOperationInvolvedFails) {
  JobResult res = run_ranks(job(2), [](occl_comm_t comm, int rank, int) {
    if (occl_barrier(comm, nullptr) != OCCL_SUCCESS) return 1;
    const auto t0 = Clock::now();
    std::atomic<int> bad{0};
    auto thread_fn = [&](int k, int start_ms) {
      std::this_thread::sleep_until(t0 + std::chrono::milliseconds(start_ms));
      std::vector<int64_t> buf(64, int64_t(rank + 1) * (k + 1));
      Tensor1D t(buf.data(), 64, dl_int(64));
      const auto t1 = Clock::now();
      occl_status_t st = occl_all_reduce(&t, &t, OCCL_SUM, comm, nullptr);
      const double took = seconds_since(t1);
      if (st == OCCL_SUCCESS) {
        std::fprintf(stderr, "rank %d thread %d: all_reduce succeeded with %lld (want %d, or an error)\n", rank, k,
                     static_cast<long long>(buf[0]), 3 * (k + 1));
        bad.fetch_add(1);
      } else if (took > 3.0) {
        std::fprintf(stderr, "rank %d thread %d: the error took %.1f s: %s\n", rank, k, took, occl_last_error());
        bad.fetch_add(1);
      }
    };
    std::thread a(thread_fn, 0, rank == 0 ? 0 : 300);
    std::thread b(thread_fn, 1, rank == 0 ? 100 : 200);
    a.join();
    b.join();
    return bad.load() == 0 ? 0 : 1;
  });
  EXPECT_TRUE(res.ok()) << res.summary();
}

}  // namespace
