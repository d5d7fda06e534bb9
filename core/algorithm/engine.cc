#include "algorithm/engine.h"

#include <sched.h>

#include <chrono>
#include <sstream>

#include <algorithm>
#include <array>
#include <bit>
#include <cstring>
#include <optional>
#include <type_traits>

#include "common/log.h"
#include "common/small_copy.h"

namespace omniccl {

namespace {

constexpr uint32_t kWireMagic = 0x4f434d48;  // "OCMH"

/// Precedes every message; see engine.h.
struct WireHeader {
  uint32_t magic;
  uint8_t kind;
  uint8_t dtype;
  uint8_t redop;
  uint8_t algo;
  int32_t root;
  uint32_t step;
  uint64_t seq;
  uint64_t count;
  uint64_t bytes;
};
static_assert(sizeof(WireHeader) == 40 && sizeof(WireHeader) == transport::kEngineHeaderBytes, "wire header layout");
static_assert(std::has_unique_object_representations_v<WireHeader>, "no padding: headers compare with memcmp");
static_assert(sizeof(WireHeader) <= transport::kMaxHeader, "the header fits every link");

/// A WireHeader as five 8-byte words, built in registers. A header written
/// field by field (bytes, 4-byte and 8-byte stores) and then copied or
/// compared with wider loads makes each load wait until those stores reach
/// the cache, and stores leave in order, behind the previous message's ring
/// stores, whose line the peer holds (a cross-core transfer). Written and
/// read as these words, every load takes its bytes from one store.
using WireWords = std::array<uint64_t, 5>;
constexpr WireWords wire_words(const OpSignature& sig, uint32_t step, uint64_t bytes) {
  if constexpr (std::endian::native == std::endian::little) {
    return {uint64_t{kWireMagic} | uint64_t{uint8_t(sig.kind)} << 32 | uint64_t{uint8_t(sig.dtype)} << 40 |
                uint64_t{uint8_t(sig.redop)} << 48 | uint64_t{sig.algo} << 56,
            uint64_t{uint32_t(sig.root)} | uint64_t{step} << 32, sig.seq, sig.count, bytes};
  } else {
    return std::bit_cast<WireWords>(WireHeader{kWireMagic, uint8_t(sig.kind), uint8_t(sig.dtype), uint8_t(sig.redop),
                                               sig.algo, sig.root, step, sig.seq, sig.count, bytes});
  }
}
static_assert(sizeof(WireWords) == sizeof(WireHeader));
// The words hold WireHeader's bytes: every field lands where the struct has it.
static_assert([] {
  OpSignature sig;
  sig.kind = OpKind::kReduce;
  sig.dtype = DType::kFloat64;
  sig.redop = RedOp::kMax;
  sig.root = -3;
  sig.count = 0x1122334455667788;
  sig.seq = 0x99aabbccddeeff01;
  sig.algo = 0xa5;
  const WireHeader h = std::bit_cast<WireHeader>(wire_words(sig, 0xdeadbeef, 0x0102030405060708));
  return h.magic == kWireMagic && h.kind == uint8_t(OpKind::kReduce) && h.dtype == uint8_t(DType::kFloat64) &&
         h.redop == uint8_t(RedOp::kMax) && h.algo == 0xa5 && h.root == -3 && h.step == 0xdeadbeef &&
         h.seq == 0x99aabbccddeeff01 && h.count == 0x1122334455667788 && h.bytes == 0x0102030405060708;
}());

/// Whether the 40 bytes at `at` (a received header, not stored by this
/// thread just now) hold `w`: five 8-byte loads.
inline bool header_is(const void* at, const WireWords& w) {
  const char* p = static_cast<const char*>(at);
  uint64_t diff = 0;
  for (size_t i = 0; i < w.size(); ++i) {
    uint64_t x;
    std::memcpy(&x, p + 8 * i, 8);
    diff |= x ^ w[i];
  }
  return diff == 0;
}

constexpr size_t kStageBytes = 256 * 1024;  // staging per recv-reduce transfer
// The small-step path (Engine::run_quick): steps of up to this many
// transfers of up to this many bytes each. A <= 1 KiB operation's messages
// fit (a tree's gathered blocks of a few ranks included), and on shared
// memory each is one ring record.
constexpr size_t kQuickTransfers = 8;
constexpr size_t kQuickBytes = transport::kSmallPayloadMax;
// After this long without progress, ask peers for their signatures: calls that
// differ only where no message is exchanged (e.g. the root) are found this way.
constexpr auto kProbeAfter = std::chrono::milliseconds(300);
// Waiting: spin, then yield (cheap when nothing else wants the core, and it
// lets co-scheduled ranks run when ranks outnumber cores), then sleep.
// When every rank of this host has a core of its own, a rank spins 20 us (a
// peer's answer usually comes within microseconds), then yields every 16th
// pass. When ranks outnumber cores the awaited peer may need this very core:
// the rank does not spin and yields at every pass (as Open MPI's ranks do
// when oversubscribed; 4 ranks on 2 cores, 8 B, against spinning 2 us first:
// about even on a quiet machine, 0-54 % faster under load). It still
// yields before it sleeps: going to sleep at once was measured slower (8 B
// barrier ~30 us instead of ~9 us), as a core left idle takes long to wake
// (a virtual machine's idle vCPU above all).
// Sleep: first on this rank's futex word, which the peer that sends or makes
// room bumps and wakes (no socket, no poll), in waits of kFutexSliceMs, each
// that times out reading the control sockets (notices, a peer's death); after
// kFutexPhase without progress, in poll() on the control sockets until a
// doorbell, costing nothing while blocked. A rank blocked for long burns
// about spin + kYieldFor per wake-up.
// A yield that took Engine::kYieldStolen or more gave the core to another
// process (one that competes for it: a scheduler slice, milliseconds; with a
// busy process beside 2 ranks on 2 cores, the receiver's first 8 B
// broadcast after a barrier took 2.6-5.2 ms in 19 of a job's 20 trials of
// 1000 calls): for kNoYieldFor after
// it, the waits spin through their yield phase instead (Engine::yield_step),
// with ranks that each have a core.
// A wait that slept and still ended within kYieldAwake makes the next waits
// yield that long before their first sleep (Engine::first_yield): waking a
// sleeping rank took 200-250 us on a VM whose idle vCPUs wake slowly, and a
// rank that sleeps makes its peer's next wait as long, so two ranks slept in
// turn on every call (an 8 B all_reduce at 230 us a call). A
// wait longer than that turns it off; after each wake-up the yield is
// kYieldFor either way, so a blocked rank still sleeps.
constexpr auto kSpinAlone = std::chrono::microseconds(20);
constexpr auto kSpinShared = std::chrono::microseconds(0);
constexpr auto kFutexPhase = std::chrono::milliseconds(100);
constexpr int kFutexSliceMs = 10;

/// The fields every rank must agree on, as carried by headers and answers.
struct SigFields {
  uint8_t kind, dtype, redop, algo;
  int32_t root;
  uint64_t seq, count;
};

SigFields fields_of(const OpSignature& s) {
  return {uint8_t(s.kind), uint8_t(s.dtype), uint8_t(s.redop), s.algo, s.root, s.seq, s.count};
}

std::string encode(const SigFields& f) {
  return str_cat(int(f.kind), ",", int(f.dtype), ",", int(f.redop), ",", int(f.algo), ",", f.root, ",", f.seq, ",",
                 f.count);
}

bool decode(const std::string& text, SigFields& f) {
  std::istringstream in(text);
  char c;
  int kind, dtype, redop, algo;
  if (!(in >> kind >> c >> dtype >> c >> redop >> c >> algo >> c >> f.root >> c >> f.seq >> c >> f.count)) return false;
  f.kind = uint8_t(kind);
  f.dtype = uint8_t(dtype);
  f.redop = uint8_t(redop);
  f.algo = uint8_t(algo);
  return true;
}

/// "dtype float32 on rank 0 vs int32 on rank 2; ..." or "" when equal.
std::string diff_fields(const SigFields& mine, const SigFields& theirs, int me, int peer, bool p2p) {
  std::string diff;
  auto add = [&](const std::string& field, const std::string& a, const std::string& b) {
    diff += str_cat(diff.empty() ? "" : "; ", field, " ", a, " on rank ", me, " vs ", b, " on rank ", peer);
  };
  auto dname = [](uint8_t d) { return d < kernels::kNumDTypes ? dtype_name(static_cast<DType>(d)) : "?"; };
  auto oname = [](uint8_t o) { return o < kernels::kNumRedOps ? redop_name(static_cast<RedOp>(o)) : "?"; };
  if (mine.kind != theirs.kind) {
    add("operation", op_kind_name(static_cast<OpKind>(mine.kind)), op_kind_name(static_cast<OpKind>(theirs.kind)));
  }
  if (mine.seq != theirs.seq) {
    add(p2p ? "message number" : "operation number", str_cat("#", mine.seq), str_cat("#", theirs.seq));
  }
  if (mine.dtype != theirs.dtype) add("dtype", dname(mine.dtype), dname(theirs.dtype));
  if (mine.count != theirs.count) add("count", std::to_string(mine.count), std::to_string(theirs.count));
  if (mine.root != theirs.root) add("root", std::to_string(mine.root), std::to_string(theirs.root));
  if (mine.redop != theirs.redop) add("reduce op", oname(mine.redop), oname(theirs.redop));
  if (diff.empty() && mine.algo != theirs.algo) {
    add("algorithm id", std::to_string(mine.algo), std::to_string(theirs.algo));
    diff += " (is OMNICCL_ALGO set differently on different ranks?)";
  }
  return diff;
}

}  // namespace

const char* op_kind_name(OpKind k) {
  switch (k) {
    case OpKind::kSendRecv: return "send/recv";
    case OpKind::kBroadcast: return "broadcast";
    case OpKind::kScatter: return "scatter";
    case OpKind::kGather: return "gather";
    case OpKind::kReduce: return "reduce";
    case OpKind::kAllReduce: return "all_reduce";
    case OpKind::kAllGather: return "all_gather";
    case OpKind::kReduceScatter: return "reduce_scatter";
    case OpKind::kAllToAll: return "all_to_all";
    case OpKind::kBarrier: return "barrier";
    case OpKind::kAllGatherV: return "all_gatherv";
    case OpKind::kAllToAllV: return "all_to_allv";
    case OpKind::kGatherV: return "gatherv";
    case OpKind::kScatterV: return "scatterv";
    case OpKind::kInternal: return "internal exchange";
  }
  return "?";
}

// One transfer in a step. It is the sink of its payload when it reduces
// (the link hands the incoming operand over in pieces).
struct Engine::State final : transport::PayloadSink {
  Engine* engine = nullptr;
  Transfer t;
  OpSignature sig;  // this transfer's operation (p2p batches mix several)
  Deadline deadline = Deadline::never();
  size_t tag = 0;
  bool from_feed = false;
  WireHeader hdr{};
  transport::Message msg;  // the link's view; header and sink re-pointed before each call (states move)
  size_t reduced = 0;      // recv-reduce: payload bytes already reduced into dst
  bool complete = false;
  size_t land_token = 0;  // listen: the feed's token for the message being read

  size_t take(const char* data, size_t n) override { return engine->reduce_next(*this, data, n); }
};

struct Engine::StateQueue : std::vector<State> {};

struct Engine::QuickSet {
  std::array<State, kQuickTransfers> s;
  std::array<Transfer, kQuickTransfers> rest;  ///< run_direct's transfers left over
};

struct Engine::Held {
  bool has = false;
  WireHeader hdr{};
  transport::Message msg;  // the link's progress on that message (its header is all there)
};

Engine::~Engine() {
  if (quick_stats_.done + quick_stats_.handed_over > 0) {
    OCCL_LOG(kInfo, kColl, "small-step path: ", quick_stats_.done, " steps done there (", quick_stats_.direct,
             " with whole messages only), ", quick_stats_.handed_over, " handed to the general loop to wait");
  }
}

Engine::Engine(transport::Mesh& mesh)
    : quick_(std::make_unique<QuickSet>()), mesh_(mesh), states_(std::make_unique<StateQueue>()) {
  // The union of this host's ranks' CPUs, not this rank's own mask: ranks
  // bound to a core each (mpirun's default for 2 ranks) are not oversubscribed.
  oversubscribed_ = mesh_.local_size() > mesh_.local_cpus();
  spin_for_ = oversubscribed_ ? kSpinShared : kSpinAlone;
  for (int p = 0; p < mesh_.size(); ++p) whole_links_ |= p != mesh_.rank() && mesh_.link(p).whole_messages();
  mesh_.set_op_describer([this] {
    // Point-to-point numbers are per pair, so they carry no comparable signature.
    bool p2p = sig_.kind == OpKind::kSendRecv;
    return transport::Mesh::OpStatus{sig_.seq, p2p ? std::string("send/recv") : op_text(),
                                     p2p ? std::string() : encode(fields_of(sig_))};
  });
}

void Engine::reset_op_options() {
  idle_.bytes = 0;  // a copy no step ran (its operation failed first) is dropped
  probed_ = false;
  single_copy_ = false;
  split_copy_ = false;
  stream_min_ = 0;
  interrupt_ = {};
}

void Engine::begin(const OpSignature& sig, RedOp combine, Deadline deadline) {
  sig_ = sig;
  combine_ = combine;
  deadline_ = deadline;
  lazy_timeout_ms_ = -1;
  reset_op_options();
}

void Engine::begin(const OpSignature& sig, RedOp combine, int64_t timeout_ms) {
  begin_in_place(combine, timeout_ms) = sig;
}

OpSignature& Engine::begin_in_place(RedOp combine, int64_t timeout_ms) {
  combine_ = combine;
  lazy_timeout_ms_ = std::max<int64_t>(timeout_ms, 0);
  reset_op_options();
  return sig_;
}

void Engine::fail_mismatch(const std::string& diff) {
  std::string msg = str_cat(op_text(), ": calls do not match across ranks: ", diff);
  mesh_.broadcast_error(Status::kMismatch, msg);
  throw transport::PeerReportedError(Status::kMismatch, msg);  // already told everyone
}

void Engine::probe_signatures() {
  for (int p = 0; p < mesh_.size(); ++p) {
    const transport::PeerAnswer& a = mesh_.answers()[p];
    if (p == mesh_.rank() || !a.answered || a.seq != sig_.seq || a.signature.empty()) continue;
    SigFields theirs;
    if (!decode(a.signature, theirs)) continue;
    std::string diff = diff_fields(fields_of(sig_), theirs, mesh_.rank(), p, false);
    if (!diff.empty()) fail_mismatch(diff);
  }
}

std::string Engine::op_text(const OpSignature& sig) {
  return str_cat(op_kind_name(sig.kind), " #", sig.seq,
                 sig.algo_name && *sig.algo_name ? str_cat(" (", sig.algo_name, ")") : std::string());
}

char* Engine::scratch(size_t bytes, int slot) { return exec_->scratch(bytes, slot); }

void Engine::use_device(DeviceKind device) {
  if (device != DeviceKind::kCPU) fail(Status::kUnsupported, "no executor for CUDA memory in this build");
  exec_ = &cpu_;
  device_ = device;
}

// Inline in its two callers (run_one_now, run_guarded).
[[gnu::always_inline]] inline bool Engine::direct_done(const Transfer& t) {
  if (direct_one(t) != transport::Whole::kDone) return false;
  mesh_.link(t.peer).flush();
  ++quick_stats_.done;
  ++quick_stats_.direct;
  return true;
}

inline bool Engine::quick_transfer(const Transfer& t) const {
  return t.bytes <= kQuickBytes && t.kind != Transfer::Kind::kListen &&
         (held_.empty() || t.peer < 0 || t.peer >= mesh_.size() || !held_[size_t(t.peer)].has);
}

// Inline in run(initializer_list), its one caller.
[[gnu::always_inline]] inline bool Engine::run_one_now(const Transfer& t) {
  // quick_fits for one transfer, and run_guarded's first try.
  if (!whole_links_ || !quick_on_ || device_ != DeviceKind::kCPU || !quick_transfer(t)) return false;
  try {
    return direct_done(t);
  } catch (...) {
    step_failed();
  }
}

void Engine::run(std::initializer_list<Transfer> transfers) {
  // One message with no copy to make beside it (a 2-rank rooted operation's
  // step, a pairwise round): moved at once when it can, without the span
  // path's layers (run, quick_fits, run_guarded) in between.
  if (transfers.size() == 1 && idle_.bytes == 0 && run_one_now(*transfers.begin())) return;
  run(std::span<const Transfer>(transfers.begin(), transfers.size()));
}

void Engine::step_failed() {
  abandon_receives();
  try {
    throw;
  } catch (const transport::PeerReportedError&) {
    throw;  // came from a peer, or was already sent to every peer
  } catch (const Error& e) {
    // Tell every rank, so that ranks waiting on this one fail now rather than
    // at their deadline.
    if (e.status() != Status::kAborted) mesh_.broadcast_error(e.status(), e.what());
    throw;
  }
}

void Engine::check_header(const State& s) {
  // The common case, everything equal, without building a description: the
  // header this rank would have sent, compared whole (no padding in it).
  if (header_is(&s.hdr, wire_words(s.sig, s.t.step, s.t.bytes))) return;
  fail_header(s);
}

void Engine::fail_header(const State& s) {
  const WireHeader& h = s.hdr;
  const int peer = s.t.peer;
  const OpSignature& mine = s.sig;
  if (h.magic != kWireMagic) {
    std::string msg = str_cat(op_text(mine), ": corrupt message from ", mesh_.describe(peer),
                              " (bad magic); the byte streams are out of step");
    mesh_.broadcast_error(Status::kInternal, msg);
    throw transport::PeerReportedError(Status::kInternal, msg);
  }
  SigFields theirs{h.kind, h.dtype, h.redop, h.algo, h.root, h.seq, h.count};
  std::string diff = diff_fields(fields_of(mine), theirs, mesh_.rank(), peer, mine.kind == OpKind::kSendRecv);
  if (diff.empty() && h.bytes != s.t.bytes) {
    diff = str_cat("message size ", s.t.bytes, " bytes expected on rank ", mesh_.rank(), " vs ", h.bytes,
                   " bytes sent by rank ", peer);
  }
  if (diff.empty() && h.step != s.t.step) {
    diff = str_cat("algorithm step ", s.t.step, " on rank ", mesh_.rank(), " vs ", h.step, " on rank ", peer);
  }
  if (diff.empty()) diff = str_cat("message header from rank ", peer, " differs from the expected one");
  std::string msg = str_cat(op_text(mine), ": calls do not match across ranks: ", diff);
  mesh_.broadcast_error(Status::kMismatch, msg);
  throw transport::PeerReportedError(Status::kMismatch, msg);
}

// Recv-reduce: reduces the whole elements among the first n bytes at `from`
// (the peer's operand, next in order) into dst; returns the bytes taken.
size_t Engine::reduce_next(State& s, const char* from, size_t n) {
  const size_t esize = dtype_size(s.sig.dtype);
  n = std::min(n, s.t.bytes - s.reduced) / esize * esize;
  if (n > 0) {
    exec_->reduce(s.t.dst + s.reduced, s.t.src + s.reduced, from, n / esize, s.sig.dtype, combine_);
    s.reduced += n;
  }
  return n;
}

bool Engine::advance(State& s) {
  transport::Link& link = mesh_.link(s.t.peer);
  transport::Message& m = s.msg;
  m.header = &s.hdr;
  if (s.t.kind == Transfer::Kind::kSend) {
    bool progressed = link.send(m);
    s.complete = m.complete;
    return progressed;
  }
  bool progressed = false;
  if (m.header_done < sizeof(WireHeader)) {
    if (m.header_done == 0 && take_held(s.t.peer, s)) {
      progressed = true;
    } else {
      progressed = link.recv_header(m);
      if (m.header_done < sizeof(WireHeader)) return progressed;
    }
    check_header(s);
  }
  if (s.t.kind == Transfer::Kind::kRecvReduce) m.sink = &s;
  progressed |= link.recv_payload(m);
  s.complete = m.complete;
  return progressed;
}

bool Engine::take_held(int peer, State& s) {
  if (held_.empty() || !held_[size_t(peer)].has) return false;
  Held& h = held_[size_t(peer)];
  s.hdr = h.hdr;
  // The link's own part of the message; the caller's part (payload, sink,
  // stage) stays this transfer's.
  transport::Message& m = s.msg;
  transport::move_progress(m, h.msg);
  h.has = false;
  return true;
}

// A listen reads whole point-to-point messages from one peer, one after the
// other, for as long as the feed has a receive they could match: the header
// first, then the payload wherever the feed lands it. A collective's header
// (the peer has moved on to its next operation) is kept for that operation.
bool Engine::advance_listen(State& s, TransferFeed& feed) {
  const int peer = s.t.peer;
  transport::Link& link = mesh_.link(peer);
  transport::Message& m = s.msg;
  m.header = &s.hdr;
  bool progressed = false;
  for (;;) {
    if (m.header_done == 0) {
      if (held_.size() < size_t(mesh_.size())) held_.resize(size_t(mesh_.size()));
      if (!feed.listening(peer)) {
        s.complete = true;
        feed.listen_ended(peer, false);
        return progressed;
      }
      if (held_[size_t(peer)].has) {
        s.complete = true;
        feed.listen_ended(peer, true);
        return progressed;
      }
    }
    if (m.header_done < sizeof(WireHeader)) {
      const size_t before = m.header_done;
      try {
        progressed |= link.recv_header(m);
      } catch (const Error& e) {
        // A peer that has left ends a listen that only ANY_SOURCE receives
        // need (between messages); the others may still send.
        if (e.status() != Status::kPeerFailure || before != 0 || feed.named(peer)) throw;
        s.complete = true;
        feed.listen_ended(peer, true);
        return true;
      }
      if (m.header_done < sizeof(WireHeader)) {
        if (m.header_done == 0) feed.quiet(peer);
        return progressed;
      }
      const WireHeader& h = s.hdr;
      if (h.magic != kWireMagic) {
        std::string msg = str_cat("recv: corrupt message from ", mesh_.describe(peer),
                                  " (bad magic); the byte streams are out of step");
        mesh_.broadcast_error(Status::kInternal, msg);
        throw transport::PeerReportedError(Status::kInternal, msg);
      }
      if (h.kind != uint8_t(OpKind::kSendRecv)) {
        Held& held = held_[size_t(peer)];
        held.has = true;
        held.hdr = h;
        held.msg = m;
        held.msg.header = nullptr;
        m = transport::Message{};
        m.header_bytes = sizeof(WireHeader);
        s.complete = true;
        feed.listen_ended(peer, true);
        return true;
      }
      TransferFeed::Arrival a;
      a.peer = peer;
      a.tag = h.root;
      a.dtype = static_cast<DType>(h.dtype);
      a.count = h.count;
      a.bytes = h.bytes;
      a.seq = h.seq;
      a.flags = h.algo;
      s.t.dst = feed.land(a, s.land_token);
      s.t.bytes = h.bytes;
      m.payload = {s.t.dst, s.t.bytes, device_};
      m.sink = nullptr;
    }
    progressed |= link.recv_payload(m);
    if (!m.complete) return progressed;
    feed.landed(s.land_token);
    // And listen for the next one.
    m = transport::Message{};
    m.header_bytes = sizeof(WireHeader);
    m.header = &s.hdr;
    s.t.dst = nullptr;
    s.t.bytes = 0;
    progressed = true;
  }
}

void Engine::flush_links() {
  for (const State& s : *states_) mesh_.link(s.t.peer).flush();
}

void Engine::copy_now(char* dst, const char* src, size_t bytes) {
  if (dst == src || bytes == 0 || copy_small_now(dst, src, bytes)) return;
  const bool apart = dst + bytes <= src || src + bytes <= dst;
  if (apart && streams(bytes)) {
    exec_->copy_streaming(dst, src, bytes);
  } else {
    exec_->copy(dst, src, bytes);
  }
}

void Engine::copy_while_waiting_large(char* dst, const char* src, size_t bytes) {
  if (dst == src || bytes == 0) return;
  const bool apart = dst + bytes <= src || src + bytes <= dst;
  if (!apart || bytes <= kIdleSlice || exec_->device() != DeviceKind::kCPU) {
    idle_stats_.at_once += bytes;
    copy_now(dst, src, bytes);
    return;
  }
  idle_ = {dst, src, bytes, streams(bytes)};
}

bool Engine::idle_copy_step(size_t most, uint64_t* count) {
  const size_t k = std::min(most, idle_.bytes);
  if (k == 0) return false;
  *count += k;
  if (idle_.streaming) {
    exec_->copy_streaming(idle_.dst, idle_.src, k);
  } else {
    exec_->copy(idle_.dst, idle_.src, k);
  }
  idle_.dst += k;
  idle_.src += k;
  idle_.bytes -= k;
  return true;
}

void Engine::run(std::span<const Transfer> transfers) {
  const bool quick = quick_fits(transfers);
  if (idle_.bytes > 0 && (transfers.empty() || quick)) {
    idle_copy_step(idle_.bytes, &idle_stats_.at_once);  // nothing worth waiting for
  }
  if (transfers.empty()) return;
  run_guarded(transfers, nullptr, quick);
}

void Engine::run_feed(TransferFeed& feed) {
  sig_ = OpSignature{};
  sig_.kind = OpKind::kSendRecv;
  reset_op_options();  // runs on the worker: a blocking caller's interrupt check must not leak here
  run_guarded({}, &feed, false);
}

void Engine::run_guarded(std::span<const Transfer> transfers, TransferFeed* feed, bool quick) {
  try {
    bool adopt = false;
    bool spun = false;
    if (feed == nullptr && quick) {
      // One message that can move now (a send, or a receive already here):
      // moved without run_direct's loop.
      if (transfers.size() == 1 && whole_links_ && direct_done(transfers[0])) return;
      std::array<Transfer, kQuickTransfers>& rest = quick_->rest;
      const size_t left = run_direct(transfers, rest, spun);
      if (left == 0) {
        ++quick_stats_.done;
        ++quick_stats_.direct;
        return;
      }
      transfers = std::span<const Transfer>(rest.data(), left);
      if (!spun) {
        if (run_quick(transfers)) {
          ++quick_stats_.done;
          return;
        }
        adopt = true;
      }
      ++quick_stats_.handed_over;
    }
    run_impl(transfers, feed, adopt, spun);
  } catch (...) {
    step_failed();
  }
}

void Engine::abandon_receives() noexcept {
  // Receives whose senders may still write into the caller's buffers (split
  // copies): the caller frees or reuses them once this operation has failed.
  for (State& s : *states_) {
    if (!s.msg.complete && s.t.peer >= 0 && s.t.peer < mesh_.size()) {
      mesh_.link(s.t.peer).abandon(s.msg);
    }
  }
}

// The waiting policy, in one place for every transport: after a pass that
// moved nothing, spin (cheap passes between clock readings), then yield,
// then sleep until a transport says it can move again (Engine::sleep_step).
class Engine::WaitPolicy {
 public:
  enum class Action { kSpin, kYield, kSleep };
  /// Spins `spin`, then yields for `first_yield` before the first sleep and
  /// kYieldFor after each wake-up: at every pass with `yield_each_pass`
  /// (ranks outnumber cores), else every 16th.
  WaitPolicy(std::chrono::nanoseconds spin, std::chrono::nanoseconds first_yield, bool yield_each_pass)
      : spin_(spin), first_yield_(first_yield), yield_each_pass_(yield_each_pass) {}

  /// What to do after a pass without progress.
  Action next() {
    // Reading the clock costs more than a pass over the transfers: spin (or
    // yield) a few passes between readings.
    if ((++idle_passes_ & 15) != 0 && idle_since_ != Clock::time_point{}) {
      return yielding_ && yield_each_pass_ ? Action::kYield : Action::kSpin;
    }
    const auto now = Clock::now();
    if (idle_since_ == Clock::time_point{}) idle_since_ = now;
    yielding_ = false;
    if (now - idle_since_ < spin_) return Action::kSpin;
    yielding_ = now - idle_since_ < spin_ + (asleep_since_ == Clock::time_point{} ? first_yield_ : kYieldFor);
    if (yielding_) return Action::kYield;
    if (asleep_since_ == Clock::time_point{}) {
      asleep_since_ = now;
      waited_since_ = idle_since_;
    }
    return Action::kSleep;
  }
  /// Something moved: start over. Returns how long the wait took where it
  /// slept (from its first pass without progress), else zero.
  std::chrono::nanoseconds progressed() {
    std::chrono::nanoseconds slept_wait{0};
    if (asleep_since_ != Clock::time_point{}) slept_wait = Clock::now() - waited_since_;
    idle_since_ = asleep_since_ = Clock::time_point{};
    yielding_ = false;
    return slept_wait;
  }
  /// Before a wait's first sleep (the small path spun already), or after a
  /// wake-up from sleep: yield a while, then sleep (again).
  void woke() { idle_since_ = Clock::now() - spin_; }
  /// Whether the sleep that next() asked for is still short enough for
  /// futex waits (kFutexPhase since the first sleep without progress).
  bool futex_phase() const { return Clock::now() - asleep_since_ < kFutexPhase; }

 private:
  std::chrono::nanoseconds spin_;
  std::chrono::nanoseconds first_yield_;
  bool yield_each_pass_;
  bool yielding_ = false;             // in the yield phase (as of the last clock reading)
  Clock::time_point idle_since_{};    // first pass without progress (epoch = progressing)
  Clock::time_point asleep_since_{};  // first sleep without progress (epoch = none yet)
  Clock::time_point waited_since_{};  // idle_since_ when the first sleep came
  unsigned idle_passes_ = 0;
};

Engine::State& Engine::add_transfer(const Transfer& t, const OpSignature& sig, Deadline deadline) {
  State& s = states_->emplace_back();
  init_state(s, t, sig, deadline);
  return s;
}

void Engine::init_state(State& s, const Transfer& t, const OpSignature& sig, Deadline deadline) {
  s.engine = this;
  s.t = t;
  s.sig = sig;
  s.deadline = deadline;
  s.tag = 0;
  s.from_feed = false;
  s.reduced = 0;
  s.complete = false;
  s.land_token = 0;
  if (s.t.peer < 0 || s.t.peer >= mesh_.size() || s.t.peer == mesh_.rank()) {
    fail(Status::kInternal, op_text(sig), ": transfer to invalid peer ", s.t.peer);
  }
  if (s.t.kind == Transfer::Kind::kSend) {
    s.hdr = std::bit_cast<WireHeader>(wire_words(sig, s.t.step, s.t.bytes));
  }
  transport::Message& m = s.msg;
  // Every field, as Message{} would leave it (assigning a fresh Message
  // costs twice the stores), then this transfer's.
  m.header = nullptr;
  m.sink = nullptr;
  m.stage = {};
  m.granule = 1;
  m.may_reference = false;
  m.stream = false;
  m.may_split = false;
  m.header_done = 0;
  m.done = 0;
  m.staged = 0;
  m.complete = false;
  transport::reset_link_state(m);
  m.header_bytes = sizeof(WireHeader);
  if (s.t.kind == Transfer::Kind::kSend) {
    m.payload = {const_cast<char*>(s.t.src), s.t.bytes, device_};
    // Collectives only: their steps post every receive a send waits for,
    // while point-to-point sends keep completing without the receiver
    // (buffered), as programs written for MPI's eager sends expect.
    m.may_reference = single_copy_ && sig.kind != OpKind::kSendRecv;
  } else {
    m.payload = {s.t.dst, s.t.bytes, device_};
    m.stream = streams(s.t.bytes) && device_ == DeviceKind::kCPU;
    m.may_split = split_copy_;
  }
  if (s.t.kind == Transfer::Kind::kRecvReduce) {
    m.stage = {staging_.data() + kStageBytes * stage_used_++, kStageBytes, DeviceKind::kCPU};
    m.granule = static_cast<uint32_t>(dtype_size(sig.dtype));
  }
}

void Engine::prepare_staging(std::span<const Transfer> transfers) {
  size_t n_reduce = 0;
  for (const auto& t : transfers) n_reduce += t.kind == Transfer::Kind::kRecvReduce;
  if (staging_.size() < n_reduce * kStageBytes) staging_.resize(n_reduce * kStageBytes);
  stage_used_ = 0;
}

bool Engine::pull_feed(TransferFeed* feed) {
  if (feed == nullptr) return false;
  bool any = false;
  Transfer t;
  OpSignature sig;
  Deadline dl = Deadline::never();
  size_t tag = 0;
  while (feed->next(t, sig, dl, tag)) {
    State& s = add_transfer(t, sig, dl);
    s.tag = tag;
    s.from_feed = true;
    any = true;
  }
  return any;
}

Engine::Pass Engine::progress_pass(TransferFeed* feed) {
  // (peer, direction) pairs already served this pass: only the first
  // incomplete transfer of each pair may move, keeping messages in order.
  PairSet& busy = busy_;
  busy.clear();
  Pass pass;
  for (auto& s : *states_) {
    if (s.complete) continue;
    pass.all_done = false;
    size_t key = size_t(s.t.peer) * 2 + (s.t.kind == Transfer::Kind::kSend);
    if (busy.has(key)) continue;
    busy.add(key);
    const bool listen = s.t.kind == Transfer::Kind::kListen;
    pass.progressed |= listen ? advance_listen(s, *feed) : advance(s);
    if (s.complete) {
      busy.remove(key);  // the next transfer of this pair may start in this pass
      if (s.from_feed && !listen) {
        mesh_.link(s.t.peer).flush();
        feed->done(s.tag);
      }
    }
  }
  return pass;
}

void Engine::probe_if_stalled() {
  if (sig_.kind == OpKind::kSendRecv) return;
  auto now = Clock::now();
  if (stalled_since_ == Clock::time_point{}) stalled_since_ = now;
  if (!probed_ && now - stalled_since_ > kProbeAfter) {
    mesh_.send_queries(sig_.seq);
    probed_ = true;
  }
  if (probed_) probe_signatures();
}

void Engine::sleep_step(bool futex) {
  // Arm every pending transfer's link (the first of each peer and
  // direction), re-check, then sleep until one can move or a deadline.
  flush_links();
  std::vector<pollfd>& fds = fds_;
  std::vector<State*>& waiting = waiting_;
  PairSet& busy = busy_;
  fds.clear();
  waiting.clear();
  bool ready = false;
  busy.clear();
  for (auto& s : *states_) {
    if (s.complete) continue;
    bool sending = s.t.kind == Transfer::Kind::kSend;
    size_t key = size_t(s.t.peer) * 2 + sending;
    if (busy.has(key)) continue;
    busy.add(key);
    if (s.t.kind == Transfer::Kind::kListen && s.msg.header_done == 0 && feed_ != nullptr && !feed_->named(s.t.peer)) {
      // Only ANY_SOURCE receives listen here: a peer that has left ends
      // this listen, not the step (the others may still send).
      try {
        mesh_.check_peer(s.t.peer);
      } catch (const Error&) {
        s.complete = true;
        feed_->listen_ended(s.t.peer, true);
        ready = true;
        continue;
      }
    }
    waiting.push_back(&s);
    mesh_.check_peer(s.t.peer);
  }
  // Every transfer may have completed during the last pass (it started
  // with one incomplete): nothing to sleep on, the next pass sees it done.
  if (!ready && waiting.empty()) return;
  // The futex word wakes only from links that can bump it: with a TCP link
  // among them, every link rings (doorbells) and this rank polls.
  futex = futex && mesh_.sleeps_on_futex();
  for (State* s : waiting) futex = futex && mesh_.link(s->t.peer).wakes_futex();
  const transport::WakeBy by = futex ? transport::WakeBy::kFutex : transport::WakeBy::kDoorbell;
  const uint32_t seq = futex ? mesh_.futex_seq() : 0;  // before arming: a wake after it changes the word
  for (State* s : waiting) {
    if (ready) break;  // no sleep: the rest need not be armed
    transport::Link& link = mesh_.link(s->t.peer);
    const transport::WaitOn w =
        s->t.kind == Transfer::Kind::kSend ? link.arm_send(s->msg, by) : link.arm_recv(s->msg, by);
    switch (w.how) {
      case transport::WaitOn::How::kReady: ready = true; break;
      case transport::WaitOn::How::kPoll: fds.push_back({w.fd, w.events, 0}); break;
      case transport::WaitOn::How::kDoorbell: break;  // Mesh::sleep polls the control sockets
      case transport::WaitOn::How::kFutex: break;     // Mesh::sleep_on_futex waits on the word
    }
  }
  if (!ready) {
    State* first = earliest_deadline(waiting);
    if (first->deadline.expired()) {
      for (State* s : waiting) mesh_.link(s->t.peer).disarm();
      fail_deadline(*first, waiting);
    }
    const int timeout_ms = first->deadline.remaining_ms(interrupt_ ? 50 : 200);
    ++wait_stats_.sleeps;
    if (futex) {
      mesh_.sleep_on_futex(seq, std::min(timeout_ms, kFutexSliceMs));
    } else {
      mesh_.sleep(fds, timeout_ms);
    }
  }
  for (State* s : waiting) mesh_.link(s->t.peer).disarm();
}

Engine::State* Engine::earliest_deadline(std::vector<State*>& waiting) {
  // Collective transfers share the operation's deadline; fed ones
  // (send/recv) carry their own.
  for (State* s : waiting) {
    if (!s->from_feed) s->deadline = op_deadline();
  }
  State* first = waiting.front();
  for (State* s : waiting) {
    if (s->deadline.time() < first->deadline.time()) first = s;
  }
  return first;
}

void Engine::fail_deadline(const State& first, const std::vector<State*>& waiting) {
  std::vector<int> peers;
  for (State* s : waiting) {
    if (std::find(peers.begin(), peers.end(), s->t.peer) == peers.end()) peers.push_back(s->t.peer);
  }
  mesh_.fail_timeout(op_text(first.sig), first.sig.seq, peers);
}

bool Engine::quick_fits(std::span<const Transfer> transfers) const {
  if (!quick_on_ || transfers.size() > kQuickTransfers || device_ != DeviceKind::kCPU) return false;
  for (const Transfer& t : transfers) {
    if (!quick_transfer(t)) return false;
  }
  return true;
}

bool Engine::run_quick(std::span<const Transfer> transfers) {
  std::array<State, kQuickTransfers>& qs = quick_->s;
  const size_t n = transfers.size();
  size_t n_reduce = 0;
  for (size_t i = 0; i < n; ++i) n_reduce += transfers[i].kind == Transfer::Kind::kRecvReduce;
  // (Before any state points into the staging; it restarts the slots, which
  // only recv-reduce transfers take.)
  if (n_reduce > 0) prepare_staging(transfers);
  for (size_t i = 0; i < n; ++i) init_state(qs[i], transfers[i], sig_, Deadline::never());  // op_deadline() applies
  // The pairs served in a pass (one transfer alone needs no bookkeeping).
  if (n > 1) busy_.reset(size_t(mesh_.size()) * 2);
  std::optional<WaitPolicy> wait;  // built at the first pass that moves nothing
  size_t remaining = n;
  bool owe_flush = false;
  for (;;) {
    // As progress_pass: only the first incomplete transfer of each peer and
    // direction moves (one transfer alone needs no bookkeeping).
    bool progressed = false;
    if (n == 1) {
      progressed = advance(qs[0]);
      remaining = qs[0].complete ? 0 : 1;
    } else {
      busy_.clear();
      for (size_t i = 0; i < n; ++i) {
        State& s = qs[i];
        if (s.complete) continue;
        const size_t key = size_t(s.t.peer) * 2 + (s.t.kind == Transfer::Kind::kSend);
        if (busy_.has(key)) continue;
        busy_.add(key);
        progressed |= advance(s);
        if (s.complete) {
          busy_.remove(key);
          --remaining;
        }
      }
    }
    if (remaining == 0) {
      for (size_t i = 0; i < n; ++i) mesh_.link(qs[i].t.peer).flush();
      return true;
    }
    if (progressed) {
      if (wait) wait->progressed();
      owe_flush = true;
      continue;
    }
    if (owe_flush) {
      for (size_t i = 0; i < n; ++i) mesh_.link(qs[i].t.peer).flush();
      owe_flush = false;
    }
    // Past the spin phase the general loop waits (yield, sleep, deadlines,
    // errors, probes), from where these transfers are.
    if (!wait) wait.emplace(spin_for_, first_yield_, oversubscribed_);
    if (wait->next() != WaitPolicy::Action::kSpin) return false;
    cpu_relax();
  }
}

transport::Whole Engine::direct_one(const Transfer& t) {
  if (t.peer < 0 || t.peer >= mesh_.size() || t.peer == mesh_.rank())
    return transport::Whole::kNo;  // (init_state names it)
  transport::Link& link = mesh_.link(t.peer);
  // The header this rank sends, or expects (check_header's comparison).
  const WireWords h = wire_words(sig_, t.step, t.bytes);
  if (t.kind == Transfer::Kind::kSend) return link.send_whole(h.data(), sizeof h, t.src, t.bytes);
  transport::Whole why = transport::Whole::kNo;
  const char* at = link.peek_whole(sizeof h + t.bytes, why);
  if (at == nullptr) return why;
  // Another header: the general loop reads it and names what differs.
  if (!header_is(at, h)) return transport::Whole::kNo;
  const char* payload = at + sizeof h;
  if (t.kind == Transfer::Kind::kRecv) {
    copy_apart(t.dst, payload, t.bytes);
  } else {
    const size_t esize = dtype_size(sig_.dtype);
    if (t.bytes % esize != 0) return transport::Whole::kNo;
    if (t.bytes > 0) exec_->reduce(t.dst, t.src, payload, t.bytes / esize, sig_.dtype, combine_);
  }
  link.take_whole(sizeof h + t.bytes);
  return transport::Whole::kDone;
}

size_t Engine::run_direct(std::span<const Transfer> transfers, std::span<Transfer> rest, bool& spun) {
  const size_t n = transfers.size();
  spun = false;
  // Keys (peer, direction) in one word: transfers behind one that has not
  // moved keep their order.
  const bool keyed = n > 1;
  if (!whole_links_ || (keyed && mesh_.size() > 32)) {
    std::copy(transfers.begin(), transfers.end(), rest.begin());
    return n;
  }
  uint32_t done = 0;
  const uint32_t all = (uint32_t{1} << n) - 1;
  std::optional<WaitPolicy> wait;  // built at the first pass that moves nothing
  bool owe_flush = false;
  bool refused = false;
  for (;;) {
    uint64_t blocked = 0;
    bool progressed = false;
    for (size_t i = 0; i < n; ++i) {
      if ((done >> i) & 1) continue;
      const Transfer& t = transfers[i];
      const uint64_t key = keyed ? uint64_t{1} << (unsigned(t.peer) * 2 + (t.kind == Transfer::Kind::kSend)) : 0;
      if ((blocked & key) != 0) continue;
      const transport::Whole w = direct_one(t);
      if (w == transport::Whole::kDone) {
        done |= uint32_t{1} << i;
        progressed = true;
        continue;
      }
      blocked |= key;
      refused |= w == transport::Whole::kNo;
    }
    if (done == all) {
      for (const Transfer& t : transfers) mesh_.link(t.peer).flush();
      return 0;
    }
    if (progressed) {
      if (wait) wait->progressed();
      owe_flush = true;
      if (!refused) continue;
    }
    if (owe_flush) {
      for (size_t i = 0; i < n; ++i) {
        if (((done >> i) & 1) != 0) mesh_.link(transfers[i].peer).flush();
      }
      owe_flush = false;
    }
    if (refused) break;
    if (!wait) wait.emplace(spin_for_, first_yield_, oversubscribed_);
    if (wait->next() != WaitPolicy::Action::kSpin) {
      spun = true;
      break;
    }
    cpu_relax();
  }
  size_t left = 0;
  for (size_t i = 0; i < n; ++i) {
    if (((done >> i) & 1) == 0) rest[left++] = transfers[i];
  }
  return left;
}

void Engine::run_impl(std::span<const Transfer> transfers, TransferFeed* feed, bool adopt, bool spun) {
  // Members, so steady state reuses their memory. References into states_
  // are not held across add_transfer (a feed may append while it runs).
  states_->clear();
  busy_.reset(size_t(mesh_.size()) * 2);
  if (adopt) {
    // The small path's transfers, with their progress (their staging slots
    // are still staging_'s: prepare_staging ran for these transfers).
    states_->assign(quick_->s.begin(), quick_->s.begin() + static_cast<std::ptrdiff_t>(transfers.size()));
  } else {
    prepare_staging(transfers);
    for (const auto& t : transfers) add_transfer(t, sig_, Deadline::never());  // op_deadline() applies
  }
  pull_feed(feed);
  feed_ = feed;

  WaitPolicy wait(spin_for_, first_yield_, oversubscribed_);
  if (adopt || spun) wait.woke();  // the small path has spun already: yield, then sleep
  stalled_since_ = Clock::time_point{};
  bool owe_flush = false;
  for (;;) {
    const Pass pass = progress_pass(feed);
    if (pass.all_done) {
      if (pull_feed(feed)) continue;
      flush_links();
      if (idle_.bytes > 0) idle_copy_step(idle_.bytes, &idle_stats_.after);
      return;
    }
    if (pass.progressed) {
      waited(wait.progressed());
      stalled_since_ = Clock::time_point{};
      owe_flush = true;
      if (feed != nullptr && feed->owes()) pull_feed(feed);
      continue;
    }
    if (owe_flush) {
      // Waiting from here on: deliver the wake-ups owed for what moved.
      flush_links();
      owe_flush = false;
    }
    if (idle_.bytes > 0 && idle_copy_step(kIdleSlice, &idle_stats_.while_waiting)) continue;  // the peers' time, used
    switch (wait.next()) {
      case WaitPolicy::Action::kSpin: cpu_relax(); continue;
      case WaitPolicy::Action::kYield: yield_step(); continue;
      case WaitPolicy::Action::kSleep: break;
    }
    // No progress: errors reported on the control sockets apply now, and
    // the caller may ask to stop. A peer that left fails only a transfer
    // that still waits on it (sleep_step), after this pass consumed what it
    // delivered.
    mesh_.throw_if_failed();
    if (interrupt_.fired()) fail(Status::kInterrupted, op_text(), ": interrupted by the caller");
    if (pull_feed(feed)) {
      waited(wait.progressed());
      continue;
    }
    probe_if_stalled();
    sleep_step(wait.futex_phase());
    wait.woke();
  }
}

void Engine::yield_step() {
  if (oversubscribed_) {
    // Ranks outnumber cores: the awaited peer may need this very core.
    sched_yield();
    return;
  }
  const auto before = Clock::now();
  if (before < no_yield_until_) {
    // A yield gave the core away lately: spin through the yield phase.
    cpu_relax();
    return;
  }
  sched_yield();
  const auto after = Clock::now();
  if (after - before >= kYieldStolen) {
    ++wait_stats_.stolen_yields;
    no_yield_until_ = after + kNoYieldFor;
  }
}

void Engine::waited(std::chrono::nanoseconds slept_wait) {
  if (slept_wait.count() == 0) return;
  const bool short_wait = slept_wait <= kYieldAwake;
  ++(short_wait ? wait_stats_.short_slept_waits : wait_stats_.long_slept_waits);
  first_yield_ = short_wait ? std::chrono::nanoseconds(kYieldAwake) : kYieldFor;
}

void Engine::wait_sends_read(uint64_t max_ns) {
  const auto until = std::chrono::steady_clock::now() + std::chrono::nanoseconds(max_ns);
  for (int p = 0; p < mesh_.size(); ++p) {
    if (p == mesh_.rank()) continue;
    const transport::Link& link = mesh_.link(p);
    for (unsigned i = 0; link.sends_unread(); ++i) {
      cpu_relax();
      if (i % 64 == 63 && std::chrono::steady_clock::now() >= until) return;
    }
  }
}

}  // namespace omniccl
