package org.omniccl;

import java.util.concurrent.atomic.AtomicLong;

/**
 * A buffer registered with a communicator ({@link
 * Communicator#registerWindow(long, long)}; NCCL's {@code
 * ncclCommWindowRegister}): while it is open, operations on the CUDA IPC
 * path whose buffers lie inside it on every rank (at the same offset of the
 * same registration) read the peers' memory in place instead of copying
 * through the communicator's scratch buffers: allReduce (input and output
 * registered), allGather, broadcast and reduceScatter (input registered).
 *
 * <pre>{@code
 * long grads = ...;   // a cudaMalloc'd pointer of this rank's GPU (JCuda, JavaCPP, ...)
 * try (Window w = comm.registerWindow(grads, n * 4L)) {   // collective
 *   DeviceBuffer buf = DeviceBuffer.cuda(grads, n, DataType.FLOAT32, 0);
 *   for (int step = 0; step < steps; step++) {
 *     comm.allReduce(buf, buf, ReduceOp.SUM);   // reads the peers' grads in place
 *   }
 * }                                             // deregistered (collective); grads may be freed
 * }</pre>
 *
 * <p><b>Collective.</b> Registering and {@link #close()} are collective:
 * every rank registers one buffer of its own (its own size and place) in
 * the same order and closes its windows in the same order. Keep the memory
 * allocated until the window is closed.
 *
 * <p><b>Without the device path</b> (a communicator without GPUs, or CUDA
 * buffers that are staged) registering succeeds and changes nothing; the
 * address must still be non-zero and the size at least one byte.
 *
 * <p>There is no finalizer: a window that is never closed stays registered
 * until its communicator is closed. {@code close()} is idempotent and
 * thread-safe.
 */
public final class Window implements AutoCloseable {
  /** OCCL_WINDOW_NULL: no registration (closed). */
  static final long NULL = 0;

  private final Communicator comm;
  /** The window number; NULL once closed. */
  private final AtomicLong handle;
  private final long address;
  private final long bytes;

  Window(Communicator comm, long handle, long address, long bytes) {
    this.comm = comm;
    this.handle = new AtomicLong(handle);
    this.address = address;
    this.bytes = bytes;
  }

  /**
   * The communicator the buffer is registered with.
   *
   * @return the communicator
   */
  public Communicator communicator() {
    return comm;
  }

  /**
   * The address of the registered buffer.
   *
   * @return the address given to {@link Communicator#registerWindow(long, long)}
   */
  public long address() {
    return address;
  }

  /**
   * The size of the registered buffer.
   *
   * @return its size in bytes
   */
  public long bytes() {
    return bytes;
  }

  /**
   * Whether {@link #close()} was called.
   *
   * @return true once closed
   */
  public boolean isClosed() {
    return handle.get() == NULL;
  }

  /**
   * Deregisters the buffer: collective, in the same order on every rank.
   * Waits (within the communicator's deadline) until the operations issued
   * before it that may read the buffer have passed on every rank; the memory
   * may be freed once it returns. Closing a closed window, or a window whose
   * communicator was closed (its registrations went with it), does nothing.
   *
   * @throws OmniCCLException if the library could not deregister (e.g. a
   *     {@link TimeoutException}); the window is closed anyway
   */
  @Override
  public void close() {
    long h = handle.getAndSet(NULL);
    if (h != NULL && !comm.isClosed()) {
      comm.deregisterWindow(h);
    }
  }

  @Override
  public String toString() {
    return "Window[" + bytes + " bytes at 0x" + Long.toHexString(address)
        + (isClosed() ? ", closed]" : "]");
  }
}
