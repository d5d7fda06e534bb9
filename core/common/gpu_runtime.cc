#include "common/gpu_runtime.h"

#include <mutex>
#include <utility>

#include "common/status.h"

#ifdef OMNICCL_HAVE_CUDA
#include "kernels/cuda/runtime.h"
#endif

namespace omniccl {

namespace {

#ifdef OMNICCL_HAVE_CUDA
/// kernels::cuda's calls, their errors as Error(kSystem).
class CudaRuntime final : public GpuRuntime {
 public:
  std::string unavailable_reason() override {
    const auto& s = kernels::cuda::runtime_status();
    return s.available ? std::string() : "no CUDA driver/GPU found: " + s.reason;
  }
  int device_count() override { return kernels::cuda::runtime_status().device_count; }
  int current_device() override {
    return call([] { return kernels::cuda::current_device(); });
  }
  void set_device(int device) override {
    call([=] { kernels::cuda::set_device(device); });
  }
  void* host_alloc(size_t bytes) override {
    return call([=] { return kernels::cuda::host_alloc(bytes); });
  }
  void host_free(void* p) override {
    call([=] { kernels::cuda::host_free(p); });
  }
  void copy_async(void* dst, const void* src, size_t bytes, Stream stream) override {
    call([=] { kernels::cuda::copy_async(dst, src, bytes, stream); });
  }
  Event event_create() override {
    return call([] { return kernels::cuda::event_create(); });
  }
  void event_destroy(Event event) override { kernels::cuda::event_destroy(event); }
  void event_record(Event event, Stream stream) override {
    call([=] { kernels::cuda::event_record(event, stream); });
  }
  bool event_done(Event event) override {
    return call([=] { return kernels::cuda::event_done(event); });
  }
  void stream_wait_flag(Stream stream, const uint32_t* flag, uint32_t value) override {
    call([=] { kernels::cuda::stream_wait_flag(stream, flag, value); });
  }

 private:
  template <typename Fn>
  static auto call(Fn fn) -> decltype(fn()) {
    try {
      return fn();
    } catch (const kernels::cuda::Error& e) {
      fail(Status::kSystem, e.what());
    }
  }
};
#endif

struct Installed {
  std::mutex mu;
  std::unique_ptr<GpuRuntime> runtime;
  GpuRuntime* current = nullptr;
  bool resolved = false;
};

Installed& installed() {
  static Installed* s = new Installed();  // never destroyed: used until exit
  return *s;
}

}  // namespace

GpuRuntime* gpu_runtime() {
  Installed& s = installed();
  std::lock_guard lock(s.mu);
  if (!s.resolved) {
#ifdef OMNICCL_HAVE_CUDA
    s.runtime = std::make_unique<CudaRuntime>();
#endif
    s.current = s.runtime.get();
    s.resolved = true;
  }
  return s.current;
}

void install_gpu_runtime(std::unique_ptr<GpuRuntime> runtime) {
  Installed& s = installed();
  std::lock_guard lock(s.mu);
  s.runtime = std::move(runtime);
  s.resolved = s.runtime != nullptr;
  s.current = s.runtime.get();
}

void check_gpu_usable(const std::string& name, const char* kind, int device_id) {
  const std::string where = name + " is on device " + kind + ":" + std::to_string(device_id);
  GpuRuntime* rt = gpu_runtime();
  if (rt == nullptr) {
    fail(Status::kUnsupported, where,
         ", but this build of OmniCCL has no CUDA support (configured with OMNICCL_CUDA=OFF or "
         "without a CUDA compiler)");
  }
  if (const std::string why = rt->unavailable_reason(); !why.empty()) {
    fail(Status::kUnsupported, where, ", but ", why);
  }
  const int n = rt->device_count();
  if (device_id < 0 || device_id >= n) {
    fail(Status::kUnsupported, where, ", which does not exist (this machine has ", n, n == 1 ? " GPU)" : " GPUs)");
  }
}

}  // namespace omniccl
