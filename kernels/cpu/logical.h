// Logical element kernels (LAND, LOR, LXOR), as MPI defines them: an element
// is true when it is nonzero, and the result is 1 (true) or 0 (false) in the
// operands' own type. Floating-point -0 is false, NaN is true.
//
// A truth type says, for one storage type, what "nonzero" is and how 1 is
// written: `Elem`, `static bool test(Elem)` and `static Elem make(bool)`.
#pragma once

#include <cstdint>

#include "kernels/hd.h"

namespace omniccl::kernels::cpu::detail {

/// Integers and native floats: compared with 0 as values.
template <class T>
struct ValueTruth {
  using Elem = T;
  OMNICCL_HD static bool test(T x) { return x != T(0); }
  OMNICCL_HD static T make(bool t) { return static_cast<T>(t); }
};

/// Floating types kept as bit patterns (float16, bfloat16, fp8): zero is
/// every bit but the sign clear; `kOne` is the pattern of 1.0.
template <class U, U kMagnitude, U kOne>
struct BitsTruth {
  using Elem = U;
  OMNICCL_HD static bool test(U x) { return (x & kMagnitude) != 0; }
  OMNICCL_HD static U make(bool t) { return t ? kOne : U(0); }
};

using Fp16Truth = BitsTruth<uint16_t, 0x7fff, 0x3c00>;
using Bf16Truth = BitsTruth<uint16_t, 0x7fff, 0x3f80>;
using Fp8E4M3Truth = BitsTruth<uint8_t, 0x7f, 0x38>;
using Fp8E5M2Truth = BitsTruth<uint8_t, 0x7f, 0x3c>;

// AND and OR evaluate both operands (no short circuit), so that their loops
// stay free of branches and vectorise.
template <class Truth>
struct LogicalAnd {
  using Elem = typename Truth::Elem;
  OMNICCL_HD Elem operator()(Elem a, Elem b) const {
    return Truth::make((unsigned{Truth::test(a)} & unsigned{Truth::test(b)}) != 0u);
  }
};

template <class Truth>
struct LogicalOr {
  using Elem = typename Truth::Elem;
  OMNICCL_HD Elem operator()(Elem a, Elem b) const {
    return Truth::make((unsigned{Truth::test(a)} | unsigned{Truth::test(b)}) != 0u);
  }
};

template <class Truth>
struct LogicalXor {
  using Elem = typename Truth::Elem;
  OMNICCL_HD Elem operator()(Elem a, Elem b) const { return Truth::make(Truth::test(a) != Truth::test(b)); }
};

}  // namespace omniccl::kernels::cpu::detail
