package org.omniccl.examples;

import java.io.IOException;
import java.io.Serializable;
import java.io.UncheckedIOException;
import java.net.InetAddress;
import java.net.ServerSocket;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.Collections;
import java.util.List;
import java.util.Random;
import org.apache.spark.BarrierTaskContext;
import org.apache.spark.SparkConf;
import org.apache.spark.api.java.JavaRDD;
import org.apache.spark.api.java.JavaSparkContext;
import org.omniccl.Communicator;
import org.omniccl.Config;
import org.omniccl.ReduceOp;
import scala.collection.JavaConverters;
import scala.reflect.ClassTag;
import scala.reflect.ClassTag$;
import scala.runtime.AbstractFunction1;

/**
 * A Spark job whose barrier stage makes each task a rank: every task computes
 * a histogram of its partition of a generated data set as a {@code double[]},
 * all-reduces it with the other tasks, and the driver checks that every task
 * holds the same totals as a serial computation.
 *
 * <ul>
 *   <li>rank = partition id; the rendezvous address (tcp://127.0.0.1:PORT,
 *       a free port chosen by task 0) goes to every task through {@link
 *       BarrierTaskContext#allGather(String)};
 *   <li>the communicator is closed in {@code finally}, so a failing task
 *       releases its peers (they get a PeerFailureException at once instead of
 *       waiting for a deadline);
 *   <li>a retried stage attempt rendezvouses afresh: a new port from task 0,
 *       nothing kept from the failed attempt. {@code --fail-first-attempt}
 *       makes task 2 of the first attempt throw after joining, to show it.
 * </ul>
 *
 * <p>Runs in local mode ({@code local[4,2]}: 4 task slots, as the barrier
 * stage needs one per partition, and a task may fail once). Prints "spark:
 * OK ..." and exits 0 when every task's histogram equals the serial one.
 */
public final class SparkHistogram {
  static final int PARTITIONS = 4;
  static final int BINS = 16;
  static final int VALUES = 200_000;

  private SparkHistogram() {}

  /**
   * Runs the job.
   *
   * @param args optional {@code --fail-first-attempt}
   */
  public static void main(String[] args) {
    boolean failFirst = Arrays.asList(args).contains("--fail-first-attempt");
    List<Double> data = generate();
    double[] serial = histogram(data);

    SparkConf conf = new SparkConf()
        .setAppName("omniccl-histogram")
        .setMaster("local[" + PARTITIONS + ",2]")
        .set("spark.ui.enabled", "false")
        .set("spark.driver.host", "127.0.0.1")
        .set("spark.driver.bindAddress", "127.0.0.1");
    List<TaskResult> results;
    try (JavaSparkContext sc = new JavaSparkContext(conf)) {
      sc.setLogLevel("WARN");
      JavaRDD<Double> rdd = sc.parallelize(data, PARTITIONS);
      ClassTag<TaskResult> tag = ClassTag$.MODULE$.apply(TaskResult.class);
      // The shuffle after the barrier stage (repartition) makes it a shuffle
      // map stage, which Spark re-runs as a whole when one of its tasks fails
      // (a failed barrier result stage would fail the job).
      results = rdd.rdd().barrier().mapPartitions(new HistogramTask(failFirst), false, tag)
          .toJavaRDD().repartition(1).collect();
    } catch (RuntimeException e) {
      System.out.println("spark: FAIL: the job failed: " + e);
      e.printStackTrace(System.out);
      System.exit(1);
      return;
    }

    int failures = 0;
    if (results.size() != PARTITIONS) {
      System.out.println("spark: FAIL: " + results.size() + " results, expected " + PARTITIONS);
      failures++;
    }
    for (TaskResult r : results) {
      boolean same = Arrays.equals(r.totals, serial);
      System.out.println("spark: task " + r.rank + " (stage attempt " + r.attempt + ") of "
          + r.size + " holds " + (same ? "the serial totals" : "WRONG totals "
          + Arrays.toString(r.totals)));
      failures += same ? 0 : 1;
    }
    if (failFirst && results.stream().noneMatch(r -> r.attempt > 0)) {
      System.out.println("spark: FAIL: the injected failure did not make Spark retry the stage");
      failures++;
    }
    if (failures > 0) {
      System.out.println("spark: FAIL (serial totals " + Arrays.toString(serial) + ")");
      System.exit(1);
    }
    System.out.println("spark: OK: " + PARTITIONS + " tasks, " + VALUES + " values, " + BINS
        + " bins, every task holds the serial totals " + Arrays.toString(serial));
    System.exit(0);
  }

  /** The data set: values in [0, 1), skewed so the bins differ. */
  static List<Double> generate() {
    Random random = new Random(20261123L);
    List<Double> data = new ArrayList<>(VALUES);
    for (int i = 0; i < VALUES; i++) {
      double u = random.nextDouble();
      data.add(u * u);
    }
    return Collections.unmodifiableList(data);
  }

  static double[] histogram(Iterable<Double> values) {
    double[] h = new double[BINS];
    for (double v : values) {
      h[Math.min(BINS - 1, (int) (v * BINS))] += 1;
    }
    return h;
  }

  /** What each task returns to the driver. */
  static final class TaskResult implements Serializable {
    private static final long serialVersionUID = 1L;
    final int rank;
    final int size;
    final int attempt;
    final double[] totals;

    TaskResult(int rank, int size, int attempt, double[] totals) {
      this.rank = rank;
      this.size = size;
      this.attempt = attempt;
      this.totals = totals;
    }
  }

  /** The barrier stage's task: one rank per partition. */
  static final class HistogramTask
      extends AbstractFunction1<scala.collection.Iterator<Double>, scala.collection.Iterator<TaskResult>>
      implements Serializable {
    private static final long serialVersionUID = 1L;
    private final boolean failFirstAttempt;

    HistogramTask(boolean failFirstAttempt) {
      this.failFirstAttempt = failFirstAttempt;
    }

    @Override
    public scala.collection.Iterator<TaskResult> apply(scala.collection.Iterator<Double> partition) {
      BarrierTaskContext ctx = BarrierTaskContext.get();
      int rank = ctx.partitionId();
      int size = ctx.getTaskInfos().length;
      int attempt = ctx.stageAttemptNumber();
      double[] hist = histogram(() -> JavaConverters.asJavaIterator(partition));

      // Task 0 picks the address; allGather hands every task every message.
      String mine = rank == 0 ? "tcp://127.0.0.1:" + freePort() : "";
      String url = ctx.allGather(mine)[0];

      Config config = Config.builder().timeout(java.time.Duration.ofSeconds(60)).build();
      Communicator comm = Communicator.init(url, rank, size, config);
      try {
        if (failFirstAttempt && attempt == 0 && rank == 2) {
          throw new IllegalStateException("injected failure in task 2 of stage attempt 0");
        }
        comm.allReduce(hist, ReduceOp.SUM);
      } finally {
        comm.close();
      }
      return JavaConverters.asScalaIterator(
          Collections.singletonList(new TaskResult(rank, size, attempt, hist)).iterator());
    }
  }

  private static int freePort() {
    try (ServerSocket s = new ServerSocket(0, 1, InetAddress.getLoopbackAddress())) {
      return s.getLocalPort();
    } catch (IOException e) {
      throw new UncheckedIOException(e);
    }
  }
}
