#include "algorithm/registry.h"

#include <array>

#include "algorithm/algorithms.h"
#include "common/status.h"

namespace omniccl {

namespace {

/// all_reduce algorithms other than the ring work in place on recv.
void in_place(Engine& e, const AlgoArgs& a) {
  if (a.send != a.recv) e.exec().copy(a.recv, a.send, a.count * item_bytes(e.signature()));
}

constexpr AlgoEntry kTable[] = {
    {OpKind::kAllReduce, Algo::kRing,
     [](Engine& e, const AlgoArgs& a) { algo::all_reduce_ring(e, a.send, a.recv, a.count); },
     "large: reduce-scatter then all-gather around a ring, bandwidth-optimal"},
    {OpKind::kAllReduce, Algo::kPipelined,
     [](Engine& e, const AlgoArgs& a) { algo::all_reduce_pipelined(e, a.send, a.recv, a.count, algo::kPipelineChunk); },
     "very large: the ring's phases pipelined by chunks, each partial sum passed on from the caches"},
    {OpKind::kAllReduce, Algo::kRecursiveDoubling,
     [](Engine& e, const AlgoArgs& a) {
       in_place(e, a);
       algo::all_reduce_recursive_doubling(e, a.recv, a.count);
     },
     "small: log2(n) exchanges of the whole vector"},
    {OpKind::kAllReduce, Algo::kTree,
     [](Engine& e, const AlgoArgs& a) {
       in_place(e, a);
       algo::all_reduce_tree(e, a.recv, a.count);
     },
     "small, many ranks: binomial reduce then broadcast"},
    {OpKind::kAllReduce, Algo::kDirect,
     [](Engine& e, const AlgoArgs& a) {
       in_place(e, a);
       algo::all_reduce_direct(e, a.recv, a.count);
     },
     "tiny, few ranks: every rank sends to every rank once"},
    {OpKind::kReduceScatter, Algo::kRing,
     [](Engine& e, const AlgoArgs& a) { algo::reduce_scatter_ring(e, a.send, a.recv, a.count); },
     "large: bandwidth-optimal ring"},
    {OpKind::kReduceScatter, Algo::kRecursiveHalving,
     [](Engine& e, const AlgoArgs& a) { algo::reduce_scatter_recursive_halving(e, a.send, a.recv, a.count); },
     "small: log2(n) rounds halving the vector"},
    {OpKind::kReduceScatter, Algo::kDirect,
     [](Engine& e, const AlgoArgs& a) { algo::reduce_scatter_direct(e, a.send, a.recv, a.count); },
     "few ranks: each block straight to its owner"},
    {OpKind::kAllGather, Algo::kRing,
     [](Engine& e, const AlgoArgs& a) { algo::all_gather_ring(e, a.send, a.recv, a.bytes); },
     "large: bandwidth-optimal ring"},
    {OpKind::kAllGather, Algo::kPipelined,
     [](Engine& e, const AlgoArgs& a) { algo::all_gather_pipelined(e, a.send, a.recv, a.bytes, algo::kPipelineChunk); },
     "very large, 3+ ranks: the ring's phases pipelined by chunks, each received chunk passed on from the caches"},
    {OpKind::kAllGather, Algo::kRecursiveDoubling,
     [](Engine& e, const AlgoArgs& a) { algo::all_gather_recursive_doubling(e, a.send, a.recv, a.bytes); },
     "small: pairwise exchanges, log2(n) rounds, no scratch"},
    {OpKind::kAllGather, Algo::kBruck,
     [](Engine& e, const AlgoArgs& a) { algo::all_gather_bruck(e, a.send, a.recv, a.bytes); },
     "small: log2(n) rounds for any n"},
    {OpKind::kAllGather, Algo::kDirect,
     [](Engine& e, const AlgoArgs& a) { algo::all_gather_direct(e, a.send, a.recv, a.bytes); },
     "few ranks: every block to every rank at once"},
    {OpKind::kBroadcast, Algo::kTree,
     [](Engine& e, const AlgoArgs& a) { algo::broadcast_tree(e, a.recv, a.bytes, a.root); },
     "small: binomial tree, log2(n) rounds"},
    {OpKind::kBroadcast, Algo::kRing,
     [](Engine& e, const AlgoArgs& a) { algo::broadcast_ring(e, a.recv, a.bytes, a.root); },
     "large: pipelined chain, each rank forwards chunks as they arrive"},
    {OpKind::kBroadcast, Algo::kDirect,
     [](Engine& e, const AlgoArgs& a) { algo::broadcast_direct(e, a.recv, a.bytes, a.root); },
     "few ranks: the root sends to each rank"},
    {OpKind::kReduce, Algo::kTree,
     [](Engine& e, const AlgoArgs& a) { algo::reduce_tree(e, a.send, a.recv, a.count, a.root); },
     "any size: binomial tree, log2(n) rounds"},
    {OpKind::kReduce, Algo::kDirect,
     [](Engine& e, const AlgoArgs& a) { algo::reduce_direct(e, a.send, a.recv, a.count, a.root); },
     "few ranks: every rank sends to the root"},
    {OpKind::kGather, Algo::kTree,
     [](Engine& e, const AlgoArgs& a) { algo::gather_tree(e, a.send, a.recv, a.bytes, a.root); },
     "small: binomial tree"},
    {OpKind::kGather, Algo::kDirect,
     [](Engine& e, const AlgoArgs& a) { algo::gather_direct(e, a.send, a.recv, a.bytes, a.root); },
     "large: each rank sends to the root once"},
    {OpKind::kScatter, Algo::kTree,
     [](Engine& e, const AlgoArgs& a) { algo::scatter_tree(e, a.send, a.recv, a.bytes, a.root); },
     "small: binomial tree"},
    {OpKind::kScatter, Algo::kDirect,
     [](Engine& e, const AlgoArgs& a) { algo::scatter_direct(e, a.send, a.recv, a.bytes, a.root); },
     "large: the root sends each part once"},
    {OpKind::kAllToAll, Algo::kPairwise,
     [](Engine& e, const AlgoArgs& a) { algo::all_to_all_pairwise(e, a.send, a.recv, a.bytes); },
     "large: n-1 pairwise rounds avoid contention"},
    {OpKind::kAllToAll, Algo::kDirect,
     [](Engine& e, const AlgoArgs& a) { algo::all_to_all_direct(e, a.send, a.recv, a.bytes); },
     "small: all messages at once"},
    {OpKind::kBarrier, Algo::kRecursiveDoubling,
     [](Engine& e, const AlgoArgs&) { algo::barrier_recursive_doubling(e); },
     "pairwise exchanges, log2(n) rounds (ranks past a power of two check in and out)"},
    {OpKind::kBarrier, Algo::kDissemination, [](Engine& e, const AlgoArgs&) { algo::barrier_dissemination(e); },
     "log2(n) rounds for any n"},
    {OpKind::kBarrier, Algo::kDirect, [](Engine& e, const AlgoArgs&) { algo::barrier_direct(e); },
     "few ranks: everyone tells everyone"},
    {OpKind::kAllGatherV, Algo::kDirect,
     [](Engine& e, const AlgoArgs& a) { algo::all_gatherv_direct(e, a.send, a.recv, a.counts, a.displs); },
     "per-rank counts: every block to every rank"},
    {OpKind::kAllToAllV, Algo::kDirect,
     [](Engine& e, const AlgoArgs& a) {
       algo::all_to_allv_direct(e, a.send, a.counts, a.displs, a.recv, a.recv_counts, a.recv_displs);
     },
     "per-peer counts: all messages at once"},
    {OpKind::kGatherV, Algo::kDirect,
     [](Engine& e, const AlgoArgs& a) { algo::gatherv_direct(e, a.send, a.bytes, a.recv, a.counts, a.displs, a.root); },
     "per-rank counts: each rank sends to the root"},
    {OpKind::kScatterV, Algo::kDirect,
     [](Engine& e, const AlgoArgs& a) {
       algo::scatterv_direct(e, a.send, a.counts, a.displs, a.recv, a.bytes, a.root);
     },
     "per-rank counts: the root sends each part"},
    {OpKind::kScan, Algo::kRecursiveDoubling,
     [](Engine& e, const AlgoArgs& a) { algo::scan_recursive_doubling(e, a.send, a.recv, a.count); },
     "any size: log2(n) rounds, each rank passing its partial result to the rank 2^k above it"},
    {OpKind::kExScan, Algo::kRecursiveDoubling,
     [](Engine& e, const AlgoArgs& a) { algo::exscan_recursive_doubling(e, a.send, a.recv, a.count); },
     "any size: log2(n) rounds as scan, with a second partial result that leaves out the rank's own input"},
};

constexpr const char* kAlgoNames[kNumAlgos] = {"none",          "ring",     "recursive_doubling", "recursive_halving",
                                               "tree",          "direct",   "pairwise",           "bruck",
                                               "dissemination", "pipelined"};

}  // namespace

const char* algo_name(Algo a) {
  auto i = static_cast<size_t>(a);
  return i < std::size(kAlgoNames) ? kAlgoNames[i] : "?";
}

std::span<const AlgoEntry> algorithm_table() { return kTable; }

const AlgoEntry& find_algorithm(OpKind op, Algo algo) {
  // Looked up on every call: an index built once instead of a scan.
  static const auto index = [] {
    std::array<std::array<const AlgoEntry*, kNumAlgos>, kNumOpKinds> by{};
    for (const AlgoEntry& row : kTable) by[static_cast<size_t>(row.op)][static_cast<size_t>(row.algo)] = &row;
    return by;
  }();
  auto o = static_cast<size_t>(op), a = static_cast<size_t>(algo);
  if (o < index.size() && a < kNumAlgos && index[o][a] != nullptr) return *index[o][a];
  fail(Status::kInternal, op_kind_name(op), " has no algorithm ", algo_name(algo));
}

}  // namespace omniccl
