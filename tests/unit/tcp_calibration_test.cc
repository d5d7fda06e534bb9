// TCP data sockets between ranks of one host (tuning/tcp_calibration.h):
// each outcome from a planted cache file, the rule on measured rates, a
// corrupted or foreign cache ignored and rewritten, a forced measurement, a
// bad setting refused.
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <sys/utsname.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>

#include "common/status.h"
#include "tuning/tcp_calibration.h"

namespace omniccl {
namespace {

/// A cache for this machine with the given rates, its first two lines built
/// here from uname() independently of the code under test.
std::string cache_text(double one, double two) {
  utsname u{};
  EXPECT_EQ(::uname(&u), 0);
  std::string key = std::string(u.nodename) + " " + u.release + " " + u.version;
  for (char& c : key) {
    if (c == '\n') c = ' ';
  }
  std::ostringstream os;
  os << "omniccl-tcp-calibration 1\nmachine " << key << "\none_socket_gbps " << one << "\ntwo_sockets_gbps " << two
     << "\n";
  return os.str();
}

std::string read_file(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

void write_file(const std::string& path, const std::string& text) {
  ::unlink(path.c_str());
  {
    std::ofstream out(path);
    out << text;
  }
  ASSERT_EQ(::chmod(path.c_str(), 0600), 0);
}

/// Each test gets its own cache file and a clean environment.
class TcpCalibration : public ::testing::Test {
 protected:
  void SetUp() override {
    char dir[] = "/tmp/omniccl-tcp-calib-test-XXXXXX";
    ASSERT_NE(::mkdtemp(dir), nullptr);
    dir_ = dir;
    path_ = dir_ + "/cache";
    ::setenv("OMNICCL_TCP_CALIBRATION_FILE", path_.c_str(), 1);
    ::unsetenv("OMNICCL_TCP_CALIBRATION");
    reset_tcp_streams_memo();
  }
  void TearDown() override {
    ::unsetenv("OMNICCL_TCP_CALIBRATION_FILE");
    ::unsetenv("OMNICCL_TCP_CALIBRATION");
    reset_tcp_streams_memo();
    std::string cmd = "rm -rf '" + dir_ + "'";
    EXPECT_EQ(std::system(cmd.c_str()), 0);
  }
  std::string dir_, path_;
};

// Two sockets only where they beat one by kTcpTwoStreamsGain (1.1).
TEST(TcpStreamsRule, TwoSocketsOnlyWhereTheyAreATenthFaster) {
  EXPECT_EQ(tcp_streams_from_rates({10, 11}), 2);
  EXPECT_EQ(tcp_streams_from_rates({10, 20}), 2);
  EXPECT_EQ(tcp_streams_from_rates({10, 10.9}), 1);
  EXPECT_EQ(tcp_streams_from_rates({10, 10}), 1);
  EXPECT_EQ(tcp_streams_from_rates({13.3, 11.5}), 1);  // a 2-core VM's loopback rates
}

TEST_F(TcpCalibration, APlantedCacheWhereTwoSocketsWinGivesTwo) {
  write_file(path_, cache_text(6, 8));
  TcpStreamsChoice c = decide_local_tcp_streams();
  EXPECT_EQ(c.streams, 2);
  EXPECT_NE(c.reason.find("2 data sockets per pair of ranks on this host"), std::string::npos) << c.reason;
  EXPECT_NE(c.reason.find("one socket 6 GB/s, two 8 GB/s"), std::string::npos) << c.reason;
  EXPECT_NE(c.reason.find("from the cache " + path_), std::string::npos) << c.reason;
}

TEST_F(TcpCalibration, APlantedCacheWhereOneSocketWinsGivesOne) {
  write_file(path_, cache_text(13, 11));
  TcpStreamsChoice c = decide_local_tcp_streams();
  EXPECT_EQ(c.streams, 1);
  EXPECT_NE(c.reason.find("1 data socket per pair of ranks on this host"), std::string::npos) << c.reason;
  EXPECT_NE(c.reason.find("from the cache"), std::string::npos) << c.reason;
}

// The process remembers its decision until the cache file changes name.
TEST_F(TcpCalibration, TheDecisionIsRememberedPerCacheFile) {
  write_file(path_, cache_text(6, 8));
  EXPECT_EQ(decide_local_tcp_streams().streams, 2);
  write_file(path_, cache_text(13, 11));
  EXPECT_EQ(decide_local_tcp_streams().streams, 2);  // remembered
  const std::string other = dir_ + "/other";
  write_file(other, cache_text(13, 11));
  ::setenv("OMNICCL_TCP_CALIBRATION_FILE", other.c_str(), 1);
  EXPECT_EQ(decide_local_tcp_streams().streams, 1);
}

// No cache: measured over loopback, then written in the expected format
// with positive rates, and the choice follows them.
TEST_F(TcpCalibration, WithoutACacheItMeasuresAndWritesOne) {
  auto t0 = std::chrono::steady_clock::now();
  TcpStreamsChoice c = decide_local_tcp_streams();
  const double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  EXPECT_NE(c.reason.find("calibrated: no cache yet; cached in " + path_), std::string::npos) << c.reason;
  EXPECT_LT(ms, 2000) << "the TCP probe took " << ms << " ms";
  const std::string text = read_file(path_);
  auto rates = parse_tcp_calibration(text);
  ASSERT_TRUE(rates.has_value()) << text;
  EXPECT_GT(rates->one_gbps, 0.01);
  EXPECT_GT(rates->two_gbps, 0.01);
  EXPECT_EQ(c.streams, rates->two_gbps >= 1.1 * rates->one_gbps ? 2 : 1) << text;
  struct stat st {};
  ASSERT_EQ(::stat(path_.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0600u);
}

// A cache of another format, another machine, with bad numbers or trailing
// lines is ignored and measured again (and rewritten).
TEST_F(TcpCalibration, ABadOrForeignCacheIsMeasuredAgain) {
  const std::string good = cache_text(6, 8);
  std::string foreign = good;
  foreign.replace(foreign.find("machine ") + 8, 0, "another-host ");
  std::string old_format = good;
  old_format.replace(old_format.find(" 1\n"), 3, " 0\n");
  std::string negative = cache_text(6, -8);
  for (const std::string& bad : {foreign, old_format, negative, good + "extra 1\n", std::string("garbage")}) {
    reset_tcp_streams_memo();
    write_file(path_, bad);
    TcpStreamsChoice c = decide_local_tcp_streams();
    EXPECT_NE(c.reason.find("is not a valid TCP calibration for this host and kernel"), std::string::npos)
        << c.reason << "\nfor:\n"
        << bad;
    EXPECT_TRUE(parse_tcp_calibration(read_file(path_)).has_value()) << "not rewritten after:\n" << bad;
  }
}

TEST_F(TcpCalibration, ForceMeasuresAgainDespiteAValidCache) {
  write_file(path_, cache_text(6, 8));
  ::setenv("OMNICCL_TCP_CALIBRATION", "force", 1);
  TcpStreamsChoice c = decide_local_tcp_streams();
  EXPECT_NE(c.reason.find("calibrated: OMNICCL_TCP_CALIBRATION=force"), std::string::npos) << c.reason;
  EXPECT_NE(read_file(path_), cache_text(6, 8));
}

TEST_F(TcpCalibration, ABadSettingIsRefusedNamingIt) {
  ::setenv("OMNICCL_TCP_CALIBRATION", "sometimes", 1);
  try {
    decide_local_tcp_streams();
    ADD_FAILURE() << "OMNICCL_TCP_CALIBRATION=sometimes was accepted";
  } catch (const Error& e) {
    EXPECT_EQ(e.status(), Status::kInvalidArgument);
    EXPECT_NE(std::string(e.what()).find("OMNICCL_TCP_CALIBRATION is 'sometimes'"), std::string::npos) << e.what();
  }
}

// A cache file that cannot be written: the measured choice is used, and the
// reason says why it was not cached.
TEST_F(TcpCalibration, AnUnwritableCacheIsMeasuredWithoutCaching) {
  ::setenv("OMNICCL_TCP_CALIBRATION_FILE", (dir_ + "/missing-dir/cache").c_str(), 1);
  TcpStreamsChoice c = decide_local_tcp_streams();
  EXPECT_NE(c.reason.find("not cached"), std::string::npos) << c.reason;
  EXPECT_GE(c.streams, 1);
  EXPECT_LE(c.streams, 2);
}

}  // namespace
}  // namespace omniccl
