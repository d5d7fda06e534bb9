package org.omniccl;

import java.lang.reflect.InvocationTargetException;
import java.lang.reflect.Method;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;

/**
 * Every collective, for every primitive array type (through the public typed
 * overloads, found by reflection) and for direct ByteBuffers, checked against
 * references computed here from the inputs every rank can compute for every
 * other: rank r's element i of a test is value(r, i). Runs on one rank; all
 * ranks of a job run it with the same size. Throws AssertionError naming the
 * operation, type, rank and element on the first difference.
 */
final class Sweep {
  private final Communicator comm;
  private final int n;
  private final int rank;

  private Sweep(Communicator comm) {
    this.comm = comm;
    this.n = comm.size();
    this.rank = comm.rank();
  }

  static void run(Communicator comm) {
    new Sweep(comm).all();
  }

  /** Inputs: small positive integers, sums of up to 8 ranks fit in a byte. */
  static double value(int r, int i) {
    return (r * 7 + i * 3) % 11 + 1;
  }

  /** Inputs for PROD: 1..3, products of up to 4 ranks fit in a byte. */
  static double factor(int r, int i) {
    return (r + i) % 3 + 1;
  }

  static double bool(int r, int i) {
    return (r + 2 * i) % 3 == 0 ? 1 : 0;
  }

  private void all() {
    for (Kind k : Kind.values()) {
      allReduce(k);
      broadcast(k);
      reduce(k);
      gather(k);
      scatter(k);
      allGather(k);
      reduceScatter(k);
      allToAll(k);
      allGatherv(k);
      allToAllv(k);
      gatherv(k);
      scatterv(k);
      sendRecv(k);
      async(k);
    }
    byteBuffers();
    comm.barrier();
    join(comm.barrierAsync(), "barrierAsync");
  }

  // ------------------------------------------------------------------ helpers

  private double[] input(Kind k, int r, int count, ReduceOp op) {
    double[] v = new double[count];
    for (int i = 0; i < count; i++) {
      v[i] = k == Kind.BOOLEAN ? bool(r, i) : op == ReduceOp.PROD ? factor(r, i) : value(r, i);
    }
    return v;
  }

  private double reduceRef(Kind k, ReduceOp op, int count, int i) {
    double acc = input(k, 0, count, op)[i];
    for (int r = 1; r < n; r++) {
      double v = input(k, r, count, op)[i];
      switch (op.name()) {
        case "SUM": case "AVG": acc += v; break;
        case "PROD": acc *= v; break;
        case "MIN": acc = Math.min(acc, v); break;
        case "MAX": acc = Math.max(acc, v); break;
        case "BAND": acc = (long) acc & (long) v; break;
        case "BOR": acc = (long) acc | (long) v; break;
        case "BXOR": acc = (long) acc ^ (long) v; break;
        default:
          if (op.isPremulSum()) {
            acc += v;
          } else {
            throw new AssertionError("no reference for " + op);
          }
      }
    }
    if (op == ReduceOp.AVG) {
      acc = k.integral ? (double) ((long) acc / n) : acc / n;
    }
    if (op.isPremulSum()) {
      acc *= op.scalar();
    }
    return k == Kind.FLOAT ? (float) acc : acc;
  }

  private List<ReduceOp> opsFor(Kind k) {
    List<ReduceOp> ops = new ArrayList<>();
    if (k == Kind.BOOLEAN) {
      ops.addAll(List.of(ReduceOp.MIN, ReduceOp.MAX, ReduceOp.BAND, ReduceOp.BOR, ReduceOp.BXOR));
    } else {
      ops.addAll(List.of(ReduceOp.SUM, ReduceOp.PROD, ReduceOp.MIN, ReduceOp.MAX, ReduceOp.AVG));
      if (k.integral) {
        ops.addAll(List.of(ReduceOp.BAND, ReduceOp.BOR, ReduceOp.BXOR));
      }
      ops.add(ReduceOp.premulSum(2.0));
    }
    return ops;
  }

  static Object call(Communicator c, String name, Object... args) {
    for (Method m : Communicator.class.getMethods()) {
      if (!m.getName().equals(name) || m.getParameterCount() != args.length) {
        continue;
      }
      Class<?>[] p = m.getParameterTypes();
      boolean fits = true;
      for (int i = 0; i < p.length && fits; i++) {
        Class<?> want = p[i].isPrimitive() ? box(p[i]) : p[i];
        fits = args[i] == null ? !p[i].isPrimitive() && p[i].isArray() : want.isInstance(args[i]);
      }
      if (fits && args.length > 0 && args[0] == null && !p[0].isArray()) {
        fits = false;
      }
      if (fits && nullsTyped(p, args)) {
        try {
          return m.invoke(c, args);
        } catch (InvocationTargetException e) {
          if (e.getCause() instanceof RuntimeException) {
            throw (RuntimeException) e.getCause();
          }
          throw new AssertionError(e.getCause());
        } catch (IllegalAccessException e) {
          throw new AssertionError(e);
        }
      }
    }
    throw new AssertionError("no public Communicator." + name + " for " + Arrays.toString(args));
  }

  /** A null array argument must sit where the other buffers' array type is. */
  private static boolean nullsTyped(Class<?>[] p, Object[] args) {
    Class<?> bufType = null;
    for (int i = 0; i < p.length; i++) {
      if (args[i] != null && p[i].isArray() && p[i] != int[].class) {
        bufType = p[i];
      }
    }
    for (int i = 0; i < p.length; i++) {
      if (args[i] == null && bufType != null && p[i] != bufType && p[i] != int[].class) {
        return false;
      }
    }
    return true;
  }

  private static Class<?> box(Class<?> c) {
    return c == int.class ? Integer.class : c == long.class ? Long.class : c == boolean.class
        ? Boolean.class : c;
  }

  private void check(String what, Kind k, double[] want, Object got) {
    double[] g = k.read(got);
    if (!Arrays.equals(want, g)) {
      throw new AssertionError(what + " " + k + " rank " + rank + " of " + n + ": want "
          + Arrays.toString(want) + " got " + Arrays.toString(g));
    }
  }

  private static void join(CompletableFuture<Void> f, String what) {
    try {
      f.get(60, TimeUnit.SECONDS);
    } catch (Exception e) {
      throw new AssertionError(what + " did not complete: " + e, e);
    }
  }

  // ------------------------------------------------------------------ the collectives

  private void allReduce(Kind k) {
    int count = 5;
    for (ReduceOp op : opsFor(k)) {
      Object data = k.make(input(k, rank, count, op));
      call(comm, "allReduce", data, op);
      double[] want = new double[count];
      for (int i = 0; i < count; i++) {
        want[i] = reduceRef(k, op, count, i);
      }
      check("allReduce(" + op + ", in place)", k, want, data);
    }
    ReduceOp op = k == Kind.BOOLEAN ? ReduceOp.BOR : ReduceOp.SUM;
    Object send = k.make(input(k, rank, count, op));
    Object recv = k.zeros(count);
    call(comm, "allReduce", send, recv, op);
    double[] want = new double[count];
    for (int i = 0; i < count; i++) {
      want[i] = reduceRef(k, op, count, i);
    }
    check("allReduce(" + op + ")", k, want, recv);
    check("allReduce send untouched", k, input(k, rank, count, op), send);
  }

  private void broadcast(Kind k) {
    int root = n - 1;
    Object data = k.make(input(k, rank, 4, null));
    call(comm, "broadcast", data, root);
    check("broadcast", k, input(k, root, 4, null), data);
  }

  private void reduce(Kind k) {
    int root = n / 2;
    ReduceOp op = k == Kind.BOOLEAN ? ReduceOp.BXOR : ReduceOp.MAX;
    int count = 3;
    Object send = k.make(input(k, rank, count, op));
    Object recv = rank == root ? k.zeros(count) : null;
    call(comm, "reduce", send, recv, op, root);
    check("reduce: input untouched", k, input(k, rank, count, op), send);
    if (rank == root) {
      double[] want = new double[count];
      for (int i = 0; i < count; i++) {
        want[i] = reduceRef(k, op, count, i);
      }
      check("reduce", k, want, recv);
    }
  }

  private void gather(Kind k) {
    int root = 0;
    int count = 3;
    Object send = k.make(input(k, rank, count, null));
    Object recv = rank == root ? k.zeros(n * count) : null;
    call(comm, "gather", send, recv, root);
    if (rank == root) {
      check("gather", k, concat(k, count), recv);
    }
  }

  private void scatter(Kind k) {
    int root = n - 1;
    int count = 2;
    Object send = rank == root ? k.make(concat(k, count)) : null;
    Object recv = k.zeros(count);
    call(comm, "scatter", send, recv, root);
    check("scatter", k, input(k, rank, count, null), recv);
  }

  /** Every rank's input of `count` elements, in rank order. */
  private double[] concat(Kind k, int count) {
    double[] all = new double[n * count];
    for (int r = 0; r < n; r++) {
      System.arraycopy(input(k, r, count, null), 0, all, r * count, count);
    }
    return all;
  }

  private void allGather(Kind k) {
    int count = 3;
    Object recv = k.zeros(n * count);
    call(comm, "allGather", k.make(input(k, rank, count, null)), recv);
    check("allGather", k, concat(k, count), recv);
  }

  private void reduceScatter(Kind k) {
    int count = 2;
    ReduceOp op = k == Kind.BOOLEAN ? ReduceOp.BOR : ReduceOp.SUM;
    Object send = k.make(input(k, rank, n * count, op));
    Object recv = k.zeros(count);
    call(comm, "reduceScatter", send, recv, op);
    double[] want = new double[count];
    for (int i = 0; i < count; i++) {
      want[i] = reduceRef(k, op, n * count, rank * count + i);
    }
    check("reduceScatter", k, want, recv);
  }

  private void allToAll(Kind k) {
    int part = 2;
    Object send = k.make(input(k, rank, n * part, null));
    Object recv = k.zeros(n * part);
    call(comm, "allToAll", send, recv);
    double[] want = new double[n * part];
    for (int j = 0; j < n; j++) {
      double[] theirs = input(k, j, n * part, null);
      System.arraycopy(theirs, rank * part, want, j * part, part);
    }
    check("allToAll", k, want, recv);
  }

  /** Uneven counts: rank i contributes i + 1 elements. */
  private int[] vcounts() {
    int[] c = new int[n];
    for (int i = 0; i < n; i++) {
      c[i] = i + 1;
    }
    return c;
  }

  private double[] vconcat(Kind k) {
    List<Double> all = new ArrayList<>();
    for (int r = 0; r < n; r++) {
      for (double v : input(k, r, r + 1, null)) {
        all.add(v);
      }
    }
    return all.stream().mapToDouble(Double::doubleValue).toArray();
  }

  private void allGatherv(Kind k) {
    int[] counts = vcounts();
    double[] want = vconcat(k);
    Object recv = k.zeros(want.length);
    call(comm, "allGatherv", k.make(input(k, rank, rank + 1, null)), recv, counts, null);
    check("allGatherv", k, want, recv);
    // Explicit displacements: every rank's part one slot apart, reversed order.
    int[] displs = new int[n];
    int at = 0;
    for (int r = n - 1; r >= 0; r--) {
      displs[r] = at;
      at += counts[r] + 1;
    }
    Object spaced = k.zeros(at);
    call(comm, "allGatherv", k.make(input(k, rank, rank + 1, null)), spaced, counts, displs);
    double[] wantSpaced = new double[at];
    for (int r = 0; r < n; r++) {
      System.arraycopy(input(k, r, r + 1, null), 0, wantSpaced, displs[r], counts[r]);
    }
    check("allGatherv(displs)", k, wantSpaced, spaced);
  }

  private void allToAllv(Kind k) {
    // Rank i sends i + j + 1 elements to rank j.
    int[] sendCounts = new int[n];
    int[] recvCounts = new int[n];
    int sendTotal = 0;
    int recvTotal = 0;
    for (int j = 0; j < n; j++) {
      sendCounts[j] = rank + j + 1;
      recvCounts[j] = j + rank + 1;
      sendTotal += sendCounts[j];
      recvTotal += recvCounts[j];
    }
    Object send = k.make(input(k, rank, sendTotal, null));
    Object recv = k.zeros(recvTotal);
    call(comm, "allToAllv", send, sendCounts, null, recv, recvCounts, null);
    double[] want = new double[recvTotal];
    int at = 0;
    for (int j = 0; j < n; j++) {
      double[] theirs = input(k, j, sendTotalOf(j), null);
      int off = 0;
      for (int t = 0; t < rank; t++) {
        off += j + t + 1;
      }
      System.arraycopy(theirs, off, want, at, recvCounts[j]);
      at += recvCounts[j];
    }
    check("allToAllv", k, want, recv);
  }

  private int sendTotalOf(int r) {
    int t = 0;
    for (int j = 0; j < n; j++) {
      t += r + j + 1;
    }
    return t;
  }

  private void gatherv(Kind k) {
    int root = n - 1;
    double[] want = vconcat(k);
    Object recv = rank == root ? k.zeros(want.length) : null;
    int[] counts = rank == root ? vcounts() : null;
    call(comm, "gatherv", k.make(input(k, rank, rank + 1, null)), recv, counts, null, root);
    if (rank == root) {
      check("gatherv", k, want, recv);
    }
  }

  private void scatterv(Kind k) {
    int root = 0;
    Object send = rank == root ? k.make(vconcat(k)) : null;
    int[] counts = rank == root ? vcounts() : null;
    Object recv = k.zeros(rank + 1);
    call(comm, "scatterv", send, counts, null, recv, root);
    check("scatterv", k, input(k, rank, rank + 1, null), recv);
  }

  @SuppressWarnings("unchecked")
  private void sendRecv(Kind k) {
    if (n == 1) {
      return;
    }
    int next = (rank + 1) % n;
    int prev = (rank + n - 1) % n;
    Object out = k.make(input(k, rank, 3, null));
    Object in = k.zeros(3);
    CompletableFuture<Void> r = (CompletableFuture<Void>) call(comm, "recvAsync", in, prev);
    CompletableFuture<Void> s = (CompletableFuture<Void>) call(comm, "sendAsync", out, next);
    join(s, "sendAsync");
    join(r, "recvAsync");
    check("send/recv ring", k, input(k, prev, 3, null), in);
    // Blocking pair: even ranks send first, odd ranks receive first.
    if (n % 2 == 0) {
      Object in2 = k.zeros(3);
      int peer = rank % 2 == 0 ? rank + 1 : rank - 1;
      if (rank % 2 == 0) {
        call(comm, "send", out, peer);
        call(comm, "recv", in2, peer);
      } else {
        call(comm, "recv", in2, peer);
        call(comm, "send", out, peer);
      }
      check("send/recv pair", k, input(k, peer, 3, null), in2);
    }
  }

  @SuppressWarnings("unchecked")
  private void async(Kind k) {
    ReduceOp op = k == Kind.BOOLEAN ? ReduceOp.BOR : ReduceOp.SUM;
    Object a = k.make(input(k, rank, 4, op));
    Object b = k.make(input(k, rank, 4, op));
    CompletableFuture<Void> fa = (CompletableFuture<Void>) call(comm, "allReduceAsync", a, op);
    CompletableFuture<Void> fb = (CompletableFuture<Void>) call(comm, "allReduceAsync", b, op);
    Object g = k.zeros(n * 2);
    CompletableFuture<Void> fg = (CompletableFuture<Void>) call(comm, "allGatherAsync",
        k.make(input(k, rank, 2, null)), g);
    // A pre-multiplied sum: its op lives until the operation has ended.
    ReduceOp premul = ReduceOp.premulSum(3.0);
    Object p = k == Kind.BOOLEAN ? null : k.make(input(k, rank, 4, premul));
    CompletableFuture<Void> fp = p == null ? CompletableFuture.completedFuture(null)
        : (CompletableFuture<Void>) call(comm, "allReduceAsync", p, premul);
    join(fa, "allReduceAsync");
    join(fb, "allReduceAsync");
    join(fg, "allGatherAsync");
    join(fp, "allReduceAsync(premulSum)");
    if (p != null) {
      double[] wantP = new double[4];
      for (int i = 0; i < 4; i++) {
        wantP[i] = reduceRef(k, premul, 4, i);
      }
      check("allReduceAsync(premulSum)", k, wantP, p);
    }
    double[] want = new double[4];
    for (int i = 0; i < 4; i++) {
      want[i] = reduceRef(k, op, 4, i);
    }
    check("allReduceAsync", k, want, a);
    check("allReduceAsync (second)", k, want, b);
    check("allGatherAsync", k, concat(k, 2), g);
  }

  /** Direct buffers, zero copy, for types without a Java primitive too. */
  private void byteBuffers() {
    int count = 6;
    for (DataType t : DataType.values()) {
      if (t == DataType.FLOAT16 || t == DataType.BFLOAT16 || t == DataType.BOOL) {
        continue; // written below with their own encodings
      }
      ByteBuffer buf = ByteBuffer.allocateDirect(count * t.byteSize()).order(ByteOrder.nativeOrder());
      for (int i = 0; i < count; i++) {
        put(buf, t, i, value(rank, i));
      }
      comm.allReduce(buf, t, ReduceOp.SUM);
      for (int i = 0; i < count; i++) {
        double want = 0;
        for (int r = 0; r < n; r++) {
          want += value(r, i);
        }
        double got = get(buf, t, i);
        if (got != want) {
          throw new AssertionError("allReduce(ByteBuffer " + t + ") rank " + rank + " element "
              + i + ": want " + want + " got " + got);
        }
      }
    }
    // bfloat16: the upper half of a float32 (small integers are exact).
    ByteBuffer bf = ByteBuffer.allocateDirect(2 * count).order(ByteOrder.nativeOrder());
    for (int i = 0; i < count; i++) {
      bf.putShort(2 * i, (short) (Float.floatToIntBits((float) value(rank, i)) >>> 16));
    }
    ByteBuffer bfOut = ByteBuffer.allocateDirect(2 * count).order(ByteOrder.nativeOrder());
    comm.allReduce(bf, bfOut, DataType.BFLOAT16, ReduceOp.MAX);
    for (int i = 0; i < count; i++) {
      double want = 0;
      for (int r = 0; r < n; r++) {
        want = Math.max(want, value(r, i));
      }
      float got = Float.intBitsToFloat((bfOut.getShort(2 * i) & 0xffff) << 16);
      if (got != want) {
        throw new AssertionError("allReduce(BFLOAT16, MAX) element " + i + ": want " + want + " got " + got);
      }
    }
    // float16: small integers are exact; encode them by hand (IEEE 754 binary16).
    ByteBuffer half = ByteBuffer.allocateDirect(2 * count).order(ByteOrder.nativeOrder());
    for (int i = 0; i < count; i++) {
      half.putShort(2 * i, toHalf((int) value(rank, i)));
    }
    comm.allReduce(half, DataType.FLOAT16, ReduceOp.SUM);
    for (int i = 0; i < count; i++) {
      int want = 0;
      for (int r = 0; r < n; r++) {
        want += (int) value(r, i);
      }
      if (half.getShort(2 * i) != toHalf(want)) {
        throw new AssertionError("allReduce(FLOAT16) element " + i + ": want bits "
            + Integer.toHexString(toHalf(want) & 0xffff) + " got "
            + Integer.toHexString(half.getShort(2 * i) & 0xffff));
      }
    }
    // bool: one byte per value; BOR across ranks.
    ByteBuffer flags = ByteBuffer.allocateDirect(count);
    for (int i = 0; i < count; i++) {
      flags.put(i, (byte) bool(rank, i));
    }
    comm.allReduce(flags, DataType.BOOL, ReduceOp.BOR);
    for (int i = 0; i < count; i++) {
      int want = 0;
      for (int r = 0; r < n; r++) {
        want |= (int) bool(r, i);
      }
      if (flags.get(i) != want) {
        throw new AssertionError("allReduce(BOOL, BOR) element " + i + ": want " + want + " got " + flags.get(i));
      }
    }
    // A slice: position and limit select the elements; the rest is untouched.
    ByteBuffer whole = ByteBuffer.allocateDirect(8 * 10).order(ByteOrder.nativeOrder());
    for (int i = 0; i < 10; i++) {
      whole.putLong(8 * i, 100L * rank + i);
    }
    whole.position(8 * 3).limit(8 * 5);
    comm.broadcast(whole, DataType.INT64, 0);
    whole.clear();
    for (int i = 0; i < 10; i++) {
      long want = (i == 3 || i == 4) ? i : 100L * rank + i;
      if (whole.getLong(8 * i) != want) {
        throw new AssertionError("broadcast of a slice: element " + i + " is "
            + whole.getLong(8 * i) + ", want " + want);
      }
    }
    ByteBuffer g = ByteBuffer.allocateDirect(4 * n).order(ByteOrder.nativeOrder());
    ByteBuffer mine = ByteBuffer.allocateDirect(4).order(ByteOrder.nativeOrder());
    mine.putInt(0, 1000 + rank);
    join(comm.allGatherAsync(mine, g, DataType.UINT32), "allGatherAsync(ByteBuffer)");
    for (int r = 0; r < n; r++) {
      if (g.getInt(4 * r) != 1000 + r) {
        throw new AssertionError("allGatherAsync(ByteBuffer) element " + r + ": " + g.getInt(4 * r));
      }
    }
  }

  /** binary16 bits of a positive integer below 2048 (exact). */
  static short toHalf(int v) {
    int e = 31 - Integer.numberOfLeadingZeros(v); // v = 1.m * 2^e
    int mantissa = ((v << 10) >> e) & 0x3ff;
    return (short) (((e + 15) << 10) | mantissa);
  }

  private static void put(ByteBuffer b, DataType t, int i, double v) {
    int at = i * t.byteSize();
    switch (t) {
      case INT8: case UINT8: b.put(at, (byte) v); break;
      case INT16: case UINT16: b.putShort(at, (short) v); break;
      case INT32: case UINT32: b.putInt(at, (int) v); break;
      case INT64: case UINT64: b.putLong(at, (long) v); break;
      case FLOAT32: b.putFloat(at, (float) v); break;
      case FLOAT64: b.putDouble(at, v); break;
      // Complex: v as the real part and -v as the imaginary part, so a sum
      // that mixed the two parts up would show.
      case COMPLEX64: b.putFloat(at, (float) v).putFloat(at + 4, (float) -v); break;
      case COMPLEX128: b.putDouble(at, v).putDouble(at + 8, -v); break;
      default: throw new AssertionError(t.toString());
    }
  }

  private static double get(ByteBuffer b, DataType t, int i) {
    int at = i * t.byteSize();
    switch (t) {
      case INT8: return b.get(at);
      case UINT8: return b.get(at) & 0xff;
      case INT16: return b.getShort(at);
      case UINT16: return b.getShort(at) & 0xffff;
      case INT32: return b.getInt(at);
      case UINT32: return b.getInt(at) & 0xffffffffL;
      case INT64: case UINT64: return b.getLong(at);
      case FLOAT32: return b.getFloat(at);
      case FLOAT64: return b.getDouble(at);
      case COMPLEX64: return b.getFloat(at + 4) == -b.getFloat(at) ? b.getFloat(at) : Double.NaN;
      case COMPLEX128: return b.getDouble(at + 8) == -b.getDouble(at) ? b.getDouble(at) : Double.NaN;
      default: throw new AssertionError(t.toString());
    }
  }
}
