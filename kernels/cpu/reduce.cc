// CPU reduction kernels (see reduce.h for the semantics).
//
// Shape of every entry point: validate, pick the element kernel for
// (dtype, op) once with a switch, then run one tight loop that GCC -O3
// auto-vectorizes. Nothing is decided per element.
//
// Alignment: buffers come from users (DLPack byte_offset may be anything), so
// loops access elements through alignment-1 types (Unaligned<T>); the
// vectorizer then uses unaligned loads and stores, which cost the same as
// aligned ones on current x86 and cannot fault.
//
// Choices beyond reduce.h (tested in tests/unit/kernels_test.cc):
//  - NaN results of floating-point combines are the canonical quiet NaN
//    (ops.h says why); MIN(-0, +0) = -0, MAX(-0, +0) = +0.
//  - An undefined (dtype, op) pair, a bad dtype or a divisor <= 0 throws
//    std::invalid_argument before anything is written.
//  - scale_multiply's integer factor is (int64)scalar truncated toward zero,
//    saturated at the int64 range; NaN counts as 0.
//  - float16 SUM/PROD and scale_* use F16C instructions where the CPU has
//    them (half_f16c.h); the bits are the same as the portable path.
#include "kernels/cpu/reduce.h"

#include <cstring>
#include <type_traits>

#include "kernels/cpu/half.h"
#include "kernels/cpu/half_f16c.h"
#include "kernels/cpu/dispatch.h"
#include "kernels/cpu/ops.h"
#include "kernels/cpu/pairs.h"

// x86-64: build each hot loop twice (AVX2 and baseline SSE2) and pick one at
// load time through an ifunc. Not under ThreadSanitizer: the ifunc resolvers
// run before its runtime is set up and crash the program at load.
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__) && !defined(__SANITIZE_THREAD__) && \
    defined(__has_attribute)
#if __has_attribute(target_clones)
#define OMNICCL_HOT_LOOP __attribute__((target_clones("avx2", "default")))
#endif
#endif
#ifndef OMNICCL_HOT_LOOP
#define OMNICCL_HOT_LOOP
#endif

namespace omniccl::kernels::cpu {
namespace {

using namespace detail;

// ---- element access -------------------------------------------------------

template <class T>
struct Unaligned;
#define OMNICCL_UNALIGNED(T)                               \
  template <>                                              \
  struct Unaligned<T> {                                    \
    typedef T type __attribute__((aligned(1), may_alias)); \
  }
OMNICCL_UNALIGNED(int8_t);
OMNICCL_UNALIGNED(int16_t);
OMNICCL_UNALIGNED(int32_t);
OMNICCL_UNALIGNED(int64_t);
OMNICCL_UNALIGNED(uint8_t);
OMNICCL_UNALIGNED(uint16_t);
OMNICCL_UNALIGNED(uint32_t);
OMNICCL_UNALIGNED(uint64_t);
OMNICCL_UNALIGNED(float);
OMNICCL_UNALIGNED(double);
#undef OMNICCL_UNALIGNED
// Two-part items (pairs.h) are declared unaligned and may_alias already.
template <class T>
struct Unaligned<Complex<T>> {
  using type = Complex<T>;
};
template <class T>
struct Unaligned<Pair<T>> {
  using type = Pair<T>;
};

/// Pointer to the elements of kernel K, at any byte address.
template <class K>
using Ptr = typename Unaligned<typename K::Elem>::type*;
template <class K>
using ConstPtr = const typename Unaligned<typename K::Elem>::type*;

// ---- loops ----------------------------------------------------------------
// Distinct buffers get __restrict loops; the "same buffer" cases get their
// own loop so no __restrict promise is ever broken.

template <class K>
OMNICCL_HOT_LOOP void combine_into(Ptr<K> __restrict io, ConstPtr<K> __restrict in, size_t n) {
  const K k{};
  for (size_t i = 0; i < n; ++i) io[i] = k(io[i], in[i]);
}

template <class K>
OMNICCL_HOT_LOOP void combine_to(Ptr<K> __restrict out, ConstPtr<K> __restrict a, ConstPtr<K> __restrict b, size_t n) {
  const K k{};
  for (size_t i = 0; i < n; ++i) out[i] = k(a[i], b[i]);
}

/// x = op(x, x): only reached when both inputs are the same buffer.
template <class K>
void combine_self(Ptr<K> io, size_t n) {
  const K k{};
  for (size_t i = 0; i < n; ++i) io[i] = k(io[i], io[i]);
}

template <class K>
OMNICCL_HOT_LOOP void map_to(Ptr<K> __restrict out, ConstPtr<K> __restrict in, size_t n, const K k) {
  for (size_t i = 0; i < n; ++i) out[i] = k(in[i]);
}

template <class K>
OMNICCL_HOT_LOOP void map_inplace(Ptr<K> io, size_t n, const K k) {
  for (size_t i = 0; i < n; ++i) io[i] = k(io[i]);
}

/// Hands (out = op(a, b)) to a hardware-specific loop where one exists for
/// kernel K and this CPU; false means the caller runs the portable loops.
/// out may equal a or b.
template <class K>
bool combine_special(void* /*out*/, const void* /*a*/, const void* /*b*/, size_t /*n*/) {
  return false;
}
template <>
bool combine_special<HalfSum<Fp16>>(void* out, const void* a, const void* b, size_t n) {
  if (!f16c::enabled()) return false;
  f16c::combine(out, a, b, n, f16c::Arith::kAdd);
  return true;
}
template <>
bool combine_special<HalfProd<Fp16>>(void* out, const void* a, const void* b, size_t n) {
  if (!f16c::enabled()) return false;
  f16c::combine(out, a, b, n, f16c::Arith::kMul);
  return true;
}

/// Runs unary kernel k over in -> out (out == in allowed).
template <class K>
void run_map(void* out, const void* in, size_t n, const K& k) {
  if (out == in) {
    map_inplace<K>(static_cast<Ptr<K>>(out), n, k);
  } else {
    map_to<K>(static_cast<Ptr<K>>(out), static_cast<ConstPtr<K>>(in), n, k);
  }
}

}  // namespace

void reduce_inplace(void* inout, const void* in, size_t count, DType t, RedOp op) {
  visit_binary("reduce_inplace", t, op, [&]<class K>(K) {
    if (count == 0 || combine_special<K>(inout, inout, in, count)) return;
    if (inout == in) {
      combine_self<K>(static_cast<Ptr<K>>(inout), count);
    } else {
      combine_into<K>(static_cast<Ptr<K>>(inout), static_cast<ConstPtr<K>>(in), count);
    }
  });
}

void reduce(void* out, const void* a, const void* b, size_t count, DType t, RedOp op) {
  visit_binary("reduce", t, op, [&]<class K>(K) {
    if (count == 0 || combine_special<K>(out, a, b, count)) return;
    // out aliasing an input is the in-place case; kernels are commutative,
    // so out == b may reduce as out = op(out, a).
    if (a == b) {
      if (out != a) std::memcpy(out, a, count * sizeof(typename K::Elem));
      combine_self<K>(static_cast<Ptr<K>>(out), count);
    } else if (out == a) {
      combine_into<K>(static_cast<Ptr<K>>(out), static_cast<ConstPtr<K>>(b), count);
    } else if (out == b) {
      combine_into<K>(static_cast<Ptr<K>>(out), static_cast<ConstPtr<K>>(a), count);
    } else {
      combine_to<K>(static_cast<Ptr<K>>(out), static_cast<ConstPtr<K>>(a), static_cast<ConstPtr<K>>(b), count);
    }
  });
}

void scale_divide(void* data, size_t count, DType t, int64_t divisor) {
  visit_divide("scale_divide", t, divisor, [&]<class K>(const K& k) {
    if (count == 0 || divisor == 1) return;
    if constexpr (std::is_same_v<K, HalfDivide<Fp16>>) {
      if (f16c::enabled()) return f16c::map(data, data, count, f16c::Arith::kDiv, k.divisor);
    }
    run_map(data, data, count, k);
  });
}

void scale_multiply(void* out, const void* in, size_t count, DType t, double scalar) {
  visit_multiply("scale_multiply", t, scalar, [&]<class K>(const K& k) {
    if (count == 0) return;
    if constexpr (std::is_same_v<K, HalfMultiply<Fp16>>) {
      if (f16c::enabled()) return f16c::map(out, in, count, f16c::Arith::kMul, k.scalar);
    }
    run_map(out, in, count, k);
  });
}

float fp8_e4m3fn_to_float(uint8_t b) { return fp8e4m3fn_to_fp32(b); }
uint8_t float_to_fp8_e4m3fn(float f) { return fp32_to_fp8e4m3fn(f); }
float fp8_e5m2_to_float(uint8_t b) { return fp8e5m2_to_fp32(b); }
uint8_t float_to_fp8_e5m2(float f) { return fp32_to_fp8e5m2(f); }
float half_to_float(uint16_t h) { return fp16_to_fp32(h); }
uint16_t float_to_half(float f) { return fp32_to_fp16(f); }
float bfloat16_to_float(uint16_t h) { return bf16_to_fp32(h); }
uint16_t float_to_bfloat16(float f) { return fp32_to_bf16(f); }

}  // namespace omniccl::kernels::cpu
