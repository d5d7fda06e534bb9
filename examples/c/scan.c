/*
 * scan.c - prefix sums over the ranks (MPI_Scan), and the exclusive form.
 *
 * Rank r holds [2r+1, 2r+2] and gets the element-wise SUM over ranks 0..r:
 * rank 3 of 4 gets [1+3+5+7, 2+4+6+8] = [16, 20]. The scan is in place (send
 * and receive buffer are the same memory). Before it, occl_exscan sums ranks
 * 0..r-1 into another buffer and leaves rank 0's as it was; the program
 * checks that result too, without printing it.
 *
 * Run: omniccl-run -n 4 ./scan   (or any env:// launcher, see example.h)
 * Output with 4 ranks, in any order:
 *   rank 0: [1, 2]
 *   rank 1: [4, 6]
 *   rank 2: [9, 12]
 *   rank 3: [16, 20]
 */
#include "example.h"

int main(void) {
  CHECK(OCCL_INIT_CHECK());
  occl_comm_t comm;
  CHECK(occl_comm_init(&comm, "env://", OCCL_FROM_ENV, OCCL_FROM_ENV, NULL));
  int rank;
  CHECK(occl_comm_rank(comm, &rank));

  int64_t count = 2;
  int64_t input[2] = {2 * rank + 1, 2 * rank + 2};
  int64_t before[2] = {-1, -1}; /* rank 0 keeps these */
  DLTensor in = tensor_i64(input, &count);
  DLTensor out = tensor_i64(before, &count);
  CHECK(occl_exscan(&in, &out, OCCL_SUM, comm, NULL));
  /* The same tensor as input and output: in place. */
  CHECK(occl_scan(&in, &in, OCCL_SUM, comm, NULL));
  CHECK(occl_comm_destroy(comm));

  /* Sum of 2r+1 over r = 0..rank is (rank+1)^2; of 2r+2, (rank+1)(rank+2). */
  const int64_t n = rank + 1;
  const int64_t want[2] = {n * n, n * (n + 1)};
  /* exscan: the scan of the rank before, or rank 0's untouched -1s. */
  const int ok =
      rank == 0 ? before[0] == -1 && before[1] == -1 : before[0] == (n - 1) * (n - 1) && before[1] == (n - 1) * n;
  if (!ok) fprintf(stderr, "rank %d: exscan gave [%lld, %lld]\n", rank, (long long)before[0], (long long)before[1]);
  return report_i64(rank, input, want, count) | !ok;
}
