// DLPack and buffer-protocol import: the binding's one owner of DLPack.
//
// The order of attempts for an object `obj` (the Python array API standard's
// consumer rules, as mpi4py and numpy.from_dlpack apply them):
//
//   1. obj.__dlpack_device__() says where the memory is. The CPU and CUDA
//      (kDLCUDA, kDLCUDAManaged) are taken; anything else is refused with
//      OCCL_ERR_UNSUPPORTED before obj exports anything. For CUDA memory the
//      stream the operation will be ordered on (the thread's current OmniCCL
//      stream, see cuda_stream(); DLPack's 1 for the legacy default stream
//      when none is set) is passed as __dlpack__(stream=...): the DLPack
//      handshake, in which the producer makes its pending work on the array
//      visible to that stream before handing it over.
//   2. obj.__dlpack__(stream=None, max_version=(1, 1)): a producer that knows
//      DLPack >= 1.0 returns a "dltensor_versioned" capsule. Its flags tell
//      whether the array is read-only or a copy; either is refused where the
//      operation writes into the array.
//   3. A producer that does not take max_version raises TypeError; then
//      obj.__dlpack__() gives a legacy "dltensor" capsule (no read-only
//      information: such producers refuse to export read-only arrays).
//   4. A producer that cannot export this array (BufferError, e.g. numpy < 2.1
//      for a read-only array) and any object without __dlpack__ go through
//      the buffer protocol (PEP 3118), asking for a writable buffer where the
//      operation writes.
//
// Consuming a capsule follows the DLPack rules: the capsule is renamed to
// "used_dltensor_versioned" / "used_dltensor", which tells its destructor
// that the consumer owns the managed tensor now, and the managed tensor's
// deleter is called exactly once, when the Tensor is destroyed (after the
// operation that used it has completed). The Tensor holds the capsule until
// then: producers may tie the array's memory to the capsule's lifetime.
#include "tensor.h"

#include <cstdlib>
#include <cstring>
#include <limits>

#include "errors.h"
#include "numpy_view.h"

namespace omniccl_py {

namespace {

constexpr const char* kVersionedName = "dltensor_versioned";
constexpr const char* kUsedVersionedName = "used_dltensor_versioned";
constexpr const char* kLegacyName = "dltensor";
constexpr const char* kUsedLegacyName = "used_dltensor";
// Copies bigger than this run with the GIL released.
constexpr int64_t kReleaseGilBytes = 256 * 1024;

[[noreturn]] void raise_type_error(const std::string& message) {
  PyErr_SetString(PyExc_TypeError, message.c_str());
  throw py::error_already_set();
}

std::string type_name(py::handle obj) { return Py_TYPE(obj.ptr())->tp_name; }

bool is_cuda(int32_t type) { return type == kDLCUDA || type == kDLCUDAManaged; }

[[noreturn]] void raise_unsupported_device(const std::string& name, int32_t type, int32_t id) {
  raise_status(OCCL_ERR_UNSUPPORTED, name + " is on device " + device_name(type) + ":" + std::to_string(id) +
                                         "; OmniCCL supports CPU and CUDA arrays (DLPack kDLCPU, kDLCUDA, "
                                         "kDLCUDAManaged)");
}

/// The calling thread's OmniCCL stream (0: none set, the legacy default).
thread_local uintptr_t current_stream = 0;

/// The DLPack dtype of a buffer-protocol format string, or code 255 if none.
DLDataType dtype_of_format(const char* format, Py_ssize_t itemsize) {
  DLDataType none{255, 0, 1};
  std::string f = format == nullptr ? "B" : format;
  bool little = true;
  if (!f.empty() && (f[0] == '@' || f[0] == '=' || f[0] == '<' || f[0] == '>' || f[0] == '!')) {
    little = f[0] != '>' && f[0] != '!';
    f.erase(0, 1);
  }
  if (f.size() > 1 && f[0] == '1') f.erase(0, 1);  // an explicit count of 1
  if (!little && itemsize != 1) return none;       // big-endian data
  const auto bits = static_cast<uint8_t>(itemsize * 8);
  if (f == "?") return DLDataType{kDLBool, 8, 1};
  if (f == "b" || f == "h" || f == "i" || f == "l" || f == "q" || f == "n") return DLDataType{kDLInt, bits, 1};
  if (f == "B" || f == "c" || f == "H" || f == "I" || f == "L" || f == "Q" || f == "N") {
    return DLDataType{kDLUInt, bits, 1};
  }
  if (f == "e" || f == "f" || f == "d") return DLDataType{kDLFloat, bits, 1};
  if (f == "Zf" || f == "Zd") return DLDataType{kDLComplex, bits, 1};
  return none;
}

/// Whether obj is a tensor that requires grad (torch's `requires_grad`).
bool requires_grad(py::handle obj) {
  PyObject* flag = PyObject_GetAttrString(obj.ptr(), "requires_grad");
  if (flag == nullptr) {
    PyErr_Clear();
    return false;
  }
  const int truth = PyObject_IsTrue(flag);
  Py_DECREF(flag);
  if (truth < 0) PyErr_Clear();
  return truth == 1 && PyObject_HasAttrString(obj.ptr(), "detach") != 0;
}

/// Calls obj.__dlpack__ as in steps 2-3 above. Returns the capsule, or None
/// when the producer raised BufferError and the buffer protocol may be tried.
/// A tensor that requires grad (torch refuses to export it) is exported
/// through obj.detach(), which shares its memory: what torch.distributed
/// does with such tensors too. Only tried after a refusal, so the common
/// path pays nothing for it.
py::object export_capsule(py::handle obj, const std::string& name, bool cuda) {
  py::object dlpack = obj.attr("__dlpack__");
  // DLPack's stream argument: None for CPU memory; for CUDA memory the
  // stream the operation uses, 1 meaning the legacy default stream.
  py::object stream = py::none();
  if (cuda) stream = py::int_(current_stream != 0 ? current_stream : uintptr_t{1});
  auto unusable = [&](py::error_already_set& e) -> py::object {
    if (e.matches(PyExc_BufferError)) {
      if (PyObject_CheckBuffer(obj.ptr())) return py::none();
      raise_value(name + " (" + type_name(obj) + ") cannot be exported through DLPack: " + e.what());
    }
    if (requires_grad(obj)) {
      py::object detached = obj.attr("detach")();
      if (!detached.is(obj) && !requires_grad(detached)) return export_capsule(detached, name, cuda);
    }
    throw;  // NOLINT: rethrows the exception being handled
  };
  try {
    return dlpack(py::arg("stream") = stream,
                  py::arg("max_version") = py::make_tuple(DLPACK_MAJOR_VERSION, DLPACK_MINOR_VERSION));
  } catch (py::error_already_set& e) {
    if (!e.matches(PyExc_TypeError)) return unusable(e);
  }
  // A producer older than DLPack 1.0: no max_version (and perhaps no stream).
  try {
    if (cuda) return dlpack(py::arg("stream") = stream);
    return dlpack();
  } catch (py::error_already_set& e) {
    return unusable(e);
  }
}

}  // namespace

std::string dtype_name(DLDataType d) {
  std::string bits = std::to_string(d.bits);
  std::string base;
  switch (d.code) {
    case kDLInt: base = "int" + bits; break;
    case kDLUInt: base = "uint" + bits; break;
    case kDLFloat: base = "float" + bits; break;
    case kDLBfloat: base = "bfloat" + bits; break;
    case kDLComplex: base = "complex" + bits; break;
    case kDLBool: base = d.bits == 8 ? "bool" : "bool" + bits; break;
    default: base = "dtype(code=" + std::to_string(d.code) + ", bits=" + bits + ")"; break;
  }
  if (d.lanes != 1) base += "x" + std::to_string(d.lanes);
  return base;
}

std::string device_name(int32_t type) {
  switch (type) {
    case kDLCPU: return "cpu";
    case kDLCUDA: return "cuda";
    case kDLCUDAHost: return "cuda_host";
    case kDLCUDAManaged: return "cuda_managed";
    case kDLROCM: return "rocm";
    case kDLROCMHost: return "rocm_host";
    case kDLOpenCL: return "opencl";
    case kDLVulkan: return "vulkan";
    case kDLMetal: return "metal";
    case kDLOneAPI: return "oneapi";
    case kDLWebGPU: return "webgpu";
    default: return "device_type_" + std::to_string(type);
  }
}

void Tensor::FreeDeleter::operator()(void* p) const { std::free(p); }

Tensor::~Tensor() {
  // Give the memory back to its producer, exactly once. DLPack deleters of
  // Python producers touch Python objects: Tensors are destroyed with the
  // GIL held (they are Python objects themselves).
  if (versioned_ != nullptr && versioned_->deleter != nullptr) versioned_->deleter(versioned_);
  if (legacy_ != nullptr && legacy_->deleter != nullptr) legacy_->deleter(legacy_);
  if (has_view_) PyBuffer_Release(&view_);
}

uintptr_t cuda_stream() { return current_stream; }

uintptr_t set_cuda_stream(uintptr_t stream) {
  const uintptr_t previous = current_stream;
  current_stream = stream;
  return previous;
}

void Tensor::adopt(const DLTensor& t, const std::string& name) {
  const int32_t type = t.device.device_type;
  if (type != kDLCPU && !is_cuda(type)) raise_unsupported_device(name, type, t.device.device_id);
  if (t.ndim < 0) raise_value(name + ": ndim is negative (" + std::to_string(t.ndim) + ")");
  if (t.ndim > 0 && t.shape == nullptr) raise_value(name + ": the producer gave no shape");
  shape_.assign(t.shape, t.shape + t.ndim);
  int64_t count = 1;
  for (int32_t i = 0; i < t.ndim; ++i) {
    if (shape_[i] < 0) raise_value(name + ": shape[" + std::to_string(i) + "] is negative");
    if (shape_[i] != 0 && count > std::numeric_limits<int64_t>::max() / shape_[i]) {
      raise_value(name + ": the element count overflows 64 bits");
    }
    count *= shape_[i];
  }
  // Contiguity: the C library's rule (compact row-major; extent-1 dimensions
  // may carry any stride), checked here so that the error is a ValueError
  // raised before anything is started.
  if (t.strides != nullptr && count > 0) {
    int64_t expected = 1;
    for (int32_t i = t.ndim - 1; i >= 0; --i) {
      if (shape_[i] != 1 && t.strides[i] != expected) {
        raise_value(name + " is not contiguous (dimension " + std::to_string(i) + " has stride " +
                    std::to_string(t.strides[i]) + " elements; a C-contiguous array has " + std::to_string(expected) +
                    "); pass a contiguous copy, e.g. numpy.ascontiguousarray(a) or t.contiguous()");
      }
      expected *= shape_[i];
    }
  }
  if (count > 0 && t.data == nullptr) raise_value(name + ": data is NULL but the array has elements");
  dl_ = t;
  if (t.dtype.code == kDLComplex && is_cuda(type)) {
    raise_status(OCCL_ERR_UNSUPPORTED, name +
                                           " is a complex CUDA array; complex numbers are supported for CPU "
                                           "arrays only (view it as real pairs, e.g. torch.view_as_real)");
  }
  // complex64 / complex128 are dtypes of the C library, which reduces them
  // as complex numbers.
  complex_ = t.dtype.code == kDLComplex;
  dl_.shape = shape_.data();
  dl_.strides = nullptr;  // contiguous: checked above
  count_ = count;
  itemsize_ = (static_cast<int64_t>(dl_.dtype.bits) * dl_.dtype.lanes + 7) / 8;
}

std::unique_ptr<Tensor> Tensor::import(py::handle obj, bool writable, const std::string& name) {
  if (obj.is_none()) raise_type_error(name + " is None; expected an array");
  if (py::isinstance<Tensor>(obj)) raise_type_error(name + " is an omniccl._omniccl.Tensor already");
  if (PyObject_HasAttrString(obj.ptr(), "__dlpack__")) {
    if (auto t = import_dlpack(obj, writable, name, dlpack_device(obj, name))) return t;
  }
  if (PyObject_CheckBuffer(obj.ptr())) return import_buffer(obj, writable, name);
  if (PyObject_HasAttrString(obj.ptr(), "__cuda_array_interface__") != 0) {
    raise_status(OCCL_ERR_UNSUPPORTED, name + " (" + type_name(obj) +
                                           ") is a CUDA array without DLPack (only __cuda_array_interface__); "
                                           "OmniCCL takes CUDA arrays through DLPack (__dlpack__, as CuPy and "
                                           "PyTorch arrays have)");
  }
  raise_type_error(name + " must be an array supporting DLPack (__dlpack__) or the buffer protocol, not " +
                   type_name(obj));
}

std::unique_ptr<Tensor> Tensor::import_fast(py::handle obj, bool writable, const std::string& name) {
  // tp_name of numpy's array type in numpy 1.x and 2.x; subclasses (which
  // may override __dlpack__ or the buffer protocol) take the general path.
  if (std::strcmp(Py_TYPE(obj.ptr())->tp_name, "numpy.ndarray") == 0) {
    if (auto t = import_numpy(obj, writable, name)) return t;
  }
  // Where the memory is, before anything is exported: a CUDA array leaves
  // the fast path here, so the general path's export is its only one.
  if (!obj.is_none() && !py::isinstance<Tensor>(obj) && PyObject_HasAttrString(obj.ptr(), "__dlpack__")) {
    const auto device = dlpack_device(obj, name);
    if (is_cuda(device.first)) return nullptr;
    if (auto t = import_dlpack(obj, writable, name, device)) return t;
  }
  return import(obj, writable, name);
}

std::unique_ptr<Tensor> Tensor::import_numpy(py::handle obj, bool writable, const std::string& name) {
  std::unique_ptr<Tensor> t(new Tensor());
  NumpyView nv;
  if (numpy_view(obj.ptr(), writable, nv)) {
    t->base_ = py::reinterpret_borrow<py::object>(obj);  // the memory stays the array's
    t->source_ = Source::kNumpy;
    DLTensor dl{};
    dl.data = nv.data;
    dl.device = DLDevice{kDLCPU, 0};
    dl.ndim = nv.ndim;
    dl.dtype = nv.dtype;
    dl.shape = nv.shape;
    t->adopt(dl, name);  // copies the shape
    t->readonly_ = nv.readonly;
    return t;
  }
  const int flags = PyBUF_C_CONTIGUOUS | PyBUF_FORMAT | (writable ? PyBUF_WRITABLE : 0);
  if (PyObject_GetBuffer(obj.ptr(), &t->view_, flags) != 0) {
    PyErr_Clear();  // import() says what is wrong with it
    return nullptr;
  }
  t->has_view_ = true;  // released by ~Tensor, also when declined below
  t->source_ = Source::kBuffer;
  const Py_buffer& v = t->view_;
  const DLDataType dtype = dtype_of_format(v.format, v.itemsize);
  if (dtype.code == 255 || v.ndim > 32) return nullptr;
  int64_t shape[32];
  for (int i = 0; i < v.ndim; ++i) shape[i] = v.shape[i];
  DLTensor dl{};
  dl.data = v.buf;
  dl.device = DLDevice{kDLCPU, 0};
  dl.ndim = v.ndim;
  dl.dtype = dtype;
  dl.shape = shape;
  t->adopt(dl, name);  // copies the shape
  t->readonly_ = v.readonly != 0;
  return t;
}

std::pair<int32_t, int32_t> Tensor::dlpack_device(py::handle obj, const std::string& name) {
  if (!PyObject_HasAttrString(obj.ptr(), "__dlpack_device__")) return {kDLCPU, 0};
  py::tuple device = obj.attr("__dlpack_device__")();
  if (device.size() != 2) raise_type_error(name + ".__dlpack_device__() did not return (device_type, device_id)");
  return {device[0].cast<int32_t>(), device[1].cast<int32_t>()};
}

std::unique_ptr<Tensor> Tensor::import_dlpack(py::handle obj, bool writable, const std::string& name,
                                              std::pair<int32_t, int32_t> device) {
  const auto [type, id] = device;
  if (type != kDLCPU && !is_cuda(type)) raise_unsupported_device(name, type, id);
  const bool cuda = is_cuda(type);
  py::object capsule = export_capsule(obj, name, cuda);
  if (capsule.is_none()) return nullptr;

  std::unique_ptr<Tensor> t(new Tensor());
  t->capsule_ = capsule;
  PyObject* cap = capsule.ptr();
  bool copied = false;
  if (PyCapsule_IsValid(cap, kVersionedName)) {
    auto* m = static_cast<DLManagedTensorVersioned*>(PyCapsule_GetPointer(cap, kVersionedName));
    if (m == nullptr) throw py::error_already_set();
    if (m->version.major != DLPACK_MAJOR_VERSION) {
      // Not ours to read; left unconsumed, the capsule's destructor frees it.
      raise_value(name + ": the producer exported DLPack " + std::to_string(m->version.major) + "." +
                  std::to_string(m->version.minor) + ", OmniCCL reads DLPack " + std::to_string(DLPACK_MAJOR_VERSION) +
                  ".x");
    }
    if (PyCapsule_SetName(cap, kUsedVersionedName) != 0) throw py::error_already_set();
    t->versioned_ = m;  // owned from here on: ~Tensor calls the deleter
    t->source_ = Source::kDLPackVersioned;
    t->readonly_ = (m->flags & DLPACK_FLAG_BITMASK_READ_ONLY) != 0;
    copied = (m->flags & DLPACK_FLAG_BITMASK_IS_COPIED) != 0;
    t->adopt(m->dl_tensor, name);
  } else if (PyCapsule_IsValid(cap, kLegacyName)) {
    auto* m = static_cast<DLManagedTensor*>(PyCapsule_GetPointer(cap, kLegacyName));
    if (m == nullptr) throw py::error_already_set();
    if (PyCapsule_SetName(cap, kUsedLegacyName) != 0) throw py::error_already_set();
    t->legacy_ = m;
    t->source_ = Source::kDLPack;
    t->adopt(m->dl_tensor, name);
  } else {
    raise_type_error(name + ".__dlpack__() returned " + type_name(capsule) +
                     ", not an unused 'dltensor_versioned' or 'dltensor' capsule");
  }
  if (writable && t->readonly_) {
    raise_value(name +
                " is read-only, but the operation writes its result into it; pass a writable array "
                "(jax arrays are immutable: receive into a numpy array, see docs/getting-started/python.md)");
  }
  if (writable && copied) {
    raise_value(name +
                ": the producer exported a copy of the array (DLPack IS_COPIED), so results written "
                "into it would not reach the array; pass an array that can be shared without copying");
  }
  return t;
}

std::unique_ptr<Tensor> Tensor::import_buffer(py::handle obj, bool writable, const std::string& name) {
  std::unique_ptr<Tensor> t(new Tensor());
  const int flags = PyBUF_STRIDES | PyBUF_FORMAT | (writable ? PyBUF_WRITABLE : 0);
  if (PyObject_GetBuffer(obj.ptr(), &t->view_, flags) != 0) {
    py::error_already_set err;
    if (writable) {
      Py_buffer probe;
      if (PyObject_GetBuffer(obj.ptr(), &probe, PyBUF_STRIDES | PyBUF_FORMAT) == 0) {
        PyBuffer_Release(&probe);
        raise_value(name + " (" + type_name(obj) +
                    ") is read-only, but the operation writes its result into it; pass a writable array");
      }
      PyErr_Clear();
    }
    raise_value(name + " (" + type_name(obj) + "): cannot use its buffer: " + err.what());
  }
  t->has_view_ = true;
  t->source_ = Source::kBuffer;
  const Py_buffer& v = t->view_;
  if (PyBuffer_IsContiguous(&v, 'C') == 0) {
    raise_value(name + " is not contiguous; pass a contiguous copy, e.g. numpy.ascontiguousarray(a)");
  }
  DLDataType dtype = dtype_of_format(v.format, v.itemsize);
  if (dtype.code == 255) {
    raise_value(name + ": buffer format '" + std::string(v.format == nullptr ? "B" : v.format) +
                "' has no DLPack dtype (bool, int8..64, uint8..64, float16/32/64 in native byte order)");
  }
  std::vector<int64_t> shape;
  if (v.ndim > 0 && v.shape != nullptr) {
    shape.assign(v.shape, v.shape + v.ndim);
  } else if (v.ndim != 0) {
    shape.push_back(v.len / v.itemsize);
  }
  DLTensor dl{};
  dl.data = v.buf;
  dl.device = DLDevice{kDLCPU, 0};
  dl.ndim = static_cast<int32_t>(shape.size());
  dl.dtype = dtype;
  dl.shape = shape.data();
  dl.strides = nullptr;
  dl.byte_offset = 0;
  t->adopt(dl, name);
  t->readonly_ = v.readonly != 0;
  return t;
}

std::unique_ptr<Tensor> Tensor::empty(DLDataType dtype, int64_t count) {
  if (count < 0) raise_value("empty: count is negative");
  std::unique_ptr<Tensor> t(new Tensor());
  const int64_t itemsize = (static_cast<int64_t>(dtype.bits) * dtype.lanes + 7) / 8;
  if (itemsize <= 0) raise_value("empty: dtype " + dtype_name(dtype) + " has no whole-byte size");
  if (count > std::numeric_limits<int64_t>::max() / itemsize - 64) raise_value("empty: size overflows 64 bits");
  const auto bytes = static_cast<size_t>(count * itemsize);
  const size_t rounded = (bytes + 63) / 64 * 64;
  void* p = std::aligned_alloc(64, rounded == 0 ? 64 : rounded);
  if (p == nullptr) throw std::bad_alloc();
  t->owned_.reset(p);
  t->shape_ = {count};
  t->dl_.data = p;
  t->dl_.device = DLDevice{kDLCPU, 0};
  t->dl_.ndim = 1;
  t->dl_.dtype = dtype;
  t->dl_.shape = t->shape_.data();
  t->count_ = count;
  t->itemsize_ = itemsize;
  t->source_ = Source::kOwned;
  return t;
}

std::unique_ptr<Tensor> Tensor::slice(py::object base_obj, int64_t offset, int64_t count) {
  const Tensor& base = base_obj.cast<const Tensor&>();
  if (offset < 0 || count < 0 || offset > base.count_ || count > base.count_ - offset) {
    raise_value("slice [" + std::to_string(offset) + ", " + std::to_string(offset) + " + " + std::to_string(count) +
                ") is outside a tensor of " + std::to_string(base.count_) + " elements");
  }
  std::unique_ptr<Tensor> t(new Tensor());
  t->shape_ = {count};
  t->dl_ = base.dl_;
  t->dl_.ndim = 1;
  t->dl_.shape = t->shape_.data();
  t->dl_.strides = nullptr;
  t->dl_.byte_offset = base.dl_.byte_offset + static_cast<uint64_t>(offset * base.itemsize_);
  t->count_ = count;
  t->itemsize_ = base.itemsize_;
  t->readonly_ = base.readonly_;
  t->complex_ = base.complex_;
  t->source_ = Source::kView;
  t->base_ = std::move(base_obj);
  return t;
}

void Tensor::copy(Tensor& dst, int64_t dst_offset, const Tensor& src, int64_t src_offset, int64_t count) {
  if (!same_dtype(dst.dtype(), src.dtype())) {
    raise_value("copy: dtypes differ (" + dtype_name(dst.dtype()) + " and " + dtype_name(src.dtype()) + ")");
  }
  if (dst.readonly_) raise_value("copy: the destination is read-only");
  if (dst.dl_.device.device_type != kDLCPU || src.dl_.device.device_type != kDLCPU) {
    raise_status(OCCL_ERR_UNSUPPORTED,
                 "this operation packs several arrays into one in host memory, which CUDA arrays cannot take "
                 "part in; pass one CUDA array per call (e.g. all_gather_into_tensor rather than a list)");
  }
  if (count < 0 || dst_offset < 0 || src_offset < 0 || dst_offset > dst.count_ || src_offset > src.count_ ||
      count > dst.count_ - dst_offset || count > src.count_ - src_offset) {
    raise_value("copy: " + std::to_string(count) + " elements do not fit (destination " + std::to_string(dst.count_) +
                " from " + std::to_string(dst_offset) + ", source " + std::to_string(src.count_) + " from " +
                std::to_string(src_offset) + ")");
  }
  const int64_t bytes = count * src.itemsize_;
  if (bytes == 0) return;
  char* to = dst.ptr() + dst_offset * dst.itemsize_;
  const char* from = src.ptr() + src_offset * src.itemsize_;
  if (bytes >= kReleaseGilBytes) {
    py::gil_scoped_release nogil;
    std::memmove(to, from, static_cast<size_t>(bytes));
  } else {
    std::memmove(to, from, static_cast<size_t>(bytes));
  }
}

namespace {

const char* source_name(Tensor::Source s) {
  switch (s) {
    case Tensor::Source::kDLPackVersioned: return "dlpack_versioned";
    case Tensor::Source::kDLPack: return "dlpack";
    case Tensor::Source::kBuffer: return "buffer";
    case Tensor::Source::kOwned: return "owned";
    case Tensor::Source::kView: return "view";
    case Tensor::Source::kNumpy: return "numpy";
  }
  return "unknown";
}

/// Making tensors (import, empty, slice) and moving their bytes.
void bind_tensor_data(py::class_<Tensor>& cls) {
  cls.def(py::init([](py::handle obj, bool writable, const std::string& name) {
            return Tensor::import(obj, writable, name);
          }),
          py::arg("obj"), py::arg("writable") = false, py::arg("name") = "tensor",
          "Imports obj (DLPack or buffer protocol); writable: the operation writes into it.")
      .def_static(
          "empty_like", [](const Tensor& like, int64_t count) { return Tensor::empty(like.dtype(), count); },
          py::arg("like"), py::arg("count"), "A new owned tensor of count elements with like's dtype (uninitialised).")
      .def_static(
          "slice", [](py::object base, int64_t offset, int64_t count) { return Tensor::slice(base, offset, count); },
          py::arg("base"), py::arg("offset"), py::arg("count"),
          "A 1-D view of elements [offset, offset + count) of base (kept alive).")
      .def(
          "copy_from",
          [](Tensor& self, const Tensor& src, int64_t offset, int64_t src_offset, int64_t count) {
            Tensor::copy(self, offset, src, src_offset, count < 0 ? src.count() - src_offset : count);
          },
          py::arg("src"), py::arg("offset") = 0, py::arg("src_offset") = 0, py::arg("count") = -1,
          "Copies count elements (default: the rest of src) of src from src_offset into self at offset.")
      .def(
          "tobytes", [](const Tensor& self) { return py::bytes(self.ptr(), static_cast<size_t>(self.nbytes())); },
          "The tensor's bytes (a copy).");
}

/// What a tensor is: size, element type, shape, where its memory came from.
void bind_tensor_properties(py::class_<Tensor>& cls) {
  cls.def_property_readonly("count", &Tensor::count, "Number of elements.")
      .def_property_readonly("itemsize", &Tensor::itemsize, "Bytes per element.")
      .def_property_readonly("nbytes", &Tensor::nbytes, "Bytes in all.")
      .def_property_readonly(
          "dtype", [](const Tensor& self) { return dtype_name(self.dtype()); },
          "Element type, e.g. 'float32', 'complex64'.")
      .def_property_readonly(
          "dtype_code",
          [](const Tensor& self) { return py::make_tuple(self.dtype().code, self.dtype().bits, self.dtype().lanes); },
          "The DLPack dtype as (code, bits, lanes).")
      .def_property_readonly(
          "shape",
          [](const Tensor& self) {
            py::tuple out(self.shape().size());
            for (size_t i = 0; i < self.shape().size(); ++i) out[i] = py::int_(self.shape()[i]);
            return out;
          },
          "The shape.")
      .def_property_readonly("readonly", &Tensor::readonly, "Whether the memory must not be written.")
      .def_property_readonly("is_complex", &Tensor::is_complex,
                             "Whether the array is complex (complex64, complex128; count counts complex numbers).")
      .def_property_readonly(
          "source", [](const Tensor& self) { return source_name(self.source()); },
          "How it was imported: 'dlpack_versioned', 'dlpack', 'buffer', 'owned' or 'view'.")
      .def_property_readonly(
          "data_ptr", [](const Tensor& self) { return reinterpret_cast<uintptr_t>(self.ptr()); },
          "Address of the first element.")
      .def("__repr__", [](const Tensor& self) {
        return "<omniccl Tensor " + dtype_name(self.dtype()) + "[" + std::to_string(self.count()) + "] " +
               source_name(self.source()) + (self.readonly() ? " read-only" : "") + ">";
      });
}

}  // namespace

void bind_tensor(py::module_& m) {
  py::class_<Tensor> cls(m, "Tensor", R"doc(
An array handed to OmniCCL (internal; the public functions make these).

Tensor(obj, writable=False, name="tensor") imports obj once: through DLPack
(versioned capsule first, then the legacy one) or else the buffer protocol.
The memory stays valid, and the producer's DLPack deleter is called exactly
once, when the Tensor is garbage collected.
)doc");
  bind_tensor_data(cls);
  bind_tensor_properties(cls);
}

}  // namespace omniccl_py
