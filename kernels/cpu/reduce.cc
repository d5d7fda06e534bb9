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

#include <cmath>
#include <cstring>
#include <limits>
#include <stdexcept>
#include <string>

#include "kernels/cpu/half.h"
#include "kernels/cpu/half_f16c.h"
#include "kernels/cpu/ops.h"

// x86-64: build each hot loop twice (AVX2 and baseline SSE2) and pick one at
// load time through an ifunc. Not under ThreadSanitizer: the ifunc resolvers
// run before its runtime is set up and crash the program at load.
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__) && \
    !defined(__SANITIZE_THREAD__) && defined(__has_attribute)
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
#define OMNICCL_UNALIGNED(T)                                           \
  template <>                                                          \
  struct Unaligned<T> {                                                \
    typedef T type __attribute__((aligned(1), may_alias));             \
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
OMNICCL_HOT_LOOP void combine_to(Ptr<K> __restrict out, ConstPtr<K> __restrict a,
                                 ConstPtr<K> __restrict b, size_t n) {
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
OMNICCL_HOT_LOOP void map_to(Ptr<K> __restrict out, ConstPtr<K> __restrict in, size_t n,
                             const K k) {
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

// ---- dispatch: (dtype, op) -> element kernel -------------------------------

[[noreturn]] void throw_undefined(const char* what, DType t, RedOp op) {
  throw std::invalid_argument(std::string(what) + ": reduce op " + redop_name(op) +
                              " is not defined for dtype " + dtype_name(t));
}

[[noreturn]] void throw_bad_dtype(const char* what, DType t) {
  throw std::invalid_argument(std::string(what) + ": dtype " + dtype_name(t) +
                              " is not supported here");
}

template <class T, class F>
void visit_int(RedOp op, F& f) {
  switch (op) {
    case RedOp::kSum:
    case RedOp::kAvg:
    case RedOp::kPreMulSum: return f(IntSum<T>{});
    case RedOp::kProd: return f(IntProd<T>{});
    case RedOp::kMin: return f(IntMin<T>{});
    case RedOp::kMax: return f(IntMax<T>{});
    case RedOp::kBAnd: return f(BitAnd<T>{});
    case RedOp::kBOr: return f(BitOr<T>{});
    case RedOp::kBXor: return f(BitXor<T>{});
  }
}

template <class T, class F>
void visit_float(RedOp op, F& f) {
  switch (op) {
    case RedOp::kSum:
    case RedOp::kAvg:
    case RedOp::kPreMulSum: return f(FloatSum<T>{});
    case RedOp::kProd: return f(FloatProd<T>{});
    case RedOp::kMin: return f(FloatMin<T>{});
    case RedOp::kMax: return f(FloatMax<T>{});
    default: return;  // bitwise ops: rejected by is_defined before this
  }
}

template <class C, class F>
void visit_half(RedOp op, F& f) {
  switch (op) {
    case RedOp::kSum:
    case RedOp::kAvg:
    case RedOp::kPreMulSum: return f(HalfSum<C>{});
    case RedOp::kProd: return f(HalfProd<C>{});
    case RedOp::kMin: return f(HalfMin<C>{});
    case RedOp::kMax: return f(HalfMax<C>{});
    default: return;
  }
}

template <class F>
void visit_bool(RedOp op, F& f) {
  switch (op) {
    case RedOp::kSum:
    case RedOp::kMax:
    case RedOp::kBOr: return f(BoolOr{});
    case RedOp::kProd:
    case RedOp::kMin:
    case RedOp::kBAnd: return f(BoolAnd{});
    case RedOp::kBXor: return f(BoolXor{});
    default: return;  // AVG / PREMUL_SUM: rejected by is_defined
  }
}

/// Calls f(K{}) with the binary kernel K for (t, op), or throws when the pair
/// is not defined.
template <class F>
void visit_binary(const char* what, DType t, RedOp op, F&& f) {
  if (!is_defined(op, t)) throw_undefined(what, t, op);
  switch (t) {
    case DType::kInt8: return visit_int<int8_t>(op, f);
    case DType::kInt16: return visit_int<int16_t>(op, f);
    case DType::kInt32: return visit_int<int32_t>(op, f);
    case DType::kInt64: return visit_int<int64_t>(op, f);
    case DType::kUInt8: return visit_int<uint8_t>(op, f);
    case DType::kUInt16: return visit_int<uint16_t>(op, f);
    case DType::kUInt32: return visit_int<uint32_t>(op, f);
    case DType::kUInt64: return visit_int<uint64_t>(op, f);
    case DType::kFloat16: return visit_half<Fp16>(op, f);
    case DType::kBFloat16: return visit_half<Bf16>(op, f);
    case DType::kFloat32: return visit_float<float>(op, f);
    case DType::kFloat64: return visit_float<double>(op, f);
    case DType::kBool: return visit_bool(op, f);
  }
  throw_bad_dtype(what, t);
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

/// double -> int64 truncating toward zero, saturating; NaN gives 0.
int64_t to_int64_saturating(double x) {
  if (std::isnan(x)) return 0;
  if (x >= 0x1p63) return std::numeric_limits<int64_t>::max();
  if (x < -0x1p63) return std::numeric_limits<int64_t>::min();
  return static_cast<int64_t>(x);
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
      combine_to<K>(static_cast<Ptr<K>>(out), static_cast<ConstPtr<K>>(a),
                    static_cast<ConstPtr<K>>(b), count);
    }
  });
}

void scale_divide(void* data, size_t count, DType t, int64_t divisor) {
  if (!is_defined(RedOp::kAvg, t)) throw_undefined("scale_divide", t, RedOp::kAvg);
  if (divisor <= 0) {
    throw std::invalid_argument("scale_divide: divisor must be > 0, got " +
                                std::to_string(divisor));
  }
  if (count == 0 || divisor == 1) return;
  const auto d = static_cast<double>(divisor);
  switch (t) {
    case DType::kInt8: return run_map(data, data, count, SmallIntDivide<int8_t>{d});
    case DType::kInt16: return run_map(data, data, count, SmallIntDivide<int16_t>{d});
    case DType::kInt32: return run_map(data, data, count, SmallIntDivide<int32_t>{d});
    case DType::kUInt8: return run_map(data, data, count, SmallIntDivide<uint8_t>{d});
    case DType::kUInt16: return run_map(data, data, count, SmallIntDivide<uint16_t>{d});
    case DType::kUInt32: return run_map(data, data, count, SmallIntDivide<uint32_t>{d});
    case DType::kInt64: return run_map(data, data, count, WideIntDivide<int64_t>{divisor});
    case DType::kUInt64:
      return run_map(data, data, count,
                     WideIntDivide<uint64_t>{static_cast<uint64_t>(divisor)});
    case DType::kFloat16:
      if (f16c::enabled()) {
        return f16c::map(data, data, count, f16c::Arith::kDiv, static_cast<float>(divisor));
      }
      return run_map(data, data, count, HalfDivide<Fp16>{static_cast<float>(divisor)});
    case DType::kBFloat16:
      return run_map(data, data, count, HalfDivide<Bf16>{static_cast<float>(divisor)});
    case DType::kFloat32:
      return run_map(data, data, count, FloatDivide<float>{static_cast<float>(divisor)});
    case DType::kFloat64: return run_map(data, data, count, FloatDivide<double>{d});
    case DType::kBool: break;
  }
  throw_bad_dtype("scale_divide", t);
}

void scale_multiply(void* out, const void* in, size_t count, DType t, double scalar) {
  if (!is_defined(RedOp::kPreMulSum, t)) {
    throw_undefined("scale_multiply", t, RedOp::kPreMulSum);
  }
  if (count == 0) return;
  // Integer types: the factor is (int64)scalar, applied modulo 2^bits.
  const auto s = static_cast<uint64_t>(to_int64_saturating(scalar));
  switch (t) {
    case DType::kInt8: return run_map(out, in, count, IntMultiply<int8_t>{s});
    case DType::kInt16: return run_map(out, in, count, IntMultiply<int16_t>{s});
    case DType::kInt32: return run_map(out, in, count, IntMultiply<int32_t>{s});
    case DType::kInt64: return run_map(out, in, count, IntMultiply<int64_t>{s});
    case DType::kUInt8: return run_map(out, in, count, IntMultiply<uint8_t>{s});
    case DType::kUInt16: return run_map(out, in, count, IntMultiply<uint16_t>{s});
    case DType::kUInt32: return run_map(out, in, count, IntMultiply<uint32_t>{s});
    case DType::kUInt64: return run_map(out, in, count, IntMultiply<uint64_t>{s});
    case DType::kFloat16:
      if (f16c::enabled()) {
        return f16c::map(out, in, count, f16c::Arith::kMul, static_cast<float>(scalar));
      }
      return run_map(out, in, count, HalfMultiply<Fp16>{static_cast<float>(scalar)});
    case DType::kBFloat16:
      return run_map(out, in, count, HalfMultiply<Bf16>{static_cast<float>(scalar)});
    case DType::kFloat32:
      return run_map(out, in, count, FloatMultiply<float>{static_cast<float>(scalar)});
    case DType::kFloat64: return run_map(out, in, count, FloatMultiply<double>{scalar});
    case DType::kBool: break;
  }
  throw_bad_dtype("scale_multiply", t);
}

float half_to_float(uint16_t h) { return fp16_to_fp32(h); }
uint16_t float_to_half(float f) { return fp32_to_fp16(f); }
float bfloat16_to_float(uint16_t h) { return bf16_to_fp32(h); }
uint16_t float_to_bfloat16(float f) { return fp32_to_bf16(f); }

}  // namespace omniccl::kernels::cpu
