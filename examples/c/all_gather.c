/*
 * all_gather.c - concatenate every rank's tensor, in rank order, everywhere.
 *
 * Rank r contributes [2r+1, 2r+2]; every rank receives all of them.
 *
 * Run: omniccl-run -n 4 ./all_gather   (or any env:// launcher, see example.h)
 * Output with 4 ranks, in any order:
 *   rank 0: [1, 2, 3, 4, 5, 6, 7, 8]
 *   rank 1: [1, 2, 3, 4, 5, 6, 7, 8]
 *   rank 2: [1, 2, 3, 4, 5, 6, 7, 8]
 *   rank 3: [1, 2, 3, 4, 5, 6, 7, 8]
 */
#include "example.h"

int main(void) {
  CHECK(OCCL_INIT_CHECK());
  occl_comm_t comm;
  CHECK(occl_comm_init(&comm, "env://", OCCL_FROM_ENV, OCCL_FROM_ENV, NULL));
  int rank, size;
  CHECK(occl_comm_rank(comm, &rank));
  CHECK(occl_comm_size(comm, &size));

  int64_t count = 2;
  int64_t data[2] = {2 * rank + 1, 2 * rank + 2};
  DLTensor send = tensor_i64(data, &count);

  int64_t total = count * size; /* the receive buffer holds them all */
  int64_t* all = alloc_i64(total);
  DLTensor recv = tensor_i64(all, &total);

  CHECK(occl_all_gather(&send, &recv, comm, NULL));
  CHECK(occl_comm_destroy(comm));

  int64_t* want = alloc_i64(total);
  for (int64_t i = 0; i < total; ++i) want[i] = i + 1;
  int failed = report_i64(rank, all, want, total);
  free(want);
  free(all);
  return failed;
}
