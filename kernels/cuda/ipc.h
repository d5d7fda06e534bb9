// What the CUDA IPC transport needs of CUDA: device identity, device memory
// shared between processes (cudaIpc*), and 64-bit words written and awaited
// by streams (cuStreamWriteValue64 / cuStreamWaitValue64 where the driver
// offers them, one-thread kernels otherwise), so that ranks synchronise on
// their streams without a host thread per call.
//
// Each function throws Error (runtime.h) naming the failed CUDA call.
// Host-only header: no CUDA headers needed to call these.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

namespace omniccl::kernels::cuda {

/// The GPU's UUID as 32 hex digits (cudaGetDeviceProperties), the same in
/// every process of the host whatever CUDA_VISIBLE_DEVICES renumbers.
std::string device_uuid(int device);
/// Whether the device's primary context is active in this process (the
/// process has used the device already): cuDevicePrimaryCtxGetState, which
/// creates nothing.
bool primary_context_active(int device);
/// cudaDeviceCanAccessPeer (true for device == peer).
bool can_access_peer(int device, int peer);
/// cudaMalloc on the current device, zeroed.
void* device_alloc(size_t bytes);
void device_free(void* p);
/// cudaIpcGetMemHandle of cudaMalloc memory at `base` into out[64].
void ipc_export(void* base, unsigned char out[64]);
/// The allocation holding device pointer p (cuPointerGetAttribute: its
/// range, and whether cudaIpcGetMemHandle takes it).
/// False when p is not device memory of this process.
bool allocation_of(const void* p, void** base, size_t* bytes, bool* ipc_capable);
/// cudaIpcOpenMemHandle (peer access enabled lazily where needed).
void* ipc_open(const unsigned char handle[64]);
void ipc_close(void* mapped);
/// *addr = value after the work queued on `stream` before it.
void stream_write_value64(void* stream, uint64_t* addr, uint64_t value);
/// `stream` waits until *addr >= value.
void stream_wait_value64(void* stream, const uint64_t* addr, uint64_t value);
/// GpuRuntime::check_words_async (common/gpu_runtime.h): a one-thread kernel.
void check_words(const uint64_t* words, int n, int self, uint64_t expected, uint64_t* release, size_t release_count,
                 uint64_t released, uint64_t* error, uint32_t code, void* stream);
/// *addr = value now (through a private non-blocking stream, so that a
/// stream blocked in a wait does not hold it up).
void write_value64(uint64_t* addr, uint64_t value);
/// *addr now (as write_value64).
uint64_t read_value64(const uint64_t* addr);

}  // namespace omniccl::kernels::cuda
