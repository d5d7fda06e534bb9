// The staged data path for CUDA tensors: an operation's tensors reach the
// engine through page-locked host copies, ordered on the call's CUDA stream
// as NCCL orders its work.
//
// For CPU tensors (every call but CUDA ones) Staging is the device check
// and nothing else: view() returns the tensor itself.
//
// For CUDA tensors, start() enqueues on the call's stream, and returns
// without waiting for the GPU:
//   1. copies of the input regions into host memory, then event `ready`;
//   2. a wait, by the stream and not the host, for a word in host memory;
//   3. copies of the output regions back to the device, then event `done`.
// The operation itself is queued on the communicator's worker thread (in
// issue order with its other operations): it waits until the stream passes
// `ready`, runs the host algorithm on the host copies, writes the word
// (releasing the stream), and ends once the stream passes `done`, so that
// the work handle's wait follows the stream. The word is written whatever
// happens to the operation (done, failed, aborted, dropped from the queue),
// so the stream never waits forever; after a failure the outputs' contents
// are undefined (as with NCCL) and the communicator reports the error
// (occl_comm_get_async_error, kCommFailed on later calls).
//
// Large all_reduce, broadcast, reduce, all_gather, reduce_scatter, all_to_all,
// gather, scatter, scan, exscan and all_gatherv run as slices (common.h,
// launch_sliced and launch_slices), and the stream's copies follow them: it
// copies slice k + 1 to the host and slice k - 1 back while the host runs
// slice k, so the copy engine and the transports overlap; the host waits on
// one event per slice and raises the word once per slice.
//
// On communicators that slice, large all_reduce, reduce_scatter and reduce
// calls reduce on the GPU (DeviceReduction, below); other reductions of
// staged operations run on the host (kernels/cpu, whose results are those
// of kernels/cuda bit for bit).
#pragma once

#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <memory>
#include <optional>
#include <vector>

#include "communicator/communicator.h"
#include "executor/executor.h"

namespace omniccl::coll {

class StagedCall;

// Slices of large calls (launch_sliced): their size and the size from
// which staged reductions run on the GPU are the communicator's
// (Communicator::slicing: OMNICCL_STAGED_SLICE, 8 MiB by default, and
// OMNICCL_STAGED_GPU_REDUCE, 1 MiB). A slice is a collective of its own,
// with its own sequence number, the call's count in its headers (so that
// ranks whose counts differ fail at the first slice). A slice's own cost, a
// round of message headers per algorithm step (microseconds), is small next
// to the milliseconds 8 MiB take over shared memory or TCP, while a staged
// rank's copies of one slice overlap the transports' work on the next.
// Both defaults are first guesses, to be measured on a GPU.

/// How an operation uses a tensor: read, written, or both. Out tensors must
/// be written whole by the operation on this rank (the host copy is copied
/// back whole); a tensor written only in part, or on some ranks only, is
/// kInOut. kNone: checked for its device only (e.g. a non-root's unused
/// recvbuf).
enum class Use : uint8_t { kNone = 0, kIn = 1, kOut = 2, kInOut = 3 };

struct TensorUse {
  const TensorView* tensor;  ///< nullptr or empty: not used
  Use use;
};

/// A range of a tensor that a call sliced by pieces (Staging::slice_pieces)
/// reads (kIn) or writes whole (kOut): one of all_gatherv's parts.
struct StagedPiece {
  char* dev;
  size_t bytes;
  Use use;
};

/// A tensor the stream makes on the GPU, slice by slice, instead of copying
/// it back: reduce_scatter's output on communicators that reduce on the GPU
/// (common.h, reduces_in_rank_order). The host gathers each slice's parts of
/// the ranks' inputs into Staging::gathered(); the stream copies them to
/// device scratch and reduces them, in rank order, into `out` with the CUDA
/// kernels (bit for bit the CPU kernels' results). `out` is given to
/// Staging with Use::kNone; PREMUL_SUM, MAXLOC/MINLOC and complex dtypes are
/// not for it.
///
/// With `rank` >= 0 (all_reduce's and reduce's), the stream reduces only
/// this rank's share of each slice (the slice's items split into `ranks`
/// near-equal runs, run p for rank p), and copies it into the host copy of
/// `out`, which is given to Staging as usual (a reduce's non-root: its
/// input, whose slice it has sent by then); the host then gathers the shares
/// and the stream copies the slice back (StagedCall::parts_ready,
/// wait_reduced).
struct DeviceReduction {
  const TensorView* out;
  RedOp op;
  int ranks;
  size_t slice_bytes;  ///< the communicator's (Communicator::slicing)
  int rank = -1;
};

/// Rank p's share of `items` items split among `ranks`: [share_begin(p),
/// share_begin(p + 1)).
inline uint64_t share_begin(uint64_t items, int p, int ranks) { return items * uint64_t(p) / uint64_t(ranks); }

/// kOut on the root, kNone elsewhere (a rooted result's recvbuf).
inline Use out_use(const Communicator& c, int root) { return c.rank() == root ? Use::kOut : Use::kNone; }

class Staging {
 public:
  /// Checks that every non-empty tensor is on one device (else kInvalidArgument); for
  /// CUDA tensors, that it is the calling thread's current device, and plans
  /// their host copies (tensors inside another one share its copy).
  Staging(std::initializer_list<TensorUse> uses, const CallOptions& call, const DeviceReduction* reduction = nullptr) {
    // The common case inline: host tensors of one device id (or none) need
    // no plan; anything else is checked and planned there.
    const TensorView* first = nullptr;
    for (const TensorUse& u : uses) {
      const TensorView* t = u.tensor;
      if (t == nullptr || t->count == 0) continue;
      if (first == nullptr) first = t;
      if (t->device != DeviceKind::kCPU || t->device_id != first->device_id) {
        plan(uses, call, reduction);
        return;
      }
    }
  }
  ~Staging();
  Staging(const Staging&) = delete;
  Staging& operator=(const Staging&) = delete;

  /// Whether the tensors are CUDA tensors (the staged path).
  bool staged() const { return call_ != nullptr; }
  /// The tensor the engine works on: t itself, or (staged) its host copy.
  TensorView view(const TensorView& t) const {
    if (call_ == nullptr) return t;
    return staged_view(t);
  }
  std::optional<TensorView> view(const std::optional<TensorView>& t) const {
    if (!t) return t;
    return view(*t);
  }
  /// Staged only: the operation runs as `slices` collectives over
  /// `slice_bytes` of each row of `row_bytes` of its tensors (the last slice
  /// shorter); the stream copies slice by slice (StagedCall::wait_slice).
  /// A tensor is one row (all_reduce's) or one a rank (all_gather's
  /// output, reduce_scatter's input). The host copy of a tensor of m rows
  /// holds slice k's parts of its rows back to back (m x its length) at
  /// m x k x slice_bytes: what a slice's collective reads or writes is one
  /// range there, and the views of such a tensor point at the start of that
  /// layout. Call before start(); a no-op for host tensors.
  void slice(size_t slices, size_t slice_bytes, size_t row_bytes);
  /// Staged only, instead of slice(), for tensors whose parts differ in
  /// size (all_gatherv's output): the operation runs as `slices`
  /// collectives, and the stream copies `pieces` only (ranges of the
  /// tensors), slice k taking bytes [k x piece_bytes, (k + 1) x piece_bytes)
  /// of each (of a shorter piece, less or none). The host copies mirror the
  /// tensors, so a slice's collective works at the tensors' own offsets;
  /// what no piece covers (the gaps between the parts) is never copied
  /// either way. Call before start(); a no-op for host tensors.
  void slice_pieces(size_t slices, size_t piece_bytes, const std::vector<StagedPiece>& pieces);
  /// Staged with a DeviceReduction: the host region where the ranks' parts
  /// are gathered, laid out as a tensor of `ranks` rows of out's size (see
  /// slice()).
  char* gathered() const;
  /// Staged only: enqueues the stream's part (see above) and hands over the
  /// call, which the queued operation keeps until it ends.
  std::shared_ptr<StagedCall> start();

 private:
  TensorView staged_view(const TensorView& t) const;
  /// The constructor's checks and plan when a tensor is not host memory.
  void plan(std::initializer_list<TensorUse> uses, const CallOptions& call, const DeviceReduction* reduction);
  std::shared_ptr<StagedCall> call_;
};

/// One staged operation after start(): the host side's waits and the word.
class StagedCall {
 public:
  virtual ~StagedCall() = default;
  /// On the worker thread, before the operation: makes the tensors' device
  /// current and waits until the stream has copied the inputs. Throws
  /// kTimeout at `deadline`, kAborted once the mesh is aborted, kSystem for a
  /// CUDA error.
  virtual void wait_ready(Deadline deadline, const transport::Mesh& mesh) = 0;
  /// A sliced operation (Staging::slice), before slice k: waits, as
  /// wait_ready (slice 0's wait), until the stream has copied its inputs.
  virtual void wait_slice(size_t k, Deadline deadline, const transport::Mesh& mesh) = 0;
  /// After slice k: its results are in host memory, and the stream copies
  /// them back while the next slice runs (the last one's wait for finish).
  virtual void slice_done(size_t k) = 0;
  /// A DeviceReduction with a rank (all_reduce's, reduce's), after slice k's parts
  /// are gathered in host memory: the stream reduces them.
  virtual void parts_ready(size_t k) = 0;
  /// Then waits, as wait_slice, until this rank's reduced share of slice k
  /// is in the host copy.
  virtual void wait_reduced(size_t k, Deadline deadline, const transport::Mesh& mesh) = 0;
  /// After the operation: releases the stream (it copies the outputs back),
  /// then waits until it has (bounded as wait_ready).
  virtual void finish(Deadline deadline, const transport::Mesh& mesh) = 0;
  /// The whole operation's deadline, set when the worker takes it up: its
  /// waits for the stream and every slice's collective share it, so a
  /// sliced call is bounded by its timeout as a whole one is.
  const Deadline& deadline() const { return deadline_; }
  void set_deadline(Deadline d) { deadline_ = d; }

 private:
  Deadline deadline_ = Deadline::never();
};

}  // namespace omniccl::coll
