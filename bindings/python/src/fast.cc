// The blocking calls' hot path: one native call per Python call.
//
// A small blocking collective from Python (a loss scalar, a flag, a barrier)
// costs what the binding adds on top of the C call, so the common forms run
// here in one step, with no Python-level Tensor, no Work and no capsule:
//
//   fast_all_reduce(comm, send, recv, op, name)   send None: in place on recv
//   fast_broadcast(comm, buf, root, name)
//   fast_all_gather(comm, send, recv)
//   fast_barrier(comm)
//
// They are plain METH_FASTCALL functions of the module: pybind11's
// dispatch (argument vectors, keyword matching) costs more than the C call.
//
// Arrays come in through Tensor::import_fast (numpy through its C API or the buffer
// protocol, anything else through DLPack as Tensor::import does) and live on
// this call's stack until the C call has returned. The C call is the same
// blocking _ex call Comm::start makes (GIL given up once it has to wait,
// Ctrl-C handled the same way).
//
// A form these functions do not take returns NotImplemented before anything
// is sent (a closed communicator, mpi4py message lists, an op that is not a plain ReduceOp value,
// all_gather sizes that do not fit), and the Python layer then takes its general path, which
// accepts or explains them. So the fast path changes no result and no error
// message, only the time a call takes.
//
// c_loop_seconds times the C call itself in a loop (no Python in the loop),
// so that the Python layer's overhead can be measured as a difference in
// one process (bench/python_latency.py --overhead, tests/test_latency.py).
#include <pybind11/pybind11.h>

#include <chrono>
#include <memory>
#include <string>

#include <omniccl/omniccl.h>

#include "comm.h"
#include "errors.h"
#include "tensor.h"

namespace omniccl_py {

namespace {

/// Largest plain reduce op value (PREMUL_SUM); made premultiplied sums and
/// other values go through the general path.
constexpr long kLastPlainOp = OCCL_PREMUL_SUM;

py::object not_implemented() { return py::reinterpret_borrow<py::object>(Py_NotImplemented); }

/// Whether `obj` is an mpi4py message list ([buf, type], ...), which only the
/// Python layer reads.
bool is_message_list(py::handle obj) { return PyList_Check(obj.ptr()) || PyTuple_Check(obj.ptr()); }

/// The value of a plain reduce op (a ReduceOp or its int value, not bool),
/// or -1 when the general path must look at it.
int plain_op(py::handle op) {
  PyObject* o = op.ptr();
  if (!PyLong_Check(o) || PyBool_Check(o)) return -1;
  int overflow = 0;
  const long v = PyLong_AsLongAndOverflow(o, &overflow);
  if (overflow != 0 || v < 0 || v > kLastPlainOp) {
    PyErr_Clear();
    return -1;
  }
  return static_cast<int>(v);
}

occl_red_op_t as_red_op(int op) { return static_cast<occl_red_op_t>(op); }

/// A root/rank argument as an int in [0, size), or -1.
int rank_in(py::handle obj, int size) {
  if (!PyLong_Check(obj.ptr()) || PyBool_Check(obj.ptr())) return -1;
  int overflow = 0;
  const long v = PyLong_AsLongAndOverflow(obj.ptr(), &overflow);
  if (overflow != 0 || v < 0 || v >= size) {
    PyErr_Clear();
    return -1;
  }
  return static_cast<int>(v);
}

py::object all_reduce(Comm& c, py::handle send, py::handle recv, py::handle op_obj, const char* name) {
  if (c.state().closed()) return not_implemented();  // the general path names why
  const int op = plain_op(op_obj);
  if (op < 0 || recv.is_none() || is_message_list(recv) || is_message_list(send)) return not_implemented();
  // CUDA arrays (nullptr): the general path keeps them until the stream is done.
  std::unique_ptr<Tensor> r = Tensor::import_fast(recv, true, name);
  if (!r) return not_implemented();
  std::unique_ptr<Tensor> s;
  if (!send.is_none() && !(s = Tensor::import_fast(send, false, "sendbuf"))) return not_implemented();
  const DLTensor* sd = s ? s->dl() : r->dl();
  const DLTensor* rd = r->dl();
  return c.start(
      "all_reduce", {},
      [&](occl_comm_t h, const occl_options_t* o, occl_work_t* w) {
        return occl_all_reduce_ex(sd, rd, as_red_op(op), h, o, w);
      },
      true);
}

py::object broadcast(Comm& c, py::handle buf, py::handle root_obj, const char* name) {
  if (c.state().closed()) return not_implemented();
  // A root that is not a rank of this communicator: the general path explains.
  const int root = rank_in(root_obj, c.state().size());
  if (root < 0 || buf.is_none() || is_message_list(buf)) return not_implemented();
  std::unique_ptr<Tensor> t = Tensor::import_fast(buf, c.state().rank() != root, name);
  if (!t) return not_implemented();  // a CUDA array
  const DLTensor* d = t->dl();
  return c.start(
      "broadcast", {},
      [&](occl_comm_t h, const occl_options_t* o, occl_work_t* w) { return occl_broadcast_ex(d, root, h, o, w); },
      true);
}

py::object all_gather(Comm& c, py::handle send, py::handle recv) {
  if (c.state().closed()) return not_implemented();
  if (send.is_none() || recv.is_none() || is_message_list(send) || is_message_list(recv)) return not_implemented();
  std::unique_ptr<Tensor> s = Tensor::import_fast(send, false, "sendbuf");
  if (!s) return not_implemented();  // a CUDA array
  std::unique_ptr<Tensor> r = Tensor::import_fast(recv, true, "recvbuf");
  if (!r) return not_implemented();
  // Sizes that do not fit are the general path's to explain.
  if (!same_dtype(s->dtype(), r->dtype()) || r->count() != s->count() * c.state().size()) return not_implemented();
  const DLTensor* sd = s->dl();
  const DLTensor* rd = r->dl();
  return c.start(
      "all_gather", {},
      [&](occl_comm_t h, const occl_options_t* o, occl_work_t* w) { return occl_all_gather_ex(sd, rd, h, o, w); },
      true);
}

/// Runs body(args) as a METH_FASTCALL function taking exactly n arguments,
/// the first a Comm: C++ exceptions become Python ones (pybind11's own
/// dispatch, with its argument vectors, costs more than the call it wraps).
template <typename Body>
PyObject* fastcall(const char* fn, PyObject* const* args, Py_ssize_t nargs, Py_ssize_t n, Body&& body) {
  try {
    if (nargs != n) {
      PyErr_Format(PyExc_TypeError, "%s() takes %zd positional arguments (%zd given)", fn, n, nargs);
      return nullptr;
    }
    Comm& c = py::handle(args[0]).cast<Comm&>();
    return body(c).release().ptr();
  } catch (py::error_already_set& e) {
    e.restore();
  } catch (py::cast_error&) {
    PyErr_Format(PyExc_TypeError, "%s(): the first argument must be an omniccl._omniccl.Comm", fn);
  } catch (const std::exception& e) {
    PyErr_SetString(PyExc_RuntimeError, e.what());
  }
  return nullptr;
}

const char* str_arg(PyObject* o) {
  const char* s = PyUnicode_AsUTF8(o);  // cached in the str object
  if (s == nullptr) throw py::error_already_set();
  return s;
}

PyObject* py_all_reduce(PyObject*, PyObject* const* args, Py_ssize_t nargs) {
  return fastcall("fast_all_reduce", args, nargs, 5,
                  [&](Comm& c) { return all_reduce(c, args[1], args[2], args[3], str_arg(args[4])); });
}

PyObject* py_broadcast(PyObject*, PyObject* const* args, Py_ssize_t nargs) {
  return fastcall("fast_broadcast", args, nargs, 4,
                  [&](Comm& c) { return broadcast(c, args[1], args[2], str_arg(args[3])); });
}

PyObject* py_all_gather(PyObject*, PyObject* const* args, Py_ssize_t nargs) {
  return fastcall("fast_all_gather", args, nargs, 3, [&](Comm& c) { return all_gather(c, args[1], args[2]); });
}

PyObject* py_barrier(PyObject*, PyObject* const* args, Py_ssize_t nargs) {
  return fastcall("fast_barrier", args, nargs, 1, [&](Comm& c) -> py::object {
    if (c.state().closed()) return not_implemented();
    return c.start(
        "barrier", {}, [&](occl_comm_t h, const occl_options_t* o, occl_work_t* w) { return occl_barrier_ex(h, o, w); },
        true);
  });
}

// NOLINTNEXTLINE: a C table for PyModule_AddFunctions, alive as long as the module
PyMethodDef fast_methods[] = {
    {"fast_all_reduce", reinterpret_cast<PyCFunction>(reinterpret_cast<void (*)()>(py_all_reduce)), METH_FASTCALL,
     "fast_all_reduce(comm, send, recv, op, name): blocking all_reduce of recv (send None: in place) in one native "
     "call; NotImplemented for forms the Python layer must handle (a closed communicator, message lists, made "
     "ops)."},
    {"fast_broadcast", reinterpret_cast<PyCFunction>(reinterpret_cast<void (*)()>(py_broadcast)), METH_FASTCALL,
     "fast_broadcast(comm, buf, root, name): blocking broadcast in one native call; NotImplemented for a "
     "closed communicator, a message list or a root out of range."},
    {"fast_all_gather", reinterpret_cast<PyCFunction>(reinterpret_cast<void (*)()>(py_all_gather)), METH_FASTCALL,
     "fast_all_gather(comm, send, recv): blocking all_gather (recv holds size x send, same dtype) in one native "
     "call; NotImplemented otherwise."},
    {"fast_barrier", reinterpret_cast<PyCFunction>(reinterpret_cast<void (*)()>(py_barrier)), METH_FASTCALL,
     "fast_barrier(comm): blocking barrier in one native call; NotImplemented for a closed communicator."},
    {nullptr, nullptr, 0, nullptr}};

}  // namespace

void bind_fast(py::module_& m) {
  if (PyModule_AddFunctions(m.ptr(), fast_methods) != 0) throw py::error_already_set();
  m.def(
      "c_loop_seconds",
      [](Comm& c, const std::string& what, py::handle array, int64_t iters) {
        if (iters <= 0) raise_value("c_loop_seconds: iters must be positive");
        if (what != "all_reduce" && what != "broadcast" && what != "barrier") {
          raise_value("c_loop_seconds: what must be 'all_reduce', 'broadcast' or 'barrier', not '" + what + "'");
        }
        occl_comm_t h = c.state().require("c_loop_seconds");
        std::unique_ptr<Tensor> t;
        if (what != "barrier") t = Tensor::import(array, true, "array");
        const DLTensor* d = t ? t->dl() : nullptr;
        occl_status_t st = OCCL_SUCCESS;
        std::chrono::steady_clock::duration took{};
        {
          py::gil_scoped_release nogil;
          const auto t0 = std::chrono::steady_clock::now();
          for (int64_t i = 0; i < iters && st == OCCL_SUCCESS; ++i) {
            if (what == "all_reduce") {
              st = occl_all_reduce(d, d, OCCL_SUM, h, nullptr);
            } else if (what == "broadcast") {
              st = occl_broadcast(d, 0, h, nullptr);
            } else {
              st = occl_barrier(h, nullptr);
            }
          }
          took = std::chrono::steady_clock::now() - t0;
        }
        if (st != OCCL_SUCCESS) raise_last(st, ("c_loop_seconds(" + what + ")").c_str());
        return std::chrono::duration<double>(took).count() / static_cast<double>(iters);
      },
      py::arg("comm"), py::arg("what"), py::arg("array"), py::arg("iters"),
      "Seconds per call of the blocking C call (occl_all_reduce SUM in place, occl_broadcast from 0 or "
      "occl_barrier), called iters times from C with the GIL released: the C side of the Python overhead "
      "measurement. Collective: every rank calls it with the same arguments.");
}

}  // namespace omniccl_py
