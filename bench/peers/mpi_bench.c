/*
 * mpi_bench.c - the MPI peer of omniccl-bench: the same collectives, sizes,
 * iteration schedule, timing and CSV, measured with plain MPI calls. One
 * source, compiled twice by bench/compare.sh: with mpicc.openmpi (peer
 * "openmpi") and with mpicc.mpich (peer "mpich").
 *
 *   mpirun.openmpi -n 2 ./mpi_bench_openmpi --coll all --sizes 8,1M -n auto --csv
 *
 * Timing as omniccl-bench: warm-up, MPI_Barrier, `iters` timed blocking
 * calls; per-rank time per call; mean and max over ranks (MPI_Allreduce).
 * Buffers are out of place (MPI_Bcast in place), float32, MPI_SUM.
 */
#include <mpi.h>

#include "bench_common.h"

/** Prints an MPI error and aborts the job. */
static void die(const char* what, int err) {
  char msg[MPI_MAX_ERROR_STRING];
  int len = 0;
  MPI_Error_string(err, msg, &len);
  fprintf(stderr, "mpi_bench: %s failed: %s\n", what, msg);
  MPI_Abort(MPI_COMM_WORLD, 1);
}

/** Aborts with a message if an MPI call did not succeed. */
#define MPI_OK(call)                           \
  do {                                         \
    int err_ = (call);                         \
    if (err_ != MPI_SUCCESS) die(#call, err_); \
  } while (0)

/** Runs collective `c` once on the given buffers. */
static void run_op(int c, float* send, float* recv, const struct bc_layout* l, int root, int rank) {
  const int p = (int)l->param;
  switch (c) {
    case BC_ALLREDUCE: MPI_OK(MPI_Allreduce(send, recv, p, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD)); break;
    case BC_ALLGATHER: MPI_OK(MPI_Allgather(send, p, MPI_FLOAT, recv, p, MPI_FLOAT, MPI_COMM_WORLD)); break;
    case BC_BCAST: MPI_OK(MPI_Bcast(recv, p, MPI_FLOAT, root, MPI_COMM_WORLD)); break;
    case BC_REDUCE:
      MPI_OK(MPI_Reduce(send, rank == root ? recv : NULL, p, MPI_FLOAT, MPI_SUM, root, MPI_COMM_WORLD));
      break;
    case BC_REDUCE_SCATTER: MPI_OK(MPI_Reduce_scatter_block(send, recv, p, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD)); break;
    case BC_ALLTOALL: MPI_OK(MPI_Alltoall(send, p, MPI_FLOAT, recv, p, MPI_FLOAT, MPI_COMM_WORLD)); break;
    case BC_GATHER:
      MPI_OK(MPI_Gather(send, p, MPI_FLOAT, rank == root ? recv : NULL, p, MPI_FLOAT, root, MPI_COMM_WORLD));
      break;
    case BC_SCATTER:
      MPI_OK(MPI_Scatter(rank == root ? send : NULL, p, MPI_FLOAT, recv, p, MPI_FLOAT, root, MPI_COMM_WORLD));
      break;
    default: MPI_OK(MPI_Barrier(MPI_COMM_WORLD)); break;
  }
}

/** Allocates `count` floats (64-byte aligned, pages touched) or NULL for 0. */
static float* alloc_floats(uint64_t count) {
  size_t bytes = (size_t)((count * 4 + 63) / 64 * 64);
  float* p;
  if (count == 0) return NULL;
  p = (float*)aligned_alloc(64, bytes);
  if (!p) {
    fprintf(stderr, "mpi_bench: out of memory (%zu bytes)\n", bytes);
    MPI_Abort(MPI_COMM_WORLD, 1);
  }
  memset(p, 0, bytes);
  return p;
}

/** Measures one point and has rank 0 print it. */
static void run_point(const struct bc_options* o, int c, uint64_t size, int rank, int n) {
  struct bc_layout l = bc_layout_of(c, size, n);
  int iters = bc_iters(o, l.bytes), warm = bc_warmup(o, iters), i;
  int root = o->root;
  /* Which buffers this rank has: as omniccl-bench. */
  int has_send = c != BC_BARRIER && c != BC_BCAST && (c != BC_SCATTER || rank == root);
  int has_recv = c != BC_BARRIER && ((c != BC_REDUCE && c != BC_GATHER) || rank == root);
  float* send = has_send ? alloc_floats(l.send) : NULL;
  float* recv = has_recv ? alloc_floats(l.recv) : NULL;
  double t0, per_op, in[2], sums[2], maxt;
  long long wrong = -1;
  if (send) bc_fill(send, l.send, rank);
  if (recv && c == BC_BCAST && rank == root) bc_fill(recv, l.recv, rank);

  for (i = 0; i < warm; ++i) run_op(c, send, recv, &l, root, rank);
  MPI_OK(MPI_Barrier(MPI_COMM_WORLD));
  t0 = bc_now();
  for (i = 0; i < iters; ++i) run_op(c, send, recv, &l, root, rank);
  per_op = (bc_now() - t0) / iters;

  in[0] = per_op;
  in[1] = 0;
  if (o->check && c != BC_BARRIER) {
    if (send) bc_fill(send, l.send, rank);
    if (recv) memset(recv, 0xff, (size_t)l.recv * 4);
    if (recv && c == BC_BCAST && rank == root) bc_fill(recv, l.recv, rank);
    MPI_OK(MPI_Barrier(MPI_COMM_WORLD));
    run_op(c, send, recv, &l, root, rank);
    in[1] = (double)bc_count_wrong(c, rank, n, root, &l, recv, recv ? l.recv : 0);
  }
  MPI_OK(MPI_Allreduce(in, sums, 2, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD));
  MPI_OK(MPI_Allreduce(&per_op, &maxt, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD));
  if (o->check) wrong = (long long)sums[1];
  if (rank == 0) bc_print_point(o, c, n, &l, iters, sums[0], maxt, wrong);
  free(send);
  free(recv);
}

/** Rank 0 sleeps 1 s before a barrier; every rank reports the CPU share it
 *  used while blocked in it. */
static void blocked_cpu(const struct bc_options* o, int rank, int n) {
  double w0, c0, mine[3], *all;
  int i;
  for (i = 0; i < 10; ++i) MPI_OK(MPI_Barrier(MPI_COMM_WORLD));
  if (rank == 0) bc_sleep(1.0);
  w0 = bc_now();
  c0 = bc_process_cpu();
  MPI_OK(MPI_Barrier(MPI_COMM_WORLD));
  mine[0] = bc_now() - w0;
  mine[1] = bc_process_cpu() - c0;
  mine[2] = mine[0] > 0 ? 100.0 * mine[1] / mine[0] : 0;
  all = (double*)calloc((size_t)n * 3, sizeof(double));
  MPI_OK(MPI_Gather(mine, 3, MPI_DOUBLE, all, 3, MPI_DOUBLE, 0, MPI_COMM_WORLD));
  if (rank == 0) bc_print_blocked(o, n, all);
  free(all);
}

/** Entry point: MPI_Init, the requested measurements, MPI_Finalize. */
int main(int argc, char** argv) {
  struct bc_options o;
  int rank, n, c, s, st;
  st = bc_parse(argc, argv, &o, "mpi", "shm");
  if (st >= 0) return st;
  MPI_Init(&argc, &argv);
  MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &n);
  if (o.root < 0 || o.root >= n) {
    if (rank == 0) fprintf(stderr, "mpi_bench: root %d is not below %d ranks\n", o.root, n);
    MPI_Finalize();
    return 2;
  }
  if (o.blocked_cpu) {
    blocked_cpu(&o, rank, n);
  } else {
    if (rank == 0) bc_print_header(&o, n);
    for (c = 0; c < BC_NCOLLS; ++c) {
      if (!o.colls[c]) continue;
      if (c == BC_BARRIER) {
        run_point(&o, c, 0, rank, n);
        continue;
      }
      for (s = 0; s < o.nsizes; ++s) run_point(&o, c, o.sizes[s], rank, n);
    }
  }
  MPI_Finalize();
  return 0;
}
