package org.omniccl;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.StandardCopyOption;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.TimeUnit;
import java.util.stream.Stream;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.api.io.TempDir;

/**
 * The loader's two places, each tried in a fresh JVM whose class path holds
 * the classes without the bundled libraries.
 */
@Timeout(value = 60, unit = TimeUnit.SECONDS)
class NativeLoaderTest {

  /** target/classes without native/, copied to dir. */
  private static Path classesWithoutNative(Path dir) throws IOException {
    Path classes = Path.of(NativeLoader.class.getProtectionDomain().getCodeSource().getLocation().getPath());
    Path out = dir.resolve("classes");
    try (Stream<Path> files = Files.walk(classes)) {
      for (Path p : (Iterable<Path>) files::iterator) {
        Path rel = classes.relativize(p);
        if (rel.startsWith("native")) {
          continue;
        }
        Files.copy(p, out.resolve(rel.toString()), StandardCopyOption.REPLACE_EXISTING);
      }
    }
    return out;
  }

  private static String run(Path classes, String libraryPath, Path log) throws Exception {
    Path testClasses = Path.of(LoaderProbe.class.getProtectionDomain().getCodeSource().getLocation().getPath());
    List<String> cmd = new ArrayList<>();
    cmd.add(Path.of(System.getProperty("java.home"), "bin", "java").toString());
    cmd.add("-Djava.library.path=" + libraryPath);
    cmd.add("-cp");
    cmd.add(classes + java.io.File.pathSeparator + testClasses);
    cmd.add(LoaderProbe.class.getName());
    Process p = new ProcessBuilder(cmd).redirectErrorStream(true).redirectOutput(log.toFile()).start();
    assertTrue(p.waitFor(30, TimeUnit.SECONDS), "probe JVM did not finish");
    return Files.readString(log);
  }

  @Test
  void neitherPlaceGivesAnErrorNamingBoth(@TempDir Path dir) throws Exception {
    String out = run(classesWithoutNative(dir), "/nonexistent-omniccl", dir.resolve("log"));
    assertTrue(out.contains("UnsatisfiedLinkError"), out);
    assertTrue(out.contains("(1) java.library.path [/nonexistent-omniccl]"), out);
    assertTrue(out.contains("(2) the jar's native/linux-x86_64/: no resource native/linux-x86_64/"), out);
  }

  @Test
  void javaLibraryPathComesFirst(@TempDir Path dir) throws Exception {
    Path classes = Path.of(NativeLoader.class.getProtectionDomain().getCodeSource().getLocation().getPath());
    Path lib = classes.resolve("native/linux-x86_64");
    assertTrue(Files.exists(lib.resolve("libomniccl_jni.so")), "no bundled library in " + lib);
    String out = run(classesWithoutNative(dir), lib.toString(), dir.resolve("log"));
    assertEquals("version " + Communicator.libraryVersion() + "\n", out);
  }
}
