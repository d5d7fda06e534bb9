// gather and scatter (rooted data movement).
#include "collective/common.h"

namespace omniccl::coll {

WorkPtr gather(Communicator& c, const TensorView& send, const OptTensor& recv, int root, const CallOptions& call) {
  check_root(c, root);
  const int n = c.size();
  char* out = nullptr;
  if (c.rank() == root) {
    check_arg(recv.has_value(), "recvbuf is NULL on the root rank ", root, " of gather");
    check_same_dtype(send, "sendbuf", *recv, "recvbuf");
    check_count(*recv, "recvbuf", times_ranks(send, "sendbuf", n),
                "gather: the root's recvbuf holds size x sendbuf elements");
    check_overlap(*recv, "recvbuf", send, "sendbuf", static_cast<long long>(send.bytes()) * root);
  }
  const bool is_root = c.rank() == root;
  if (auto w = launch_device(c, {&send, is_root ? &*recv : nullptr}, call, [&] {
        return device_call(OpKind::kGather, send.dtype, {}, root, send.count, send.bytes_ptr(),
                           is_root ? recv->bytes_ptr() : nullptr);
      })) {
    return *w;
  }
  // A non-root's recvbuf is not used: checked for its device, not copied.
  Staging st({{&send, Use::kIn}, {opt(recv), out_use(c, root)}}, call);
  const bool in_place = is_root && send.count > 0 && send.bytes_ptr() == recv->bytes_ptr() + send.bytes() * root;
  // The body captures scalars, not views (see TensorView).
  const char* const in = st.view(send).bytes_ptr();
  if (is_root) out = st.view(*recv).bytes_ptr();
  const size_t bytes = send.bytes(), elem = dtype_size(send.dtype);
  const bool staged = st.staged();
  // A slice gathers `len` bytes from `at` of every rank's block into the
  // root's (SliceRows); every rank counts the root's blocks to slice alike.
  return launch_sliced(c, st, OpKind::kGather, send.dtype, RedOp::kSum, root, send.count, elem, n, call,
                       [=](Engine& e, const AlgoEntry& algo, uint64_t first, uint64_t items) {
                         const size_t at = first * elem, len = items * elem;
                         if (out == nullptr) {
                           algo.run(e, {.send = in + at, .bytes = len, .root = root});
                           return;
                         }
                         const SliceRows o(out, bytes, at, len, n, staged);
                         char* const dst = o.write(e, kSliceScratch);
                         // In place, the root's part is already where the gather puts it.
                         const char* src = in_place && o.laid_out() ? dst + size_t(root) * len : in + at;
                         algo.run(e, {.send = src, .recv = dst, .bytes = len, .root = root});
                         o.spread(e, dst);
                       });
}

WorkPtr scatter(Communicator& c, const OptTensor& send, const TensorView& recv, int root, const CallOptions& call) {
  check_root(c, root);
  const int n = c.size();
  char* in = nullptr;
  if (c.rank() == root) {
    check_arg(send.has_value(), "sendbuf is NULL on the root rank ", root, " of scatter");
    check_same_dtype(*send, "sendbuf", recv, "recvbuf");
    check_count(*send, "sendbuf", times_ranks(recv, "recvbuf", n),
                "scatter: the root's sendbuf holds size x recvbuf elements");
    check_overlap(*send, "sendbuf", recv, "recvbuf", static_cast<long long>(recv.bytes()) * root);
  }
  const bool is_root = c.rank() == root;
  if (auto w = launch_device(c, {is_root ? &*send : nullptr, &recv}, call, [&] {
        return device_call(OpKind::kScatter, recv.dtype, {}, root, recv.count, is_root ? send->bytes_ptr() : nullptr,
                           recv.bytes_ptr());
      })) {
    return *w;
  }
  Staging st({{opt(send), is_root ? Use::kIn : Use::kNone}, {&recv, Use::kOut}}, call);
  const bool in_place = is_root && recv.count > 0 && recv.bytes_ptr() == send->bytes_ptr() + recv.bytes() * root;
  // The body captures scalars, not views (see TensorView).
  char* const out = st.view(recv).bytes_ptr();
  if (is_root) in = st.view(*send).bytes_ptr();
  const size_t bytes = recv.bytes(), elem = dtype_size(recv.dtype);
  const bool staged = st.staged();
  // A slice scatters `len` bytes from `at` of each of the root's blocks
  // (SliceRows); every rank counts the root's blocks to slice alike.
  return launch_sliced(c, st, OpKind::kScatter, recv.dtype, RedOp::kSum, root, recv.count, elem, n, call,
                       [=](Engine& e, const AlgoEntry& algo, uint64_t first, uint64_t items) {
                         const size_t at = first * elem, len = items * elem;
                         if (in == nullptr) {
                           algo.run(e, {.recv = out + at, .bytes = len, .root = root});
                           return;
                         }
                         const SliceRows i(in, bytes, at, len, n, staged);
                         const char* const src = i.read(e, kSliceScratch);
                         // In place, the root's part stays where the scatter reads it.
                         char* const dst = in_place && i.laid_out() ? i.here() + size_t(root) * len : out + at;
                         algo.run(e, {.send = src, .recv = dst, .bytes = len, .root = root});
                       });
}

}  // namespace omniccl::coll
