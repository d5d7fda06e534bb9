// The soak test's random schedule: what one round runs (rank count,
// transport, algorithms, fault) and what each operation of it is (kind,
// dtype, reduce op, size, root, form). Everything is a pure function of the
// seed, the round number and the operation number, so every rank draws the
// same schedule without talking to the others, and a failing round is
// reproduced from the numbers it prints.
#pragma once

#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

#include "reference.h"

namespace soak {

using occl_ref::DT;
using occl_ref::hash3;
using occl_ref::mix64;

/// A stream of random numbers from one 64-bit state (splitmix64).
struct Rng {
  uint64_t s;
  explicit Rng(uint64_t seed) : s(seed) {}
  uint64_t next() { return s = mix64(s); }
  /// Uniform in [0, n); n > 0.
  uint64_t below(uint64_t n) { return next() % n; }
  int64_t range(int64_t lo, int64_t hi) { return lo + static_cast<int64_t>(below(static_cast<uint64_t>(hi - lo + 1))); }
};

enum class Kind {
  kAllReduce,
  kReduce,
  kBroadcast,
  kAllGather,
  kReduceScatter,
  kGather,
  kScatter,
  kAllToAll,
  kAllGatherv,
  kGatherv,
  kScatterv,
  kAllToAllv,
  kSendRecv,
  kBarrier,
  kScan,
  kExScan,
  kSplit,  // comm split, a few operations on the new communicators, destroy (last: not drawn inside a split)
  kCount
};

inline const char* kind_name(Kind k) {
  static const char* const kNames[] = {"all_reduce", "reduce",      "broadcast",  "all_gather",  "reduce_scatter",
                                       "gather",     "scatter",     "all_to_all", "all_gatherv", "gatherv",
                                       "scatterv",   "all_to_allv", "send_recv",  "barrier",     "scan",
                                       "exscan",     "split"};
  return kNames[static_cast<int>(k)];
}

inline bool is_scan(Kind k) { return k == Kind::kScan || k == Kind::kExScan; }
inline bool is_reduction(Kind k) {
  return k == Kind::kAllReduce || k == Kind::kReduce || k == Kind::kReduceScatter || is_scan(k);
}

/// How a fault is injected in a round (--faults on).
enum class Fault { kNone, kKill, kStop, kSlow, kDrop };

inline const char* fault_name(Fault f) {
  static const char* const kNames[] = {"none", "kill", "stop", "slow", "drop"};
  return kNames[static_cast<int>(f)];
}

/// One operation of the schedule. `count` is the element count of one
/// rank's block (the whole tensor for all_reduce/reduce/broadcast/send,
/// one part of it for the gather/scatter/all_to_all families, the upper
/// bound of one part for the v-variants).
struct Spec {
  Kind kind = Kind::kBarrier;
  DT dt = DT::kI32;
  occl_ref::Op op;
  int64_t count = 0;
  int root = 0;
  bool async = false;     // through a work handle and occl_work_wait
  bool in_place = false;  // where the operation allows it
  bool null_nonroot = false;
  bool gaps = false;     // v-variants: displacements with holes that must stay untouched
  bool rounded = false;  // floating reductions: inputs that round (ops.h)
  uint64_t cs = 0;       // the case seed: inputs are functions of (cs, rank, element)

  std::string describe() const {
    std::string s = std::string(kind_name(kind)) + " " + occl_ref::dt_name(dt) + " count " + std::to_string(count);
    if (is_reduction(kind)) s += " op " + op.name();
    s += " root " + std::to_string(root);
    if (async) s += " async";
    if (in_place) s += " in-place";
    if (gaps) s += " gaps";
    if (rounded) s += " rounded";
    return s;
  }
};

/// What one round runs; drawn by plan_round().
struct Plan {
  uint64_t seed = 0;  // the round's seed: every operation's spec comes from it
  int nranks = 2;
  std::string transport = "shm";  // shm, tcp or tcp2 (two data sockets per pair)
  std::string init = "tcp";       // rendezvous: tcp:// or file://
  std::string algorithm;          // OMNICCL_ALGO-style list, "" = tuned
  bool small_path = true;         // OMNICCL_SMALL_PATH
  int nops = 20;
  long long timeout_ms = 60000;
  int64_t max_bytes = 4 << 20;  // the largest buffer an operation uses
  Fault fault = Fault::kNone;
  int victim = 0;
  int fault_op = 0;        // the operation during which the fault happens
  int fault_ms = 0;        // stop: how long the victim stays stopped; drop: how long packets are dropped
  int fault_delay_us = 0;  // how far into fault_op the fault comes
};

/// The algorithms of each collective (docs/concepts/algorithms.md).
inline std::string draw_algorithms(Rng& r) {
  static const std::vector<std::pair<const char*, std::vector<const char*>>> kAlgos = {
      {"all_reduce", {"ring", "recursive_doubling", "tree", "direct", "pipelined"}},
      {"reduce_scatter", {"ring", "recursive_halving", "direct"}},
      {"all_gather", {"ring", "bruck", "direct", "recursive_doubling", "pipelined"}},
      {"broadcast", {"tree", "ring", "direct"}},
      {"reduce", {"tree", "direct"}},
      {"gather", {"tree", "direct"}},
      {"scatter", {"tree", "direct"}},
      {"all_to_all", {"pairwise", "direct"}},
      {"barrier", {"recursive_doubling", "dissemination", "direct"}},
  };
  std::string out;
  if (r.below(2) == 0) return out;  // half the rounds run tuned
  for (const auto& [coll, algos] : kAlgos) {
    if (r.below(2) == 0) continue;
    if (!out.empty()) out += ",";
    out += std::string(coll) + "=" + algos[r.below(algos.size())];
  }
  return out;
}

/// Draws round `round` of a run with seed `seed`. drop_ok: dropped
/// connections can be injected (the run is in a network namespace).
inline Plan plan_round(uint64_t seed, long round, int max_ranks, bool faults, bool drop_ok) {
  Plan p;
  p.seed = hash3(seed, 0x50a4, static_cast<uint64_t>(round));
  Rng r(p.seed);
  p.nranks = static_cast<int>(r.range(1, max_ranks));
  static const char* const kTransports[] = {"shm", "tcp", "tcp2"};
  p.transport = kTransports[r.below(3)];
  p.init = r.below(2) == 0 ? "tcp" : "file";
  p.algorithm = draw_algorithms(r);
  p.small_path = r.below(4) != 0;
  p.nops = static_cast<int>(r.range(8, 40));
  if (faults) p.fault = static_cast<Fault>(r.below(drop_ok ? 5 : 4));
  if (p.fault != Fault::kNone && p.fault != Fault::kSlow) p.nranks = std::max(p.nranks, 2);
  if (p.fault == Fault::kDrop) p.transport = "tcp";  // shared memory has no packets to drop
  p.victim = static_cast<int>(r.below(static_cast<uint64_t>(p.nranks)));
  p.fault_op = static_cast<int>(r.range(1, p.nops - 1));
  p.fault_delay_us = static_cast<int>(r.below(3000));
  if (p.fault == Fault::kStop || p.fault == Fault::kDrop) {
    // Short deadlines so the round ends soon after the fault; smaller
    // buffers so that no healthy operation comes near them on a busy host.
    p.timeout_ms = 2000;
    p.max_bytes = 256 << 10;
    p.fault_ms = static_cast<int>(r.range(3000, 5000));
  } else if (p.fault == Fault::kSlow) {
    p.fault_ms = static_cast<int>(r.range(20, 300));
  }
  return p;
}

/// An element count of a buffer split in `parts` blocks: 0, 1, small odd
/// numbers, numbers around the protocol thresholds (the small path's 1 and
/// 4 KiB, the tuning switches at 32, 64 and 256 KiB), and now and then up to
/// max_bytes in all.
inline int64_t draw_count(Rng& r, size_t elem, int parts, int64_t max_bytes) {
  static const int64_t kEdges[] = {1 << 10, 4 << 10, 8 << 10, 32 << 10, 64 << 10, 256 << 10, 1 << 20, 4 << 20};
  const int64_t es = static_cast<int64_t>(elem);
  int64_t c = 0;
  const uint64_t pick = r.below(16);
  if (pick == 0) {
    c = 0;
  } else if (pick == 1) {
    c = 1;
  } else if (pick < 6) {
    c = r.range(1, 31) * 2 + 1;
  } else if (pick < 12) {
    c = std::max<int64_t>(0, kEdges[r.below(6)] / es / parts + r.range(-3, 3));
  } else if (pick < 14) {
    c = r.range(2, (64 << 10) / es);
  } else {
    c = std::max<int64_t>(0, kEdges[r.range(6, 7)] / es / parts + r.range(-3, 3));
  }
  return std::min<int64_t>(c, max_bytes / es / parts);
}

inline DT draw_dtype(Rng& r) {
  static const DT kAll[] = {DT::kI8,   DT::kI16,    DT::kI32,    DT::kI64,  DT::kU8,  DT::kU16,
                            DT::kU32,  DT::kU64,    DT::kF16,    DT::kBF16, DT::kF32, DT::kF64,
                            DT::kBool, DT::kF8E4M3, DT::kF8E5M2, DT::kC64,  DT::kC128};
  return kAll[r.below(sizeof kAll / sizeof kAll[0])];
}

/// A reduce op defined for dt. PREMUL_SUM scalars keep the reference exact:
/// integral for integers, halves for the wide floating types, +-1 for fp8.
inline occl_ref::Op draw_op(Rng& r, DT dt) {
  static const occl_red_op_t kOps[] = {OCCL_SUM,  OCCL_PROD,       OCCL_MIN,    OCCL_MAX,   OCCL_AVG,
                                       OCCL_BAND, OCCL_BOR,        OCCL_BXOR,   OCCL_LAND,  OCCL_LOR,
                                       OCCL_LXOR, OCCL_PREMUL_SUM, OCCL_MAXLOC, OCCL_MINLOC};
  occl_ref::Op op;
  do {
    op.kind = kOps[r.below(std::size(kOps))];
  } while (!occl_ref::op_defined(op.kind, dt));
  op.handle = op.kind;
  if (op.kind != OCCL_PREMUL_SUM) return op;
  static const double kInt[] = {1, 2, -1, 3}, kWide[] = {0.5, -1.5, 1, 2}, kF8[] = {1, -1, 1, -1};
  const bool f8 = dt == DT::kF8E4M3 || dt == DT::kF8E5M2;
  const bool wide = occl_ref::dt_float(dt) || occl_ref::dt_complex(dt);
  const double* pick = !wide ? kInt : f8 ? kF8 : kWide;
  op.scalar = pick[r.below(4)];
  return op;
}

/// Operation `index` of a schedule with seed `seed` on a communicator of
/// `nranks` ranks; `allow_split` is false inside a split.
inline Spec draw_spec(uint64_t seed, uint64_t index, int nranks, int64_t max_bytes, bool allow_split) {
  Spec s;
  s.cs = hash3(seed, 0x0b, index);
  Rng r(s.cs);
  const int kinds = static_cast<int>(Kind::kCount) - (allow_split ? 0 : 1);
  s.kind = static_cast<Kind>(r.below(static_cast<uint64_t>(kinds)));
  s.dt = draw_dtype(r);
  s.op = draw_op(r, s.dt);
  // AVG and PREMUL_SUM have no prefix meaning: a scan draws SUM instead.
  if (is_scan(s.kind) && (s.op.kind == OCCL_AVG || s.op.kind == OCCL_PREMUL_SUM)) s.op = occl_ref::Op{};
  const bool blocks = !(s.kind == Kind::kAllReduce || s.kind == Kind::kReduce || s.kind == Kind::kBroadcast ||
                        s.kind == Kind::kSendRecv || is_scan(s.kind));
  s.count = draw_count(r, occl_ref::dt_size(s.dt), blocks ? nranks : 1, max_bytes);
  if (occl_ref::is_loc(s.op)) s.count -= s.count % 2;  // whole (value, index) pairs, per rank too
  s.root = static_cast<int>(r.below(static_cast<uint64_t>(nranks)));
  s.async = r.below(3) == 0;
  s.in_place = r.below(3) == 0;
  s.null_nonroot = r.below(2) == 0;
  s.gaps = r.below(2) == 0;
  // Random magnitudes are all true: the logical ops keep reference.h's
  // inputs; MAXLOC / MINLOC keep theirs (their pairs).
  s.rounded =
      occl_ref::dt_float(s.dt) && r.below(2) == 0 && !occl_ref::op_logical(s.op.kind) && !occl_ref::is_loc(s.op);
  return s;
}

}  // namespace soak
