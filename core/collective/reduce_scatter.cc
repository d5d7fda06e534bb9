#include "collective/common.h"

namespace omniccl::coll {

WorkPtr reduce_scatter(Communicator& c, const TensorView& send, const TensorView& recv, int op,
                       const CallOptions& call) {
  const int n = c.size();
  check_same_dtype(send, "sendbuf", recv, "recvbuf");
  check_count(send, "sendbuf", times_ranks(recv, "recvbuf", n),
              "reduce_scatter: sendbuf holds size x recvbuf elements");
  check_overlap(send, "sendbuf", recv, "recvbuf", static_cast<long long>(recv.bytes()) * c.rank());
  const ReduceSpec spec = resolve_op(c, op, send.dtype);
  Staging st({{&send, Use::kIn}, {&recv, Use::kOut}}, call);
  const TensorView sv = st.view(send);
  const TensorView rv = st.view(recv);
  return launch(c, st, OpKind::kReduceScatter, send.dtype, spec.op, -1, recv.count, send.bytes(), call,
                [=](Engine& e, const AlgoEntry& algo) {
                  const char* src = premultiply(e, spec, sv.bytes_ptr(), send.count, send.dtype);
                  char* out = rv.bytes_ptr();
                  algo.run(e, {.send = src, .recv = out, .count = recv.count});
                  if (spec.op == RedOp::kAvg) e.exec().scale_divide(out, recv.count, recv.dtype, n);
                });
}

}  // namespace omniccl::coll
