package org.omniccl;

import static org.junit.jupiter.api.Assertions.assertDoesNotThrow;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.api.io.TempDir;

/** Each failure: its exception type, its message, and that it is prompt. */
@Timeout(value = 60, unit = TimeUnit.SECONDS)
class ErrorsTest {

  private static Communicator single() {
    return Communicator.init(Ranks.fileRendezvous(), 0, 1);
  }

  @Test
  void wrongArrayLengthIsInvalidArgumentBeforeAnythingIsSent() throws Exception {
    // Two ranks; rank 1 passes a short recv array to allGather. Its error is
    // raised in Java before anything is sent; rank 1 then closes, and rank 0's
    // matching call learns that its peer left (it does not hang).
    Config quick = Config.builder().timeout(Duration.ofSeconds(2)).build();
    try (Communicator c = single()) {
      InvalidArgumentException e = assertThrows(InvalidArgumentException.class,
          () -> c.allReduce(new double[3], new double[4], ReduceOp.SUM));
      assertTrue(e.getMessage().contains("allReduce (rank 0): recv has 4 elements, send 3"), e.getMessage());
      e = assertThrows(InvalidArgumentException.class,
          () -> c.allToAllv(new int[2], new int[] {1, 1}, null, new int[2], new int[] {2}, null));
      assertTrue(e.getMessage().contains("sendCounts has 2 entries, expected size() = 1"), e.getMessage());
      e = assertThrows(InvalidArgumentException.class, () -> c.broadcast(new long[2], 1));
      assertTrue(e.getMessage().contains("root 1 is not a rank of this 1-rank communicator"), e.getMessage());
      assertTrue(c.asyncError().isEmpty(), "argument errors leave a 1-rank communicator usable");
    }
    Ranks.threads(2, quick, c -> {
      long[] send = {1, 2};
      long[] recv = new long[c.rank() == 1 ? 3 : 4];
      if (c.rank() == 1) {
        InvalidArgumentException e = assertThrows(InvalidArgumentException.class,
            () -> c.allGather(send, recv));
        assertEquals("allGather (rank 1): recv has 3 elements, expected 4 (size() * send length,"
            + " size() = 2)", e.getMessage());
      } else {
        PeerFailureException e = assertThrows(PeerFailureException.class, () -> c.allGather(send, recv));
        assertTrue(e.getMessage().contains("rank 1"), e.getMessage());
        // The failure stays readable without a call that would throw it.
        OmniCCLException later = c.asyncError().orElseThrow();
        assertTrue(later instanceof PeerFailureException, later.toString());
      }
    });
  }

  @Test
  void heapBufferIsIllegalArgument() {
    try (Communicator c = single()) {
      IllegalArgumentException e = assertThrows(IllegalArgumentException.class,
          () -> c.allReduce(ByteBuffer.allocate(16), DataType.FLOAT64, ReduceOp.SUM));
      assertTrue(e.getMessage().startsWith("data: a heap ByteBuffer; OmniCCL reads and writes"
          + " buffers in place and needs a direct one"), e.getMessage());
      ByteBuffer bigEndian = ByteBuffer.allocateDirect(16).order(ByteOrder.BIG_ENDIAN);
      if (ByteOrder.nativeOrder() != ByteOrder.BIG_ENDIAN) {
        e = assertThrows(IllegalArgumentException.class,
            () -> c.allReduce(bigEndian, DataType.FLOAT64, ReduceOp.SUM));
        assertTrue(e.getMessage().contains("byte order BIG_ENDIAN"), e.getMessage());
      }
      ByteBuffer odd = ByteBuffer.allocateDirect(10).order(ByteOrder.nativeOrder());
      e = assertThrows(IllegalArgumentException.class,
          () -> c.allReduce(odd, DataType.INT32, ReduceOp.SUM));
      assertTrue(e.getMessage().contains("10 bytes remaining is not a whole number of INT32"), e.getMessage());
      ByteBuffer ro = ByteBuffer.allocateDirect(8).order(ByteOrder.nativeOrder()).asReadOnlyBuffer();
      e = assertThrows(IllegalArgumentException.class, () -> c.broadcast(ro, DataType.INT64, 0));
      assertTrue(e.getMessage().contains("read-only"), e.getMessage());
    }
  }

  @Test
  void undefinedOpForTypeIsInvalidArgumentFromTheLibrary() {
    try (Communicator c = single()) {
      InvalidArgumentException e = assertThrows(InvalidArgumentException.class,
          () -> c.allReduce(new double[2], ReduceOp.BXOR));
      assertEquals(OmniCCLException.INVALID_ARGUMENT, e.status());
      assertTrue(e.getMessage().toLowerCase().contains("bxor"), e.getMessage());
      assertTrue(e.statusName().startsWith("OCCL_ERR_INVALID_ARGUMENT"), e.statusName());
    }
  }

  @Test
  void mismatchedCallsAcrossRanks() throws Exception {
    Config quick = Config.builder().timeout(Duration.ofSeconds(20)).build();
    long start = System.nanoTime();
    Ranks.threads(2, quick, c -> {
      ReduceOp op = c.rank() == 0 ? ReduceOp.SUM : ReduceOp.MAX;
      MismatchException e = assertThrows(MismatchException.class,
          () -> c.allReduce(new int[] {1, 2, 3}, op));
      assertTrue(e.getMessage().contains("SUM") && e.getMessage().contains("MAX"), e.getMessage());
    });
    assertTrue(System.nanoTime() - start < TimeUnit.SECONDS.toNanos(15), "mismatch took too long");
  }

  @Test
  void deadlineNamesTheMissingRank() throws Exception {
    Config quick = Config.builder().timeout(Duration.ofSeconds(1)).build();
    CountDownLatch done = new CountDownLatch(1);
    Ranks.threads(2, quick, c -> {
      if (c.rank() == 0) {
        long start = System.nanoTime();
        TimeoutException e = assertThrows(TimeoutException.class, c::barrier);
        assertTrue(e.getMessage().contains("timed out waiting for rank 1"), e.getMessage());
        assertTrue(System.nanoTime() - start < TimeUnit.SECONDS.toNanos(10));
        done.countDown();
      } else {
        try {
          done.await(30, TimeUnit.SECONDS); // rank 1 never enters the barrier
        } catch (InterruptedException e) {
          Thread.currentThread().interrupt();
        }
      }
    });
  }

  @Test
  void useAfterCloseAndDoubleClose() {
    Communicator c = single();
    c.close();
    assertTrue(c.isClosed());
    assertDoesNotThrow(c::close);
    assertDoesNotThrow(c::abort);
    IllegalStateException e = assertThrows(IllegalStateException.class,
        () -> c.allReduce(new double[1], ReduceOp.SUM));
    assertEquals("allReduce: the communicator (rank 0 of 1) is closed", e.getMessage());
    assertThrows(IllegalStateException.class, c::barrier);
    assertThrows(IllegalStateException.class, () -> c.split(0, 0));
  }

  @Test
  void concurrentCloseFreesOnce() throws Exception {
    for (int round = 0; round < 20; round++) {
      Communicator c = single();
      List<Thread> threads = new ArrayList<>();
      for (int t = 0; t < 4; t++) {
        Thread th = new Thread(t % 2 == 0 ? c::close : c::abort);
        threads.add(th);
        th.start();
      }
      for (Thread th : threads) {
        th.join(10_000);
      }
      assertTrue(c.isClosed());
    }
  }

  @Test
  void abortFromAnotherThreadEndsABlockedCall() throws Exception {
    Config slow = Config.builder().timeout(Duration.ofSeconds(60)).build();
    CountDownLatch aborted = new CountDownLatch(1);
    Ranks.threads(2, slow, c -> {
      if (c.rank() == 0) {
        Thread killer = new Thread(() -> {
          try {
            Thread.sleep(300);
          } catch (InterruptedException e) {
            return;
          }
          c.abort();
        });
        killer.start();
        long start = System.nanoTime();
        OmniCCLException e = assertThrows(OmniCCLException.class, c::barrier);
        long ms = TimeUnit.NANOSECONDS.toMillis(System.nanoTime() - start);
        assertTrue(ms < 10_000, "abort took " + ms + " ms");
        assertTrue(e.statusName().startsWith("OCCL_ERR_ABORTED"), e.statusName() + ": " + e.getMessage());
        aborted.countDown();
      } else {
        try {
          aborted.await(30, TimeUnit.SECONDS);
        } catch (InterruptedException e) {
          Thread.currentThread().interrupt();
        }
      }
    });
  }

  @Test
  void pendingAsyncWorkFailsWhenClosed() throws Exception {
    Config slow = Config.builder().timeout(Duration.ofSeconds(60)).build();
    CountDownLatch closed = new CountDownLatch(1);
    Ranks.threads(2, slow, c -> {
      if (c.rank() == 0) {
        CompletableFuture<Void> f = c.allReduceAsync(new double[8], ReduceOp.SUM);
        c.close();
        ExecutionException e = assertThrows(ExecutionException.class, () -> f.get(10, TimeUnit.SECONDS));
        assertTrue(e.getCause() instanceof OmniCCLException, e.toString());
        closed.countDown();
      } else {
        try {
          closed.await(30, TimeUnit.SECONDS);
        } catch (InterruptedException e) {
          Thread.currentThread().interrupt();
        }
      }
    });
  }

  @Test
  @Timeout(value = 90, unit = TimeUnit.SECONDS)
  void killedPeerIsPeerFailureOnTheSurvivors(@TempDir Path dir) throws Exception {
    int n = 3;
    String url = Ranks.fileRendezvous();
    List<Process> procs = new ArrayList<>();
    for (int r = 0; r < n; r++) {
      procs.add(Ranks.process(r, n, url, dir.resolve("rank" + r + ".log"), "peer-killed"));
    }
    try {
      Path log1 = dir.resolve("rank1.log");
      long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(60);
      while (!Files.readString(log1).contains("ready to be killed")) {
        assertTrue(System.nanoTime() < deadline, "rank 1 never got ready: " + Files.readString(log1));
        assertTrue(procs.get(1).isAlive(), "rank 1 exited: " + Files.readString(log1));
        Thread.sleep(50);
      }
      long killedAt = System.nanoTime();
      procs.get(1).destroyForcibly();
      for (int r : new int[] {0, 2}) {
        boolean exited = procs.get(r).waitFor(30, TimeUnit.SECONDS);
        String log = Files.readString(dir.resolve("rank" + r + ".log"));
        assertTrue(exited, "rank " + r + " did not return after its peer was killed:\n" + log);
        assertEquals(0, procs.get(r).exitValue(), log);
        assertTrue(log.contains("rank " + r + ": PeerFailureException: "), log);
      }
      long ms = TimeUnit.NANOSECONDS.toMillis(System.nanoTime() - killedAt);
      assertTrue(ms < 20_000, "survivors took " + ms + " ms to see the failure");
    } finally {
      procs.forEach(Process::destroyForcibly);
    }
  }
}
