// See ipc.h.
#include "kernels/cuda/ipc.h"

#include <cuda.h>  // types and constants only: driver calls go through driver_entry
#include <cuda_runtime_api.h>

#include <cstdint>
#include <cstring>
#include <map>
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
constexpr int kAttrBufferId = CU_POINTER_ATTRIBUTE_BUFFER_ID;
constexpr int kAttrLegacyIpcCapable = 10;
constexpr int kAttrRangeStart = 11;
constexpr int kAttrRangeSize = 12;
constexpr int kAttrAllowedHandleTypes = CU_POINTER_ATTRIBUTE_ALLOWED_HANDLE_TYPES;

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

// The virtual memory API's entry points (cuda.h's prototypes).
struct VmmDriver {
  CUresult (*retain)(CUmemGenericAllocationHandle*, void*) = nullptr;
  CUresult (*export_fd)(void*, CUmemGenericAllocationHandle, CUmemAllocationHandleType, unsigned long long) = nullptr;
  CUresult (*import_fd)(CUmemGenericAllocationHandle*, void*, CUmemAllocationHandleType) = nullptr;
  CUresult (*release)(CUmemGenericAllocationHandle) = nullptr;
  CUresult (*granularity)(size_t*, const CUmemAllocationProp*, CUmemAllocationGranularity_flags) = nullptr;
  CUresult (*reserve)(CUdeviceptr*, size_t, size_t, CUdeviceptr, unsigned long long) = nullptr;
  CUresult (*address_free)(CUdeviceptr, size_t) = nullptr;
  CUresult (*map)(CUdeviceptr, size_t, size_t, CUmemGenericAllocationHandle, unsigned long long) = nullptr;
  CUresult (*unmap)(CUdeviceptr, size_t) = nullptr;
  CUresult (*set_access)(CUdeviceptr, size_t, const CUmemAccessDesc*, size_t) = nullptr;
  CUresult (*error_name)(CUresult, const char**) = nullptr;
};

template <typename Fn>
void find_entry(Fn& fn, const char* name, bool& all) {
  fn = reinterpret_cast<Fn>(driver_entry(name));
  all = all && fn != nullptr;
}

/// The entry points; throws where the driver lacks one.
const VmmDriver& vmm_driver() {
  static bool all = true;
  static const VmmDriver d = [] {
    VmmDriver r;
    find_entry(r.retain, "cuMemRetainAllocationHandle", all);
    find_entry(r.export_fd, "cuMemExportToShareableHandle", all);
    find_entry(r.import_fd, "cuMemImportFromShareableHandle", all);
    find_entry(r.release, "cuMemRelease", all);
    find_entry(r.granularity, "cuMemGetAllocationGranularity", all);
    find_entry(r.reserve, "cuMemAddressReserve", all);
    find_entry(r.address_free, "cuMemAddressFree", all);
    find_entry(r.map, "cuMemMap", all);
    find_entry(r.unmap, "cuMemUnmap", all);
    find_entry(r.set_access, "cuMemSetAccess", all);
    find_entry(r.error_name, "cuGetErrorName", all);
    return r;
  }();
  if (!all) throw Error(0, "this CUDA driver lacks part of the virtual memory API (cuMem*)");
  return d;
}

void check_cu(CUresult r, const char* call) {
  if (r == CUDA_SUCCESS) return;
  const char* name = nullptr;
  if (vmm_driver().error_name(r, &name) != CUDA_SUCCESS || name == nullptr) name = "unknown error";
  throw Error(static_cast<int>(r), std::string(call) + ": " + name + " (CUresult " + std::to_string(int(r)) + ")");
}

/// The address ranges vmm_import reserved: base -> reserved bytes (rounded
/// up to the granularity, which vmm_close must give back whole).
struct Reservations {
  std::mutex mu;
  std::map<CUdeviceptr, size_t> bytes;
};

Reservations& reservations() {
  static Reservations* r = new Reservations();  // never destroyed: mappings may be closed at exit
  return *r;
}

/// Maps imported allocation h (`bytes`) into a new range of `reserved`
/// bytes, read/write for `device`; the range's base. Undoes what it did when
/// a step fails.
CUdeviceptr map_imported(const VmmDriver& v, CUmemGenericAllocationHandle h, size_t bytes, size_t reserved,
                         size_t alignment, int device) {
  CUdeviceptr at = 0;
  check_cu(v.reserve(&at, reserved, alignment, 0, 0), "cuMemAddressReserve");
  CUresult r = v.map(at, bytes, 0, h, 0);
  if (r != CUDA_SUCCESS) {
    (void)v.address_free(at, reserved);
    check_cu(r, "cuMemMap");
  }
  CUmemAccessDesc access{};
  access.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
  access.location.id = device;
  access.flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
  r = v.set_access(at, bytes, &access, 1);
  if (r != CUDA_SUCCESS) {
    (void)v.unmap(at, bytes);
    (void)v.address_free(at, reserved);
    check_cu(r, "cuMemSetAccess");
  }
  return at;
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

bool allocation_of(const void* p, void** base, size_t* bytes, int* kind, uint64_t* id) {
  const Driver& d = driver();
  const auto at = reinterpret_cast<unsigned long long>(p);
  unsigned long long start = 0;
  size_t size = 0;
  int capable = 0;
  unsigned long long handle_types = 0;
  unsigned long long buffer_id = 0;
  if (d.pointer_attr == nullptr) throw Error(0, "this CUDA driver has no cuPointerGetAttribute");
  if (d.pointer_attr(&start, kAttrRangeStart, at) != 0 || d.pointer_attr(&size, kAttrRangeSize, at) != 0) {
    return false;
  }
  if (d.pointer_attr(&capable, kAttrLegacyIpcCapable, at) != 0) capable = 0;
  // Memory of the virtual memory API says which handle types it may be
  // exported as; cudaMalloc memory says it is legacy IPC capable instead.
  if (d.pointer_attr(&handle_types, kAttrAllowedHandleTypes, at) != 0) handle_types = 0;
  if (d.pointer_attr(&buffer_id, kAttrBufferId, at) != 0) buffer_id = 0;
  *base = reinterpret_cast<void*>(start);
  *bytes = size;
  *kind = capable != 0                                                     ? kLegacyIpcMemory
          : (handle_types & CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR) != 0 ? kVmmFdMemory
                                                                           : kUnshareableMemory;
  *id = buffer_id;
  return true;
}

int vmm_export(void* base) {
  const VmmDriver& v = vmm_driver();
  CUmemGenericAllocationHandle h = 0;
  check_cu(v.retain(&h, base), "cuMemRetainAllocationHandle");
  int fd = -1;
  const CUresult r = v.export_fd(&fd, h, CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR, 0);
  // The retain's reference only: the allocation stays its owner's, and the
  // descriptor holds a reference of its own.
  (void)v.release(h);
  check_cu(r, "cuMemExportToShareableHandle");
  return fd;
}

void* vmm_import(int fd, size_t bytes) {
  const VmmDriver& v = vmm_driver();
  check(cudaFree(nullptr), "cudaFree(nullptr)");  // the device's context is current: the driver calls need one
  int device = 0;
  check(cudaGetDevice(&device), "cudaGetDevice");
  CUmemAllocationProp prop{};
  prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
  prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
  prop.location.id = device;
  prop.requestedHandleTypes = CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR;
  size_t granularity = 0;
  check_cu(v.granularity(&granularity, &prop, CU_MEM_ALLOC_GRANULARITY_MINIMUM), "cuMemGetAllocationGranularity");
  if (granularity == 0) granularity = 1;
  const size_t reserved = (bytes + granularity - 1) / granularity * granularity;
  CUmemGenericAllocationHandle h = 0;
  check_cu(
      v.import_fd(&h, reinterpret_cast<void*>(static_cast<intptr_t>(fd)), CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR),
      "cuMemImportFromShareableHandle");
  CUdeviceptr at = 0;
  try {
    at = map_imported(v, h, bytes, reserved, granularity, device);
  } catch (...) {
    (void)v.release(h);
    throw;
  }
  (void)v.release(h);  // the mapping keeps the memory alive until vmm_close
  Reservations& rs = reservations();
  std::lock_guard lock(rs.mu);
  rs.bytes[at] = reserved;
  return reinterpret_cast<void*>(at);
}

void vmm_close(void* mapped, size_t bytes) {
  if (mapped == nullptr) return;
  const VmmDriver& v = vmm_driver();
  const auto at = reinterpret_cast<CUdeviceptr>(mapped);
  size_t reserved = bytes;
  {
    Reservations& rs = reservations();
    std::lock_guard lock(rs.mu);
    auto it = rs.bytes.find(at);
    if (it != rs.bytes.end()) {
      reserved = it->second;
      rs.bytes.erase(it);
    }
  }
  const CUresult unmapped = v.unmap(at, bytes);
  const CUresult freed = v.address_free(at, reserved);
  check_cu(unmapped, "cuMemUnmap");
  check_cu(freed, "cuMemAddressFree");
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
