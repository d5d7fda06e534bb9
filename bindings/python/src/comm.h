// Communicators and work handles as the Python package sees them.
//
// A blocking operation runs on the calling thread (the C call without a work
// pointer, through its _ex entry point): its interrupt check, called by the
// library once the call has to wait (before each sleep, at least every
// 50 ms), gives up the GIL the first time and then briefly takes it back to
// run Python's signal handlers, so other threads run while it waits and
// Ctrl-C ends it within 50 ms. An asynchronous operation (async_op=True) is
// started with a work pointer and waited for by Work::wait, which waits in
// slices of 100 ms with the GIL released and runs the handlers between them.
//
// Interruption. When a signal handler raises (KeyboardInterrupt) while a
// thread waits for an operation, the operation is half done: peers are in
// the middle of it and the byte streams between the ranks are out of step,
// so the communicator could not be used again anyway. It is therefore
// aborted (occl_comm_abort: local, bounded, never waits for peers; the peers'
// operations then fail with PeerFailureError instead of hanging), every
// operation on it completes with OCCL_ERR_ABORTED, their buffers are given
// back, and the exception propagates. The communicator is then closed; later
// calls raise OmniCCLError naming why. Nothing keeps running in the
// background, so the process can always exit.
//
// Communicator creation and split have no work handle in the C ABI; they run
// on a helper thread while the calling thread waits the same way. On an
// interrupt the helper is abandoned: it finishes on its own (when the peers
// go away, or at the deadline) and destroys what it created.
#pragma once

#include <pybind11/pybind11.h>

#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <omniccl/omniccl.h>

namespace omniccl_py {

namespace py = pybind11;

/// Owns one occl_comm_t. Shared with a helper thread while a split runs
/// there, so the handle outlives the call that uses it.
struct HandleBox {
  occl_comm_t handle = nullptr;
  HandleBox() = default;
  HandleBox(const HandleBox&) = delete;
  HandleBox& operator=(const HandleBox&) = delete;
  ~HandleBox();
};

/// A work handle whose operation may still run, with the arrays it uses.
struct Pending {
  occl_work_t work = nullptr;
  std::vector<py::object> keep;
};

/// What a communicator and its Work objects share. Touched only with the GIL
/// held.
class CommState {
 public:
  CommState(std::shared_ptr<HandleBox> box, int rank, int size);
  ~CommState();
  CommState(const CommState&) = delete;
  CommState& operator=(const CommState&) = delete;

  /// The handle, or raises (naming `what`) if the communicator is closed.
  occl_comm_t require(const char* what) const;
  bool closed() const { return box_ == nullptr; }
  const std::string& closed_reason() const { return closed_reason_; }
  int rank() const { return rank_; }
  int size() const { return size_; }
  /// The box, for a helper thread (split).
  std::shared_ptr<HandleBox> box() const { return box_; }

  /// Destroys (abort == false) or aborts the communicator; `reason` is what
  /// later calls are told. The C call runs with the GIL released. Idempotent.
  void close(occl_status_t status, std::string reason, bool abort);
  /// Keeps a still-running operation's arrays until it ends.
  void adopt(Pending pending);
  /// Frees the finished operations among the adopted ones.
  void sweep();

 private:
  std::shared_ptr<HandleBox> box_;
  int rank_;
  int size_;
  occl_status_t closed_status_ = OCCL_SUCCESS;
  std::string closed_reason_;
  std::vector<Pending> orphans_;
};

/// One started operation (what the Python Work wraps).
class Work {
 public:
  Work(std::shared_ptr<CommState> state, occl_work_t handle, std::vector<py::object> keep, std::string what);
  ~Work();
  Work(const Work&) = delete;
  Work& operator=(const Work&) = delete;

  /// Waits for completion (at most timeout_s seconds if given: then raises
  /// omniccl.TimeoutError and the operation goes on); raises the operation's
  /// error if it failed. See the header comment for signals.
  void wait(std::optional<double> timeout_s);
  /// Non-blocking: true once the operation has ended (either way).
  bool test();
  /// occl_work_cancel: cancels a pending receive or an unmatched synchronous
  /// send to this rank itself; returns whether it was cancelled (then it
  /// completes successfully, having moved nothing).
  bool cancel();
  /// Whether cancel() cancelled it.
  bool cancelled() const { return cancelled_; }
  bool done() const { return done_; }
  occl_status_t status() const { return status_; }
  const std::string& message() const { return message_; }
  const std::string& what() const { return what_; }
  /// A receive's status once done (source, tag, bytes, count); a receive
  /// from PROC_NULL's for other operations.
  const occl_recv_status_t& recv_status() const { return recv_status_; }

 private:
  void finish(occl_status_t status, std::string message);
  [[noreturn]] void interrupted(py::error_already_set& err);

  std::shared_ptr<CommState> state_;
  occl_work_t handle_;
  std::vector<py::object> keep_;
  std::string what_;
  bool done_ = false;
  bool cancelled_ = false;
  occl_status_t status_ = OCCL_ERR_IN_PROGRESS;
  std::string message_;
  occl_recv_status_t recv_status_{OCCL_PROC_NULL, OCCL_ANY_TAG, 0, 0};
};

/// Communicator options passed to creation.
struct InitOptions {
  std::optional<int64_t> timeout_ms;
  std::optional<std::string> transport;
  std::optional<std::string> algorithm;
};

/// A communicator handle (what omniccl.Communicator wraps).
class Comm {
 public:
  explicit Comm(std::shared_ptr<CommState> state) : state_(std::move(state)) {}

  /// occl_comm_init, interruptible.
  static std::unique_ptr<Comm> init(const std::string& init_method, int rank, int world_size,
                                    const InitOptions& options);
  /// occl_comm_init_unique_id, interruptible.
  static std::unique_ptr<Comm> init_unique_id(const std::string& unique_id, int rank, int world_size,
                                              const InitOptions& options);
  /// occl_comm_split, interruptible; nullptr for OCCL_SPLIT_NOCOLOR.
  std::unique_ptr<Comm> split(int color, int key);

  CommState& state() const { return *state_; }
  const std::shared_ptr<CommState>& shared_state() const { return state_; }

  /// `call(handle, options, work)` runs an operation (an occl_*_ex entry point).
  using Call = std::function<occl_status_t(occl_comm_t, const occl_options_t*, occl_work_t*)>;
  /// Runs an operation. blocking == false: starts it and returns a Work (the
  /// arrays in `keep` stay alive until it ends). blocking == true: runs it to
  /// completion on this thread with no hand-off and no Work, giving the GIL
  /// up once it has to wait and running Python's signal handlers while it
  /// waits (the C ABI's interrupt check); returns None. A signal handler
  /// that raises (Ctrl-C) ends the call, the communicator is aborted as for
  /// an interrupted Work, and the exception propagates.
  py::object start(const char* what, std::vector<py::object> keep, const Call& call, bool blocking);

 private:
  std::shared_ptr<CommState> state_;
};

/// Binds CommState-backed classes and functions (module.cc).
void bind_comm(py::module_& m);

/// Binds the blocking calls' hot path on Comm and c_loop_seconds (fast.cc).
void bind_fast(py::module_& m);

}  // namespace omniccl_py
