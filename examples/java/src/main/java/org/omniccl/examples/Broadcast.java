package org.omniccl.examples;

import org.omniccl.Communicator;

/**
 * Copy one rank's array to every rank (examples/c/broadcast.c in Java).
 *
 * <p>Rank r starts with [2r+1, 2r+2]: rank 0 holds [1, 2], rank 1 [3, 4], rank
 * 2 [5, 6], rank 3 [7, 8]. broadcast works in place: afterwards every rank
 * holds the root's (rank 0's) [1, 2].
 *
 * <pre>
 * Run: omniccl-run -n 4 java -cp CLASSPATH org.omniccl.examples.Broadcast
 * Output with 4 ranks, in any order:
 *   rank 0: [1, 2]
 *   rank 1: [1, 2]
 *   rank 2: [1, 2]
 *   rank 3: [1, 2]
 * </pre>
 */
public final class Broadcast {
  private Broadcast() {}

  /**
   * Runs the example.
   *
   * @param args unused
   */
  public static void main(String[] args) {
    int status;
    // env://: rank, size and rendezvous come from the launcher's environment.
    try (Communicator comm = Communicator.init("env://")) {
      int rank = comm.rank();
      long[] data = {2 * rank + 1, 2 * rank + 2};
      int root = 0;
      comm.broadcast(data, root);
      status = Example.report(rank, data, new long[] {2 * root + 1, 2 * root + 2});
    }
    System.exit(status);
  }
}
