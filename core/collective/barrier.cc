#include "collective/common.h"

namespace omniccl::coll {

WorkPtr barrier(Communicator& c, const CallOptions& call) {
  return launch(c, DeviceKind::kCPU, OpKind::kBarrier, DType::kUInt8, RedOp::kSum, -1, 0, 0, call, [](Engine& e, Algo a) {
    switch (a) {
      case Algo::kDissemination: algo::barrier_dissemination(e); break;
      case Algo::kDirect: algo::barrier_direct(e); break;
      default: no_such_algo(OpKind::kBarrier, a);
    }
  });
}

}  // namespace omniccl::coll
