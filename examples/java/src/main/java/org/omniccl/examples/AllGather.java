package org.omniccl.examples;

import org.omniccl.Communicator;

/**
 * Concatenate every rank's array, in rank order, everywhere
 * (examples/c/all_gather.c in Java).
 *
 * <p>Rank r contributes [2r+1, 2r+2]; every rank receives all of them.
 *
 * <pre>
 * Run: omniccl-run -n 4 java -cp CLASSPATH org.omniccl.examples.AllGather
 * Output with 4 ranks, in any order:
 *   rank 0: [1, 2, 3, 4, 5, 6, 7, 8]
 *   rank 1: [1, 2, 3, 4, 5, 6, 7, 8]
 *   rank 2: [1, 2, 3, 4, 5, 6, 7, 8]
 *   rank 3: [1, 2, 3, 4, 5, 6, 7, 8]
 * </pre>
 */
public final class AllGather {
  private AllGather() {}

  /**
   * Runs the example.
   *
   * @param args unused
   */
  public static void main(String[] args) {
    int status;
    try (Communicator comm = Communicator.init("env://")) {
      int rank = comm.rank();
      long[] data = {2 * rank + 1, 2 * rank + 2};
      long[] all = new long[data.length * comm.size()];
      comm.allGather(data, all);
      long[] want = new long[all.length];
      for (int i = 0; i < want.length; i++) {
        want[i] = i + 1;
      }
      status = Example.report(rank, all, want);
    }
    System.exit(status);
  }
}
