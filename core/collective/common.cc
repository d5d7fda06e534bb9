#include "collective/common.h"

#include <array>
#include <chrono>

namespace omniccl::coll {

void fail_root(const Communicator& c, int root, const char* what) {
  fail(Status::kInvalidArgument, what, " ", root, " is out of range for a communicator of ", c.size(),
       " ranks (valid: 0..", c.size() - 1, ")");
}

void fail_dtypes(const TensorView& a, const char* a_name, const TensorView& b, const char* b_name) {
  fail(Status::kInvalidArgument, a_name, " has dtype ", dtype_name(a.dtype), " but ", b_name, " has dtype ",
       dtype_name(b.dtype), "; they must match");
}

void fail_count(const TensorView& t, const char* name, size_t expected, const char* why) {
  fail(Status::kInvalidArgument, name, " has ", t.count, " elements but ", expected, " are needed (", why, ")");
}

void fail_overlap(const char* a_name, const char* b_name) {
  fail(Status::kInvalidArgument, a_name, " and ", b_name,
       " overlap without being the in-place layout this operation allows");
}

namespace {

/// Why op is not defined for t, for the error message ("" when plain).
const char* undefined_hint(RedOp op, DType t) {
  if (op == RedOp::kBAnd || op == RedOp::kBOr || op == RedOp::kBXor)
    return " (bitwise ops need integer or bool tensors)";
  if (kernels::is_loc(op)) {
    return " (MAXLOC and MINLOC take (value, index) pairs of an integer, float32 or float64 dtype)";
  }
  if ((op == RedOp::kMin || op == RedOp::kMax) && kernels::is_complex(t)) return " (complex numbers have no order)";
  return "";
}

}  // namespace

void check_whole_items(const TensorView& t, const char* name, RedOp op) {
  if (!kernels::is_loc(op) || t.count % 2 == 0) return;
  fail(Status::kInvalidArgument, name, " has ", t.count, " elements, an odd number; reduce op ", redop_name(op),
       " takes (value, index) pairs, two elements each");
}

ReduceSpec resolve_any_op(const Communicator& c, int op, DType t) {
  ReduceSpec spec = c.reduce_spec(op);
  if (!kernels::is_defined(spec.op, t)) {
    fail(Status::kInvalidArgument, "reduce op ", redop_name(spec.op), " is not defined for dtype ", dtype_name(t),
         undefined_hint(spec.op, t));
  }
  if (spec.op == RedOp::kPreMulSum && !kernels::is_floating(t) && !kernels::is_complex(t)) {
    check_arg(spec.premul_scalar == static_cast<double>(static_cast<int64_t>(spec.premul_scalar)), "PREMUL_SUM scalar ",
              spec.premul_scalar, " is not an integer, as dtype ", dtype_name(t), " requires");
  }
  return spec;
}

RedOp combine_op(RedOp op) { return op == RedOp::kAvg || op == RedOp::kPreMulSum ? RedOp::kSum : op; }

const char* premultiplied(Engine& e, const ReduceSpec& op, const char* src, size_t count, DType t) {
  char* tmp = e.scratch(count * dtype_size(t), 3);
  e.exec().scale_multiply(tmp, src, count, t, op.premul_scalar);
  return tmp;
}

WorkPtr launch_staged(Communicator& c, Staging& staging, const CallOptions& call, std::function<void(Engine&)> op,
                      WorkPtr work) {
  return launch_staged(
      c, staging, call, [op = std::move(op)](Engine& e, StagedCall&) { op(e); }, std::move(work));
}

namespace {

int64_t ns_since(std::chrono::steady_clock::time_point t) {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now() - t).count();
}

/// The worker's part of a staged call; with a profile, its phases timed
/// (`ns` holds the caller's enqueue time, `submitted` when it was queued).
void run_staged(Engine& e, StagedCall& staged, const std::function<void(Engine&, StagedCall&)>& op, int64_t timeout_ms,
                StagedProfile* profile, std::array<int64_t, StagedProfile::kPhases> ns,
                std::chrono::steady_clock::time_point submitted) {
  staged.set_deadline(Deadline::after_ms(timeout_ms));
  if (profile == nullptr) {
    staged.wait_ready(staged.deadline(), e.mesh());
    op(e, staged);
    staged.finish(staged.deadline(), e.mesh());
    return;
  }
  ns[StagedProfile::kQueued] = ns_since(submitted);
  auto t = std::chrono::steady_clock::now();
  staged.wait_ready(staged.deadline(), e.mesh());
  ns[StagedProfile::kInputs] = ns_since(t);
  t = std::chrono::steady_clock::now();
  op(e, staged);
  ns[StagedProfile::kHost] = ns_since(t);
  t = std::chrono::steady_clock::now();
  staged.finish(staged.deadline(), e.mesh());
  ns[StagedProfile::kOutputs] = ns_since(t);
  profile->add(ns);
}

}  // namespace

WorkPtr launch_staged(Communicator& c, Staging& staging, const CallOptions& call,
                      std::function<void(Engine&, StagedCall&)> op, WorkPtr work) {
  // Refused at once, as a blocking call would be: nothing is enqueued on
  // the stream for an operation that cannot run.
  c.check_usable();
  // The clock is read only when profiling: nothing is added to the path otherwise.
  StagedProfile* const profile = c.staged_profile();
  using Clock = std::chrono::steady_clock;
  const Clock::time_point begun = profile != nullptr ? Clock::now() : Clock::time_point{};
  std::shared_ptr<StagedCall> staged = staging.start();
  std::array<int64_t, StagedProfile::kPhases> ns{};
  if (profile != nullptr) ns[StagedProfile::kEnqueue] = ns_since(begun);
  const Clock::time_point submitted = profile != nullptr ? Clock::now() : Clock::time_point{};
  const int64_t timeout_ms = call.timeout_ms > 0 ? call.timeout_ms : c.timeout_ms();
  work = c.submit([staged, timeout_ms, op = std::move(op), profile, ns,
                   submitted](Engine& e) { run_staged(e, *staged, op, timeout_ms, profile, ns, submitted); },
                  true, std::move(work));
  return call.async ? work : nullptr;
}

void reduce_parts(Engine& e, char* out, const char* parts, size_t count, DType t, RedOp op, int n) {
  const size_t len = count * dtype_size(t);
  if (n == 1) {
    e.exec().copy(out, parts, len);
    if (is_logical(op)) truth_values(e, out, count, t);
    return;
  }
  for (int q = 1; q < n; ++q) {
    e.exec().reduce(out, q == 1 ? parts : out, parts + size_t(q) * len, count, t, combine_op(op));
  }
  if (op == RedOp::kAvg) e.exec().scale_divide(out, count, t, n);
}

void exchange_shares(Engine& e, const Shares& s, const char* slice, char* parts) {
  const size_t n = s.counts.size();
  const uint64_t mine = s.counts[size_t(e.rank())];
  std::vector<uint64_t> from(n, mine), at(n, 0);
  for (size_t q = 0; q < n; ++q) at[q] = q * mine;
  find_algorithm(OpKind::kAllToAllV, Algo::kDirect)
      .run(e, {.send = slice,
               .recv = parts,
               .counts = s.counts.data(),
               .displs = s.displs.data(),
               .recv_counts = from.data(),
               .recv_displs = at.data()});
}

}  // namespace omniccl::coll
