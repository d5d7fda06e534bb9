#include "collective/common.h"

namespace omniccl::coll {

namespace {

/// reduce_scatter on communicators that reduce in rank order
/// (reduces_in_rank_order): each slice's parts of the ranks' blocks are
/// exchanged (all_to_all), then reduced in rank order where the tensors are:
/// on the GPU by the stream for CUDA tensors (Staging's DeviceReduction),
/// here for host ones. Both give the CPU kernels' results bit for bit.
WorkPtr reduce_scatter_in_rank_order(Communicator& c, const TensorView& send, const TensorView& recv,
                                     const ReduceSpec& spec, const CallOptions& call) {
  const int n = c.size();
  const size_t row = recv.bytes(), elem = dtype_size(send.dtype);
  const DeviceReduction reduction{&recv, spec.op, n, c.slicing().slice_bytes};
  Staging st({{&send, Use::kIn}, {&recv, Use::kNone}}, call, &reduction);
  const bool staged = st.staged();
  // The body captures scalars, not views (see TensorView). Staged, `out` is
  // where the parts are gathered (laid out as n rows of `row` bytes).
  char* const in = st.view(send).bytes_ptr();
  char* const out = staged ? st.gathered() : recv.bytes_ptr();
  const DType dtype = send.dtype;
  const RedOp op = spec.op;
  const AlgoEntry* exchange = &find_algorithm(OpKind::kAllToAll, Algo::kPairwise);
  return launch_sliced(c, st, OpKind::kReduceScatter, dtype, op, -1, recv.count, elem, n, call,
                       [=](Engine& e, const AlgoEntry&, uint64_t first, uint64_t items) {
                         const size_t at = first * elem, len = items * elem;
                         const SliceRows i(in, row, at, len, n, staged);
                         const char* const input = i.read(e, kSliceScratch);
                         char* const parts =
                             staged ? out + size_t(n) * at : e.scratch(len * size_t(n), kSliceScratch + 1);
                         exchange->run(e, {.send = input, .recv = parts, .bytes = len});
                         if (!staged) reduce_parts(e, out + at, parts, items, dtype, op, n);
                       });
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
  if (reduces_in_rank_order(c, spec.op, send.dtype, send.bytes()))
    return reduce_scatter_in_rank_order(c, send, recv, spec, call);
  const size_t row = recv.bytes();
  const int rank = c.rank();
  const bool in_place = recv.count > 0 && recv.bytes_ptr() == send.bytes_ptr() + row * size_t(rank);
  Staging st({{&send, Use::kIn}, {&recv, Use::kOut}}, call);
  // The body captures scalars, not views (see TensorView).
  char* const in = st.view(send).bytes_ptr();
  char* const out = st.view(recv).bytes_ptr();
  const bool staged = st.staged();
  const DType dtype = send.dtype;
  // Each rank's block is whole pairs for MAXLOC / MINLOC (checked above).
  const size_t per_item = kernels::item_elems(spec.op);
  const size_t item_bytes = per_item * dtype_size(dtype);
  return launch_sliced(c, st, OpKind::kReduceScatter, dtype, spec.op, -1, recv.count / per_item, item_bytes, n, call,
                       [=](Engine& e, const AlgoEntry& algo, uint64_t first, uint64_t items) {
                         const size_t len = items * item_bytes, elems = items * per_item;
                         // The input's `len` bytes from `at` of every block (SliceRows). Staged
                         // in place, the output is the input's block `rank`, laid out with it.
                         const SliceRows i(in, row, first * item_bytes, len, n, staged);
                         const char* const input = i.read(e, kSliceScratch);
                         char* const dst =
                             staged && in_place ? i.here() + size_t(rank) * len : out + first * item_bytes;
                         const char* src = premultiply(e, spec, input, elems * size_t(n), dtype);
                         algo.run(e, {.send = src, .recv = dst, .count = items});
                         if (spec.op == RedOp::kAvg) e.exec().scale_divide(dst, elems, dtype, n);
                         if (n == 1 && is_logical(spec.op)) truth_values(e, dst, elems, dtype);
                       });
}

}  // namespace omniccl::coll
