package org.omniccl;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.util.ArrayList;
import java.util.List;
import java.util.Optional;
import java.util.concurrent.CancellationException;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/**
 * MPI-style point-to-point with ranks as threads of this JVM: tags matched
 * out of order, any source, statuses, truncation and type errors that leave
 * the communicator usable, bad arguments, probes, synchronous sends, cancel
 * and matched probes. Expected values are written out here.
 */
@Timeout(value = 120, unit = TimeUnit.SECONDS)
class PointToPointTest {

  /** The status of a message from source with tag of count elements of size bytes. */
  private static RecvStatus status(int source, int tag, long count, int size) {
    return new RecvStatus(source, tag, count * size, count);
  }

  /** Every rank still runs a correct collective afterwards. */
  private static void allReduceWorks(Communicator c) {
    long[] x = {c.rank() + 1};
    c.allReduce(x, ReduceOp.SUM);
    long n = c.size();
    assertEquals(n * (n + 1) / 2, x[0]);
  }

  @Test
  void tagsAreMatchedOutOfOrder() throws Exception {
    Ranks.threads(2, null, c -> {
      if (c.rank() == 0) {
        c.send(new int[] {10, 11}, 1, 1);
        c.send(new int[] {20, 21, 22}, 1, 2);
      } else {
        int[] buf = {-1, -1, -1, -1};
        assertEquals(status(0, 2, 3, 4), c.recv(buf, 0, 2)); // tag 2 first
        assertArrayEquals(new int[] {20, 21, 22, -1}, buf, "elements past the message keep their values");
        assertEquals(status(0, 1, 2, 4), c.recv(buf, 0, 1));
        assertArrayEquals(new int[] {10, 11, 22, -1}, buf);
      }
      allReduceWorks(c);
    });
  }

  @Test
  void anySourceAnyTagFillTheStatus() throws Exception {
    Ranks.threads(3, null, c -> {
      if (c.rank() == 0) {
        List<RecvStatus> got = new ArrayList<>();
        List<short[]> data = new ArrayList<>();
        for (int i = 0; i < 2; i++) {
          short[] buf = new short[8];
          got.add(c.recv(buf, Communicator.ANY_SOURCE, Communicator.ANY_TAG));
          data.add(buf);
        }
        if (got.get(0).source() == 2) {
          java.util.Collections.reverse(got);
          java.util.Collections.reverse(data);
        }
        // rank 1 sends one 1 with tag 101, rank 2 two 2s with tag 102
        assertEquals(status(1, 101, 1, 2), got.get(0));
        assertArrayEquals(new short[] {1, 0, 0, 0, 0, 0, 0, 0}, data.get(0));
        assertEquals(status(2, 102, 2, 2), got.get(1));
        assertArrayEquals(new short[] {2, 2, 0, 0, 0, 0, 0, 0}, data.get(1));
      } else {
        short[] mine = new short[c.rank()];
        java.util.Arrays.fill(mine, (short) c.rank());
        c.send(mine, 0, 100 + c.rank());
      }
      allReduceWorks(c);
    });
  }

  @Test
  void everyTypeAndDirectBuffers() throws Exception {
    Ranks.threads(2, null, c -> {
      int other = 1 - c.rank();
      // Each exchange: sendrecv with the peer, the status in the receive's type.
      byte[] b = new byte[3];
      assertEquals(status(other, 1, 2, 1), c.sendrecv(new byte[] {1, 2}, other, 1, b, other, 1));
      assertArrayEquals(new byte[] {1, 2, 0}, b);
      short[] s = new short[2];
      assertEquals(status(other, 2, 2, 2), c.sendrecv(new short[] {3, 4}, other, 2, s, other, 2));
      assertArrayEquals(new short[] {3, 4}, s);
      long[] l = new long[1];
      assertEquals(status(other, 3, 1, 8), c.sendrecv(new long[] {5}, other, 3, l, other, 3));
      assertEquals(5, l[0]);
      float[] f = new float[2];
      assertEquals(status(other, 4, 1, 4), c.sendrecv(new float[] {1.5f}, other, 4, f, other, 4));
      assertArrayEquals(new float[] {1.5f, 0}, f);
      double[] d = new double[1];
      assertEquals(status(other, 5, 1, 8), c.sendrecv(new double[] {2.5}, other, 5, d, other, 5));
      assertEquals(2.5, d[0]);
      boolean[] z = new boolean[2];
      assertEquals(status(other, 6, 2, 1), c.sendrecv(new boolean[] {true, false}, other, 6, z, other, 6));
      assertArrayEquals(new boolean[] {true, false}, z);
      // Blocking send and receive of direct buffers (rank 0 sends first).
      ByteBuffer out = ByteBuffer.allocateDirect(12).order(ByteOrder.nativeOrder());
      out.asIntBuffer().put(new int[] {7, 8, 9});
      ByteBuffer in = ByteBuffer.allocateDirect(16).order(ByteOrder.nativeOrder());
      if (c.rank() == 0) {
        c.send(out, DataType.INT32, 1, 7);
        c.ssend(out, DataType.INT32, 1, 8);
      } else {
        assertEquals(status(0, 7, 3, 4), c.recv(in, DataType.INT32, 0, 7));
        assertEquals(8, in.getInt(4));
        assertEquals(status(0, 8, 3, 4), c.recvAsync(in, DataType.INT32, 0, 8).join());
      }
      allReduceWorks(c);
    });
  }

  @Test
  void procNullCompletesAtOnce() throws Exception {
    Ranks.threads(2, null, c -> {
      c.send(new int[] {1}, Communicator.PROC_NULL, 3);
      c.ssend(new int[] {1}, Communicator.PROC_NULL, 3);
      int[] buf = {9, 9};
      RecvStatus st = c.recv(buf, Communicator.PROC_NULL, Communicator.ANY_TAG);
      assertEquals(new RecvStatus(Communicator.PROC_NULL, Communicator.ANY_TAG, 0, 0), st);
      assertTrue(st.isProcNull());
      assertArrayEquals(new int[] {9, 9}, buf);
      allReduceWorks(c);
    });
  }

  @Test
  void sendrecvAroundARing() throws Exception {
    Ranks.threads(3, null, c -> {
      int me = c.rank();
      int n = c.size();
      int right = (me + 1) % n;
      int left = (me + n - 1) % n;
      double[] fromLeft = new double[2];
      RecvStatus st = c.sendrecv(new double[] {me, 0.5}, right, 4, fromLeft, left, 4);
      assertEquals(status(left, 4, 2, 8), st);
      assertArrayEquals(new double[] {left, 0.5}, fromLeft);
      allReduceWorks(c);
    });
  }

  @Test
  void truncationIsAnErrorAndTheCommunicatorStaysUsable() throws Exception {
    Ranks.threads(2, null, c -> {
      if (c.rank() == 0) {
        c.send(new int[] {1, 2, 3, 4}, 1, 5);
        c.send(new int[] {7}, 1, 6);
        c.send(new float[] {1.5f}, 1, 7);
        c.send(new int[] {8}, 1, 8);
        c.send(new int[] {1, 2, 3}, 1, 9);
      } else {
        int[] two = new int[2];
        TruncatedException e = assertThrows(TruncatedException.class, () -> c.recv(two, 0, 5));
        assertEquals(14, e.status());
        assertArrayEquals(new int[] {1, 2}, two, "the array holds the message's first part");
        assertEquals(status(0, 6, 1, 4), c.recv(two, 0, 6));
        assertEquals(7, two[0]);
        MismatchException m = assertThrows(MismatchException.class, () -> c.recv(two, 0, 7));
        assertTrue(m.getMessage().contains("dtype"), m.getMessage());
        assertEquals(status(0, 8, 1, 4), c.recv(two, 0, 8));
        assertEquals(8, two[0]);
        // The async form fails its future with the same exception.
        CompletableFuture<RecvStatus> f = c.recvAsync(two, 0, 9);
        Throwable t = assertThrows(java.util.concurrent.ExecutionException.class,
            () -> f.get(30, TimeUnit.SECONDS)).getCause();
        assertTrue(t instanceof TruncatedException, String.valueOf(t));
        assertArrayEquals(new int[] {1, 2}, two);
      }
      allReduceWorks(c);
    });
  }

  @Test
  void badTagsAndRanksAreNamed() throws Exception {
    Ranks.threads(2, null, c -> {
      int[] buf = new int[2];
      InvalidArgumentException e =
          assertThrows(InvalidArgumentException.class, () -> c.send(buf, 1, -5));
      assertTrue(e.getMessage().contains("send: tag -5 is negative; tags are 0 to TAG_UB (2147483647)"),
          e.getMessage());
      e = assertThrows(InvalidArgumentException.class, () -> c.ssend(buf, 1, Communicator.ANY_TAG));
      assertTrue(e.getMessage().contains("ssend: tag -1"), e.getMessage());
      e = assertThrows(InvalidArgumentException.class, () -> c.recv(buf, 0, -3));
      assertTrue(e.getMessage().contains("recv: tag -3"), e.getMessage());
      e = assertThrows(InvalidArgumentException.class, () -> c.send(buf, 2, 0));
      assertTrue(e.getMessage().contains("send: dest 2 is not a rank of this 2-rank communicator"),
          e.getMessage());
      e = assertThrows(InvalidArgumentException.class, () -> c.recv(buf, 5, 0));
      assertTrue(e.getMessage().contains("recv: source 5"), e.getMessage());
      e = assertThrows(InvalidArgumentException.class, () -> c.iprobe(-7, 0));
      assertTrue(e.getMessage().contains("iprobe: source -7"), e.getMessage());
      e = assertThrows(InvalidArgumentException.class, () -> c.mprobe(0, -2));
      assertTrue(e.getMessage().contains("mprobe: tag -2"), e.getMessage());
      e = assertThrows(InvalidArgumentException.class, () -> c.sendrecv(buf, 0, 0, buf, 3, 0));
      assertTrue(e.getMessage().contains("sendrecv: source 3"), e.getMessage());
      // TAG_UB itself is a valid tag
      int other = 1 - c.rank();
      int[] got = new int[1];
      assertEquals(status(other, Communicator.TAG_UB, 1, 4),
          c.sendrecv(new int[] {3}, other, Communicator.TAG_UB, got, other, Communicator.TAG_UB));
      allReduceWorks(c);
    });
  }

  @Test
  void probeAndIprobeDescribeTheMessage() throws Exception {
    Ranks.threads(2, null, c -> {
      if (c.rank() == 1) {
        // Nothing can have been sent yet: rank 0 sends after the barrier.
        assertEquals(Optional.empty(), c.iprobe(Communicator.ANY_SOURCE, Communicator.ANY_TAG));
      }
      c.barrier();
      if (c.rank() == 0) {
        c.send(new long[] {5, 5, 5, 5, 5, 5, 5}, 1, 9);
        c.send(new long[] {6, 6}, 1, 10);
      } else {
        RecvStatus st = c.probe(Communicator.ANY_SOURCE, 9);
        assertEquals(status(0, 9, 7, 8), st);
        long[] buf = new long[(int) st.count()];
        assertEquals(st, c.recv(buf, st.source(), st.tag()));
        assertArrayEquals(new long[] {5, 5, 5, 5, 5, 5, 5}, buf);
        long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(30);
        Optional<RecvStatus> seen;
        while ((seen = c.iprobe(0, Communicator.ANY_TAG)).isEmpty()) {
          assertTrue(System.nanoTime() < deadline, "iprobe never saw the message");
          Thread.onSpinWait();
        }
        assertEquals(status(0, 10, 2, 8), seen.get());
        assertEquals(seen, c.iprobe(0, 10), "a probe does not receive");
        long[] two = new long[2];
        c.recv(two, 0, 10);
        assertArrayEquals(new long[] {6, 6}, two);
        assertEquals(Optional.empty(), c.iprobe(Communicator.ANY_SOURCE, Communicator.ANY_TAG));
      }
      allReduceWorks(c);
    });
  }

  @Test
  void ssendCompletesOnlyOnceReceived() throws Exception {
    Ranks.threads(2, null, c -> {
      if (c.rank() == 0) {
        CompletableFuture<Void> sent = c.ssendAsync(new int[] {42, 42, 42}, 1, 3);
        // Rank 1 posts its receive for tag 3 only after "go" (tag 9).
        sleep(300);
        assertFalse(sent.isDone(), "a synchronous send completed before any receive was posted");
        c.send(new byte[] {1}, 1, 9);
        sent.join();
        c.ssend(new int[] {43}, 1, 4); // the blocking form returns once received
      } else {
        c.recv(new byte[1], 0, 9);
        int[] buf = new int[3];
        assertEquals(status(0, 3, 3, 4), c.recv(buf, 0, 3));
        assertArrayEquals(new int[] {42, 42, 42}, buf);
        int[] one = new int[1];
        c.recv(one, 0, 4);
        assertEquals(43, one[0]);
      }
      allReduceWorks(c);
    });
  }

  @Test
  void aPendingReceiveCanBeCancelled() throws Exception {
    Ranks.threads(2, null, c -> {
      if (c.rank() == 1) {
        short[] buf = {7, 7};
        CompletableFuture<RecvStatus> f = c.recvAsync(buf, 0, 42); // nothing is sent with tag 42
        assertTrue(f.cancel(true), "an unmatched receive must be cancellable");
        assertTrue(f.isCancelled());
        assertThrows(CancellationException.class, f::join);
        assertArrayEquals(new short[] {7, 7}, buf, "a cancelled receive moves nothing");
        // Only now may rank 0 go on (to its collective, which would fail a
        // receive from it still pending: "matched before that collective runs").
        c.send(new byte[] {1}, 0, 45);
        // A completed receive cannot be cancelled any more.
        short[] got = new short[2];
        CompletableFuture<RecvStatus> g = c.recvAsync(got, 0, 43);
        assertEquals(status(0, 43, 2, 2), g.join());
        assertFalse(g.cancel(true));
        assertArrayEquals(new short[] {4, 3}, got);
        // A synchronous send to itself that nobody received can be cancelled too.
        CompletableFuture<Void> self = c.ssendAsync(new short[] {1}, 1, 44);
        assertTrue(self.cancel(true));
        assertTrue(self.isCancelled());
        assertEquals(Optional.empty(), c.iprobe(1, 44), "the cancelled message is gone");
      } else {
        c.recv(new byte[1], 1, 45);
        c.send(new short[] {4, 3}, 1, 43);
      }
      allReduceWorks(c);
    });
  }

  @Test
  void mprobeReceivesExactlyItsMessage() throws Exception {
    Ranks.threads(2, null, c -> {
      if (c.rank() == 0) {
        for (int v = 1; v <= 3; v++) {
          c.send(new int[] {v, v}, 1, 7); // the same tag
        }
        c.send(new int[] {5}, 1, 8);
        c.send(new int[] {6}, 1, 8);
      } else {
        int[] buf = new int[2];
        try (Message first = c.mprobe(0, 7)) {
          assertEquals(status(0, 7, 2, 4), first.status());
          // The first message is taken: a plain receive gets the second.
          c.recv(buf, 0, 7);
          assertArrayEquals(new int[] {2, 2}, buf);
          assertEquals(status(0, 7, 2, 4), first.recv(buf));
          assertArrayEquals(new int[] {1, 1}, buf);
          assertTrue(first.isReceived());
          assertThrows(IllegalStateException.class, () -> first.recv(buf));
        }
        // Non-blocking receive of a matched message.
        Message third = c.mprobe(Communicator.ANY_SOURCE, Communicator.ANY_TAG);
        int[] got = new int[4];
        assertEquals(status(0, 7, 2, 4), third.recvAsync(got).join());
        assertArrayEquals(new int[] {3, 3, 0, 0}, got);
        // A closed message is discarded: the next receive gets the one after.
        c.mprobe(0, 8).close();
        int[] one = new int[1];
        assertEquals(status(0, 8, 1, 4), c.recv(one, 0, 8));
        assertEquals(6, one[0]);
        assertEquals(Optional.empty(), c.iprobe(Communicator.ANY_SOURCE, Communicator.ANY_TAG));
      }
      allReduceWorks(c);
    });
  }

  /**
   * Rank 0 calls {@code blocking} through withOptions (a 300 ms deadline, the
   * communicator's is 60 s) while rank 1 sends nothing: it fails with a
   * TimeoutException well before the communicator's deadline.
   */
  private static void perCallTimeoutEnds(String what, java.util.function.Consumer<Collectives> blocking)
      throws Exception {
    Config slow = Config.builder().timeout(java.time.Duration.ofSeconds(60)).build();
    CallOptions quick = CallOptions.builder().timeout(java.time.Duration.ofMillis(300)).build();
    java.util.concurrent.CountDownLatch done = new java.util.concurrent.CountDownLatch(1);
    Ranks.threads(2, slow, c -> {
      if (c.rank() == 0) {
        try {
          long start = System.nanoTime();
          TimeoutException e = assertThrows(TimeoutException.class, () -> blocking.accept(c.withOptions(quick)),
              what + " through withOptions did not time out");
          long ms = TimeUnit.NANOSECONDS.toMillis(System.nanoTime() - start);
          assertTrue(ms >= 250 && ms < 5_000, what + " timed out after " + ms + " ms, not ~300 ms: " + e.getMessage());
        } finally {
          done.countDown();
        }
      } else {
        try {
          done.await(60, TimeUnit.SECONDS); // rank 1 sends nothing
        } catch (InterruptedException e) {
          Thread.currentThread().interrupt();
        }
      }
    });
  }

  @Test
  void probeThroughWithOptionsHonoursItsTimeout() throws Exception {
    perCallTimeoutEnds("probe", s -> s.probe(1, 5));
  }

  @Test
  void mprobeThroughWithOptionsHonoursItsTimeout() throws Exception {
    perCallTimeoutEnds("mprobe", s -> s.mprobe(Communicator.ANY_SOURCE, 5).close());
  }

  @Test
  void probesThroughWithOptionsFindMessagesAndTheirMessagesReceive() throws Exception {
    CallOptions opts = CallOptions.builder().timeout(java.time.Duration.ofSeconds(20)).build();
    Ranks.threads(2, null, c -> {
      Collectives s = c.withOptions(opts);
      if (c.rank() == 0) {
        s.send(new int[] {4, 5}, 1, 3);
        s.send(new int[] {6}, 1, 4);
      } else {
        assertEquals(status(0, 3, 2, 4), s.probe(0, 3));
        long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(30);
        Optional<RecvStatus> seen;
        while ((seen = s.iprobe(0, 4)).isEmpty()) {
          assertTrue(System.nanoTime() < deadline, "iprobe never saw the message");
          Thread.onSpinWait();
        }
        assertEquals(status(0, 4, 1, 4), seen.get());
        int[] buf = new int[2];
        try (Message m = s.mprobe(0, 3)) {
          assertEquals(status(0, 3, 2, 4), m.recv(buf));
        }
        assertArrayEquals(new int[] {4, 5}, buf);
        Optional<Message> m = s.improbe(0, 4);
        assertTrue(m.isPresent(), "improbe of a message iprobe saw");
        int[] one = new int[1];
        assertEquals(status(0, 4, 1, 4), m.get().recv(one));
        assertEquals(6, one[0]);
        assertEquals(Optional.empty(), s.iprobe(Communicator.ANY_SOURCE, Communicator.ANY_TAG));
      }
      allReduceWorks(c);
    });
  }

  @Test
  void improbeWithNothingThereIsEmpty() throws Exception {
    Ranks.threads(2, null, c -> {
      // No rank sends anything before the barrier.
      assertEquals(Optional.empty(), c.improbe(Communicator.ANY_SOURCE, Communicator.ANY_TAG));
      c.barrier();
      if (c.rank() == 0) {
        c.send(new byte[] {9}, 1, 1);
      } else {
        long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(30);
        Optional<Message> m;
        while ((m = c.improbe(0, 1)).isEmpty()) {
          assertTrue(System.nanoTime() < deadline, "improbe never saw the message");
          Thread.onSpinWait();
        }
        // Taken out of matching: neither improbe nor iprobe see it again.
        assertEquals(Optional.empty(), c.improbe(0, 1));
        assertEquals(Optional.empty(), c.iprobe(0, 1));
        byte[] buf = new byte[4];
        assertEquals(status(0, 1, 1, 1), m.get().recv(buf));
        assertEquals(9, buf[0]);
      }
      // PROC_NULL: a message that receives nothing.
      try (Message none = c.mprobe(Communicator.PROC_NULL, Communicator.ANY_TAG)) {
        assertTrue(none.status().isProcNull());
        assertTrue(none.recv(new int[1]).isProcNull());
      }
      allReduceWorks(c);
    });
  }

  private static void sleep(long ms) {
    try {
      Thread.sleep(ms);
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
      throw new AssertionError(e);
    }
  }
}
