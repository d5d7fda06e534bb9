// The multi-rank correctness matrix (DESIGN.md sections 4 and 7).
//
// Rank counts 1, 2, 3, 4, 5, 8 x transport (shm, tcp) x algorithm set: every
// operation x dtype x reduce op x size {0, 1, 7, 3n+1 (not divisible by n),
// 1000}, results compared with the serial reference in reference.h, plus
// in-place forms, NULL root-only buffers on non-roots, v-variants,
// send/recv, async work handles (wait and test), a barrier that is checked
// through shared memory, and all_reduce results that must be bit-identical
// on every rank. A second suite runs every collective x algorithm with
// buffers of at least 16 MiB.
//
// Speed: one job (fork of N ranks) per (nranks, transport, algorithm set);
// the combinations loop inside the rank function. An algorithm set pins one
// algorithm per collective (set i takes the i-th algorithm of each); a
// collective runs in set i only if it has more than i algorithms, so no
// (collective, algorithm) pair is repeated. The "tuned" set runs everything
// with the library's default choice. Operations are issued blocking, async
// + occl_work_wait or async + occl_work_test polling, by case number.
//
// Within a job, a data mismatch is reported and the job goes on (all ranks
// stay in step); a call that fails ends the rank (the others then fail fast).
// OCCL_MATRIX_VERBOSE=1 makes rank 0 of each job print how many cases ran.
#include <gtest/gtest.h>
#include <sched.h>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <new>
#include <string>
#include <thread>
#include <tuple>
#include <vector>

#include "harness.h"
#include "reference.h"

namespace {

using namespace occl_ref;
using omniccl::testing::JobOptions;
using omniccl::testing::JobResult;
using omniccl::testing::run_ranks;
using omniccl::testing::Tensor1D;

// ---------------------------------------------------------------------------
// Algorithm sets

enum Coll {
  kAllReduce,
  kReduceScatter,
  kAllGather,
  kBroadcast,
  kReduce,
  kGather,
  kScatter,
  kAllToAll,
  kBarrier,
  kScan,
  kExScan
};

struct CollAlgos {
  const char* name;
  std::vector<const char*> algos;
};

const std::vector<CollAlgos>& colls() {
  static const std::vector<CollAlgos> k = {
      {"all_reduce", {"ring", "recursive_doubling", "tree", "direct", "pipelined"}},
      {"reduce_scatter", {"ring", "recursive_halving", "direct"}},
      {"all_gather", {"ring", "bruck", "direct", "recursive_doubling", "pipelined"}},
      {"broadcast", {"tree", "ring", "direct"}},
      {"reduce", {"tree", "direct"}},
      {"gather", {"tree", "direct"}},
      {"scatter", {"tree", "direct"}},
      {"all_to_all", {"pairwise", "direct"}},
      {"barrier", {"recursive_doubling", "dissemination", "direct"}},
      {"scan", {"recursive_doubling"}},
      {"exscan", {"recursive_doubling"}},
  };
  return k;
}
constexpr int kNumSets = 5;  // the most algorithms any collective has
constexpr int kTuned = -1;

/// OMNICCL_ALGO-style list for a set; "" (tuned) for kTuned.
std::string algo_spec(int set) {
  if (set == kTuned) return "";
  std::string s;
  for (const auto& c : colls()) {
    s += cat(s.empty() ? "" : ",", c.name, "=", c.algos[size_t(set) % c.algos.size()]);
  }
  return s;
}

/// Whether collective c runs in set (each (collective, algorithm) once).
bool owns(int set, Coll c) { return set == kTuned || set < static_cast<int>(colls()[c].algos.size()); }

std::string set_name(int set) { return set == kTuned ? std::string("tuned") : cat("set", set); }

// ---------------------------------------------------------------------------
// Per-rank context

/// Memory shared by the ranks of one job (mapped before fork).
struct Shared {
  std::atomic<long> barrier_arrivals;
};
static_assert(std::atomic<long>::is_always_lock_free);

Shared* map_shared() {
  void* p = ::mmap(nullptr, 4096, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  if (p == MAP_FAILED) return nullptr;
  return new (p) Shared{};
}
void unmap_shared(Shared* s) {
  if (s != nullptr) ::munmap(s, 4096);
}

struct Ctx {
  occl_comm_t comm = nullptr;
  int rank = 0;
  int n = 1;
  int set = kTuned;
  Shared* shared = nullptr;
  uint64_t cs = 0;  // case number: same sequence on every rank
  int failures = 0;
  bool broken = false;  // a call failed: stop issuing
  long barriers = 0;

  uint64_t next() { return ++cs; }
  void fail(const std::string& what) {
    if (failures++ < 25) std::fprintf(stderr, "rank %d [%s]: FAILED: %s\n", rank, set_name(set).c_str(), what.c_str());
  }
  /// err == "" means the check passed.
  void expect(const std::string& err, const std::string& what) {
    if (!err.empty()) fail(what + ": " + err);
  }
};

/// Issues one operation, blocking, async + wait, or async + test polling
/// (chosen by the case number), and checks its status. On failure the
/// context is marked broken.
template <class Fn>
bool issue(Ctx& c, const std::string& what, Fn&& fn) {
  const int mode = static_cast<int>(c.cs % 3);
  occl_status_t s;
  if (mode == 0) {
    s = fn(nullptr);
  } else {
    occl_work_t w = nullptr;
    s = fn(&w);
    if (s == OCCL_SUCCESS) {
      if (w == nullptr) {
        c.fail(what + ": async call succeeded but stored no work handle");
        c.broken = true;
        return false;
      }
      if (mode == 1) {
        s = occl_work_wait(w);
      } else {
        while ((s = occl_work_test(w)) == OCCL_ERR_IN_PROGRESS) sched_yield();
      }
      if (s == OCCL_SUCCESS) {
        // A finished handle keeps answering success.
        occl_status_t again = mode == 1 ? occl_work_test(w) : occl_work_wait(w);
        if (again != OCCL_SUCCESS) c.fail(what + ": completed work handle answered " + occl_status_string(again));
      }
      std::string err = s == OCCL_SUCCESS ? std::string() : std::string(occl_last_error());
      occl_work_free(w);
      if (s != OCCL_SUCCESS) {
        c.fail(cat(what, " (async, ", mode == 1 ? "wait" : "test", "): ", occl_status_string(s), ": ", err));
        c.broken = true;
        return false;
      }
      return true;
    }
  }
  if (s != OCCL_SUCCESS) {
    std::string err = occl_last_error();
    c.fail(cat(what, mode == 0 ? "" : " (async issue)", ": ", occl_status_string(s), ": ", err));
    c.broken = true;
    return false;
  }
  return true;
}

// ---------------------------------------------------------------------------
// Data movement

void t_broadcast(Ctx& c, DT d, size_t count, int root) {
  const uint64_t cs = c.next();
  Buf b(d, count);
  if (c.rank == root) fill_pattern(d, b.data(), count, 0, root, cs);
  Tensor1D t(b.data(), count, dt_dl(d));
  const std::string what = cat("broadcast ", dt_name(d), " count=", count, " root=", root);
  if (!issue(c, what, [&](occl_work_t* w) { return occl_broadcast(&t, root, c.comm, w); })) return;
  c.expect(check_pattern(d, b.data(), count, 0, root, cs), what);
}

/// scatter: root's sendbuf (n*cnt) split; rank i gets part i. In place on the
/// root: recvbuf = sendbuf + root*cnt. Non-roots pass NULL or an ignored
/// buffer that must stay untouched.
void t_scatter(Ctx& c, DT d, size_t cnt, int root, bool inplace) {
  const uint64_t cs = c.next();
  const bool is_root = c.rank == root;
  const bool null_send = (cs & 1) != 0;
  Buf send(d, c.n * cnt), recv(d, cnt);
  if (is_root) fill_pattern(d, send.data(), c.n * cnt, 0, root, cs);
  Tensor1D st(send.data(), c.n * cnt, dt_dl(d));
  unsigned char* out = is_root && inplace ? send.at(root * cnt) : recv.data();
  Tensor1D rt(out, cnt, dt_dl(d));
  const DLTensor* sp = is_root || !null_send ? &st : nullptr;
  const std::string what = cat("scatter ", dt_name(d), " count=", cnt, " root=", root, inplace ? " in-place" : "",
                               sp ? "" : " (NULL sendbuf)");
  if (!issue(c, what, [&](occl_work_t* w) { return occl_scatter(sp, &rt, root, c.comm, w); })) return;
  c.expect(check_pattern(d, out, cnt, c.rank * cnt, root, cs), what + ": recvbuf");
  if (is_root) c.expect(check_pattern(d, send.data(), c.n * cnt, 0, root, cs), what + ": root sendbuf changed");
  if (!is_root) c.expect(check_sentinel(send.data(), send.nbytes()), what + ": ignored non-root sendbuf");
}

/// gather: every rank's sendbuf (cnt) into root's recvbuf (n*cnt). In place
/// on the root: sendbuf = recvbuf + root*cnt.
void t_gather(Ctx& c, DT d, size_t cnt, int root, bool inplace) {
  const uint64_t cs = c.next();
  const bool is_root = c.rank == root;
  const bool null_recv = (cs & 1) != 0;
  Buf send(d, cnt), recv(d, c.n * cnt);
  unsigned char* in = is_root && inplace ? recv.at(root * cnt) : send.data();
  fill_pattern(d, in, cnt, 0, c.rank, cs);
  Tensor1D st(in, cnt, dt_dl(d));
  Tensor1D rt(recv.data(), c.n * cnt, dt_dl(d));
  const DLTensor* rp = is_root || !null_recv ? &rt : nullptr;
  const std::string what = cat("gather ", dt_name(d), " count=", cnt, " root=", root, inplace ? " in-place" : "",
                               rp ? "" : " (NULL recvbuf)");
  if (!issue(c, what, [&](occl_work_t* w) { return occl_gather(&st, rp, root, c.comm, w); })) return;
  if (is_root) {
    for (int r = 0; r < c.n; ++r) {
      c.expect(check_pattern(d, recv.at(r * cnt), cnt, 0, r, cs), cat(what, ": block of rank ", r));
    }
  } else {
    c.expect(check_sentinel(recv.data(), recv.nbytes()), what + ": ignored non-root recvbuf");
  }
  if (in == send.data()) c.expect(check_pattern(d, send.data(), cnt, 0, c.rank, cs), what + ": sendbuf changed");
}

/// all_gather; in place: sendbuf = recvbuf + rank*cnt.
void t_all_gather(Ctx& c, DT d, size_t cnt, bool inplace) {
  const uint64_t cs = c.next();
  Buf send(d, cnt), recv(d, c.n * cnt);
  unsigned char* in = inplace ? recv.at(c.rank * cnt) : send.data();
  fill_pattern(d, in, cnt, 0, c.rank, cs);
  Tensor1D st(in, cnt, dt_dl(d));
  Tensor1D rt(recv.data(), c.n * cnt, dt_dl(d));
  const std::string what = cat("all_gather ", dt_name(d), " count=", cnt, inplace ? " in-place" : "");
  if (!issue(c, what, [&](occl_work_t* w) { return occl_all_gather(&st, &rt, c.comm, w); })) return;
  for (int r = 0; r < c.n; ++r) {
    c.expect(check_pattern(d, recv.at(r * cnt), cnt, 0, r, cs), cat(what, ": block of rank ", r));
  }
  if (!inplace) c.expect(check_pattern(d, send.data(), cnt, 0, c.rank, cs), what + ": sendbuf changed");
}

/// all_to_all with cnt elements per peer; in place: sendbuf == recvbuf.
void t_all_to_all(Ctx& c, DT d, size_t cnt, bool inplace) {
  const uint64_t cs = c.next();
  Buf send(d, c.n * cnt), recv(d, c.n * cnt);
  fill_pattern(d, send.data(), c.n * cnt, 0, c.rank, cs);
  unsigned char* out = inplace ? send.data() : recv.data();
  Tensor1D st(send.data(), c.n * cnt, dt_dl(d));
  Tensor1D rt(out, c.n * cnt, dt_dl(d));
  const std::string what = cat("all_to_all ", dt_name(d), " count=", cnt, " per peer", inplace ? " in-place" : "");
  if (!issue(c, what, [&](occl_work_t* w) { return occl_all_to_all(&st, &rt, c.comm, w); })) return;
  for (int r = 0; r < c.n; ++r) {
    // Part `rank` of rank r's sendbuf lands in part r of ours.
    c.expect(check_pattern(d, out + r * cnt * dt_size(d), cnt, c.rank * cnt, r, cs), cat(what, ": part from rank ", r));
  }
  if (!inplace) c.expect(check_pattern(d, send.data(), c.n * cnt, 0, c.rank, cs), what + ": sendbuf changed");
}

/// Barrier checked through shared memory: one rank (changing each round) is
/// late; nobody may leave before everyone has arrived.
void t_barrier(Ctx& c) {
  c.next();
  ++c.barriers;
  if (c.rank == static_cast<int>(c.barriers % c.n)) std::this_thread::sleep_for(std::chrono::milliseconds(3));
  c.shared->barrier_arrivals.fetch_add(1);
  const std::string what = cat("barrier #", c.barriers);
  if (!issue(c, what, [&](occl_work_t* w) { return occl_barrier(c.comm, w); })) return;
  long seen = c.shared->barrier_arrivals.load();
  if (seen < c.barriers * c.n) {
    c.fail(cat(what, ": returned after ", seen, " arrivals, before all ", c.barriers * c.n, " had arrived"));
  }
}

// ---------------------------------------------------------------------------
// v-variants and send/recv

/// Per-rank count of the v-variants: varied, with zeros at ranks 2, 5, ...
int64_t vcount(int i, size_t count) { return i % 3 == 2 ? 0 : static_cast<int64_t>(count) + (i * 5) % 7; }
/// Elements rank a sends to rank b in all_to_allv.
int64_t a2a_count(int a, int b, size_t count) {
  return (a + 2 * b + static_cast<int>(count)) % 4 == 3 ? 0 : static_cast<int64_t>(count) + (a * 3 + b) % 3;
}

/// Displacements: packed (returned empty: pass NULL) or with a gap of two
/// elements before each part. Returns the total elements needed.
size_t layout(const std::vector<int64_t>& counts, bool gaps, std::vector<int64_t>& displs) {
  displs.clear();
  int64_t off = 0;
  for (int64_t cnt : counts) {
    if (gaps) off += 2;
    displs.push_back(off);
    off += cnt;
  }
  if (gaps) off += 2;
  if (!gaps) displs.clear();
  return static_cast<size_t>(off);
}

/// Checks a v-layout buffer: part i must match check_part(i, ptr); gaps sentinel.
template <class PartCheck>
void check_v_layout(Ctx& c, DT d, unsigned char* buf, size_t total, const std::vector<int64_t>& counts,
                    const std::vector<int64_t>& displs, const std::string& what, PartCheck&& part) {
  const size_t es = dt_size(d);
  std::vector<bool> covered(total, false);
  int64_t off = 0;
  for (size_t i = 0; i < counts.size(); ++i) {
    int64_t at = displs.empty() ? off : displs[i];
    off += counts[i];
    c.expect(part(static_cast<int>(i), buf + at * es, static_cast<size_t>(counts[i])), cat(what, ": part of rank ", i));
    for (int64_t k = 0; k < counts[i]; ++k) covered[size_t(at + k)] = true;
  }
  for (size_t k = 0; k < total; ++k) {
    if (!covered[k]) c.expect(check_sentinel(buf + k * es, es), cat(what, ": gap element ", k));
  }
}

void t_all_gatherv(Ctx& c, DT d, size_t count) {
  const uint64_t cs = c.next();
  std::vector<int64_t> counts(c.n), displs;
  for (int i = 0; i < c.n; ++i) counts[i] = vcount(i, count);
  const bool gaps = (cs & 1) != 0;
  const size_t total = layout(counts, gaps, displs);
  Buf send(d, size_t(counts[c.rank])), recv(d, total);
  fill_pattern(d, send.data(), send.count, 0, c.rank, cs);
  Tensor1D st(send.data(), send.count, dt_dl(d));
  Tensor1D rt(recv.data(), total, dt_dl(d));
  const std::string what =
      cat("all_gatherv ", dt_name(d), " base count=", count, gaps ? " (displs with gaps)" : " (packed)");
  if (!issue(c, what, [&](occl_work_t* w) {
        return occl_all_gatherv(&st, &rt, counts.data(), displs.empty() ? nullptr : displs.data(), c.comm, w);
      }))
    return;
  check_v_layout(c, d, recv.data(), total, counts, displs, what,
                 [&](int i, const void* p, size_t n) { return check_pattern(d, p, n, 0, i, cs); });
}

/// all_to_allv; in place: one buffer for both layouts (the library keeps a
/// copy of the input).
void t_all_to_allv(Ctx& c, DT d, size_t count, bool inplace) {
  const uint64_t cs = c.next();
  std::vector<int64_t> sc(c.n), rc(c.n), sd, rd;
  for (int p = 0; p < c.n; ++p) {
    sc[p] = a2a_count(c.rank, p, count);
    rc[p] = a2a_count(p, c.rank, count);
  }
  const bool gaps = (cs & 1) != 0;
  const size_t stotal = layout(sc, gaps, sd), rtotal = layout(rc, !gaps, rd);
  Buf send(d, inplace ? std::max(stotal, rtotal) : stotal), recv(d, rtotal);
  // Part p of the send layout holds elements [p << 20, ...) of our pattern.
  {
    int64_t off = 0;
    for (int p = 0; p < c.n; ++p) {
      int64_t at = sd.empty() ? off : sd[p];
      off += sc[p];
      fill_pattern(d, send.at(size_t(at)), size_t(sc[p]), size_t(p) << 20, c.rank, cs);
    }
  }
  const std::vector<unsigned char> send_copy = send.bytes;
  unsigned char* out = inplace ? send.data() : recv.data();
  Tensor1D st(send.data(), int64_t(send.count), dt_dl(d));
  Tensor1D rt(out, int64_t(inplace ? send.count : rtotal), dt_dl(d));
  const std::string what = cat("all_to_allv ", dt_name(d), " base count=", count,
                               gaps ? " (send gaps)" : " (recv gaps)", inplace ? " in-place" : "");
  if (!issue(c, what, [&](occl_work_t* w) {
        return occl_all_to_allv(&st, sc.data(), sd.empty() ? nullptr : sd.data(), &rt, rc.data(),
                                rd.empty() ? nullptr : rd.data(), c.comm, w);
      }))
    return;
  if (inplace) {
    // Only the received parts are defined; check them.
    int64_t off = 0;
    for (int p = 0; p < c.n; ++p) {
      int64_t at = rd.empty() ? off : rd[p];
      off += rc[p];
      c.expect(check_pattern(d, out + at * dt_size(d), size_t(rc[p]), size_t(c.rank) << 20, p, cs),
               cat(what, ": part of rank ", p));
    }
    return;
  }
  check_v_layout(c, d, recv.data(), rtotal, rc, rd, what,
                 [&](int i, const void* p, size_t n) { return check_pattern(d, p, n, size_t(c.rank) << 20, i, cs); });
  if (send.bytes != send_copy) c.fail(what + ": sendbuf changed");
}

void t_gatherv(Ctx& c, DT d, size_t count, int root) {
  const uint64_t cs = c.next();
  const bool is_root = c.rank == root;
  std::vector<int64_t> counts(c.n), displs;
  for (int i = 0; i < c.n; ++i) counts[i] = vcount(i, count);
  const bool gaps = (cs & 1) != 0;
  const size_t total = layout(counts, gaps, displs);
  Buf send(d, size_t(counts[c.rank])), recv(d, total);
  fill_pattern(d, send.data(), send.count, 0, c.rank, cs);
  Tensor1D st(send.data(), send.count, dt_dl(d));
  Tensor1D rt(recv.data(), total, dt_dl(d));
  // Non-roots pass NULL recvbuf/counts/displs in every other case.
  const bool nulls = !is_root && (cs & 2) != 0;
  const std::string what = cat("gatherv ", dt_name(d), " base count=", count, " root=", root,
                               gaps ? " (gaps)" : " (packed)", nulls ? " (NULL root-only args)" : "");
  if (!issue(c, what, [&](occl_work_t* w) {
        return occl_gatherv(&st, nulls ? nullptr : &rt, nulls ? nullptr : counts.data(),
                            nulls || displs.empty() ? nullptr : displs.data(), root, c.comm, w);
      }))
    return;
  if (is_root) {
    check_v_layout(c, d, recv.data(), total, counts, displs, what,
                   [&](int i, const void* p, size_t n) { return check_pattern(d, p, n, 0, i, cs); });
  } else {
    c.expect(check_sentinel(recv.data(), recv.nbytes()), what + ": ignored non-root recvbuf");
  }
  c.expect(check_pattern(d, send.data(), send.count, 0, c.rank, cs), what + ": sendbuf changed");
}

void t_scatterv(Ctx& c, DT d, size_t count, int root) {
  const uint64_t cs = c.next();
  const bool is_root = c.rank == root;
  std::vector<int64_t> counts(c.n), displs;
  for (int i = 0; i < c.n; ++i) counts[i] = vcount(i, count);
  const bool gaps = (cs & 1) != 0;
  const size_t total = layout(counts, gaps, displs);
  Buf send(d, total), recv(d, size_t(counts[c.rank]));
  if (is_root) {
    int64_t off = 0;
    for (int i = 0; i < c.n; ++i) {
      int64_t at = displs.empty() ? off : displs[i];
      off += counts[i];
      fill_pattern(d, send.at(size_t(at)), size_t(counts[i]), size_t(i) << 20, root, cs);
    }
  }
  const std::vector<unsigned char> send_copy = send.bytes;
  Tensor1D st(send.data(), total, dt_dl(d));
  Tensor1D rt(recv.data(), recv.count, dt_dl(d));
  const bool nulls = !is_root && (cs & 2) != 0;
  const std::string what = cat("scatterv ", dt_name(d), " base count=", count, " root=", root,
                               gaps ? " (gaps)" : " (packed)", nulls ? " (NULL root-only args)" : "");
  if (!issue(c, what, [&](occl_work_t* w) {
        return occl_scatterv(nulls ? nullptr : &st, nulls ? nullptr : counts.data(),
                             nulls || displs.empty() ? nullptr : displs.data(), &rt, root, c.comm, w);
      }))
    return;
  c.expect(check_pattern(d, recv.data(), recv.count, size_t(c.rank) << 20, root, cs), what + ": recvbuf");
  if (send.bytes != send_copy) c.fail(what + ": sendbuf changed");
}

/// Ring exchange: each rank sends to the right and receives from the left
/// (even ranks send first, odd ranks receive first).
void t_send_recv(Ctx& c, DT d, size_t count) {
  const uint64_t cs = c.next();
  if (c.n == 1) return;
  const int right = (c.rank + 1) % c.n, left = (c.rank - 1 + c.n) % c.n;
  Buf send(d, count), recv(d, count);
  fill_pattern(d, send.data(), count, 0, c.rank, cs);
  Tensor1D st(send.data(), count, dt_dl(d));
  Tensor1D rt(recv.data(), count, dt_dl(d));
  const std::string what = cat("send/recv ring ", dt_name(d), " count=", count);
  auto do_send = [&] {
    return issue(c, what + " (send)", [&](occl_work_t* w) { return occl_send(&st, right, c.comm, w); });
  };
  auto do_recv = [&] {
    return issue(c, what + " (recv)", [&](occl_work_t* w) { return occl_recv(&rt, left, c.comm, w); });
  };
  if (c.rank % 2 == 0) {
    if (!do_send() || !do_recv()) return;
  } else {
    if (!do_recv() || !do_send()) return;
  }
  c.expect(check_pattern(d, recv.data(), count, 0, left, cs), what);
}

// ---------------------------------------------------------------------------
// Reductions

bool same_input(DT d, const Op& op, const Buf& b, size_t count, size_t base, int rank, uint64_t cs) {
  Buf want(d, count);
  fill_reduce_input(d, op, want.data(), count, base, rank, cs);
  return count == 0 || std::memcmp(want.data(), b.bytes.data(), count * dt_size(d)) == 0;
}

void t_all_reduce(Ctx& c, DT d, const Op& op, size_t count, bool inplace) {
  const uint64_t cs = c.next();
  Buf send(d, count), recv(d, count);
  fill_reduce_input(d, op, send.data(), count, 0, c.rank, cs);
  unsigned char* out = inplace ? send.data() : recv.data();
  Tensor1D st(send.data(), count, dt_dl(d));
  Tensor1D rt(out, count, dt_dl(d));
  const std::string what = cat("all_reduce ", dt_name(d), " ", op.name(), " count=", count, inplace ? " in-place" : "");
  if (!issue(c, what, [&](occl_work_t* w) { return occl_all_reduce(&st, &rt, op.handle, c.comm, w); })) return;
  c.expect(check_reduce_output(d, op, out, count, 0, c.n, cs), what);
  if (!inplace && !same_input(d, op, send, count, 0, c.rank, cs)) c.fail(what + ": sendbuf changed");
}

/// reduce to root. In place: sendbuf == recvbuf on every rank (the root's
/// result lands there; a non-root's recvbuf is ignored, so its sendbuf must
/// come back unchanged). Non-roots pass NULL recvbuf in every other case.
void t_reduce(Ctx& c, DT d, const Op& op, size_t count, int root, bool inplace) {
  const uint64_t cs = c.next();
  const bool is_root = c.rank == root;
  Buf send(d, count), recv(d, count);
  fill_reduce_input(d, op, send.data(), count, 0, c.rank, cs);
  unsigned char* out = inplace ? send.data() : recv.data();
  Tensor1D st(send.data(), count, dt_dl(d));
  Tensor1D rt(out, count, dt_dl(d));
  const DLTensor* rp = is_root || (cs & 1) == 0 ? &rt : nullptr;
  const std::string what = cat("reduce ", dt_name(d), " ", op.name(), " count=", count, " root=", root,
                               inplace ? " in-place" : "", rp ? "" : " (NULL recvbuf)");
  if (!issue(c, what, [&](occl_work_t* w) { return occl_reduce(&st, rp, op.handle, root, c.comm, w); })) return;
  if (is_root) {
    c.expect(check_reduce_output(d, op, out, count, 0, c.n, cs), what);
  } else if (!inplace) {
    c.expect(check_sentinel(recv.data(), recv.nbytes()), what + ": ignored non-root recvbuf");
  }
  if (!(is_root && inplace) && !same_input(d, op, send, count, 0, c.rank, cs)) {
    c.fail(what + (is_root ? ": root sendbuf changed" : ": non-root sendbuf changed"));
  }
}

/// reduce_scatter: sendbuf n*cnt, rank i gets reduced part i. In place:
/// recvbuf = sendbuf + rank*cnt.
void t_reduce_scatter(Ctx& c, DT d, const Op& op, size_t cnt, bool inplace) {
  const uint64_t cs = c.next();
  Buf send(d, c.n * cnt), recv(d, cnt);
  fill_reduce_input(d, op, send.data(), c.n * cnt, 0, c.rank, cs);
  unsigned char* out = inplace ? send.at(c.rank * cnt) : recv.data();
  Tensor1D st(send.data(), c.n * cnt, dt_dl(d));
  Tensor1D rt(out, cnt, dt_dl(d));
  const std::string what =
      cat("reduce_scatter ", dt_name(d), " ", op.name(), " count=", cnt, inplace ? " in-place" : "");
  if (!issue(c, what, [&](occl_work_t* w) { return occl_reduce_scatter(&st, &rt, op.handle, c.comm, w); })) return;
  c.expect(check_reduce_output(d, op, out, cnt, c.rank * cnt, c.n, cs), what);
  if (!inplace && !same_input(d, op, send, c.n * cnt, 0, c.rank, cs)) c.fail(what + ": sendbuf changed");
}

/// scan (inclusive): rank i gets the reduction over ranks 0..i; exscan
/// (exclusive) over ranks 0..i-1, and rank 0's recvbuf stays as it was.
void t_scan(Ctx& c, DT d, const Op& op, size_t count, bool inplace, bool exclusive) {
  const uint64_t cs = c.next();
  Buf send(d, count), recv(d, count);
  fill_reduce_input(d, op, send.data(), count, 0, c.rank, cs);
  unsigned char* out = inplace ? send.data() : recv.data();
  Tensor1D st(send.data(), count, dt_dl(d));
  Tensor1D rt(out, count, dt_dl(d));
  const std::string what =
      cat(exclusive ? "exscan " : "scan ", dt_name(d), " ", op.name(), " count=", count, inplace ? " in-place" : "");
  if (!issue(c, what, [&](occl_work_t* w) {
        return exclusive ? occl_exscan(&st, &rt, op.handle, c.comm, w) : occl_scan(&st, &rt, op.handle, c.comm, w);
      })) {
    return;
  }
  if (exclusive && c.rank == 0) {
    const std::string err = inplace ? (same_input(d, op, send, count, 0, c.rank, cs) ? "" : "sendbuf changed")
                                    : check_sentinel(recv.data(), recv.nbytes());
    c.expect(err, what + ": rank 0's recvbuf");
  } else {
    c.expect(check_reduce_output(d, op, out, count, 0, exclusive ? c.rank : c.rank + 1, cs), what);
  }
  if (!inplace && !same_input(d, op, send, count, 0, c.rank, cs)) c.fail(what + ": sendbuf changed");
}

/// The reduce ops a dtype supports, with the created PREMUL_SUM ops.
std::vector<Op> ops_for(DT d, const Op& premul_int, const Op& premul_float, const Op& neg_int, const Op& neg_float) {
  std::vector<Op> out;
  for (occl_red_op_t k : {OCCL_SUM, OCCL_PROD, OCCL_MIN, OCCL_MAX, OCCL_AVG, OCCL_BAND, OCCL_BOR, OCCL_BXOR,
                          OCCL_PREMUL_SUM, OCCL_LAND, OCCL_LOR, OCCL_LXOR, OCCL_MAXLOC, OCCL_MINLOC}) {
    if (!op_defined(k, d)) continue;
    out.push_back(Op{k, k, 1.0});  // plain OCCL_PREMUL_SUM means scalar 1
  }
  if (op_defined(OCCL_PREMUL_SUM, d)) {
    out.push_back(dt_float(d) ? premul_float : premul_int);
    out.push_back(dt_float(d) ? neg_float : neg_int);
  }
  return out;
}

// ---------------------------------------------------------------------------
// Bit-identical all_reduce

/// Random floating input with real rounding: value of rank r, element i.
double rnd_value(const Op& op, uint64_t h) {
  const double u = static_cast<double>(h >> 11) * 0x1.0p-53;  // [0, 1)
  const double sign = (h & 1) ? -1.0 : 1.0;
  if (op.kind == OCCL_PROD) return sign * (0.5 + 1.5 * u);  // products stay normal
  return sign * std::ldexp(0.5 + u, static_cast<int>((h >> 1) & 7) - 4);
}

template <class C>
void fill_random(const Op& op, void* buf, size_t count, int rank, uint64_t cs) {
  auto* p = static_cast<typename C::S*>(buf);
  for (size_t j = 0; j < count; ++j) p[j] = C::enc(rnd_value(op, hash3(cs, rank, j)));
}

/// Loose reference check of a rounded reduction: |got - ref| within
/// (n+2) * eps * (sum of |terms|).
template <class C>
std::string check_random(const Op& op, const void* got, size_t count, int n, uint64_t cs) {
  const auto* p = static_cast<const typename C::S*>(got);
  for (size_t j = 0; j < count; ++j) {
    double acc = op.kind == OCCL_PROD ? 1.0 : 0.0, mag = op.kind == OCCL_PROD ? 1.0 : 0.0;
    for (int r = 0; r < n; ++r) {
      double x = C::dec(C::enc(rnd_value(op, hash3(cs, r, j))));
      if (op.kind == OCCL_PREMUL_SUM) x *= op.scalar;
      if (op.kind == OCCL_PROD) {
        acc *= x;
        mag *= std::fabs(x);
      } else {
        acc += x;
        mag += std::fabs(x);
      }
    }
    if (op.kind == OCCL_AVG) {
      acc /= n;
      mag /= n;
    }
    const double g = C::dec(p[j]);
    if (!(std::fabs(g - acc) <= (n + 2) * C::kEps * mag + 1e-300)) {
      return cat("element ", j, ": got ", g, ", reference ", acc, " (beyond rounding tolerance)");
    }
  }
  return {};
}

void t_bit_identical(Ctx& c, DT d, const Op& op, size_t count, bool inplace) {
  const uint64_t cs = c.next();
  const size_t es = dt_size(d);
  Buf send(d, count), recv(d, count);
  auto fill = [&](auto codec) { fill_random<decltype(codec)>(op, send.data(), count, c.rank, cs); };
  switch (d) {
    case DT::kF16: fill(F16Codec{}); break;
    case DT::kBF16: fill(BF16Codec{}); break;
    case DT::kF32: fill(F32Codec{}); break;
    default: fill(F64Codec{}); break;
  }
  unsigned char* out = inplace ? send.data() : recv.data();
  Tensor1D st(send.data(), count, dt_dl(d));
  Tensor1D rt(out, count, dt_dl(d));
  const std::string what =
      cat("all_reduce bit-identity ", dt_name(d), " ", op.name(), " count=", count, inplace ? " in-place" : "");
  if (!issue(c, what, [&](occl_work_t* w) { return occl_all_reduce(&st, &rt, op.handle, c.comm, w); })) return;
  // Everyone's raw result bytes, compared with rank 0's.
  Buf all(DT::kU8, c.n * count * es);
  Tensor1D mine(out, count * es, omniccl::testing::dl_uint(8));
  Tensor1D at(all.data(), c.n * count * es, omniccl::testing::dl_uint(8));
  if (!issue(c, what + ": all_gather of result bytes",
             [&](occl_work_t* w) { return occl_all_gather(&mine, &at, c.comm, w); }))
    return;
  for (int r = 1; r < c.n; ++r) {
    if (count > 0 && std::memcmp(all.data(), all.data() + r * count * es, count * es) != 0) {
      size_t k = 0;
      while (std::memcmp(all.data() + k * es, all.data() + (r * count + k) * es, es) == 0) ++k;
      c.fail(cat(what, ": result of rank ", r, " differs from rank 0's at element ", k));
    }
  }
  if (count > 0 && std::memcmp(all.data() + c.rank * count * es, out, count * es) != 0) {
    c.fail(what + ": all_gather returned different bytes for this rank's own block");
  }
  std::string err;
  switch (d) {
    case DT::kF16: err = check_random<F16Codec>(op, out, count, c.n, cs); break;
    case DT::kBF16: err = check_random<BF16Codec>(op, out, count, c.n, cs); break;
    case DT::kF32: err = check_random<F32Codec>(op, out, count, c.n, cs); break;
    default: err = check_random<F64Codec>(op, out, count, c.n, cs); break;
  }
  c.expect(err, what);
}

// ---------------------------------------------------------------------------
// Job bodies

bool make_premul(Ctx& c, double scalar, Op& op) {
  op.kind = OCCL_PREMUL_SUM;
  op.scalar = scalar;
  occl_status_t s = occl_red_op_create_premul_sum(c.comm, scalar, &op.handle);
  if (s != OCCL_SUCCESS || op.handle < OCCL_RED_OP_CUSTOM_BASE) {
    c.fail(cat("occl_red_op_create_premul_sum(", scalar, "): ", occl_status_string(s), " handle ", int(op.handle), ": ",
               occl_last_error()));
    return false;
  }
  return true;
}

bool check_transport(Ctx& c, const std::string& transport) {
  const char* name = nullptr;
  if (occl_comm_transport(c.comm, &name) != OCCL_SUCCESS || name == nullptr) {
    c.fail("occl_comm_transport failed");
    return false;
  }
  if (c.n > 1 && transport != name) c.fail(cat("transport is '", name, "', asked for '", transport, "'"));
  return true;
}

int matrix_rank(occl_comm_t comm, int rank, int n, int set, const std::string& transport, Shared* shared) {
  Ctx c;
  c.comm = comm;
  c.rank = rank;
  c.n = n;
  c.set = set;
  c.shared = shared;
  Op premul_int, premul_float, premul_odd, neg_int, neg_float;
  if (!check_transport(c, transport) || !make_premul(c, 3.0, premul_int) || !make_premul(c, 0.5, premul_float) ||
      !make_premul(c, 0.3, premul_odd) || !make_premul(c, -2.0, neg_int) || !make_premul(c, -1.5, neg_float)) {
    return 1;
  }
  const size_t sizes[] = {0, 1, 7, size_t(3 * n + 1), 1000};
  const bool vops = set == kTuned || set == 0;  // the v-variants and send/recv have no algorithm choice
  for (size_t di = 0; di < std::size(kAllDT) && !c.broken; ++di) {
    const DT d = kAllDT[di];
    const std::vector<Op> ops = ops_for(d, premul_int, premul_float, neg_int, neg_float);
    for (size_t si = 0; si < std::size(sizes) && !c.broken; ++si) {
      const size_t count = sizes[si];
      const int root = static_cast<int>((si + di) % n);
      if (owns(set, kBroadcast)) t_broadcast(c, d, count, root);
      for (bool inplace : {false, true}) {
        if (owns(set, kScatter)) t_scatter(c, d, count, root, inplace);
        if (owns(set, kGather)) t_gather(c, d, count, (root + 1) % n, inplace);
        if (owns(set, kAllGather)) t_all_gather(c, d, count, inplace);
        if (owns(set, kAllToAll)) t_all_to_all(c, d, count, inplace);
      }
      if (vops) {
        t_all_gatherv(c, d, count);
        t_all_to_allv(c, d, count, false);
        t_all_to_allv(c, d, count, true);
        t_gatherv(c, d, count, root);
        t_scatterv(c, d, count, (root + 1) % n);
        t_send_recv(c, d, count);
      }
      for (size_t oi = 0; oi < ops.size() && !c.broken; ++oi) {
        const Op& op = ops[oi];
        const int op_root = static_cast<int>((root + oi) % n);
        // MAXLOC / MINLOC: whole (value, index) pairs (per rank for reduce_scatter).
        const size_t cnt = is_loc(op) ? count - count % 2 : count;
        for (bool inplace : {false, true}) {
          if (owns(set, kAllReduce)) t_all_reduce(c, d, op, cnt, inplace);
          if (owns(set, kReduce)) t_reduce(c, d, op, cnt, inplace ? (op_root + 1) % n : op_root, inplace);
          if (owns(set, kReduceScatter)) t_reduce_scatter(c, d, op, cnt, inplace);
          // AVG and PREMUL_SUM have no prefix meaning (refused: scan_test.cc).
          if (op.kind == OCCL_AVG || op.kind == OCCL_PREMUL_SUM) continue;
          if (owns(set, kScan)) t_scan(c, d, op, cnt, inplace, false);
          if (owns(set, kExScan)) t_scan(c, d, op, cnt, inplace, true);
        }
      }
    }
  }
  if (owns(set, kBarrier)) {
    for (int i = 0; i < 4 && !c.broken; ++i) t_barrier(c);
  }
  if (owns(set, kAllReduce)) {
    const Op sum{OCCL_SUM, OCCL_SUM, 1.0}, prod{OCCL_PROD, OCCL_PROD, 1.0}, avg{OCCL_AVG, OCCL_AVG, 1.0};
    for (DT d : {DT::kF32, DT::kF64, DT::kF16, DT::kBF16}) {
      for (const Op& op : {sum, prod, avg, premul_odd}) {
        for (size_t count : {size_t(7), size_t(3 * n + 1), size_t(1000)}) {
          if (c.broken) break;
          t_bit_identical(c, d, op, count, (count & 1) == 0);
        }
      }
    }
    // Above the tuning threshold (32 KiB) the tuned set switches algorithm.
    if (!c.broken) t_bit_identical(c, DT::kF32, sum, 20011, false);
    if (!c.broken) t_bit_identical(c, DT::kF32, premul_odd, 20011, true);
  }
  // End in step: nobody destroys its communicator while others still work.
  if (!c.broken) {
    occl_status_t s = occl_barrier(comm, nullptr);
    if (s != OCCL_SUCCESS) c.fail(cat("final barrier: ", occl_status_string(s), ": ", occl_last_error()));
  }
  for (const Op* op : {&premul_int, &premul_float, &premul_odd, &neg_int, &neg_float}) {
    if (occl_red_op_destroy(comm, op->handle) != OCCL_SUCCESS) c.fail("occl_red_op_destroy");
  }
  if (rank == 0 && std::getenv("OCCL_MATRIX_VERBOSE") != nullptr) {
    std::fprintf(stderr, "rank 0 [%s]: %llu cases, %d failures\n", set_name(set).c_str(),
                 static_cast<unsigned long long>(c.cs), c.failures);
  }
  return c.failures == 0 ? 0 : 1;
}

// ---------------------------------------------------------------------------
// Large buffers (>= 16 MiB): every collective x algorithm, float32.

constexpr size_t kLarge = (size_t(16) << 20) / sizeof(float);  // 4 Mi float32 = 16 MiB

/// Cheap exact inputs for float32 SUM: small integers.
inline float large_value(int rank, size_t i, uint64_t salt) {
  return static_cast<float>(static_cast<int>((i * 7 + size_t(rank) * 13 + salt) % 17) - 8);
}
/// Unique 32-bit patterns for data movement (moved as float32 bytes).
inline uint32_t large_bits(int rank, size_t i, uint64_t salt) {
  return static_cast<uint32_t>(i * 2654435761u) ^ (uint32_t(rank) << 24) ^ static_cast<uint32_t>(salt * 0x9e3779b9u);
}

void fill_bits(std::vector<uint32_t>& v, size_t from, size_t count, int rank, size_t base, uint64_t salt) {
  for (size_t j = 0; j < count; ++j) v[from + j] = large_bits(rank, base + j, salt);
}
std::string check_bits(const uint32_t* p, size_t count, int rank, size_t base, uint64_t salt) {
  for (size_t j = 0; j < count; ++j) {
    if (p[j] != large_bits(rank, base + j, salt)) {
      return cat("element ", j, " (of ", count, ") is not element ", base + j, " of rank ", rank, "'s data");
    }
  }
  return {};
}
std::string check_large_sum(const float* p, size_t count, size_t base, int n, uint64_t salt) {
  for (size_t j = 0; j < count; ++j) {
    float want = 0;
    for (int r = 0; r < n; ++r) want += large_value(r, base + j, salt);
    if (p[j] != want) return cat("element ", j, " (of ", count, "): got ", p[j], ", want ", want);
  }
  return {};
}

/// scan of 16 MiB of float32 sums, and an in-place exscan of 4 MiB of int32
/// with LXOR, across the transports' staging.
void large_scans(Ctx& c, size_t count) {
  if (!owns(c.set, kScan) || c.broken) return;
  const uint64_t cs = c.next();
  std::vector<float> in(count), out(count, -1.0f);
  for (size_t i = 0; i < count; ++i) in[i] = large_value(c.rank, i, cs);
  Tensor1D st(in.data(), count, omniccl::testing::dl_float(32)), rt(out.data(), count, omniccl::testing::dl_float(32));
  const std::string what = cat("scan float32 SUM count=", count);
  if (issue(c, what, [&](occl_work_t* w) { return occl_scan(&st, &rt, OCCL_SUM, c.comm, w); })) {
    c.expect(check_large_sum(out.data(), count, 0, c.rank + 1, cs), what);
  }
  if (owns(c.set, kExScan) && !c.broken)
    t_scan(c, DT::kI32, Op{OCCL_LXOR, OCCL_LXOR, 1.0}, (size_t(1) << 20) + 1, true, true);
}

int large_rank(occl_comm_t comm, int rank, int n, int set) {
  Ctx c;
  c.comm = comm;
  c.rank = rank;
  c.n = n;
  c.set = set;
  const DLDataType f32 = omniccl::testing::dl_float(32);
  const size_t L = kLarge + 3;      // whole-buffer collectives: odd, not divisible by n
  const size_t B = kLarge / n + 1;  // per-rank part: n * B >= 4 Mi elements
  const int root = n - 1;
  if (owns(set, kAllReduce) && !c.broken) {
    const uint64_t cs = c.next();
    std::vector<float> in(L), out(L, -1.0f);
    for (size_t i = 0; i < L; ++i) in[i] = large_value(rank, i, cs);
    Tensor1D st(in.data(), L, f32), rt(out.data(), L, f32);
    const std::string what = cat("all_reduce float32 SUM count=", L);
    if (issue(c, what, [&](occl_work_t* w) { return occl_all_reduce(&st, &rt, OCCL_SUM, comm, w); })) {
      c.expect(check_large_sum(out.data(), L, 0, n, cs), what);
    }
  }
  if (owns(set, kAllReduce) && !c.broken) {
    // Bit-identical in place over 16 MiB of rounding sums.
    const Op sum{OCCL_SUM, OCCL_SUM, 1.0};
    t_bit_identical(c, DT::kF32, sum, L, true);
  }
  if (owns(set, kAllReduce) && !c.broken) {
    // Other element sizes across the transports' staging (partial elements).
    const size_t M = (size_t(1) << 20) + 1;
    const Op sum{OCCL_SUM, OCCL_SUM, 1.0}, bxor{OCCL_BXOR, OCCL_BXOR, 1.0};
    t_all_reduce(c, DT::kF64, sum, M, false);
    t_all_reduce(c, DT::kF16, sum, M, true);
    t_all_reduce(c, DT::kI64, bxor, M, false);
  }
  if (owns(set, kReduceScatter) && !c.broken) {
    const uint64_t cs = c.next();
    std::vector<float> in(n * B), out(B, -1.0f);
    for (size_t i = 0; i < n * B; ++i) in[i] = large_value(rank, i, cs);
    Tensor1D st(in.data(), n * B, f32), rt(out.data(), B, f32);
    const std::string what = cat("reduce_scatter float32 SUM count=", B);
    if (issue(c, what, [&](occl_work_t* w) { return occl_reduce_scatter(&st, &rt, OCCL_SUM, comm, w); })) {
      c.expect(check_large_sum(out.data(), B, rank * B, n, cs), what);
    }
    if (!c.broken) t_reduce_scatter(c, DT::kF64, Op{OCCL_SUM, OCCL_SUM, 1.0}, (size_t(1) << 19) + 1, true);
  }
  large_scans(c, L);
  if (owns(set, kReduce) && !c.broken) {
    const uint64_t cs = c.next();
    std::vector<float> in(L), out(rank == root ? L : 1, -1.0f);
    for (size_t i = 0; i < L; ++i) in[i] = large_value(rank, i, cs);
    Tensor1D st(in.data(), L, f32), rt(out.data(), L, f32);
    const std::string what = cat("reduce float32 SUM count=", L, " root=", root);
    if (issue(c, what, [&](occl_work_t* w) {
          return occl_reduce(&st, rank == root ? &rt : nullptr, OCCL_SUM, root, comm, w);
        })) {
      if (rank == root) c.expect(check_large_sum(out.data(), L, 0, n, cs), what);
      for (size_t i = 0; i < L && rank != root; ++i) {
        if (in[i] != large_value(rank, i, cs)) {
          c.fail(what + ": non-root sendbuf changed");
          break;
        }
      }
    }
  }
  if (owns(set, kBroadcast) && !c.broken) {
    const uint64_t cs = c.next();
    std::vector<uint32_t> buf(L, 0);
    if (rank == 0) fill_bits(buf, 0, L, 0, 0, cs);
    Tensor1D t(buf.data(), L, f32);
    const std::string what = cat("broadcast count=", L, " root=0");
    if (issue(c, what, [&](occl_work_t* w) { return occl_broadcast(&t, 0, comm, w); })) {
      c.expect(check_bits(buf.data(), L, 0, 0, cs), what);
    }
  }
  if (owns(set, kAllGather) && !c.broken) {
    const uint64_t cs = c.next();
    std::vector<uint32_t> in(B), out(n * B, 0);
    fill_bits(in, 0, B, rank, 0, cs);
    Tensor1D st(in.data(), B, f32), rt(out.data(), n * B, f32);
    const std::string what = cat("all_gather count=", B);
    if (issue(c, what, [&](occl_work_t* w) { return occl_all_gather(&st, &rt, comm, w); })) {
      for (int r = 0; r < n; ++r) c.expect(check_bits(out.data() + r * B, B, r, 0, cs), cat(what, ": block ", r));
    }
  }
  if (owns(set, kGather) && !c.broken) {
    const uint64_t cs = c.next();
    std::vector<uint32_t> in(B), out(rank == root ? n * B : 1, 0);
    fill_bits(in, 0, B, rank, 0, cs);
    Tensor1D st(in.data(), B, f32), rt(out.data(), n * B, f32);
    const std::string what = cat("gather count=", B, " root=", root);
    if (issue(c, what, [&](occl_work_t* w) { return occl_gather(&st, rank == root ? &rt : nullptr, root, comm, w); })) {
      for (int r = 0; r < n && rank == root; ++r) {
        c.expect(check_bits(out.data() + r * B, B, r, 0, cs), cat(what, ": block ", r));
      }
    }
  }
  if (owns(set, kScatter) && !c.broken) {
    const uint64_t cs = c.next();
    std::vector<uint32_t> in(rank == root ? n * B : 1, 0), out(B, 0);
    if (rank == root) fill_bits(in, 0, n * B, root, 0, cs);
    Tensor1D st(in.data(), n * B, f32), rt(out.data(), B, f32);
    const std::string what = cat("scatter count=", B, " root=", root);
    if (issue(c, what,
              [&](occl_work_t* w) { return occl_scatter(rank == root ? &st : nullptr, &rt, root, comm, w); })) {
      c.expect(check_bits(out.data(), B, root, rank * B, cs), what);
    }
  }
  if (owns(set, kAllToAll) && !c.broken) {
    const uint64_t cs = c.next();
    std::vector<uint32_t> in(n * B), out(n * B, 0);
    fill_bits(in, 0, n * B, rank, 0, cs);
    Tensor1D st(in.data(), n * B, f32), rt(out.data(), n * B, f32);
    const std::string what = cat("all_to_all count=", B, " per peer");
    if (issue(c, what, [&](occl_work_t* w) { return occl_all_to_all(&st, &rt, comm, w); })) {
      for (int r = 0; r < n; ++r) {
        c.expect(check_bits(out.data() + r * B, B, r, rank * B, cs), cat(what, ": part from rank ", r));
      }
    }
  }
  if (!c.broken) {
    occl_status_t s = occl_barrier(comm, nullptr);
    if (s != OCCL_SUCCESS) c.fail(cat("final barrier: ", occl_status_string(s), ": ", occl_last_error()));
  }
  return c.failures == 0 ? 0 : 1;
}

// ---------------------------------------------------------------------------
// GoogleTest cases, one job each

using Param = std::tuple<int, std::string, int>;  // nranks, transport, algorithm set

std::string param_name(const ::testing::TestParamInfo<Param>& info) {
  return cat("n", std::get<0>(info.param), "_", std::get<1>(info.param), "_", set_name(std::get<2>(info.param)));
}

JobOptions job(const Param& p) {
  JobOptions o;
  o.nranks = std::get<0>(p);
  o.transport = std::get<1>(p);
  o.algorithm = algo_spec(std::get<2>(p));
  o.timeout_ms = 120000;
  o.job_timeout_s = 300;
  return o;
}

std::string describe(const Param& p) {
  std::string spec = algo_spec(std::get<2>(p));
  return cat("nranks=", std::get<0>(p), " transport=", std::get<1>(p), " algorithm=", spec.empty() ? "(tuned)" : spec);
}

class CollectiveMatrix : public ::testing::TestWithParam<Param> {};

TEST_P(CollectiveMatrix, EveryOpDtypeRedopSize) {
  const Param p = GetParam();
  Shared* shared = map_shared();
  ASSERT_NE(shared, nullptr);
  const auto start = std::chrono::steady_clock::now();
  JobResult res = run_ranks(job(p), [&](occl_comm_t comm, int rank, int n) {
    return matrix_rank(comm, rank, n, std::get<2>(p), std::get<1>(p), shared);
  });
  unmap_shared(shared);
  EXPECT_TRUE(res.ok()) << describe(p) << res.summary();
  RecordProperty("seconds",
                 std::to_string(std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count()));
}

INSTANTIATE_TEST_SUITE_P(Ranks, CollectiveMatrix,
                         ::testing::Combine(::testing::Values(1, 2, 3, 4, 5, 8), ::testing::Values("shm", "tcp"),
                                            ::testing::Values(kTuned, 0, 1, 2, 3, 4)),
                         param_name);

// The matrix with the small-step path (OMNICCL_SMALL_PATH) off on every rank,
// and on only on the even ranks (the same messages cross either way).
using SmallParam = std::tuple<int, std::string>;  // nranks, "off" or "mixed"

class CollectiveMatrixSmallPath : public ::testing::TestWithParam<SmallParam> {};

TEST_P(CollectiveMatrixSmallPath, EveryOpDtypeRedopSize) {
  const int nranks = std::get<0>(GetParam());
  const std::string mode = std::get<1>(GetParam());
  Shared* shared = map_shared();
  ASSERT_NE(shared, nullptr);
  JobOptions o = job(Param{nranks, "shm", kTuned});
  if (mode == "off") {
    o.env = {{"OMNICCL_SMALL_PATH", "0"}};
  } else {
    o.env_odd_ranks = {{"OMNICCL_SMALL_PATH", "0"}};
  }
  JobResult res = run_ranks(
      o, [&](occl_comm_t comm, int rank, int n) { return matrix_rank(comm, rank, n, kTuned, "shm", shared); });
  unmap_shared(shared);
  EXPECT_TRUE(res.ok()) << describe(Param{nranks, "shm", kTuned}) << " small path " << mode << res.summary();
}

INSTANTIATE_TEST_SUITE_P(Modes, CollectiveMatrixSmallPath,
                         ::testing::Combine(::testing::Values(2, 3), ::testing::Values("off", "mixed")),
                         [](const ::testing::TestParamInfo<SmallParam>& info) {
                           return cat("n", std::get<0>(info.param), "_", std::get<1>(info.param));
                         });

// The same matrix with the ranks as threads of one process (the in-process
// test mesh: no fork, each thread its own communicator).
class CollectiveMatrixThreads : public ::testing::TestWithParam<Param> {};

TEST_P(CollectiveMatrixThreads, EveryOpDtypeRedopSize) {
  const Param p = GetParam();
  Shared* shared = map_shared();
  ASSERT_NE(shared, nullptr);
  JobOptions o = job(p);
  o.threads = true;
  JobResult res = run_ranks(o, [&](occl_comm_t comm, int rank, int n) {
    return matrix_rank(comm, rank, n, std::get<2>(p), std::get<1>(p), shared);
  });
  unmap_shared(shared);
  EXPECT_TRUE(res.ok()) << describe(p) << " (threads)" << res.summary();
}

INSTANTIATE_TEST_SUITE_P(Threads, CollectiveMatrixThreads,
                         ::testing::Combine(::testing::Values(1, 3, 4), ::testing::Values("shm", "tcp"),
                                            ::testing::Values(kTuned)),
                         param_name);

class CollectiveLarge : public ::testing::TestWithParam<Param> {};

TEST_P(CollectiveLarge, SixteenMiBEveryCollectiveAndAlgorithm) {
  const Param p = GetParam();
  JobResult res =
      run_ranks(job(p), [&](occl_comm_t comm, int rank, int n) { return large_rank(comm, rank, n, std::get<2>(p)); });
  EXPECT_TRUE(res.ok()) << describe(p) << res.summary();
}

INSTANTIATE_TEST_SUITE_P(Ranks, CollectiveLarge,
                         ::testing::Combine(::testing::Values(2, 3, 4), ::testing::Values("shm", "tcp"),
                                            ::testing::Values(0, 1, 2, 3, 4)),
                         param_name);

// Payloads striped over three TCP sockets per pair (OMNICCL_TCP_STREAMS=3):
// every collective and algorithm at 16 MiB, reductions taking the stripes
// as they come.
INSTANTIATE_TEST_SUITE_P(TcpStreams, CollectiveLarge,
                         ::testing::Combine(::testing::Values(2, 3), ::testing::Values("tcp3"),
                                            ::testing::Values(0, 1, 2, 3, 4)),
                         param_name);

// The data sockets' congestion control (OMNICCL_TCP_CONGESTION) changes only
// how the kernel paces what it sends: every collective and algorithm at
// 16 MiB with the host's default kept on rank 0 (system) and reno named on
// rank 1, so the two directions of each link differ.
TEST(CollectiveLargeTcpCongestion, RanksWithDifferentSettings) {
  for (int algos : {0, 1, 2, 3, 4}) {
    JobOptions o = job(Param{2, "tcp", algos});
    o.env["OMNICCL_TCP_CONGESTION"] = "system";
    o.env_odd_ranks["OMNICCL_TCP_CONGESTION"] = "reno";
    JobResult res = run_ranks(o, [&](occl_comm_t comm, int rank, int n) { return large_rank(comm, rank, n, algos); });
    EXPECT_TRUE(res.ok()) << describe(Param{2, "tcp", algos}) << res.summary();
  }
}

// The large suite on shared memory with streaming stores forced on
// (OMNICCL_STREAM_STORES=1: every receive of 4 MiB and more through the
// rings, and every local copy of such a block into the output, stores past
// the caches), whatever this machine's calibration chose,
// with single copy on and off (receives through the rings and by reference
// in one step, and recv-reduce beside streaming receives).
using StoresParam = std::tuple<int, std::string, int>;  // nranks, OMNICCL_SHM_SINGLE_COPY, algorithm set

class CollectiveLargeStreaming : public ::testing::TestWithParam<StoresParam> {};

TEST_P(CollectiveLargeStreaming, SixteenMiBWithStreamingStores) {
  // Named copies, not a structured binding: clang 14 (the sanitizer build)
  // cannot capture structured bindings in a lambda.
  const int nranks = std::get<0>(GetParam());
  const std::string single_copy = std::get<1>(GetParam());
  const int set = std::get<2>(GetParam());
  JobOptions o = job(Param{nranks, "shm", set});
  o.env = {{"OMNICCL_STREAM_STORES", "1"}, {"OMNICCL_SHM_SINGLE_COPY", single_copy}};
  JobResult res = run_ranks(o, [&](occl_comm_t comm, int rank, int n) { return large_rank(comm, rank, n, set); });
  EXPECT_TRUE(res.ok()) << describe(Param{nranks, "shm", set}) << " single_copy=" << single_copy << res.summary();
}

std::string stores_name(const ::testing::TestParamInfo<StoresParam>& info) {
  return cat("n", std::get<0>(info.param), "_copy", std::get<1>(info.param), "_", set_name(std::get<2>(info.param)));
}

// The tuned choice at 2, 3 and 4 ranks; the other algorithms once (3 ranks,
// where no block size divides evenly).
INSTANTIATE_TEST_SUITE_P(Tuned, CollectiveLargeStreaming,
                         ::testing::Combine(::testing::Values(2, 3, 4), ::testing::Values("0", "1"),
                                            ::testing::Values(kTuned)),
                         stores_name);
INSTANTIATE_TEST_SUITE_P(Sets, CollectiveLargeStreaming,
                         ::testing::Combine(::testing::Values(3), ::testing::Values("0"), ::testing::Values(1, 2, 3)),
                         stores_name);

// The large suite with single copy forced on, where receivers split their
// copies with the senders (OMNICCL_SHM_SPLIT_COPY, on by default) on the
// even ranks only ("mixed") or on none ("off"): the wire is the same.
using SplitParam = std::tuple<int, std::string>;  // nranks, "off" or "mixed"

class CollectiveLargeSplit : public ::testing::TestWithParam<SplitParam> {};

TEST_P(CollectiveLargeSplit, SixteenMiBWithSplitCopies) {
  const int nranks = std::get<0>(GetParam());
  const std::string mode = std::get<1>(GetParam());
  JobOptions o = job(Param{nranks, "shm", kTuned});
  o.env = {{"OMNICCL_SHM_SINGLE_COPY", "1"}};
  if (mode == "off") {
    o.env["OMNICCL_SHM_SPLIT_COPY"] = "0";
  } else {
    o.env_odd_ranks = {{"OMNICCL_SHM_SPLIT_COPY", "0"}};
  }
  JobResult res = run_ranks(o, [&](occl_comm_t comm, int rank, int n) { return large_rank(comm, rank, n, kTuned); });
  EXPECT_TRUE(res.ok()) << describe(Param{nranks, "shm", kTuned}) << " split " << mode << res.summary();
}

INSTANTIATE_TEST_SUITE_P(Modes, CollectiveLargeSplit,
                         ::testing::Combine(::testing::Values(2, 3), ::testing::Values("off", "mixed")),
                         [](const ::testing::TestParamInfo<SplitParam>& info) {
                           return cat("n", std::get<0>(info.param), "_", std::get<1>(info.param));
                         });

// The algorithm sets cover every (collective, algorithm) pair exactly once.
TEST(CollectiveMatrixSets, CoverEveryAlgorithmOnce) {
  for (size_t k = 0; k < colls().size(); ++k) {
    std::vector<std::string> seen;
    for (int set = 0; set < kNumSets; ++set) {
      if (!owns(set, static_cast<Coll>(k))) continue;
      std::string spec = algo_spec(set) + ",";
      for (size_t at = 0, next; (next = spec.find(',', at)) != std::string::npos; at = next + 1) {
        std::string item = spec.substr(at, next - at);
        size_t eq = item.find('=');
        if (item.substr(0, eq) == colls()[k].name) seen.push_back(item.substr(eq + 1));
      }
    }
    std::vector<std::string> want(colls()[k].algos.begin(), colls()[k].algos.end());
    std::sort(seen.begin(), seen.end());
    std::sort(want.begin(), want.end());
    EXPECT_EQ(seen, want) << colls()[k].name;
  }
}

}  // namespace
