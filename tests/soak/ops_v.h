// The soak test's v-variants (per-rank counts and displacements). Counts
// are functions of the case seed, so every rank knows every other rank's;
// displacements are packed (passed as NULL) or leave holes of up to two
// elements that must stay untouched.
#pragma once

#include <string>
#include <vector>

#include "ops.h"

namespace soak {

/// Per-rank (or per-peer) counts 0..max drawn from the case for `salt`.
inline std::vector<int64_t> v_counts(const Spec& s, int n, uint64_t salt, int64_t max) {
  std::vector<int64_t> c(static_cast<size_t>(n));
  for (int i = 0; i < n; ++i) {
    c[static_cast<size_t>(i)] = static_cast<int64_t>(hash3(s.cs, salt, static_cast<uint64_t>(i)) % uint64_t(max + 1));
  }
  return c;
}

/// The displacements of blocks with these counts, and in *total the
/// elements the buffer needs.
inline std::vector<int64_t> v_displs(const Spec& s, const std::vector<int64_t>& counts, uint64_t salt, int64_t* total) {
  std::vector<int64_t> d(counts.size());
  int64_t at = 0;
  for (size_t i = 0; i < counts.size(); ++i) {
    if (s.gaps) at += static_cast<int64_t>(hash3(s.cs, salt, i) % 3);
    d[i] = at;
    at += counts[i];
  }
  *total = at;
  return d;
}

/// "" when block i of buf (counts[i] at displs[i]) holds the pattern src(i)
/// = (rank, first element) and every element outside the blocks is untouched.
template <class Src>
std::string check_layout(const Spec& s, Buf& buf, const std::vector<int64_t>& counts,
                         const std::vector<int64_t>& displs, Src src) {
  std::vector<char> covered(buf.count, 0);
  for (size_t i = 0; i < counts.size(); ++i) {
    const auto [rank, first] = src(static_cast<int>(i));
    const auto at = static_cast<size_t>(displs[i]), cnt = static_cast<size_t>(counts[i]);
    std::string e = occl_ref::check_pattern(s.dt, buf.at(at), cnt, first, rank, s.cs);
    if (!e.empty()) return cat("block ", i, ": ", e);
    std::fill(covered.begin() + static_cast<std::ptrdiff_t>(at),
              covered.begin() + static_cast<std::ptrdiff_t>(at + cnt), 1);
  }
  for (size_t k = 0; k < buf.count; ++k) {
    if (!covered[k] && !occl_ref::check_sentinel(buf.at(k), occl_ref::dt_size(s.dt)).empty()) {
      return cat("element ", k, " between the blocks was overwritten");
    }
  }
  return {};
}

/// all_gatherv, and gatherv when `rooted`.
inline Result run_gatherv(const Ctx& c, bool rooted) {
  const Spec& s = c.s;
  const bool receives = !rooted || c.rank == s.root;
  const std::vector<int64_t> counts = v_counts(s, c.n, 1, s.count);
  int64_t total = 0;
  const std::vector<int64_t> displs = v_displs(s, counts, 2, &total);
  const int64_t mine = counts[static_cast<size_t>(c.rank)];
  Buf in(s.dt, static_cast<size_t>(mine)), out(s.dt, static_cast<size_t>(total));
  occl_ref::fill_pattern(s.dt, in.data(), in.count, 0, c.rank, s.cs);
  Tensor1D ti(in.data(), mine, dl(s)), to(out.data(), total, dl(s));
  const bool pass = receives || !s.null_nonroot;
  const DLTensor* recv = pass ? &to : nullptr;
  const int64_t* rc = pass ? counts.data() : nullptr;
  const int64_t* rd = pass && s.gaps ? displs.data() : nullptr;
  Result r;
  r.st = issue(s, [&](occl_work_t* w) {
    return rooted ? occl_gatherv(&ti, recv, rc, rd, s.root, c.comm, w) : occl_all_gatherv(&ti, recv, rc, rd, c.comm, w);
  });
  if (r.st != OCCL_SUCCESS) return r;
  if (receives) {
    r.bad = check_layout(s, out, counts, displs, [](int j) { return std::pair<int, size_t>{j, 0}; });
  } else {
    r.bad = occl_ref::check_sentinel(out.data(), out.nbytes());
  }
  return r;
}

inline Result run_scatterv(const Ctx& c) {
  const Spec& s = c.s;
  const bool root = c.rank == s.root;
  const std::vector<int64_t> counts = v_counts(s, c.n, 1, s.count);
  int64_t total = 0;
  const std::vector<int64_t> displs = v_displs(s, counts, 2, &total);
  const int64_t mine = counts[static_cast<size_t>(c.rank)];
  Buf in(s.dt, static_cast<size_t>(total)), out(s.dt, static_cast<size_t>(mine));
  if (root) occl_ref::fill_pattern(s.dt, in.data(), in.count, 0, s.root, s.cs);
  Tensor1D ti(in.data(), total, dl(s)), to(out.data(), mine, dl(s));
  const bool pass = root || !s.null_nonroot;
  const DLTensor* send = pass ? &ti : nullptr;
  const int64_t* sc = pass ? counts.data() : nullptr;
  const int64_t* sd = pass && s.gaps ? displs.data() : nullptr;
  Result r;
  r.st = issue(s, [&](occl_work_t* w) { return occl_scatterv(send, sc, sd, &to, s.root, c.comm, w); });
  if (r.st == OCCL_SUCCESS) {
    const auto first = static_cast<size_t>(displs[static_cast<size_t>(c.rank)]);
    r.bad = occl_ref::check_pattern(s.dt, out.data(), out.count, first, s.root, s.cs);
  }
  return r;
}

/// m(i, j): elements rank i sends to rank j.
inline int64_t a2av_count(const Spec& s, int n, int i, int j) {
  return static_cast<int64_t>(hash3(s.cs, 3, static_cast<uint64_t>(i * n + j)) % uint64_t(s.count + 1));
}

/// Send (to_peers) or receive counts of rank `rank`, and their displacements.
inline std::vector<int64_t> a2av_layout(const Spec& s, int n, int rank, bool to_peers, std::vector<int64_t>* displs,
                                        int64_t* total) {
  std::vector<int64_t> counts(static_cast<size_t>(n));
  for (int j = 0; j < n; ++j) {
    counts[static_cast<size_t>(j)] = to_peers ? a2av_count(s, n, rank, j) : a2av_count(s, n, j, rank);
  }
  *displs = v_displs(s, counts, (to_peers ? 0x100u : 0x200u) + static_cast<uint64_t>(rank), total);
  return counts;
}

inline Result run_all_to_allv(const Ctx& c) {
  const Spec& s = c.s;
  std::vector<int64_t> sd, rd;
  int64_t stotal = 0, rtotal = 0;
  const std::vector<int64_t> sc = a2av_layout(s, c.n, c.rank, true, &sd, &stotal);
  const std::vector<int64_t> rc = a2av_layout(s, c.n, c.rank, false, &rd, &rtotal);
  Buf in(s.dt, static_cast<size_t>(stotal)), out(s.dt, static_cast<size_t>(rtotal));
  occl_ref::fill_pattern(s.dt, in.data(), in.count, 0, c.rank, s.cs);
  Tensor1D ti(in.data(), stotal, dl(s)), to(out.data(), rtotal, dl(s));
  const int64_t* sdp = s.gaps ? sd.data() : nullptr;
  const int64_t* rdp = s.gaps ? rd.data() : nullptr;
  Result r;
  r.st =
      issue(s, [&](occl_work_t* w) { return occl_all_to_allv(&ti, sc.data(), sdp, &to, rc.data(), rdp, c.comm, w); });
  if (r.st != OCCL_SUCCESS) return r;
  // Block j came from rank j's send buffer, at j's displacement for this rank.
  r.bad = check_layout(s, out, rc, rd, [&](int j) {
    std::vector<int64_t> jd;
    int64_t jt = 0;
    a2av_layout(s, c.n, j, true, &jd, &jt);
    return std::pair<int, size_t>{j, static_cast<size_t>(jd[static_cast<size_t>(c.rank)])};
  });
  return r;
}

}  // namespace soak
