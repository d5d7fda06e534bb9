/*
 * reduce_scatter.c - sum every rank's tensor and hand each rank one part of
 * the sum.
 *
 * Each rank holds 2 * size elements, size parts of 2; with 4 ranks rank r
 * holds r*8+1 .. r*8+8:
 *   rank 0: [ 1,  2 |  3,  4 |  5,  6 |  7,  8]
 *   rank 1: [ 9, 10 | 11, 12 | 13, 14 | 15, 16]
 *   rank 2: [17, 18 | 19, 20 | 21, 22 | 23, 24]
 *   rank 3: [25, 26 | 27, 28 | 29, 30 | 31, 32]
 * Rank i receives the SUM of every rank's part i, e.g. rank 0 gets
 * [1+9+17+25, 2+10+18+26] = [52, 56].
 *
 * Run: omniccl-run -n 4 ./reduce_scatter   (or any env:// launcher, see
 * example.h)
 * Output with 4 ranks, in any order:
 *   rank 0: [52, 56]
 *   rank 1: [60, 64]
 *   rank 2: [68, 72]
 *   rank 3: [76, 80]
 */
#include "example.h"

int main(void) {
  CHECK(OCCL_INIT_CHECK());
  occl_comm_t comm;
  CHECK(occl_comm_init(&comm, "env://", OCCL_FROM_ENV, OCCL_FROM_ENV, NULL));
  int rank, size;
  CHECK(occl_comm_rank(comm, &rank));
  CHECK(occl_comm_size(comm, &size));

  int64_t part = 2;
  int64_t total = part * size;
  int64_t* input = alloc_i64(total);
  for (int64_t k = 0; k < total; ++k) input[k] = rank * total + k + 1;
  DLTensor send = tensor_i64(input, &total);

  int64_t result[2];
  DLTensor recv = tensor_i64(result, &part);

  CHECK(occl_reduce_scatter(&send, &recv, OCCL_SUM, comm, NULL));
  CHECK(occl_comm_destroy(comm));

  /* Element k of part `rank` is input element rank*part + k on every rank r. */
  int64_t want[2] = {0, 0};
  for (int r = 0; r < size; ++r) {
    for (int64_t k = 0; k < part; ++k) want[k] += r * total + rank * part + k + 1;
  }
  free(input);
  return report_i64(rank, result, want, part);
}
