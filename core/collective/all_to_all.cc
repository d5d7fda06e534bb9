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
  const size_t elem = dtype_size(send.dtype), part = send.bytes() / size_t(n);
  Staging st({{&send, Use::kIn}, {&recv, Use::kOut}}, call);
  // The body captures scalars, not views (see TensorView).
  char* const in = st.view(send).bytes_ptr();
  char* const out = st.view(recv).bytes_ptr();
  const bool staged = st.staged();
  // A slice exchanges `len` bytes from `at` of every block (SliceRows; the
  // header's count is a block's, as NCCL's).
  return launch_sliced(c, st, OpKind::kAllToAll, send.dtype, RedOp::kSum, -1, send.count / size_t(n), elem, n, call,
                       [=](Engine& e, const AlgoEntry& algo, uint64_t first, uint64_t items) {
                         const size_t at = first * elem, len = items * elem, all = len * size_t(n);
                         const SliceRows i(in, part, at, len, n, staged), o(out, part, at, len, n, staged);
                         const char* src = i.read(e, kSliceScratch);
                         char* const dst = o.write(e, kSliceScratch + 1);
                         if (src == dst && all > 0) {  // in place: keep a copy of the input
                           char* const tmp = e.scratch(all, 3);
                           e.exec().copy(tmp, src, all);
                           src = tmp;
                         }
                         algo.run(e, {.send = src, .recv = dst, .bytes = len});
                         o.spread(e, dst);
                       });
}

}  // namespace omniccl::coll
