// What the CUDA IPC transport needs of CUDA: device identity, device memory
// shared between processes (cudaIpc* for cudaMalloc memory; POSIX file
// descriptors of the virtual memory API, cuMem*, for cuMemCreate memory),
// and 64-bit words written and awaited
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
/// What allocation_of says of an allocation's sharing: neither way,
/// cudaIpcGetMemHandle, or a POSIX descriptor (vmm_export).
constexpr int kUnshareableMemory = 0;
constexpr int kLegacyIpcMemory = 1;
constexpr int kVmmFdMemory = 2;
/// The allocation holding device pointer p (cuPointerGetAttribute: its
/// range; *kind, one of the above; *id, its buffer id, unique in the process
/// over its lifetime, 0 where the driver does not say).
/// False when p is not device memory of this process.
bool allocation_of(const void* p, void** base, size_t* bytes, int* kind, uint64_t* id);
/// A POSIX file descriptor (the caller's to close) of the virtual memory API
/// allocation mapped at `base` (cuMemRetainAllocationHandle,
/// cuMemExportToShareableHandle, the retained handle released).
int vmm_export(void* base);
/// Maps the `bytes`-byte allocation that descriptor `fd` from vmm_export of
/// another process names, read/write for the current device
/// (cuMemImportFromShareableHandle, cuMemAddressReserve at the allocation
/// granularity, cuMemMap, cuMemSetAccess, the handle released); its base.
/// `fd` stays open.
void* vmm_import(int fd, size_t bytes);
/// Unmaps what vmm_import returned (cuMemUnmap, cuMemAddressFree).
void vmm_close(void* mapped, size_t bytes);
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
