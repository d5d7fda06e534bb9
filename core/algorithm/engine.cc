#include "algorithm/engine.h"

#include <sched.h>

#include <algorithm>
#include <cstring>

#include "common/log.h"
#include "kernels/cpu/reduce.h"

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
static_assert(sizeof(WireHeader) == 40, "wire header layout");

constexpr size_t kStageBytes = 256 * 1024;  // staging per recv-reduce transfer
constexpr int kSpinPasses = 256;
constexpr int kYieldPasses = 16;

inline void cpu_relax() {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#elif defined(__aarch64__)
  asm volatile("yield");
#endif
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

struct Engine::State {
  Transfer t;
  WireHeader hdr{};
  size_t hdr_done = 0;
  size_t done = 0;      // payload bytes sent / received
  size_t reduced = 0;   // recv-reduce: payload bytes already reduced into dst
  char* stage = nullptr;
  bool complete = false;
  bool armed = false;
};

void Engine::begin(const OpSignature& sig, RedOp combine, Deadline deadline) {
  sig_ = sig;
  combine_ = combine;
  deadline_ = deadline;
  mesh_.set_current_op(sig.seq, op_text());
}

std::string Engine::op_text() const {
  return str_cat(op_kind_name(sig_.kind), " #", sig_.seq,
                 sig_.algo_name && *sig_.algo_name ? str_cat(" (", sig_.algo_name, ")") : std::string());
}

char* Engine::scratch(size_t bytes, int slot) {
  if (static_cast<int>(scratch_.size()) <= slot) scratch_.resize(slot + 1);
  auto& buf = scratch_[slot];
  if (buf.size() < bytes) {
    buf.clear();
    buf.shrink_to_fit();
    buf.resize(bytes);
  }
  return buf.data();
}

void Engine::run(std::initializer_list<Transfer> transfers) {
  std::vector<Transfer> v(transfers);
  run(std::span<Transfer>(v));
}

void Engine::check_header(const State& s) {
  const WireHeader& h = s.hdr;
  const int peer = s.t.peer;
  if (h.magic != kWireMagic) {
    std::string msg = str_cat(op_text(), ": corrupt message from ", mesh_.describe(peer),
                              " (bad magic); the byte streams are out of step");
    mesh_.broadcast_error(Status::kInternal, msg);
    fail(Status::kInternal, msg);
  }
  std::string diff;
  auto add = [&](const std::string& field, const std::string& mine, const std::string& theirs) {
    diff += str_cat(diff.empty() ? "" : "; ", field, " ", mine, " on rank ", mesh_.rank(), " vs ", theirs,
                    " on rank ", peer);
  };
  if (h.kind != uint8_t(sig_.kind)) {
    add("operation", op_kind_name(sig_.kind), op_kind_name(static_cast<OpKind>(h.kind)));
  }
  if (h.seq != sig_.seq) add(sig_.kind == OpKind::kSendRecv ? "message number" : "operation number",
                             str_cat("#", sig_.seq), str_cat("#", h.seq));
  if (h.dtype != uint8_t(sig_.dtype)) {
    add("dtype", dtype_name(sig_.dtype),
        h.dtype < kernels::kNumDTypes ? dtype_name(static_cast<DType>(h.dtype)) : "?");
  }
  if (h.count != sig_.count) add("count", std::to_string(sig_.count), std::to_string(h.count));
  if (h.root != sig_.root) add("root", std::to_string(sig_.root), std::to_string(h.root));
  if (h.redop != uint8_t(sig_.redop)) {
    add("reduce op", redop_name(sig_.redop),
        h.redop < kernels::kNumRedOps ? redop_name(static_cast<RedOp>(h.redop)) : "?");
  }
  if (diff.empty() && h.algo != sig_.algo) {
    add("algorithm id", std::to_string(sig_.algo), std::to_string(h.algo));
    diff += " (is OMNICCL_ALGO set differently on different ranks?)";
  }
  if (diff.empty() && h.bytes != s.t.bytes) {
    add("message size", str_cat(s.t.bytes, " bytes expected"), str_cat(h.bytes, " bytes sent"));
  }
  if (diff.empty() && h.step != s.t.step) add("algorithm step", std::to_string(s.t.step), std::to_string(h.step));
  if (diff.empty()) return;
  std::string msg = str_cat(op_text(), ": calls do not match across ranks: ", diff);
  mesh_.broadcast_error(Status::kMismatch, msg);
  fail(Status::kMismatch, msg);
}

bool Engine::advance(State& s) {
  transport::Link& link = mesh_.link(s.t.peer);
  bool progressed = false;
  if (s.t.kind == Transfer::Kind::kSend) {
    if (s.hdr_done < sizeof(WireHeader)) {
      size_t k = link.try_send(reinterpret_cast<const char*>(&s.hdr) + s.hdr_done, sizeof(WireHeader) - s.hdr_done);
      s.hdr_done += k;
      progressed = k > 0;
      if (s.hdr_done < sizeof(WireHeader)) return progressed;
    }
    while (s.done < s.t.bytes) {
      size_t k = link.try_send(s.t.src + s.done, s.t.bytes - s.done);
      if (k == 0) break;
      s.done += k;
      progressed = true;
    }
    s.complete = s.done == s.t.bytes;
    return progressed;
  }
  if (s.hdr_done < sizeof(WireHeader)) {
    size_t k = link.try_recv(reinterpret_cast<char*>(&s.hdr) + s.hdr_done, sizeof(WireHeader) - s.hdr_done);
    s.hdr_done += k;
    progressed = k > 0;
    if (s.hdr_done < sizeof(WireHeader)) return progressed;
    check_header(s);
  }
  if (s.t.kind == Transfer::Kind::kRecv) {
    while (s.done < s.t.bytes) {
      size_t k = link.try_recv(s.t.dst + s.done, s.t.bytes - s.done);
      if (k == 0) break;
      s.done += k;
      progressed = true;
    }
  } else {
    const size_t esize = dtype_size(sig_.dtype);
    for (;;) {
      size_t staged = s.done - s.reduced;  // bytes waiting in the stage buffer
      size_t want = std::min(kStageBytes - staged, s.t.bytes - s.done);
      size_t k = want > 0 ? link.try_recv(s.stage + staged, want) : 0;
      s.done += k;
      staged += k;
      size_t whole = staged / esize * esize;
      if (whole > 0) {
        kernels::cpu::reduce(s.t.dst + s.reduced, s.t.src + s.reduced, s.stage, whole / esize, sig_.dtype,
                             combine_);
        s.reduced += whole;
        if (staged > whole) std::memmove(s.stage, s.stage + whole, staged - whole);
      }
      if (k > 0) progressed = true;
      if (k == 0 || s.done == s.t.bytes) break;
    }
  }
  s.complete = s.hdr_done == sizeof(WireHeader) &&
               (s.t.kind == Transfer::Kind::kRecv ? s.done == s.t.bytes : s.reduced == s.t.bytes);
  return progressed;
}

void Engine::run(std::span<Transfer> transfers) {
  if (transfers.empty()) return;
  std::vector<State> states(transfers.size());
  size_t n_reduce = 0;
  for (const auto& t : transfers) n_reduce += t.kind == Transfer::Kind::kRecvReduce;
  if (staging_.size() < n_reduce * kStageBytes) staging_.resize(n_reduce * kStageBytes);
  size_t stage_i = 0;
  for (size_t i = 0; i < transfers.size(); ++i) {
    State& s = states[i];
    s.t = transfers[i];
    if (s.t.peer < 0 || s.t.peer >= mesh_.size() || s.t.peer == mesh_.rank()) {
      fail(Status::kInternal, op_text(), ": transfer to invalid peer ", s.t.peer);
    }
    if (s.t.kind == Transfer::Kind::kSend) {
      s.hdr = WireHeader{kWireMagic,  uint8_t(sig_.kind), uint8_t(sig_.dtype), uint8_t(sig_.redop),
                         sig_.algo,   sig_.root,          s.t.step,            sig_.seq,
                         sig_.count,  s.t.bytes};
    }
    if (s.t.kind == Transfer::Kind::kRecvReduce) s.stage = staging_.data() + kStageBytes * stage_i++;
  }

  // (peer, direction) pairs already served this pass: only the first
  // incomplete transfer of each pair may move, keeping messages in order.
  std::vector<uint8_t> busy(size_t(mesh_.size()) * 2);
  std::vector<pollfd> fds;
  std::vector<State*> waiting;
  int idle = 0;
  for (;;) {
    std::fill(busy.begin(), busy.end(), 0);
    bool all_done = true, progressed = false;
    for (auto& s : states) {
      if (s.complete) continue;
      all_done = false;
      size_t key = size_t(s.t.peer) * 2 + (s.t.kind == Transfer::Kind::kSend);
      if (busy[key]) continue;
      busy[key] = 1;
      progressed |= advance(s);
      if (!s.complete) busy[key] = 2;
    }
    if (all_done) return;
    if (progressed) {
      idle = 0;
      continue;
    }
    ++idle;
    if (idle < kSpinPasses) {
      cpu_relax();
      continue;
    }
    if (idle < kSpinPasses + kYieldPasses) {
      sched_yield();
      continue;
    }
    if (mesh_.aborted()) fail(Status::kAborted, op_text(), ": the communicator was aborted");
    // Block: arm every pending transfer's link, re-check, then sleep.
    fds.clear();
    waiting.clear();
    bool ready = false;
    std::fill(busy.begin(), busy.end(), 0);
    for (auto& s : states) {
      if (s.complete) continue;
      bool sending = s.t.kind == Transfer::Kind::kSend;
      size_t key = size_t(s.t.peer) * 2 + sending;
      if (busy[key]) continue;
      busy[key] = 1;
      waiting.push_back(&s);
      mesh_.check_peer(s.t.peer);
      transport::Link& link = mesh_.link(s.t.peer);
      if (link.poll_fd() >= 0) {
        fds.push_back({link.poll_fd(), short(sending ? POLLOUT : POLLIN), 0});
      } else if (!(sending ? link.arm_send_wait() : link.arm_recv_wait())) {
        ready = true;
      }
    }
    if (!ready) {
      if (deadline_.expired()) {
        for (State* s : waiting) mesh_.link(s->t.peer).disarm();
        std::vector<int> peers;
        for (State* s : waiting) {
          if (std::find(peers.begin(), peers.end(), s->t.peer) == peers.end()) peers.push_back(s->t.peer);
        }
        mesh_.fail_timeout(op_text(), sig_.seq, peers);
      }
      mesh_.sleep(fds, deadline_.remaining_ms(200));
    }
    for (State* s : waiting) mesh_.link(s->t.peer).disarm();
    idle = kSpinPasses;  // after a wake-up: yield, do not spin
  }
}

}  // namespace omniccl
