#include "collective/common.h"

namespace omniccl::coll {

WorkPtr broadcast(Communicator& c, const TensorView& t, int root, const CallOptions& call) {
  check_root(c, root);
  if (auto w = launch_device(c, {&t}, call, [&] {
        return device_call(OpKind::kBroadcast, t.dtype, {}, root, t.count, t.bytes_ptr(), t.bytes_ptr());
      })) {
    return *w;
  }
  Staging st({{&t, c.rank() == root ? Use::kIn : Use::kOut}}, call);
  // The body captures scalars, not views (see TensorView).
  char* const buf = st.view(t).bytes_ptr();
  const size_t elem = dtype_size(t.dtype);
  return launch_sliced(c, st, OpKind::kBroadcast, t.dtype, RedOp::kSum, root, t.count, elem, 1, call,
                       [=](Engine& e, const AlgoEntry& algo, uint64_t first, uint64_t items) {
                         algo.run(e, {.recv = buf + first * elem, .bytes = items * elem, .root = root});
                       });
}

}  // namespace omniccl::coll
