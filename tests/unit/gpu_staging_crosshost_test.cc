// The staged path of CUDA tensors between hosts, without GPUs: ranks on the
// emulated GPU runtime (emulated_gpu.h) in two network namespaces joined by
// a veth pair, each namespace a "host" with its own hostname and address,
// the ranks' data over TCP between them. What this proves: collectives'
// results and send/recv through host copies and TCP (sizes of several
// pieces), a peer killed in the middle of an operation or between the
// slices of a large one (an error on the survivors within a bound, their
// streams released), a peer that stops (the
// deadline: kTimeout, streams released). Needs root (network namespaces);
// skipped, saying why, where they cannot be made.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <sched.h>
#include <stdlib.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "collective/collectives.h"
#include "common/status.h"
#include "communicator/communicator.h"
#include "emulated_gpu.h"
#include "emulated_ranks.h"

namespace omniccl {
namespace {

using coll::WorkPtr;
using test::dev_view;
using test::EmulatedGpu;
using test::EmuStream;
using test::expect_all_ok;
using test::on;
using test::RankChecks;
using test::run_ranks;

/// Two namespaces, "hosts" A (10.79.0.1) and B (10.79.0.2), joined by a veth
/// pair, and a directory for the hosts' calibration caches; removed on
/// destruction. ok() false (why() says why) where they cannot be made.
class TwoHosts {
 public:
  TwoHosts() : id_(std::to_string(getpid() % 100000)) {
    if (geteuid() != 0) {
      why_ = "needs root to create network namespaces (uid " + std::to_string(geteuid()) + ")";
      return;
    }
    const std::string a = ns(0), b = ns(1), va = "oga" + id_, vb = "ogb" + id_;
    const std::vector<std::string> steps = {
        "ip netns add " + a,
        "ip netns add " + b,
        "ip link add " + va + " type veth peer name " + vb,
        "ip link set " + va + " netns " + a,
        "ip link set " + vb + " netns " + b,
        "ip -n " + a + " addr add " + addr(0) + "/24 dev " + va,
        "ip -n " + b + " addr add " + addr(1) + "/24 dev " + vb,
        "ip -n " + a + " link set " + va + " up",
        "ip -n " + b + " link set " + vb + " up",
        "ip -n " + a + " link set lo up",
        "ip -n " + b + " link set lo up",
    };
    for (const std::string& s : steps) {
      if (std::system((s + " >/dev/null 2>&1").c_str()) != 0) {
        why_ = "cannot build the namespaces' network (" + s + " failed)";
        return;
      }
    }
    char dir[] = "/tmp/omniccl_hosts_XXXXXX";
    if (mkdtemp(dir) == nullptr) {
      why_ = "cannot create a temporary directory";
      return;
    }
    dir_ = dir;
    ok_ = true;
  }
  ~TwoHosts() {
    // The veth pair goes with its namespaces.
    for (int h = 0; h < 2; ++h) (void)std::system(("ip netns del " + ns(h) + " >/dev/null 2>&1").c_str());
    if (!dir_.empty()) std::filesystem::remove_all(dir_);
  }
  TwoHosts(const TwoHosts&) = delete;
  TwoHosts& operator=(const TwoHosts&) = delete;

  bool ok() const { return ok_; }
  const std::string& why() const { return why_; }
  std::string ns(int h) const { return "occl-gs-" + id_ + (h == 0 ? "-a" : "-b"); }
  static std::string addr(int h) { return h == 0 ? "10.79.0.1" : "10.79.0.2"; }

  /// In a rank's process, before its communicator: moves it onto host h
  /// (namespace, hostname, the address it listens on) and its data onto TCP.
  void enter(int h, CommConfig& cfg) const {
    const std::string path = "/var/run/netns/" + ns(h);
    const int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0 || setns(fd, CLONE_NEWNET) != 0) throw std::runtime_error("cannot enter " + path);
    close(fd);
    const std::string host = h == 0 ? "hostA" : "hostB";
    if (unshare(CLONE_NEWUTS) != 0 || sethostname(host.c_str(), host.size()) != 0) {
      throw std::runtime_error("cannot give this rank the hostname " + host);
    }
    setenv("OMNICCL_SOCKET_ADDR", addr(h).c_str(), 1);
    // Each simulated host measures for itself: the machine's own caches,
    // measured under its hostname, are left alone (as real hosts do not
    // share theirs).
    setenv("OMNICCL_TCP_CALIBRATION_FILE", (dir_ + "/tcp-" + host).c_str(), 1);
    setenv("OMNICCL_SHM_CALIBRATION_FILE", (dir_ + "/shm-" + host).c_str(), 1);
    cfg.transport = "tcp";
  }

 private:
  std::string id_;
  std::string dir_;
  bool ok_ = false;
  std::string why_;
};

/// Ranks 0 and 1 on host A, rank 2 on host B.
test::RankSetup on_hosts(const TwoHosts& net) {
  return [&net](int r, EmulatedGpu&, CommConfig& cfg) { net.enter(r == 2 ? 1 : 0, cfg); };
}

/// Waits (bounded) for the communicator's asynchronous error.
Status async_error_within(Communicator& c, std::string& msg, int ms = 15000) {
  for (int i = 0; i < ms / 25 && c.async_error(msg) == Status::kSuccess; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(25));
  }
  return c.async_error(msg);
}

constexpr size_t kLarge = (size_t(3) << 20) / 4 + 7;  // float32 elements: several pieces, odd on purpose

void collectives_across_hosts(Communicator& c, EmulatedGpu&, RankChecks& ck) {
  EmuStream s;
  const int r = c.rank(), n = c.size();
  ck.expect(std::string(c.transport_name()) == "tcp", std::string("the data go over TCP: ") + c.transport_name());
  std::vector<float> x(kLarge);
  for (size_t i = 0; i < x.size(); ++i) x[i] = float(r + 1) * float(i % 1000);
  coll::all_reduce(c, dev_view(x, DType::kFloat32), dev_view(x, DType::kFloat32), int(RedOp::kSum), on(s));
  std::vector<int32_t> b(kLarge, r == 2 ? 77 : 0);
  coll::broadcast(c, dev_view(b, DType::kInt32), 2, on(s));
  const size_t part = kLarge / 3;
  std::vector<int32_t> mine(part, r * 1000), all(part * size_t(n), -1);
  coll::all_gather(c, dev_view(mine, DType::kInt32), dev_view(all, DType::kInt32), on(s));
  // send/recv across the hosts: rank 0 (host A) and rank 2 (host B) swap.
  std::vector<int64_t> out(kLarge / 2, r), in(kLarge / 2, -1);
  if (r != 1) {
    const int peer = 2 - r;
    coll::send_tagged(c, dev_view(out, DType::kInt64), peer, 9, on(s));
    coll::recv_tagged(c, dev_view(in, DType::kInt64), peer, 9, on(s), nullptr);
  }
  ck.expect(s.sync(40000), "the stream finished");
  bool ok = true;
  for (size_t i = 0; i < x.size() && ok; ++i) ok = x[i] == 6.0f * float(i % 1000);
  ck.expect(ok, "all_reduce, every element");
  ck.expect(b.front() == 77 && b.back() == 77, "broadcast from host B");
  for (int j = 0; j < n; ++j) {
    ck.expect(all[size_t(j) * part] == j * 1000 && all[size_t(j + 1) * part - 1] == j * 1000,
              "all_gather block " + std::to_string(j));
  }
  if (r != 1) ck.expect(in.front() == 2 - r && in.back() == 2 - r, "the message from the other host");
}

TEST(GpuStagingCrossHost, CollectivesAndSendRecvGiveTheirResultsOverTcp) {
  TwoHosts net;
  if (!net.ok()) GTEST_SKIP() << net.why();
  expect_all_ok(run_ranks(3, collectives_across_hosts, 30000, {}, on_hosts(net)));
}

TEST(GpuStagingCrossHost, APeerKilledMidOperationFailsTheSurvivorsAndReleasesTheirStreams) {
  TwoHosts net;
  if (!net.ok()) GTEST_SKIP() << net.why();
  expect_all_ok(run_ranks(
      3,
      [](Communicator& c, EmulatedGpu&, RankChecks& ck) {
        EmuStream s;
        std::vector<float> x(kLarge, 1.0f);
        if (c.rank() == 2) {
          // Its part of the operation never comes: the others are in it when it dies.
          s.close_gate();
          coll::all_reduce(c, dev_view(x, DType::kFloat32), dev_view(x, DType::kFloat32), 0, on(s));
          std::this_thread::sleep_for(std::chrono::milliseconds(500));
          std::fflush(stderr);
          _exit(0);
        }
        const auto t0 = std::chrono::steady_clock::now();
        WorkPtr w = coll::all_reduce(c, dev_view(x, DType::kFloat32), dev_view(x, DType::kFloat32), 0, on(s, true));
        const Status st = w != nullptr ? w->wait() : Status::kInternal;
        ck.expect(st == Status::kPeerFailure, "the survivor's operation failed: " + (w ? w->message() : ""));
        ck.expect(s.sync(10000), "the survivor's stream was released");
        ck.expect(std::chrono::steady_clock::now() - t0 < std::chrono::seconds(20), "within a bound");
        std::string msg;
        ck.expect(async_error_within(c, msg) == Status::kPeerFailure, "the communicator reports it: " + msg);
      },
      15000, {}, on_hosts(net)));
}

// A 24 MiB all_reduce runs as 3 slices (collective/common.h) and the
// survivors' streams copy slice by slice. Rank 2 (host B, CPU tensors) dies
// once the first slice's result is in its buffer: the pipeline is then
// between slices on every rank, and each survivor's call must fail, its
// stream be released, and nothing wait for a deadline.
TEST(GpuStagingCrossHost, APeerKilledBetweenSlicesFailsTheSurvivorsAndReleasesTheirStreams) {
  TwoHosts net;
  if (!net.ok()) GTEST_SKIP() << net.why();
  expect_all_ok(run_ranks(
      3,
      [](Communicator& c, EmulatedGpu&, RankChecks& ck) {
        std::vector<float> x(size_t{6} << 20, 1.0f);
        if (c.rank() == 2) {
          TensorView v = dev_view(x, DType::kFloat32);
          v.device = DeviceKind::kCPU;
          CallOptions call;
          call.async = true;
          WorkPtr w = coll::all_reduce(c, v, v, int(RedOp::kSum), call);
          const auto give_up = std::chrono::steady_clock::now() + std::chrono::seconds(20);
          while (std::atomic_ref<float>(x[0]).load() != 3.0f && std::chrono::steady_clock::now() < give_up) {
            std::this_thread::sleep_for(std::chrono::microseconds(50));
          }
          std::fflush(stderr);
          _exit(0);
        }
        EmuStream s;
        const auto t0 = std::chrono::steady_clock::now();
        WorkPtr w = coll::all_reduce(c, dev_view(x, DType::kFloat32), dev_view(x, DType::kFloat32), int(RedOp::kSum),
                                     on(s, true));
        const Status st = w != nullptr ? w->wait() : Status::kInternal;
        ck.expect(st == Status::kPeerFailure, "the survivor's operation failed: " + (w ? w->message() : ""));
        ck.expect(s.sync(10000), "the survivor's stream was released");
        ck.expect(std::chrono::steady_clock::now() - t0 < std::chrono::seconds(20), "within a bound");
      },
      30000, {}, on_hosts(net)));
}

TEST(GpuStagingCrossHost, APeerThatStopsIsADeadlineAndReleasesTheStreams) {
  TwoHosts net;
  if (!net.ok()) GTEST_SKIP() << net.why();
  expect_all_ok(run_ranks(
      3,
      [](Communicator& c, EmulatedGpu&, RankChecks& ck) {
        EmuStream s;
        std::vector<float> x(kLarge, 1.0f);
        if (c.rank() == 2) {
          // Alive (its connections stay open) but never takes part.
          std::this_thread::sleep_for(std::chrono::seconds(6));
          std::fflush(stderr);
          _exit(0);
        }
        CallOptions call = on(s, true);
        call.timeout_ms = 1500;
        const auto t0 = std::chrono::steady_clock::now();
        WorkPtr w = coll::all_reduce(c, dev_view(x, DType::kFloat32), dev_view(x, DType::kFloat32), 0, call);
        const Status st = w != nullptr ? w->wait() : Status::kInternal;
        ck.expect(st == Status::kTimeout, "the operation timed out: " + (w ? w->message() : ""));
        ck.expect(std::chrono::steady_clock::now() - t0 < std::chrono::seconds(5), "at about its deadline");
        ck.expect(s.sync(10000), "the stream was released");
      },
      30000, {}, on_hosts(net)));
}

}  // namespace
}  // namespace omniccl
