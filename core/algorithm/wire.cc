#include "algorithm/wire.h"

#include <sstream>

#include "common/status.h"
#include "tensor/tensor.h"

namespace omniccl {

const char* op_kind_name(OpKind k) {
  switch (k) {
    case OpKind::kSendRecv: return "send/recv";
    case OpKind::kBroadcast: return "broadcast";
    case OpKind::kScatter: return "scatter";
    case OpKind::kGather: return "gather";
    case OpKind::kReduce: return "reduce";
    case OpKind::kAllReduce: return "all_reduce";
    case OpKind::kAllGather: return "all_gather";
    case OpKind::kReduceScatter: return "reduce_scatter";
    case OpKind::kAllToAll: return "all_to_all";
    case OpKind::kBarrier: return "barrier";
    case OpKind::kAllGatherV: return "all_gatherv";
    case OpKind::kAllToAllV: return "all_to_allv";
    case OpKind::kGatherV: return "gatherv";
    case OpKind::kScatterV: return "scatterv";
    case OpKind::kInternal: return "internal exchange";
    case OpKind::kScan: return "scan";
    case OpKind::kExScan: return "exscan";
  }
  if (k == kWithdrawMark) return "withdrawal mark";
  return "?";
}

SigFields fields_of(const OpSignature& s) {
  return {uint8_t(s.kind), uint8_t(s.dtype), uint8_t(s.redop), s.algo, s.root, s.seq, s.count};
}

std::string encode_signature(const SigFields& f) {
  return str_cat(int(f.kind), ",", int(f.dtype), ",", int(f.redop), ",", int(f.algo), ",", f.root, ",", f.seq, ",",
                 f.count);
}

bool decode_signature(const std::string& text, SigFields& f) {
  std::istringstream in(text);
  char c;
  int kind, dtype, redop, algo;
  if (!(in >> kind >> c >> dtype >> c >> redop >> c >> algo >> c >> f.root >> c >> f.seq >> c >> f.count)) return false;
  f.kind = uint8_t(kind);
  f.dtype = uint8_t(dtype);
  f.redop = uint8_t(redop);
  f.algo = uint8_t(algo);
  return true;
}

std::string diff_fields(const SigFields& mine, const SigFields& theirs, int me, int peer, bool p2p) {
  std::string diff;
  auto add = [&](const std::string& field, const std::string& a, const std::string& b) {
    diff += str_cat(diff.empty() ? "" : "; ", field, " ", a, " on rank ", me, " vs ", b, " on rank ", peer);
  };
  auto dname = [](uint8_t d) { return d < kernels::kNumDTypes ? dtype_name(static_cast<DType>(d)) : "?"; };
  auto oname = [](uint8_t o) { return o < kernels::kNumRedOps ? redop_name(static_cast<RedOp>(o)) : "?"; };
  if (mine.kind != theirs.kind) {
    add("operation", op_kind_name(static_cast<OpKind>(mine.kind)), op_kind_name(static_cast<OpKind>(theirs.kind)));
  }
  if (mine.seq != theirs.seq) {
    add(p2p ? "message number" : "operation number", str_cat("#", mine.seq), str_cat("#", theirs.seq));
  }
  if (mine.dtype != theirs.dtype) add("dtype", dname(mine.dtype), dname(theirs.dtype));
  if (mine.count != theirs.count) add("count", std::to_string(mine.count), std::to_string(theirs.count));
  if (mine.root != theirs.root) add("root", std::to_string(mine.root), std::to_string(theirs.root));
  if (mine.redop != theirs.redop) add("reduce op", oname(mine.redop), oname(theirs.redop));
  if (diff.empty() && mine.algo != theirs.algo) {
    add("algorithm id", std::to_string(mine.algo), std::to_string(theirs.algo));
    diff += " (is OMNICCL_ALGO set differently on different ranks?)";
  }
  return diff;
}

std::string header_diff(const WireHeader& h, const OpSignature& mine, uint32_t step, uint64_t bytes, int me, int peer) {
  SigFields theirs{h.kind, h.dtype, h.redop, h.algo, h.root, h.seq, h.count};
  std::string diff = diff_fields(fields_of(mine), theirs, me, peer, mine.kind == OpKind::kSendRecv);
  if (diff.empty() && h.bytes != bytes) {
    diff =
        str_cat("message size ", bytes, " bytes expected on rank ", me, " vs ", h.bytes, " bytes sent by rank ", peer);
  }
  if (diff.empty() && h.step != step) {
    diff = str_cat("algorithm step ", step, " on rank ", me, " vs ", h.step, " on rank ", peer);
  }
  if (diff.empty()) diff = str_cat("message header from rank ", peer, " differs from the expected one");
  return diff;
}

}  // namespace omniccl
