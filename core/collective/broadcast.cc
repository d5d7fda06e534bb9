#include "collective/common.h"

namespace omniccl::coll {

WorkPtr broadcast(Communicator& c, const TensorView& t, int root, const CallOptions& call) {
  check_root(c, root);
  return launch(c, call_device({&t}), OpKind::kBroadcast, t.dtype, RedOp::kSum, root, t.count, t.bytes(), call, [=](Engine& e, Algo a) {
    switch (a) {
      case Algo::kTree: algo::broadcast_tree(e, t.bytes_ptr(), t.bytes(), root); break;
      case Algo::kRing: algo::broadcast_ring(e, t.bytes_ptr(), t.bytes(), root); break;
      case Algo::kDirect: algo::broadcast_direct(e, t.bytes_ptr(), t.bytes(), root); break;
      default: no_such_algo(OpKind::kBroadcast, a);
    }
  });
}

}  // namespace omniccl::coll
