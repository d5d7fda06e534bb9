// The GPU runtime the core uses for CUDA tensors: device checks, host memory
// the GPU copies to and from, copies and events on a stream, and a stream
// waiting for a word in host memory. One interface so that the staged data
// path (collective/staging.h) runs unchanged over the CUDA runtime (built
// with OMNICCL_CUDA) and over a test runtime (tests/unit/emulated_gpu.h),
// which checks the path's ordering and failure handling on machines without
// a GPU.
//
// Errors: Error(kSystem) naming the failed call (Error(kUnsupported) from
// check_usable). Streams and events are opaque handles (cudaStream_t,
// cudaEvent_t for CUDA; nullptr is the default stream).
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include "common/fd.h"
#include "kernels/types.h"

namespace omniccl {

/// An exported allocation of device memory, as another process of the same
/// host opens it (GpuRuntime::ipc_export): opaque bytes (a cudaIpcMemHandle_t
/// for cudaMalloc memory).
struct GpuIpcHandle {
  unsigned char bytes[64] = {};
};

/// How a device allocation can be shared with another process of the host.
enum class GpuMemoryKind {
  /// Neither way below (VMM memory made without a shareable handle type).
  kUnshareable,
  /// cudaMalloc memory: ipc_export / ipc_open.
  kLegacyIpc,
  /// Memory of the virtual memory API (cuMemCreate: PyTorch's expandable
  /// segments) made shareable as a POSIX file descriptor, which
  /// cudaIpcGetMemHandle refuses: vmm_export / vmm_import.
  kVmmFd,
};

/// The device allocation that holds a pointer (GpuRuntime::allocation_of).
struct GpuAllocation {
  void* base = nullptr;
  size_t bytes = 0;
  GpuMemoryKind kind = GpuMemoryKind::kUnshareable;
  /// A name of the allocation that no other allocation of this process ever
  /// has, even at the same address after a free (CUDA: the buffer id); 0
  /// when the runtime cannot tell. Peers key their mappings of VMM memory by
  /// it, so memory freed and allocated again is never served stale.
  uint64_t id = 0;
};

class GpuRuntime {
 public:
  using Stream = void*;
  using Event = void*;
  virtual ~GpuRuntime() = default;

  /// "" when a driver and at least one device are there, else why not.
  virtual std::string unavailable_reason() = 0;
  virtual int device_count() = 0;
  /// The calling thread's current device.
  virtual int current_device() = 0;
  /// Makes `device` current on the calling thread.
  virtual void set_device(int device) = 0;
  /// Page-locked host memory the devices can read and write.
  virtual void* host_alloc(size_t bytes) = 0;
  virtual void host_free(void* p) = 0;
  /// dst = src (either may be device or host memory), enqueued on `stream`.
  virtual void copy_async(void* dst, const void* src, size_t bytes, Stream stream) = 0;
  /// `height` rows of `width` bytes, `spitch` bytes apart in src and
  /// `dpitch` apart in dst, enqueued on `stream` (cudaMemcpy2DAsync). The
  /// default enqueues a copy_async a row.
  virtual void copy_2d_async(void* dst, size_t dpitch, const void* src, size_t spitch, size_t width, size_t height,
                             Stream stream);
  /// dst = src (device to host or host to device) before it returns, on a
  /// stream of the runtime's own that waits for none of the caller's
  /// (cudaStreamNonBlocking: not even the legacy default stream), so that
  /// device memory can be read while a caller's stream waits for the host
  /// (stream_wait_flag). Work on the caller's streams is not waited for:
  /// the caller knows that what it reads is written (an event has passed).
  virtual void copy_now(void* dst, const void* src, size_t bytes) = 0;
  virtual Event event_create() = 0;
  virtual void event_destroy(Event event) = 0;
  virtual void event_record(Event event, Stream stream) = 0;
  /// Whether the stream has passed the event's last record.
  virtual bool event_done(Event event) = 0;
  /// The stream waits (the host does not) until *flag >= value; flag is
  /// host_alloc memory. The host must write the word eventually.
  virtual void stream_wait_flag(Stream stream, const uint32_t* flag, uint32_t value) = 0;

  // --- What a device transport (peers' device memory mapped into this
  // process, synchronised on the stream) needs. The defaults throw
  // Error(kUnsupported): a runtime without them offers no such transport.

  /// A name of `device` that is the same in every process of the host
  /// (CUDA: the GPU's UUID), whatever CUDA_VISIBLE_DEVICES renumbers.
  virtual std::string device_uuid(int device);
  /// Whether this process has touched the GPU driver at all (CUDA: libcuda
  /// is loaded), asked without touching it: a CPU-only program is never made
  /// to initialise CUDA (nor to lose fork() to it).
  virtual bool driver_loaded();
  /// Whether this process has already set up `device` (CUDA: its primary
  /// context is active), so that offering it to peers costs nothing new.
  virtual bool device_in_use(int device);
  /// Whether kernels on `device` can read and write memory of `peer`
  /// (true when they are the same device).
  virtual bool can_access_peer(int device, int peer);
  /// Device memory of the current device (cudaMalloc), zeroed.
  virtual void* device_alloc(size_t bytes);
  virtual void device_free(void* p);
  /// A handle to device_alloc memory at `base` for other processes.
  virtual GpuIpcHandle ipc_export(void* base);
  /// The allocation of this process's device memory that holds `p`
  /// (throws kInvalidArgument when `p` is not device memory).
  virtual GpuAllocation allocation_of(const void* p);
  /// Maps another process's exported memory into this one (its base).
  virtual void* ipc_open(const GpuIpcHandle& handle);
  /// Unmaps what ipc_open returned.
  virtual void ipc_close(void* mapped);
  /// A POSIX file descriptor (the caller's) of the kVmmFd allocation at
  /// `base`, which another process of the host maps with vmm_import once it
  /// has received it (CUDA: cuMemRetainAllocationHandle,
  /// cuMemExportToShareableHandle, the retained handle released).
  virtual UniqueFd vmm_export(void* base);
  /// Maps the `bytes`-byte allocation that a peer's vmm_export descriptor
  /// `fd` names into this process, readable and writable by the current
  /// device; returns its base. `fd` stays the caller's. (CUDA:
  /// cuMemImportFromShareableHandle, cuMemAddressReserve, cuMemMap,
  /// cuMemSetAccess, the imported handle released: the mapping keeps the
  /// memory alive.)
  virtual void* vmm_import(int fd, size_t bytes);
  /// Unmaps what vmm_import returned (`bytes` as given to it) and gives its
  /// address range back.
  virtual void vmm_close(void* mapped, size_t bytes);
  /// Enqueues *addr = value on `stream` after the work before it (addr in
  /// device memory of this process or mapped from a peer).
  virtual void stream_write_value(Stream stream, uint64_t* addr, uint64_t value);
  /// Makes `stream` wait, without the host, until *addr >= value (addr in
  /// this process's own device memory).
  virtual void stream_wait_value(Stream stream, const uint64_t* addr, uint64_t value);
  /// Enqueues a check of words[0, n) but words[self]: where one holds
  /// `expected`'s call (its bits from 24 up) but not `expected` itself (its
  /// low 24 bits differ: the peer's call is another operation), writes
  /// (index + 1) << 8 | code into *error and `released` into release[0,
  /// release_count) (so that waits on them pass).
  virtual void check_words_async(const uint64_t* words, int n, int self, uint64_t expected, uint64_t* release,
                                 size_t release_count, uint64_t released, uint64_t* error, uint32_t code,
                                 Stream stream);
  /// *addr = value now, from the host (device memory; not ordered on any
  /// stream of the caller's): releases stream waits on the word.
  virtual void write_value(uint64_t* addr, uint64_t value);
  /// *addr now, from the host.
  virtual uint64_t read_value(const uint64_t* addr);
  /// out = op(a, b) over `count` elements, enqueued on `stream`
  /// (kernels/cuda/reduce.h: bit for bit the CPU kernels' results).
  virtual void reduce_async(void* out, const void* a, const void* b, size_t count, kernels::DType t, kernels::RedOp op,
                            Stream stream);
  /// data /= divisor (AVG), enqueued on `stream`.
  virtual void scale_divide_async(void* data, size_t count, kernels::DType t, int64_t divisor, Stream stream);
  /// out = in * scalar (PREMUL_SUM), enqueued on `stream`.
  virtual void scale_multiply_async(void* out, const void* in, size_t count, kernels::DType t, double scalar,
                                    Stream stream);
};

/// The runtime for CUDA tensors in this process: the one installed with
/// install_gpu_runtime, else the CUDA runtime in a build with CUDA, else
/// nullptr.
GpuRuntime* gpu_runtime();

/// Whether this process has a GPU in use: a runtime whose driver is loaded,
/// a device available and the current one set up (as after cudaSetDevice or
/// a first CUDA tensor). Asked without touching the driver where it is not
/// loaded: a CPU-only program is never made to initialise CUDA.
bool gpu_in_use();

/// Replaces the process's GPU runtime (tests; call before any communicator
/// uses CUDA tensors). nullptr goes back to the built-in one.
void install_gpu_runtime(std::unique_ptr<GpuRuntime> runtime);

/// Throws Error(kUnsupported) unless tensor `name` (kind "cuda" or
/// "cuda_managed", device `device_id`) can be used: naming the reason: no
/// CUDA in this build, no driver/GPU, or no such device.
void check_gpu_usable(const std::string& name, const char* kind, int device_id);

}  // namespace omniccl
