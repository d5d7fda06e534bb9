/*
 * all_to_all.c - every rank sends a different part to every rank.
 *
 * Part j of rank i's send buffer becomes part i of rank j's receive buffer:
 * a transpose. Here each part is one element and rank i sends
 * [i*size+0, i*size+1, ...]; with 4 ranks:
 *   rank 0 sends [0, 1, 2, 3]      rank 2 sends [ 8,  9, 10, 11]
 *   rank 1 sends [4, 5, 6, 7]      rank 3 sends [12, 13, 14, 15]
 * and rank j receives element j of everyone's: [j, 4+j, 8+j, 12+j].
 *
 * Run: omniccl-run -n 4 ./all_to_all   (or any env:// launcher, see example.h)
 * Output with 4 ranks, in any order:
 *   rank 0: [0, 4, 8, 12]
 *   rank 1: [1, 5, 9, 13]
 *   rank 2: [2, 6, 10, 14]
 *   rank 3: [3, 7, 11, 15]
 */
#include "example.h"

int main(void) {
  CHECK(OCCL_INIT_CHECK());
  occl_comm_t comm;
  CHECK(occl_comm_init(&comm, "env://", OCCL_FROM_ENV, OCCL_FROM_ENV, NULL));
  int rank, size;
  CHECK(occl_comm_rank(comm, &rank));
  CHECK(occl_comm_size(comm, &size));

  int64_t count = size; /* one element per peer */
  int64_t* input = alloc_i64(count);
  int64_t* result = alloc_i64(count);
  for (int j = 0; j < size; ++j) input[j] = (int64_t)rank * size + j;
  DLTensor send = tensor_i64(input, &count);
  DLTensor recv = tensor_i64(result, &count);

  CHECK(occl_all_to_all(&send, &recv, comm, NULL));
  CHECK(occl_comm_destroy(comm));

  int64_t* want = alloc_i64(count);
  for (int i = 0; i < size; ++i) want[i] = (int64_t)i * size + rank;
  int failed = report_i64(rank, result, want, count);
  free(want);
  free(result);
  free(input);
  return failed;
}
