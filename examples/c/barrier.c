/*
 * barrier.c - wait until every rank has arrived.
 *
 * Rank r sleeps r * 100 ms before entering the barrier, so the ranks arrive
 * one after the other; none may leave before the last one has arrived. To
 * check that, each rank notes the time it arrived, and after the barrier the
 * ranks all_gather those times: every rank must have left after the latest
 * arrival. (The clock is CLOCK_REALTIME, which the ranks share when they run
 * on one host, as here; across hosts the check would need synced clocks.)
 *
 * Run: omniccl-run -n 4 ./barrier   (or any env:// launcher, see example.h)
 * Output with 4 ranks, in any order:
 *   rank 0: left the barrier after all 4 ranks arrived
 *   rank 1: left the barrier after all 4 ranks arrived
 *   rank 2: left the barrier after all 4 ranks arrived
 *   rank 3: left the barrier after all 4 ranks arrived
 */
#define _POSIX_C_SOURCE 200809L /* clock_gettime, nanosleep under -std=c99 */
#include <time.h>

#include "example.h"

/* Wall-clock time in nanoseconds. */
static int64_t now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

int main(void) {
  CHECK(OCCL_INIT_CHECK());
  occl_comm_t comm;
  CHECK(occl_comm_init(&comm, "env://", OCCL_FROM_ENV, OCCL_FROM_ENV, NULL));
  int rank, size;
  CHECK(occl_comm_rank(comm, &rank));
  CHECK(occl_comm_size(comm, &size));

  struct timespec delay = {rank / 10, (rank % 10) * 100000000L}; /* r * 100 ms */
  nanosleep(&delay, NULL);

  int64_t arrived = now_ns();
  CHECK(occl_barrier(comm, NULL));
  int64_t left = now_ns();

  /* Share the arrival times to check the barrier held everyone back. */
  int64_t one = 1, total = size;
  int64_t* arrivals = alloc_i64(size);
  DLTensor send = tensor_i64(&arrived, &one);
  DLTensor recv = tensor_i64(arrivals, &total);
  CHECK(occl_all_gather(&send, &recv, comm, NULL));
  CHECK(occl_comm_destroy(comm));

  int failed = 0;
  for (int r = 0; r < size; ++r) {
    if (arrivals[r] > left) {
      fprintf(stderr, "rank %d: WRONG, left the barrier %.3f ms before rank %d arrived\n", rank,
              (arrivals[r] - left) / 1e6, r);
      failed = 1;
    }
  }
  free(arrivals);
  if (!failed) printf("rank %d: left the barrier after all %d ranks arrived\n", rank, size);
  return failed;
}
