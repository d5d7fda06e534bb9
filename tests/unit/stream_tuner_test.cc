// StreamTuner: streaming stores chosen from the durations of a rank's own
// operations (tuning/stream_tuner.h).
#include "tuning/stream_tuner.h"

#include <gtest/gtest.h>

#include <string>

namespace omniccl {
namespace {

constexpr uint64_t k16M = uint64_t(16) << 20;

/// Runs one operation of `kind` on `bytes` through the tuner, taking `with`
/// ns with streaming stores and `without` without; returns whether it streamed.
bool run(StreamTuner& t, uint64_t with, uint64_t without, std::string* line = nullptr, OpKind kind = OpKind::kGather,
         uint64_t bytes = k16M, bool prior = false) {
  const bool s = t.choose(kind, bytes, prior);
  std::string l = t.record(kind, bytes, s, s ? with : without);
  if (line) *line = l;
  return s;
}

TEST(StreamTuner, OnlyLargeDataMovementIsTuned) {
  EXPECT_TRUE(StreamTuner::tuned(OpKind::kGather, kTunedStreamMin));
  EXPECT_TRUE(StreamTuner::tuned(OpKind::kBroadcast, k16M));
  EXPECT_TRUE(StreamTuner::tuned(OpKind::kScatterV, k16M));
  EXPECT_TRUE(StreamTuner::tuned(OpKind::kAllGather, k16M));
  EXPECT_TRUE(StreamTuner::tuned(OpKind::kAllToAllV, k16M));
  EXPECT_FALSE(StreamTuner::tuned(OpKind::kGather, kTunedStreamMin - 1));
  EXPECT_FALSE(StreamTuner::tuned(OpKind::kAllReduce, k16M));
  EXPECT_FALSE(StreamTuner::tuned(OpKind::kReduce, k16M));
  EXPECT_FALSE(StreamTuner::tuned(OpKind::kReduceScatter, k16M));
  EXPECT_FALSE(StreamTuner::tuned(OpKind::kSendRecv, k16M));
}

TEST(StreamTuner, AlternatesUntilEachHasTwoThenKeepsTheFaster) {
  StreamTuner t;
  std::string line;
  for (bool expected : {false, true, false}) {
    EXPECT_EQ(run(t, 500'000, 700'000, &line), expected);
    EXPECT_EQ(line, "");
  }
  EXPECT_TRUE(run(t, 500'000, 700'000, &line));
  EXPECT_NE(line.find("streaming stores for gather of 16-32 MiB: on ("), std::string::npos) << line;
  EXPECT_NE(line.find("fastest 500 us with them of 2 operation(s), 700 us without of 2"), std::string::npos) << line;
  for (int i = 0; i < 10; ++i) EXPECT_TRUE(run(t, 500'000, 700'000)) << i;
}

TEST(StreamTuner, APriorThatIsFasterIsKept) {
  StreamTuner t;
  std::string line;
  for (bool expected : {true, false, true, false}) {
    EXPECT_EQ(run(t, 500'000, 700'000, &line, OpKind::kGather, k16M, true), expected);
  }
  EXPECT_NE(line.find(": on ("), std::string::npos) << line;
  for (int i = 0; i < 10; ++i) EXPECT_TRUE(run(t, 500'000, 700'000, nullptr, OpKind::kGather, k16M, true)) << i;
}

TEST(StreamTuner, ANearTieKeepsThePrior) {
  StreamTuner t;
  std::string line;
  for (int i = 0; i < 4; ++i) run(t, 680'000, 700'000, &line);  // 3% faster with them
  EXPECT_NE(line.find(": off ("), std::string::npos) << line;
  for (int i = 0; i < 10; ++i) EXPECT_FALSE(run(t, 680'000, 700'000)) << i;
}

TEST(StreamTuner, TheFastestDurationCounts) {
  // A slow first operation (pages, caches) and a wait for a late peer only
  // add time: they must not make the other choice look better.
  StreamTuner t;
  EXPECT_FALSE(t.choose(OpKind::kGather, k16M, false));
  t.record(OpKind::kGather, k16M, false, 5'000'000);
  run(t, 800'000, 600'000);  // with them
  EXPECT_FALSE(t.choose(OpKind::kGather, k16M, false));
  t.record(OpKind::kGather, k16M, false, 600'000);  // without
  run(t, 800'000, 600'000);                         // with them: decided
  for (int i = 0; i < 10; ++i) EXPECT_FALSE(run(t, 800'000, 600'000)) << i;
}

TEST(StreamTuner, RechecksTheOtherChoiceAndFollowsAChange) {
  StreamTuner t;
  for (int i = 0; i < 4; ++i) run(t, 500'000, 700'000);  // decided: on
  // Operations 5..: every kTunerRecheck-th tries regular stores again.
  int rechecks = 0;
  for (uint64_t op = 4; op < 4 + 4 * kTunerRecheck; ++op) {
    if (!run(t, 500'000, 700'000)) ++rechecks;
  }
  EXPECT_EQ(rechecks, 4);
  // Now regular stores become faster: once the durations with them kept are
  // all slower, the choice follows, and the log says so once.
  int changes = 0;
  bool streamed = true;
  for (int i = 0; i < int(6 * kTunerRecheck); ++i) {
    std::string line;
    streamed = run(t, 900'000, 400'000, &line);
    if (line.find("off from now") != std::string::npos) ++changes;
  }
  EXPECT_EQ(changes, 1);
  EXPECT_FALSE(streamed);
  EXPECT_FALSE(run(t, 900'000, 400'000));
}

TEST(StreamTuner, BandsAndKindsAreApart) {
  StreamTuner t;
  for (int i = 0; i < 4; ++i) run(t, 500'000, 700'000);  // gather 16-32 MiB: on
  // A broadcast of the same size and a gather of 8-16 MiB start over from
  // their prior.
  EXPECT_FALSE(run(t, 900'000, 400'000, nullptr, OpKind::kBroadcast, k16M));
  EXPECT_FALSE(run(t, 900'000, 400'000, nullptr, OpKind::kGather, kTunedStreamMin));
  EXPECT_TRUE(run(t, 500'000, 700'000));
  EXPECT_TRUE(run(t, 500'000, 700'000, nullptr, OpKind::kGather, 2 * k16M - 1));
}

}  // namespace
}  // namespace omniccl
