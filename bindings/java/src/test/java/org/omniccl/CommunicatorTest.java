package org.omniccl;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.time.Duration;
import java.util.Optional;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/** Creation, queries, split, unique ids, options. */
@Timeout(value = 60, unit = TimeUnit.SECONDS)
class CommunicatorTest {

  @Test
  void rankSizeTransportAndVersion() throws Exception {
    Ranks.threads(3, null, c -> {
      assertEquals(3, c.size());
      assertTrue(c.rank() >= 0 && c.rank() < 3);
      assertEquals("shm", c.transport());
      assertEquals("Communicator[rank " + c.rank() + " of 3]", c.toString());
    });
    assertEquals(300, Communicator.libraryVersion()); // 0.3.0, as omniccl.h says
  }

  @Test
  void splitByParityWithOneRankOptingOut() throws Exception {
    Ranks.threads(5, null, c -> {
      int color = c.rank() == 4 ? Communicator.SPLIT_NOCOLOR : c.rank() % 2;
      Optional<Communicator> sub = c.split(color, -c.rank()); // reversed order
      if (c.rank() == 4) {
        assertFalse(sub.isPresent());
        return;
      }
      try (Communicator s = sub.orElseThrow()) {
        assertEquals(2, s.size());
        // ranks {0,2} or {1,3}; key -rank puts the larger old rank first
        int expectedRank = c.rank() >= 2 ? 0 : 1;
        assertEquals(expectedRank, s.rank());
        long[] v = {c.rank()};
        s.allReduce(v, ReduceOp.SUM);
        assertEquals(color == 0 ? 2 : 4, v[0]);
      }
    });
  }

  @Test
  void uniqueIdRendezvous() throws Exception {
    UniqueId id = UniqueId.create();
    assertEquals(UniqueId.BYTES, id.toBytes().length);
    assertEquals(id, UniqueId.fromBase64(id.toBase64()));
    assertEquals("UniqueId[128 bytes]", id.toString());
    java.util.concurrent.ExecutorService pool = java.util.concurrent.Executors.newFixedThreadPool(3);
    try {
      java.util.List<java.util.concurrent.Future<double[]>> results = new java.util.ArrayList<>();
      for (int r = 0; r < 3; r++) {
        int rank = r;
        UniqueId copy = UniqueId.fromBytes(id.toBytes()); // as if received out of band
        results.add(pool.submit(() -> {
          try (Communicator c = Communicator.init(copy, rank, 3)) {
            double[] d = {rank + 1.0, 10.0};
            c.allReduce(d, ReduceOp.premulSum(0.5));
            return d;
          }
        }));
      }
      for (java.util.concurrent.Future<double[]> f : results) {
        assertArrayEquals(new double[] {3.0, 15.0}, f.get(30, TimeUnit.SECONDS));
      }
    } finally {
      pool.shutdownNow();
    }
    IllegalArgumentException e = assertThrows(IllegalArgumentException.class,
        () -> UniqueId.fromBytes(new byte[5]));
    assertEquals("UniqueId: need 128 bytes, got 5", e.getMessage());
  }

  @Test
  void badOptionsAndArgumentsAreNamed() {
    InvalidArgumentException e = assertThrows(InvalidArgumentException.class,
        () -> Communicator.init(Ranks.fileRendezvous(), 0, 1,
            Config.builder().transport("carrier-pigeon").build()));
    assertTrue(e.getMessage().contains("carrier-pigeon"), e.getMessage());
    e = assertThrows(InvalidArgumentException.class,
        () -> Communicator.init(Ranks.fileRendezvous(), 0, 1, Config.builder().algorithm("no-such-algo").build()));
    assertTrue(e.getMessage().contains("no-such-algo"), e.getMessage());
    e = assertThrows(InvalidArgumentException.class, () -> Communicator.init("tcp://127.0.0.1:1", 2, 2));
    assertEquals("init: rank 2 is not in [0, 2) (worldSize must be >= 1)", e.getMessage());
    OmniCCLException bad = assertThrows(OmniCCLException.class, () -> Communicator.init("gopher://x", 0, 1));
    assertTrue(bad.getMessage().contains("gopher://x"), bad.getMessage());
    IllegalArgumentException t = assertThrows(IllegalArgumentException.class,
        () -> Config.builder().timeout(Duration.ZERO));
    assertTrue(t.getMessage().contains("at least 1 ms"), t.getMessage());
  }

  @Test
  void configAndAlgorithmOverrideStillGiveTheRightResult() throws Exception {
    Config ring = Config.builder().algorithm("all_reduce=ring").timeout(Duration.ofSeconds(30)).build();
    assertEquals(30_000, ring.timeoutMillis());
    Ranks.threads(3, ring, c -> {
      int[] v = new int[1000];
      java.util.Arrays.fill(v, c.rank() + 1);
      c.allReduce(v, ReduceOp.SUM);
      for (int x : v) {
        assertEquals(6, x);
      }
      c.setTimeout(5_000);
    });
  }

  @Test
  void reduceOpNamesAndValues() {
    assertEquals(13, ReduceOp.values().size());
    assertEquals("MINLOC", ReduceOp.values().get(12).name());
    assertEquals(16, DataType.COMPLEX128.byteSize());
    assertEquals("BXOR", ReduceOp.BXOR.name());
    assertEquals("LXOR", ReduceOp.values().get(10).name());
    assertTrue(ReduceOp.premulSum(3).isPremulSum());
    assertEquals(ReduceOp.premulSum(3), ReduceOp.premulSum(3.0));
    assertThrows(IllegalArgumentException.class, () -> ReduceOp.premulSum(Double.NaN));
    assertEquals(2, DataType.BFLOAT16.byteSize());
  }
}
