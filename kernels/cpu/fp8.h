// 8-bit floats (OCP FP8): float8_e4m3fn and float8_e5m2 <-> float32, written
// without branches like half.h, shared by the CPU and CUDA kernels.
//
//  e5m2   1 sign, 5 exponent (bias 15), 2 mantissa bits: IEEE-like, with
//         infinities (0x7c) and NaNs (0x7d..0x7f); the top byte of a float16.
//  e4m3fn 1 sign, 4 exponent (bias 7), 3 mantissa bits, "fn": finite only.
//         No infinities; S.1111.111 (0x7f, 0xff) is NaN; largest 448 (0x7e).
//
// float32 -> fp8 rounds to nearest, ties to even (one rounding). Overflow:
// e5m2 gives +-Inf (as IEEE formats do); e4m3fn has no Inf and gives NaN
// for |x| > 464 (464 itself ties to 448) and for +-Inf, the behaviour of
// PyTorch's and ml_dtypes' non-saturating casts. A NaN input gives a NaN of
// the same sign (e5m2 0x7e, e4m3fn 0x7f with the sign bit).
#pragma once

#include <bit>
#include <cstdint>

#include "kernels/cpu/half.h"
#include "kernels/hd.h"

namespace omniccl::kernels::cpu::detail {

/// Rounds |f| (bits u, sign cleared) to a small float with M mantissa bits
/// and exponent bias B, no special cases: normal numbers with the 13-bit
/// trick of fp32_to_fp16, subnormals by adding a float whose last mantissa
/// bit is worth one subnormal step (the FPU then rounds to nearest even).
template <int M, int B>
OMNICCL_HD uint32_t round_small_float(uint32_t u) {
  constexpr int kDrop = 23 - M;                                              // mantissa bits dropped
  constexpr uint32_t kMinNormal = static_cast<uint32_t>(127 - B + 1) << 23;  // 2^(1-B)
  constexpr uint32_t kMagic = static_cast<uint32_t>(127 + (1 - B - M) + 23) << 23;
  const uint32_t sub = std::bit_cast<uint32_t>(std::bit_cast<float>(u) + std::bit_cast<float>(kMagic)) - kMagic;
  const uint32_t norm =
      (u - (static_cast<uint32_t>(127 - B) << 23) + ((1u << (kDrop - 1)) - 1u) + ((u >> kDrop) & 1u)) >> kDrop;
  return blend(u < kMinNormal, sub, norm);
}

/// float8_e5m2 bits -> float32 (exact).
OMNICCL_HD float fp8e5m2_to_fp32(uint8_t b) { return fp16_to_fp32(static_cast<uint16_t>(uint32_t{b} << 8)); }

/// float32 -> float8_e5m2 bits, round to nearest even; overflow gives Inf.
OMNICCL_HD uint8_t fp32_to_fp8e5m2(float f) {
  uint32_t u = std::bit_cast<uint32_t>(f);
  const uint32_t sign = (u >> 24) & 0x80u;
  u &= 0x7fffffffu;
  // |f| >= 61440 (halfway from 57344, the largest finite, to 2^16; the tie
  // goes to the even 2^16, i.e. Inf), Inf or NaN.
  const uint32_t special = blend(u > 0x7f800000u, 0x7eu, 0x7cu);
  const uint32_t r = blend(u >= 0x47700000u, special, round_small_float<2, 15>(u));
  return static_cast<uint8_t>(r | sign);
}

/// float8_e4m3fn bits -> float32 (exact; 0x7f / 0xff give a quiet NaN).
OMNICCL_HD float fp8e4m3fn_to_fp32(uint8_t b) {
  const uint32_t sign = (uint32_t{b} & 0x80u) << 24;
  const uint32_t exp = (uint32_t{b} >> 3) & 0xfu;
  const uint32_t man = uint32_t{b} & 0x7u;
  const uint32_t norm = ((exp + 127u - 7u) << 23) | (man << 20);
  // Subnormal: man * 2^-9, exact in float32.
  const uint32_t sub = std::bit_cast<uint32_t>(static_cast<float>(man) * 0x1p-9f);
  const uint32_t mag = blend(exp == 0u, sub, norm);
  const uint32_t r = blend((b & 0x7fu) == 0x7fu, 0x7fc00000u, mag);
  return std::bit_cast<float>(r | sign);
}

/// float32 -> float8_e4m3fn bits, round to nearest even; |f| > 464, Inf and
/// NaN give NaN (no Inf in this format).
OMNICCL_HD uint8_t fp32_to_fp8e4m3fn(float f) {
  uint32_t u = std::bit_cast<uint32_t>(f);
  const uint32_t sign = (u >> 24) & 0x80u;
  u &= 0x7fffffffu;
  const uint32_t r = blend(u > 0x43e80000u /* 464 */, 0x7fu, round_small_float<3, 7>(u));
  return static_cast<uint8_t>(r | sign);
}

/// float8_e4m3fn, as a type the element kernels take (see Fp16 in ops.h).
struct Fp8E4M3 {
  static constexpr uint8_t kQuietNaN = 0x7f;
  OMNICCL_HD static float to_float(uint8_t b) { return fp8e4m3fn_to_fp32(b); }
  OMNICCL_HD static uint8_t from_float(float f) { return fp32_to_fp8e4m3fn(f); }
  OMNICCL_HD static bool is_nan(uint8_t b) { return (b & 0x7fu) == 0x7fu; }
  /// Rounded, any NaN (and overflow) as kQuietNaN.
  OMNICCL_HD static uint8_t from_float_canonical(float f) {
    const uint8_t b = fp32_to_fp8e4m3fn(f);
    return is_nan(b) ? kQuietNaN : b;
  }
};

/// float8_e5m2.
struct Fp8E5M2 {
  static constexpr uint8_t kQuietNaN = 0x7e;
  OMNICCL_HD static float to_float(uint8_t b) { return fp8e5m2_to_fp32(b); }
  OMNICCL_HD static uint8_t from_float(float f) { return fp32_to_fp8e5m2(f); }
  OMNICCL_HD static bool is_nan(uint8_t b) { return (b & 0x7fu) > 0x7cu; }
  /// Rounded, any NaN as kQuietNaN.
  OMNICCL_HD static uint8_t from_float_canonical(float f) {
    const uint8_t b = fp32_to_fp8e5m2(f);
    return is_nan(b) ? kQuietNaN : b;
  }
};

/// Sign-magnitude byte -> an int8 ordered like the values (-0 < +0); see
/// half_order_key.
OMNICCL_HD int8_t fp8_order_key(uint8_t b) {
  const uint8_t flip = static_cast<uint8_t>((b & 0x80u) ? 0x7fu : 0u);
  return static_cast<int8_t>(b ^ flip);
}

/// fp8 sum: in float32, one rounding, canonical NaN.
template <class C>
struct Fp8Sum {
  using Elem = uint8_t;
  OMNICCL_HD uint8_t operator()(uint8_t a, uint8_t b) const {
    return C::from_float_canonical(C::to_float(a) + C::to_float(b));
  }
};

template <class C>
struct Fp8Prod {
  using Elem = uint8_t;
  OMNICCL_HD uint8_t operator()(uint8_t a, uint8_t b) const {
    return C::from_float_canonical(C::to_float(a) * C::to_float(b));
  }
};

/// Compared on the bits, NaN-propagating, like HalfMin.
template <class C>
struct Fp8Min {
  using Elem = uint8_t;
  OMNICCL_HD uint8_t operator()(uint8_t a, uint8_t b) const {
    const uint8_t r = fp8_order_key(a) < fp8_order_key(b) ? a : b;
    return C::is_nan(a) || C::is_nan(b) ? C::kQuietNaN : r;
  }
};

template <class C>
struct Fp8Max {
  using Elem = uint8_t;
  OMNICCL_HD uint8_t operator()(uint8_t a, uint8_t b) const {
    const uint8_t r = fp8_order_key(b) < fp8_order_key(a) ? a : b;
    return C::is_nan(a) || C::is_nan(b) ? C::kQuietNaN : r;
  }
};

/// AVG finalisation in float32, one rounding.
template <class C>
struct Fp8Divide {
  using Elem = uint8_t;
  float divisor;
  OMNICCL_HD uint8_t operator()(uint8_t x) const { return C::from_float_canonical(C::to_float(x) / divisor); }
};

/// PREMUL_SUM pre-multiplication in float32, one rounding.
template <class C>
struct Fp8Multiply {
  using Elem = uint8_t;
  float scalar;
  OMNICCL_HD uint8_t operator()(uint8_t x) const { return C::from_float_canonical(C::to_float(x) * scalar); }
};

}  // namespace omniccl::kernels::cpu::detail
