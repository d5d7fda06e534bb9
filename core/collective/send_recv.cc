// Point-to-point send and recv with MPI's matching (communicator/p2p_match.h):
// a message goes to the first posted receive whose source and tag match it
// (kAnySource / kAnyTag match any), in the order each rank sent them; a
// receive's count is an upper bound. A send to this rank itself is matched
// with a receive from itself, in either order. kProcNull as the peer makes
// the operation complete at once (a receive gets source kProcNull, tag
// kAnyTag, 0 bytes). Sends and receives issued one after another progress
// together (Communicator::submit_p2p).
#include "collective/common.h"

namespace omniccl::coll {

namespace {

WorkPtr p2p(Communicator& c, const TensorView& t, int peer, int tag, bool is_send, const CallOptions& call,
            RecvStatus* status, bool synchronous = false) {
  check_p2p_args(c, peer, tag, is_send);
  if (t.device == DeviceKind::kCUDA && t.count > 0) {
    if (auto w = launch_device_p2p(c, t, peer, tag, is_send, synchronous, call, status)) return *w;
  }
  check_p2p_device(t, is_send ? "send" : "recv");
  if (peer == kProcNull) {
    RecvStatus none;  // source PROC_NULL, ANY_TAG, 0 bytes
    if (status != nullptr) *status = none;
    if (!call.async) return nullptr;
    auto work = std::make_shared<Work>();
    work->complete(Status::kSuccess, "", none);
    return work;
  }
  P2POp op{is_send, peer, t, call.timeout_ms, tag, call.async ? nullptr : status};
  op.synchronous = synchronous;
  return c.submit_p2p(op, call);
}

}  // namespace

void check_p2p_device(const TensorView& t, const char* what) {
  if (t.device != DeviceKind::kCPU && t.count > 0) {
    fail(Status::kUnsupported, what, ": point-to-point operations on CUDA tensors run only on the CUDA IPC path ",
         "(ranks of one host whose GPUs reach each other, a named peer other than this rank, a tag >= 0, the ",
         "tensor on the current device); copy the tensor to host memory otherwise");
  }
}

void check_p2p_args(const Communicator& c, int peer, int tag, bool is_send) {
  const char* what = is_send ? "send" : "recv";
  const bool any_ok = !is_send && peer == kAnySource;
  check_arg(peer == kProcNull || any_ok || (peer >= 0 && peer < c.size()), what, ": peer ", peer,
            " is out of range for a communicator of ", c.size(), " ranks",
            is_send ? " (or PROC_NULL)" : " (or ANY_SOURCE, PROC_NULL)");
  check_arg(tag >= 0 || (!is_send && tag == kAnyTag), what, ": tag ", tag, " is negative",
            is_send ? "; a send's tag is >= 0" : "; a receive's tag is >= 0 or ANY_TAG");
}

WorkPtr send(Communicator& c, const TensorView& t, int peer, const CallOptions& call) {
  return p2p(c, t, peer, 0, true, call, nullptr);
}
WorkPtr recv(Communicator& c, const TensorView& t, int peer, const CallOptions& call) {
  return p2p(c, t, peer, 0, false, call, nullptr);
}
WorkPtr send_tagged(Communicator& c, const TensorView& t, int peer, int tag, const CallOptions& call) {
  return p2p(c, t, peer, tag, true, call, nullptr);
}
WorkPtr ssend_tagged(Communicator& c, const TensorView& t, int peer, int tag, const CallOptions& call) {
  return p2p(c, t, peer, tag, true, call, nullptr, true);
}
WorkPtr recv_tagged(Communicator& c, const TensorView& t, int source, int tag, const CallOptions& call,
                    RecvStatus* status) {
  return p2p(c, t, source, tag, false, call, status);
}

}  // namespace omniccl::coll
