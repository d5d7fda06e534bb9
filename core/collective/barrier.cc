#include "collective/common.h"

namespace omniccl::coll {

WorkPtr barrier(Communicator& c, const CallOptions& call) {
  Staging st({}, call);
  return launch(c, st, OpKind::kBarrier, DType::kUInt8, RedOp::kSum, -1, 0, 0, call,
                [](Engine& e, const AlgoEntry& algo) { algo.run(e, {}); });
}

}  // namespace omniccl::coll
