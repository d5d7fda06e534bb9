// The one-time CUDA probe (see runtime.h).
#include "kernels/cuda/runtime.h"

#include <cuda_runtime_api.h>

#include <string>

namespace omniccl::kernels::cuda {

namespace {

RuntimeStatus probe() {
  RuntimeStatus s;
  int n = 0;
  const cudaError_t e = cudaGetDeviceCount(&n);
  if (e != cudaSuccess) {
    s.reason = std::string("cudaGetDeviceCount: ") + cudaGetErrorString(e) + " (" + cudaGetErrorName(e) + ")";
    cudaGetLastError();  // the runtime keeps the error sticky for this thread; clear it
    return s;
  }
  if (n <= 0) {
    s.reason = "cudaGetDeviceCount found no GPU";
    return s;
  }
  s.available = true;
  s.device_count = n;
  return s;
}

}  // namespace

const RuntimeStatus& runtime_status() {
  static const RuntimeStatus status = probe();
  return status;
}

void require_runtime(const char* what) {
  const RuntimeStatus& s = runtime_status();
  if (!s.available) {
    throw Error(0, std::string(what) + ": no CUDA driver/GPU found: " + s.reason);
  }
}

}  // namespace omniccl::kernels::cuda
