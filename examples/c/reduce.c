/*
 * reduce.c - sum every rank's tensor into one rank.
 *
 * Rank r holds [2r+1, 2r+2]. The root, here the last rank (rank 3 of 4),
 * receives the element-wise SUM [1+3+5+7, 2+4+6+8] = [16, 20]. The reduction
 * is in place (send and receive buffer are the same memory); the other ranks'
 * data is left unchanged.
 *
 * Run: omniccl-run -n 4 ./reduce   (or any env:// launcher, see example.h)
 * Output with 4 ranks, in any order:
 *   rank 0: [1, 2]
 *   rank 1: [3, 4]
 *   rank 2: [5, 6]
 *   rank 3: [16, 20]
 */
#include "example.h"

int main(void) {
  CHECK(OCCL_INIT_CHECK());
  occl_comm_t comm;
  CHECK(occl_comm_init(&comm, "env://", OCCL_FROM_ENV, OCCL_FROM_ENV, NULL));
  int rank, size;
  CHECK(occl_comm_rank(comm, &rank));
  CHECK(occl_comm_size(comm, &size));

  const int root = size - 1;
  int64_t count = 2;
  int64_t data[2] = {2 * rank + 1, 2 * rank + 2};
  DLTensor tensor = tensor_i64(data, &count);

  /* The same tensor as input and output: in place on the root. */
  CHECK(occl_reduce(&tensor, &tensor, OCCL_SUM, root, comm, NULL));
  CHECK(occl_comm_destroy(comm));

  int64_t want[2] = {2 * rank + 1, 2 * rank + 2}; /* non-roots: unchanged */
  if (rank == root) {
    want[0] = want[1] = 0;
    for (int r = 0; r < size; ++r) {
      want[0] += 2 * r + 1;
      want[1] += 2 * r + 2;
    }
  }
  return report_i64(rank, data, want, count);
}
