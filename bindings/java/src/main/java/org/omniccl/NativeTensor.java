package org.omniccl;

import java.nio.ByteBuffer;

/**
 * What the JNI layer turns into a one-dimensional DLTensor: {@code count}
 * elements of {@code type} at {@code byteOffset} in a direct buffer (host
 * memory), or, when {@code buffer} is null, at {@code address} on the DLPack
 * device {@code deviceType}:{@code deviceId} (CUDA memory). The field names
 * are read by omniccl.i.
 */
final class NativeTensor {
  final ByteBuffer buffer;
  final long byteOffset;
  final int dlCode;
  final int dlBits;
  final long count;
  final long address;
  final int deviceType;
  final int deviceId;

  NativeTensor(ByteBuffer buffer, long byteOffset, DataType type, long count) {
    this.buffer = buffer;
    this.byteOffset = byteOffset;
    this.dlCode = type.dlCode;
    this.dlBits = type.dlBits;
    this.count = count;
    this.address = 0;
    this.deviceType = DeviceBuffer.KDL_CPU;
    this.deviceId = 0;
  }

  /** Memory given by address on a (CUDA) device. */
  NativeTensor(DeviceBuffer d) {
    this.buffer = null;
    this.byteOffset = 0;
    this.dlCode = d.type.dlCode;
    this.dlBits = d.type.dlBits;
    this.count = d.count;
    this.address = d.address;
    this.deviceType = d.deviceType;
    this.deviceId = d.deviceId;
  }
}
