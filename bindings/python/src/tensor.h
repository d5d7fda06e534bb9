// Tensor: one array handed to OmniCCL, as a DLTensor the C library can use.
//
// Every array enters through Tensor::import, the one place that speaks
// DLPack (see tensor.cc for the protocol and the order of attempts). A Tensor
// owns what the import gave it (the DLPack managed tensor, or a Py_buffer)
// and gives it back exactly once when it is destroyed, so an operation keeps
// its arrays valid simply by holding references to their Tensor objects until
// it completes (Work does that).
//
// Tensors are also made by the binding itself: staging buffers that pack a
// list of arrays into one (empty) and views of part of another tensor
// (slice). All are handed to C as contiguous row-major tensors with NULL
// strides; byte_offset is kept as the producer gave it.
#pragma once

#include <pybind11/pybind11.h>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include <omniccl/dlpack.h>

namespace omniccl_py {

namespace py = pybind11;

/// The calling thread's OmniCCL CUDA stream (a cudaStream_t as an integer;
/// 0: none set, operations use the legacy default stream). CUDA arrays are
/// exported to OmniCCL for this stream (DLPack's stream handshake) and every
/// operation on them is ordered on it.
uintptr_t cuda_stream();
/// Sets the calling thread's stream; returns the previous one.
uintptr_t set_cuda_stream(uintptr_t stream);

class Tensor {
 public:
  /// Where a tensor's memory comes from.
  enum class Source { kDLPackVersioned, kDLPack, kBuffer, kOwned, kView, kNumpy };

  /// Imports `obj` (DLPack or buffer protocol). `writable`: the operation
  /// writes into it, so a read-only array (or a copy made by the producer)
  /// is refused with InvalidArgumentError (a ValueError). `name` names the
  /// argument in messages.
  static std::unique_ptr<Tensor> import(py::handle obj, bool writable, const std::string& name);
  /// import() for a blocking call's hot path: a numpy.ndarray (exactly that
  /// type) that is C-contiguous, of a known dtype (and writable if
  /// `writable`) is read through numpy's C API where the build has it
  /// (numpy_view.h), else through the buffer protocol: the same memory as
  /// DLPack without building and consuming a capsule. Anything else, or a
  /// numpy array neither way takes (read-only, strided, ...), goes through
  /// import() and its messages, except a CUDA array: for it this returns
  /// nullptr before the producer exports anything (CUDA arrays take the
  /// general path, which keeps them until the stream is done with them).
  static std::unique_ptr<Tensor> import_fast(py::handle obj, bool writable, const std::string& name);
  /// A new, uninitialised tensor of `count` elements of `dtype`, owned by the
  /// binding (64-byte aligned).
  static std::unique_ptr<Tensor> empty(DLDataType dtype, int64_t count);
  /// A one-dimensional view of elements [offset, offset + count) of the
  /// Tensor `base`, which it keeps alive.
  static std::unique_ptr<Tensor> slice(py::object base, int64_t offset, int64_t count);

  ~Tensor();
  Tensor(const Tensor&) = delete;
  Tensor& operator=(const Tensor&) = delete;

  /// The tensor to pass to the C library (valid while this object lives).
  const DLTensor* dl() const { return &dl_; }
  /// First element's address (data + byte_offset).
  char* ptr() const { return static_cast<char*>(dl_.data) + dl_.byte_offset; }

  int64_t count() const { return count_; }
  int64_t itemsize() const { return itemsize_; }
  int64_t nbytes() const { return count_ * itemsize_; }
  DLDataType dtype() const { return dl_.dtype; }
  DLDevice device() const { return dl_.device; }
  /// Whether the memory is CUDA memory (kDLCUDA, kDLCUDAManaged).
  bool on_cuda() const { return dl_.device.device_type == kDLCUDA || dl_.device.device_type == kDLCUDAManaged; }
  bool readonly() const { return readonly_; }
  /// Whether the array holds complex numbers, handed to C as pairs of reals
  /// (dtype float32/float64, twice the count, a last dimension of 2).
  bool is_complex() const { return complex_; }
  Source source() const { return source_; }
  const std::vector<int64_t>& shape() const { return shape_; }

  /// Copies `count` elements of `src` from element `src_offset` to element
  /// `dst_offset` of `dst` (memmove: the ranges may overlap). Same dtype,
  /// CPU memory and bounds are checked; the GIL is released for big copies.
  static void copy(Tensor& dst, int64_t dst_offset, const Tensor& src, int64_t src_offset, int64_t count);

 private:
  Tensor() = default;
  /// Where a DLPack producer says its memory is: (device type, id) from
  /// __dlpack_device__, or (kDLCPU, 0) when it has none; raises for a
  /// malformed answer.
  static std::pair<int32_t, int32_t> dlpack_device(py::handle obj, const std::string& name);
  /// DLPack import of memory at `device` (dlpack_device's answer).
  static std::unique_ptr<Tensor> import_dlpack(py::handle obj, bool writable, const std::string& name,
                                               std::pair<int32_t, int32_t> device);
  static std::unique_ptr<Tensor> import_buffer(py::handle obj, bool writable, const std::string& name);
  /// The numpy half of import_fast: nullptr (no error set) if `obj` is not
  /// a suitable array.
  static std::unique_ptr<Tensor> import_numpy(py::handle obj, bool writable, const std::string& name);
  /// Copies and checks the header of a producer's tensor (shape, contiguity).
  void adopt(const DLTensor& t, const std::string& name);

  DLTensor dl_{};
  std::vector<int64_t> shape_;
  int64_t count_ = 0;
  int64_t itemsize_ = 0;
  bool readonly_ = false;
  bool complex_ = false;
  Source source_ = Source::kOwned;

  // Exactly one of these owns the memory (none for kView and kNumpy, which
  // keep the array they read in base_).
  DLManagedTensorVersioned* versioned_ = nullptr;
  DLManagedTensor* legacy_ = nullptr;
  Py_buffer view_{};
  bool has_view_ = false;
  struct FreeDeleter {
    void operator()(void* p) const;
  };
  std::unique_ptr<void, FreeDeleter> owned_;
  py::object base_;
  // The DLPack capsule the managed tensor came in, kept alive until the
  // deleter has run (members are destroyed after ~Tensor's body): some
  // producers free the tensor's memory together with the capsule.
  py::object capsule_;
};

/// "float32", "int64", "bool", "bfloat16", ... or "dtype(code=C, bits=B)".
std::string dtype_name(DLDataType dtype);
/// "cpu", "cuda", ... for a DLPack device type.
std::string device_name(int32_t device_type);
/// Whether two dtypes are the same.
inline bool same_dtype(DLDataType a, DLDataType b) {
  return a.code == b.code && a.bits == b.bits && a.lanes == b.lanes;
}

/// Binds the class (module.cc).
void bind_tensor(py::module_& m);

}  // namespace omniccl_py
