// Tuning: (collective, bytes, ranks) -> algorithm, overridable and explained.
//
// The default choice is data (kDefaultTable in tuning.cc). OMNICCL_ALGO or
// occl_config_t.algorithm override it; an override is validated when the
// communicator is created, so an unusable name fails early and clearly.
// OMNICCL_DEBUG=INFO OMNICCL_DEBUG_SUBSYS=TUNING logs every choice and why.
#pragma once

#include <array>
#include <cstdint>
#include <span>
#include <string>

#include "algorithm/op.h"
#include "algorithm/registry.h"

namespace omniccl {

/// Algorithms a collective offers, in the table's order (empty for send/recv).
std::span<const Algo> algos_for(OpKind kind);

/// A parsed OMNICCL_ALGO value.
class AlgoOverride {
 public:
  AlgoOverride() { per_op_.fill(Algo::kNone); }
  /// Parses "ring" or "all_reduce=ring,broadcast=tree". Throws
  /// Error(kInvalidArgument) naming the unknown or unusable part; `source`
  /// says where the text came from (for the message).
  static AlgoOverride parse(const std::string& spec, const std::string& source);
  Algo for_op(OpKind kind) const { return per_op_[static_cast<size_t>(kind)]; }
  bool empty() const;

 private:
  std::array<Algo, kNumOpKinds> per_op_;
};

/// Picks the algorithm for one call. Deterministic, so every rank agrees:
/// `oversubscribed` must be the same on every rank (some host of the job
/// runs more of its ranks than they have cores between them:
/// transport::Mesh::any_host_oversubscribed).
Algo choose_algo(OpKind kind, uint64_t bytes, int nranks, const AlgoOverride& ov, bool oversubscribed = false);

/// Whether operation `kind` of `bytes` (as for choose_algo) should move large
/// payloads by reference (single copy) on links that can. Reductions do not:
/// they already reduce straight out of the shared ring, and a by-reference
/// read costs a system call and page pinning per chunk. Data movement does,
/// up to 64 MiB; above that two copies pipelined over two cores measured
/// faster on the development machine (gather and scatter excepted).
/// `oversubscribed`: this host runs more ranks of the communicator than they
/// have cores between them (Engine::oversubscribed). Broadcast then keeps two copies: its pipelined chain
/// forwards every chunk, and a forward by reference completes only once the
/// next rank has been scheduled and has read it (4 ranks on 2 cores measured
/// 2x slower at 16 MiB with single copy).
bool single_copy_for(OpKind kind, uint64_t bytes, bool oversubscribed);

}  // namespace omniccl
