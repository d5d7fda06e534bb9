// The vocabulary of operations, shared by the engine, the algorithms and
// tuning (which needs no engine to speak of them): the kinds of operation
// and the signature every rank of one must agree on.
#pragma once

#include <cstddef>
#include <cstdint>

#include "tensor/tensor.h"

namespace omniccl {

enum class OpKind : uint8_t {
  kSendRecv = 1,
  kBroadcast,
  kScatter,
  kGather,
  kReduce,
  kAllReduce,
  kAllGather,
  kReduceScatter,
  kAllToAll,
  kBarrier,
  kAllGatherV,
  kAllToAllV,
  kGatherV,
  kScatterV,
  kInternal,  ///< library-internal exchanges (split)
  kScan,      ///< inclusive prefix reduction
  kExScan,    ///< exclusive prefix reduction
};
/// One past the largest OpKind value: the size of tables indexed by kind.
inline constexpr size_t kNumOpKinds = size_t(OpKind::kExScan) + 1;
const char* op_kind_name(OpKind k);
/// Broadcast, gather, scatter and their v-variants: each payload goes one
/// way, from a rank that has nothing else to move meanwhile to one that waits.
constexpr bool is_one_way(OpKind k) {
  return k == OpKind::kBroadcast || k == OpKind::kGather || k == OpKind::kScatter || k == OpKind::kGatherV ||
         k == OpKind::kScatterV;
}

/// What every rank must agree on for one operation.
struct OpSignature {
  OpKind kind = OpKind::kBarrier;
  DType dtype = DType::kUInt8;
  RedOp redop = RedOp::kSum;
  int32_t root = -1;
  uint64_t count = 0;  ///< per-op meaning, equal on all ranks (0 for v-ops)
  uint64_t seq = 0;    ///< collective sequence number, or per-pair p2p number
  uint8_t algo = 0;    ///< algorithm id (all ranks must pick the same); point-to-point: kP2P* flags
  const char* algo_name = "";
};

/// Bytes of one item the algorithms move and reduce: an element, or a
/// (value, index) pair for MAXLOC / MINLOC. Counts of reducing algorithms
/// are in items.
inline size_t item_bytes(const OpSignature& sig) { return kernels::item_size(sig.dtype, sig.redop); }

/// Flags of a point-to-point message, carried where a collective's header
/// has its algorithm id (OpSignature::algo). An ordinary send sets none.
constexpr uint8_t kP2PSync = 1;  ///< a synchronous send: the receiver acks the match
constexpr uint8_t kP2PAck = 2;   ///< an ack (no payload); count: the acknowledged message's number

}  // namespace omniccl
