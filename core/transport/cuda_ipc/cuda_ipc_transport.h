// The CUDA IPC transport: ranks of one host whose GPUs can reach each
// other's memory (the same GPU, or peers over NVLink/PCIe) map each other's
// device blocks (cudaIpcGetMemHandle / cudaIpcOpenMemHandle), and operations
// on CUDA tensors run over that DeviceWindow on the streams
// (algorithm/device/). It carries no engine messages: the mesh still links
// every pair with shm or tcp for those.
//
// Its part of the endpoint: "v1 <gpu uuid> <device> <scratch bytes> <handle
// hex>", offered when the process has a usable GPU and either already uses
// it (OMNICCL_DEVICE_TRANSPORT=auto: a CPU-only program pays nothing, not
// even a CUDA context) or the setting asks for it (cuda_ipc). The block is
// made with the part: device memory goes with the process, so a rank killed
// in the exchange leaves nothing behind.
#pragma once

#include <cstddef>
#include <memory>
#include <string>

#include "transport/transport.h"

namespace omniccl::transport {

struct CudaIpcOptions {
  /// "auto" (offer where the process already uses its GPU), "cuda_ipc"
  /// (offer wherever there is a GPU), "staged" (never): OMNICCL_DEVICE_TRANSPORT.
  std::string mode = "auto";
  /// Each rank's scratch buffer (OMNICCL_CUDA_IPC_BUFFER): operations move
  /// through it in pieces of this size.
  size_t buffer_bytes = size_t{4} << 20;
  /// Throws Error(kInvalidArgument) naming the setting that is wrong.
  void validate() const;
};

/// Flag words of each rank's block for `size` ranks (what the device engine
/// lays out in them: algorithm/device/device_engine.h).
size_t cuda_ipc_flag_words(int size);

std::unique_ptr<Transport> make_cuda_ipc_transport(const CudaIpcOptions& options, int rank, int size);

}  // namespace omniccl::transport
