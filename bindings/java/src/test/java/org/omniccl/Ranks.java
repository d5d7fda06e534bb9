package org.omniccl;

import java.io.IOException;
import java.io.UncheckedIOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;
import java.util.function.Consumer;

/** Runs the ranks of one job as threads of this JVM, or as separate JVMs. */
final class Ranks {
  private Ranks() {}

  /** Rendezvous directories made by this JVM, removed when it exits. */
  private static final List<Path> DIRS = new ArrayList<>();

  static {
    Runtime.getRuntime().addShutdownHook(new Thread(() -> {
      synchronized (DIRS) {
        for (Path dir : DIRS) {
          try (java.util.stream.Stream<Path> files = Files.walk(dir)) {
            files.sorted(java.util.Comparator.reverseOrder()).forEach(p -> p.toFile().delete());
          } catch (IOException | UncheckedIOException ignored) {
            // best effort
          }
        }
      }
    }));
  }

  /** A fresh file:// rendezvous (no port to pick, nothing shared between jobs). */
  static String fileRendezvous() {
    try {
      Path dir = Files.createTempDirectory("omniccl-java-test-").toAbsolutePath();
      synchronized (DIRS) {
        DIRS.add(dir);
      }
      return "file://" + dir;
    } catch (IOException e) {
      throw new UncheckedIOException(e);
    }
  }

  /**
   * Runs `body` on n threads, each with its own communicator of rank i, and
   * rethrows the first failure. Each thread closes its communicator.
   */
  static void threads(int n, Config config, Consumer<Communicator> body) throws Exception {
    String url = fileRendezvous();
    ExecutorService pool = Executors.newFixedThreadPool(n);
    try {
      List<Future<?>> done = new ArrayList<>();
      for (int r = 0; r < n; r++) {
        int rank = r;
        done.add(pool.submit(() -> {
          try (Communicator c = Communicator.init(url, rank, n, config)) {
            body.accept(c);
          }
          return null;
        }));
      }
      for (Future<?> f : done) {
        try {
          f.get(120, TimeUnit.SECONDS);
        } catch (java.util.concurrent.ExecutionException e) {
          if (e.getCause() instanceof Exception) {
            throw (Exception) e.getCause();
          }
          throw new AssertionError(e.getCause());
        }
      }
    } finally {
      pool.shutdownNow();
    }
  }

  /** The command that starts a JVM running RankMain with this test's class path. */
  static List<String> javaCommand(String... args) {
    List<String> cmd = new ArrayList<>();
    cmd.add(Path.of(System.getProperty("java.home"), "bin", "java").toString());
    cmd.add("-cp");
    cmd.add(System.getProperty("java.class.path"));
    cmd.add("-Xss1m");
    cmd.add("-XX:TieredStopAtLevel=1"); // short-lived JVMs: start fast
    cmd.add(RankMain.class.getName());
    cmd.addAll(List.of(args));
    return cmd;
  }

  /** Starts rank `rank` of `n` as a JVM; its output goes to `log`. */
  static Process process(int rank, int n, String url, Path log, String... args) throws IOException {
    List<String> cmd = javaCommand(args);
    ProcessBuilder pb = new ProcessBuilder(cmd);
    pb.environment().put("OMNICCL_TEST_URL", url);
    pb.environment().put("RANK", Integer.toString(rank));
    pb.environment().put("WORLD_SIZE", Integer.toString(n));
    pb.redirectErrorStream(true);
    pb.redirectOutput(log.toFile());
    return pb.start();
  }
}
