// A kernel that keeps a stream busy for a while (stream-ordering tests).
#include <cuda_runtime_api.h>

#include <cstdint>

#include "spin_kernel.h"

namespace omniccl::test {

namespace {
__device__ uint64_t now_ns() {
  uint64_t t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  return t;
}

__global__ void spin(uint64_t ns) {
  const uint64_t start = now_ns();
  while (now_ns() - start < ns) __nanosleep(1000);
}
}  // namespace

cudaError_t launch_spin(cudaStream_t stream, uint64_t ns) {
  spin<<<1, 1, 0, stream>>>(ns);
  return cudaGetLastError();
}

}  // namespace omniccl::test
