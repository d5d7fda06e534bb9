// Operations on registered buffers (DeviceEngine::add_region): the peers'
// buffers are read in place. See device_engine.h for the protocol.
#include <algorithm>
#include <chrono>
#include <thread>

#include "algorithm/device/device_engine.h"
#include "algorithm/device/device_run.h"
#include "common/hash.h"

namespace omniccl::algo {

uint32_t DeviceEngine::add_region(DeviceRegion r) {
  std::lock_guard lock(mu_);
  r.id = ++region_ids_;
  regions_.push_back(std::move(r));
  return region_ids_;
}

DeviceRegion DeviceEngine::remove_region(uint32_t id, int64_t timeout_ms) {
  std::unique_lock lock(mu_);
  auto it = std::find_if(regions_.begin(), regions_.end(), [&](const DeviceRegion& r) { return r.id == id; });
  check_arg(it != regions_.end(), "no registered buffer has handle ", id, " on this communicator");
  // No new operation finds it from here on; those enqueued may read it.
  DeviceRegion out = std::move(*it);
  regions_.erase(it);
  // Failed operations' streams run on past their released waits (draining_)
  // and may still read it too.
  auto idle = [&] {
    return pending_.empty() &&
           std::all_of(draining_.begin(), draining_.end(), [&](GpuRuntime::Event e) { return rt_.event_done(e); });
  };
  const auto give_up = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
  while (!idle()) {
    if (std::chrono::steady_clock::now() >= give_up) {
      fail(Status::kTimeout, "deregistering a buffer: operations on CUDA tensors still running after ", timeout_ms,
           " ms");
    }
    lock.unlock();
    std::this_thread::sleep_for(std::chrono::microseconds(200));
    lock.lock();
  }
  return out;
}

size_t DeviceEngine::regions() const {
  std::lock_guard lock(mu_);
  return regions_.size();
}

const DeviceRegion* DeviceEngine::region_of(const void* p, uint64_t bytes) const {
  const auto* at = static_cast<const char*>(p);
  for (const DeviceRegion& r : regions_) {
    if (at >= r.base && at + bytes <= r.base + r.bytes) return &r;
  }
  return nullptr;
}

// Which buffer must be registered (on every rank) for an operation to read
// in place: the input, and for all_reduce the output too. PREMUL_SUM stays
// on the scratch path (its inputs are scaled on the way into it).
DeviceEngine::Direct DeviceEngine::direct_for(const DeviceCall& c) const {
  Direct d;
  const uint64_t block = c.count * dtype_size(c.dtype);
  uint64_t send_bytes = block;
  switch (c.kind) {
    case OpKind::kAllReduce:
    case OpKind::kAllGather:
    case OpKind::kBroadcast: break;
    case OpKind::kReduceScatter: send_bytes = block * uint64_t(size_); break;
    default: return d;
  }
  if (regions_.empty() || block == 0 || c.premul != 0) return d;
  const DeviceRegion* s = region_of(c.send, send_bytes);
  const DeviceRegion* r = c.kind == OpKind::kAllReduce ? region_of(c.recv, block) : s;
  if (s == nullptr || r == nullptr) return d;
  const uint64_t send_off = uint64_t(c.send - s->base), recv_off = uint64_t(c.recv - r->base);
  for (int q = 0; q < size_; ++q) {
    d.send.push_back(s->at[size_t(q)] + send_off);
    d.recv.push_back(r->at[size_t(q)] + recv_off);
  }
  d.on = true;
  d.tag = Fnv1a().word(s->id).word(send_off).word(r->id).word(c.kind == OpKind::kAllReduce ? recv_off : 0).value();
  return d;
}

void DeviceEngine::Run::direct() {
  switch (c_.kind) {
    case OpKind::kAllReduce:
      if (c_.count * elem_ < kTwoShotMin || c_.count < uint64_t(n_)) return direct_all_reduce_one_shot();
      return direct_all_reduce_two_shot();
    case OpKind::kAllGather: return direct_all_gather();
    case OpKind::kBroadcast: return direct_broadcast();
    case OpKind::kReduceScatter: return direct_reduce_scatter();
    default: fail(Status::kInternal, "no protocol on registered buffers for ", op_kind_name(c_.kind));
  }
}

// Rank 0 reduces every rank's input into its output; the others copy it.
void DeviceEngine::Run::direct_all_reduce_one_shot() {
  const uint64_t s = ++e_.step_;
  if (me_ != 0) {
    post(0, s);
    wait_posted(0, s);  // rank 0's result is ready (and it read this input)
    copy(c_.recv, d_.recv[0], c_.count);
    ack(0, s);
    return;
  }
  peers([&](int p) { wait_posted(p, s); });
  reduce_in_place(
      c_.recv, [&](int p) { return d_.send[size_t(p)]; }, c_.count);
  peers([&](int p) { post(p, s); });
  peers([&](int p) { wait_acked(p, s); });
}

// Rank r reduces slice r of every rank's input into slice r of its output,
// then copies the other slices from their owners' outputs. A rank writes
// slice p of its own output (in place: of its input) only once p has posted
// that its reduction, which read that slice, is done.
void DeviceEngine::Run::direct_all_reduce_two_shot() {
  const uint64_t per = (c_.count + uint64_t(n_) - 1) / uint64_t(n_);
  auto lo = [&](int r) { return std::min(c_.count, per * uint64_t(r)); };
  auto len = [&](int r) { return size_t(lo(r + 1) - lo(r)); };
  const uint64_t inputs = ++e_.step_, slices = ++e_.step_;
  peers([&](int p) { post(p, inputs); });
  peers([&](int p) { wait_posted(p, inputs); });
  reduce_in_place(
      at(c_.recv, lo(me_)), [&](int p) { return at(d_.send[size_t(p)], lo(me_)); }, len(me_));
  peers([&](int p) { post(p, slices); });
  peers([&](int p) {
    wait_posted(p, slices);
    copy(at(c_.recv, lo(p)), at(d_.recv[size_t(p)], lo(p)), len(p));
    ack(p, slices);
  });
  peers([&](int p) { wait_acked(p, slices); });
}

void DeviceEngine::Run::direct_all_gather() {
  const uint64_t s = ++e_.step_;
  peers([&](int p) { post(p, s); });
  copy(at(c_.recv, uint64_t(me_) * c_.count), c_.send, c_.count);
  peers([&](int p) {
    wait_posted(p, s);
    copy(at(c_.recv, uint64_t(p) * c_.count), d_.send[size_t(p)], c_.count);
    ack(p, s);
  });
  peers([&](int p) { wait_acked(p, s); });
}

void DeviceEngine::Run::direct_broadcast() {
  const int root = c_.root;
  const uint64_t s = ++e_.step_;
  if (me_ == root) {
    peers([&](int p) { post(p, s); });
    copy(c_.recv, c_.send, c_.count);
    peers([&](int p) { wait_acked(p, s); });
    return;
  }
  wait_posted(root, s);
  copy(c_.recv, d_.send[size_t(root)], c_.count);
  ack(root, s);
}

// Each rank reduces its own block of every rank's input, in rank order.
void DeviceEngine::Run::direct_reduce_scatter() {
  const uint64_t s = ++e_.step_;
  const uint64_t mine = uint64_t(me_) * c_.count;
  peers([&](int p) { post(p, s); });
  peers([&](int p) { wait_posted(p, s); });
  reduce_in_place(
      c_.recv, [&](int p) { return at(d_.send[size_t(p)], mine); }, c_.count);
  peers([&](int p) { ack(p, s); });
  peers([&](int p) { wait_acked(p, s); });
}

}  // namespace omniccl::algo
