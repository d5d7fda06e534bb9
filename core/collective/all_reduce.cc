#include "collective/common.h"

namespace omniccl::coll {

WorkPtr all_reduce(Communicator& c, const TensorView& send, const TensorView& recv, int op, const CallOptions& call) {
  check_same_dtype(send, "sendbuf", recv, "recvbuf");
  check_count(recv, "recvbuf", send.count, "all_reduce: recvbuf must have as many elements as sendbuf");
  check_overlap(send, "sendbuf", recv, "recvbuf", 0);
  const ReduceSpec spec = resolve_op(c, op, send.dtype);
  check_whole_items(send, "sendbuf", spec.op);
  const int n = c.size();
  if (auto w = launch_device(c, {&send, &recv}, call, [&] {
        return device_call(OpKind::kAllReduce, send.dtype, spec, -1, send.count, send.bytes_ptr(), recv.bytes_ptr());
      })) {
    return *w;
  }
  Staging st({{&send, Use::kIn}, {&recv, Use::kOut}}, call);
  // The body captures scalars, not views (see TensorView).
  const char* const in = st.view(send).bytes_ptr();
  char* const buf = st.view(recv).bytes_ptr();
  const DType dtype = send.dtype;
  const size_t per_item = kernels::item_elems(spec.op);
  const size_t item_bytes = per_item * dtype_size(dtype);
  return launch_sliced(c, st, OpKind::kAllReduce, dtype, spec.op, -1, send.count / per_item, item_bytes, 1, call,
                       [=](Engine& e, const AlgoEntry& algo, uint64_t first, uint64_t items) {
                         const size_t at = first * item_bytes;
                         const size_t elems = items * per_item;
                         const char* src = premultiply(e, spec, in + at, elems, dtype);
                         algo.run(e, {.send = src, .recv = buf + at, .count = items});
                         if (spec.op == RedOp::kAvg) e.exec().scale_divide(buf + at, elems, dtype, n);
                         if (n == 1 && is_logical(spec.op)) truth_values(e, buf + at, elems, dtype);
                       });
}

}  // namespace omniccl::coll
