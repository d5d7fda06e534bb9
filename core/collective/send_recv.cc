// Point-to-point send and recv. Messages between two ranks are matched in
// order; each carries its per-pair number, dtype and size, so a recv that
// does not fit its send is reported as a mismatch. Sends and receives issued
// one after another progress together (Communicator::submit_p2p).
#include "collective/common.h"

namespace omniccl::coll {

namespace {

WorkPtr p2p(Communicator& c, const TensorView& t, int peer, bool is_send, const CallOptions& call) {
  check_arg(peer >= 0 && peer < c.size(), is_send ? "send" : "recv", ": peer ", peer,
            " is out of range for a communicator of ", c.size(), " ranks");
  check_arg(peer != c.rank(), is_send ? "send" : "recv", ": peer ", peer, " is this rank itself");
  return c.submit_p2p(P2POp{is_send, peer, t, call.timeout_ms}, call);
}

}  // namespace

WorkPtr send(Communicator& c, const TensorView& t, int peer, const CallOptions& call) { return p2p(c, t, peer, true, call); }
WorkPtr recv(Communicator& c, const TensorView& t, int peer, const CallOptions& call) { return p2p(c, t, peer, false, call); }

}  // namespace omniccl::coll
