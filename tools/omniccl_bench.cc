// omniccl-bench: measures OmniCCL's collectives the way nccl-tests measures
// NCCL's, so that the numbers can be read side by side with nccl-tests'
// tables and with the peer benchmarks of bench/ (Open MPI, MPICH, Gloo).
//
//   omniccl-run -n 2 omniccl-bench --coll all -b 8 -e 128M -f 2 -c
//   omniccl-run -n 2 --no-prefix omniccl-bench --coll allreduce --csv ...
//
// It uses only the public C API (omniccl/omniccl.h) and starts from env://,
// so any env:// launcher (omniccl-run, torchrun, mpirun, srun) can start it.
//
// What is measured, per collective and size (one "point"):
//   * warm-up iterations, a barrier, then `iters` timed iterations of the
//     blocking call; each rank's time per operation is its elapsed time
//     divided by `iters`. time_us is the mean of that over ranks (as
//     nccl-tests reports it), time_max_us the slowest rank. Both are reduced
//     with the library itself (all_reduce SUM and MAX of doubles).
//   * Buffers are out of place (send and receive buffers differ), except for
//     broadcast, which is in place by definition. Only root-side buffers
//     exist on the root.
//   * Sizes, counts and bandwidths follow nccl-tests exactly (doc/
//     PERFORMANCE.md and src/<coll>.cu of github.com/NVIDIA/nccl-tests). For
//     a requested size S bytes, count = S / sizeof(dtype), and:
//       all_reduce, broadcast, reduce : per-rank count = count;
//                                       size = count * elt
//       all_gather, gather            : per-rank send count c = count / n;
//                                       size = c * n * elt (whole output)
//       reduce_scatter, scatter       : per-rank recv count c = count / n;
//                                       size = c * n * elt (whole input)
//       all_to_all                    : per-peer count c = count / n;
//                                       size = c * n * elt (per-rank buffer)
//     the "count" column is the per-rank count (nccl-tests' paramcount),
//     algbw = size / time (GB/s = 1e9 B/s) and busbw = algbw * factor with
//       all_reduce 2(n-1)/n; reduce_scatter, all_gather, all_to_all (n-1)/n;
//       broadcast, reduce 1 (PERFORMANCE.md "Summary");
//       gather, scatter (n-1)/n (GatherGetBw / ScatterGetBw in src/gather.cu
//       and src/scatter.cu: PERFORMANCE.md does not list them).
//     Where count / n would be 0 (tiny sizes, many ranks) one element per
//     rank is used instead, so every point moves data; nccl-tests would time
//     an empty operation there. barrier has size 0 and bandwidth 0.
//   * -c re-initialises the buffers with a known pattern after timing, runs
//     the operation once more and counts the elements that differ from a
//     reference computed here (floats: relative tolerance 1e-5, integers:
//     exact); #wrong is the sum over ranks.
//
// Two further measurements, each instead of the collective table:
//   --blocked-cpu   rank 0 sleeps 1 s before entering a barrier; every other
//                   rank reports the CPU time its whole process (all threads,
//                   CLOCK_PROCESS_CPUTIME_ID) used while blocked, as a share
//                   of one core.
//   --footprint N   resident memory (/proc/self/statm) before the
//                   communicator exists, after it is created, after warm-up
//                   (steady state) and after N more operations: the
//                   communicator's footprint and any growth.

#include <omniccl/omniccl.h>

#include <time.h>
#include <unistd.h>

#ifdef OMNICCL_BENCH_CUDA
#include <cuda_runtime_api.h>
#endif

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cinttypes>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <limits>
#include <optional>
#include <string>
#include <string_view>
#include <thread>
#include <type_traits>
#include <vector>

#include "cli.h"

namespace {

namespace cli = omniccl::cli;

constexpr int kExitFailure = 1;

/// --help up to the options (their lines come from the option table).
constexpr const char kSynopsis[] =
    R"(Usage: omniccl-run -n N omniccl-bench [options]

nccl-tests style benchmark of OmniCCL's collectives (out of place). Start it
with any env:// launcher; rank 0 prints the results.

Options (values as -x V, -xV, --long V or --long=V):
)";

/// --help after the options.
constexpr const char kEpilogue[] = R"(
Exit status: 0 when all went well, 1 if an operation failed or -c found
wrong elements, 2 for bad usage.
)";

// ---------------------------------------------------------------------------
// Collectives, data types, reduce ops
// ---------------------------------------------------------------------------

/// The collectives the benchmark knows.
enum class Coll { kAllReduce, kAllGather, kBroadcast, kReduce, kReduceScatter, kAllToAll, kGather, kScatter, kBarrier };

/// Names and properties of one collective.
struct CollInfo {
  Coll coll;
  const char* name;   // CSV name (nccl-tests' short names)
  const char* alias;  // OmniCCL's function name, also accepted
  bool rooted;
  bool reduction;
};

constexpr CollInfo kColls[] = {
    {Coll::kAllReduce, "allreduce", "all_reduce", false, true},
    {Coll::kAllGather, "allgather", "all_gather", false, false},
    {Coll::kBroadcast, "bcast", "broadcast", true, false},
    {Coll::kReduce, "reduce", "reduce", true, true},
    {Coll::kReduceScatter, "reduce_scatter", "reducescatter", false, true},
    {Coll::kAllToAll, "alltoall", "all_to_all", false, false},
    {Coll::kGather, "gather", "gather", true, false},
    {Coll::kScatter, "scatter", "scatter", true, false},
    {Coll::kBarrier, "barrier", "barrier", false, false},
};

/// Returns the table entry of a collective.
const CollInfo& info(Coll c) {
  for (const auto& ci : kColls) {
    if (ci.coll == c) return ci;
  }
  return kColls[0];  // unreachable: every enumerator is in the table
}

/// The element types the benchmark can move and check.
enum class Kind { kI8, kU8, kI32, kU32, kI64, kU64, kF32, kF64 };

/// Names and DLPack description of one element type.
struct DTypeInfo {
  Kind kind;
  const char* name;      // nccl-tests' name, printed in the table
  const char* csv_name;  // explicit name, printed in the CSV
  const char* alias;     // also accepted on the command line
  DLDataType dl;
  std::size_t size;
};

constexpr DTypeInfo kDTypes[] = {
    {Kind::kI8, "int8", "int8", "char", {kDLInt, 8, 1}, 1},
    {Kind::kU8, "uint8", "uint8", "uchar", {kDLUInt, 8, 1}, 1},
    {Kind::kI32, "int32", "int32", "int", {kDLInt, 32, 1}, 4},
    {Kind::kU32, "uint32", "uint32", "uint", {kDLUInt, 32, 1}, 4},
    {Kind::kI64, "int64", "int64", "long", {kDLInt, 64, 1}, 8},
    {Kind::kU64, "uint64", "uint64", "ulong", {kDLUInt, 64, 1}, 8},
    {Kind::kF32, "float", "float32", "float32", {kDLFloat, 32, 1}, 4},
    {Kind::kF64, "double", "float64", "float64", {kDLFloat, 64, 1}, 8},
};

/// A reduce op as named on the command line.
struct OpInfo {
  occl_red_op_t op;
  const char* name;
};

constexpr OpInfo kOps[] = {
    {OCCL_SUM, "sum"}, {OCCL_PROD, "prod"}, {OCCL_MIN, "min"}, {OCCL_MAX, "max"}, {OCCL_AVG, "avg"},
};

// ---------------------------------------------------------------------------
// Command line
// ---------------------------------------------------------------------------

/// Everything the command line decides.
struct Options {
  std::vector<Coll> colls{Coll::kAllReduce};
  std::vector<std::uint64_t> sizes;  // filled from -b/-e/-f unless --sizes
  std::uint64_t min_bytes = 8;
  std::uint64_t max_bytes = 32ull << 20;
  std::uint64_t factor = 2;
  bool explicit_sizes = false;
  const DTypeInfo* dtype = &kDTypes[6];  // float
  const OpInfo* op = &kOps[0];           // sum
  int root = 0;
  int iters = 20;  // 0: auto
  int warmup = 5;  // -1: auto
  bool check = false;
  bool csv = false;
  std::string peer = "omniccl";
  std::string transport;  // empty: ask the communicator
  double timeout_s = 0;   // 0: library default
  bool blocked_cpu = false;
  long footprint_ops = 0;  // 0: off
  bool cuda = false;       // --device cuda
};

/// Parses a size with an optional K/M/G suffix (powers of 1024, as
/// nccl-tests' parsesize); returns nullopt if the text is not one.
std::optional<std::uint64_t> parse_size(std::string_view text) {
  if (text.empty()) return std::nullopt;
  std::uint64_t mult = 1;
  char last = static_cast<char>(std::toupper(static_cast<unsigned char>(text.back())));
  if (last == 'K' || last == 'M' || last == 'G') {
    mult = last == 'K' ? 1ull << 10 : last == 'M' ? 1ull << 20 : 1ull << 30;
    text.remove_suffix(1);
  }
  if (text.empty() || text.size() > 15) return std::nullopt;
  std::uint64_t value = 0;
  for (char ch : text) {
    if (ch < '0' || ch > '9') return std::nullopt;
    value = value * 10 + static_cast<std::uint64_t>(ch - '0');
  }
  return value * mult;
}

/// Parses a whole number in [lo, hi]; returns nullopt if it is not one.
std::optional<long> parse_long(std::string_view text, long lo, long hi) {
  if (text.empty() || text.size() > 18) return std::nullopt;
  long value = 0;
  for (char ch : text) {
    if (ch < '0' || ch > '9') return std::nullopt;
    value = value * 10 + (ch - '0');
  }
  if (value < lo || value > hi) return std::nullopt;
  return value;
}

/// Looks a collective up by its CSV name or alias; nullopt if unknown.
std::optional<Coll> find_coll(std::string_view name) {
  for (const auto& ci : kColls) {
    if (name == ci.name || name == ci.alias) return ci.coll;
  }
  return std::nullopt;
}

/// Parses the --coll value: "all" or a comma-separated list of names.
std::optional<std::vector<Coll>> parse_colls(std::string_view text) {
  std::vector<Coll> out;
  if (text == "all") {
    for (const auto& ci : kColls) out.push_back(ci.coll);
    return out;
  }
  while (!text.empty()) {
    std::size_t comma = text.find(',');
    std::string_view item = text.substr(0, comma);
    auto c = find_coll(item);
    if (!c) return std::nullopt;
    out.push_back(*c);
    if (comma == std::string_view::npos) break;
    text.remove_prefix(comma + 1);
  }
  if (out.empty()) return std::nullopt;
  return out;
}

/// Parses the --sizes value: a comma-separated list of sizes.
std::optional<std::vector<std::uint64_t>> parse_size_list(std::string_view text) {
  std::vector<std::uint64_t> out;
  while (!text.empty()) {
    std::size_t comma = text.find(',');
    auto s = parse_size(text.substr(0, comma));
    if (!s) return std::nullopt;
    out.push_back(*s);
    if (comma == std::string_view::npos) break;
    text.remove_prefix(comma + 1);
  }
  if (out.empty()) return std::nullopt;
  return out;
}

/// Prints a usage error with a hint to --help and returns the usage status.
int usage_error(const std::string& message) { return cli::usage_error("omniccl-bench", message); }

// The option table. Each setter gets the option's name as typed ('_' read as
// '-', except in --warmup_iters, nccl-tests' spelling) and its value, and
// returns an error message or "".

using Value = const std::string&;

/// -b, -e: a size with an optional K/M/G suffix.
std::string set_size(std::uint64_t& out, Value name, Value v) {
  auto s = parse_size(v);
  if (!s) return name + ": '" + v + "' is not a size";
  out = *s;
  return {};
}

/// -n, -w: "auto" (stored as `auto_value`) or a number of at least `lo`.
std::string set_iterations(int& out, int auto_value, long lo, Value name, Value v) {
  if (v == "auto") {
    out = auto_value;
    return {};
  }
  auto n = parse_long(v, lo, 100000000);
  if (!n) return name + ": '" + v + "' must be auto or a number >= " + std::to_string(lo);
  out = static_cast<int>(*n);
  return {};
}

/// -d: a data type by its table name, CSV name or alias.
std::string set_dtype(Options& opt, Value name, Value v) {
  for (const auto& d : kDTypes) {
    if (v == d.name || v == d.csv_name || v == d.alias) {
      opt.dtype = &d;
      return {};
    }
  }
  return name + ": unknown data type '" + v + "'";
}

/// -o: a reduce op by name.
std::string set_op(Options& opt, Value name, Value v) {
  for (const auto& o : kOps) {
    if (v == o.name) {
      opt.op = &o;
      return {};
    }
  }
  return name + ": unknown reduce op '" + v + "'";
}

/// -c: 0 or 1.
std::string set_check(Options& opt, Value name, Value v) {
  if (v != "0" && v != "1") return name + ": value must be 0 or 1";
  opt.check = v == "1";
  return {};
}

/// --peer-name, --transport: any text but "".
std::string set_text(std::string& out, Value name, Value v) {
  if (v.empty()) return name + " needs a value";
  out = v;
  return {};
}

/// A setter for a flag: sets `out`.
std::function<std::string(Value, Value)> flag(bool& out) {
  return [&out](Value, Value) {
    out = true;
    return std::string();
  };
}

/// -t: a number of seconds > 0 (at most 1e6).
std::string set_timeout(Options& opt, Value name, Value v) {
  char* end = nullptr;
  double s = std::strtod(v.c_str(), &end);
  if (v.empty() || end != v.c_str() + v.size() || !(s > 0) || s > 1e6) {
    return name + ": '" + v + "' is not a number of seconds > 0";
  }
  opt.timeout_s = s;
  return {};
}

/// --device: cpu or cuda (cuda only in a CUDA build).
std::string set_device(Options& opt, Value name, Value v) {
  if (v != "cpu" && v != "cuda") return name + ": '" + v + "' must be cpu or cuda";
  opt.cuda = v == "cuda";
#ifndef OMNICCL_BENCH_CUDA
  if (opt.cuda) {
    return name + " cuda: this omniccl-bench was built without CUDA (configure with -DOMNICCL_CUDA=ON)";
  }
#endif
  return {};
}

/// A setter for a whole number in [lo, hi] stored in `out`; `must` ends the
/// error ("must be a number >= 1").
template <typename T>
std::function<std::string(Value, Value)> whole(T& out, long lo, long hi, std::string must) {
  return [&out, lo, hi, must](Value name, Value v) {
    auto n = parse_long(v, lo, hi);
    if (!n) return name + ": '" + v + "' " + must;
    out = static_cast<T>(*n);
    return std::string();
  };
}

/// The options that choose what is measured: collectives, sizes, data type,
/// reduce op, root.
std::vector<cli::Option> what_options(Options& opt) {
  return {
      {{"--coll", "--collective"},
       cli::Takes::kValue,
       "--coll NAME[,NAME...]|all",
       "allreduce, allgather, bcast, reduce, reduce_scatter,\n"
       "alltoall, gather, scatter, barrier (also all_reduce,\n"
       "all_gather, broadcast, all_to_all); default allreduce",
       [&opt](Value, Value v) {
         auto c = parse_colls(v);
         if (!c) return "--coll: unknown collective in '" + v + "'";
         opt.colls = *c;
         return std::string();
       }},
      {{"-b", "--minbytes"},
       cli::Takes::kValue,
       "-b, --minbytes SIZE",
       "first size in bytes (K, M, G suffixes = 1024^k; 8)",
       [&opt](Value name, Value v) { return set_size(opt.min_bytes, name, v); }},
      {{"-e", "--maxbytes"},
       cli::Takes::kValue,
       "-e, --maxbytes SIZE",
       "last size (default 32M)",
       [&opt](Value name, Value v) { return set_size(opt.max_bytes, name, v); }},
      {{"-f", "--stepfactor"},
       cli::Takes::kValue,
       "-f, --stepfactor F",
       "multiply the size by F between points (default 2)",
       whole(opt.factor, 2, 1 << 20, "must be a whole number >= 2")},
      {{"--sizes"},
       cli::Takes::kValue,
       "    --sizes LIST",
       "explicit sizes instead of -b/-e/-f, e.g. 8,1M,16M",
       [&opt](Value, Value v) {
         auto s = parse_size_list(v);
         if (!s) return "--sizes: '" + v + "' is not a list of sizes";
         opt.sizes = *s;
         opt.explicit_sizes = true;
         return std::string();
       }},
      {{"-d", "--datatype"},
       cli::Takes::kValue,
       "-d, --datatype T",
       "int8, uint8, int32, uint32, int64, uint64, float\n"
       "(float32), double (float64); default float",
       [&opt](Value name, Value v) { return set_dtype(opt, name, v); }},
      {{"-o", "--op"},
       cli::Takes::kValue,
       "-o, --op OP",
       "sum, prod, min, max, avg (default sum)",
       [&opt](Value name, Value v) { return set_op(opt, name, v); }},
      {{"-r", "--root"},
       cli::Takes::kValue,
       "-r, --root R",
       "root of bcast, reduce, gather, scatter (default 0)",
       whole(opt.root, 0, 1 << 20, "is not a rank")},
  };
}

/// The options of how each point is run and printed.
std::vector<cli::Option> how_options(Options& opt) {
  return {
      {{"-n", "--iters"},
       cli::Takes::kValue,
       "-n, --iters N|auto",
       "timed iterations per point (default 20); auto: by\n"
       "size, <= 64K: 1000, <= 1M: 50, <= 16M: 10, else 3",
       [&opt](Value name, Value v) { return set_iterations(opt.iters, 0, 1, name, v); }},
      {{"-w", "--warmup_iters", "--warmup-iters"},
       cli::Takes::kValue,
       "-w, --warmup_iters N|auto",
       "untimed iterations first (default 5); auto: iters/10,\n"
       "at least 5",
       [&opt](Value name, Value v) { return set_iterations(opt.warmup, -1, 0, name, v); }},
      // The value is optional: "-c", "-c 1", "-c0", "--check=1".
      {.names = {"-c", "--check"},
       .takes = cli::Takes::kOptionalValue,
       .label = "-c, --check [0|1]",
       .help = "check results, print #wrong (default off)",
       .apply = [&opt](Value name, Value v) { return set_check(opt, name, v); },
       .next_values = {"0", "1"},
       .implicit_value = "1"},
      {{"--csv"},
       cli::Takes::kNothing,
       "    --csv",
       "print CSV instead of the table: a header line, then\n"
       "peer,transport,collective,ranks,bytes,count,dtype,\n"
       "iters,time_us,time_max_us,algbw_GBps,busbw_GBps,check",
       flag(opt.csv)},
      {{"--peer-name"},
       cli::Takes::kValue,
       "    --peer-name S",
       "value of the CSV peer column (default omniccl)",
       [&opt](Value name, Value v) { return set_text(opt.peer, name, v); }},
      {{"--transport"},
       cli::Takes::kValue,
       "    --transport S",
       "value of the CSV transport column (default: what the\n"
       "communicator uses, occl_comm_transport)",
       [&opt](Value name, Value v) { return set_text(opt.transport, name, v); }},
      {{"-t", "--timeout"},
       cli::Takes::kValue,
       "-t, --timeout SEC",
       "deadline of every call (default: the library's)",
       [&opt](Value name, Value v) { return set_timeout(opt, name, v); }},
      {{"--device"},
       cli::Takes::kValue,
       "    --device D",
       "cpu (default) or cuda: buffers in GPU memory (rank r\n"
       "uses GPU r % number of GPUs), each call ordered on a\n"
       "stream of its own; a point's time ends when that\n"
       "stream has finished (cudaStreamSynchronize)",
       [&opt](Value name, Value v) { return set_device(opt, name, v); }},
  };
}

/// The options that measure something else instead of the table, and --help.
std::vector<cli::Option> other_options(Options& opt) {
  return {
      {{"--blocked-cpu"},
       cli::Takes::kNothing,
       "    --blocked-cpu",
       "instead of the table: CPU use of ranks blocked ~1 s in\n"
       "a barrier while rank 0 sleeps",
       flag(opt.blocked_cpu)},
      {{"--footprint"},
       cli::Takes::kValue,
       "    --footprint N",
       "instead of the table: resident memory before and after\n"
       "N operations of the first collective at the first size",
       whole(opt.footprint_ops, 1, 1000000000, "must be a number >= 1")},
      {.names = {"-h", "--help"}, .label = "-h, --help", .help = "print this help", .prints_help = true},
  };
}

/// The sizes of -b/-e/-f: from min_bytes, times factor, up to max_bytes.
void fill_sizes(Options& opt) {
  for (std::uint64_t s = opt.min_bytes; s <= opt.max_bytes; s *= opt.factor) {
    opt.sizes.push_back(s);
    if (s == 0 || s > std::numeric_limits<std::uint64_t>::max() / opt.factor) break;
  }
}

/// Parses argv into `opt`. Returns -1 to go on, or an exit status (help
/// printed: 0; bad usage: 2).
int parse_args(int argc, char** argv, Options& opt) {
  cli::Spec spec{
      .program = "omniccl-bench", .synopsis = kSynopsis, .epilogue = kEpilogue, .needs_value = "{} needs a value"};
  for (auto* part : {what_options, how_options, other_options}) {
    for (cli::Option& o : part(opt)) spec.options.push_back(std::move(o));
  }
  const cli::Parsed parsed = cli::parse(spec, argc, argv);
  if (parsed.exit_status >= 0) return parsed.exit_status;
  if (opt.cuda && (opt.blocked_cpu || opt.footprint_ops > 0)) {
    return usage_error("--device cuda measures the collectives only (not with --blocked-cpu or --footprint)");
  }
  if (!opt.explicit_sizes) {
    if (opt.min_bytes > opt.max_bytes) return usage_error("-b must not be larger than -e");
    fill_sizes(opt);
  }
  return -1;
}

// ---------------------------------------------------------------------------
// Sizes and bandwidth (nccl-tests' conventions, see the file comment)
// ---------------------------------------------------------------------------

/// Element counts of one point on one rank, and how nccl-tests reports it.
struct Layout {
  std::uint64_t param = 0;  // per-rank count: nccl-tests' "count" column
  std::uint64_t send = 0;   // elements in the send buffer
  std::uint64_t recv = 0;   // elements in the receive buffer
  std::uint64_t bytes = 0;  // nccl-tests' "size" column
  double bus_factor = 0;    // busbw = algbw * bus_factor
};

/// Computes the layout of collective `c` for a requested size of
/// `size_bytes` with `n` ranks and elements of `elt` bytes.
Layout layout(Coll c, std::uint64_t size_bytes, int n, std::size_t elt) {
  Layout l;
  const auto un = static_cast<std::uint64_t>(n);
  const double dn = n;
  std::uint64_t count = std::max<std::uint64_t>(1, size_bytes / elt);
  std::uint64_t part = std::max<std::uint64_t>(1, count / un);
  switch (c) {
    case Coll::kAllReduce: l = {count, count, count, count * elt, 2.0 * (dn - 1) / dn}; break;
    case Coll::kBroadcast:
    case Coll::kReduce: l = {count, count, count, count * elt, 1.0}; break;
    case Coll::kAllGather:
    case Coll::kGather: l = {part, part, part * un, part * un * elt, (dn - 1) / dn}; break;
    case Coll::kReduceScatter:
    case Coll::kScatter: l = {part, part * un, part, part * un * elt, (dn - 1) / dn}; break;
    case Coll::kAllToAll: l = {part, part * un, part * un, part * un * elt, (dn - 1) / dn}; break;
    case Coll::kBarrier: l = {0, 0, 0, 0, 0.0}; break;
  }
  return l;
}

/// Iterations for a point of nccl-tests size `bytes` with -n auto: enough
/// to see latency at small sizes and bounded time at large ones.
int auto_iters(std::uint64_t bytes) {
  if (bytes <= (64u << 10)) return 1000;
  if (bytes <= (1u << 20)) return 50;
  if (bytes <= (16u << 20)) return 10;
  return 3;
}

// ---------------------------------------------------------------------------
// Buffers, tensors, data pattern, reference results
// ---------------------------------------------------------------------------

/// Where a point's buffers live: the CPU, or a GPU and the stream calls are
/// ordered on (--device cuda).
struct Placement {
  bool cuda = false;
  int device = 0;
  void* stream = nullptr;  // cudaStream_t
};

/// A zero-initialised, 64-byte aligned host buffer (owning).
class HostBuffer {
 public:
  HostBuffer() = default;
  /// Allocates `bytes` (at least 64) and writes zeros into every page, so
  /// that page faults are not part of the timed loop.
  explicit HostBuffer(std::uint64_t bytes) {
    std::size_t n = static_cast<std::size_t>(std::max<std::uint64_t>(64, (bytes + 63) / 64 * 64));
    data_ = std::aligned_alloc(64, n);
    if (data_) std::memset(data_, 0, n);
    bytes_ = n;
  }
  HostBuffer(const HostBuffer&) = delete;
  HostBuffer& operator=(const HostBuffer&) = delete;
  /// Takes over another buffer's memory.
  HostBuffer(HostBuffer&& other) noexcept : data_(other.data_), bytes_(other.bytes_) {
    other.data_ = nullptr;
    other.bytes_ = 0;
  }
  /// Frees this buffer's memory and takes over another's.
  HostBuffer& operator=(HostBuffer&& other) noexcept {
    if (this != &other) {
      std::free(data_);
      data_ = other.data_;
      bytes_ = other.bytes_;
      other.data_ = nullptr;
      other.bytes_ = 0;
    }
    return *this;
  }
  /// Frees the memory.
  ~HostBuffer() { std::free(data_); }
  /// The memory, or NULL if the allocation failed or none was made.
  void* data() const { return data_; }
  /// Bytes allocated.
  std::size_t bytes() const { return bytes_; }

 private:
  void* data_ = nullptr;
  std::size_t bytes_ = 0;
};

/// A one-dimensional CPU DLTensor over caller-owned memory. Not copyable:
/// the DLTensor points at this object's own shape field.
class Tensor {
 public:
  /// Describes `count` elements of type `dtype` at `data` (GPU memory of
  /// where.device when where.cuda).
  Tensor(void* data, std::uint64_t count, DLDataType dtype, const Placement& where = {})
      : shape_(static_cast<int64_t>(count)) {
    t_.data = data;
    t_.device = {where.cuda ? kDLCUDA : kDLCPU, where.cuda ? where.device : 0};
    t_.ndim = 1;
    t_.dtype = dtype;
    t_.shape = &shape_;
    t_.strides = nullptr;
    t_.byte_offset = 0;
  }
  Tensor(const Tensor&) = delete;
  Tensor& operator=(const Tensor&) = delete;
  /// The DLTensor to pass to the C API.
  const DLTensor* get() const { return &t_; }

 private:
  DLTensor t_{};
  int64_t shape_;
};

/// The value rank `r` holds at global index `g` in -c runs: small whole
/// numbers (0..10), exact in every type, whose sums over up to 11 ranks fit
/// int8. Different ranks hold different sequences, so misplaced blocks show.
template <typename T>
T pattern(int r, std::uint64_t g) {
  return static_cast<T>((g * 7 + static_cast<std::uint64_t>(r) * 13) % 11);
}

/// Combines two values with a reduce op the way the library defines it
/// (integers wrap around; AVG is applied by the caller after the sum).
template <typename T>
T combine(occl_red_op_t op, T a, T b) {
  if constexpr (std::is_integral_v<T>) {
    using U = std::make_unsigned_t<T>;
    switch (op) {
      case OCCL_PROD: return static_cast<T>(static_cast<U>(static_cast<U>(a) * static_cast<U>(b)));
      case OCCL_MIN: return std::min(a, b);
      case OCCL_MAX: return std::max(a, b);
      default:  // SUM, AVG
        return static_cast<T>(static_cast<U>(static_cast<U>(a) + static_cast<U>(b)));
    }
  } else {
    switch (op) {
      case OCCL_PROD: return a * b;
      case OCCL_MIN: return std::min(a, b);
      case OCCL_MAX: return std::max(a, b);
      default: return a + b;
    }
  }
}

/// The reduced value at global index `g` over `n` ranks holding pattern().
template <typename T>
T reduced(occl_red_op_t op, int n, std::uint64_t g) {
  T acc = pattern<T>(0, g);
  for (int r = 1; r < n; ++r) acc = combine(op, acc, pattern<T>(r, g));
  if (op == OCCL_AVG) {
    if constexpr (std::is_integral_v<T>) {
      acc = static_cast<T>(acc / static_cast<T>(n));
    } else {
      acc = acc / static_cast<T>(n);
    }
  }
  return acc;
}

/// Whether `got` is acceptably equal to `want` (exact for integers;
/// relative 1e-5 for floating point, where the summation order may differ).
template <typename T>
bool same(T got, T want) {
  if constexpr (std::is_integral_v<T>) {
    return got == want;
  } else {
    double g = static_cast<double>(got);
    double w = static_cast<double>(want);
    return std::fabs(g - w) <= 1e-5 * std::max(1.0, std::fabs(w));
  }
}

/// GPU memory (--device cuda), freed on destruction; NULL without CUDA.
class DeviceBuffer {
 public:
  DeviceBuffer() = default;
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;
  /// Frees the memory.
  ~DeviceBuffer() {
#ifdef OMNICCL_BENCH_CUDA
    if (data_ != nullptr) cudaFree(data_);
#endif
  }
  /// Allocates `bytes` and copies them from `host`; false on a CUDA error.
  bool upload(const HostBuffer& host) {
#ifdef OMNICCL_BENCH_CUDA
    if (data_ == nullptr && cudaMalloc(&data_, host.bytes()) != cudaSuccess) {
      data_ = nullptr;
      return false;
    }
    return cudaMemcpy(data_, host.data(), host.bytes(), cudaMemcpyHostToDevice) == cudaSuccess;
#else
    (void)host;
    return false;
#endif
  }
  /// Copies the memory back into `host`; false on a CUDA error.
  bool download(HostBuffer& host) const {
#ifdef OMNICCL_BENCH_CUDA
    return cudaMemcpy(host.data(), data_, host.bytes(), cudaMemcpyDeviceToHost) == cudaSuccess;
#else
    (void)host;
    return false;
#endif
  }
  /// The memory, or NULL.
  void* data() const { return data_; }

 private:
  void* data_ = nullptr;
};

/// The buffers and tensors of one point on one rank (with --device cuda,
/// the host buffers fill and check, the device ones are used).
struct PointBuffers {
  HostBuffer send;
  HostBuffer recv;
  DeviceBuffer dsend;
  DeviceBuffer drecv;
  std::uint64_t send_count = 0;
  std::uint64_t recv_count = 0;
};

/// Whether this rank holds a send buffer for collective `c`.
bool has_send(Coll c, int rank, int root) {
  switch (c) {
    case Coll::kBarrier:
    case Coll::kBroadcast:  // in place: only the receive buffer
      return false;
    case Coll::kScatter: return rank == root;
    default: return true;
  }
}

/// Whether this rank holds a receive buffer for collective `c`.
bool has_recv(Coll c, int rank, int root) {
  switch (c) {
    case Coll::kBarrier: return false;
    case Coll::kReduce:
    case Coll::kGather: return rank == root;
    default: return true;
  }
}

/// Fills this rank's input of collective `c` with pattern() and its output
/// with 0xff bytes (NaN for floats), so that a check sees what the
/// operation wrote.
template <typename T>
void fill_for_check(Coll c, int rank, int root, const Layout& l, PointBuffers& b) {
  if (b.send.data()) {
    T* s = static_cast<T*>(b.send.data());
    // Reduce-scatter, scatter and all-to-all inputs are indexed globally
    // across the parts; the others per rank.
    for (std::uint64_t i = 0; i < b.send_count; ++i) s[i] = pattern<T>(rank, i);
  }
  if (b.recv.data()) {
    std::memset(b.recv.data(), 0xff, b.recv_count * sizeof(T));
    if (c == Coll::kBroadcast && rank == root) {
      T* d = static_cast<T*>(b.recv.data());
      for (std::uint64_t i = 0; i < b.recv_count; ++i) d[i] = pattern<T>(rank, i);
    }
  }
  (void)l;
}

/// Counts the elements of this rank's output that differ from the
/// reference for collective `c` (n ranks, reduce op `op`).
template <typename T>
std::uint64_t count_wrong(Coll c, int rank, int n, int root, occl_red_op_t op, const Layout& l, const PointBuffers& b) {
  if (!b.recv.data()) return 0;
  const T* d = static_cast<const T*>(b.recv.data());
  const std::uint64_t p = l.param;
  std::uint64_t wrong = 0;
  auto expect = [&](std::uint64_t i) -> T {
    switch (c) {
      case Coll::kAllReduce:
      case Coll::kReduce: return reduced<T>(op, n, i);
      case Coll::kReduceScatter: return reduced<T>(op, n, static_cast<std::uint64_t>(rank) * p + i);
      case Coll::kBroadcast: return pattern<T>(root, i);
      case Coll::kAllGather:
      case Coll::kGather: return pattern<T>(static_cast<int>(i / p), i % p);
      case Coll::kScatter: return pattern<T>(root, static_cast<std::uint64_t>(rank) * p + i);
      case Coll::kAllToAll: return pattern<T>(static_cast<int>(i / p), static_cast<std::uint64_t>(rank) * p + i % p);
      case Coll::kBarrier: break;
    }
    return T{};
  };
  for (std::uint64_t i = 0; i < b.recv_count; ++i) {
    if (!same(d[i], expect(i))) ++wrong;
  }
  return wrong;
}

/// Calls `f.template operator()<T>()` with T the C++ type of `kind`.
template <typename F>
auto dispatch(Kind kind, F&& f) {
  switch (kind) {
    case Kind::kI8: return f.template operator()<std::int8_t>();
    case Kind::kU8: return f.template operator()<std::uint8_t>();
    case Kind::kI32: return f.template operator()<std::int32_t>();
    case Kind::kU32: return f.template operator()<std::uint32_t>();
    case Kind::kI64: return f.template operator()<std::int64_t>();
    case Kind::kU64: return f.template operator()<std::uint64_t>();
    case Kind::kF32: return f.template operator()<float>();
    case Kind::kF64: break;
  }
  return f.template operator()<double>();
}

// ---------------------------------------------------------------------------
// Running operations
// ---------------------------------------------------------------------------

/// A failed call: which one and the library's status and message.
struct Failure {
  std::string what;
  occl_status_t status = OCCL_SUCCESS;
  std::string message;
};

/// Throws a Failure if `s` is not OCCL_SUCCESS, naming `what`.
void check_status(occl_status_t s, const char* what) {
  if (s != OCCL_SUCCESS) throw Failure{what, s, occl_last_error()};
}

/// Runs one collective `c` on this rank's buffers: blocking on the CPU; on
/// a GPU, enqueued on the placement's stream (returns before it is done).
occl_status_t run_op(Coll c, occl_comm_t comm, int rank, int root, occl_red_op_t op, const DLDataType& dt,
                     const PointBuffers& b, const Placement& where) {
  void* sp = where.cuda ? b.dsend.data() : b.send.data();
  void* rp = where.cuda ? b.drecv.data() : b.recv.data();
  Tensor send(sp, b.send_count, dt, where);
  Tensor recv(rp, b.recv_count, dt, where);
  const DLTensor* s = sp ? send.get() : nullptr;
  const DLTensor* r = rp ? recv.get() : nullptr;
  occl_options_t opts = OCCL_OPTIONS_INIT;
  opts.stream = where.stream;
  const occl_options_t* o = where.cuda ? &opts : nullptr;
  switch (c) {
    case Coll::kAllReduce: return occl_all_reduce_ex(s, r, op, comm, o, nullptr);
    case Coll::kAllGather: return occl_all_gather_ex(s, r, comm, o, nullptr);
    case Coll::kBroadcast: return occl_broadcast_ex(r, root, comm, o, nullptr);
    case Coll::kReduce: return occl_reduce_ex(s, rank == root ? r : nullptr, op, root, comm, o, nullptr);
    case Coll::kReduceScatter: return occl_reduce_scatter_ex(s, r, op, comm, o, nullptr);
    case Coll::kAllToAll: return occl_all_to_all_ex(s, r, comm, o, nullptr);
    case Coll::kGather: return occl_gather_ex(s, rank == root ? r : nullptr, root, comm, o, nullptr);
    case Coll::kScatter: return occl_scatter_ex(rank == root ? s : nullptr, r, root, comm, o, nullptr);
    case Coll::kBarrier: break;
  }
  return occl_barrier_ex(comm, o, nullptr);
}

/// Waits until the placement's stream has finished (no-op on the CPU).
void sync_stream(const Placement& where) {
#ifdef OMNICCL_BENCH_CUDA
  if (where.cuda) {
    const cudaError_t e = cudaStreamSynchronize(static_cast<cudaStream_t>(where.stream));
    if (e != cudaSuccess) throw Failure{"cudaStreamSynchronize", OCCL_ERR_SYSTEM, cudaGetErrorString(e)};
  }
#else
  (void)where;
#endif
}

/// Sum and max over ranks of `values` (all_reduce of doubles, in place).
void reduce_doubles(occl_comm_t comm, std::vector<double>& values, occl_red_op_t op) {
  Tensor t(values.data(), values.size(), DLDataType{kDLFloat, 64, 1});
  check_status(occl_all_reduce(t.get(), t.get(), op, comm, nullptr), "all_reduce (results)");
}

/// Seconds on a monotonic clock.
double now_s() { return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count(); }

/// CPU seconds used by this whole process (all threads) so far.
double process_cpu_s() {
  timespec ts{};
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) + static_cast<double>(ts.tv_nsec) * 1e-9;
}

/// The result of one point, already reduced over ranks.
struct PointResult {
  Layout layout;
  int iters = 0;
  double time_us = 0;      // mean over ranks of the per-op time
  double time_max_us = 0;  // max over ranks
  double algbw = 0;        // GB/s
  double busbw = 0;        // GB/s
  long long wrong = -1;    // -1: not checked
};

/// Allocates the host buffers this rank holds for collective `c` (layout
/// `l`) and fills them with the check pattern, which inputs hold during
/// timing as well (valid for every op).
void make_buffers(const Options& opt, Coll c, const Layout& l, int rank, PointBuffers& b) {
  const DTypeInfo& dt = *opt.dtype;
  if (has_send(c, rank, opt.root)) {
    b.send_count = l.send;
    b.send = HostBuffer(l.send * dt.size);
    if (!b.send.data()) throw Failure{"allocating the send buffer", OCCL_ERR_OUT_OF_MEMORY, ""};
  }
  if (has_recv(c, rank, opt.root)) {
    b.recv_count = l.recv;
    b.recv = HostBuffer(l.recv * dt.size);
    if (!b.recv.data()) throw Failure{"allocating the receive buffer", OCCL_ERR_OUT_OF_MEMORY, ""};
  }
  dispatch(dt.kind, [&]<typename T>() { fill_for_check<T>(c, rank, opt.root, l, b); });
}

/// --device cuda: copies the host buffers' contents to GPU memory.
void upload(const Placement& where, PointBuffers& b) {
  if (!where.cuda) return;
  if ((b.send.data() && !b.dsend.upload(b.send)) || (b.recv.data() && !b.drecv.upload(b.recv))) {
    throw Failure{"copying the buffers to the GPU", OCCL_ERR_SYSTEM, ""};
  }
}

/// Runs `warmup` untimed operations, a barrier, then `iters` timed ones;
/// returns this rank's seconds per operation.
double time_ops(const Options& opt, Coll c, int warmup, int iters, occl_comm_t comm, int rank, PointBuffers& b,
                const Placement& where) {
  const DTypeInfo& dt = *opt.dtype;
  for (int i = 0; i < warmup; ++i) {
    check_status(run_op(c, comm, rank, opt.root, opt.op->op, dt.dl, b, where), info(c).name);
  }
  sync_stream(where);
  check_status(occl_barrier(comm, nullptr), "barrier (before timing)");
  double t0 = now_s();
  for (int i = 0; i < iters; ++i) {
    check_status(run_op(c, comm, rank, opt.root, opt.op->op, dt.dl, b, where), info(c).name);
  }
  sync_stream(where);  // GPU calls return before the work is done
  return (now_s() - t0) / iters;
}

/// -c: refills the buffers, runs the operation once more and returns how
/// many of this rank's result elements differ from the reference.
double count_wrong_after_op(const Options& opt, Coll c, const Layout& l, occl_comm_t comm, int rank, int n,
                            PointBuffers& b, const Placement& where) {
  const DTypeInfo& dt = *opt.dtype;
  dispatch(dt.kind, [&]<typename T>() { fill_for_check<T>(c, rank, opt.root, l, b); });
  upload(where, b);
  check_status(occl_barrier(comm, nullptr), "barrier (before check)");
  check_status(run_op(c, comm, rank, opt.root, opt.op->op, dt.dl, b, where), info(c).name);
  sync_stream(where);
  if (where.cuda && b.recv.data() && !b.drecv.download(b.recv)) {
    throw Failure{"copying the results from the GPU", OCCL_ERR_SYSTEM, ""};
  }
  return static_cast<double>(
      dispatch(dt.kind, [&]<typename T>() { return count_wrong<T>(c, rank, n, opt.root, opt.op->op, l, b); }));
}

/// Measures collective `c` at `size_bytes` on every rank; all ranks return
/// the same result.
PointResult run_point(const Options& opt, Coll c, std::uint64_t size_bytes, occl_comm_t comm, int rank, int n,
                      const Placement& where) {
  PointResult res;
  res.layout = layout(c, size_bytes, n, opt.dtype->size);
  const Layout& l = res.layout;
  PointBuffers b;
  make_buffers(opt, c, l, rank, b);
  upload(where, b);  // --device cuda: the same contents in GPU memory
  res.iters = opt.iters > 0 ? opt.iters : auto_iters(l.bytes);
  const int warmup = opt.warmup >= 0 ? opt.warmup : std::max(5, res.iters / 10);
  const double per_op = time_ops(opt, c, warmup, res.iters, comm, rank, b, where);
  double wrong = 0;
  if (opt.check && c != Coll::kBarrier) wrong = count_wrong_after_op(opt, c, l, comm, rank, n, b, where);

  std::vector<double> sums{per_op, wrong};
  reduce_doubles(comm, sums, OCCL_SUM);
  std::vector<double> maxes{per_op};
  reduce_doubles(comm, maxes, OCCL_MAX);
  double mean = sums[0] / n;
  res.time_us = mean * 1e6;
  res.time_max_us = maxes[0] * 1e6;
  res.algbw = mean > 0 ? static_cast<double>(l.bytes) / 1e9 / mean : 0;
  res.busbw = res.algbw * l.bus_factor;
  if (opt.check) res.wrong = c == Coll::kBarrier ? 0 : static_cast<long long>(sums[1]);
  return res;
}

// ---------------------------------------------------------------------------
// Output
// ---------------------------------------------------------------------------

/// The exact CSV header (also checked by the CTest smoke test).
constexpr const char kCsvHeader[] =
    "peer,transport,collective,ranks,bytes,count,dtype,iters,time_us,"
    "time_max_us,algbw_GBps,busbw_GBps,check";

/// Formats a time in microseconds as nccl-tests does (fewer decimals for
/// larger values).
std::string format_time(double us) {
  char buf[32];
  if (us >= 10000.0) {
    std::snprintf(buf, sizeof buf, "%7.0f", us);
  } else if (us >= 100.0) {
    std::snprintf(buf, sizeof buf, "%7.1f", us);
  } else {
    std::snprintf(buf, sizeof buf, "%7.2f", us);
  }
  return buf;
}

/// Prints the nccl-tests style header of one collective's table.
void print_table_header(const Options& opt, Coll c, int n, const std::string& transport) {
  std::printf("#\n# Collective: %s  ranks: %d  transport: %s  peer: %s\n#\n", info(c).name, n, transport.c_str(),
              opt.peer.c_str());
  std::printf("# %10s  %12s  %8s  %6s  %6s           out-of-place\n", "", "", "", "", "");
  std::printf("# %10s  %12s  %8s  %6s  %6s  %7s  %6s  %6s  %6s\n", "size", "count", "type", "redop", "root", "time",
              "algbw", "busbw", "#wrong");
  std::printf("# %10s  %12s  %8s  %6s  %6s  %7s  %6s  %6s  %6s\n", "(B)", "(elements)", "", "", "", "(us)", "(GB/s)",
              "(GB/s)", "");
}

/// Prints one table row.
void print_table_row(const Options& opt, Coll c, const PointResult& r) {
  const CollInfo& ci = info(c);
  std::string wrong = r.wrong < 0 ? "N/A" : std::to_string(r.wrong);
  std::printf("%12" PRIu64 "  %12" PRIu64 "  %8s  %6s  %6d  %7s  %6.2f  %6.2f  %6s\n", r.layout.bytes, r.layout.param,
              c == Coll::kBarrier ? "none" : opt.dtype->name, ci.reduction ? opt.op->name : "none",
              ci.rooted ? opt.root : -1, format_time(r.time_us).c_str(), r.algbw, r.busbw, wrong.c_str());
}

/// Prints one CSV row.
void print_csv_row(const Options& opt, Coll c, int n, const std::string& transport, const PointResult& r) {
  std::string wrong = r.wrong < 0 ? "N/A" : std::to_string(r.wrong);
  std::printf("%s,%s,%s,%d,%" PRIu64 ",%" PRIu64 ",%s,%d,%.3f,%.3f,%.4f,%.4f,%s\n", opt.peer.c_str(), transport.c_str(),
              info(c).name, n, r.layout.bytes, r.layout.param, c == Coll::kBarrier ? "none" : opt.dtype->csv_name,
              r.iters, r.time_us, r.time_max_us, r.algbw, r.busbw, wrong.c_str());
}

// ---------------------------------------------------------------------------
// Blocked-CPU and footprint measurements
// ---------------------------------------------------------------------------

/// Rank 0 sleeps 1 s, then enters a barrier; every rank measures wall and
/// process CPU time across the barrier. Rank 0 prints every rank's share of
/// a core. Returns the exit status.
int measure_blocked_cpu(const Options& opt, occl_comm_t comm, int rank, int n, const std::string& transport) {
  for (int i = 0; i < 10; ++i) check_status(occl_barrier(comm, nullptr), "barrier (warm-up)");
  if (rank == 0) std::this_thread::sleep_for(std::chrono::seconds(1));
  double w0 = now_s();
  double c0 = process_cpu_s();
  check_status(occl_barrier(comm, nullptr), "barrier (blocked)");
  double wall = now_s() - w0;
  double cpu = process_cpu_s() - c0;

  std::vector<double> all(static_cast<std::size_t>(3 * n), 0.0);
  std::vector<double> mine{wall, cpu, wall > 0 ? 100.0 * cpu / wall : 0.0};
  Tensor send(mine.data(), 3, DLDataType{kDLFloat, 64, 1});
  Tensor recv(all.data(), all.size(), DLDataType{kDLFloat, 64, 1});
  check_status(occl_all_gather(send.get(), recv.get(), comm, nullptr), "all_gather (results)");
  if (rank != 0) return 0;
  if (opt.csv) std::printf("peer,transport,ranks,rank,wall_s,cpu_s,cpu_pct\n");
  double worst = 0;
  for (int r = 0; r < n; ++r) {
    double w = all[3 * r], c = all[3 * r + 1], p = all[3 * r + 2];
    if (r != 0) worst = std::max(worst, p);
    if (opt.csv) {
      std::printf("%s,%s,%d,%d,%.4f,%.4f,%.2f\n", opt.peer.c_str(), transport.c_str(), n, r, w, c, p);
    } else {
      std::printf("# blocked-cpu: rank %d %s %.3f s, process CPU %.4f s = %.2f%% of a core\n", r,
                  r == 0 ? "slept, then barrier took" : "blocked in barrier", w, c, p);
    }
  }
  if (!opt.csv) std::printf("# blocked-cpu: worst blocked rank: %.2f%% of a core\n", worst);
  return 0;
}

/// Resident and shared memory of this process, in KiB (/proc/self/statm).
struct Rss {
  long resident_kib = 0;
  long shared_kib = 0;
};

/// Reads /proc/self/statm; zeros if it cannot be read.
Rss read_rss() {
  Rss r;
  std::FILE* f = std::fopen("/proc/self/statm", "r");
  if (!f) return r;
  long size = 0, resident = 0, shared = 0;
  if (std::fscanf(f, "%ld %ld %ld", &size, &resident, &shared) == 3) {
    long page_kib = sysconf(_SC_PAGESIZE) / 1024;
    r.resident_kib = resident * page_kib;
    r.shared_kib = shared * page_kib;
  }
  std::fclose(f);
  return r;
}

/// The memory figures of one rank in measure_footprint, in KiB, in the
/// order they are gathered.
enum FootprintField { kBase, kInit, kSteady, kEnd, kSharedEnd, kBuffers, kComm, kFootprintFields };

/// Rank 0's report of measure_footprint: `all` holds kFootprintFields
/// figures per rank.
void print_footprint(const Options& opt, Coll c, const Layout& l, int n, const std::string& transport,
                     const std::vector<double>& all) {
  if (opt.csv) {
    std::printf(
        "peer,transport,ranks,rank,collective,bytes,ops,rss_base_kib,rss_init_kib,"
        "rss_steady_kib,rss_end_kib,shared_end_kib,buffers_kib,comm_kib,growth_kib\n");
  }
  for (int r = 0; r < n; ++r) {
    const double* v = &all[static_cast<std::size_t>(kFootprintFields * r)];
    double growth = v[kEnd] - v[kSteady];
    if (opt.csv) {
      std::printf("%s,%s,%d,%d,%s,%" PRIu64 ",%ld,%.0f,%.0f,%.0f,%.0f,%.0f,%.0f,%.0f,%.0f\n", opt.peer.c_str(),
                  transport.c_str(), n, r, info(c).name, l.bytes, opt.footprint_ops, v[kBase], v[kInit], v[kSteady],
                  v[kEnd], v[kSharedEnd], v[kBuffers], v[kComm], growth);
    } else {
      std::printf(
          "# footprint: rank %d: RSS %.0f KiB before the communicator, %.0f after init, "
          "%.0f steady (incl. %.0f KiB of benchmark buffers), %.0f after %ld x %s of %" PRIu64
          " B (shared %.0f KiB): communicator %.0f KiB, growth %+.0f KiB\n",
          r, v[kBase], v[kInit], v[kSteady], v[kBuffers], v[kEnd], opt.footprint_ops, info(c).name, l.bytes,
          v[kSharedEnd], v[kComm], growth);
    }
  }
}

/// Runs opt.footprint_ops operations of the first collective at the first
/// size and has rank 0 print every rank's resident memory at the stages
/// (base: before the communicator; init: after it; steady: after buffers
/// and warm-up; end: after the operations). Returns the exit status.
int measure_footprint(const Options& opt, occl_comm_t comm, int rank, int n, const std::string& transport,
                      const Rss& base, const Rss& init) {
  const Coll c = opt.colls.front();
  const DTypeInfo& dt = *opt.dtype;
  Layout l = layout(c, opt.sizes.front(), n, dt.size);
  PointBuffers b;
  make_buffers(opt, c, l, rank, b);
  double buffers_kib = static_cast<double>(b.send.bytes() + b.recv.bytes()) / 1024.0;
  int warmup = opt.warmup >= 0 ? std::max(opt.warmup, 100) : 100;
  for (int i = 0; i < warmup; ++i) {
    check_status(run_op(c, comm, rank, opt.root, opt.op->op, dt.dl, b, Placement{}), info(c).name);
  }
  check_status(occl_barrier(comm, nullptr), "barrier");
  Rss steady = read_rss();
  for (long i = 0; i < opt.footprint_ops; ++i) {
    check_status(run_op(c, comm, rank, opt.root, opt.op->op, dt.dl, b, Placement{}), info(c).name);
  }
  check_status(occl_barrier(comm, nullptr), "barrier");
  Rss end = read_rss();

  std::vector<double> mine(kFootprintFields);
  mine[kBase] = static_cast<double>(base.resident_kib);
  mine[kInit] = static_cast<double>(init.resident_kib);
  mine[kSteady] = static_cast<double>(steady.resident_kib);
  mine[kEnd] = static_cast<double>(end.resident_kib);
  mine[kSharedEnd] = static_cast<double>(end.shared_kib);
  mine[kBuffers] = buffers_kib;
  mine[kComm] = static_cast<double>(steady.resident_kib - base.resident_kib) - buffers_kib;
  std::vector<double> all(static_cast<std::size_t>(kFootprintFields * n), 0.0);
  Tensor send(mine.data(), kFootprintFields, DLDataType{kDLFloat, 64, 1});
  Tensor recv(all.data(), all.size(), DLDataType{kDLFloat, 64, 1});
  check_status(occl_all_gather(send.get(), recv.get(), comm, nullptr), "all_gather (results)");
  if (rank == 0) print_footprint(opt, c, l, n, transport, all);
  return 0;
}

/// The GPU and stream of this rank with --device cuda (GPU rank % count; a
/// stream of its own), else the CPU.
Placement placement(const Options& opt, int rank) {
  Placement p;
  if (!opt.cuda) return p;
#ifdef OMNICCL_BENCH_CUDA
  int count = 0;
  cudaError_t e = cudaGetDeviceCount(&count);
  if (e != cudaSuccess || count == 0) {
    throw Failure{"--device cuda", OCCL_ERR_UNSUPPORTED,
                  e != cudaSuccess ? cudaGetErrorString(e) : "cudaGetDeviceCount found no GPU"};
  }
  p.cuda = true;
  p.device = rank % count;
  cudaStream_t s = nullptr;
  if ((e = cudaSetDevice(p.device)) != cudaSuccess ||
      (e = cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking)) != cudaSuccess) {
    throw Failure{"--device cuda", OCCL_ERR_SYSTEM, cudaGetErrorString(e)};
  }
  p.stream = s;
#else
  (void)rank;
#endif
  return p;
}

/// Rank 0's first line: the CSV header, or the run's settings.
void print_run_header(const Options& opt, int n, const std::string& transport) {
  if (opt.csv) {
    std::printf("%s\n", kCsvHeader);
  } else {
    std::printf("# omniccl-bench: %d ranks, transport %s, dtype %s, op %s, iters %s, warmup %s, check %d\n", n,
                transport.c_str(), opt.dtype->name, opt.op->name,
                opt.iters > 0 ? std::to_string(opt.iters).c_str() : "auto",
                opt.warmup >= 0 ? std::to_string(opt.warmup).c_str() : "auto", opt.check ? 1 : 0);
  }
  std::fflush(stdout);
}

/// The collective tables: every collective at every size, printed by rank
/// 0 as rows come. Returns the exit status (1 if -c found wrong elements).
int measure_collectives(const Options& opt, occl_comm_t comm, int rank, int n, const std::string& transport,
                        const Placement& where) {
  if (rank == 0) print_run_header(opt, n, transport);
  long long total_wrong = 0;
  double bw_sum = 0;
  int bw_points = 0;
  for (Coll c : opt.colls) {
    if (rank == 0 && !opt.csv) print_table_header(opt, c, n, transport);
    std::vector<std::uint64_t> sizes = opt.sizes;
    if (c == Coll::kBarrier) sizes = {0};  // one point: no data
    for (std::uint64_t s : sizes) {
      PointResult r = run_point(opt, c, s, comm, rank, n, where);
      if (r.wrong > 0) total_wrong += r.wrong;
      if (c != Coll::kBarrier) {
        bw_sum += r.busbw;
        ++bw_points;
      }
      if (rank != 0) continue;
      if (opt.csv) {
        print_csv_row(opt, c, n, transport, r);
      } else {
        print_table_row(opt, c, r);
      }
      std::fflush(stdout);
    }
  }
  if (rank == 0 && !opt.csv) {
    std::printf("# Out of bounds values : %lld %s\n", total_wrong, total_wrong ? "FAILED" : "OK");
    std::printf("# Avg bus bandwidth    : %g\n#\n", bw_points ? bw_sum / bw_points : 0.0);
  }
  if (total_wrong == 0) return 0;
  if (rank == 0) std::fprintf(stderr, "omniccl-bench: %lld wrong elements\n", total_wrong);
  return kExitFailure;
}

/// Runs what the options ask for on communicator `comm` (created between
/// the resident-memory readings `base` and `init`). Returns the exit status.
int run_on(const Options& opt, occl_comm_t comm, const Rss& base, const Rss& init) {
  int rank = 0, n = 0;
  const char* tname = nullptr;
  check_status(occl_comm_rank(comm, &rank), "occl_comm_rank");
  check_status(occl_comm_size(comm, &n), "occl_comm_size");
  check_status(occl_comm_transport(comm, &tname), "occl_comm_transport");
  std::string transport = opt.transport.empty() ? tname : opt.transport;
  const Placement where = placement(opt, rank);
  if (where.cuda && opt.transport.empty()) transport += "/cuda";
  if (opt.root >= n) {
    if (rank == 0) usage_error("--root " + std::to_string(opt.root) + " is not below " + std::to_string(n) + " ranks");
    return cli::kExitUsage;
  }
  if (opt.blocked_cpu) return measure_blocked_cpu(opt, comm, rank, n, transport);
  if (opt.footprint_ops > 0) return measure_footprint(opt, comm, rank, n, transport, base, init);
  return measure_collectives(opt, comm, rank, n, transport, where);
}

/// Creates the communicator, runs what the options ask for and destroys it.
/// Returns the exit status.
int run(const Options& opt) {
  check_status(OCCL_INIT_CHECK(), "occl_init_check");
  Rss base = read_rss();
  occl_config_t cfg = OCCL_CONFIG_INIT;
  if (opt.timeout_s > 0) cfg.timeout_ms = static_cast<int64_t>(opt.timeout_s * 1000.0);
  occl_comm_t comm = nullptr;
  check_status(occl_comm_init(&comm, "env://", OCCL_FROM_ENV, OCCL_FROM_ENV, &cfg), "occl_comm_init(env://)");
  Rss init = read_rss();
  int status = 0;
  try {
    status = run_on(opt, comm, base, init);
  } catch (...) {
    occl_comm_abort(comm);
    throw;
  }
  if (status == cli::kExitUsage) {  // nothing ran: no collective call to finish
    occl_comm_destroy(comm);
    return status;
  }
  std::fflush(stdout);
  check_status(occl_comm_destroy(comm), "occl_comm_destroy");
  return status;
}

}  // namespace

/// Entry point: parse the command line, run, report failures on stderr.
int main(int argc, char** argv) {
  Options opt;
  int parsed = parse_args(argc, argv, opt);
  if (parsed >= 0) return parsed;
  try {
    return run(opt);
  } catch (const Failure& f) {
    std::fprintf(stderr, "omniccl-bench: %s failed: %s%s%s\n", f.what.c_str(),
                 f.status == OCCL_SUCCESS ? "" : occl_status_string(f.status), f.message.empty() ? "" : ": ",
                 f.message.c_str());
    return kExitFailure;
  }
}
