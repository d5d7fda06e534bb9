package org.omniccl;

import java.util.Objects;
import java.util.Optional;
import java.util.concurrent.CompletableFuture;

/**
 * The calls of a {@link Communicator} that take per-call options, each called
 * with the same {@link CallOptions} (a CUDA stream, a deadline): what {@link
 * Communicator#withOptions} returns, like a gRPC stub's {@code
 * withDeadlineAfter}. It has every collective and point-to-point overload the
 * communicator has (arrays, ByteBuffers, {@link DeviceBuffer}s; blocking and
 * {@code ...Async}; send, ssend, recv, sendrecv; barrier; probe, iprobe,
 * mprobe and improbe, whose {@link Message} receives with the same options)
 * and holds no resources: make one per call or keep it, as convenient. Closing or
 * aborting the communicator ends its use.
 *
 * <pre>{@code
 * comm.withOptions(CallOptions.builder().timeout(Duration.ofSeconds(2)).build())
 *     .allReduce(counts, ReduceOp.SUM);   // TimeoutException after 2 s, whatever the Config says
 * }</pre>
 */
public final class Collectives extends ArrayCollectives {
  private final Communicator comm;
  private final CallOptions opts;

  Collectives(Communicator comm, CallOptions opts) {
    this.comm = comm;
    this.opts = Objects.requireNonNull(opts, "options");
  }

  /**
   * The communicator these calls run on.
   *
   * @return the communicator
   */
  public Communicator communicator() {
    return comm;
  }

  @Override
  CallOptions options() {
    return opts;
  }

  /**
   * {@link Communicator#barrier()} with these options.
   *
   * @throws OmniCCLException on timeout, peer failure or abort
   */
  public void barrier() {
    comm.doBarrier(opts, false);
  }

  /**
   * {@link Communicator#barrierAsync()} with these options.
   *
   * @return a future completing once every rank has entered the barrier
   */
  public CompletableFuture<Void> barrierAsync() {
    return comm.doBarrier(opts, true);
  }

  /**
   * {@link Communicator#probe(int, int)} with these options: a timeout ends
   * the wait for a message with a {@link TimeoutException}.
   *
   * @param source a rank, {@link Communicator#ANY_SOURCE} or {@link Communicator#PROC_NULL}
   * @param tag 0 to {@link Communicator#TAG_UB}, or {@link Communicator#ANY_TAG}
   * @return the message's status
   * @throws OmniCCLException on timeout, peer failure, or as {@link Communicator#probe(int, int)}
   */
  public RecvStatus probe(int source, int tag) {
    return comm.doProbe(source, tag, opts);
  }

  /**
   * {@link Communicator#iprobe(int, int)} with these options (it never waits).
   *
   * @param source a rank, {@link Communicator#ANY_SOURCE} or {@link Communicator#PROC_NULL}
   * @param tag 0 to {@link Communicator#TAG_UB}, or {@link Communicator#ANY_TAG}
   * @return the status as {@link #probe} gives it, or empty
   * @throws OmniCCLException if the communicator failed
   */
  public Optional<RecvStatus> iprobe(int source, int tag) {
    return comm.doIprobe(source, tag, opts);
  }

  /**
   * {@link Communicator#mprobe(int, int)} with these options; the returned
   * message's {@code recv} uses them too (a stream for a device buffer).
   *
   * @param source a rank, {@link Communicator#ANY_SOURCE} or {@link Communicator#PROC_NULL}
   * @param tag 0 to {@link Communicator#TAG_UB}, or {@link Communicator#ANY_TAG}
   * @return the message, to receive with {@code message.recv(data)}
   * @throws OmniCCLException as {@link #probe}
   */
  public Message mprobe(int source, int tag) {
    return comm.doMprobe(source, tag, opts);
  }

  /**
   * {@link Communicator#improbe(int, int)} with these options (it never
   * waits); the returned message's {@code recv} uses them too.
   *
   * @param source a rank, {@link Communicator#ANY_SOURCE} or {@link Communicator#PROC_NULL}
   * @param tag 0 to {@link Communicator#TAG_UB}, or {@link Communicator#ANY_TAG}
   * @return the message as {@link #mprobe} gives it, or empty when none has come
   * @throws OmniCCLException if the communicator failed
   */
  public Optional<Message> improbe(int source, int tag) {
    return comm.doImprobe(source, tag, opts);
  }

  @Override
  CompletableFuture<Void> doAllReduce(Buf send, Buf recv, ReduceOp op, CallOptions o, boolean async) {
    return comm.doAllReduce(send, recv, op, o, async);
  }

  @Override
  CompletableFuture<Void> doScan(Buf send, Buf recv, ReduceOp op, boolean exclusive, CallOptions o,
      boolean async) {
    return comm.doScan(send, recv, op, exclusive, o, async);
  }

  @Override
  CompletableFuture<Void> doBroadcast(Buf data, int root, CallOptions o, boolean async) {
    return comm.doBroadcast(data, root, o, async);
  }

  @Override
  CompletableFuture<Void> doReduce(Buf send, Buf recv, ReduceOp op, int root, CallOptions o, boolean async) {
    return comm.doReduce(send, recv, op, root, o, async);
  }

  @Override
  CompletableFuture<Void> doGather(Buf send, Buf recv, int root, CallOptions o, boolean async) {
    return comm.doGather(send, recv, root, o, async);
  }

  @Override
  CompletableFuture<Void> doScatter(Buf send, Buf recv, int root, CallOptions o, boolean async) {
    return comm.doScatter(send, recv, root, o, async);
  }

  @Override
  CompletableFuture<Void> doAllGather(Buf send, Buf recv, CallOptions o, boolean async) {
    return comm.doAllGather(send, recv, o, async);
  }

  @Override
  CompletableFuture<Void> doReduceScatter(Buf send, Buf recv, ReduceOp op, CallOptions o, boolean async) {
    return comm.doReduceScatter(send, recv, op, o, async);
  }

  @Override
  CompletableFuture<Void> doAllToAll(Buf send, Buf recv, CallOptions o, boolean async) {
    return comm.doAllToAll(send, recv, o, async);
  }

  @Override
  CompletableFuture<Void> doAllGatherv(Buf send, Buf recv, int[] recvCounts, int[] recvDispls,
      CallOptions o, boolean async) {
    return comm.doAllGatherv(send, recv, recvCounts, recvDispls, o, async);
  }

  @Override
  CompletableFuture<Void> doAllToAllv(Buf send, int[] sendCounts, int[] sendDispls, Buf recv,
      int[] recvCounts, int[] recvDispls, CallOptions o, boolean async) {
    return comm.doAllToAllv(send, sendCounts, sendDispls, recv, recvCounts, recvDispls, o, async);
  }

  @Override
  CompletableFuture<Void> doGatherv(Buf send, Buf recv, int[] recvCounts, int[] recvDispls, int root,
      CallOptions o, boolean async) {
    return comm.doGatherv(send, recv, recvCounts, recvDispls, root, o, async);
  }

  @Override
  CompletableFuture<Void> doScatterv(Buf send, int[] sendCounts, int[] sendDispls, Buf recv, int root,
      CallOptions o, boolean async) {
    return comm.doScatterv(send, sendCounts, sendDispls, recv, root, o, async);
  }

  @Override
  CompletableFuture<Void> doSend(Buf data, int peer, CallOptions o, boolean async) {
    return comm.doSend(data, peer, o, async);
  }

  @Override
  CompletableFuture<Void> doRecv(Buf data, int peer, CallOptions o, boolean async) {
    return comm.doRecv(data, peer, o, async);
  }

  @Override
  CompletableFuture<Void> doSendTagged(Buf data, int dest, int tag, boolean synchronous, CallOptions o,
      boolean async) {
    return comm.doSendTagged(data, dest, tag, synchronous, o, async);
  }

  @Override
  CompletableFuture<RecvStatus> doRecvTagged(Buf data, int source, int tag, CallOptions o, boolean async) {
    return comm.doRecvTagged(data, source, tag, o, async);
  }

  @Override
  RecvStatus doSendrecv(Buf send, int dest, int sendTag, Buf recv, int source, int recvTag, CallOptions o) {
    return comm.doSendrecv(send, dest, sendTag, recv, source, recvTag, o);
  }

  @Override
  public String toString() {
    return comm + ".withOptions(" + opts + ")";
  }
}
