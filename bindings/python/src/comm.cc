#include "comm.h"

#include <pybind11/stl.h>

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <cstring>
#include <mutex>
#include <thread>
#include <utility>

#include "errors.h"
#include "tensor.h"

namespace omniccl_py {

namespace {

using Clock = std::chrono::steady_clock;

/// How long one wait slice is: the most a signal waits to be acted on.
constexpr int64_t kSliceMs = 100;
/// After an abort every operation has ended; this bounds the wait for it.
constexpr int64_t kAfterAbortMs = 10000;

/// Operations whose communicator went away while they still ran: their arrays
/// are kept until they end. Deliberately never destroyed (it may hold Python
/// objects when the interpreter is gone).
std::vector<Pending>& graveyard() {
  static auto* pending = new std::vector<Pending>();
  return *pending;
}

/// Frees the finished entries of `list`. The arrays are released after the
/// loop, since releasing them runs Python code that may add to a list.
void sweep_list(std::vector<Pending>& list) {
  std::vector<Pending> finished;
  for (size_t i = 0; i < list.size();) {
    if (occl_work_test(list[i].work) != OCCL_ERR_IN_PROGRESS) {
      occl_work_free(list[i].work);
      finished.push_back(std::move(list[i]));
      list.erase(list.begin() + static_cast<std::ptrdiff_t>(i));
    } else {
      ++i;
    }
  }
}

/// Whether any of an operation's arrays is in CUDA memory.
bool any_cuda(const std::vector<py::object>& arrays) {
  for (const py::object& o : arrays) {
    if (py::isinstance<Tensor>(o) && o.cast<const Tensor&>().on_cuda()) return true;
  }
  return false;
}

/// occl_red_op_t holds run-time values (premultiplied sums, >= 64) that are
/// not enumerators; form it from an int without an out-of-range enum cast.
occl_red_op_t red_op(int op) {
  static_assert(sizeof(occl_red_op_t) == sizeof(int), "occl_red_op_t is an int");
  occl_red_op_t v;
  std::memcpy(&v, &op, sizeof v);
  return v;
}

int red_op_value(occl_red_op_t op) {
  int v;
  std::memcpy(&v, &op, sizeof v);
  return v;
}

/// A receive's or a probe's status as Python sees it: (source, tag, bytes, count).
py::tuple status_tuple(const occl_recv_status_t& st) { return py::make_tuple(st.source, st.tag, st.bytes, st.count); }

/// The DLTensor of a Tensor argument, or NULL for None.
const DLTensor* dl_of(py::handle t) { return t.is_none() ? nullptr : t.cast<const Tensor&>().dl(); }

/// The data of a counts/displacements argument (NULL for None), checked to
/// have one entry per rank (the C library reads exactly that many).
const int64_t* counts_of(const std::vector<int64_t>& v, int size, const char* name) {
  if (static_cast<int>(v.size()) != size) {
    raise_value(std::string(name) + " has " + std::to_string(v.size()) + " entries; the communicator has " +
                std::to_string(size) + " ranks");
  }
  return v.data();
}

/// The same for an optional argument (None: NULL). Takes the optional by
/// reference: the pointer is into the caller's vector.
const int64_t* counts_of(const std::optional<std::vector<int64_t>>& v, int size, const char* name) {
  return v ? counts_of(*v, size, name) : nullptr;
}

/// Shared state of an interruptible call on a helper thread.
struct Job {
  std::mutex mu;
  std::condition_variable cv;
  bool done = false;
  bool abandoned = false;
  occl_status_t status = OCCL_SUCCESS;
  std::string message;
  occl_comm_t result = nullptr;
};

/// Runs fn(&comm) on a helper thread and waits for it as Work::wait does. If
/// a signal handler raises meanwhile, on_interrupt runs, the helper is
/// abandoned (it destroys what it creates) and the exception propagates.
/// fn must hold no Python object: it may outlive the call.
occl_comm_t run_interruptible(std::function<occl_status_t(occl_comm_t*)> fn, const char* what,
                              const std::function<void(const std::string&)>& on_interrupt) {
  auto job = std::make_shared<Job>();
  std::thread([job, fn = std::move(fn)] {
    occl_comm_t out = nullptr;
    occl_status_t st = fn(&out);
    std::string message = st == OCCL_SUCCESS ? std::string() : std::string(occl_last_error());
    std::lock_guard<std::mutex> lock(job->mu);
    if (job->abandoned) {
      (void)occl_comm_destroy(out);
    } else {
      job->result = out;
    }
    job->status = st;
    job->message = std::move(message);
    job->done = true;
    job->cv.notify_all();
  }).detach();
  for (;;) {
    bool done;
    {
      py::gil_scoped_release nogil;
      std::unique_lock<std::mutex> lock(job->mu);
      done = job->cv.wait_for(lock, std::chrono::milliseconds(kSliceMs), [&] { return job->done; });
    }
    if (done) break;
    if (PyErr_CheckSignals() != 0) {
      py::error_already_set err;
      {
        std::lock_guard<std::mutex> lock(job->mu);
        if (job->done) {
          (void)occl_comm_destroy(job->result);
          job->result = nullptr;
        } else {
          job->abandoned = true;
        }
      }
      on_interrupt(py::str(err.type().attr("__name__")));
      throw err;
    }
  }
  if (job->status != OCCL_SUCCESS) {
    raise_status(job->status,
                 job->message.empty() ? std::string(what) + ": " + occl_status_string(job->status) : job->message);
  }
  return job->result;
}

std::unique_ptr<Comm> make_comm(occl_comm_t handle) {
  auto box = std::make_shared<HandleBox>();
  box->handle = handle;
  int rank = 0, size = 0;
  occl_status_t st = occl_comm_rank(handle, &rank);
  if (st == OCCL_SUCCESS) st = occl_comm_size(handle, &size);
  if (st != OCCL_SUCCESS) raise_last(st, "occl_comm_rank");
  return std::make_unique<Comm>(std::make_shared<CommState>(std::move(box), rank, size));
}

occl_config_t make_config(const InitOptions& o) {
  occl_config_t cfg = OCCL_CONFIG_INIT;
  if (o.timeout_ms) cfg.timeout_ms = *o.timeout_ms;
  if (o.transport) cfg.transport = o.transport->c_str();
  if (o.algorithm) cfg.algorithm = o.algorithm->c_str();
  return cfg;
}

}  // namespace

// ---------------------------------------------------------------------------
// HandleBox, CommState
// ---------------------------------------------------------------------------

HandleBox::~HandleBox() {
  if (handle != nullptr) (void)occl_comm_destroy(handle);
}

CommState::CommState(std::shared_ptr<HandleBox> box, int rank, int size)
    : box_(std::move(box)), rank_(rank), size_(size) {}

CommState::~CommState() {
  close(OCCL_ERR_INVALID_ARGUMENT, "the communicator was destroyed", /*abort=*/false);
  auto& rest = graveyard();
  for (Pending& p : orphans_) rest.push_back(std::move(p));
  orphans_.clear();
}

occl_comm_t CommState::require(const char* what) const {
  if (box_ == nullptr) raise_status(closed_status_, std::string(what) + ": " + closed_reason_);
  return box_->handle;
}

void CommState::close(occl_status_t status, std::string reason, bool abort) {
  if (box_ == nullptr) return;
  std::shared_ptr<HandleBox> box = std::move(box_);
  box_.reset();
  closed_status_ = status;
  closed_reason_ = std::move(reason);
  // A helper thread still running an interrupted split shares the box; then
  // the handle is destroyed when that thread lets go of it.
  if (box.use_count() == 1) {
    occl_comm_t handle = box->handle;
    box->handle = nullptr;
    py::gil_scoped_release nogil;
    (void)(abort ? occl_comm_abort(handle) : occl_comm_destroy(handle));
  }
  box.reset();
  sweep();  // after destroy/abort every operation has ended
}

void CommState::adopt(Pending pending) {
  if (box_ == nullptr) {
    graveyard().push_back(std::move(pending));
  } else {
    orphans_.push_back(std::move(pending));
  }
}

void CommState::sweep() {
  sweep_list(orphans_);
  sweep_list(graveyard());
}

// ---------------------------------------------------------------------------
// Work
// ---------------------------------------------------------------------------

Work::Work(std::shared_ptr<CommState> state, occl_work_t handle, std::vector<py::object> keep, std::string what)
    : state_(std::move(state)), handle_(handle), keep_(std::move(keep)), what_(std::move(what)) {}

Work::~Work() {
  if (handle_ != nullptr) state_->adopt(Pending{handle_, std::move(keep_)});
}

void Work::finish(occl_status_t status, std::string message) {
  done_ = true;
  status_ = status;
  if (status != OCCL_SUCCESS && message.empty()) message = what_ + ": " + occl_status_string(status);
  message_ = std::move(message);
  (void)occl_work_recv_status(handle_, &recv_status_);
  (void)occl_work_free(handle_);
  handle_ = nullptr;
  std::vector<py::object> keep = std::move(keep_);
  keep_.clear();
  keep.clear();  // gives the arrays back (DLPack deleters run here)
}

bool Work::test() {
  if (done_) return true;
  occl_status_t st = occl_work_test(handle_);
  if (st == OCCL_ERR_IN_PROGRESS) return false;
  finish(st, st == OCCL_SUCCESS ? std::string() : std::string(occl_last_error()));
  return true;
}

bool Work::cancel() {
  if (done_ || cancelled_) return false;
  occl_comm_t comm = state_->require("cancel");
  int flag = 0;
  occl_status_t st = OCCL_SUCCESS;
  {
    py::gil_scoped_release unlocked;  // runs after the operations queued before it
    st = occl_work_cancel(handle_, comm, &flag);
  }
  if (st != OCCL_SUCCESS) raise_last(st, "cancel");
  cancelled_ = flag != 0;
  return cancelled_;
}

void Work::wait(std::optional<double> timeout_s) {
  std::optional<Clock::time_point> deadline;
  if (timeout_s) {
    if (!(*timeout_s >= 0)) raise_value("wait: timeout must be a number of seconds >= 0");
    deadline = Clock::now() +
               std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(std::min(*timeout_s, 1e9)));
  }
  while (!done_) {
    int64_t slice = kSliceMs;
    if (deadline) {
      auto left = std::chrono::ceil<std::chrono::milliseconds>(*deadline - Clock::now()).count();
      slice = std::clamp<int64_t>(left, 0, kSliceMs);
    }
    occl_status_t st;
    std::string message;
    {
      py::gil_scoped_release nogil;
      st = occl_work_wait_for(handle_, slice);
      if (st != OCCL_SUCCESS && st != OCCL_ERR_IN_PROGRESS) message = occl_last_error();
    }
    if (st != OCCL_ERR_IN_PROGRESS) {
      finish(st, std::move(message));
      break;
    }
    if (PyErr_CheckSignals() != 0) {
      py::error_already_set err;
      interrupted(err);
    }
    if (deadline && Clock::now() >= *deadline) {
      raise_status(OCCL_ERR_TIMEOUT,
                   what_ + ": not complete after wait(timeout=" + py::str(py::float_(*timeout_s)).cast<std::string>() +
                       " s); the operation is still running");
    }
  }
  if (status_ != OCCL_SUCCESS) raise_status(status_, message_);
}

void Work::interrupted(py::error_already_set& err) {
  std::string name = py::str(err.type().attr("__name__"));
  state_->close(
      OCCL_ERR_ABORTED,
      "the communicator was aborted because " + name + " interrupted " + what_ + "; create a new communicator to go on",
      /*abort=*/true);
  occl_status_t st;
  std::string message;
  {
    py::gil_scoped_release nogil;
    st = occl_work_wait_for(handle_, kAfterAbortMs);
    if (st != OCCL_SUCCESS && st != OCCL_ERR_IN_PROGRESS) message = occl_last_error();
  }
  if (st == OCCL_ERR_IN_PROGRESS) {
    // Not ended despite the abort (should not happen): keep its arrays.
    graveyard().push_back(Pending{handle_, std::move(keep_)});
    handle_ = nullptr;
    done_ = true;
    status_ = OCCL_ERR_ABORTED;
    message_ = what_ + ": interrupted by " + name;
  } else {
    finish(st == OCCL_SUCCESS ? OCCL_ERR_ABORTED : st, what_ + ": interrupted by " + name);
  }
  throw err;
}

// ---------------------------------------------------------------------------
// Comm
// ---------------------------------------------------------------------------

std::unique_ptr<Comm> Comm::init(const std::string& init_method, int rank, int world_size, const InitOptions& options) {
  occl_comm_t handle = run_interruptible(
      [init_method, rank, world_size, options](occl_comm_t* out) {
        occl_config_t cfg = make_config(options);
        return occl_comm_init(out, init_method.c_str(), rank, world_size, &cfg);
      },
      "occl_comm_init", [](const std::string&) {});
  return make_comm(handle);
}

std::unique_ptr<Comm> Comm::init_unique_id(const std::string& unique_id, int rank, int world_size,
                                           const InitOptions& options) {
  if (unique_id.size() != OCCL_UNIQUE_ID_BYTES) {
    raise_value("unique id must be " + std::to_string(OCCL_UNIQUE_ID_BYTES) + " bytes (from get_unique_id()), got " +
                std::to_string(unique_id.size()));
  }
  occl_unique_id_t id;
  std::memcpy(id.internal, unique_id.data(), OCCL_UNIQUE_ID_BYTES);
  occl_comm_t handle = run_interruptible(
      [id, rank, world_size, options](occl_comm_t* out) {
        occl_config_t cfg = make_config(options);
        return occl_comm_init_unique_id(out, world_size, &id, rank, &cfg);
      },
      "occl_comm_init_unique_id", [](const std::string&) {});
  return make_comm(handle);
}

std::unique_ptr<Comm> Comm::split(int color, int key) {
  state_->require("split");
  std::shared_ptr<HandleBox> box = state_->box();
  std::shared_ptr<CommState> state = state_;
  occl_comm_t child = run_interruptible(
      [box, color, key](occl_comm_t* out) { return occl_comm_split(box->handle, color, key, nullptr, out); },
      "occl_comm_split",
      [state](const std::string& name) {
        state->close(
            OCCL_ERR_ABORTED,
            "the communicator is unusable because " + name + " interrupted split; create a new communicator to go on",
            /*abort=*/false);
      });
  if (child == nullptr) return nullptr;
  return make_comm(child);
}

namespace {

/// The interrupt check of a blocking call (occl_options_t.interrupt). The
/// first check runs the signal handlers and gives up the GIL, so a call that
/// has to wait lets other Python threads run; later ones take the GIL back
/// just to run the handlers. A handler that raises (Ctrl-C) stops the call,
/// with the exception left set for when the GIL comes back.
struct BlockingCall {
  PyThreadState* released = nullptr;
  bool raised = false;

  static int check(void* data) {
    auto* self = static_cast<BlockingCall*>(data);
    if (self->released != nullptr) PyEval_RestoreThread(self->released);
    if (PyErr_CheckSignals() != 0) self->raised = true;
    self->released = PyEval_SaveThread();
    return self->raised ? 1 : 0;
  }
  /// Takes the GIL back if a check gave it up.
  void reacquire() {
    if (released != nullptr) PyEval_RestoreThread(released);
    released = nullptr;
  }
};

}  // namespace

py::object Comm::start(const char* what, std::vector<py::object> keep, const Call& call, bool blocking) {
  occl_comm_t handle = state_->require(what);
  state_->sweep();
  // CUDA arrays are ordered on the thread's stream (ignored for CPU arrays).
  const uintptr_t stream = cuda_stream();
  occl_options_t stream_options = OCCL_OPTIONS_INIT;
  stream_options.stream = reinterpret_cast<void*>(stream);
  if (blocking && any_cuda(keep)) {
    // A call on CUDA arrays returns once its work is enqueued on the stream;
    // the arrays (their DLPack capsules) are kept until it has ended, as an
    // orphan operation swept by later calls, so that a temporary array's
    // memory cannot be given back while the stream still copies it.
    occl_work_t work = nullptr;
    occl_status_t st = call(handle, &stream_options, &work);
    if (st != OCCL_SUCCESS) raise_last(st, what);
    state_->adopt(Pending{work, std::move(keep)});
    return py::none();
  }
  if (!blocking) {
    occl_work_t work = nullptr;
    occl_status_t st = call(handle, stream != 0 ? &stream_options : nullptr, &work);
    if (st != OCCL_SUCCESS) raise_last(st, what);
    return py::cast(std::make_unique<Work>(state_, work, std::move(keep), what));
  }
  BlockingCall guard;
  occl_options_t options = OCCL_OPTIONS_INIT;
  options.interrupt = &BlockingCall::check;
  options.interrupt_data = &guard;
  options.stream = reinterpret_cast<void*>(stream);
  occl_status_t st = call(handle, &options, nullptr);
  std::string message = st == OCCL_SUCCESS ? std::string() : occl_last_error();
  guard.reacquire();
  if (st == OCCL_SUCCESS) return py::none();
  if (guard.raised && PyErr_Occurred() != nullptr) {
    py::error_already_set err;
    std::string name = py::str(err.type().attr("__name__"));
    state_->close(OCCL_ERR_ABORTED,
                  "the communicator was aborted because " + name + " interrupted " + what +
                      "; create a new communicator to go on",
                  /*abort=*/true);
    throw err;
  }
  raise_status(st, message);
}

// ---------------------------------------------------------------------------
// Bindings
// ---------------------------------------------------------------------------

namespace {

/// Per-rank counts or displacements from Python: a list, or None for "not given".
using OptCounts = std::optional<std::vector<int64_t>>;

/// Work: the handle of a started operation.
void bind_work(py::module_& m) {
  py::class_<Work>(m, "Work", "A started operation (internal; omniccl.Work wraps it).")
      .def("wait", &Work::wait, py::arg("timeout") = py::none(),
           "Waits (GIL released, signals checked every 100 ms); raises the operation's error.")
      .def("test", &Work::test, "True once the operation has ended, successfully or not (non-blocking).")
      .def("cancel", &Work::cancel,
           "occl_work_cancel: cancels a pending receive or an unmatched synchronous send to this rank itself; "
           "True if it was cancelled (it then completes successfully, having moved nothing).")
      .def_property_readonly("cancelled", &Work::cancelled, "Whether cancel() cancelled it.")
      .def_property_readonly("done", &Work::done, "Whether the end was observed (wait or test).")
      .def_property_readonly(
          "status", [](const Work& w) { return static_cast<int>(w.status()); }, "The C status once done.")
      .def_property_readonly("message", &Work::message, "The error message once done (empty on success).")
      .def_property_readonly("what", &Work::what, "The operation's name.")
      .def_property_readonly(
          "recv_status", [](const Work& w) { return status_tuple(w.recv_status()); },
          "A receive's (source, tag, bytes, count) once done.");
}

/// Making a communicator (init, from a unique id, split) and ending it.
void bind_comm_creation(py::class_<Comm>& comm) {
  comm.def_static(
          "init",
          [](const std::string& init_method, int rank, int world_size, std::optional<int64_t> timeout_ms,
             std::optional<std::string> transport, std::optional<std::string> algorithm) {
            return Comm::init(init_method, rank, world_size, InitOptions{timeout_ms, transport, algorithm});
          },
          py::arg("init_method"), py::arg("rank"), py::arg("world_size"), py::arg("timeout_ms") = py::none(),
          py::arg("transport") = py::none(), py::arg("algorithm") = py::none(),
          "occl_comm_init (interruptible). rank/world_size -1: from the environment.")
      .def_static(
          "init_unique_id",
          [](py::bytes unique_id, int rank, int world_size, std::optional<int64_t> timeout_ms,
             std::optional<std::string> transport, std::optional<std::string> algorithm) {
            return Comm::init_unique_id(unique_id, rank, world_size, InitOptions{timeout_ms, transport, algorithm});
          },
          py::arg("unique_id"), py::arg("rank"), py::arg("world_size"), py::arg("timeout_ms") = py::none(),
          py::arg("transport") = py::none(), py::arg("algorithm") = py::none(),
          "occl_comm_init_unique_id (interruptible).")
      .def("split", &Comm::split, py::arg("color"), py::arg("key"),
           "occl_comm_split (interruptible); None for color OCCL_SPLIT_NOCOLOR (-1).")
      .def(
          "destroy",
          [](Comm& c) { c.state().close(OCCL_ERR_INVALID_ARGUMENT, "the communicator was destroyed", false); },
          "occl_comm_destroy (idempotent).")
      .def(
          "abort", [](Comm& c) { c.state().close(OCCL_ERR_ABORTED, "the communicator was aborted", true); },
          "occl_comm_abort: local, bounded (idempotent).");
}

/// The communicator's asynchronous error (NCCL's ncclCommGetAsyncError) as
/// the omniccl.errors exception it would raise, or None while it is usable.
py::object async_error(const Comm& c) {
  occl_status_t error = OCCL_SUCCESS;
  const occl_status_t st = occl_comm_get_async_error(c.state().require("async_error"), &error);
  if (st != OCCL_SUCCESS) raise_last(st, "occl_comm_get_async_error");
  if (error == OCCL_SUCCESS || error == OCCL_ERR_IN_PROGRESS) return py::none();
  std::string message = occl_last_error();
  if (message.empty()) message = occl_status_string(error);
  return py::module_::import("omniccl.errors").attr("_from_status")(static_cast<int>(error), message);
}

/// What a communicator is (rank, size, state, transport) and its settings:
/// the deadline and PREMUL_SUM reduce ops.
void bind_comm_properties(py::class_<Comm>& comm) {
  comm.def_property_readonly(
          "rank", [](const Comm& c) { return c.state().rank(); }, "This process's rank.")
      .def_property_readonly(
          "size", [](const Comm& c) { return c.state().size(); }, "Number of ranks.")
      .def_property_readonly(
          "closed", [](const Comm& c) { return c.state().closed(); }, "Whether destroyed or aborted.")
      .def(
          "check", [](const Comm& c, const std::string& what) { (void)c.state().require(what.c_str()); },
          py::arg("what"), "Raises (naming what) if the communicator is closed.")
      .def_property_readonly(
          "closed_reason", [](const Comm& c) { return c.state().closed_reason(); }, "Why it is closed.")
      .def("async_error", &async_error,
           "occl_comm_get_async_error: the error that made the communicator unusable, as an exception "
           "object (not raised), or None while it is usable.")
      .def_property_readonly(
          "transport",
          [](const Comm& c) {
            const char* name = nullptr;
            occl_status_t st = occl_comm_transport(c.state().require("transport"), &name);
            if (st != OCCL_SUCCESS) raise_last(st, "occl_comm_transport");
            return std::string(name);
          },
          "'shm', 'tcp', 'mixed' or 'self'.")
      .def(
          "set_timeout",
          [](Comm& c, int64_t ms) {
            occl_status_t st = occl_comm_set_timeout(c.state().require("set_timeout"), ms);
            if (st != OCCL_SUCCESS) raise_last(st, "occl_comm_set_timeout");
          },
          py::arg("timeout_ms"), "Deadline of later blocking calls (ms).")
      .def(
          "premul_sum",
          [](Comm& c, double scalar) {
            occl_red_op_t op;
            occl_status_t st = occl_red_op_create_premul_sum(c.state().require("premul_sum"), scalar, &op);
            if (st != OCCL_SUCCESS) raise_last(st, "occl_red_op_create_premul_sum");
            return red_op_value(op);
          },
          py::arg("scalar"), "Creates a PREMUL_SUM reduce op; returns its value.")
      .def(
          "destroy_op",
          [](Comm& c, int op) {
            if (c.state().closed()) return;  // freed with the communicator
            occl_status_t st = occl_red_op_destroy(c.state().require("destroy_op"), red_op(op));
            if (st != OCCL_SUCCESS) raise_last(st, "occl_red_op_destroy");
          },
          py::arg("op"), "Frees a reduce op made by premul_sum.");
}

// Operations: each returns a Work (the Tensor arguments stay alive in it),
// or with blocking=True runs to completion on this thread and returns None.

/// Point to point: send and receive.
void bind_send_recv(py::class_<Comm>& comm) {
  comm.def(
      "send",
      [](Comm& c, py::object t, int peer, bool blocking, int tag, bool synchronous) {
        return c.start(
            synchronous ? "ssend" : "send", {t},
            [&](occl_comm_t h, const occl_options_t* o, occl_work_t* w) {
              return synchronous ? occl_ssend_tagged(dl_of(t), peer, tag, h, o, w)
                                 : occl_send_tagged(dl_of(t), peer, tag, h, o, w);
            },
            blocking);
      },
      py::arg("tensor"), py::arg("peer"), py::arg("blocking") = false, py::arg("tag") = 0,
      py::arg("synchronous") = false,
      "occl_send_tagged (occl_ssend_tagged if synchronous: complete once a receive has matched it): peer may be "
      "this rank or PROC_NULL.");
  comm.def(
      "recv",
      [](Comm& c, py::object t, int peer, bool blocking, int tag) -> py::object {
        occl_recv_status_t st{OCCL_PROC_NULL, OCCL_ANY_TAG, 0, 0};
        py::object r = c.start(
            "recv", {t},
            [&](occl_comm_t h, const occl_options_t* o, occl_work_t* w) {
              return occl_recv_tagged(dl_of(t), peer, tag, h, o, w == nullptr ? &st : nullptr, w);
            },
            blocking);
        if (!blocking) return r;
        return status_tuple(st);
      },
      py::arg("tensor"), py::arg("peer"), py::arg("blocking") = false, py::arg("tag") = 0,
      "occl_recv_tagged: peer may be ANY_SOURCE or PROC_NULL, tag ANY_TAG. Blocking: returns "
      "(source, tag, bytes, count); else a Work (its recv_status once done).");
}

/// Point to point: looking at a message before receiving it (MPI's probe and iprobe).
void bind_probes(py::class_<Comm>& comm) {
  comm.def(
      "probe",
      [](Comm& c, int source, int tag) -> py::object {
        occl_recv_status_t st{OCCL_PROC_NULL, OCCL_ANY_TAG, 0, 0};
        c.start(
            "probe", {},
            [&](occl_comm_t h, const occl_options_t* o, occl_work_t*) { return occl_probe(source, tag, h, o, &st); },
            true);
        return status_tuple(st);
      },
      py::arg("source"), py::arg("tag"),
      "occl_probe: waits for a message from source (or ANY_SOURCE, PROC_NULL) with tag (or ANY_TAG) "
      "without receiving it; returns its (source, tag, bytes, count), count in the sender's elements.");
  comm.def(
      "iprobe",
      [](Comm& c, int source, int tag) -> py::object {
        occl_recv_status_t st{OCCL_PROC_NULL, OCCL_ANY_TAG, 0, 0};
        int flag = 0;
        c.start(
            "iprobe", {},
            [&](occl_comm_t h, const occl_options_t* o, occl_work_t*) {
              return occl_iprobe(source, tag, h, o, &flag, &st);
            },
            true);
        if (flag == 0) return py::none();
        return status_tuple(st);
      },
      py::arg("source"), py::arg("tag"),
      "occl_iprobe: (source, tag, bytes, count) of a matching message that has arrived, without receiving "
      "it, or None (does not wait).");
}

/// Point to point: matched probes, which take the message out of matching so
/// that only mrecv can receive it (MPI's mprobe, improbe, mrecv).
void bind_matched_probes(py::class_<Comm>& comm) {
  comm.def(
      "mprobe",
      [](Comm& c, int source, int tag) -> py::object {
        occl_recv_status_t st{OCCL_PROC_NULL, OCCL_ANY_TAG, 0, 0};
        occl_message_t msg = OCCL_MESSAGE_NULL;
        c.start(
            "mprobe", {},
            [&](occl_comm_t h, const occl_options_t* o, occl_work_t*) {
              return occl_mprobe(source, tag, h, o, &msg, &st);
            },
            true);
        return py::make_tuple(st.source, st.tag, st.bytes, st.count, msg);
      },
      py::arg("source"), py::arg("tag"),
      "occl_mprobe: as probe, but takes the message out of matching; returns (source, tag, bytes, count, "
      "message) where message is the number mrecv receives it by.");
  comm.def(
      "improbe",
      [](Comm& c, int source, int tag) -> py::object {
        occl_recv_status_t st{OCCL_PROC_NULL, OCCL_ANY_TAG, 0, 0};
        occl_message_t msg = OCCL_MESSAGE_NULL;
        int flag = 0;
        c.start(
            "improbe", {},
            [&](occl_comm_t h, const occl_options_t* o, occl_work_t*) {
              return occl_improbe(source, tag, h, o, &flag, &msg, &st);
            },
            true);
        if (flag == 0) return py::none();
        return py::make_tuple(st.source, st.tag, st.bytes, st.count, msg);
      },
      py::arg("source"), py::arg("tag"),
      "occl_improbe: as iprobe (does not wait), taking the message found as mprobe does; "
      "(source, tag, bytes, count, message) or None.");
  comm.def(
      "mrecv",
      [](Comm& c, py::object t, uint64_t message, bool blocking) -> py::object {
        occl_recv_status_t st{OCCL_PROC_NULL, OCCL_ANY_TAG, 0, 0};
        occl_message_t msg = message;
        py::object r = c.start(
            "mrecv", {t},
            [&](occl_comm_t h, const occl_options_t* o, occl_work_t* w) {
              return occl_mrecv(dl_of(t), &msg, h, o, w == nullptr ? &st : nullptr, w);
            },
            blocking);
        if (!blocking) return r;
        return status_tuple(st);
      },
      py::arg("tensor"), py::arg("message"), py::arg("blocking") = false,
      "occl_mrecv: receives the message a matched probe took. Blocking: returns (source, tag, bytes, count); "
      "else a Work (its recv_status once done).");
}

/// Collectives with a root: broadcast, scatter, gather, reduce.
void bind_rooted_collectives(py::class_<Comm>& comm) {
  comm.def(
      "broadcast",
      [](Comm& c, py::object t, int root, bool blocking) {
        return c.start(
            "broadcast", {t},
            [&](occl_comm_t h, const occl_options_t* o, occl_work_t* w) {
              return occl_broadcast_ex(dl_of(t), root, h, o, w);
            },
            blocking);
      },
      py::arg("tensor"), py::arg("root"), py::arg("blocking") = false);
  comm.def(
      "scatter",
      [](Comm& c, py::object send, py::object recv, int root, bool blocking) {
        return c.start(
            "scatter", {send, recv},
            [&](occl_comm_t h, const occl_options_t* o, occl_work_t* w) {
              return occl_scatter_ex(dl_of(send), dl_of(recv), root, h, o, w);
            },
            blocking);
      },
      py::arg("send"), py::arg("recv"), py::arg("root"), py::arg("blocking") = false);
  comm.def(
      "gather",
      [](Comm& c, py::object send, py::object recv, int root, bool blocking) {
        return c.start(
            "gather", {send, recv},
            [&](occl_comm_t h, const occl_options_t* o, occl_work_t* w) {
              return occl_gather_ex(dl_of(send), dl_of(recv), root, h, o, w);
            },
            blocking);
      },
      py::arg("send"), py::arg("recv"), py::arg("root"), py::arg("blocking") = false);
  comm.def(
      "reduce",
      [](Comm& c, py::object send, py::object recv, int op, int root, bool blocking) {
        return c.start(
            "reduce", {send, recv},
            [&](occl_comm_t h, const occl_options_t* o, occl_work_t* w) {
              return occl_reduce_ex(dl_of(send), dl_of(recv), red_op(op), root, h, o, w);
            },
            blocking);
      },
      py::arg("send"), py::arg("recv"), py::arg("op"), py::arg("root"), py::arg("blocking") = false);
}

/// Collectives among all ranks alike: all_reduce, all_gather, reduce_scatter,
/// all_to_all, barrier.
void bind_all_collectives(py::class_<Comm>& comm) {
  comm.def(
      "all_reduce",
      [](Comm& c, py::object send, py::object recv, int op, bool blocking) {
        return c.start(
            "all_reduce", {send, recv},
            [&](occl_comm_t h, const occl_options_t* o, occl_work_t* w) {
              return occl_all_reduce_ex(dl_of(send), dl_of(recv), red_op(op), h, o, w);
            },
            blocking);
      },
      py::arg("send"), py::arg("recv"), py::arg("op"), py::arg("blocking") = false);
  comm.def(
      "all_gather",
      [](Comm& c, py::object send, py::object recv, bool blocking) {
        return c.start(
            "all_gather", {send, recv},
            [&](occl_comm_t h, const occl_options_t* o, occl_work_t* w) {
              return occl_all_gather_ex(dl_of(send), dl_of(recv), h, o, w);
            },
            blocking);
      },
      py::arg("send"), py::arg("recv"), py::arg("blocking") = false);
  comm.def(
      "reduce_scatter",
      [](Comm& c, py::object send, py::object recv, int op, bool blocking) {
        return c.start(
            "reduce_scatter", {send, recv},
            [&](occl_comm_t h, const occl_options_t* o, occl_work_t* w) {
              return occl_reduce_scatter_ex(dl_of(send), dl_of(recv), red_op(op), h, o, w);
            },
            blocking);
      },
      py::arg("send"), py::arg("recv"), py::arg("op"), py::arg("blocking") = false);
  comm.def(
      "all_to_all",
      [](Comm& c, py::object send, py::object recv, bool blocking) {
        return c.start(
            "all_to_all", {send, recv},
            [&](occl_comm_t h, const occl_options_t* o, occl_work_t* w) {
              return occl_all_to_all_ex(dl_of(send), dl_of(recv), h, o, w);
            },
            blocking);
      },
      py::arg("send"), py::arg("recv"), py::arg("blocking") = false);
  comm.def(
      "barrier",
      [](Comm& c, bool blocking) {
        return c.start(
            "barrier", {},
            [&](occl_comm_t h, const occl_options_t* o, occl_work_t* w) { return occl_barrier_ex(h, o, w); }, blocking);
      },
      py::arg("blocking") = false);
}

/// Prefix reductions: scan, and exscan (exclusive=True).
void bind_scans(py::class_<Comm>& comm) {
  comm.def(
      "scan",
      [](Comm& c, py::object send, py::object recv, int op, bool exclusive, bool blocking) {
        const char* what = exclusive ? "exscan" : "scan";
        return c.start(
            what, {send, recv},
            [&](occl_comm_t h, const occl_options_t* o, occl_work_t* w) {
              return exclusive ? occl_exscan_ex(dl_of(send), dl_of(recv), red_op(op), h, o, w)
                               : occl_scan_ex(dl_of(send), dl_of(recv), red_op(op), h, o, w);
            },
            blocking);
      },
      py::arg("send"), py::arg("recv"), py::arg("op"), py::arg("exclusive") = false, py::arg("blocking") = false);
}

/// v-variants among all ranks: per-rank counts and displacements.
void bind_all_v_collectives(py::class_<Comm>& comm) {
  comm.def(
      "all_gatherv",
      [](Comm& c, py::object send, py::object recv, std::vector<int64_t> counts, OptCounts displs, bool blocking) {
        const int n = c.state().size();
        const int64_t* cp = counts_of(counts, n, "recv_counts");
        const int64_t* dp = counts_of(displs, n, "recv_displs");
        return c.start(
            "all_gatherv", {send, recv},
            [&](occl_comm_t h, const occl_options_t* o, occl_work_t* w) {
              return occl_all_gatherv_ex(dl_of(send), dl_of(recv), cp, dp, h, o, w);
            },
            blocking);
      },
      py::arg("send"), py::arg("recv"), py::arg("recv_counts"), py::arg("recv_displs") = py::none(),
      py::arg("blocking") = false);
  comm.def(
      "all_to_allv",
      [](Comm& c, py::object send, std::vector<int64_t> send_counts, OptCounts send_displs, py::object recv,
         std::vector<int64_t> recv_counts, OptCounts recv_displs, bool blocking) {
        const int n = c.state().size();
        const int64_t* sc = counts_of(send_counts, n, "send_counts");
        const int64_t* sd = counts_of(send_displs, n, "send_displs");
        const int64_t* rc = counts_of(recv_counts, n, "recv_counts");
        const int64_t* rd = counts_of(recv_displs, n, "recv_displs");
        return c.start(
            "all_to_allv", {send, recv},
            [&](occl_comm_t h, const occl_options_t* o, occl_work_t* w) {
              return occl_all_to_allv_ex(dl_of(send), sc, sd, dl_of(recv), rc, rd, h, o, w);
            },
            blocking);
      },
      py::arg("send"), py::arg("send_counts"), py::arg("send_displs"), py::arg("recv"), py::arg("recv_counts"),
      py::arg("recv_displs"), py::arg("blocking") = false);
}

/// v-variants with a root: gatherv, scatterv.
void bind_rooted_v_collectives(py::class_<Comm>& comm) {
  comm.def(
      "gatherv",
      [](Comm& c, py::object send, py::object recv, OptCounts counts, OptCounts displs, int root, bool blocking) {
        const int n = c.state().size();
        const int64_t* cp = counts_of(counts, n, "recv_counts");
        const int64_t* dp = counts_of(displs, n, "recv_displs");
        return c.start(
            "gatherv", {send, recv},
            [&](occl_comm_t h, const occl_options_t* o, occl_work_t* w) {
              return occl_gatherv_ex(dl_of(send), dl_of(recv), cp, dp, root, h, o, w);
            },
            blocking);
      },
      py::arg("send"), py::arg("recv"), py::arg("recv_counts"), py::arg("recv_displs"), py::arg("root"),
      py::arg("blocking") = false);
  comm.def(
      "scatterv",
      [](Comm& c, py::object send, OptCounts counts, OptCounts displs, py::object recv, int root, bool blocking) {
        const int n = c.state().size();
        const int64_t* cp = counts_of(counts, n, "send_counts");
        const int64_t* dp = counts_of(displs, n, "send_displs");
        return c.start(
            "scatterv", {send, recv},
            [&](occl_comm_t h, const occl_options_t* o, occl_work_t* w) {
              return occl_scatterv_ex(dl_of(send), cp, dp, dl_of(recv), root, h, o, w);
            },
            blocking);
      },
      py::arg("send"), py::arg("send_counts"), py::arg("send_displs"), py::arg("recv"), py::arg("root"),
      py::arg("blocking") = false);
}

/// The module-level unique id, for NCCL-style rendezvous.
void bind_unique_id(py::module_& m) {
  m.def(
      "get_unique_id",
      [] {
        occl_unique_id_t id;
        occl_status_t st = occl_get_unique_id(&id);
        if (st != OCCL_SUCCESS) raise_last(st, "occl_get_unique_id");
        return py::bytes(id.internal, OCCL_UNIQUE_ID_BYTES);
      },
      "occl_get_unique_id: rendezvous bytes served by this process until it exits.");
}

/// Registered buffers (occl_comm_window_register): collective and blocking,
/// so the GIL is given up while the ranks agree.
void bind_windows(py::class_<Comm>& comm) {
  comm.def(
          "window_register",
          [](Comm& c, uintptr_t address, size_t nbytes) {
            occl_comm_t h = c.state().require("window_register");
            occl_window_t w = OCCL_WINDOW_NULL;
            occl_status_t st;
            {
              py::gil_scoped_release nogil;
              st = occl_comm_window_register(h, reinterpret_cast<void*>(address), nbytes, &w);
            }
            if (st != OCCL_SUCCESS) raise_last(st, "occl_comm_window_register");
            return uint64_t(w);
          },
          py::arg("address"), py::arg("nbytes"),
          "occl_comm_window_register (collective): registers nbytes of CUDA memory at address; returns the handle.")
      .def(
          "window_deregister",
          [](Comm& c, uint64_t handle) {
            occl_comm_t h = c.state().require("window_deregister");
            occl_window_t w = handle;
            occl_status_t st;
            {
              py::gil_scoped_release nogil;
              st = occl_comm_window_deregister(h, &w);
            }
            if (st != OCCL_SUCCESS) raise_last(st, "occl_comm_window_deregister");
          },
          py::arg("handle"), "occl_comm_window_deregister (collective).");
}

}  // namespace

void bind_comm(py::module_& m) {
  bind_work(m);
  py::class_<Comm> comm(m, "Comm", "A communicator handle (internal; omniccl.Communicator wraps it).");
  bind_comm_creation(comm);
  bind_comm_properties(comm);
  bind_windows(comm);
  bind_send_recv(comm);
  bind_probes(comm);
  bind_matched_probes(comm);
  bind_rooted_collectives(comm);
  bind_all_collectives(comm);
  bind_scans(comm);
  bind_all_v_collectives(comm);
  bind_rooted_v_collectives(comm);
  bind_fast(m);
  bind_unique_id(m);
}

}  // namespace omniccl_py
