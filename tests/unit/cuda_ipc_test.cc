// The CUDA IPC transport (transport/cuda_ipc) and the device engine
// (algorithm/device/), checked on any machine over the emulated GPU runtime
// (emulated_gpu.h): ranks are forked processes whose "device memory" is
// shared memory that peers map through handles, whose streams are threads,
// and whose stream writes and waits of flag words run on those threads.
// What this proves: handles open across processes; every collective on the
// device path gives the CPU path's results with 2-4 ranks on one GPU and on
// several, through pieces of the scratch buffer; the call returns before the
// stream runs it; a peer that dies, never arrives, or calls another
// operation, and an abort, each end the operation with an error and release
// the stream. What it cannot: the CUDA calls themselves (tests/gpu).
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cmath>
#include <string>
#include <thread>
#include <vector>

#include "collective/collectives.h"
#include "emulated_ranks.h"

namespace omniccl {
namespace {

using test::cuda_ipc_path;
using test::dev_view;
using test::EmulatedGpu;
using test::EmuStream;
using test::expect_all_ok;
using test::on;
using test::rank_input;
using test::RankChecks;
using test::RankSetup;
using test::run_ranks;
using test::status_of;

std::vector<int32_t> inputs(int r, size_t n) {
  std::vector<int32_t> v(n);
  for (size_t i = 0; i < n; ++i) v[i] = rank_input(r, i);
  return v;
}

void check_reductions(Communicator& c, RankChecks& ck, int dev, size_t count) {
  const int n = c.size(), me = c.rank();
  EmuStream s;
  auto send = inputs(me, count);
  std::vector<int32_t> sum(count), mx(count), red(count, -7);
  coll::all_reduce(c, dev_view(send, DType::kInt32, dev), dev_view(sum, DType::kInt32, dev), int(RedOp::kSum), on(s));
  coll::all_reduce(c, dev_view(send, DType::kInt32, dev), dev_view(mx, DType::kInt32, dev), int(RedOp::kMax), on(s));
  coll::reduce(c, dev_view(send, DType::kInt32, dev), dev_view(red, DType::kInt32, dev), int(RedOp::kSum), n - 1,
               on(s));
  std::vector<float> f(count, float(me + 1)), avg(count);
  coll::all_reduce(c, dev_view(f, DType::kFloat32, dev), dev_view(avg, DType::kFloat32, dev), int(RedOp::kAvg), on(s));
  ck.expect(s.sync(), "the stream finished");
  bool ok_sum = true, ok_max = true, ok_red = true, ok_avg = true;
  for (size_t i = 0; i < count; ++i) {
    int32_t want = 0;
    for (int r = 0; r < n; ++r) want += rank_input(r, i);
    ok_sum &= sum[i] == want;
    ok_max &= mx[i] == rank_input(n - 1, i);
    ok_red &= me == n - 1 ? red[i] == want : red[i] == -7;
    ok_avg &= avg[i] == float(n + 1) / 2;
  }
  ck.expect(ok_sum, "all_reduce sum");
  ck.expect(ok_max, "all_reduce max");
  ck.expect(ok_red, "reduce at the last rank (others' recvbuf untouched)");
  ck.expect(ok_avg, "all_reduce avg");
}

void check_movement(Communicator& c, RankChecks& ck, int dev, size_t count) {
  const int n = c.size(), me = c.rank();
  EmuStream s;
  auto send = inputs(me, count);
  std::vector<int32_t> bc = me == 1 ? inputs(1, count) : std::vector<int32_t>(count, 0);
  std::vector<int32_t> ag(count * n), rs(count), ga(me == 1 ? count * n : 0), sc(count), a2a(count * n);
  auto big = inputs(me, count * n);
  coll::broadcast(c, dev_view(bc, DType::kInt32, dev), 1, on(s));
  coll::all_gather(c, dev_view(send, DType::kInt32, dev), dev_view(ag, DType::kInt32, dev), on(s));
  coll::reduce_scatter(c, dev_view(big, DType::kInt32, dev), dev_view(rs, DType::kInt32, dev), int(RedOp::kSum), on(s));
  std::optional<TensorView> gv;
  if (me == 1) gv = dev_view(ga, DType::kInt32, dev);
  coll::gather(c, dev_view(send, DType::kInt32, dev), gv, 1, on(s));
  std::optional<TensorView> sv;
  if (me == 0) sv = dev_view(big, DType::kInt32, dev);
  coll::scatter(c, sv, dev_view(sc, DType::kInt32, dev), 0, on(s));
  coll::all_to_all(c, dev_view(big, DType::kInt32, dev), dev_view(a2a, DType::kInt32, dev), on(s));
  ck.expect(s.sync(), "the stream finished");
  bool ok[6] = {true, true, true, true, true, true};
  for (size_t i = 0; i < count; ++i) {
    ok[0] &= bc[i] == rank_input(1, i);
    int32_t want = 0;
    for (int r = 0; r < n; ++r) {
      ok[1] &= ag[r * count + i] == rank_input(r, i);
      want += rank_input(r, me * count + i);
      if (me == 1) ok[3] &= ga[r * count + i] == rank_input(r, i);
      ok[5] &= a2a[r * count + i] == rank_input(r, me * count + i);
    }
    ok[2] &= rs[i] == want;
    ok[4] &= sc[i] == rank_input(0, me * count + i);
  }
  const char* names[6] = {"broadcast", "all_gather", "reduce_scatter", "gather", "scatter", "all_to_all"};
  for (int k = 0; k < 6; ++k) ck.expect(ok[k], names[k]);
}

/// Offsets of blocks of `counts` laid out one after another.
std::vector<int64_t> offsets(const std::vector<int64_t>& counts) {
  std::vector<int64_t> d(counts.size());
  for (size_t i = 1; i < counts.size(); ++i) d[i] = d[i - 1] + counts[i - 1];
  return d;
}

// The v-variants, with blocks of several slots (pieces in rounds).
void check_vectors(Communicator& c, RankChecks& ck, int dev) {
  const int n = c.size(), me = c.rank();
  EmuStream s;
  std::vector<int64_t> counts(n);
  for (int r = 0; r < n; ++r) counts[r] = 300 * (r + 1);
  const auto displs = offsets(counts);
  const int64_t total = displs[n - 1] + counts[n - 1];
  auto mine = inputs(me, size_t(counts[me]));
  std::vector<int32_t> agv(total, -1), gv(me == 1 ? total : 0, -1), sv(counts[me], -1);
  auto all = inputs(7, size_t(total));
  coll::all_gatherv(c, dev_view(mine, DType::kInt32, dev), dev_view(agv, DType::kInt32, dev), counts, displs, on(s));
  std::optional<TensorView> groot, sroot;
  if (me == 1) groot = dev_view(gv, DType::kInt32, dev);
  if (me == 0) sroot = dev_view(all, DType::kInt32, dev);
  coll::gatherv(c, dev_view(mine, DType::kInt32, dev), groot, counts, displs, 1, on(s));
  coll::scatterv(c, sroot, counts, displs, dev_view(sv, DType::kInt32, dev), 0, on(s));
  // all_to_allv: rank p sends 50 (p + 1)(q + 1) elements to rank q.
  std::vector<int64_t> sc(n), rc(n);
  for (int q = 0; q < n; ++q) {
    sc[q] = 50 * (me + 1) * (q + 1);
    rc[q] = 50 * (q + 1) * (me + 1);
  }
  const auto sd = offsets(sc), rd = offsets(rc);
  auto a2s = inputs(me, size_t(sd[n - 1] + sc[n - 1]));
  std::vector<int32_t> a2r(size_t(rd[n - 1] + rc[n - 1]), -1);
  coll::all_to_allv(c, dev_view(a2s, DType::kInt32, dev), sc, sd, dev_view(a2r, DType::kInt32, dev), rc, rd, on(s));
  ck.expect(s.sync(), "the stream finished");
  bool ok[4] = {true, true, true, true};
  for (int r = 0; r < n; ++r) {
    for (int64_t i = 0; i < counts[r]; ++i) {
      ok[0] &= agv[displs[r] + i] == rank_input(r, size_t(i));
      if (me == 1) ok[1] &= gv[displs[r] + i] == rank_input(r, size_t(i));
    }
    int64_t from = 0;  // where rank r's block for this rank starts in its sendbuf
    for (int q = 0; q < me; ++q) from += 50 * (r + 1) * (q + 1);
    for (int64_t i = 0; i < rc[r]; ++i) ok[3] &= a2r[rd[r] + i] == rank_input(r, size_t(from + i));
  }
  for (int64_t i = 0; i < counts[me]; ++i) ok[2] &= sv[i] == all[displs[me] + i];
  std::string why;
  ck.expect(c.async_error(why) == Status::kSuccess, "no asynchronous error: " + why);
  const char* names[4] = {"all_gatherv", "gatherv", "scatterv", "all_to_allv"};
  for (int k = 0; k < 4; ++k) ck.expect(ok[k], names[k]);
}

// The other process is forked before any runtime (and its stream thread)
// exists, and gets the handle's bytes through a pipe, as a peer gets them
// in the setup exchange.
TEST(CudaIpc, HandlesOpenInAnotherProcess) {
  int fds[2];
  ASSERT_EQ(pipe(fds), 0);
  const pid_t child = fork();
  if (child == 0) {
    close(fds[1]);
    GpuIpcHandle h;
    const bool got = read(fds[0], h.bytes, sizeof h.bytes) == ssize_t(sizeof h.bytes);
    EmulatedGpu other;
    auto* q = got ? static_cast<uint64_t*>(other.ipc_open(h)) : nullptr;
    const bool saw = q != nullptr && q[0] == 42;
    if (q != nullptr) q[1] = 7;  // written through the mapping: the owner sees it
    if (q != nullptr) other.ipc_close(q);
    _exit(saw && other.open_mappings() == 0 ? 0 : 1);
  }
  close(fds[0]);
  EmulatedGpu gpu;
  auto* p = static_cast<uint64_t*>(gpu.device_alloc(4096));
  p[0] = 42;
  const GpuIpcHandle h = gpu.ipc_export(p);
  ASSERT_EQ(write(fds[1], h.bytes, sizeof h.bytes), ssize_t(sizeof h.bytes));
  close(fds[1]);
  int status = 0;
  waitpid(child, &status, 0);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0);
  EXPECT_EQ(std::atomic_ref<uint64_t>(p[1]).load(), 7u);
  gpu.device_free(p);
}

TEST(CudaIpc, EveryCollectiveOnOneGpu) {
  for (int n : {2, 3, 4}) {
    SCOPED_TRACE("ranks " + std::to_string(n));
    expect_all_ok(run_ranks(
        n,
        [](Communicator& c, EmulatedGpu&, RankChecks& ck) {
          ck.expect(c.device_engine() != nullptr, "the communicator took the device path");
          const size_t host_before = EmulatedGpu::host_bytes().load();
          check_reductions(c, ck, 0, 2500);  // five pieces of 512
          check_movement(c, ck, 0, 700);     // pieces of 512 / n
          check_vectors(c, ck, 0);
          ck.expect(EmulatedGpu::host_bytes().load() == host_before, "nothing was staged through host memory");
        },
        20000, {}, cuda_ipc_path()));
  }
}

TEST(CudaIpc, SeveralGpusWithPeerAccess) {
  expect_all_ok(run_ranks(
      3,
      [](Communicator& c, EmulatedGpu&, RankChecks& ck) {
        ck.expect(c.device_engine() != nullptr, "peer access: the device path");
        check_reductions(c, ck, c.rank(), 1500);
        check_movement(c, ck, c.rank(), 300);
        check_vectors(c, ck, c.rank());
      },
      20000, {}, cuda_ipc_path(3)));
}

TEST(CudaIpc, WithoutPeerAccessCudaTensorsAreStaged) {
  expect_all_ok(run_ranks(
      2,
      [](Communicator& c, EmulatedGpu&, RankChecks& ck) {
        ck.expect(c.device_engine() == nullptr, "no peer access: no device path");
        check_reductions(c, ck, c.rank(), 100);
      },
      20000, {}, cuda_ipc_path(2, false)));
}

TEST(CudaIpc, ARankThatCannotMapItsPeersMakesEveryRankStage) {
  const RankSetup setup = [](int r, EmulatedGpu& gpu, CommConfig& cfg) {
    cuda_ipc_path()(r, gpu, cfg);
    gpu.ipc_open_fails = r == 2;
  };
  expect_all_ok(run_ranks(
      3,
      [](Communicator& c, EmulatedGpu&, RankChecks& ck) {
        ck.expect(c.device_engine() == nullptr, "no rank took the device path");
        check_reductions(c, ck, 0, 100);
      },
      20000, {}, setup));
}

TEST(CudaIpc, TheCallReturnsBeforeTheStreamRunsIt) {
  expect_all_ok(run_ranks(
      2,
      [](Communicator& c, EmulatedGpu&, RankChecks& ck) {
        EmuStream s;
        std::vector<int32_t> v(64, c.rank() + 1), out(64, 0);
        s.close_gate();  // work queued before the call holds the stream
        auto work = coll::all_reduce(c, dev_view(v, DType::kInt32), dev_view(out, DType::kInt32), int(RedOp::kSum),
                                     on(s, /*async=*/true));
        std::this_thread::sleep_for(std::chrono::milliseconds(50));
        ck.expect(out[0] == 0 && !work->done(), "nothing ran before the stream reached it");
        s.open_gate();
        ck.expect(work->wait() == Status::kSuccess, "the work's wait follows the stream");
        ck.expect(out[0] == 3 && out[63] == 3, "the result is there once the stream passed it");
      },
      20000, {}, cuda_ipc_path()));
}

TEST(CudaIpc, APeerKilledMidOperationFailsItAndReleasesTheStream) {
  const auto codes = run_ranks(
      2,
      [](Communicator& c, EmulatedGpu&, RankChecks& ck) {
        EmuStream s;
        std::vector<int32_t> v(5000, 1), out(5000, 0);
        if (c.rank() == 1) {
          std::this_thread::sleep_for(std::chrono::milliseconds(100));
          _exit(0);  // dies without its part of the operation
        }
        auto work = coll::all_reduce(c, dev_view(v, DType::kInt32), dev_view(out, DType::kInt32), int(RedOp::kSum),
                                     on(s, true));
        std::string msg;
        ck.expect(work->wait() == Status::kPeerFailure, "the operation failed with a peer failure");
        ck.expect(work->message().find("rank 1") != std::string::npos, "its message names rank 1: " + work->message());
        ck.expect(s.sync(5000), "the stream was released");
        ck.expect(c.async_error(msg) == Status::kPeerFailure, "the communicator reports it");
        ck.expect(status_of([&] {
                    coll::all_reduce(c, dev_view(v, DType::kInt32), dev_view(out, DType::kInt32), 0, on(s));
                  }) == Status::kCommFailed,
                  "later calls are refused");
      },
      20000, {}, cuda_ipc_path());
  EXPECT_EQ(codes[0], 0);
}

TEST(CudaIpc, APeerThatNeverArrivesTimesOut) {
  expect_all_ok(run_ranks(
      2,
      [](Communicator& c, EmulatedGpu&, RankChecks& ck) {
        if (c.rank() == 1) {
          std::this_thread::sleep_for(std::chrono::milliseconds(2500));
          return;
        }
        EmuStream s;
        std::vector<int32_t> v(64, 1), out(64, 0);
        CallOptions call = on(s, true);
        call.timeout_ms = 800;
        auto work = coll::all_reduce(c, dev_view(v, DType::kInt32), dev_view(out, DType::kInt32), 0, call);
        ck.expect(work->wait() == Status::kTimeout, "the operation timed out");
        ck.expect(work->message().find("rank 1") != std::string::npos, "naming rank 1: " + work->message());
        ck.expect(s.sync(5000), "the stream was released");
      },
      20000, {}, cuda_ipc_path()));
}

TEST(CudaIpc, AbortFailsPendingWorkAndReleasesTheStream) {
  expect_all_ok(run_ranks(
      2,
      [](Communicator& c, EmulatedGpu&, RankChecks& ck) {
        if (c.rank() == 1) {
          std::this_thread::sleep_for(std::chrono::milliseconds(1500));
          return;
        }
        EmuStream s;
        std::vector<int32_t> v(64, 1), out(64, 0);
        auto work = coll::all_reduce(c, dev_view(v, DType::kInt32), dev_view(out, DType::kInt32), 0, on(s, true));
        std::this_thread::sleep_for(std::chrono::milliseconds(100));
        c.abort(/*as_failure=*/true);
        ck.expect(work->wait() == Status::kAborted, "the work ended as aborted");
        ck.expect(s.sync(5000), "the stream was released");
      },
      20000, {}, cuda_ipc_path()));
}

TEST(CudaIpc, AMismatchedCallFailsOnEveryRank) {
  expect_all_ok(run_ranks(
      2,
      [](Communicator& c, EmulatedGpu&, RankChecks& ck) {
        EmuStream s;
        std::vector<int32_t> v(64, 1), out(64, 0);
        coll::WorkPtr work;
        if (c.rank() == 0) {
          work = coll::all_reduce(c, dev_view(v, DType::kInt32), dev_view(out, DType::kInt32), 0, on(s, true));
        } else {
          work = coll::broadcast(c, dev_view(v, DType::kInt32), 1, on(s, true));
        }
        const Status st = work->wait();
        ck.expect(st == Status::kMismatch,
                  std::string("mismatch reported, got ") + status_name(st) + ": " + work->message());
        ck.expect(s.sync(5000), "the stream was released");
      },
      20000, {}, cuda_ipc_path()));
}

// Sends and receives on CUDA tensors: in order per pair, messages larger
// than one slot (1 KiB here) in pieces, a synchronous send, async work.
TEST(CudaIpc, SendAndReceiveInOrderPerPair) {
  expect_all_ok(run_ranks(
      2,
      [](Communicator& c, EmulatedGpu&, RankChecks& ck) {
        EmuStream s;
        const size_t sizes[3] = {10, 3000, 1};
        if (c.rank() == 0) {
          std::vector<std::vector<int32_t>> msgs;
          for (size_t k = 0; k < 3; ++k) msgs.push_back(inputs(int(k) + 1, sizes[k]));
          coll::send_tagged(c, dev_view(msgs[0], DType::kInt32), 1, 5, on(s));
          coll::ssend_tagged(c, dev_view(msgs[1], DType::kInt32), 1, 6, on(s));
          auto w = coll::send_tagged(c, dev_view(msgs[2], DType::kInt32), 1, 7, on(s, true));
          ck.expect(w->wait() == Status::kSuccess, "the async send completed");
          ck.expect(s.sync(), "the stream finished");
          return;
        }
        std::vector<std::vector<int32_t>> got;
        for (size_t k = 0; k < 3; ++k) got.emplace_back(sizes[k], -1);
        RecvStatus st;
        for (size_t k = 0; k < 3; ++k) {
          coll::recv_tagged(c, dev_view(got[k], DType::kInt32), 0, int(5 + k), on(s), &st);
        }
        ck.expect(st.source == 0 && st.tag == 7 && st.bytes == 4, "the status of the last receive");
        ck.expect(s.sync(), "the stream finished");
        for (size_t k = 0; k < 3; ++k)
          ck.expect(got[k] == inputs(int(k) + 1, sizes[k]), "message " + std::to_string(k));
      },
      20000, {}, cuda_ipc_path()));
}

TEST(CudaIpc, ASendAndReceiveOfDifferentTagsFailTheReceive) {
  expect_all_ok(run_ranks(
      2,
      [](Communicator& c, EmulatedGpu&, RankChecks& ck) {
        EmuStream s;
        std::vector<int32_t> v(16, 1);
        if (c.rank() == 0) {
          coll::send_tagged(c, dev_view(v, DType::kInt32), 1, 1, on(s));
          ck.expect(s.sync(), "the send's stream finished");
          std::this_thread::sleep_for(std::chrono::milliseconds(300));
          return;
        }
        auto w = coll::recv_tagged(c, dev_view(v, DType::kInt32), 0, 2, on(s, true), nullptr);
        ck.expect(w->wait() == Status::kMismatch, "the receive failed as a mismatch: " + w->message());
        ck.expect(s.sync(5000), "the stream was released");
      },
      20000, {}, cuda_ipc_path()));
}

}  // namespace
}  // namespace omniccl
