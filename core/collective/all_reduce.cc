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
  const size_t count = send.count;
  const DType dtype = send.dtype;
  const size_t items = count / kernels::item_elems(spec.op);
  return launch(c, st, OpKind::kAllReduce, dtype, spec.op, -1, items, send.bytes(), call,
                [=](Engine& e, const AlgoEntry& algo) {
                  const char* src = premultiply(e, spec, in, count, dtype);
                  algo.run(e, {.send = src, .recv = buf, .count = items});
                  if (spec.op == RedOp::kAvg) e.exec().scale_divide(buf, count, dtype, n);
                  if (n == 1 && is_logical(spec.op)) truth_values(e, buf, count, dtype);
                });
}

}  // namespace omniccl::coll
