package org.omniccl;

/** Ranks called different operations (op, data type, count, root or reduce op); the message names the ranks and fields. */
public class MismatchException extends OmniCCLException {
  private static final long serialVersionUID = 1L;

  /**
   * Creates the exception.
   *
   * @param message what was wrong
   */
  public MismatchException(String message) {
    super(MISMATCH, message);
  }
}
