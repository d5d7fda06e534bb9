// Reducing algorithms: all_reduce, reduce_scatter, reduce.
#include <algorithm>
#include <cstring>
#include <vector>

#include "algorithm/algorithms.h"
#include "common/checked.h"
#include "algorithm/patterns/patterns.h"

namespace omniccl::algo {

namespace {

using patterns::block_count;
using patterns::block_offset;

void combine(Engine& e, char* out, const char* a, const char* b, size_t count) {
  // AVG and PREMUL_SUM combine as SUM; the collective layer scales.
  RedOp op = e.signature().redop;
  if (op == RedOp::kAvg || op == RedOp::kPreMulSum) op = RedOp::kSum;
  e.exec().reduce(out, a, b, count, e.signature().dtype, op);
}

}  // namespace

void all_reduce_ring(Engine& e, const char* src, char* dst, size_t count) {
  const int n = e.size(), r = e.rank();
  const size_t es = dtype_size(e.signature().dtype);
  if (n == 1) {
    if (src != dst && count > 0) e.exec().copy(dst, src, count * es);
    return;
  }
  const int left = (r - 1 + n) % n, right = (r + 1) % n;
  auto off = [&](int b) { return block_offset(b, count, n) * es; };
  auto len = [&](int b) { return block_count(b, count, n) * es; };
  // Reduce-scatter: after n-1 steps rank r holds block r+1 fully reduced.
  // Each block reaches a rank once, so the local operand is always the
  // input (src) and nothing is copied up front; block r is sent from src
  // and gets its result in the all-gather.
  for (int s = 0; s < n - 1; ++s) {
    int sb = (r - s + n) % n, rb = (r - s - 1 + n) % n;
    const char* out = (s == 0 ? src : dst) + off(sb);
    e.run({Transfer::send(right, out, len(sb), s),
           Transfer::recv_reduce(left, src + off(rb), dst + off(rb), len(rb), s)});
  }
  // All-gather of the reduced blocks.
  for (int s = 0; s < n - 1; ++s) {
    int sb = (r + 1 - s + n) % n, rb = (r - s + n) % n;
    e.run({Transfer::send(right, dst + off(sb), len(sb), n + s), Transfer::recv(left, dst + off(rb), len(rb), n + s)});
  }
}

void all_reduce_pipelined(Engine& e, const char* src, char* dst, size_t count, size_t chunk_bytes) {
  const int n = e.size(), r = e.rank();
  if (n != 2) {
    all_reduce_ring(e, src, dst, count);
    return;
  }
  // Rank r reduces block r (the peer's part of it arrives) and hands the
  // peer its part of block 1 - r; each reduced chunk goes back one step
  // after it was made, while it is still in the caches, instead of in a
  // second pass over the whole block (the ring's all-gather).
  const int p = 1 - r;
  const size_t es = dtype_size(e.signature().dtype);
  const size_t per = std::max<size_t>(1, chunk_bytes / es);  // elements per chunk
  auto off = [&](int b) { return block_offset(b, count, n) * es; };
  auto len = [&](int b) { return block_count(b, count, n); };
  // Chunk k of block b (empty past its end): both ranks cut the same way.
  auto at = [&](int b, size_t k) { return off(b) + std::min(k * per, len(b)) * es; };
  auto clen = [&](int b, size_t k) { return (std::min((k + 1) * per, len(b)) - std::min(k * per, len(b))) * es; };
  const size_t chunks = (std::max(len(0), len(1)) + per - 1) / per;
  for (size_t k = 0; k <= chunks; ++k) {
    std::vector<Transfer>& ts = e.step_list();
    const uint32_t step = uint32_t(2 * k);
    if (k < chunks) {
      ts.push_back(Transfer::send(p, src + at(p, k), clen(p, k), step));
      ts.push_back(Transfer::recv_reduce(p, src + at(r, k), dst + at(r, k), clen(r, k), step));
    }
    if (k > 0) {
      ts.push_back(Transfer::send(p, dst + at(r, k - 1), clen(r, k - 1), step + 1));
      ts.push_back(Transfer::recv(p, dst + at(p, k - 1), clen(p, k - 1), step + 1));
    }
    e.run(ts);
  }
}

void all_reduce_recursive_doubling(Engine& e, char* buf, size_t count) {
  const int n = e.size(), r = e.rank();
  if (n == 1) return;
  const size_t bytes = count * dtype_size(e.signature().dtype);
  patterns::Fold fold(n);
  const int v = fold.new_rank(r);
  if (r < 2 * fold.extra) {
    if (v < 0)
      e.run({Transfer::send(r + 1, buf, bytes, 0)});
    else
      e.run({Transfer::recv_reduce(r - 1, buf, buf, bytes, 0)});
  }
  if (v >= 0) {
    char* tmp = e.scratch(bytes, 1);
    for (int mask = 1; mask < fold.p2; mask <<= 1) {
      int partner = fold.real_rank(v ^ mask);
      e.run({Transfer::send(partner, buf, bytes, uint32_t(mask)), Transfer::recv(partner, tmp, bytes, uint32_t(mask))});
      combine(e, buf, buf, tmp, count);  // commutative: both partners get identical bytes
    }
  }
  if (r < 2 * fold.extra) {
    if (v < 0)
      e.run({Transfer::recv(r + 1, buf, bytes, 1u << 30)});
    else
      e.run({Transfer::send(r - 1, buf, bytes, 1u << 30)});
  }
}

void all_reduce_tree(Engine& e, char* buf, size_t count) {
  const int n = e.size(), r = e.rank();
  if (n == 1) return;
  const size_t bytes = count * dtype_size(e.signature().dtype);
  for (int mask = 1; mask < n; mask <<= 1) {
    if (r & mask) {
      e.run({Transfer::send(r - mask, buf, bytes, uint32_t(mask))});
      break;
    }
    if (r + mask < n) e.run({Transfer::recv_reduce(r + mask, buf, buf, bytes, uint32_t(mask))});
  }
  broadcast_tree(e, buf, bytes, 0);
}

void all_reduce_direct(Engine& e, char* buf, size_t count) {
  const int n = e.size(), r = e.rank();
  if (n == 1) return;
  const size_t bytes = count * dtype_size(e.signature().dtype);
  char* tmp = e.scratch(bytes * n, 1);
  std::vector<Transfer>& ts = e.step_list();
  for (int p = 0; p < n; ++p) {
    if (p == r) continue;
    ts.push_back(Transfer::send(p, buf, bytes, 0));
    ts.push_back(Transfer::recv(p, tmp + bytes * p, bytes, 0));
  }
  e.run(ts);
  if (bytes == 0) return;
  e.exec().copy(tmp + bytes * r, buf, bytes);
  // Same order on every rank: identical results.
  e.exec().copy(buf, tmp, bytes);
  for (int p = 1; p < n; ++p) combine(e, buf, buf, tmp + bytes * p, count);
}

void reduce_scatter_ring(Engine& e, const char* send, char* recv, size_t count) {
  const int n = e.size(), r = e.rank();
  const size_t bytes = count * dtype_size(e.signature().dtype);
  if (n == 1) {
    if (recv != send) e.exec().copy(recv, send, bytes);
    return;
  }
  const int left = (r - 1 + n) % n, right = (r + 1) % n;
  char* acc[2] = {e.scratch(bytes, 1), e.scratch(bytes, 2)};
  const char* prev = nullptr;
  for (int s = 0; s < n - 1; ++s) {
    int sb = (r - s - 1 + n) % n, rb = (r - s - 2 + 2 * n) % n;
    const char* src = s == 0 ? send + sb * bytes : prev;
    char* dst = s == n - 2 ? recv : acc[s % 2];
    e.run({Transfer::send(right, src, bytes, s), Transfer::recv_reduce(left, send + rb * bytes, dst, bytes, s)});
    prev = dst;
  }
}

void reduce_scatter_recursive_halving(Engine& e, const char* send, char* recv, size_t count) {
  const int n = e.size(), r = e.rank();
  const size_t bytes = count * dtype_size(e.signature().dtype);
  if (n == 1) {
    if (recv != send) e.exec().copy(recv, send, bytes);
    return;
  }
  char* w = e.scratch(bytes * n, 1);
  if (bytes > 0) e.exec().copy(w, send, bytes * n);
  patterns::Fold fold(n);
  const int v = fold.new_rank(r);
  if (r < 2 * fold.extra) {
    if (v < 0)
      e.run({Transfer::send(r + 1, w, bytes * n, 0)});
    else
      e.run({Transfer::recv_reduce(r - 1, w, w, bytes * n, 0)});
  }
  if (v < 0) {
    e.run({Transfer::recv(r + 1, recv, bytes, 1u << 30)});
    return;
  }
  int lo = 0, hi = fold.p2;
  for (int mask = fold.p2 / 2; mask >= 1; mask >>= 1) {
    int partner = fold.real_rank(v ^ mask);
    int mid = lo + mask;
    int keep_lo = v < mid ? lo : mid, keep_hi = v < mid ? mid : hi;
    int give_lo = v < mid ? mid : lo, give_hi = v < mid ? hi : mid;
    size_t keep_off = fold.first_block(keep_lo) * bytes,
           keep_len = (fold.first_block(keep_hi) - fold.first_block(keep_lo)) * bytes;
    size_t give_off = fold.first_block(give_lo) * bytes,
           give_len = (fold.first_block(give_hi) - fold.first_block(give_lo)) * bytes;
    e.run({Transfer::send(partner, w + give_off, give_len, uint32_t(mask)),
           Transfer::recv_reduce(partner, w + keep_off, w + keep_off, keep_len, uint32_t(mask))});
    lo = keep_lo;
    hi = keep_hi;
  }
  if (v < fold.extra) e.run({Transfer::send(r - 1, w + (r - 1) * bytes, bytes, 1u << 30)});
  if (bytes > 0) e.exec().copy(recv, w + r * bytes, bytes);
}

void reduce_scatter_direct(Engine& e, const char* send, char* recv, size_t count) {
  const int n = e.size(), r = e.rank();
  const size_t bytes = count * dtype_size(e.signature().dtype);
  char* tmp = e.scratch(bytes * n, 1);
  std::vector<Transfer>& ts = e.step_list();
  for (int p = 0; p < n; ++p) {
    if (p == r) continue;
    ts.push_back(Transfer::send(p, send + p * bytes, bytes, 0));
    ts.push_back(Transfer::recv(p, tmp + p * bytes, bytes, 0));
  }
  e.run(ts);
  if (bytes == 0) return;
  e.exec().copy(tmp + r * bytes, send + r * bytes, bytes);
  e.exec().copy(recv, tmp, bytes);
  for (int p = 1; p < n; ++p) combine(e, recv, recv, tmp + p * bytes, count);
}

void reduce_tree(Engine& e, const char* send, char* recv, size_t count, int root) {
  const int n = e.size(), r = e.rank();
  const size_t bytes = count * dtype_size(e.signature().dtype);
  const int vr = patterns::to_vrank(r, root, n);
  char* acc = r == root ? recv : e.scratch(bytes, 1);
  const char* cur = send;  // the partial result so far; `send` is never written
  for (int mask = 1; mask < n; mask <<= 1) {
    if (vr & mask) {
      e.run({Transfer::send(patterns::from_vrank(vr - mask, root, n), cur, bytes, uint32_t(mask))});
      return;
    }
    if (vr + mask < n) {
      e.run({Transfer::recv_reduce(patterns::from_vrank(vr + mask, root, n), cur, acc, bytes, uint32_t(mask))});
      cur = acc;
    }
  }
  if (r == root && cur != recv && bytes > 0) e.exec().copy(recv, cur, bytes);
}

void reduce_direct(Engine& e, const char* send, char* recv, size_t count, int root) {
  const int n = e.size(), r = e.rank();
  const size_t bytes = count * dtype_size(e.signature().dtype);
  if (r != root) {
    e.run({Transfer::send(root, send, bytes, 0)});
    return;
  }
  char* tmp = e.scratch(checked_mul(bytes, n, "reduce: scratch for ", n, " inputs of ", bytes, " bytes"), 1);
  std::vector<Transfer>& ts = e.step_list();
  for (int p = 0; p < n; ++p) {
    if (p != r) ts.push_back(Transfer::recv(p, tmp + p * bytes, bytes, 0));
  }
  e.run(ts);
  if (bytes == 0) return;
  e.exec().copy(tmp + r * bytes, send, bytes);
  e.exec().copy(recv, tmp, bytes);
  for (int p = 1; p < n; ++p) combine(e, recv, recv, tmp + p * bytes, count);
}

}  // namespace omniccl::algo
