// omniccl-cuda-kernel-bench: bandwidth of the CUDA reduction kernels
// (kernels/cuda) next to a device-to-device cudaMemcpyAsync on the same GPU.
//
// For each size it times `iters` back-to-back launches on one stream with
// CUDA events (after `warmup` untimed ones) and prints the memory traffic per
// second, in GB/s (1e9 B/s):
//   memcpy_d2d  cudaMemcpyAsync of B bytes: 2B moved (read + write)
//   copy        kernels::cuda::copy of B bytes: 2B moved
//   sum_<type>  kernels::cuda::reduce SUM, out = a + b with B-byte buffers:
//               3B moved (two reads, one write)
//   memcpy_h2d, memcpy_d2h  cudaMemcpyAsync between page-locked host memory
//               and the GPU: B bytes across the host link (the staged path's
//               limit; their vs_memcpy column is no goal)
// and, for each kernel, its traffic rate as a fraction of memcpy_d2d's (the
// goal for the SUM rows on buffers of 16 MiB and more: >= 0.85).
//
// Usage: omniccl-cuda-kernel-bench [--min-bytes N] [--max-bytes N] [--iters N]
//                                  [--warmup N] [--device N] [--csv]
// Exits 2 with the reason where no CUDA driver or GPU is found.
#include <cuda_runtime_api.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <string>
#include <vector>

#include "kernels/cuda/reduce.h"
#include "kernels/cuda/runtime.h"
#include "kernels/types.h"

namespace {

using omniccl::kernels::DType;
using omniccl::kernels::RedOp;
namespace cuda = omniccl::kernels::cuda;

struct Options {
  size_t min_bytes = size_t{1} << 20;
  size_t max_bytes = size_t{1} << 30;
  int iters = 20;
  int warmup = 5;
  int device = 0;
  bool csv = false;
};

[[noreturn]] void usage(const char* why) {
  std::fprintf(stderr,
               "omniccl-cuda-kernel-bench: %s\n"
               "usage: omniccl-cuda-kernel-bench [--min-bytes N] [--max-bytes N] [--iters N]\n"
               "                                 [--warmup N] [--device N] [--csv]\n",
               why);
  std::exit(1);
}

Options parse(int argc, char** argv) {
  Options o;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    auto value = [&]() -> long long {
      if (i + 1 >= argc) usage((a + " needs a value").c_str());
      char* end = nullptr;
      const long long v = std::strtoll(argv[++i], &end, 10);
      if (*end != '\0' || v < 0) usage((a + ": not a non-negative integer: " + argv[i]).c_str());
      return v;
    };
    if (a == "--min-bytes")
      o.min_bytes = static_cast<size_t>(value());
    else if (a == "--max-bytes")
      o.max_bytes = static_cast<size_t>(value());
    else if (a == "--iters")
      o.iters = static_cast<int>(value());
    else if (a == "--warmup")
      o.warmup = static_cast<int>(value());
    else if (a == "--device")
      o.device = static_cast<int>(value());
    else if (a == "--csv")
      o.csv = true;
    else
      usage(("unknown argument " + a).c_str());
  }
  if (o.min_bytes == 0 || o.min_bytes > o.max_bytes) usage("need 0 < --min-bytes <= --max-bytes");
  if (o.iters <= 0) usage("--iters must be > 0");
  return o;
}

void check(cudaError_t e, const char* what) {
  if (e != cudaSuccess) {
    std::fprintf(stderr, "omniccl-cuda-kernel-bench: %s: %s\n", what, cudaGetErrorString(e));
    std::exit(1);
  }
}

/// Average seconds per call of f over opt.iters calls on `stream`.
double time_it(const Options& opt, cudaStream_t stream, const std::function<void()>& f) {
  for (int i = 0; i < opt.warmup; ++i) f();
  cudaEvent_t start, stop;
  check(cudaEventCreate(&start), "cudaEventCreate");
  check(cudaEventCreate(&stop), "cudaEventCreate");
  check(cudaEventRecord(start, stream), "cudaEventRecord");
  for (int i = 0; i < opt.iters; ++i) f();
  check(cudaEventRecord(stop, stream), "cudaEventRecord");
  check(cudaEventSynchronize(stop), "cudaEventSynchronize");
  float ms = 0;
  check(cudaEventElapsedTime(&ms, start, stop), "cudaEventElapsedTime");
  cudaEventDestroy(start);
  cudaEventDestroy(stop);
  return static_cast<double>(ms) * 1e-3 / opt.iters;
}

/// Prints the GPU, driver and runtime, then the table's header.
void print_header(const Options& opt) {
  cudaDeviceProp prop{};
  check(cudaGetDeviceProperties(&prop, opt.device), "cudaGetDeviceProperties");
  int driver = 0, runtime = 0;
  cudaDriverGetVersion(&driver);
  cudaRuntimeGetVersion(&runtime);
  std::printf("# GPU %d: %s (sm_%d%d, %d SMs), driver %d.%d, runtime %d.%d, %d iterations\n", opt.device, prop.name,
              prop.major, prop.minor, prop.multiProcessorCount, driver / 1000, driver % 1000 / 10, runtime / 1000,
              runtime % 1000 / 10, opt.iters);
  if (opt.csv) {
    std::printf("bytes,kernel,time_us,GBps,vs_memcpy\n");
  } else {
    std::printf("%14s  %-14s %12s %10s %10s\n", "bytes", "kernel", "time_us", "GB/s", "vs_memcpy");
  }
}

/// The device buffers: two inputs and an output of opt.max_bytes each.
struct Buffers {
  void* a = nullptr;
  void* b = nullptr;
  void* out = nullptr;
  void* host = nullptr;  ///< page-locked (cudaMallocHost)
};

/// One row of the table: a kernel and the bytes it moves.
struct Row {
  const char* name;
  double traffic;  // bytes moved per byte of buffer
  std::function<void(size_t)> run;
};

/// The kernels measured, each against cudaMemcpy (the first row).
std::vector<Row> kernel_rows(const Buffers& m, cudaStream_t stream) {
  void* out = m.out;
  const void* a = m.a;
  const void* b = m.b;
  void* host = m.host;
  return {
      {"memcpy_d2d", 2,
       [=](size_t n) { check(cudaMemcpyAsync(out, a, n, cudaMemcpyDeviceToDevice, stream), "cudaMemcpyAsync"); }},
      {"copy", 2, [=](size_t n) { cuda::copy(out, a, n, stream); }},
      {"sum_float32", 3, [=](size_t n) { cuda::reduce(out, a, b, n / 4, DType::kFloat32, RedOp::kSum, stream); }},
      {"sum_bfloat16", 3, [=](size_t n) { cuda::reduce(out, a, b, n / 2, DType::kBFloat16, RedOp::kSum, stream); }},
      {"sum_float16", 3, [=](size_t n) { cuda::reduce(out, a, b, n / 2, DType::kFloat16, RedOp::kSum, stream); }},
      {"sum_fp8e4m3", 3, [=](size_t n) { cuda::reduce(out, a, b, n, DType::kFloat8E4M3FN, RedOp::kSum, stream); }},
      {"sum_fp8e5m2", 3, [=](size_t n) { cuda::reduce(out, a, b, n, DType::kFloat8E5M2, RedOp::kSum, stream); }},
      {"memcpy_h2d", 1,
       [=](size_t n) { check(cudaMemcpyAsync(out, host, n, cudaMemcpyHostToDevice, stream), "cudaMemcpyAsync"); }},
      {"memcpy_d2h", 1,
       [=](size_t n) { check(cudaMemcpyAsync(host, a, n, cudaMemcpyDeviceToHost, stream), "cudaMemcpyAsync"); }},
  };
}

/// Times every row at every size (min_bytes, times 4, up to max_bytes) and
/// prints its rate and its ratio to cudaMemcpy's.
void measure(const Options& opt, const std::vector<Row>& rows, cudaStream_t stream) {
  for (size_t n = opt.min_bytes; n <= opt.max_bytes; n *= 4) {
    double memcpy_rate = 0;
    for (const Row& r : rows) {
      const double s = time_it(opt, stream, [&] { r.run(n); });
      const double rate = r.traffic * static_cast<double>(n) / s;
      if (memcpy_rate == 0) memcpy_rate = rate;
      if (opt.csv) {
        std::printf("%zu,%s,%.2f,%.1f,%.3f\n", n, r.name, s * 1e6, rate * 1e-9, rate / memcpy_rate);
      } else {
        std::printf("%14zu  %-14s %12.2f %10.1f %10.3f\n", n, r.name, s * 1e6, rate * 1e-9, rate / memcpy_rate);
      }
    }
    if (n > opt.max_bytes / 4) break;  // no overflow of n *= 4
  }
}

}  // namespace

int main(int argc, char** argv) {
  const Options opt = parse(argc, argv);
  const auto& rt = cuda::runtime_status();
  if (!rt.available) {
    std::fprintf(stderr, "omniccl-cuda-kernel-bench: no CUDA driver/GPU found: %s\n", rt.reason.c_str());
    return 2;
  }
  check(cudaSetDevice(opt.device), "cudaSetDevice");
  print_header(opt);

  Buffers m;
  check(cudaMalloc(&m.a, opt.max_bytes), "cudaMalloc");
  check(cudaMalloc(&m.b, opt.max_bytes), "cudaMalloc");
  check(cudaMalloc(&m.out, opt.max_bytes), "cudaMalloc");
  check(cudaMallocHost(&m.host, opt.max_bytes), "cudaMallocHost");
  // Small finite values in every dtype: 0x3c bytes are 1.0-ish floats.
  check(cudaMemset(m.a, 0x3c, opt.max_bytes), "cudaMemset");
  check(cudaMemset(m.b, 0x3c, opt.max_bytes), "cudaMemset");
  cudaStream_t stream;
  check(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking), "cudaStreamCreate");
  measure(opt, kernel_rows(m, stream), stream);
  check(cudaStreamSynchronize(stream), "cudaStreamSynchronize");
  cudaStreamDestroy(stream);
  cudaFree(m.a);
  cudaFree(m.b);
  cudaFree(m.out);
  cudaFreeHost(m.host);
  return 0;
}
