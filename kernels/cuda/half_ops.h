// Device element kernels for float16, bfloat16 and fp8 (e4m3fn, e5m2): the
// conversions go through the official CUDA types and intrinsics
// (cuda_fp16.h, cuda_bf16.h, cuda_fp8.h), which on sm_89+ are single
// hardware cvt instructions converting two elements at once, instead of the
// integer arithmetic of kernels/cpu/half.h and fp8.h. Only the conversions
// change: the arithmetic is the float32 arithmetic of the CPU kernels
// (ops.h, fp8.h), one rounding back, canonical NaN. So the results are the
// CPU's bit for bit:
//  - float16/bfloat16/fp8 -> float32 is exact either way (NaN payloads may
//    differ, but every NaN result is replaced by the canonical NaN).
//  - float32 -> float16/bfloat16 is round-to-nearest-even with overflow to
//    Inf in both (cvt.rn.f16x2.f32, cvt.rn.bf16x2.f32).
//  - float32 -> fp8: the hardware only has the saturating conversion
//    (cvt.rn.satfinite; __NV_NOSAT is emulated in software, slowly), which
//    rounds to nearest even like fp8.h but clamps overflow and Inf to the
//    largest finite value. fp8.h does not saturate: e5m2 gives +-Inf from
//    61440 up, e4m3fn gives NaN above 464. Those cases are selected after
//    the conversion with the same comparisons on the float32 bits as fp8.h.
// Packed __hadd2 / __hmul2 would skip the conversions, but are rounded
// once from the exact result, where the CPU rounds twice (to float32, then
// to the small format); that double rounding is innocuous here (float32 has
// at least 2p + 2 bits), but this file keeps the CPU's operations so that
// equality holds by construction.
//
// The float32 arithmetic must keep subnormals, as the CPU's does (bfloat16
// subnormals are float32 subnormals): nvcc's default; never build these with
// -use_fast_math or -ftz=true.
//
// MIN / MAX need no conversion (ops.h compares the bits): the CPU kernels
// stay. Everything here is __host__ __device__ under nvcc, so a CPU-only
// test compares it with the CPU kernels exhaustively
// (tests/gpu/cuda_half_ops_test.cu).
//
// Words used here:
//  - format F: one of F16, BF16, E4M3, E5M2 below, with `Elem` (the storage
//    type), `Pair` (two elements, element 0 in the low bits) and
//    to_float2 / from_float2_canonical.
//  - pair kernel: an element kernel (ops.h) that also has `Pair pair(Pair,
//    Pair)` (binary) or `Pair pair(Pair)` (unary); reduce.cu uses it on
//    whole vectors.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_fp8.h>

#include <bit>
#include <cstdint>

#include "kernels/cpu/ops.h"
#include "kernels/hd.h"

namespace omniccl::kernels::cuda::detail {

/// Each half of w: x, or qnan where x (sign cleared) is above inf.
OMNICCL_HD uint32_t canonical_nan16x2(uint32_t w, uint32_t inf, uint32_t qnan) {
  const uint32_t lo = w & 0xffffu;
  const uint32_t hi = w >> 16;
  const uint32_t rlo = (lo & 0x7fffu) > inf ? qnan : lo;
  const uint32_t rhi = (hi & 0x7fffu) > inf ? qnan : hi;
  return rlo | (rhi << 16);
}

struct F16 {
  using Elem = uint16_t;
  using Pair = uint32_t;
  OMNICCL_HD static float2 to_float2(Pair p) {
    __half2_raw r;
    r.x = static_cast<unsigned short>(p & 0xffffu);
    r.y = static_cast<unsigned short>(p >> 16);
    return __half22float2(__half2(r));
  }
  OMNICCL_HD static Pair from_float2_canonical(float2 f) {
    const __half2_raw r = __float22half2_rn(f);
    const uint32_t w = uint32_t{r.x} | (uint32_t{r.y} << 16);
    return canonical_nan16x2(w, cpu::detail::Fp16::kInf, cpu::detail::Fp16::kQuietNaN);
  }
};

struct BF16 {
  using Elem = uint16_t;
  using Pair = uint32_t;
  OMNICCL_HD static float2 to_float2(Pair p) {
    __nv_bfloat162_raw r;
    r.x = static_cast<unsigned short>(p & 0xffffu);
    r.y = static_cast<unsigned short>(p >> 16);
    return __bfloat1622float2(__nv_bfloat162(r));
  }
  OMNICCL_HD static Pair from_float2_canonical(float2 f) {
    const __nv_bfloat162_raw r = __float22bfloat162_rn(f);
    const uint32_t w = uint32_t{r.x} | (uint32_t{r.y} << 16);
    return canonical_nan16x2(w, cpu::detail::Bf16::kInf, cpu::detail::Bf16::kQuietNaN);
  }
};

/// fp8 bits -> float32 through the exact fp8x2 -> half2 conversion.
template <__nv_fp8_interpretation_t kKind>
OMNICCL_HD float2 fp8x2_to_float2(uint16_t p) {
  return __half22float2(__half2(__nv_cvt_fp8x2_to_halfraw2(p, kKind)));
}

/// float32 (bits u, sign cleared) -> e4m3fn, given the saturating
/// conversion's byte b: NaN above 464 (and for Inf, NaN), as fp8.h; the
/// NaN is the canonical one.
OMNICCL_HD uint32_t e4m3_unsaturate(uint32_t u, uint32_t b) {
  return u > 0x43e80000u ? uint32_t{cpu::detail::Fp8E4M3::kQuietNaN} : b;
}

/// float32 (bits with sign) -> e5m2, given the saturating conversion's byte
/// b: canonical NaN for NaN, +-Inf from 61440 up (and for +-Inf), as fp8.h.
OMNICCL_HD uint32_t e5m2_unsaturate(uint32_t bits, uint32_t b) {
  const uint32_t u = bits & 0x7fffffffu;
  const uint32_t inf = 0x7cu | ((bits >> 24) & 0x80u);
  const uint32_t r = u >= 0x47700000u ? inf : b;
  return u > 0x7f800000u ? uint32_t{cpu::detail::Fp8E5M2::kQuietNaN} : r;
}

struct E4M3 {
  using Elem = uint8_t;
  using Pair = uint16_t;
  OMNICCL_HD static float2 to_float2(Pair p) { return fp8x2_to_float2<__NV_E4M3>(p); }
  OMNICCL_HD static Pair from_float2_canonical(float2 f) {
    const uint32_t s = __nv_cvt_float2_to_fp8x2(f, __NV_SATFINITE, __NV_E4M3);
    const uint32_t lo = e4m3_unsaturate(std::bit_cast<uint32_t>(f.x) & 0x7fffffffu, s & 0xffu);
    const uint32_t hi = e4m3_unsaturate(std::bit_cast<uint32_t>(f.y) & 0x7fffffffu, s >> 8);
    return static_cast<Pair>(lo | (hi << 8));
  }
};

struct E5M2 {
  using Elem = uint8_t;
  using Pair = uint16_t;
  OMNICCL_HD static float2 to_float2(Pair p) { return fp8x2_to_float2<__NV_E5M2>(p); }
  OMNICCL_HD static Pair from_float2_canonical(float2 f) {
    const uint32_t s = __nv_cvt_float2_to_fp8x2(f, __NV_SATFINITE, __NV_E5M2);
    const uint32_t lo = e5m2_unsaturate(std::bit_cast<uint32_t>(f.x), s & 0xffu);
    const uint32_t hi = e5m2_unsaturate(std::bit_cast<uint32_t>(f.y), s >> 8);
    return static_cast<Pair>(lo | (hi << 8));
  }
};

/// One element through the pair conversions (the tails of the kernels).
template <class F>
OMNICCL_HD float to_float(typename F::Elem e) {
  return F::to_float2(static_cast<typename F::Pair>(e)).x;
}

template <class F>
OMNICCL_HD typename F::Elem from_float_canonical(float f) {
  return static_cast<typename F::Elem>(F::from_float2_canonical(float2{f, 0.0f}));
}

/// Sum in float32, one rounding, canonical NaN (HalfSum / Fp8Sum).
template <class F>
struct Sum {
  using Elem = typename F::Elem;
  using Pair = typename F::Pair;
  OMNICCL_HD Elem operator()(Elem a, Elem b) const { return from_float_canonical<F>(to_float<F>(a) + to_float<F>(b)); }
  OMNICCL_HD Pair pair(Pair a, Pair b) const {
    const float2 x = F::to_float2(a);
    const float2 y = F::to_float2(b);
    return F::from_float2_canonical(float2{x.x + y.x, x.y + y.y});
  }
};

/// HalfProd / Fp8Prod.
template <class F>
struct Prod {
  using Elem = typename F::Elem;
  using Pair = typename F::Pair;
  OMNICCL_HD Elem operator()(Elem a, Elem b) const { return from_float_canonical<F>(to_float<F>(a) * to_float<F>(b)); }
  OMNICCL_HD Pair pair(Pair a, Pair b) const {
    const float2 x = F::to_float2(a);
    const float2 y = F::to_float2(b);
    return F::from_float2_canonical(float2{x.x * y.x, x.y * y.y});
  }
};

/// AVG finalisation (HalfDivide / Fp8Divide).
template <class F>
struct Divide {
  using Elem = typename F::Elem;
  using Pair = typename F::Pair;
  float divisor;
  OMNICCL_HD Elem operator()(Elem x) const { return from_float_canonical<F>(to_float<F>(x) / divisor); }
  OMNICCL_HD Pair pair(Pair p) const {
    const float2 x = F::to_float2(p);
    return F::from_float2_canonical(float2{x.x / divisor, x.y / divisor});
  }
};

/// PREMUL_SUM pre-multiplication (HalfMultiply / Fp8Multiply).
template <class F>
struct Multiply {
  using Elem = typename F::Elem;
  using Pair = typename F::Pair;
  float scalar;
  OMNICCL_HD Elem operator()(Elem x) const { return from_float_canonical<F>(to_float<F>(x) * scalar); }
  OMNICCL_HD Pair pair(Pair p) const {
    const float2 x = F::to_float2(p);
    return F::from_float2_canonical(float2{x.x * scalar, x.y * scalar});
  }
};

/// The format for a CPU conversion struct of ops.h / fp8.h.
template <class C>
struct FormatOf;
template <>
struct FormatOf<cpu::detail::Fp16> {
  using type = F16;
};
template <>
struct FormatOf<cpu::detail::Bf16> {
  using type = BF16;
};
template <>
struct FormatOf<cpu::detail::Fp8E4M3> {
  using type = E4M3;
};
template <>
struct FormatOf<cpu::detail::Fp8E5M2> {
  using type = E5M2;
};

/// The kernel the GPU runs for the CPU kernel K (dispatch.h's choice):
/// K itself, or its counterpart above for the float16, bfloat16 and fp8
/// arithmetic kernels.
template <class K>
struct DeviceKernel {
  static K make(const K& k) { return k; }
};
template <template <class> class CpuK, class C, template <class> class DevK>
struct DeviceKernelAs {
  static DevK<typename FormatOf<C>::type> make(const CpuK<C>&) { return {}; }
};
template <class C>
struct DeviceKernel<cpu::detail::HalfSum<C>> : DeviceKernelAs<cpu::detail::HalfSum, C, Sum> {};
template <class C>
struct DeviceKernel<cpu::detail::Fp8Sum<C>> : DeviceKernelAs<cpu::detail::Fp8Sum, C, Sum> {};
template <class C>
struct DeviceKernel<cpu::detail::HalfProd<C>> : DeviceKernelAs<cpu::detail::HalfProd, C, Prod> {};
template <class C>
struct DeviceKernel<cpu::detail::Fp8Prod<C>> : DeviceKernelAs<cpu::detail::Fp8Prod, C, Prod> {};
template <class C>
struct DeviceKernel<cpu::detail::HalfDivide<C>> {
  static Divide<typename FormatOf<C>::type> make(const cpu::detail::HalfDivide<C>& k) { return {k.divisor}; }
};
template <class C>
struct DeviceKernel<cpu::detail::Fp8Divide<C>> {
  static Divide<typename FormatOf<C>::type> make(const cpu::detail::Fp8Divide<C>& k) { return {k.divisor}; }
};
template <class C>
struct DeviceKernel<cpu::detail::HalfMultiply<C>> {
  static Multiply<typename FormatOf<C>::type> make(const cpu::detail::HalfMultiply<C>& k) { return {k.scalar}; }
};
template <class C>
struct DeviceKernel<cpu::detail::Fp8Multiply<C>> {
  static Multiply<typename FormatOf<C>::type> make(const cpu::detail::Fp8Multiply<C>& k) { return {k.scalar}; }
};

/// The device kernel for k.
template <class K>
auto device_kernel(const K& k) {
  return DeviceKernel<K>::make(k);
}

}  // namespace omniccl::kernels::cuda::detail
