package org.omniccl;

/** An argument is wrong (length, root, rank, data type for the op, ...), detected before anything was sent. */
public class InvalidArgumentException extends OmniCCLException {
  private static final long serialVersionUID = 1L;

  /**
   * Creates the exception.
   *
   * @param message what was wrong
   */
  public InvalidArgumentException(String message) {
    super(INVALID_ARGUMENT, message);
  }
}
