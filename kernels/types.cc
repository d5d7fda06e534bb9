// Tables behind the DType / RedOp vocabulary (see types.h).
#include "kernels/types.h"

namespace omniccl::kernels {

const char* dtype_name(DType t) {
  switch (t) {
    case DType::kInt8: return "int8";
    case DType::kInt16: return "int16";
    case DType::kInt32: return "int32";
    case DType::kInt64: return "int64";
    case DType::kUInt8: return "uint8";
    case DType::kUInt16: return "uint16";
    case DType::kUInt32: return "uint32";
    case DType::kUInt64: return "uint64";
    case DType::kFloat16: return "float16";
    case DType::kBFloat16: return "bfloat16";
    case DType::kFloat32: return "float32";
    case DType::kFloat64: return "float64";
    case DType::kBool: return "bool";
    case DType::kFloat8E4M3FN: return "float8_e4m3fn";
    case DType::kFloat8E5M2: return "float8_e5m2";
    case DType::kComplex64: return "complex64";
    case DType::kComplex128: return "complex128";
  }
  return "unknown";
}

const char* redop_name(RedOp op) {
  switch (op) {
    case RedOp::kSum: return "SUM";
    case RedOp::kProd: return "PROD";
    case RedOp::kMin: return "MIN";
    case RedOp::kMax: return "MAX";
    case RedOp::kAvg: return "AVG";
    case RedOp::kBAnd: return "BAND";
    case RedOp::kBOr: return "BOR";
    case RedOp::kBXor: return "BXOR";
    case RedOp::kPreMulSum: return "PREMUL_SUM";
    case RedOp::kLAnd: return "LAND";
    case RedOp::kLOr: return "LOR";
    case RedOp::kLXor: return "LXOR";
    case RedOp::kMaxLoc: return "MAXLOC";
    case RedOp::kMinLoc: return "MINLOC";
  }
  return "UNKNOWN";
}

bool is_floating(DType t) {
  return t == DType::kFloat16 || t == DType::kBFloat16 || t == DType::kFloat32 || t == DType::kFloat64 ||
         t == DType::kFloat8E4M3FN || t == DType::kFloat8E5M2;
}

namespace {

/// The dtypes MAXLOC / MINLOC pairs may have: the integers, float32 and
/// float64 (an index in a narrower float loses integers early).
bool has_loc_pairs(DType t) {
  return !is_floating(t) ? t != DType::kBool && !is_complex(t) : t == DType::kFloat32 || t == DType::kFloat64;
}

}  // namespace

bool is_defined(RedOp op, DType t) {
  if (static_cast<int>(t) >= kNumDTypes) return false;
  switch (op) {
    case RedOp::kSum:
    case RedOp::kProd: return true;
    case RedOp::kMin:
    case RedOp::kMax:
      // Complex numbers have no order.
      return !is_complex(t);
    case RedOp::kAvg:
    case RedOp::kPreMulSum:
      // Averaging or scaling truth values has no meaning.
      return t != DType::kBool;
    case RedOp::kBAnd:
    case RedOp::kBOr:
    case RedOp::kBXor:
      // Bit patterns of floats are not values; integers and bool only.
      return !is_floating(t) && !is_complex(t);
    case RedOp::kLAnd:
    case RedOp::kLOr:
    case RedOp::kLXor:
      // Truth values: any nonzero element is true, floats included (MPI
      // defines none for complex types).
      return !is_complex(t);
    case RedOp::kMaxLoc:
    case RedOp::kMinLoc: return has_loc_pairs(t);
  }
  return false;
}

}  // namespace omniccl::kernels
