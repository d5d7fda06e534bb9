package org.omniccl.examples;

import java.util.Arrays;
import org.omniccl.Communicator;
import org.omniccl.RecvStatus;

/**
 * MPI-style point-to-point: tags, an any-source probe that sizes the buffer,
 * and the status of what came (examples/tagged.rs of the Rust crate in Java).
 *
 * <p>Rank r &gt; 0 sends r copies of r with tag 100 + r to rank 0. Rank 0 does
 * not know who sends first nor how much: it probes for any message (any
 * source, any tag), allocates exactly the probed count, receives that message
 * (naming the probed source and tag) and records source, tag and count from
 * the receive's status; it prints them as one list, sorted by source.
 *
 * <pre>
 * Run: omniccl-run -n 4 java -cp CLASSPATH org.omniccl.examples.Tagged
 * Output with 4 ranks, in any order:
 *   rank 0: [1, 101, 1, 2, 102, 2, 3, 103, 3]
 *   rank 1: [1]
 *   rank 2: [2, 2]
 *   rank 3: [3, 3, 3]
 * </pre>
 */
public final class Tagged {
  private Tagged() {}

  /**
   * Runs the example.
   *
   * @param args unused
   */
  public static void main(String[] args) {
    int status;
    try (Communicator comm = Communicator.init("env://")) {
      int rank = comm.rank();
      int n = comm.size();
      if (rank > 0) {
        long[] data = new long[rank];
        Arrays.fill(data, rank);
        comm.send(data, 0, 100 + rank);
        status = Example.report(rank, data, data.clone());
      } else {
        long[] got = new long[3 * (n - 1)];
        long[] want = new long[3 * (n - 1)];
        for (int i = 1; i < n; i++) {
          RecvStatus probed = comm.probe(Communicator.ANY_SOURCE, Communicator.ANY_TAG); // receives nothing
          long[] buf = new long[(int) probed.count()];
          RecvStatus st = comm.recv(buf, probed.source(), probed.tag()); // exactly the probed message
          int s = st.source();
          got[3 * (s - 1)] = s;
          got[3 * (s - 1) + 1] = st.tag();
          got[3 * (s - 1) + 2] = st.count();
          want[3 * (i - 1)] = i;
          want[3 * (i - 1) + 1] = 100 + i;
          want[3 * (i - 1) + 2] = i;
        }
        status = Example.report(rank, got, want);
      }
    }
    System.exit(status);
  }
}
