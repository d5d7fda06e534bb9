// Pure rank arithmetic shared by the algorithms (no I/O, no state).
//
// Words: a "block" is one rank's share of a vector split n ways; "vrank" is a
// rank renumbered so that the root is 0; "fold" maps n ranks onto the largest
// power of two p2 <= n: the first 2*(n-p2) ranks pair up, the even one of each
// pair hands its data to the odd one and sits out the power-of-two rounds.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>

namespace omniccl::patterns {

/// First element of block i when `count` elements are split into n blocks
/// whose sizes differ by at most one (the first count % n are larger).
inline size_t block_offset(size_t i, size_t count, size_t n) { return i * (count / n) + std::min(i, count % n); }
/// Elements in block i.
inline size_t block_count(size_t i, size_t count, size_t n) { return count / n + (i < count % n ? 1 : 0); }

/// Rank renumbered so that root becomes 0, and back.
inline int to_vrank(int rank, int root, int n) { return (rank - root + n) % n; }
inline int from_vrank(int vrank, int root, int n) { return (vrank + root) % n; }

/// Lowest set bit of v (v > 0).
inline int lowbit(int v) { return v & -v; }
/// Largest power of two <= n (n >= 1).
inline int pow2_floor(int n) {
  int p = 1;
  while (p * 2 <= n) p *= 2;
  return p;
}
/// Binomial-tree subtree of vrank v covers vranks [v, v + subtree_size(v, n)).
inline int subtree_size(int v, int n) { return v == 0 ? n : std::min(lowbit(v), n - v); }

/// Fold of n ranks onto p2 = pow2_floor(n); extra = n - p2.
struct Fold {
  int n, p2, extra;
  explicit Fold(int nranks) : n(nranks), p2(pow2_floor(nranks)), extra(nranks - pow2_floor(nranks)) {}
  /// Rank in the power-of-two group, or -1 for ranks that sit out.
  int new_rank(int r) const {
    if (r < 2 * extra) return r % 2 == 0 ? -1 : r / 2;
    return r - extra;
  }
  /// Real rank of a power-of-two group member.
  int real_rank(int v) const { return v < extra ? 2 * v + 1 : v + extra; }
  /// First real rank whose block belongs to group member v (v <= p2); group
  /// members [a, b) own the contiguous real blocks [first_block(a), first_block(b)).
  int first_block(int v) const { return v < extra ? 2 * v : v + extra; }
};

/// Start of chunk k when `len` units are cut into chunks of `per` (len past
/// the end: an empty chunk).
inline size_t chunk_start(size_t len, size_t per, size_t k) { return std::min(k * per, len); }
/// Length of that chunk.
inline size_t chunk_len(size_t len, size_t per, size_t k) {
  return std::min((k + 1) * per, len) - chunk_start(len, per, k);
}
/// How many chunks of `per` cover `len` units (at least one).
inline size_t chunks_of(size_t len, size_t per) { return std::max<size_t>(1, (len + per - 1) / per); }

/// An algorithm of `phases` steps run on `chunks` columns (chunk k of every
/// block), column k one phase behind column k-1, so that what one phase
/// receives goes on in the next while it is still in the caches: for each
/// superstep, add(k, j, step) for every column k in it (in column order) at
/// its phase j, with a step number unique to (k, j); then end() runs it.
template <typename Add, typename End>
void by_columns(size_t chunks, size_t phases, Add add, End end) {
  for (size_t t = 0; t + 1 < chunks + phases; ++t) {
    for (size_t k = t + 1 > phases ? t + 1 - phases : 0; k <= t && k < chunks; ++k) {
      add(k, t - k, static_cast<uint32_t>(k * phases + (t - k)));
    }
    end();
  }
}

}  // namespace omniccl::patterns
