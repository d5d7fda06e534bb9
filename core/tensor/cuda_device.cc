#include "tensor/cuda_device.h"

#include "common/status.h"

#ifdef OMNICCL_HAVE_CUDA
#include "kernels/cuda/runtime.h"
#endif

namespace omniccl {

bool cuda_built() {
#ifdef OMNICCL_HAVE_CUDA
  return true;
#else
  return false;
#endif
}

std::string cuda_unavailable_reason() {
#ifdef OMNICCL_HAVE_CUDA
  const auto& s = kernels::cuda::runtime_status();
  return s.available ? std::string() : "no CUDA driver/GPU found: " + s.reason;
#else
  return "this build of OmniCCL has no CUDA support (configured with OMNICCL_CUDA=OFF or "
         "without a CUDA compiler)";
#endif
}

void reject_cuda_tensor(const std::string& name, const char* kind, int device_id) {
  const std::string where = name + " is on device " + kind + ":" + std::to_string(device_id);
  if (const std::string why = cuda_unavailable_reason(); !why.empty()) {
    fail(Status::kUnsupported, where, ", but ", why);
  }
#ifdef OMNICCL_HAVE_CUDA
  const int n = kernels::cuda::runtime_status().device_count;
  if (device_id < 0 || device_id >= n) {
    fail(Status::kUnsupported, where, ", which does not exist (this machine has ", n, n == 1 ? " GPU)" : " GPUs)");
  }
#endif
  fail(Status::kUnsupported, where,
       "; collectives on CUDA tensors are not implemented in this version (the CUDA kernels "
       "are built; the GPU data path is not)");
}

}  // namespace omniccl
