// The planner: the one place that decides how each operation runs, as a plan
// the collective applies to the engine. A plan holds the algorithm (the
// default table or OMNICCL_ALGO: choose_algo), whether sends may go by
// reference and from what size receives stream (the copy calibration and
// single_copy_for), and, where those are measured, the arm this operation
// tries (OpTuner), following the arm the host's lowest rank holds where the
// ranks of a host must agree (HostChoices, in the block the mesh shares).
#pragma once

#include <cstdint>
#include <optional>

#include "algorithm/op.h"
#include "algorithm/registry.h"
#include "tuning/copy_calibration.h"
#include "tuning/op_tuner.h"
#include "tuning/tuning.h"

namespace omniccl {

/// How one operation runs.
struct Plan {
  OpKind kind = OpKind::kBarrier;
  uint64_t bytes = 0;  ///< per rank, as the collective sized it for tuning
  Algo algo = Algo::kNone;
  const AlgoEntry* entry = nullptr;  ///< the algorithm's row
  const char* algo_name = "";
  bool single_copy = false;  ///< sends may go by reference
  /// Receives by reference may split their copies with the senders: one-way
  /// operations only (in an exchange both cores are busy with their own
  /// receives already), unless OMNICCL_SHM_SPLIT_COPY=0.
  bool split_copy = false;
  uint64_t stream_min = 0;  ///< receives of this many bytes and more stream past the caches (0: none)
  /// This operation is timed for a choice: report its time with
  /// Planner::took.
  bool measured = false;
  /// ... on the host's lowest rank, between going by reference or not:
  /// bracket it with Engine::wait_sends_read, so that sends through the
  /// rings count until they were read, as sends by reference do.
  bool until_read = false;
};

/// What a planner knows of its communicator.
struct PlannerSetup {
  int size = 1;
  AlgoOverride algo_override;
  /// What the communicator's shared-memory links may move by reference
  /// (nullopt: no shared memory possible).
  std::optional<SingleCopyChoice> copy;
  bool split_copy = true;                ///< OMNICCL_SHM_SPLIT_COPY
  bool oversubscribed = false;           ///< this host's ranks outnumber its cores
  bool any_host_oversubscribed = false;  ///< some host's do (the same on every rank)
  /// Shared with the ranks of this host linked through shared memory
  /// (Mesh::host_shared); null: none.
  HostChoices* host = nullptr;
  bool host_leader = false;  ///< this rank writes `host`; the others follow it
};

class Planner {
 public:
  explicit Planner(PlannerSetup setup) : setup_(std::move(setup)) {}
  /// The plan of the next operation of `kind` on `bytes` per rank (what
  /// varies with neither is worked out, and logged, once for a loop of one
  /// operation). Valid until the next call. Call only from the thread that
  /// runs operations.
  const Plan& plan(OpKind kind, uint64_t bytes) {
    // A loop of one operation that measures nothing: the plan as it was.
    const Plan& base = choice_.base;
    if (kind == base.kind && bytes == base.bytes && base.algo != Algo::kNone && choice_.tuned_arms == 0) [[likely]] {
      return base;
    }
    return replan(kind, bytes);
  }
  /// The operation planned last, with Plan::measured, took `ns`: logs a
  /// changed choice at INFO; the host's lowest rank publishes the arm it
  /// holds.
  void took(uint64_t ns);
  const AlgoOverride& algo_override() const { return setup_.algo_override; }

 private:
  /// What depends only on (kind, bytes): the plan before an arm is chosen.
  struct Choice {
    Plan base;
    /// The arms (kArmStream, kArmSingleCopy bits) this operation measures,
    /// a bit per arm (0: none: `base` as it is).
    unsigned tuned_arms = 0;
    /// Single copy is among them: the ranks of this host take the arm their
    /// lowest rank holds once it has decided.
    bool shared = false;
  };
  void rechoose(OpKind kind, uint64_t bytes);
  /// plan() past its fast case: another kind or size, or an arm to choose.
  const Plan& replan(OpKind kind, uint64_t bytes);
  /// The prior arm: the calibrated streaming stores and single copy.
  unsigned prior_arm() const;
  unsigned next_arm();

  PlannerSetup setup_;
  Choice choice_;
  Plan plan_;
  unsigned arm_ = 0;  ///< plan_'s arm, when measured
  OpTuner tuner_;
};

}  // namespace omniccl
