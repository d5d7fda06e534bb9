// Ranks as forked processes, each with an emulated GPU runtime
// (emulated_gpu.h) and a communicator over a file rendezvous: the harness of
// the tests of CUDA tensors' paths on machines without a GPU.
#pragma once

#include <gtest/gtest.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <functional>
#include <string>
#include <vector>

#include "bootstrap/rendezvous.h"
#include "common/gpu_runtime.h"
#include "common/status.h"
#include "communicator/communicator.h"
#include "emulated_gpu.h"

namespace omniccl::test {

/// In a child: a failed expectation prints and makes the rank's exit code 1.
struct RankChecks {
  int rank;
  int failures = 0;
  void expect(bool ok, const std::string& what) {
    if (!ok) {
      ++failures;
      std::fprintf(stderr, "rank %d: FAILED: %s\n", rank, what.c_str());
    }
  }
};

/// What each rank runs: its communicator, the runtime, the checks.
using RankFn = std::function<void(Communicator&, EmulatedGpu&, RankChecks&)>;

/// Forks n ranks; each installs an emulated GPU runtime, creates a
/// communicator (timeout `timeout_ms`) and runs fn. Returns the ranks' exit
/// codes (-1: killed after 60 s).
/// Sets up rank r's runtime and configuration before its communicator is made.
using RankSetup = std::function<void(int r, EmulatedGpu&, CommConfig&)>;

inline std::vector<int> run_ranks(int n, const RankFn& fn, int64_t timeout_ms = 20000,
                                  const std::function<bool(int)>& skip_comm = {}, const RankSetup& setup = {}) {
  char dir_template[] = "/tmp/omniccl_staging_XXXXXX";
  const char* dir = mkdtemp(dir_template);
  if (dir == nullptr) return std::vector<int>(size_t(n), -2);
  const std::string init = std::string("file://") + dir;
  std::vector<pid_t> pids;
  for (int r = 0; r < n; ++r) {
    const pid_t pid = fork();
    if (pid == 0) {
      alarm(60);
      RankChecks ck{r};
      if (skip_comm && skip_comm(r)) _exit(0);  // a rank that never joins
      try {
        auto gpu = std::make_unique<EmulatedGpu>();
        EmulatedGpu* g = gpu.get();
        install_gpu_runtime(std::move(gpu));
        CommConfig cfg = CommConfig::from_environment();
        cfg.timeout_ms = timeout_ms;
        cfg.device_transport = "staged";  // the staged path, unless `setup` says otherwise
        if (setup) setup(r, *g, cfg);
        auto comm = Communicator::create(bootstrap::parse_init_method(init, r, n), cfg);
        fn(*comm, *g, ck);
        ck.expect(EmulatedGpu::stuck_waits().load() == 0, "no stream waited for a word that was never written");
      } catch (const std::exception& e) {
        ck.expect(false, std::string("unexpected exception: ") + e.what());
      }
      std::fflush(stderr);
      _exit(ck.failures == 0 ? 0 : 1);
    }
    pids.push_back(pid);
  }
  std::vector<int> codes;
  for (pid_t pid : pids) {
    int status = 0;
    waitpid(pid, &status, 0);
    codes.push_back(WIFEXITED(status) ? WEXITSTATUS(status) : -1);
  }
  std::filesystem::remove_all(dir);
  return codes;
}

inline void expect_all_ok(const std::vector<int>& codes) {
  for (size_t r = 0; r < codes.size(); ++r) EXPECT_EQ(codes[r], 0) << "rank " << r;
}

/// A CUDA tensor view over emulated device memory.
template <typename T>
TensorView dev_view(std::vector<T>& v, DType t, int device = 0) {
  TensorView tv;
  tv.data = v.data();
  tv.count = v.size();
  tv.dtype = t;
  tv.device = DeviceKind::kCUDA;
  tv.device_id = device;
  return tv;
}

/// A CUDA tensor over `count` elements of type `t` at device pointer p.
inline TensorView dev_view(void* p, size_t count, DType t = DType::kInt32, int device = 0) {
  TensorView tv;
  tv.data = p;
  tv.count = count;
  tv.dtype = t;
  tv.device = DeviceKind::kCUDA;
  tv.device_id = device;
  return tv;
}

/// The CUDA IPC path with a small scratch buffer (4 KiB: collectives' pieces
/// of 512 int32, point-to-point slots of 2 KiB / n, so that most calls take
/// many steps), on device rank % `devices`.
inline RankSetup cuda_ipc_path(int devices = 1, bool peer_access = true) {
  return [=](int r, EmulatedGpu& gpu, CommConfig& cfg) {
    cfg.device_transport = "cuda_ipc";
    cfg.cuda_ipc_buffer = 4096;
    gpu.peer_access = peer_access;
    gpu.set_device_count(devices);
    gpu.set_device(r % devices);
  };
}

/// Rank r's input element i: distinct for every rank and (mod 997) position.
inline int32_t rank_input(int r, size_t i) { return int32_t(r * 1000 + int(i % 997)); }

inline CallOptions on(EmuStream& s, bool async = false) {
  CallOptions c;
  c.stream = &s;
  c.async = async;
  return c;
}

/// What an operation's error was, or kSuccess.
inline Status status_of(const std::function<void()>& fn, std::string* msg = nullptr) {
  try {
    fn();
  } catch (const Error& e) {
    if (msg != nullptr) *msg = e.what();
    return e.status();
  }
  return Status::kSuccess;
}

}  // namespace omniccl::test
