// Prefix reductions: scan (inclusive) and exscan (exclusive).
//
// Words used here:
//   partial  the op over a run of consecutive ranks' inputs ending at this
//            rank: before round k (distance d = 2^k) rank r's partial covers
//            ranks max(0, r-d+1)..r; the one it receives from r-d covers
//            max(0, r-2d+1)..r-d, so combining the two doubles the run.
//   prefix   exscan's second partial, the same run without this rank's own
//            input (max(0, r-d+1)..r-1, empty before the first round).
// The received value is always the left operand of the combine, so the
// ranks' inputs meet in rank order. Every rank runs the same rounds, and a
// round's send and receive go to different peers (r+d, r-d), so no step
// waits on anything but messages already on their way.
#include <vector>

#include "algorithm/algorithms.h"

namespace omniccl::algo {

namespace {

/// out = left op right in the operation's combining op (AVG and PREMUL_SUM
/// are refused for scans before they start).
void combine(Engine& e, char* out, const char* left, const char* right, size_t count) {
  e.exec().reduce(out, left, right, count, e.signature().dtype, e.signature().redop);
}

/// One round at distance d: sends `partial` up to r+d (if any) and receives
/// the partial of r-d (if any) into `incoming`. True when one came.
bool exchange(Engine& e, const char* partial, char* incoming, size_t bytes, int d) {
  const int n = e.size(), r = e.rank();
  std::vector<Transfer>& ts = e.step_list();
  if (r + d < n) add_send(ts, r + d, partial, bytes, uint32_t(d));
  if (r - d >= 0) add_recv(ts, r - d, incoming, bytes, uint32_t(d));
  e.run(ts);
  ts.clear();
  return r - d >= 0;
}

}  // namespace

void scan_recursive_doubling(Engine& e, const char* send, char* recv, size_t count) {
  const int n = e.size();
  const size_t bytes = count * item_bytes(e.signature());  // count: items
  if (send != recv && bytes > 0) e.exec().copy(recv, send, bytes);
  if (n == 1) return;
  char* incoming = e.scratch(bytes, 1);
  for (int d = 1; d < n; d <<= 1) {
    // Ranks below d have their whole prefix already; they only send.
    if (exchange(e, recv, incoming, bytes, d) && bytes > 0) combine(e, recv, incoming, recv, count);
  }
}

void exscan_recursive_doubling(Engine& e, const char* send, char* recv, size_t count) {
  const int n = e.size(), r = e.rank();
  const size_t bytes = count * item_bytes(e.signature());  // count: items
  if (n == 1) return;
  char* partial = e.scratch(bytes, 1);
  char* incoming = e.scratch(bytes, 2);
  if (bytes > 0) e.exec().copy(partial, send, bytes);
  bool have_prefix = false;  // recv holds the prefix once a partial came
  for (int d = 1; d < n; d <<= 1) {
    if (!exchange(e, partial, incoming, bytes, d) || bytes == 0) continue;
    if (have_prefix) {
      combine(e, recv, incoming, recv, count);
    } else {
      e.exec().copy(recv, incoming, bytes);
      have_prefix = true;
    }
    // The partial is sent on only while a rank above needs it.
    if (r + 2 * d < n) combine(e, partial, incoming, partial, count);
  }
}

}  // namespace omniccl::algo
