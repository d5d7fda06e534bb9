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

/// Reduce operations. AVG and PREMUL_SUM combine like SUM; their scaling is
/// a separate step (scale_divide / scale_multiply).
enum class RedOp : uint8_t { kSum, kProd, kMin, kMax, kAvg, kBAnd, kBOr, kBXor, kPreMulSum };
inline constexpr int kNumRedOps = 9;

/// Bytes per element.
size_t dtype_size(DType t);
/// Lower-case name: "int8", "bfloat16", "bool", ...
const char* dtype_name(DType t);
/// Upper-case name: "SUM", "PREMUL_SUM", ...
const char* redop_name(RedOp op);
/// True for float16, bfloat16, float32, float64 and the fp8 types.
bool is_floating(DType t);
/// Whether op is defined for t: bitwise ops need integer or bool types, AVG
/// and PREMUL_SUM are not defined for bool.
bool is_defined(RedOp op, DType t);

}  // namespace omniccl::kernels
