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
  const size_t count = send.count;
  const DType dtype = send.dtype;
  const size_t items = count / kernels::item_elems(spec.op);
  return launch(c, st, OpKind::kReduce, dtype, spec.op, root, items, send.bytes(), call,
                [=](Engine& e, const AlgoEntry& algo) {
                  const char* src = premultiply(e, spec, in, count, dtype);
                  algo.run(e, {.send = src, .recv = out, .count = items, .root = root});
                  if (is_root && spec.op == RedOp::kAvg) e.exec().scale_divide(out, count, dtype, n);
                  if (is_root && n == 1 && is_logical(spec.op)) truth_values(e, out, count, dtype);
                });
}

}  // namespace omniccl::coll
