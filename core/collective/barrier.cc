#include "collective/common.h"

namespace omniccl::coll {

WorkPtr barrier(Communicator& c, const CallOptions& call) {
  return launch(c, DeviceKind::kCPU, OpKind::kBarrier, DType::kUInt8, RedOp::kSum, -1, 0, 0, call,
                [](Engine& e, const AlgoEntry& algo) { algo.run(e, {}); });
}

}  // namespace omniccl::coll
