// Reliability: a failure that only some ranks see must reach every rank
// involved, promptly and with the message that explains it, never leave a
// silently wrong result or a rank waiting out its deadline:
//   - a call one rank rejects for its arguments (the others' matching call
//     fails, naming the rejection, and every communicator stays usable);
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

// ---------------------------------------------------------------------------
// A call one rank rejects
// ---------------------------------------------------------------------------

/// The communicator still works on every rank, checked with values: two
/// all_reduces of `count` elements (a small one and one of `count`).
bool still_usable(occl_comm_t comm, int rank, int n, int64_t count) {
  const bool ok = omniccl::testing::all_reduce_works(comm, rank, n, 8) == 0 &&
                  omniccl::testing::all_reduce_works(comm, rank, n, count) == 0;
  if (!ok) std::fprintf(stderr, "rank %d: the communicator is not usable after the rejected call\n", rank);
  return ok;
}

// gatherv of 2 ranks: the root's receive layout has the two parts overlap,
// which it rejects before sending anything; rank 1's call is valid. Rank 1's
// part is only to send: it may complete before the rejection reaches it
// (its call then succeeds; the root drops the data in its next call), else
// it fails naming the rejection. A large part does not fit the link's
// buffers: rank 1 waits until the root's next call drops it. Either way no
// rank waits for its deadline, and both communicators stay usable, checked
// with values right after.
void root_rejects_gatherv(int64_t elems, const char* transport) {
  SharedBlock sh;
  ASSERT_NE(sh.get(), nullptr);
  Shared* shared = sh.get();
  JobOptions o = job(2);
  o.transport = transport;
  JobResult res = run_ranks(o, [elems, shared](occl_comm_t comm, int rank, int n) {
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
    } else if (st != OCCL_SUCCESS) {
      ok &= failed_with(rank, "gatherv", st, {"rank 0", "rejected", "gatherv", "overlap"});
    }
    ok &= still_usable(comm, rank, n, elems);
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

class RejectedCallOn : public ::testing::TestWithParam<const char*> {};

TEST_P(RejectedCallOn, RootRejectsGathervPeerTold) { root_rejects_gatherv(4, GetParam()); }
TEST_P(RejectedCallOn, RootRejectsLargeGathervPeerDoesNotWait) { root_rejects_gatherv(1 << 20, GetParam()); }

// all_reduce of 3 ranks where rank 1 passes BXOR on float32 (undefined):
// ranks 0 and 2 wait for rank 1's data, and must hear of the rejection
// instead of waiting out their deadline. With `elems` large, ranks 0 and 2
// are in the middle of messages to each other and to rank 1 when they hear
// of it: every link must come back in step, so the communicator then works
// on every rank.
void others_of_an_all_reduce(int64_t elems, const char* transport) {
  SharedBlock sh;
  ASSERT_NE(sh.get(), nullptr);
  Shared* s = sh.get();
  JobOptions o = job(3);
  o.transport = transport;
  JobResult res = run_ranks(o, [s, elems](occl_comm_t comm, int rank, int n) {
    if (occl_barrier(comm, nullptr) != OCCL_SUCCESS) return 1;
    std::vector<float> x(static_cast<size_t>(elems), 1.0f);
    Tensor1D t(x.data(), elems, dl_float(32));
    const auto t0 = Clock::now();
    occl_status_t st = occl_all_reduce(&t, &t, rank == 1 ? OCCL_BXOR : OCCL_SUM, comm, nullptr);
    bool ok = rank == 1 ? failed_with(rank, "all_reduce", st, {"BXOR"})
                        : failed_with(rank, "all_reduce", st, {"rank 1", "rejected", "all_reduce", "BXOR"});
    ok &= rank == 1 || st == OCCL_ERR_MISMATCH;
    const double took = seconds_since(t0);  // the answer's time, not the check's below
    ok &= still_usable(comm, rank, n, elems);
    if (took > 5.0) std::fprintf(stderr, "rank %d: the answer took %.1f s (deadline 20 s)\n", rank, took);
    // Rank 1 stays until the others have their answer: it must come from
    // the rejection, not from rank 1 leaving.
    s->reported.fetch_add(1);
    wait_for(s->reported, n);
    return ok && took < 5.0 ? 0 : 1;
  });
  EXPECT_TRUE(res.ok()) << res.summary();
}

TEST_P(RejectedCallOn, OthersOfAnAllReduceAreTold) { others_of_an_all_reduce(16, GetParam()); }
TEST_P(RejectedCallOn, OthersOfALargeAllReduceAreTold) { others_of_an_all_reduce(1 << 20, GetParam()); }

// Rounds of calls where one rank, a different one each round, rejects its
// arguments (a root out of range for a broadcast, an op undefined for the
// dtype in a reduce_scatter, an unknown op in an all_reduce), with messages
// of every size in flight: after each the communicator works on every rank,
// checked with values.
TEST_P(RejectedCallOn, RoundsOfRejectionsKeepEveryRankUsable) {
  JobOptions o = job(4);
  o.transport = GetParam();
  JobResult res = run_ranks(o, [](occl_comm_t comm, int rank, int n) {
    const int64_t sizes[] = {1, 300, 5000, 1 << 18};
    for (int round = 0; round < 8; ++round) {
      const int64_t elems = sizes[round % 4];
      const int bad = round % n;
      std::vector<float> x(static_cast<size_t>(elems) * size_t(n), float(rank + 1)), y(static_cast<size_t>(elems));
      Tensor1D whole(x.data(), elems * n, dl_float(32)), part(y.data(), elems, dl_float(32));
      occl_status_t st = OCCL_SUCCESS;
      const char* call = "";
      switch (round % 3) {
        case 0:
          call = "broadcast";
          st = occl_broadcast(&whole, rank == bad ? n + 3 : (bad + 1) % n, comm, nullptr);
          break;
        case 1:
          call = "reduce_scatter";
          st = occl_reduce_scatter(&whole, &part, rank == bad ? OCCL_BAND : OCCL_SUM, comm, nullptr);
          break;
        default:
          call = "all_reduce";
          st = occl_all_reduce(&whole, &whole, rank == bad ? static_cast<occl_red_op_t>(99) : OCCL_MAX, comm, nullptr);
          break;
      }
      if (rank == bad) {
        RANK_CHECK(st == OCCL_ERR_INVALID_ARGUMENT, rank, std::string(call) + ": " + occl_last_error());
      } else if (st != OCCL_SUCCESS) {
        RANK_CHECK(st == OCCL_ERR_MISMATCH && contains_ci(occl_last_error(), "rejected"), rank,
                   std::string(call) + ": " + occl_status_string(st) + ": " + occl_last_error());
      }
      RANK_CHECK(still_usable(comm, rank, n, elems), rank, std::string("after round ") + std::to_string(round));
    }
    return 0;
  });
  EXPECT_TRUE(res.ok()) << res.summary();
}

// gatherv of 2 ranks, small parts, that root 0 rejects. Rank 1 calls it
// only once the root has returned, so the notice is there already; but its
// part fits the link, so its call completes without waiting and succeeds
// (the root drops the data in its next call). It must still hear of it: its
// next call logs a COLL WARN naming the rejected call and why.
TEST_P(RejectedCallOn, SenderThatCompletedIsWarnedAtItsNextCall) {
  SharedBlock sh;
  ASSERT_NE(sh.get(), nullptr);
  Shared* shared = sh.get();
  JobOptions o = job(2);
  o.transport = GetParam();
  o.env["OMNICCL_DEBUG"] = "WARN";
  JobResult res = run_ranks(o, [shared](occl_comm_t comm, int rank, int n) {
    RANK_OK(occl_barrier(comm, nullptr), rank);
    int32_t send[4] = {rank, rank, rank, rank}, recv[8] = {};
    Tensor1D ts(send, 4, dl_int(32)), tr(recv, 8, dl_int(32));
    int64_t counts[2] = {4, 4}, displs[2] = {0, 2};  // the parts overlap
    if (rank == 1) wait_for(shared->done, 1);
    occl_status_t st = occl_gatherv(&ts, &tr, counts, displs, 0, comm, nullptr);
    if (rank == 0) {
      RANK_CHECK(st == OCCL_ERR_INVALID_ARGUMENT, rank, occl_last_error());
      shared->done.fetch_add(1);
      RANK_CHECK(still_usable(comm, rank, n, 16), rank, "after the rejected gatherv");
      shared->reported.fetch_add(1);
      wait_for(shared->reported, n);  // rank 1's answers must not come from rank 0 leaving
      return 0;
    }
    RANK_CHECK(st == OCCL_SUCCESS, rank, std::string("gatherv: ") + occl_last_error());
    ::testing::internal::CaptureStderr();
    const bool usable = still_usable(comm, rank, n, 16);
    const std::string log = ::testing::internal::GetCapturedStderr();
    RANK_CHECK(usable, rank, "after the rejected gatherv");
    const bool warned = contains_ci(log, "COLL WARN") && contains_ci(log, "had completed here") &&
                        contains_ci(log, "rank 0 rejected the arguments of its gatherv") && contains_ci(log, "overlap");
    RANK_CHECK(warned, rank, "no COLL WARN about the rejected gatherv at the next call; the log was:\n" + log);
    shared->reported.fetch_add(1);
    return 0;
  });
  EXPECT_TRUE(res.ok()) << res.summary();
}

INSTANTIATE_TEST_SUITE_P(Transports, RejectedCallOn, ::testing::Values("shm", "tcp"),
                         [](const ::testing::TestParamInfo<const char*>& i) { return std::string(i.param); });

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

// Shared memory, 3 ranks: root 0 rejects a gatherv in which rank 1's part
// is 4 MiB, more than the link holds (a 2 MiB ring), so rank 1 is in the
// middle of that message when it hears of the rejection, and must finish it
// before its call can end (half a message would leave the link out of step):
// rank 0 has to read it. Rank 0's next call, a broadcast from rank 1 forced
// onto the ring (1 -> 2 -> 0), never reads from rank 1, and waits for rank 2,
// which waits for rank 1: only rank 0 dropping rank 1's stale message while
// it waits (Engine::drain_stale) lets rank 1 finish. Rank 1's two calls end
// in seconds, not at the 20 s deadline, and the broadcast delivers.
TEST(RejectedCallOnShm, StaleMessageIsDrainedWhileWaitingForOtherPeers) {
  SharedBlock sh;
  ASSERT_NE(sh.get(), nullptr);
  Shared* shared = sh.get();
  JobOptions o = job(3);
  o.transport = "shm";
  o.env["OMNICCL_ALGO"] = "broadcast=ring";
  JobResult res = run_ranks(o, [shared](occl_comm_t comm, int rank, int n) {
    RANK_OK(occl_barrier(comm, nullptr), rank);
    const int64_t big = int64_t(1) << 20;                          // int32 elements: 4 MiB
    int64_t counts[3] = {4, big, 4}, displs[3] = {0, 2, big + 4};  // rank 0's and 1's parts overlap
    std::vector<int32_t> send(static_cast<size_t>(counts[rank]), rank), recv(static_cast<size_t>(big + 8), -1);
    Tensor1D ts(send.data(), counts[rank], dl_int(32)), tr(recv.data(), big + 8, dl_int(32));
    const auto t0 = Clock::now();
    occl_status_t st = occl_gatherv(&ts, &tr, counts, displs, 0, comm, nullptr);
    if (rank == 0) {
      RANK_CHECK(st == OCCL_ERR_INVALID_ARGUMENT, rank, occl_last_error());
    } else if (st != OCCL_SUCCESS) {
      RANK_CHECK(failed_with(rank, "gatherv", st, {"rank 0", "rejected", "gatherv"}), rank, "gatherv");
    }
    std::vector<int32_t> b(256, rank == 1 ? 7 : -1);
    Tensor1D tb(b.data(), 256, dl_int(32));
    RANK_OK(occl_broadcast(&tb, 1, comm, nullptr), rank);
    const double took = seconds_since(t0);
    RANK_CHECK(b[0] == 7 && b[255] == 7, rank, "the broadcast did not deliver");
    RANK_CHECK(took < 5.0, rank, "the gatherv and the broadcast took " + std::to_string(took) + " s (deadline 20 s)");
    RANK_CHECK(still_usable(comm, rank, n, 4096), rank, "after the broadcast");
    // Each stays until all have their answers: they must not come from a
    // rank leaving.
    shared->reported.fetch_add(1);
    wait_for(shared->reported, n);
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
