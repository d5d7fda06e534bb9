// Element kernels: one small struct per (element type, operation). reduce.cc
// runs them in loops; they are kept free of branches so those loops vectorize.
//
// Words used here:
//  - storage type: the C++ type one element is kept in (float16 and bfloat16
//    are uint16_t bit patterns, bool is a uint8_t that may hold any byte).
//  - binary kernel: `T operator()(T a, T b) const`, commutative bit for bit.
//  - unary kernel: `T operator()(T x) const`, used by the scale_* steps.
//
// Floating-point results that are NaN come out as the canonical quiet NaN
// (positive, quiet bit only). x86 returns the first operand's payload for
// NaN + NaN, so a + b alone is not commutative bit for bit; canonicalizing
// makes it so (and makes MIN/MAX of two different NaNs symmetric too).
//
// Signed zeros: MIN(-0, +0) = -0 and MAX(-0, +0) = +0, whatever the order.
#pragma once

#include <bit>
#include <cstdint>
#include <type_traits>

#include "kernels/cpu/fp8.h"
#include "kernels/cpu/half.h"
#include "kernels/hd.h"

namespace omniccl::kernels::cpu::detail {

// ---- integers: two's complement wrap-around, computed in unsigned --------

/// Unsigned type wide enough that U * U does not promote to (signed) int.
template <class T>
using WideUnsigned = std::conditional_t<(sizeof(T) < sizeof(unsigned)), unsigned, std::make_unsigned_t<T>>;

/// Wrapping a + b (signed overflow is UB, unsigned arithmetic is not).
template <class T>
struct IntSum {
  using Elem = T;
  OMNICCL_HD T operator()(T a, T b) const {
    using U = std::make_unsigned_t<T>;
    using W = WideUnsigned<T>;
    return static_cast<T>(static_cast<U>(W{static_cast<U>(a)} + W{static_cast<U>(b)}));
  }
};

/// Wrapping a * b.
template <class T>
struct IntProd {
  using Elem = T;
  OMNICCL_HD T operator()(T a, T b) const {
    using U = std::make_unsigned_t<T>;
    using W = WideUnsigned<T>;
    return static_cast<T>(static_cast<U>(W{static_cast<U>(a)} * W{static_cast<U>(b)}));
  }
};

template <class T>
struct IntMin {
  using Elem = T;
  OMNICCL_HD T operator()(T a, T b) const { return b < a ? b : a; }
};

template <class T>
struct IntMax {
  using Elem = T;
  OMNICCL_HD T operator()(T a, T b) const { return a < b ? b : a; }
};

template <class T>
struct BitAnd {
  using Elem = T;
  OMNICCL_HD T operator()(T a, T b) const { return static_cast<T>(a & b); }
};

template <class T>
struct BitOr {
  using Elem = T;
  OMNICCL_HD T operator()(T a, T b) const { return static_cast<T>(a | b); }
};

template <class T>
struct BitXor {
  using Elem = T;
  OMNICCL_HD T operator()(T a, T b) const { return static_cast<T>(a ^ b); }
};

// ---- bool: any nonzero byte is true; results are 0 or 1 ------------------

struct BoolOr {
  using Elem = uint8_t;
  OMNICCL_HD uint8_t operator()(uint8_t a, uint8_t b) const { return (a | b) != 0; }
};

struct BoolAnd {
  using Elem = uint8_t;
  OMNICCL_HD uint8_t operator()(uint8_t a, uint8_t b) const { return (a != 0) & (b != 0); }
};

struct BoolXor {
  using Elem = uint8_t;
  OMNICCL_HD uint8_t operator()(uint8_t a, uint8_t b) const { return (a != 0) ^ (b != 0); }
};

// ---- float32 / float64 ----------------------------------------------------

/// Bit-level facts about a native floating type: U (the unsigned type of
/// the same size) and kQuietNaN (the canonical quiet NaN's bits).
template <class T>
struct FloatLayout;
template <>
struct FloatLayout<float> {
  using U = uint32_t;
  static constexpr U kQuietNaN = 0x7fc00000u;
};
template <>
struct FloatLayout<double> {
  using U = uint64_t;
  static constexpr U kQuietNaN = 0x7ff8000000000000u;
};

/// x, or the canonical quiet NaN if x is any NaN. (A float compare, not an
/// integer one on the bits: SSE2 has cmpunordpd but no 64-bit integer
/// compare, so this keeps float64 loops vectorized on the baseline ISA.)
template <class T>
OMNICCL_HD T canonical_nan(T x) {
  using L = FloatLayout<T>;
  return std::bit_cast<T>(__builtin_isnan(x) ? L::kQuietNaN : std::bit_cast<typename L::U>(x));
}

template <class T>
struct FloatSum {
  using Elem = T;
  OMNICCL_HD T operator()(T a, T b) const { return canonical_nan(a + b); }
};

template <class T>
struct FloatProd {
  using Elem = T;
  OMNICCL_HD T operator()(T a, T b) const { return canonical_nan(a * b); }
};

/// Whether a or b is NaN. (GCC vectorizes the builtin better; device code
/// has no such builtin.)
template <class T>
OMNICCL_HD bool either_nan(T a, T b) {
#ifdef __CUDA_ARCH__
  return __builtin_isnan(a) | __builtin_isnan(b);
#else
  return __builtin_isunordered(a, b);
#endif
}

/// `x < y ? x : y` gives y on ties and on NaN (it is exactly x86 minps, so
/// it compiles to one instruction). Taking it both ways round and OR-ing the
/// bits makes ties symmetric (equal values have identical bits except
/// {-0, +0}, which gives -0); a NaN operand then selects the canonical NaN.
/// Two blends fewer than select-on-compare, and as fast as SUM.
template <class T>
struct FloatMin {
  using Elem = T;
  OMNICCL_HD T operator()(T a, T b) const {
    using L = FloatLayout<T>;
    using U = typename L::U;
    const U r = std::bit_cast<U>(a < b ? a : b) | std::bit_cast<U>(b < a ? b : a);
    return std::bit_cast<T>(either_nan(a, b) ? U{L::kQuietNaN} : r);
  }
};

/// As FloatMin with maxps; AND-ing the bits picks +0 out of {-0, +0}.
template <class T>
struct FloatMax {
  using Elem = T;
  OMNICCL_HD T operator()(T a, T b) const {
    using L = FloatLayout<T>;
    using U = typename L::U;
    const U r = std::bit_cast<U>(a > b ? a : b) & std::bit_cast<U>(b > a ? b : a);
    return std::bit_cast<T>(either_nan(a, b) ? U{L::kQuietNaN} : r);
  }
};

// ---- float16 / bfloat16: arithmetic in float32, one rounding --------------

/// IEEE binary16.
struct Fp16 {
  static constexpr uint16_t kInf = 0x7c00;
  static constexpr uint16_t kQuietNaN = 0x7e00;
  OMNICCL_HD static float to_float(uint16_t h) { return fp16_to_fp32(h); }
  OMNICCL_HD static uint16_t from_float(float f) { return fp32_to_fp16(f); }
  /// Rounded, any NaN as kQuietNaN. Checked on the 16-bit result.
  OMNICCL_HD static uint16_t from_float_canonical(float f) {
    const uint16_t h = fp32_to_fp16(f);  // (checking f instead stops GCC vectorizing)
    return (h & 0x7fffu) > kInf ? kQuietNaN : h;
  }
};

/// bfloat16 (the top 16 bits of a float32).
struct Bf16 {
  static constexpr uint16_t kInf = 0x7f80;
  static constexpr uint16_t kQuietNaN = 0x7fc0;
  OMNICCL_HD static float to_float(uint16_t h) { return bf16_to_fp32(h); }
  OMNICCL_HD static uint16_t from_float(float f) { return fp32_to_bf16(f); }
  /// Rounded, any NaN as kQuietNaN. Canonicalizing the float32 first lets
  /// the rounding skip its NaN case (0x7fc00000 rounds to 0x7fc0): 1.6x
  /// faster than fp32_to_bf16 plus a check on the result.
  OMNICCL_HD static uint16_t from_float_canonical(float f) {
    const uint32_t u = __builtin_isnan(f) ? 0x7fc00000u : std::bit_cast<uint32_t>(f);
    return static_cast<uint16_t>((u + 0x7fffu + ((u >> 16) & 1u)) >> 16);
  }
};

/// Sign-magnitude bits -> an int16 with the same order as the values:
/// negatives have their magnitude bits flipped. -0 maps to -1 and +0 to 0,
/// so -0 < +0 and MIN/MAX are symmetric without a tie rule.
OMNICCL_HD int16_t half_order_key(uint16_t h) {
  const uint16_t flip = static_cast<uint16_t>((h & 0x8000u) ? 0x7fffu : 0u);
  return static_cast<int16_t>(h ^ flip);
}

template <class C>
OMNICCL_HD bool half_is_nan(uint16_t h) {
  return (h & 0x7fffu) > C::kInf;
}

/// float16 / bfloat16 sum: in float32, one rounding, canonical NaN.
template <class C>
struct HalfSum {
  using Elem = uint16_t;
  OMNICCL_HD uint16_t operator()(uint16_t a, uint16_t b) const {
    return C::from_float_canonical(C::to_float(a) + C::to_float(b));
  }
};

template <class C>
struct HalfProd {
  using Elem = uint16_t;
  OMNICCL_HD uint16_t operator()(uint16_t a, uint16_t b) const {
    return C::from_float_canonical(C::to_float(a) * C::to_float(b));
  }
};

/// Compared on the bits directly: no conversion needed.
template <class C>
struct HalfMin {
  using Elem = uint16_t;
  OMNICCL_HD uint16_t operator()(uint16_t a, uint16_t b) const {
    const uint16_t r = half_order_key(a) < half_order_key(b) ? a : b;
    return half_is_nan<C>(a) || half_is_nan<C>(b) ? C::kQuietNaN : r;
  }
};

template <class C>
struct HalfMax {
  using Elem = uint16_t;
  OMNICCL_HD uint16_t operator()(uint16_t a, uint16_t b) const {
    const uint16_t r = half_order_key(b) < half_order_key(a) ? a : b;
    return half_is_nan<C>(a) || half_is_nan<C>(b) ? C::kQuietNaN : r;
  }
};

// ---- unary kernels for scale_divide / scale_multiply ----------------------

/// Exact truncating division for integers of at most 32 bits, in float64
/// because integer division does not vectorize. Exact: if x / d is not an
/// integer it is at least 1/d from one, a relative gap >= 1/|x| > 2^-32,
/// far above float64's 2^-53 rounding error, so truncation (the conversion
/// back) lands on the right integer. For d > 2^53, double(d) is inexact but
/// still > |x|, and the quotient truncates to 0 as it should.
template <class T>
struct SmallIntDivide {
  using Elem = T;
  double divisor;
  OMNICCL_HD T operator()(T x) const { return static_cast<T>(static_cast<double>(x) / divisor); }
};

/// 64-bit integers: a plain division (truncates toward zero; divisor > 0).
template <class T>
struct WideIntDivide {
  using Elem = T;
  T divisor;
  OMNICCL_HD T operator()(T x) const { return static_cast<T>(x / divisor); }
};

template <class T>
struct FloatDivide {
  using Elem = T;
  T divisor;
  OMNICCL_HD T operator()(T x) const { return canonical_nan(x / divisor); }
};

template <class C>
struct HalfDivide {
  using Elem = uint16_t;
  float divisor;
  OMNICCL_HD uint16_t operator()(uint16_t x) const { return C::from_float_canonical(C::to_float(x) / divisor); }
};

/// Wrapping x * scalar; scalar is already the integral factor as unsigned.
template <class T>
struct IntMultiply {
  using Elem = T;
  uint64_t scalar;
  OMNICCL_HD T operator()(T x) const {
    using U = std::make_unsigned_t<T>;
    using W = WideUnsigned<T>;
    return static_cast<T>(static_cast<U>(W{static_cast<U>(x)} * static_cast<W>(scalar)));
  }
};

template <class T>
struct FloatMultiply {
  using Elem = T;
  T scalar;
  OMNICCL_HD T operator()(T x) const { return canonical_nan(x * scalar); }
};

template <class C>
struct HalfMultiply {
  using Elem = uint16_t;
  float scalar;
  OMNICCL_HD uint16_t operator()(uint16_t x) const { return C::from_float_canonical(C::to_float(x) * scalar); }
};

}  // namespace omniccl::kernels::cpu::detail
