// What the core can do with CUDA memory in this build and on this machine.
// Today the answer is an error that says why (collectives on CUDA tensors are
// the next step); the point is that the reason is precise: no CUDA in this
// build, no driver/GPU on this machine, or a device that does not exist.
#pragma once

#include <string>

namespace omniccl {

/// Whether this build has the CUDA kernels (configured with OMNICCL_CUDA).
bool cuda_built();

/// Empty when a CUDA driver and GPU were found, else why not ("no CUDA
/// driver/GPU found: cudaGetDeviceCount: ..."). Probes CUDA once per
/// process, at the first call (loading the driver with dlopen).
std::string cuda_unavailable_reason();

/// Throws Error(kUnsupported) for a tensor `name` in CUDA memory of kind
/// `kind` ("cuda", "cuda_managed") on device `device_id`, naming the reason
/// it cannot be used: no CUDA in this build, no driver/GPU, no such device,
/// or (with a GPU) that the collective data path does not exist yet.
[[noreturn]] void reject_cuda_tensor(const std::string& name, const char* kind, int device_id);

}  // namespace omniccl
