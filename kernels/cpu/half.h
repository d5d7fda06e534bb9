// Inline float16 / bfloat16 <-> float32 conversions, written without branches
// (every case is computed, then one is selected) so GCC auto-vectorizes loops
// that call them. Private to kernels/cpu; reduce.h exports out-of-line copies.
//
// Rounding is to nearest, ties to even. NaN stays NaN: the sign and the top
// payload bits are kept and the quiet bit is set, as F16C's vcvtps2ph does.
#pragma once

#include <bit>
#include <cstdint>

#include "kernels/hd.h"

namespace omniccl::kernels::cpu::detail {

/// c ? a : b, written with masks. With -ftrapping-math (the default) GCC
/// will not if-convert a ?: whose arm holds float arithmetic used only there
/// (it sinks the arithmetic into a branch), and the loop stays scalar;
/// masks force both arms to be computed. (Elsewhere plain ?: is better: GCC
/// vectorizes it even where SSE2 cannot widen a bool to a 64-bit mask.)
template <class U>
OMNICCL_HD U blend(bool c, U a, U b) {
  const U m = static_cast<U>(U{0} - static_cast<U>(c));
  return static_cast<U>((a & m) | (b & static_cast<U>(~m)));
}

/// IEEE binary16 bits -> float32 (exact: every half is a float).
OMNICCL_HD float fp16_to_fp32(uint16_t h) {
  constexpr uint32_t kExpMask = 0x7c00u << 13;  // half exponent, in float position
  uint32_t o = (uint32_t{h} & 0x7fffu) << 13;   // exponent + mantissa
  const uint32_t exp = o & kExpMask;
  o += (127 - 15) << 23;  // rebias the exponent
  // Inf / NaN: push the exponent the rest of the way to 255; payload kept.
  const uint32_t inf_nan = o + ((128 - 16) << 23);
  // Zero / subnormal: make it a normal float 2^-14 * (1 + m) and subtract the
  // implicit 2^-14 again; exact in float32.
  const uint32_t sub = std::bit_cast<uint32_t>(std::bit_cast<float>(o + (1u << 23)) - std::bit_cast<float>(113u << 23));
  o = blend(exp == kExpMask, inf_nan, blend(exp == 0u, sub, o));
  return std::bit_cast<float>(o | (uint32_t{h} & 0x8000u) << 16);
}

/// float32 -> IEEE binary16 bits, round to nearest even; overflow gives Inf.
OMNICCL_HD uint16_t fp32_to_fp16(float f) {
  uint32_t u = std::bit_cast<uint32_t>(f);
  const uint32_t sign = (u >> 16) & 0x8000u;
  u &= 0x7fffffffu;
  // |f| >= 2^16 (or Inf/NaN): Inf, or a quiet NaN keeping the top payload.
  const uint32_t special = blend(u > 0x7f800000u, 0x7e00u | ((u >> 13) & 0x3ffu), 0x7c00u);
  // |f| < 2^-14 (half subnormal or zero): adding 0.5f aligns the float so its
  // last mantissa bit is half's 2^-24 step; the FPU rounds to nearest even.
  constexpr uint32_t kMagic = 126u << 23;  // 0.5f
  const uint32_t sub = std::bit_cast<uint32_t>(std::bit_cast<float>(u) + std::bit_cast<float>(kMagic)) - kMagic;
  // Normal: rebias, then round the 13 dropped bits to nearest even; a carry
  // out of the mantissa correctly bumps the exponent (up to Inf).
  const uint32_t norm = (u + ((15u - 127u) << 23) + 0xfffu + ((u >> 13) & 1u)) >> 13;
  const uint32_t r = blend(u >= (143u << 23), special, blend(u < (113u << 23), sub, norm));
  return static_cast<uint16_t>(r | sign);
}

/// bfloat16 bits -> float32 (exact: bfloat16 is the top half of a float).
OMNICCL_HD float bf16_to_fp32(uint16_t h) { return std::bit_cast<float>(uint32_t{h} << 16); }

/// float32 -> bfloat16 bits, round to nearest even; overflow gives Inf.
OMNICCL_HD uint16_t fp32_to_bf16(float f) {
  const uint32_t u = std::bit_cast<uint32_t>(f);
  const uint32_t rounded = (u + 0x7fffu + ((u >> 16) & 1u)) >> 16;
  const uint32_t quiet_nan = (u >> 16) | 0x0040u;
  return static_cast<uint16_t>(blend((u & 0x7fffffffu) > 0x7f800000u, quiet_nan, rounded));
}

}  // namespace omniccl::kernels::cpu::detail
