// GPU kernels (kernels/cuda) against the CPU kernels (kernels/cpu), bit for
// bit: every defined (dtype, op) pair, sizes 0, 1, odd and large, aligned
// and misaligned (the vectorized and the element-wise paths), in place and
// out of place; scale_divide, scale_multiply and copy likewise.
//
// CTest label `gpu`. Without a GPU every test skips, visibly (GTEST_SKIP with
// the reason; CTest reports it as skipped).
#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <ostream>
#include <random>
#include <string>
#include <tuple>
#include <vector>

#include "cuda_test_util.h"
#include "kernels/cpu/reduce.h"
#include "kernels/cuda/reduce.h"
#include "kernels/cuda/runtime.h"
#include "kernels/types.h"

namespace omniccl::kernels {

// Test parameters print as names, not as bytes.
void PrintTo(DType t, std::ostream* os) { *os << dtype_name(t); }
void PrintTo(RedOp op, std::ostream* os) { *os << redop_name(op); }

namespace {

using test::DeviceBuffer;

constexpr DType kAllDTypes[] = {DType::kInt8,    DType::kInt16,        DType::kInt32,     DType::kInt64,
                                DType::kUInt8,   DType::kUInt16,       DType::kUInt32,    DType::kUInt64,
                                DType::kFloat16, DType::kBFloat16,     DType::kFloat32,   DType::kFloat64,
                                DType::kBool,    DType::kFloat8E4M3FN, DType::kFloat8E5M2};
// Complex dtypes and MAXLOC / MINLOC have no CUDA kernels (their reductions
// are staged through host memory): not compared here.
constexpr RedOp kAllOps[] = {RedOp::kSum, RedOp::kProd, RedOp::kMin,       RedOp::kMax,  RedOp::kAvg, RedOp::kBAnd,
                             RedOp::kBOr, RedOp::kBXor, RedOp::kPreMulSum, RedOp::kLAnd, RedOp::kLOr, RedOp::kLXor};
static_assert(std::size(kAllOps) == kNumRedOps - 2);
static_assert(std::size(kAllDTypes) == kNumDTypes - 2);

/// 0, 1, odd, a few vectors plus a tail, and large (> 16 Mi elements for
/// 1-byte types: many grid-stride rounds).
constexpr size_t kSizes[] = {0, 1, 7, 1031, (size_t{1} << 24) + 13};

/// Skips the calling test (returns from it) where there is no GPU.
#define SKIP_WITHOUT_GPU()                                                  \
  do {                                                                      \
    const auto& s_ = cuda::runtime_status();                                \
    if (!s_.available) GTEST_SKIP() << "no GPU here (" << s_.reason << ")"; \
  } while (0)

/// Random bits, with every other element of a floating type a moderate
/// value (random bits are mostly huge, tiny or NaN).
std::vector<unsigned char> make_data(DType t, size_t count, uint64_t seed) {
  const size_t n = dtype_size(t);
  std::vector<unsigned char> data(count * n);
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<float> moderate(-8.0f, 8.0f);
  for (size_t i = 0; i < count; ++i) {
    unsigned char* p = data.data() + i * n;
    const uint64_t bits = rng();
    std::memcpy(p, &bits, n);
    if (!is_floating(t) || i % 2 == 0) continue;
    const float v = moderate(rng);
    switch (t) {
      case DType::kFloat16: {
        const uint16_t h = cpu::float_to_half(v);
        std::memcpy(p, &h, 2);
        break;
      }
      case DType::kBFloat16: {
        const uint16_t h = cpu::float_to_bfloat16(v);
        std::memcpy(p, &h, 2);
        break;
      }
      case DType::kFloat32: std::memcpy(p, &v, 4); break;
      case DType::kFloat64: {
        const double d = v;
        std::memcpy(p, &d, 8);
        break;
      }
      case DType::kFloat8E4M3FN: p[0] = cpu::float_to_fp8_e4m3fn(v); break;
      case DType::kFloat8E5M2: p[0] = cpu::float_to_fp8_e5m2(v); break;
      default: break;
    }
  }
  return data;
}

/// Index of the first differing element, or -1.
long first_mismatch(const std::vector<unsigned char>& got, const std::vector<unsigned char>& want, size_t n) {
  if (got.size() == want.size() && (want.empty() || std::memcmp(got.data(), want.data(), want.size()) == 0)) return -1;
  for (size_t i = 0; i < want.size(); ++i) {
    if (got[i] != want[i]) return static_cast<long>(i / n);
  }
  return -1;
}

/// Copies host bytes to device + offset.
void upload(const DeviceBuffer& d, size_t offset, const std::vector<unsigned char>& h) {
  if (!h.empty()) CUDA_OK(cudaMemcpy(d.get() + offset, h.data(), h.size(), cudaMemcpyHostToDevice));
}

std::vector<unsigned char> download(const DeviceBuffer& d, size_t offset, size_t bytes) {
  std::vector<unsigned char> h(bytes);
  if (bytes > 0) {
    EXPECT_EQ(cudaMemcpy(h.data(), d.get() + offset, bytes, cudaMemcpyDeviceToHost), cudaSuccess);
  }
  return h;
}

/// Every byte of d outside [offset, offset + bytes) still equals `fill`
/// (only those bytes are copied back: the whole buffer is up to 128 MiB).
void expect_untouched(const DeviceBuffer& d, size_t offset, size_t bytes, unsigned char fill) {
  const auto head = download(d, 0, offset);
  const auto tail = download(d, offset + bytes, d.bytes() - offset - bytes);
  for (size_t i = 0; i < head.size(); ++i) EXPECT_EQ(head[i], fill) << "byte " << i;
  for (size_t i = 0; i < tail.size(); ++i) EXPECT_EQ(tail[i], fill) << "byte " << offset + bytes + i;
}

using Pair = std::tuple<DType, RedOp>;

std::vector<Pair> defined_pairs() {
  std::vector<Pair> out;
  for (DType t : kAllDTypes) {
    for (RedOp op : kAllOps) {
      if (is_defined(op, t)) out.emplace_back(t, op);
    }
  }
  return out;
}

class CudaReduce : public ::testing::TestWithParam<Pair> {
 protected:
  void SetUp() override { SKIP_WITHOUT_GPU(); }
};

TEST_P(CudaReduce, MatchesCpuBitForBit) {
  const auto [t, op] = GetParam();
  const size_t n = dtype_size(t);
  cudaStream_t stream = nullptr;
  CUDA_OK(cudaStreamCreate(&stream));
  uint64_t seed = 1;
  for (size_t count : kSizes) {
    // offset 0: every pointer 16-byte aligned (vector path); offset n: only
    // element-aligned (element path).
    for (size_t offset : {size_t{0}, n}) {
      SCOPED_TRACE("count " + std::to_string(count) + " offset " + std::to_string(offset));
      const auto a = make_data(t, count, seed++), b = make_data(t, count, seed++);
      std::vector<unsigned char> want(a.size());
      if (count > 0) cpu::reduce(want.data(), a.data(), b.data(), count, t, op);

      DeviceBuffer da(a.size() + 16), db(b.size() + 16), dout(a.size() + 16);
      ASSERT_NE(da.get(), nullptr);
      upload(da, offset, a);
      upload(db, offset, b);
      CUDA_OK(cudaMemset(dout.get(), 0xa5, dout.bytes()));
      cuda::reduce(dout.get() + offset, da.get() + offset, db.get() + offset, count, t, op, stream);
      CUDA_OK(cudaStreamSynchronize(stream));
      EXPECT_EQ(first_mismatch(download(dout, offset, want.size()), want, n), -1) << "out of place";
      // Nothing written outside [offset, offset + bytes).
      expect_untouched(dout, offset, want.size(), 0xa5);
      // In place: out == a.
      cuda::reduce(da.get() + offset, da.get() + offset, db.get() + offset, count, t, op, stream);
      CUDA_OK(cudaStreamSynchronize(stream));
      EXPECT_EQ(first_mismatch(download(da, offset, want.size()), want, n), -1) << "in place";
    }
  }
  CUDA_OK(cudaStreamDestroy(stream));
}

INSTANTIATE_TEST_SUITE_P(Kernels, CudaReduce, ::testing::ValuesIn(defined_pairs()),
                         [](const ::testing::TestParamInfo<Pair>& info) {
                           return std::string(dtype_name(std::get<0>(info.param))) + "_" +
                                  redop_name(std::get<1>(info.param));
                         });

class CudaScale : public ::testing::TestWithParam<DType> {
 protected:
  void SetUp() override { SKIP_WITHOUT_GPU(); }
};

TEST_P(CudaScale, DivideAndMultiplyMatchCpu) {
  const DType t = GetParam();
  const size_t n = dtype_size(t);
  uint64_t seed = 100;
  for (size_t count : kSizes) {
    for (size_t offset : {size_t{0}, n}) {
      SCOPED_TRACE("count " + std::to_string(count) + " offset " + std::to_string(offset));
      const auto data = make_data(t, count, seed++);
      DeviceBuffer d(data.size() + 16), o(data.size() + 16);
      for (int64_t divisor : {int64_t{3}, int64_t{1000}}) {
        std::vector<unsigned char> want = data;
        cpu::scale_divide(want.data(), count, t, divisor);
        upload(d, offset, data);
        cuda::scale_divide(d.get() + offset, count, t, divisor, nullptr);
        CUDA_OK(cudaDeviceSynchronize());
        EXPECT_EQ(first_mismatch(download(d, offset, data.size()), want, n), -1) << "divide " << divisor;
      }
      for (double s : {0.5, -2.7, 3.0}) {
        std::vector<unsigned char> want(data.size());
        cpu::scale_multiply(want.data(), data.data(), count, t, s);
        upload(d, offset, data);
        cuda::scale_multiply(o.get() + offset, d.get() + offset, count, t, s, nullptr);
        CUDA_OK(cudaDeviceSynchronize());
        EXPECT_EQ(first_mismatch(download(o, offset, data.size()), want, n), -1) << "multiply " << s;
      }
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Kernels, CudaScale,
                         ::testing::Values(DType::kInt8, DType::kInt32, DType::kInt64, DType::kUInt16, DType::kUInt64,
                                           DType::kFloat16, DType::kBFloat16, DType::kFloat32, DType::kFloat64,
                                           DType::kFloat8E4M3FN, DType::kFloat8E5M2),
                         [](const ::testing::TestParamInfo<DType>& info) {
                           return std::string(dtype_name(info.param));
                         });

TEST(CudaCopy, CopiesExactlyTheBytes) {
  SKIP_WITHOUT_GPU();
  for (size_t bytes : {size_t{0}, size_t{1}, size_t{15}, size_t{4099}, (size_t{1} << 26) + 3}) {
    for (size_t offset : {size_t{0}, size_t{1}}) {
      SCOPED_TRACE("bytes " + std::to_string(bytes) + " offset " + std::to_string(offset));
      const auto data = make_data(DType::kUInt8, bytes, bytes + offset);
      DeviceBuffer src(bytes + 16), dst(bytes + 16);
      upload(src, offset, data);
      CUDA_OK(cudaMemset(dst.get(), 0x5a, dst.bytes()));
      cuda::copy(dst.get() + offset, src.get() + offset, bytes, nullptr);
      CUDA_OK(cudaDeviceSynchronize());
      EXPECT_EQ(download(dst, offset, bytes), data);
      expect_untouched(dst, offset, bytes, 0x5a);
    }
  }
}

}  // namespace
}  // namespace omniccl::kernels
