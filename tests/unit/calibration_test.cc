// Copy-mechanism calibration (tuning/copy_calibration.h): every outcome forced
// through its setting or a planted cache file, a corrupted or foreign cache
// ignored and rewritten, a forced recalibration.
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <sys/utsname.h>
#include <unistd.h>

#include <chrono>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include "common/status.h"
#include "communicator/communicator.h"
#include "tuning/copy_calibration.h"

namespace omniccl {
namespace {

constexpr uint64_t kMiB = uint64_t(1) << 20;

/// The first two lines a cache for this machine must have, built here from
/// uname() independently of the code under test.
std::string header_for_this_machine() {
  utsname u{};
  EXPECT_EQ(::uname(&u), 0);
  std::string key = std::string(u.nodename) + " " + u.release + " " + u.version;
  for (char& c : key) {
    if (c == '\n') c = ' ';
  }
  return "omniccl-shm-calibration 5\nmachine " + key + "\n";
}

/// The cache lines of the link-pair probes (CopyRates::link_*), GB/s at 1
/// and 8 MiB: through the ring, by reference, by reference split.
std::string links(double ring1, double ring8, double ref1, double ref8, double split1, double split8) {
  std::ostringstream os;
  os << "link_ring_1m_gbps " << ring1 << "\nlink_ring_8m_gbps " << ring8 << "\nlink_ref_1m_gbps " << ref1
     << "\nlink_ref_8m_gbps " << ref8 << "\nlink_split_1m_gbps " << split1 << "\nlink_split_8m_gbps " << split8 << "\n";
  return os.str();
}
/// The ring faster at both sizes, by reference (split or not) at both.
const std::string kRingWins = links(20, 10, 8, 4, 15, 8);
const std::string kRefWins = links(10, 5, 12, 6, 20, 9);

std::string read_file(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

void write_file(const std::string& path, const std::string& text, mode_t mode = 0600) {
  ::unlink(path.c_str());
  {
    std::ofstream out(path);
    out << text;
  }
  ASSERT_EQ(::chmod(path.c_str(), mode), 0);
}

/// The decision as a communicator makes it: OMNICCL_SHM_SINGLE_COPY read
/// into the config, then the calibration.
SingleCopyChoice decide() { return decide_single_copy(CommConfig::from_environment().single_copy); }

/// Each test gets its own cache file and a clean environment.
class Calibration : public ::testing::Test {
 protected:
  void SetUp() override {
    char dir[] = "/tmp/omniccl-calib-test-XXXXXX";
    ASSERT_NE(::mkdtemp(dir), nullptr);
    dir_ = dir;
    path_ = dir_ + "/cache";
    ::setenv("OMNICCL_SHM_CALIBRATION_FILE", path_.c_str(), 1);
    ::unsetenv("OMNICCL_SHM_SINGLE_COPY");
    ::unsetenv("OMNICCL_SHM_CALIBRATION");
    ::unsetenv("OMNICCL_STREAM_STORES");
    reset_single_copy_memo();
  }
  void TearDown() override {
    ::unsetenv("OMNICCL_SHM_CALIBRATION_FILE");
    ::unsetenv("OMNICCL_SHM_SINGLE_COPY");
    ::unsetenv("OMNICCL_SHM_CALIBRATION");
    reset_single_copy_memo();
    std::string cmd = "rm -rf '" + dir_ + "'";
    EXPECT_EQ(std::system(cmd.c_str()), 0);
  }
  std::string dir_, path_;
};

TEST_F(Calibration, MeasuresBothRatesInAFewMilliseconds) {
  std::string error;
  auto t0 = std::chrono::steady_clock::now();
  auto rates = measure_copy_rates(&error);
  double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  ASSERT_TRUE(rates.has_value()) << error;
  EXPECT_TRUE(std::isfinite(rates->readv_gbps) && rates->readv_gbps > 0.01) << rates->readv_gbps;
  EXPECT_TRUE(std::isfinite(rates->ring_gbps) && rates->ring_gbps > 0.01) << rates->ring_gbps;
  EXPECT_TRUE(std::isfinite(rates->copy_gbps) && rates->copy_gbps > 0.01) << rates->copy_gbps;
  EXPECT_TRUE(std::isfinite(rates->stream_gbps) && rates->stream_gbps > 0.01) << rates->stream_gbps;
  for (int i = 0; i < 2; ++i) {
    for (double v : {rates->link_ring_gbps[i], rates->link_ref_gbps[i], rates->link_split_gbps[i]}) {
      EXPECT_TRUE(std::isfinite(v) && v > 0.01) << v << " at " << kLinkProbeBytes[i] << " bytes";
    }
  }
  // Tens of ms on a quiet machine; generous for a loaded one.
  EXPECT_LT(ms, 1500.0);
}

TEST_F(Calibration, StreamProbeOutgrowsTheLastLevelCache) {
  // The copy and stream rates are meant out of the caches: a destination
  // that fits in the last-level cache (16 MiB in a 32 MiB L3) measured
  // cache-resident stores (56 GB/s, against 43 GB/s into 64 MiB).
  EXPECT_EQ(stream_probe_bytes(0), size_t(16) << 20);  // unknown: the old size
  EXPECT_EQ(stream_probe_bytes(size_t(8) << 20), size_t(16) << 20);
  EXPECT_EQ(stream_probe_bytes(size_t(32) << 20), size_t(64) << 20);
  EXPECT_EQ(stream_probe_bytes(size_t(384) << 20), size_t(128) << 20);  // bounded
  // Read from sysfs (cpu0's unified level-3 or level-2 cache), where there.
  const size_t llc = last_level_cache_bytes();
  if (std::filesystem::exists("/sys/devices/system/cpu/cpu0/cache/index3/size")) {
    EXPECT_GE(llc, size_t(1) << 20);
    EXPECT_LE(llc, size_t(4) << 30);
  }
}

TEST_F(Calibration, ParsesOnlyItsOwnFormatForThisMachine) {
  const std::string h = header_for_this_machine();
  const std::string machine = h.substr(h.find('\n') + 1);
  const std::string copies = "copy_gbps 4\nstream_gbps 6.5\n";
  const std::string tail = copies + links(20, 10.5, 8, 4, 15, 11);
  auto ok = parse_calibration(h + "readv_gbps 2.5\nring_gbps 6\n" + tail);
  ASSERT_TRUE(ok.has_value());
  EXPECT_DOUBLE_EQ(ok->readv_gbps, 2.5);
  EXPECT_DOUBLE_EQ(ok->ring_gbps, 6.0);
  EXPECT_DOUBLE_EQ(ok->copy_gbps, 4.0);
  EXPECT_DOUBLE_EQ(ok->stream_gbps, 6.5);
  EXPECT_DOUBLE_EQ(ok->link_ring_gbps[0], 20.0);
  EXPECT_DOUBLE_EQ(ok->link_ring_gbps[1], 10.5);
  EXPECT_DOUBLE_EQ(ok->link_ref_gbps[0], 8.0);
  EXPECT_DOUBLE_EQ(ok->link_ref_gbps[1], 4.0);
  EXPECT_DOUBLE_EQ(ok->link_split_gbps[0], 15.0);
  EXPECT_DOUBLE_EQ(ok->link_split_gbps[1], 11.0);
  EXPECT_FALSE(parse_calibration(""));
  // Earlier formats (1: no copy and stream rates; 2: no link-pair probes;
  // 3 and 4: below) are measured again, and so is a later one.
  EXPECT_FALSE(parse_calibration("omniccl-shm-calibration 1\n" + machine + "readv_gbps 2.5\nring_gbps 6\n"));
  EXPECT_FALSE(parse_calibration("omniccl-shm-calibration 2\n" + machine + "readv_gbps 2.5\nring_gbps 6\n" + copies));
  EXPECT_FALSE(parse_calibration(h + "readv_gbps 2.5\nring_gbps 6\n" + copies));
  // 3: ring rates taken with memcpy, slow at some distances (kernels/cpu/copy.h).
  EXPECT_FALSE(parse_calibration("omniccl-shm-calibration 3\n" + machine + "readv_gbps 2.5\nring_gbps 6\n" + tail));
  // 4: copy and stream rates into 16 MiB, cache-resident where the L3 is larger.
  EXPECT_FALSE(parse_calibration("omniccl-shm-calibration 4\n" + machine + "readv_gbps 2.5\nring_gbps 6\n" + tail));
  EXPECT_FALSE(parse_calibration("omniccl-shm-calibration 6\n" + machine + "readv_gbps 2.5\nring_gbps 6\n" + tail));
  EXPECT_FALSE(
      parse_calibration("omniccl-shm-calibration 5\nmachine otherhost 1.0 #1\nreadv_gbps 2.5\nring_gbps 6\n" + tail));
  EXPECT_FALSE(parse_calibration(h + "readv_gbps 2.5\n"));
  EXPECT_FALSE(parse_calibration(h + "readv_gbps -1\nring_gbps 6\n" + tail));
  EXPECT_FALSE(parse_calibration(h + "readv_gbps nan\nring_gbps 6\n" + tail));
  EXPECT_FALSE(parse_calibration(h + "readv_gbps 2.5x\nring_gbps 6\n" + tail));
  EXPECT_FALSE(parse_calibration(h + "ring_gbps 6\nreadv_gbps 2.5\n" + tail));
  EXPECT_FALSE(parse_calibration(h + "readv_gbps 2.5\nring_gbps 6\nstream_gbps 6.5\ncopy_gbps 4\n" + kRingWins));
  EXPECT_FALSE(parse_calibration(h + "readv_gbps 2.5\nring_gbps 6\ncopy_gbps 4\nstream_gbps 0\n" + kRingWins));
  EXPECT_FALSE(parse_calibration(h + "readv_gbps 2.5\nring_gbps 6\n" + copies + links(20, 10, 8, 4, 15, 0)));
  EXPECT_FALSE(parse_calibration(h + "readv_gbps 2.5\nring_gbps 6\n" + tail + "extra 1\n"));
  // What format_calibration writes is read back.
  CopyRates rates{1.25, 7.5, 3.5, 4.75, {21, 11}, {9, 4.5}, {16, 12.25}};
  auto back = parse_calibration(format_calibration(rates));
  ASSERT_TRUE(back.has_value());
  EXPECT_DOUBLE_EQ(back->readv_gbps, 1.25);
  EXPECT_DOUBLE_EQ(back->ring_gbps, 7.5);
  EXPECT_DOUBLE_EQ(back->copy_gbps, 3.5);
  EXPECT_DOUBLE_EQ(back->stream_gbps, 4.75);
  for (int i = 0; i < 2; ++i) {
    EXPECT_DOUBLE_EQ(back->link_ring_gbps[i], rates.link_ring_gbps[i]);
    EXPECT_DOUBLE_EQ(back->link_ref_gbps[i], rates.link_ref_gbps[i]);
    EXPECT_DOUBLE_EQ(back->link_split_gbps[i], rates.link_split_gbps[i]);
  }
}

// Streaming stores: used from kStreamMin where the cached stream rate beats
// memcpy's by kStreamGain, never where it does not; OMNICCL_STREAM_STORES=0/1
// wins over the cache, also when single copy is forced.
TEST_F(Calibration, CachedFasterStreamingStoresAreUsedFromFourMiB) {
  write_file(path_,
             header_for_this_machine() + "readv_gbps 9\nring_gbps 4.5\ncopy_gbps 3.1\nstream_gbps 4.2\n" + kRingWins);
  SingleCopyChoice c = decide();
  EXPECT_EQ(c.stream_min, uint64_t(4) << 20) << c.reason;
  EXPECT_EQ(kStreamMin, uint64_t(4) << 20);
  EXPECT_NE(c.reason.find("streaming stores from 4 MiB (streaming stores 4.2 GB/s >= 1.1 x memcpy 3.1 GB/s)"),
            std::string::npos)
      << c.reason;
  // Just under the gain: not used.
  write_file(path_,
             header_for_this_machine() + "readv_gbps 9\nring_gbps 4.5\ncopy_gbps 4\nstream_gbps 4.3\n" + kRingWins);
  reset_single_copy_memo();
  SingleCopyChoice slow = decide();
  EXPECT_EQ(slow.stream_min, 0u) << slow.reason;
  EXPECT_NE(slow.reason.find("no streaming stores (streaming stores 4.3 GB/s < 1.1 x memcpy 4 GB/s)"),
            std::string::npos)
      << slow.reason;
}

TEST_F(Calibration, StreamStoresSettingWinsOverTheCache) {
  write_file(path_, header_for_this_machine() + "readv_gbps 9\nring_gbps 4.5\ncopy_gbps 3\nstream_gbps 6\n" + kRefWins);
  ::setenv("OMNICCL_STREAM_STORES", "0", 1);
  SingleCopyChoice off = decide();
  EXPECT_EQ(off.stream_min, 0u);
  EXPECT_EQ(off.one_way_split_min, 0u);  // the rest still from the cache
  EXPECT_NE(off.reason.find("no streaming stores (OMNICCL_STREAM_STORES=0)"), std::string::npos) << off.reason;
  write_file(path_,
             header_for_this_machine() + "readv_gbps 9\nring_gbps 4.5\ncopy_gbps 6\nstream_gbps 3\n" + kRingWins);
  reset_single_copy_memo();
  ::setenv("OMNICCL_STREAM_STORES", "1", 1);
  SingleCopyChoice on = decide();
  EXPECT_EQ(on.stream_min, kStreamMin);
  EXPECT_NE(on.reason.find("streaming stores from 4 MiB (OMNICCL_STREAM_STORES=1)"), std::string::npos) << on.reason;
  // Single copy forced: streaming stores still follow the cache (auto).
  ::unsetenv("OMNICCL_STREAM_STORES");
  ::setenv("OMNICCL_SHM_SINGLE_COPY", "0", 1);
  write_file(path_,
             header_for_this_machine() + "readv_gbps 9\nring_gbps 4.5\ncopy_gbps 3\nstream_gbps 6\n" + kRingWins);
  reset_single_copy_memo();
  SingleCopyChoice forced = decide();
  EXPECT_FALSE(forced.any());
  EXPECT_EQ(forced.stream_min, kStreamMin) << forced.reason;
  ::setenv("OMNICCL_STREAM_STORES", "yes", 1);
  try {
    decide();
    ADD_FAILURE() << "OMNICCL_STREAM_STORES=yes was accepted";
  } catch (const Error& e) {
    EXPECT_EQ(e.status(), Status::kInvalidArgument);
    EXPECT_NE(std::string(e.what()).find("OMNICCL_STREAM_STORES"), std::string::npos) << e.what();
  }
  ::unsetenv("OMNICCL_STREAM_STORES");
}

TEST_F(Calibration, CachedSlowerReadvTurnsSingleCopyOff) {
  write_file(path_,
             header_for_this_machine() + "readv_gbps 2.1\nring_gbps 6.3\ncopy_gbps 5\nstream_gbps 5\n" + kRingWins);
  SingleCopyChoice c = decide();
  EXPECT_EQ(c.one_way_min, kNever) << c.reason;
  EXPECT_EQ(c.one_way_split_min, kNever) << c.reason;
  EXPECT_FALSE(c.exchange) << c.reason;  // 2.1 < 0.35 x 6.3
  // process_vm_readv works (it was measured): operations that move data
  // start through the rings and measure single copy while they run, so
  // links offer it.
  EXPECT_TRUE(c.copy_tuned) << c.reason;
  EXPECT_TRUE(c.any());
  EXPECT_NE(c.reason.find("broadcast, gather, scatter, all_gather and all_to_all of 512 KiB and more measure single "
                          "copy against the rings while they run, starting from the above (OMNICCL_SHM_SINGLE_COPY "
                          "unset)"),
            std::string::npos)
      << c.reason;
  EXPECT_NE(c.reason.find("single copy for broadcast, gather and scatter: never (split copies 15/8 GB/s, ring 20/10 "
                          "GB/s at 1/8 MiB), never with OMNICCL_SHM_SPLIT_COPY=0 (8/4 GB/s); for all_gather and "
                          "all_to_all: off (process_vm_readv 2.1 GB/s < 0.35 x ring 6.3 GB/s)"),
            std::string::npos)
      << c.reason;
  EXPECT_NE(c.reason.find("from the cache " + path_), std::string::npos) << c.reason;
}

TEST_F(Calibration, SomewhatSlowerReadvKeepsSingleCopyForExchangesOnly) {
  write_file(path_,
             header_for_this_machine() + "readv_gbps 4.2\nring_gbps 9.6\ncopy_gbps 5\nstream_gbps 5\n" + kRingWins);
  SingleCopyChoice c = decide();
  EXPECT_EQ(c.one_way_split_min, kNever) << c.reason;
  EXPECT_TRUE(c.exchange) << c.reason;  // 4.2 >= 0.35 x 9.6
  EXPECT_TRUE(c.any());
  for (bool split : {false, true}) {
    EXPECT_FALSE(c.allows(OpKind::kBroadcast, kMiB, split));
    EXPECT_FALSE(c.allows(OpKind::kGather, 64 * kMiB, split));
    EXPECT_FALSE(c.allows(OpKind::kScatterV, kMiB, split));
    EXPECT_TRUE(c.allows(OpKind::kAllGather, kMiB, split));
    EXPECT_TRUE(c.allows(OpKind::kAllToAllV, kMiB, split));
    EXPECT_FALSE(c.allows(OpKind::kAllReduce, kMiB, split));
  }
  EXPECT_NE(c.reason.find("for all_gather and all_to_all: on (process_vm_readv 4.2 GB/s >= 0.35 x ring 9.6 GB/s)"),
            std::string::npos)
      << c.reason;
}

// Exchanges follow the calibration wherever they run, where ranks outnumber
// cores too. all_gather has since round 23 (4 ranks on 2 cores, 0.5-64 MiB:
// its ring steps by reference 1.25-2x slower than through the rings). For
// all_to_all (+v) and all_gatherv a rule from one machine put them by
// reference there whatever the rates (4 ranks on 2 cores, all_to_all of 1
// MiB: 316 us by reference against 475 us through the rings); on another VM
// the rings took 82-95 us against 130-169 us, and 16 MiB 2.1-3.5 ms against
// 3.2-4.1 ms. The rates
// are this machine's after the ring probe stopped using memcpy's slow
// distances.
TEST_F(Calibration, ExchangesFollowTheCalibrationWhereRanksOutnumberCores) {
  write_file(path_,
             header_for_this_machine() + "readv_gbps 9.1\nring_gbps 29\ncopy_gbps 7.5\nstream_gbps 15.5\n" + kRingWins);
  SingleCopyChoice c = decide();
  EXPECT_FALSE(c.exchange) << c.reason;  // 9.1 < 0.35 x 29
  // The choice has no input for how many ranks share the cores: the same
  // answer everywhere.
  for (OpKind k : {OpKind::kAllGather, OpKind::kAllToAll, OpKind::kAllGatherV, OpKind::kAllToAllV}) {
    EXPECT_FALSE(c.allows(k, kMiB, true)) << op_kind_name(k);
    EXPECT_FALSE(c.allows(k, 64 * kMiB, true)) << op_kind_name(k);
  }
  EXPECT_FALSE(c.allows(OpKind::kAllReduce, kMiB, true));
  EXPECT_FALSE(c.allows(OpKind::kBroadcast, kMiB, true)) << "one-way operations follow the link probes";
  EXPECT_NE(c.reason.find("for all_gather and all_to_all: off (process_vm_readv 9.1 GB/s < 0.35 x ring 29 GB/s) ("),
            std::string::npos)
      << c.reason;
  EXPECT_EQ(c.reason.find("outnumber"), std::string::npos) << c.reason;

  // Rates that put exchanges by reference do so where ranks outnumber cores too.
  write_file(path_,
             header_for_this_machine() + "readv_gbps 4.2\nring_gbps 9.6\ncopy_gbps 5\nstream_gbps 5\n" + kRingWins);
  reset_single_copy_memo();
  SingleCopyChoice on = decide();
  EXPECT_TRUE(on.exchange) << on.reason;  // 4.2 >= 0.35 x 9.6
  for (OpKind k : {OpKind::kAllGather, OpKind::kAllToAll, OpKind::kAllGatherV, OpKind::kAllToAllV}) {
    EXPECT_TRUE(on.allows(k, kMiB, true)) << op_kind_name(k);
  }
  // Forced off, nowhere; forced on, everywhere.
  ::setenv("OMNICCL_SHM_SINGLE_COPY", "0", 1);
  reset_single_copy_memo();
  SingleCopyChoice off = decide();
  EXPECT_FALSE(off.allows(OpKind::kAllToAll, kMiB, true)) << off.reason;
  ::setenv("OMNICCL_SHM_SINGLE_COPY", "1", 1);
  reset_single_copy_memo();
  SingleCopyChoice forced = decide();
  ::unsetenv("OMNICCL_SHM_SINGLE_COPY");
  EXPECT_TRUE(forced.allows(OpKind::kAllToAll, kMiB, true)) << forced.reason;
  EXPECT_TRUE(forced.allows(OpKind::kAllGather, kMiB, true)) << forced.reason;
}

// The link-pair probes decide broadcast, gather and scatter, per size band
// and with or without split copies: the shape measured on the development
// VM in a slow state (ring ahead at 1 MiB, split copies ahead at 4-16 MiB,
// one-sided reads behind at every size).
TEST_F(Calibration, OneWayOperationsGoByReferenceWhereTheLinkProbesSaySo) {
  write_file(path_, header_for_this_machine() + "readv_gbps 10.9\nring_gbps 18.9\ncopy_gbps 5\nstream_gbps 5\n" +
                        links(22, 6, 5, 4, 10, 9));
  SingleCopyChoice c = decide();
  EXPECT_EQ(c.one_way_split_min, kOneWayLargeMin) << c.reason;
  EXPECT_EQ(c.one_way_min, kNever) << c.reason;
  EXPECT_EQ(kOneWayLargeMin, 4 * kMiB);
  for (OpKind k : {OpKind::kBroadcast, OpKind::kGather, OpKind::kScatter, OpKind::kGatherV, OpKind::kScatterV}) {
    EXPECT_FALSE(c.allows(k, kMiB, true));
    EXPECT_FALSE(c.allows(k, 4 * kMiB - 1, true));
    EXPECT_TRUE(c.allows(k, 4 * kMiB, true));
    EXPECT_TRUE(c.allows(k, 64 * kMiB, true));
    EXPECT_FALSE(c.allows(k, 64 * kMiB, false));  // OMNICCL_SHM_SPLIT_COPY=0
  }
  EXPECT_NE(c.reason.find("single copy for broadcast, gather and scatter: from 4 MiB (split copies 10/9 GB/s, ring "
                          "22/6 GB/s at 1/8 MiB), never with OMNICCL_SHM_SPLIT_COPY=0 (5/4 GB/s)"),
            std::string::npos)
      << c.reason;
  // By reference ahead at both sizes: every size, split or not.
  write_file(path_, header_for_this_machine() + "readv_gbps 9\nring_gbps 4.5\ncopy_gbps 5\nstream_gbps 5\n" + kRefWins);
  reset_single_copy_memo();
  SingleCopyChoice fast = decide();
  EXPECT_EQ(fast.one_way_min, 0u) << fast.reason;
  EXPECT_EQ(fast.one_way_split_min, 0u) << fast.reason;
  EXPECT_TRUE(fast.allows(OpKind::kBroadcast, 256 * 1024, false));
  EXPECT_TRUE(fast.allows(OpKind::kScatter, 64 * kMiB, true));
  EXPECT_FALSE(fast.allows(OpKind::kReduceScatter, kMiB, true));
  EXPECT_FALSE(fast.allows(OpKind::kSendRecv, kMiB, true));
  EXPECT_NE(fast.reason.find("single copy for broadcast, gather and scatter: on (split copies 20/9 GB/s"),
            std::string::npos)
      << fast.reason;
  // Ahead at 1 MiB only: not a band the rule trusts (never).
  write_file(path_, header_for_this_machine() + "readv_gbps 9\nring_gbps 4.5\ncopy_gbps 5\nstream_gbps 5\n" +
                        links(10, 10, 12, 5, 12, 5));
  reset_single_copy_memo();
  EXPECT_EQ(decide().one_way_split_min, kNever);
}

TEST_F(Calibration, SettingWinsOverTheCache) {
  write_file(path_,
             header_for_this_machine() + "readv_gbps 9\nring_gbps 4.5\ncopy_gbps 5\nstream_gbps 5\n" + kRingWins);
  ::setenv("OMNICCL_SHM_SINGLE_COPY", "0", 1);
  SingleCopyChoice off = decide();
  EXPECT_FALSE(off.any());
  EXPECT_FALSE(off.copy_tuned);
  EXPECT_NE(off.reason.find("OMNICCL_SHM_SINGLE_COPY=0"), std::string::npos) << off.reason;
  write_file(path_,
             header_for_this_machine() + "readv_gbps 1\nring_gbps 4.5\ncopy_gbps 5\nstream_gbps 5\n" + kRingWins);
  ::setenv("OMNICCL_SHM_SINGLE_COPY", "1", 1);
  SingleCopyChoice on = decide();
  EXPECT_TRUE(on.one_way_min == 0 && on.one_way_split_min == 0 && on.exchange && !on.copy_tuned);
  EXPECT_NE(on.reason.find("OMNICCL_SHM_SINGLE_COPY=1"), std::string::npos) << on.reason;
  ::setenv("OMNICCL_SHM_SINGLE_COPY", "maybe", 1);
  try {
    decide();
    ADD_FAILURE() << "OMNICCL_SHM_SINGLE_COPY=maybe was accepted";
  } catch (const Error& e) {
    EXPECT_EQ(e.status(), Status::kInvalidArgument);
  }
}

TEST_F(Calibration, CorruptedCacheIsIgnoredAndRewritten) {
  write_file(path_, "omniccl-shm-calibration 1\ngarbage\x01\x02\n");
  SingleCopyChoice c = decide();
  EXPECT_NE(c.reason.find("calibrated: " + path_ + " is not a valid calibration"), std::string::npos) << c.reason;
  EXPECT_NE(c.reason.find("cached in " + path_), std::string::npos) << c.reason;
  auto rates = parse_calibration(read_file(path_));
  ASSERT_TRUE(rates.has_value()) << read_file(path_);
  // The documented rule: by reference at every size where the split copies
  // beat the ring at both probe sizes, from 4 MiB where only at 8 MiB.
  const bool small = rates->link_split_gbps[0] >= rates->link_ring_gbps[0];
  const bool large = rates->link_split_gbps[1] >= rates->link_ring_gbps[1];
  EXPECT_EQ(c.one_way_split_min, large ? (small ? 0 : kOneWayLargeMin) : kNever) << c.reason;
  EXPECT_EQ(c.exchange, rates->readv_gbps >= 0.35 * rates->ring_gbps);
  struct stat st {};
  ASSERT_EQ(::stat(path_.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0600u);
  // A second decision in another process (memo forgotten) reads it.
  reset_single_copy_memo();
  SingleCopyChoice again = decide();
  EXPECT_EQ(again.one_way_min, c.one_way_min);
  EXPECT_EQ(again.one_way_split_min, c.one_way_split_min);
  EXPECT_EQ(again.exchange, c.exchange);
  EXPECT_NE(again.reason.find("from the cache " + path_), std::string::npos) << again.reason;
}

TEST_F(Calibration, CacheWritableByOthersIsNotTrusted) {
  // Valid content, but group-writable: someone else could have planted it.
  write_file(path_,
             header_for_this_machine() + "readv_gbps 1e-3\nring_gbps 1e3\ncopy_gbps 5\nstream_gbps 5\n" + kRingWins,
             0620);
  SingleCopyChoice c = decide();
  EXPECT_EQ(c.reason.find("from the cache"), std::string::npos) << c.reason;
  EXPECT_NE(c.reason.find("calibrated"), std::string::npos) << c.reason;
  auto rates = parse_calibration(read_file(path_));
  ASSERT_TRUE(rates.has_value());
  EXPECT_NE(rates->readv_gbps, 1e-3);  // replaced by a measurement
}

TEST_F(Calibration, ForceMeasuresAgainAndRewrites) {
  write_file(path_,
             header_for_this_machine() + "readv_gbps 0.001\nring_gbps 1000\ncopy_gbps 5\nstream_gbps 5\n" + kRingWins);
  ::setenv("OMNICCL_SHM_CALIBRATION", "force", 1);
  SingleCopyChoice c = decide();
  EXPECT_NE(c.reason.find("calibrated: OMNICCL_SHM_CALIBRATION=force"), std::string::npos) << c.reason;
  auto rates = parse_calibration(read_file(path_));
  ASSERT_TRUE(rates.has_value());
  EXPECT_NE(rates->readv_gbps, 0.001);
  EXPECT_NE(rates->ring_gbps, 1000.0);
  ::setenv("OMNICCL_SHM_CALIBRATION", "sometimes", 1);
  reset_single_copy_memo();
  try {
    decide();
    ADD_FAILURE() << "OMNICCL_SHM_CALIBRATION=sometimes was accepted";
  } catch (const Error& e) {
    EXPECT_EQ(e.status(), Status::kInvalidArgument);
    EXPECT_NE(std::string(e.what()).find("OMNICCL_SHM_CALIBRATION"), std::string::npos) << e.what();
  }
}

TEST_F(Calibration, UnwritableCacheStillDecides) {
  ::setenv("OMNICCL_SHM_CALIBRATION_FILE", (dir_ + "/missing-dir/cache").c_str(), 1);
  SingleCopyChoice c = decide();
  EXPECT_NE(c.reason.find("not cached: cannot create"), std::string::npos) << c.reason;
}

TEST_F(Calibration, DefaultPathIsInTheRuntimeDirectory) {
  ::unsetenv("OMNICCL_SHM_CALIBRATION_FILE");
  const char* saved = std::getenv("XDG_RUNTIME_DIR");
  std::string keep = saved ? saved : "";
  ::setenv("XDG_RUNTIME_DIR", dir_.c_str(), 1);
  EXPECT_EQ(calibration_cache_path(), dir_ + "/omniccl-shm-calibration");
  ::unsetenv("XDG_RUNTIME_DIR");
  EXPECT_EQ(calibration_cache_path(), "/tmp/omniccl-shm-calibration-" + std::to_string(::geteuid()));
  if (saved) ::setenv("XDG_RUNTIME_DIR", keep.c_str(), 1);
}

}  // namespace
}  // namespace omniccl
