// Data-movement algorithms: broadcast, all_gather, gather, scatter,
// all_to_all, barrier and the v-variants.
#include <algorithm>
#include <cstring>
#include <vector>

#include "algorithm/algorithms.h"
#include "algorithm/patterns/patterns.h"

namespace omniccl::algo {

namespace {

using patterns::from_vrank;
using patterns::lowbit;
using patterns::subtree_size;
using patterns::to_vrank;

constexpr size_t kChainChunk = 512 * 1024;         // pipelining unit of the broadcast chain
constexpr size_t kSendFirstMax = size_t(4) << 20;  // oversubscribed: see ring_sends_first

// Whether the ring all_gather sends this rank's block from `send` before it
// copies it into recv (the copy then runs in the first step's waits): the
// peer reads the block, through the ring or by reference, while this rank
// copies it. A rank with a core of its own does so at every size: copying
// first took 1.05-1.5x as long (2 ranks, 16 and 64 MiB, through the rings
// and by reference).
// Oversubscribed ranks (no core free to read while this one copies) send
// blocks of up to kSendFirstMax first (2 ranks, 1 MiB, single copy: 100-158
// -> 73-102 us per operation) and copy larger ones first. Over TCP the
// kernel copies the block as it goes: sending first lets the peer receive
// while this rank copies its own (2 ranks, 16 MiB: 7% faster).
bool ring_sends_first(Engine& e, size_t bytes, int right) {
  return bytes <= kSendFirstMax || !e.oversubscribed() || e.over_socket(right);
}

}  // namespace

void broadcast_tree(Engine& e, char* buf, size_t bytes, int root) {
  const int n = e.size(), r = e.rank();
  if (n == 1) return;
  if (n == 2) {  // the tree's one message (step 1), without a step list
    if (r == root) {
      e.run({Transfer::send(1 - r, buf, bytes, 1)});
    } else {
      e.run({Transfer::recv(root, buf, bytes, 1)});
    }
    return;
  }
  const int vr = to_vrank(r, root, n);
  int mask = 1;
  while (mask < n) {
    if (vr & mask) {
      e.run({Transfer::recv(from_vrank(vr - mask, root, n), buf, bytes, uint32_t(mask))});
      break;
    }
    mask <<= 1;
  }
  std::vector<Transfer>& ts = e.step_list();
  for (mask >>= 1; mask > 0; mask >>= 1) {
    if (vr + mask < n) add_send(ts, from_vrank(vr + mask, root, n), buf, bytes, uint32_t(mask));
  }
  if (!ts.empty()) e.run(ts);  // (a leaf has nothing to send)
}

void broadcast_ring(Engine& e, char* buf, size_t bytes, int root) {
  const int n = e.size(), r = e.rank();
  if (n == 1) return;
  const int vr = to_vrank(r, root, n);
  const int prev = (r - 1 + n) % n, next = (r + 1) % n;
  const size_t chunks = std::max<size_t>(1, (bytes + kChainChunk - 1) / kChainChunk);
  auto at = [&](size_t c) { return buf + c * kChainChunk; };
  auto len = [&](size_t c) { return std::min(kChainChunk, bytes - std::min(bytes, c * kChainChunk)); };
  std::vector<Transfer>& ts = e.step_list();
  if (vr == 0) {
    for (size_t c = 0; c < chunks; ++c) add_send(ts, next, at(c), len(c), uint32_t(c));
    e.run(ts);
    return;
  }
  if (vr == n - 1) {
    for (size_t c = 0; c < chunks; ++c) add_recv(ts, prev, at(c), len(c), uint32_t(c));
    e.run(ts);
    return;
  }
  // Middle of the chain: receive chunk c while forwarding chunk c-1.
  for (size_t c = 0; c <= chunks; ++c) {
    ts.clear();
    if (c < chunks) add_recv(ts, prev, at(c), len(c), uint32_t(c));
    if (c >= 1) add_send(ts, next, at(c - 1), len(c - 1), uint32_t(c - 1));
    e.run(ts);
  }
}

void broadcast_direct(Engine& e, char* buf, size_t bytes, int root) {
  const int n = e.size(), r = e.rank();
  if (n == 1) return;
  std::vector<Transfer>& ts = e.step_list();
  if (r == root) {
    for (int p = 0; p < n; ++p) {
      if (p != r) add_send(ts, p, buf, bytes, 0);
    }
  } else {
    add_recv(ts, root, buf, bytes, 0);
  }
  e.run(ts);
}

void all_gather_ring(Engine& e, const char* send, char* recv, size_t bytes) {
  const int n = e.size(), r = e.rank();
  const int left = (r - 1 + n) % n, right = (r + 1) % n;
  const bool send_first = ring_sends_first(e, bytes, right);
  if (!send_first || n == 1) e.copy_now(recv + r * bytes, send, bytes);
  for (int s = 0; s < n - 1; ++s) {
    int sb = (r - s + n) % n, rb = (r - s - 1 + n) % n;
    const char* out = s == 0 && send_first ? send : recv + sb * bytes;
    // Block r is neither sent from recv nor received: copied in the step's waits.
    if (s == 0 && send_first) e.copy_while_waiting(recv + r * bytes, send, bytes);
    e.run({Transfer::send(right, out, bytes, s), Transfer::recv(left, recv + rb * bytes, bytes, s)});
  }
}

void all_gather_pipelined(Engine& e, const char* send, char* recv, size_t bytes, size_t chunk_bytes) {
  const int n = e.size(), r = e.rank();
  if (n <= 2) {  // one phase: nothing is passed on
    all_gather_ring(e, send, recv, bytes);
    return;
  }
  // all_gather_ring's n-1 phases on columns of chunks (chunk k of every
  // block), column k one phase behind column k-1: a received chunk goes on
  // to the right neighbour one step later, from the caches.
  const int left = (r - 1 + n) % n, right = (r + 1) % n;
  const size_t per = std::max<size_t>(1, chunk_bytes);
  const bool send_first = ring_sends_first(e, bytes, right);
  if (!send_first) e.copy_now(recv + r * bytes, send, bytes);
  bool copy_owed = send_first;  // block r is neither sent from recv nor received: copied in the first step's waits
  std::vector<Transfer>& ts = e.step_list();
  patterns::by_columns(
      patterns::chunks_of(bytes, per), size_t(n - 1),
      [&](size_t k, size_t j, uint32_t step) {
        const int sb = (r - int(j) + n) % n, rb = (r - int(j) - 1 + n) % n;
        const size_t at = patterns::chunk_start(bytes, per, k), len = patterns::chunk_len(bytes, per, k);
        const char* out = j == 0 && send_first ? send + at : recv + sb * bytes + at;
        add_send(ts, right, out, len, step);
        add_recv(ts, left, recv + rb * bytes + at, len, step);
      },
      [&] {
        if (copy_owed) e.copy_while_waiting(recv + r * bytes, send, bytes);
        copy_owed = false;
        e.run(ts);
        ts.clear();
      });
  if (copy_owed) e.copy_now(recv + r * bytes, send, bytes);
}

void all_gather_bruck(Engine& e, const char* send, char* recv, size_t bytes) {
  const int n = e.size(), r = e.rank();
  if (n == 1) {
    e.copy_now(recv, send, bytes);
    return;
  }
  // tmp[i] holds the block of rank (r + i) % n.
  char* tmp = e.scratch(bytes * n, 1);
  if (bytes > 0) e.exec().copy(tmp, send, bytes);
  for (int k = 1; k < n; k <<= 1) {
    size_t cnt = std::min(k, n - k);
    e.run({Transfer::send((r - k + n) % n, tmp, cnt * bytes, uint32_t(k)),
           Transfer::recv((r + k) % n, tmp + k * bytes, cnt * bytes, uint32_t(k))});
  }
  if (bytes == 0) return;
  for (int i = 0; i < n; ++i) e.exec().copy(recv + ((r + i) % n) * bytes, tmp + i * bytes, bytes);
}

void all_gather_recursive_doubling(Engine& e, const char* send, char* recv, size_t bytes) {
  const int n = e.size(), r = e.rank();
  e.copy_now(recv + size_t(r) * bytes, send, bytes);
  if (n == 1) return;
  const patterns::Fold fold(n);
  const int v = fold.new_rank(r);
  // Blocks [first, last) of the real ranks, a contiguous run of recv.
  auto run = [&](int first, int last) { return std::pair(recv + size_t(first) * bytes, size_t(last - first) * bytes); };
  constexpr uint32_t kRelease = 1u << 30;
  if (v < 0) {  // sits out: its block to r + 1, then everything else back
    e.run({Transfer::send(r + 1, recv + size_t(r) * bytes, bytes, 0)});
    const auto [lo, lo_bytes] = run(0, r);
    const auto [hi, hi_bytes] = run(r + 1, n);
    e.run({Transfer::recv(r + 1, lo, lo_bytes, kRelease)});
    e.run({Transfer::recv(r + 1, hi, hi_bytes, kRelease + 1)});
    return;
  }
  if (r < 2 * fold.extra) e.run({Transfer::recv(r - 1, recv + size_t(r - 1) * bytes, bytes, 0)});
  for (int k = 1; k < fold.p2; k <<= 1) {
    // Before this round, member v holds the blocks of its group of k members
    // (those that agree with it past bit k - 1): contiguous (Fold::first_block).
    const int mine = v & ~(k - 1), theirs = (v ^ k) & ~(k - 1);
    const auto [out, out_bytes] = run(fold.first_block(mine), fold.first_block(mine + k));
    const auto [in, in_bytes] = run(fold.first_block(theirs), fold.first_block(theirs + k));
    const int partner = fold.real_rank(v ^ k);
    e.run({Transfer::send(partner, out, out_bytes, uint32_t(k)), Transfer::recv(partner, in, in_bytes, uint32_t(k))});
  }
  if (r < 2 * fold.extra) {
    const auto [lo, lo_bytes] = run(0, r - 1);
    const auto [hi, hi_bytes] = run(r, n);
    e.run({Transfer::send(r - 1, lo, lo_bytes, kRelease)});
    e.run({Transfer::send(r - 1, hi, hi_bytes, kRelease + 1)});
  }
}

void all_gather_direct(Engine& e, const char* send, char* recv, size_t bytes) {
  const int n = e.size(), r = e.rank();
  e.copy_while_waiting(recv + r * bytes, send, bytes);  // sent from `send`: the copy waits for the peers
  std::vector<Transfer>& ts = e.step_list();
  for (int p = 0; p < n; ++p) {
    if (p == r) continue;
    add_send(ts, p, send, bytes, 0);
    add_recv(ts, p, recv + p * bytes, bytes, 0);
  }
  e.run(ts);
}

void gather_tree(Engine& e, const char* send, char* recv, size_t bytes, int root) {
  const int n = e.size(), r = e.rank();
  const int vr = to_vrank(r, root, n);
  // tmp holds the blocks of vranks [vr, vr + have) in vrank order.
  char* tmp = e.scratch(bytes * subtree_size(vr, n), 1);
  if (bytes > 0) e.exec().copy(tmp, send, bytes);
  int have = 1;
  for (int mask = 1; mask < n; mask <<= 1) {
    if (vr & mask) {
      e.run({Transfer::send(from_vrank(vr - mask, root, n), tmp, have * bytes, uint32_t(mask))});
      return;
    }
    if (vr + mask < n) {
      int cnt = std::min(mask, n - (vr + mask));
      e.run({Transfer::recv(from_vrank(vr + mask, root, n), tmp + size_t(mask) * bytes, cnt * bytes, uint32_t(mask))});
      have = mask + cnt;
    }
  }
  if (bytes == 0) return;
  for (int v = 0; v < n; ++v) e.exec().copy(recv + from_vrank(v, root, n) * bytes, tmp + v * bytes, bytes);
}

void gather_direct(Engine& e, const char* send, char* recv, size_t bytes, int root) {
  const int n = e.size(), r = e.rank();
  if (r != root) {
    e.run({Transfer::send(root, send, bytes, 0)});
    return;
  }
  e.copy_while_waiting(recv + r * bytes, send, bytes);
  if (n == 2) {  // one peer: no step list to build
    const int p = 1 - r;
    e.run({Transfer::recv(p, recv + p * bytes, bytes, 0)});
    return;
  }
  std::vector<Transfer>& ts = e.step_list();
  for (int p = 0; p < n; ++p) {
    if (p != r) add_recv(ts, p, recv + p * bytes, bytes, 0);
  }
  e.run(ts);
}

void scatter_tree(Engine& e, const char* send, char* recv, size_t bytes, int root) {
  const int n = e.size(), r = e.rank();
  const int vr = to_vrank(r, root, n);
  const int size = subtree_size(vr, n);
  char* tmp = e.scratch(bytes * size, 1);
  int top;  // children are vr + m for m = top, top/2, ..., 1
  if (vr == 0) {
    if (bytes > 0) {
      for (int v = 0; v < n; ++v) e.exec().copy(tmp + v * bytes, send + from_vrank(v, root, n) * bytes, bytes);
    }
    top = patterns::pow2_floor(n);
  } else {
    int m = lowbit(vr);
    e.run({Transfer::recv(from_vrank(vr - m, root, n), tmp, size * bytes, uint32_t(m))});
    top = m / 2;
  }
  std::vector<Transfer>& ts = e.step_list();
  for (int m = top; m >= 1; m >>= 1) {
    if (vr + m >= n) continue;
    int cnt = std::min(m, n - (vr + m));
    add_send(ts, from_vrank(vr + m, root, n), tmp + size_t(m) * bytes, cnt * bytes, uint32_t(m));
  }
  e.run(ts);
  e.copy_now(recv, tmp, bytes);
}

void scatter_direct(Engine& e, const char* send, char* recv, size_t bytes, int root) {
  const int n = e.size(), r = e.rank();
  if (r != root) {
    e.run({Transfer::recv(root, recv, bytes, 0)});
    return;
  }
  e.copy_while_waiting(recv, send + r * bytes, bytes);
  if (n == 2) {  // one peer: no step list to build
    const int p = 1 - r;
    e.run({Transfer::send(p, send + p * bytes, bytes, 0)});
    return;
  }
  std::vector<Transfer>& ts = e.step_list();
  for (int p = 0; p < n; ++p) {
    if (p != r) add_send(ts, p, send + p * bytes, bytes, 0);
  }
  e.run(ts);
}

void all_to_all_pairwise(Engine& e, const char* send, char* recv, size_t bytes) {
  const int n = e.size(), r = e.rank();
  if (n == 1) {
    e.copy_now(recv, send, bytes);
    return;
  }
  e.copy_while_waiting(recv + r * bytes, send + r * bytes, bytes);  // in the first step's waits
  for (int s = 1; s < n; ++s) {
    int to = (r + s) % n, from = (r - s + n) % n;
    e.run({Transfer::send(to, send + to * bytes, bytes, s), Transfer::recv(from, recv + from * bytes, bytes, s)});
  }
}

void all_to_all_direct(Engine& e, const char* send, char* recv, size_t bytes) {
  const int n = e.size(), r = e.rank();
  e.copy_while_waiting(recv + r * bytes, send + r * bytes, bytes);
  std::vector<Transfer>& ts = e.step_list();
  for (int p = 0; p < n; ++p) {
    if (p == r) continue;
    add_send(ts, p, send + p * bytes, bytes, 0);
    add_recv(ts, p, recv + p * bytes, bytes, 0);
  }
  e.run(ts);
}

void barrier_recursive_doubling(Engine& e) {
  const int n = e.size(), r = e.rank();
  const patterns::Fold fold(n);
  const int v = fold.new_rank(r);
  constexpr uint32_t kRelease = 1u << 30;
  if (v < 0) {  // sits out: checks in with r + 1 and waits for its release
    e.run({Transfer::send(r + 1, nullptr, 0, 0)});
    e.run({Transfer::recv(r + 1, nullptr, 0, kRelease)});
    return;
  }
  if (r < 2 * fold.extra) e.run({Transfer::recv(r - 1, nullptr, 0, 0)});
  for (int k = 1; k < fold.p2; k <<= 1) {
    const int partner = fold.real_rank(v ^ k);
    e.run({Transfer::send(partner, nullptr, 0, uint32_t(k)), Transfer::recv(partner, nullptr, 0, uint32_t(k))});
  }
  if (r < 2 * fold.extra) e.run({Transfer::send(r - 1, nullptr, 0, kRelease)});
}

void barrier_dissemination(Engine& e) {
  const int n = e.size(), r = e.rank();
  for (int k = 1; k < n; k <<= 1) {
    e.run({Transfer::send((r + k) % n, nullptr, 0, uint32_t(k)),
           Transfer::recv((r - k + n) % n, nullptr, 0, uint32_t(k))});
  }
}

void barrier_direct(Engine& e) {
  const int n = e.size(), r = e.rank();
  if (n == 1) return;
  std::vector<Transfer>& ts = e.step_list();
  if (r == 0) {
    for (int p = 1; p < n; ++p) add_recv(ts, p, nullptr, 0, 0);
    e.run(ts);
    ts.clear();
    for (int p = 1; p < n; ++p) add_send(ts, p, nullptr, 0, 1);
    e.run(ts);
  } else {
    e.run({Transfer::send(0, nullptr, 0, 0)});
    e.run({Transfer::recv(0, nullptr, 0, 1)});
  }
}

void all_gatherv_direct(Engine& e, const char* send, char* recv, const uint64_t* counts, const uint64_t* displs) {
  const int n = e.size(), r = e.rank();
  e.copy_now(recv + displs[r], send, counts[r]);
  std::vector<Transfer>& ts = e.step_list();
  for (int p = 0; p < n; ++p) {
    if (p == r) continue;
    add_send(ts, p, recv + displs[r], counts[r], 0);
    add_recv(ts, p, recv + displs[p], counts[p], 0);
  }
  e.run(ts);
}

void all_to_allv_direct(Engine& e, const char* send, const uint64_t* send_counts, const uint64_t* send_displs,
                        char* recv, const uint64_t* recv_counts, const uint64_t* recv_displs) {
  const int n = e.size(), r = e.rank();
  e.copy_while_waiting(recv + recv_displs[r], send + send_displs[r], std::min(send_counts[r], recv_counts[r]));
  std::vector<Transfer>& ts = e.step_list();
  for (int p = 0; p < n; ++p) {
    if (p == r) continue;
    add_send(ts, p, send + send_displs[p], send_counts[p], 0);
    add_recv(ts, p, recv + recv_displs[p], recv_counts[p], 0);
  }
  e.run(ts);
}

void gatherv_direct(Engine& e, const char* send, uint64_t send_bytes, char* recv, const uint64_t* counts,
                    const uint64_t* displs, int root) {
  const int n = e.size(), r = e.rank();
  if (r != root) {
    e.run({Transfer::send(root, send, send_bytes, 0)});
    return;
  }
  e.copy_while_waiting(recv + displs[r], send, counts[r]);
  std::vector<Transfer>& ts = e.step_list();
  for (int p = 0; p < n; ++p) {
    if (p != r) add_recv(ts, p, recv + displs[p], counts[p], 0);
  }
  e.run(ts);
}

void scatterv_direct(Engine& e, const char* send, const uint64_t* counts, const uint64_t* displs, char* recv,
                     uint64_t recv_bytes, int root) {
  const int n = e.size(), r = e.rank();
  if (r != root) {
    e.run({Transfer::recv(root, recv, recv_bytes, 0)});
    return;
  }
  e.copy_while_waiting(recv, send + displs[r], counts[r]);
  std::vector<Transfer>& ts = e.step_list();
  for (int p = 0; p < n; ++p) {
    if (p != r) add_send(ts, p, send + displs[p], counts[p], 0);
  }
  e.run(ts);
}

}  // namespace omniccl::algo
