// Unit tests of the pure parts of the core: settings, tuning, rank patterns.
#include <gtest/gtest.h>

#include <cstdint>
#include <cstdlib>
#include <fstream>
#include <optional>
#include <set>
#include <sstream>

#include "algorithm/patterns/patterns.h"
#include "common/log.h"
#include "common/settings.h"
#include "common/sha256.h"
#include "common/status.h"
#include "common/time.h"
#include "communicator/communicator.h"
#include "tuning/tuning.h"

namespace omniccl {
namespace {

// The settings page of the docs names every setting (its tables are generated
// from kSettings; its notes are written by hand and must not miss one).
TEST(Settings, DocsNameEverySetting) {
  std::ifstream f(std::string(OMNICCL_SOURCE_DIR) + "/docs/reference/settings.md");
  ASSERT_TRUE(f.good()) << "docs/reference/settings.md not found";
  std::stringstream ss;
  ss << f.rdbuf();
  const std::string page = ss.str();
  for (const auto& s : all_settings()) {
    EXPECT_NE(page.find(std::string("`") + s.name + "`"), std::string::npos)
        << s.name << " is missing from docs/reference/settings.md";
  }
}

TEST(Settings, UnknownNameIsAnInternalError) {
  try {
    get_setting("OMNICCL_NOT_A_SETTING");
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_EQ(e.status(), Status::kInternal);
  }
}

TEST(Settings, ParsesDurations) {
  EXPECT_EQ(parse_duration_ms("600", "T"), 600000);
  EXPECT_EQ(parse_duration_ms("30s", "T"), 30000);
  EXPECT_EQ(parse_duration_ms("1500ms", "T"), 1500);
  EXPECT_EQ(parse_duration_ms("10m", "T"), 600000);
  EXPECT_EQ(parse_duration_ms("2.5", "T"), 2500);
  for (const char* bad : {"", "abc", "-1", "10h", "0"}) {
    try {
      parse_duration_ms(bad, "OMNICCL_TIMEOUT");
      ADD_FAILURE() << "accepted '" << bad << "'";
    } catch (const Error& e) {
      EXPECT_EQ(e.status(), Status::kInvalidArgument);
      EXPECT_NE(std::string(e.what()).find("OMNICCL_TIMEOUT"), std::string::npos) << e.what();
    }
  }
}

// nan and inf reached a float-to-integer conversion (undefined behaviour);
// hexadecimal and out-of-range numbers were accepted as durations.
TEST(Settings, DurationsRejectNanInfAndOverflow) {
  for (const char* bad : {"nan", "NaN", "inf", "-inf", "infinity", "1e400", "0x10", "nans", "1e999ms", " 5"}) {
    try {
      parse_duration_ms(bad, "OMNICCL_TIMEOUT");
      ADD_FAILURE() << "accepted '" << bad << "'";
    } catch (const Error& e) {
      EXPECT_EQ(e.status(), Status::kInvalidArgument);
      EXPECT_NE(std::string(e.what()).find("OMNICCL_TIMEOUT"), std::string::npos) << e.what();
      EXPECT_NE(std::string(e.what()).find(bad), std::string::npos) << e.what();
    }
  }
}

// Durations longer than the clock can count clamp to the longest one.
TEST(Settings, HugeDurationsClamp) {
  EXPECT_EQ(parse_duration_ms("1e10", "T"), 10'000'000'000'000LL);
  EXPECT_EQ(parse_duration_ms("1e300", "T"), kMaxDurationMs);
  EXPECT_EQ(parse_duration_ms("9223372036854775807ms", "T"), kMaxDurationMs);
}

// Clock::now() + milliseconds(INT64_MAX) overflows into the past.
TEST(Deadline, SaturatesInsteadOfWrapping) {
  for (int64_t ms : {INT64_MAX, INT64_MAX / 2, int64_t{10'000'000'000'000}}) {
    Deadline d = Deadline::after_ms(ms);
    EXPECT_FALSE(d.expired()) << ms;
    EXPECT_EQ(d.remaining_ms(1000), 1000) << ms;
  }
  EXPECT_TRUE(Deadline::after_ms(0).expired());
  EXPECT_TRUE(Deadline::after_ms(-5).expired());
  EXPECT_TRUE(Deadline::after_ms(INT64_MIN).expired());
}

// FIPS 180-4 examples and RFC 4231 test cases 1, 2 and 6 (long key).
TEST(Sha256, KnownAnswers) {
  EXPECT_EQ(to_hex(sha256("")), "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
  EXPECT_EQ(to_hex(sha256("abc")), "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
  EXPECT_EQ(to_hex(sha256("abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq")),
            "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1");
  EXPECT_EQ(to_hex(sha256(std::string(1000000, 'a'))),
            "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0");
  EXPECT_EQ(to_hex(hmac_sha256(std::string(20, '\x0b'), "Hi There")),
            "b0344c61d8db38535ca8afceaf0bf12b881dc200c9833da726e9376c2e32cff7");
  EXPECT_EQ(to_hex(hmac_sha256("Jefe", "what do ya want for nothing?")),
            "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843");
  EXPECT_EQ(to_hex(hmac_sha256(std::string(131, '\xaa'), "Test Using Larger Than Block-Size Key - Hash Key First")),
            "60e431591ee0b67f0d8a26aacbf5b77f8e0bc6213728c5140546040f0ee37f54");
  EXPECT_TRUE(digest_equal(sha256("x"), sha256("x")));
  EXPECT_FALSE(digest_equal(sha256("x"), sha256("y")));
  EXPECT_FALSE(digest_equal(random_nonce(), random_nonce()));
}

TEST(Tuning, BareNameAppliesWhereOffered) {
  auto ov = AlgoOverride::parse("ring", "OMNICCL_ALGO");
  EXPECT_EQ(ov.for_op(OpKind::kAllReduce), Algo::kRing);
  EXPECT_EQ(ov.for_op(OpKind::kAllGather), Algo::kRing);
  EXPECT_EQ(ov.for_op(OpKind::kBroadcast), Algo::kRing);
  EXPECT_EQ(ov.for_op(OpKind::kReduce), Algo::kNone);  // reduce has no ring: tuned
  EXPECT_EQ(choose_algo(OpKind::kAllReduce, 8, 4, ov), Algo::kRing);
}

TEST(Tuning, PerCollectiveList) {
  auto ov = AlgoOverride::parse("all_reduce=tree, broadcast=direct", "OMNICCL_ALGO");
  EXPECT_EQ(ov.for_op(OpKind::kAllReduce), Algo::kTree);
  EXPECT_EQ(ov.for_op(OpKind::kBroadcast), Algo::kDirect);
  EXPECT_EQ(ov.for_op(OpKind::kAllGather), Algo::kNone);
}

TEST(Tuning, UnusableOverridesAreClearErrors) {
  struct Case {
    const char* spec;
    const char* needle;
  } cases[] = {{"warp_drive", "unknown algorithm 'warp_drive'"},
               {"broadcast=bruck", "broadcast has no algorithm 'bruck'"},
               {"allsum=ring", "unknown collective 'allsum'"}};
  for (const auto& c : cases) {
    try {
      AlgoOverride::parse(c.spec, "OMNICCL_ALGO");
      ADD_FAILURE() << "accepted " << c.spec;
    } catch (const Error& e) {
      EXPECT_EQ(e.status(), Status::kInvalidArgument);
      EXPECT_NE(std::string(e.what()).find(c.needle), std::string::npos) << e.what();
    }
  }
}

TEST(Tuning, DefaultsDependOnSize) {
  AlgoOverride none;
  EXPECT_EQ(choose_algo(OpKind::kAllReduce, 8, 4, none), Algo::kRecursiveDoubling);
  EXPECT_EQ(choose_algo(OpKind::kAllReduce, 64 << 20, 5, none), Algo::kRing);
  EXPECT_EQ(choose_algo(OpKind::kAllReduce, 64 << 20, 4, none), Algo::kPipelined);
  EXPECT_EQ(choose_algo(OpKind::kAllReduce, 8 << 20, 4, none), Algo::kRing);
  EXPECT_EQ(choose_algo(OpKind::kAllReduce, 8 << 20, 2, none), Algo::kRing);
  EXPECT_EQ(choose_algo(OpKind::kAllReduce, (8 << 20) + 4, 2, none), Algo::kPipelined);
  EXPECT_EQ(choose_algo(OpKind::kAllReduce, 256 << 20, 3, none), Algo::kPipelined);
  EXPECT_EQ(choose_algo(OpKind::kBarrier, 0, 4, none), Algo::kRecursiveDoubling);
  EXPECT_EQ(choose_algo(OpKind::kAllGather, 8, 4, none), Algo::kRecursiveDoubling);
  EXPECT_EQ(choose_algo(OpKind::kAllGather, 32 << 10, 5, none), Algo::kRecursiveDoubling);
  EXPECT_EQ(choose_algo(OpKind::kAllGather, 64 << 10, 4, none), Algo::kRing);
  EXPECT_EQ(choose_algo(OpKind::kAllGather, 64 << 20, 4, none), Algo::kRing);
  EXPECT_EQ(choose_algo(OpKind::kAllGather, 256 << 20, 4, none), Algo::kPipelined);
  for (int n : {2, 3, 5}) EXPECT_EQ(choose_algo(OpKind::kAllGather, 256 << 20, n, none), Algo::kRing) << n;
}

TEST(Tuning, AllToAllGoesDirectWhereAHostHasMoreRanksThanCores) {
  AlgoOverride none;
  for (uint64_t bytes : {uint64_t(8) << 10, uint64_t(1) << 20, uint64_t(256) << 20}) {
    for (int n : {3, 4, 8}) {
      EXPECT_EQ(choose_algo(OpKind::kAllToAll, bytes, n, none), Algo::kPairwise) << bytes << " B, " << n << " ranks";
      EXPECT_EQ(choose_algo(OpKind::kAllToAll, bytes, n, none, /*oversubscribed=*/true), Algo::kDirect)
          << bytes << " B, " << n << " ranks";
    }
  }
  EXPECT_EQ(choose_algo(OpKind::kAllToAll, 8, 4, none), Algo::kDirect) << "small: direct either way";
  // Only all_to_all changes with oversubscription; an override still wins.
  EXPECT_EQ(choose_algo(OpKind::kAllReduce, 64 << 20, 4, none, true), Algo::kPipelined);
  EXPECT_EQ(choose_algo(OpKind::kAllGather, 64 << 20, 4, none, true), Algo::kRing);
  EXPECT_EQ(choose_algo(OpKind::kAllToAll, 1 << 20, 4, AlgoOverride::parse("all_to_all=pairwise", "test"), true),
            Algo::kPairwise);
}

TEST(Tuning, GatherAndScatterGoDirectUpToFourRanks) {
  AlgoOverride none;
  for (OpKind k : {OpKind::kGather, OpKind::kScatter}) {
    for (int n : {2, 3, 4}) {
      EXPECT_EQ(choose_algo(k, 8, n, none), Algo::kDirect) << op_kind_name(k) << " " << n;
      EXPECT_EQ(choose_algo(k, 64 << 10, n, none), Algo::kDirect) << op_kind_name(k) << " " << n;
    }
    EXPECT_EQ(choose_algo(k, 8, 5, none), Algo::kTree) << op_kind_name(k);
    EXPECT_EQ(choose_algo(k, 64 << 10, 16, none), Algo::kTree) << op_kind_name(k);
    EXPECT_EQ(choose_algo(k, 1 << 20, 16, none), Algo::kDirect) << op_kind_name(k);
  }
}

TEST(Tuning, SingleCopyOnlyForDataMovement) {
  constexpr uint64_t kMiB = 1 << 20;
  for (bool over : {false, true}) {
    EXPECT_FALSE(single_copy_for(OpKind::kAllReduce, 16 * kMiB, over));
    EXPECT_FALSE(single_copy_for(OpKind::kReduceScatter, 16 * kMiB, over));
    EXPECT_FALSE(single_copy_for(OpKind::kSendRecv, 16 * kMiB, over));
    EXPECT_TRUE(single_copy_for(OpKind::kGather, 512 * kMiB, over));
    EXPECT_TRUE(single_copy_for(OpKind::kAllGather, 16 * kMiB, over));
    EXPECT_FALSE(single_copy_for(OpKind::kAllGather, 128 * kMiB, over));
  }
  // Broadcast forwards chunks along a chain: by reference only when every
  // local rank has a core to run on.
  EXPECT_TRUE(single_copy_for(OpKind::kBroadcast, 16 * kMiB, false));
  EXPECT_FALSE(single_copy_for(OpKind::kBroadcast, 16 * kMiB, true));
}

TEST(Patterns, BlocksPartitionEveryElementOnce) {
  for (size_t n : {1, 2, 3, 5, 8}) {
    for (size_t count : {0, 1, 7, 16, 1001}) {
      size_t next = 0;
      for (size_t i = 0; i < n; ++i) {
        EXPECT_EQ(patterns::block_offset(i, count, n), next);
        next += patterns::block_count(i, count, n);
      }
      EXPECT_EQ(next, count);
    }
  }
}

TEST(Patterns, FoldCoversEveryRankAndBlock) {
  for (int n = 1; n <= 13; ++n) {
    patterns::Fold f(n);
    EXPECT_EQ(f.p2 + f.extra, n);
    std::set<int> members;
    for (int r = 0; r < n; ++r) {
      int v = f.new_rank(r);
      if (v >= 0) {
        EXPECT_EQ(f.real_rank(v), r);
        members.insert(v);
      }
    }
    EXPECT_EQ(static_cast<int>(members.size()), f.p2);
    EXPECT_EQ(f.first_block(0), 0);
    EXPECT_EQ(f.first_block(f.p2), n);
    for (int v = 0; v < f.p2; ++v) EXPECT_LT(f.first_block(v), f.first_block(v + 1));
  }
}

TEST(Patterns, BinomialSubtreesTileTheRanks) {
  for (int n = 1; n <= 17; ++n) {
    // Children of v are v + m for m below lowbit(v); their subtrees plus v
    // itself tile [v, v + subtree_size(v)).
    for (int v = 0; v < n; ++v) {
      int covered = 1;
      int top = v == 0 ? patterns::pow2_floor(n) : patterns::lowbit(v) / 2;
      for (int m = top; m >= 1; m >>= 1) {
        if (v + m < n) covered += patterns::subtree_size(v + m, n);
      }
      EXPECT_EQ(covered, patterns::subtree_size(v, n)) << "n=" << n << " v=" << v;
    }
  }
}

}  // namespace
}  // namespace omniccl

TEST(Settings, ShmSingleCopyTakesZeroOneOrAuto) {
  ::setenv("OMNICCL_SHM_SINGLE_COPY", "0", 1);
  EXPECT_EQ(omniccl::CommConfig::from_environment().single_copy, std::optional<bool>(false));
  ::setenv("OMNICCL_SHM_SINGLE_COPY", "1", 1);
  EXPECT_EQ(omniccl::CommConfig::from_environment().single_copy, std::optional<bool>(true));
  ::setenv("OMNICCL_SHM_SINGLE_COPY", "auto", 1);
  EXPECT_EQ(omniccl::CommConfig::from_environment().single_copy, std::nullopt);
  ::setenv("OMNICCL_SHM_SINGLE_COPY", "yes", 1);
  try {
    omniccl::CommConfig::from_environment();
    ADD_FAILURE() << "OMNICCL_SHM_SINGLE_COPY=yes was accepted";
  } catch (const omniccl::Error& e) {
    EXPECT_EQ(e.status(), omniccl::Status::kInvalidArgument);
    EXPECT_NE(std::string(e.what()).find("OMNICCL_SHM_SINGLE_COPY"), std::string::npos) << e.what();
  }
  ::unsetenv("OMNICCL_SHM_SINGLE_COPY");
  // Unset: decided by calibration when a communicator is created.
  EXPECT_EQ(omniccl::CommConfig::from_environment().single_copy, std::nullopt);
}

TEST(Settings, TcpStreamsTakesOneToSixteenOrAuto) {
  // Unset: auto (0), decided by the mesh from the job's size.
  EXPECT_EQ(omniccl::CommConfig::from_environment().tcp_streams, 0);
  ::setenv("OMNICCL_TCP_STREAMS", "16", 1);
  EXPECT_EQ(omniccl::CommConfig::from_environment().tcp_streams, 16);
  ::setenv("OMNICCL_TCP_STREAMS", "1", 1);
  EXPECT_EQ(omniccl::CommConfig::from_environment().tcp_streams, 1);
  ::setenv("OMNICCL_TCP_STREAMS", "auto", 1);
  EXPECT_EQ(omniccl::CommConfig::from_environment().tcp_streams, 0);
  for (const char* bad : {"0", "17", "-2", "4x", "two"}) {
    ::setenv("OMNICCL_TCP_STREAMS", bad, 1);
    try {
      omniccl::CommConfig::from_environment();
      ADD_FAILURE() << "OMNICCL_TCP_STREAMS=" << bad << " was accepted";
    } catch (const omniccl::Error& e) {
      EXPECT_EQ(e.status(), omniccl::Status::kInvalidArgument);
      EXPECT_NE(std::string(e.what()).find("OMNICCL_TCP_STREAMS"), std::string::npos) << e.what();
    }
  }
  ::unsetenv("OMNICCL_TCP_STREAMS");
}

TEST(Settings, StagedSliceAndGpuReduceTakeBytes) {
  const omniccl::CommConfig defaults = omniccl::CommConfig::from_environment();
  EXPECT_EQ(defaults.slicing.slice_bytes, size_t{8} << 20);
  EXPECT_EQ(defaults.slicing.gpu_reduce_bytes, size_t{1} << 20);
  ::setenv("OMNICCL_STAGED_SLICE", "65536", 1);
  ::setenv("OMNICCL_STAGED_GPU_REDUCE", "0", 1);
  const omniccl::CommConfig set = omniccl::CommConfig::from_environment();
  set.validate();
  EXPECT_EQ(set.slicing.slice_bytes, 65536u);
  EXPECT_EQ(set.slicing.gpu_reduce_bytes, 0u);
  ::unsetenv("OMNICCL_STAGED_GPU_REDUCE");
  // Not a number, or a slice below 64 KiB or above 1 GiB.
  for (const char* bad : {"8M", "-1", " 1048576", "x", "65535", "0", "1073741825", "99999999999999999999"}) {
    ::setenv("OMNICCL_STAGED_SLICE", bad, 1);
    try {
      omniccl::CommConfig::from_environment().validate();
      ADD_FAILURE() << "OMNICCL_STAGED_SLICE=" << bad << " was accepted";
    } catch (const omniccl::Error& e) {
      EXPECT_EQ(e.status(), omniccl::Status::kInvalidArgument);
      EXPECT_NE(std::string(e.what()).find("OMNICCL_STAGED_SLICE"), std::string::npos) << e.what();
    }
  }
  ::unsetenv("OMNICCL_STAGED_SLICE");
  ::setenv("OMNICCL_STAGED_GPU_REDUCE", "1MiB", 1);
  EXPECT_THROW(omniccl::CommConfig::from_environment(), omniccl::Error);
  ::unsetenv("OMNICCL_STAGED_GPU_REDUCE");
}

TEST(Settings, StagedProfileTakesZeroOrOne) {
  EXPECT_FALSE(omniccl::CommConfig::from_environment().staged_profile);
  ::setenv("OMNICCL_STAGED_PROFILE", "1", 1);
  EXPECT_TRUE(omniccl::CommConfig::from_environment().staged_profile);
  ::setenv("OMNICCL_STAGED_PROFILE", "yes", 1);
  try {
    omniccl::CommConfig::from_environment();
    ADD_FAILURE() << "OMNICCL_STAGED_PROFILE=yes was accepted";
  } catch (const omniccl::Error& e) {
    EXPECT_EQ(e.status(), omniccl::Status::kInvalidArgument);
    EXPECT_NE(std::string(e.what()).find("OMNICCL_STAGED_PROFILE"), std::string::npos) << e.what();
  }
  ::unsetenv("OMNICCL_STAGED_PROFILE");
}

TEST(Settings, TcpCongestionTakesAutoSystemOrAName) {
  EXPECT_EQ(omniccl::CommConfig::from_environment().tcp_congestion, "auto");
  for (const char* good : {"system", "cubic", "reno"}) {
    ::setenv("OMNICCL_TCP_CONGESTION", good, 1);
    EXPECT_EQ(omniccl::CommConfig::from_environment().tcp_congestion, good);
  }
  for (const char* bad : {"Cubic", "cubic reno", "x/y", "averyveryverylongname"}) {
    ::setenv("OMNICCL_TCP_CONGESTION", bad, 1);
    try {
      omniccl::CommConfig::from_environment();
      ADD_FAILURE() << "OMNICCL_TCP_CONGESTION='" << bad << "' was accepted";
    } catch (const omniccl::Error& e) {
      EXPECT_EQ(e.status(), omniccl::Status::kInvalidArgument);
      EXPECT_NE(std::string(e.what()).find("OMNICCL_TCP_CONGESTION"), std::string::npos) << e.what();
    }
  }
  ::unsetenv("OMNICCL_TCP_CONGESTION");
}

// A log line written before any communicator exists names no rank (it used
// to say "rank -1"); afterwards it names the rank.
TEST(LogTest, LinesBeforeInitNameNoRank) {
  testing::internal::CaptureStderr();
  omniccl::log::write(omniccl::log::Level::kWarn, omniccl::log::Subsys::kBootstrap, "before init");
  std::string before = testing::internal::GetCapturedStderr();
  EXPECT_NE(before.find("] BOOTSTRAP WARN before init"), std::string::npos) << before;
  EXPECT_EQ(before.find("rank"), std::string::npos) << before;
  omniccl::log::set_rank(3);
  testing::internal::CaptureStderr();
  omniccl::log::write(omniccl::log::Level::kWarn, omniccl::log::Subsys::kBootstrap, "after init");
  std::string after = testing::internal::GetCapturedStderr();
  EXPECT_NE(after.find(" rank 3] BOOTSTRAP WARN after init"), std::string::npos) << after;
  omniccl::log::set_rank(-1);
}

namespace omniccl {
namespace {

// The algorithm table is the one place algorithms are registered: what each
// collective offers, what overrides accept and what the tuner may pick must
// all come from it.
TEST(AlgorithmTable, EveryRowIsUniqueNamedAndDocumented) {
  std::set<std::pair<int, int>> seen;
  for (const AlgoEntry& row : algorithm_table()) {
    EXPECT_TRUE(seen.insert({int(row.op), int(row.algo)}).second)
        << op_kind_name(row.op) << " lists " << algo_name(row.algo) << " twice";
    EXPECT_NE(row.run, nullptr);
    EXPECT_STRNE(row.best_at, "");
    EXPECT_STRNE(algo_name(row.algo), "?");
    EXPECT_EQ(&find_algorithm(row.op, row.algo), &row);
  }
}

TEST(AlgorithmTable, OffersAndTunedChoicesComeFromTheTable) {
  const OpKind tunable[] = {OpKind::kAllReduce, OpKind::kReduceScatter, OpKind::kAllGather, OpKind::kBroadcast,
                            OpKind::kReduce,    OpKind::kGather,        OpKind::kScatter,   OpKind::kAllToAll,
                            OpKind::kBarrier,   OpKind::kAllGatherV,    OpKind::kAllToAllV, OpKind::kGatherV,
                            OpKind::kScatterV,  OpKind::kScan,          OpKind::kExScan};
  AlgoOverride none;
  for (OpKind k : tunable) {
    size_t rows = 0;
    for (const AlgoEntry& row : algorithm_table()) rows += row.op == k;
    EXPECT_EQ(algos_for(k).size(), rows) << op_kind_name(k);
    EXPECT_GT(rows, 0u) << op_kind_name(k) << " has no algorithm";
    for (uint64_t bytes : {uint64_t(0), uint64_t(8), uint64_t(1) << 20, uint64_t(1) << 30}) {
      Algo a = choose_algo(k, bytes, 4, none);
      EXPECT_NO_THROW(find_algorithm(k, a)) << op_kind_name(k) << " " << bytes << " B -> " << algo_name(a);
    }
  }
  EXPECT_THROW(find_algorithm(OpKind::kReduce, Algo::kRing), Error);
  EXPECT_TRUE(algos_for(OpKind::kSendRecv).empty());
}

}  // namespace
}  // namespace omniccl
