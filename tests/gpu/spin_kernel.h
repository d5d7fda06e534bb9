// A kernel that keeps a stream busy for at least `ns` nanoseconds.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

namespace omniccl::test {

/// Enqueues the kernel on `stream`; the launch's error.
cudaError_t launch_spin(cudaStream_t stream, uint64_t ns);

}  // namespace omniccl::test
