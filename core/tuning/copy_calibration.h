// Copy-mechanism calibration: does shared memory move large payloads by
// reference (single copy, process_vm_readv) or through the two-copy ring?
//
// Which is faster depends on the machine (page pinning under some
// hypervisors and kernels makes process_vm_readv several times slower than
// memcpy), so the first communicator on a host measures both for some tens
// of milliseconds and caches the result per host and kernel in a small file
// (OMNICCL_SHM_CALIBRATION_FILE; default under XDG_RUNTIME_DIR, else /tmp).
// Later communicators and jobs read the file. OMNICCL_SHM_SINGLE_COPY=0/1
// skips all of it; OMNICCL_SHM_CALIBRATION=force measures again.
//
// Words used here:
//   link probe  one-way messages of 1 and 8 MiB between two threads over a
//               real pair of shared-memory links (ShmLink), through the ring,
//               by reference, and by reference with split copies (the sender
//               writes chunks into the receiver's buffer while it reads the
//               others): what two ranks of this host get; decides one-way
//               operations, per size band (one_way_from);
//   readv rate  bytes per second of process_vm_readv (what a receiver does
//               per by-reference payload), timed per 256 KiB, fastest of 32;
//   ring rate   bytes per second through the ring: the sender copies a chunk
//               into shared memory while the receiver copies the previous
//               one out, on two cores at once, so the ring moves a chunk in
//               the time of one of its two copies (timed as both copies of
//               256 KiB through a shared staging area, fastest of 32, halved);
//   one-way     broadcast, gather, scatter (and v-variants): one side sends,
//               the other receives, so the ring's two copies run on two cores
//               and single copy must beat the ring in the link probe;
//   exchange    all_gather, all_to_all (and v-variants): every rank sends and
//               receives at once, both cores already busy, so the ring's
//               second copy costs time the exchange needs and single copy
//               pays off from a lower rate (kExchangeShare of the ring's).
//   copy rate   bytes per second of memcpy of one cache-resident 64 KiB
//               record after another into a destination far larger than
//               the caches, as a receiver copies a large payload out of the
//               ring (stream_probe_bytes, fastest of a few passes);
//   stream rate the same with streaming stores (kernels/cpu/stream.h). Where
//               it beats the copy rate by kStreamGain, payloads of
//               kStreamMin bytes and more received through the rings, and
//               local copies of such blocks into a collective's output, are
//               stored that way (OMNICCL_STREAM_STORES=0/1 overrides).
#pragma once

#include <optional>
#include <string>

#include "algorithm/op.h"

namespace omniccl {

/// Payload sizes of the one-way transfers the calibration times through a
/// real pair of shared-memory links (CopyRates::link_*): a mid-size payload
/// that stays in the caches, and one that does not.
inline constexpr size_t kLinkProbeBytes[2] = {size_t(1) << 20, size_t(8) << 20};
/// One-way operations go by reference from this payload size up where only
/// the larger probe found that faster than the ring.
inline constexpr uint64_t kOneWayLargeMin = uint64_t(4) << 20;
/// A payload-size threshold that no payload reaches: never by reference.
inline constexpr uint64_t kNever = ~uint64_t(0);

/// Measured rates, in GB/s (10^9 B/s).
struct CopyRates {
  double readv_gbps = 0;
  double ring_gbps = 0;
  double copy_gbps = 0;    ///< regular stores, out of the caches
  double stream_gbps = 0;  ///< streaming stores, out of the caches
  /// One message of kLinkProbeBytes[i] from one thread to another over a
  /// pair of shared-memory links, as two ranks of this host would send it:
  /// through the ring (two copies, one on each core), by reference (the
  /// receiver reads it with process_vm_readv), and by reference with the
  /// copy split between receiver and sender (both cores copy). Fastest of a
  /// few, payload bytes over the time from the first send to the receive's end.
  double link_ring_gbps[2] = {0, 0};
  double link_ref_gbps[2] = {0, 0};
  double link_split_gbps[2] = {0, 0};
};

/// Streaming stores are used from this payload size (a transfer's bytes) up:
/// the caches of the machines measured hold a few MiB, and a payload of this
/// size no longer stays in them across an operation. On the development VM
/// (AMD EPYC, 2 cores, 1 MiB L2, 8 MiB L3) copies into a 4 MiB destination
/// took 0.20 ms with streaming stores vs 0.35 ms, 8 MiB 0.67 vs 1.13 ms,
/// 32 MiB 3.7 vs 5.0 ms; at 1-2 MiB streaming was 5-20% slower.
inline constexpr uint64_t kStreamMin = uint64_t(4) << 20;
/// Bytes copied to measure the copy and stream rates: twice the last-level
/// cache (`last_level_cache` bytes; 0 when unknown), at least 16 MiB and at
/// most 128 MiB, so that the stores go past the caches as a large
/// payload's do. (A fixed 16 MiB stayed in a 32 MiB L3: regular stores
/// measured 56 GB/s into it and 43 GB/s into 64 MiB, streaming ones 38-40.)
size_t stream_probe_bytes(size_t last_level_cache);
/// The size of cpu0's largest cache (sysfs: the highest-level cache of
/// /sys/devices/system/cpu/cpu0/cache), or 0 where it cannot be read.
size_t last_level_cache_bytes();
/// Streaming stores must beat regular ones by this factor to be used.
inline constexpr double kStreamGain = 1.1;

/// Single copy pays off for exchanges once process_vm_readv reaches this
/// share of the ring rate. The simple model says 0.5 (the ring costs each core
/// two copies per byte); the ring's record hand-offs cost more than that: on
/// the development VM (calibrated share 0.44-0.61) single copy was about 2x
/// faster for all_to_all at 1 MiB, and all_gather at 16 MiB went either way.
inline constexpr double kExchangeShare = 0.35;

// One-way operations (broadcast, gather, scatter) go by reference only where
// the calibration's transfers through a real pair of links found that faster
// than the ring (CopyRates::link_*), not where process_vm_readv alone is as
// fast as the ring's copies timed in one thread: on a VM where it was (readv
// 10.9, ring 18.9 GB/s), the ring was still faster from 256 KiB to 16 MiB,
// since the receiver's system call and page pinning, and the root idle until
// the copy is done, cost more than the ring's second copy on the other core.

/// The decision for this host, and why (one line for the log).
struct SingleCopyChoice {
  /// Broadcast, gather, scatter (+ v) go by reference for payloads of this
  /// many bytes and more (kNever: not at all), with receivers copying alone
  /// (OMNICCL_SHM_SPLIT_COPY=0) or splitting the copy with their senders.
  uint64_t one_way_min = kNever;
  uint64_t one_way_split_min = kNever;
  /// all_gather, all_to_all (+ v) may go by reference: on every host,
  /// whether or not its ranks outnumber its cores. Which way is faster where
  /// ranks outnumber cores differs between machines (by reference won on one
  /// VM, the rings by 1.3-1.6x on another), so the calibration decides there
  /// too rather than a fixed rule.
  bool exchange = false;
  std::string reason;  ///< e.g. "single copy off: process_vm_readv 2.1 GB/s < ring 6.3 GB/s (...)"
  /// Payloads of this many bytes and more received through the rings (and
  /// local copies of such blocks) are stored past the caches (0: never); see
  /// Engine::set_stream_min.
  uint64_t stream_min = 0;
  std::string stream_reason;  ///< the part of `reason` about streaming stores
  /// OMNICCL_STREAM_STORES=auto: operations OpTuner::stream_tuned() measure
  /// which is faster while they run, starting from stream_min's answer.
  bool stream_tuned = false;
  /// OMNICCL_SHM_SINGLE_COPY unset and process_vm_readv working: operations
  /// OpTuner::copy_tuned() accepts (broadcast, gather, scatter, all_gather,
  /// all_to_all) measure single copy against the rings while they run,
  /// starting from the answer above (one_way_min or one_way_split_min, or
  /// `exchange`).
  bool copy_tuned = false;
  /// Whether shared-memory links should offer to read by reference at all.
  bool any() const { return one_way_min != kNever || one_way_split_min != kNever || exchange || copy_tuned; }
  /// Whether operation `kind` on `bytes` may move payloads by reference
  /// (reductions and point-to-point never do; see also single_copy_for);
  /// `split`: receivers split the copies with their senders
  /// (OMNICCL_SHM_SPLIT_COPY).
  bool allows(OpKind kind, uint64_t bytes, bool split) const;
};

/// The decision that follows from measured rates (`how` ends the reason).
SingleCopyChoice choice_from_rates(const CopyRates& rates, const std::string& how);

/// The streaming-store threshold that follows from measured rates: kStreamMin
/// where stream_gbps >= kStreamGain x copy_gbps, else 0.
uint64_t stream_min_from_rates(const CopyRates& rates);

/// Decides whether shared-memory links of communicators created by this
/// process may move large payloads by reference. Order: `forced` (the value of
/// OMNICCL_SHM_SINGLE_COPY=0/1, or occl_config_t's) wins; else the result remembered by this process; else a valid
/// cache file for this host and kernel (unless OMNICCL_SHM_CALIBRATION=force); else a measurement (a few ms), written
/// to the cache atomically. Ranks of one host serialize on a lock file next to the cache, so one measures and the
/// others read its result. Never throws for cache or lock trouble (logged,
/// then measured without caching); throws Error(kInvalidArgument) for a bad
/// setting value. Logs the choice at INFO (subsystem TRANSPORT).
/// stream_min follows OMNICCL_STREAM_STORES: 0 never, 1 from kStreamMin,
/// auto (the default) from the same calibration (measured even when `forced`).
SingleCopyChoice decide_single_copy(std::optional<bool> forced);

/// The cache file used: OMNICCL_SHM_CALIBRATION_FILE, else
/// $XDG_RUNTIME_DIR/omniccl-shm-calibration, else /tmp/omniccl-shm-calibration-<uid>.
std::string calibration_cache_path();

/// Measures all four rates now (a few ms). nullopt, with *error set, when
/// process_vm_readv does not work in this process.
std::optional<CopyRates> measure_copy_rates(std::string* error);

/// Parses a cache file's text; nullopt unless it has the expected format,
/// names this host and kernel, and holds finite positive rates.
std::optional<CopyRates> parse_calibration(const std::string& text);

/// The cache text for `rates` on this host and kernel.
std::string format_calibration(const CopyRates& rates);

/// Forgets the decision remembered by this process (for tests).
void reset_single_copy_memo();

}  // namespace omniccl
