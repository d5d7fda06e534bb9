#include "algorithm/device/device_engine.h"

#include "algorithm/device/device_run.h"

#include <algorithm>
#include <bit>

#include "common/hash.h"
#include "common/log.h"
#include "tensor/tensor.h"

namespace omniccl::algo {

namespace {

using Clock = std::chrono::steady_clock;

/// What every rank must agree on, hashed into the 24 bits below the call's
/// sequence number in a signature word.
uint32_t signature(const DeviceCall& c, uint64_t direct_tag) {
  return Fnv1a()
      .word(uint64_t(c.kind))
      .word(uint64_t(c.dtype))
      .word(uint64_t(c.op))
      .word(uint64_t(c.average))
      .word(std::bit_cast<uint64_t>(c.premul))
      .word(uint64_t(int64_t(c.root)))
      .word(c.count)
      .word(direct_tag)
      .low24();
}

std::string describe(const DeviceCall& c, uint64_t seq, bool direct) {
  return str_cat(op_kind_name(c.kind), " #", seq, " (", c.count, " x ", dtype_name(c.dtype),
                 c.root >= 0 ? str_cat(", root ", c.root) : std::string(), ") on CUDA tensors",
                 direct ? " in registered buffers" : "");
}

}  // namespace

// Rank 0 reduces every rank's piece into its scratch; the others copy it.
void DeviceEngine::Run::all_reduce() {
  const size_t step = piece(1);
  each_piece(step, [&](uint64_t off, size_t k, uint64_t s) {
    if (me_ != 0) {
      load(w_.scratch(me_), at(c_.send, off), k);
      post(0, s);
      wait_posted(0, s);
      copy(at(c_.recv, off), w_.scratch(0), k);
      ack(0, s);
      return;
    }
    char* out = w_.scratch(0);
    const char* own = at(c_.send, off);
    if (c_.premul != 0) {
      load(out, own, k);
      own = out;
    }
    peers([&](int p) { wait_posted(p, s); });
    reduce_chain(
        out, [&](int p) { return p == 0 ? own : w_.scratch(p); }, k);
    peers([&](int p) { post(p, s); });
    copy(at(c_.recv, off), out, k);
    peers([&](int p) { wait_acked(p, s); });
  });
}

void DeviceEngine::Run::broadcast() {
  const int root = c_.root;
  const size_t step = piece(1);
  each_piece(step, [&](uint64_t off, size_t k, uint64_t s) {
    if (me_ == root) {
      copy(w_.scratch(root), at(c_.send, off), k);
      peers([&](int p) { post(p, s); });
      copy(at(c_.recv, off), at(c_.send, off), k);
      peers([&](int p) { wait_acked(p, s); });
    } else {
      wait_posted(root, s);
      copy(at(c_.recv, off), w_.scratch(root), k);
      ack(root, s);
    }
  });
}

// The root reduces every rank's piece (its own through its scratch, so that
// an in-place reduce reads it before the chain writes over it).
void DeviceEngine::Run::reduce() {
  const int root = c_.root;
  const size_t step = piece(1);
  each_piece(step, [&](uint64_t off, size_t k, uint64_t s) {
    load(w_.scratch(me_), at(c_.send, off), k);
    if (me_ != root) {
      post(root, s);
      wait_posted(root, s);  // the root has read the piece
      return;
    }
    peers([&](int p) { wait_posted(p, s); });
    reduce_chain(
        at(c_.recv, off), [&](int p) { return w_.scratch(p); }, k);
    peers([&](int p) { post(p, s); });
  });
}

void DeviceEngine::Run::all_gather() {
  const size_t step = piece(1);
  each_piece(step, [&](uint64_t off, size_t k, uint64_t s) {
    copy(w_.scratch(me_), at(c_.send, off), k);
    peers([&](int p) { post(p, s); });
    copy(at(c_.recv, uint64_t(me_) * c_.count + off), at(c_.send, off), k);
    peers([&](int p) {
      wait_posted(p, s);
      copy(at(c_.recv, uint64_t(p) * c_.count + off), w_.scratch(p), k);
      ack(p, s);
    });
    peers([&](int p) { wait_acked(p, s); });
  });
}

// Every rank puts its pieces for every rank in its scratch; each reduces
// its own block from all of them, in rank order.
void DeviceEngine::Run::reduce_scatter() {
  const size_t step = piece(n_);
  each_piece(step, [&](uint64_t off, size_t k, uint64_t s) {
    for (int q = 0; q < n_; ++q) load(at(w_.scratch(me_), uint64_t(q) * step), at(c_.send, q * c_.count + off), k);
    peers([&](int p) { post(p, s); });
    peers([&](int p) { wait_posted(p, s); });
    reduce_chain(
        at(c_.recv, off), [&](int p) { return at(w_.scratch(p), uint64_t(me_) * step); }, k);
    peers([&](int p) { ack(p, s); });
    peers([&](int p) { wait_acked(p, s); });
  });
}

void DeviceEngine::Run::gather() {
  const int root = c_.root;
  const size_t step = piece(1);
  each_piece(step, [&](uint64_t off, size_t k, uint64_t s) {
    if (me_ != root) {
      copy(w_.scratch(me_), at(c_.send, off), k);
      post(root, s);
      wait_acked(root, s);
      return;
    }
    copy(at(c_.recv, uint64_t(root) * c_.count + off), at(c_.send, off), k);
    peers([&](int p) {
      wait_posted(p, s);
      copy(at(c_.recv, uint64_t(p) * c_.count + off), w_.scratch(p), k);
      ack(p, s);
    });
  });
}

void DeviceEngine::Run::scatter() {
  const int root = c_.root;
  const size_t step = piece(n_);
  each_piece(step, [&](uint64_t off, size_t k, uint64_t s) {
    if (me_ != root) {
      wait_posted(root, s);
      copy(at(c_.recv, off), at(w_.scratch(root), uint64_t(me_) * step), k);
      ack(root, s);
      return;
    }
    peers([&](int p) { copy(at(w_.scratch(root), uint64_t(p) * step), at(c_.send, p * c_.count + off), k); });
    peers([&](int p) { post(p, s); });
    copy(at(c_.recv, off), at(c_.send, uint64_t(root) * c_.count + off), k);
    peers([&](int p) { wait_acked(p, s); });
  });
}

void DeviceEngine::Run::all_to_all() {
  const size_t step = piece(n_);
  each_piece(step, [&](uint64_t off, size_t k, uint64_t s) {
    peers([&](int q) { copy(at(w_.scratch(me_), uint64_t(q) * step), at(c_.send, q * c_.count + off), k); });
    peers([&](int p) { post(p, s); });
    copy(at(c_.recv, uint64_t(me_) * c_.count + off), at(c_.send, uint64_t(me_) * c_.count + off), k);
    peers([&](int p) {
      wait_posted(p, s);
      copy(at(c_.recv, uint64_t(p) * c_.count + off), at(w_.scratch(p), uint64_t(me_) * step), k);
      ack(p, s);
    });
    peers([&](int p) { wait_acked(p, s); });
  });
}

DeviceEngine::DeviceEngine(transport::DeviceWindow& window, GpuRuntime& rt, int rank, int size,
                           std::function<void(Status, const std::string&)> on_fail)
    : window_(window),
      rt_(rt),
      rank_(rank),
      size_(size),
      on_fail_(std::move(on_fail)),
      send_steps_(size_t(size)),
      recv_steps_(size_t(size)),
      send_msgs_(size_t(size)),
      recv_msgs_(size_t(size)) {
  if (window.flag_words() < flag_words(size) || p2p_slot() == 0) {
    fail(Status::kInternal, window.kind(), "'s blocks are too small for ", size, " ranks");
  }
  watchdog_ = std::thread([this] { watch(); });
}

bool DeviceEngine::accepts(OpKind kind, int device) const {
  if (device != window_.device()) return false;
  switch (kind) {
    case OpKind::kAllReduce:
    case OpKind::kBroadcast:
    case OpKind::kReduce:
    case OpKind::kAllGather:
    case OpKind::kReduceScatter:
    case OpKind::kGather:
    case OpKind::kScatter:
    case OpKind::kAllToAll:
    case OpKind::kAllGatherV:
    case OpKind::kAllToAllV:
    case OpKind::kGatherV:
    case OpKind::kScatterV: return true;
    default: return false;
  }
}

GpuRuntime::Event DeviceEngine::take_event() {
  if (free_events_.empty()) return rt_.event_create();
  GpuRuntime::Event e = free_events_.back();
  free_events_.pop_back();
  return e;
}

void DeviceEngine::enqueue(const DeviceCall& call, DeviceDone done) {
  std::lock_guard lock(mu_);
  if (aborted_) fail(Status::kAborted, "the communicator was aborted");
  if (failed_ != Status::kSuccess) fail(Status::kCommFailed, "the communicator failed earlier: ", failed_message_);
  Pending p;
  p.seq = ++seq_;
  const Direct direct = direct_for(call);
  p.sig = signature(call, direct.tag);
  p.what = describe(call, p.seq, direct.on);
  p.timeout_ms = call.timeout_ms;
  p.done = std::move(done);
  p.begin = take_event();
  p.end = take_event();
  try {
    rt_.event_record(p.begin, call.stream);
    check_signatures(p, call.stream);
    Run(*this, call, direct).run();
  } catch (const Error& e) {
    // Part of the operation may be queued: nothing must wait for the rest.
    fail_all(e.status(), str_cat(p.what, ": ", e.what()), true);
    throw;
  }
  track(std::move(p), call.stream);
}

// The operation's end event, and the watchdog follows it (holding mu_).
void DeviceEngine::track(Pending p, GpuRuntime::Stream stream) {
  try {
    rt_.event_record(p.end, stream);
  } catch (const Error& e) {
    fail_all(e.status(), str_cat(p.what, ": ", e.what()), true);
    throw;
  }
  pending_.push_back(std::move(p));
  cv_.notify_all();
}

// Every rank writes its call's signature into every peer's block and checks
// theirs on its stream before the operation: a rank whose peer posted
// another call at the same sequence number sets its error word and releases
// its own waits (so a mismatch never completes as a silently wrong result;
// the watchdog reports it on every rank).
void DeviceEngine::check_signatures(const Pending& p, GpuRuntime::Stream stream) {
  const uint64_t mine = p.seq << 24 | p.sig;
  for (int q = 0; q < size_; ++q) {
    if (q != rank_) rt_.stream_write_value(stream, window_.flags(q) + sig_word(rank_), mine);
  }
  for (int q = 0; q < size_; ++q) {
    if (q != rank_) rt_.stream_wait_value(stream, window_.flags(rank_) + sig_word(q), p.seq << 24);
  }
  rt_.check_words_async(window_.flags(rank_) + sig_word(0), size_, rank_, mine, window_.flags(rank_) + posted_word(0),
                        2 * size_t(size_), kReleased, window_.flags(rank_) + kErrorWord, uint32_t(Status::kMismatch),
                        stream);
}

void DeviceEngine::abort() {
  std::lock_guard lock(mu_);
  aborted_ = true;
  if (!pending_.empty()) fail_all(Status::kAborted, "the communicator was aborted", true);
}

}  // namespace omniccl::algo
