// Collectives on CUDA tensors through the C ABI (the staged path,
// core/collective/staging.h), on a real GPU: every operation, every dtype
// and reduce op, 1 to 4 ranks sharing one GPU, against the same call on CPU
// tensors; NCCL's stream semantics (the call returns before the GPU
// finishes, work queued after it on the stream sees the result, a work
// handle's wait covers the copy back); a peer that dies during a CUDA
// operation gives the usual error without holding the stream forever.
// Registered buffers of cudaMalloc memory and of CUDA's virtual memory API
// (cuMemCreate with POSIX descriptors, as PyTorch's expandable segments).
//
// CTest label `gpu`. Without a GPU every test skips, visibly. Whether there
// is one is asked in a child process: a parent that initialised CUDA could
// not use it in the ranks it forks.
#include <cuda.h>  // types only: the test reaches the driver through the runtime
#include <cuda_runtime_api.h>
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <cstdint>
#include <cstring>
#include <functional>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "cuda_test_util.h"
#include "harness.h"
#include "omniccl/omniccl.h"
#include "spin_kernel.h"

namespace omniccl::testing {
namespace {

/// GPUs found by a child process (0 when none or no driver).
int gpus_seen_by_a_child() {
  static const int n = [] {
    const pid_t pid = fork();
    if (pid == 0) {
      int count = 0;
      _exit(cudaGetDeviceCount(&count) == cudaSuccess ? (count > 100 ? 100 : count) : 0);
    }
    int status = 0;
    if (pid < 0 || waitpid(pid, &status, 0) != pid || !WIFEXITED(status)) return 0;
    return WEXITSTATUS(status);
  }();
  return n;
}

#define SKIP_WITHOUT_GPU() \
  if (gpus_seen_by_a_child() == 0) GTEST_SKIP() << "no GPU here (cudaGetDeviceCount found none)"

using DeviceMemory = omniccl::test::DeviceBuffer;

/// A 1-D CUDA DLTensor over device memory.
struct CudaTensor : Tensor1D {
  CudaTensor(void* data, int64_t count, DLDataType dtype) : Tensor1D(data, count, dtype) {
    get()->device = {kDLCUDA, 0};
  }
};

struct DTypeCase {
  const char* name;
  DLDataType dl;
  size_t bytes;
};

const std::vector<DTypeCase>& all_dtypes() {
  static const std::vector<DTypeCase> v = {
      {"int8", dl_int(8), 1},
      {"int16", dl_int(16), 2},
      {"int32", dl_int(32), 4},
      {"int64", dl_int(64), 8},
      {"uint8", dl_uint(8), 1},
      {"uint16", dl_uint(16), 2},
      {"uint32", dl_uint(32), 4},
      {"uint64", dl_uint(64), 8},
      {"float16", dl_float(16), 2},
      {"bfloat16", dl_bfloat16(), 2},
      {"float32", dl_float(32), 4},
      {"float64", dl_float(64), 8},
      {"bool", dl_bool(), 1},
      {"float8_e4m3fn", {kDLFloat8_e4m3fn, 8, 1}, 1},
      {"float8_e5m2", {kDLFloat8_e5m2, 8, 1}, 1},
  };
  return v;
}

/// Random bytes (bool: 0 or 1), the same for a given seed on every run.
std::vector<unsigned char> make_bytes(const DTypeCase& t, size_t count, uint64_t seed) {
  std::vector<unsigned char> b(count * t.bytes);
  std::mt19937_64 rng(seed);
  for (auto& x : b) x = static_cast<unsigned char>(rng());
  if (t.dl.code == kDLBool) {
    for (auto& x : b) x &= 1;
  }
  return b;
}

JobOptions gpu_job(int n) {
  JobOptions o;
  o.nranks = n;
  o.init = "file";
  o.timeout_ms = 60000;
  o.job_timeout_s = 600;
  return o;
}

/// In a rank: makes device 0 current (every rank shares the first GPU).
#define RANK_CUDA(call, rank)                                                                    \
  do {                                                                                           \
    const cudaError_t e_ = (call);                                                               \
    RANK_CHECK(e_ == cudaSuccess, (rank), std::string(#call) + " -> " + cudaGetErrorString(e_)); \
  } while (0)

/// all_reduce of `count` elements on CUDA tensors against the same call on
/// CPU tensors, byte for byte; 0 when equal or when the pair is undefined
/// (then the CUDA call must be refused the same way).
int all_reduce_matches(occl_comm_t comm, int rank, const DTypeCase& t, occl_red_op_t op, size_t count,
                       cudaStream_t stream) {
  const std::vector<unsigned char> in = make_bytes(t, count, 1000 * uint64_t(rank) + count + uint64_t(op));
  std::vector<unsigned char> cpu_out(in.size());
  Tensor1D cs(const_cast<unsigned char*>(in.data()), int64_t(count), t.dl);
  Tensor1D cr(cpu_out.data(), int64_t(count), t.dl);
  const occl_status_t cpu_status = occl_all_reduce(&cs, &cr, op, comm, nullptr);
  DeviceMemory ds(in.size()), dr(in.size());
  RANK_CHECK(ds.ok() && dr.ok() && ds.upload(in), rank, "device buffers");
  CudaTensor gs(ds.get(), int64_t(count), t.dl), gr(dr.get(), int64_t(count), t.dl);
  occl_options_t opts = OCCL_OPTIONS_INIT;
  opts.stream = stream;
  const occl_status_t gpu_status = occl_all_reduce_ex(&gs, &gr, op, comm, &opts, nullptr);
  RANK_CHECK(gpu_status == cpu_status, rank,
             std::string(t.name) + " op " + std::to_string(op) + ": CUDA status " + occl_status_string(gpu_status) +
                 " vs CPU " + occl_status_string(cpu_status));
  if (cpu_status != OCCL_SUCCESS) return 0;
  RANK_CUDA(cudaStreamSynchronize(stream), rank);
  RANK_CHECK(dr.download() == cpu_out, rank,
             std::string(t.name) + " op " + std::to_string(op) + " count " + std::to_string(count) +
                 ": the CUDA result differs from the CPU result");
  return 0;
}

TEST(CudaCollectives, AllReduceEveryDtypeAndOpMatchesCpu) {
  SKIP_WITHOUT_GPU();
  for (int n = 1; n <= 4; ++n) {
    SCOPED_TRACE("ranks " + std::to_string(n));
    JobResult r = run_ranks(gpu_job(n), [](occl_comm_t comm, int rank, int) {
      RANK_CUDA(cudaSetDevice(0), rank);
      cudaStream_t s = nullptr;
      RANK_CUDA(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking), rank);
      for (const DTypeCase& t : all_dtypes()) {
        for (int op = OCCL_SUM; op <= OCCL_PREMUL_SUM; ++op) {
          for (size_t count : {size_t{0}, size_t{1}, size_t{1031}}) {
            if (all_reduce_matches(comm, rank, t, static_cast<occl_red_op_t>(op), count, s) != 0) return 1;
          }
        }
      }
      // >= 64 MiB.
      for (const DTypeCase& t : {all_dtypes()[10], all_dtypes()[9]}) {
        if (all_reduce_matches(comm, rank, t, OCCL_SUM, (size_t{64} << 20) / t.bytes + 3, s) != 0) return 1;
      }
      cudaStreamDestroy(s);
      return 0;
    });
    EXPECT_TRUE(r.ok()) << r.summary();
  }
}

/// Runs `call` on CPU tensors and on CUDA copies of them; compares every
/// buffer afterwards. bufs: (bytes, contents) per buffer; call(ptrs) makes
/// the operation over the given buffer pointers and returns its status.
using BufCall = std::function<occl_status_t(std::vector<void*>& bufs, bool cuda, const occl_options_t* opts)>;
int same_on_cpu_and_cuda(int rank, const std::vector<std::vector<unsigned char>>& init, const BufCall& call,
                         cudaStream_t stream, const char* what) {
  std::vector<std::vector<unsigned char>> cpu = init;
  std::vector<void*> cpu_ptrs;
  for (auto& b : cpu) cpu_ptrs.push_back(b.data());
  // The status first: RANK_CHECK's message may be evaluated before its condition.
  const occl_status_t cpu_status = call(cpu_ptrs, false, nullptr);
  RANK_CHECK(cpu_status == OCCL_SUCCESS, rank, std::string(what) + " on CPU: " + occl_last_error());
  std::vector<std::unique_ptr<DeviceMemory>> dev;
  std::vector<void*> dev_ptrs;
  for (const auto& b : init) {
    dev.push_back(std::make_unique<DeviceMemory>(b.size()));
    RANK_CHECK(dev.back()->ok() && dev.back()->upload(b), rank, "device buffer");
    dev_ptrs.push_back(dev.back()->get());
  }
  occl_options_t opts = OCCL_OPTIONS_INIT;
  opts.stream = stream;
  const occl_status_t gpu_status = call(dev_ptrs, true, &opts);
  RANK_CHECK(gpu_status == OCCL_SUCCESS, rank, std::string(what) + " on CUDA: " + occl_last_error());
  RANK_CUDA(cudaStreamSynchronize(stream), rank);
  for (size_t i = 0; i < init.size(); ++i) {
    RANK_CHECK(dev[i]->download() == cpu[i], rank, std::string(what) + ": buffer " + std::to_string(i) + " differs");
  }
  return 0;
}

/// all_gather, reduce_scatter (`op`) and all_to_all of k elements of t a
/// rank (a block) give the same on CUDA tensors as on CPU tensors (inputs
/// seeded from `seed`).
int blocks_match_cpu(occl_comm_t comm, int rank, int n, const DTypeCase& t, int64_t k, occl_red_op_t op, uint64_t seed,
                     cudaStream_t s) {
  const size_t kb = size_t(k) * t.bytes;
  auto bytes = [&](size_t b, uint64_t sd) { return make_bytes(t, b / t.bytes, sd * 7919 + uint64_t(rank)); };
  auto tensor = [&](void* p, int64_t count, bool cuda) {
    auto tt = std::make_unique<Tensor1D>(p, count, t.dl);
    if (cuda) tt->get()->device = {kDLCUDA, 0};
    return tt;
  };
  const std::string each = " of " + std::to_string(k) + " " + t.name + " a rank";
  if (same_on_cpu_and_cuda(
          rank, {bytes(kb, seed), bytes(kb * size_t(n), seed + 1)},
          [&](std::vector<void*>& b, bool cuda, const occl_options_t* o) {
            auto x = tensor(b[0], k, cuda), y = tensor(b[1], k * n, cuda);
            return occl_all_gather_ex(&*x, &*y, comm, o, nullptr);
          },
          s, ("all_gather" + each).c_str()) != 0)
    return 1;
  if (same_on_cpu_and_cuda(
          rank, {bytes(kb * size_t(n), seed + 2), bytes(kb, seed + 3)},
          [&](std::vector<void*>& b, bool cuda, const occl_options_t* o) {
            auto x = tensor(b[0], k * n, cuda), y = tensor(b[1], k, cuda);
            return occl_reduce_scatter_ex(&*x, &*y, op, comm, o, nullptr);
          },
          s, ("reduce_scatter" + each).c_str()) != 0)
    return 1;
  return same_on_cpu_and_cuda(
      rank, {bytes(kb * size_t(n), seed + 4), bytes(kb * size_t(n), seed + 5)},
      [&](std::vector<void*>& b, bool cuda, const occl_options_t* o) {
        auto x = tensor(b[0], k * n, cuda), y = tensor(b[1], k * n, cuda);
        return occl_all_to_all_ex(&*x, &*y, comm, o, nullptr);
      },
      s, ("all_to_all" + each).c_str());
}

TEST(CudaCollectives, EveryOperationMatchesCpu) {
  SKIP_WITHOUT_GPU();
  for (int n : {2, 3, 4}) {
    SCOPED_TRACE("ranks " + std::to_string(n));
    JobResult r = run_ranks(gpu_job(n), [](occl_comm_t comm, int rank, int n) {
      RANK_CUDA(cudaSetDevice(0), rank);
      cudaStream_t s = nullptr;
      RANK_CUDA(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking), rank);
      const DTypeCase& t = all_dtypes()[2];  // int32
      const int64_t k = 1031;
      const size_t kb = size_t(k) * 4;
      auto bytes = [&](size_t b, uint64_t seed) { return make_bytes(t, b / 4, seed * 7919 + uint64_t(rank)); };
      auto tensor = [&](void* p, int64_t count, bool cuda) {
        auto tt = std::make_unique<Tensor1D>(p, count, t.dl);
        if (cuda) tt->get()->device = {kDLCUDA, 0};
        return tt;
      };
      const int root = n - 1;
      const bool is_root = rank == root;
      if (same_on_cpu_and_cuda(
              rank, {bytes(kb, 1)},
              [&](std::vector<void*>& b, bool cuda, const occl_options_t* o) {
                auto x = tensor(b[0], k, cuda);
                return occl_broadcast_ex(&*x, root, comm, o, nullptr);
              },
              s, "broadcast") != 0)
        return 1;
      if (same_on_cpu_and_cuda(
              rank, {bytes(kb, 2), bytes(kb, 3)},
              [&](std::vector<void*>& b, bool cuda, const occl_options_t* o) {
                auto x = tensor(b[0], k, cuda), y = tensor(b[1], k, cuda);
                return occl_reduce_ex(&*x, &*y, OCCL_SUM, root, comm, o, nullptr);
              },
              s, "reduce") != 0)
        return 1;
      if (blocks_match_cpu(comm, rank, n, t, k, OCCL_MAX, 4, s) != 0) return 1;
      if (same_on_cpu_and_cuda(
              rank, {bytes(kb, 10), bytes(is_root ? kb * size_t(n) : 4, 11)},
              [&](std::vector<void*>& b, bool cuda, const occl_options_t* o) {
                auto x = tensor(b[0], k, cuda), y = tensor(b[1], is_root ? k * n : 1, cuda);
                return occl_gather_ex(&*x, is_root ? &*y : nullptr, root, comm, o, nullptr);
              },
              s, "gather") != 0)
        return 1;
      if (same_on_cpu_and_cuda(
              rank, {bytes(is_root ? kb * size_t(n) : 4, 12), bytes(kb, 13)},
              [&](std::vector<void*>& b, bool cuda, const occl_options_t* o) {
                auto x = tensor(b[0], is_root ? k * n : 1, cuda), y = tensor(b[1], k, cuda);
                return occl_scatter_ex(is_root ? &*x : nullptr, &*y, root, comm, o, nullptr);
              },
              s, "scatter") != 0)
        return 1;
      std::vector<int64_t> counts, displs;
      int64_t total = 0;
      for (int j = 0; j < n; ++j) {
        counts.push_back(j + 1);
        displs.push_back(total + j);  // a gap of j elements before each part
        total += 2 * j + 1;
      }
      if (same_on_cpu_and_cuda(
              rank, {bytes(size_t(rank + 1) * 4, 14), bytes(size_t(total) * 4, 15)},
              [&](std::vector<void*>& b, bool cuda, const occl_options_t* o) {
                auto x = tensor(b[0], rank + 1, cuda), y = tensor(b[1], total, cuda);
                return occl_all_gatherv_ex(&*x, &*y, counts.data(), displs.data(), comm, o, nullptr);
              },
              s, "all_gatherv (the gaps keep their contents)") != 0)
        return 1;
      cudaStreamDestroy(s);
      return 0;
    });
    EXPECT_TRUE(r.ok()) << r.summary();
  }
}

// Large calls in slices (launch_sliced): a communicator made once the ranks'
// GPU is in use (here split off after cudaSetDevice and a context) runs
// calls of 16 MiB or more as 8 MiB slices, copied slice by slice, with
// strided copies for the blocks of all_gather, reduce_scatter and all_to_all. Meant
// for the staged path: registered again as the .staged tests
// (OMNICCL_DEVICE_TRANSPORT=staged), where the CUDA IPC path takes no call.
TEST(CudaCollectives, LargeCallsInSlicesMatchCpu) {
  SKIP_WITHOUT_GPU();
  for (int n : {2, 3}) {
    SCOPED_TRACE("ranks " + std::to_string(n));
    JobResult r = run_ranks(gpu_job(n), [](occl_comm_t comm, int rank, int n) {
      RANK_CUDA(cudaSetDevice(0), rank);
      RANK_CUDA(cudaFree(nullptr), rank);  // a context: the GPU is in use from here
      occl_comm_t sub = nullptr;
      RANK_CHECK(occl_comm_split(comm, 0, rank, nullptr, &sub) == OCCL_SUCCESS, rank, occl_last_error());
      cudaStream_t s = nullptr;
      RANK_CUDA(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking), rank);
      const DTypeCase& t = all_dtypes()[10];  // float32
      if (all_reduce_matches(sub, rank, t, OCCL_SUM, (size_t{40} << 20) / 4 + 3, s) != 0) return 1;
      const int64_t k = (int64_t{12} << 20) / 4 + 7;  // 12 MiB and 28 bytes a rank
      if (blocks_match_cpu(sub, rank, n, t, k, OCCL_SUM, 1, s) != 0) return 1;
      cudaStreamDestroy(s);
      RANK_CHECK(occl_comm_destroy(sub) == OCCL_SUCCESS, rank, occl_last_error());
      return 0;
    });
    EXPECT_TRUE(r.ok()) << r.summary();
  }
}

TEST(CudaCollectives, CallsAreOrderedOnTheStreamAndDoNotBlockTheHost) {
  SKIP_WITHOUT_GPU();
  JobResult r = run_ranks(gpu_job(2), [](occl_comm_t comm, int rank, int) {
    RANK_CUDA(cudaSetDevice(0), rank);
    cudaStream_t s = nullptr;
    RANK_CUDA(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking), rank);
    const int64_t k = 1 << 20;
    std::vector<float> h(static_cast<size_t>(k), float(rank + 1));
    DeviceMemory x(size_t(k) * 4), seen(size_t(k) * 4);
    RANK_CHECK(x.ok() && seen.ok(), rank, "device buffers");
    RANK_CUDA(cudaMemcpy(x.get(), h.data(), h.size() * 4, cudaMemcpyHostToDevice), rank);
    RANK_CUDA(cudaDeviceSynchronize(), rank);                     // the bytes are on the device before s reads them
    RANK_CUDA(omniccl::test::launch_spin(s, 500'000'000), rank);  // the GPU is busy for 0.5 s
    CudaTensor t(x.get(), k, dl_float(32));
    occl_options_t opts = OCCL_OPTIONS_INIT;
    opts.stream = s;
    const auto t0 = std::chrono::steady_clock::now();
    RANK_OK(occl_all_reduce_ex(&t, &t, OCCL_SUM, comm, &opts, nullptr), rank);
    const double took = seconds_since(t0);
    RANK_CHECK(took < 0.4, rank, "the call returned without waiting for the GPU (took " + std::to_string(took) + " s)");
    RANK_CHECK(cudaStreamQuery(s) == cudaErrorNotReady, rank, "the stream has not finished when the call returns");
    // Work queued after the call sees its result.
    RANK_CUDA(cudaMemcpyAsync(seen.get(), x.get(), size_t(k) * 4, cudaMemcpyDeviceToDevice, s), rank);
    RANK_CUDA(cudaStreamSynchronize(s), rank);
    std::vector<float> out(static_cast<size_t>(k));
    RANK_CUDA(cudaMemcpy(out.data(), seen.get(), out.size() * 4, cudaMemcpyDeviceToHost), rank);
    RANK_CHECK(out[0] == 3.0f && out[size_t(k) - 1] == 3.0f, rank, "work after the call saw the sum");
    // An async call's wait covers the copy back to the device.
    occl_work_t work = nullptr;
    RANK_OK(occl_all_reduce_ex(&t, &t, OCCL_SUM, comm, &opts, &work), rank);
    RANK_OK(occl_work_wait(work), rank);
    occl_work_free(work);
    cudaStream_t other = nullptr;
    RANK_CUDA(cudaStreamCreateWithFlags(&other, cudaStreamNonBlocking), rank);
    RANK_CUDA(cudaMemcpyAsync(out.data(), x.get(), out.size() * 4, cudaMemcpyDeviceToHost, other), rank);
    RANK_CUDA(cudaStreamSynchronize(other), rank);
    RANK_CHECK(out[0] == 6.0f, rank, "after occl_work_wait the result is on the device");
    cudaStreamDestroy(other);
    cudaStreamDestroy(s);
    return 0;
  });
  EXPECT_TRUE(r.ok()) << r.summary();
}

TEST(CudaCollectives, APeerThatDiesGivesTheUsualErrorAndReleasesTheStream) {
  SKIP_WITHOUT_GPU();
  JobOptions o = gpu_job(2);
  o.timeout_ms = 5000;
  JobResult r = run_ranks(o, [](occl_comm_t comm, int rank, int) {
    if (rank == 1) _exit(0);
    RANK_CUDA(cudaSetDevice(0), rank);
    cudaStream_t s = nullptr;
    RANK_CUDA(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking), rank);
    DeviceMemory x(4096);
    RANK_CHECK(x.ok(), rank, "device buffer");
    CudaTensor t(x.get(), 1024, dl_float(32));
    occl_options_t opts = OCCL_OPTIONS_INIT;
    opts.stream = s;
    RANK_OK(occl_all_reduce_ex(&t, &t, OCCL_SUM, comm, &opts, nullptr), rank);
    const auto t0 = std::chrono::steady_clock::now();
    RANK_CUDA(cudaStreamSynchronize(s), rank);
    RANK_CHECK(seconds_since(t0) < 10, rank, "the stream was released within 10 s");
    occl_status_t async = OCCL_SUCCESS;
    for (int i = 0; i < 400 && async == OCCL_SUCCESS; ++i) {
      RANK_OK(occl_comm_get_async_error(comm, &async), rank);
      if (async == OCCL_SUCCESS) usleep(25000);
    }
    RANK_CHECK(async == OCCL_ERR_PEER_FAILURE, rank,
               std::string("the communicator's error is a peer failure: ") + occl_status_string(async));
    cudaStreamDestroy(s);
    return 0;
  });
  EXPECT_TRUE(r.ok()) << r.summary();
}

// Send and receive on CUDA tensors: messages of one and of many slots (or
// pieces) arrive in order, on the CUDA IPC path (forced by the .cuda_ipc
// run; `auto` may or may not take it here) and on the staged path (the
// .staged run). There a receive's count is an upper bound, as on the CPU
// path: a shorter message leaves the rest of the tensor as it was (the CUDA
// IPC path requires the sender's size instead). mrecv of a probed message
// into GPU memory, staged on either.
TEST(CudaCollectives, SendAndRecvOnCudaTensors) {
  SKIP_WITHOUT_GPU();
  const char* mode = std::getenv("OMNICCL_DEVICE_TRANSPORT");
  const bool staged = mode != nullptr && std::string(mode) == "staged";
  JobResult r = run_ranks(gpu_job(2), [staged](occl_comm_t comm, int rank, int) {
    RANK_CUDA(cudaSetDevice(0), rank);
    cudaStream_t s = nullptr;
    RANK_CUDA(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking), rank);
    const int64_t counts[2] = {3, 3 << 20};  // 12 bytes, and 12 MiB: many slots
    occl_options_t opts = OCCL_OPTIONS_INIT;
    opts.stream = s;
    for (int64_t k : counts) {
      std::vector<int32_t> host(static_cast<size_t>(k));
      for (int64_t i = 0; i < k; ++i) host[size_t(i)] = int32_t(i * 3 + 1);
      DeviceMemory x(size_t(k) * 4);
      RANK_CHECK(x.ok(), rank, "device buffer");
      if (rank == 0) RANK_CUDA(cudaMemcpy(x.get(), host.data(), size_t(k) * 4, cudaMemcpyHostToDevice), rank);
      CudaTensor t(x.get(), k, dl_int(32));
      RANK_OK(rank == 0 ? occl_send_ex(&t, 1, comm, &opts, nullptr) : occl_recv_ex(&t, 0, comm, &opts, nullptr), rank);
      RANK_CUDA(cudaStreamSynchronize(s), rank);
      std::vector<int32_t> back(static_cast<size_t>(k));
      RANK_CUDA(cudaMemcpy(back.data(), x.get(), size_t(k) * 4, cudaMemcpyDeviceToHost), rank);
      RANK_CHECK(back == host, rank, "the message arrived whole, " + std::to_string(k) + " elements");
    }
    {  // a host message, probed from any source, then received into GPU memory (staged on either path)
      std::vector<int32_t> host = {5, 6, 7, 8};
      DeviceMemory x(host.size() * 4);
      RANK_CHECK(x.ok(), rank, "device buffer");
      if (rank == 0) {
        Tensor1D h(host.data(), int64_t(host.size()), dl_int(32));
        RANK_OK(occl_send_tagged(&h, 1, 9, comm, nullptr, nullptr), rank);
      } else {
        occl_message_t m = OCCL_MESSAGE_NULL;
        occl_recv_status_t st;
        RANK_OK(occl_mprobe(OCCL_ANY_SOURCE, 9, comm, nullptr, &m, &st), rank);
        CudaTensor t(x.get(), int64_t(host.size()), dl_int(32));
        RANK_OK(occl_mrecv(&t, &m, comm, &opts, &st, nullptr), rank);
        RANK_CUDA(cudaStreamSynchronize(s), rank);
        std::vector<int32_t> back(host.size());
        RANK_CUDA(cudaMemcpy(back.data(), x.get(), back.size() * 4, cudaMemcpyDeviceToHost), rank);
        RANK_CHECK(back == host && m == OCCL_MESSAGE_NULL, rank, "mrecv into GPU memory");
      }
    }
    if (staged) {
      const std::vector<int32_t> sent = {1, 4, 7}, want = {1, 4, 7, -1, -1, -1, -1, -1};
      std::vector<int32_t> held(8, -1);
      DeviceMemory x(held.size() * 4);
      RANK_CHECK(x.ok(), rank, "device buffer");
      const std::vector<int32_t>& up = rank == 0 ? sent : held;
      RANK_CUDA(cudaMemcpy(x.get(), up.data(), up.size() * 4, cudaMemcpyHostToDevice), rank);
      CudaTensor t(x.get(), rank == 0 ? 3 : 8, dl_int(32));
      RANK_OK(rank == 0 ? occl_send_ex(&t, 1, comm, &opts, nullptr) : occl_recv_ex(&t, 0, comm, &opts, nullptr), rank);
      RANK_CUDA(cudaStreamSynchronize(s), rank);
      RANK_CUDA(cudaMemcpy(held.data(), x.get(), held.size() * 4, cudaMemcpyDeviceToHost), rank);
      RANK_CHECK(rank == 0 || held == want, rank, "3 of 8 elements arrived, the other 5 kept their -1");
    }
    cudaStreamDestroy(s);
    return 0;
  });
  EXPECT_TRUE(r.ok()) << r.summary();
}

// Registered buffers: one allocation carved into an input and an output,
// registered on every rank; all_reduce one-shot and two-shot (and in place)
// and all_gather read the peers in place on the CUDA IPC path (the staged
// path registers nothing and gives the same results); then deregistered.
TEST(CudaCollectives, RegisteredBuffersGiveTheSameResults) {
  SKIP_WITHOUT_GPU();
  JobResult r = run_ranks(gpu_job(2), [](occl_comm_t comm, int rank, int n) {
    RANK_CUDA(cudaSetDevice(0), rank);
    const int64_t big = int64_t(1) << 20;  // 4 MiB of float: two-shot
    DeviceMemory mem(size_t(big) * 4 * 3);
    RANK_CHECK(mem.ok(), rank, "device buffer");
    auto* in = reinterpret_cast<float*>(mem.get());
    float* out = in + big;
    occl_window_t w = OCCL_WINDOW_NULL;
    RANK_OK(occl_comm_window_register(comm, mem.get(), size_t(big) * 4 * 3, &w), rank);
    for (int64_t k : {int64_t(5), big}) {
      std::vector<float> host(static_cast<size_t>(k), float(rank + 1));
      RANK_CUDA(cudaMemcpy(in, host.data(), size_t(k) * 4, cudaMemcpyHostToDevice), rank);
      CudaTensor ti(in, k, dl_float(32)), to(out, k, dl_float(32));
      RANK_OK(occl_all_reduce(&ti, &to, OCCL_SUM, comm, nullptr), rank);
      RANK_OK(occl_all_reduce(&ti, &ti, OCCL_MAX, comm, nullptr), rank);
      RANK_CUDA(cudaDeviceSynchronize(), rank);
      std::vector<float> sum(static_cast<size_t>(k)), mx(static_cast<size_t>(k));
      RANK_CUDA(cudaMemcpy(sum.data(), out, size_t(k) * 4, cudaMemcpyDeviceToHost), rank);
      RANK_CUDA(cudaMemcpy(mx.data(), in, size_t(k) * 4, cudaMemcpyDeviceToHost), rank);
      RANK_CHECK(sum == std::vector<float>(size_t(k), float(n * (n + 1) / 2)), rank, "registered all_reduce sum");
      RANK_CHECK(mx == std::vector<float>(size_t(k), float(n)), rank, "registered in-place all_reduce max");
    }
    CudaTensor mine(in, 3, dl_float(32)), all(out, 3 * n, dl_float(32));
    RANK_OK(occl_all_gather(&mine, &all, comm, nullptr), rank);
    RANK_CUDA(cudaDeviceSynchronize(), rank);
    std::vector<float> got(size_t(3 * n));
    RANK_CUDA(cudaMemcpy(got.data(), out, got.size() * 4, cudaMemcpyDeviceToHost), rank);
    RANK_CHECK(got == std::vector<float>(size_t(3 * n), float(n)), rank, "registered all_gather");
    RANK_OK(occl_comm_window_deregister(comm, &w), rank);
    RANK_CHECK(w == OCCL_WINDOW_NULL, rank, "the handle was cleared");
    return 0;
  });
  EXPECT_TRUE(r.ok()) << r.summary();
}

/// Device memory of CUDA's virtual memory API, made as PyTorch's expandable
/// segments make theirs: cuMemCreate with the POSIX descriptor handle type,
/// reserved, mapped and made read/write for device 0. The driver is reached
/// through the runtime (nothing links libcuda). ok() is false where the
/// driver or the device refuses.
class VmmBuffer {
 public:
  explicit VmmBuffer(size_t bytes) {
    if (!api_.ok) return;
    CUmemAllocationProp prop{};
    prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
    prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    prop.location.id = 0;
    prop.requestedHandleTypes = CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR;
    size_t g = 0;
    if (api_.granularity(&g, &prop, CU_MEM_ALLOC_GRANULARITY_MINIMUM) != CUDA_SUCCESS || g == 0) return;
    bytes_ = (bytes + g - 1) / g * g;
    if (api_.create(&handle_, bytes_, &prop, 0) != CUDA_SUCCESS) return;
    created_ = true;
    if (api_.reserve(&ptr_, bytes_, g, 0, 0) != CUDA_SUCCESS) return;
    if (api_.map(ptr_, bytes_, 0, handle_, 0) != CUDA_SUCCESS) return;
    mapped_ = true;
    CUmemAccessDesc access{};
    access.location = prop.location;
    access.flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
    ok_ = api_.set_access(ptr_, bytes_, &access, 1) == CUDA_SUCCESS;
  }
  ~VmmBuffer() {
    if (mapped_) api_.unmap(ptr_, bytes_);
    if (ptr_ != 0) api_.address_free(ptr_, bytes_);
    if (created_) api_.release(handle_);
  }
  VmmBuffer(const VmmBuffer&) = delete;
  VmmBuffer& operator=(const VmmBuffer&) = delete;
  bool ok() const { return ok_; }
  float* floats() const { return reinterpret_cast<float*>(ptr_); }
  size_t bytes() const { return bytes_; }

 private:
  struct Api {
    CUresult (*granularity)(size_t*, const CUmemAllocationProp*, CUmemAllocationGranularity_flags) = nullptr;
    CUresult (*create)(CUmemGenericAllocationHandle*, size_t, const CUmemAllocationProp*, unsigned long long) = nullptr;
    CUresult (*release)(CUmemGenericAllocationHandle) = nullptr;
    CUresult (*reserve)(CUdeviceptr*, size_t, size_t, CUdeviceptr, unsigned long long) = nullptr;
    CUresult (*address_free)(CUdeviceptr, size_t) = nullptr;
    CUresult (*map)(CUdeviceptr, size_t, size_t, CUmemGenericAllocationHandle, unsigned long long) = nullptr;
    CUresult (*unmap)(CUdeviceptr, size_t) = nullptr;
    CUresult (*set_access)(CUdeviceptr, size_t, const CUmemAccessDesc*, size_t) = nullptr;
    bool ok = false;
    Api() {
      ok = find(granularity, "cuMemGetAllocationGranularity") && find(create, "cuMemCreate") &&
           find(release, "cuMemRelease") && find(reserve, "cuMemAddressReserve") &&
           find(address_free, "cuMemAddressFree") && find(map, "cuMemMap") && find(unmap, "cuMemUnmap") &&
           find(set_access, "cuMemSetAccess");
    }
    template <typename Fn>
    static bool find(Fn& fn, const char* name) {
      void* p = nullptr;
      cudaDriverEntryPointQueryResult q{};
      if (cudaGetDriverEntryPointByVersion(name, &p, 12000, cudaEnableDefault, &q) != cudaSuccess ||
          q != cudaDriverEntryPointSuccess) {
        return false;
      }
      fn = reinterpret_cast<Fn>(p);
      return true;
    }
  };
  Api api_;
  CUmemGenericAllocationHandle handle_ = 0;
  CUdeviceptr ptr_ = 0;
  size_t bytes_ = 0;
  bool created_ = false, mapped_ = false, ok_ = false;
};

// Registered VMM buffers, twice: the second allocation is made after the
// first was freed (very likely at the same address), so a peer that served
// it from a stale mapping would read the first one's values.
TEST(CudaCollectives, RegisteredVmmBuffersGiveTheSameResults) {
  SKIP_WITHOUT_GPU();
  JobResult r = run_ranks(gpu_job(2), [](occl_comm_t comm, int rank, int n) {
    RANK_CUDA(cudaSetDevice(0), rank);
    const int64_t k = 1000;
    for (int round = 0; round < 2; ++round) {
      VmmBuffer mem(size_t(k) * 4 * 2);
      RANK_CHECK(mem.ok(), rank, "cuMemCreate memory with a POSIX descriptor handle");
      float* in = mem.floats();
      float* out = in + k;
      occl_window_t w = OCCL_WINDOW_NULL;
      RANK_OK(occl_comm_window_register(comm, in, size_t(k) * 4 * 2, &w), rank);
      std::vector<float> host(static_cast<size_t>(k), float(rank + 1 + 10 * round));
      RANK_CUDA(cudaMemcpy(in, host.data(), size_t(k) * 4, cudaMemcpyHostToDevice), rank);
      CudaTensor ti(in, k, dl_float(32)), to(out, k, dl_float(32));
      RANK_OK(occl_all_reduce(&ti, &to, OCCL_SUM, comm, nullptr), rank);
      RANK_CUDA(cudaDeviceSynchronize(), rank);
      std::vector<float> sum(static_cast<size_t>(k));
      RANK_CUDA(cudaMemcpy(sum.data(), out, size_t(k) * 4, cudaMemcpyDeviceToHost), rank);
      const float want = float(n * (n + 1) / 2 + 10 * round * n);
      RANK_CHECK(sum == std::vector<float>(size_t(k), want), rank, "registered VMM all_reduce sum");
      RANK_OK(occl_comm_window_deregister(comm, &w), rank);
    }
    return 0;
  });
  EXPECT_TRUE(r.ok()) << r.summary();
}

}  // namespace
}  // namespace omniccl::testing
