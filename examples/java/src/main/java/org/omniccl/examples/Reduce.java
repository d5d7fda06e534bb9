package org.omniccl.examples;

import org.omniccl.Communicator;
import org.omniccl.ReduceOp;

/**
 * Sum every rank's array into one rank (examples/c/reduce.c in Java).
 *
 * <p>Rank r holds [2r+1, 2r+2]. The root, here the last rank (rank 3 of 4),
 * receives the element-wise SUM [1+3+5+7, 2+4+6+8] = [16, 20] in place (send
 * and receive array are the same); the other ranks pass null as the receive
 * array and their data is left unchanged.
 *
 * <pre>
 * Run: omniccl-run -n 4 java -cp CLASSPATH org.omniccl.examples.Reduce
 * Output with 4 ranks, in any order:
 *   rank 0: [1, 2]
 *   rank 1: [3, 4]
 *   rank 2: [5, 6]
 *   rank 3: [16, 20]
 * </pre>
 */
public final class Reduce {
  private Reduce() {}

  /**
   * Runs the example.
   *
   * @param args unused
   */
  public static void main(String[] args) {
    int status;
    try (Communicator comm = Communicator.init("env://")) {
      int rank = comm.rank();
      int root = comm.size() - 1;
      long[] data = {2 * rank + 1, 2 * rank + 2};
      comm.reduce(data, rank == root ? data : null, ReduceOp.SUM, root);
      long[] want = {2 * rank + 1, 2 * rank + 2}; // non-roots: unchanged
      if (rank == root) {
        want = new long[] {0, 0};
        for (int r = 0; r < comm.size(); r++) {
          want[0] += 2 * r + 1;
          want[1] += 2 * r + 2;
        }
      }
      status = Example.report(rank, data, want);
    }
    System.exit(status);
  }
}
