#include "tuning/stream_tuner.h"

#include <algorithm>
#include <bit>

#include "common/status.h"

namespace omniccl {

namespace {

/// "8 MiB" for a band's lower bound (a power of two of at least 1 MiB).
std::string band_name(uint32_t log2) {
  return str_cat(uint64_t(1) << (log2 - 20), "-", uint64_t(2) << (log2 - 20), " MiB");
}

std::string micros(uint64_t ns) { return str_cat(ns / 1000, " us"); }

}  // namespace

void StreamTuner::Arm::add(uint64_t v) {
  ns[size_t(next)] = v;
  next = (next + 1) % kTunerSamples;
  count = std::min(count + 1, kTunerSamples);
}

uint64_t StreamTuner::Arm::fastest() const { return *std::min_element(ns.begin(), ns.begin() + count); }

bool StreamTuner::tuned(OpKind kind, uint64_t bytes) {
  const bool moves = is_one_way(kind) || kind == OpKind::kAllGather || kind == OpKind::kAllGatherV ||
                     kind == OpKind::kAllToAll || kind == OpKind::kAllToAllV;
  return moves && bytes >= kTunedStreamMin;
}

uint32_t StreamTuner::key(OpKind kind, uint64_t bytes) {
  return uint32_t(kind) << 8 | uint32_t(std::bit_width(bytes) - 1);
}

bool StreamTuner::choose(OpKind kind, uint64_t bytes, bool prior) {
  Band& b = bands_[key(kind, bytes)];
  ++b.ops;
  b.prior = prior ? 1 : 0;
  const int first = prior ? 1 : 0;
  if (b.best == -1) return b.arm[first].count <= b.arm[1 - first].count ? prior : !prior;
  const bool streamed = b.best == 1;
  return b.ops % kTunerRecheck == 0 ? !streamed : streamed;
}

std::string StreamTuner::record(OpKind kind, uint64_t bytes, bool streamed, uint64_t ns) {
  const uint32_t k = key(kind, bytes);
  Band& b = bands_[k];
  b.arm[streamed ? 1 : 0].add(ns);
  if (b.arm[0].count < kTunerFirst || b.arm[1].count < kTunerFirst) return {};
  const uint64_t without = b.arm[0].fastest(), with = b.arm[1].fastest();
  // The choice held (at first the prior) changes only for one kTunerMargin
  // faster, so near-ties do not flip it back and forth.
  const int held = b.best != -1 ? b.best : b.prior;
  const uint64_t held_ns = held == 1 ? with : without, other_ns = held == 1 ? without : with;
  const int best = double(other_ns) * kTunerMargin < double(held_ns) ? 1 - held : held;
  if (best == b.best) return {};
  const bool changed = b.best != -1;
  b.best = best;
  return str_cat("streaming stores for ", op_kind_name(kind), " of ", band_name(k & 0xff), ": ",
                 best == 1 ? "on" : "off", changed ? " from now" : "", " (fastest ", micros(with), " with them of ",
                 b.arm[1].count, " operation(s), ", micros(without), " without of ", b.arm[0].count,
                 "; measured again every ", kTunerRecheck, "th operation)");
}

}  // namespace omniccl
