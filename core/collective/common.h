// Helpers shared by the collective files: argument checks and the one path
// every operation takes into the engine (launch).
#pragma once

#include <chrono>
#include <cstring>
#include <initializer_list>
#include <optional>
#include <string>
#include <vector>

#include "algorithm/algorithms.h"
#include "common/checked.h"
#include "collective/collectives.h"
#include "collective/staging.h"
#include "executor/executor.h"
#include "common/status.h"
#include "tuning/tuning.h"

namespace omniccl::coll {

// The checks every call makes run inline; only their failures, which build
// the message, are calls (an 8-byte scatter's root made five calls for them,
// about a tenth of its instructions).
[[noreturn, gnu::cold, gnu::noinline]] void fail_root(const Communicator& c, int root, const char* what);
[[noreturn, gnu::cold, gnu::noinline]] void fail_dtypes(const TensorView& a, const char* a_name, const TensorView& b,
                                                        const char* b_name);
[[noreturn, gnu::cold, gnu::noinline]] void fail_count(const TensorView& t, const char* name, size_t expected,
                                                       const char* why);
[[noreturn, gnu::cold, gnu::noinline]] void fail_overlap(const char* a_name, const char* b_name);

/// Throws kInvalidArgument unless 0 <= root < size.
inline void check_root(const Communicator& c, int root, const char* what = "root") {
  if (root < 0 || root >= c.size()) [[unlikely]] {
    fail_root(c, root, what);
  }
}
/// Throws kInvalidArgument unless the two tensors have the same dtype.
inline void check_same_dtype(const TensorView& a, const char* a_name, const TensorView& b, const char* b_name) {
  if (a.dtype != b.dtype) [[unlikely]] {
    fail_dtypes(a, a_name, b, b_name);
  }
}
/// Throws kInvalidArgument unless t has `expected` elements.
inline void check_count(const TensorView& t, const char* name, size_t expected, const char* why) {
  if (t.count != expected) [[unlikely]] {
    fail_count(t, name, expected, why);
  }
}
/// t.count x nranks (the size of a gathered buffer); throws kInvalidArgument
/// naming `name` when it overflows.
inline size_t times_ranks(const TensorView& t, const char* name, int nranks) {
  return checked_mul(t.count, static_cast<uint64_t>(nranks), name, ": ", t.count, " elements x ", nranks, " ranks");
}
/// Throws kInvalidArgument if a and b overlap other than at exactly the
/// in-place position (b.data == a.data + allowed_offset_bytes).
inline void check_overlap(const TensorView& a, const char* a_name, const TensorView& b, const char* b_name,
                          long long allowed_offset_bytes) {
  const size_t an = a.bytes(), bn = b.bytes();
  if (an == 0 || bn == 0) return;
  const char* a0 = a.bytes_ptr();
  const char* b0 = b.bytes_ptr();
  const bool overlap = a0 < b0 + bn && b0 < a0 + an;
  if (overlap && b0 != a0 + allowed_offset_bytes) [[unlikely]] {
    fail_overlap(a_name, b_name);
  }
}
/// Throws kInvalidArgument when op reduces (value, index) pairs and t has
/// an odd number of elements.
void check_whole_items(const TensorView& t, const char* name, RedOp op);
/// resolve_op past its common case.
ReduceSpec resolve_any_op(const Communicator& c, int op, DType t);
/// Resolves op for t's dtype; throws kInvalidArgument when undefined.
inline ReduceSpec resolve_op(const Communicator& c, int op, DType t) {
  // Sum, product, min and max are defined for every real dtype: no lookup.
  if (op >= int(RedOp::kSum) && op <= int(RedOp::kMax) && int(t) < kernels::kNumDTypes && !kernels::is_complex(t)) {
    return ReduceSpec{static_cast<RedOp>(op), 1.0};
  }
  return resolve_any_op(c, op, t);
}
/// The tensor an optional holds, or nullptr (for Staging).
inline const TensorView* opt(const OptTensor& t) { return t ? &*t : nullptr; }
/// SUM for AVG and PREMUL_SUM (scaled separately), else op.
RedOp combine_op(RedOp op);

/// The device path's description of an operation (algorithm/device/).
algo::DeviceCall device_call(OpKind kind, DType dtype, const ReduceSpec& spec, int root, uint64_t count,
                             const char* send, char* recv);
/// Enqueues `d` on the call's stream through the communicator's device
/// engine when it takes it: every non-empty tensor of `used` is a CUDA
/// tensor of the engine's device, the calling thread's current one. Returns
/// the Work (async) or nullptr (blocking: the call returns without waiting
/// for the stream); nullopt when the operation is not for the device path.
std::optional<WorkPtr> launch_device_call(Communicator& c, algo::DeviceCall d,
                                          std::initializer_list<const TensorView*> used, const CallOptions& call);

/// launch_device_call(c, build(), used, call), where `build` makes the
/// DeviceCall only for a communicator with a device engine: every CPU
/// collective passes here, and on its smallest sizes building a call it
/// will not use (vectors included, for the v-variants) is measurable.
template <typename Build>
std::optional<WorkPtr> launch_device(Communicator& c, std::initializer_list<const TensorView*> used,
                                     const CallOptions& call, Build build) {
  if (c.device_engine() == nullptr) return std::nullopt;
  return launch_device_call(c, build(), used, call);
}

/// Point-to-point on a CUDA tensor through the device engine: a named peer
/// other than this rank, a tag >= 0, the engine's device current. nullopt
/// when it does not apply (the caller then reports why).
std::optional<WorkPtr> launch_device_p2p(Communicator& c, const TensorView& t, int peer, int tag, bool is_send,
                                         bool synchronous, const CallOptions& call, RecvStatus* status);

/// launch's staged path: enqueues the stream's part, then queues `op`
/// between the host-side waits (staging.h). `work`: the handle to complete
/// (see Communicator::submit), made when null.
WorkPtr launch_staged(Communicator& c, Staging& staging, const CallOptions& call, std::function<void(Engine&)> op,
                      WorkPtr work = nullptr);
/// The same for an operation that waits for the stream itself between its
/// slices (launch_sliced): `op` runs after slice 0's inputs are copied.
WorkPtr launch_staged(Communicator& c, Staging& staging, const CallOptions& call,
                      std::function<void(Engine&, StagedCall&)> op, WorkPtr work = nullptr);

/// What one collective of the engine is: its signature's fields but the
/// sequence number, the size its algorithm is chosen for, its deadline and
/// interrupt check.
struct CollectiveHead {
  Communicator* comm;
  OpKind kind;
  DType dtype;
  RedOp redop;
  int root;
  uint64_t count;  ///< the call's, in every slice of a sliced call
  int64_t timeout_ms;
  InterruptHook interrupt;
};

/// The head of a call's collectives. Only a blocking host call checks the
/// caller's interrupt: an async or staged one runs on the worker.
inline CollectiveHead collective_head(Communicator& c, const Staging& staging, OpKind kind, DType dtype, RedOp redop,
                                      int root, uint64_t count, const CallOptions& call) {
  const bool on_worker = call.async || staging.staged();
  return {&c, kind, dtype, redop, root, count, call.timeout_ms, on_worker ? InterruptHook{} : call.interrupt};
}

/// Runs body(engine, row) as one collective of the engine (a sequence
/// number of its own), its algorithm chosen for `tune_bytes`. Its deadline:
/// `end` when given (a staged call's, or a sliced call's, shared by its
/// slices), else its timeout from its first wait.
template <typename Body>
void run_collective(Engine& e, const CollectiveHead& h, uint64_t tune_bytes, const Body& body,
                    const Deadline* end = nullptr) {
  Communicator* comm = h.comm;
  const Plan& plan = comm->planner().plan(h.kind, tune_bytes);
  OpSignature& sig = e.begin_in_place(combine_op(h.redop), h.timeout_ms > 0 ? h.timeout_ms : comm->timeout_ms());
  sig.kind = h.kind;
  sig.dtype = h.dtype;
  sig.redop = h.redop;
  sig.root = h.root;
  sig.count = h.count;
  sig.seq = comm->next_collective_seq();
  sig.algo = uint8_t(plan.algo);
  sig.algo_name = plan.algo_name;
  if (end != nullptr) e.set_deadline(*end);
  e.set_interrupt(h.interrupt);
  e.use_cpu();  // staged tensors are host copies
  e.set_split_copy(plan.split_copy);
  e.set_single_copy(plan.single_copy);
  e.set_stream_min(plan.stream_min);
  if (!plan.measured) {
    body(e, *plan.entry);
    return;
  }
  if (plan.until_read) e.wait_sends_read(kTunerDrainNs);
  const auto t0 = std::chrono::steady_clock::now();
  body(e, *plan.entry);
  if (plan.until_read) e.wait_sends_read(kTunerDrainNs);
  const auto ns = std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now() - t0);
  comm->planner().took(uint64_t(ns.count()));
}

/// An operation on host tensors: run on the caller's thread (which holds the
/// issuer, collectives.h), or queued on the worker for an async call.
template <typename Op>
WorkPtr run_on_host(Communicator& c, bool async, const InterruptHook& interrupt, Op op) {
  if (!async) {
    c.run_blocking_issued(op, interrupt);
    return nullptr;
  }
  return c.submit(op, true);
}

/// Queues or runs body(engine, row) as operation `kind` on the tensors
/// `staging` checked (body works on staging.view() of each); `tune_bytes` is
/// the per-rank size used to choose the algorithm (`row` is its entry in the
/// algorithm table). The call's options give its deadline and, for a
/// blocking call, the caller's interrupt check. CUDA tensors (staged): the
/// operation is ordered on the call's stream and queued on the worker; the
/// call returns without waiting for it, with a Work only when async.
template <typename Body>
WorkPtr launch(Communicator& c, Staging& staging, OpKind kind, DType dtype, RedOp redop, int root, uint64_t count,
               uint64_t tune_bytes, const CallOptions& call, Body body) {
  const CollectiveHead head = collective_head(c, staging, kind, dtype, redop, root, count, call);
  if (staging.staged()) {
    return launch_staged(c, staging, call, std::function<void(Engine&, StagedCall&)>([=](Engine& e, StagedCall& s) {
                           run_collective(e, head, tune_bytes, body, &s.deadline());
                         }));
  }
  return run_on_host(c, call.async, head.interrupt, [=](Engine& e) { run_collective(e, head, tune_bytes, body); });
}

/// The engine scratch slot where a slice of host tensors whose rows are
/// apart (all_gather's output, reduce_scatter's input, all_to_all's input)
/// is laid out back to back, the next one all_to_all's output (0-2: the
/// algorithms', 3: premultiply's and all_to_all's in-place copy).
constexpr int kSliceScratch = 4;

/// How many items of each row a slice of a call takes: its rows' parts make
/// `slice` bytes together (Communicator::slicing; at least one item).
inline uint64_t slice_items(size_t item_bytes, int rows, size_t slice) {
  return std::max<uint64_t>(1, slice / (item_bytes * size_t(rows)));
}

/// How many slices a call of `items` items of `item_bytes` in each of its
/// `rows` rows runs as (1: whole, for fewer than two slices' bytes).
inline uint64_t slice_count(uint64_t items, size_t item_bytes, int rows, size_t slice) {
  if (items * item_bytes * uint64_t(rows) < 2 * uint64_t(slice)) return 1;
  const uint64_t per = slice_items(item_bytes, rows, slice);
  return (items + per - 1) / per;
}

/// A slice of a tensor with a block (row) a rank (launch_sliced): `len`
/// bytes from `at` of each of its `rows` rows of `row` bytes, which the
/// slice's collective reads or writes back to back. They already lie so at
/// here() when the tensor is a staged host copy (Staging::slice) or the call
/// is one slice (its parts are the rows); otherwise they are gathered into,
/// or spread from, engine scratch.
class SliceRows {
 public:
  SliceRows(char* base, size_t row, size_t at, size_t len, int rows, bool laid_out)
      : base_(base), row_(row), at_(at), len_(len), rows_(size_t(rows)), laid_out_(laid_out || len == row) {}
  /// Whether the parts lie back to back at here() (no scratch).
  bool laid_out() const { return laid_out_; }
  /// Where the parts lie back to back when laid out.
  char* here() const { return base_ + rows_ * at_; }
  /// The parts back to back for reading: here(), or a copy in scratch `slot`.
  const char* read(Engine& e, int slot) const {
    if (laid_out_) return here();
    char* const tmp = e.scratch(len_ * rows_, slot);
    for (size_t p = 0; p < rows_; ++p) e.exec().copy(tmp + p * len_, base_ + p * row_ + at_, len_);
    return tmp;
  }
  /// Where the collective writes the parts back to back: here(), or scratch
  /// `slot` (then spread()).
  char* write(Engine& e, int slot) const { return laid_out_ ? here() : e.scratch(len_ * rows_, slot); }
  /// After the collective: the parts write() gave, copied into their rows
  /// where that was scratch.
  void spread(Engine& e, const char* from) const {
    if (laid_out_) return;
    for (size_t p = 0; p < rows_; ++p) e.exec().copy(base_ + p * row_ + at_, from + p * len_, len_);
  }

 private:
  char* base_;
  size_t row_, at_, len_, rows_;
  bool laid_out_;
};

/// Queues or runs a call of `slices` slices: each(engine, k, end, staged)
/// runs slice k's collectives by the call's deadline `end` (staged: the
/// call's StagedCall, else nullptr). Staged, the stream's copies follow the
/// slices (Staging::slice or slice_pieces, called before): the host waits
/// for slice k's inputs before it and releases its outputs after it. The
/// slices share the call's deadline, as a whole call's steps do.
template <typename Each>
WorkPtr launch_slice_loop(Communicator& c, Staging& staging, const CollectiveHead& head, uint64_t slices,
                          const CallOptions& call, Each each) {
  auto run = [=](Engine& e, StagedCall* staged) {
    const int64_t timeout_ms = head.timeout_ms > 0 ? head.timeout_ms : head.comm->timeout_ms();
    const Deadline end = staged != nullptr ? staged->deadline() : Deadline::after_ms(timeout_ms);
    for (uint64_t k = 0; k < slices; ++k) {
      if (staged != nullptr && k > 0) staged->wait_slice(k, end, e.mesh());
      each(e, k, end, staged);
      if (staged != nullptr) staged->slice_done(k);
    }
  };
  if (staging.staged()) {
    return launch_staged(c, staging, call,
                         std::function<void(Engine&, StagedCall&)>([run](Engine& e, StagedCall& s) { run(e, &s); }));
  }
  return run_on_host(c, call.async, head.interrupt, [run](Engine& e) { run(e, nullptr); });
}

/// launch_slice_loop with one collective a slice: body(engine, row, k) is
/// slice k's, its algorithm chosen for tune(k) bytes.
template <typename Tune, typename Body>
WorkPtr launch_slices(Communicator& c, Staging& staging, const CollectiveHead& head, uint64_t slices,
                      const CallOptions& call, Tune tune, Body body) {
  return launch_slice_loop(c, staging, head, slices, call,
                           [=](Engine& e, uint64_t k, const Deadline& end, StagedCall*) {
                             run_collective(
                                 e, head, tune(k), [&](Engine& en, const AlgoEntry& row) { body(en, row, k); }, &end);
                           });
}

/// launch for an operation whose result at each position of a row depends
/// only on the ranks' inputs at that position: all_reduce, broadcast,
/// reduce, scan and exscan (one row: the tensor), all_gather (its output
/// has a row a rank), reduce_scatter (its input has), all_to_all (both
/// have), gather and scatter (the root's tensor has; `rows` is the rank
/// count on every rank, so that all agree on the split). A large one runs
/// as slices, body(engine, row, first_item, items) each over those items of
/// every row, on communicators where some rank had a GPU in use when it was
/// made (Communicator::slices_large_calls; CPU-only jobs run every call
/// whole). Every rank of such a communicator slices alike, since the split
/// depends on the call's size only (a rank with CPU tensors and one with
/// CUDA tensors still agree). Staged, the stream copies slice by slice
/// (staging.h, which also says where a slice's rows lie in host memory).
template <typename Body>
WorkPtr launch_sliced(Communicator& c, Staging& staging, OpKind kind, DType dtype, RedOp redop, int root,
                      uint64_t items, size_t item_bytes, int rows, const CallOptions& call, Body body) {
  const size_t slice = c.slicing().slice_bytes;
  const uint64_t slices = c.slices_large_calls() ? slice_count(items, item_bytes, rows, slice) : 1;
  // The size the algorithm is chosen for: an item of every row, but gather
  // and scatter are sized by one rank's block (their tuning tables' unit).
  const bool rooted_blocks = kind == OpKind::kGather || kind == OpKind::kScatter;
  const uint64_t across = item_bytes * uint64_t(rooted_blocks ? 1 : rows);
  if (slices == 1) {
    return launch(c, staging, kind, dtype, redop, root, items, items * across, call,
                  [=](Engine& e, const AlgoEntry& row) { body(e, row, 0, items); });
  }
  const uint64_t per = slice_items(item_bytes, rows, slice);
  staging.slice(slices, per * item_bytes, items * item_bytes);
  const CollectiveHead head = collective_head(c, staging, kind, dtype, redop, root, items, call);
  return launch_slices(
      c, staging, head, slices, call, [=](uint64_t k) { return std::min(per, items - k * per) * across; },
      [=](Engine& e, const AlgoEntry& row, uint64_t k) { body(e, row, k * per, std::min(per, items - k * per)); });
}

/// Whether reductions of `op` on `t` (all_reduce's, reduce_scatter's and
/// reduce's) exchange the ranks' parts and reduce them in rank order where
/// the tensors are: on the GPU for staged CUDA tensors (staging.h,
/// DeviceReduction), on the host for host ones. So on communicators that
/// slice large calls (some rank had a GPU in use when it was made: every
/// rank agrees, whatever its tensors' device), for what the CUDA kernels
/// reduce: not PREMUL_SUM (a scalar a rank), MAXLOC/MINLOC or complex
/// dtypes, which the host reduces; and calls of slicing().gpu_reduce_bytes or more
/// (`bytes`: all_reduce's and reduce's tensor, reduce_scatter's input),
/// since a smaller one's reduction costs the host less than a round trip to
/// the GPU and back would.
inline bool reduces_in_rank_order(const Communicator& c, RedOp op, DType t, uint64_t bytes) {
  return c.slices_large_calls() && bytes >= c.slicing().gpu_reduce_bytes && op != RedOp::kPreMulSum &&
         kernels::item_elems(op) == 1 && !kernels::is_complex(t);
}

/// out = parts[0] op parts[1] op ... op parts[n - 1] (each `count`
/// elements), in rank order, as the stream does on the GPU (staging.cc).
void reduce_parts(Engine& e, char* out, const char* parts, size_t count, DType t, RedOp op, int n);

/// Near-equal shares of a slice of `items` items of `item_bytes` among
/// `ranks` (share_begin), in bytes: counts and displacements as the
/// v-variants' algorithms take them.
struct Shares {
  std::vector<uint64_t> counts, displs;
  Shares(uint64_t items, int ranks, size_t item_bytes) : counts(size_t(ranks)), displs(size_t(ranks)) {
    for (int p = 0; p < ranks; ++p) {
      displs[size_t(p)] = share_begin(items, p, ranks) * item_bytes;
      counts[size_t(p)] = share_begin(items, p + 1, ranks) * item_bytes - displs[size_t(p)];
    }
  }
};

/// launch_in_two_phases' exchange: this rank's share (of `s`, the slice's
/// shares) of every rank's slice at `slice`, into `parts` back to back in
/// rank order (all_to_allv).
void exchange_shares(Engine& e, const Shares& s, const char* slice, char* parts);

/// launch_sliced for an all_reduce or reduce on a communicator that reduces
/// in rank order (reduces_in_rank_order): two collectives a slice with the
/// stream's work between them (staging.h, DeviceReduction with a rank).
/// exchange(engine, first_item, items) gathers the slice's parts of this
/// rank's share (a host rank then reduces them itself); staged, the stream
/// reduces them; share(engine, first_item, items) then gathers the reduced
/// shares into the slice (every rank's, or the root's).
template <typename Exchange, typename Share>
WorkPtr launch_in_two_phases(Communicator& c, Staging& staging, OpKind kind, DType dtype, RedOp redop, int root,
                             uint64_t items, size_t item_bytes, const CallOptions& call, Exchange exchange,
                             Share share) {
  const size_t slice = c.slicing().slice_bytes;
  const uint64_t slices = slice_count(items, item_bytes, 1, slice);
  const uint64_t per = slices == 1 ? items : slice_items(item_bytes, 1, slice);
  staging.slice(slices, per * item_bytes, items * item_bytes);
  const CollectiveHead head = collective_head(c, staging, kind, dtype, redop, root, items, call);
  return launch_slice_loop(
      c, staging, head, slices, call, [=](Engine& e, uint64_t k, const Deadline& end, StagedCall* staged) {
        const uint64_t first = k * per, n = std::min(per, items - first);
        run_collective(
            e, head, n * item_bytes, [&](Engine& en, const AlgoEntry&) { exchange(en, first, n); }, &end);
        if (staged != nullptr) {
          staged->parts_ready(k);
          staged->wait_reduced(k, end, e.mesh());
        }
        run_collective(
            e, head, n * item_bytes, [&](Engine& en, const AlgoEntry&) { share(en, first, n); }, &end);
      });
}

/// Makes buf's count elements the 0/1 truth values of what they hold (as the
/// logical ops give): for a result that no combine has touched, a single
/// rank's all_reduce, reduce or reduce_scatter, or a prefix of one rank.
inline void truth_values(Engine& e, char* buf, size_t count, DType t) {
  if (count > 0) e.exec().reduce(buf, buf, buf, count, t, RedOp::kLOr);  // x OR x is x's truth
}

/// premultiply's PREMUL_SUM case: src times the scalar, in engine scratch slot 3.
const char* premultiplied(Engine& e, const ReduceSpec& op, const char* src, size_t count, DType t);
/// Pre-multiplies (PREMUL_SUM) into engine scratch slot 3, else returns src.
inline const char* premultiply(Engine& e, const ReduceSpec& op, const char* src, size_t count, DType t) {
  if (op.op != RedOp::kPreMulSum || count == 0) return src;
  return premultiplied(e, op, src, count, t);
}

}  // namespace omniccl::coll
