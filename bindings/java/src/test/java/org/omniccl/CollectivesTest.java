package org.omniccl;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.api.io.TempDir;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.ValueSource;

/**
 * Every collective, every primitive type and direct buffers (see {@link
 * Sweep}), with 1, 2, 3 and 4 ranks: as threads of this JVM (the way Spark
 * runs tasks) and as separate JVMs.
 */
class CollectivesTest {

  @ParameterizedTest(name = "{0} ranks as threads")
  @ValueSource(ints = {1, 2, 3, 4})
  @Timeout(value = 120, unit = TimeUnit.SECONDS)
  void threadsOfOneJvm(int n) throws Exception {
    Ranks.threads(n, null, Sweep::run);
  }

  @ParameterizedTest(name = "scan and exscan, {0} ranks")
  @ValueSource(ints = {1, 3})
  @Timeout(value = 120, unit = TimeUnit.SECONDS)
  void scanAndExscanArePrefixReductions(int n) throws Exception {
    Ranks.threads(n, null, c -> {
      int r = c.rank();
      long[] send = {r + 1, 10L * (r + 1)};
      long[] recv = new long[2];
      c.scan(send, recv, ReduceOp.SUM);
      long upTo = (long) (r + 1) * (r + 2) / 2; // 1 + 2 + ... + (r + 1)
      org.junit.jupiter.api.Assertions.assertArrayEquals(new long[] {upTo, 10 * upTo}, recv);
      long[] before = {-1, -1};
      c.exscan(send, before, ReduceOp.SUM);
      long b = (long) r * (r + 1) / 2; // 1 + ... + r; rank 0 keeps its values
      org.junit.jupiter.api.Assertions.assertArrayEquals(r == 0 ? new long[] {-1, -1} : new long[] {b, 10 * b},
          before);
      double[] truth = {r == 1 ? 0.0 : 2.5};
      c.scan(truth, ReduceOp.LAND); // in place: 1 while no rank so far had a zero
      assertEquals(r == 0 ? 1.0 : 0.0, truth[0]);
      int[] low = {5 - r};
      try {
        c.exscanAsync(low, ReduceOp.MIN).get(60, TimeUnit.SECONDS);
      } catch (Exception e) {
        throw new AssertionError(e);
      }
      assertEquals(r == 0 ? 5 : 5 - (r - 1), low[0]);
      InvalidArgumentException e = org.junit.jupiter.api.Assertions.assertThrows(
          InvalidArgumentException.class, () -> c.scan(new int[1], ReduceOp.AVG));
      assertTrue(e.getMessage().contains("AVG"), e.getMessage());
    });
  }

  @ParameterizedTest(name = "complex products and MAXLOC/MINLOC pairs, {0} ranks")
  @ValueSource(ints = {1, 3})
  @Timeout(value = 120, unit = TimeUnit.SECONDS)
  void complexAndPairs(int n) throws Exception {
    Ranks.threads(n, null, c -> {
      int r = c.rank();
      // complex128 (1 + r) + (0.5 r - 1)i on every rank; the product by hand.
      java.nio.ByteBuffer z = java.nio.ByteBuffer.allocateDirect(16).order(java.nio.ByteOrder.nativeOrder());
      z.putDouble(0, 1.0 + r).putDouble(8, 0.5 * r - 1.0);
      c.allReduce(z, DataType.COMPLEX128, ReduceOp.PROD);
      double re = 1, im = 0;
      for (int q = 0; q < n; q++) {
        double a = 1.0 + q, b = 0.5 * q - 1.0;
        double nre = re * a - im * b;
        im = re * b + im * a;
        re = nre;
      }
      assertTrue(Math.abs(z.getDouble(0) - re) < 1e-12 && Math.abs(z.getDouble(8) - im) < 1e-12,
          z.getDouble(0) + " " + z.getDouble(8) + " vs " + re + " " + im);
      // (value, index) pairs: a tie on 7 (smallest index wins), then value r at index r.
      int[] pairs = {7, 10 + r, r, r};
      c.allReduce(pairs, ReduceOp.MAXLOC);
      org.junit.jupiter.api.Assertions.assertArrayEquals(new int[] {7, 10, n - 1, n - 1}, pairs);
      double[] low = {-r, r};
      c.allReduce(low, ReduceOp.MINLOC);
      org.junit.jupiter.api.Assertions.assertArrayEquals(new double[] {-(n - 1), n - 1}, low);
      org.junit.jupiter.api.Assertions.assertThrows(InvalidArgumentException.class,
          () -> c.allReduce(new int[3], ReduceOp.MAXLOC));
    });
  }

  @ParameterizedTest(name = "{0} ranks over TCP, as threads")
  @ValueSource(ints = {2, 3})
  @Timeout(value = 120, unit = TimeUnit.SECONDS)
  void threadsOverTcp(int n) throws Exception {
    Config tcp = Config.builder().transport("tcp").build();
    Ranks.threads(n, tcp, c -> {
      assertEquals("tcp", c.transport());
      Sweep.run(c);
    });
  }

  @ParameterizedTest(name = "{0} ranks as processes")
  @ValueSource(ints = {1, 2, 3, 4})
  @Timeout(value = 180, unit = TimeUnit.SECONDS)
  void separateJvms(int n, @TempDir Path dir) throws Exception {
    String url = Ranks.fileRendezvous();
    List<Process> procs = new ArrayList<>();
    for (int r = 0; r < n; r++) {
      procs.add(Ranks.process(r, n, url, dir.resolve("rank" + r + ".log"), "sweep"));
    }
    try {
      for (int r = 0; r < n; r++) {
        Process p = procs.get(r);
        boolean exited = p.waitFor(150, TimeUnit.SECONDS);
        String log = Files.readString(dir.resolve("rank" + r + ".log"));
        assertTrue(exited, "rank " + r + " of " + n + " did not finish:\n" + log);
        assertEquals(0, p.exitValue(), "rank " + r + " of " + n + " failed:\n" + log);
        assertTrue(log.contains("rank " + r + ": sweep ok"), log);
      }
    } finally {
      procs.forEach(Process::destroyForcibly); // nothing outlives the test
    }
  }
}
