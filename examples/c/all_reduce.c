/*
 * all_reduce.c - sum every rank's tensor and give the result to every rank.
 *
 * Rank r holds [2r+1, 2r+2]; every rank receives the element-wise SUM
 * [1+3+5+7, 2+4+6+8] = [16, 20]. This example uses separate send and receive
 * buffers; passing the same tensor twice reduces in place.
 *
 * Rank 0 also prints the transport the communicator chose: "shm" for ranks
 * on one host, "tcp" across hosts or with OMNICCL_TRANSPORT=tcp.
 *
 * Run: omniccl-run -n 4 ./all_reduce   (or any env:// launcher, see example.h)
 * Output with 4 ranks, in any order:
 *   rank 0: [16, 20]
 *   rank 1: [16, 20]
 *   rank 2: [16, 20]
 *   rank 3: [16, 20]
 * and "transport: shm" (or tcp) from rank 0.
 */
#include "example.h"

int main(void) {
  CHECK(OCCL_INIT_CHECK());
  occl_comm_t comm;
  CHECK(occl_comm_init(&comm, "env://", OCCL_FROM_ENV, OCCL_FROM_ENV, NULL));
  int rank, size;
  CHECK(occl_comm_rank(comm, &rank));
  CHECK(occl_comm_size(comm, &size));
  if (rank == 0) {
    const char* transport;
    CHECK(occl_comm_transport(comm, &transport));
    printf("transport: %s\n", transport);
  }

  int64_t count = 2;
  int64_t input[2] = {2 * rank + 1, 2 * rank + 2};
  int64_t result[2];
  DLTensor send = tensor_i64(input, &count);
  DLTensor recv = tensor_i64(result, &count);

  CHECK(occl_all_reduce(&send, &recv, OCCL_SUM, comm, NULL));
  CHECK(occl_comm_destroy(comm));

  int64_t want[2] = {0, 0};
  for (int r = 0; r < size; ++r) {
    want[0] += 2 * r + 1;
    want[1] += 2 * r + 2;
  }
  return report_i64(rank, result, want, count);
}
