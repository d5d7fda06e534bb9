package org.omniccl;

import java.nio.ByteBuffer;
import java.util.Objects;

/**
 * A one-dimensional view of {@code count} elements of one {@link DataType} on
 * a device: CUDA device memory given by its address ({@link #cuda}), CUDA
 * managed memory ({@link #cudaManaged}) or a direct host buffer ({@link
 * #host}). Every collective of {@link Communicator} has an overload taking
 * DeviceBuffers; {@link Communicator#withOptions} gives them a CUDA stream and
 * a per-call deadline.
 *
 * <pre>{@code
 * long grads = ...;   // a device pointer from cudaMalloc (JCuda, JavaCPP, a JNI library, ...)
 * long stream = ...;  // a cudaStream_t of the same GPU
 * DeviceBuffer buf = DeviceBuffer.cuda(grads, n, DataType.FLOAT32, 0);
 * comm.withOptions(CallOptions.builder().stream(stream).build())
 *     .allReduce(buf, buf, ReduceOp.AVG);   // enqueued on stream; returns without waiting for the GPU
 * }</pre>
 *
 * <p><b>Semantics</b> are NCCL's: a call on CUDA buffers enqueues the work on
 * the call's stream (the default stream without options) and returns; work
 * queued after it on that stream sees the result, and the future of an
 * {@code ...Async} call completes once the results are on the device. An
 * error that happens on the GPU later makes the communicator fail, and the
 * next call reports it. The caller keeps the memory allocated and leaves it
 * alone until the stream has run the call: the library cannot check that.
 *
 * <p><b>Without a GPU</b> (no CUDA driver or device, or a native library built
 * without CUDA) a CUDA buffer is an {@link OmniCCLException} with status
 * {@code OCCL_ERR_UNSUPPORTED} whose message names the device ({@code
 * cuda:0}) and the reason. Buffers of one call on different devices are an
 * {@link InvalidArgumentException}, raised before anything is sent. The JUnit
 * tests check these error paths and the host-memory paths; the CUDA data path
 * itself is tested by the C++ {@code gpu} suites on a machine with a GPU.
 */
public final class DeviceBuffer {
  /** DLPack device types (DLDeviceType). */
  static final int KDL_CPU = 1;
  static final int KDL_CUDA = 2;
  static final int KDL_CUDA_MANAGED = 13;

  final long address;
  final long count;
  final DataType type;
  final int deviceType;
  final int deviceId;
  /** The host memory of a {@link #host} buffer, else null. */
  final ByteBuffer hostBuffer;

  private DeviceBuffer(long address, long count, DataType type, int deviceType, int deviceId,
      ByteBuffer hostBuffer) {
    this.address = address;
    this.count = count;
    this.type = type;
    this.deviceType = deviceType;
    this.deviceId = deviceId;
    this.hostBuffer = hostBuffer;
  }

  /**
   * CUDA device memory: {@code count} elements of {@code type} at {@code
   * devicePtr} on GPU {@code device}.
   *
   * @param devicePtr the device address (a {@code cudaMalloc} result), not 0 unless count is 0
   * @param count the number of elements, at least 0
   * @param type the element type
   * @param device the CUDA device ordinal the memory belongs to, at least 0
   * @return the view
   * @throws IllegalArgumentException if an argument is out of range (the message names it)
   * @throws NullPointerException if type is null
   */
  public static DeviceBuffer cuda(long devicePtr, long count, DataType type, int device) {
    return device(devicePtr, count, type, KDL_CUDA, device);
  }

  /**
   * CUDA managed memory ({@code cudaMallocManaged}) used on GPU {@code device}.
   *
   * @param ptr the address, not 0 unless count is 0
   * @param count the number of elements, at least 0
   * @param type the element type
   * @param device the CUDA device ordinal, at least 0
   * @return the view
   * @throws IllegalArgumentException if an argument is out of range (the message names it)
   * @throws NullPointerException if type is null
   */
  public static DeviceBuffer cudaManaged(long ptr, long count, DataType type, int device) {
    return device(ptr, count, type, KDL_CUDA_MANAGED, device);
  }

  /**
   * Host memory: the elements of a direct buffer from its position to its
   * limit (native byte order), as the ByteBuffer overloads take it.
   *
   * @param buffer a direct buffer
   * @param type the element type
   * @return the view
   * @throws NullPointerException if an argument is null
   */
  public static DeviceBuffer host(ByteBuffer buffer, DataType type) {
    Objects.requireNonNull(buffer, "buffer");
    Objects.requireNonNull(type, "type");
    return new DeviceBuffer(0, buffer.remaining() / type.byteSize(), type, KDL_CPU, 0, buffer);
  }

  private static DeviceBuffer device(long ptr, long count, DataType type, int kind, int device) {
    Objects.requireNonNull(type, "type");
    if (count < 0) {
      throw new IllegalArgumentException("count is negative (" + count + ")");
    }
    if (device < 0) {
      throw new IllegalArgumentException("device is negative (" + device + ")");
    }
    if (ptr == 0 && count > 0) {
      throw new IllegalArgumentException("the device pointer is 0 (NULL) but count is " + count);
    }
    return new DeviceBuffer(ptr, count, type, kind, device, null);
  }

  /**
   * The number of elements.
   *
   * @return the element count
   */
  public long count() {
    return count;
  }

  /**
   * The element type.
   *
   * @return the type
   */
  public DataType type() {
    return type;
  }

  /**
   * Where the memory lives: {@code "cpu"}, {@code "cuda:N"} or {@code "cuda_managed:N"}.
   *
   * @return the device's name
   */
  public String device() {
    switch (deviceType) {
      case KDL_CUDA:
        return "cuda:" + deviceId;
      case KDL_CUDA_MANAGED:
        return "cuda_managed:" + deviceId;
      default:
        return "cpu";
    }
  }

  @Override
  public String toString() {
    return "DeviceBuffer[" + count + " x " + type + " on " + device() + "]";
  }
}
