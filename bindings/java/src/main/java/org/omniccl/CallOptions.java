package org.omniccl;

import java.time.Duration;
import java.util.Objects;

/**
 * Options of individual calls, given to {@link Communicator#withOptions}: the
 * CUDA stream that the calls' CUDA buffers are ordered on (default: the
 * default stream; ignored for host memory), and a deadline for each call in
 * place of the communicator's ({@link Config.Builder#timeout}). They reach
 * the C library through its {@code occl_*_ex} entry points ({@code
 * occl_options_t}). Immutable.
 *
 * <pre>{@code
 * CallOptions opts = CallOptions.builder().stream(cudaStream).timeout(Duration.ofSeconds(5)).build();
 * comm.withOptions(opts).allReduce(data, ReduceOp.SUM);
 * }</pre>
 */
public final class CallOptions {
  /** OCCL_CONFIG_UNDEF_INT64: the field keeps the library's default. */
  static final long UNDEF = Long.MIN_VALUE;

  private static final CallOptions DEFAULTS = new CallOptions(0, UNDEF);

  private final long stream;
  private final long timeoutMs;

  private CallOptions(long stream, long timeoutMs) {
    this.stream = stream;
    this.timeoutMs = timeoutMs;
  }

  /**
   * Options with every field at its default (the same as no options).
   *
   * @return the default options
   */
  public static CallOptions defaults() {
    return DEFAULTS;
  }

  /**
   * Starts building options.
   *
   * @return a builder with every field at its default
   */
  public static Builder builder() {
    return new Builder();
  }

  /**
   * The CUDA stream ({@code cudaStream_t} as a long); 0 is the default stream.
   *
   * @return the stream handle
   */
  public long stream() {
    return stream;
  }

  /**
   * The deadline of each call, if set.
   *
   * @return the timeout, or empty for the communicator's
   */
  public java.util.Optional<Duration> timeout() {
    return timeoutMs == UNDEF ? java.util.Optional.empty() : java.util.Optional.of(Duration.ofMillis(timeoutMs));
  }

  /**
   * What the JNI layer copies into {@code occl_options_t}, in this order:
   * {@code stream}, {@code timeout_ms} (UNDEF for the communicator's).
   */
  long[] toNative() {
    return new long[] {stream, timeoutMs};
  }

  @Override
  public String toString() {
    return "CallOptions[stream=0x" + Long.toHexString(stream)
        + (timeoutMs == UNDEF ? "" : ", timeout=" + timeoutMs + " ms") + "]";
  }

  /** Builds {@link CallOptions}. */
  public static final class Builder {
    private long stream;
    private long timeoutMs = UNDEF;

    private Builder() {}

    /**
     * Orders the calls' CUDA work on this stream. The stream must belong to
     * the GPU of the buffers and stay alive until the calls have run on it.
     *
     * @param cudaStream a {@code cudaStream_t} as a long (its address); 0 for the default stream
     * @return this builder
     */
    public Builder stream(long cudaStream) {
      this.stream = cudaStream;
      return this;
    }

    /**
     * Ends each call with a {@link TimeoutException} if it waits longer than
     * this (counted from when it first has to wait).
     *
     * @param timeout at least 1 ms
     * @return this builder
     * @throws IllegalArgumentException if the timeout is shorter than 1 ms
     */
    public Builder timeout(Duration timeout) {
      Objects.requireNonNull(timeout, "timeout");
      long ms;
      try {
        ms = timeout.toMillis();
      } catch (ArithmeticException e) {
        ms = Long.MAX_VALUE;
      }
      if (ms < 1) {
        throw new IllegalArgumentException("timeout " + timeout + " is shorter than 1 ms");
      }
      this.timeoutMs = ms;
      return this;
    }

    /**
     * The options.
     *
     * @return immutable options
     */
    public CallOptions build() {
      return new CallOptions(stream, timeoutMs);
    }
  }
}
