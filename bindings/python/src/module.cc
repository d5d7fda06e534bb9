// omniccl._omniccl: the native layer of the Python package. It talks only to
// the stable C ABI (omniccl/omniccl.h); everything user-facing is Python code
// in the omniccl package on top of it.
#include <pybind11/pybind11.h>

#include <cstring>
#include <string>

#include <omniccl/omniccl.h>

#include "comm.h"
#include "errors.h"
#include "tensor.h"

namespace py = pybind11;

#define OMNICCL_PY_STR2(x) #x
#define OMNICCL_PY_STR(x) OMNICCL_PY_STR2(x)

PYBIND11_MODULE(_omniccl, m) {
  m.doc() = "Native layer of omniccl over the OmniCCL C ABI (internal).";

  // Fail the import clearly if the library found at run time does not fit
  // the header the extension was compiled against.
  if (OCCL_INIT_CHECK() != OCCL_SUCCESS) {
    throw py::import_error(std::string("omniccl: the OmniCCL library does not fit this extension: ") +
                           occl_last_error());
  }
  int library_version = 0;
  (void)occl_get_version(&library_version);

  m.attr("__version__") =
      OMNICCL_PY_STR(OCCL_VERSION_MAJOR) "." OMNICCL_PY_STR(OCCL_VERSION_MINOR) "." OMNICCL_PY_STR(OCCL_VERSION_PATCH);
  m.attr("VERSION_CODE") = OCCL_VERSION_CODE;
  m.attr("ABI_VERSION") = OCCL_ABI_VERSION;
  m.attr("LIBRARY_VERSION_CODE") = library_version;
  m.attr("SPLIT_NOCOLOR") = OCCL_SPLIT_NOCOLOR;
  m.attr("FROM_ENV") = OCCL_FROM_ENV;
  m.attr("RED_OP_CUSTOM_BASE") = OCCL_RED_OP_CUSTOM_BASE;
  m.attr("UNIQUE_ID_BYTES") = OCCL_UNIQUE_ID_BYTES;

  m.def(
      "status_string",
      [](int status) {
        static_assert(sizeof(occl_status_t) == sizeof(int), "occl_status_t is an int");
        occl_status_t s;
        std::memcpy(&s, &status, sizeof s);  // any int, without an out-of-range enum cast
        return std::string(occl_status_string(s));
      },
      py::arg("status"), "occl_status_string: the name and description of a status code.");

  m.def("cuda_stream", &omniccl_py::cuda_stream,
        "The calling thread's OmniCCL CUDA stream as an integer (0: none set, the legacy default stream).");
  m.def("set_cuda_stream", &omniccl_py::set_cuda_stream, py::arg("stream"),
        "Sets the calling thread's OmniCCL CUDA stream (0: none); returns the previous one.");

  omniccl_py::bind_tensor(m);
  omniccl_py::bind_comm(m);
}
