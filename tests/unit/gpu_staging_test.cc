// The staged data path for CUDA tensors (collective/staging.h), checked on
// any machine over the emulated GPU runtime (emulated_gpu.h): ranks are
// forked processes with a communicator each (file rendezvous), their "CUDA
// tensors" live in emulated device memory and their work is ordered on
// emulated streams. What this proves: every collective gives the right
// results through host copies; the call returns before the stream reaches
// it and work queued after it on the stream sees its results; async work's
// wait follows the stream; a stream is released when the operation fails,
// times out or is aborted; wrong devices are clear errors. What it cannot:
// the CUDA calls themselves (tests/gpu, on a GPU).
#include <gtest/gtest.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <complex>
#include <cstdio>
#include <filesystem>
#include <functional>
#include <initializer_list>
#include <numeric>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "bootstrap/rendezvous.h"
#include "collective/collectives.h"
#include "common/gpu_runtime.h"
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
using test::RankSetup;
using test::run_ranks;
using test::status_of;

TEST(GpuStaging, EveryCollectiveGivesTheCpuResults) {
  for (int n : {2, 3}) {
    SCOPED_TRACE("ranks " + std::to_string(n));
    expect_all_ok(run_ranks(n, [n](Communicator& c, EmulatedGpu&, RankChecks& ck) {
      EmuStream s;
      const int r = c.rank();
      const size_t k = 5;  // odd on purpose
      // all_reduce SUM float32 and MAX int32, out of place.
      std::vector<float> fs(k), fr(k, -1.0f);
      for (size_t i = 0; i < k; ++i) fs[i] = float(r + 1) * float(i + 1);
      coll::all_reduce(c, dev_view(fs, DType::kFloat32), dev_view(fr, DType::kFloat32), int(RedOp::kSum), on(s));
      std::vector<int32_t> is(k), ir(k, -1);
      for (size_t i = 0; i < k; ++i) is[i] = int32_t(r * 10 + int(i));
      coll::all_reduce(c, dev_view(is, DType::kInt32), dev_view(ir, DType::kInt32), int(RedOp::kMax), on(s));
      // broadcast in place from the last rank.
      std::vector<int32_t> b(k, r == n - 1 ? 7 : 0);
      coll::broadcast(c, dev_view(b, DType::kInt32), n - 1, on(s));
      // all_gather in place: this rank's part inside recvbuf.
      std::vector<int32_t> g(k * size_t(n), -1);
      for (size_t i = 0; i < k; ++i) g[size_t(r) * k + i] = r * 100 + int(i);
      TensorView part = dev_view(g, DType::kInt32);
      part.data = g.data() + size_t(r) * k;
      part.count = k;
      coll::all_gather(c, part, dev_view(g, DType::kInt32), on(s));
      // reduce_scatter SUM: each rank's block i holds r + i.
      std::vector<int32_t> rs(k * size_t(n)), rr(k, -1);
      for (size_t i = 0; i < rs.size(); ++i) rs[i] = r + int(i);
      coll::reduce_scatter(c, dev_view(rs, DType::kInt32), dev_view(rr, DType::kInt32), int(RedOp::kSum), on(s));
      // all_to_all: block j of rank r is r * 10 + j.
      std::vector<int32_t> as(size_t(n) * 2), ar(size_t(n) * 2, -1);
      for (int j = 0; j < n; ++j) as[size_t(j) * 2] = as[size_t(j) * 2 + 1] = r * 10 + j;
      coll::all_to_all(c, dev_view(as, DType::kInt32), dev_view(ar, DType::kInt32), on(s));
      // reduce to rank 0 (AVG float32); a non-root's recvbuf stays untouched.
      std::vector<float> ds(k, float(r * 2)), dr(k, -5.0f);
      coll::reduce(c, dev_view(ds, DType::kFloat32), dev_view(dr, DType::kFloat32), int(RedOp::kAvg), 0, on(s));
      // gather to rank 1, scatter from rank 1.
      std::vector<int32_t> gs(2, r), gr(r == 1 ? size_t(2 * n) : 2, -1);
      coll::gather(c, dev_view(gs, DType::kInt32), dev_view(gr, DType::kInt32), 1, on(s));
      std::vector<int32_t> ss(r == 1 ? size_t(2 * n) : 0), sr(2, -1);
      for (size_t i = 0; i < ss.size(); ++i) ss[i] = int(i);
      coll::OptTensor ss_view;
      if (r == 1) ss_view = dev_view(ss, DType::kInt32);
      coll::scatter(c, ss_view, dev_view(sr, DType::kInt32), 1, on(s));
      // all_gatherv: rank j gives j + 1 elements.
      std::vector<int64_t> counts(static_cast<size_t>(n)), displs(static_cast<size_t>(n));
      int64_t total = 0;
      for (int j = 0; j < n; ++j) {
        counts[size_t(j)] = j + 1;
        displs[size_t(j)] = total;
        total += j + 1;
      }
      std::vector<int32_t> vs(size_t(r + 1), r), vr(size_t(total), -1);
      coll::all_gatherv(c, dev_view(vs, DType::kInt32), dev_view(vr, DType::kInt32), counts, displs, on(s));
      coll::barrier(c, on(s));

      // Nothing has to be read before the stream has run.
      ck.expect(s.sync(), "the stream finished");
      const int sum_ranks = n * (n + 1) / 2;
      for (size_t i = 0; i < k; ++i) {
        ck.expect(fr[i] == float(sum_ranks) * float(i + 1), "all_reduce SUM float32 element " + std::to_string(i));
        ck.expect(ir[i] == (n - 1) * 10 + int(i), "all_reduce MAX int32 element " + std::to_string(i));
        ck.expect(b[i] == 7, "broadcast element " + std::to_string(i));
        int expect_rr = 0;
        for (int j = 0; j < n; ++j) expect_rr += j + int(size_t(r) * k + i);
        ck.expect(rr[i] == expect_rr, "reduce_scatter element " + std::to_string(i));
        const float avg = float(n - 1);  // mean of 0, 2, ..., 2(n-1)
        ck.expect(r == 0 ? dr[i] == avg : dr[i] == -5.0f, "reduce AVG element " + std::to_string(i));
      }
      for (int j = 0; j < n; ++j) {
        for (size_t i = 0; i < k; ++i) {
          ck.expect(g[size_t(j) * k + i] == j * 100 + int(i),
                    "all_gather element " + std::to_string(j * int(k) + int(i)));
        }
        ck.expect(ar[size_t(j) * 2] == j * 10 + r && ar[size_t(j) * 2 + 1] == j * 10 + r,
                  "all_to_all block " + std::to_string(j));
        if (r == 1)
          ck.expect(gr[size_t(j) * 2] == j && gr[size_t(j) * 2 + 1] == j, "gather block " + std::to_string(j));
        for (int64_t i = 0; i < counts[size_t(j)]; ++i) {
          ck.expect(vr[size_t(displs[size_t(j)] + i)] == j, "all_gatherv part " + std::to_string(j));
        }
      }
      if (r != 1) ck.expect(gr[0] == -1 && gr[1] == -1, "a non-root's gather recvbuf is untouched");
      ck.expect(sr[0] == 2 * r && sr[1] == 2 * r + 1, "scatter block");
    }));
  }
}

TEST(GpuStaging, ComplexAndLocPairsAreReducedOnTheHost) {
  // No device kernels for them: the staged path reduces them in host copies.
  expect_all_ok(run_ranks(3, [](Communicator& c, EmulatedGpu&, RankChecks& ck) {
    EmuStream s;
    const int r = c.rank();
    // complex64 PROD of (1 + i), (0 + 2i), (3 + 0i): (-2 + 2i) * 3 = -6 + 6i.
    const std::complex<float> mine[3] = {{1, 1}, {0, 2}, {3, 0}};
    std::vector<std::complex<float>> z(5, mine[r]);
    coll::all_reduce(c, dev_view(z, DType::kComplex64), dev_view(z, DType::kComplex64), int(RedOp::kProd), on(s));
    // MAXLOC reduce_scatter of int32 (value, index) pairs, one pair per rank
    // block: values r % 2 tie between ranks 0 and 2, the smaller index wins.
    std::vector<int32_t> pairs(6), out(2, -1);
    for (int b = 0; b < 3; ++b) {
      pairs[size_t(2 * b)] = (r + b) % 2;
      pairs[size_t(2 * b + 1)] = 10 * r + b;
    }
    coll::reduce_scatter(c, dev_view(pairs, DType::kInt32), dev_view(out, DType::kInt32), 12, on(s));
    ck.expect(s.sync(), "the stream finished");
    for (const auto& x : z) ck.expect(x == std::complex<float>(-6, 6), "complex64 PROD");
    // Block r: ranks with (q + r) % 2 == 1 have value 1; the smallest such q wins.
    const int q = (r + 1) % 2;
    ck.expect(out[0] == 1 && out[1] == 10 * q + r, "MAXLOC block of rank " + std::to_string(r));
  }));
}

TEST(GpuStaging, RanksMayMixCudaAndCpuTensorsInOneCollective) {
  // Rank 0 stages CUDA tensors, rank 1 passes CPU tensors: one operation
  // each, the same messages on the wire.
  expect_all_ok(run_ranks(2, [](Communicator& c, EmulatedGpu&, RankChecks& ck) {
    EmuStream s;
    std::vector<float> x((size_t(1) << 20) + 3, float(c.rank() + 1));
    TensorView v = dev_view(x, DType::kFloat32);
    if (c.rank() == 1) v.device = DeviceKind::kCPU;
    coll::all_reduce(c, v, v, int(RedOp::kSum), on(s));
    std::vector<int32_t> b(1000, c.rank() == 0 ? 42 : 0);
    TensorView bv = dev_view(b, DType::kInt32);
    if (c.rank() == 1) bv.device = DeviceKind::kCPU;
    coll::broadcast(c, bv, 0, on(s));
    ck.expect(s.sync(), "the stream finished");
    ck.expect(x.front() == 3.0f && x.back() == 3.0f, "all_reduce result on both ranks");
    ck.expect(b.front() == 42 && b.back() == 42, "broadcast result on both ranks");
  }));
}

// Large all_reduce, broadcast and reduce calls run as slices of 8 MiB
// (collective/common.h, launch_sliced), and the stream copies slice by
// slice: each slice's inputs to the host and its results back are copies
// of their own, so that they overlap the transports' work on other slices.
TEST(GpuStaging, LargeCallsRunInSlicesAndTheStreamCopiesSliceBySlice) {
  expect_all_ok(run_ranks(2, [](Communicator& c, EmulatedGpu&, RankChecks& ck) {
    EmuStream s;
    const int r = c.rank();
    // 40 MiB + 12 bytes of float32: 5 slices of 8 MiB and one of 12 bytes.
    const size_t n = (size_t{10} << 20) + 3;
    std::vector<float> x(n), y(n, -1.0f);
    for (size_t i = 0; i < n; ++i) x[i] = float(r + 1) + float(i % 7);
    const size_t before = EmulatedGpu::copies().load();
    coll::all_reduce(c, dev_view(x, DType::kFloat32), dev_view(y, DType::kFloat32), int(RedOp::kSum), on(s));
    const size_t copies = EmulatedGpu::copies().load() - before;
    // Each slice copied in and out, and (reduced on the GPU) its parts to
    // the GPU and this rank's reduced share back.
    ck.expect(copies == 24, "6 slices copied 4 ways, not " + std::to_string(copies) + " copies");
    // reduce AVG to root 1 (24 MiB of int64 into 3 slices), broadcast of
    // 20 MiB + 4 bytes of int32 from root 0 in place.
    std::vector<int64_t> a(size_t{3} << 20, int64_t(10 * (r + 1))), avg(a.size(), -1);
    coll::reduce(c, dev_view(a, DType::kInt64), r == 1 ? std::optional(dev_view(avg, DType::kInt64)) : std::nullopt,
                 int(RedOp::kAvg), 1, on(s));
    std::vector<int32_t> b((size_t{5} << 20) + 1, r == 0 ? 7 : 0);
    for (size_t i = 0; r == 0 && i < b.size(); i += 4099) b[i] = int32_t(i);
    coll::broadcast(c, dev_view(b, DType::kInt32), 0, on(s));
    ck.expect(s.sync(), "the stream finished");
    bool sum_ok = true, bcast_ok = true;
    for (size_t i = 0; i < n; ++i) sum_ok = sum_ok && y[i] == 3.0f + 2.0f * float(i % 7);
    for (size_t i = 0; i < b.size(); ++i) bcast_ok = bcast_ok && b[i] == (i % 4099 == 0 ? int32_t(i) : 7);
    ck.expect(sum_ok, "all_reduce SUM float32 in every slice");
    ck.expect(bcast_ok, "broadcast in every slice");
    if (r == 1) ck.expect(avg.front() == 15 && avg.back() == 15, "reduce AVG int64 on the root");
    if (r == 0) ck.expect(avg.front() == -1 && avg.back() == -1, "a non-root's recvbuf is untouched");
  }));
}

TEST(GpuStaging, RanksMixingCudaAndCpuTensorsAgreeOnSlices) {
  // The split depends on the size only: rank 1's CPU tensors are sliced as
  // rank 0's staged ones, one collective per slice on both.
  expect_all_ok(run_ranks(2, [](Communicator& c, EmulatedGpu&, RankChecks& ck) {
    EmuStream s;
    std::vector<double> x((size_t{5} << 20) / 2 + 5, double(c.rank() + 1));
    TensorView v = dev_view(x, DType::kFloat64);
    if (c.rank() == 1) v.device = DeviceKind::kCPU;
    coll::all_reduce(c, v, v, int(RedOp::kProd), on(s));
    coll::all_reduce(c, v, v, int(RedOp::kSum), on(s));
    ck.expect(s.sync(), "the stream finished");
    ck.expect(x.front() == 4.0 && x[x.size() / 2] == 4.0 && x.back() == 4.0, "PROD then SUM on both ranks");
  }));
}

// The sliced calls of block collectives (all_gather's output,
// reduce_scatter's input, both of all_to_all's tensors hold a block a rank):
// a slice takes its part of every block (8 MiB over all of them), and the
// stream copies it with one strided copy a tensor. 3 ranks, blocks of 6 MiB
// + 4 bytes of 4-byte elements: 3 slices (699050, 699050 and 174765
// elements of each block), so 3 copies in and 3 out a call, in place too;
// 8-byte elements: 5 slices (the whole calls took 1 copy each way). The
// ranks in `cpu` pass CPU tensors, sliced alike (through scratch).
struct SlicedBlocks {
  Communicator& c;
  RankChecks& ck;
  bool host;
  EmuStream s;
  const int r = c.rank(), n = c.size();
  const size_t k = (size_t{6} << 20) / 4 + 1, nk = k * size_t(n);

  SlicedBlocks(Communicator& comm, RankChecks& checks, const std::vector<int>& cpu)
      : c(comm), ck(checks), host(std::find(cpu.begin(), cpu.end(), comm.rank()) != cpu.end()) {}
  template <typename T>
  TensorView view(std::vector<T>& v, DType t, size_t block = SIZE_MAX) const {
    TensorView tv = dev_view(v, t);
    if (host) tv.device = DeviceKind::kCPU;
    if (block != SIZE_MAX) {  // block `block` of k elements only
      tv.data = v.data() + block * k;
      tv.count = k;
    }
    return tv;
  }
  /// Runs call() and checks it copied `slices` slices each of `ways` ways
  /// (2: in and out; none on CPU tensors).
  template <typename Call>
  void sliced(const char* what, size_t slices, const Call& call, size_t ways = 2) {
    const size_t before = EmulatedGpu::copies().load();
    call();
    const size_t copies = EmulatedGpu::copies().load() - before, want = host ? 0 : ways * slices;
    ck.expect(copies == want, str_cat(what, ": ", copies, " copies, not ", want));
  }
};

void gathers_and_scatters_in_slices(SlicedBlocks& b) {
  const int r = b.r, n = b.n;
  const size_t k = b.k, nk = b.nk;
  std::vector<float> x(k), y(nk, -1.0f);
  for (size_t i = 0; i < k; ++i) x[i] = float(r * 1000) + float(i % 997);
  b.sliced("all_gather", 3,
           [&] { coll::all_gather(b.c, b.view(x, DType::kFloat32), b.view(y, DType::kFloat32), on(b.s)); });
  std::vector<int32_t> z(nk, -1);
  for (size_t i = 0; i < k; ++i) z[size_t(r) * k + i] = r * 1000 + int(i % 991);
  b.sliced("all_gather in place", 3,
           [&] { coll::all_gather(b.c, b.view(z, DType::kInt32, size_t(r)), b.view(z, DType::kInt32), on(b.s)); });
  std::vector<float> u(nk), v(k, -1.0f);
  for (size_t i = 0; i < nk; ++i) u[i] = float((r + 1) * int(i / k + 1)) + float(i % k % 5);
  b.sliced("reduce_scatter", 3, [&] {
    coll::reduce_scatter(b.c, b.view(u, DType::kFloat32), b.view(v, DType::kFloat32), int(RedOp::kSum), on(b.s));
  });
  std::vector<int64_t> w(nk);
  for (size_t i = 0; i < nk; ++i) w[i] = int64_t(i / k) * 100 + r + int64_t(i % k % 7);
  b.sliced("reduce_scatter in place", 5, [&] {
    coll::reduce_scatter(b.c, b.view(w, DType::kInt64), b.view(w, DType::kInt64, size_t(r)), int(RedOp::kMax), on(b.s));
  });
  b.ck.expect(b.s.sync(), "the stream finished");
  size_t bad_y = 0, bad_z = 0, bad_v = 0, bad_w = 0;
  for (size_t i = 0; i < nk; ++i) {
    const int p = int(i / k);
    bad_y += y[i] != float(p * 1000) + float(i % k % 997);
    bad_z += z[i] != p * 1000 + int(i % k % 991);
  }
  // SUM over ranks q of (q + 1)(r + 1) + i % 5; MAX over q of 100 r + q + i % 7.
  const int ranks_sum = n * (n + 1) / 2;
  for (size_t i = 0; i < k; ++i) {
    bad_v += v[i] != float(ranks_sum * (r + 1)) + float(n) * float(i % 5);
    bad_w += w[size_t(r) * k + i] != int64_t(r) * 100 + (n - 1) + int64_t(i % 7);
  }
  b.ck.expect(bad_y == 0, str_cat("all_gather float32: ", bad_y, " wrong elements"));
  b.ck.expect(bad_z == 0, str_cat("all_gather int32 in place: ", bad_z, " wrong elements"));
  b.ck.expect(bad_v == 0, str_cat("reduce_scatter SUM float32: ", bad_v, " wrong elements"));
  b.ck.expect(bad_w == 0, str_cat("reduce_scatter MAX int64 in place: ", bad_w, " wrong elements"));
}

/// Block p of rank r's all_to_all input: r * 1000 + p * 10 + i % 7, as its
/// output's block p holds p * 1000 + r * 10 + i % 7.
void all_to_alls_in_slices(SlicedBlocks& b) {
  const int r = b.r;
  const size_t k = b.k, nk = b.nk;
  std::vector<float> x(nk), y(nk, -1.0f);
  std::vector<int32_t> z(nk);
  for (size_t i = 0; i < nk; ++i) {
    x[i] = float(r * 1000 + int(i / k) * 10 + int(i % k % 7));
    z[i] = r * 1000 + int(i / k) * 10 + int(i % k % 7);
  }
  b.sliced("all_to_all", 3,
           [&] { coll::all_to_all(b.c, b.view(x, DType::kFloat32), b.view(y, DType::kFloat32), on(b.s)); });
  b.sliced("all_to_all in place", 3,
           [&] { coll::all_to_all(b.c, b.view(z, DType::kInt32), b.view(z, DType::kInt32), on(b.s)); });
  b.ck.expect(b.s.sync(), "the stream finished");
  size_t bad_y = 0, bad_z = 0;
  for (size_t i = 0; i < nk; ++i) {
    const int want = int(i / k) * 1000 + r * 10 + int(i % k % 7);
    bad_y += y[i] != float(want);
    bad_z += z[i] != want;
  }
  b.ck.expect(bad_y == 0, str_cat("all_to_all float32: ", bad_y, " wrong elements"));
  b.ck.expect(bad_z == 0, str_cat("all_to_all int32 in place: ", bad_z, " wrong elements"));
}

/// gather and scatter: the root's tensor has a block a rank, the others'
/// one block (copied one way only); every rank slices alike.
void rooted_in_slices(SlicedBlocks& b) {
  const int r = b.r;
  const size_t k = b.k, nk = b.nk;
  const auto only_on = [&](int root, auto& v, DType t) {
    return r == root ? std::optional(b.view(v, t)) : std::nullopt;
  };
  std::vector<float> x(k), g(nk, -1.0f);
  for (size_t i = 0; i < k; ++i) x[i] = float(r * 1000) + float(i % 997);
  b.sliced(
      "gather", 3, [&] { coll::gather(b.c, b.view(x, DType::kFloat32), only_on(2, g, DType::kFloat32), 2, on(b.s)); },
      r == 2 ? 2 : 1);
  std::vector<int32_t> z(nk, -1);
  for (size_t i = 0; i < k; ++i) z[size_t(r) * k + i] = r * 1000 + int(i % 991);
  b.sliced(
      "gather in place", 3,
      [&] { coll::gather(b.c, b.view(z, DType::kInt32, size_t(r)), only_on(0, z, DType::kInt32), 0, on(b.s)); },
      r == 0 ? 2 : 1);
  std::vector<float> u(nk, -1.0f), v(k, -1.0f);
  for (size_t i = 0; r == 1 && i < nk; ++i) u[i] = float(int(i / k) * 100) + float(i % k % 13);
  b.sliced(
      "scatter", 3, [&] { coll::scatter(b.c, only_on(1, u, DType::kFloat32), b.view(v, DType::kFloat32), 1, on(b.s)); },
      r == 1 ? 2 : 1);
  std::vector<int32_t> w(nk, -1);
  for (size_t i = 0; r == 2 && i < nk; ++i) w[i] = int(i / k) * 100 + int(i % k % 11);
  b.sliced(
      "scatter in place", 3,
      [&] { coll::scatter(b.c, only_on(2, w, DType::kInt32), b.view(w, DType::kInt32, size_t(r)), 2, on(b.s)); },
      r == 2 ? 2 : 1);
  b.ck.expect(b.s.sync(), "the stream finished");
  size_t bad_g = 0, bad_z = 0, bad_v = 0, bad_w = 0;
  for (size_t i = 0; i < nk; ++i) {
    const int p = int(i / k);
    bad_g += r == 2 && g[i] != float(p * 1000) + float(i % k % 997);
    bad_z += r == 0 && z[i] != p * 1000 + int(i % k % 991);
  }
  for (size_t i = 0; i < k; ++i) {
    bad_v += v[i] != float(r * 100) + float(i % 13);
    bad_w += w[size_t(r) * k + i] != r * 100 + int(i % 11);
  }
  b.ck.expect(bad_g == 0, str_cat("gather float32 on the root: ", bad_g, " wrong elements"));
  b.ck.expect(bad_z == 0, str_cat("gather int32 in place on the root: ", bad_z, " wrong elements"));
  b.ck.expect(bad_v == 0, str_cat("scatter float32: ", bad_v, " wrong elements"));
  b.ck.expect(bad_w == 0, str_cat("scatter int32 in place: ", bad_w, " wrong elements"));
}

/// scan and exscan in slices: each position's prefix depends only on the
/// ranks' values there, so a slice is a scan of its own. 3 ranks: SUM int32
/// of 18 MiB + 4 bytes (3 slices), exscan MAX int64 of 24 MiB + 8 bytes (4
/// slices; rank 0's recvbuf keeps its contents, so it is copied in too),
/// LAND float32 of 16 MiB + 4 bytes (3 slices; rank 0's result, one input,
/// is made 0/1 in every slice).
void scans_in_slices(SlicedBlocks& b) {
  const int r = b.r;
  const size_t m = (size_t{18} << 20) / 4 + 1;
  std::vector<int32_t> x(m), y(m, -1);
  for (size_t i = 0; i < m; ++i) x[i] = r * 1000 + int(i % 997);
  b.sliced("scan", 3,
           [&] { coll::scan(b.c, b.view(x, DType::kInt32), b.view(y, DType::kInt32), int(RedOp::kSum), on(b.s)); });
  const size_t w = (size_t{3} << 20) + 1;
  std::vector<int64_t> u(w), v(w, -7);
  for (size_t i = 0; i < w; ++i) u[i] = int64_t(r * 100) + int64_t(i % 7);
  b.sliced(
      "exscan", 4,
      [&] { coll::exscan(b.c, b.view(u, DType::kInt64), b.view(v, DType::kInt64), int(RedOp::kMax), on(b.s)); },
      r == 0 ? 3 : 2);
  const size_t f = (size_t{4} << 20) + 1;
  std::vector<float> t(f), g(f, -1.0f);
  for (size_t i = 0; i < f; ++i) t[i] = r == 1 && i % 2 == 0 ? 0.0f : 2.5f;
  b.sliced("scan LAND", 3, [&] {
    coll::scan(b.c, b.view(t, DType::kFloat32), b.view(g, DType::kFloat32), int(RedOp::kLAnd), on(b.s));
  });
  b.ck.expect(b.s.sync(), "the stream finished");
  size_t bad_y = 0, bad_v = 0, bad_g = 0;
  for (size_t i = 0; i < m; ++i) bad_y += y[i] != 1000 * r * (r + 1) / 2 + (r + 1) * int(i % 997);
  for (size_t i = 0; i < w; ++i) bad_v += v[i] != (r == 0 ? -7 : int64_t((r - 1) * 100) + int64_t(i % 7));
  for (size_t i = 0; i < f; ++i) bad_g += g[i] != (r >= 1 && i % 2 == 0 ? 0.0f : 1.0f);
  b.ck.expect(bad_y == 0, str_cat("scan SUM int32: ", bad_y, " wrong elements"));
  b.ck.expect(bad_v == 0, str_cat("exscan MAX int64: ", bad_v, " wrong elements"));
  b.ck.expect(bad_g == 0, str_cat("scan LAND float32: ", bad_g, " wrong elements"));
}

/// all_gatherv in slices. 3 ranks' parts of 3k, k and 0 elements (24 MiB
/// + 16 bytes of float32): 4 slices of up to 1179649 elements of each part
/// (the largest part split in 4), so rank 0's part is copied in 4 times,
/// rank 1's twice, and the output's parts back 4 + 2 times; the gaps between
/// the parts are never copied, so they keep what the device held.
void all_gathervs_in_slices(SlicedBlocks& b) {
  const int r = b.r;
  const size_t k = b.k;
  const std::vector<int64_t> counts{int64_t(3 * k), int64_t(k), 0}, displs{int64_t(k + 10), 3, int64_t(4 * k + 15)};
  const size_t total = 4 * k + 20, ins[3] = {4, 2, 0};
  std::vector<float> x(size_t(counts[size_t(r)])), y(total, -1.0f);
  for (size_t i = 0; i < x.size(); ++i) x[i] = float(r * 1000) + float(i % 997);
  b.sliced(
      "all_gatherv", 1,
      [&] { coll::all_gatherv(b.c, b.view(x, DType::kFloat32), b.view(y, DType::kFloat32), counts, displs, on(b.s)); },
      ins[r] + 6);
  // In place: this rank's part is where the output holds it.
  std::vector<int32_t> z(total, -1);
  for (size_t i = 0; i < size_t(counts[size_t(r)]); ++i) z[size_t(displs[size_t(r)]) + i] = r * 1000 + int(i % 991);
  TensorView mine = b.view(z, DType::kInt32);
  mine.data = z.data() + displs[size_t(r)];
  mine.count = size_t(counts[size_t(r)]);
  b.sliced(
      "all_gatherv in place", 1,
      [&] { coll::all_gatherv(b.c, mine, b.view(z, DType::kInt32), counts, displs, on(b.s)); }, ins[r] + 6);
  b.ck.expect(b.s.sync(), "the stream finished");
  size_t bad_y = 0, bad_z = 0;
  for (size_t i = 0; i < total; ++i) {
    int p = -1;
    for (int q = 0; q < 3; ++q) {
      if (int64_t(i) >= displs[size_t(q)] && int64_t(i) < displs[size_t(q)] + counts[size_t(q)]) p = q;
    }
    const size_t at = p < 0 ? 0 : i - size_t(displs[size_t(p)]);
    bad_y += y[i] != (p < 0 ? -1.0f : float(p * 1000) + float(at % 997));
    bad_z += z[i] != (p < 0 ? -1 : p * 1000 + int(at % 991));
  }
  b.ck.expect(bad_y == 0, str_cat("all_gatherv float32 (gaps untouched): ", bad_y, " wrong elements"));
  b.ck.expect(bad_z == 0, str_cat("all_gatherv int32 in place (gaps untouched): ", bad_z, " wrong elements"));
}

/// Runs `parts` on 3 ranks; those in `cpu` pass CPU tensors.
void sliced_on_three_ranks(const std::vector<int>& cpu, std::initializer_list<void (*)(SlicedBlocks&)> parts) {
  expect_all_ok(run_ranks(3, [&](Communicator& c, EmulatedGpu&, RankChecks& ck) {
    SlicedBlocks b(c, ck, cpu);
    for (auto* part : parts) part(b);
  }));
}

TEST(GpuStaging, ScansAndAllGathervRunInSlices) {
  sliced_on_three_ranks({}, {scans_in_slices, all_gathervs_in_slices});
}

TEST(GpuStaging, RanksWithCpuTensorsSliceScansAndAllGathervAlike) {
  sliced_on_three_ranks({2}, {scans_in_slices, all_gathervs_in_slices});
}

TEST(GpuStaging, BlockCollectivesRunInSlicesWithOneStridedCopyATensor) {
  sliced_on_three_ranks({}, {gathers_and_scatters_in_slices, all_to_alls_in_slices, rooted_in_slices});
}

TEST(GpuStaging, RanksWithCpuTensorsSliceBlockCollectivesAlike) {
  // Rank 1's blocks lie apart in its own tensors: each slice is gathered in
  // scratch (reduce_scatter's and all_to_all's input) or spread from it
  // (all_gather's and all_to_all's output).
  sliced_on_three_ranks({1}, {gathers_and_scatters_in_slices, all_to_alls_in_slices, rooted_in_slices});
}

/// Rank q's reduce_scatter input, block p, element i: 1e8, i % 7 + p, -1e8
/// for ranks 0, 1, 2. In float32 the sum depends on the order: 1e8 + 5 is
/// 1e8 + 8, so rank order gives 8 where (1e8 - 1e8) + 5 gives 5.
float order_sensitive(int q, size_t p, size_t i) { return q == 0 ? 1e8f : q == 1 ? float(i % 7 + p) : -1e8f; }

TEST(GpuStaging, ReduceScatterReducesOnTheGpuInRankOrder) {
  // Staged ranks (0 and 2) reduce on the stream, the CPU-tensor rank (1) on
  // the host; all in rank order, so their results are the same function.
  expect_all_ok(run_ranks(3, [](Communicator& c, EmulatedGpu&, RankChecks& ck) {
    SlicedBlocks b(c, ck, {1});
    const int r = b.r, n = b.n;
    const size_t k = b.k, nk = b.nk;
    std::vector<float> x(nk), y(k, -1.0f);
    for (size_t i = 0; i < nk; ++i) x[i] = order_sensitive(r, i / k, i % k);
    const size_t reductions = EmulatedGpu::reductions().load();
    b.sliced("reduce_scatter", 3, [&] {
      coll::reduce_scatter(c, b.view(x, DType::kFloat32), b.view(y, DType::kFloat32), int(RedOp::kSum), on(b.s));
    });
    const size_t ran = EmulatedGpu::reductions().load() - reductions, want = b.host ? 0 : size_t(n - 1) * 3;
    ck.expect(ran == want, str_cat("reductions on the stream: ", ran, ", not ", want));
    // AVG and MAX of int64 in place, of 1 MiB (one slice, still on the GPU).
    const size_t m = (size_t{1} << 20) / 4 / size_t(n) + 1;
    std::vector<float> a(size_t(n) * m), av(m, -1.0f);
    for (size_t i = 0; i < a.size(); ++i) a[i] = float((r + 1) * int(i % m % 5 + 1));
    coll::reduce_scatter(c, b.view(a, DType::kFloat32), b.view(av, DType::kFloat32), int(RedOp::kAvg), on(b.s));
    std::vector<int64_t> w(size_t(n) * m);
    for (size_t i = 0; i < w.size(); ++i) w[i] = int64_t(i / m) * 100 + (r == 1 ? 50 : r) + int64_t(i % m % 5);
    TensorView mine = b.view(w, DType::kInt64);
    mine.data = w.data() + size_t(r) * m;
    mine.count = m;
    coll::reduce_scatter(c, b.view(w, DType::kInt64), mine, int(RedOp::kMax), on(b.s));
    const size_t after = EmulatedGpu::reductions().load() - reductions, more = b.host ? 0 : size_t(n - 1) * 2;
    ck.expect(after - ran == more, str_cat("AVG and MAX reductions on the stream: ", after - ran, ", not ", more));
    ck.expect(b.s.sync(), "the stream finished");
    size_t bad = 0;
    for (size_t i = 0; i < k; ++i) {
      volatile float sum = order_sensitive(0, size_t(r), i);
      sum = sum + order_sensitive(1, size_t(r), i);
      sum = sum + order_sensitive(2, size_t(r), i);
      bad += y[i] != sum;
    }
    ck.expect(bad == 0, str_cat("SUM float32 in rank order: ", bad, " elements differ, element 5 is ", y[5]));
    size_t bad_avg = 0, bad_max = 0;
    for (size_t i = 0; i < m; ++i) {
      bad_avg += av[i] != 2.0f * float(i % 5 + 1);
      bad_max += w[size_t(r) * m + i] != int64_t(r) * 100 + 50 + int64_t(i % 5);
    }
    ck.expect(bad_avg == 0, str_cat("AVG float32: ", bad_avg, " wrong elements"));
    ck.expect(bad_max == 0, str_cat("MAX int64 in place: ", bad_max, " wrong elements"));
  }));
}

TEST(GpuStaging, AllReduceReducesOnTheGpuInRankOrder) {
  // Each rank reduces its share of every slice in rank order: the staged
  // ranks (0 and 2) on the stream, the CPU-tensor rank (1) on the host; the
  // shares are then gathered, so every rank holds the same, rank-order sums.
  expect_all_ok(run_ranks(3, [](Communicator& c, EmulatedGpu&, RankChecks& ck) {
    SlicedBlocks b(c, ck, {1});
    const int r = b.r;
    // float32: 3 slices of 8 MiB and one of 2 items, where rank 0's share is empty.
    const size_t k = (size_t{6} << 20) + 2;
    std::vector<float> x(k), y(k, -1.0f);
    for (size_t i = 0; i < k; ++i) x[i] = order_sensitive(r, 0, i);
    const size_t reductions = EmulatedGpu::reductions().load();
    // Each slice copied in and out, its parts to the GPU and its share back
    // (none for an empty share).
    const size_t before = EmulatedGpu::copies().load();
    coll::all_reduce(c, b.view(x, DType::kFloat32), b.view(y, DType::kFloat32), int(RedOp::kSum), on(b.s));
    const size_t copies = EmulatedGpu::copies().load() - before, want_copies = b.host ? 0 : r == 0 ? 14 : 16;
    ck.expect(copies == want_copies, str_cat("all_reduce: ", copies, " copies, not ", want_copies));
    const size_t ran = EmulatedGpu::reductions().load() - reductions, want = b.host ? 0 : r == 0 ? 6 : 8;
    ck.expect(ran == want, str_cat("reductions on the stream: ", ran, ", not ", want));
    // AVG in place and MAX of int32, of 1 MiB (one slice, still on the GPU).
    const size_t m = (size_t{1} << 20) / 4 + 1;
    std::vector<float> a(m);
    for (size_t i = 0; i < a.size(); ++i) a[i] = float((r + 1) * int(i % 5 + 1));
    coll::all_reduce(c, b.view(a, DType::kFloat32), b.view(a, DType::kFloat32), int(RedOp::kAvg), on(b.s));
    std::vector<int32_t> mv(m), mx(m, -1);
    for (size_t i = 0; i < m; ++i) mv[i] = r * 10 + int(i % 3);
    coll::all_reduce(c, b.view(mv, DType::kInt32), b.view(mx, DType::kInt32), int(RedOp::kMax), on(b.s));
    const size_t after = EmulatedGpu::reductions().load() - reductions, more = b.host ? 0 : 2 * 2;
    ck.expect(after - ran == more, str_cat("AVG and MAX reductions on the stream: ", after - ran, ", not ", more));
    ck.expect(b.s.sync(), "the stream finished");
    size_t bad = 0;
    for (size_t i = 0; i < k; ++i) {
      volatile float sum = order_sensitive(0, 0, i);
      sum = sum + order_sensitive(1, 0, i);
      sum = sum + order_sensitive(2, 0, i);
      bad += y[i] != sum;
    }
    ck.expect(bad == 0, str_cat("SUM float32 in rank order: ", bad, " elements differ, element 5 is ", y[5]));
    size_t bad_avg = 0, bad_max = 0;
    for (size_t i = 0; i < m; ++i) {
      bad_avg += a[i] != 2.0f * float(i % 5 + 1);
      bad_max += mx[i] != 20 + int(i % 3);
    }
    ck.expect(bad_avg == 0, str_cat("AVG float32 in place: ", bad_avg, " wrong elements"));
    ck.expect(bad_max == 0, str_cat("MAX int32: ", bad_max, " wrong elements"));
  }));
}

TEST(GpuStaging, ReduceReducesOnTheGpuInRankOrder) {
  // As all_reduce, but the root gathers the shares: a staged non-root's
  // share goes back to its host copy to be sent, a staged root's to its
  // output's. Rank 1 (CPU tensors) is the root of the AVG.
  expect_all_ok(run_ranks(3, [](Communicator& c, EmulatedGpu&, RankChecks& ck) {
    SlicedBlocks b(c, ck, {1});
    const int r = b.r;
    const auto at_root = [&](int root, auto& v, DType t) {
      return r == root ? std::optional(b.view(v, t)) : std::nullopt;
    };
    // float32 SUM to rank 2: 3 slices of 8 MiB and one of 2 items, where rank 0's share is empty.
    const size_t k = (size_t{6} << 20) + 2;
    std::vector<float> x(k), y(k, -1.0f);
    for (size_t i = 0; i < k; ++i) x[i] = order_sensitive(r, 0, i);
    const size_t reductions = EmulatedGpu::reductions().load(), before = EmulatedGpu::copies().load();
    coll::reduce(c, b.view(x, DType::kFloat32), at_root(2, y, DType::kFloat32), int(RedOp::kSum), 2, on(b.s));
    // Each slice in, its parts to the GPU and its share back; the root's out too.
    const size_t copies = EmulatedGpu::copies().load() - before, want_copies = b.host ? 0 : r == 0 ? 10 : 16;
    ck.expect(copies == want_copies, str_cat("reduce: ", copies, " copies, not ", want_copies));
    const size_t ran = EmulatedGpu::reductions().load() - reductions, want = b.host ? 0 : r == 0 ? 6 : 8;
    ck.expect(ran == want, str_cat("reductions on the stream: ", ran, ", not ", want));
    // AVG float32 to rank 1 (CPU tensors), MAX int64 in place to rank 0, of 1 MiB each.
    const size_t m = (size_t{1} << 20) / 4 + 1;
    std::vector<float> a(m), av(m, -1.0f);
    for (size_t i = 0; i < m; ++i) a[i] = float((r + 1) * int(i % 5 + 1));
    coll::reduce(c, b.view(a, DType::kFloat32), at_root(1, av, DType::kFloat32), int(RedOp::kAvg), 1, on(b.s));
    std::vector<int64_t> w(m);
    for (size_t i = 0; i < m; ++i) w[i] = int64_t(r * 10) + int64_t(i % 3);
    coll::reduce(c, b.view(w, DType::kInt64), at_root(0, w, DType::kInt64), int(RedOp::kMax), 0, on(b.s));
    ck.expect(b.s.sync(), "the stream finished");
    size_t bad = 0, bad_avg = 0, bad_max = 0;
    for (size_t i = 0; r == 2 && i < k; ++i) {
      volatile float sum = order_sensitive(0, 0, i);
      sum = sum + order_sensitive(1, 0, i);
      sum = sum + order_sensitive(2, 0, i);
      bad += y[i] != sum;
    }
    for (size_t i = 0; i < m; ++i) {
      bad_avg += r == 1 && av[i] != 2.0f * float(i % 5 + 1);
      bad_max += r == 0 && w[i] != 20 + int64_t(i % 3);
    }
    ck.expect(bad == 0, str_cat("SUM float32 in rank order on the root: ", bad, " elements differ"));
    ck.expect(r == 2 || y[0] == -1.0f, "a non-root's recvbuf is untouched");
    ck.expect(bad_avg == 0, str_cat("AVG float32 on the CPU-tensor root: ", bad_avg, " wrong elements"));
    ck.expect(bad_max == 0, str_cat("MAX int64 in place on the root: ", bad_max, " wrong elements"));
    ck.expect(r == 0 || w[0] == int64_t(r * 10), "a non-root's input is unchanged by the share it reduced");
  }));
}

TEST(GpuStaging, TheSliceSizeAndTheGpuReductionsSizeAreRankZeros) {
  // Rank 0 asks for 1 MiB slices and GPU reductions from 4 MiB; rank 1 for
  // 4 MiB and 1 MiB (OMNICCL_STAGED_SLICE / OMNICCL_STAGED_GPU_REDUCE).
  // Both follow rank 0.
  const RankSetup setup = [](int r, EmulatedGpu&, CommConfig& cfg) {
    cfg.slicing.slice_bytes = (r == 0 ? size_t{1} : size_t{4}) << 20;
    cfg.slicing.gpu_reduce_bytes = (r == 0 ? size_t{4} : size_t{1}) << 20;
  };
  expect_all_ok(run_ranks(
      2,
      [](Communicator& c, EmulatedGpu&, RankChecks& ck) {
        EmuStream s;
        const int r = c.rank();
        ck.expect(c.slicing().slice_bytes == size_t{1} << 20, "rank 0's slice size");
        // 4 MiB + 4 bytes: 5 slices of 1 MiB (whole with 4 or 8 MiB slices).
        std::vector<int32_t> b((size_t{1} << 20) + 1, r == 0 ? 9 : 0);
        const size_t before = EmulatedGpu::copies().load();
        coll::broadcast(c, dev_view(b, DType::kInt32), 0, on(s));
        const size_t copies = EmulatedGpu::copies().load() - before;
        ck.expect(copies == 5, str_cat("broadcast: ", copies, " copies, not 5 (one a slice)"));
        // 2 MiB: under rank 0's 4 MiB, reduced on the host; 4 MiB: on the GPU,
        // a reduction a slice (2 ranks' parts: one reduce_async each).
        std::vector<float> x((size_t{1} << 19), float(r + 1)), y((size_t{1} << 20), float(r + 1));
        const size_t reductions = EmulatedGpu::reductions().load();
        coll::all_reduce(c, dev_view(x, DType::kFloat32), dev_view(x, DType::kFloat32), int(RedOp::kSum), on(s));
        const size_t small = EmulatedGpu::reductions().load() - reductions;
        coll::all_reduce(c, dev_view(y, DType::kFloat32), dev_view(y, DType::kFloat32), int(RedOp::kSum), on(s));
        const size_t large = EmulatedGpu::reductions().load() - reductions - small;
        ck.expect(s.sync(), "the stream finished");
        ck.expect(small == 0, str_cat("2 MiB all_reduce: ", small, " reductions on the stream, not 0"));
        ck.expect(large == 4, str_cat("4 MiB all_reduce: ", large, " reductions on the stream, not 4"));
        ck.expect(b.front() == 9 && b.back() == 9, "broadcast in slices");
        ck.expect(x.front() == 3.0f && x.back() == 3.0f && y.front() == 3.0f && y.back() == 3.0f, "the sums");
      },
      20000, {}, setup));
}

TEST(GpuStaging, NoRankWithAGpuInUseAtCreationMeansNoSlices) {
  // Slicing is agreed when the communicator is made (some rank then had a
  // GPU in use): a communicator of ranks that touch CUDA only later, as a
  // CPU-only job, runs every call whole; still right, staged whole.
  expect_all_ok(run_ranks(
      2,
      [](Communicator& c, EmulatedGpu& gpu, RankChecks& ck) {
        gpu.in_use = true;  // from now on
        EmuStream s;
        std::vector<int32_t> x((size_t{5} << 20) + 1, c.rank() + 1);
        const size_t before = EmulatedGpu::copies().load();
        coll::all_reduce(c, dev_view(x, DType::kInt32), dev_view(x, DType::kInt32), int(RedOp::kSum), on(s));
        const size_t copies = EmulatedGpu::copies().load() - before;
        ck.expect(!c.slices_large_calls(), "no rank had a GPU in use at creation");
        ck.expect(copies == 2, "whole copies in and out, not " + std::to_string(copies));
        ck.expect(s.sync() && x.front() == 3 && x.back() == 3, "all_reduce SUM int32");
      },
      20000, {}, [](int, EmulatedGpu& gpu, CommConfig&) { gpu.in_use = false; }));
}

TEST(GpuStaging, OneRankWithAGpuInUseMakesEveryRankSlice) {
  expect_all_ok(run_ranks(
      2,
      [](Communicator& c, EmulatedGpu&, RankChecks& ck) {
        EmuStream s;
        std::vector<int32_t> x((size_t{5} << 20) + 1, c.rank() + 1);
        TensorView v = dev_view(x, DType::kInt32);
        if (c.rank() == 1) v.device = DeviceKind::kCPU;
        coll::all_reduce(c, v, v, int(RedOp::kSum), on(s));
        ck.expect(c.slices_large_calls(), "rank 0 had its GPU in use: every rank slices");
        ck.expect(s.sync() && x.front() == 3 && x.back() == 3, "all_reduce SUM int32");
      },
      20000, {}, [](int r, EmulatedGpu& gpu, CommConfig&) { gpu.in_use = r == 0; }));
}

TEST(GpuStaging, ASlicedCallOneRankRejectsIsWithdrawnAndEveryRankStaysInStep) {
  // Ranks 0 and 2 run a 24 MiB all_reduce in slices; rank 1 rejects it whole
  // (BXOR on float32). Its first slice is withdrawn, the others never start,
  // and the collective numbers stay in step: the calls after it work.
  expect_all_ok(run_ranks(3, [](Communicator& c, EmulatedGpu&, RankChecks& ck) {
    EmuStream s;
    const int r = c.rank();
    std::vector<float> x(size_t{6} << 20, 1.0f);
    const int op = int(r == 1 ? RedOp::kBXor : RedOp::kSum);
    Status st = Status::kSuccess;
    std::string msg;
    try {
      WorkPtr w = coll::all_reduce(c, dev_view(x, DType::kFloat32), dev_view(x, DType::kFloat32), op, on(s, true));
      st = w->wait();
      msg = w->message();
    } catch (const Error& e) {
      st = e.status();
      msg = e.what();
      c.reject_collective("all_reduce", msg);  // as the C entry points do
    }
    ck.expect(st == (r == 1 ? Status::kInvalidArgument : Status::kMismatch), "the rejected call: " + msg);
    if (r != 1) ck.expect(msg.find("rejected") != std::string::npos, "it names the rejection: " + msg);
    ck.expect(s.sync(10000), "the stream was released");
    std::fill(x.begin(), x.end(), float(r + 1));
    coll::all_reduce(c, dev_view(x, DType::kFloat32), dev_view(x, DType::kFloat32), int(RedOp::kSum), on(s));
    ck.expect(s.sync() && x.front() == 6.0f && x.back() == 6.0f, "a sliced all_reduce afterwards");
  }));
}

TEST(GpuStaging, APeerLostDuringASlicedCallReleasesTheStream) {
  // Rank 1 takes part with CPU tensors and leaves while the slices run.
  expect_all_ok(run_ranks(
      2,
      [](Communicator& c, EmulatedGpu&, RankChecks& ck) {
        std::vector<float> x(size_t{16} << 20, 1.0f);  // 64 MiB: 8 slices
        if (c.rank() == 1) {
          TensorView v = dev_view(x, DType::kFloat32);
          v.device = DeviceKind::kCPU;
          CallOptions call;
          call.async = true;
          WorkPtr w = coll::all_reduce(c, v, v, int(RedOp::kSum), call);
          std::this_thread::sleep_for(std::chrono::milliseconds(20));
          std::fflush(stderr);
          _exit(0);
        }
        EmuStream s;
        coll::all_reduce(c, dev_view(x, DType::kFloat32), dev_view(x, DType::kFloat32), 0, on(s));
        ck.expect(s.sync(10000), "the stream was released after the failure");
        std::string msg;
        for (int i = 0; i < 200 && c.async_error(msg) == Status::kSuccess; ++i) {
          std::this_thread::sleep_for(std::chrono::milliseconds(25));
        }
        ck.expect(c.async_error(msg) == Status::kPeerFailure, "the communicator's async error: " + msg);
      },
      4000));
}

TEST(GpuStaging, ASlicedCallEndsWithinItsTimeoutNotATimeoutASlice) {
  // Every copy of the stream takes 250 ms. No one wait of the 3 slices
  // reaches the 600 ms timeout, but the call as a whole would (about 1.5 s):
  // it must end with kTimeout by its deadline, and release the stream.
  expect_all_ok(run_ranks(2, [](Communicator& c, EmulatedGpu&, RankChecks& ck) {
    EmuStream s;
    std::vector<float> x(size_t{6} << 20, 1.0f);  // 24 MiB: 3 slices
    EmulatedGpu::copy_delay_ms() = 250;
    CallOptions call = on(s, /*async=*/true);
    call.timeout_ms = 600;
    const auto t0 = std::chrono::steady_clock::now();
    WorkPtr w = coll::all_reduce(c, dev_view(x, DType::kFloat32), dev_view(x, DType::kFloat32), 0, call);
    const Status st = w != nullptr ? w->wait() : Status::kInternal;
    const auto ms =
        std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - t0).count();
    EmulatedGpu::copy_delay_ms() = 0;
    ck.expect(st == Status::kTimeout,
              std::string("the call timed out, not ") + status_name(st) + (w ? ": " + w->message() : ""));
    ck.expect(ms < 1400, "it ended by its deadline, not " + std::to_string(ms) + " ms after the call");
    ck.expect(s.sync(20000), "the stream was released");
  }));
}

TEST(GpuStaging, AProfileSaysWhereAStagedCallsTimeGoes) {
  // OMNICCL_STAGED_PROFILE: rank 0's copies take 40 ms each, rank 1's none.
  // Rank 0's time is in waiting for its inputs' and outputs' copies; rank
  // 1's in the host collective, which waits for rank 0's data.
  const RankSetup setup = [](int, EmulatedGpu&, CommConfig& cfg) { cfg.staged_profile = true; };
  expect_all_ok(run_ranks(
      2,
      [](Communicator& c, EmulatedGpu&, RankChecks& ck) {
        EmuStream s;
        const int r = c.rank();
        StagedProfile* p = c.staged_profile();
        ck.expect(p != nullptr && p->calls() == 0, "a profile with no calls yet");
        if (p == nullptr) return;
        EmulatedGpu::copy_delay_ms() = r == 0 ? 40 : 0;
        std::vector<int32_t> x(1024, r + 1);
        for (int i = 0; i < 3; ++i) {
          WorkPtr w = coll::all_reduce(c, dev_view(x, DType::kInt32), dev_view(x, DType::kInt32), 0, on(s, true));
          ck.expect(w != nullptr && w->wait() == Status::kSuccess, "the call succeeded");
        }
        EmulatedGpu::copy_delay_ms() = 0;
        ck.expect(p->calls() == 3, str_cat("3 calls profiled, not ", p->calls()));
        const double inputs = p->mean_us(StagedProfile::kInputs), outputs = p->mean_us(StagedProfile::kOutputs);
        const double host = p->mean_us(StagedProfile::kHost);
        if (r == 0) {
          ck.expect(inputs >= 35000 && outputs >= 35000,
                    str_cat("rank 0 waits for its copies: inputs ", inputs, " us, outputs ", outputs, " us"));
        } else {
          ck.expect(host >= 30000, str_cat("rank 1 waits for rank 0 in the collective: host ", host, " us"));
        }
        const std::string line = p->summary();
        ck.expect(line.find("3 staged calls, mean per call: enqueue ") == 0 &&
                      line.find(", queued ") != std::string::npos && line.find(", outputs ") != std::string::npos &&
                      line.find(" us, total ") != std::string::npos,
                  "the summary: " + line);
        ck.expect(s.sync(), "the stream finished");
        ck.expect(x.front() == 12 && x.back() == 12, "three SUMs in place: 3, 6, 12");
      },
      20000, {}, setup));
}

TEST(GpuStaging, SlicedCallsWhoseCountsDifferFailAtTheFirstSlice) {
  // Every slice's header carries the call's count, so ranks whose counts
  // differ only in the last slice's length are told at the first one.
  expect_all_ok(run_ranks(2, [](Communicator& c, EmulatedGpu&, RankChecks& ck) {
    EmuStream s;
    std::vector<float> x((size_t{5} << 20) + size_t(c.rank()), 1.0f);
    WorkPtr w = coll::all_reduce(c, dev_view(x, DType::kFloat32), dev_view(x, DType::kFloat32), 0, on(s, true));
    ck.expect(w != nullptr && w->wait() == Status::kMismatch, "the work reports the mismatch");
    if (w != nullptr) {
      ck.expect(w->message().find("#1") != std::string::npos, "at the call's first slice: " + w->message());
    }
    ck.expect(s.sync(10000), "the stream was released");
  }));
}

TEST(GpuStaging, ScanAndExscanGoThroughHostCopies) {
  // 3 ranks: scan in place, exscan out of place (rank 0's recvbuf keeps its
  // device contents), then LAND on float32 through the same copies.
  expect_all_ok(run_ranks(3, [](Communicator& c, EmulatedGpu&, RankChecks& ck) {
    EmuStream s;
    const int r = c.rank();
    std::vector<int64_t> x(4099, r + 1), y(4099, -7);
    coll::exscan(c, dev_view(x, DType::kInt64), dev_view(y, DType::kInt64), int(RedOp::kSum), on(s));
    coll::scan(c, dev_view(x, DType::kInt64), dev_view(x, DType::kInt64), int(RedOp::kSum), on(s));
    std::vector<float> f(5, r == 1 ? 0.0f : 2.5f), g(5, -1.0f);
    coll::scan(c, dev_view(f, DType::kFloat32), dev_view(g, DType::kFloat32), int(RedOp::kLAnd), on(s));
    ck.expect(s.sync(), "the stream finished");
    const int64_t inc = int64_t(r + 1) * (r + 2) / 2, exc = int64_t(r) * (r + 1) / 2;
    ck.expect(x.front() == inc && x.back() == inc, "scan SUM int64 in place");
    ck.expect(y.front() == (r == 0 ? -7 : exc) && y.back() == (r == 0 ? -7 : exc), "exscan SUM int64");
    ck.expect(g.front() == (r == 0 ? 1.0f : 0.0f) && g.back() == g.front(), "scan LAND float32");
  }));
}

TEST(GpuStaging, CallReturnsBeforeTheStreamReachesItAndLaterWorkSeesTheResult) {
  expect_all_ok(run_ranks(2, [](Communicator& c, EmulatedGpu& gpu, RankChecks& ck) {
    EmuStream s;
    std::vector<float> x(1000, float(c.rank() + 1));
    std::vector<float> seen(1000, 0.0f);
    s.close_gate();  // the GPU is busy with earlier work
    const auto t0 = std::chrono::steady_clock::now();
    coll::all_reduce(c, dev_view(x, DType::kFloat32), dev_view(x, DType::kFloat32), int(RedOp::kSum), on(s));
    // "A kernel queued after it": copies the result where the host can look.
    gpu.copy_async(seen.data(), x.data(), x.size() * sizeof(float), &s);
    const auto took = std::chrono::steady_clock::now() - t0;
    ck.expect(took < std::chrono::seconds(2), "the call returned without waiting for the stream");
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    ck.expect(x[0] == float(c.rank() + 1), "nothing ran before the stream reached the operation");
    // The host is free: a CPU operation on another communicator would run
    // here; open the gate as the GPU finishing its earlier work.
    s.open_gate();
    ck.expect(s.sync(), "the stream finished");
    ck.expect(x[0] == 3.0f && x[999] == 3.0f, "the result is in place");
    ck.expect(seen[0] == 3.0f && seen[999] == 3.0f, "work queued after the call saw the result");
  }));
}

TEST(GpuStaging, AsyncWaitFollowsTheStream) {
  expect_all_ok(run_ranks(2, [](Communicator& c, EmulatedGpu&, RankChecks& ck) {
    EmuStream s;
    std::vector<int64_t> x(4096, c.rank() + 1), y(4096, 0);
    WorkPtr w = coll::all_reduce(c, dev_view(x, DType::kInt64), dev_view(y, DType::kInt64), int(RedOp::kProd),
                                 on(s, /*async=*/true));
    ck.expect(w != nullptr, "an async call gives a work handle");
    if (w == nullptr) return;
    ck.expect(w->wait() == Status::kSuccess, "the work succeeded: " + w->message());
    // No stream sync: the wait itself covers the copy back.
    ck.expect(y[0] == 2 && y[4095] == 2, "after wait the results are on the device");
    // A v1-style call on CUDA tensors has no handle and does not block.
    ck.expect(coll::barrier(c, on(s)) == nullptr, "a blocking-form barrier returns no handle");
    ck.expect(s.sync(), "the stream finished");
  }));
}

TEST(GpuStaging, HostCopiesTakeLittleMoreMemoryThanTheTensors) {
  // Page-locked memory is scarce and never given back (freeing it stalls the
  // GPU): a block for 8 MiB + 8 KiB of tensors must not be rounded up to the
  // next power of two (16 MiB), only to an eighth of it.
  expect_all_ok(run_ranks(2, [](Communicator& c, EmulatedGpu&, RankChecks& ck) {
    EmuStream s;
    std::vector<float> x((size_t{4} << 20) / 4 + 1024, float(c.rank() + 1)), y(x.size(), 0.0f);
    // The two tensors, and the ranks' parts of this rank's share, gathered
    // for the GPU to reduce (a tensor's size, at most a slice's).
    const size_t tensors = 3 * x.size() * sizeof(float);
    const size_t before = EmulatedGpu::host_bytes().load();
    coll::all_reduce(c, dev_view(x, DType::kFloat32), dev_view(y, DType::kFloat32), int(RedOp::kSum), on(s));
    ck.expect(s.sync(), "the stream finished");
    ck.expect(y.front() == 3.0f && y.back() == 3.0f, "the sum is on the device");
    const size_t took = EmulatedGpu::host_bytes().load() - before;
    ck.expect(took >= tensors && took <= tensors + tensors / 4,
              "host memory for " + std::to_string(tensors) + " bytes of tensors: " + std::to_string(took));
  }));
}

TEST(GpuStaging, ManyOperationsInFlightOnOneStreamEachGetTheirOwnHostCopies) {
  expect_all_ok(run_ranks(2, [](Communicator& c, EmulatedGpu&, RankChecks& ck) {
    EmuStream s;
    constexpr int kOps = 24;
    std::vector<std::vector<int32_t>> bufs(kOps);
    for (int round = 0; round < 2; ++round) {  // the second round reuses the host memory
      s.close_gate();                          // none can start before all are queued
      std::vector<WorkPtr> works;
      for (int i = 0; i < kOps; ++i) {
        bufs[size_t(i)].assign(size_t(100 + i), (c.rank() + 1) * (i + round));
        works.push_back(coll::all_reduce(c, dev_view(bufs[size_t(i)], DType::kInt32),
                                         dev_view(bufs[size_t(i)], DType::kInt32), int(RedOp::kSum), on(s, true)));
      }
      s.open_gate();
      for (int i = 0; i < kOps; ++i) {
        ck.expect(works[size_t(i)]->wait() == Status::kSuccess, "op " + std::to_string(i) + " succeeded");
        const int32_t want = 3 * (i + round);
        ck.expect(bufs[size_t(i)].front() == want && bufs[size_t(i)].back() == want,
                  "op " + std::to_string(i) + " round " + std::to_string(round) + " has its own result");
      }
    }
    ck.expect(s.sync(), "the stream finished");
  }));
}

TEST(GpuStaging, TensorsOnTheWrongDeviceAreClearErrors) {
  expect_all_ok(run_ranks(1, [](Communicator& c, EmulatedGpu&, RankChecks& ck) {
    EmuStream s;
    std::vector<float> d(4, 1.0f), h(4, 0.0f);
    TensorView host;
    host.data = h.data();
    host.count = 4;
    host.dtype = DType::kFloat32;
    std::string msg;
    Status st = status_of([&] { coll::all_reduce(c, dev_view(d, DType::kFloat32), host, 0, on(s)); }, &msg);
    ck.expect(st == Status::kInvalidArgument && msg.find("different devices") != std::string::npos,
              "mixed CPU/CUDA: " + msg);
    TensorView other = dev_view(d, DType::kFloat32);
    other.device_id = 1;
    st = status_of([&] { coll::broadcast(c, other, 0, on(s)); }, &msg);
    ck.expect(st == Status::kInvalidArgument && msg.find("cuda:1") != std::string::npos &&
                  msg.find("current CUDA device is cuda:0") != std::string::npos,
              "a tensor on another device: " + msg);
    st = status_of([&] { coll::send(c, dev_view(d, DType::kFloat32), 0, on(s)); }, &msg);
    ck.expect(st == Status::kUnsupported && msg.find("CUDA") != std::string::npos,
              "send of a CUDA tensor to this rank itself: " + msg);
    // None of these broke the communicator.
    std::vector<float> x(4, 2.0f);
    coll::all_reduce(c, dev_view(x, DType::kFloat32), dev_view(x, DType::kFloat32), 0, on(s));
    ck.expect(s.sync() && x[0] == 2.0f, "a good call afterwards works");
  }));
}

TEST(GpuStaging, AFailedPeerReleasesTheStreamAndSurfacesAsTheCommunicatorsError) {
  // Rank 1 joins, then leaves before the collective; rank 0's staged
  // all_reduce fails on its worker, and its stream must still move on.
  expect_all_ok(run_ranks(
      2,
      [](Communicator& c, EmulatedGpu&, RankChecks& ck) {
        if (c.rank() == 1) {
          std::fflush(stderr);
          _exit(0);
        }
        EmuStream s;
        std::vector<float> x(256, 1.0f);
        coll::all_reduce(c, dev_view(x, DType::kFloat32), dev_view(x, DType::kFloat32), 0, on(s));
        ck.expect(s.sync(10000), "the stream was released after the failure");
        std::string msg;
        for (int i = 0; i < 200 && c.async_error(msg) == Status::kSuccess; ++i) {
          std::this_thread::sleep_for(std::chrono::milliseconds(25));
        }
        const Status st = c.async_error(msg);
        ck.expect(st == Status::kPeerFailure, "the communicator's async error is a peer failure: " + msg);
        const Status later = status_of(
            [&] { coll::all_reduce(c, dev_view(x, DType::kFloat32), dev_view(x, DType::kFloat32), 0, on(s)); });
        ck.expect(later == Status::kCommFailed, "a later call is refused");
        ck.expect(s.sync(10000), "the stream is not held by the refused call");
      },
      4000));
}

TEST(GpuStaging, AMismatchedCallIsTheUsualErrorAndReleasesTheStream) {
  expect_all_ok(run_ranks(2, [](Communicator& c, EmulatedGpu&, RankChecks& ck) {
    EmuStream s;
    std::vector<float> x(size_t(5 + c.rank()), 1.0f);  // 5 elements on rank 0, 6 on rank 1
    WorkPtr w = coll::all_reduce(c, dev_view(x, DType::kFloat32), dev_view(x, DType::kFloat32), 0, on(s, true));
    ck.expect(w != nullptr && w->wait() == Status::kMismatch, "the work reports the mismatch");
    if (w != nullptr) ck.expect(w->message().find("count") != std::string::npos, "it names the count: " + w->message());
    ck.expect(s.sync(10000), "the stream was released");
    std::string msg;
    ck.expect(c.async_error(msg) == Status::kMismatch, "the communicator's error is the mismatch: " + msg);
  }));
}

TEST(GpuStaging, AStreamThatNeverReachesTheOperationTimesOutAndIsReleased) {
  expect_all_ok(run_ranks(1, [](Communicator& c, EmulatedGpu&, RankChecks& ck) {
    EmuStream s;
    std::vector<int32_t> x(8, 3);
    s.close_gate();  // earlier GPU work that never ends within the deadline
    CallOptions call = on(s, /*async=*/true);
    call.timeout_ms = 300;
    WorkPtr w = coll::all_reduce(c, dev_view(x, DType::kInt32), dev_view(x, DType::kInt32), 0, call);
    ck.expect(w != nullptr && w->wait() == Status::kTimeout, "the work timed out");
    if (w != nullptr) {
      ck.expect(w->message().find("CUDA stream") != std::string::npos, "the timeout names the stream: " + w->message());
    }
    s.open_gate();
    ck.expect(s.sync(10000), "the stream moved on once its earlier work ended");
  }));
}

TEST(GpuStaging, AbortEndsAWaitForTheStreamPromptly) {
  expect_all_ok(run_ranks(1, [](Communicator& c, EmulatedGpu&, RankChecks& ck) {
    EmuStream s;
    std::vector<int32_t> x(8, 3);
    s.close_gate();
    WorkPtr w = coll::all_reduce(c, dev_view(x, DType::kInt32), dev_view(x, DType::kInt32), 0, on(s, true));
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    const auto t0 = std::chrono::steady_clock::now();
    c.abort();
    ck.expect(std::chrono::steady_clock::now() - t0 < std::chrono::seconds(5), "abort returned promptly");
    ck.expect(w != nullptr && w->wait() == Status::kAborted, "the work was aborted");
    s.open_gate();
    ck.expect(s.sync(10000), "the stream was released");
  }));
}

}  // namespace
}  // namespace omniccl
