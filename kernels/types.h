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
};
inline constexpr int kNumDTypes = 15;

/// Reduce operations, numbered as the C ABI's occl_red_op. AVG and
/// PREMUL_SUM combine like SUM; their scaling is a separate step
/// (scale_divide / scale_multiply). The logical ops (LAND, LOR, LXOR) take
/// any nonzero element as true and give 1 or 0 in the operands' dtype.
enum class RedOp : uint8_t { kSum, kProd, kMin, kMax, kAvg, kBAnd, kBOr, kBXor, kPreMulSum, kLAnd, kLOr, kLXor };
inline constexpr int kNumRedOps = 12;

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
    case DType::kFloat64: return 8;
  }
  return 0;
}
/// Lower-case name: "int8", "bfloat16", "bool", ...
const char* dtype_name(DType t);
/// Upper-case name: "SUM", "PREMUL_SUM", ...
const char* redop_name(RedOp op);
/// True for float16, bfloat16, float32, float64 and the fp8 types.
bool is_floating(DType t);
/// Whether op is defined for t: bitwise ops need integer or bool types, AVG
/// and PREMUL_SUM are not defined for bool, logical ops for every dtype.
bool is_defined(RedOp op, DType t);

}  // namespace omniccl::kernels
