#include "collective/common.h"

namespace omniccl::coll {

WorkPtr all_gather(Communicator& c, const TensorView& send, const TensorView& recv, bool async) {
  const int n = c.size();
  check_same_dtype(send, "sendbuf", recv, "recvbuf");
  check_count(recv, "recvbuf", times_ranks(send, "sendbuf", n), "all_gather: recvbuf holds size x sendbuf elements");
  check_overlap(recv, "recvbuf", send, "sendbuf", static_cast<long long>(send.bytes()) * c.rank());
  return launch(c, OpKind::kAllGather, send.dtype, RedOp::kSum, -1, send.count, send.bytes() * n, async,
                [=](Engine& e, Algo a) {
                  switch (a) {
                    case Algo::kRing: algo::all_gather_ring(e, send.bytes_ptr(), recv.bytes_ptr(), send.bytes()); break;
                    case Algo::kBruck: algo::all_gather_bruck(e, send.bytes_ptr(), recv.bytes_ptr(), send.bytes()); break;
                    case Algo::kDirect: algo::all_gather_direct(e, send.bytes_ptr(), recv.bytes_ptr(), send.bytes()); break;
                    default: no_such_algo(OpKind::kAllGather, a);
                  }
                });
}

}  // namespace omniccl::coll
