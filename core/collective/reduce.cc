#include "collective/common.h"

namespace omniccl::coll {

namespace {

/// reduce on communicators that reduce in rank order
/// (reduces_in_rank_order), a slice at a time, as all_reduce there: each
/// rank gathers its share of the slice from every rank and reduces the parts
/// in rank order where the tensors are (on the GPU by the stream for CUDA
/// tensors); the root then gathers the reduced shares (gatherv). A staged
/// non-root's share lands in its input's host copy, whose slice it has sent
/// by then; a host non-root's in scratch.
WorkPtr reduce_in_rank_order(Communicator& c, const TensorView& send, const OptTensor& recv, const ReduceSpec& spec,
                             int root, const CallOptions& call) {
  const int n = c.size(), rank = c.rank();
  const bool is_root = rank == root;
  const size_t elem = dtype_size(send.dtype);
  const DeviceReduction reduction{is_root ? &*recv : &send, spec.op, n, c.slicing().slice_bytes, rank};
  Staging st({{&send, Use::kIn}, {opt(recv), out_use(c, root)}}, call, &reduction);
  const bool staged = st.staged();
  // The body captures scalars, not views (see TensorView).
  char* const in = st.view(send).bytes_ptr();
  char* const out = is_root ? st.view(*recv).bytes_ptr() : nullptr;
  char* const gathered = st.gathered();
  const DType dtype = send.dtype;
  const RedOp op = spec.op;
  // Where this rank's reduced share of the slice from `first` is.
  auto share_at = [=](Engine& e, uint64_t first, const Shares& s) {
    const size_t at = first * elem + s.displs[size_t(rank)];
    if (is_root) return out + at;
    return staged ? in + at : e.scratch(s.counts[size_t(rank)], kSliceScratch + 1);
  };
  return launch_in_two_phases(
      c, st, OpKind::kReduce, dtype, op, root, send.count, elem, call,
      [=](Engine& e, uint64_t first, uint64_t items) {
        const Shares s(items, n, elem);
        const uint64_t mine = s.counts[size_t(rank)];
        char* const parts = staged ? gathered : e.scratch(mine * size_t(n), kSliceScratch);
        exchange_shares(e, s, in + first * elem, parts);
        if (!staged) reduce_parts(e, share_at(e, first, s), parts, mine / elem, dtype, op, n);
      },
      [=](Engine& e, uint64_t first, uint64_t items) {
        const Shares s(items, n, elem);
        find_algorithm(OpKind::kGatherV, Algo::kDirect)
            .run(e, {.send = share_at(e, first, s),
                     .recv = is_root ? out + first * elem : nullptr,
                     .bytes = s.counts[size_t(rank)],
                     .root = root,
                     .counts = s.counts.data(),
                     .displs = s.displs.data()});
      });
}

}  // namespace

WorkPtr reduce(Communicator& c, const TensorView& send, const OptTensor& recv, int op, int root,
               const CallOptions& call) {
  check_root(c, root);
  const bool is_root = c.rank() == root;
  char* out = nullptr;
  if (is_root) {
    check_arg(recv.has_value(), "recvbuf is NULL on the root rank ", root, " of reduce");
    check_same_dtype(send, "sendbuf", *recv, "recvbuf");
    check_count(*recv, "recvbuf", send.count, "reduce: recvbuf must have as many elements as sendbuf");
    check_overlap(send, "sendbuf", *recv, "recvbuf", 0);
  }
  const ReduceSpec spec = resolve_op(c, op, send.dtype);
  check_whole_items(send, "sendbuf", spec.op);
  const int n = c.size();
  if (auto w = launch_device(c, {&send, is_root ? &*recv : nullptr}, call, [&] {
        return device_call(OpKind::kReduce, send.dtype, spec, root, send.count, send.bytes_ptr(),
                           is_root ? recv->bytes_ptr() : nullptr);
      })) {
    return *w;
  }
  if (reduces_in_rank_order(c, spec.op, send.dtype, send.bytes())) {
    return reduce_in_rank_order(c, send, recv, spec, root, call);
  }
  Staging st({{&send, Use::kIn}, {opt(recv), out_use(c, root)}}, call);
  // The body captures scalars, not views (see TensorView).
  const char* const in = st.view(send).bytes_ptr();
  if (is_root) out = st.view(*recv).bytes_ptr();
  const DType dtype = send.dtype;
  const size_t per_item = kernels::item_elems(spec.op);
  const size_t item_bytes = per_item * dtype_size(dtype);
  return launch_sliced(c, st, OpKind::kReduce, dtype, spec.op, root, send.count / per_item, item_bytes, 1, call,
                       [=](Engine& e, const AlgoEntry& algo, uint64_t first, uint64_t items) {
                         const size_t elems = items * per_item;
                         const char* src = premultiply(e, spec, in + first * item_bytes, elems, dtype);
                         char* dst = is_root ? out + first * item_bytes : nullptr;
                         algo.run(e, {.send = src, .recv = dst, .count = items, .root = root});
                         if (is_root && spec.op == RedOp::kAvg) e.exec().scale_divide(dst, elems, dtype, n);
                         if (is_root && n == 1 && is_logical(spec.op)) truth_values(e, dst, elems, dtype);
                       });
}

}  // namespace omniccl::coll
