#include "dlpack.h"

#include <cstdint>
#include <string>

#include "common/checked.h"
#include "common/status.h"
#include "common/gpu_runtime.h"

namespace omniccl::capi {

namespace {

const char* device_name(int32_t type) {
  switch (type) {
    case kDLCPU: return "cpu";
    case kDLCUDA: return "cuda";
    case kDLCUDAHost: return "cuda_host";
    case kDLCUDAManaged: return "cuda_managed";
    case kDLROCM: return "rocm";
    case kDLOpenCL: return "opencl";
    case kDLVulkan: return "vulkan";
    case kDLMetal: return "metal";
    case kDLOneAPI: return "oneapi";
    default: return "unknown";
  }
}

/// The family of a dtype whose name ends with its bit width ("int" of
/// "int32"); nullptr for other codes.
const char* sized_family(uint8_t code) {
  switch (code) {
    case kDLInt: return "int";
    case kDLUInt: return "uint";
    case kDLFloat: return "float";
    case kDLOpaqueHandle: return "opaque_handle";
    case kDLBfloat: return "bfloat";
    case kDLComplex: return "complex";
    case kDLBool: return "bool";
    default: return nullptr;
  }
}

/// The name of a narrow float format, which names its layout rather than
/// its width ("float8_e4m3fn"); nullptr for other codes.
const char* narrow_float_name(uint8_t code) {
  switch (code) {
    case kDLFloat8_e3m4: return "float8_e3m4";
    case kDLFloat8_e4m3: return "float8_e4m3";
    case kDLFloat8_e4m3b11fnuz: return "float8_e4m3b11fnuz";
    case kDLFloat8_e4m3fn: return "float8_e4m3fn";
    case kDLFloat8_e4m3fnuz: return "float8_e4m3fnuz";
    case kDLFloat8_e5m2: return "float8_e5m2";
    case kDLFloat8_e5m2fnuz: return "float8_e5m2fnuz";
    case kDLFloat8_e8m0fnu: return "float8_e8m0fnu";
    case kDLFloat6_e2m3fn: return "float6_e2m3fn";
    case kDLFloat6_e3m2fn: return "float6_e3m2fn";
    case kDLFloat4_e2m1fn: return "float4_e2m1fn";
    default: return nullptr;
  }
}

/// A DLPack dtype as users know it ("complex128", "float8_e4m3fn", "int24"),
/// for messages; a code DLPack does not define is shown as "code C, B bits".
static std::string dtype_name(DLDataType d) {
  if (const char* family = sized_family(d.code)) return str_cat(family, int(d.bits));
  if (const char* name = narrow_float_name(d.code)) return str_cat(name, " (", int(d.bits), " bits)");
  return str_cat("code ", int(d.code), ", ", int(d.bits), " bits");
}

/// The DType of a DLPack dtype (of one lane); false when OmniCCL has none.
[[gnu::always_inline]] inline bool dtype_of(DLDataType d, DType* out) {
  // code, bits and lanes as one word: one switch finds the dtype.
  constexpr auto key = [](uint8_t code, uint8_t bits) { return uint32_t{code} | uint32_t{bits} << 8 | 1u << 16; };
  switch (uint32_t{d.code} | uint32_t{d.bits} << 8 | uint32_t{d.lanes} << 16) {
    case key(kDLFloat, 32): *out = DType::kFloat32; return true;
    case key(kDLFloat, 64): *out = DType::kFloat64; return true;
    case key(kDLFloat, 16): *out = DType::kFloat16; return true;
    case key(kDLBfloat, 16): *out = DType::kBFloat16; return true;
    case key(kDLInt, 8): *out = DType::kInt8; return true;
    case key(kDLInt, 16): *out = DType::kInt16; return true;
    case key(kDLInt, 32): *out = DType::kInt32; return true;
    case key(kDLInt, 64): *out = DType::kInt64; return true;
    case key(kDLUInt, 8): *out = DType::kUInt8; return true;
    case key(kDLUInt, 16): *out = DType::kUInt16; return true;
    case key(kDLUInt, 32): *out = DType::kUInt32; return true;
    case key(kDLUInt, 64): *out = DType::kUInt64; return true;
    case key(kDLBool, 8): *out = DType::kBool; return true;
    case key(kDLFloat8_e4m3fn, 8): *out = DType::kFloat8E4M3FN; return true;
    case key(kDLFloat8_e5m2, 8): *out = DType::kFloat8E5M2; return true;
    case key(kDLComplex, 64): *out = DType::kComplex64; return true;
    case key(kDLComplex, 128): *out = DType::kComplex128; return true;
    default: return false;
  }
}

DType to_dtype(DLDataType d, const char* name) {
  check_arg(d.lanes == 1, name, ": vector dtypes (lanes=", d.lanes, ") are not supported");
  DType out{};
  if (dtype_of(d, &out)) return out;
  fail(Status::kInvalidArgument, name, ": dtype ", dtype_name(d),
       " is not supported (int8..64, uint8..64, float16/32/64, bfloat16, bool, float8_e4m3fn, "
       "float8_e5m2, complex64, complex128)");
}

/// A tensor's dtype read field by field. Callers often store code, bits
/// and lanes one by one, just before the call (`t.dtype.code = kDLFloat;
/// ...`); one wider load of all three cannot be served from those stores
/// while they wait to be written, and waits until every store before them
/// has reached the cache, which behind a store into a peer's ring line
/// takes a transfer between cores (a sixth of an 8-byte scatter's call on
/// its root, where omniccl-bench fills its DLTensor so).
[[gnu::always_inline]] inline DLDataType dtype_fields(const DLDataType& d) {
  DLDataType out;
  out.code = *static_cast<const volatile uint8_t*>(&d.code);
  out.bits = *static_cast<const volatile uint8_t*>(&d.bits);
  out.lanes = *static_cast<const volatile uint16_t*>(&d.lanes);
  return out;
}

/// quick_view's element count of a tensor of other than one dimension (at
/// most 16, compact); false for anything else. Out of line: its loops would
/// cost the one-dimensional case registers saved and restored.
[[gnu::noinline]] bool quick_count_nd(const DLTensor* t, uint64_t* count_out) {
  if (t->ndim < 0 || t->ndim > 16 || (t->ndim > 0 && t->shape == nullptr)) return false;
  bool bad = false;
  uint64_t count = 1;
  uint64_t expected = 1;  // the stride of a compact row-major tensor
  // The product in dimension order, as the checked path takes it: a zero
  // extent after an overflowing product does not hide the overflow.
  for (int32_t i = 0; i < t->ndim; ++i) {
    const int64_t extent = t->shape[i];
    bad |= extent < 0;
    bad |= __builtin_mul_overflow(count, static_cast<uint64_t>(extent), &count);
  }
  if (t->strides != nullptr) {
    for (int32_t i = t->ndim - 1; i >= 0; --i) {
      bad |= t->shape[i] != 1 && static_cast<uint64_t>(t->strides[i]) != expected;
      expected *= static_cast<uint64_t>(t->shape[i]);
    }
  }
  *count_out = count;
  return !bad;
}

/// The common case of to_view in one pass that builds no message: a
/// well-formed, compact CPU tensor of at most 16 dimensions. False for
/// anything else (then checked_view names what is wrong, or accepts the
/// unusual but valid, such as odd strides on an empty tensor). Inline in
/// its two callers, the one-dimensional case without a call.
[[gnu::always_inline]] inline bool quick_view(const DLTensor* t, TensorView& v) {
  if (t == nullptr || t->device.device_type != kDLCPU) return false;
  DType dtype{};
  if (!dtype_of(dtype_fields(t->dtype), &dtype)) return false;  // the checked path names it
  uint64_t count = 0;
  if (t->ndim == 1 && t->shape != nullptr) [[likely]] {
    const int64_t extent = t->shape[0];
    if (extent < 0 || (t->strides != nullptr && extent != 1 && t->strides[0] != 1)) return false;
    count = static_cast<uint64_t>(extent);
  } else if (!quick_count_nd(t, &count)) {
    return false;
  }
  uint64_t bytes = 0;
  bool bad = __builtin_mul_overflow(count, dtype_size(dtype), &bytes);
  bad |= bytes > kMaxBufferBytes;
  uint64_t end = 0;
  bad |= __builtin_add_overflow(static_cast<uint64_t>(reinterpret_cast<uintptr_t>(t->data)), t->byte_offset, &end);
  bad |= __builtin_add_overflow(end, bytes, &end);
  bad |= count != 0 && t->data == nullptr;
  if (bad) return false;
  v.dtype = dtype;
  v.count = count;
  v.data = t->data == nullptr ? nullptr : static_cast<char*>(t->data) + t->byte_offset;
  v.device = DeviceKind::kCPU;
  v.device_id = t->device.device_id;
  return true;
}

/// to_view with every check spelt out, each failure naming what is wrong.
TensorView checked_view(const DLTensor* t, const char* name) {
  check_arg(t != nullptr, name, " is NULL");
  check_arg(t->ndim >= 0, name, ": ndim is negative (", t->ndim, ")");
  check_arg(t->ndim == 0 || t->shape != nullptr, name, ": shape is NULL but ndim is ", t->ndim);
  TensorView v;
  v.dtype = to_dtype(t->dtype, name);
  const bool cuda = t->device.device_type == kDLCUDA || t->device.device_type == kDLCUDAManaged;
  if (cuda) check_gpu_usable(name, device_name(t->device.device_type), t->device.device_id);
  if (!cuda && t->device.device_type != kDLCPU) {
    fail(Status::kUnsupported, name, " is on device ", device_name(t->device.device_type), ":", t->device.device_id,
         "; OmniCCL supports CPU and CUDA tensors only");
  }
  // Every extent is checked before the product, so a zero extent cannot hide
  // an overflow in another one, and the product is checked step by step.
  for (int32_t i = 0; i < t->ndim; ++i) {
    check_arg(t->shape[i] >= 0, name, ": shape[", i, "] is negative (", t->shape[i], ")");
  }
  uint64_t count = 1;
  for (int32_t i = 0; i < t->ndim; ++i) {
    count = checked_mul(count, static_cast<uint64_t>(t->shape[i]), name, ": the shape product up to shape[", i, "]");
  }
  const uint64_t itemsize = dtype_size(v.dtype);
  const uint64_t bytes = checked_mul(count, itemsize, name, ": ", count, " elements x ", itemsize, " bytes");
  if (bytes > kMaxBufferBytes) {
    fail(Status::kInvalidArgument, name, ": ", count, " elements x ", itemsize, " bytes = ", bytes,
         " bytes is more than one buffer can hold (", kMaxBufferBytes, ")");
  }
  if (t->data != nullptr) {
    const uint64_t base = reinterpret_cast<uintptr_t>(t->data);
    const uint64_t start = checked_add(base, t->byte_offset, name, ": data + byte_offset");
    checked_add(start, bytes, name, ": data + byte_offset (", t->byte_offset, ") + the tensor's ", bytes, " bytes");
  }
  if (t->strides != nullptr && count > 0) {
    int64_t expected = 1;
    for (int32_t i = t->ndim - 1; i >= 0; --i) {
      // Extent-1 dimensions may carry any stride (as DLPack producers emit).
      if (t->shape[i] != 1 && t->strides[i] != expected) {
        fail(Status::kInvalidArgument, name, " is not contiguous (dimension ", i, " has stride ", t->strides[i],
             ", a compact row-major tensor has ", expected, "); make a contiguous copy first");
      }
      expected *= t->shape[i];
    }
  }
  check_arg(count == 0 || t->data != nullptr, name, ": data is NULL but the tensor has ", count, " elements");
  v.count = count;
  v.data = t->data == nullptr ? nullptr : static_cast<char*>(t->data) + t->byte_offset;
  v.device = cuda ? DeviceKind::kCUDA : DeviceKind::kCPU;
  v.device_id = t->device.device_id;
  return v;
}

}  // namespace

TensorView to_view(const DLTensor* t, const char* name) {
  // One return of v: built in the caller's slot, not copied there (see
  // to_optional_view).
  TensorView v;
  if (!quick_view(t, v)) v = checked_view(t, name);
  return v;
}

std::optional<TensorView> to_optional_view(const DLTensor* t, const char* name) {
  std::optional<TensorView> out;
  if (t == nullptr) return out;
  // Filled in place: copying a view just written field by field reads it
  // back with wider loads, which wait as dtype_fields describes; for small
  // messages that wait can be most of the call.
  if (!quick_view(t, out.emplace())) *out = checked_view(t, name);
  return out;
}

}  // namespace omniccl::capi
