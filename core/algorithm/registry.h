// The algorithm table: one row per (collective, algorithm) pair, with the
// function that runs it and what it is best at (UCC keeps its algorithm
// choices the same way). Adding an algorithm is its function plus one row
// here (and an Algo value with its name if the kind of algorithm is new);
// tuning/ reads the table for what each collective offers, collective/ runs
// the row it chose, and nothing else needs editing.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>

#include "algorithm/op.h"

namespace omniccl {

class Engine;

/// Kinds of algorithm. The value travels in every message header (all ranks
/// must pick the same), so values are never reused.
enum class Algo : uint8_t {
  kNone = 0,
  kRing = 1,               ///< bandwidth-optimal; pipelined neighbour exchange
  kRecursiveDoubling = 2,  ///< log2(n) exchanges of the whole vector; latency
  kRecursiveHalving = 3,   ///< reduce_scatter by halving the vector each round
  kTree = 4,               ///< binomial tree; latency, rooted collectives
  kDirect = 5,             ///< every rank talks to every rank at once
  kPairwise = 6,           ///< n-1 rounds of pairwise exchange (all_to_all)
  kBruck = 7,              ///< log2(n) rounds for small all_gather, any n
  kDissemination = 8,      ///< log2(n) rounds barrier, any n
  kPipelined = 9,          ///< all_reduce, all_gather: the ring's phases pipelined by chunks
};
inline constexpr int kNumAlgos = 10;

/// "ring", "recursive_doubling", ... ("none" for kNone).
const char* algo_name(Algo a);

/// One call's buffers and sizes as the collective prepared them; each row's
/// function reads the fields its collective uses (the others are zero).
struct AlgoArgs {
  const char* send = nullptr;  ///< input (premultiplied for PREMUL_SUM)
  char* recv = nullptr;        ///< output; may equal send (in place)
  size_t count = 0;            ///< elements per rank (reducing collectives)
  size_t bytes = 0;            ///< bytes per rank (data movement)
  int root = -1;
  // v-variants, in bytes: counts/displs of the one side that has them, or
  // both sides for all_to_allv.
  const uint64_t* counts = nullptr;
  const uint64_t* displs = nullptr;
  const uint64_t* recv_counts = nullptr;
  const uint64_t* recv_displs = nullptr;
};

using AlgoFn = void (*)(Engine& e, const AlgoArgs& args);

struct AlgoEntry {
  OpKind op;
  Algo algo;
  AlgoFn run;
  const char* best_at;  ///< what it is good for (documentation for readers and tests)
};

/// Every row, grouped by collective.
std::span<const AlgoEntry> algorithm_table();
/// The row for (op, algo); throws kInternal (a breadcrumb: overrides are
/// validated against the table) when there is none.
const AlgoEntry& find_algorithm(OpKind op, Algo algo);

}  // namespace omniccl
