package org.omniccl;

import java.util.List;
import java.util.Objects;

/**
 * How a reduction combines the ranks' values: the constants {@link #SUM},
 * {@link #PROD}, {@link #MIN}, {@link #MAX}, {@link #AVG}, {@link #BAND},
 * {@link #BOR}, {@link #BXOR}, {@link #LAND}, {@link #LOR}, {@link #LXOR},
 * {@link #MAXLOC}, {@link #MINLOC}, or a pre-multiplied sum made by {@link
 * #premulSum(double)}. The bitwise ops take integer and bool data only (a
 * float gets an {@link InvalidArgumentException}).
 *
 * <p>A class with enum-like constants rather than an {@code enum}, so that a
 * pre-multiplied sum can carry its scalar; {@link #values()} and {@link
 * #name()} work as for an enum.
 */
public final class ReduceOp {
  /** Sum. */
  public static final ReduceOp SUM = new ReduceOp("SUM", 0, Double.NaN);
  /** Product. */
  public static final ReduceOp PROD = new ReduceOp("PROD", 1, Double.NaN);
  /** Minimum. */
  public static final ReduceOp MIN = new ReduceOp("MIN", 2, Double.NaN);
  /** Maximum. */
  public static final ReduceOp MAX = new ReduceOp("MAX", 3, Double.NaN);
  /** Sum divided by the number of ranks (integers: truncating division). */
  public static final ReduceOp AVG = new ReduceOp("AVG", 4, Double.NaN);
  /** Bitwise AND (logical AND for bool). */
  public static final ReduceOp BAND = new ReduceOp("BAND", 5, Double.NaN);
  /** Bitwise OR (logical OR for bool). */
  public static final ReduceOp BOR = new ReduceOp("BOR", 6, Double.NaN);
  /** Bitwise XOR (logical XOR for bool). */
  public static final ReduceOp BXOR = new ReduceOp("BXOR", 7, Double.NaN);
  /** Logical AND (MPI_LAND): 1 where every input is nonzero, else 0; every real type, floats included. */
  public static final ReduceOp LAND = new ReduceOp("LAND", 9, Double.NaN);
  /** Logical OR (MPI_LOR): 1 where any input is nonzero, else 0. */
  public static final ReduceOp LOR = new ReduceOp("LOR", 10, Double.NaN);
  /** Logical XOR (MPI_LXOR): 1 where an odd number of inputs are nonzero, else 0. */
  public static final ReduceOp LXOR = new ReduceOp("LXOR", 11, Double.NaN);
  /**
   * MPI_MAXLOC over (value, index) pairs: the data holds length / 2 pairs,
   * interleaved, both of the data's own type (integers, FLOAT32, FLOAT64);
   * the larger value wins, on a tie the smaller index.
   */
  public static final ReduceOp MAXLOC = new ReduceOp("MAXLOC", 12, Double.NaN);
  /** MPI_MINLOC: as {@link #MAXLOC}, the smaller value winning. */
  public static final ReduceOp MINLOC = new ReduceOp("MINLOC", 13, Double.NaN);

  private static final List<ReduceOp> BUILT_IN =
      List.of(SUM, PROD, MIN, MAX, AVG, BAND, BOR, BXOR, LAND, LOR, LXOR, MAXLOC, MINLOC);

  private final String name;
  private final int code;
  private final double scalar;

  private ReduceOp(String name, int code, double scalar) {
    this.name = name;
    this.code = code;
    this.scalar = scalar;
  }

  /**
   * A sum in which every rank's input is first multiplied by {@code scalar}
   * (NCCL's {@code ncclRedOpCreatePreMulSum}); for integer data the scalar
   * must be integral.
   *
   * @param scalar the factor
   * @return the op
   */
  public static ReduceOp premulSum(double scalar) {
    if (!Double.isFinite(scalar)) {
      throw new IllegalArgumentException("premulSum: scalar must be finite, got " + scalar);
    }
    return new ReduceOp("PREMUL_SUM(" + scalar + ")", 8, scalar);
  }

  /**
   * The built-in ops, SUM to MINLOC, in C ABI order (the pre-multiplied sum,
   * code 8, is made by {@link #premulSum(double)}).
   *
   * @return the thirteen built-in ops
   */
  public static List<ReduceOp> values() {
    return BUILT_IN;
  }

  /**
   * The op's name: "SUM", ..., or "PREMUL_SUM(scalar)".
   *
   * @return the name
   */
  public String name() {
    return name;
  }

  /**
   * Whether this is a pre-multiplied sum.
   *
   * @return true for ops made by {@link #premulSum(double)}
   */
  public boolean isPremulSum() {
    return code == 8;
  }

  /**
   * The factor of a pre-multiplied sum.
   *
   * @return the scalar, or NaN for the built-in ops
   */
  public double scalar() {
    return scalar;
  }

  /** The C value for a built-in op (a premul sum is created per communicator). */
  int code() {
    return code;
  }

  @Override
  public String toString() {
    return name;
  }

  @Override
  public boolean equals(Object o) {
    if (!(o instanceof ReduceOp)) {
      return false;
    }
    ReduceOp other = (ReduceOp) o;
    return code == other.code && Double.compare(scalar, other.scalar) == 0;
  }

  @Override
  public int hashCode() {
    return Objects.hash(code, scalar);
  }
}
