package org.omniccl;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNotEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.nio.file.Files;
import java.nio.file.Paths;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Assumptions;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/**
 * Registered buffers ({@link Communicator#registerWindow}, {@link Window}) on
 * communicators without the device path: registering succeeds and changes
 * nothing, closing deregisters, and address 0 or an empty size is an
 * InvalidArgumentException on every rank. What registration changes on the
 * CUDA IPC path is tested by the C++ gpu suites.
 */
@Timeout(value = 60, unit = TimeUnit.SECONDS)
class WindowTest {
  /**
   * A made-up address: a communicator without the device path only checks
   * that it is not 0 and never maps or dereferences it.
   */
  private static final long FAKE_PTR = 0x7f0000000000L;

  /** One rank: never the device path (there is no peer to map). */
  private static Communicator single() {
    return Communicator.init(Ranks.fileRendezvous(), 0, 1);
  }

  @Test
  void registerAndCloseOnASingleRank() {
    try (Communicator c = single()) {
      Window w = c.registerWindow(FAKE_PTR, 4096);
      assertEquals(FAKE_PTR, w.address());
      assertEquals(4096, w.bytes());
      assertEquals(c, w.communicator());
      assertFalse(w.isClosed());
      assertEquals("Window[4096 bytes at 0x7f0000000000]", w.toString());
      w.close();
      assertTrue(w.isClosed());
      w.close(); // idempotent
      // Two at once, closed by try-with-resources (in reverse order).
      try (Window a = c.registerWindow(FAKE_PTR, 64); Window b = c.registerWindow(FAKE_PTR + 64, 64)) {
        assertNotEquals(a, b);
      }
      long[] v = {5};
      c.allReduce(v, ReduceOp.SUM); // still usable
      assertEquals(5, v[0]);
    }
  }

  @Test
  void closingAfterTheCommunicatorDoesNothing() {
    Communicator c = single();
    Window late = c.registerWindow(FAKE_PTR, 8);
    c.close(); // its registrations go with it
    late.close();
    assertTrue(late.isClosed());
    assertThrows(IllegalStateException.class, () -> c.registerWindow(FAKE_PTR, 8));
  }

  @Test
  void zeroAddressOrSizeIsAnInvalidArgument() {
    try (Communicator c = single()) {
      InvalidArgumentException e =
          assertThrows(InvalidArgumentException.class, () -> c.registerWindow(0, 64));
      assertTrue(e.getMessage().contains("rank 0"), e.getMessage());
      assertThrows(InvalidArgumentException.class, () -> c.registerWindow(FAKE_PTR, 0));
      e = assertThrows(InvalidArgumentException.class, () -> c.registerWindow(FAKE_PTR, -1));
      assertEquals("registerWindow: bytes is negative (-1)", e.getMessage());
      // Nothing was left registered; the communicator is still usable.
      c.registerWindow(FAKE_PTR, 1).close();
      c.barrier();
    }
  }

  @Test
  void twoRanksRegisterCollectively() throws Exception {
    // Two ranks on one host may get the CUDA IPC path where a GPU is present,
    // and a made-up address would be refused there.
    Assumptions.assumeFalse(Files.exists(Paths.get("/dev/nvidiactl")),
        "a GPU is present (/dev/nvidiactl); this test is for machines without one");
    Ranks.threads(2, null, c -> {
      try (Window w = c.registerWindow(FAKE_PTR, 1024 + c.rank())) { // sizes may differ
        assertEquals(1024 + c.rank(), w.bytes());
      }
      // A bad argument on one rank fails on every rank, naming it.
      InvalidArgumentException e = assertThrows(InvalidArgumentException.class,
          () -> c.registerWindow(c.rank() == 1 ? 0 : FAKE_PTR, 64));
      assertTrue(e.getMessage().contains("rank 1"), e.getMessage());
      c.registerWindow(FAKE_PTR, 64).close();
    });
  }
}
