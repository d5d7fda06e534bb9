/*
 * send_recv.c - point-to-point messages around a ring.
 *
 * Rank r sends its [2r+1, 2r+2] to its right neighbour (r+1) % size and
 * receives from its left neighbour (r-1+size) % size, so rank 0 gets the last
 * rank's data. Needs at least 2 ranks.
 *
 * occl_send and occl_recv block until their message is through. So that no
 * two neighbours wait in a send at once, even ranks send first and odd ranks
 * receive first; this is safe whatever the transport buffers. (Alternatively
 * start the recv with a work handle, see occl_work_wait.)
 *
 * Run: omniccl-run -n 4 ./send_recv   (or any env:// launcher, see example.h)
 * Output with 4 ranks, in any order:
 *   rank 0: [7, 8]
 *   rank 1: [1, 2]
 *   rank 2: [3, 4]
 *   rank 3: [5, 6]
 */
#include "example.h"

int main(void) {
  CHECK(OCCL_INIT_CHECK());
  occl_comm_t comm;
  CHECK(occl_comm_init(&comm, "env://", OCCL_FROM_ENV, OCCL_FROM_ENV, NULL));
  int rank, size;
  CHECK(occl_comm_rank(comm, &rank));
  CHECK(occl_comm_size(comm, &size));
  if (size < 2) {
    fprintf(stderr, "send_recv needs at least 2 ranks, got %d\n", size);
    CHECK(occl_comm_destroy(comm));
    return 1;
  }

  const int right = (rank + 1) % size;
  const int left = (rank - 1 + size) % size;
  int64_t count = 2;
  int64_t mine[2] = {2 * rank + 1, 2 * rank + 2};
  int64_t theirs[2];
  DLTensor send = tensor_i64(mine, &count);
  DLTensor recv = tensor_i64(theirs, &count);

  if (rank % 2 == 0) {
    CHECK(occl_send(&send, right, comm, NULL));
    CHECK(occl_recv(&recv, left, comm, NULL));
  } else {
    CHECK(occl_recv(&recv, left, comm, NULL));
    CHECK(occl_send(&send, right, comm, NULL));
  }
  CHECK(occl_comm_destroy(comm));

  const int64_t want[2] = {2 * left + 1, 2 * left + 2};
  return report_i64(rank, theirs, want, count);
}
