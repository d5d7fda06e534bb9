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
  const size_t es = item_bytes(e.signature());
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
  if (n == 1) {
    all_reduce_ring(e, src, dst, count);  // the copy into dst, if any
    return;
  }
  const size_t es = item_bytes(e.signature());
  // The ring's 2(n-1) phases (all_reduce_ring) run on each column of chunks
  // (chunk k of every block) in turn, column k one phase behind column k-1:
  // a partial sum or reduced chunk goes on to the right neighbour one step
  // after it was made, while it is still in the caches, instead of in a
  // later pass over the whole block.
  const int left = (r - 1 + n) % n, right = (r + 1) % n;
  const size_t per = std::max<size_t>(1, chunk_bytes / es);  // elements per chunk
  // Chunk k of block b (empty past its end): every rank cuts the same way.
  auto at = [&](int b, size_t k) {
    return (block_offset(b, count, n) + patterns::chunk_start(block_count(b, count, n), per, k)) * es;
  };
  auto clen = [&](int b, size_t k) { return patterns::chunk_len(block_count(b, count, n), per, k) * es; };
  std::vector<Transfer>& ts = e.step_list();
  patterns::by_columns(
      patterns::chunks_of(block_count(0, count, n), per), 2 * size_t(n - 1),  // block 0 is the longest
      [&](size_t k, size_t j, uint32_t step) {
        if (j < size_t(n - 1)) {  // reduce-scatter
          const int s = int(j), sb = (r - s + n) % n, rb = (r - s - 1 + n) % n;
          add_send(ts, right, (s == 0 ? src : dst) + at(sb, k), clen(sb, k), step);
          add_recv_reduce(ts, left, src + at(rb, k), dst + at(rb, k), clen(rb, k), step);
        } else {  // all-gather of the reduced chunks
          const int s = int(j) - (n - 1), sb = (r + 1 - s + n) % n, rb = (r - s + n) % n;
          add_send(ts, right, dst + at(sb, k), clen(sb, k), step);
          add_recv(ts, left, dst + at(rb, k), clen(rb, k), step);
        }
      },
      [&] {
        e.run(ts);
        ts.clear();
      });
}

void all_reduce_recursive_doubling(Engine& e, char* buf, size_t count) {
  const int n = e.size(), r = e.rank();
  if (n == 1) return;
  const size_t bytes = count * item_bytes(e.signature());
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
  const size_t bytes = count * item_bytes(e.signature());
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
  const size_t bytes = count * item_bytes(e.signature());
  char* tmp = e.scratch(bytes * n, 1);
  std::vector<Transfer>& ts = e.step_list();
  for (int p = 0; p < n; ++p) {
    if (p == r) continue;
    add_send(ts, p, buf, bytes, 0);
    add_recv(ts, p, tmp + bytes * p, bytes, 0);
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
  const size_t bytes = count * item_bytes(e.signature());
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
  const size_t bytes = count * item_bytes(e.signature());
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
  const size_t bytes = count * item_bytes(e.signature());
  char* tmp = e.scratch(bytes * n, 1);
  std::vector<Transfer>& ts = e.step_list();
  for (int p = 0; p < n; ++p) {
    if (p == r) continue;
    add_send(ts, p, send + p * bytes, bytes, 0);
    add_recv(ts, p, tmp + p * bytes, bytes, 0);
  }
  e.run(ts);
  if (bytes == 0) return;
  e.exec().copy(tmp + r * bytes, send + r * bytes, bytes);
  e.exec().copy(recv, tmp, bytes);
  for (int p = 1; p < n; ++p) combine(e, recv, recv, tmp + p * bytes, count);
}

void reduce_tree(Engine& e, const char* send, char* recv, size_t count, int root) {
  const int n = e.size(), r = e.rank();
  const size_t bytes = count * item_bytes(e.signature());
  const int vr = patterns::to_vrank(r, root, n);
  char* acc = nullptr;     // taken at the first receive: a leaf only sends
  const char* cur = send;  // the partial result so far; `send` is never written
  for (int mask = 1; mask < n; mask <<= 1) {
    if (vr & mask) {
      e.run({Transfer::send(patterns::from_vrank(vr - mask, root, n), cur, bytes, uint32_t(mask))});
      return;
    }
    if (vr + mask < n) {
      if (acc == nullptr) acc = r == root ? recv : e.scratch(bytes, 1);
      e.run({Transfer::recv_reduce(patterns::from_vrank(vr + mask, root, n), cur, acc, bytes, uint32_t(mask))});
      cur = acc;
    }
  }
  if (r == root && cur != recv && bytes > 0) e.exec().copy(recv, cur, bytes);
}

void reduce_direct(Engine& e, const char* send, char* recv, size_t count, int root) {
  const int n = e.size(), r = e.rank();
  const size_t bytes = count * item_bytes(e.signature());
  if (r != root) {
    e.run({Transfer::send(root, send, bytes, 0)});
    return;
  }
  char* tmp = e.scratch(checked_mul(bytes, n, "reduce: scratch for ", n, " inputs of ", bytes, " bytes"), 1);
  std::vector<Transfer>& ts = e.step_list();
  for (int p = 0; p < n; ++p) {
    if (p != r) add_recv(ts, p, tmp + p * bytes, bytes, 0);
  }
  e.run(ts);
  if (bytes == 0) return;
  e.exec().copy(tmp + r * bytes, send, bytes);
  e.exec().copy(recv, tmp, bytes);
  for (int p = 1; p < n; ++p) combine(e, recv, recv, tmp + p * bytes, count);
}

}  // namespace omniccl::algo
