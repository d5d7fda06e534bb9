// The engine's small-step path (Engine::run_quick, OMNICCL_SMALL_PATH): steps
// of a few small transfers that move straight through the links, and hand
// their progress to the general loop when they have to wait longer.
// Two ranks as threads of this process over real meshes (shared memory and
// TCP), each with its own engine:
//   - an exchange loop completes on the small path (its counter moves) and
//     every value arrives, on both transports;
//   - with the path off nothing takes it, and the results are the same;
//   - steps of one message each move at once (the sender never waits);
//   - a receive whose message comes 100 ms late is handed to the general
//     loop, which finishes it with the right data;
//   - ranks that differ in the setting interoperate (the same messages);
//   - a reduction (recv-reduce) on the path, and one handed over;
//   - a mismatch seen on the path is still reported with the differing field;
//   - a step whose first message's header a point-to-point listen has read
//     (and holds) does not take the path, and its values still arrive.
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstring>
#include <memory>
#include <mutex>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "algorithm/engine.h"
#include "common/status.h"
#include "common/time.h"
#include "transport/mesh.h"
#include "engine_pair.h"
#include "mesh_exchange.h"

namespace omniccl {
namespace {

using test::two_meshes;
using transport::Mesh;

OpSignature sig_of(OpKind kind, uint64_t seq, uint64_t count, DType dtype = DType::kFloat32) {
  OpSignature s;
  s.kind = kind;
  s.dtype = dtype;
  s.redop = RedOp::kSum;
  s.seq = seq;
  s.count = count;
  s.algo = 1;
  return s;
}

/// Runs body(rank, engine) on two threads, each engine with the small path
/// as `small_path` says; returns each rank's error ("" if none).
template <typename Body>
std::vector<std::string> on_two_ranks(std::vector<std::unique_ptr<Mesh>>& meshes, std::vector<bool> small_path,
                                      std::vector<Engine::SmallPathStats>& stats, Body body) {
  stats.assign(2, {});
  return test::engines_on_two_threads(
      meshes,
      [&](int rank, Engine& e) {
        e.set_small_path(small_path[static_cast<size_t>(rank)]);
        body(rank, e);
      },
      [&](int rank, Engine& e) { stats[static_cast<size_t>(rank)] = e.small_path_stats(); });
}

/// `iters` steps of {send 8 bytes to the peer, receive 8 bytes from it},
/// each value naming its sender and iteration; every received value checked.
void exchange_loop(int rank, Engine& e, int iters, std::atomic<int>& wrong) {
  const int peer = 1 - rank;
  for (int i = 0; i < iters; ++i) {
    float out[2] = {float(rank * 100000 + i), float(-i)};
    float in[2] = {0, 0};
    e.begin(sig_of(OpKind::kAllGather, uint64_t(i + 1), 2), RedOp::kSum, 20000);
    e.run({Transfer::send(peer, out, sizeof out, 0), Transfer::recv(peer, in, sizeof in, 0)});
    if (in[0] != float(peer * 100000 + i) || in[1] != float(-i)) ++wrong;
  }
}

/// exchange_loop for `iters` steps on two ranks over `transport`, the small
/// path on or off per rank (`on`): checks that every value arrived, and that
/// a rank with the path on started every step there (done there or handed
/// over) and one with it off none. Returns the ranks' counters.
std::vector<Engine::SmallPathStats> exchange_with(const std::string& transport, const std::vector<bool>& on,
                                                  int iters) {
  std::vector<Engine::SmallPathStats> stats(2);
  auto meshes = two_meshes(transport);
  if (!meshes[0] || !meshes[1]) return stats;  // (two_meshes failed the test)
  std::atomic<int> wrong{0};
  auto errors = on_two_ranks(meshes, on, stats, [&](int rank, Engine& e) { exchange_loop(rank, e, iters, wrong); });
  EXPECT_EQ(errors[0], "");
  EXPECT_EQ(errors[1], "");
  EXPECT_EQ(wrong.load(), 0);
  for (size_t r = 0; r < 2; ++r) {
    EXPECT_EQ(stats[r].done + stats[r].handed_over, on[r] ? uint64_t(iters) : 0u) << "rank " << r;
  }
  return stats;
}

class SmallPath : public ::testing::TestWithParam<std::string> {};

TEST_P(SmallPath, ExchangeLoopTakesThePathAndDeliversEveryValue) {
  const auto stats = exchange_with(GetParam(), {true, true}, 2000);
  // Every step went the small way; most end there when the peer answers
  // within the spin phase, but on a loaded machine waits may be longer: at
  // least some must. Shared memory moves them as whole messages
  // (Engine::run_direct); TCP has no such calls.
  for (int r = 0; r < 2; ++r) {
    EXPECT_GT(stats[r].done, 0u) << "rank " << r;
    if (GetParam() == "shm") {
      EXPECT_GT(stats[r].direct, 0u) << "rank " << r;
    } else {
      EXPECT_EQ(stats[r].direct, 0u) << "rank " << r;
    }
  }
}

// Exchanges of 1 KiB, 4 KiB and 40 bytes in turn, 3000 steps (about three
// times round each 2 MiB ring), every value checked: whole messages cross the
// ring's end, and steps some of whose transfers had to wait finish in the
// general loop without repeating what already moved.
TEST_P(SmallPath, MixedSizesCrossTheRingsEnd) {
  auto meshes = two_meshes(GetParam());
  ASSERT_TRUE(meshes[0] && meshes[1]);
  std::vector<Engine::SmallPathStats> stats;
  std::atomic<int> wrong{0};
  auto errors = on_two_ranks(meshes, {true, true}, stats, [&](int rank, Engine& e) {
    const int peer = 1 - rank;
    const size_t counts[] = {256, 1024, 10};  // float32 elements
    std::vector<float> out(1024), in(1024);
    for (int i = 0; i < 3000; ++i) {
      const size_t count = counts[i % 3];
      for (size_t k = 0; k < count; ++k) out[k] = float(rank * 1000000 + i * 1000 + int(k % 1000));
      e.begin(sig_of(OpKind::kAllGather, uint64_t(i + 1), count), RedOp::kSum, 20000);
      e.run({Transfer::send(peer, out.data(), count * sizeof(float), 0),
             Transfer::recv(peer, in.data(), count * sizeof(float), 0)});
      for (size_t k = 0; k < count; ++k) {
        if (in[k] != float(peer * 1000000 + i * 1000 + int(k % 1000))) ++wrong;
      }
    }
  });
  EXPECT_EQ(errors[0], "");
  EXPECT_EQ(errors[1], "");
  EXPECT_EQ(wrong.load(), 0);
  for (int r = 0; r < 2; ++r) {
    EXPECT_EQ(stats[r].done + stats[r].handed_over, 3000u) << "rank " << r;
    if (GetParam() == "shm") {
      EXPECT_GT(stats[r].direct, 0u) << "rank " << r;
    }
  }
}

// Whether a link's payloads go through a socket (the ring all_gather then
// sends before it copies its own block): TCP yes, shared memory no.
TEST_P(SmallPath, OnlyTcpLinksSayTheyGoThroughASocket) {
  auto meshes = two_meshes(GetParam());
  ASSERT_TRUE(meshes[0] && meshes[1]);
  for (int r = 0; r < 2; ++r) {
    EXPECT_EQ(meshes[size_t(r)]->link(1 - r).socket(), GetParam() == "tcp") << "rank " << r;
    Engine e(*meshes[size_t(r)]);
    EXPECT_EQ(e.over_socket(1 - r), GetParam() == "tcp") << "rank " << r;
    EXPECT_FALSE(e.over_socket(r)) << "rank " << r << " to itself";
  }
}

TEST_P(SmallPath, OffTakesTheGeneralLoopWithTheSameResults) { exchange_with(GetParam(), {false, false}, 500); }

TEST_P(SmallPath, RanksThatDifferInTheSettingInteroperate) { exchange_with(GetParam(), {true, false}, 500); }

// Steps of one message (a 2-rank rooted operation's): each moves at once,
// counted as done on the path, and every value arrives. On shared memory the
// sender's 1000 records of 64 bytes fit in its ring, so every send is one
// whole message (Engine::run_one_now).
TEST_P(SmallPath, OneMessageStepsMoveAtOnce) {
  auto meshes = two_meshes(GetParam());
  ASSERT_TRUE(meshes[0] && meshes[1]);
  std::vector<Engine::SmallPathStats> stats;
  constexpr int kSteps = 1000;
  std::atomic<int> wrong{0};
  auto errors = on_two_ranks(meshes, {true, true}, stats, [&](int rank, Engine& e) {
    for (int i = 0; i < kSteps; ++i) {
      e.begin(sig_of(OpKind::kScatter, uint64_t(i + 1), 2), RedOp::kSum, 20000);
      if (rank == 0) {
        const float v[2] = {float(i), float(-3 * i)};
        e.run({Transfer::send(1, v, sizeof v, 0)});
      } else {
        float got[2] = {0, 0};
        e.run({Transfer::recv(0, got, sizeof got, 0)});
        if (got[0] != float(i) || got[1] != float(-3 * i)) ++wrong;
      }
    }
  });
  EXPECT_EQ(errors[0], "");
  EXPECT_EQ(errors[1], "");
  EXPECT_EQ(wrong.load(), 0);
  EXPECT_EQ(stats[0].done, uint64_t(kSteps));
  EXPECT_EQ(stats[0].direct, GetParam() == "shm" ? uint64_t(kSteps) : 0u);
  EXPECT_EQ(stats[1].done + stats[1].handed_over, uint64_t(kSteps));
}

TEST_P(SmallPath, ALateMessageIsHandedToTheGeneralLoop) {
  auto meshes = two_meshes(GetParam());
  ASSERT_TRUE(meshes[0] && meshes[1]);
  std::vector<Engine::SmallPathStats> stats;
  float got = 0;
  auto errors = on_two_ranks(meshes, {true, true}, stats, [&](int rank, Engine& e) {
    e.begin(sig_of(OpKind::kBroadcast, 1, 1), RedOp::kSum, 20000);
    if (rank == 0) {
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
      const float v = 42.5f;
      e.run({Transfer::send(1, &v, sizeof v, 1)});
    } else {
      e.run({Transfer::recv(0, &got, sizeof got, 1)});
    }
  });
  EXPECT_EQ(errors[0], "");
  EXPECT_EQ(errors[1], "");
  EXPECT_EQ(got, 42.5f);
  EXPECT_EQ(stats[0].done, 1u);  // the send found room at once
  EXPECT_EQ(stats[1].handed_over, 1u);
  EXPECT_EQ(stats[1].done, 0u);
}

TEST_P(SmallPath, ReductionsOnThePathAndHandedOver) {
  auto meshes = two_meshes(GetParam());
  ASSERT_TRUE(meshes[0] && meshes[1]);
  std::vector<Engine::SmallPathStats> stats;
  constexpr int kN = 256;  // 1 KiB of float32
  auto errors = on_two_ranks(meshes, {true, true}, stats, [&](int rank, Engine& e) {
    const int peer = 1 - rank;
    for (int round = 0; round < 3; ++round) {
      std::vector<float> mine(kN), acc(kN);
      for (int i = 0; i < kN; ++i) mine[size_t(i)] = float((rank + 1) * 1000 + i + round);
      e.begin(sig_of(OpKind::kAllReduce, uint64_t(round + 1), kN), RedOp::kSum, 20000);
      // Round 1: rank 0 sends late, so rank 1's recv-reduce waits in the
      // general loop (with its send done: were it sent again, round 2 would
      // read it and fail).
      if (round == 1 && rank == 0) std::this_thread::sleep_for(std::chrono::milliseconds(100));
      e.run({Transfer::send(peer, mine.data(), kN * sizeof(float), 0),
             Transfer::recv_reduce(peer, mine.data(), acc.data(), kN * sizeof(float), 0)});
      for (int i = 0; i < kN; ++i) {
        const float want = float(1000 + i + round) + float(2000 + i + round);
        if (acc[size_t(i)] != want) throw Error(Status::kInternal, "wrong sum at " + std::to_string(i));
      }
    }
  });
  EXPECT_EQ(errors[0], "");
  EXPECT_EQ(errors[1], "");
  EXPECT_GE(stats[1].handed_over, 1u);
  EXPECT_GE(stats[0].done + stats[1].done, 1u);
}

TEST_P(SmallPath, AMismatchOnThePathNamesTheField) {
  auto meshes = two_meshes(GetParam());
  ASSERT_TRUE(meshes[0] && meshes[1]);
  std::vector<Engine::SmallPathStats> stats;
  auto errors = on_two_ranks(meshes, {true, true}, stats, [&](int rank, Engine& e) {
    // Rank 1 expects 2 elements, rank 0 sends 1 (and a different count).
    e.begin(sig_of(OpKind::kBroadcast, 1, rank == 0 ? 1 : 2), RedOp::kSum, 5000);
    float v[2] = {1, 2};
    if (rank == 0) {
      e.run({Transfer::send(1, v, sizeof(float), 1)});
    } else {
      e.run({Transfer::recv(0, v, 2 * sizeof(float), 1)});
    }
  });
  EXPECT_EQ(errors[0], "");
  EXPECT_NE(errors[1].find("count 2 on rank 1 vs 1 on rank 0"), std::string::npos) << errors[1];
}

/// A point-to-point step that only listens to `peer` (as an ANY_SOURCE
/// receive or a probe does): its listen ends when it reads the header of a
/// message that is not a point-to-point one (the engine holds it for that
/// collective); a point-to-point message fails the step.
class ListenOnly : public TransferFeed {
 public:
  explicit ListenOnly(int peer) : peer_(peer) {}
  bool next(Transfer& t, OpSignature& sig, Deadline& deadline, size_t& tag) override {
    if (given_) return false;
    given_ = true;
    t = Transfer::listen(peer_);
    sig = OpSignature{};
    sig.kind = OpKind::kSendRecv;
    deadline = Deadline::after_ms(20000);
    tag = 0;
    return true;
  }
  void done(size_t) override {}
  char* land(const Arrival& a, size_t&) override {
    throw Error(Status::kInternal, "a point-to-point message from rank " + std::to_string(a.peer));
  }
  bool listening(int peer) override { return peer == peer_ && !ended_; }
  void listen_ended(int, bool parked) override {
    ended_ = true;
    parked_ = parked;
  }
  bool parked() const { return parked_; }

 private:
  int peer_;
  bool given_ = false;
  bool ended_ = false;
  bool parked_ = false;
};

TEST_P(SmallPath, AHeaderHeldForAListenKeepsItsStepOffThePath) {
  auto meshes = two_meshes(GetParam());
  ASSERT_TRUE(meshes[0] && meshes[1]);
  std::vector<Engine::SmallPathStats> stats;
  std::vector<Engine::SmallPathStats> first(2);  // after the first broadcast
  bool parked = false;
  float got[2] = {0, 0};
  auto errors = on_two_ranks(meshes, {true, true}, stats, [&](int rank, Engine& e) {
    if (rank == 1) {
      // Returns once the listen has read rank 0's first broadcast header.
      ListenOnly feed(0);
      e.run_feed(feed);
      parked = feed.parked();
    }
    for (int i = 0; i < 2; ++i) {
      e.begin(sig_of(OpKind::kBroadcast, uint64_t(i + 1), 1), RedOp::kSum, 20000);
      if (rank == 0) {
        const float v = 10.5f + float(i);
        e.run({Transfer::send(1, &v, sizeof v, 0)});
      } else {
        e.run({Transfer::recv(0, &got[i], sizeof got[i], 0)});
      }
      if (i == 0) first[size_t(rank)] = e.small_path_stats();
    }
  });
  EXPECT_EQ(errors[0], "");
  EXPECT_EQ(errors[1], "");
  EXPECT_TRUE(parked) << "the listen did not end on the collective's header";
  EXPECT_EQ(got[0], 10.5f);
  EXPECT_EQ(got[1], 11.5f);
  // Rank 1's first broadcast starts from the held header: the general loop
  // takes the step, the small path does not (nor hands it over).
  EXPECT_EQ(first[1].done + first[1].handed_over, 0u);
  // Once it is taken, the next step goes the small way again.
  EXPECT_EQ(stats[1].done + stats[1].handed_over, 1u);
  EXPECT_EQ(stats[0].done + stats[0].handed_over, 2u);
}

INSTANTIATE_TEST_SUITE_P(Links, SmallPath, ::testing::Values("shm", "tcp"));

}  // namespace
}  // namespace omniccl
