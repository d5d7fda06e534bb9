// (dtype, op) -> element kernel: the one place that decides which functor of
// ops.h / fp8.h computes what. The CPU loops (reduce.cc) and the CUDA kernels
// (kernels/cuda) both dispatch through here, so they compute the same thing.
//
// Each visit_* calls f(K{...}) with the kernel K, where f is a generic lambda
// (or any callable with a templated call operator).
#pragma once

#include <cmath>
#include <cstdint>
#include <limits>
#include <stdexcept>
#include <string>
#include <type_traits>

#include "kernels/cpu/logical.h"
#include "kernels/cpu/ops.h"
#include "kernels/cpu/pairs.h"
#include "kernels/types.h"

namespace omniccl::kernels::cpu::detail {

[[noreturn]] inline void throw_undefined(const char* what, DType t, RedOp op) {
  throw std::invalid_argument(std::string(what) + ": reduce op " + redop_name(op) + " is not defined for dtype " +
                              dtype_name(t));
}

[[noreturn]] inline void throw_bad_dtype(const char* what, DType t) {
  throw std::invalid_argument(std::string(what) + ": dtype " + dtype_name(t) + " is not supported here");
}

/// The logical kernel for op (LAND, LOR, LXOR) over truth type Truth.
template <class Truth, class F>
void visit_logical(RedOp op, F& f) {
  switch (op) {
    case RedOp::kLAnd: return f(LogicalAnd<Truth>{});
    case RedOp::kLOr: return f(LogicalOr<Truth>{});
    case RedOp::kLXor: return f(LogicalXor<Truth>{});
    default: return;
  }
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
    case RedOp::kLAnd:
    case RedOp::kLOr:
    case RedOp::kLXor: return visit_logical<ValueTruth<T>>(op, f);
    case RedOp::kMaxLoc: return f(IntLoc<T, true>{});
    case RedOp::kMinLoc: return f(IntLoc<T, false>{});
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
    case RedOp::kLAnd:
    case RedOp::kLOr:
    case RedOp::kLXor: return visit_logical<ValueTruth<T>>(op, f);
    case RedOp::kMaxLoc: return f(FloatLoc<T, true>{});
    case RedOp::kMinLoc: return f(FloatLoc<T, false>{});
    default: return;  // bitwise ops: rejected by is_defined before this
  }
}

template <class T, class F>
void visit_complex(RedOp op, F& f) {
  switch (op) {
    case RedOp::kSum:
    case RedOp::kAvg:
    case RedOp::kPreMulSum: return f(ComplexSum<T>{});
    case RedOp::kProd: return f(ComplexProd<T>{});
    default: return;  // no order, no bits: rejected by is_defined
  }
}

template <class C, class F>
void visit_half(RedOp op, F& f) {
  using Truth = std::conditional_t<std::is_same_v<C, Fp16>, Fp16Truth, Bf16Truth>;
  switch (op) {
    case RedOp::kSum:
    case RedOp::kAvg:
    case RedOp::kPreMulSum: return f(HalfSum<C>{});
    case RedOp::kProd: return f(HalfProd<C>{});
    case RedOp::kMin: return f(HalfMin<C>{});
    case RedOp::kMax: return f(HalfMax<C>{});
    case RedOp::kLAnd:
    case RedOp::kLOr:
    case RedOp::kLXor: return visit_logical<Truth>(op, f);
    default: return;
  }
}

template <class C, class F>
void visit_fp8(RedOp op, F& f) {
  using Truth = std::conditional_t<std::is_same_v<C, Fp8E4M3>, Fp8E4M3Truth, Fp8E5M2Truth>;
  switch (op) {
    case RedOp::kSum:
    case RedOp::kAvg:
    case RedOp::kPreMulSum: return f(Fp8Sum<C>{});
    case RedOp::kProd: return f(Fp8Prod<C>{});
    case RedOp::kMin: return f(Fp8Min<C>{});
    case RedOp::kMax: return f(Fp8Max<C>{});
    case RedOp::kLAnd:
    case RedOp::kLOr:
    case RedOp::kLXor: return visit_logical<Truth>(op, f);
    default: return;
  }
}

template <class F>
void visit_bool(RedOp op, F& f) {
  switch (op) {
    case RedOp::kSum:
    case RedOp::kMax:
    case RedOp::kBOr:
    case RedOp::kLOr: return f(BoolOr{});
    case RedOp::kProd:
    case RedOp::kMin:
    case RedOp::kBAnd:
    case RedOp::kLAnd: return f(BoolAnd{});
    case RedOp::kBXor:
    case RedOp::kLXor: return f(BoolXor{});
    default: return;  // AVG / PREMUL_SUM: rejected by is_defined
  }
}

/// Calls f(K{}) with the binary kernel K for (t, op), or throws
/// std::invalid_argument (prefixed by `what`) when the pair is not defined.
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
    case DType::kFloat8E4M3FN: return visit_fp8<Fp8E4M3>(op, f);
    case DType::kFloat8E5M2: return visit_fp8<Fp8E5M2>(op, f);
    case DType::kComplex64: return visit_complex<float>(op, f);
    case DType::kComplex128: return visit_complex<double>(op, f);
  }
  throw_bad_dtype(what, t);
}

/// Calls f(K{divisor}) with the unary AVG-finalisation kernel for t (data /
/// divisor, integers truncating toward zero). Throws for bool, a bad dtype or
/// divisor <= 0.
template <class F>
void visit_divide(const char* what, DType t, int64_t divisor, F&& f) {
  if (!is_defined(RedOp::kAvg, t)) throw_undefined(what, t, RedOp::kAvg);
  if (divisor <= 0) {
    throw std::invalid_argument(std::string(what) + ": divisor must be > 0, got " + std::to_string(divisor));
  }
  const auto d = static_cast<double>(divisor);
  const auto fd = static_cast<float>(divisor);
  switch (t) {
    case DType::kInt8: return f(SmallIntDivide<int8_t>{d});
    case DType::kInt16: return f(SmallIntDivide<int16_t>{d});
    case DType::kInt32: return f(SmallIntDivide<int32_t>{d});
    case DType::kUInt8: return f(SmallIntDivide<uint8_t>{d});
    case DType::kUInt16: return f(SmallIntDivide<uint16_t>{d});
    case DType::kUInt32: return f(SmallIntDivide<uint32_t>{d});
    case DType::kInt64: return f(WideIntDivide<int64_t>{divisor});
    case DType::kUInt64: return f(WideIntDivide<uint64_t>{static_cast<uint64_t>(divisor)});
    case DType::kFloat16: return f(HalfDivide<Fp16>{fd});
    case DType::kBFloat16: return f(HalfDivide<Bf16>{fd});
    case DType::kFloat32: return f(FloatDivide<float>{fd});
    case DType::kFloat64: return f(FloatDivide<double>{d});
    case DType::kFloat8E4M3FN: return f(Fp8Divide<Fp8E4M3>{fd});
    case DType::kFloat8E5M2: return f(Fp8Divide<Fp8E5M2>{fd});
    case DType::kComplex64: return f(ComplexDivide<float>{fd});
    case DType::kComplex128: return f(ComplexDivide<double>{d});
    case DType::kBool: break;
  }
  throw_bad_dtype(what, t);
}

/// double -> int64 truncating toward zero, saturating; NaN gives 0.
inline int64_t to_int64_saturating(double x) {
  if (std::isnan(x)) return 0;
  if (x >= 0x1p63) return std::numeric_limits<int64_t>::max();
  if (x < -0x1p63) return std::numeric_limits<int64_t>::min();
  return static_cast<int64_t>(x);
}

/// Calls f(K{scalar}) with the unary PREMUL_SUM kernel for t (x * scalar;
/// integer types multiply by (int64)scalar modulo 2^bits). Throws for bool or
/// a bad dtype.
template <class F>
void visit_multiply(const char* what, DType t, double scalar, F&& f) {
  if (!is_defined(RedOp::kPreMulSum, t)) throw_undefined(what, t, RedOp::kPreMulSum);
  const auto s = static_cast<uint64_t>(to_int64_saturating(scalar));
  const auto fs = static_cast<float>(scalar);
  switch (t) {
    case DType::kInt8: return f(IntMultiply<int8_t>{s});
    case DType::kInt16: return f(IntMultiply<int16_t>{s});
    case DType::kInt32: return f(IntMultiply<int32_t>{s});
    case DType::kInt64: return f(IntMultiply<int64_t>{s});
    case DType::kUInt8: return f(IntMultiply<uint8_t>{s});
    case DType::kUInt16: return f(IntMultiply<uint16_t>{s});
    case DType::kUInt32: return f(IntMultiply<uint32_t>{s});
    case DType::kUInt64: return f(IntMultiply<uint64_t>{s});
    case DType::kFloat16: return f(HalfMultiply<Fp16>{fs});
    case DType::kBFloat16: return f(HalfMultiply<Bf16>{fs});
    case DType::kFloat32: return f(FloatMultiply<float>{fs});
    case DType::kFloat64: return f(FloatMultiply<double>{scalar});
    case DType::kFloat8E4M3FN: return f(Fp8Multiply<Fp8E4M3>{fs});
    case DType::kFloat8E5M2: return f(Fp8Multiply<Fp8E5M2>{fs});
    case DType::kComplex64: return f(ComplexMultiply<float>{fs});
    case DType::kComplex128: return f(ComplexMultiply<double>{scalar});
    case DType::kBool: break;
  }
  throw_bad_dtype(what, t);
}

}  // namespace omniccl::kernels::cpu::detail
