#include "tuning/op_tuner.h"

#include <algorithm>
#include <bit>

#include "common/status.h"

namespace omniccl {

namespace {

/// "8-16 MiB" or "512 KiB-1 MiB" for a band's lower bound (a power of two
/// of at least 1 KiB).
std::string band_name(uint32_t log2) {
  if (log2 >= 20) return str_cat(uint64_t(1) << (log2 - 20), "-", uint64_t(2) << (log2 - 20), " MiB");
  return str_cat(uint64_t(1) << (log2 - 10), " KiB-",
                 log2 == 19 ? std::string("1 MiB") : str_cat(uint64_t(2) << (log2 - 10), " KiB"));
}

/// An arm in words, naming only what the allowed arms vary
/// ("streaming stores on, single copy off").
std::string arm_name(unsigned arm, unsigned allowed) {
  unsigned varies = 0;
  for (unsigned a = 0; a < unsigned(kTunerArms); ++a) {
    if ((allowed >> a & 1) != 0) varies |= a ^ arm;
  }
  std::string text;
  if ((varies & kArmStream) != 0) text = str_cat("streaming stores ", (arm & kArmStream) != 0 ? "on" : "off");
  if ((varies & kArmSingleCopy) != 0) {
    text += str_cat(text.empty() ? "" : ", ", "single copy ", (arm & kArmSingleCopy) != 0 ? "on" : "off");
  }
  return text;
}

/// Whether a band's `ops`-th operation (counted from 1) is a recheck:
/// kTunerRecheck and the powers of two after it up to kTunerRecheckMax, then
/// every kTunerRecheckMax-th.
bool recheck_at(uint64_t ops) {
  return ops >= kTunerRecheck && ops % std::min(std::bit_floor(ops), kTunerRecheckMax) == 0;
}

/// How the log lines name the rechecks' schedule.
std::string recheck_words() {
  std::string at;
  for (uint64_t op = kTunerRecheck; op <= kTunerRecheckMax; op *= 2) at += str_cat(op, ", ");
  at.resize(at.size() - 2);
  return str_cat("measured again at the band's operations ", at, " and every ", kTunerRecheckMax, "th after");
}

}  // namespace

void OpTuner::Samples::add(uint64_t v) {
  ns[size_t(next)] = v;
  next = (next + 1) % kTunerSamples;
  count = std::min(count + 1, kTunerSamples);
}

uint64_t OpTuner::Samples::fastest() const { return *std::min_element(ns.begin(), ns.begin() + count); }

uint64_t OpTuner::Samples::slowest() const { return *std::max_element(ns.begin(), ns.begin() + count); }

bool OpTuner::Band::long_challenger(unsigned a) const {
  return a != prior && arm[a].count > 0 && arm[a].fastest() >= kTunerLongNs;
}

uint64_t OpTuner::Band::counted(unsigned a) const { return long_challenger(a) ? arm[a].slowest() : arm[a].fastest(); }

bool OpTuner::Band::settled(unsigned a) const {
  const Samples& x = arm[a];
  if (x.count >= kTunerFirst) return true;
  if (a == prior || x.count == 0) return false;
  if (long_challenger(a)) {
    // One trial settles it if it loses to the prior; one that would win is
    // confirmed by a second.
    const Samples& p = arm[prior];
    return p.count > 0 && !(double(x.fastest()) * kTunerMargin < double(p.fastest()));
  }
  for (unsigned o = 0; o < unsigned(kTunerArms); ++o) {
    if ((allowed >> o & 1) != 0 && arm[o].count >= kTunerFirst &&
        double(x.fastest()) > kTunerClearlySlower * double(arm[o].fastest())) {
      return true;
    }
  }
  return false;
}

namespace {

/// Operations that move data without reducing it: broadcast, gather,
/// scatter, all_gather, all_to_all and their v-variants.
bool moves_data(OpKind kind) {
  return is_one_way(kind) || kind == OpKind::kAllGather || kind == OpKind::kAllGatherV || kind == OpKind::kAllToAll ||
         kind == OpKind::kAllToAllV;
}

}  // namespace

bool OpTuner::stream_tuned(OpKind kind, uint64_t bytes) { return moves_data(kind) && bytes >= kTunedStreamMin; }

bool OpTuner::copy_tuned(OpKind kind, uint64_t bytes) { return moves_data(kind) && bytes >= kTunedCopyMin; }

bool OpTuner::measuring(OpKind kind, uint64_t bytes, unsigned arm) const {
  auto it = bands_.find(key(kind, bytes));
  return it == bands_.end() || it->second.best != int(arm);
}

uint32_t OpTuner::key(OpKind kind, uint64_t bytes) { return uint32_t(kind) << 8 | uint32_t(std::bit_width(bytes) - 1); }

unsigned OpTuner::choose(OpKind kind, uint64_t bytes, unsigned allowed, unsigned prior, int lead) {
  Band& b = bands_[key(kind, bytes)];
  ++b.ops;
  b.prior = prior;
  b.allowed = allowed;
  // A long recheck that won once is tried again.
  if (b.pending >= 0 && (allowed >> b.pending & 1) != 0) return unsigned(b.pending);
  b.pending = -1;
  const int held = lead >= 0 && lead < kTunerArms && (allowed >> lead & 1) != 0 ? lead : b.best;
  if (held == -1) {
    // An arm keeps the operations until it is settled: what an operation
    // leaves in the caches changes how long the next one takes (streaming
    // stores leave them to it), so an arm's second duration is taken after
    // an operation of its own, as when the arm is held. (Taken in turn, a
    // 2-rank gather of 16 MiB on an AMD EPYC VM measured streaming stores
    // at 477-780 us, one or two trials, against 401-502 us a call held.)
    if (b.last >= 0 && (allowed >> b.last & 1) != 0 && !b.settled(unsigned(b.last))) return unsigned(b.last);
    // Then, of the allowed arms still to be measured, the one with the
    // fewest durations: the prior first, then the arm that changes both
    // choices, the one that changes single copy, and last the one that
    // changes only streaming stores (the nearest to the prior, the most
    // often held after it), so that the exploration's last operations are
    // the likeliest to be held.
    int pick = -1;
    for (unsigned i = 0; i < unsigned(kTunerArms); ++i) {
      const unsigned a = prior ^ ((kTunerArms - i) % kTunerArms);
      if ((allowed >> a & 1) == 0 || b.settled(a)) continue;
      if (pick == -1 || b.arm[a].count < b.arm[unsigned(pick)].count) pick = int(a);
    }
    b.last = pick == -1 ? int(prior) : pick;
    return unsigned(b.last);
  }
  if (!recheck_at(b.ops)) return unsigned(held);
  // A recheck: the next of the other allowed arms, in turn.
  unsigned others[kTunerArms];
  unsigned n = 0;
  for (unsigned a = 0; a < unsigned(kTunerArms); ++a) {
    if ((allowed >> a & 1) != 0 && a != unsigned(held)) others[n++] = a;
  }
  return n == 0 ? unsigned(held) : others[b.rechecks++ % n];
}

int OpTuner::held(OpKind kind, uint64_t bytes) const {
  auto it = bands_.find(key(kind, bytes));
  return it == bands_.end() ? -1 : it->second.best;
}

std::string OpTuner::record(OpKind kind, uint64_t bytes, unsigned arm, uint64_t ns) {
  const uint32_t k = key(kind, bytes);
  Band& b = bands_[k];
  b.arm[arm].add(ns);
  int best = b.best;
  const int confirming = b.pending;
  b.pending = -1;
  if (b.best == -1) {
    // The first decision, once every allowed arm is measured (settled()):
    // the fastest (counted()), if it beats the prior by kTunerMargin.
    unsigned fastest = b.prior;
    for (unsigned a = 0; a < unsigned(kTunerArms); ++a) {
      if ((b.allowed >> a & 1) == 0) continue;
      if (!b.settled(a)) return {};
      if (b.counted(a) < b.counted(fastest)) fastest = a;
    }
    const bool wins = double(b.counted(fastest)) * kTunerMargin < double(b.arm[b.prior].fastest());
    best = int(wins ? fastest : b.prior);
  } else if (arm != unsigned(b.best) && double(ns) * kTunerMargin < double(b.arm[unsigned(b.best)].fastest())) {
    // A recheck: its one duration against the held arm's latest ones (the
    // held arm runs all other operations of the band, so its durations are
    // of the machine's present state, like the recheck's; durations the
    // other arms kept from earlier are not compared). A long one is tried
    // again first, and turns the band only if it wins twice.
    if (ns >= kTunerLongNs && confirming != int(arm)) {
      b.pending = int(arm);
      b.pending_ns = ns;
      return {};
    }
    const std::string took =
        confirming == int(arm) ? str_cat(b.pending_ns / 1000, " and ", ns / 1000) : str_cat(ns / 1000);
    const std::string line = str_cat(op_kind_name(kind), " of ", band_name(k & 0xff), ": ", arm_name(arm, b.allowed),
                                     " from now (it took ", took, " us, ", arm_name(unsigned(b.best), b.allowed),
                                     " at best ", b.arm[unsigned(b.best)].fastest() / 1000, " us of its last ",
                                     b.arm[unsigned(b.best)].count, "; ", recheck_words(), ")");
    b.best = int(arm);
    return line;
  }
  if (best == b.best) return {};
  b.best = best;
  std::string others;
  for (unsigned a = 0; a < unsigned(kTunerArms); ++a) {
    if ((b.allowed >> a & 1) == 0 || a == unsigned(best)) continue;
    others += str_cat("; ", arm_name(a, b.allowed), " ", b.counted(a) / 1000, " us of ", b.arm[a].count);
  }
  return str_cat(op_kind_name(kind), " of ", band_name(k & 0xff), ": ", arm_name(unsigned(best), b.allowed), " (",
                 b.long_challenger(unsigned(best)) ? "slowest " : "fastest ", b.counted(unsigned(best)) / 1000,
                 " us of ", b.arm[best].count, " operation(s)", others, "; ", recheck_words(), ")");
}

}  // namespace omniccl
