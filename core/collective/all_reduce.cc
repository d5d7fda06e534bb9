#include "collective/common.h"

namespace omniccl::coll {

WorkPtr all_reduce(Communicator& c, const TensorView& send, const TensorView& recv, int op, const CallOptions& call) {
  check_same_dtype(send, "sendbuf", recv, "recvbuf");
  check_count(recv, "recvbuf", send.count, "all_reduce: recvbuf must have as many elements as sendbuf");
  check_overlap(send, "sendbuf", recv, "recvbuf", 0);
  const ReduceSpec spec = resolve_op(c, op, send.dtype);
  const int n = c.size();
  Staging st({{&send, Use::kIn}, {&recv, Use::kOut}}, call);
  const TensorView sv = st.view(send);
  const TensorView rv = st.view(recv);
  return launch(c, st, OpKind::kAllReduce, send.dtype, spec.op, -1, send.count, send.bytes(), call,
                [=](Engine& e, const AlgoEntry& algo) {
                  char* buf = rv.bytes_ptr();
                  const char* src = premultiply(e, spec, sv.bytes_ptr(), send.count, send.dtype);
                  algo.run(e, {.send = src, .recv = buf, .count = send.count});
                  if (spec.op == RedOp::kAvg) e.exec().scale_divide(buf, send.count, send.dtype, n);
                });
}

}  // namespace omniccl::coll
