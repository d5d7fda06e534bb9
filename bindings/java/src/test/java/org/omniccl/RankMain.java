package org.omniccl;

/**
 * One rank of a multi-process test, started by the tests as a separate JVM:
 * {@code RankMain SCENARIO} with OMNICCL_TEST_URL, RANK and WORLD_SIZE in the
 * environment. Exits 0 on success; prints the failure and exits 1 otherwise.
 */
public final class RankMain {
  private RankMain() {}

  /**
   * Runs a scenario.
   *
   * @param args the scenario: "sweep" (every collective and type), "hang"
   *     (rank 1 waits to be killed while the others call allReduce and must
   *     see a PeerFailureException), "mismatch" (ranks call different ops)
   */
  public static void main(String[] args) {
    String url = System.getenv("OMNICCL_TEST_URL");
    int rank = Integer.parseInt(System.getenv("RANK"));
    int n = Integer.parseInt(System.getenv("WORLD_SIZE"));
    Config config = Config.builder().timeout(java.time.Duration.ofSeconds(60)).build();
    try (Communicator comm = Communicator.init(url, rank, n, config)) {
      switch (args[0]) {
        case "sweep":
          Sweep.run(comm);
          System.out.println("rank " + rank + ": sweep ok");
          break;
        case "peer-killed":
          comm.barrier();
          if (rank == 1) {
            System.out.println("rank 1: ready to be killed");
            System.out.flush();
            Thread.sleep(120_000);
            System.exit(3); // not killed: the test failed to kill us
          }
          try {
            comm.allReduce(new double[] {1, 2, 3}, ReduceOp.SUM);
            System.out.println("rank " + rank + ": allReduce returned although rank 1 was killed");
            System.exit(1);
          } catch (PeerFailureException e) {
            System.out.println("rank " + rank + ": PeerFailureException: " + e.getMessage());
          }
          break;
        default:
          throw new IllegalArgumentException("unknown scenario " + args[0]);
      }
    } catch (Throwable e) {
      System.out.println("rank " + rank + ": FAILED");
      e.printStackTrace(System.out);
      System.exit(1);
    }
    System.exit(0);
  }
}
