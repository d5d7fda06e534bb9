// The enqueueing of one operation on CUDA tensors (DeviceEngine::Run):
// shared by the protocols through the scratch buffers (device_engine.cc) and
// those on registered buffers (device_direct.cc). Internal to the engine.
#pragma once

#include <algorithm>

#include "algorithm/device/device_engine.h"
#include "tensor/tensor.h"

namespace omniccl::algo {

// One operation's enqueueing: the protocol of device_engine.h, piece by piece.
class DeviceEngine::Run {
 public:
  Run(DeviceEngine& e, const DeviceCall& c, const Direct& d)
      : e_(e), c_(c), d_(d), rt_(e.rt_), w_(e.window_), me_(e.rank_), n_(e.size_), elem_(dtype_size(c.dtype)) {}

  void run() {
    if (d_.on) return direct();
    switch (c_.kind) {
      case OpKind::kAllReduce: return all_reduce();
      case OpKind::kBroadcast: return broadcast();
      case OpKind::kReduce: return reduce();
      case OpKind::kAllGather: return all_gather();
      case OpKind::kReduceScatter: return reduce_scatter();
      case OpKind::kGather: return gather();
      case OpKind::kScatter: return scatter();
      case OpKind::kAllToAll: return all_to_all();
      case OpKind::kAllGatherV:
      case OpKind::kAllToAllV:
      case OpKind::kGatherV:
      case OpKind::kScatterV: return e_.exchange(c_);
      default: fail(Status::kInternal, "no device protocol for ", op_kind_name(c_.kind));
    }
  }

 private:
  // --- flags (device_engine.h) ---
  void post(int to, uint64_t s) { rt_.stream_write_value(c_.stream, w_.flags(to) + e_.posted_word(me_), s); }
  void ack(int to, uint64_t s) { rt_.stream_write_value(c_.stream, w_.flags(to) + e_.acked_word(me_), s); }
  void wait_posted(int from, uint64_t s) { rt_.stream_wait_value(c_.stream, w_.flags(me_) + e_.posted_word(from), s); }
  void wait_acked(int from, uint64_t s) { rt_.stream_wait_value(c_.stream, w_.flags(me_) + e_.acked_word(from), s); }
  template <class Fn>
  void peers(Fn fn) {
    for (int p = 0; p < n_; ++p) {
      if (p != me_) fn(p);
    }
  }
  /// body(offset, elements, step) for each piece of c_.count elements, the
  /// step numbered as every rank numbers it.
  template <class Fn>
  void each_piece(size_t step, Fn body) {
    for (uint64_t off = 0; off < c_.count; off += step)
      body(off, size_t(std::min<uint64_t>(step, c_.count - off)), ++e_.step_);
  }

  // --- data ---
  /// Elements per piece when the scratch buffer holds `parts` of them.
  size_t piece(int parts) const { return std::max<size_t>(1, e_.coll_bytes() / (elem_ * size_t(parts))); }
  char* at(const char* base, uint64_t elems) const { return const_cast<char*>(base) + elems * elem_; }
  void copy(char* dst, const char* src, size_t k) {
    if (k > 0 && dst != src) rt_.copy_async(dst, src, k * elem_, c_.stream);
  }
  /// dst = an input piece, pre-multiplied for PREMUL_SUM.
  void load(char* dst, const char* src, size_t k) {
    if (c_.premul != 0) {
      rt_.scale_multiply_async(dst, src, k, c_.dtype, c_.premul, c_.stream);
    } else {
      copy(dst, src, k);
    }
  }
  /// out = in(0) op in(1) op ... op in(n-1), in rank order (the same
  /// result whichever rank computes it), then / n for AVG.
  template <class In>
  void reduce_chain(char* out, In in, size_t k) {
    const char* acc = in(0);
    for (int p = 1; p < n_; ++p) {
      rt_.reduce_async(out, acc, in(p), k, c_.dtype, c_.op, c_.stream);
      acc = out;
    }
    if (c_.average) rt_.scale_divide_async(out, k, c_.dtype, n_, c_.stream);
  }

  /// out = the reduction of in(p), as reduce_chain, where this rank's own
  /// input may be `out` itself (in place): it is then read through the
  /// scratch buffer, piece by piece, before the chain writes over it.
  template <class In>
  void reduce_in_place(char* out, In in, size_t k) {
    const char* own = in(me_);
    const bool apart = own + k * elem_ <= out || out + k * elem_ <= own;
    if (apart || (me_ == 0 && own == out)) return reduce_chain(out, in, k);
    const size_t step = piece(1);
    for (size_t off = 0; off < k; off += step) {
      const size_t m = std::min(step, k - off);
      copy(w_.scratch(me_), at(own, off), m);
      reduce_chain(
          at(out, off), [&](int p) { return p == me_ ? w_.scratch(me_) : at(in(p), off); }, m);
    }
  }

  // Registered buffers (device_direct.cc).
  void direct();
  void direct_all_reduce_one_shot();
  void direct_all_reduce_two_shot();
  void direct_all_gather();
  void direct_broadcast();
  void direct_reduce_scatter();

  void all_reduce();
  void broadcast();
  void reduce();
  void all_gather();
  void reduce_scatter();
  void gather();
  void scatter();
  void all_to_all();

  DeviceEngine& e_;
  const DeviceCall& c_;
  const Direct& d_;
  GpuRuntime& rt_;
  transport::DeviceWindow& w_;
  int me_;
  int n_;
  size_t elem_;
};

}  // namespace omniccl::algo
