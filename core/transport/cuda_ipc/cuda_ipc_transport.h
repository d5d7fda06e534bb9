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
//
// Registered buffers (DeviceWindow::export_range) are mapped by the kind of
// their allocation (GpuRuntime::allocation_of): cudaMalloc memory by its
// cudaIpcMemHandle_t, which travels in the record ("r1 ..."); memory of the
// virtual memory API (cuMemCreate: PyTorch's expandable segments) made
// shareable as a POSIX file descriptor by that descriptor, which cannot
// travel in text: the record ("r2 ...") names an abstract unix socket of the
// exporting rank, from which each peer takes it with SCM_RIGHTS
// (fd_passing.h: only the communicator's peers, by pid, get it), bounded by
// the communicator's timeout and failing at once when the exporter exits.
// The exporter keeps its descriptor only until every peer has mapped it
// (DeviceWindow::exports_done). Peers cache mappings per allocation
// (ipc_cache.h). A buffer must lie within one allocation (for VMM memory:
// one physical allocation mapped by cuMemMap).
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
