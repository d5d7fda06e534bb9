package org.omniccl;

import java.lang.reflect.Array;

/**
 * The seven primitive array types the facade takes, for tests that run the
 * same checks over each: make an array from values, read it back as doubles.
 * Test values are small integers, exact in every type.
 */
enum Kind {
  BYTE(byte.class, true),
  SHORT(short.class, true),
  INT(int.class, true),
  LONG(long.class, true),
  FLOAT(float.class, false),
  DOUBLE(double.class, false),
  BOOLEAN(boolean.class, true);

  final Class<?> component;
  final Class<?> arrayClass;
  final boolean integral;

  Kind(Class<?> component, boolean integral) {
    this.component = component;
    this.arrayClass = Array.newInstance(component, 0).getClass();
    this.integral = integral;
  }

  Object make(double[] values) {
    Object a = Array.newInstance(component, values.length);
    for (int i = 0; i < values.length; i++) {
      set(a, i, values[i]);
    }
    return a;
  }

  Object zeros(int n) {
    return Array.newInstance(component, n);
  }

  void set(Object a, int i, double v) {
    switch (this) {
      case BYTE: Array.setByte(a, i, (byte) v); break;
      case SHORT: Array.setShort(a, i, (short) v); break;
      case INT: Array.setInt(a, i, (int) v); break;
      case LONG: Array.setLong(a, i, (long) v); break;
      case FLOAT: Array.setFloat(a, i, (float) v); break;
      case DOUBLE: Array.setDouble(a, i, v); break;
      default: Array.setBoolean(a, i, v != 0); break;
    }
  }

  double[] read(Object a) {
    double[] out = new double[Array.getLength(a)];
    for (int i = 0; i < out.length; i++) {
      Object v = Array.get(a, i);
      out[i] = v instanceof Boolean ? (((Boolean) v) ? 1 : 0) : ((Number) v).doubleValue();
    }
    return out;
  }
}
