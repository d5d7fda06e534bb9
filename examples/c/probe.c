/*
 * probe.c - receiving messages of unknown size: occl_probe, then a receive of
 * exactly the probed message.
 *
 * Every rank r > 0 sends rank 0 one message of r + 1 values, all r, with tag
 * r. Rank 0 does not know the sizes: for each message it calls occl_probe
 * with OCCL_ANY_SOURCE and OCCL_ANY_TAG, which waits until one can be
 * received and says who sent it, its tag and its element count without
 * receiving it; then it allocates exactly that much and receives the message
 * by its source and tag. Before that, occl_iprobe for a tag nobody sends
 * finds nothing (flag 0) without waiting. Rank 0 prints the sum of all
 * values received, then each rank's count in rank order; the others print
 * their rank. Needs at least 2 ranks.
 *
 * Run: omniccl-run -n 4 ./probe   (or any env:// launcher, see example.h)
 * Output with 4 ranks, in any order:
 *   rank 0: [20, 2, 3, 4]
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
    fprintf(stderr, "probe needs at least 2 ranks, got %d\n", size);
    CHECK(occl_comm_destroy(comm));
    return 1;
  }

  if (rank > 0) {
    int64_t n = rank + 1, me = rank;
    int64_t* values = alloc_i64(n);
    int64_t i;
    for (i = 0; i < n; ++i) values[i] = rank;
    DLTensor t = tensor_i64(values, &n);
    CHECK(occl_send_tagged(&t, 0, rank, comm, NULL, NULL));
    free(values);
    CHECK(occl_comm_destroy(comm));
    return report_i64(rank, &me, &me, 1);
  }

  int64_t n = size; /* the sum, then each other rank's count */
  int64_t* got = alloc_i64(n);
  int64_t* want = alloc_i64(n);
  int flag = -1;
  CHECK(occl_iprobe(OCCL_ANY_SOURCE, 999, comm, NULL, &flag, NULL));
  if (flag != 0) {
    fprintf(stderr, "rank 0: occl_iprobe found a tag-999 message that nobody sent\n");
    return 1;
  }
  int p;
  for (p = 1; p < size; ++p) {
    occl_recv_status_t st;
    CHECK(occl_probe(OCCL_ANY_SOURCE, OCCL_ANY_TAG, comm, NULL, &st));
    int64_t count = st.count, i;
    int64_t* buf = alloc_i64(count);
    DLTensor t = tensor_i64(buf, &count);
    CHECK(occl_recv_tagged(&t, st.source, st.tag, comm, NULL, NULL, NULL));
    for (i = 0; i < count; ++i) got[0] += buf[i];
    got[st.source] = count;
    free(buf);
    want[0] += (int64_t)p * (p + 1);
    want[p] = p + 1;
  }
  CHECK(occl_comm_destroy(comm));
  {
    int rc = report_i64(rank, got, want, n);
    free(got);
    free(want);
    return rc;
  }
}
