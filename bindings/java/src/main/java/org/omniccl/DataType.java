package org.omniccl;

/**
 * Element types of the data a collective moves, for direct {@link
 * java.nio.ByteBuffer}s (primitive arrays imply theirs: {@code byte[]} is
 * {@link #INT8}, {@code short[]} {@link #INT16}, {@code int[]} {@link #INT32},
 * {@code long[]} {@link #INT64}, {@code float[]} {@link #FLOAT32}, {@code
 * double[]} {@link #FLOAT64}, {@code boolean[]} {@link #BOOL}). Values are in
 * native byte order. The unsigned, 16-bit float and complex types have no
 * Java primitive; use a ByteBuffer with them.
 */
public enum DataType {
  /** 8-bit signed integer. */
  INT8(0, 8),
  /** 16-bit signed integer. */
  INT16(0, 16),
  /** 32-bit signed integer. */
  INT32(0, 32),
  /** 64-bit signed integer. */
  INT64(0, 64),
  /** 8-bit unsigned integer. */
  UINT8(1, 8),
  /** 16-bit unsigned integer. */
  UINT16(1, 16),
  /** 32-bit unsigned integer. */
  UINT32(1, 32),
  /** 64-bit unsigned integer. */
  UINT64(1, 64),
  /** IEEE 754 half precision. */
  FLOAT16(2, 16),
  /** bfloat16 (the upper half of a float32). */
  BFLOAT16(4, 16),
  /** IEEE 754 single precision. */
  FLOAT32(2, 32),
  /** IEEE 754 double precision. */
  FLOAT64(2, 64),
  /** One byte per value, 0 or 1. */
  BOOL(6, 8),
  /** Complex number of two float32 (real, imaginary): SUM, PROD, AVG, pre-multiplied sums. */
  COMPLEX64(5, 64),
  /** Complex number of two float64 (real, imaginary): SUM, PROD, AVG, pre-multiplied sums. */
  COMPLEX128(5, 128);

  /** DLPack type code and bits (DLDataType), as the C ABI takes them. */
  final int dlCode;
  final int dlBits;

  DataType(int dlCode, int dlBits) {
    this.dlCode = dlCode;
    this.dlBits = dlBits;
  }

  /**
   * Bytes per element.
   *
   * @return the element size in bytes
   */
  public int byteSize() {
    return dlBits / 8;
  }
}
