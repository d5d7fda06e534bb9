#include "tuning/copy_calibration.h"

#include <sys/mman.h>
#include <sys/uio.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <fstream>
#include <mutex>
#include <random>
#include <memory>
#include <vector>

#include "common/log.h"
#include "common/settings.h"
#include "common/status.h"
#include "kernels/cpu/copy.h"
#include "kernels/cpu/stream.h"
#include "tuning/calibration_file.h"
#include "tuning/one_way_probe.h"
#include "tuning/op_tuner.h"
#include "transport/registry.h"

namespace omniccl {

using calibration_file::rate_text;

namespace {

// 4: the ring probes copy as the rings do (kernels::cpu::copy, not memcpy,
// whose rep movsb is slow at some distances; format 3's ring rates may be
// low for that reason and are measured again).
// 5: the copy and stream rates are taken into twice the last-level cache
// (stream_probe_bytes); format 4's went into 16 MiB, cache-resident where
// the L3 is larger, and are measured again.
constexpr const char* kMagic = "omniccl-shm-calibration 5";
// Both mechanisms are timed per unit of kChunk bytes over a kPayload buffer,
// kPasses times, alternating; each rate comes from its fastest unit. Many
// short samples make it likely that some ran undisturbed on a busy host
// (whole-payload timings, best of 3, once cached a ring at 3.9 GB/s instead
// of 10-17 GB/s while other processes kept both cores busy).
constexpr size_t kPayload = size_t(2) << 20;
constexpr size_t kChunk = size_t(256) << 10;  // one by-reference read / a ring's worth of records
constexpr int kPasses = 4;
constexpr int kStreamPasses = 3;
// One-way messages timed through a pair of links, per way (ring, by
// reference, split), at each of kLinkProbeBytes.
constexpr int kLinkRepsSmall = 8;
constexpr int kLinkRepsLarge = 4;

std::mutex g_mu;
// The decision this process made, and the cache file it was made for (a
// different OMNICCL_SHM_CALIBRATION_FILE decides again). Guarded by g_mu.
std::optional<SingleCopyChoice> g_memo;
std::string g_memo_path;

double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

SingleCopyChoice calibrate() {
  const auto found =
      calibration_file::read_or_measure<CopyRates>(calibration_cache_path(), "OMNICCL_SHM_CALIBRATION", "calibration",
                                                   parse_calibration, format_calibration, measure_copy_rates);
  if (!found.rates) {
    SingleCopyChoice c;
    c.stream_reason = "no streaming stores (not measured)";
    c.reason = str_cat("single copy off: ", found.error, "; ", c.stream_reason);
    return c;
  }
  return choice_from_rates(*found.rates, found.how);
}

}  // namespace

bool SingleCopyChoice::allows(OpKind kind, uint64_t bytes, bool split) const {
  if (is_one_way(kind)) return bytes >= (split ? one_way_split_min : one_way_min);
  switch (kind) {
    case OpKind::kAllGather:
    case OpKind::kAllToAll:
    case OpKind::kAllGatherV:
    case OpKind::kAllToAllV: return exchange;
    default: return false;
  }
}

namespace {

/// Where the by-reference rates `x` (at kLinkProbeBytes) beat the ring's:
/// from every size, from kOneWayLargeMin, or never.
uint64_t one_way_from(const double (&x)[2], const double (&ring)[2]) {
  if (x[0] >= ring[0] && x[1] >= ring[1]) return 0;
  if (x[1] >= ring[1]) return kOneWayLargeMin;
  return kNever;
}

std::string from_text(uint64_t min) {
  if (min == kNever) return "never";
  if (min == 0) return "on";
  return str_cat("from ", min >> 20, " MiB");
}

}  // namespace

SingleCopyChoice choice_from_rates(const CopyRates& r, const std::string& how) {
  SingleCopyChoice c;
  c.one_way_min = one_way_from(r.link_ref_gbps, r.link_ring_gbps);
  c.one_way_split_min = one_way_from(r.link_split_gbps, r.link_ring_gbps);
  c.exchange = r.readv_gbps >= kExchangeShare * r.ring_gbps;
  auto rates = [](const double(&x)[2]) { return str_cat(rate_text(x[0]), "/", rate_text(x[1])); };
  c.reason = str_cat("single copy for broadcast, gather and scatter: ", from_text(c.one_way_split_min),
                     " (split copies ", rates(r.link_split_gbps), " GB/s, ring ", rates(r.link_ring_gbps),
                     " GB/s at 1/8 MiB), ", from_text(c.one_way_min), " with OMNICCL_SHM_SPLIT_COPY=0 (",
                     rates(r.link_ref_gbps), " GB/s); for all_gather and all_to_all: ", c.exchange ? "on" : "off",
                     " (process_vm_readv ", rate_text(r.readv_gbps), " GB/s ", c.exchange ? ">=" : "<", " ",
                     kExchangeShare, " x ring ", rate_text(r.ring_gbps), " GB/s) (", how, ")");
  c.copy_tuned = true;  // measured: process_vm_readv works
  c.stream_min = stream_min_from_rates(r);
  const std::string stores =
      str_cat("streaming stores ", rate_text(r.stream_gbps), " GB/s ", c.stream_min > 0 ? ">=" : "<", " ", kStreamGain,
              " x memcpy ", rate_text(r.copy_gbps), " GB/s");
  c.stream_reason = c.stream_min > 0 ? str_cat("streaming stores from ", kStreamMin >> 20, " MiB (", stores, ")")
                                     : str_cat("no streaming stores (", stores, ")");
  c.reason = str_cat(c.reason, "; ", c.stream_reason);
  return c;
}

uint64_t stream_min_from_rates(const CopyRates& r) {
  return r.stream_gbps >= kStreamGain * r.copy_gbps ? kStreamMin : 0;
}

size_t stream_probe_bytes(size_t last_level_cache) {
  constexpr size_t kMin = size_t(16) << 20, kMax = size_t(128) << 20;
  return std::clamp(2 * last_level_cache, kMin, kMax);
}

size_t last_level_cache_bytes() {
  // index0..indexN: the highest level that is a data or unified cache.
  size_t best = 0;
  int best_level = 0;
  for (int i = 0; i < 8; ++i) {
    const std::string dir = str_cat("/sys/devices/system/cpu/cpu0/cache/index", i, "/");
    std::ifstream level_in(dir + "level"), type_in(dir + "type"), size_in(dir + "size");
    int level = 0;
    std::string type, size;
    if (!(level_in >> level) || !(type_in >> type) || !(size_in >> size) || type == "Instruction") continue;
    char* end = nullptr;
    const unsigned long long v = std::strtoull(size.c_str(), &end, 10);
    if (end == size.c_str()) continue;
    const size_t unit = *end == 'K' ? size_t(1) << 10 : *end == 'M' ? size_t(1) << 20 : 1;
    if (level > best_level) {
      best_level = level;
      best = size_t(v) * unit;
    }
  }
  return best;
}

std::string calibration_cache_path() {
  return calibration_file::path("OMNICCL_SHM_CALIBRATION_FILE", "omniccl-shm-calibration");
}

namespace {

/// Two ends of a shared-memory link in this process, as Mesh builds them
/// between two ranks of one host (Transport::loopback); quiet.
struct LinkPair {
  std::unique_ptr<transport::Transport> shm = transport::make_transport("shm", {});
  std::array<std::unique_ptr<transport::Link>, 2> link = shm->loopback();
};

/// How the link-pair probe sends: ring, by reference, by reference split.
enum class Way { kRing, kRef, kSplit };

/// Times `reps` one-way messages of `bytes` (src to dst) from link 0's
/// thread (this one) to link 1's (a helper thread), each way in turn, and
/// stores the fastest rate of each in rates[way]. False (with *error) when
/// a message failed or took longer than 2 s (time_one_way).
bool time_links(size_t bytes, int reps, double (&rates)[3], std::string* error) {
  LinkPair lp;
  std::vector<char> src(bytes, 1), dst(bytes, 0);
  uint64_t hdr_out = 0, hdr_in = 0;
  transport::Message out, in;
  auto way_of = [](int k) { return Way((k - 1) % 3); };
  auto send = [&](int k, bool first) {
    if (first) {
      hdr_out = uint64_t(k);
      out = transport::Message{};
      out.header = &hdr_out;
      out.header_bytes = sizeof hdr_out;
      out.payload = {src.data(), bytes, DeviceKind::kCPU};
      out.may_reference = way_of(k) != Way::kRing;
    }
    const bool moved = lp.link[0]->send(out);
    lp.link[0]->flush();
    return out.complete ? ProbeStep::kDone : moved ? ProbeStep::kMoved : ProbeStep::kIdle;
  };
  auto recv = [&](int k, bool first) {
    if (first) {
      in = transport::Message{};
      in.header = &hdr_in;
      in.header_bytes = sizeof hdr_in;
    }
    if (in.header_done < in.header_bytes) {
      if (!lp.link[1]->recv_header(in)) return ProbeStep::kIdle;
      if (in.header_done < in.header_bytes) return ProbeStep::kMoved;
      in.payload = {dst.data(), bytes, DeviceKind::kCPU};
      in.may_split = way_of(k) == Way::kSplit;
    }
    const bool moved = lp.link[1]->recv_payload(in);
    lp.link[1]->flush();
    return in.complete ? ProbeStep::kDone : moved ? ProbeStep::kMoved : ProbeStep::kIdle;
  };
  std::vector<double> seconds;
  if (!time_one_way(3 * reps, send, recv, &seconds, error)) return false;
  double best[3] = {1e30, 1e30, 1e30};
  for (int k = 1; k <= 3 * reps; ++k) {
    double& b = best[int(way_of(k))];
    b = std::min(b, seconds[size_t(k - 1)]);
  }
  for (int w = 0; w < 3; ++w) rates[w] = double(bytes) / best[w] / 1e9;
  return true;
}

}  // namespace

namespace {

/// Copies n bytes from src to dst of this process with process_vm_readv, as
/// a receiver reads a payload by reference; false (with *error) where it
/// does not work.
bool readv_self(char* dst, const char* src, size_t n, std::string* error) {
  const pid_t self = ::getpid();
  size_t done = 0;
  while (done < n) {
    iovec l{dst + done, n - done};
    iovec r{const_cast<char*>(src) + done, n - done};
    ssize_t k = ::process_vm_readv(self, &l, 1, &r, 1, 0);
    if (k < 0 && errno == EINTR) continue;
    if (k <= 0) {
      *error = str_cat("process_vm_readv does not work here (", k < 0 ? std::strerror(errno) : "read nothing", ")");
      return false;
    }
    done += static_cast<size_t>(k);
  }
  return true;
}

/// Seconds per kChunk, fastest pass: a read by reference, and the ring's two
/// copies through a shared staging area of one chunk (a ring record), out of
/// private source and destination buffers (a user's), all touched first.
bool time_readv_and_ring(double& readv_s, double& ring_s, std::string* error) {
  std::vector<char> src(kPayload, 1), dst(kPayload, 0);
  void* stage = ::mmap(nullptr, kChunk, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  if (stage == MAP_FAILED) {
    *error = str_cat("mmap of ", kChunk, " bytes: ", std::strerror(errno));
    return false;
  }
  std::memset(stage, 0, kChunk);
  readv_s = ring_s = 1e30;
  for (int pass = 0; pass < kPasses; ++pass) {
    for (size_t off = 0; off < kPayload; off += kChunk) {
      auto t0 = std::chrono::steady_clock::now();
      if (!readv_self(dst.data() + off, src.data() + off, kChunk, error)) {
        ::munmap(stage, kChunk);
        return false;
      }
      readv_s = std::min(readv_s, seconds_since(t0));
    }
    for (size_t off = 0; off < kPayload; off += kChunk) {
      auto t0 = std::chrono::steady_clock::now();
      kernels::cpu::copy(stage, src.data() + off, kChunk);  // as the rings copy
      kernels::cpu::copy(dst.data() + off, stage, kChunk);
      ring_s = std::min(ring_s, seconds_since(t0));
    }
  }
  ::munmap(stage, kChunk);
  return true;
}

/// A receiver copying a payload larger than the caches out of the ring: one
/// cache-resident record at a time into the destination, with regular and
/// with streaming stores, alternating; the fastest pass of each (seconds per
/// `probe` bytes).
void time_stores(size_t probe, double& copy_s, double& stream_s) {
  constexpr size_t kRecord = size_t(64) << 10;
  std::vector<char> record(kRecord, 1), big_dst(probe, 0);
  copy_s = stream_s = 1e30;
  for (int pass = 0; pass < kStreamPasses; ++pass) {
    auto t0 = std::chrono::steady_clock::now();
    for (size_t off = 0; off < probe; off += kRecord) kernels::cpu::copy(&big_dst[off], record.data(), kRecord);
    copy_s = std::min(copy_s, seconds_since(t0));
    t0 = std::chrono::steady_clock::now();
    for (size_t off = 0; off < probe; off += kRecord) {
      kernels::cpu::stream_copy(&big_dst[off], record.data(), kRecord);
    }
    stream_s = std::min(stream_s, seconds_since(t0));
  }
}

/// One-way messages through a real pair of links, each way in turn, into
/// rates.link_*.
bool time_link_pairs(CopyRates& rates, std::string* error) {
  for (int i = 0; i < 2; ++i) {
    double r[3] = {0, 0, 0};
    try {
      if (!time_links(kLinkProbeBytes[i], i == 0 ? kLinkRepsSmall : kLinkRepsLarge, r, error)) return false;
    } catch (const std::exception& e) {  // e.g. no room in /dev/shm for the probe's segments
      *error = str_cat("the link probe failed: ", e.what());
      return false;
    }
    rates.link_ring_gbps[i] = r[0];
    rates.link_ref_gbps[i] = r[1];
    rates.link_split_gbps[i] = r[2];
  }
  return true;
}

}  // namespace

std::optional<CopyRates> measure_copy_rates(std::string* error) {
  double readv_s = 0, ring_s = 0, copy_s = 0, stream_s = 0;
  if (!time_readv_and_ring(readv_s, ring_s, error)) return std::nullopt;
  const size_t probe = stream_probe_bytes(last_level_cache_bytes());
  time_stores(probe, copy_s, stream_s);
  // The ring's two copies overlap on two cores: it moves the payload in half
  // the time one core took for both.
  CopyRates rates{double(kChunk) / readv_s / 1e9, double(kChunk) / (ring_s / 2) / 1e9, double(probe) / copy_s / 1e9,
                  double(probe) / stream_s / 1e9};
  if (!time_link_pairs(rates, error)) return std::nullopt;
  return rates;
}

std::string format_calibration(const CopyRates& r) {
  return calibration_file::format_rates(kMagic, {{"readv_gbps", r.readv_gbps},
                                                 {"ring_gbps", r.ring_gbps},
                                                 {"copy_gbps", r.copy_gbps},
                                                 {"stream_gbps", r.stream_gbps},
                                                 {"link_ring_1m_gbps", r.link_ring_gbps[0]},
                                                 {"link_ring_8m_gbps", r.link_ring_gbps[1]},
                                                 {"link_ref_1m_gbps", r.link_ref_gbps[0]},
                                                 {"link_ref_8m_gbps", r.link_ref_gbps[1]},
                                                 {"link_split_1m_gbps", r.link_split_gbps[0]},
                                                 {"link_split_8m_gbps", r.link_split_gbps[1]}});
}

std::optional<CopyRates> parse_calibration(const std::string& text) {
  CopyRates r;
  if (!calibration_file::parse_rates(text, kMagic,
                                     {{"readv_gbps", &r.readv_gbps},
                                      {"ring_gbps", &r.ring_gbps},
                                      {"copy_gbps", &r.copy_gbps},
                                      {"stream_gbps", &r.stream_gbps},
                                      {"link_ring_1m_gbps", &r.link_ring_gbps[0]},
                                      {"link_ring_8m_gbps", &r.link_ring_gbps[1]},
                                      {"link_ref_1m_gbps", &r.link_ref_gbps[0]},
                                      {"link_ref_8m_gbps", &r.link_ref_gbps[1]},
                                      {"link_split_1m_gbps", &r.link_split_gbps[0]},
                                      {"link_split_8m_gbps", &r.link_split_gbps[1]}})) {
    return std::nullopt;
  }
  return r;
}

SingleCopyChoice decide_single_copy(std::optional<bool> forced) {
  std::string stream = "auto";
  if (auto v = get_setting("OMNICCL_STREAM_STORES")) stream = *v;
  check_arg(stream == "auto" || stream == "0" || stream == "1", "OMNICCL_STREAM_STORES is '", stream,
            "'; use auto, 0 or 1");
  SingleCopyChoice c;
  if (forced) {
    c.one_way_min = c.one_way_split_min = *forced ? 0 : kNever;
    c.exchange = *forced;
    c.reason = str_cat("single copy ", *forced ? "on" : "off", " (OMNICCL_SHM_SINGLE_COPY=", *forced ? 1 : 0, ")");
  }
  if (!forced || stream == "auto") {
    std::lock_guard<std::mutex> lock(g_mu);
    std::string path = calibration_cache_path();
    if (!g_memo || g_memo_path != path) {
      g_memo = calibrate();
      g_memo_path = path;
    }
    if (!forced) {
      c = *g_memo;
    } else {
      c.stream_min = g_memo->stream_min;
      c.stream_reason = g_memo->stream_reason;
      c.reason = str_cat(c.reason, "; ", c.stream_reason);
    }
  }
  if (stream != "auto") {
    c.stream_min = stream == "1" ? kStreamMin : 0;
    c.stream_reason = stream == "1"
                          ? str_cat("streaming stores from ", kStreamMin >> 20, " MiB (OMNICCL_STREAM_STORES=1)")
                          : std::string("no streaming stores (OMNICCL_STREAM_STORES=0)");
    c.reason = str_cat(c.reason, "; ", c.stream_reason);
  }
  if (c.copy_tuned) {
    c.reason = str_cat(c.reason, "; broadcast, gather, scatter, all_gather and all_to_all of ", kTunedCopyMin >> 10,
                       " KiB and more measure single copy against the rings while they run, starting from the "
                       "above (OMNICCL_SHM_SINGLE_COPY unset)");
  }
  if (stream == "auto") {
    c.stream_tuned = true;
    c.reason = str_cat(c.reason, "; operations moving ", kTunedStreamMin >> 20,
                       " MiB and more measure both while they run (OMNICCL_STREAM_STORES=auto)");
  }
  OCCL_LOG(kInfo, kTransport, c.reason);
  return c;
}

void reset_single_copy_memo() {
  std::lock_guard<std::mutex> lock(g_mu);
  g_memo.reset();
}

}  // namespace omniccl
