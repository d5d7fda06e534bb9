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

#include <cstddef>
#include <cstdint>
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

// The host-side calls of the staged data path (host memory the GPU copies
// to and from, copies and events on a stream, a stream waiting for a word
// in host memory). Each throws Error naming the CUDA call and its error.
// `stream` is a cudaStream_t; nullptr is the legacy default stream.

/// The calling thread's current device (cudaGetDevice).
int current_device();
/// Makes `device` current on the calling thread (cudaSetDevice).
void set_device(int device);
/// Page-locked host memory, mapped into every device's address space
/// (cudaHostAlloc with cudaHostAllocPortable | cudaHostAllocMapped).
void* host_alloc(size_t bytes);
/// Frees host_alloc memory (cudaFreeHost).
void host_free(void* p);
/// dst = src, `bytes` bytes, enqueued on `stream` (cudaMemcpyAsync with
/// cudaMemcpyDefault: the pointers say which memory each is).
void copy_async(void* dst, const void* src, size_t bytes, void* stream);
/// `height` rows of `width` bytes, `spitch` apart in src and `dpitch` in
/// dst, enqueued on `stream` (cudaMemcpy2DAsync, cudaMemcpyDefault).
void copy_2d_async(void* dst, size_t dpitch, const void* src, size_t spitch, size_t width, size_t height, void* stream);
/// dst = src, `bytes` bytes, done before it returns, on a stream of its own
/// made for the copy on the current device (cudaStreamNonBlocking, so it
/// waits neither for the legacy default stream nor for any stream that
/// waits for the host).
void copy_now(void* dst, const void* src, size_t bytes);
/// A cudaEvent_t without timing (cudaEventDisableTiming).
void* event_create();
void event_destroy(void* event);
/// cudaEventRecord(event, stream).
void event_record(void* event, void* stream);
/// Whether the work before the event's last record has finished
/// (cudaEventQuery); throws on an error of that work.
bool event_done(void* event);
/// Makes `stream` wait, without the host, until the 32-bit word at `flag`
/// (host_alloc memory) is >= value: cuStreamWaitValue32 where the driver
/// offers stream memory operations, else a one-thread kernel that polls the
/// word (sleeping between reads). The host must write the word eventually;
/// the staged path's every queued operation writes its word when it ends,
/// fails or is dropped.
void stream_wait_flag(void* stream, const uint32_t* flag, uint32_t value);

}  // namespace omniccl::kernels::cuda
