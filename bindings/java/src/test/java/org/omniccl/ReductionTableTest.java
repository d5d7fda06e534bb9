package org.omniccl;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.IOException;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.Paths;
import java.util.ArrayList;
import java.util.Collections;
import java.util.List;
import java.util.Locale;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/**
 * Every row of bindings/reduction_table.tsv (which reduce op the library
 * accepts for which dtype; the C++, Python and Rust tests read it too) on two
 * ranks as threads: allReduce and reduceScatter of direct ByteBuffers with
 * small deterministic inputs. An {@code ok} row must give what this class's
 * own reduction of the ranks' inputs gives (exact, except AVG on floating
 * types); a {@code refused} row must throw InvalidArgumentException naming the
 * op and the dtype. Unsigned, float16, bfloat16 and complex values have no
 * Java primitive: their bits are written and read here. The float8 dtypes have
 * no {@link DataType} in Java, so their rows are skipped (and counted). The
 * table's PREMUL_SUM is {@code ReduceOp.premulSum(1.0)}.
 */
class ReductionTableTest {
  private static final int COUNT = 8; // even (MAXLOC/MINLOC pairs), one block of 4 per rank

  /** One row: op and dtype as the table names them. */
  private static final class Row {
    final String op;
    final String dtype;
    final boolean ok;

    Row(String op, String dtype, boolean ok) {
      this.op = op;
      this.dtype = dtype;
      this.ok = ok;
    }

    @Override
    public String toString() {
      return op + " " + dtype + " " + (ok ? "ok" : "refused");
    }
  }

  static List<Row> readTable() throws IOException {
    Path path = Paths.get(System.getProperty("basedir", ".")).resolve("../reduction_table.tsv");
    List<Row> rows = new ArrayList<>();
    for (String line : Files.readAllLines(path)) {
      if (line.isBlank() || line.startsWith("#")) {
        continue;
      }
      String[] cols = line.split("\t");
      assertTrue(cols.length == 3 && (cols[2].equals("ok") || cols[2].equals("refused")), "bad row " + line);
      rows.add(new Row(cols[0], cols[1], cols[2].equals("ok")));
    }
    return rows;
  }

  @Test
  @Timeout(value = 60, unit = TimeUnit.SECONDS)
  void everyRowOnTwoRanks() throws Exception {
    List<Row> rows = readTable();
    assertEquals(14 * 17, rows.size(), "one row per (op, dtype) pair");
    List<String> problems = Collections.synchronizedList(new ArrayList<>());
    int[] skipped = new int[2];
    Ranks.threads(2, null, c -> {
      for (int i = 0; i < rows.size(); i++) {
        Row r = rows.get(i);
        DataType type = dataType(r.dtype);
        if (type == null) {
          skipped[c.rank()]++; // float8: no DataType in Java
          continue;
        }
        problems.addAll(new Case(c, i, r, type).run());
      }
    });
    assertTrue(problems.isEmpty(), problems.size() + " problems:\n" + String.join("\n", problems));
    assertEquals(2 * 14, skipped[0], "the rows skipped are the float8 ones");
  }

  /** The DataType of a table dtype, or null where Java has none. */
  static DataType dataType(String name) {
    try {
      return DataType.valueOf(name.toUpperCase(Locale.ROOT));
    } catch (IllegalArgumentException e) {
      return null;
    }
  }

  static ReduceOp reduceOp(String name) {
    if (name.equals("PREMUL_SUM")) {
      return ReduceOp.premulSum(1.0);
    }
    for (ReduceOp op : ReduceOp.values()) {
      if (op.name().equals(name)) {
        return op;
      }
    }
    throw new AssertionError("unknown op " + name);
  }

  /** A deterministic hash of (row, rank, element). */
  static long hash(int row, int rank, int j) {
    long x = ((long) row << 40) ^ ((long) rank << 20) ^ j;
    x += 0x9e3779b97f4a7c15L;
    x = (x ^ (x >>> 30)) * 0xbf58476d1ce4e5b9L;
    x = (x ^ (x >>> 27)) * 0x94d049bb133111ebL;
    return x ^ (x >>> 31);
  }

  /** float16 bits of a value exact in float16 (the inputs are small integers). */
  static short toHalf(double v) {
    if (v == 0) {
      return 0;
    }
    int e = Math.getExponent(v);
    long mant = Math.round((Math.abs(v) / Math.scalb(1.0, e) - 1) * 1024);
    return (short) ((v < 0 ? 0x8000 : 0) | ((e + 15) << 10) | mant);
  }

  static double fromHalf(short h) {
    int e = (h >> 10) & 0x1f;
    int m = h & 0x3ff;
    double sign = (h & 0x8000) != 0 ? -1 : 1;
    if (e == 0x1f) {
      return m != 0 ? Double.NaN : sign * Double.POSITIVE_INFINITY;
    }
    return e == 0 ? sign * Math.scalb((double) m, -24) : sign * Math.scalb(1 + m / 1024.0, e - 15);
  }

  /** One row on one rank: inputs, the two calls, the checks. */
  private static final class Case {
    final Communicator comm;
    final int row;
    final Row r;
    final DataType type;
    final int n;
    final boolean loc;
    final boolean logical;
    final boolean floating;
    final boolean complex;
    final boolean unsigned;

    Case(Communicator comm, int row, Row r, DataType type) {
      this.comm = comm;
      this.row = row;
      this.r = r;
      this.type = type;
      this.n = comm.size();
      this.loc = r.op.equals("MAXLOC") || r.op.equals("MINLOC");
      this.logical = r.op.equals("LAND") || r.op.equals("LOR") || r.op.equals("LXOR");
      this.complex = type == DataType.COMPLEX64 || type == DataType.COMPLEX128;
      this.floating = complex || type.name().contains("FLOAT");
      this.unsigned = type.name().startsWith("UINT");
    }

    // ------------------------------------------------------------ inputs: ints as long, floats as double

    int bits() {
      return complex ? type.dlBits / 2 : type.dlBits;
    }

    /** v as an integer of this type's width (sign-extended, or zero-extended if unsigned). */
    long narrow(long v) {
      int b = bits();
      if (b == 64) {
        return v;
      }
      return unsigned || type == DataType.BOOL ? v & ((1L << b) - 1) : (v << (64 - b)) >> (64 - b);
    }

    long intInput(int rank, int j) {
      long h = hash(row, rank, j);
      if (loc) {
        return j % 2 == 0 ? Long.remainderUnsigned(h, 4) : Long.remainderUnsigned(h, 8);
      }
      return type == DataType.BOOL ? h & 1 : narrow(h);
    }

    /** Real part (part 0) or imaginary part (part 1) of a floating input. */
    double floatInput(int rank, int j, int part) {
      long h = hash(row, rank, j) >>> (16 * part);
      if (loc) {
        return intInput(rank, j);
      }
      int lim = r.op.equals("PROD") ? 2 : 8;
      double v = Long.remainderUnsigned(h, 2 * lim + 1) - lim;
      return logical && Long.remainderUnsigned(h >>> 8, 3) == 0 ? 0 : v;
    }

    // ------------------------------------------------------------ the reference

    long combineInt(long a, long b) {
      switch (r.op) {
        case "PROD": return type == DataType.BOOL ? a & b : a * b;
        case "MIN": return unsigned ? (Long.compareUnsigned(a, b) <= 0 ? a : b) : Math.min(a, b);
        case "MAX": return unsigned ? (Long.compareUnsigned(a, b) >= 0 ? a : b) : Math.max(a, b);
        case "BAND": return a & b;
        case "BOR": return a | b;
        case "BXOR": return a ^ b;
        case "LAND": return (a != 0 && b != 0) ? 1 : 0;
        case "LOR": return (a != 0 || b != 0) ? 1 : 0;
        case "LXOR": return ((a != 0) != (b != 0)) ? 1 : 0;
        default: return type == DataType.BOOL ? a | b : a + b; // SUM, AVG, PREMUL_SUM
      }
    }

    long intWant(int j) {
      if (loc) {
        return locWant(j);
      }
      long acc = logical ? (intInput(0, j) != 0 ? 1 : 0) : intInput(0, j);
      for (int k = 1; k < n; k++) {
        acc = combineInt(acc, intInput(k, j));
      }
      acc = narrow(acc);
      if (r.op.equals("AVG")) {
        acc = unsigned ? Long.divideUnsigned(acc, n) : acc / n; // truncating division
      }
      return acc;
    }

    /** Element j of the MAXLOC/MINLOC result: the winner's value or index (ties: the smaller index). */
    long locWant(int j) {
      int p = j - j % 2;
      long bestV = intInput(0, p);
      long bestI = intInput(0, p + 1);
      for (int k = 1; k < n; k++) {
        long v = intInput(k, p);
        long i = intInput(k, p + 1);
        boolean ahead = r.op.equals("MAXLOC") ? v > bestV : v < bestV;
        if (ahead || (v == bestV && i < bestI)) {
          bestV = v;
          bestI = i;
        }
      }
      return j % 2 == 0 ? bestV : bestI;
    }

    /** Element j of the floating result: [real, imaginary]. */
    double[] floatWant(int j) {
      if (loc) {
        return new double[] {locWant(j), 0};
      }
      double re = floatInput(0, j, 0);
      double im = complex ? floatInput(0, j, 1) : 0;
      if (logical) {
        re = re != 0 ? 1 : 0;
      }
      for (int k = 1; k < n; k++) {
        double x = floatInput(k, j, 0);
        double y = complex ? floatInput(k, j, 1) : 0;
        switch (r.op) {
          case "PROD": double t = re * x - im * y; im = re * y + im * x; re = t; break;
          case "MIN": re = Math.min(re, x); break;
          case "MAX": re = Math.max(re, x); break;
          case "LAND": re = (re != 0 && x != 0) ? 1 : 0; break;
          case "LOR": re = (re != 0 || x != 0) ? 1 : 0; break;
          case "LXOR": re = ((re != 0) != (x != 0)) ? 1 : 0; break;
          default: re += x; im += y; break; // SUM, AVG, PREMUL_SUM
        }
      }
      return r.op.equals("AVG") ? new double[] {re / n, im / n} : new double[] {re, im};
    }

    // ------------------------------------------------------------ bytes

    void putFloat(ByteBuffer b, double v, int width) {
      switch (type == DataType.BFLOAT16 ? -16 : width) {
        case -16: b.putShort((short) (Float.floatToIntBits((float) v) >>> 16)); break;
        case 16: b.putShort(toHalf(v)); break;
        case 32: b.putFloat((float) v); break;
        default: b.putDouble(v); break;
      }
    }

    double getFloat(ByteBuffer b, int width) {
      switch (type == DataType.BFLOAT16 ? -16 : width) {
        case -16: return Float.intBitsToFloat((b.getShort() & 0xffff) << 16);
        case 16: return fromHalf(b.getShort());
        case 32: return b.getFloat();
        default: return b.getDouble();
      }
    }

    ByteBuffer input(int rank) {
      ByteBuffer b = ByteBuffer.allocateDirect(COUNT * type.byteSize()).order(ByteOrder.nativeOrder());
      for (int j = 0; j < COUNT; j++) {
        if (floating) {
          putFloat(b, floatInput(rank, j, 0), bits());
          if (complex) {
            putFloat(b, floatInput(rank, j, 1), bits());
          }
        } else {
          long v = intInput(rank, j);
          switch (bits()) {
            case 8: b.put((byte) v); break;
            case 16: b.putShort((short) v); break;
            case 32: b.putInt((int) v); break;
            default: b.putLong(v); break;
          }
        }
      }
      return b.flip();
    }

    /** "" or what is wrong with element j (global index base + j) of out. */
    String check(ByteBuffer out, int j, int base) {
      if (floating) {
        double[] want = floatWant(base + j);
        double re = getFloat(out, bits());
        double im = complex ? getFloat(out, bits()) : 0;
        double tol = !r.op.equals("AVG") ? 0
            : type == DataType.FLOAT16 ? 2e-3 : type == DataType.BFLOAT16 ? 1e-2 : 1e-6;
        boolean ok = Math.abs(re - want[0]) <= tol * Math.abs(want[0])
            && Math.abs(im - want[1]) <= tol * Math.abs(want[1]);
        return ok ? "" : "element " + j + ": got (" + re + ", " + im + "), want (" + want[0] + ", " + want[1] + ")";
      }
      long got;
      switch (bits()) {
        case 8: got = out.get(); break;
        case 16: got = out.getShort(); break;
        case 32: got = out.getInt(); break;
        default: got = out.getLong(); break;
      }
      long want = intWant(base + j);
      return narrow(got) == want ? "" : "element " + j + ": got " + narrow(got) + ", want " + want;
    }

    List<String> run() {
      List<String> problems = new ArrayList<>();
      int block = COUNT / n;
      ByteBuffer send = input(comm.rank());
      ByteBuffer all = ByteBuffer.allocateDirect(COUNT * type.byteSize()).order(ByteOrder.nativeOrder());
      ByteBuffer part = ByteBuffer.allocateDirect(block * type.byteSize()).order(ByteOrder.nativeOrder());
      for (int call = 0; call < 2; call++) {
        String name = call == 0 ? "allReduce" : "reduceScatter";
        ByteBuffer out = call == 0 ? all : part;
        try {
          if (call == 0) {
            comm.allReduce(send, all, type, reduceOp(r.op));
          } else {
            comm.reduceScatter(send, part, type, reduceOp(r.op));
          }
        } catch (InvalidArgumentException e) {
          String msg = String.valueOf(e.getMessage());
          if (r.ok || !msg.contains(r.op) || !msg.contains(r.dtype)) {
            problems.add(name + " of " + r + ": " + msg);
          }
          continue;
        }
        if (!r.ok) {
          problems.add(name + " of " + r + ": no error");
          continue;
        }
        int base = call == 0 ? 0 : comm.rank() * block;
        for (int j = 0; j < out.capacity() / type.byteSize(); j++) {
          String bad = check(out, j, base);
          if (!bad.isEmpty()) {
            problems.add(name + " of " + r + ": " + bad);
          }
        }
      }
      return problems;
    }
  }
}
