#include "collective/common.h"

namespace omniccl::coll {

WorkPtr all_gather(Communicator& c, const TensorView& send, const TensorView& recv, const CallOptions& call) {
  const int n = c.size();
  check_same_dtype(send, "sendbuf", recv, "recvbuf");
  check_count(recv, "recvbuf", times_ranks(send, "sendbuf", n), "all_gather: recvbuf holds size x sendbuf elements");
  check_overlap(recv, "recvbuf", send, "sendbuf", static_cast<long long>(send.bytes()) * c.rank());
  return launch(c, call_device({&send, &recv}), OpKind::kAllGather, send.dtype, RedOp::kSum, -1, send.count,
                send.bytes() * n, call, [=](Engine& e, const AlgoEntry& algo) {
                  algo.run(e, {.send = send.bytes_ptr(), .recv = recv.bytes_ptr(), .bytes = send.bytes()});
                });
}

}  // namespace omniccl::coll
