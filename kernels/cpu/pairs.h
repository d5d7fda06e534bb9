// Element kernels on two-part items: complex numbers and the (value, index)
// pairs of MAXLOC / MINLOC. Same contract as ops.h (binary kernels are
// commutative bit for bit, NaN results are the canonical quiet NaN).
//
// Words used here:
//  - Complex<T>: complex64 (T = float) or complex128 (T = double), stored as
//    real then imaginary part, as DLPack, numpy and C99 _Complex do.
//  - Pair<T>: a MAXLOC / MINLOC item, value then index, both of dtype T.
//
// Both are packed and may_alias: items sit at any byte address of a user's
// buffer (as reduce.cc's Unaligned<T> lets plain elements do), and GCC
// ignores such attributes on a typedef of a class type.
#pragma once

#include "kernels/cpu/ops.h"
#include "kernels/hd.h"

namespace omniccl::kernels::cpu::detail {

template <class T>
struct __attribute__((packed, may_alias)) Complex {
  T re;
  T im;
};

template <class T>
struct __attribute__((packed, may_alias)) Pair {
  T value;
  T index;
};

/// Whether E is a two-part item (Complex or Pair).
template <class E>
inline constexpr bool kTwoPart = false;
template <class T>
inline constexpr bool kTwoPart<Complex<T>> = true;
template <class T>
inline constexpr bool kTwoPart<Pair<T>> = true;

// ---- complex --------------------------------------------------------------

template <class T>
struct ComplexSum {
  using Elem = Complex<T>;
  OMNICCL_HD Elem operator()(Elem a, Elem b) const { return {canonical_nan(a.re + b.re), canonical_nan(a.im + b.im)}; }
};

/// (a.re b.re - a.im b.im) + i (a.re b.im + a.im b.re). The real part is
/// commutative as written, even where the compiler fuses a multiply and
/// an add (each product is). The imaginary part adds its two products in
/// value order, through a select the compiler cannot fuse across: a fused
/// a.re * b.im + round(a.im * b.re) would round differently from the same
/// code called as (b, a).
template <class T>
struct ComplexProd {
  using Elem = Complex<T>;
  OMNICCL_HD Elem operator()(Elem a, Elem b) const {
    const T re = a.re * b.re - a.im * b.im;
    const T x = a.re * b.im, y = a.im * b.re;
    const T lo = x < y ? x : y, hi = x < y ? y : x;
    return {canonical_nan(re), canonical_nan(lo + hi)};
  }
};

/// AVG finalisation: both parts divided by a real divisor.
template <class T>
struct ComplexDivide {
  using Elem = Complex<T>;
  T divisor;
  OMNICCL_HD Elem operator()(Elem x) const { return {canonical_nan(x.re / divisor), canonical_nan(x.im / divisor)}; }
};

/// PREMUL_SUM: both parts times a real scalar.
template <class T>
struct ComplexMultiply {
  using Elem = Complex<T>;
  T scalar;
  OMNICCL_HD Elem operator()(Elem x) const { return {canonical_nan(x.re * scalar), canonical_nan(x.im * scalar)}; }
};

// ---- MAXLOC / MINLOC ------------------------------------------------------

/// Integer pairs: the larger (kMax) or smaller value wins, equal values keep
/// the smaller index. Equal pairs are identical, so either may be returned.
template <class T, bool kMax>
struct IntLoc {
  using Elem = Pair<T>;
  OMNICCL_HD Elem operator()(Elem a, Elem b) const {
    const bool a_ahead = kMax ? b.value < a.value : a.value < b.value;
    const bool take_a = a_ahead | ((a.value == b.value) & (a.index < b.index));
    return {take_a ? a.value : b.value, take_a ? a.index : b.index};
  }
};

/// float32 / float64 pairs. A NaN value wins over any number (as MIN and
/// MAX propagate NaN) and comes out as the canonical NaN; NaN values tie
/// with each other. Values that compare equal keep the smaller index; when
/// the indices are equal too, the parts are merged as MAX (MIN) and MIN
/// would merge them, so -0 and +0 (or NaN payloads) give the same bits in
/// either order.
template <class T, bool kMax>
struct FloatLoc {
  using Elem = Pair<T>;
  OMNICCL_HD Elem operator()(Elem a, Elem b) const {
    const bool an = __builtin_isnan(a.value), bn = __builtin_isnan(b.value);
    const bool a_ahead = (an & !bn) | (kMax ? b.value < a.value : a.value < b.value);
    const bool b_ahead = (bn & !an) | (kMax ? a.value < b.value : b.value < a.value);
    const bool tie = !a_ahead & !b_ahead;
    const bool take_a = a_ahead | (tie & (a.index < b.index));
    const bool take_b = b_ahead | (tie & (b.index < a.index));
    const T merged = kMax ? FloatMax<T>{}(a.value, b.value) : FloatMin<T>{}(a.value, b.value);
    const T value = take_a ? a.value : (take_b ? b.value : merged);
    const T index = take_a ? a.index : (take_b ? b.index : FloatMin<T>{}(a.index, b.index));
    return {canonical_nan(value), index};
  }
};

}  // namespace omniccl::kernels::cpu::detail
