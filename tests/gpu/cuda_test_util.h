// Small helpers for the CUDA kernel tests: device buffers and error checks.
#pragma once

#include <cuda_runtime_api.h>
#include <gtest/gtest.h>

#include <cstddef>
#include <cstring>
#include <vector>

namespace omniccl::test {

#define CUDA_OK(call)                                                      \
  do {                                                                     \
    const cudaError_t e_ = (call);                                         \
    ASSERT_EQ(e_, cudaSuccess) << #call << ": " << cudaGetErrorString(e_); \
  } while (0)

/// cudaMalloc'd bytes, freed on destruction.
class DeviceBuffer {
 public:
  explicit DeviceBuffer(size_t bytes) : bytes_(bytes) {
    if (cudaMalloc(&ptr_, bytes == 0 ? 1 : bytes) != cudaSuccess) ptr_ = nullptr;
  }
  ~DeviceBuffer() {
    if (ptr_ != nullptr) cudaFree(ptr_);
  }
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;
  unsigned char* get() const { return static_cast<unsigned char*>(ptr_); }
  size_t bytes() const { return bytes_; }
  /// Whether the allocation succeeded.
  bool ok() const { return ptr_ != nullptr; }
  /// Copies h (bytes() bytes) to the device and waits until the bytes are
  /// there; false on a CUDA error. (cudaMemcpy from pageable memory returns
  /// once the bytes are staged, before the device holds them; work on a
  /// non-blocking stream could then read the old contents.)
  bool upload(const std::vector<unsigned char>& h) {
    return h.size() == bytes_ && cudaMemcpy(ptr_, h.data(), bytes_, cudaMemcpyHostToDevice) == cudaSuccess &&
           cudaDeviceSynchronize() == cudaSuccess;
  }
  /// The device bytes (empty on a CUDA error).
  std::vector<unsigned char> download() const {
    std::vector<unsigned char> h(bytes_);
    if (cudaMemcpy(h.data(), ptr_, bytes_, cudaMemcpyDeviceToHost) != cudaSuccess) h.clear();
    return h;
  }

 private:
  void* ptr_ = nullptr;
  size_t bytes_;
};

}  // namespace omniccl::test
