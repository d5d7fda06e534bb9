// gloo_bench.cc - the Gloo peer of omniccl-bench: the same collectives,
// sizes, iteration schedule, timing and CSV, measured with Gloo (Debian's
// libgloo-dev, 0.0~git20220518) over its TCP transport on 127.0.0.1.
//
//   omniccl-run -n 2 --no-prefix ./gloo_bench --store DIR --coll all --csv
//
// Ranks come from RANK/WORLD_SIZE (any env:// launcher; omniccl-run is a
// plain process launcher that links nothing of OmniCCL). They meet through a
// gloo::rendezvous::FileStore in DIR, which must be new and empty for each
// job. Gloo has no shared-memory transport, so this is Gloo's best on one
// host as well as its TCP number.
//
// Collectives (float32 SUM):
//   allreduce       --algo ring (gloo::allreduce, ring), hd (the classic
//                   AllreduceHalvingDoubling, in place), or best (default:
//                   both measured, the faster one reported)
//   reduce_scatter  ReduceScatterHalvingDoubling (in place: Gloo has no
//                   out-of-place reduce-scatter)
//   allgather, bcast, reduce, gather, scatter, alltoall, barrier: the
//   options-style gloo::<collective>() calls; reduce needs an output buffer
//   on every rank (Gloo uses it as scratch).
// Timing as omniccl-bench: warm-up, barrier, `iters` timed calls; mean and
// max over ranks (reduced with Gloo's allreduce).

#include <gloo/allgather.h>
#include <gloo/allreduce.h>
#include <gloo/allreduce_halving_doubling.h>
#include <gloo/alltoall.h>
#include <gloo/barrier.h>
#include <gloo/broadcast.h>
#include <gloo/gather.h>
#include <gloo/math.h>
#include <gloo/reduce.h>
#include <gloo/reduce_scatter.h>
#include <gloo/rendezvous/context.h>
#include <gloo/rendezvous/file_store.h>
#include <gloo/scatter.h>
#include <gloo/transport/tcp/device.h>

#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "bench_common.h"

namespace {

using Ctx = std::shared_ptr<gloo::Context>;

/// The element-wise float sum Gloo's options-style calls take.
void sum_floats(void* c, const void* a, const void* b, size_t n) { gloo::sum<float>(c, a, b, n); }

/// A 64-byte aligned, zeroed float buffer (owning); empty for count 0.
struct Floats {
  float* p = nullptr;
  uint64_t n = 0;
  /// Allocates and zeroes `count` floats.
  explicit Floats(uint64_t count) : n(count) {
    if (count == 0) return;
    size_t bytes = static_cast<size_t>((count * 4 + 63) / 64 * 64);
    p = static_cast<float*>(std::aligned_alloc(64, bytes));
    if (!p) throw std::bad_alloc();
    std::memset(p, 0, bytes);
  }
  Floats(const Floats&) = delete;
  Floats& operator=(const Floats&) = delete;
  /// Frees the memory.
  ~Floats() { std::free(p); }
};

/// Builds a runner that performs collective `c` once per call on the given
/// buffers. Gloo's options objects (and the classic algorithms) register the
/// buffers once, so the runner is built once per point.
std::function<void()> make_runner(const Ctx& ctx, int c, const bc_layout& l, int root, float* send, float* recv,
                                  const std::string& algo) {
  const int rank = ctx->rank, n = ctx->size;
  const size_t p = static_cast<size_t>(l.param);
  switch (c) {
    case BC_ALLREDUCE: {
      if (algo == "hd") {
        // Classic algorithm: in place on recv (input copied in first would
        // add a memcpy; Gloo users run it in place).
        auto a = std::make_shared<gloo::AllreduceHalvingDoubling<float>>(ctx, std::vector<float*>{recv},
                                                                         static_cast<int>(p));
        std::memcpy(recv, send, p * 4);
        return [a] { a->run(); };
      }
      auto opts = std::make_shared<gloo::AllreduceOptions>(ctx);
      opts->setAlgorithm(gloo::AllreduceOptions::Algorithm::RING);
      opts->setInput(send, p);
      opts->setOutput(recv, p);
      opts->setReduceFunction(&sum_floats);
      return [opts] { gloo::allreduce(*opts); };
    }
    case BC_ALLGATHER: {
      auto opts = std::make_shared<gloo::AllgatherOptions>(ctx);
      opts->setInput(send, p);
      opts->setOutput(recv, p * n);
      return [opts] { gloo::allgather(*opts); };
    }
    case BC_BCAST: {
      auto opts = std::make_shared<gloo::BroadcastOptions>(ctx);
      opts->setOutput(recv, p);
      opts->setRoot(root);
      return [opts] { gloo::broadcast(*opts); };
    }
    case BC_REDUCE: {
      auto opts = std::make_shared<gloo::ReduceOptions>(ctx);
      opts->setInput(send, p);
      opts->setOutput(recv, p);
      opts->setRoot(root);
      opts->setReduceFunction(&sum_floats);
      return [opts] { gloo::reduce(*opts); };
    }
    case BC_REDUCE_SCATTER: {
      // In place on send (p * n elements); rank r's part ends up at the
      // start of the buffer.
      std::vector<int> counts(static_cast<size_t>(n), static_cast<int>(p));
      auto a = std::make_shared<gloo::ReduceScatterHalvingDoubling<float>>(ctx, std::vector<float*>{send},
                                                                           static_cast<int>(p * n), counts);
      return [a] { a->run(); };
    }
    case BC_ALLTOALL: {
      auto opts = std::make_shared<gloo::AlltoallOptions>(ctx);
      opts->setInput(send, p * n);
      opts->setOutput(recv, p * n);
      return [opts] { gloo::alltoall(*opts); };
    }
    case BC_GATHER: {
      auto opts = std::make_shared<gloo::GatherOptions>(ctx);
      opts->setInput(send, p);
      if (rank == root) opts->setOutput(recv, p * n);
      opts->setRoot(root);
      return [opts] { gloo::gather(*opts); };
    }
    case BC_SCATTER: {
      auto opts = std::make_shared<gloo::ScatterOptions>(ctx);
      if (rank == root) {
        std::vector<float*> parts;
        for (int r = 0; r < n; ++r) parts.push_back(send + static_cast<size_t>(r) * p);
        opts->setInputs(parts, p);
      }
      opts->setOutput(recv, p);
      opts->setRoot(root);
      return [opts] { gloo::scatter(*opts); };
    }
    default: {
      auto opts = std::make_shared<gloo::BarrierOptions>(ctx);
      return [opts] { gloo::barrier(*opts); };
    }
  }
}

/// A barrier on the context.
void barrier(const Ctx& ctx) {
  gloo::BarrierOptions opts(ctx);
  gloo::barrier(opts);
}

/// Element-wise max of doubles for the results reduction.
void max_doubles(void* c, const void* a, const void* b, size_t n) { gloo::max<double>(c, a, b, n); }

/// Element-wise sum of doubles for the results reduction.
void sum_doubles(void* c, const void* a, const void* b, size_t n) { gloo::sum<double>(c, a, b, n); }

/// All-reduces `v` in place with `fn` (results: times, wrong counts).
void allreduce_doubles(const Ctx& ctx, std::vector<double>& v, void (*fn)(void*, const void*, const void*, size_t)) {
  gloo::AllreduceOptions opts(ctx);
  opts.setOutput(v.data(), v.size());
  opts.setReduceFunction(fn);
  gloo::allreduce(opts);
}

/// Times `iters` calls of collective `c` with allreduce algorithm `algo`
/// after `warm` warm-up calls; returns seconds per call on this rank and,
/// with -c, the wrong elements of a checked call in `*wrong`.
double time_point(const Ctx& ctx, const bc_options& o, int c, const bc_layout& l, int iters, int warm,
                  const std::string& algo, double* wrong) {
  const int rank = ctx->rank, n = ctx->size, root = o.root;
  bool has_send = c != BC_BARRIER && c != BC_BCAST && (c != BC_SCATTER || rank == root);
  bool has_recv = c != BC_BARRIER && (c != BC_GATHER || rank == root);
  Floats send(has_send ? l.send : 0);
  Floats recv(has_recv ? l.recv : 0);
  auto fill = [&] {
    if (send.p) bc_fill(send.p, send.n, rank);
    if (recv.p) std::memset(recv.p, 0xff, recv.n * 4);
    if (recv.p && c == BC_BCAST && rank == root) bc_fill(recv.p, recv.n, rank);
  };
  fill();
  auto runner = make_runner(ctx, c, l, root, send.p, recv.p, algo);
  for (int i = 0; i < warm; ++i) runner();
  barrier(ctx);
  double t0 = bc_now();
  for (int i = 0; i < iters; ++i) runner();
  double per_op = (bc_now() - t0) / iters;
  *wrong = 0;
  if (o.check && c != BC_BARRIER) {
    fill();
    if (c == BC_ALLREDUCE && algo == "hd") std::memcpy(recv.p, send.p, l.param * 4);
    barrier(ctx);
    runner();
    // Results: reduce_scatter in place at the start of send; reduce only on
    // the root.
    const float* out = recv.p;
    uint64_t len = recv.n;
    if (c == BC_REDUCE_SCATTER) {
      out = send.p;
      len = l.param;
    }
    if (c == BC_REDUCE && rank != root) out = nullptr;
    *wrong = static_cast<double>(bc_count_wrong(c, rank, n, root, &l, out, out ? len : 0));
  }
  return per_op;
}

/// Measures one point on every rank and has rank 0 print it.
void run_point(const Ctx& ctx, const bc_options& o, int c, uint64_t size) {
  const int n = ctx->size;
  bc_layout l = bc_layout_of(c, size, n);
  int iters = bc_iters(&o, l.bytes), warm = bc_warmup(&o, iters);
  std::string algo = o.extra ? o.extra : "best";
  double wrong = 0, per_op;
  if (c == BC_ALLREDUCE && algo == "best") {
    double w1 = 0, w2 = 0;
    double ring = time_point(ctx, o, c, l, iters, warm, "ring", &w1);
    double hd = time_point(ctx, o, c, l, iters, warm, "hd", &w2);
    // Choose by the mean over ranks so every rank picks the same.
    std::vector<double> both{ring, hd};
    allreduce_doubles(ctx, both, &sum_doubles);
    bool use_ring = both[0] <= both[1];
    per_op = use_ring ? ring : hd;
    wrong = use_ring ? w1 : w2;
  } else {
    per_op = time_point(ctx, o, c, l, iters, warm, algo, &wrong);
  }
  std::vector<double> sums{per_op, wrong};
  allreduce_doubles(ctx, sums, &sum_doubles);
  std::vector<double> maxes{per_op};
  allreduce_doubles(ctx, maxes, &max_doubles);
  if (ctx->rank == 0) {
    bc_print_point(&o, c, n, &l, iters, sums[0], maxes[0], o.check ? static_cast<long long>(sums[1]) : -1);
  }
}

/// Rank 0 sleeps 1 s before a barrier; every rank reports the CPU share it
/// used while blocked in it.
void blocked_cpu(const Ctx& ctx, const bc_options& o) {
  const int rank = ctx->rank, n = ctx->size;
  for (int i = 0; i < 10; ++i) barrier(ctx);
  if (rank == 0) bc_sleep(1.0);
  double w0 = bc_now(), c0 = bc_process_cpu();
  barrier(ctx);
  double wall = bc_now() - w0, cpu = bc_process_cpu() - c0;
  std::vector<double> all(static_cast<size_t>(3 * n), 0.0);
  all[static_cast<size_t>(3 * rank)] = wall;
  all[static_cast<size_t>(3 * rank + 1)] = cpu;
  all[static_cast<size_t>(3 * rank + 2)] = wall > 0 ? 100.0 * cpu / wall : 0;
  allreduce_doubles(ctx, all, &sum_doubles);  // each rank filled its own slots
  if (rank == 0) bc_print_blocked(&o, n, all.data());
}

/// Reads a whole-number environment variable, or -1.
int env_int(const char* name) {
  const char* v = std::getenv(name);
  return v && *v ? std::atoi(v) : -1;
}

}  // namespace

/// Entry point: rendezvous through the FileStore, then the measurements.
int main(int argc, char** argv) {
  // --store DIR is ours; the rest is the common command line.
  std::string store_dir;
  std::vector<char*> args;
  for (int i = 0; i < argc; ++i) {
    if (std::strcmp(argv[i], "--store") == 0 && i + 1 < argc) {
      store_dir = argv[++i];
    } else {
      args.push_back(argv[i]);
    }
  }
  bc_options o;
  int st = bc_parse(static_cast<int>(args.size()), args.data(), &o, "gloo", "tcp");
  if (st >= 0) return st;
  int rank = env_int("RANK"), n = env_int("WORLD_SIZE");
  if (rank < 0 || n < 1 || store_dir.empty()) {
    std::fprintf(stderr, "gloo_bench: needs RANK and WORLD_SIZE in the environment and --store DIR\n");
    return 2;
  }
  try {
    gloo::transport::tcp::attr attr;
    attr.hostname = "127.0.0.1";  // loopback only
    auto dev = gloo::transport::tcp::CreateDevice(attr);
    gloo::rendezvous::FileStore store(store_dir);
    auto ctx = std::make_shared<gloo::rendezvous::Context>(rank, n);
    ctx->setTimeout(std::chrono::seconds(300));
    ctx->connectFullMesh(store, dev);
    Ctx c = ctx;
    if (o.root < 0 || o.root >= n) {
      std::fprintf(stderr, "gloo_bench: root %d is not below %d ranks\n", o.root, n);
      return 2;
    }
    if (o.blocked_cpu) {
      blocked_cpu(c, o);
    } else {
      if (rank == 0) bc_print_header(&o, n);
      for (int k = 0; k < BC_NCOLLS; ++k) {
        if (!o.colls[k]) continue;
        if (k == BC_BARRIER) {
          run_point(c, o, k, 0);
          continue;
        }
        for (int s = 0; s < o.nsizes; ++s) run_point(c, o, k, o.sizes[s]);
      }
    }
    barrier(c);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "gloo_bench: rank %d: %s\n", rank, e.what());
    return 1;
  }
  return 0;
}
