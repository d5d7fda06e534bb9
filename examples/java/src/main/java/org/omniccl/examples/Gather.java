package org.omniccl.examples;

import org.omniccl.Communicator;

/**
 * Collect every rank's array, in rank order, on one rank (examples/c/gather.c in Java).
 *
 * <p>Rank r sends [2r+1, 2r+2]; the root (rank 0) receives them all one after
 * the other. Only the root passes a receive array; the others pass null and
 * print their own input, which the gather leaves unchanged.
 *
 * <pre>
 * Run: omniccl-run -n 4 java -cp CLASSPATH org.omniccl.examples.Gather
 * Output with 4 ranks, in any order:
 *   rank 0: [1, 2, 3, 4, 5, 6, 7, 8]
 *   rank 1: [3, 4]
 *   rank 2: [5, 6]
 *   rank 3: [7, 8]
 * </pre>
 */
public final class Gather {
  private Gather() {}

  /**
   * Runs the example.
   *
   * @param args unused
   */
  public static void main(String[] args) {
    int status;
    try (Communicator comm = Communicator.init("env://")) {
      int rank = comm.rank();
      int root = 0;
      long[] data = {2 * rank + 1, 2 * rank + 2};
      long[] all = rank == root ? new long[data.length * comm.size()] : null;
      comm.gather(data, all, root);
      if (rank == root) {
        long[] want = new long[all.length];
        for (int i = 0; i < want.length; i++) {
          want[i] = i + 1;
        }
        status = Example.report(rank, all, want);
      } else {
        status = Example.report(rank, data, new long[] {2 * rank + 1, 2 * rank + 2});
      }
    }
    System.exit(status);
  }
}
