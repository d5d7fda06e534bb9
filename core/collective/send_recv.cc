// Point-to-point send and recv with MPI's matching (communicator/p2p_match.h):
// a message goes to the first posted receive whose source and tag match it
// (kAnySource / kAnyTag match any), in the order each rank sent them; a
// receive's count is an upper bound. A send to this rank itself is matched
// with a receive from itself, in either order. kProcNull as the peer makes
// the operation complete at once (a receive gets source kProcNull, tag
// kAnyTag, 0 bytes). Sends and receives issued one after another progress
// together (Communicator::submit_p2p).
//
// CUDA tensors: the CUDA IPC device path takes the operation when it
// applies (launch_device_p2p); otherwise the staged path (staging.h) does,
// ordered on the call's stream as NCCL's send and recv are. A send's tensor
// is copied to page-locked host memory on the stream and sent once the
// stream has reached that point; a receive lands in host memory and the
// stream, which waits (bounded) for it, copies it to the device. Each runs
// on the worker as a point-to-point step of its own
// (Communicator::run_p2p_step), so on one stream a receive queued before a
// send ends before that send starts, as on NCCL without a group: ranks that exchange large
// messages order their calls against each other's (one sends first, the
// other receives first), or move one direction to another communicator
// (its own worker) and stream. A staged receive must name its source and
// tag: with ANY_SOURCE or ANY_TAG the call would return before it is known
// which message it takes (and where the CUDA IPC path runs, a wildcard would
// miss what that path carries); and a message to this rank itself would
// pair two steps of the one worker. Those stay refused (kUnsupported). mrecv is staged
// too: the message a matched probe took is known, and already in host
// memory (mprobe and improbe themselves take no tensor). A message shorter
// than the receive fills its front; the rest keeps what the device held
// (keep_the_rest), as a CPU receive's does. A staged operation
// that fails (a truncated receive too) fails the communicator, as every
// staged operation does (staging.h): the stream's copy back has no partial
// result to keep.
#include <optional>
#include <utility>

#include "collective/common.h"
#include "common/gpu_runtime.h"

namespace omniccl::coll {

namespace {

/// A receive's count is an upper bound: after a message of `got` bytes, the
/// rest of the host copy `host` takes what the device tensor at `dev` holds
/// there, since the stream copies the host copy back whole. The stream has
/// passed the call's `ready` event, so the tensor is as the stream left it,
/// and it waits for the host while the runtime reads it (GpuRuntime::copy_now).
void keep_the_rest(const TensorView& host, const char* dev, uint64_t got) {
  const uint64_t bytes = host.bytes();
  if (got >= bytes) return;
  gpu_runtime()->copy_now(host.bytes_ptr() + got, dev + got, bytes - got);
}

/// The host side of a staged send or receive `op` of `t` (op.tensor its
/// host copy): one point-to-point step on the worker, after the stream's
/// copies; a receive's work gets what arrived.
WorkPtr launch_staged_p2p(Communicator& c, Staging& staging, const TensorView& t, const P2POp& op,
                          const CallOptions& call) {
  auto work = std::make_shared<Work>();
  Communicator* comm = &c;
  auto body = [comm, op, work, dev = t.bytes_ptr()](Engine& e) {
    e.use_cpu();  // the host copy
    const RecvStatus received = comm->run_p2p_step(e, op);
    if (op.is_send) return;
    keep_the_rest(op.tensor, dev, received.bytes);
    work->set_received(received);
  };
  return launch_staged(c, staging, call, body, work);
}

/// The staged path's send or recv (see above).
WorkPtr staged_p2p(Communicator& c, const TensorView& t, int peer, int tag, bool is_send, bool synchronous,
                   const CallOptions& call, RecvStatus* status) {
  const char* what = is_send ? (synchronous ? "ssend" : "send") : "recv";
  if (peer == c.rank()) {
    fail(Status::kUnsupported, what,
         " of a CUDA tensor to/from this rank itself: its send and its receive would "
         "each wait for the other on the communicator's one worker; use a tensor in host memory");
  }
  if (peer == kAnySource || tag == kAnyTag) {
    fail(Status::kUnsupported, what,
         " of a CUDA tensor from ANY_SOURCE or with ANY_TAG: a receive ordered on a "
         "stream returns before it is known which message it takes; name the peer and tag, or probe (mprobe) "
         "and receive the message found (mrecv), or use a tensor in host memory");
  }
  Staging staging({{&t, is_send ? Use::kIn : Use::kOut}}, call);
  P2POp op{is_send, peer, staging.view(t), call.timeout_ms, tag, nullptr};
  op.synchronous = synchronous;
  RecvStatus got;  // a blocking call returns before the message arrives: the named peer and tag, the whole tensor
  got.source = peer;
  got.tag = tag;
  got.bytes = t.bytes();
  got.elem_bytes = dtype_size(t.dtype);
  if (!is_send && status != nullptr) *status = got;
  return launch_staged_p2p(c, staging, t, op, call);
}

/// mrecv of a CUDA tensor: the held message (in host memory already) is
/// delivered into the host copy on the worker, and the stream copies it in.
WorkPtr staged_mrecv(Communicator& c, uint64_t& message, const TensorView& t, const CallOptions& call,
                     RecvStatus* status) {
  Staging staging({{&t, Use::kOut}}, call);  // its checks leave the message held
  const uint64_t m = std::exchange(message, kMessageNull);
  std::optional<RecvStatus> got = c.take_claimed(m);
  check_arg(got.has_value(), "mrecv: message #", m,
            " is not held by this communicator (already received, or from a matched probe on another communicator)");
  got->message = kMessageNull;
  got->elem_bytes = dtype_size(t.dtype);  // a count in the receive's elements, as a CPU mrecv's
  if (!call.async && status != nullptr) *status = *got;
  P2POp op{false, c.rank(), staging.view(t), call.timeout_ms, 0, nullptr};
  op.mrecv = m;
  return launch_staged_p2p(c, staging, t, op, call);
}

WorkPtr p2p(Communicator& c, const TensorView& t, int peer, int tag, bool is_send, const CallOptions& call,
            RecvStatus* status, bool synchronous = false) {
  check_p2p_args(c, peer, tag, is_send);
  if (t.device == DeviceKind::kCUDA && t.count > 0 && peer != kProcNull) {
    if (auto w = launch_device_p2p(c, t, peer, tag, is_send, synchronous, call, status)) return *w;
    return staged_p2p(c, t, peer, tag, is_send, synchronous, call, status);
  }
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
WorkPtr mrecv(Communicator& c, uint64_t& message, const TensorView& t, const CallOptions& call, RecvStatus* status) {
  check_arg(message != kMessageNull, "mrecv: the message is MESSAGE_NULL (already received, or no matched probe)");
  if (t.device == DeviceKind::kCUDA && t.count > 0 && message != kMessageNoProc) {
    return staged_mrecv(c, message, t, call, status);
  }
  const uint64_t m = std::exchange(message, kMessageNull);  // taken, whatever the outcome (as MPI_Mrecv)
  return c.mrecv(m, t, call, status);
}

}  // namespace omniccl::coll
