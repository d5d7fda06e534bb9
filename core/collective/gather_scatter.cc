// gather and scatter (rooted data movement).
#include "collective/common.h"

namespace omniccl::coll {

WorkPtr gather(Communicator& c, const TensorView& send, const OptTensor& recv, int root, bool async) {
  check_root(c, root);
  const int n = c.size();
  char* out = nullptr;
  if (c.rank() == root) {
    check_arg(recv.has_value(), "recvbuf is NULL on the root rank ", root, " of gather");
    check_same_dtype(send, "sendbuf", *recv, "recvbuf");
    check_count(*recv, "recvbuf", times_ranks(send, "sendbuf", n), "gather: the root's recvbuf holds size x sendbuf elements");
    check_overlap(*recv, "recvbuf", send, "sendbuf", static_cast<long long>(send.bytes()) * root);
    out = recv->bytes_ptr();
  }
  return launch(c, OpKind::kGather, send.dtype, RedOp::kSum, root, send.count, send.bytes(), async,
                [=](Engine& e, Algo a) {
                  switch (a) {
                    case Algo::kTree: algo::gather_tree(e, send.bytes_ptr(), out, send.bytes(), root); break;
                    case Algo::kDirect: algo::gather_direct(e, send.bytes_ptr(), out, send.bytes(), root); break;
                    default: no_such_algo(OpKind::kGather, a);
                  }
                });
}

WorkPtr scatter(Communicator& c, const OptTensor& send, const TensorView& recv, int root, bool async) {
  check_root(c, root);
  const int n = c.size();
  const char* in = nullptr;
  if (c.rank() == root) {
    check_arg(send.has_value(), "sendbuf is NULL on the root rank ", root, " of scatter");
    check_same_dtype(*send, "sendbuf", recv, "recvbuf");
    check_count(*send, "sendbuf", times_ranks(recv, "recvbuf", n), "scatter: the root's sendbuf holds size x recvbuf elements");
    check_overlap(*send, "sendbuf", recv, "recvbuf", static_cast<long long>(recv.bytes()) * root);
    in = send->bytes_ptr();
  }
  return launch(c, OpKind::kScatter, recv.dtype, RedOp::kSum, root, recv.count, recv.bytes(), async,
                [=](Engine& e, Algo a) {
                  switch (a) {
                    case Algo::kTree: algo::scatter_tree(e, in, recv.bytes_ptr(), recv.bytes(), root); break;
                    case Algo::kDirect: algo::scatter_direct(e, in, recv.bytes_ptr(), recv.bytes(), root); break;
                    default: no_such_algo(OpKind::kScatter, a);
                  }
                });
}

}  // namespace omniccl::coll
