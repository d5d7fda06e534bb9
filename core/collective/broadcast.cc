#include "collective/common.h"

namespace omniccl::coll {

WorkPtr broadcast(Communicator& c, const TensorView& t, int root, const CallOptions& call) {
  check_root(c, root);
  return launch(c, call_device({&t}), OpKind::kBroadcast, t.dtype, RedOp::kSum, root, t.count, t.bytes(), call,
                [=](Engine& e, const AlgoEntry& algo) {
                  algo.run(e, {.recv = t.bytes_ptr(), .bytes = t.bytes(), .root = root});
                });
}

}  // namespace omniccl::coll
