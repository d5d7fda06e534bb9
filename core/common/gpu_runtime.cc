#include "common/gpu_runtime.h"

#include <dlfcn.h>

#include <mutex>
#include <utility>

#include "common/status.h"

#ifdef OMNICCL_HAVE_CUDA
#include "kernels/cuda/ipc.h"
#include "kernels/cuda/reduce.h"
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
  void copy_2d_async(void* dst, size_t dpitch, const void* src, size_t spitch, size_t width, size_t height,
                     Stream stream) override {
    call([=] { kernels::cuda::copy_2d_async(dst, dpitch, src, spitch, width, height, stream); });
  }
  void copy_now(void* dst, const void* src, size_t bytes) override {
    call([=] { kernels::cuda::copy_now(dst, src, bytes); });
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
  std::string device_uuid(int device) override {
    return call([=] { return kernels::cuda::device_uuid(device); });
  }
  bool driver_loaded() override {
    void* lib = ::dlopen("libcuda.so.1", RTLD_NOW | RTLD_NOLOAD);
    if (lib != nullptr) ::dlclose(lib);
    return lib != nullptr;
  }
  bool device_in_use(int device) override {
    return call([=] { return kernels::cuda::primary_context_active(device); });
  }
  bool can_access_peer(int device, int peer) override {
    return call([=] { return kernels::cuda::can_access_peer(device, peer); });
  }
  void* device_alloc(size_t bytes) override {
    return call([=] { return kernels::cuda::device_alloc(bytes); });
  }
  void device_free(void* p) override {
    call([=] { kernels::cuda::device_free(p); });
  }
  GpuIpcHandle ipc_export(void* base) override {
    GpuIpcHandle h;
    call([&] { kernels::cuda::ipc_export(base, h.bytes); });
    return h;
  }
  GpuAllocation allocation_of(const void* p) override {
    GpuAllocation a;
    int kind = 0;
    if (!call([&] { return kernels::cuda::allocation_of(p, &a.base, &a.bytes, &kind, &a.id); })) {
      fail(Status::kInvalidArgument, "not CUDA device memory of this process");
    }
    a.kind = kind == kernels::cuda::kLegacyIpcMemory ? GpuMemoryKind::kLegacyIpc
             : kind == kernels::cuda::kVmmFdMemory   ? GpuMemoryKind::kVmmFd
                                                     : GpuMemoryKind::kUnshareable;
    return a;
  }
  void* ipc_open(const GpuIpcHandle& h) override {
    return call([&] { return kernels::cuda::ipc_open(h.bytes); });
  }
  void ipc_close(void* mapped) override {
    call([=] { kernels::cuda::ipc_close(mapped); });
  }
  UniqueFd vmm_export(void* base) override {
    return UniqueFd(call([=] { return kernels::cuda::vmm_export(base); }));
  }
  void* vmm_import(int fd, size_t bytes) override {
    return call([=] { return kernels::cuda::vmm_import(fd, bytes); });
  }
  void vmm_close(void* mapped, size_t bytes) override {
    call([=] { kernels::cuda::vmm_close(mapped, bytes); });
  }
  void stream_write_value(Stream stream, uint64_t* addr, uint64_t value) override {
    call([=] { kernels::cuda::stream_write_value64(stream, addr, value); });
  }
  void stream_wait_value(Stream stream, const uint64_t* addr, uint64_t value) override {
    call([=] { kernels::cuda::stream_wait_value64(stream, addr, value); });
  }
  void check_words_async(const uint64_t* words, int n, int self, uint64_t expected, uint64_t* release,
                         size_t release_count, uint64_t released, uint64_t* error, uint32_t code,
                         Stream stream) override {
    call([=] {
      kernels::cuda::check_words(words, n, self, expected, release, release_count, released, error, code, stream);
    });
  }
  void write_value(uint64_t* addr, uint64_t value) override {
    call([=] { kernels::cuda::write_value64(addr, value); });
  }
  uint64_t read_value(const uint64_t* addr) override {
    return call([=] { return kernels::cuda::read_value64(addr); });
  }
  void reduce_async(void* out, const void* a, const void* b, size_t count, kernels::DType t, kernels::RedOp op,
                    Stream stream) override {
    call([=] { kernels::cuda::reduce(out, a, b, count, t, op, stream); });
  }
  void scale_divide_async(void* data, size_t count, kernels::DType t, int64_t divisor, Stream stream) override {
    call([=] { kernels::cuda::scale_divide(data, count, t, divisor, stream); });
  }
  void scale_multiply_async(void* out, const void* in, size_t count, kernels::DType t, double scalar,
                            Stream stream) override {
    call([=] { kernels::cuda::scale_multiply(out, in, count, t, scalar, stream); });
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

[[noreturn]] void no_device_transport(const char* what) {
  fail(Status::kUnsupported, "this GPU runtime cannot ", what, " (no device transport with it)");
}

}  // namespace

bool gpu_in_use() {
  GpuRuntime* rt = gpu_runtime();
  if (rt == nullptr || !rt->driver_loaded()) return false;
  try {
    return rt->unavailable_reason().empty() && rt->device_in_use(rt->current_device());
  } catch (const Error&) {
    return false;  // no usable device
  }
}

void GpuRuntime::copy_2d_async(void* dst, size_t dpitch, const void* src, size_t spitch, size_t width, size_t height,
                               Stream stream) {
  for (size_t i = 0; i < height; ++i) {
    copy_async(static_cast<char*>(dst) + i * dpitch, static_cast<const char*>(src) + i * spitch, width, stream);
  }
}

std::string GpuRuntime::device_uuid(int) { no_device_transport("name its devices"); }
bool GpuRuntime::driver_loaded() { return false; }
bool GpuRuntime::device_in_use(int) { return false; }
bool GpuRuntime::can_access_peer(int device, int peer) { return device == peer; }
void* GpuRuntime::device_alloc(size_t) { no_device_transport("allocate device memory"); }
void GpuRuntime::device_free(void*) { no_device_transport("free device memory"); }
GpuIpcHandle GpuRuntime::ipc_export(void*) { no_device_transport("export device memory"); }
GpuAllocation GpuRuntime::allocation_of(const void*) { no_device_transport("find a pointer's allocation"); }
void* GpuRuntime::ipc_open(const GpuIpcHandle&) { no_device_transport("open a peer's device memory"); }
void GpuRuntime::ipc_close(void*) { no_device_transport("close a peer's device memory"); }
UniqueFd GpuRuntime::vmm_export(void*) { no_device_transport("export virtual memory API memory"); }
void* GpuRuntime::vmm_import(int, size_t) { no_device_transport("map a peer's virtual memory API memory"); }
void GpuRuntime::vmm_close(void*, size_t) { no_device_transport("unmap a peer's virtual memory API memory"); }
void GpuRuntime::stream_write_value(Stream, uint64_t*, uint64_t) { no_device_transport("write a word on a stream"); }
void GpuRuntime::stream_wait_value(Stream, const uint64_t*, uint64_t) {
  no_device_transport("wait for a word on a stream");
}
void GpuRuntime::check_words_async(const uint64_t*, int, int, uint64_t, uint64_t*, size_t, uint64_t, uint64_t*,
                                   uint32_t, Stream) {
  no_device_transport("check words on a stream");
}
void GpuRuntime::write_value(uint64_t*, uint64_t) { no_device_transport("write a device word"); }
uint64_t GpuRuntime::read_value(const uint64_t*) { no_device_transport("read a device word"); }
void GpuRuntime::reduce_async(void*, const void*, const void*, size_t, kernels::DType, kernels::RedOp, Stream) {
  no_device_transport("reduce on a stream");
}
void GpuRuntime::scale_divide_async(void*, size_t, kernels::DType, int64_t, Stream) {
  no_device_transport("scale on a stream");
}
void GpuRuntime::scale_multiply_async(void*, const void*, size_t, kernels::DType, double, Stream) {
  no_device_transport("scale on a stream");
}

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
