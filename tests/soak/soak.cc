// Differential soak test: rounds of random operations over the public C API,
// every result compared with the serial reference of reference.h, with
// faults injected into some rounds.
//
// A round forks N ranks (tests/harness) that run the same schedule, drawn
// from the round's seed (schedule.h): every operation, dtype, reduce op,
// size, root, blocking or async form, in-place form, communicator split,
// transport (shm, tcp, tcp with two sockets per pair), rendezvous and
// algorithm override. A result that differs from the reference is a
// discrepancy: printed with the seed and round that reproduce it.
//
// With --faults on, a round may inject one fault into one rank (the victim)
// during a chosen operation:
//   kill  SIGKILL;
//   stop  SIGSTOP for longer than the round's deadline, then SIGCONT;
//   slow  the victim sleeps (less than the deadline) before some operations;
//   drop  (with --netns) every TCP packet is dropped for longer than the
//         deadline, in a network namespace of the run's own.
// What must hold: no operation reports success with a wrong result; a slow
// round has no error at all; after a kill, stop or drop the ranks end with
// PEER_FAILURE, TIMEOUT or COMM_FAILED within a bound, never hang; nothing
// of a round's ranks is left in /dev/shm.
//
// Usage: soak [--seed N] [--ops N] [--ranks N] [--seconds N] [--faults on|off]
//             [--netns] [--round R] [--verbose]
// Exit status 0 when every round passed.
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <thread>
#include <vector>

#include "harness.h"
#include "ops_v.h"
#include "soak_faults.h"

namespace soak {
namespace {

using omniccl::testing::JobOptions;
using omniccl::testing::JobResult;

Result run_split(const Ctx& c, const Plan& p);

Result run_spec(const Ctx& c, const Plan& p) {
  switch (c.s.kind) {
    case Kind::kAllReduce: return run_all_reduce(c);
    case Kind::kReduce: return run_reduce(c);
    case Kind::kBroadcast: return run_broadcast(c);
    case Kind::kAllGather: return run_gather(c, false);
    case Kind::kReduceScatter: return run_reduce_scatter(c);
    case Kind::kGather: return run_gather(c, true);
    case Kind::kScatter: return run_scatter(c);
    case Kind::kAllToAll: return run_all_to_all(c);
    case Kind::kAllGatherv: return run_gatherv(c, false);
    case Kind::kGatherv: return run_gatherv(c, true);
    case Kind::kScatterv: return run_scatterv(c);
    case Kind::kAllToAllv: return run_all_to_allv(c);
    case Kind::kSendRecv: return run_send_recv(c);
    case Kind::kBarrier: return run_barrier(c);
    case Kind::kScan: return run_scan(c, false);
    case Kind::kExScan: return run_scan(c, true);
    case Kind::kSplit: return run_split(c, p);
    case Kind::kCount: break;
  }
  return {OCCL_ERR_INTERNAL, "unknown operation kind"};
}

/// Runs a spec, with a PREMUL_SUM op created on the communicator for it.
Result run_with_op(const Ctx& c, const Plan& p) {
  if (c.s.op.kind != OCCL_PREMUL_SUM || !is_reduction(c.s.kind)) return run_spec(c, p);
  Spec s = c.s;
  Result r;
  r.st = occl_red_op_create_premul_sum(c.comm, s.op.scalar, &s.op.handle);
  if (r.st != OCCL_SUCCESS) return r;
  r = run_spec(Ctx{c.comm, c.rank, c.n, s}, p);
  const occl_status_t d = occl_red_op_destroy(c.comm, s.op.handle);
  if (r.st == OCCL_SUCCESS && r.bad.empty() && d != OCCL_SUCCESS) r.bad = "occl_red_op_destroy failed";
  return r;
}

/// Colors (some ranks NOCOLOR) and keys from the case; the new rank is the
/// place in (key, old rank) order among the ranks of one color.
void split_ref(const Spec& s, int n, int rank, int* color, int* key, int* new_rank, int* new_size) {
  const uint64_t colors = 1 + hash3(s.cs, 0x5c, 0) % 3;
  auto color_of = [&](int r) {
    const uint64_t v = hash3(s.cs, 0x5d, static_cast<uint64_t>(r)) % (colors + 1);
    return v == colors ? OCCL_SPLIT_NOCOLOR : static_cast<int>(v);
  };
  auto key_of = [&](int r) { return static_cast<int>(hash3(s.cs, 0x5e, static_cast<uint64_t>(r)) % 4); };
  *color = color_of(rank);
  *key = key_of(rank);
  *new_rank = 0;
  *new_size = 0;
  for (int r = 0; r < n; ++r) {
    if (*color == OCCL_SPLIT_NOCOLOR || color_of(r) != *color) continue;
    ++*new_size;
    if (key_of(r) < *key || (key_of(r) == *key && r < rank)) ++*new_rank;
  }
}

/// Up to three operations on the new communicator (the same for every rank
/// of one color: drawn from the case and the color), then destroy.
Result run_split(const Ctx& c, const Plan& p) {
  int color = 0, key = 0, want_rank = 0, want_size = 0;
  split_ref(c.s, c.n, c.rank, &color, &key, &want_rank, &want_size);
  occl_comm_t sub = nullptr;
  Result r;
  r.st = occl_comm_split(c.comm, color, key, nullptr, &sub);
  if (r.st != OCCL_SUCCESS) return r;
  if (color == OCCL_SPLIT_NOCOLOR) {
    if (sub != nullptr) r.bad = "a NOCOLOR rank got a communicator";
    occl_comm_destroy(sub);
    return r;
  }
  int got_rank = -1, got_size = -1;
  occl_comm_rank(sub, &got_rank);
  occl_comm_size(sub, &got_size);
  if (got_rank != want_rank || got_size != want_size) {
    r.bad = cat("split gave rank ", got_rank, " of ", got_size, ", want ", want_rank, " of ", want_size);
  }
  const uint64_t sub_seed = hash3(c.s.cs, 0x5f, static_cast<uint64_t>(color));
  const int nsub = 1 + static_cast<int>(sub_seed % 3);
  for (int i = 0; i < nsub && r.st == OCCL_SUCCESS && r.bad.empty(); ++i) {
    const Spec s = draw_spec(sub_seed, static_cast<uint64_t>(i), want_size, p.max_bytes, false);
    Result sr = run_with_op(Ctx{sub, want_rank, want_size, s}, p);
    if (sr.st != OCCL_SUCCESS || !sr.bad.empty()) {
      r = sr;
      if (!sr.bad.empty()) r.bad = cat("on the split communicator (color ", color, "), ", s.describe(), ": ", sr.bad);
    }
  }
  const occl_status_t d = occl_comm_destroy(sub);
  if (r.st == OCCL_SUCCESS && r.bad.empty() && d != OCCL_SUCCESS) r.st = d;
  return r;
}

occl_comm_t init_comm(const Plan& p, int rank, int n, RankReport& rep) {
  occl_config_t cfg = OCCL_CONFIG_INIT;
  cfg.timeout_ms = 60000;  // the round's deadline applies from the first operation on
  cfg.transport = p.transport == "shm" ? "shm" : "tcp";
  cfg.algorithm = p.algorithm.empty() ? nullptr : p.algorithm.c_str();
  const char* init = std::getenv("OCCL_TEST_INIT");
  occl_comm_t comm = nullptr;
  occl_status_t st = occl_comm_init(&comm, init ? init : "", rank, n, &cfg);
  if (st == OCCL_SUCCESS) st = occl_comm_set_timeout(comm, p.timeout_ms);
  if (st != OCCL_SUCCESS) {
    rep.record_error(st, -1, occl_last_error());
    occl_comm_destroy(comm);
    return nullptr;
  }
  return comm;
}

/// One schedule entry: operation i, or the round's closing barrier (i ==
/// nops) that tells the ranks that every one of them got through.
void run_entry(occl_comm_t comm, int rank, int n, const Plan& p, int i, RankReport& rep, long round) {
  Spec s;
  if (i < p.nops) {
    s = draw_spec(p.seed, static_cast<uint64_t>(i), n, p.max_bytes, true);
  } else {
    s.kind = Kind::kBarrier;
  }
  ++rep.entries;
  const auto t0 = now_ns();
  Result r = run_with_op(Ctx{comm, rank, n, s}, p);
  rep.note_call(now_ns() - t0);
  if (r.st != OCCL_SUCCESS) {
    rep.record_error(r.st, i, occl_last_error());
    return;
  }
  ++rep.ops_ok;
  if (!r.bad.empty()) {
    ++rep.discrepancies;
    std::fprintf(stderr, "soak: DISCREPANCY round %ld op %d rank %d of %d: %s: %s\n", round, i, rank, n,
                 s.describe().c_str(), r.bad.c_str());
  }
}

int rank_main(const Plan& p, Shared* sh, int rank, int n, long round) {
  RankReport& rep = sh->rank[rank];
  rep.pid = ::getpid();
  occl_comm_t comm = init_comm(p, rank, n, rep);
  if (comm == nullptr) return 0;
  for (int i = 0; i <= p.nops && rep.error_status == OCCL_SUCCESS; ++i) {
    if (rank == p.victim) inject_fault(p, sh, i);
    run_entry(comm, rank, n, p, i, rep, round);
  }
  // A victim still alive waits for its kill, so that every kill round kills.
  if (rank == p.victim && p.fault == Fault::kKill) std::this_thread::sleep_for(std::chrono::seconds(20));
  finish_fault();
  occl_comm_destroy(comm);  // after an error its status says nothing new
  return 0;
}

struct Totals {
  long rounds = 0, ops = 0, calls = 0, discrepancies = 0, failures = 0;
  long faults[5] = {};
  std::vector<std::string> killed_left;  // segments of killed ranks, not yet removed
};

void print_plan(long round, const Plan& p) {
  std::fprintf(stderr, "soak: round %ld: %d ranks, %s, %s rendezvous, algo '%s', small path %d, %d ops, fault %s",
               round, p.nranks, p.transport.c_str(), p.init.c_str(), p.algorithm.c_str(), p.small_path ? 1 : 0, p.nops,
               fault_name(p.fault));
  if (p.fault != Fault::kNone) std::fprintf(stderr, " (rank %d, op %d, %d ms)", p.victim, p.fault_op, p.fault_ms);
  std::fprintf(stderr, "\n");
}

/// How long the round took, and how each rank's error came after the fault.
void print_outcome(long round, const Plan& p, const Shared& sh, double seconds) {
  std::string errors;
  const long long fault = sh.fault_ns.load();
  for (int r = 0; r < p.nranks; ++r) {
    const RankReport& rep = sh.rank[r];
    if (rep.error_status == OCCL_SUCCESS) continue;
    errors += cat(" rank ", r, ": ", occl_status_string(rep.error_status), " at op ", rep.error_op);
    if (fault != 0) errors += cat(" ", static_cast<double>(rep.error_ns - fault) / 1e9, " s after the fault;");
  }
  std::fprintf(stderr, "soak: round %ld took %.1f s;%s\n", round, seconds,
               errors.empty() ? " no errors" : errors.c_str());
}

/// Runs round `round`; adds it to the totals; returns whether it passed.
bool run_round(const Options& o, long round, Totals& t) {
  const Plan p = plan_round(o.seed, round, o.max_ranks, o.faults, o.netns);
  if (o.verbose) print_plan(round, p);
  SharedBlock block;
  Shared* sh = block.get();
  const auto t0 = std::chrono::steady_clock::now();
  JobOptions jo;
  jo.nranks = p.nranks;
  jo.transport = p.transport;
  jo.init = p.init;
  jo.create_comm = false;
  jo.job_timeout_s = kRoundLimitS;
  jo.env["OMNICCL_SMALL_PATH"] = p.small_path ? "1" : "0";
  const JobResult res =
      omniccl::testing::run_ranks(jo, [&](occl_comm_t, int rank, int n) { return rank_main(p, sh, rank, n, round); });
  if (p.fault == Fault::kDrop) set_drop(false);  // in case the victim could not lift it
  std::vector<std::string> killed_left;
  std::vector<std::string> problems = judge(p, *sh, res, &killed_left);
  // A one-rank communicator talks to itself and sets up no shared memory,
  // so only a round of several ranks on shm removes dead ranks' segments.
  if (p.transport == "shm" && p.nranks > 1) check_removed(t.killed_left, problems);
  t.killed_left.insert(t.killed_left.end(), killed_left.begin(), killed_left.end());
  for (int r = 0; r < p.nranks; ++r) {
    t.calls += sh->rank[r].ops_ok;
    t.discrepancies += sh->rank[r].discrepancies;
  }
  t.ops += sh->entries_run(p.nranks);
  ++t.rounds;
  if (p.fault != Fault::kNone) ++t.faults[static_cast<int>(p.fault)];
  if (o.verbose) print_outcome(round, p, *sh, omniccl::testing::seconds_since(t0));
  if (problems.empty()) return true;
  if (!o.verbose) print_plan(round, p);
  for (const auto& s : problems) std::fprintf(stderr, "soak: FAIL round %ld: %s\n", round, s.c_str());
  std::fprintf(stderr, "soak: reproduce round %ld: %s --round %ld --verbose\n", round, o.command_line().c_str(), round);
  ++t.failures;
  return false;
}

bool parse_options(int argc, char** argv, Options* o) {
  o->argv0 = argv[0];
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    const char* v = i + 1 < argc ? argv[i + 1] : nullptr;
    if (a == "--netns") {
      o->netns = true;
    } else if (a == "--verbose") {
      o->verbose = true;
    } else if (v != nullptr && a == "--seed") {
      o->seed = std::strtoull(v, nullptr, 0);
    } else if (v != nullptr && a == "--ops") {
      o->ops = std::atol(v);
    } else if (v != nullptr && a == "--ranks") {
      o->max_ranks = std::clamp(std::atoi(v), 1, kMaxRanks);
    } else if (v != nullptr && a == "--seconds") {
      o->seconds = std::atof(v);
    } else if (v != nullptr && a == "--faults" && (std::string(v) == "on" || std::string(v) == "off")) {
      o->faults = std::string(v) == "on";
    } else if (v != nullptr && a == "--round") {
      o->only_round = std::atol(v);
    } else {
      std::fprintf(stderr,
                   "usage: %s [--seed N] [--ops N] [--ranks N] [--seconds N] [--faults on|off] [--netns] "
                   "[--round R] [--verbose]\n",
                   argv[0]);
      return false;
    }
    if (a != "--netns" && a != "--verbose") ++i;
  }
  if (o->seed == 0) o->seed = static_cast<uint64_t>(now_ns()) ^ static_cast<uint64_t>(::getpid());
  return true;
}

/// With --netns: runs this program again inside `unshare -rn` (a user and
/// network namespace of its own, where it may drop packets without touching
/// the host's network), with the loopback interface up. Returns false only
/// when that cannot be done; in the namespace it returns true at once.
bool enter_netns(int argc, char** argv) {
  if (std::getenv("OMNICCL_SOAK_NETNS") != nullptr) return std::system("ip link set lo up") == 0;
  ::setenv("OMNICCL_SOAK_NETNS", "1", 1);
  std::vector<char*> args = {const_cast<char*>("unshare"), const_cast<char*>("-rn")};
  for (int i = 0; i < argc; ++i) args.push_back(argv[i]);
  args.push_back(nullptr);
  ::execvp("unshare", args.data());
  std::perror("soak: --netns: unshare");
  return false;
}

}  // namespace
}  // namespace soak

int main(int argc, char** argv) {
  using namespace soak;
  Options o;
  if (!parse_options(argc, argv, &o)) return 2;
  if (o.netns && !enter_netns(argc, argv)) return 2;
  std::fprintf(stderr, "soak: seed %llu, up to %d ranks, faults %s%s\n", static_cast<unsigned long long>(o.seed),
               o.max_ranks, o.faults ? "on" : "off", o.netns ? " (network namespace: drops)" : "");
  Totals t;
  const auto start = std::chrono::steady_clock::now();
  for (long round = o.only_round >= 0 ? o.only_round : 0;; ++round) {
    run_round(o, round, t);
    if (o.only_round >= 0 || t.ops >= o.ops || omniccl::testing::seconds_since(start) >= o.seconds) break;
  }
  // As a launcher does when its job ends: what killed ranks left since the
  // last round on shared memory.
  for (const auto& name : t.killed_left) ::shm_unlink(("/" + name).c_str());
  std::printf(
      "soak: seed %llu: %ld rounds, %ld operations (%ld rank calls), faults injected: %ld kill, %ld stop, %ld slow, "
      "%ld drop; %ld discrepancies, %ld failed rounds, %.0f s\n",
      static_cast<unsigned long long>(o.seed), t.rounds, t.ops, t.calls, t.faults[1], t.faults[2], t.faults[3],
      t.faults[4], t.discrepancies, t.failures, omniccl::testing::seconds_since(start));
  return t.discrepancies == 0 && t.failures == 0 ? 0 : 1;
}
