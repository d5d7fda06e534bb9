#include "collective/common.h"

namespace omniccl::coll {

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
  Staging st({{&send, Use::kIn}, {&recv, Use::kOut}}, call);
  // The body captures scalars, not views (see TensorView).
  const char* const in = st.view(send).bytes_ptr();
  char* const out = st.view(recv).bytes_ptr();
  const size_t send_count = send.count, count = recv.count;
  const DType dtype = send.dtype;
  // Each rank's block is whole pairs for MAXLOC / MINLOC (checked above).
  const size_t items = count / kernels::item_elems(spec.op);
  return launch(c, st, OpKind::kReduceScatter, dtype, spec.op, -1, items, send.bytes(), call,
                [=](Engine& e, const AlgoEntry& algo) {
                  const char* src = premultiply(e, spec, in, send_count, dtype);
                  algo.run(e, {.send = src, .recv = out, .count = items});
                  if (spec.op == RedOp::kAvg) e.exec().scale_divide(out, count, dtype, n);
                  if (n == 1 && is_logical(spec.op)) truth_values(e, out, count, dtype);
                });
}

}  // namespace omniccl::coll
