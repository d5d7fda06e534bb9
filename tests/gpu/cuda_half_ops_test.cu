// The device element kernels of kernels/cuda/half_ops.h (float16, bfloat16,
// fp8 through the CUDA headers' conversions) against the CPU kernels of
// kernels/cpu/ops.h and fp8.h, bit for bit, exhaustively: every float16 and
// bfloat16 value against a set of second operands that holds the special
// values (NaNs, +-0, +-Inf, subnormals, the overflow edges), every pair of
// fp8 values of each kind; SUM, PROD, AVG's division, PREMUL_SUM's
// multiplication; the one-element path and the two-at-once (pair) path.
//
// Compiled by nvcc, but run on the host: the functions are __host__
// __device__ and the CUDA headers define the host side of each conversion
// with the same rounding as the device's cvt instructions. No GPU is needed
// (CTest label `unit`); cuda_kernels_test (label `gpu`) compares the GPU
// itself with the CPU where there is one.
#include <gtest/gtest.h>

#include <bit>
#include <cstdint>
#include <cstdio>
#include <limits>
#include <string>
#include <type_traits>
#include <vector>

#include "kernels/cpu/ops.h"
#include "kernels/cuda/half_ops.h"

namespace omniccl::kernels::cuda::detail {
namespace {

namespace cpu = omniccl::kernels::cpu::detail;

/// Counts mismatches and keeps a description of the first one.
struct Mismatches {
  uint64_t count = 0;
  uint64_t checked = 0;
  std::string first;
  void check(const char* what, uint32_t got, uint32_t want, uint32_t a, uint32_t b) {
    ++checked;
    if (got == want) return;
    if (count++ == 0) {
      char buf[160];
      std::snprintf(buf, sizeof buf, "%s(0x%x, 0x%x): device path 0x%x, CPU 0x%x", what, a, b, got, want);
      first = buf;
    }
  }
};

#define EXPECT_NO_MISMATCH(m) \
  EXPECT_EQ((m).count, 0u) << (m).first << " (" << (m).count << " of " << (m).checked << " differ)"

std::vector<uint32_t> all_values(int bits) {
  std::vector<uint32_t> v(size_t{1} << bits);
  for (size_t i = 0; i < v.size(); ++i) v[i] = static_cast<uint32_t>(i);
  return v;
}

/// Second operands for the 16-bit formats (C: cpu::Fp16 or cpu::Bf16): the
/// special values (quiet and signalling NaNs, Inf, the largest finite, the
/// smallest normal, subnormals, zeros) with both signs, values whose sums
/// and products round, overflow or underflow, and a spread of others.
template <class C>
std::vector<uint32_t> second_operands16() {
  std::vector<uint32_t> v;
  const uint32_t inf = C::kInf;
  const uint32_t specials[] = {
      0x0000, 0x0001, 0x0002, 0x03ff, 0x0400, 0x0401, inf - 1, inf, inf + 1, C::kQuietNaN, C::kQuietNaN + 1u, 0x7fff};
  for (uint32_t s : specials) {
    v.push_back(s);
    v.push_back(s | 0x8000u);
  }
  for (float f : {1.0f, 0.5f, 3.0f, 1.0f / 3.0f, 1000.0f, 65504.0f, 65520.0f, 1e-3f, 1e-7f, 6e-8f, 1e30f, 1e-30f}) {
    v.push_back(C::from_float(f));
    v.push_back(C::from_float(-f));
  }
  for (uint32_t x = 7; x < 0x10000u; x += 1021) v.push_back(x);
  return v;
}

/// Binary device kernel D against CPU kernel K: the one-element path for
/// (a, b), the pair path with (a, b) in lane 0 and (b, a) in lane 1.
template <class D, class K>
void check_binary(const char* what, const std::vector<uint32_t>& as, const std::vector<uint32_t>& bs) {
  using Elem = typename D::Elem;
  using Pair = typename D::Pair;
  constexpr int kShift = 8 * sizeof(Elem);
  constexpr uint32_t kMask = (1u << kShift) - 1u;
  const D d{};
  const K k{};
  Mismatches m;
  for (uint32_t a : as) {
    for (uint32_t b : bs) {
      const uint32_t want = k(static_cast<Elem>(a), static_cast<Elem>(b));
      const uint32_t want_rev = k(static_cast<Elem>(b), static_cast<Elem>(a));
      m.check(what, d(static_cast<Elem>(a), static_cast<Elem>(b)), want, a, b);
      const uint32_t p = d.pair(static_cast<Pair>(a | (b << kShift)), static_cast<Pair>(b | (a << kShift)));
      m.check(what, p & kMask, want, a, b);
      m.check(what, p >> kShift, want_rev, b, a);
    }
  }
  EXPECT_NO_MISMATCH(m);
}

/// Unary device kernel D{param} against CPU kernel K{param}, every value
/// in as, one-element and pair paths.
template <class D, class K>
void check_unary(const char* what, const std::vector<uint32_t>& as, const std::vector<float>& params) {
  using Elem = typename D::Elem;
  using Pair = typename D::Pair;
  constexpr int kShift = 8 * sizeof(Elem);
  constexpr uint32_t kMask = (1u << kShift) - 1u;
  Mismatches m;
  for (float param : params) {
    const D d{param};
    const K k{param};
    const uint32_t pbits = std::bit_cast<uint32_t>(param);
    for (size_t i = 0; i < as.size(); ++i) {
      const uint32_t a = as[i];
      const uint32_t b = as[as.size() - 1 - i];
      const uint32_t want = k(static_cast<Elem>(a));
      m.check(what, d(static_cast<Elem>(a)), want, a, pbits);
      const uint32_t p = d.pair(static_cast<Pair>(a | (b << kShift)));
      m.check(what, p & kMask, want, a, pbits);
      m.check(what, p >> kShift, k(static_cast<Elem>(b)), b, pbits);
    }
  }
  EXPECT_NO_MISMATCH(m);
}

constexpr float kInf = std::numeric_limits<float>::infinity();
constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();
// AVG divides by the number of ranks (a positive integer, as float32).
const std::vector<float> kDivisors = {1, 2, 3, 4, 5, 7, 8, 10, 100, 1000, 65535, 16777217.0f, 3e9f};
// PREMUL_SUM's factor: any float32.
const std::vector<float> kScalars = {0.0f, -0.0f,    1.0f,  -1.0f,  0.5f,   3.0f, 1.0f / 3.0f, -7.25f, 1e-3f,
                                     1e4f, 65504.0f, 1e30f, 1e-30f, 1e-45f, kInf, -kInf,       kNaN};

TEST(CudaHalfOps, Float16) {
  const auto as = all_values(16);
  const auto bs = second_operands16<cpu::Fp16>();
  check_binary<Sum<F16>, cpu::HalfSum<cpu::Fp16>>("sum", as, bs);
  check_binary<Prod<F16>, cpu::HalfProd<cpu::Fp16>>("prod", as, bs);
  check_unary<Divide<F16>, cpu::HalfDivide<cpu::Fp16>>("divide", as, kDivisors);
  check_unary<Multiply<F16>, cpu::HalfMultiply<cpu::Fp16>>("multiply", as, kScalars);
}

TEST(CudaHalfOps, BFloat16) {
  const auto as = all_values(16);
  const auto bs = second_operands16<cpu::Bf16>();
  check_binary<Sum<BF16>, cpu::HalfSum<cpu::Bf16>>("sum", as, bs);
  check_binary<Prod<BF16>, cpu::HalfProd<cpu::Bf16>>("prod", as, bs);
  check_unary<Divide<BF16>, cpu::HalfDivide<cpu::Bf16>>("divide", as, kDivisors);
  check_unary<Multiply<BF16>, cpu::HalfMultiply<cpu::Bf16>>("multiply", as, kScalars);
}

TEST(CudaHalfOps, Float8E4M3) {
  const auto as = all_values(8);
  check_binary<Sum<E4M3>, cpu::Fp8Sum<cpu::Fp8E4M3>>("sum", as, as);
  check_binary<Prod<E4M3>, cpu::Fp8Prod<cpu::Fp8E4M3>>("prod", as, as);
  check_unary<Divide<E4M3>, cpu::Fp8Divide<cpu::Fp8E4M3>>("divide", as, kDivisors);
  check_unary<Multiply<E4M3>, cpu::Fp8Multiply<cpu::Fp8E4M3>>("multiply", as, kScalars);
}

TEST(CudaHalfOps, Float8E5M2) {
  const auto as = all_values(8);
  check_binary<Sum<E5M2>, cpu::Fp8Sum<cpu::Fp8E5M2>>("sum", as, as);
  check_binary<Prod<E5M2>, cpu::Fp8Prod<cpu::Fp8E5M2>>("prod", as, as);
  check_unary<Divide<E5M2>, cpu::Fp8Divide<cpu::Fp8E5M2>>("divide", as, kDivisors);
  check_unary<Multiply<E5M2>, cpu::Fp8Multiply<cpu::Fp8E5M2>>("multiply", as, kScalars);
}

/// The conversion of a float32 to fp8 around the edges where the hardware's
/// saturating conversion and fp8.h differ (overflow, Inf, NaN), every
/// float32 with few significant bits from 2^-20 to Inf, both signs.
TEST(CudaHalfOps, Float8FromFloatEdges) {
  Mismatches m;
  for (uint32_t e = 107; e <= 255; ++e) {
    for (uint32_t top = 0; top < 64; ++top) {
      for (uint32_t low : {0u, 1u, 0x3ffu, 0x1ffffu}) {
        const uint32_t bits = (e << 23) | (top << 17) | low;
        for (uint32_t sign : {0u, 0x80000000u}) {
          const float f = std::bit_cast<float>(bits | sign);
          m.check("e4m3", from_float_canonical<E4M3>(f), cpu::Fp8E4M3::from_float_canonical(f), bits | sign, 0);
          m.check("e5m2", from_float_canonical<E5M2>(f), cpu::Fp8E5M2::from_float_canonical(f), bits | sign, 0);
          m.check("f16", from_float_canonical<F16>(f), cpu::Fp16::from_float_canonical(f), bits | sign, 0);
          m.check("bf16", from_float_canonical<BF16>(f), cpu::Bf16::from_float_canonical(f), bits | sign, 0);
        }
      }
    }
  }
  EXPECT_NO_MISMATCH(m);
}

/// dispatch.h's kernels map to these (reduce.cu runs device_kernel(K)).
TEST(CudaHalfOps, DeviceKernelMapping) {
  static_assert(std::is_same_v<decltype(device_kernel(cpu::HalfSum<cpu::Fp16>{})), Sum<F16>>);
  static_assert(std::is_same_v<decltype(device_kernel(cpu::HalfProd<cpu::Bf16>{})), Prod<BF16>>);
  static_assert(std::is_same_v<decltype(device_kernel(cpu::Fp8Sum<cpu::Fp8E4M3>{})), Sum<E4M3>>);
  static_assert(std::is_same_v<decltype(device_kernel(cpu::Fp8Prod<cpu::Fp8E5M2>{})), Prod<E5M2>>);
  static_assert(std::is_same_v<decltype(device_kernel(cpu::HalfMin<cpu::Fp16>{})), cpu::HalfMin<cpu::Fp16>>);
  static_assert(std::is_same_v<decltype(device_kernel(cpu::FloatSum<float>{})), cpu::FloatSum<float>>);
  EXPECT_EQ(device_kernel(cpu::HalfDivide<cpu::Bf16>{3.0f}).divisor, 3.0f);
  EXPECT_EQ(device_kernel(cpu::Fp8Multiply<cpu::Fp8E4M3>{-2.5f}).scalar, -2.5f);
}

}  // namespace
}  // namespace omniccl::kernels::cuda::detail
