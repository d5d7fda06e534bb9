// The one-time CUDA probe and the host-side calls of the staged data path
// (see runtime.h).
#include "kernels/cuda/runtime.h"

#include <cuda_runtime_api.h>

#include <mutex>
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

/// Throws Error naming `call` unless e is cudaSuccess.
void check(cudaError_t e, const char* call) {
  if (e == cudaSuccess) return;
  cudaGetLastError();
  throw Error(static_cast<int>(e), std::string(call) + ": " + cudaGetErrorString(e) + " (" + cudaGetErrorName(e) + ")");
}

// cuStreamWaitValue32 (driver API), found at run time through the runtime so
// that nothing links libcuda: CUresult (CUstream, CUdeviceptr, cuuint32_t,
// unsigned int flags); flags 0 is CU_STREAM_WAIT_VALUE_GEQ.
using WaitValue32 = int (*)(void* stream, unsigned long long addr, uint32_t value, unsigned int flags);

WaitValue32 find_wait_value32() {
  void* fn = nullptr;
  cudaDriverEntryPointQueryResult found{};
  if (cudaGetDriverEntryPointByVersion("cuStreamWaitValue32", &fn, 12000, cudaEnableDefault, &found) != cudaSuccess ||
      found != cudaDriverEntryPointSuccess) {
    cudaGetLastError();
    return nullptr;
  }
  return reinterpret_cast<WaitValue32>(fn);
}

/// The fallback wait: one thread polls the word, sleeping ~1 us between
/// reads, until it reaches value.
__global__ void wait_flag_kernel(const volatile uint32_t* flag, uint32_t value) {
  while (*flag < value) {
    __nanosleep(1000);
  }
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

int current_device() {
  int d = 0;
  check(cudaGetDevice(&d), "cudaGetDevice");
  return d;
}

void set_device(int device) { check(cudaSetDevice(device), "cudaSetDevice"); }

void* host_alloc(size_t bytes) {
  void* p = nullptr;
  check(cudaHostAlloc(&p, bytes == 0 ? 1 : bytes, cudaHostAllocPortable | cudaHostAllocMapped), "cudaHostAlloc");
  return p;
}

void host_free(void* p) {
  if (p != nullptr) check(cudaFreeHost(p), "cudaFreeHost");
}

void copy_async(void* dst, const void* src, size_t bytes, void* stream) {
  if (bytes == 0) return;
  check(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDefault, static_cast<cudaStream_t>(stream)), "cudaMemcpyAsync");
}

void copy_2d_async(void* dst, size_t dpitch, const void* src, size_t spitch, size_t width, size_t height,
                   void* stream) {
  if (width == 0 || height == 0) return;
  check(
      cudaMemcpy2DAsync(dst, dpitch, src, spitch, width, height, cudaMemcpyDefault, static_cast<cudaStream_t>(stream)),
      "cudaMemcpy2DAsync");
}

namespace {

/// A non-blocking stream of the current device, destroyed with this.
class OwnStream {
 public:
  OwnStream() { check(cudaStreamCreateWithFlags(&s_, cudaStreamNonBlocking), "cudaStreamCreateWithFlags"); }
  ~OwnStream() { cudaStreamDestroy(s_); }
  OwnStream(const OwnStream&) = delete;
  OwnStream& operator=(const OwnStream&) = delete;
  cudaStream_t get() const { return s_; }

 private:
  cudaStream_t s_ = nullptr;
};

}  // namespace

void copy_now(void* dst, const void* src, size_t bytes) {
  if (bytes == 0) return;
  // Rare (a receive shorter than its tensor), so a stream made for it costs
  // little; one kept per thread would outlive the CUDA context at exit.
  const OwnStream s;
  check(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDefault, s.get()), "cudaMemcpyAsync");
  check(cudaStreamSynchronize(s.get()), "cudaStreamSynchronize");
}

void* event_create() {
  cudaEvent_t e = nullptr;
  check(cudaEventCreateWithFlags(&e, cudaEventDisableTiming), "cudaEventCreateWithFlags");
  return e;
}

void event_destroy(void* event) {
  if (event != nullptr) cudaEventDestroy(static_cast<cudaEvent_t>(event));
}

void event_record(void* event, void* stream) {
  check(cudaEventRecord(static_cast<cudaEvent_t>(event), static_cast<cudaStream_t>(stream)), "cudaEventRecord");
}

bool event_done(void* event) {
  const cudaError_t e = cudaEventQuery(static_cast<cudaEvent_t>(event));
  if (e == cudaErrorNotReady) {
    cudaGetLastError();
    return false;
  }
  check(e, "cudaEventQuery");
  return true;
}

void stream_wait_flag(void* stream, const uint32_t* flag, uint32_t value) {
  static std::once_flag once;
  static WaitValue32 wait_value32 = nullptr;
  std::call_once(once, [] { wait_value32 = find_wait_value32(); });
  void* device_ptr = nullptr;
  check(cudaHostGetDevicePointer(&device_ptr, const_cast<uint32_t*>(flag), 0), "cudaHostGetDevicePointer");
  if (wait_value32 != nullptr) {
    const int r = wait_value32(stream, reinterpret_cast<unsigned long long>(device_ptr), value, 0);
    if (r == 0) return;
    // Not offered for this stream or device after all: the kernel below.
  }
  wait_flag_kernel<<<1, 1, 0, static_cast<cudaStream_t>(stream)>>>(static_cast<const uint32_t*>(device_ptr), value);
  check(cudaGetLastError(), "launching the stream wait kernel");
}

}  // namespace omniccl::kernels::cuda
