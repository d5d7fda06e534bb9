// Where memory lives: the device kind shared by tensors (tensor/), executors
// (executor/) and transports (transport/, through MemRef).
#pragma once

#include <cstdint>

namespace omniccl {

enum class DeviceKind : uint8_t { kCPU, kCUDA };

}  // namespace omniccl
