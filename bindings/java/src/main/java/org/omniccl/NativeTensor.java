package org.omniccl;

import java.nio.ByteBuffer;

/**
 * What the JNI layer turns into a one-dimensional CPU DLTensor: {@code count}
 * elements of {@code type} at {@code byteOffset} in a direct buffer. The
 * field names are read by omniccl.i.
 */
final class NativeTensor {
  final ByteBuffer buffer;
  final long byteOffset;
  final int dlCode;
  final int dlBits;
  final long count;

  NativeTensor(ByteBuffer buffer, long byteOffset, DataType type, long count) {
    this.buffer = buffer;
    this.byteOffset = byteOffset;
    this.dlCode = type.dlCode;
    this.dlBits = type.dlBits;
    this.count = count;
  }
}
