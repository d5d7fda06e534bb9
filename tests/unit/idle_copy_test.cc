// Engine::copy_while_waiting: a rank's own block (of a gather, a scatter, an
// all-to-all) is copied in the waits of the step that runs next, in slices,
// and what is left once the step's transfers are done is copied then. Two
// ranks as threads of this process over real meshes (shared memory and TCP):
//   - a peer that sends late: the whole copy moves while waiting;
//   - a message already there: the step is done at its first pass and the
//     copy follows it;
//   - a small step, a small copy and overlapping buffers: copied at once;
//   - begin() drops a copy that no step ran;
//   - gather_direct with 1 MiB blocks and a late peer: every block right, the
//     root's own copied while it waited.
#include <atomic>
#include <chrono>
#include <cstring>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "algorithm/algorithms.h"
#include "algorithm/engine.h"
#include "transport/mesh.h"
#include "engine_pair.h"
#include "mesh_exchange.h"

namespace omniccl {
namespace {

using test::two_meshes;
using transport::Mesh;

constexpr size_t kCopyBytes = size_t(4) << 20;

OpSignature sig_of(OpKind kind, uint64_t seq, uint64_t count) {
  OpSignature s;
  s.kind = kind;
  s.dtype = DType::kUInt8;
  s.redop = RedOp::kSum;
  s.seq = seq;
  s.count = count;
  s.algo = 1;
  return s;
}

std::vector<char> pattern(size_t bytes, int seed) {
  std::vector<char> v(bytes);
  for (size_t i = 0; i < bytes; ++i) v[i] = char((i * 131 + size_t(seed) * 7 + (i >> 12)) & 0xff);
  return v;
}

/// Runs body(rank, engine) on two threads; returns each rank's error ("" if
/// none) and its copy counters.
template <typename Body>
std::vector<std::string> on_two_ranks(std::vector<std::unique_ptr<Mesh>>& meshes,
                                      std::vector<Engine::IdleCopyStats>& stats, Body body) {
  stats.assign(2, {});
  return test::engines_on_two_threads(
      meshes, body, [&](int rank, Engine& e) { stats[static_cast<size_t>(rank)] = e.idle_copy_stats(); });
}

class IdleCopy : public ::testing::TestWithParam<std::string> {};

/// Rank 0 copies a kCopyBytes pattern while it waits (copy_while_waiting)
/// and receives `msg_bytes` from rank 1 in the step that follows; rank 0
/// runs `before_copy` first, rank 1 `before_send` and `after_send` around
/// its send. Checks that neither rank failed and both the copy and the
/// message arrived right; returns rank 0's copy counters.
template <typename BeforeCopy, typename BeforeSend, typename AfterSend>
Engine::IdleCopyStats copy_beside_message(const std::string& transport, size_t msg_bytes, BeforeCopy before_copy,
                                          BeforeSend before_send, AfterSend after_send) {
  auto meshes = two_meshes(transport);
  EXPECT_TRUE(meshes[0] && meshes[1]);
  if (!meshes[0] || !meshes[1]) return {};
  const std::vector<char> src = pattern(kCopyBytes, 1), msg = pattern(msg_bytes, 2);
  std::vector<char> dst(kCopyBytes, 0), got(msg.size(), 0);
  std::vector<Engine::IdleCopyStats> stats;
  auto errors = on_two_ranks(meshes, stats, [&](int rank, Engine& e) {
    e.begin(sig_of(OpKind::kGather, 1, msg.size()), RedOp::kSum, 20000);
    if (rank == 0) {
      before_copy();
      e.copy_while_waiting(dst.data(), src.data(), src.size());
      e.run({Transfer::recv(1, got.data(), got.size(), 0)});
    } else {
      before_send();
      e.run({Transfer::send(0, msg.data(), msg.size(), 0)});
      after_send();
    }
  });
  EXPECT_EQ(errors[0], "");
  EXPECT_EQ(errors[1], "");
  EXPECT_TRUE(dst == src) << "the copy is incomplete or wrong";
  EXPECT_TRUE(got == msg) << "the message arrived wrong";
  return stats[0];
}

TEST_P(IdleCopy, APeerThatSendsLateCarriesTheWholeCopy) {
  const Engine::IdleCopyStats stats = copy_beside_message(
      GetParam(), size_t(1) << 20, [] {}, [] { std::this_thread::sleep_for(std::chrono::milliseconds(300)); }, [] {});
  EXPECT_EQ(stats.while_waiting, kCopyBytes) << "all of it in the 300 ms the peer kept the rank waiting";
  EXPECT_EQ(stats.after, 0u);
  EXPECT_EQ(stats.at_once, 0u);
}

TEST_P(IdleCopy, AMessageAlreadyThereIsTakenFirstAndTheCopyFollows) {
  std::atomic<bool> sent{false};
  const Engine::IdleCopyStats stats = copy_beside_message(
      GetParam(), size_t(64) << 10,  // 64 KiB: fits the ring and the socket
      [&] {
        for (int i = 0; i < 20000 && !sent.load(); ++i) std::this_thread::sleep_for(std::chrono::milliseconds(1));
      },
      [] {}, [&] { sent.store(true); });
  EXPECT_EQ(stats.after, kCopyBytes) << "the step had nothing to wait for";
  EXPECT_EQ(stats.while_waiting, 0u);
}

TEST_P(IdleCopy, SmallStepsSmallCopiesAndOverlapsCopyAtOnce) {
  auto meshes = two_meshes(GetParam());
  ASSERT_TRUE(meshes[0] && meshes[1]);
  const std::vector<char> src = pattern(kCopyBytes, 5);
  std::vector<char> big(kCopyBytes, 0), small(Engine::kIdleSlice, 0);
  std::vector<char> overlap = pattern(kCopyBytes + 4096, 6), want(overlap);
  std::memmove(want.data() + 4096, want.data(), kCopyBytes);
  float got = 0;
  std::vector<Engine::IdleCopyStats> stats;
  auto errors = on_two_ranks(meshes, stats, [&](int rank, Engine& e) {
    e.begin(sig_of(OpKind::kGather, 1, 1), RedOp::kSum, 20000);
    if (rank == 0) {
      e.copy_while_waiting(big.data(), src.data(), kCopyBytes);  // before a step of 4 bytes
      e.run({Transfer::recv(1, &got, sizeof got, 0)});
      e.copy_while_waiting(small.data(), src.data(), small.size());             // one slice or less
      e.copy_while_waiting(overlap.data() + 4096, overlap.data(), kCopyBytes);  // overlapping
    } else {
      const float v = 7.5f;
      e.run({Transfer::send(0, &v, sizeof v, 0)});
    }
  });
  EXPECT_EQ(errors[0], "");
  EXPECT_EQ(errors[1], "");
  EXPECT_EQ(got, 7.5f);
  EXPECT_TRUE(big == src);
  EXPECT_EQ(std::memcmp(small.data(), src.data(), small.size()), 0);
  EXPECT_TRUE(overlap == want) << "an overlapping copy must behave as memmove";
  EXPECT_EQ(stats[0].at_once, kCopyBytes + Engine::kIdleSlice + kCopyBytes);
  EXPECT_EQ(stats[0].while_waiting + stats[0].after, 0u);
}

TEST_P(IdleCopy, BeginDropsACopyNoStepRan) {
  auto meshes = two_meshes(GetParam());
  ASSERT_TRUE(meshes[0] && meshes[1]);
  const std::vector<char> src = pattern(kCopyBytes, 7);
  std::vector<char> dst(kCopyBytes, 0);
  std::vector<Engine::IdleCopyStats> stats;
  auto errors = on_two_ranks(meshes, stats, [&](int rank, Engine& e) {
    if (rank != 0) return;
    e.begin(sig_of(OpKind::kGather, 1, 1), RedOp::kSum, 20000);
    e.copy_while_waiting(dst.data(), src.data(), kCopyBytes);  // an operation that failed before its step
    e.begin(sig_of(OpKind::kGather, 2, 1), RedOp::kSum, 20000);
    e.run(std::span<const Transfer>());
  });
  EXPECT_EQ(errors[0], "");
  EXPECT_TRUE(dst == std::vector<char>(kCopyBytes, 0)) << "a later operation wrote into the failed one's buffer";
  EXPECT_EQ(stats[0].at_once + stats[0].while_waiting + stats[0].after, 0u);
}

TEST_P(IdleCopy, GatherWithALatePeerCopiesTheRootsBlockWhileWaiting) {
  auto meshes = two_meshes(GetParam());
  ASSERT_TRUE(meshes[0] && meshes[1]);
  constexpr size_t kBlock = size_t(1) << 20;
  const std::vector<char> mine[2] = {pattern(kBlock, 8), pattern(kBlock, 9)};
  std::vector<char> all(2 * kBlock, 0);
  std::vector<Engine::IdleCopyStats> stats;
  auto errors = on_two_ranks(meshes, stats, [&](int rank, Engine& e) {
    e.begin(sig_of(OpKind::kGather, 1, kBlock), RedOp::kSum, 20000);
    if (rank == 1) std::this_thread::sleep_for(std::chrono::milliseconds(300));
    algo::gather_direct(e, mine[rank].data(), rank == 0 ? all.data() : nullptr, kBlock, 0);
  });
  EXPECT_EQ(errors[0], "");
  EXPECT_EQ(errors[1], "");
  EXPECT_EQ(std::memcmp(all.data(), mine[0].data(), kBlock), 0) << "the root's own block";
  EXPECT_EQ(std::memcmp(all.data() + kBlock, mine[1].data(), kBlock), 0) << "rank 1's block";
  EXPECT_EQ(stats[0].while_waiting, kBlock);
}

INSTANTIATE_TEST_SUITE_P(Transports, IdleCopy, ::testing::Values("shm", "tcp"),
                         [](const auto& info) { return info.param; });

}  // namespace
}  // namespace omniccl
