// Element types and reduce operations: the vocabulary shared by the kernels
// and the core (core/tensor re-exports these; kernels depend on nothing else).
#pragma once

#include <cstddef>
#include <cstdint>

namespace omniccl::kernels {

/// Element types OmniCCL moves and reduces. Values are internal (not ABI).
enum class DType : uint8_t {
  kInt8,
  kInt16,
  kInt32,
  kInt64,
  kUInt8,
  kUInt16,
  kUInt32,
  kUInt64,
  kFloat16,
  kBFloat16,
  kFloat32,
  kFloat64,
  kBool,
  kFloat8E4M3FN,  ///< OCP FP8 e4m3fn (finite only), DLPack kDLFloat8_e4m3fn
  kFloat8E5M2,    ///< OCP FP8 e5m2, DLPack kDLFloat8_e5m2
  kComplex64,     ///< two float32 (real, imaginary), DLPack kDLComplex 64 bits
  kComplex128,    ///< two float64 (real, imaginary), DLPack kDLComplex 128 bits
};
inline constexpr int kNumDTypes = 17;

/// Reduce operations, numbered as the C ABI's occl_red_op. AVG and
/// PREMUL_SUM combine like SUM; their scaling is a separate step
/// (scale_divide / scale_multiply). The logical ops (LAND, LOR, LXOR) take
/// any nonzero element as true and give 1 or 0 in the operands' dtype.
///
/// MAXLOC / MINLOC reduce (value, index) pairs: two elements of the same
/// dtype side by side, value first (MPI's MPI_2INT, MPI_2DOUBLE_PRECISION).
/// The larger (smaller) value wins; equal values keep the smaller index.
enum class RedOp : uint8_t {
  kSum,
  kProd,
  kMin,
  kMax,
  kAvg,
  kBAnd,
  kBOr,
  kBXor,
  kPreMulSum,
  kLAnd,
  kLOr,
  kLXor,
  kMaxLoc,
  kMinLoc
};
inline constexpr int kNumRedOps = 14;

/// LAND, LOR and LXOR.
constexpr bool is_logical(RedOp op) { return op == RedOp::kLAnd || op == RedOp::kLOr || op == RedOp::kLXor; }

/// Bytes per element (0 for a value that is not a DType: callers validate
/// before sizing buffers). Inline: it is asked several times per call.
constexpr size_t dtype_size(DType t) {
  switch (t) {
    case DType::kInt8:
    case DType::kUInt8:
    case DType::kBool:
    case DType::kFloat8E4M3FN:
    case DType::kFloat8E5M2: return 1;
    case DType::kInt16:
    case DType::kUInt16:
    case DType::kFloat16:
    case DType::kBFloat16: return 2;
    case DType::kInt32:
    case DType::kUInt32:
    case DType::kFloat32: return 4;
    case DType::kInt64:
    case DType::kUInt64:
    case DType::kFloat64:
    case DType::kComplex64: return 8;
    case DType::kComplex128: return 16;
  }
  return 0;
}

/// Whether op reduces (value, index) pairs (MAXLOC, MINLOC).
constexpr bool is_loc(RedOp op) { return op == RedOp::kMaxLoc || op == RedOp::kMinLoc; }

/// Elements of t that op combines as one item: 2 for the pairs of MAXLOC
/// and MINLOC, else 1. Reduce kernels and algorithms count items.
constexpr size_t item_elems(RedOp op) { return is_loc(op) ? 2 : 1; }

/// Bytes of one item of (t, op): dtype_size(t) x item_elems(op).
constexpr size_t item_size(DType t, RedOp op) { return dtype_size(t) * item_elems(op); }
/// Lower-case name: "int8", "bfloat16", "bool", ...
const char* dtype_name(DType t);
/// Upper-case name: "SUM", "PREMUL_SUM", ...
const char* redop_name(RedOp op);
/// True for the real floating types: float16, bfloat16, float32, float64
/// and the fp8 types (not complex64 / complex128: see is_complex).
bool is_floating(DType t);
/// True for complex64 and complex128.
constexpr bool is_complex(DType t) { return t == DType::kComplex64 || t == DType::kComplex128; }
/// Whether op is defined for t: bitwise ops need integer or bool types, AVG
/// and PREMUL_SUM are not defined for bool, MIN/MAX are not defined for
/// complex types (they have no order), MAXLOC/MINLOC need integer, float32
/// or float64 pairs, the logical ops apply to every real dtype.
bool is_defined(RedOp op, DType t);

}  // namespace omniccl::kernels
