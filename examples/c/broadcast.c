/*
 * broadcast.c - copy one rank's tensor to every rank.
 *
 * Rank r starts with [2r+1, 2r+2]: rank 0 holds [1, 2], rank 1 [3, 4],
 * rank 2 [5, 6], rank 3 [7, 8]. occl_broadcast works in place: afterwards
 * every rank holds the root's (rank 0's) [1, 2].
 *
 * Run: omniccl-run -n 4 ./broadcast   (or any env:// launcher, see example.h)
 * Output with 4 ranks, in any order:
 *   rank 0: [1, 2]
 *   rank 1: [1, 2]
 *   rank 2: [1, 2]
 *   rank 3: [1, 2]
 */
#include "example.h"

int main(void) {
  /* Fail clearly if the library is older than the header we compiled with. */
  CHECK(OCCL_INIT_CHECK());

  /* env://: rank, size and rendezvous come from the launcher's environment. */
  occl_comm_t comm;
  CHECK(occl_comm_init(&comm, "env://", OCCL_FROM_ENV, OCCL_FROM_ENV, NULL));
  int rank;
  CHECK(occl_comm_rank(comm, &rank));

  int64_t count = 2;
  int64_t data[2] = {2 * rank + 1, 2 * rank + 2};
  DLTensor tensor = tensor_i64(data, &count);

  /* The last argument is the work handle: NULL means "block until done". */
  const int root = 0;
  CHECK(occl_broadcast(&tensor, root, comm, NULL));

  CHECK(occl_comm_destroy(comm));
  const int64_t want[2] = {2 * root + 1, 2 * root + 2};
  return report_i64(rank, data, want, count);
}
