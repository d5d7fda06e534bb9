// The one owner of DLPack: DLTensor -> TensorView, with every check.
#pragma once

#include <optional>

#include "omniccl/dlpack.h"
#include "tensor/tensor.h"

namespace omniccl::capi {

/// Converts t, naming it `name` in errors. Checks: non-NULL, ndim >= 0,
/// shape present, no negative extents, compact row-major strides, lanes == 1,
/// a supported dtype, a CPU device, data non-NULL when count > 0. Applies
/// byte_offset.
TensorView to_view(const DLTensor* t, const char* name);
/// Same, but NULL gives std::nullopt.
std::optional<TensorView> to_optional_view(const DLTensor* t, const char* name);

}  // namespace omniccl::capi
