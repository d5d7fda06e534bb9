package org.omniccl;

import java.nio.ByteBuffer;
import java.nio.ByteOrder;

/**
 * One buffer argument of a collective: a primitive array (staged through
 * direct memory: copied in before the call if the op reads it or writes only
 * part of it, out after it completes if the op writes it) or a direct ByteBuffer (passed as is, zero
 * copy, from its position to its limit).
 *
 * <p>Why staging: the C library reads and writes the memory while a call
 * blocks, possibly for a long time; pinning a Java array for that long (JNI
 * critical sections) would stall the garbage collector for every thread,
 * including the threads that hold the other ranks of the job.
 */
final class Buf {
  static final int IN = 1;
  static final int OUT = 2;
  static final int INOUT = IN | OUT;

  final String name;
  final DataType type;
  final long count;
  /** The CUDA memory of a DeviceBuffer argument, else null (host memory). */
  private final DeviceBuffer cuda;
  private final Object array;
  private final ByteBuffer direct;
  private final int dir;
  private NativeTensor tensor;
  private ByteBuffer staging;
  private boolean finished;

  private Buf(String name, DataType type, long count, Object array, ByteBuffer direct, int dir) {
    this(name, type, count, array, direct, null, dir);
  }

  private Buf(String name, DataType type, long count, Object array, ByteBuffer direct, DeviceBuffer cuda,
      int dir) {
    this.name = name;
    this.type = type;
    this.count = count;
    this.cuda = cuda;
    this.array = array;
    this.direct = direct;
    this.dir = dir;
  }

  static Buf of(byte[] a, String name, int dir) {
    return a == null ? null : new Buf(name, DataType.INT8, a.length, a, null, dir);
  }

  static Buf of(short[] a, String name, int dir) {
    return a == null ? null : new Buf(name, DataType.INT16, a.length, a, null, dir);
  }

  static Buf of(int[] a, String name, int dir) {
    return a == null ? null : new Buf(name, DataType.INT32, a.length, a, null, dir);
  }

  static Buf of(long[] a, String name, int dir) {
    return a == null ? null : new Buf(name, DataType.INT64, a.length, a, null, dir);
  }

  static Buf of(float[] a, String name, int dir) {
    return a == null ? null : new Buf(name, DataType.FLOAT32, a.length, a, null, dir);
  }

  static Buf of(double[] a, String name, int dir) {
    return a == null ? null : new Buf(name, DataType.FLOAT64, a.length, a, null, dir);
  }

  static Buf of(boolean[] a, String name, int dir) {
    return a == null ? null : new Buf(name, DataType.BOOL, a.length, a, null, dir);
  }

  /** A DeviceBuffer: its host buffer as a ByteBuffer argument, or its device memory as is. */
  static Buf of(DeviceBuffer d, String name, int dir) {
    if (d == null) {
      return null;
    }
    if (d.hostBuffer != null) {
      return of(d.hostBuffer, d.type, name, dir);
    }
    return new Buf(name, d.type, d.count, null, null, d, dir);
  }

  /** Where the memory lives, as DeviceBuffer#device() names it. */
  String device() {
    return cuda == null ? "cpu" : cuda.device();
  }

  /** A direct buffer's elements from position to limit; checks it can be used. */
  static Buf of(ByteBuffer b, DataType type, String name, int dir) {
    if (b == null) {
      return null;
    }
    if (type == null) {
      throw new NullPointerException("type: the DataType of " + name + " is null");
    }
    if (!b.isDirect()) {
      throw new IllegalArgumentException(name + ": a heap ByteBuffer; OmniCCL reads and writes"
          + " buffers in place and needs a direct one (ByteBuffer.allocateDirect(n)"
          + ".order(ByteOrder.nativeOrder())), or pass a primitive array");
    }
    if ((dir & OUT) != 0 && b.isReadOnly()) {
      throw new IllegalArgumentException(name + ": a read-only ByteBuffer, but the operation writes it");
    }
    int size = type.byteSize();
    if (size > 1 && b.order() != ByteOrder.nativeOrder()) {
      throw new IllegalArgumentException(name + ": byte order " + b.order() + ", but " + type
          + " values are read in native order (" + ByteOrder.nativeOrder() + "); call "
          + name + ".order(ByteOrder.nativeOrder()) before putting values");
    }
    if (b.remaining() % size != 0) {
      throw new IllegalArgumentException(name + ": " + b.remaining() + " bytes remaining is not a"
          + " whole number of " + type + " elements (" + size + " bytes each)");
    }
    return new Buf(name, type, b.remaining() / size, null, b, dir);
  }

  /** The tensor for the native call, staging an array the first time (blocking calls reuse scratch). */
  NativeTensor tensor(Scratch scratch) {
    if (tensor != null) {
      return tensor;
    }
    if (cuda != null) {
      tensor = new NativeTensor(cuda);
      return tensor;
    }
    if (direct != null) {
      tensor = new NativeTensor(direct, direct.position(), type, count);
      return tensor;
    }
    long bytes = count * type.byteSize();
    if (bytes > Integer.MAX_VALUE) {
      throw new IllegalArgumentException(name + ": " + count + " " + type + " elements (" + bytes
          + " bytes) exceed the 2 GiB an array is staged through; use direct ByteBuffers of"
          + " up to 2 GiB each");
    }
    staging = scratch != null ? scratch.take((int) bytes) : ByteBuffer.allocateDirect(Math.max(1, (int) bytes));
    staging.order(ByteOrder.nativeOrder());
    // Outputs an operation may write only in part (v-variants: gaps between
    // displacements) are INOUT, so the elements it skips keep their values.
    if ((dir & IN) != 0) {
      copyIn(staging);
    }
    tensor = new NativeTensor(staging, 0, type, count);
    return tensor;
  }

  /** After the call completed: copies what the op wrote back into the array (once). */
  void finish() {
    if (staging != null && (dir & OUT) != 0 && !finished) {
      finished = true;
      copyOut(staging);
    }
  }

  private void copyIn(ByteBuffer s) {
    ByteBuffer d = s.duplicate().order(ByteOrder.nativeOrder());
    d.clear();
    if (array instanceof byte[]) {
      d.put((byte[]) array);
    } else if (array instanceof short[]) {
      d.asShortBuffer().put((short[]) array);
    } else if (array instanceof int[]) {
      d.asIntBuffer().put((int[]) array);
    } else if (array instanceof long[]) {
      d.asLongBuffer().put((long[]) array);
    } else if (array instanceof float[]) {
      d.asFloatBuffer().put((float[]) array);
    } else if (array instanceof double[]) {
      d.asDoubleBuffer().put((double[]) array);
    } else {
      boolean[] a = (boolean[]) array;
      for (int i = 0; i < a.length; i++) {
        d.put(i, a[i] ? (byte) 1 : (byte) 0);
      }
    }
  }

  private void copyOut(ByteBuffer s) {
    ByteBuffer d = s.duplicate().order(ByteOrder.nativeOrder());
    d.clear();
    if (array instanceof byte[]) {
      d.get((byte[]) array);
    } else if (array instanceof short[]) {
      d.asShortBuffer().get((short[]) array);
    } else if (array instanceof int[]) {
      d.asIntBuffer().get((int[]) array);
    } else if (array instanceof long[]) {
      d.asLongBuffer().get((long[]) array);
    } else if (array instanceof float[]) {
      d.asFloatBuffer().get((float[]) array);
    } else if (array instanceof double[]) {
      d.asDoubleBuffer().get((double[]) array);
    } else {
      boolean[] a = (boolean[]) array;
      for (int i = 0; i < a.length; i++) {
        a[i] = d.get(i) != 0;
      }
    }
  }

  /**
   * Direct memory reused by the blocking calls of one communicator (at most
   * two staged buffers per call: send and receive).
   */
  static final class Scratch {
    private final ByteBuffer[] slots = new ByteBuffer[2];
    private int next;

    /** Starts a call: its buffers take the slots in order. */
    Scratch begin() {
      next = 0;
      return this;
    }

    ByteBuffer take(int bytes) {
      int i = next++;
      if (i >= slots.length) {
        return ByteBuffer.allocateDirect(Math.max(1, bytes));
      }
      if (slots[i] == null || slots[i].capacity() < bytes) {
        int cap = Math.max(4096, Integer.highestOneBit(Math.max(1, bytes - 1)) << 1);
        if (cap < bytes) {
          cap = bytes; // above 1 GiB the doubling overflows
        }
        slots[i] = ByteBuffer.allocateDirect(cap);
      }
      ByteBuffer b = slots[i].duplicate();
      b.clear();
      return b;
    }
  }
}
