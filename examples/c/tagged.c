/*
 * tagged.c - point-to-point matching: tags, OCCL_ANY_SOURCE, a status, and a
 * receive buffer larger than the message.
 *
 * Every rank r > 0 sends rank 0 two messages: [r] with tag 1, then [10 r, 10 r + 1]
 * with tag 2. Rank 0 first receives every tag-2 message from OCCL_ANY_SOURCE
 * into a 4-element buffer (the tag-1 messages that came first are kept until
 * asked for; the status says who sent each one and how many elements came),
 * then the tag-1 messages by rank. Rank 0 prints the sum over the tag-2
 * messages' elements and the tag-1 values in rank order; the others print
 * what they sent with tag 1. Needs at least 2 ranks.
 *
 * Run: omniccl-run -n 4 ./tagged   (or any env:// launcher, see example.h)
 * Output with 4 ranks, in any order:
 *   rank 0: [123, 1, 2, 3]
 *   rank 1: [1]
 *   rank 2: [2]
 *   rank 3: [3]
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
    fprintf(stderr, "tagged needs at least 2 ranks, got %d\n", size);
    CHECK(occl_comm_destroy(comm));
    return 1;
  }

  if (rank > 0) {
    int64_t one = 1, two = 2;
    int64_t first[1] = {rank};
    int64_t second[2] = {10 * rank, 10 * rank + 1};
    DLTensor a = tensor_i64(first, &one);
    DLTensor b = tensor_i64(second, &two);
    CHECK(occl_send_tagged(&a, 0, 1, comm, NULL, NULL));
    CHECK(occl_send_tagged(&b, 0, 2, comm, NULL, NULL));
    CHECK(occl_comm_destroy(comm));
    return report_i64(rank, first, first, 1);
  }

  int64_t n = size; /* the sum, then one value per other rank */
  int64_t* got = alloc_i64(n);
  int64_t* want = alloc_i64(n);
  int64_t four = 4, one = 1, buf[4];
  DLTensor big = tensor_i64(buf, &four);
  int p, i;
  for (p = 1; p < size; ++p) {
    occl_recv_status_t st;
    CHECK(occl_recv_tagged(&big, OCCL_ANY_SOURCE, 2, comm, NULL, &st, NULL));
    if (st.tag != 2 || st.count != 2 || buf[0] != 10 * st.source) {
      fprintf(stderr, "rank 0: tag-2 message with status source %d tag %d count %lld\n", st.source, st.tag,
              (long long)st.count);
      return 1;
    }
    for (i = 0; i < st.count; ++i) got[0] += buf[i];
  }
  for (p = 1; p < size; ++p) {
    DLTensor t = tensor_i64(&got[p], &one);
    CHECK(occl_recv_tagged(&t, p, 1, comm, NULL, NULL, NULL));
    want[0] += 20 * p + 1;
    want[p] = p;
  }
  CHECK(occl_comm_destroy(comm));
  {
    int rc = report_i64(rank, got, want, n);
    free(got);
    free(want);
    return rc;
  }
}
