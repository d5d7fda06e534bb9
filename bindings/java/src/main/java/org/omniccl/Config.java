package org.omniccl;

import java.time.Duration;
import java.util.Objects;

/**
 * Communicator options; unset options take the environment setting
 * ({@code OMNICCL_TIMEOUT}, {@code OMNICCL_TRANSPORT}, {@code OMNICCL_ALGO}),
 * else the built-in default. Immutable; made with {@link #builder()}.
 *
 * <pre>{@code
 * Config config = Config.builder().timeout(Duration.ofSeconds(30)).transport("tcp").build();
 * }</pre>
 */
public final class Config {
  // Read by the JNI layer (omniccl.i): names and types are part of it.
  private final long timeoutMs;
  private final String transport;
  private final String algorithm;

  private Config(Builder b) {
    this.timeoutMs = b.timeoutMs;
    this.transport = b.transport;
    this.algorithm = b.algorithm;
  }

  /**
   * A builder with every option unset.
   *
   * @return a new builder
   */
  public static Builder builder() {
    return new Builder();
  }

  /**
   * The deadline of each blocking call, if set.
   *
   * @return the timeout in milliseconds, or 0 when unset
   */
  public long timeoutMillis() {
    return timeoutMs;
  }

  /**
   * The transport, if set.
   *
   * @return "auto", "shm" or "tcp", or null when unset
   */
  public String transport() {
    return transport;
  }

  /**
   * The algorithm override, if set.
   *
   * @return e.g. "ring" or "all_reduce=ring,broadcast=tree", or null when unset
   */
  public String algorithm() {
    return algorithm;
  }

  @Override
  public String toString() {
    return "Config{timeoutMs=" + timeoutMs + ", transport=" + transport + ", algorithm=" + algorithm + "}";
  }

  /** Builds a {@link Config}. */
  public static final class Builder {
    private long timeoutMs;
    private String transport;
    private String algorithm;

    private Builder() {}

    /**
     * The deadline of each blocking call (default 10 minutes).
     *
     * @param timeout a positive duration of at least one millisecond
     * @return this builder
     */
    public Builder timeout(Duration timeout) {
      Objects.requireNonNull(timeout, "timeout");
      long ms = timeout.toMillis();
      if (ms <= 0) {
        throw new IllegalArgumentException("timeout must be at least 1 ms, got " + timeout);
      }
      this.timeoutMs = ms;
      return this;
    }

    /**
     * The transport between ranks: "auto" (shared memory on one host, TCP
     * across hosts), "shm" or "tcp".
     *
     * @param transport the transport name; checked when a communicator is created
     * @return this builder
     */
    public Builder transport(String transport) {
      this.transport = Objects.requireNonNull(transport, "transport");
      return this;
    }

    /**
     * An algorithm for every collective that has it ("ring"), or a list
     * ("all_reduce=ring,broadcast=tree"); checked when a communicator is created.
     *
     * @param algorithm the override
     * @return this builder
     */
    public Builder algorithm(String algorithm) {
      this.algorithm = Objects.requireNonNull(algorithm, "algorithm");
      return this;
    }

    /**
     * The options set so far.
     *
     * @return a new Config
     */
    public Config build() {
      return new Config(this);
    }
  }
}
