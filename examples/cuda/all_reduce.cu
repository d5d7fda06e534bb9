/*
 * all_reduce on GPU memory, ordered on a CUDA stream (NCCL's contract).
 *
 * Every rank fills 1 Mi floats on its GPU with rank + 1, sums them over the
 * ranks on a stream of its own, then runs a kernel on the same stream that
 * doubles the result: the kernel sees the sum without any host
 * synchronisation in between, and the host is free while the GPU works.
 * Ranks share GPUs (rank r uses GPU r % count), so it runs on one GPU.
 *
 *   omniccl-run -n 4 ./all_reduce_cuda
 *
 * Without a GPU it prints why and exits with status 77 (skipped).
 *
 * Output with 4 ranks:
 *   rank 0: the sum is 10 on every element; doubled on the same stream: 20
 *   rank 1: the sum is 10 on every element; doubled on the same stream: 20
 *   rank 2: the sum is 10 on every element; doubled on the same stream: 20
 *   rank 3: the sum is 10 on every element; doubled on the same stream: 20
 */
#include <cuda_runtime_api.h>
#include <omniccl/omniccl.h>

#include <cstdio>
#include <vector>

namespace {

constexpr int64_t kCount = 1 << 20;

__global__ void fill(float* x, int64_t n, float v) {
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n; i += int64_t(gridDim.x) * blockDim.x)
    x[i] = v;
}

__global__ void twice(float* x, int64_t n) {
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n; i += int64_t(gridDim.x) * blockDim.x)
    x[i] *= 2;
}

int fail_cuda(cudaError_t e, const char* what) {
  std::fprintf(stderr, "%s: %s\n", what, cudaGetErrorString(e));
  return 1;
}

int fail_occl(occl_status_t s, const char* what) {
  std::fprintf(stderr, "%s: %s: %s\n", what, occl_status_string(s), occl_last_error());
  return 1;
}

}  // namespace

int main() {
  int gpus = 0;
  if (cudaGetDeviceCount(&gpus) != cudaSuccess || gpus == 0) {
    std::printf("SKIPPED: no GPU here (cudaGetDeviceCount found none)\n");
    return 77;
  }
  occl_comm_t comm = nullptr;
  occl_status_t s = occl_comm_init(&comm, "env://", OCCL_FROM_ENV, OCCL_FROM_ENV, nullptr);
  if (s != OCCL_SUCCESS) return fail_occl(s, "occl_comm_init");
  int rank = 0;
  occl_comm_rank(comm, &rank);

  cudaError_t e = cudaSetDevice(rank % gpus);
  if (e != cudaSuccess) return fail_cuda(e, "cudaSetDevice");
  cudaStream_t stream = nullptr;
  if ((e = cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking)) != cudaSuccess) {
    return fail_cuda(e, "cudaStreamCreate");
  }
  float* x = nullptr;
  if ((e = cudaMalloc(&x, kCount * sizeof(float))) != cudaSuccess) return fail_cuda(e, "cudaMalloc");

  // A CUDA DLTensor: device memory of this rank's GPU.
  int64_t shape[1] = {kCount};
  DLTensor t = {};
  t.data = x;
  t.device = {kDLCUDA, rank % gpus};
  t.ndim = 1;
  t.dtype = {kDLFloat, 32, 1};
  t.shape = shape;

  fill<<<256, 256, 0, stream>>>(x, kCount, float(rank + 1));
  occl_options_t opts = OCCL_OPTIONS_INIT;
  opts.stream = stream;
  // Enqueued on the stream after fill; returns without waiting for the GPU.
  s = occl_all_reduce_ex(&t, &t, OCCL_SUM, comm, &opts, nullptr);
  if (s != OCCL_SUCCESS) return fail_occl(s, "occl_all_reduce_ex");
  std::vector<float> sum(kCount), doubled(kCount);
  // Queued after the all_reduce: a copy of the sum, then the kernel.
  cudaMemcpyAsync(sum.data(), x, kCount * sizeof(float), cudaMemcpyDeviceToHost, stream);
  twice<<<256, 256, 0, stream>>>(x, kCount);
  cudaMemcpyAsync(doubled.data(), x, kCount * sizeof(float), cudaMemcpyDeviceToHost, stream);
  if ((e = cudaStreamSynchronize(stream)) != cudaSuccess) return fail_cuda(e, "cudaStreamSynchronize");
  // An error of the operation itself (a peer that failed) is the
  // communicator's asynchronous error.
  occl_status_t async = OCCL_SUCCESS;
  occl_comm_get_async_error(comm, &async);
  if (async != OCCL_SUCCESS) return fail_occl(async, "all_reduce");

  bool ok = true;
  for (int64_t i = 0; i < kCount; ++i) ok = ok && sum[i] == 10.0f && doubled[i] == 20.0f;
  std::printf("rank %d: the sum is %g on every element; doubled on the same stream: %g\n", rank, sum[0], doubled[0]);
  cudaFree(x);
  cudaStreamDestroy(stream);
  occl_comm_destroy(comm);
  return ok ? 0 : 1;
}
