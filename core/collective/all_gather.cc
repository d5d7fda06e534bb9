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
  const size_t bytes = send.bytes(), elem = dtype_size(send.dtype);
  const int rank = c.rank();
  const bool in_place = send.count > 0 && send.bytes_ptr() == recv.bytes_ptr() + bytes * size_t(rank);
  Staging st({{&send, Use::kIn}, {&recv, Use::kOut}}, call);
  // The body captures scalars, not views (see TensorView).
  char* const in = st.view(send).bytes_ptr();
  char* const out = st.view(recv).bytes_ptr();
  const bool staged = st.staged();
  // A slice gathers `len` bytes from `at` of every rank's block (SliceRows).
  return launch_sliced(c, st, OpKind::kAllGather, send.dtype, RedOp::kSum, -1, send.count, elem, n, call,
                       [=](Engine& e, const AlgoEntry& algo, uint64_t first, uint64_t items) {
                         const size_t at = first * elem, len = items * elem;
                         const SliceRows o(out, bytes, at, len, n, staged);
                         char* const dst = o.write(e, kSliceScratch);
                         // In place, this rank's part is already where the collective puts it.
                         const char* src = in_place && o.laid_out() ? dst + size_t(rank) * len : in + at;
                         algo.run(e, {.send = src, .recv = dst, .bytes = len});
                         o.spread(e, dst);
                       });
}

}  // namespace omniccl::coll
