// The soak test's operations: each runs one Spec through the C API on one
// rank and checks what it got against the serial reference of reference.h
// (inputs of every rank recomputed locally; no library code involved).
#pragma once

#include <algorithm>
#include <cmath>
#include <cstring>
#include <string>
#include <vector>

#include "harness.h"
#include "reference.h"
#include "schedule.h"

namespace soak {

using occl_ref::Buf;
using occl_ref::cat;
using omniccl::testing::Tensor1D;

/// How one operation ended on one rank: the library's status and, when that
/// was success, "" or the discrepancy with the reference.
struct Result {
  occl_status_t st = OCCL_SUCCESS;
  std::string bad;
};

struct Ctx {
  occl_comm_t comm;
  int rank;
  int n;
  const Spec& s;
};

/// Issues f(work) blocking, or through a work handle that is waited for.
template <class F>
occl_status_t issue(const Spec& s, F&& f) {
  if (!s.async) return f(nullptr);
  occl_work_t w = nullptr;
  occl_status_t st = f(&w);
  if (st == OCCL_SUCCESS) st = occl_work_wait(w);
  occl_work_free(w);
  return st;
}

inline DLDataType dl(const Spec& s) { return occl_ref::dt_dl(s.dt); }

/// "" when `parts` blocks of `count` elements at got hold rank j's pattern
/// (block j, elements base(j)...), else the first difference.
template <class Base>
std::string check_blocks(const Spec& s, const unsigned char* got, int parts, int64_t count, Base base) {
  const size_t bytes = static_cast<size_t>(count) * occl_ref::dt_size(s.dt);
  for (int j = 0; j < parts; ++j) {
    auto [rank, first] = base(j);
    std::string e = occl_ref::check_pattern(s.dt, got + j * bytes, static_cast<size_t>(count), first, rank, s.cs);
    if (!e.empty()) return cat("block ", j, ": ", e);
  }
  return {};
}

// Floating reductions with real rounding (Spec::rounded): random values of
// many magnitudes, compared within (n + 2) eps times the sum of the terms'
// magnitudes: every rank's input and each partial result may be rounded
// once to the dtype, whatever the algorithm. The other cases use
// reference.h's inputs, whose results are exact.

inline double rounded_value(const occl_ref::Op& op, uint64_t h) {
  const double u = static_cast<double>(h >> 11) * 0x1.0p-53;  // [0, 1)
  const double sign = (h & 1) ? -1.0 : 1.0;
  if (op.kind == OCCL_PROD) return sign * (0.5 + 1.5 * u);  // products stay normal
  return sign * std::ldexp(0.5 + u, static_cast<int>((h >> 1) & 7) - 4);
}

/// Calls f(Codec{}) for a floating dtype d.
template <class F>
void with_codec(DT d, F&& f) {
  switch (d) {
    case DT::kF16: return f(occl_ref::F16Codec{});
    case DT::kBF16: return f(occl_ref::BF16Codec{});
    case DT::kF32: return f(occl_ref::F32Codec{});
    case DT::kF8E4M3: return f(occl_ref::F8E4M3Codec{});
    case DT::kF8E5M2: return f(occl_ref::F8E5M2Codec{});
    default: return f(occl_ref::F64Codec{});
  }
}

inline void fill_input(const Spec& s, void* buf, size_t count, size_t base, int rank) {
  if (!s.rounded) return occl_ref::fill_reduce_input(s.dt, s.op, buf, count, base, rank, s.cs);
  with_codec(s.dt, [&](auto codec) {
    using C = decltype(codec);
    auto* p = static_cast<typename C::S*>(buf);
    for (size_t j = 0; j < count; ++j) p[j] = C::enc(rounded_value(s.op, hash3(s.cs, rank, base + j)));
  });
}

/// The reference of one element: the result in double, and the sum of the
/// magnitudes its error is bounded by.
template <class C>
std::pair<double, double> rounded_reference(const Spec& s, size_t elem, int n) {
  const bool prod = s.op.kind == OCCL_PROD, minmax = s.op.kind == OCCL_MIN || s.op.kind == OCCL_MAX;
  double acc = prod ? 1.0 : 0.0, mag = prod ? 1.0 : 0.0;
  for (int r = 0; r < n; ++r) {
    double x = C::dec(C::enc(rounded_value(s.op, hash3(s.cs, r, elem))));
    if (s.op.kind == OCCL_PREMUL_SUM) x *= s.op.scalar;
    if (minmax) {
      acc = r == 0 ? x : (s.op.kind == OCCL_MIN ? std::min(acc, x) : std::max(acc, x));
      mag = 0;  // exact
    } else if (prod) {
      acc *= x;
      mag *= std::fabs(x);
    } else {
      acc += x;
      mag += std::fabs(x);
    }
  }
  if (s.op.kind == OCCL_AVG) return {acc / n, mag / n};
  return {acc, mag};
}

template <class C>
std::string check_rounded(const Spec& s, const void* got, size_t count, size_t base, int n) {
  const auto* p = static_cast<const typename C::S*>(got);
  for (size_t j = 0; j < count; ++j) {
    const auto [want, mag] = rounded_reference<C>(s, base + j, n);
    const double g = C::dec(p[j]);
    if (!(std::fabs(g - want) <= (n + 2) * C::kEps * mag)) {
      return cat("element ", j, ": got ", g, ", reference ", want, " (beyond the rounding tolerance)");
    }
  }
  return {};
}

inline std::string check_output(const Spec& s, const void* got, size_t count, size_t base, int n) {
  if (!s.rounded) return occl_ref::check_reduce_output(s.dt, s.op, got, count, base, n, s.cs);
  std::string out;
  with_codec(s.dt, [&](auto codec) { out = check_rounded<decltype(codec)>(s, got, count, base, n); });
  return out;
}

/// The buffers and tensors of a reduction whose input and output hold
/// s.count elements each: `in` filled with this rank's input, `out` all
/// sentinel, and the output tensor on `in` itself when `in_place`.
/// Neither copied nor moved: the tensors point into the buffers.
struct ReduceIO {
  Buf in, out;
  Buf& dst;
  Tensor1D ti, to;
  ReduceIO(const Spec& s, int rank, bool in_place)
      : in(s.dt, static_cast<size_t>(s.count)),
        out(s.dt, static_cast<size_t>(s.count)),
        dst(in_place ? in : out),
        ti(in.data(), s.count, dl(s)),
        to(dst.data(), s.count, dl(s)) {
    fill_input(s, in.data(), in.count, 0, rank);
  }
};

inline Result run_all_reduce(const Ctx& c) {
  const Spec& s = c.s;
  ReduceIO io(s, c.rank, s.in_place);
  Result r;
  r.st = issue(s, [&](occl_work_t* w) { return occl_all_reduce(&io.ti, &io.to, s.op.handle, c.comm, w); });
  if (r.st == OCCL_SUCCESS) r.bad = check_output(s, io.dst.data(), io.in.count, 0, c.n);
  return r;
}

inline Result run_reduce(const Ctx& c) {
  const Spec& s = c.s;
  const auto n = static_cast<size_t>(s.count);
  const bool root = c.rank == s.root;
  ReduceIO io(s, c.rank, s.in_place && root);
  const DLTensor* recv = root || !s.null_nonroot ? &io.to : nullptr;
  Result r;
  r.st = issue(s, [&](occl_work_t* w) { return occl_reduce(&io.ti, recv, s.op.handle, s.root, c.comm, w); });
  if (r.st != OCCL_SUCCESS) return r;
  if (root) {
    r.bad = check_output(s, io.dst.data(), n, 0, c.n);
    return r;
  }
  // A reduce must not scribble on non-root inputs, nor write a non-root's output.
  Buf want(s.dt, n);
  fill_input(s, want.data(), n, 0, c.rank);
  if (std::memcmp(want.data(), io.in.data(), io.in.nbytes()) != 0) r.bad = "a non-root rank's input was modified";
  if (r.bad.empty()) r.bad = occl_ref::check_sentinel(io.out.data(), io.out.nbytes());
  return r;
}

inline Result run_reduce_scatter(const Ctx& c) {
  const Spec& s = c.s;
  const auto n = static_cast<size_t>(s.count);
  Buf in(s.dt, n * static_cast<size_t>(c.n)), out(s.dt, n);
  fill_input(s, in.data(), in.count, 0, c.rank);
  Tensor1D ti(in.data(), static_cast<int64_t>(in.count), dl(s)), to(out.data(), s.count, dl(s));
  Result r;
  r.st = issue(s, [&](occl_work_t* w) { return occl_reduce_scatter(&ti, &to, s.op.handle, c.comm, w); });
  if (r.st == OCCL_SUCCESS) {
    r.bad = check_output(s, out.data(), n, n * static_cast<size_t>(c.rank), c.n);
  }
  return r;
}

/// scan, and exscan when `exclusive` (rank 0's recvbuf must stay as it was).
inline Result run_scan(const Ctx& c, bool exclusive) {
  const Spec& s = c.s;
  const auto n = static_cast<size_t>(s.count);
  ReduceIO io(s, c.rank, s.in_place);
  Result r;
  r.st = issue(s, [&](occl_work_t* w) {
    return exclusive ? occl_exscan(&io.ti, &io.to, s.op.handle, c.comm, w)
                     : occl_scan(&io.ti, &io.to, s.op.handle, c.comm, w);
  });
  if (r.st != OCCL_SUCCESS) return r;
  if (!exclusive || c.rank > 0) {
    r.bad = check_output(s, io.dst.data(), n, 0, exclusive ? c.rank : c.rank + 1);
    return r;
  }
  Buf want(s.dt, n);
  fill_input(s, want.data(), n, 0, c.rank);
  if (s.in_place && std::memcmp(want.data(), io.in.data(), io.in.nbytes()) != 0) {
    r.bad = "exscan wrote rank 0's recvbuf";
  }
  if (!s.in_place) r.bad = occl_ref::check_sentinel(io.out.data(), io.out.nbytes());
  return r;
}

inline Result run_broadcast(const Ctx& c) {
  const Spec& s = c.s;
  const auto n = static_cast<size_t>(s.count);
  Buf buf(s.dt, n);
  if (c.rank == s.root) occl_ref::fill_pattern(s.dt, buf.data(), n, 0, s.root, s.cs);
  Tensor1D t(buf.data(), s.count, dl(s));
  Result r;
  r.st = issue(s, [&](occl_work_t* w) { return occl_broadcast(&t, s.root, c.comm, w); });
  if (r.st == OCCL_SUCCESS) r.bad = occl_ref::check_pattern(s.dt, buf.data(), n, 0, s.root, s.cs);
  return r;
}

/// all_gather, and gather when `rooted`.
inline Result run_gather(const Ctx& c, bool rooted) {
  const Spec& s = c.s;
  const auto n = static_cast<size_t>(s.count);
  const bool receives = !rooted || c.rank == s.root;
  Buf in(s.dt, n), out(s.dt, n * static_cast<size_t>(c.n));
  occl_ref::fill_pattern(s.dt, in.data(), n, 0, c.rank, s.cs);
  Tensor1D ti(in.data(), s.count, dl(s)), to(out.data(), static_cast<int64_t>(out.count), dl(s));
  const DLTensor* recv = receives || !s.null_nonroot ? &to : nullptr;
  Result r;
  r.st = issue(s, [&](occl_work_t* w) {
    return rooted ? occl_gather(&ti, recv, s.root, c.comm, w) : occl_all_gather(&ti, recv, c.comm, w);
  });
  if (r.st != OCCL_SUCCESS) return r;
  if (receives) {
    r.bad = check_blocks(s, out.data(), c.n, s.count, [](int j) { return std::pair<int, size_t>{j, 0}; });
  } else {
    r.bad = occl_ref::check_sentinel(out.data(), out.nbytes());
  }
  return r;
}

inline Result run_scatter(const Ctx& c) {
  const Spec& s = c.s;
  const auto n = static_cast<size_t>(s.count);
  const bool root = c.rank == s.root;
  Buf in(s.dt, n * static_cast<size_t>(c.n)), out(s.dt, n);
  if (root) occl_ref::fill_pattern(s.dt, in.data(), in.count, 0, s.root, s.cs);
  // In place on the root: its own part of the send buffer is the receive buffer.
  unsigned char* dst = root && s.in_place ? in.at(n * static_cast<size_t>(c.rank)) : out.data();
  Tensor1D ti(in.data(), static_cast<int64_t>(in.count), dl(s)), to(dst, s.count, dl(s));
  const DLTensor* send = root || !s.null_nonroot ? &ti : nullptr;
  Result r;
  r.st = issue(s, [&](occl_work_t* w) { return occl_scatter(send, &to, s.root, c.comm, w); });
  if (r.st == OCCL_SUCCESS) {
    r.bad = occl_ref::check_pattern(s.dt, dst, n, n * static_cast<size_t>(c.rank), s.root, s.cs);
  }
  return r;
}

inline Result run_all_to_all(const Ctx& c) {
  const Spec& s = c.s;
  const auto n = static_cast<size_t>(s.count);
  Buf in(s.dt, n * static_cast<size_t>(c.n)), out(s.dt, in.count);
  occl_ref::fill_pattern(s.dt, in.data(), in.count, 0, c.rank, s.cs);
  Buf& dst = s.in_place ? in : out;
  Tensor1D ti(in.data(), static_cast<int64_t>(in.count), dl(s)), to(dst.data(), static_cast<int64_t>(in.count), dl(s));
  Result r;
  r.st = issue(s, [&](occl_work_t* w) { return occl_all_to_all(&ti, &to, c.comm, w); });
  if (r.st == OCCL_SUCCESS) {
    const size_t mine = n * static_cast<size_t>(c.rank);
    r.bad = check_blocks(s, dst.data(), c.n, s.count, [mine](int j) { return std::pair<int, size_t>{j, mine}; });
  }
  return r;
}

inline Result run_barrier(const Ctx& c) {
  Result r;
  r.st = issue(c.s, [&](occl_work_t* w) { return occl_barrier(c.comm, w); });
  return r;
}

/// Pairs of ranks from a shuffle of the case: each sends its pattern to its
/// partner and receives the partner's (both started, then waited for).
inline Result run_send_recv(const Ctx& c) {
  const Spec& s = c.s;
  std::vector<int> perm(static_cast<size_t>(c.n));
  for (int i = 0; i < c.n; ++i) perm[static_cast<size_t>(i)] = i;
  Rng rng(s.cs);
  for (size_t i = perm.size(); i > 1; --i) std::swap(perm[i - 1], perm[rng.below(i)]);
  const auto me = static_cast<size_t>(std::find(perm.begin(), perm.end(), c.rank) - perm.begin());
  const size_t other = me ^ 1u;
  Result r;
  if (other >= perm.size()) return r;  // the odd one out
  const int peer = perm[other];
  const auto n = static_cast<size_t>(s.count);
  Buf out(s.dt, n), in(s.dt, n);
  occl_ref::fill_pattern(s.dt, out.data(), n, 0, c.rank, s.cs);
  Tensor1D ts(out.data(), s.count, dl(s)), tr(in.data(), s.count, dl(s));
  occl_work_t ws = nullptr, wr = nullptr;
  r.st = occl_recv(&tr, peer, c.comm, &wr);
  if (r.st == OCCL_SUCCESS) r.st = occl_send(&ts, peer, c.comm, &ws);
  const occl_status_t a = ws ? occl_work_wait(ws) : OCCL_SUCCESS, b = wr ? occl_work_wait(wr) : OCCL_SUCCESS;
  occl_work_free(ws);
  occl_work_free(wr);
  if (r.st == OCCL_SUCCESS) r.st = a != OCCL_SUCCESS ? a : b;
  if (r.st == OCCL_SUCCESS) r.bad = occl_ref::check_pattern(s.dt, in.data(), n, 0, peer, s.cs);
  return r;
}

}  // namespace soak
