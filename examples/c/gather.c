/*
 * gather.c - collect every rank's tensor, in rank order, on one rank.
 *
 * Rank r sends [2r+1, 2r+2]; the root (rank 0) receives them all one after
 * the other. Only the root passes a receive buffer; the others pass NULL and
 * print their own input, which the gather leaves unchanged.
 *
 * Run: omniccl-run -n 4 ./gather   (or any env:// launcher, see example.h)
 * Output with 4 ranks, in any order:
 *   rank 0: [1, 2, 3, 4, 5, 6, 7, 8]
 *   rank 1: [3, 4]
 *   rank 2: [5, 6]
 *   rank 3: [7, 8]
 */
#include "example.h"

int main(void) {
  CHECK(OCCL_INIT_CHECK());
  occl_comm_t comm;
  CHECK(occl_comm_init(&comm, "env://", OCCL_FROM_ENV, OCCL_FROM_ENV, NULL));
  int rank, size;
  CHECK(occl_comm_rank(comm, &rank));
  CHECK(occl_comm_size(comm, &size));

  const int root = 0;
  int64_t count = 2;
  int64_t data[2] = {2 * rank + 1, 2 * rank + 2};
  DLTensor send = tensor_i64(data, &count);

  int64_t total = count * size;
  int64_t* all = NULL;
  DLTensor recv;
  const DLTensor* recvbuf = NULL; /* ignored on non-roots */
  if (rank == root) {
    all = alloc_i64(total);
    recv = tensor_i64(all, &total);
    recvbuf = &recv;
  }

  CHECK(occl_gather(&send, recvbuf, root, comm, NULL));
  CHECK(occl_comm_destroy(comm));

  int failed;
  if (rank == root) {
    /* Rank r's two values land at [2r, 2r+1]: 1, 2, ..., 2*size. */
    int64_t* want = alloc_i64(total);
    for (int64_t i = 0; i < total; ++i) want[i] = i + 1;
    failed = report_i64(rank, all, want, total);
    free(want);
  } else {
    const int64_t want[2] = {2 * rank + 1, 2 * rank + 2};
    failed = report_i64(rank, data, want, count);
  }
  free(all);
  return failed;
}
