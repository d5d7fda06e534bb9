package org.omniccl;

/** A peer exited, was killed or disconnected. */
public class PeerFailureException extends OmniCCLException {
  private static final long serialVersionUID = 1L;

  /**
   * Creates the exception.
   *
   * @param message what was wrong
   */
  public PeerFailureException(String message) {
    super(PEER_FAILURE, message);
  }
}
