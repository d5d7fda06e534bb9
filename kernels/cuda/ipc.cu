// See ipc.h.
#include "kernels/cuda/ipc.h"

#include <cuda_runtime_api.h>

#include <cstring>
#include <mutex>
#include <string>

#include "kernels/cuda/runtime.h"

namespace omniccl::kernels::cuda {

namespace {

void check(cudaError_t e, const char* call) {
  if (e == cudaSuccess) return;
  cudaGetLastError();
  throw Error(static_cast<int>(e), std::string(call) + ": " + cudaGetErrorString(e) + " (" + cudaGetErrorName(e) + ")");
}

/// A driver entry point found through the runtime (nothing links libcuda),
/// or nullptr where this driver lacks it.
void* driver_entry(const char* name) {
  void* fn = nullptr;
  cudaDriverEntryPointQueryResult found{};
  if (cudaGetDriverEntryPointByVersion(name, &fn, 12000, cudaEnableDefault, &found) != cudaSuccess ||
      found != cudaDriverEntryPointSuccess) {
    cudaGetLastError();
    return nullptr;
  }
  return fn;
}

// CUresult (CUstream, CUdeviceptr, cuuint64_t, unsigned int flags): flags 0
// is CU_STREAM_WRITE_VALUE_DEFAULT and CU_STREAM_WAIT_VALUE_GEQ.
using Value64Fn = int (*)(void* stream, unsigned long long addr, unsigned long long value, unsigned int flags);
using CtxStateFn = int (*)(int device, unsigned int* flags, int* active);
using DeviceGetFn = int (*)(int* device, int ordinal);
// CUresult (void* data, CUpointer_attribute, CUdeviceptr).
using PointerAttrFn = int (*)(void* data, int attribute, unsigned long long ptr);
// CUpointer_attribute values (cuda.h), stable since CUDA 10/11.
constexpr int kAttrLegacyIpcCapable = 10;
constexpr int kAttrRangeStart = 11;
constexpr int kAttrRangeSize = 12;

struct Driver {
  Value64Fn write64 = nullptr;
  Value64Fn wait64 = nullptr;
  CtxStateFn ctx_state = nullptr;
  DeviceGetFn device_get = nullptr;
  PointerAttrFn pointer_attr = nullptr;
};

const Driver& driver() {
  static const Driver d = [] {
    Driver r;
    r.write64 = reinterpret_cast<Value64Fn>(driver_entry("cuStreamWriteValue64"));
    r.wait64 = reinterpret_cast<Value64Fn>(driver_entry("cuStreamWaitValue64"));
    r.ctx_state = reinterpret_cast<CtxStateFn>(driver_entry("cuDevicePrimaryCtxGetState"));
    r.device_get = reinterpret_cast<DeviceGetFn>(driver_entry("cuDeviceGet"));
    r.pointer_attr = reinterpret_cast<PointerAttrFn>(driver_entry("cuPointerGetAttribute"));
    return r;
  }();
  return d;
}

__global__ void write_value_kernel(volatile unsigned long long* addr, unsigned long long value) {
  __threadfence_system();  // what the stream wrote before is visible first
  *addr = value;
  __threadfence_system();
}

/// The fallback wait: one thread polls the word, sleeping ~1 us between reads.
__global__ void wait_value_kernel(const volatile unsigned long long* addr, unsigned long long value) {
  while (*addr < value) __nanosleep(1000);
  __threadfence_system();
}

__global__ void check_words_kernel(const volatile unsigned long long* words, int n, int self,
                                   unsigned long long expected, volatile unsigned long long* release,
                                   size_t release_count, unsigned long long released,
                                   volatile unsigned long long* error, unsigned int code) {
  for (int i = 0; i < n; ++i) {
    const unsigned long long w = words[i];
    if (i == self || (w >> 24) != (expected >> 24) || w == expected) continue;
    *error = (static_cast<unsigned long long>(i) + 1) << 8 | code;
    for (size_t k = 0; k < release_count; ++k) release[k] = released;
    __threadfence_system();
    return;
  }
}

/// A non-blocking stream of this process's own for host-side reads and writes.
cudaStream_t side_stream() {
  static thread_local cudaStream_t s = nullptr;
  if (s == nullptr) check(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking), "cudaStreamCreateWithFlags");
  return s;
}

}  // namespace

std::string device_uuid(int device) {
  cudaDeviceProp prop{};
  check(cudaGetDeviceProperties(&prop, device), "cudaGetDeviceProperties");
  static const char* digits = "0123456789abcdef";
  std::string out;
  for (int i = 0; i < 16; ++i) {
    const auto b = static_cast<unsigned char>(prop.uuid.bytes[i]);
    out += digits[b >> 4];
    out += digits[b & 15];
  }
  return out;
}

bool primary_context_active(int device) {
  const Driver& d = driver();
  if (d.ctx_state == nullptr || d.device_get == nullptr) return false;
  int dev = 0;
  if (d.device_get(&dev, device) != 0) return false;
  unsigned int flags = 0;
  int active = 0;
  return d.ctx_state(dev, &flags, &active) == 0 && active != 0;
}

bool can_access_peer(int device, int peer) {
  if (device == peer) return true;
  int ok = 0;
  check(cudaDeviceCanAccessPeer(&ok, device, peer), "cudaDeviceCanAccessPeer");
  return ok != 0;
}

void* device_alloc(size_t bytes) {
  void* p = nullptr;
  check(cudaMalloc(&p, bytes == 0 ? 1 : bytes), "cudaMalloc");
  check(cudaMemset(p, 0, bytes), "cudaMemset");
  return p;
}

void device_free(void* p) {
  if (p != nullptr) check(cudaFree(p), "cudaFree");
}

void ipc_export(void* base, unsigned char out[64]) {
  cudaIpcMemHandle_t h{};
  check(cudaIpcGetMemHandle(&h, base), "cudaIpcGetMemHandle");
  static_assert(sizeof h == 64, "cudaIpcMemHandle_t is 64 bytes");
  std::memcpy(out, &h, sizeof h);
}

bool allocation_of(const void* p, void** base, size_t* bytes, bool* ipc_capable) {
  const Driver& d = driver();
  const auto at = reinterpret_cast<unsigned long long>(p);
  unsigned long long start = 0;
  size_t size = 0;
  int capable = 0;
  if (d.pointer_attr == nullptr) throw Error(0, "this CUDA driver has no cuPointerGetAttribute");
  if (d.pointer_attr(&start, kAttrRangeStart, at) != 0 || d.pointer_attr(&size, kAttrRangeSize, at) != 0) {
    return false;
  }
  if (d.pointer_attr(&capable, kAttrLegacyIpcCapable, at) != 0) capable = 0;
  *base = reinterpret_cast<void*>(start);
  *bytes = size;
  *ipc_capable = capable != 0;
  return true;
}

void* ipc_open(const unsigned char handle[64]) {
  cudaIpcMemHandle_t h{};
  std::memcpy(&h, handle, sizeof h);
  void* p = nullptr;
  check(cudaIpcOpenMemHandle(&p, h, cudaIpcMemLazyEnablePeerAccess), "cudaIpcOpenMemHandle");
  return p;
}

void ipc_close(void* mapped) {
  if (mapped != nullptr) check(cudaIpcCloseMemHandle(mapped), "cudaIpcCloseMemHandle");
}

void stream_write_value64(void* stream, uint64_t* addr, uint64_t value) {
  const Driver& d = driver();
  if (d.write64 != nullptr && d.write64(stream, reinterpret_cast<unsigned long long>(addr), value, 0) == 0) return;
  write_value_kernel<<<1, 1, 0, static_cast<cudaStream_t>(stream)>>>(reinterpret_cast<unsigned long long*>(addr),
                                                                     value);
  check(cudaGetLastError(), "launching the stream write kernel");
}

void stream_wait_value64(void* stream, const uint64_t* addr, uint64_t value) {
  const Driver& d = driver();
  if (d.wait64 != nullptr && d.wait64(stream, reinterpret_cast<unsigned long long>(addr), value, 0) == 0) return;
  wait_value_kernel<<<1, 1, 0, static_cast<cudaStream_t>(stream)>>>(reinterpret_cast<const unsigned long long*>(addr),
                                                                    value);
  check(cudaGetLastError(), "launching the stream wait kernel");
}

void check_words(const uint64_t* words, int n, int self, uint64_t expected, uint64_t* release, size_t release_count,
                 uint64_t released, uint64_t* error, uint32_t code, void* stream) {
  check_words_kernel<<<1, 1, 0, static_cast<cudaStream_t>(stream)>>>(
      reinterpret_cast<const unsigned long long*>(words), n, self, expected,
      reinterpret_cast<unsigned long long*>(release), release_count, released,
      reinterpret_cast<unsigned long long*>(error), code);
  check(cudaGetLastError(), "launching the signature check kernel");
}

void write_value64(uint64_t* addr, uint64_t value) {
  cudaStream_t s = side_stream();
  check(cudaMemcpyAsync(addr, &value, sizeof value, cudaMemcpyHostToDevice, s), "cudaMemcpyAsync");
  check(cudaStreamSynchronize(s), "cudaStreamSynchronize");
}

uint64_t read_value64(const uint64_t* addr) {
  uint64_t v = 0;
  cudaStream_t s = side_stream();
  check(cudaMemcpyAsync(&v, addr, sizeof v, cudaMemcpyDeviceToHost, s), "cudaMemcpyAsync");
  check(cudaStreamSynchronize(s), "cudaStreamSynchronize");
  return v;
}

}  // namespace omniccl::kernels::cuda
