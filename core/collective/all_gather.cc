#include "collective/common.h"

namespace omniccl::coll {

WorkPtr all_gather(Communicator& c, const TensorView& send, const TensorView& recv, const CallOptions& call) {
  const int n = c.size();
  check_same_dtype(send, "sendbuf", recv, "recvbuf");
  check_count(recv, "recvbuf", times_ranks(send, "sendbuf", n), "all_gather: recvbuf holds size x sendbuf elements");
  check_overlap(recv, "recvbuf", send, "sendbuf", static_cast<long long>(send.bytes()) * c.rank());
  if (auto w = launch_device(c, {&send, &recv}, call, [&] {
        return device_call(OpKind::kAllGather, send.dtype, {}, -1, send.count, send.bytes_ptr(), recv.bytes_ptr());
      })) {
    return *w;
  }
  Staging st({{&send, Use::kIn}, {&recv, Use::kOut}}, call);
  // The body captures scalars, not views (see TensorView).
  const char* const in = st.view(send).bytes_ptr();
  char* const out = st.view(recv).bytes_ptr();
  const size_t bytes = send.bytes();
  return launch(c, st, OpKind::kAllGather, send.dtype, RedOp::kSum, -1, send.count, bytes * n, call,
                [=](Engine& e, const AlgoEntry& algo) { algo.run(e, {.send = in, .recv = out, .bytes = bytes}); });
}

}  // namespace omniccl::coll
