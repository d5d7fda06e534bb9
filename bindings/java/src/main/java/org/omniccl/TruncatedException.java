package org.omniccl;

/**
 * A received message was longer than the receive buffer ({@code
 * OCCL_ERR_TRUNCATED}): the buffer holds the message's first part and the
 * communicator stays usable (MPI_ERR_TRUNCATE).
 */
public class TruncatedException extends OmniCCLException {
  private static final long serialVersionUID = 1L;

  /**
   * Creates the exception.
   *
   * @param message what was wrong (sizes, source, tag)
   */
  public TruncatedException(String message) {
    super(TRUNCATED, message);
  }
}
