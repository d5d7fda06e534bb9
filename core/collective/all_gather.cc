#include "collective/common.h"

namespace omniccl::coll {

WorkPtr all_gather(Communicator& c, const TensorView& send, const TensorView& recv, const CallOptions& call) {
  const int n = c.size();
  check_same_dtype(send, "sendbuf", recv, "recvbuf");
  check_count(recv, "recvbuf", times_ranks(send, "sendbuf", n), "all_gather: recvbuf holds size x sendbuf elements");
  check_overlap(recv, "recvbuf", send, "sendbuf", static_cast<long long>(send.bytes()) * c.rank());
  Staging st({{&send, Use::kIn}, {&recv, Use::kOut}}, call);
  const TensorView sv = st.view(send);
  const TensorView rv = st.view(recv);
  return launch(c, st, OpKind::kAllGather, send.dtype, RedOp::kSum, -1, send.count, send.bytes() * n, call,
                [=](Engine& e, const AlgoEntry& algo) {
                  algo.run(e, {.send = sv.bytes_ptr(), .recv = rv.bytes_ptr(), .bytes = send.bytes()});
                });
}

}  // namespace omniccl::coll
