// The v-variants: all_gatherv, all_to_allv, gatherv, scatterv. Counts and
// displacements arrive in elements and are checked against the tensors here;
// the algorithms work in bytes.
#include <algorithm>
#include <cstdint>
#include <numeric>

#include "collective/common.h"

namespace omniccl::coll {

namespace {

/// Validates counts/displs (elements) for `n` ranks inside a tensor of
/// `capacity` elements and converts them to bytes; empty displs = packed.
/// `counts_name`/`displs_name` are the C argument names used in errors. When
/// `disjoint`, no two ranks' non-empty parts may overlap (parts written by
/// different ranks: a receive buffer).
void to_bytes(const std::vector<int64_t>& counts, std::vector<int64_t> displs, int n, size_t capacity, size_t es,
              const char* counts_name, const char* displs_name, bool disjoint, std::vector<uint64_t>& out_counts,
              std::vector<uint64_t>& out_displs) {
  check_arg(static_cast<int>(counts.size()) == n, counts_name, ": ", counts.size(), " given for ", n, " ranks");
  for (int i = 0; i < n; ++i) {
    check_arg(counts[i] >= 0, counts_name, "[", i, "] is negative (", counts[i], ")");
    check_arg(static_cast<uint64_t>(counts[i]) <= capacity, counts_name, "[", i, "] = ", counts[i],
              " exceeds the tensor's ", capacity, " elements");
  }
  if (displs.empty()) {  // packed: each part starts where the previous one ends
    uint64_t off = 0;
    for (int i = 0; i < n; ++i) {
      check_arg(off <= static_cast<uint64_t>(INT64_MAX), counts_name, ": the sum of counts before rank ", i,
                " overflows");
      displs.push_back(static_cast<int64_t>(off));
      off = checked_add(off, static_cast<uint64_t>(counts[i]), counts_name, ": the sum of counts up to rank ", i);
    }
  }
  check_arg(static_cast<int>(displs.size()) == n, displs_name, ": ", displs.size(), " given for ", n, " ranks");
  out_counts.resize(n);
  out_displs.resize(n);
  for (int i = 0; i < n; ++i) {
    check_arg(displs[i] >= 0, displs_name, "[", i, "] is negative (", displs[i], ")");
    // Both are at most INT64_MAX, so the sum fits in uint64_t.
    check_arg(static_cast<uint64_t>(displs[i]) + static_cast<uint64_t>(counts[i]) <= capacity, displs_name, "[", i,
              "] = ", displs[i], " + ", counts_name, "[", i, "] = ", counts[i], " exceeds the tensor's ", capacity,
              " elements");
    // Within capacity, whose size in bytes the DLPack check bounded.
    out_counts[i] = static_cast<uint64_t>(counts[i]) * es;
    out_displs[i] = static_cast<uint64_t>(displs[i]) * es;
  }
  if (disjoint) {
    std::vector<int> order;
    for (int i = 0; i < n; ++i) {
      if (counts[i] > 0) order.push_back(i);
    }
    std::sort(order.begin(), order.end(), [&](int a, int b) { return displs[a] < displs[b]; });
    for (size_t k = 1; k < order.size(); ++k) {
      const int a = order[k - 1], b = order[k];
      check_arg(displs[a] + counts[a] <= displs[b], displs_name, ": the parts of ranks ", a, " (", displs[a], "..",
                displs[a] + counts[a], ") and ", b, " (", displs[b], "..", displs[b] + counts[b],
                ") overlap; each rank's part must have its own elements");
    }
  }
}

/// all_gatherv of `total` bytes in all (the parts' `bc`, at `bd`) on
/// communicators that slice large calls: as launch_sliced, slice k takes
/// items [k x per, (k + 1) x per) of every rank's part, so it is an
/// all_gatherv of its own. `per` splits the largest part into as many
/// slices as slicing().slice_bytes goes into `total`. Every rank has the
/// counts, so all agree. Staged, the stream copies the parts only
/// (Staging::slice_pieces), never the gaps between them.
WorkPtr all_gatherv_in_slices(Communicator& c, Staging& st, const TensorView& send, const TensorView& recv,
                              const std::vector<uint64_t>& bc, const std::vector<uint64_t>& bd, uint64_t total,
                              const CallOptions& call) {
  const size_t es = dtype_size(recv.dtype);
  const uint64_t most = *std::max_element(bc.begin(), bc.end()) / es;
  const size_t slice = c.slicing().slice_bytes;
  const uint64_t split = (total + slice - 1) / slice;
  const uint64_t per = (most + split - 1) / split;
  const uint64_t slices = (most + per - 1) / per, per_bytes = per * es;
  std::vector<StagedPiece> pieces{{send.bytes_ptr(), send.bytes(), Use::kIn}};
  for (size_t q = 0; q < bc.size(); ++q) pieces.push_back({recv.bytes_ptr() + bd[q], bc[q], Use::kOut});
  st.slice_pieces(slices, per_bytes, pieces);
  // Slice k's counts and displacements: each part's next per_bytes.
  auto part = [bc, bd, per_bytes](uint64_t k, std::vector<uint64_t>& kc, std::vector<uint64_t>& kd) {
    const uint64_t lo = k * per_bytes;
    for (size_t q = 0; q < bc.size(); ++q) {
      kc[q] = bc[q] > lo ? std::min(per_bytes, bc[q] - lo) : 0;
      kd[q] = bd[q] + std::min(lo, bc[q]);
    }
  };
  const char* const in = st.view(send).bytes_ptr();
  char* const out = st.view(recv).bytes_ptr();
  const int rank = c.rank();
  const CollectiveHead head = collective_head(c, st, OpKind::kAllGatherV, recv.dtype, RedOp::kSum, -1, 0, call);
  return launch_slices(
      c, st, head, slices, call,
      [part, n = bc.size()](uint64_t k) {
        std::vector<uint64_t> kc(n), kd(n);
        part(k, kc, kd);
        return std::accumulate(kc.begin(), kc.end(), uint64_t{0});
      },
      [=](Engine& e, const AlgoEntry& algo, uint64_t k) {
        std::vector<uint64_t> kc(bc.size()), kd(bc.size());
        part(k, kc, kd);
        algo.run(e, {.send = in + (kd[size_t(rank)] - bd[size_t(rank)]),
                     .recv = out,
                     .counts = kc.data(),
                     .displs = kd.data()});
      });
}

}  // namespace

WorkPtr all_gatherv(Communicator& c, const TensorView& send, const TensorView& recv, std::vector<int64_t> counts,
                    std::vector<int64_t> displs, const CallOptions& call) {
  const int n = c.size();
  check_same_dtype(send, "sendbuf", recv, "recvbuf");
  std::vector<uint64_t> bc, bd;
  to_bytes(counts, std::move(displs), n, recv.count, dtype_size(recv.dtype), "recv_counts", "recv_displs", true, bc,
           bd);
  check_arg(bc[c.rank()] == send.bytes(), "all_gatherv: sendbuf has ", send.count, " elements but recv_counts[",
            c.rank(), "] is ", counts[c.rank()]);
  check_overlap(recv, "recvbuf", send, "sendbuf", static_cast<long long>(bd[c.rank()]));
  if (c.device_engine() != nullptr && recv.device == DeviceKind::kCUDA) {
    algo::DeviceCall d = device_call(OpKind::kAllGatherV, send.dtype, {}, -1, 0, nullptr, nullptr);
    for (int q = 0; q < n; ++q) {
      d.sends.push_back({q, send.bytes_ptr(), nullptr, send.bytes()});
      d.recvs.push_back({q, nullptr, recv.bytes_ptr() + bd[q], bc[q]});
    }
    if (auto w = launch_device_call(c, std::move(d), {&send, &recv}, call)) return *w;
  }
  // recvbuf may have gaps between the ranks' parts: copied both ways.
  Staging st({{&send, Use::kIn}, {&recv, Use::kInOut}}, call);
  const uint64_t total = std::accumulate(bc.begin(), bc.end(), uint64_t{0});
  if (c.slices_large_calls() && total >= 2 * uint64_t(c.slicing().slice_bytes)) {
    return all_gatherv_in_slices(c, st, send, recv, bc, bd, total, call);
  }
  const TensorView sv = st.view(send);
  const TensorView rv = st.view(recv);
  return launch(c, st, OpKind::kAllGatherV, send.dtype, RedOp::kSum, -1, 0, recv.bytes(), call,
                [=](Engine& e, const AlgoEntry& algo) {
                  algo.run(e,
                           {.send = sv.bytes_ptr(), .recv = rv.bytes_ptr(), .counts = bc.data(), .displs = bd.data()});
                });
}

WorkPtr all_to_allv(Communicator& c, const TensorView& send, std::vector<int64_t> send_counts,
                    std::vector<int64_t> send_displs, const TensorView& recv, std::vector<int64_t> recv_counts,
                    std::vector<int64_t> recv_displs, const CallOptions& call) {
  const int n = c.size();
  const size_t es = dtype_size(send.dtype);
  check_same_dtype(send, "sendbuf", recv, "recvbuf");
  check_overlap(send, "sendbuf", recv, "recvbuf", 0);
  std::vector<uint64_t> sc, sd, rc, rd;
  to_bytes(send_counts, std::move(send_displs), n, send.count, es, "send_counts", "send_displs", false, sc, sd);
  to_bytes(recv_counts, std::move(recv_displs), n, recv.count, es, "recv_counts", "recv_displs", true, rc, rd);
  check_arg(sc[c.rank()] == rc[c.rank()], "all_to_allv: send_counts[", c.rank(), "] (", send_counts[c.rank()],
            ") differs from recv_counts[", c.rank(), "] (", recv_counts[c.rank()], ") for this rank's own part");
  // In place, a block received could land on one not yet sent: staged.
  if (c.device_engine() != nullptr && recv.device == DeviceKind::kCUDA && send.data != recv.data) {
    algo::DeviceCall d = device_call(OpKind::kAllToAllV, send.dtype, {}, -1, 0, nullptr, nullptr);
    for (int q = 0; q < n; ++q) {
      d.sends.push_back({q, send.bytes_ptr() + sd[q], nullptr, sc[q]});
      d.recvs.push_back({q, nullptr, recv.bytes_ptr() + rd[q], rc[q]});
    }
    if (auto w = launch_device_call(c, std::move(d), {&send, &recv}, call)) return *w;
  }
  Staging st({{&send, Use::kIn}, {&recv, Use::kInOut}}, call);
  const TensorView sv = st.view(send);
  const TensorView rv = st.view(recv);
  return launch(c, st, OpKind::kAllToAllV, send.dtype, RedOp::kSum, -1, 0, send.bytes(), call,
                [=](Engine& e, const AlgoEntry& algo) {
                  const char* src = sv.bytes_ptr();
                  if (src == rv.bytes_ptr() && send.bytes() > 0) {
                    char* tmp = e.scratch(send.bytes(), 3);
                    e.exec().copy(tmp, src, send.bytes());
                    src = tmp;
                  }
                  algo.run(e, {.send = src,
                               .recv = rv.bytes_ptr(),
                               .counts = sc.data(),
                               .displs = sd.data(),
                               .recv_counts = rc.data(),
                               .recv_displs = rd.data()});
                });
}

WorkPtr gatherv(Communicator& c, const TensorView& send, const OptTensor& recv, std::vector<int64_t> counts,
                std::vector<int64_t> displs, int root, const CallOptions& call) {
  check_root(c, root);
  const int n = c.size();
  std::vector<uint64_t> bc, bd;
  char* out = nullptr;
  if (c.rank() == root) {
    check_arg(recv.has_value(), "recvbuf is NULL on the root rank ", root, " of gatherv");
    check_same_dtype(send, "sendbuf", *recv, "recvbuf");
    to_bytes(counts, std::move(displs), n, recv->count, dtype_size(recv->dtype), "recv_counts", "recv_displs", true, bc,
             bd);
    check_arg(bc[root] == send.bytes(), "gatherv: the root's sendbuf has ", send.count, " elements but recv_counts[",
              root, "] is ", counts[root]);
    check_overlap(*recv, "recvbuf", send, "sendbuf", static_cast<long long>(bd[root]));
  }
  if (c.device_engine() != nullptr && send.device == DeviceKind::kCUDA) {
    algo::DeviceCall d = device_call(OpKind::kGatherV, send.dtype, {}, root, 0, nullptr, nullptr);
    d.sends.push_back({root, send.bytes_ptr(), nullptr, send.bytes()});
    for (int p = 0; p < n && c.rank() == root; ++p) d.recvs.push_back({p, nullptr, recv->bytes_ptr() + bd[p], bc[p]});
    const bool is_root = c.rank() == root;
    if (auto w = launch_device_call(c, std::move(d), {&send, is_root ? &*recv : nullptr}, call)) return *w;
  }
  Staging st({{&send, Use::kIn}, {opt(recv), c.rank() == root ? Use::kInOut : Use::kNone}}, call);
  const TensorView sv = st.view(send);
  if (c.rank() == root) out = st.view(*recv).bytes_ptr();
  return launch(c, st, OpKind::kGatherV, send.dtype, RedOp::kSum, root, 0, send.bytes(), call,
                [=](Engine& e, const AlgoEntry& algo) {
                  algo.run(e, {.send = sv.bytes_ptr(),
                               .recv = out,
                               .bytes = send.bytes(),
                               .root = root,
                               .counts = bc.data(),
                               .displs = bd.data()});
                });
}

WorkPtr scatterv(Communicator& c, const OptTensor& send, std::vector<int64_t> counts, std::vector<int64_t> displs,
                 const TensorView& recv, int root, const CallOptions& call) {
  check_root(c, root);
  const int n = c.size();
  std::vector<uint64_t> bc, bd;
  const char* in = nullptr;
  if (c.rank() == root) {
    check_arg(send.has_value(), "sendbuf is NULL on the root rank ", root, " of scatterv");
    check_same_dtype(*send, "sendbuf", recv, "recvbuf");
    to_bytes(counts, std::move(displs), n, send->count, dtype_size(send->dtype), "send_counts", "send_displs", false,
             bc, bd);
    check_arg(bc[root] == recv.bytes(), "scatterv: the root's recvbuf has ", recv.count, " elements but send_counts[",
              root, "] is ", counts[root]);
    check_overlap(*send, "sendbuf", recv, "recvbuf", static_cast<long long>(bd[root]));
  }
  if (c.device_engine() != nullptr && recv.device == DeviceKind::kCUDA) {
    algo::DeviceCall d = device_call(OpKind::kScatterV, recv.dtype, {}, root, 0, nullptr, nullptr);
    d.recvs.push_back({root, nullptr, recv.bytes_ptr(), recv.bytes()});
    for (int p = 0; p < n && c.rank() == root; ++p) d.sends.push_back({p, send->bytes_ptr() + bd[p], nullptr, bc[p]});
    const bool is_root = c.rank() == root;
    if (auto w = launch_device_call(c, std::move(d), {is_root ? &*send : nullptr, &recv}, call)) return *w;
  }
  Staging st({{opt(send), c.rank() == root ? Use::kIn : Use::kNone}, {&recv, Use::kOut}}, call);
  const TensorView rv = st.view(recv);
  if (c.rank() == root) in = st.view(*send).bytes_ptr();
  return launch(c, st, OpKind::kScatterV, recv.dtype, RedOp::kSum, root, 0, recv.bytes(), call,
                [=](Engine& e, const AlgoEntry& algo) {
                  algo.run(e, {.send = in,
                               .recv = rv.bytes_ptr(),
                               .bytes = recv.bytes(),
                               .root = root,
                               .counts = bc.data(),
                               .displs = bd.data()});
                });
}

}  // namespace omniccl::coll
