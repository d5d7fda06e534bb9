#include "errors.h"

namespace omniccl_py {

void raise_status(occl_status_t status, const std::string& message) {
  py::object make = py::module_::import("omniccl.errors").attr("_from_status");
  py::object exc = make(static_cast<int>(status), message);
  PyErr_SetObject(reinterpret_cast<PyObject*>(Py_TYPE(exc.ptr())), exc.ptr());
  throw py::error_already_set();
}

void raise_last(occl_status_t status, const char* what) {
  std::string message = occl_last_error();
  if (message.empty()) message = std::string(what) + ": " + occl_status_string(status);
  raise_status(status, message);
}

}  // namespace omniccl_py
