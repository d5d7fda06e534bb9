// The transport chosen per peer pair, seen in a real job: the INFO lines of
// subsystem TRANSPORT name each peer's transport and why, and data moves
// over a mesh whose links differ by peer.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "harness.h"

namespace {

using omniccl::testing::dl_float;
using omniccl::testing::JobOptions;
using omniccl::testing::JobResult;
using omniccl::testing::run_ranks;
using omniccl::testing::Tensor1D;

std::string line_for(int from, int to, const std::string& what) {
  return "rank " + std::to_string(from) + " -> rank " + std::to_string(to) + ": " + what;
}

/// In a rank: makes a communicator with `transport`, checks its transport
/// name, runs one all_reduce (result checked) with stderr going to a file;
/// returns the log text through *log, and 0 on success.
int init_and_reduce(int rank, int n, const char* transport, const char* expect_name, std::string* log) {
  char path[] = "/tmp/omniccl-choice-XXXXXX";
  int fd = ::mkstemp(path);
  RANK_CHECK(fd >= 0, rank, "mkstemp failed");
  std::fflush(stderr);
  int saved = ::dup(2);
  ::dup2(fd, 2);
  auto body = [&]() -> int {
    occl_config_t cfg = OCCL_CONFIG_INIT;
    cfg.timeout_ms = 60000;
    cfg.transport = transport;
    occl_comm_t comm = nullptr;
    RANK_OK(occl_comm_init(&comm, std::getenv("OCCL_TEST_INIT"), OCCL_FROM_ENV, OCCL_FROM_ENV, &cfg), rank);
    const char* name = nullptr;
    RANK_OK(occl_comm_transport(comm, &name), rank);
    RANK_CHECK(std::string(name) == expect_name, rank,
               std::string("transport name ") + name + ", expected " + expect_name);
    std::vector<float> buf(1000);
    for (size_t i = 0; i < buf.size(); ++i) buf[i] = float(i) + float(rank);
    Tensor1D t(buf.data(), int64_t(buf.size()), dl_float(32));
    RANK_OK(occl_all_reduce(&t, &t, OCCL_SUM, comm, nullptr), rank);
    for (size_t i = 0; i < buf.size(); ++i) {
      // sum over ranks r of (i + r)
      const float want = float(n) * float(i) + float(n * (n - 1) / 2);
      RANK_CHECK(buf[i] == want, rank, "all_reduce element " + std::to_string(i) + " = " + std::to_string(buf[i]));
    }
    RANK_OK(occl_comm_destroy(comm), rank);
    return 0;
  };
  int rc = body();
  std::fflush(stderr);
  ::dup2(saved, 2);
  ::close(saved);
  ::close(fd);
  std::ifstream in(path);
  log->assign(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
  ::unlink(path);
  if (rc != 0) std::fprintf(stderr, "rank %d stderr:\n%s", rank, log->c_str());
  return rc;
}

JobOptions logging_job(int n) {
  JobOptions o;
  o.nranks = n;
  o.create_comm = false;
  o.job_timeout_s = 120;
  o.env = {{"OMNICCL_DEBUG", "INFO"}, {"OMNICCL_DEBUG_SUBSYS", "TRANSPORT"}};
  return o;
}

TEST(TransportChoice, SameHostPicksSharedMemoryAndLogsWhy) {
  JobResult res = run_ranks(logging_job(2), [](occl_comm_t, int rank, int n) {
    std::string log;
    if (int rc = init_and_reduce(rank, n, "auto", "shm", &log)) return rc;
    // (The reason goes on with "; single copy off on rank N" where this
    // host's calibration or a setting turned single copy off.)
    const std::string want = line_for(rank, 1 - rank, "shm (same host and boot id");
    RANK_CHECK(log.find(want) != std::string::npos, rank, "no '" + want + "' in:\n" + log);
    return 0;
  });
  EXPECT_TRUE(res.ok()) << res.summary();
}

TEST(TransportChoice, ForcedTcpIsLogged) {
  JobResult res = run_ranks(logging_job(2), [](occl_comm_t, int rank, int n) {
    std::string log;
    if (int rc = init_and_reduce(rank, n, "tcp", "tcp", &log)) return rc;
    const std::string want = line_for(rank, 1 - rank, "tcp (OMNICCL_TRANSPORT=tcp)");
    RANK_CHECK(log.find(want) != std::string::npos, rank, "no '" + want + "' in:\n" + log);
    return 0;
  });
  EXPECT_TRUE(res.ok()) << res.summary();
}

TEST(TransportChoice, OneRankForcingTcpGetsAMixedMesh) {
  // Ranks 0 and 1 share memory; rank 2 forces TCP (it makes no segment), so
  // both of its pairs go over TCP, and everything still adds up.
  JobResult res = run_ranks(logging_job(3), [](occl_comm_t, int rank, int n) {
    std::string log;
    const bool tcp = rank == 2;
    if (int rc = init_and_reduce(rank, n, tcp ? "tcp" : "auto", tcp ? "tcp" : "mixed", &log)) return rc;
    std::vector<std::string> want;
    if (tcp) {
      want = {line_for(2, 0, "tcp (OMNICCL_TRANSPORT=tcp)"), line_for(2, 1, "tcp (OMNICCL_TRANSPORT=tcp)")};
    } else {
      want = {line_for(rank, 1 - rank, "shm (same host and boot id"),
              line_for(rank, 2, "tcp (shm: rank 2 offers no shared memory)")};
    }
    for (const auto& w : want) RANK_CHECK(log.find(w) != std::string::npos, rank, "no '" + w + "' in:\n" + log);
    return 0;
  });
  EXPECT_TRUE(res.ok()) << res.summary();
}

}  // namespace
