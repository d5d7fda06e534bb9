package org.omniccl.examples;

import org.omniccl.Communicator;
import org.omniccl.ReduceOp;

/**
 * Sum every rank's array and give the result to every rank
 * (examples/c/all_reduce.c in Java).
 *
 * <p>Rank r holds [2r+1, 2r+2]; every rank receives the element-wise SUM
 * [1+3+5+7, 2+4+6+8] = [16, 20]. This example uses separate send and receive
 * arrays; {@code comm.allReduce(data, ReduceOp.SUM)} reduces in place. Rank 0
 * also prints the transport the communicator chose: "shm" for ranks on one
 * host, "tcp" across hosts or with OMNICCL_TRANSPORT=tcp.
 *
 * <pre>
 * Run: omniccl-run -n 4 java -cp CLASSPATH org.omniccl.examples.AllReduce
 * Output with 4 ranks, in any order:
 *   rank 0: [16, 20]
 *   rank 1: [16, 20]
 *   rank 2: [16, 20]
 *   rank 3: [16, 20]
 * </pre>
 * and "transport: shm" (or tcp) from rank 0.
 */
public final class AllReduce {
  private AllReduce() {}

  /**
   * Runs the example.
   *
   * @param args unused
   */
  public static void main(String[] args) {
    int status;
    try (Communicator comm = Communicator.init("env://")) {
      int rank = comm.rank();
      if (rank == 0) {
        System.out.println("transport: " + comm.transport());
      }
      long[] input = {2 * rank + 1, 2 * rank + 2};
      long[] result = new long[2];
      comm.allReduce(input, result, ReduceOp.SUM);
      long[] want = {0, 0};
      for (int r = 0; r < comm.size(); r++) {
        want[0] += 2 * r + 1;
        want[1] += 2 * r + 2;
      }
      status = Example.report(rank, result, want);
    }
    System.exit(status);
  }
}
