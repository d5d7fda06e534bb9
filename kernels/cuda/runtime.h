// Whether CUDA can be used in this process, asked once.
//
// libomniccl links the CUDA runtime statically (libcudart_static.a), which
// opens the driver (libcuda.so.1) with dlopen at its first call; nothing in
// the library depends on libcuda or libcudart at load time. So a build with
// CUDA loads and runs CPU collectives on machines without a driver or GPU,
// and only code that touches CUDA memory asks here whether it may.
//
// Host-only header (no CUDA headers), usable from any C++ file.
#pragma once

#include <stdexcept>
#include <string>

namespace omniccl::kernels::cuda {

/// What the first CUDA call found.
struct RuntimeStatus {
  bool available = false;  ///< a driver and at least one GPU
  int device_count = 0;
  /// When !available: why, e.g. "cudaGetDeviceCount: CUDA driver version
  /// is insufficient for CUDA runtime version (cudaErrorInsufficientDriver)".
  std::string reason;
};

/// The driver/GPU probe, run once per process (thread-safe) and cached.
const RuntimeStatus& runtime_status();

/// A CUDA call failed (including "no CUDA driver/GPU found"). code is the
/// cudaError_t value, 0 when there was none.
class Error : public std::runtime_error {
 public:
  Error(int code, const std::string& what) : std::runtime_error(what), code_(code) {}
  int code() const { return code_; }

 private:
  int code_;
};

/// Throws Error("no CUDA driver/GPU found: <reason>") unless
/// runtime_status().available.
void require_runtime(const char* what);

}  // namespace omniccl::kernels::cuda
