package org.omniccl;

/**
 * What a receive got, or what a probe found (MPI_Status).
 *
 * <p>For a receive, {@code bytes} and {@code count} are what was stored in the
 * buffer; for a probe ({@link Communicator#probe}, {@link Communicator#iprobe},
 * {@link Message#status()}) they describe the whole message, {@code count} in
 * the sender's element type, so a buffer of {@code count} elements holds it.
 * A receive from {@link Communicator#PROC_NULL} has source {@code PROC_NULL},
 * tag {@link Communicator#ANY_TAG} and zero bytes and count.
 *
 * @param source the sender's rank, or {@link Communicator#PROC_NULL}
 * @param tag the message's tag, or {@link Communicator#ANY_TAG} for PROC_NULL
 * @param bytes bytes received (a receive) or in the message (a probe)
 * @param count elements received (a receive) or in the message (a probe)
 */
public record RecvStatus(int source, int tag, long bytes, long count) {
  /** The status in the native layout {source, tag, bytes, count}. */
  static RecvStatus of(long[] raw) {
    return new RecvStatus((int) raw[0], (int) raw[1], raw[2], raw[3]);
  }

  /**
   * Whether this is the status of a receive or probe of {@link Communicator#PROC_NULL}.
   *
   * @return true for PROC_NULL
   */
  public boolean isProcNull() {
    return source == Communicator.PROC_NULL;
  }
}
