// The device path of an operation on CUDA tensors (algorithm/device/): taken
// when the communicator has a device engine that runs it on the tensors'
// device, which is the calling thread's current device. Everything else on
// CUDA tensors is staged (staging.h), which also reports what is wrong with
// tensors the device path does not take.
#include "collective/common.h"
#include "common/gpu_runtime.h"

namespace omniccl::coll {

algo::DeviceCall device_call(OpKind kind, DType dtype, const ReduceSpec& spec, int root, uint64_t count,
                             const char* send, char* recv) {
  algo::DeviceCall d;
  d.kind = kind;
  d.dtype = dtype;
  d.op = combine_op(spec.op);
  d.average = spec.op == RedOp::kAvg;
  d.premul = spec.op == RedOp::kPreMulSum ? spec.premul_scalar : 0.0;
  d.root = root;
  d.count = count;
  d.send = send;
  d.recv = recv;
  return d;
}

std::optional<WorkPtr> launch_device_call(Communicator& c, algo::DeviceCall d,
                                          std::initializer_list<const TensorView*> used, const CallOptions& call) {
  algo::DeviceEngine* engine = c.device_engine();
  if (engine == nullptr) return std::nullopt;
  // A single rank's logical reduction combines nothing, so its input must be
  // made 0/1 by hand: the staged path does that (truth_values). The device
  // kernels reduce neither complex numbers nor MAXLOC / MINLOC pairs: such
  // calls on CUDA tensors are staged through host memory too.
  if (c.size() == 1 && is_logical(d.op)) return std::nullopt;
  if (kernels::is_complex(d.dtype) || kernels::is_loc(d.op)) return std::nullopt;
  int device = -1;
  for (const TensorView* t : used) {
    if (t == nullptr || t->count == 0) continue;
    if (t->device != DeviceKind::kCUDA || (device >= 0 && t->device_id != device)) return std::nullopt;
    device = t->device_id;
  }
  if (device < 0 || !engine->accepts(d.kind, device)) return std::nullopt;
  GpuRuntime* rt = gpu_runtime();
  if (rt == nullptr || rt->current_device() != device) return std::nullopt;
  c.check_usable();
  d.stream = call.stream;
  d.timeout_ms = call.timeout_ms > 0 ? call.timeout_ms : c.timeout_ms();
  WorkPtr work;
  algo::DeviceDone done;
  if (call.async) {
    work = std::make_shared<Work>();
    done = [work](Status st, const std::string& message) { work->complete(st, message); };
  }
  engine->enqueue(d, std::move(done));
  return work;
}

std::optional<WorkPtr> launch_device_p2p(Communicator& c, const TensorView& t, int peer, int tag, bool is_send,
                                         bool synchronous, const CallOptions& call, RecvStatus* status) {
  algo::DeviceEngine* engine = c.device_engine();
  if (engine == nullptr || t.device != DeviceKind::kCUDA || peer < 0 || peer >= c.size() || peer == c.rank() ||
      tag < 0 || t.device_id != engine->device()) {
    return std::nullopt;
  }
  GpuRuntime* rt = gpu_runtime();
  if (rt == nullptr || rt->current_device() != t.device_id) return std::nullopt;
  c.check_usable();
  algo::DeviceP2P d{is_send,   synchronous,   peer,        tag,
                    t.bytes(), t.bytes_ptr(), call.stream, call.timeout_ms > 0 ? call.timeout_ms : c.timeout_ms()};
  RecvStatus got;
  got.source = peer;
  got.tag = tag;
  got.bytes = t.bytes();
  got.elem_bytes = dtype_size(t.dtype);
  if (!is_send && status != nullptr) *status = got;
  WorkPtr work;
  algo::DeviceDone done;
  if (call.async) {
    work = std::make_shared<Work>();
    done = [work, got](Status st, const std::string& message) { work->complete(st, message, got); };
  }
  engine->enqueue_p2p(d, std::move(done));
  return work;
}

}  // namespace omniccl::coll
