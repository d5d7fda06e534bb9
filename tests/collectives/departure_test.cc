// A rank that leaves (exits at once, or destroys its communicator) right
// after its own part of a collective is done must not fail a peer's same
// call: a departure is an error only for a wait that still needs something
// the departed rank has not delivered. What it already sent is consumed
// first. A later call that does need it still fails promptly, naming it.
#include <gtest/gtest.h>
#include <sys/mman.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <new>
#include <ostream>
#include <string>
#include <thread>
#include <vector>

#include "harness.h"
#include "reference.h"

namespace {

using occl_ref::cat;
using namespace omniccl::testing;

/// How the leaving rank goes: "exit" (_exit(0) with the communicator still
/// open: its connections close without goodbye) or "destroy"
/// (occl_comm_destroy, then _exit(0)).
[[noreturn]] void leave(occl_comm_t comm, const std::string& how) {
  if (how == "destroy") occl_comm_destroy(comm);
  ::_exit(0);
}

struct Case {
  std::string transport;
  std::string how;
};

void PrintTo(const Case& c, std::ostream* os) { *os << c.transport << "/" << c.how; }

std::string case_name(const ::testing::TestParamInfo<Case>& p) { return p.param.transport + "_" + p.param.how; }

class Departure : public ::testing::TestWithParam<Case> {};

JobOptions opts(const Case& c) { return job_options(3, c.transport); }

/// Shared by the forked ranks: per rank, whether its later call's error
/// named rank 2.
struct Shared {
  std::atomic<int> named_leaver[3];
};
static_assert(std::atomic<int>::is_always_lock_free, "shared between processes");

Shared* make_shared_block() {
  void* p = ::mmap(nullptr, sizeof(Shared), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  if (p == MAP_FAILED) return nullptr;
  return new (p) Shared{};
}

/// The later call needs the departed rank: it fails with PEER_FAILURE well
/// before the 30 s deadline. Whether the error names rank 2 is recorded: the
/// survivor that waits on rank 2 names it; the other may hear first that
/// this survivor, which failed and left, is gone.
int later_call_fails(occl_comm_t comm, int rank, Shared* shared) {
  float v = 1;
  Tensor1D t(&v, 1, dl_float(32));
  const auto t0 = std::chrono::steady_clock::now();
  occl_status_t st = occl_all_reduce(&t, &t, OCCL_SUM, comm, nullptr);
  const std::string msg = occl_last_error();
  RANK_CHECK(st == OCCL_ERR_PEER_FAILURE, rank,
             cat("all_reduce after rank 2 left gave ", occl_status_string(st), ": ", msg));
  RANK_CHECK(seconds_since(t0) < 10, rank, cat("the failure took ", seconds_since(t0), " s"));
  if (contains_ci(msg, "rank 2 ")) shared->named_leaver[rank].store(1);
  return 0;
}

/// One rooted call of a scenario, run by every rank: sets up this rank's
/// buffers, makes the call and stores its status in *st; when the call
/// succeeded on rank 0, checks the result (0 = right, else 1 after saying
/// what is wrong).
using RootedCall = std::function<int(occl_comm_t comm, int rank, int n, occl_status_t* st)>;

/// Three ranks, three rounds: rank 2 makes `call` and leaves at once (c.how);
/// rank 1 makes it 300 ms late, so rank 0 (the root) is still waiting, on
/// rank 1 which is alive, when rank 2 is gone. Rank 0 has everything it
/// needs from rank 2, which arrived before it left, and must succeed;
/// deterministic, as rank 0 always sleeps while rank 2's connections close.
/// Then a call that needs rank 2 must fail, naming it.
void expect_root_keeps_what_the_leaver_sent(const Case& c, const char* what, const RootedCall& call) {
  Shared* shared = make_shared_block();
  ASSERT_NE(shared, nullptr);
  for (int round = 0; round < 3; ++round) {
    for (auto& f : shared->named_leaver) f.store(0);
    JobResult res = run_ranks(opts(c), [&](occl_comm_t comm, int rank, int n) {
      if (rank == 1) std::this_thread::sleep_for(std::chrono::milliseconds(300));
      occl_status_t st = OCCL_ERR_INTERNAL;
      const int wrong = call(comm, rank, n, &st);
      if (rank == 2) {
        if (st != OCCL_SUCCESS) return 1;
        leave(comm, c.how);
      }
      RANK_CHECK(st == OCCL_SUCCESS, rank,
                 cat(what, " while rank 2 left gave ", occl_status_string(st), ": ", occl_last_error()));
      if (wrong != 0) return 1;
      if (later_call_fails(comm, rank, shared) != 0) return 1;
      ::_exit(0);  // the communicator failed; the peers are gone or going
    });
    EXPECT_TRUE(res.ok()) << what << ", round " << round << res.summary();
    EXPECT_TRUE(shared->named_leaver[0].load() || shared->named_leaver[1].load())
        << what << ", round " << round << ": no survivor's error named rank 2";
    if (!res.ok()) break;
  }
  ::munmap(shared, sizeof(Shared));
}

// Gather to rank 0, direct from each rank.
TEST_P(Departure, GatherRootKeepsWhatTheLeaverSent) {
  expect_root_keeps_what_the_leaver_sent(
      GetParam(), "gather", [](occl_comm_t comm, int rank, int n, occl_status_t* st) {
        constexpr int kCount = 1000;
        std::vector<int32_t> mine(kCount), all(size_t(kCount) * n, -1);
        for (int i = 0; i < kCount; ++i) mine[size_t(i)] = rank * 100000 + i;
        Tensor1D s(mine.data(), kCount, dl_int(32));
        Tensor1D r(all.data(), kCount * n, dl_int(32));
        *st = occl_gather(&s, rank == 0 ? &r : nullptr, 0, comm, nullptr);
        if (*st != OCCL_SUCCESS || rank != 0) return 0;
        for (int p = 0; p < n; ++p) {
          for (int i = 0; i < kCount; ++i) {
            const int32_t want = p * 100000 + i, got = all[size_t(p) * kCount + size_t(i)];
            RANK_CHECK(got == want, rank, cat("gathered element ", i, " of rank ", p, ": ", got, ", want ", want));
          }
        }
        return 0;
      });
}

// A reduction: reduce SUM to rank 0 (small: rank 2's part fits in its link,
// so its send completes at once). Rank 0 reduces it after rank 1's.
TEST_P(Departure, ReduceRootKeepsWhatTheLeaverSent) {
  expect_root_keeps_what_the_leaver_sent(
      GetParam(), "reduce", [](occl_comm_t comm, int rank, int n, occl_status_t* st) {
        constexpr int kCount = 1000;
        std::vector<int64_t> x(kCount);
        for (int i = 0; i < kCount; ++i) x[size_t(i)] = int64_t(rank + 1) * (i + 1);
        Tensor1D t(x.data(), kCount, dl_int(64));
        *st = occl_reduce(&t, &t, OCCL_SUM, 0, comm, nullptr);
        if (*st != OCCL_SUCCESS || rank != 0) return 0;
        for (int i = 0; i < kCount; ++i) {
          const int64_t want = int64_t(n) * (n + 1) / 2 * (i + 1);
          RANK_CHECK(x[size_t(i)] == want, rank, cat("element ", i, ": ", x[size_t(i)], ", want ", want));
        }
        return 0;
      });
}

// A normal destroy over TCP with bytes it never read (a message rank 0 sent
// that rank 1 never received): its connections still end in order, as its
// goodbye says (the writing side shut, what still arrives dropped, then
// closed), not reset. Rank 0 then receives the message rank 1 sent before it
// left, and the next receive from rank 1 says rank 1 closed its connection.
TEST(DepartureTcp, DestroyWithUnreadBytesClosesInOrder) {
  for (int round = 0; round < 3; ++round) {
    JobResult res = run_ranks(job_options(2, "tcp"), [](occl_comm_t comm, int rank, int) {
      std::vector<float> unread(16384, 1.0f);
      float v = rank == 1 ? 42.0f : 0.0f;
      Tensor1D one(&v, 1, dl_float(32));
      if (rank == 1) {
        RANK_OK(occl_send(&one, 0, comm, nullptr), rank);
        std::this_thread::sleep_for(std::chrono::milliseconds(200));  // rank 0's message has arrived, unread
        RANK_CHECK(occl_comm_destroy(comm) == OCCL_SUCCESS, rank, cat("destroy: ", occl_last_error()));
        ::_exit(0);
      }
      Tensor1D big(unread.data(), int64_t(unread.size()), dl_float(32));
      RANK_OK(occl_send(&big, 1, comm, nullptr), rank);             // buffered: completes without rank 1
      std::this_thread::sleep_for(std::chrono::milliseconds(500));  // rank 1 has destroyed
      RANK_OK(occl_recv(&one, 1, comm, nullptr), rank);
      RANK_CHECK(v == 42.0f, rank, cat("received ", v, ", want 42"));
      occl_status_t st = occl_recv(&one, 1, comm, nullptr);
      const std::string msg = occl_last_error();
      RANK_CHECK(st == OCCL_ERR_PEER_FAILURE, rank, cat("recv after rank 1 left gave ", occl_status_string(st)));
      RANK_CHECK(contains_ci(msg, "closed its TCP data connection"), rank,
                 "rank 1's connection did not end in order: " + msg);
      ::_exit(0);
    });
    ASSERT_TRUE(res.ok()) << "round " << round << res.summary();
  }
}

INSTANTIATE_TEST_SUITE_P(Leavers, Departure,
                         ::testing::Values(Case{"shm", "exit"}, Case{"shm", "destroy"}, Case{"tcp", "exit"},
                                           Case{"tcp", "destroy"}),
                         case_name);

}  // namespace
