// scan / exscan: prefix reductions over the ranks in rank order.
#include "collective/common.h"

namespace omniccl::coll {

namespace {

/// The op for a prefix reduction: AVG and PREMUL_SUM scale a whole
/// reduction, so a prefix of one has no meaning.
ReduceSpec resolve_scan_op(const Communicator& c, int op, DType t, const char* what) {
  const ReduceSpec spec = resolve_op(c, op, t);
  if (spec.op == RedOp::kAvg || spec.op == RedOp::kPreMulSum) [[unlikely]] {
    fail(Status::kInvalidArgument, what, ": reduce op ", redop_name(spec.op),
         " has no prefix meaning (use SUM, PROD, MIN, MAX, a bitwise or a logical op)");
  }
  return spec;
}

WorkPtr prefix(Communicator& c, const TensorView& send, const TensorView& recv, int op, const CallOptions& call,
               OpKind kind) {
  const bool exclusive = kind == OpKind::kExScan;
  const char* what = exclusive ? "exscan" : "scan";
  check_same_dtype(send, "sendbuf", recv, "recvbuf");
  check_count(recv, "recvbuf", send.count,
              exclusive ? "exscan: recvbuf must have as many elements as sendbuf"
                        : "scan: recvbuf must have as many elements as sendbuf");
  check_overlap(send, "sendbuf", recv, "recvbuf", 0);
  const ReduceSpec spec = resolve_scan_op(c, op, send.dtype, what);
  check_whole_items(send, "sendbuf", spec.op);
  // The rank whose result is one input, not combined with another: its
  // truth values are made 0/1 by hand (rank 1's prefix for exscan).
  const int lone = exclusive ? 1 : 0;
  const bool settle = is_logical(spec.op) && c.rank() == lone;
  // CUDA tensors are staged through host copies (there is no device kernel
  // for prefix reductions); exscan leaves rank 0's recvbuf as it was.
  Staging st({{&send, Use::kIn}, {&recv, exclusive && c.rank() == 0 ? Use::kInOut : Use::kOut}}, call);
  // The body captures scalars, not views (see TensorView).
  const char* const in = st.view(send).bytes_ptr();
  char* const out = st.view(recv).bytes_ptr();
  const DType dtype = send.dtype;
  // The algorithms count items: elements, or (value, index) pairs for
  // MAXLOC / MINLOC. A position's prefix depends on that position only, so
  // a large call runs in slices.
  const size_t per_item = kernels::item_elems(spec.op), item_bytes = per_item * dtype_size(dtype);
  const size_t items = send.count / per_item;
  return launch_sliced(c, st, kind, dtype, spec.op, -1, items, item_bytes, 1, call,
                       [=](Engine& e, const AlgoEntry& algo, uint64_t first, uint64_t n) {
                         char* const at = out + first * item_bytes;
                         algo.run(e, {.send = in + first * item_bytes, .recv = at, .count = n});
                         if (settle) truth_values(e, at, n * per_item, dtype);
                       });
}

}  // namespace

WorkPtr scan(Communicator& c, const TensorView& send, const TensorView& recv, int op, const CallOptions& call) {
  return prefix(c, send, recv, op, call, OpKind::kScan);
}

WorkPtr exscan(Communicator& c, const TensorView& send, const TensorView& recv, int op, const CallOptions& call) {
  return prefix(c, send, recv, op, call, OpKind::kExScan);
}

}  // namespace omniccl::coll
