// Streaming stores chosen while operations run.
//
// Whether a large receive (and a large local copy into a collective's output)
// is faster with streaming stores depends on more than the machine: on the
// same VM (AMD EPYC, 2 cores, 32 MiB L3 shared with neighbours) they made a
// 2-rank gather of 16 MiB 1.5x faster and a broadcast of 256 MiB 2x faster,
// but a broadcast of 4 MiB 2.7x slower and an all_gather of 16 MiB 1.25x
// slower: what stays in the caches between operations decides, and that
// depends on the operation, its size and what the neighbours do. A rule from
// one probe (the calibration's copy and stream rates) cannot hold for all of
// these, so with OMNICCL_STREAM_STORES=auto each rank measures. Operations of
// a kind and size band (a power of two) alternate between the calibration's
// answer (the prior) and the other choice, starting with the prior, until
// each has kTunerFirst durations; then the faster one is kept (the fastest of
// the last kTunerSamples of each counts: a first operation that warms caches
// and pages up, and the time a rank waits for a late peer, only add), and every kTunerRecheck-th operation of the band
// takes the other choice again, so a change of what is faster is followed. The choice held changes only for one
// kTunerMargin faster. It is local to the rank (streaming or not changes only how this rank stores what it receives or
// copies), so ranks need not agree on it; they call collectives in the same
// order and start from the same prior, so they try the choices together.
#pragma once

#include <array>
#include <cstdint>
#include <map>
#include <string>

#include "algorithm/engine.h"

namespace omniccl {

/// Operations whose size (the tuning bytes passed to the algorithm choice) is
/// at least this are tuned; smaller ones follow the calibration, which at
/// 1-8 MiB measured as fast or faster than streaming on every machine tried.
inline constexpr uint64_t kTunedStreamMin = uint64_t(8) << 20;
/// Durations kept per choice and band; the fastest of them counts.
inline constexpr int kTunerSamples = 3;
/// Durations of each choice taken before the first decision.
inline constexpr int kTunerFirst = 2;
/// The other choice must be this much faster to replace the one held.
inline constexpr double kTunerMargin = 1.05;
/// Every this many operations of a band try the choice not taken.
inline constexpr uint64_t kTunerRecheck = 16;

class StreamTuner {
 public:
  /// Whether operations of `kind` and `bytes` are tuned (data movement of
  /// kTunedStreamMin and more: broadcast, gather, scatter, all_gather,
  /// all_to_all and their v-variants; reductions keep regular stores).
  static bool tuned(OpKind kind, uint64_t bytes);

  /// Whether the next operation of `kind` on `bytes` (tuned()) uses
  /// streaming stores; `prior`: the calibration's answer, taken first.
  bool choose(OpKind kind, uint64_t bytes, bool prior);

  /// Records how long (ns) that operation took with `streamed`. Returns a log
  /// line when the band's choice was made or changed by this sample, else "".
  std::string record(OpKind kind, uint64_t bytes, bool streamed, uint64_t ns);

 private:
  struct Arm {
    std::array<uint64_t, kTunerSamples> ns{};
    int count = 0;  ///< samples held, at most kTunerSamples
    int next = 0;   ///< slot the next sample goes to
    void add(uint64_t v);
    uint64_t fastest() const;
  };
  struct Band {
    Arm arm[2];        ///< [0] regular stores, [1] streaming
    uint64_t ops = 0;  ///< operations chosen for this band
    int best = -1;     ///< the arm held once both were measured
    int prior = 0;     ///< the calibration's arm
  };
  static uint32_t key(OpKind kind, uint64_t bytes);
  std::map<uint32_t, Band> bands_;
};

}  // namespace omniccl
