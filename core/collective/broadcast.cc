#include "collective/common.h"

namespace omniccl::coll {

WorkPtr broadcast(Communicator& c, const TensorView& t, int root, const CallOptions& call) {
  check_root(c, root);
  Staging st({{&t, c.rank() == root ? Use::kIn : Use::kOut}}, call);
  const TensorView tv = st.view(t);
  return launch(c, st, OpKind::kBroadcast, t.dtype, RedOp::kSum, root, t.count, t.bytes(), call,
                [=](Engine& e, const AlgoEntry& algo) {
                  algo.run(e, {.recv = tv.bytes_ptr(), .bytes = t.bytes(), .root = root});
                });
}

}  // namespace omniccl::coll
