// omniccl.hpp - a small header-only C++ wrapper over the OmniCCL C ABI, used
// by the C++ examples. It is not part of the library: copy it and extend it.
//
//   occl::Error      an exception carrying the occl_status_t and the
//                    occl_last_error() message of the call that failed
//   occl::Tensor<T>  a DLTensor view of a std::vector<T>
//   occl::Work       an asynchronous operation (unique owner of occl_work_t)
//   occl::Comm       a communicator (unique owner of occl_comm_t) with the
//                    collectives on std::vector<T>
//
// Every failing call throws occl::Error; nothing returns a status.
#ifndef OMNICCL_EXAMPLES_OMNICCL_HPP_
#define OMNICCL_EXAMPLES_OMNICCL_HPP_

#include <omniccl/omniccl.h>

#include <cstdint>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

namespace occl {

/// A failed OmniCCL call: status() is its code, what() names the call, the
/// status and the library's explanation (occl_last_error()).
class Error : public std::runtime_error {
 public:
  /// Builds the error for `call` that returned `status`, with `detail` (the
  /// library's message, or the wrapper's own reason) appended.
  Error(occl_status_t status, const std::string& call, const std::string& detail)
      : std::runtime_error(call + " failed: " + occl_status_string(status) +
                           (detail.empty() ? "" : "\n  " + detail)),
        status_(status) {}

  /// The status code the call returned.
  occl_status_t status() const noexcept { return status_; }

 private:
  occl_status_t status_;
};

/// Throws Error if `status` is not OCCL_SUCCESS. Reads occl_last_error() at
/// once, before any other call on this thread can replace it.
inline void check(occl_status_t status, const char* call) {
  if (status != OCCL_SUCCESS) throw Error(status, call, occl_last_error());
}

/// The DLPack element type of T: kDLBool for bool, kDLFloat for floating
/// types, kDLInt / kDLUInt for signed / unsigned integers; one lane.
/// (Extended types such as std::float16_t are not mapped; fill DLDataType
/// by hand for them.)
template <typename T>
constexpr DLDataType dtype_of() {
  static_assert(std::is_arithmetic_v<T>, "OmniCCL tensors hold numbers");
  const uint8_t code = std::is_same_v<T, bool>        ? kDLBool
                       : std::is_floating_point_v<T> ? kDLFloat
                       : std::is_signed_v<T>          ? kDLInt
                                                      : kDLUInt;
  return DLDataType{code, static_cast<uint8_t>(8 * sizeof(T)), 1};
}

/// A one-dimensional CPU DLTensor over the elements of a std::vector<T>.
///
/// It only describes the vector: the vector must stay alive (and must not
/// reallocate) while an operation uses it. The library reads the descriptor
/// during the call, so a temporary Tensor is fine even for asynchronous
/// operations. Neither copyable nor movable, because the DLTensor points at
/// this object's own shape.
template <typename T>
class Tensor {
  static_assert(!std::is_same_v<T, bool>, "std::vector<bool> packs bits; use std::vector<uint8_t>");

 public:
  /// A tensor that operations may write to.
  explicit Tensor(std::vector<T>& v) : Tensor(v.data(), v.size()) {}

  /// A tensor for inputs only (send buffers). OmniCCL never writes through
  /// an input, which is what makes dropping const here safe.
  explicit Tensor(const std::vector<T>& v) : Tensor(const_cast<T*>(v.data()), v.size()) {}

  /// Not copyable: the copy's DLTensor would point at this shape.
  Tensor(const Tensor&) = delete;
  /// Not copy-assignable, for the same reason.
  Tensor& operator=(const Tensor&) = delete;

  /// The DLTensor to pass to occl_* functions.
  const DLTensor* get() const noexcept { return &dl_; }

 private:
  // Describes `count` elements at `data`.
  Tensor(T* data, std::size_t count) : shape_(static_cast<int64_t>(count)) {
    dl_.data = data;
    dl_.device = DLDevice{kDLCPU, 0};
    dl_.ndim = 1;
    dl_.dtype = dtype_of<T>();
    dl_.shape = &shape_;
    dl_.strides = nullptr;  // contiguous
    dl_.byte_offset = 0;
  }

  int64_t shape_;
  DLTensor dl_{};
};

/// An operation started asynchronously (Comm::all_reduce_async). Unique
/// owner of its occl_work_t: movable, not copyable.
class Work {
 public:
  /// Takes ownership of `handle` (may be NULL: an empty Work).
  explicit Work(occl_work_t handle = nullptr) noexcept : handle_(handle) {}
  /// Moves the handle out of `other`, leaving it empty.
  Work(Work&& other) noexcept : handle_(std::exchange(other.handle_, nullptr)) {}
  /// Waits for and frees the current operation, then takes `other`'s.
  Work& operator=(Work&& other) noexcept {
    if (this != &other) {
      release();
      handle_ = std::exchange(other.handle_, nullptr);
    }
    return *this;
  }
  /// Waits for the operation if it was not waited for, then frees the
  /// handle: the buffers it uses are usually destroyed right after, so
  /// leaving it running would be unsafe. Errors are dropped here; call wait()
  /// to see them.
  ~Work() { release(); }

  /// Blocks until the operation completes; throws Error if it failed.
  /// Afterwards the Work is empty. Waiting on an empty Work does nothing.
  void wait() {
    if (handle_ == nullptr) return;
    occl_status_t status = occl_work_wait(handle_);
    std::string detail = status == OCCL_SUCCESS ? "" : occl_last_error();
    occl_work_free(std::exchange(handle_, nullptr));
    if (status != OCCL_SUCCESS) throw Error(status, "occl_work_wait", detail);
  }

  /// True once the operation has completed (successfully or not: wait()
  /// then returns at once and reports the outcome). An empty Work is done.
  bool done() const {
    if (handle_ == nullptr) return true;
    return occl_work_test(handle_) != OCCL_ERR_IN_PROGRESS;
  }

 private:
  // Waits for (errors dropped) and frees the handle, leaving this empty.
  void release() noexcept {
    if (handle_ != nullptr) {
      (void)occl_work_wait(handle_);
      (void)occl_work_free(std::exchange(handle_, nullptr));
    }
  }

  occl_work_t handle_;
};

/// A communicator: the unique owner of an occl_comm_t, destroyed with
/// occl_comm_destroy. Movable, not copyable. Collectives take std::vector<T>
/// buffers and throw Error on failure. As with the C API, every rank must
/// call the same collectives in the same order.
class Comm {
 public:
  /// Joins the job described by the environment (env://: torchrun,
  /// omniccl-run, mpirun, srun). Checks first that the library fits the
  /// header this code was compiled with (OCCL_INIT_CHECK). `config` NULL
  /// means defaults.
  static Comm from_env(const occl_config_t* config = nullptr) {
    check(OCCL_INIT_CHECK(), "OCCL_INIT_CHECK()");
    occl_comm_t handle = nullptr;
    check(occl_comm_init(&handle, "env://", OCCL_FROM_ENV, OCCL_FROM_ENV, config),
          "occl_comm_init(\"env://\")");
    return Comm(handle);
  }

  /// Takes ownership of `handle` (may be NULL: an empty Comm).
  explicit Comm(occl_comm_t handle = nullptr) noexcept : handle_(handle) {}
  /// Moves the handle out of `other`, leaving it empty.
  Comm(Comm&& other) noexcept : handle_(std::exchange(other.handle_, nullptr)) {}
  /// Destroys the current communicator, then takes `other`'s.
  Comm& operator=(Comm&& other) noexcept {
    if (this != &other) {
      (void)occl_comm_destroy(handle_);
      handle_ = std::exchange(other.handle_, nullptr);
    }
    return *this;
  }
  /// Destroys the communicator (occl_comm_destroy accepts NULL).
  ~Comm() { (void)occl_comm_destroy(handle_); }

  /// The C handle, for calls this wrapper does not cover; still owned here.
  occl_comm_t get() const noexcept { return handle_; }
  /// False for an empty Comm (e.g. split() with OCCL_SPLIT_NOCOLOR).
  explicit operator bool() const noexcept { return handle_ != nullptr; }

  /// This process's rank in the communicator.
  int rank() const {
    int r = -1;
    check(occl_comm_rank(handle_, &r), "occl_comm_rank");
    return r;
  }

  /// The number of ranks.
  int size() const {
    int n = 0;
    check(occl_comm_size(handle_, &n), "occl_comm_size");
    return n;
  }

  /// The transport in use: "shm" or "tcp".
  std::string transport() const {
    const char* name = nullptr;
    check(occl_comm_transport(handle_, &name), "occl_comm_transport");
    return name;
  }

  /// Collective: ranks with the same `color` form a new communicator, ordered
  /// by `key` (ties by rank). OCCL_SPLIT_NOCOLOR gives an empty Comm. The new
  /// communicator inherits this one's configuration.
  Comm split(int color, int key) {
    occl_comm_t out = nullptr;
    check(occl_comm_split(handle_, color, key, nullptr, &out), "occl_comm_split");
    return Comm(out);
  }

  /// Reduces `data` with `op` across all ranks, in place: every rank ends
  /// with the same result.
  template <typename T>
  void all_reduce(std::vector<T>& data, occl_red_op_t op = OCCL_SUM) {
    Tensor<T> t(data);
    check(occl_all_reduce(t.get(), t.get(), op, handle_, nullptr), "occl_all_reduce");
  }

  /// Starts all_reduce(data, op) and returns at once; `data` must stay
  /// alive and unchanged until the returned Work is waited for.
  template <typename T>
  [[nodiscard]] Work all_reduce_async(std::vector<T>& data, occl_red_op_t op = OCCL_SUM) {
    Tensor<T> t(data);
    occl_work_t w = nullptr;
    check(occl_all_reduce(t.get(), t.get(), op, handle_, &w), "occl_all_reduce");
    return Work(w);
  }

  /// Copies `root`'s `data` into `data` on every rank (same size everywhere).
  template <typename T>
  void broadcast(std::vector<T>& data, int root) {
    Tensor<T> t(data);
    check(occl_broadcast(t.get(), root, handle_, nullptr), "occl_broadcast");
  }

  /// Returns every rank's `send` concatenated in rank order (size() *
  /// send.size() elements), on every rank.
  template <typename T>
  std::vector<T> all_gather(const std::vector<T>& send) {
    std::vector<T> recv(send.size() * static_cast<std::size_t>(size()));
    Tensor<T> in(send), out(recv);
    check(occl_all_gather(in.get(), out.get(), handle_, nullptr), "occl_all_gather");
    return recv;
  }

  /// Reduces `send` (size() parts of equal length) with `op` across ranks
  /// and returns this rank's part of the result. Throws Error
  /// (OCCL_ERR_INVALID_ARGUMENT) if send.size() is not a multiple of size().
  template <typename T>
  std::vector<T> reduce_scatter(const std::vector<T>& send, occl_red_op_t op = OCCL_SUM) {
    std::vector<T> recv(part_size(send.size(), "reduce_scatter"));
    Tensor<T> in(send), out(recv);
    check(occl_reduce_scatter(in.get(), out.get(), op, handle_, nullptr), "occl_reduce_scatter");
    return recv;
  }

  /// Sends part j of `send` (size() parts of equal length) to rank j and
  /// returns the parts received, in rank order. Throws Error
  /// (OCCL_ERR_INVALID_ARGUMENT) if send.size() is not a multiple of size().
  template <typename T>
  std::vector<T> all_to_all(const std::vector<T>& send) {
    (void)part_size(send.size(), "all_to_all");
    std::vector<T> recv(send.size());
    Tensor<T> in(send), out(recv);
    check(occl_all_to_all(in.get(), out.get(), handle_, nullptr), "occl_all_to_all");
    return recv;
  }

  /// Returns once every rank has entered the barrier.
  void barrier() { check(occl_barrier(handle_, nullptr), "occl_barrier"); }

 private:
  // The length of one of size() equal parts of `total` elements.
  std::size_t part_size(std::size_t total, const char* op) const {
    const auto n = static_cast<std::size_t>(size());
    if (total % n != 0) {
      throw Error(OCCL_ERR_INVALID_ARGUMENT, op,
                  "the send buffer's " + std::to_string(total) +
                      " elements do not split into " + std::to_string(n) + " equal parts");
    }
    return total / n;
  }

  occl_comm_t handle_;
};

}  // namespace occl

#endif  // OMNICCL_EXAMPLES_OMNICCL_HPP_
