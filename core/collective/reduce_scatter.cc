#include "collective/common.h"

namespace omniccl::coll {

namespace {

/// Where a slice of a reduce_scatter reads and writes (launch_sliced): `len`
/// bytes from `at` of each rank's block of the input (`row` bytes), and of
/// the output. Staged, the host copy holds the input's parts back to back
/// (Staging::slice); host tensors gather them in scratch first.
struct SliceSpan {
  const char* src;
  char* dst;
};

SliceSpan slice_span(Engine& e, const char* in, char* out, size_t at, size_t len, size_t row, int n, int rank,
                     bool staged, bool in_place) {
  if (staged && in_place) {
    char* const input = out - size_t(rank) * row + size_t(n) * at;  // out is the input's block `rank`
    return {input, input + size_t(rank) * len};
  }
  if (staged || len == row) return {in + size_t(n) * at, out + at};
  char* const tmp = e.scratch(len * size_t(n), kSliceScratch);
  for (int p = 0; p < n; ++p) e.exec().copy(tmp + size_t(p) * len, in + size_t(p) * row + at, len);
  return {tmp, out + at};
}

}  // namespace

WorkPtr reduce_scatter(Communicator& c, const TensorView& send, const TensorView& recv, int op,
                       const CallOptions& call) {
  const int n = c.size();
  check_same_dtype(send, "sendbuf", recv, "recvbuf");
  check_count(send, "sendbuf", times_ranks(recv, "recvbuf", n),
              "reduce_scatter: sendbuf holds size x recvbuf elements");
  check_overlap(send, "sendbuf", recv, "recvbuf", static_cast<long long>(recv.bytes()) * c.rank());
  const ReduceSpec spec = resolve_op(c, op, send.dtype);
  check_whole_items(recv, "recvbuf", spec.op);
  if (auto w = launch_device(c, {&send, &recv}, call, [&] {
        return device_call(OpKind::kReduceScatter, send.dtype, spec, -1, recv.count, send.bytes_ptr(),
                           recv.bytes_ptr());
      })) {
    return *w;
  }
  const size_t row = recv.bytes();
  const int rank = c.rank();
  const bool in_place = recv.count > 0 && recv.bytes_ptr() == send.bytes_ptr() + row * size_t(rank);
  Staging st({{&send, Use::kIn}, {&recv, Use::kOut}}, call);
  // The body captures scalars, not views (see TensorView).
  const char* const in = st.view(send).bytes_ptr();
  char* const out = st.view(recv).bytes_ptr();
  const bool staged = st.staged();
  const DType dtype = send.dtype;
  // Each rank's block is whole pairs for MAXLOC / MINLOC (checked above).
  const size_t per_item = kernels::item_elems(spec.op);
  const size_t item_bytes = per_item * dtype_size(dtype);
  return launch_sliced(c, st, OpKind::kReduceScatter, dtype, spec.op, -1, recv.count / per_item, item_bytes, n, call,
                       [=](Engine& e, const AlgoEntry& algo, uint64_t first, uint64_t items) {
                         const size_t len = items * item_bytes, elems = items * per_item;
                         const SliceSpan s =
                             slice_span(e, in, out, first * item_bytes, len, row, n, rank, staged, in_place);
                         const char* src = premultiply(e, spec, s.src, elems * size_t(n), dtype);
                         algo.run(e, {.send = src, .recv = s.dst, .count = items});
                         if (spec.op == RedOp::kAvg) e.exec().scale_divide(s.dst, elems, dtype, n);
                         if (n == 1 && is_logical(spec.op)) truth_values(e, s.dst, elems, dtype);
                       });
}

}  // namespace omniccl::coll
