/*
 * scatter.c - hand each rank its own part of the root's tensor.
 *
 * The root (rank 0) holds size parts of 2 elements, [0, 0, 1, 1, 2, 2, 3, 3]
 * with 4 ranks; rank i receives part i, [i, i]. Only the root passes a send
 * buffer; the others pass NULL.
 *
 * Run: omniccl-run -n 4 ./scatter   (or any env:// launcher, see example.h)
 * Output with 4 ranks, in any order:
 *   rank 0: [0, 0]
 *   rank 1: [1, 1]
 *   rank 2: [2, 2]
 *   rank 3: [3, 3]
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
  int64_t part = 2;            /* elements each rank receives */
  int64_t total = part * size; /* elements the root sends */
  int64_t* all = NULL;
  DLTensor send;
  const DLTensor* sendbuf = NULL; /* ignored on non-roots */
  if (rank == root) {
    all = alloc_i64(total);
    for (int64_t i = 0; i < total; ++i) all[i] = i / part; /* 0,0,1,1,... */
    send = tensor_i64(all, &total);
    sendbuf = &send;
  }
  int64_t mine[2];
  DLTensor recv = tensor_i64(mine, &part);

  CHECK(occl_scatter(sendbuf, &recv, root, comm, NULL));

  CHECK(occl_comm_destroy(comm));
  free(all);
  const int64_t want[2] = {rank, rank};
  return report_i64(rank, mine, want, part);
}
