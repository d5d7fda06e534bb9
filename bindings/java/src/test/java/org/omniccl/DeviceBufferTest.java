package org.omniccl;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.file.Files;
import java.nio.file.Paths;
import java.time.Duration;
import java.util.Optional;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Assumptions;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/**
 * DeviceBuffer and CallOptions on a machine without a GPU: a CUDA pointer is
 * OCCL_ERR_UNSUPPORTED naming the device and the reason, host and CUDA
 * buffers in one call are an invalid argument, and the options work on host
 * memory (a per-call deadline). The CUDA data path itself is tested by the
 * C++ gpu suites on a GPU machine.
 */
@Timeout(value = 60, unit = TimeUnit.SECONDS)
class DeviceBufferTest {
  /** OCCL_ERR_UNSUPPORTED. */
  private static final int UNSUPPORTED = 2;
  /** A made-up device address: never dereferenced, as no GPU is used here. */
  private static final long FAKE_DEVICE_PTR = 0x7f0000000000L;

  private static Communicator single() {
    return Communicator.init(Ranks.fileRendezvous(), 0, 1);
  }

  /** Where a CUDA driver is present the fake pointers would reach a GPU: skipped, visibly. */
  private static void assumeNoGpu() {
    Assumptions.assumeFalse(Files.exists(Paths.get("/dev/nvidiactl")),
        "a GPU is present (/dev/nvidiactl); these error-path tests are for machines without one");
  }

  private static ByteBuffer direct(int bytes) {
    return ByteBuffer.allocateDirect(bytes).order(ByteOrder.nativeOrder());
  }

  private static void assertUnsupportedCuda(String call, Runnable r) {
    OmniCCLException e = assertThrows(OmniCCLException.class, r::run, call);
    assertEquals(UNSUPPORTED, e.status(), call + ": " + e.getMessage());
    assertTrue(e.getMessage().contains("cuda:0"), call + ": " + e.getMessage());
    assertTrue(e.getMessage().contains("no CUDA"), call + ": " + e.getMessage());
  }

  @Test
  void cudaPointersAreUnsupportedNamingTheDeviceAndTheReason() {
    assumeNoGpu();
    DeviceBuffer a = DeviceBuffer.cuda(FAKE_DEVICE_PTR, 4, DataType.FLOAT32, 0);
    DeviceBuffer b = DeviceBuffer.cuda(FAKE_DEVICE_PTR + 64, 4, DataType.FLOAT32, 0);
    try (Communicator c = single()) {
      Collectives s = c.withOptions(CallOptions.builder().stream(0x1234).build());
      assertUnsupportedCuda("allReduce", () -> c.allReduce(a, b, ReduceOp.SUM));
      assertUnsupportedCuda("allReduce on a stream", () -> s.allReduce(a, b, ReduceOp.SUM));
      assertUnsupportedCuda("allReduce in place", () -> s.allReduce(a, ReduceOp.AVG));
      assertUnsupportedCuda("broadcast", () -> s.broadcast(a, 0));
      assertUnsupportedCuda("reduce", () -> s.reduce(a, b, ReduceOp.MAX, 0));
      assertUnsupportedCuda("gather", () -> s.gather(a, b, 0));
      assertUnsupportedCuda("scatter", () -> s.scatter(a, b, 0));
      assertUnsupportedCuda("allGather", () -> s.allGather(a, b));
      assertUnsupportedCuda("reduceScatter", () -> s.reduceScatter(a, b, ReduceOp.SUM));
      assertUnsupportedCuda("allToAll", () -> s.allToAll(a, b));
      assertUnsupportedCuda("allGatherv", () -> s.allGatherv(a, b, new int[] {4}, null));
      assertUnsupportedCuda("allToAllv",
          () -> s.allToAllv(a, new int[] {4}, null, b, new int[] {4}, null));
      assertUnsupportedCuda("gatherv", () -> s.gatherv(a, b, new int[] {4}, null, 0));
      assertUnsupportedCuda("scatterv", () -> s.scatterv(a, new int[] {4}, null, b, 0));
      // Non-blocking: the call itself fails, no future is returned.
      assertUnsupportedCuda("allReduceAsync", () -> s.allReduceAsync(a, b, ReduceOp.SUM));
      // The communicator still works afterwards.
      int[] x = {2, 3};
      c.allReduce(x, ReduceOp.SUM);
      assertArrayEquals(new int[] {2, 3}, x);
    }
  }

  @Test
  void hostAndCudaBuffersInOneCallAreAnInvalidArgument() {
    assumeNoGpu();
    DeviceBuffer cuda = DeviceBuffer.cuda(FAKE_DEVICE_PTR, 4, DataType.FLOAT32, 0);
    DeviceBuffer host = DeviceBuffer.host(direct(16), DataType.FLOAT32);
    try (Communicator c = single()) {
      InvalidArgumentException e = assertThrows(InvalidArgumentException.class,
          () -> c.allReduce(host, cuda, ReduceOp.SUM));
      assertEquals("allReduce: send is on cpu but recv is on cuda:0; the buffers of one call must"
          + " not be on different devices", e.getMessage());
      e = assertThrows(InvalidArgumentException.class, () -> c.allGather(cuda, host));
      assertTrue(e.getMessage().contains("different devices"), e.getMessage());
      e = assertThrows(InvalidArgumentException.class, () -> c.scatter(host, cuda, 0));
      assertTrue(e.getMessage().contains("different devices"), e.getMessage());
    }
  }

  @Test
  void deviceBufferArgumentsAreChecked() {
    IllegalArgumentException e = assertThrows(IllegalArgumentException.class,
        () -> DeviceBuffer.cuda(0, 3, DataType.INT8, 0));
    assertEquals("the device pointer is 0 (NULL) but count is 3", e.getMessage());
    e = assertThrows(IllegalArgumentException.class,
        () -> DeviceBuffer.cuda(FAKE_DEVICE_PTR, -1, DataType.INT8, 0));
    assertEquals("count is negative (-1)", e.getMessage());
    e = assertThrows(IllegalArgumentException.class,
        () -> DeviceBuffer.cudaManaged(FAKE_DEVICE_PTR, 1, DataType.INT8, -2));
    assertEquals("device is negative (-2)", e.getMessage());
    DeviceBuffer d = DeviceBuffer.cudaManaged(FAKE_DEVICE_PTR, 10, DataType.BFLOAT16, 3);
    assertEquals("cuda_managed:3", d.device());
    assertEquals(10, d.count());
    assertEquals(DataType.BFLOAT16, d.type());
    // A host view is the direct buffer from position to limit.
    ByteBuffer b = direct(32);
    b.position(8);
    DeviceBuffer h = DeviceBuffer.host(b, DataType.INT64);
    assertEquals("cpu", h.device());
    assertEquals(3, h.count());
  }

  @Test
  void optionsBecomeTheNativeStreamAndTimeout() {
    CallOptions o = CallOptions.builder().stream(0x5eed0000L).timeout(Duration.ofMillis(1250)).build();
    assertArrayEquals(new long[] {0x5eed0000L, 1250}, o.toNative());
    assertEquals(0x5eed0000L, o.stream());
    assertEquals(Optional.of(Duration.ofMillis(1250)), o.timeout());
    // Defaults: the default stream, and OCCL_CONFIG_UNDEF_INT64 (the communicator's deadline).
    assertArrayEquals(new long[] {0, Long.MIN_VALUE}, CallOptions.defaults().toNative());
    assertEquals(Optional.empty(), CallOptions.defaults().timeout());
    IllegalArgumentException e = assertThrows(IllegalArgumentException.class,
        () -> CallOptions.builder().timeout(Duration.ofNanos(999_999)));
    assertTrue(e.getMessage().contains("shorter than 1 ms"), e.getMessage());
  }

  @Test
  void optionsApplyToArraysAndHostBuffers() throws Exception {
    Config config = Config.builder().timeout(Duration.ofSeconds(30)).build();
    CallOptions opts = CallOptions.builder().timeout(Duration.ofSeconds(20)).build();
    Ranks.threads(2, config, c -> {
      Collectives s = c.withOptions(opts);
      double[] x = {c.rank() + 1.0, 10};
      s.allReduce(x, ReduceOp.SUM);
      assertArrayEquals(new double[] {3, 20}, x);
      ByteBuffer send = direct(8);
      send.putLong(0, 5L * (c.rank() + 1));
      ByteBuffer recv = direct(8);
      s.allReduce(DeviceBuffer.host(send, DataType.INT64), DeviceBuffer.host(recv, DataType.INT64),
          ReduceOp.MAX);
      assertEquals(10L, recv.getLong(0));
      int[] all = new int[2];
      try {
        s.allGatherAsync(new int[] {c.rank()}, all).get(30, TimeUnit.SECONDS);
      } catch (InterruptedException | ExecutionException | java.util.concurrent.TimeoutException e) {
        throw new AssertionError(e);
      }
      assertArrayEquals(new int[] {0, 1}, all);
      s.barrier();
    });
  }

  @Test
  void aPerCallTimeoutEndsAnArrayCallBeforeTheCommunicatorsDeadline() throws Exception {
    Config slow = Config.builder().timeout(Duration.ofSeconds(60)).build();
    CallOptions quick = CallOptions.builder().timeout(Duration.ofMillis(800)).build();
    CountDownLatch done = new CountDownLatch(1);
    Ranks.threads(2, slow, c -> {
      if (c.rank() == 0) {
        long start = System.nanoTime();
        TimeoutException e = assertThrows(TimeoutException.class,
            () -> c.withOptions(quick).allReduce(new float[8], ReduceOp.SUM));
        long ms = TimeUnit.NANOSECONDS.toMillis(System.nanoTime() - start);
        assertTrue(e.getMessage().contains("rank 1"), e.getMessage());
        assertTrue(ms < 30_000, "took " + ms + " ms: the call's deadline was not used");
        done.countDown();
      } else {
        try {
          done.await(45, TimeUnit.SECONDS); // rank 1 never calls allReduce
        } catch (InterruptedException e) {
          Thread.currentThread().interrupt();
        }
      }
    });
  }
}
