package org.omniccl;

import java.util.Objects;
import java.util.concurrent.CompletableFuture;

/**
 * The collectives of a {@link Communicator}, each called with the same {@link
 * CallOptions} (a CUDA stream, a deadline): what {@link
 * Communicator#withOptions} returns, like a gRPC stub's {@code
 * withDeadlineAfter}. It has every overload the communicator has (arrays,
 * ByteBuffers, {@link DeviceBuffer}s; blocking and {@code ...Async}) and
 * holds no resources: make one per call or keep it, as convenient. Closing or
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

  @Override
  CompletableFuture<Void> doAllReduce(Buf send, Buf recv, ReduceOp op, CallOptions o, boolean async) {
    return comm.doAllReduce(send, recv, op, o, async);
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
