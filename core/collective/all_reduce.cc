#include "collective/common.h"

namespace omniccl::coll {

namespace {

/// all_reduce on communicators that reduce in rank order
/// (reduces_in_rank_order), a slice at a time: each rank gathers its share
/// of the slice from every rank (all_to_allv), reduces the parts in rank
/// order where the tensors are (on the GPU by the stream for CUDA tensors,
/// here for host ones), and the reduced shares are gathered into every
/// rank's slice (all_gatherv). The result is bit for bit the CPU kernels'
/// in rank order, on every rank, whatever its tensors' device.
WorkPtr all_reduce_in_rank_order(Communicator& c, const TensorView& send, const TensorView& recv,
                                 const ReduceSpec& spec, const CallOptions& call) {
  const int n = c.size(), rank = c.rank();
  const size_t elem = dtype_size(send.dtype);
  const DeviceReduction reduction{&recv, spec.op, n, c.slicing().slice_bytes, rank};
  Staging st({{&send, Use::kIn}, {&recv, Use::kOut}}, call, &reduction);
  const bool staged = st.staged();
  // The body captures scalars, not views (see TensorView).
  const char* const in = st.view(send).bytes_ptr();
  char* const out = st.view(recv).bytes_ptr();
  char* const gathered = st.gathered();
  const DType dtype = send.dtype;
  const RedOp op = spec.op;
  const AlgoEntry* gather = &find_algorithm(OpKind::kAllGatherV, Algo::kDirect);
  return launch_in_two_phases(
      c, st, OpKind::kAllReduce, dtype, op, -1, send.count, elem, call,
      [=](Engine& e, uint64_t first, uint64_t items) {
        const Shares s(items, n, elem);
        const uint64_t mine = s.counts[size_t(rank)];
        char* const parts = staged ? gathered : e.scratch(mine * size_t(n), kSliceScratch);
        exchange_shares(e, s, in + first * elem, parts);
        if (!staged) reduce_parts(e, out + first * elem + s.displs[size_t(rank)], parts, mine / elem, dtype, op, n);
      },
      [=](Engine& e, uint64_t first, uint64_t items) {
        const Shares s(items, n, elem);
        char* const slice = out + first * elem;
        gather->run(e, {.send = slice + s.displs[size_t(rank)],
                        .recv = slice,
                        .counts = s.counts.data(),
                        .displs = s.displs.data()});
      });
}

}  // namespace

WorkPtr all_reduce(Communicator& c, const TensorView& send, const TensorView& recv, int op, const CallOptions& call) {
  check_same_dtype(send, "sendbuf", recv, "recvbuf");
  check_count(recv, "recvbuf", send.count, "all_reduce: recvbuf must have as many elements as sendbuf");
  check_overlap(send, "sendbuf", recv, "recvbuf", 0);
  const ReduceSpec spec = resolve_op(c, op, send.dtype);
  check_whole_items(send, "sendbuf", spec.op);
  const int n = c.size();
  if (auto w = launch_device(c, {&send, &recv}, call, [&] {
        return device_call(OpKind::kAllReduce, send.dtype, spec, -1, send.count, send.bytes_ptr(), recv.bytes_ptr());
      })) {
    return *w;
  }
  if (reduces_in_rank_order(c, spec.op, send.dtype, send.bytes()))
    return all_reduce_in_rank_order(c, send, recv, spec, call);
  Staging st({{&send, Use::kIn}, {&recv, Use::kOut}}, call);
  // The body captures scalars, not views (see TensorView).
  const char* const in = st.view(send).bytes_ptr();
  char* const buf = st.view(recv).bytes_ptr();
  const DType dtype = send.dtype;
  const size_t per_item = kernels::item_elems(spec.op);
  const size_t item_bytes = per_item * dtype_size(dtype);
  return launch_sliced(c, st, OpKind::kAllReduce, dtype, spec.op, -1, send.count / per_item, item_bytes, 1, call,
                       [=](Engine& e, const AlgoEntry& algo, uint64_t first, uint64_t items) {
                         const size_t at = first * item_bytes;
                         const size_t elems = items * per_item;
                         const char* src = premultiply(e, spec, in + at, elems, dtype);
                         algo.run(e, {.send = src, .recv = buf + at, .count = items});
                         if (spec.op == RedOp::kAvg) e.exec().scale_divide(buf + at, elems, dtype, n);
                         if (n == 1 && is_logical(spec.op)) truth_values(e, buf + at, elems, dtype);
                       });
}

}  // namespace omniccl::coll
