// One-way transfers timed between two threads of this process, as two ranks
// of one host make them: the link probes of the calibrations
// (copy_calibration.h: shared-memory links; tcp_calibration.h: loopback TCP).
#pragma once

#include <functional>
#include <string>
#include <vector>

namespace omniccl {

/// What one call of a side's step did.
enum class ProbeStep { kIdle, kMoved, kDone };

/// A side of transfer k (1, 2, ...): `first` is true at the transfer's first
/// call, when the side sets its state up afresh; returns kDone once its part
/// is complete. May throw.
using ProbeSide = std::function<ProbeStep(int k, bool first)>;

/// Times `count` one-way transfers from this thread (`send`) to a helper
/// thread (`recv`). Both spin on their step and yield the core after a step
/// that moved nothing (for a host with one free core). seconds[k - 1]: from
/// the first send call of transfer k to the end of its receive. False, with
/// *error, when a step threw (its text) or a transfer took longer than 2 s.
bool time_one_way(int count, const ProbeSide& send, const ProbeSide& recv, std::vector<double>* seconds,
                  std::string* error);

}  // namespace omniccl
