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

namespace omniccl {

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
  virtual Event event_create() = 0;
  virtual void event_destroy(Event event) = 0;
  virtual void event_record(Event event, Stream stream) = 0;
  /// Whether the stream has passed the event's last record.
  virtual bool event_done(Event event) = 0;
  /// The stream waits (the host does not) until *flag >= value; flag is
  /// host_alloc memory. The host must write the word eventually.
  virtual void stream_wait_flag(Stream stream, const uint32_t* flag, uint32_t value) = 0;
};

/// The runtime for CUDA tensors in this process: the one installed with
/// install_gpu_runtime, else the CUDA runtime in a build with CUDA, else
/// nullptr.
GpuRuntime* gpu_runtime();

/// Replaces the process's GPU runtime (tests; call before any communicator
/// uses CUDA tensors). nullptr goes back to the built-in one.
void install_gpu_runtime(std::unique_ptr<GpuRuntime> runtime);

/// Throws Error(kUnsupported) unless tensor `name` (kind "cuda" or
/// "cuda_managed", device `device_id`) can be used: naming the reason: no
/// CUDA in this build, no driver/GPU, or no such device.
void check_gpu_usable(const std::string& name, const char* kind, int device_id);

}  // namespace omniccl
