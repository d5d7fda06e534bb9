/*
 * example.h - the few helpers every C example uses. Copy it along with an
 * example; nothing in it is specific to one collective.
 *
 *   CHECK(call)             run an occl_* call; on failure print the status
 *                           and occl_last_error() and exit(1)
 *   tensor_i64(data, &n)    a DLTensor describing n int64 values on the CPU
 *   alloc_i64(n)            calloc n int64 values or exit(1)
 *   report_i64(rank, got, want, n)
 *                           print "rank R: [a, b, ...]"; if got != want also
 *                           print what was expected and return 1, else 0:
 *                           the example's exit status, so CI sees regressions
 *
 * Launching. Every example creates its communicator with "env://", so it runs
 * under any torchrun/mpirun-style launcher, e.g. with 4 ranks:
 *   omniccl-run -n 4 ./all_reduce
 *   torchrun --nproc-per-node 4 --no-python ./all_reduce
 *   export MASTER_ADDR=127.0.0.1 MASTER_PORT=29500
 *   mpirun -n 4 --oversubscribe -x MASTER_ADDR -x MASTER_PORT ./all_reduce
 * (mpirun and srun provide the rank and size; MASTER_ADDR/MASTER_PORT must
 * name a free port on the host of rank 0; --oversubscribe lets mpirun start
 * more ranks than cores. Plain torchrun's own store listens on MASTER_PORT,
 * so OmniCCL's rendezvous then uses MASTER_PORT+1.) The examples work with any number
 * of ranks; the outputs documented in each file are for 4. Lines from
 * different ranks come out in any order.
 *
 * C99 (the examples build with -std=c99 -pedantic). The functions are static
 * inline so that a program that does not use one gets no warning.
 */
#ifndef OMNICCL_EXAMPLE_H_
#define OMNICCL_EXAMPLE_H_

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include <omniccl/omniccl.h>

/*
 * Every occl_* function returns an occl_status_t. On failure the thread's
 * occl_last_error() says what was wrong (argument, rank, peer, hint); print it
 * before anything else calls into the library.
 */
#define CHECK(call)                                                                                                 \
  do {                                                                                                              \
    occl_status_t check_status_ = (call);                                                                           \
    if (check_status_ != OCCL_SUCCESS) {                                                                            \
      fprintf(stderr, "%s:%d: %s failed: %s\n  %s\n", __FILE__, __LINE__, #call, occl_status_string(check_status_), \
              occl_last_error());                                                                                   \
      exit(EXIT_FAILURE);                                                                                           \
    }                                                                                                               \
  } while (0)

/*
 * A one-dimensional int64 DLTensor over data[0 .. *count). The tensor keeps
 * the pointer `count` as its shape, so *count must outlive the tensor.
 * NULL strides mean "contiguous"; the CPU is device (kDLCPU, 0).
 */
static inline DLTensor tensor_i64(int64_t* data, int64_t* count) {
  DLTensor t;
  t.data = data;
  t.device.device_type = kDLCPU;
  t.device.device_id = 0;
  t.ndim = 1;
  t.dtype.code = kDLInt;
  t.dtype.bits = 64;
  t.dtype.lanes = 1;
  t.shape = count;
  t.strides = NULL;
  t.byte_offset = 0;
  return t;
}

/* n zeroed int64 values; exits if memory is short. Free with free(). */
static inline int64_t* alloc_i64(int64_t n) {
  int64_t* p = (int64_t*)calloc((size_t)(n > 0 ? n : 1), sizeof *p);
  if (p == NULL) {
    fprintf(stderr, "out of memory allocating %lld values\n", (long long)n);
    exit(EXIT_FAILURE);
  }
  return p;
}

/* Prints "[a, b, ...]" (no newline) to `out`. */
static inline void print_i64(FILE* out, const int64_t* v, int64_t n) {
  int64_t i;
  fputc('[', out);
  for (i = 0; i < n; ++i) fprintf(out, i == 0 ? "%lld" : ", %lld", (long long)v[i]);
  fputc(']', out);
}

/*
 * Prints this rank's result as "rank R: [a, b, ...]" and compares it with the
 * documented one. Returns 0 if they are equal, else prints the expected
 * values to stderr and returns 1 (use it as main's return value).
 */
static inline int report_i64(int rank, const int64_t* got, const int64_t* want, int64_t n) {
  int64_t i;
  printf("rank %d: ", rank);
  print_i64(stdout, got, n);
  printf("\n");
  fflush(stdout);
  for (i = 0; i < n; ++i) {
    if (got[i] != want[i]) {
      fprintf(stderr, "rank %d: WRONG RESULT, expected ", rank);
      print_i64(stderr, want, n);
      fprintf(stderr, "\n");
      return 1;
    }
  }
  return 0;
}

#endif /* OMNICCL_EXAMPLE_H_ */
