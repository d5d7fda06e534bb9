#include "tuning/tuning.h"

#include <algorithm>
#include <array>
#include <vector>
#include <sstream>

#include "common/log.h"
#include "common/status.h"

namespace omniccl {

namespace {

struct Row {
  OpKind kind;
  uint64_t max_bytes;  ///< rows are tried in order; the first with bytes <= max_bytes wins
  Algo algo;
  const char* why;
  int max_ranks = 0;                 ///< > 0: the row applies only to communicators of at most this many ranks
  int min_ranks = 0;                 ///< > 0: ... and of at least this many
  bool oversubscribed_only = false;  ///< the row applies only where a host has more ranks than cores
};

constexpr uint64_t kAny = ~uint64_t(0);

// Default selection as data. `bytes` is the per-rank buffer size of the call.
constexpr Row kDefaultTable[] = {
    {OpKind::kAllReduce, 32 << 10, Algo::kRecursiveDoubling, "small: fewest rounds (log2 n)"},
    {OpKind::kAllReduce, 8 << 20, Algo::kRing, "large: bandwidth-optimal ring"},
    {OpKind::kAllReduce, kAny, Algo::kPipelined,
     "very large, up to 4 ranks: the ring's phases pipelined by chunks, each partial sum passed on from the caches", 4},
    {OpKind::kAllReduce, kAny, Algo::kRing, "very large: bandwidth-optimal ring"},
    {OpKind::kReduceScatter, 32 << 10, Algo::kRecursiveHalving, "small: log2 n rounds"},
    {OpKind::kReduceScatter, kAny, Algo::kRing, "large: bandwidth-optimal ring"},
    {OpKind::kAllGather, 32 << 10, Algo::kRecursiveDoubling, "small: pairwise exchanges, log2 n rounds, no scratch"},
    {OpKind::kAllGather, 64 << 20, Algo::kRing, "large: bandwidth-optimal ring"},
    {OpKind::kAllGather, kAny, Algo::kPipelined,
     "very large, 4 ranks: the ring's phases pipelined by chunks, each received chunk passed on from the caches", 4, 4},
    {OpKind::kAllGather, kAny, Algo::kRing, "very large: bandwidth-optimal ring"},
    {OpKind::kBroadcast, 256 << 10, Algo::kTree, "small: binomial tree, log2 n rounds"},
    {OpKind::kBroadcast, kAny, Algo::kRing, "large: pipelined chain"},
    {OpKind::kReduce, kAny, Algo::kTree, "binomial tree"},
    {OpKind::kGather, kAny, Algo::kDirect, "up to 4 ranks: each rank sends to the root once, no staging copies", 4},
    {OpKind::kGather, 64 << 10, Algo::kTree, "small: binomial tree"},
    {OpKind::kGather, kAny, Algo::kDirect, "large: each rank sends to the root once"},
    {OpKind::kScatter, kAny, Algo::kDirect, "up to 4 ranks: the root sends each part once, no staging copies", 4},
    {OpKind::kScatter, 64 << 10, Algo::kTree, "small: binomial tree"},
    {OpKind::kScatter, kAny, Algo::kDirect, "large: the root sends each part once"},
    {OpKind::kAllToAll, 4 << 10, Algo::kDirect, "small: all messages at once"},
    // With more ranks than cores, a pairwise round waits for both of its
    // peers to be scheduled; direct moves data with whichever are running
    // (4 ranks on 2 cores: 10-16% faster from 1 to 256 MiB).
    {OpKind::kAllToAll, kAny, Algo::kDirect,
     "more ranks than cores on a host: all messages at once, moving data with whichever peers are running", 0, 0, true},
    {OpKind::kAllToAll, kAny, Algo::kPairwise, "large: pairwise rounds avoid contention"},
    {OpKind::kBarrier, kAny, Algo::kRecursiveDoubling, "pairwise exchanges, log2 n rounds"},
    {OpKind::kAllGatherV, kAny, Algo::kDirect, "only algorithm"},
    {OpKind::kAllToAllV, kAny, Algo::kDirect, "only algorithm"},
    {OpKind::kGatherV, kAny, Algo::kDirect, "only algorithm"},
    {OpKind::kScatterV, kAny, Algo::kDirect, "only algorithm"},
    {OpKind::kInternal, kAny, Algo::kDirect, "only algorithm"},
    {OpKind::kScan, kAny, Algo::kRecursiveDoubling, "only algorithm"},
    {OpKind::kExScan, kAny, Algo::kRecursiveDoubling, "only algorithm"},
};

struct Named {
  const char* name;
  OpKind kind;
};
constexpr Named kOpNames[] = {
    {"all_reduce", OpKind::kAllReduce},
    {"allreduce", OpKind::kAllReduce},
    {"reduce_scatter", OpKind::kReduceScatter},
    {"reducescatter", OpKind::kReduceScatter},
    {"all_gather", OpKind::kAllGather},
    {"allgather", OpKind::kAllGather},
    {"broadcast", OpKind::kBroadcast},
    {"bcast", OpKind::kBroadcast},
    {"reduce", OpKind::kReduce},
    {"gather", OpKind::kGather},
    {"scatter", OpKind::kScatter},
    {"all_to_all", OpKind::kAllToAll},
    {"alltoall", OpKind::kAllToAll},
    {"barrier", OpKind::kBarrier},
    {"scan", OpKind::kScan},
    {"exscan", OpKind::kExScan},
};
constexpr OpKind kTunable[] = {OpKind::kAllReduce, OpKind::kReduceScatter, OpKind::kAllGather,
                               OpKind::kBroadcast, OpKind::kReduce,        OpKind::kGather,
                               OpKind::kScatter,   OpKind::kAllToAll,      OpKind::kBarrier};

Algo parse_algo_name(const std::string& name) {
  for (int i = 1; i < kNumAlgos; ++i) {
    if (name == algo_name(static_cast<Algo>(i))) return static_cast<Algo>(i);
  }
  return Algo::kNone;
}

std::string trim(const std::string& s) {
  size_t a = s.find_first_not_of(" \t");
  size_t b = s.find_last_not_of(" \t");
  return a == std::string::npos ? std::string() : s.substr(a, b - a + 1);
}

std::string known_algos() {
  std::string out;
  for (int i = 1; i < kNumAlgos; ++i) out += str_cat(i > 1 ? ", " : "", algo_name(static_cast<Algo>(i)));
  return out;
}

std::string offered(OpKind k) {
  std::string out;
  for (Algo a : algos_for(k)) out += str_cat(out.empty() ? "" : ", ", algo_name(a));
  return out;
}

}  // namespace

std::span<const Algo> algos_for(OpKind kind) {
  // Built once from the algorithm table (algorithm/registry.cc).
  static const auto offers = [] {
    std::array<std::vector<Algo>, kNumOpKinds> by_op;
    for (const AlgoEntry& row : algorithm_table()) by_op[static_cast<size_t>(row.op)].push_back(row.algo);
    return by_op;
  }();
  return offers[static_cast<size_t>(kind)];
}

bool AlgoOverride::empty() const {
  return std::all_of(per_op_.begin(), per_op_.end(), [](Algo a) { return a == Algo::kNone; });
}

AlgoOverride AlgoOverride::parse(const std::string& spec, const std::string& source) {
  AlgoOverride ov;
  std::stringstream ss(spec);
  std::string item;
  while (std::getline(ss, item, ',')) {
    item = trim(item);
    if (item.empty()) continue;
    auto eq = item.find('=');
    if (eq == std::string::npos) {
      Algo a = parse_algo_name(item);
      if (a == Algo::kNone) {
        fail(Status::kInvalidArgument, source, "='", spec, "': unknown algorithm '", item, "' (known: ", known_algos(),
             ")");
      }
      for (OpKind k : kTunable) {
        auto offers = algos_for(k);
        if (std::find(offers.begin(), offers.end(), a) != offers.end()) ov.per_op_[size_t(k)] = a;
      }
      continue;
    }
    std::string op = trim(item.substr(0, eq));
    std::string name = trim(item.substr(eq + 1));
    const Named* found = nullptr;
    for (const auto& n : kOpNames) {
      if (op == n.name) found = &n;
    }
    if (found == nullptr) {
      fail(Status::kInvalidArgument, source, "='", spec, "': unknown collective '", op,
           "' (use all_reduce, reduce_scatter, all_gather, broadcast, reduce, gather, scatter, all_to_all, barrier)");
    }
    Algo a = parse_algo_name(name);
    auto offers = algos_for(found->kind);
    if (a == Algo::kNone || std::find(offers.begin(), offers.end(), a) == offers.end()) {
      fail(Status::kInvalidArgument, source, "='", spec, "': ", op, " has no algorithm '", name,
           "' (it offers: ", offered(found->kind), ")");
    }
    ov.per_op_[size_t(found->kind)] = a;
  }
  return ov;
}

Algo choose_algo(OpKind kind, uint64_t bytes, int nranks, const AlgoOverride& ov, bool oversubscribed) {
  Algo forced = ov.for_op(kind);
  if (forced != Algo::kNone) {
    OCCL_LOG(kInfo, kTuning, op_kind_name(kind), " ", bytes, " B x ", nranks, " ranks -> ", algo_name(forced),
             " (override)");
    return forced;
  }
  for (const Row& r : kDefaultTable) {
    if (r.kind == kind && bytes <= r.max_bytes && (r.max_ranks == 0 || nranks <= r.max_ranks) &&
        nranks >= r.min_ranks && (!r.oversubscribed_only || oversubscribed)) {
      OCCL_LOG(kInfo, kTuning, op_kind_name(kind), " ", bytes, " B x ", nranks, " ranks -> ", algo_name(r.algo), " (",
               r.why, ")");
      return r.algo;
    }
  }
  return Algo::kDirect;
}

bool single_copy_for(OpKind kind, uint64_t bytes, bool oversubscribed) {
  constexpr uint64_t kLargest = uint64_t(64) << 20;
  switch (kind) {
    case OpKind::kGather:
    case OpKind::kScatter:
    case OpKind::kGatherV:
    case OpKind::kScatterV: return true;
    case OpKind::kBroadcast: return !oversubscribed && bytes <= kLargest;
    case OpKind::kAllGather:
    case OpKind::kAllToAll:
    case OpKind::kAllGatherV:
    case OpKind::kAllToAllV: return bytes <= kLargest;
    default: return false;
  }
}

}  // namespace omniccl
