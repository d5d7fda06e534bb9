package org.omniccl;

import java.lang.ref.Reference;
import java.util.Objects;
import java.util.Optional;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ConcurrentLinkedQueue;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.atomic.AtomicLong;

/**
 * A group of ranks that run collectives together: one rank of a job, held by
 * a process or by one thread of it (threads of one JVM may each hold a
 * different rank of the same job, as Spark tasks do).
 *
 * <pre>{@code
 * try (Communicator comm = Communicator.init("env://")) {   // omniccl-run -n 4 java ...
 *   double[] hist = localHistogram();
 *   comm.allReduce(hist, ReduceOp.SUM);                      // in place, on every rank
 * }
 * }</pre>
 *
 * <p><b>Buffers.</b> Every collective takes primitive arrays ({@code byte[]
 * short[] int[] long[] float[] double[] boolean[]}, copied through direct
 * memory) or direct {@link java.nio.ByteBuffer}s with a {@link DataType}
 * (used in place from position to limit, zero copy, native byte order; a heap
 * buffer is an {@link IllegalArgumentException}). Lengths are checked before
 * anything is sent ({@link InvalidArgumentException}). Every rank must call
 * the same collectives in the same order with matching lengths, root and op;
 * a difference is a {@link MismatchException} on the ranks involved.
 *
 * <p><b>CUDA memory and per-call options.</b> Every collective also takes
 * {@link DeviceBuffer}s (a CUDA device pointer, count, type and device; see
 * there for the NCCL stream semantics), and {@link #withOptions(CallOptions)}
 * gives calls a CUDA stream and their own deadline. On a machine without a
 * GPU a CUDA buffer is an {@code OCCL_ERR_UNSUPPORTED} error naming the
 * device and the reason.
 *
 * <p><b>Non-blocking forms</b> ({@code allReduceAsync}, ...) start the
 * operation and return a {@link CompletableFuture} that completes (on a
 * thread of this communicator) when the data have arrived, or exceptionally
 * with the {@link OmniCCLException}. The future keeps the buffers reachable
 * until then; do not touch them before it completes. Operations run in the
 * order they were issued. Actions chained with {@code thenRun} and the like
 * run on that thread and delay later completions: chain long work with the
 * {@code ...Async} forms of CompletableFuture.
 *
 * <p><b>Point to point, MPI style.</b> {@code send(data, dest, tag)}, {@code
 * ssend} (synchronous), {@code recv(data, source, tag)} returning a {@link
 * RecvStatus}, {@code sendrecv}, their {@code ...Async} forms, {@link
 * #probe}, {@link #iprobe}, {@link #mprobe} and {@link #improbe} (a {@link
 * Message}); sources may be {@link #ANY_SOURCE} or {@link #PROC_NULL}, tags
 * {@link #ANY_TAG} on the receiving side. Receive buffers are upper bounds
 * ({@link TruncatedException} for a longer message). {@code cancel(true)} on
 * the future of {@code recvAsync(data, source, tag)} (or of {@code
 * ssendAsync} to this rank itself) asks the library to cancel it
 * (MPI_Cancel): the future ends cancelled only if the library did, with the
 * buffer untouched; otherwise cancel returns false and it completes as usual.
 * Futures derived from it ({@code thenApply}, ...) do not pass a cancel on.
 *
 * <p><b>Threads.</b> Issue operations on one communicator from one thread at
 * a time (calls from several threads are serialised here, but their order
 * across ranks would not be defined). {@link #abort()} and {@link #close()}
 * may be called from any thread: an operation blocked in another thread then
 * fails with an {@link OmniCCLException} ({@code OCCL_ERR_ABORTED}).
 *
 * <p><b>Failures</b> are answers, never hangs: every blocking call has a
 * deadline ({@link Config.Builder#timeout}), a dead peer turns into a {@link
 * PeerFailureException} within seconds.
 */
public final class Communicator extends ArrayCollectives implements AutoCloseable {
  /** Color for {@link #split(int, int)} on ranks that want no new communicator. */
  public static final int SPLIT_NOCOLOR = -1;
  /** Receive source of {@code recv(data, source, tag)} and the probes: any rank (MPI_ANY_SOURCE). */
  public static final int ANY_SOURCE = -1;
  /** Receive tag of {@code recv(data, source, tag)} and the probes: any tag (MPI_ANY_TAG). */
  public static final int ANY_TAG = -1;
  /**
   * The null process (MPI_PROC_NULL), as a destination or source: the send or
   * receive completes at once and moves nothing; the status of a receive
   * from it has source PROC_NULL, tag {@link #ANY_TAG} and count 0.
   */
  public static final int PROC_NULL = -2;
  /** The largest tag: tags are 0 to TAG_UB ({@code Integer.MAX_VALUE}). */
  public static final int TAG_UB = Integer.MAX_VALUE;
  /** Rank or size argument meaning "from the environment" (env:// launchers). */
  static final int FROM_ENV = -1;

  /** The C handle; 0 once closed or aborted. */
  private final AtomicLong handle;
  private final int rank;
  private final int size;
  /** Serialises issuing: the C ABI wants one issuing thread at a time. */
  private final Object issueLock = new Object();
  private final Buf.Scratch scratch = new Buf.Scratch();
  /** Waits for non-blocking operations in issue order; started on first use. */
  private ExecutorService waiter;
  /**
   * Pre-multiplied-sum ops whose non-blocking operation has ended; destroyed
   * by the next issuing call (the waiter thread may not call into the
   * communicator while another thread issues).
   */
  private final ConcurrentLinkedQueue<Integer> retiredOps = new ConcurrentLinkedQueue<>();

  private Communicator(long h) {
    this.handle = new AtomicLong(h);
    int[] out = new int[1];
    try {
      OmniCCLNative.commRank(h, out);
      this.rank = out[0];
      OmniCCLNative.commSize(h, out);
      this.size = out[0];
    } catch (RuntimeException e) {
      OmniCCLNative.commDestroy(h);
      throw e;
    }
  }

  // ---------------------------------------------------------------- creation

  /**
   * Creates a communicator whose rendezvous, rank and size come from the
   * environment: {@code "env://"} (torchrun's MASTER_ADDR/MASTER_PORT/RANK/
   * WORLD_SIZE, Open MPI, MPICH, Slurm; {@code omniccl-run} sets them).
   * Collective over all ranks.
   *
   * @param initMethod "env://" (or a tcp:// or file:// URL with RANK and
   *     WORLD_SIZE in the environment)
   * @return the communicator
   * @throws OmniCCLException if the rendezvous fails (e.g. {@link TimeoutException})
   */
  public static Communicator init(String initMethod) {
    return init(initMethod, FROM_ENV, FROM_ENV, null);
  }

  /**
   * Creates rank {@code rank} of a {@code worldSize}-rank communicator.
   * Collective over all ranks.
   *
   * @param initMethod "tcp://host:port" (rank 0 serves the rendezvous there),
   *     "file:///dir" (a directory every rank sees) or "env://"
   * @param rank this rank, 0 to worldSize - 1
   * @param worldSize the number of ranks
   * @return the communicator
   * @throws OmniCCLException if the rendezvous fails
   */
  public static Communicator init(String initMethod, int rank, int worldSize) {
    return init(initMethod, rank, worldSize, null);
  }

  /**
   * Like {@link #init(String, int, int)}, with options.
   *
   * @param initMethod "tcp://host:port", "file:///dir" or "env://"
   * @param rank this rank, 0 to worldSize - 1
   * @param worldSize the number of ranks
   * @param config options, or null for the defaults
   * @return the communicator
   * @throws OmniCCLException if the rendezvous fails or an option is invalid
   */
  public static Communicator init(String initMethod, int rank, int worldSize, Config config) {
    Objects.requireNonNull(initMethod, "initMethod");
    checkRankSize(rank, worldSize);
    long[] out = new long[1];
    OmniCCLNative.commInit(out, initMethod, rank, worldSize, config);
    return new Communicator(out[0]);
  }

  /**
   * Creates rank {@code rank} from a {@link UniqueId} made by one process and
   * shared with every rank. Collective over all ranks.
   *
   * @param id the job's id
   * @param rank this rank, 0 to worldSize - 1
   * @param worldSize the number of ranks
   * @return the communicator
   * @throws OmniCCLException if the rendezvous fails
   */
  public static Communicator init(UniqueId id, int rank, int worldSize) {
    return init(id, rank, worldSize, null);
  }

  /**
   * Like {@link #init(UniqueId, int, int)}, with options.
   *
   * @param id the job's id
   * @param rank this rank, 0 to worldSize - 1
   * @param worldSize the number of ranks
   * @param config options, or null for the defaults
   * @return the communicator
   * @throws OmniCCLException if the rendezvous fails or an option is invalid
   */
  public static Communicator init(UniqueId id, int rank, int worldSize, Config config) {
    Objects.requireNonNull(id, "id");
    if (rank < 0 || worldSize < 1 || rank >= worldSize) {
      throw new InvalidArgumentException("init: rank " + rank + " is not in [0, " + worldSize
          + ") (worldSize must be >= 1)");
    }
    long[] out = new long[1];
    OmniCCLNative.commInitUniqueId(out, worldSize, id.internalBytes(), rank, config);
    return new Communicator(out[0]);
  }

  private static void checkRankSize(int rank, int worldSize) {
    boolean fromEnv = rank == FROM_ENV && worldSize == FROM_ENV;
    if (!fromEnv && (rank < 0 || worldSize < 1 || rank >= worldSize)) {
      throw new InvalidArgumentException("init: rank " + rank + " is not in [0, " + worldSize
          + ") (worldSize must be >= 1)");
    }
  }

  /**
   * The library's run-time version, MAJOR*10000 + MINOR*100 + PATCH.
   *
   * @return e.g. 300 for 0.3.0
   */
  public static int libraryVersion() {
    int[] v = new int[1];
    OmniCCLNative.getVersion(v);
    return v[0];
  }

  // ---------------------------------------------------------------- queries

  /**
   * The error that made this communicator unusable, or empty while it is
   * usable (NCCL's {@code ncclCommGetAsyncError}). After an operation failed
   * (a peer died, a deadline passed, a mismatch was reported) every later
   * call throws; this returns that failure without throwing it, for example
   * to a watchdog thread that decides to {@link #abort()}.
   *
   * <pre>{@code
   * comm.asyncError().ifPresent(e -> {
   *   log.error("communicator failed", e);
   *   comm.abort();
   * });
   * }</pre>
   *
   * @return the failure, as the exception the next call would throw
   * @throws IllegalStateException if the communicator is closed
   */
  public Optional<OmniCCLException> asyncError() {
    int[] status = new int[1];
    OmniCCLNative.commGetAsyncError(handle("asyncError"), status);
    if (status[0] == OmniCCLException.SUCCESS || status[0] == OmniCCLException.IN_PROGRESS) {
      return Optional.empty();
    }
    // Read at once: the call above left the failure's message on this thread.
    return Optional.of(OmniCCLException.fromStatus(status[0], OmniCCLNative.lastError()));
  }

  /**
   * This process's (or thread's) rank.
   *
   * @return 0 to size() - 1
   */
  public int rank() {
    return rank;
  }

  /**
   * The number of ranks.
   *
   * @return at least 1
   */
  public int size() {
    return size;
  }

  /**
   * The transport in use: "shm", "tcp", "mixed" (some peers on other hosts)
   * or "self" (one rank).
   *
   * @return the transport name
   * @throws IllegalStateException if closed
   */
  public String transport() {
    String[] name = new String[1];
    OmniCCLNative.commTransport(handle("transport"), name);
    return name[0];
  }

  /**
   * Changes the deadline of later blocking calls.
   *
   * @param timeoutMillis the deadline in milliseconds, at least 1
   * @throws IllegalStateException if closed
   */
  public void setTimeout(long timeoutMillis) {
    if (timeoutMillis <= 0) {
      throw new InvalidArgumentException("setTimeout: timeoutMillis must be > 0, got " + timeoutMillis);
    }
    OmniCCLNative.commSetTimeout(handle("setTimeout"), timeoutMillis);
  }

  /**
   * Whether {@link #close()} or {@link #abort()} was called.
   *
   * @return true once closed
   */
  public boolean isClosed() {
    return handle.get() == 0;
  }

  // ---------------------------------------------------------------- split, close

  /**
   * Splits this communicator: ranks passing the same color get a new
   * communicator together, ordered by key (ties by old rank). Collective over
   * this communicator.
   *
   * @param color a non-negative color, or {@link #SPLIT_NOCOLOR} for no new communicator
   * @param key the order within the new communicator
   * @return the new communicator, or empty for {@link #SPLIT_NOCOLOR}
   * @throws OmniCCLException if the split fails
   */
  public Optional<Communicator> split(int color, int key) {
    if (color < SPLIT_NOCOLOR) {
      throw new InvalidArgumentException("split: color " + color
          + " is negative; use a color >= 0 or Communicator.SPLIT_NOCOLOR");
    }
    long[] out = new long[1];
    synchronized (issueLock) {
      OmniCCLNative.commSplit(handle("split"), color, key, null, out);
    }
    return out[0] == 0 ? Optional.empty() : Optional.of(new Communicator(out[0]));
  }

  /**
   * Frees the communicator (peers are told this rank left). Idempotent and
   * thread-safe: only the first call does anything. Pending non-blocking
   * operations complete exceptionally ({@code OCCL_ERR_ABORTED}).
   */
  @Override
  public void close() {
    long h = handle.getAndSet(0);
    if (h != 0) {
      try {
        OmniCCLNative.commDestroy(h);
      } finally {
        shutdownWaiter();
      }
    }
  }

  /**
   * Aborts: local, never blocks on peers. Operations in flight on other
   * threads fail with {@code OCCL_ERR_ABORTED}; afterwards the communicator is
   * closed. Safe to call more than once and together with {@link #close()}.
   */
  public void abort() {
    long h = handle.getAndSet(0);
    if (h != 0) {
      try {
        OmniCCLNative.commAbort(h);
      } finally {
        shutdownWaiter();
      }
    }
  }

  private synchronized void shutdownWaiter() {
    if (waiter != null) {
      waiter.shutdown(); // queued waits still run: their operations end as aborted
    }
  }

  private long handle(String op) {
    long h = handle.get();
    if (h == 0) {
      throw new IllegalStateException(op + ": the communicator (rank " + rank + " of " + size
          + ") is closed");
    }
    return h;
  }

  // ---------------------------------------------------------------- barrier

  /**
   * Returns once every rank has entered the barrier.
   *
   * @throws OmniCCLException on timeout, peer failure or abort
   */
  public void barrier() {
    doBarrier(null, false);
  }

  /**
   * Starts a barrier.
   *
   * @return a future completing once every rank has entered it
   */
  public CompletableFuture<Void> barrierAsync() {
    return doBarrier(null, true);
  }

  CompletableFuture<Void> doBarrier(CallOptions opts, boolean async) {
    return run("barrier", null, null, (c, op, w) -> OmniCCLNative.barrierEx(c, nat(opts), w), async);
  }

  // ---------------------------------------------------------------- per-call options

  /**
   * This communicator's calls that take per-call options (collectives,
   * barrier, point-to-point sends and receives, probes and matched probes):
   * a CUDA stream that calls on {@link DeviceBuffer}s are ordered on, and a
   * deadline for each call in place of the communicator's.
   *
   * <pre>{@code
   * CallOptions opts = CallOptions.builder().stream(cudaStream).build();
   * comm.withOptions(opts).allReduce(deviceSend, deviceRecv, ReduceOp.SUM);
   * comm.withOptions(CallOptions.builder().timeout(Duration.ofMillis(500)).build()).barrier();
   * }</pre>
   *
   * @param options the options of every call made through the result
   * @return a view of this communicator; it holds no resources
   * @throws NullPointerException if options is null
   */
  public Collectives withOptions(CallOptions options) {
    return new Collectives(this, options);
  }

  /** Calls made on the Communicator itself use the defaults. */
  @Override
  CallOptions options() {
    return null;
  }

  private static long[] nat(CallOptions opts) {
    return opts == null ? null : opts.toNative();
  }

  // ---------------------------------------------------------------- the generic collectives

  @Override
  CompletableFuture<Void> doAllReduce(Buf send, Buf recv, ReduceOp op, CallOptions opts, boolean async) {
    String what = "allReduce";
    need(what, send, recv);
    sameType(what, send, recv);
    if (send.count != recv.count) {
      throw lengths(what, recv.name + " has " + recv.count + " elements, " + send.name + " "
          + send.count + "; they must be equal");
    }
    return run(what, new Buf[] {send, recv}, op,
        (c, o, w) -> OmniCCLNative.allReduceEx(t(send), t(recv), o, c, nat(opts), w), async);
  }

  @Override
  CompletableFuture<Void> doScan(Buf send, Buf recv, ReduceOp op, boolean exclusive, CallOptions opts,
      boolean async) {
    String what = exclusive ? "exscan" : "scan";
    need(what, send, recv);
    sameType(what, send, recv);
    if (send.count != recv.count) {
      throw lengths(what, recv.name + " has " + recv.count + " elements, " + send.name + " "
          + send.count + "; they must be equal");
    }
    return run(what, new Buf[] {send, recv}, op, (c, o, w) -> {
      if (exclusive) {
        OmniCCLNative.exscanEx(t(send), t(recv), o, c, nat(opts), w);
      } else {
        OmniCCLNative.scanEx(t(send), t(recv), o, c, nat(opts), w);
      }
    }, async);
  }

  @Override
  CompletableFuture<Void> doBroadcast(Buf data, int root, CallOptions opts, boolean async) {
    need("broadcast", data);
    checkRoot("broadcast", root);
    return run("broadcast", new Buf[] {data}, null,
        (c, o, w) -> OmniCCLNative.broadcastEx(t(data), root, c, nat(opts), w), async);
  }

  @Override
  CompletableFuture<Void> doReduce(Buf send, Buf recv, ReduceOp op, int root, CallOptions opts, boolean async) {
    String what = "reduce";
    need(what, send);
    checkRoot(what, root);
    Buf r = rank == root ? recv : null;
    if (rank == root) {
      needOnRoot(what, recv, root);
      sameType(what, send, recv);
      if (recv.count != send.count) {
        throw lengths(what, "on the root, " + recv.name + " has " + recv.count + " elements, "
            + send.name + " " + send.count + "; they must be equal");
      }
    }
    return run(what, new Buf[] {send, r}, op,
        (c, o, w) -> OmniCCLNative.reduceEx(t(send), t(r), o, root, c, nat(opts), w), async);
  }

  @Override
  CompletableFuture<Void> doGather(Buf send, Buf recv, int root, CallOptions opts, boolean async) {
    String what = "gather";
    need(what, send);
    checkRoot(what, root);
    Buf r = rank == root ? recv : null;
    if (rank == root) {
      needOnRoot(what, recv, root);
      sameType(what, send, recv);
      expect(what, recv, (long) size * send.count, "size() * " + send.name + " length");
    }
    return run(what, new Buf[] {send, r}, null,
        (c, o, w) -> OmniCCLNative.gatherEx(t(send), t(r), root, c, nat(opts), w), async);
  }

  @Override
  CompletableFuture<Void> doScatter(Buf send, Buf recv, int root, CallOptions opts, boolean async) {
    String what = "scatter";
    need(what, recv);
    checkRoot(what, root);
    Buf s = rank == root ? send : null;
    if (rank == root) {
      needOnRoot(what, send, root);
      sameType(what, send, recv);
      expect(what, send, (long) size * recv.count, "size() * " + recv.name + " length");
    }
    return run(what, new Buf[] {s, recv}, null,
        (c, o, w) -> OmniCCLNative.scatterEx(t(s), t(recv), root, c, nat(opts), w), async);
  }

  @Override
  CompletableFuture<Void> doAllGather(Buf send, Buf recv, CallOptions opts, boolean async) {
    String what = "allGather";
    need(what, send, recv);
    sameType(what, send, recv);
    expect(what, recv, (long) size * send.count, "size() * " + send.name + " length");
    return run(what, new Buf[] {send, recv}, null,
        (c, o, w) -> OmniCCLNative.allGatherEx(t(send), t(recv), c, nat(opts), w), async);
  }

  @Override
  CompletableFuture<Void> doReduceScatter(Buf send, Buf recv, ReduceOp op, CallOptions opts, boolean async) {
    String what = "reduceScatter";
    need(what, send, recv);
    sameType(what, send, recv);
    expect(what, send, (long) size * recv.count, "size() * " + recv.name + " length");
    return run(what, new Buf[] {send, recv}, op,
        (c, o, w) -> OmniCCLNative.reduceScatterEx(t(send), t(recv), o, c, nat(opts), w), async);
  }

  @Override
  CompletableFuture<Void> doAllToAll(Buf send, Buf recv, CallOptions opts, boolean async) {
    String what = "allToAll";
    need(what, send, recv);
    sameType(what, send, recv);
    if (send.count % size != 0) {
      throw lengths(what, send.name + " has " + send.count + " elements, not a multiple of size() "
          + size);
    }
    expect(what, recv, send.count, send.name + " length");
    return run(what, new Buf[] {send, recv}, null,
        (c, o, w) -> OmniCCLNative.allToAllEx(t(send), t(recv), c, nat(opts), w), async);
  }

  @Override
  CompletableFuture<Void> doAllGatherv(Buf send, Buf recv, int[] recvCounts, int[] recvDispls,
      CallOptions opts, boolean async) {
    String what = "allGatherv";
    need(what, send, recv);
    sameType(what, send, recv);
    long[] counts = layout(what, "recvCounts", recvCounts, "recvDispls", recvDispls, recv);
    long[] displs = recvDispls == null ? null : widen(recvDispls);
    if (counts[rank] != send.count) {
      throw lengths(what, "recvCounts[" + rank + "] is " + counts[rank] + " but this rank's "
          + send.name + " has " + send.count + " elements");
    }
    return run(what, new Buf[] {send, recv}, null,
        (c, o, w) -> OmniCCLNative.allGathervEx(t(send), t(recv), counts, displs, c, nat(opts), w), async);
  }

  @Override
  CompletableFuture<Void> doAllToAllv(Buf send, int[] sendCounts, int[] sendDispls, Buf recv,
      int[] recvCounts, int[] recvDispls, CallOptions opts, boolean async) {
    String what = "allToAllv";
    need(what, send, recv);
    sameType(what, send, recv);
    long[] sc = layout(what, "sendCounts", sendCounts, "sendDispls", sendDispls, send);
    long[] sd = sendDispls == null ? null : widen(sendDispls);
    long[] rc = layout(what, "recvCounts", recvCounts, "recvDispls", recvDispls, recv);
    long[] rd = recvDispls == null ? null : widen(recvDispls);
    return run(what, new Buf[] {send, recv}, null,
        (c, o, w) -> OmniCCLNative.allToAllvEx(t(send), sc, sd, t(recv), rc, rd, c, nat(opts), w), async);
  }

  @Override
  CompletableFuture<Void> doGatherv(Buf send, Buf recv, int[] recvCounts, int[] recvDispls,
      int root, CallOptions opts, boolean async) {
    String what = "gatherv";
    need(what, send);
    checkRoot(what, root);
    Buf r = rank == root ? recv : null;
    long[] counts = null;
    long[] displs = null;
    if (rank == root) {
      needOnRoot(what, recv, root);
      sameType(what, send, recv);
      counts = layout(what, "recvCounts", recvCounts, "recvDispls", recvDispls, recv);
      displs = recvDispls == null ? null : widen(recvDispls);
      if (counts[rank] != send.count) {
        throw lengths(what, "recvCounts[" + rank + "] is " + counts[rank] + " but the root's "
            + send.name + " has " + send.count + " elements");
      }
    }
    long[] fc = counts;
    long[] fd = displs;
    return run(what, new Buf[] {send, r}, null,
        (c, o, w) -> OmniCCLNative.gathervEx(t(send), t(r), fc, fd, root, c, nat(opts), w), async);
  }

  @Override
  CompletableFuture<Void> doScatterv(Buf send, int[] sendCounts, int[] sendDispls, Buf recv,
      int root, CallOptions opts, boolean async) {
    String what = "scatterv";
    need(what, recv);
    checkRoot(what, root);
    Buf s = rank == root ? send : null;
    long[] counts = null;
    long[] displs = null;
    if (rank == root) {
      needOnRoot(what, send, root);
      sameType(what, send, recv);
      counts = layout(what, "sendCounts", sendCounts, "sendDispls", sendDispls, send);
      displs = sendDispls == null ? null : widen(sendDispls);
      if (counts[rank] != recv.count) {
        throw lengths(what, "sendCounts[" + rank + "] is " + counts[rank] + " but the root's "
            + recv.name + " has " + recv.count + " elements");
      }
    }
    long[] fc = counts;
    long[] fd = displs;
    return run(what, new Buf[] {s, recv}, null,
        (c, o, w) -> OmniCCLNative.scattervEx(t(s), fc, fd, t(recv), root, c, nat(opts), w), async);
  }

  @Override
  CompletableFuture<Void> doSend(Buf data, int peer, CallOptions opts, boolean async) {
    need("send", data);
    checkPeer("send", peer);
    return run("send", new Buf[] {data}, null,
        (c, o, w) -> OmniCCLNative.sendEx(t(data), peer, c, nat(opts), w), async);
  }

  @Override
  CompletableFuture<Void> doRecv(Buf data, int peer, CallOptions opts, boolean async) {
    need("recv", data);
    checkPeer("recv", peer);
    return run("recv", new Buf[] {data}, null,
        (c, o, w) -> OmniCCLNative.recvEx(t(data), peer, c, nat(opts), w), async);
  }

  // ---------------------------------------------------------------- point to point (MPI style)

  @Override
  CompletableFuture<Void> doSendTagged(Buf data, int dest, int tag, boolean synchronous, CallOptions opts,
      boolean async) {
    String what = synchronous ? "ssend" : "send";
    need(what, data);
    checkDest(what, dest);
    checkTag(what, tag, false);
    return this.<Void>runP2P(what, new Buf[] {data}, false, (c, w, st) -> {
      if (synchronous) {
        OmniCCLNative.ssendTagged(t(data), dest, tag, c, nat(opts), w);
      } else {
        OmniCCLNative.sendTagged(t(data), dest, tag, c, nat(opts), w);
      }
    }, async);
  }

  @Override
  CompletableFuture<RecvStatus> doRecvTagged(Buf data, int source, int tag, CallOptions opts, boolean async) {
    need("recv", data);
    checkSource("recv", source);
    checkTag("recv", tag, true);
    return runP2P("recv", new Buf[] {data}, true,
        (c, w, st) -> OmniCCLNative.recvTagged(t(data), source, tag, c, nat(opts), st, w), async);
  }

  @Override
  RecvStatus doSendrecv(Buf send, int dest, int sendTag, Buf recv, int source, int recvTag, CallOptions opts) {
    String what = "sendrecv";
    need(what, send, recv);
    checkDest(what, dest);
    checkTag(what, sendTag, false);
    checkSource(what, source);
    checkTag(what, recvTag, true);
    if (!send.device().equals(recv.device())) {
      throw new InvalidArgumentException(what + ": " + send.name + " is on " + send.device() + " but "
          + recv.name + " is on " + recv.device() + "; the buffers of one call must not be on different devices");
    }
    CompletableFuture<RecvStatus> done = runP2P(what, new Buf[] {send, recv}, true, (c, w, st) ->
        OmniCCLNative.sendrecv(t(send), dest, sendTag, t(recv), source, recvTag, c, nat(opts), st), false);
    return done.join();
  }

  /**
   * Waits until a message from {@code source} with {@code tag} can be
   * received, without receiving it (MPI_Probe). The status describes the
   * whole message ({@code count} in the sender's element type), e.g. to size
   * the buffer; a receive from this thread naming the status's source and tag
   * then gets exactly that message.
   *
   * <pre>{@code
   * RecvStatus st = comm.probe(Communicator.ANY_SOURCE, Communicator.ANY_TAG);
   * double[] data = new double[(int) st.count()];
   * comm.recv(data, st.source(), st.tag());
   * }</pre>
   *
   * @param source a rank, {@link #ANY_SOURCE} or {@link #PROC_NULL}
   * @param tag 0 to {@link #TAG_UB}, or {@link #ANY_TAG}
   * @return the message's status
   * @throws OmniCCLException on timeout, peer failure, or a {@link MismatchException} when
   *     every rank it could hear from moved on to a collective without a matching send
   */
  public RecvStatus probe(int source, int tag) {
    return doProbe(source, tag, null);
  }

  /** probe with per-call options (null: the communicator's). */
  RecvStatus doProbe(int source, int tag, CallOptions opts) {
    checkSource("probe", source);
    checkTag("probe", tag, true);
    long[] st = new long[4];
    synchronized (issueLock) {
      OmniCCLNative.probe(source, tag, handle("probe"), nat(opts), st);
    }
    return RecvStatus.of(st);
  }

  /**
   * Whether a message from {@code source} with {@code tag} can be received
   * now (MPI_Iprobe); never waits. Empty rather than null, as {@link
   * #split(int, int)} answers "no communicator": the API has no null results.
   *
   * @param source a rank, {@link #ANY_SOURCE} or {@link #PROC_NULL}
   * @param tag 0 to {@link #TAG_UB}, or {@link #ANY_TAG}
   * @return the status as {@link #probe} gives it, or empty
   * @throws OmniCCLException if the communicator failed
   */
  public Optional<RecvStatus> iprobe(int source, int tag) {
    return doIprobe(source, tag, null);
  }

  /** iprobe with per-call options (null: the communicator's). */
  Optional<RecvStatus> doIprobe(int source, int tag, CallOptions opts) {
    checkSource("iprobe", source);
    checkTag("iprobe", tag, true);
    long[] st = new long[4];
    int[] flag = new int[1];
    synchronized (issueLock) {
      OmniCCLNative.iprobe(source, tag, handle("iprobe"), nat(opts), flag, st);
    }
    return flag[0] != 0 ? Optional.of(RecvStatus.of(st)) : Optional.empty();
  }

  /**
   * Matched probe (MPI_Mprobe): waits for a message from {@code source} with
   * {@code tag} and takes it out of matching; only the returned {@link
   * Message} receives it (see there, also for what closing it does).
   *
   * @param source a rank, {@link #ANY_SOURCE} or {@link #PROC_NULL}
   * @param tag 0 to {@link #TAG_UB}, or {@link #ANY_TAG}
   * @return the message, to receive with {@code message.recv(data)}
   * @throws OmniCCLException as {@link #probe}
   */
  public Message mprobe(int source, int tag) {
    return doMprobe(source, tag, null);
  }

  /** mprobe with per-call options (null: the communicator's), which the message's receive uses too. */
  Message doMprobe(int source, int tag, CallOptions opts) {
    checkSource("mprobe", source);
    checkTag("mprobe", tag, true);
    long[] st = new long[4];
    long[] msg = {Message.NULL};
    synchronized (issueLock) {
      OmniCCLNative.mprobe(source, tag, handle("mprobe"), nat(opts), msg, st);
    }
    return new Message(this, msg[0], RecvStatus.of(st), opts);
  }

  /**
   * Matched probe that does not wait (MPI_Improbe).
   *
   * @param source a rank, {@link #ANY_SOURCE} or {@link #PROC_NULL}
   * @param tag 0 to {@link #TAG_UB}, or {@link #ANY_TAG}
   * @return the message as {@link #mprobe} gives it, or empty when none has come
   * @throws OmniCCLException if the communicator failed
   */
  public Optional<Message> improbe(int source, int tag) {
    return doImprobe(source, tag, null);
  }

  /** improbe with per-call options (null: the communicator's), which the message's receive uses too. */
  Optional<Message> doImprobe(int source, int tag, CallOptions opts) {
    checkSource("improbe", source);
    checkTag("improbe", tag, true);
    long[] st = new long[4];
    long[] msg = {Message.NULL};
    int[] flag = new int[1];
    synchronized (issueLock) {
      OmniCCLNative.improbe(source, tag, handle("improbe"), nat(opts), flag, msg, st);
    }
    return flag[0] != 0 ? Optional.of(new Message(this, msg[0], RecvStatus.of(st), opts)) : Optional.empty();
  }

  /** Message.recv: receives message {@code m} into data, with the options of the probe that took it. */
  CompletableFuture<RecvStatus> doMrecv(Message m, Buf data, CallOptions opts, boolean async) {
    need("Message.recv", data);
    handle("Message.recv"); // closed: IllegalStateException before the message is spent
    long[] msg = {m.take("Message.recv")};
    return runP2P("Message.recv", new Buf[] {data}, true,
        (c, w, st) -> OmniCCLNative.mrecv(t(data), msg, c, nat(opts), st, w), async);
  }

  /** Message.close: receives message {@code h} into nothing, freeing it. */
  void discard(long h) {
    java.nio.ByteBuffer empty = java.nio.ByteBuffer.allocateDirect(1);
    NativeTensor nothing = new NativeTensor(empty, 0, DataType.UINT8, 0);
    try {
      synchronized (issueLock) {
        OmniCCLNative.mrecv(nothing, new long[] {h}, handle("Message.close"), null, null, null);
      }
    } catch (TruncatedException | MismatchException freed) {
      // a non-empty message into no room, or one of another type: freed either way
    } catch (IllegalStateException closed) {
      // the communicator was closed meanwhile: its messages went with it
    }
  }

  // ---------------------------------------------------------------- registered buffers

  /**
   * Registers {@code bytes} bytes of CUDA device memory at {@code address}
   * with this communicator (NCCL's {@code ncclCommWindowRegister}) until the
   * returned {@link Window} is closed: operations on the CUDA IPC path whose
   * buffers lie in registered ones on every rank read the peers' buffers in
   * place (see {@link Window}). Collective: every rank registers one buffer
   * of its own (its own size and place) in the same order, and closes the
   * windows in the same order. Blocking, within the communicator's deadline.
   * On a communicator without the device path (no GPU, or staged CUDA
   * buffers) it succeeds and changes nothing.
   *
   * <pre>{@code
   * try (Window w = comm.registerWindow(devicePtr, bytes)) {
   *   // collectives on DeviceBuffers inside [devicePtr, devicePtr + bytes)
   * }
   * }</pre>
   *
   * @param address the buffer's address (a {@code cudaMalloc} result of this
   *     rank's GPU), not 0
   * @param bytes its size in bytes, at least 1
   * @return the registration, to close (try-with-resources)
   * @throws InvalidArgumentException on every rank alike (the message names
   *     the rank) for address 0, a size below 1, memory that is not device
   *     memory of the communicator's GPU or that reaches past the end of its
   *     allocation (on the CUDA IPC path)
   * @throws OmniCCLException for other failures, e.g. {@code
   *     OCCL_ERR_UNSUPPORTED} for memory of CUDA's virtual memory API made
   *     without a shareable handle type, or a
   *     {@link TimeoutException}
   * @throws IllegalStateException if the communicator is closed
   */
  public Window registerWindow(long address, long bytes) {
    long[] win = {Window.NULL};
    synchronized (issueLock) {
      long h = handle("registerWindow");
      if (bytes < 0) {
        // Still take part (as an empty buffer), so that the peers fail too
        // rather than wait for this rank until their deadline.
        try {
          OmniCCLNative.commWindowRegister(h, address, 0, win);
        } catch (InvalidArgumentException e) {
          throw new InvalidArgumentException("registerWindow: bytes is negative (" + bytes + ")");
        }
        throw new IllegalStateException("registerWindow: the library accepted an empty buffer");
      }
      OmniCCLNative.commWindowRegister(h, address, bytes, win);
    }
    return new Window(this, win[0], address, bytes);
  }

  /** Window.close: deregisters window {@code h}. */
  void deregisterWindow(long h) {
    try {
      synchronized (issueLock) {
        OmniCCLNative.commWindowDeregister(handle("Window.close"), new long[] {h});
      }
    } catch (IllegalStateException closed) {
      // the communicator was closed meanwhile: its registrations went with it
    }
  }

  /** occl_work_cancel: whether the library cancelled the operation of {@code work}. */
  private boolean cancelWork(long work) {
    int[] cancelled = new int[1];
    synchronized (issueLock) {
      long h = handle.get();
      if (h == 0) {
        return false; // closed: its pending operations end as aborted
      }
      OmniCCLNative.workCancel(work, h, cancelled);
    }
    return cancelled[0] != 0;
  }

  private void checkDest(String what, int dest) {
    if (dest != PROC_NULL && (dest < 0 || dest >= size)) {
      throw new InvalidArgumentException(what + ": dest " + dest + " is not a rank of this " + size
          + "-rank communicator nor PROC_NULL");
    }
  }

  private void checkSource(String what, int source) {
    if (source != PROC_NULL && source != ANY_SOURCE && (source < 0 || source >= size)) {
      throw new InvalidArgumentException(what + ": source " + source + " is not a rank of this " + size
          + "-rank communicator, ANY_SOURCE nor PROC_NULL");
    }
  }

  private static void checkTag(String what, int tag, boolean anyAllowed) {
    if (tag < 0 && !(anyAllowed && tag == ANY_TAG)) {
      throw new InvalidArgumentException(what + ": tag " + tag + " is negative; tags are 0 to TAG_UB ("
          + TAG_UB + ")" + (anyAllowed ? " or ANY_TAG" : ""));
    }
  }

  /** A receive's status as a future's type (RecvStatus; null, a Void, for sends). */
  @SuppressWarnings("unchecked")
  private static <T> T p2pResult(RecvStatus status) {
    return (T) status;
  }

  /** One native point-to-point call: comm handle, work (null = blocking), status (long[4], or null). */
  @FunctionalInterface
  private interface P2PCall {
    void invoke(long comm, long[] work, long[] status);
  }

  /**
   * Issues a point-to-point operation as {@link #run} does a collective; a
   * receive ({@code receives}) also yields its status. A blocking receive
   * that fails with {@link TruncatedException} still copies what came into
   * an array (as into a direct buffer) before the exception propagates.
   */
  private <T> CompletableFuture<T> runP2P(String what, Buf[] bufs, boolean receives, P2PCall call,
      boolean async) {
    synchronized (issueLock) {
      long h = handle(what);
      for (Integer retired; (retired = retiredOps.poll()) != null; ) {
        destroyOp(h, retired);
      }
      if (!async) {
        long[] st = receives ? new long[4] : null;
        current = scratch.begin();
        try {
          call.invoke(h, null, st);
        } catch (TruncatedException e) {
          finishAll(bufs);
          throw e;
        } finally {
          current = null;
        }
        finishAll(bufs);
        return CompletableFuture.completedFuture(p2pResult(receives ? RecvStatus.of(st) : null));
      }
      long[] work = new long[1];
      current = null; // fresh staging: the memory lives until the operation ends
      call.invoke(h, work, null);
      Pending<T> future = new Pending<>(work[0], bufs, receives);
      waiter().execute(future::await);
      return future;
    }
  }

  private static void finishAll(Buf[] bufs) {
    for (Buf b : bufs) {
      if (b != null) {
        b.finish();
      }
    }
  }

  /**
   * The future of a non-blocking point-to-point operation. {@link
   * #cancel(boolean)} asks the library to cancel it (occl_work_cancel): the
   * future is cancelled only if the library did, and then the buffers are
   * left as they were; otherwise cancel returns false and the operation
   * completes as usual. The waiter thread and cancel take this object's lock
   * around completion, so a cancelled receive's staging memory is never
   * copied back and the work handle is never freed while cancel uses it.
   */
  private final class Pending<T> extends CompletableFuture<T> {
    private final long work;
    private final Buf[] bufs;
    private final boolean receives;
    /** The work handle was freed (under this object's lock). */
    private boolean ended;

    Pending(long work, Buf[] bufs, boolean receives) {
      this.work = work;
      this.bufs = bufs;
      this.receives = receives;
    }

    /** On the waiter thread: waits for the operation and completes this future. */
    void await() {
      Throwable failure = null;
      try {
        OmniCCLNative.workWait(work);
      } catch (Throwable e) {
        failure = e;
      }
      synchronized (this) {
        try {
          if (isCancelled()) {
            return; // cancelled by the library: nothing moved, nothing to copy back
          }
          if (failure != null) {
            if (failure instanceof TruncatedException) {
              finishAll(bufs);
            }
            completeExceptionally(failure);
            return;
          }
          RecvStatus status = null;
          if (receives) {
            long[] st = new long[4];
            OmniCCLNative.workRecvStatus(work, st);
            status = RecvStatus.of(st);
          }
          finishAll(bufs);
          complete(p2pResult(status));
        } catch (Throwable e) {
          completeExceptionally(e);
        } finally {
          ended = true;
          OmniCCLNative.workFree(work);
          // The arrays and buffers (and their staging memory) stay reachable
          // until the operation has ended.
          Reference.reachabilityFence(bufs);
        }
      }
    }

    @Override
    public boolean cancel(boolean mayInterruptIfRunning) {
      synchronized (this) {
        if (ended || isDone() || !cancelWork(work)) {
          return false;
        }
        return super.cancel(mayInterruptIfRunning);
      }
    }
  }

  // ---------------------------------------------------------------- running a call

  /** One native call: comm handle, C reduce op (or 0), work (null = blocking). */
  @FunctionalInterface
  private interface Call {
    void invoke(long comm, int op, long[] work);
  }

  /**
   * The tensors of the call being issued; set by {@link #run} while it holds
   * issueLock, read by the Call lambdas through {@link #t}.
   */
  private Buf.Scratch current;

  private NativeTensor t(Buf b) {
    return b == null ? null : b.tensor(current);
  }

  /**
   * Issues one operation: blocking (stages arrays through this
   * communicator's scratch memory and copies results back), or non-blocking
   * (fresh staging memory, completion handled by the waiter thread).
   */
  private CompletableFuture<Void> run(String what, Buf[] bufs, ReduceOp op, Call call, boolean async) {
    synchronized (issueLock) {
      long h = handle(what);
      for (Integer retired; (retired = retiredOps.poll()) != null; ) {
        destroyOp(h, retired);
      }
      int opCode = 0;
      boolean premul = op != null && op.isPremulSum();
      if (op != null) {
        if (premul) {
          int[] out = new int[1];
          OmniCCLNative.redOpCreatePremulSum(h, op.scalar(), out);
          opCode = out[0];
        } else {
          opCode = op.code();
        }
      }
      if (!async) {
        current = scratch.begin();
        try {
          call.invoke(h, opCode, null);
        } finally {
          current = null;
          if (premul) {
            destroyOp(h, opCode);
          }
        }
        if (bufs != null) {
          for (Buf b : bufs) {
            if (b != null) {
              b.finish();
            }
          }
        }
        return CompletableFuture.completedFuture(null);
      }
      long[] work = new long[1];
      current = null; // fresh staging: the memory lives until the operation ends
      try {
        call.invoke(h, opCode, work);
      } catch (RuntimeException e) {
        if (premul) {
          destroyOp(h, opCode);
        }
        throw e;
      }
      CompletableFuture<Void> future = new CompletableFuture<>();
      int code = opCode;
      waiter().execute(() -> complete(what, work[0], bufs, premul ? code : -1, future));
      return future;
    }
  }

  private void complete(String what, long work, Buf[] bufs, int premulOp, CompletableFuture<Void> future) {
    try {
      OmniCCLNative.workWait(work);
      if (bufs != null) {
        for (Buf b : bufs) {
          if (b != null) {
            b.finish();
          }
        }
      }
      future.complete(null);
    } catch (Throwable e) {
      future.completeExceptionally(e);
    } finally {
      OmniCCLNative.workFree(work);
      if (premulOp >= 0) {
        retiredOps.add(premulOp);
      }
      // The arrays and buffers (and their staging memory) stay reachable
      // until the operation has ended.
      Reference.reachabilityFence(bufs);
    }
  }

  private static void destroyOp(long h, int op) {
    try {
      OmniCCLNative.redOpDestroy(h, op);
    } catch (OmniCCLException ignored) {
      // the communicator failed or went away: its ops went with it
    }
  }

  private synchronized ExecutorService waiter() {
    if (waiter == null) {
      int r = rank;
      waiter = Executors.newSingleThreadExecutor(task -> {
        Thread t = new Thread(task, "omniccl-waiter-rank-" + r);
        t.setDaemon(true);
        return t;
      });
    }
    return waiter;
  }

  // ---------------------------------------------------------------- argument checks

  private static void need(String what, Buf... bufs) {
    for (Buf b : bufs) {
      if (b == null) {
        throw new NullPointerException(what + ": a buffer argument is null");
      }
    }
  }

  private static void needOnRoot(String what, Buf b, int root) {
    if (b == null) {
      throw new NullPointerException(what + ": the root (rank " + root
          + ") needs its buffer; only non-roots may pass null");
    }
  }

  private static void sameType(String what, Buf a, Buf b) {
    if (a != null && b != null && !a.device().equals(b.device())) {
      throw new InvalidArgumentException(what + ": " + a.name + " is on " + a.device() + " but "
          + b.name + " is on " + b.device() + "; the buffers of one call must not be on different devices");
    }
    if (a != null && b != null && a.type != b.type) {
      throw new InvalidArgumentException(what + ": " + a.name + " is " + a.type + " but "
          + b.name + " is " + b.type);
    }
  }

  private void checkRoot(String what, int root) {
    if (root < 0 || root >= size) {
      throw new InvalidArgumentException(what + ": root " + root + " is not a rank of this "
          + size + "-rank communicator");
    }
  }

  private void checkPeer(String what, int peer) {
    if (peer < 0 || peer >= size) {
      throw new InvalidArgumentException(what + ": peer " + peer + " is not a rank of this "
          + size + "-rank communicator");
    }
  }

  private void expect(String what, Buf b, long want, String formula) {
    if (b.count != want) {
      throw lengths(what, b.name + " has " + b.count + " elements, expected " + want + " ("
          + formula + ", size() = " + size + ")");
    }
  }

  private InvalidArgumentException lengths(String what, String detail) {
    return new InvalidArgumentException(what + " (rank " + rank + "): " + detail);
  }

  /** Checks counts (and displacements) against size() and the buffer. */
  private long[] layout(String what, String countsName, int[] counts, String displsName,
      int[] displs, Buf buf) {
    if (counts == null) {
      throw new NullPointerException(what + ": " + countsName + " is null");
    }
    if (counts.length != size) {
      throw lengths(what, countsName + " has " + counts.length + " entries, expected size() = " + size);
    }
    if (displs != null && displs.length != size) {
      throw lengths(what, displsName + " has " + displs.length + " entries, expected size() = " + size);
    }
    long packed = 0;
    for (int i = 0; i < size; i++) {
      if (counts[i] < 0) {
        throw lengths(what, countsName + "[" + i + "] is negative (" + counts[i] + ")");
      }
      long start = displs == null ? packed : displs[i];
      if (start < 0 || start + counts[i] > buf.count) {
        throw lengths(what, buf.name + " has " + buf.count + " elements, too few for "
            + countsName + "[" + i + "] = " + counts[i] + " at offset " + start);
      }
      packed += counts[i];
    }
    return widen(counts);
  }

  private static long[] widen(int[] a) {
    long[] out = new long[a.length];
    for (int i = 0; i < a.length; i++) {
      out[i] = a[i];
    }
    return out;
  }

  @Override
  public String toString() {
    return "Communicator[rank " + rank + " of " + size + (isClosed() ? ", closed]" : "]");
  }
}
