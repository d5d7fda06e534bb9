#include "collective/common.h"

namespace omniccl::coll {

WorkPtr all_reduce(Communicator& c, const TensorView& send, const TensorView& recv, int op, const CallOptions& call) {
  check_same_dtype(send, "sendbuf", recv, "recvbuf");
  check_count(recv, "recvbuf", send.count, "all_reduce: recvbuf must have as many elements as sendbuf");
  check_overlap(send, "sendbuf", recv, "recvbuf", 0);
  const ReduceSpec spec = resolve_op(c, op, send.dtype);
  const int n = c.size();
  return launch(c, call_device({&send, &recv}), OpKind::kAllReduce, send.dtype, spec.op, -1, send.count, send.bytes(), call,
                [=](Engine& e, Algo a) {
                  char* buf = recv.bytes_ptr();
                  const char* src = premultiply(e, spec, send.bytes_ptr(), send.count, send.dtype);
                  // The ring reads src directly; the others work in place on buf.
                  if (a != Algo::kRing && src != buf && send.bytes() > 0) e.exec().copy(buf, src, send.bytes());
                  switch (a) {
                    case Algo::kRing: algo::all_reduce_ring(e, src, buf, send.count); break;
                    case Algo::kRecursiveDoubling: algo::all_reduce_recursive_doubling(e, buf, send.count); break;
                    case Algo::kTree: algo::all_reduce_tree(e, buf, send.count); break;
                    case Algo::kDirect: algo::all_reduce_direct(e, buf, send.count); break;
                    default: no_such_algo(OpKind::kAllReduce, a);
                  }
                  if (spec.op == RedOp::kAvg) e.exec().scale_divide(buf, send.count, send.dtype, n);
                });
}

}  // namespace omniccl::coll
