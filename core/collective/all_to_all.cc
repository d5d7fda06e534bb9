#include "collective/common.h"

namespace omniccl::coll {

WorkPtr all_to_all(Communicator& c, const TensorView& send, const TensorView& recv, const CallOptions& call) {
  const int n = c.size();
  check_same_dtype(send, "sendbuf", recv, "recvbuf");
  check_count(recv, "recvbuf", send.count, "all_to_all: recvbuf must have as many elements as sendbuf");
  check_arg(send.count % n == 0, "all_to_all: sendbuf has ", send.count, " elements, not a multiple of the ", n,
            " ranks");
  check_overlap(send, "sendbuf", recv, "recvbuf", 0);
  if (auto w = launch_device(c, {&send, &recv}, call, [&] {
        return device_call(OpKind::kAllToAll, send.dtype, {}, -1, send.count / n, send.bytes_ptr(), recv.bytes_ptr());
      })) {
    return *w;
  }
  const size_t part = send.bytes() / n;
  Staging st({{&send, Use::kIn}, {&recv, Use::kOut}}, call);
  // The body captures scalars, not views (see TensorView).
  const char* const in = st.view(send).bytes_ptr();
  char* const out = st.view(recv).bytes_ptr();
  const size_t bytes = send.bytes();
  return launch(c, st, OpKind::kAllToAll, send.dtype, RedOp::kSum, -1, send.count, bytes, call,
                [=](Engine& e, const AlgoEntry& algo) {
                  const char* src = in;
                  if (src == out && bytes > 0) {  // in place: keep a copy of the input
                    char* tmp = e.scratch(bytes, 3);
                    e.exec().copy(tmp, src, bytes);
                    src = tmp;
                  }
                  algo.run(e, {.send = src, .recv = out, .bytes = part});
                });
}

}  // namespace omniccl::coll
