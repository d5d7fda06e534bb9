// Point-to-point send and recv. Messages between two ranks are matched in
// order; each carries its per-pair number, dtype and size, so a recv that
// does not fit its send is reported as a mismatch.
#include "collective/common.h"

namespace omniccl::coll {

namespace {

WorkPtr p2p(Communicator& c, const TensorView& t, int peer, bool is_send, bool async) {
  check_arg(peer >= 0 && peer < c.size(), is_send ? "send" : "recv", ": peer ", peer,
            " is out of range for a communicator of ", c.size(), " ranks");
  check_arg(peer != c.rank(), is_send ? "send" : "recv", ": peer ", peer, " is this rank itself");
  Communicator* comm = &c;
  return c.submit(
      [=](Engine& e) {
        OpSignature sig;
        sig.kind = OpKind::kSendRecv;
        sig.dtype = t.dtype;
        sig.count = t.count;
        sig.seq = is_send ? comm->next_send_seq(peer) : comm->next_recv_seq(peer);
        e.begin(sig, RedOp::kSum, comm->op_deadline());
        if (is_send) {
          e.run({Transfer::send(peer, t.bytes_ptr(), t.bytes(), 0)});
        } else {
          e.run({Transfer::recv(peer, t.bytes_ptr(), t.bytes(), 0)});
        }
      },
      async);
}

}  // namespace

WorkPtr send(Communicator& c, const TensorView& t, int peer, bool async) { return p2p(c, t, peer, true, async); }
WorkPtr recv(Communicator& c, const TensorView& t, int peer, bool async) { return p2p(c, t, peer, false, async); }

}  // namespace omniccl::coll
