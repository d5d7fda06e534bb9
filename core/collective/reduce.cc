#include "collective/common.h"

namespace omniccl::coll {

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
