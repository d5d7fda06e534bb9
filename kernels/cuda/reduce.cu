// CUDA kernels behind kernels/cuda/reduce.h.
//
// Words used here:
//  - element kernel K: a functor of kernels/cpu/ops.h or fp8.h (binary
//    `Elem operator()(Elem, Elem)` or unary `Elem operator()(Elem)`),
//    compiled for host and device (OMNICCL_HD); dispatch.h picks it. For
//    float16, bfloat16 and fp8 SUM / PROD / AVG / PREMUL_SUM the GPU runs
//    the counterpart in half_ops.h instead (same results, hardware
//    conversions); device_kernel() maps one to the other.
//  - pair kernel: one that also combines two elements at once (`pair`,
//    half_ops.h); the vector body then goes pair by pair.
//  - vector: 16 bytes (a uint4), kVec = 16 / sizeof(Elem) elements.
//  - body / tail: the first nvec * kVec elements go by vectors (when every
//    pointer is 16-byte aligned; otherwise nvec = 0), the rest one by one.
//
// Each thread handles kUnroll vectors per grid-stride step, loading all of
// them before computing, so that enough loads are in flight to saturate
// HBM. The grid is capped at a few blocks per SM; larger inputs loop.
#include <cuda_runtime_api.h>

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <string>

#include "kernels/cpu/dispatch.h"
#include "kernels/cuda/half_ops.h"
#include "kernels/cuda/reduce.h"
#include "kernels/cuda/runtime.h"

namespace omniccl::kernels::cuda {
namespace {

using namespace cpu::detail;
using detail::device_kernel;

constexpr int kThreads = 512;
constexpr int kUnroll = 4;
constexpr int kBlocksPerSm = 4;  // 4 x 512 threads = 2048, a full SM on sm_90

/// K::Pair, or Elem for kernels without pairs.
template <class K>
struct PairOf {
  using type = typename K::Elem;
};
template <class K>
requires requires { typename K::Pair; }
struct PairOf<K> {
  using type = typename K::Pair;
};

template <class K>
struct VecOf {
  using Elem = typename K::Elem;
  using Pair = typename PairOf<K>::type;
  static constexpr int kVec = 16 / sizeof(Elem);
  static constexpr int kPairs = 16 / sizeof(Pair);
  union U {
    uint4 v;
    Elem e[kVec];
    Pair p[kPairs];
  };
};

template <class K>
concept BinaryPairs = requires(const K& k, typename K::Pair p) {
  k.pair(p, p);
};
template <class K>
concept UnaryPairs = requires(const K& k, typename K::Pair p) {
  k.pair(p);
};

/// x = k(x, y) over one vector.
template <class K>
__device__ __forceinline__ void combine(const K& k, typename VecOf<K>::U& x, const typename VecOf<K>::U& y) {
  using V = VecOf<K>;
  if constexpr (BinaryPairs<K>) {
#pragma unroll
    for (int j = 0; j < V::kPairs; ++j) x.p[j] = k.pair(x.p[j], y.p[j]);
  } else {
#pragma unroll
    for (int j = 0; j < V::kVec; ++j) x.e[j] = k(x.e[j], y.e[j]);
  }
}

/// x = k(x) over one vector.
template <class K>
__device__ __forceinline__ void apply(const K& k, typename VecOf<K>::U& x) {
  using V = VecOf<K>;
  if constexpr (UnaryPairs<K>) {
#pragma unroll
    for (int j = 0; j < V::kPairs; ++j) x.p[j] = k.pair(x.p[j]);
  } else {
#pragma unroll
    for (int j = 0; j < V::kVec; ++j) x.e[j] = k(x.e[j]);
  }
}

template <class K>
__global__ void __launch_bounds__(kThreads) binary_kernel(typename K::Elem* out, const typename K::Elem* a,
                                                          const typename K::Elem* b, size_t count, size_t nvec, K k) {
  using V = VecOf<K>;
  const size_t stride = size_t{gridDim.x} * blockDim.x;
  const size_t tid = size_t{blockIdx.x} * blockDim.x + threadIdx.x;
  const auto* va = reinterpret_cast<const uint4*>(a);
  const auto* vb = reinterpret_cast<const uint4*>(b);
  auto* vo = reinterpret_cast<uint4*>(out);
  for (size_t base = tid; base < nvec; base += stride * kUnroll) {
    typename V::U x[kUnroll], y[kUnroll];
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) {
      const size_t i = base + u * stride;
      if (i < nvec) {
        x[u].v = va[i];
        y[u].v = vb[i];
      }
    }
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) {
      const size_t i = base + u * stride;
      if (i < nvec) {
        combine(k, x[u], y[u]);
        vo[i] = x[u].v;
      }
    }
  }
  for (size_t i = nvec * V::kVec + tid; i < count; i += stride) out[i] = k(a[i], b[i]);
}

template <class K>
__global__ void __launch_bounds__(kThreads)
    unary_kernel(typename K::Elem* out, const typename K::Elem* in, size_t count, size_t nvec, K k) {
  using V = VecOf<K>;
  const size_t stride = size_t{gridDim.x} * blockDim.x;
  const size_t tid = size_t{blockIdx.x} * blockDim.x + threadIdx.x;
  const auto* vi = reinterpret_cast<const uint4*>(in);
  auto* vo = reinterpret_cast<uint4*>(out);
  for (size_t base = tid; base < nvec; base += stride * kUnroll) {
    typename V::U x[kUnroll];
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) {
      const size_t i = base + u * stride;
      if (i < nvec) x[u].v = vi[i];
    }
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) {
      const size_t i = base + u * stride;
      if (i < nvec) {
        apply(k, x[u]);
        vo[i] = x[u].v;
      }
    }
  }
  for (size_t i = nvec * V::kVec + tid; i < count; i += stride) out[i] = k(in[i]);
}

/// The identity as a unary element kernel on bytes: copy() is unary_kernel
/// with it.
struct CopyBytes {
  using Elem = uint8_t;
  __device__ uint8_t operator()(uint8_t x) const { return x; }
};

[[noreturn]] void throw_cuda(const char* what, cudaError_t e) {
  throw Error(static_cast<int>(e), std::string(what) + ": " + cudaGetErrorString(e) + " (" + cudaGetErrorName(e) + ")");
}

/// Multiprocessors of the current device, asked once per device.
int sm_count() {
  constexpr int kMaxDevices = 64;
  static std::atomic<int> cache[kMaxDevices];
  int dev = 0;
  if (cudaGetDevice(&dev) != cudaSuccess || dev < 0 || dev >= kMaxDevices) return 132;
  int n = cache[dev].load(std::memory_order_relaxed);
  if (n == 0) {
    if (cudaDeviceGetAttribute(&n, cudaDevAttrMultiProcessorCount, dev) != cudaSuccess || n <= 0) {
      n = 132;  // H100 SXM; only sizes the grid
    }
    cache[dev].store(n, std::memory_order_relaxed);
  }
  return n;
}

/// Blocks for `work` thread-items: enough for one item per thread, at most
/// kBlocksPerSm per SM.
unsigned grid_for(size_t work) {
  const size_t want = std::max<size_t>(1, (work + kThreads - 1) / kThreads);
  return static_cast<unsigned>(std::min<size_t>(want, size_t(sm_count()) * kBlocksPerSm));
}

bool aligned(const void* p, size_t a) { return reinterpret_cast<uintptr_t>(p) % a == 0; }

void check_aligned(const char* what, const char* name, const void* p, DType t) {
  if (!aligned(p, dtype_size(t))) {
    throw std::invalid_argument(std::string(what) + ": " + name + " (" +
                                std::to_string(reinterpret_cast<uintptr_t>(p)) + ") is not aligned to the " +
                                std::to_string(dtype_size(t)) + "-byte size of dtype " + dtype_name(t));
  }
}

void check_launch(const char* what) {
  const cudaError_t e = cudaGetLastError();
  if (e != cudaSuccess) throw_cuda(what, e);
}

template <class K>
void launch_binary(void* out, const void* a, const void* b, size_t count, const K& k, cudaStream_t s) {
  using Elem = typename K::Elem;
  constexpr size_t kVec = VecOf<K>::kVec;
  const bool vec = aligned(out, 16) && aligned(a, 16) && aligned(b, 16);
  const size_t nvec = vec ? count / kVec : 0;
  const size_t work = std::max((nvec + kUnroll - 1) / kUnroll, count - nvec * kVec);
  binary_kernel<K><<<grid_for(work), kThreads, 0, s>>>(static_cast<Elem*>(out), static_cast<const Elem*>(a),
                                                       static_cast<const Elem*>(b), count, nvec, k);
}

template <class K>
void launch_unary(void* out, const void* in, size_t count, const K& k, cudaStream_t s) {
  using Elem = typename K::Elem;
  constexpr size_t kVec = VecOf<K>::kVec;
  const bool vec = aligned(out, 16) && aligned(in, 16);
  const size_t nvec = vec ? count / kVec : 0;
  const size_t work = std::max((nvec + kUnroll - 1) / kUnroll, count - nvec * kVec);
  unary_kernel<K>
      <<<grid_for(work), kThreads, 0, s>>>(static_cast<Elem*>(out), static_cast<const Elem*>(in), count, nvec, k);
}

/// Two-part items (complex numbers, MAXLOC / MINLOC pairs, cpu/pairs.h) have
/// no device kernels: the collectives stage them through host memory.
[[noreturn]] void throw_two_part(const char* what, DType t) {
  throw std::invalid_argument(std::string(what) + ": dtype " + dtype_name(t) +
                              " or its reduce op has no CUDA kernel (complex and MAXLOC/MINLOC reduce on the host)");
}

}  // namespace

void reduce(void* out, const void* a, const void* b, size_t count, DType t, RedOp op, Stream stream) {
  constexpr const char* kWhat = "cuda::reduce";
  visit_binary(kWhat, t, op, [&]<class K>(K) {
    if constexpr (kTwoPart<typename K::Elem>) {
      throw_two_part(kWhat, t);
    } else {
      if (count == 0) return;
      check_aligned(kWhat, "out", out, t);
      check_aligned(kWhat, "a", a, t);
      check_aligned(kWhat, "b", b, t);
      require_runtime(kWhat);
      launch_binary(out, a, b, count, device_kernel(K{}), static_cast<cudaStream_t>(stream));
      check_launch(kWhat);
    }
  });
}

void scale_divide(void* data, size_t count, DType t, int64_t divisor, Stream stream) {
  constexpr const char* kWhat = "cuda::scale_divide";
  visit_divide(kWhat, t, divisor, [&]<class K>(const K& k) {
    if constexpr (kTwoPart<typename K::Elem>) {
      throw_two_part(kWhat, t);
    } else {
      if (count == 0 || divisor == 1) return;
      check_aligned(kWhat, "data", data, t);
      require_runtime(kWhat);
      launch_unary(data, data, count, device_kernel(k), static_cast<cudaStream_t>(stream));
      check_launch(kWhat);
    }
  });
}

void scale_multiply(void* out, const void* in, size_t count, DType t, double scalar, Stream stream) {
  constexpr const char* kWhat = "cuda::scale_multiply";
  visit_multiply(kWhat, t, scalar, [&]<class K>(const K& k) {
    if constexpr (kTwoPart<typename K::Elem>) {
      throw_two_part(kWhat, t);
    } else {
      if (count == 0) return;
      check_aligned(kWhat, "out", out, t);
      check_aligned(kWhat, "in", in, t);
      require_runtime(kWhat);
      launch_unary(out, in, count, device_kernel(k), static_cast<cudaStream_t>(stream));
      check_launch(kWhat);
    }
  });
}

void copy(void* dst, const void* src, size_t bytes, Stream stream) {
  constexpr const char* kWhat = "cuda::copy";
  if (bytes == 0 || dst == src) return;
  require_runtime(kWhat);
  launch_unary(dst, src, bytes, CopyBytes{}, static_cast<cudaStream_t>(stream));
  check_launch(kWhat);
}

}  // namespace omniccl::kernels::cuda
