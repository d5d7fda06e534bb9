// Choices measured while operations run: streaming stores, and single copy.
//
// Whether a large receive (and a large local copy into a collective's output)
// is faster with streaming stores depends on more than the machine: on the
// same VM (AMD EPYC, 2 cores, 32 MiB L3 shared with neighbours) they made a
// 2-rank gather of 16 MiB 1.5x faster and a broadcast of 256 MiB 2x faster,
// but a broadcast of 4 MiB 2.7x slower and an all_gather of 16 MiB 1.25x
// slower: what stays in the caches between operations decides, and that
// depends on the operation, its size and what the neighbours do. A rule from
// one probe (the calibration's copy and stream rates) cannot hold for all of
// these, so with OMNICCL_STREAM_STORES=auto each rank measures.
//
// Whether an exchange (all_gather, all_to_all) on shared memory is faster with
// its sends read by reference (process_vm_readv) than through the rings
// varies the same way: on an AMD EPYC VM (family 25), where the calibration's
// rates favoured single copy, 2 ranks took 10-35% longer by reference at 1-16
// MiB for both operations (18 of 18 pairs of jobs), while with 4 ranks on 2
// cores all_to_all was up to 25% faster by reference at 4-16 MiB and
// all_gather was not. Broadcast, gather and scatter went by reference from
// 4 MiB on the calibration's rates there (its transfers of 8 MiB through a
// pair of links were faster split by reference), yet a day later the rings
// were 1.1-2x faster at every size from 4 to 256 MiB (broadcast of 4 MiB 188
// against 408 us, gather of 256 MiB 18.7 against 24.7 ms). So each rank
// measures that too, where the calibration
// left it open (OMNICCL_SHM_SINGLE_COPY unset, process_vm_readv working) and
// every rank of the host has a core of its own (with more ranks than cores,
// durations measured turn about follow the scheduling more than the choice;
// there the calibration's answer holds: Communicator::rechoose).
//
// Each way of running an operation is an arm: bit kArmStream (streaming
// stores) and bit kArmSingleCopy (sends by reference). Operations of a kind
// and size band (a power of two) take the allowed arms one after another,
// each for consecutive operations (what an operation leaves in the caches
// changes the next one's time, so an arm is timed after itself, as when
// held), starting with the calibration's answer (the prior) and ending with
// the arm that differs from it only in streaming stores, until each has
// kTunerFirst durations
// (one for an arm other than the prior that took kTunerLongNs or more and
// lost to the prior, or kTunerClearlySlower times the fastest of an arm
// measured twice);
// then the fastest one is kept if it beats the prior by kTunerMargin (the
// fastest of each arm's last kTunerSamples counts: a first operation that
// warms caches and pages up, and the time a rank waits for a late peer, only
// add). A long arm beside the prior (kTunerLongNs or more) counts its slowest
// instead: the one trial of such an arm that would win is confirmed by a
// second, and it replaces the prior only if both beat it (on an AMD EPYC VM
// whose calls move by 20% with the machine's state, a 2-rank all_gather of
// 256 MiB turned to streaming stores off on one trial of 45.7 ms against the
// prior's 57.5 ms, then took 62-64 ms a call). The band's operations
// kTunerRecheck, 2 kTunerRecheck, ... (powers of two up to kTunerRecheckMax,
// then every kTunerRecheckMax-th) then take one of the others again, in turn,
// and that arm is held from then on if it took kTunerMargin less than the
// fastest of the held arm's last kTunerSamples (durations of the machine's
// present state, as the recheck's is), so a change of what is faster is
// followed; a long recheck that wins is tried again on the band's next
// operation, and held only if that one wins too. An arm changes only how this rank
// stores what it receives or copies and whether its own sends go by reference
// (a receiver takes a message either way), so results never depend on ranks
// agreeing; they call collectives in the same order and start from the same
// prior, so they try the arms together. Speed does depend on it for single
// copy (one rank by reference, the other through the rings, is slower than
// either way), so there a rank follows the arm another holds (`lead`: the
// host's lowest rank, HostChoices). A rank that sends a one-way
// operation through the rings may return before its receiver has read the
// last 2 MiB (the ring's size), while a send by reference returns only once
// read; so where the host's lowest rank times such an operation for a
// choice (measuring()), it first waits for what it sent before to be read,
// and stops the clock only once this operation's sends were read
// (Engine::wait_sends_read), so both ways are timed to the same point.
#pragma once

#include <array>
#include <atomic>
#include <cstdint>
#include <map>
#include <string>

#include "algorithm/op.h"

namespace omniccl {

/// Choices the ranks of a host share for their communicator, published by the
/// host's lowest-ranked member in the block the mesh shares among them
/// (Mesh::host_shared): how operations whose single copy is measured
/// (OpTuner::copy_tuned: broadcast, gather, scatter, all_gather, all_to_all
/// and their v-variants) of each size band (log2 of the operation's bytes)
/// run, as an OpTuner arm (streaming stores, single copy), a row per
/// operation kind (its OpKind value). Ranks that measure on their own settle
/// at times on different ways on a near tie, and sends by reference from one
/// rank mixed with sends through the rings from the other are slower than
/// either way (2 ranks, all_gather of 4 MiB: 1.1 ms against 0.35-0.7 ms), so
/// the others follow the lowest rank. Relaxed: a follower that reads an
/// older choice runs one operation the older way. The block is zeroed when
/// made: every arm starts at 0, "none yet".
struct HostChoices {
  static constexpr int kKinds = 16;
  static constexpr int kBands = 64;
  /// The lowest rank's arm plus one, per operation kind and band (0: none yet).
  std::atomic<uint8_t> arm[kKinds][kBands];
};
static_assert(std::atomic<uint8_t>::is_always_lock_free && sizeof(std::atomic<uint8_t>) == 1,
              "shared choices need lock-free atomics laid out as bytes");
static_assert(int(OpKind::kInternal) < HostChoices::kKinds, "a row of HostChoices per OpKind");

/// Arm bits: the operation stores what it receives or copies past the
/// caches (streaming stores from kStreamMin) ...
inline constexpr unsigned kArmStream = 1;
/// ... and its sends on shared memory may go by reference.
inline constexpr unsigned kArmSingleCopy = 2;
/// Arms 0 .. kTunerArms-1.
inline constexpr int kTunerArms = 4;

/// Operations whose size (the tuning bytes passed to the algorithm choice) is
/// at least this have their streaming stores tuned; smaller ones follow the
/// calibration, which at 1-8 MiB measured as fast or faster than streaming on
/// every machine tried.
inline constexpr uint64_t kTunedStreamMin = uint64_t(8) << 20;
/// Operations of at least this many bytes have single copy tuned: with 2
/// ranks their messages reach the shared-memory link's by-reference size
/// (256 KiB; an all_gather's or all_to_all's bytes are all ranks' blocks).
/// Below 1 MiB too: where cores trade cache lines slowly, copies through
/// the rings slow down by 2-3x while reads by reference do not, so which
/// way wins at 512 KiB depends on the machine's state and is measured.
inline constexpr uint64_t kTunedCopyMin = uint64_t(512) << 10;
/// The longest a timed one-way operation waits for its receivers to read
/// what it sent through the rings, before it starts and before it stops its
/// clock (Engine::wait_sends_read).
inline constexpr uint64_t kTunerDrainNs = uint64_t(20) * 1000 * 1000;
/// Durations kept per arm and band; the fastest of them counts.
inline constexpr int kTunerSamples = 3;
/// Durations of each arm taken before the first decision.
inline constexpr int kTunerFirst = 2;
/// An arm other than the prior whose first duration was at least this long,
/// and not kTunerMargin faster than the prior's fastest, needs no second
/// one: operations this long (32 MiB and more on the VMs
/// measured) vary less between calls than the short ones, and a benchmark
/// or an application that runs a few of them would otherwise spend them all
/// on trying arms (four arms at 256 MiB: eight calls of 20-40 ms). The prior
/// still takes two: its first call warms pages and caches up. One that would
/// win takes a second, and its slowest counts (see the top of this file).
inline constexpr uint64_t kTunerLongNs = uint64_t(2) * 1000 * 1000;
/// Nor does one whose first duration was this many times the fastest of an
/// arm measured kTunerFirst times: a second call would only confirm that it
/// loses (a recheck tries it again later), while a short benchmark, with four
/// arms at 16 MiB, spent three of its ten timed calls on such arms.
inline constexpr double kTunerClearlySlower = 1.25;
/// Another arm must be this much faster to replace the one held.
inline constexpr double kTunerMargin = 1.05;
/// A band's first recheck (an operation that tries an arm not held) is its
/// kTunerRecheck-th operation; the next come at the following powers of
/// two up to kTunerRecheckMax, then every kTunerRecheckMax-th operation.
/// A recheck of an arm that loses can cost several times an operation's
/// time (the first call by reference of an all_to_all maps the peer's pages),
/// and what is faster changes with the machine's state far less often than
/// every 16 operations. The schedule follows the count of operations only, so the
/// ranks of a host try arms on the same operations (see `lead`).
inline constexpr uint64_t kTunerRecheck = 16;
/// The longest gap between rechecks, in operations of the band.
inline constexpr uint64_t kTunerRecheckMax = 256;

class OpTuner {
 public:
  /// Whether operations of `kind` and `bytes` have their streaming stores
  /// tuned (data movement of kTunedStreamMin and more: broadcast, gather,
  /// scatter, all_gather, all_to_all and their v-variants; reductions keep
  /// regular stores).
  static bool stream_tuned(OpKind kind, uint64_t bytes);
  /// Whether `kind` on `bytes` may have its single copy tuned: data movement
  /// of kTunedCopyMin bytes or more (broadcast, gather, scatter, all_gather,
  /// all_to_all and their v-variants).
  static bool copy_tuned(OpKind kind, uint64_t bytes);

  /// Whether an operation of `kind` on `bytes` with `arm` (from choose())
  /// is timed for a choice: the band has not decided yet, or `arm` is not
  /// the one it holds (a recheck).
  bool measuring(OpKind kind, uint64_t bytes, unsigned arm) const;

  /// The arm the next operation of `kind` on `bytes` takes: one of the arms
  /// in `allowed` (a bit per arm), `prior` (one of them) first. `lead`, when
  /// one of them, is the arm another rank holds for the band (the host's
  /// lowest rank, HostChoices): it is taken instead of this rank's own, and
  /// the rechecks go round the others of it, as on that rank.
  unsigned choose(OpKind kind, uint64_t bytes, unsigned allowed, unsigned prior, int lead = -1);

  /// The arm this rank holds for the band, -1 before its first decision.
  int held(OpKind kind, uint64_t bytes) const;

  /// Records how long (ns) that operation took with `arm`. Returns a log line
  /// when the band's arm was chosen or changed by this sample (held() tells
  /// which), else "".
  std::string record(OpKind kind, uint64_t bytes, unsigned arm, uint64_t ns);

 private:
  struct Samples {
    std::array<uint64_t, kTunerSamples> ns{};
    int count = 0;  ///< samples held, at most kTunerSamples
    int next = 0;   ///< slot the next sample goes to
    void add(uint64_t v);
    uint64_t fastest() const;
    uint64_t slowest() const;
  };
  struct Band {
    std::array<Samples, kTunerArms> arm;
    uint64_t ops = 0;         ///< operations chosen for this band
    uint64_t rechecks = 0;    ///< rechecks taken (which other arm is next)
    int best = -1;            ///< the arm held once every allowed one was measured
    unsigned prior = 0;       ///< the calibration's arm
    unsigned allowed = 0;     ///< the arms the operations may take
    int last = -1;            ///< the arm chosen last before the first decision
    int pending = -1;         ///< a long recheck's arm that won once, tried again next
    uint64_t pending_ns = 0;  ///< what that recheck took
    /// Whether arm `a` has durations enough for the first decision:
    /// kTunerFirst, or one for an arm other than the prior that took
    /// kTunerLongNs or more and does not beat the prior, or
    /// kTunerClearlySlower times as long as an arm that has kTunerFirst.
    bool settled(unsigned a) const;
    /// Whether arm `a` is one beside the prior whose durations are long
    /// (kTunerLongNs or more): its slowest counts.
    bool long_challenger(unsigned a) const;
    /// The duration arm `a` counts with in the first decision: its fastest,
    /// or its slowest for a long_challenger().
    uint64_t counted(unsigned a) const;
  };
  static uint32_t key(OpKind kind, uint64_t bytes);
  std::map<uint32_t, Band> bands_;
};

}  // namespace omniccl
