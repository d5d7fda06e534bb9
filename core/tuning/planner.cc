#include "tuning/planner.h"

#include <algorithm>
#include <atomic>
#include <bit>

#include "common/log.h"

namespace omniccl {

namespace {

/// The word of `kind` on `bytes` among the host's shared choices.
std::atomic<uint8_t>& shared_arm(HostChoices& h, OpKind kind, uint64_t bytes) {
  const int band = std::min(int(std::bit_width(bytes)) - 1, HostChoices::kBands - 1);
  return h.arm[int(kind)][band];
}

}  // namespace

const Plan& Planner::replan(OpKind kind, uint64_t bytes) {
  const Plan& base = choice_.base;
  if (kind != base.kind || bytes != base.bytes || base.algo == Algo::kNone) rechoose(kind, bytes);
  if (choice_.tuned_arms == 0) return choice_.base;
  plan_ = choice_.base;
  arm_ = next_arm();
  plan_.single_copy = (arm_ & kArmSingleCopy) != 0;
  plan_.stream_min = (arm_ & kArmStream) != 0 ? kStreamMin : 0;
  plan_.measured = true;
  plan_.until_read = choice_.shared && is_one_way(kind) && setup_.host_leader && tuner_.measuring(kind, bytes, arm_);
  return plan_;
}

void Planner::rechoose(OpKind kind, uint64_t bytes) {
  Choice c;
  Plan& p = c.base;
  p.kind = kind;
  p.bytes = bytes;
  p.algo = choose_algo(kind, bytes, setup_.size, setup_.algo_override, setup_.any_host_oversubscribed);
  p.entry = &find_algorithm(kind, p.algo);
  p.algo_name = algo_name(p.algo);
  const auto& copy = setup_.copy;
  p.single_copy =
      copy && copy->allows(kind, bytes, setup_.split_copy) && single_copy_for(kind, bytes, setup_.oversubscribed);
  p.split_copy = setup_.split_copy && is_one_way(kind);
  p.stream_min = copy ? copy->stream_min : 0;
  // What varies between the arms this operation measures; the rest stays
  // as the prior has it.
  unsigned varies = 0;
  if (copy && copy->stream_tuned && OpTuner::stream_tuned(kind, bytes)) varies |= kArmStream;
  // Single copy (broadcast, gather, scatter, all_gather, all_to_all of
  // kTunedCopyMin and more, where single_copy_for lets them go by reference)
  // is measured only where every rank of this host has a core: with more
  // ranks than cores, a rank's durations follow how the ranks were scheduled
  // more than the choice (4 ranks on 2 cores, all_to_all of 1 MiB: by
  // reference took 610-1180 us while being measured against the rings, turn
  // about, and 330 us as the only choice).
  if (copy && copy->copy_tuned && OpTuner::copy_tuned(kind, bytes) && !setup_.oversubscribed &&
      single_copy_for(kind, bytes, false) && setup_.host != nullptr) {
    varies |= kArmSingleCopy;
    c.shared = true;
  }
  choice_ = c;
  if (varies == 0) return;
  const unsigned prior = prior_arm();
  for (unsigned a = 0; a < unsigned(kTunerArms); ++a) {
    if ((a & ~varies) == (prior & ~varies)) choice_.tuned_arms |= 1u << a;
  }
}

unsigned Planner::prior_arm() const {
  const Plan& p = choice_.base;
  return (p.stream_min > 0 ? kArmStream : 0) | (p.single_copy ? kArmSingleCopy : 0);
}

unsigned Planner::next_arm() {
  const Plan& p = choice_.base;
  int lead = -1;
  if (choice_.shared && !setup_.host_leader) lead = int(shared_arm(*setup_.host, p.kind, p.bytes).load()) - 1;
  return tuner_.choose(p.kind, p.bytes, choice_.tuned_arms, prior_arm(), lead);
}

void Planner::took(uint64_t ns) {
  std::string line = tuner_.record(plan_.kind, plan_.bytes, arm_, ns);
  if (line.empty()) return;  // the arm held did not change
  if (choice_.shared && setup_.host_leader) {
    shared_arm(*setup_.host, plan_.kind, plan_.bytes).store(uint8_t(tuner_.held(plan_.kind, plan_.bytes) + 1));
  }
  OCCL_LOG(kInfo, kTuning, line);
}

}  // namespace omniccl
