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
  // The body captures scalars, not views (see TensorView).
  const char* const in = st.view(send).bytes_ptr();
  if (c.rank() == root) out = st.view(*recv).bytes_ptr();
  const size_t bytes = send.bytes();
  return launch(
      c, st, OpKind::kGather, send.dtype, RedOp::kSum, root, send.count, bytes, call,
      [=](Engine& e, const AlgoEntry& algo) { algo.run(e, {.send = in, .recv = out, .bytes = bytes, .root = root}); });
}

WorkPtr scatter(Communicator& c, const OptTensor& send, const TensorView& recv, int root, const CallOptions& call) {
  check_root(c, root);
  const int n = c.size();
  const char* in = nullptr;
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
  Staging st({{opt(send), c.rank() == root ? Use::kIn : Use::kNone}, {&recv, Use::kOut}}, call);
  // The body captures scalars, not views (see TensorView).
  char* const out = st.view(recv).bytes_ptr();
  if (c.rank() == root) in = st.view(*send).bytes_ptr();
  const size_t bytes = recv.bytes();
  return launch(
      c, st, OpKind::kScatter, recv.dtype, RedOp::kSum, root, recv.count, bytes, call,
      [=](Engine& e, const AlgoEntry& algo) { algo.run(e, {.send = in, .recv = out, .bytes = bytes, .root = root}); });
}

}  // namespace omniccl::coll
