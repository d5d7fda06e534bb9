// Reading a numpy array's memory without exporting it (the hot path's
// import, see Tensor::import_fast).
//
// numpy's buffer export builds a Py_buffer with a format string on every
// call (about 0.35 us, the largest part of a small blocking call's cost in
// the binding). When the extension is built against numpy's headers
// (OMNICCL_PY_NUMPY: bindings/python/CMakeLists.txt finds them), the array's
// fields are read through numpy's C API instead. The API is loaded on first
// use; if numpy cannot be imported then, or the build had no headers, every
// array goes through the buffer protocol as before.
#include "numpy_view.h"

#ifdef OMNICCL_PY_NUMPY
#define NPY_NO_DEPRECATED_API NPY_1_7_API_VERSION
#include <numpy/arrayobject.h>
#endif

namespace omniccl_py {

#ifdef OMNICCL_PY_NUMPY

namespace {

/// Loads numpy's C API on first use; false (error cleared) if numpy is
/// unusable. Called with the GIL held. No function-local static: importing
/// numpy may let another thread run, which would then wait on the static's
/// guard while holding the GIL; two threads loading the API both is
/// harmless (they store the same table).
bool numpy_api() {
  static int state = 0;  // 0: not tried, 1: loaded, -1: unusable
  if (state == 0) {
    if (_import_array() < 0) {
      PyErr_Clear();
      state = -1;
    } else {
      state = 1;
    }
  }
  return state > 0;
}

/// The DLPack dtype of a numpy type number, or code 255.
DLDataType dtype_of(int type_num, int itemsize) {
  const auto bits = static_cast<uint8_t>(itemsize * 8);
  switch (type_num) {
    case NPY_BOOL: return DLDataType{kDLBool, 8, 1};
    case NPY_BYTE:
    case NPY_SHORT:
    case NPY_INT:
    case NPY_LONG:
    case NPY_LONGLONG: return DLDataType{kDLInt, bits, 1};
    case NPY_UBYTE:
    case NPY_USHORT:
    case NPY_UINT:
    case NPY_ULONG:
    case NPY_ULONGLONG: return DLDataType{kDLUInt, bits, 1};
    case NPY_HALF:
    case NPY_FLOAT:
    case NPY_DOUBLE: return DLDataType{kDLFloat, bits, 1};
    case NPY_CFLOAT:
    case NPY_CDOUBLE: return DLDataType{kDLComplex, bits, 1};
    default: return DLDataType{255, 0, 1};
  }
}

}  // namespace

bool numpy_view(PyObject* obj, bool writable, NumpyView& out) {
  if (!numpy_api() || !PyArray_CheckExact(obj)) return false;
  auto* a = reinterpret_cast<PyArrayObject*>(obj);
  // What the buffer protocol would refuse, or the DLPack path explains.
  if (!PyArray_IS_C_CONTIGUOUS(a) || !PyArray_ISNOTSWAPPED(a)) return false;
  if (writable && !PyArray_ISWRITEABLE(a)) return false;
  const DLDataType dtype = dtype_of(PyArray_TYPE(a), static_cast<int>(PyArray_ITEMSIZE(a)));
  if (dtype.code == 255 || PyArray_NDIM(a) > NumpyView::kMaxDims) return false;
  out.data = PyArray_DATA(a);
  out.ndim = PyArray_NDIM(a);
  for (int i = 0; i < out.ndim; ++i) out.shape[i] = PyArray_DIMS(a)[i];
  out.dtype = dtype;
  out.readonly = !PyArray_ISWRITEABLE(a);
  return true;
}

bool numpy_view_built() { return true; }

#else

bool numpy_view(PyObject*, bool, NumpyView&) { return false; }

bool numpy_view_built() { return false; }

#endif

}  // namespace omniccl_py
