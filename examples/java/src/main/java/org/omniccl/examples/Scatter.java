package org.omniccl.examples;

import org.omniccl.Communicator;

/**
 * Hand each rank its own part of the root's array (examples/c/scatter.c in Java).
 *
 * <p>The root (rank 0) holds size parts of 2 elements, [0, 0, 1, 1, 2, 2, 3, 3]
 * with 4 ranks; rank i receives part i, [i, i]. Only the root passes a send
 * array; the others pass null.
 *
 * <pre>
 * Run: omniccl-run -n 4 java -cp CLASSPATH org.omniccl.examples.Scatter
 * Output with 4 ranks, in any order:
 *   rank 0: [0, 0]
 *   rank 1: [1, 1]
 *   rank 2: [2, 2]
 *   rank 3: [3, 3]
 * </pre>
 */
public final class Scatter {
  private Scatter() {}

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
      int part = 2;
      long[] all = null;
      if (rank == root) {
        all = new long[part * comm.size()];
        for (int i = 0; i < all.length; i++) {
          all[i] = i / part; // 0, 0, 1, 1, ...
        }
      }
      long[] mine = new long[part];
      comm.scatter(all, mine, root);
      status = Example.report(rank, mine, new long[] {rank, rank});
    }
    System.exit(status);
  }
}
