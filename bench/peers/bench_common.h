/*
 * bench_common.h - what the peer benchmarks (mpi_bench.c, gloo_bench.cc)
 * share with each other and with OmniCCL's tools/omniccl_bench.cc: the
 * command line, nccl-tests' sizes and bus-bandwidth factors, the iteration
 * schedule, the data pattern and reference results of -c, and the CSV
 * format. C99 and C++ alike; everything is static, so each program simply
 * includes it.
 *
 * Sizes and factors are those of nccl-tests (doc/PERFORMANCE.md and
 * src/<coll>.cu in github.com/NVIDIA/nccl-tests), exactly as
 * tools/omniccl_bench.cc documents them; the peers measure float32 SUM only.
 */
#ifndef OMNICCL_BENCH_PEERS_BENCH_COMMON_H_
#define OMNICCL_BENCH_PEERS_BENCH_COMMON_H_

#include <ctype.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* The collectives, in the order of the CSV names below. */
enum bc_coll {
  BC_ALLREDUCE,
  BC_ALLGATHER,
  BC_BCAST,
  BC_REDUCE,
  BC_REDUCE_SCATTER,
  BC_ALLTOALL,
  BC_GATHER,
  BC_SCATTER,
  BC_BARRIER,
  BC_NCOLLS
};

static const char* const bc_coll_names[BC_NCOLLS] = {"allreduce", "allgather", "bcast",   "reduce", "reduce_scatter",
                                                     "alltoall",  "gather",    "scatter", "barrier"};

#define BC_MAX_SIZES 64
#define BC_CSV_HEADER                                                \
  "peer,transport,collective,ranks,bytes,count,dtype,iters,time_us," \
  "time_max_us,algbw_GBps,busbw_GBps,check"

/* Everything the command line decides. */
struct bc_options {
  int colls[BC_NCOLLS]; /* 1: measure this collective */
  uint64_t sizes[BC_MAX_SIZES];
  int nsizes;
  int iters;  /* 0: auto */
  int warmup; /* -1: auto */
  int check;
  int csv;
  int root;
  int blocked_cpu;
  const char* peer;
  const char* transport;
  const char* extra; /* a program-specific option value (--algo), or NULL */
};

/* Layout of one point: nccl-tests' per-rank count ("count" column), the
 * send/receive buffer element counts, the "size" column and the busbw
 * factor. */
struct bc_layout {
  uint64_t param, send, recv, bytes;
  double bus_factor;
};

/** Parses a size with an optional K/M/G suffix (powers of 1024); returns
 *  0 on success. */
static int bc_parse_size(const char* text, uint64_t* out) {
  size_t len = strlen(text);
  uint64_t mult = 1, value = 0;
  size_t i;
  if (len == 0 || len > 16) return -1;
  switch (toupper((unsigned char)text[len - 1])) {
    case 'K':
      mult = 1ull << 10;
      len--;
      break;
    case 'M':
      mult = 1ull << 20;
      len--;
      break;
    case 'G':
      mult = 1ull << 30;
      len--;
      break;
    default: break;
  }
  if (len == 0) return -1;
  for (i = 0; i < len; ++i) {
    if (!isdigit((unsigned char)text[i])) return -1;
    value = value * 10 + (uint64_t)(text[i] - '0');
  }
  *out = value * mult;
  return 0;
}

/** Prints the usage of a peer benchmark named `prog` to `f`. */
static void bc_usage(FILE* f, const char* prog) {
  fprintf(f,
          "Usage: %s [options]   (start with the peer's launcher)\n"
          "  --coll NAME[,NAME...]|all  allreduce allgather bcast reduce reduce_scatter\n"
          "                             alltoall gather scatter barrier (default all)\n"
          "  --sizes LIST     sizes in bytes, K/M/G suffixes (default 8,1M)\n"
          "  -b MIN -e MAX -f F   sizes MIN, MIN*F, ... up to MAX instead of --sizes\n"
          "  -n N|auto        timed iterations (auto: <=64K 1000, <=1M 50, <=16M 10, else 3)\n"
          "  -w N|auto        warm-up iterations (auto: iters/10, at least 5)\n"
          "  -r ROOT          root of rooted collectives (default 0)\n"
          "  -c               check results (float32 SUM pattern), count wrong elements\n"
          "  --csv            CSV output (" BC_CSV_HEADER
          ")\n"
          "  --peer-name S    CSV peer column;  --transport S  CSV transport column\n"
          "  --blocked-cpu    CPU share of ranks blocked ~1 s in a barrier\n"
          "  --algo S         program specific (gloo_bench: allreduce ring|hd|best)\n"
          "  -d float -o sum  accepted for symmetry; nothing else is supported\n",
          prog);
}

/** Parses argv into `o` (defaults for `peer`/`transport` given). Returns
 *  -1 to go on, 0 after --help, 2 on bad usage. */
static int bc_parse(int argc, char** argv, struct bc_options* o, const char* peer, const char* transport) {
  int i, k;
  uint64_t bmin = 0, bmax = 0, factor = 2;
  int have_range = 0;
  memset(o, 0, sizeof *o);
  for (k = 0; k < BC_NCOLLS; ++k) o->colls[k] = 1;
  o->sizes[0] = 8;
  o->sizes[1] = 1u << 20;
  o->nsizes = 2;
  o->iters = 20;
  o->warmup = 5;
  o->peer = peer;
  o->transport = transport;
  for (i = 1; i < argc; ++i) {
    const char* a = argv[i];
    const char* v = (i + 1 < argc) ? argv[i + 1] : NULL;
#define BC_NEED()                                            \
  do {                                                       \
    if (!v) {                                                \
      fprintf(stderr, "%s: %s needs a value\n", argv[0], a); \
      return 2;                                              \
    }                                                        \
    ++i;                                                     \
  } while (0)
    if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
      bc_usage(stdout, argv[0]);
      return 0;
    } else if (!strcmp(a, "--coll")) {
      char buf[512];
      char* tok;
      BC_NEED();
      if (strcmp(v, "all") != 0) {
        for (k = 0; k < BC_NCOLLS; ++k) o->colls[k] = 0;
        snprintf(buf, sizeof buf, "%s", v);
        for (tok = strtok(buf, ","); tok; tok = strtok(NULL, ",")) {
          int found = -1;
          for (k = 0; k < BC_NCOLLS; ++k) {
            if (!strcmp(tok, bc_coll_names[k])) found = k;
          }
          if (!strcmp(tok, "all_reduce")) found = BC_ALLREDUCE;
          if (!strcmp(tok, "all_gather")) found = BC_ALLGATHER;
          if (!strcmp(tok, "broadcast")) found = BC_BCAST;
          if (!strcmp(tok, "all_to_all")) found = BC_ALLTOALL;
          if (found < 0) {
            fprintf(stderr, "%s: unknown collective '%s'\n", argv[0], tok);
            return 2;
          }
          o->colls[found] = 1;
        }
      }
    } else if (!strcmp(a, "--sizes")) {
      char buf[1024];
      char* tok;
      BC_NEED();
      snprintf(buf, sizeof buf, "%s", v);
      o->nsizes = 0;
      for (tok = strtok(buf, ","); tok && o->nsizes < BC_MAX_SIZES; tok = strtok(NULL, ",")) {
        if (bc_parse_size(tok, &o->sizes[o->nsizes]) != 0) {
          fprintf(stderr, "%s: '%s' is not a size\n", argv[0], tok);
          return 2;
        }
        o->nsizes++;
      }
    } else if (!strcmp(a, "-b") || !strcmp(a, "-e") || !strcmp(a, "-f")) {
      uint64_t s;
      BC_NEED();
      if (bc_parse_size(v, &s) != 0) {
        fprintf(stderr, "%s: %s: '%s' is not a size\n", argv[0], a, v);
        return 2;
      }
      if (a[1] == 'b') bmin = s;
      if (a[1] == 'e') bmax = s;
      if (a[1] == 'f') factor = s < 2 ? 2 : s;
      have_range = 1;
    } else if (!strcmp(a, "-n") || !strcmp(a, "-w")) {
      int value;
      BC_NEED();
      value = !strcmp(v, "auto") ? (a[1] == 'n' ? 0 : -1) : atoi(v);
      if (a[1] == 'n')
        o->iters = value;
      else
        o->warmup = value;
    } else if (!strcmp(a, "-r")) {
      BC_NEED();
      o->root = atoi(v);
    } else if (!strcmp(a, "-c")) {
      o->check = 1;
    } else if (!strcmp(a, "--csv")) {
      o->csv = 1;
    } else if (!strcmp(a, "--blocked-cpu")) {
      o->blocked_cpu = 1;
    } else if (!strcmp(a, "--peer-name")) {
      BC_NEED();
      o->peer = v;
    } else if (!strcmp(a, "--transport")) {
      BC_NEED();
      o->transport = v;
    } else if (!strcmp(a, "--algo")) {
      BC_NEED();
      o->extra = v;
    } else if (!strcmp(a, "-d")) {
      BC_NEED();
      if (strcmp(v, "float") && strcmp(v, "float32")) {
        fprintf(stderr, "%s: only -d float is supported\n", argv[0]);
        return 2;
      }
    } else if (!strcmp(a, "-o")) {
      BC_NEED();
      if (strcmp(v, "sum")) {
        fprintf(stderr, "%s: only -o sum is supported\n", argv[0]);
        return 2;
      }
    } else {
      fprintf(stderr, "%s: unknown option '%s'\n", argv[0], a);
      bc_usage(stderr, argv[0]);
      return 2;
    }
#undef BC_NEED
  }
  if (have_range) {
    uint64_t s;
    if (bmax < bmin) bmax = bmin;
    o->nsizes = 0;
    for (s = bmin; s <= bmax && o->nsizes < BC_MAX_SIZES; s *= factor) {
      o->sizes[o->nsizes++] = s;
      if (s == 0) break;
    }
  }
  return -1;
}

/** The layout of collective `c` for a requested size of `size` bytes with
 *  `n` ranks and float32 elements (nccl-tests' GetCollByteCount/GetBw). */
static struct bc_layout bc_layout_of(int c, uint64_t size, int n) {
  struct bc_layout l;
  const uint64_t elt = 4, un = (uint64_t)n;
  const double dn = (double)n;
  uint64_t count = size / elt, part;
  if (count < 1) count = 1;
  part = count / un;
  if (part < 1) part = 1;
  memset(&l, 0, sizeof l);
  switch (c) {
    case BC_ALLREDUCE:
      l.param = l.send = l.recv = count;
      l.bytes = count * elt;
      l.bus_factor = 2.0 * (dn - 1) / dn;
      break;
    case BC_BCAST:
    case BC_REDUCE:
      l.param = l.send = l.recv = count;
      l.bytes = count * elt;
      l.bus_factor = 1.0;
      break;
    case BC_ALLGATHER:
    case BC_GATHER:
      l.param = l.send = part;
      l.recv = part * un;
      l.bytes = part * un * elt;
      l.bus_factor = (dn - 1) / dn;
      break;
    case BC_REDUCE_SCATTER:
    case BC_SCATTER:
      l.param = l.recv = part;
      l.send = part * un;
      l.bytes = part * un * elt;
      l.bus_factor = (dn - 1) / dn;
      break;
    case BC_ALLTOALL:
      l.param = part;
      l.send = l.recv = part * un;
      l.bytes = part * un * elt;
      l.bus_factor = (dn - 1) / dn;
      break;
    default: /* barrier */ break;
  }
  return l;
}

/** Timed iterations of -n auto for a point of nccl-tests size `bytes`. */
static int bc_auto_iters(uint64_t bytes) {
  if (bytes <= (64u << 10)) return 1000;
  if (bytes <= (1u << 20)) return 50;
  if (bytes <= (16u << 20)) return 10;
  return 3;
}

/** Timed iterations of a point under the options. */
static int bc_iters(const struct bc_options* o, uint64_t bytes) {
  return o->iters > 0 ? o->iters : bc_auto_iters(bytes);
}

/** Warm-up iterations of a point with `iters` timed iterations. */
static int bc_warmup(const struct bc_options* o, int iters) {
  if (o->warmup >= 0) return o->warmup;
  return iters / 10 > 5 ? iters / 10 : 5;
}

/** The -c value that rank `r` holds at global index `g` (as omniccl-bench). */
static float bc_pattern(int r, uint64_t g) { return (float)((g * 7 + (uint64_t)r * 13) % 11); }

/** Fills `n` floats with rank `r`'s pattern from global index 0. */
static void bc_fill(float* p, uint64_t n, int r) {
  uint64_t i;
  for (i = 0; i < n; ++i) p[i] = bc_pattern(r, i);
}

/** The float32 SUM over `n` ranks at global index `g`. */
static float bc_sum(int n, uint64_t g) {
  float acc = 0;
  int r;
  for (r = 0; r < n; ++r) acc += bc_pattern(r, g);
  return acc;
}

/** Counts elements of rank `rank`'s output `d` (`len` floats) that differ
 *  from the reference for collective `c`. `d` NULL (no output) counts 0. */
static uint64_t bc_count_wrong(int c, int rank, int n, int root, const struct bc_layout* l, const float* d,
                               uint64_t len) {
  uint64_t i, wrong = 0, p = l->param;
  if (!d) return 0;
  for (i = 0; i < len; ++i) {
    float want = 0;
    switch (c) {
      case BC_ALLREDUCE:
      case BC_REDUCE: want = bc_sum(n, i); break;
      case BC_REDUCE_SCATTER: want = bc_sum(n, (uint64_t)rank * p + i); break;
      case BC_BCAST: want = bc_pattern(root, i); break;
      case BC_ALLGATHER:
      case BC_GATHER: want = bc_pattern((int)(i / p), i % p); break;
      case BC_SCATTER: want = bc_pattern(root, (uint64_t)rank * p + i); break;
      case BC_ALLTOALL: want = bc_pattern((int)(i / p), (uint64_t)rank * p + i % p); break;
      default: break;
    }
    if (!(d[i] == want)) ++wrong;
  }
  return wrong;
}

/** Seconds on a monotonic clock. */
static double bc_now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/** CPU seconds used by this whole process (all threads) so far. */
static double bc_process_cpu(void) {
  struct timespec ts;
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/** Sleeps about `seconds`. */
static void bc_sleep(double seconds) {
  struct timespec ts;
  ts.tv_sec = (time_t)seconds;
  ts.tv_nsec = (long)((seconds - (double)ts.tv_sec) * 1e9);
  while (nanosleep(&ts, &ts) != 0) {}
}

/** Prints the result of one point: a CSV row, or an nccl-tests style row.
 *  `sum_time`/`max_time` are over ranks in seconds; `wrong` < 0: unchecked. */
static void bc_print_point(const struct bc_options* o, int c, int n, const struct bc_layout* l, int iters,
                           double sum_time, double max_time, long long wrong) {
  double mean = sum_time / n;
  double algbw = (c == BC_BARRIER || mean <= 0) ? 0 : (double)l->bytes / 1e9 / mean;
  double busbw = algbw * l->bus_factor;
  char check[32];
  if (wrong < 0)
    snprintf(check, sizeof check, "N/A");
  else
    snprintf(check, sizeof check, "%lld", wrong);
  if (o->csv) {
    printf("%s,%s,%s,%d,%llu,%llu,%s,%d,%.3f,%.3f,%.4f,%.4f,%s\n", o->peer, o->transport, bc_coll_names[c], n,
           (unsigned long long)l->bytes, (unsigned long long)l->param, c == BC_BARRIER ? "none" : "float32", iters,
           mean * 1e6, max_time * 1e6, algbw, busbw, check);
  } else {
    printf("%-15s %12llu %12llu %6d %10.2f %10.2f %8.3f %8.3f %6s\n", bc_coll_names[c], (unsigned long long)l->bytes,
           (unsigned long long)l->param, iters, mean * 1e6, max_time * 1e6, algbw, busbw, check);
  }
  fflush(stdout);
}

/** Prints the header of the output (CSV header or table header). */
static void bc_print_header(const struct bc_options* o, int n) {
  if (o->csv) {
    printf("%s\n", BC_CSV_HEADER);
  } else {
    printf("# %s, %d ranks, transport %s, float32 sum, out of place\n", o->peer, n, o->transport);
    printf("# %-13s %12s %12s %6s %10s %10s %8s %8s %6s\n", "collective", "size(B)", "count", "iters", "time(us)",
           "max(us)", "algbw", "busbw", "#wrong");
  }
  fflush(stdout);
}

/** Prints the blocked-CPU results (per rank: wall s, CPU s, % of a core). */
static void bc_print_blocked(const struct bc_options* o, int n, const double* all) {
  int r;
  if (o->csv) printf("peer,transport,ranks,rank,wall_s,cpu_s,cpu_pct\n");
  for (r = 0; r < n; ++r) {
    if (o->csv) {
      printf("%s,%s,%d,%d,%.4f,%.4f,%.2f\n", o->peer, o->transport, n, r, all[3 * r], all[3 * r + 1], all[3 * r + 2]);
    } else {
      printf("# blocked-cpu: rank %d: %.3f s in barrier, process CPU %.4f s = %.2f%% of a core\n", r, all[3 * r],
             all[3 * r + 1], all[3 * r + 2]);
    }
  }
  fflush(stdout);
}

#endif /* OMNICCL_BENCH_PEERS_BENCH_COMMON_H_ */
