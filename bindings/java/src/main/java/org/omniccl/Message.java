package org.omniccl;

import java.util.concurrent.CompletableFuture;
import java.util.concurrent.atomic.AtomicLong;

/**
 * A message taken out of matching by a matched probe ({@link
 * Communicator#mprobe}, {@link Communicator#improbe}; MPI_Message): no other
 * receive or probe can get it, only this object's {@code recv(data)} or
 * {@code recvAsync(data)} (every array type, direct ByteBuffers, {@link
 * DeviceBuffer}s), and only once: afterwards {@link #isReceived()} is true
 * and another receive is an {@link IllegalStateException}.
 *
 * <pre>{@code
 * try (Message msg = comm.mprobe(Communicator.ANY_SOURCE, 7)) {
 *   int[] data = new int[(int) msg.status().count()];   // exactly its size
 *   msg.recv(data);
 * }
 * }</pre>
 *
 * <p><b>Closing.</b> {@link #close()} discards a message not yet received:
 * it is received into an empty buffer, which frees the library's copy and,
 * as any receive would, completes a synchronous sender's send; closing a
 * received message does nothing. Use try-with-resources. A message neither
 * received nor closed stays held by the library (counted in {@code
 * OMNICCL_P2P_UNEXPECTED_BYTES}) until its communicator is closed; there is
 * no finalizer. {@code close()} is idempotent and thread-safe.
 */
public final class Message extends MessageReceives implements AutoCloseable {
  /** OCCL_MESSAGE_NULL: no message (received or discarded). */
  static final long NULL = 0;
  /** OCCL_MESSAGE_NO_PROC: the message of a matched probe of PROC_NULL. */
  static final long NO_PROC = 1;

  private final Communicator comm;
  /** The message number; NULL once received or closed. */
  private final AtomicLong handle;
  private final RecvStatus status;
  /** The per-call options of the probe that took it (null: none); its receive uses them too. */
  private final CallOptions opts;

  Message(Communicator comm, long handle, RecvStatus status, CallOptions opts) {
    this.comm = comm;
    this.handle = new AtomicLong(handle);
    this.status = status;
    this.opts = opts;
  }

  /**
   * What the matched probe found: the sender, tag and size of the whole
   * message ({@code count} in the sender's element type).
   *
   * @return the probe's status
   */
  public RecvStatus status() {
    return status;
  }

  /**
   * The communicator the message belongs to.
   *
   * @return the communicator
   */
  public Communicator communicator() {
    return comm;
  }

  /**
   * Whether the message was received (or discarded by {@link #close()}).
   *
   * @return true once spent
   */
  public boolean isReceived() {
    return handle.get() == NULL;
  }

  /** Takes the message number for a receive; the message is spent from here on. */
  long take(String what) {
    long h = handle.getAndSet(NULL);
    if (h == NULL) {
      throw new IllegalStateException(what + ": the message (from rank " + status.source() + ", tag "
          + status.tag() + ") was already received or closed");
    }
    return h;
  }

  @Override
  CompletableFuture<RecvStatus> doMrecv(Buf data, boolean async) {
    return comm.doMrecv(this, data, opts, async);
  }

  /**
   * Discards the message if it was not received (see the class comment);
   * otherwise does nothing. Never waits for a peer.
   *
   * @throws OmniCCLException if the library could not discard it (e.g. the
   *     communicator failed); the message is spent anyway
   */
  @Override
  public void close() {
    long h = handle.getAndSet(NULL);
    if (h != NULL && h != NO_PROC && !comm.isClosed()) {
      comm.discard(h);
    }
  }

  @Override
  public String toString() {
    return "Message[" + status + (isReceived() ? ", received]" : "]");
  }
}
