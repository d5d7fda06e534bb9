package org.omniccl.examples;

import java.util.Arrays;

/**
 * The one helper the tutorial examples share: print "rank R: [a, b, ...]" and
 * compare with the expected values, so CI sees a regression as a non-zero
 * exit status.
 *
 * <p>Launching: every example creates its communicator with "env://", so it
 * runs under any torchrun/mpirun-style launcher, e.g. with 4 ranks, the jar
 * where {@code mvn install} put it and the examples compiled into target/classes:
 * {@code omniccl-run -n 4 java -cp
 * target/classes:$HOME/.m2/repository/org/omniccl/omniccl/0.3.0/omniccl-0.3.0.jar
 * org.omniccl.examples.AllReduce}.
 */
final class Example {
  private Example() {}

  /**
   * Prints this rank's values and returns the exit status: 0 if they are the
   * expected ones, else 1 (after printing what was expected).
   */
  static int report(int rank, long[] got, long[] want) {
    System.out.println("rank " + rank + ": " + format(got));
    if (!Arrays.equals(got, want)) {
      System.out.println("rank " + rank + " expected: " + format(want));
      return 1;
    }
    return 0;
  }

  private static String format(long[] v) {
    StringBuilder s = new StringBuilder("[");
    for (int i = 0; i < v.length; i++) {
      s.append(i == 0 ? "" : ", ").append(v[i]);
    }
    return s.append("]").toString();
  }
}
