package org.omniccl;

import java.util.Arrays;
import java.util.Base64;
import java.util.Objects;

/**
 * Rendezvous information made by one process and shared with every rank out
 * of band (NCCL style), e.g. through a broadcast variable or a file. The
 * process that called {@link #create()} serves the rendezvous until it exits,
 * so it must stay alive while the ranks initialise. The bytes include the
 * job's secret: share them only with the job's ranks.
 */
public final class UniqueId {
  /** Size of a unique id in bytes. */
  public static final int BYTES = 128;

  private final byte[] bytes;

  private UniqueId(byte[] bytes) {
    this.bytes = bytes;
  }

  /**
   * Creates a new id and starts serving its rendezvous in this process.
   *
   * @return the new id
   * @throws OmniCCLException if the rendezvous cannot be served
   */
  public static UniqueId create() {
    byte[] b = new byte[BYTES];
    OmniCCLNative.getUniqueId(b);
    return new UniqueId(b);
  }

  /**
   * An id from bytes made by {@link #toBytes()}.
   *
   * @param bytes exactly {@link #BYTES} bytes
   * @return the id
   */
  public static UniqueId fromBytes(byte[] bytes) {
    Objects.requireNonNull(bytes, "bytes");
    if (bytes.length != BYTES) {
      throw new IllegalArgumentException("UniqueId: need " + BYTES + " bytes, got " + bytes.length);
    }
    return new UniqueId(bytes.clone());
  }

  /**
   * An id from a string made by {@link #toBase64()}.
   *
   * @param text the Base64 text
   * @return the id
   */
  public static UniqueId fromBase64(String text) {
    return fromBytes(Base64.getDecoder().decode(Objects.requireNonNull(text, "text")));
  }

  /**
   * The id's bytes.
   *
   * @return a copy of the {@link #BYTES} bytes
   */
  public byte[] toBytes() {
    return bytes.clone();
  }

  /**
   * The id as Base64 text, for passing through strings.
   *
   * @return the text
   */
  public String toBase64() {
    return Base64.getEncoder().encodeToString(bytes);
  }

  byte[] internalBytes() {
    return bytes;
  }

  @Override
  public boolean equals(Object o) {
    return o instanceof UniqueId && Arrays.equals(bytes, ((UniqueId) o).bytes);
  }

  @Override
  public int hashCode() {
    return Arrays.hashCode(bytes);
  }

  /** Does not print the bytes (they hold the job's secret). */
  @Override
  public String toString() {
    return "UniqueId[" + BYTES + " bytes]";
  }
}
