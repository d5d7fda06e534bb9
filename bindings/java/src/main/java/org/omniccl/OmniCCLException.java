package org.omniccl;

/**
 * A failed OmniCCL operation. Unchecked; the message is the library's own
 * description of what was wrong (argument, rank, peer, operation, sequence
 * number, hint). Subclasses name the failures callers most often handle:
 * {@link TimeoutException}, {@link PeerFailureException},
 * {@link MismatchException}, {@link InvalidArgumentException} and
 * {@link TruncatedException}.
 */
public class OmniCCLException extends RuntimeException {
  private static final long serialVersionUID = 1L;

  /** C status codes (omniccl.h, fixed values). */
  static final int SUCCESS = 0;
  static final int INVALID_ARGUMENT = 1;
  static final int TIMEOUT = 3;
  static final int PEER_FAILURE = 4;
  static final int MISMATCH = 5;
  static final int IN_PROGRESS = 9;
  static final int TRUNCATED = 14;

  /** The C status code ({@code occl_status_t}). */
  private final int status;

  /**
   * Creates an exception for a C status code.
   *
   * @param status the {@code occl_status_t} value of the failure
   * @param message what was wrong
   */
  public OmniCCLException(int status, String message) {
    super(message);
    this.status = status;
  }

  /**
   * The C status code ({@code occl_status_t}), e.g. 3 for {@code OCCL_ERR_TIMEOUT}.
   *
   * @return the status code
   */
  public int status() {
    return status;
  }

  /**
   * The name and description of {@link #status()}, e.g.
   * "OCCL_ERR_TIMEOUT: a deadline passed".
   *
   * @return the status name
   */
  public String statusName() {
    return OmniCCLNative.statusString(status);
  }

  /** The exception for a failed status; called by the JNI layer. */
  static OmniCCLException fromStatus(int status, String message) {
    switch (status) {
      case INVALID_ARGUMENT:
        return new InvalidArgumentException(message);
      case TIMEOUT:
        return new TimeoutException(message);
      case PEER_FAILURE:
        return new PeerFailureException(message);
      case MISMATCH:
        return new MismatchException(message);
      case TRUNCATED:
        return new TruncatedException(message);
      default:
        return new OmniCCLException(status, message);
    }
  }
}
