/*
 * rendezvous_probe: the smallest env:// rank, for the rendezvous tests.
 * Creates a communicator from env:// (any launcher), all_reduces rank+1,
 * checks the sum, prints "probe rank R of N ok", stays PROBE_HOLD_MS
 * milliseconds (default 0) with the communicator alive, then destroys it.
 * On any failure it prints the status and occl_last_error() to stderr and
 * exits 1.
 * PROBE_SPLIT=1: then splits the communicator (one color, same order) and
 * all_reduces on the child too. PROBE_REPEAT=N: does all of it N times in a
 * row (create, all_reduce, destroy), on the same rendezvous address.
 * PROBE_LOOP_OPS=M: after the first all_reduce, M more (each sum checked),
 * then prints "probe rank R of N loop ok".
 * PROBE_ABORT_AFTER_MS=M: only a non-blocking init, aborted after M ms while
 * still in progress; prints "probe abort took T ms".
 * PROBE_INIT_METHOD: the init method (default env://), e.g. file:///dir.
 * PROBE_SPLIT_DELAY_MS=M: waits M ms (busy in "user code", outside OmniCCL)
 * before the split.
 * PROBE_SPLITS=K: after the first all_reduce, K splits in a row (one color,
 * same order), each followed by an all_reduce on the child and on the
 * parent before the child is destroyed; then prints "probe rank R of N
 * splits ok (K)". PROBE_KEEP_SPLITS=1: the children stay alive until all K
 * are made (at most 256; torch.distributed.new_group keeps its groups).
 * PROBE_OWN_SIGTERM=1: installs its own SIGTERM handler before anything
 * else, which prints "probe: own SIGTERM handler" and exits 3 (an
 * application's handler, which OmniCCL must keep).
 */
#define _POSIX_C_SOURCE 200809L /* nanosleep */

#include <omniccl/omniccl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

static int fail(const char* what, occl_status_t st) {
  fprintf(stderr, "probe: %s failed: %s: %s\n", what, occl_status_string(st), occl_last_error());
  return 1;
}

/* The init method: PROBE_INIT_METHOD, else env://. */
static const char* init_method(void) {
  const char* m = getenv("PROBE_INIT_METHOD");
  return m != NULL && m[0] != '\0' ? m : "env://";
}

/* Sleeps for the number of milliseconds in environment variable `name` (unset: none). */
static void sleep_ms_from(const char* name) {
  const char* text = getenv(name);
  if (text == NULL) return;
  long ms = strtol(text, NULL, 10);
  struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
  nanosleep(&ts, NULL);
}

/* all_reduces rank+1 on comm and checks the sum; 0 on success. */
static int check_all_reduce(occl_comm_t comm) {
  int rank = 0, size = 0;
  occl_comm_rank(comm, &rank);
  occl_comm_size(comm, &size);
  int64_t value = rank + 1, count = 1;
  DLTensor t = {0};
  t.data = &value;
  t.device.device_type = kDLCPU;
  t.ndim = 1;
  t.dtype.code = kDLInt;
  t.dtype.bits = 64;
  t.dtype.lanes = 1;
  t.shape = &count;
  occl_status_t st = occl_all_reduce(&t, &t, OCCL_SUM, comm, NULL);
  if (st != OCCL_SUCCESS) return fail("occl_all_reduce", st);
  if (value != (int64_t)size * (size + 1) / 2) {
    fprintf(stderr, "probe: rank %d: sum %lld, expected %lld\n", rank, (long long)value,
            (long long)size * (size + 1) / 2);
    return 1;
  }
  return 0;
}

/* PROBE_SPLITS: k splits of comm, each checked with an all_reduce on the
 * child and on the parent; 0 on success. */
static int run_splits(occl_comm_t comm, long k) {
  int rank = 0, size = 0;
  occl_comm_rank(comm, &rank);
  occl_comm_size(comm, &size);
  const char* keep_text = getenv("PROBE_KEEP_SPLITS");
  const int keep = keep_text != NULL && keep_text[0] == '1';
  occl_comm_t kept[256];
  long n_kept = 0, bad = 0;
  for (long i = 0; i < k && !bad; ++i) {
    occl_comm_t child = NULL;
    occl_status_t st = occl_comm_split(comm, 0, rank, NULL, &child);
    if (st != OCCL_SUCCESS) {
      fprintf(stderr, "probe: split %ld of %ld\n", i + 1, k);
      bad = fail("occl_comm_split", st);
      break;
    }
    bad = check_all_reduce(child) != 0 || check_all_reduce(comm) != 0;
    if (keep && n_kept < 256) {
      kept[n_kept++] = child;
    } else {
      occl_comm_destroy(child);
    }
  }
  for (long i = 0; i < n_kept; ++i) occl_comm_destroy(kept[i]);
  if (bad) return 1;
  printf("probe rank %d of %d splits ok (%ld)\n", rank, size, k);
  fflush(stdout);
  return 0;
}

/* One round: create, all_reduce (and split), hold, destroy. */
static int one_round(void) {
  occl_comm_t comm = NULL;
  occl_status_t st = occl_comm_init(&comm, init_method(), OCCL_FROM_ENV, OCCL_FROM_ENV, NULL);
  if (st != OCCL_SUCCESS) return fail("occl_comm_init", st);
  if (check_all_reduce(comm) != 0) return 1;
  int rank = 0, size = 0;
  occl_comm_rank(comm, &rank);
  occl_comm_size(comm, &size);
  const char* split = getenv("PROBE_SPLIT");
  if (split != NULL && split[0] == '1') {
    occl_comm_t child = NULL;
    if (getenv("PROBE_SPLIT_DELAY_MS") != NULL) {
      printf("probe rank %d of %d: created, the split comes later\n", rank, size);
      fflush(stdout);
    }
    sleep_ms_from("PROBE_SPLIT_DELAY_MS");
    st = occl_comm_split(comm, 0, rank, NULL, &child);
    if (st != OCCL_SUCCESS) return fail("occl_comm_split", st);
    if (check_all_reduce(child) != 0) return 1;
    printf("probe rank %d of %d split ok\n", rank, size);
    occl_comm_destroy(child);
  }
  printf("probe rank %d of %d ok\n", rank, size);
  fflush(stdout);
  const char* loop = getenv("PROBE_LOOP_OPS");
  if (loop != NULL) {
    /* A job in progress: that many more all_reduces, each sum checked. */
    long ops = strtol(loop, NULL, 10);
    for (long i = 0; i < ops; ++i) {
      if (check_all_reduce(comm) != 0) return 1;
    }
    printf("probe rank %d of %d loop ok (%ld all_reduces)\n", rank, size, ops);
    fflush(stdout);
  }
  const char* splits = getenv("PROBE_SPLITS");
  if (splits != NULL && run_splits(comm, strtol(splits, NULL, 10)) != 0) return 1;
  sleep_ms_from("PROBE_HOLD_MS");
  occl_comm_destroy(comm);
  return 0;
}

/* PROBE_ABORT_AFTER_MS: a non-blocking init, aborted after that long while
 * still in progress; prints how long occl_comm_abort took. */
static int init_then_abort(long after_ms) {
  occl_config_t cfg = OCCL_CONFIG_INIT;
  cfg.blocking = 0;
  occl_comm_t comm = NULL;
  occl_status_t st = occl_comm_init(&comm, init_method(), OCCL_FROM_ENV, OCCL_FROM_ENV, &cfg);
  if (st != OCCL_ERR_IN_PROGRESS) return fail("non-blocking occl_comm_init", st);
  struct timespec ts = {after_ms / 1000, (after_ms % 1000) * 1000000L}, t0, t1;
  nanosleep(&ts, NULL);
  occl_status_t state = OCCL_SUCCESS;
  occl_comm_get_async_error(comm, &state);
  if (state != OCCL_ERR_IN_PROGRESS) return fail("the init (expected still in progress)", state);
  clock_gettime(CLOCK_MONOTONIC, &t0);
  st = occl_comm_abort(comm);
  clock_gettime(CLOCK_MONOTONIC, &t1);
  if (st != OCCL_SUCCESS) return fail("occl_comm_abort", st);
  printf("probe abort took %ld ms\n", (long)((t1.tv_sec - t0.tv_sec) * 1000 + (t1.tv_nsec - t0.tv_nsec) / 1000000));
  fflush(stdout);
  return 0;
}

/* PROBE_OWN_SIGTERM: the application's handler (async-signal-safe calls only). */
static void own_sigterm(int sig) {
  (void)sig;
  static const char text[] = "probe: own SIGTERM handler\n";
  ssize_t n = write(2, text, sizeof text - 1);
  (void)n;
  _exit(3);
}

int main(void) {
  const char* own = getenv("PROBE_OWN_SIGTERM");
  if (own != NULL && own[0] == '1') {
    struct sigaction sa;
    sigemptyset(&sa.sa_mask);
    sa.sa_flags = 0;
    sa.sa_handler = own_sigterm;
    sigaction(SIGTERM, &sa, NULL);
  }
  const char* abort_after = getenv("PROBE_ABORT_AFTER_MS");
  if (abort_after != NULL) return init_then_abort(strtol(abort_after, NULL, 10));
  const char* repeat = getenv("PROBE_REPEAT");
  long rounds = repeat != NULL ? strtol(repeat, NULL, 10) : 1;
  for (long i = 0; i < rounds; ++i) {
    if (one_round() != 0) {
      fprintf(stderr, "probe: round %ld of %ld failed\n", i + 1, rounds);
      return 1;
    }
  }
  return 0;
}
