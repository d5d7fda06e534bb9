#include "collective/common.h"

namespace omniccl::coll {

WorkPtr reduce_scatter(Communicator& c, const TensorView& send, const TensorView& recv, int op, bool async) {
  const int n = c.size();
  check_same_dtype(send, "sendbuf", recv, "recvbuf");
  check_count(send, "sendbuf", times_ranks(recv, "recvbuf", n), "reduce_scatter: sendbuf holds size x recvbuf elements");
  check_overlap(send, "sendbuf", recv, "recvbuf", static_cast<long long>(recv.bytes()) * c.rank());
  const ReduceSpec spec = resolve_op(c, op, send.dtype);
  return launch(c, OpKind::kReduceScatter, send.dtype, spec.op, -1, recv.count, send.bytes(), async,
                [=](Engine& e, Algo a) {
                  const char* src = premultiply(e, spec, send.bytes_ptr(), send.count, send.dtype);
                  char* out = recv.bytes_ptr();
                  switch (a) {
                    case Algo::kRing: algo::reduce_scatter_ring(e, src, out, recv.count); break;
                    case Algo::kRecursiveHalving: algo::reduce_scatter_recursive_halving(e, src, out, recv.count); break;
                    case Algo::kDirect: algo::reduce_scatter_direct(e, src, out, recv.count); break;
                    default: no_such_algo(OpKind::kReduceScatter, a);
                  }
                  if (spec.op == RedOp::kAvg) kernels::cpu::scale_divide(out, recv.count, recv.dtype, n);
                });
}

}  // namespace omniccl::coll
