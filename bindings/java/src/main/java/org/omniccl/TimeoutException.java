package org.omniccl;

/** A deadline passed; the message names the ranks that did not arrive. */
public class TimeoutException extends OmniCCLException {
  private static final long serialVersionUID = 1L;

  /**
   * Creates the exception.
   *
   * @param message what was wrong
   */
  public TimeoutException(String message) {
    super(TIMEOUT, message);
  }
}
