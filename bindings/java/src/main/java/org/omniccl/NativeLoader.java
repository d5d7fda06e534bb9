package org.omniccl;

import java.io.IOException;
import java.io.InputStream;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.StandardCopyOption;
import java.util.Locale;

/**
 * Loads the JNI library once per class loader, trying in order:
 *
 * <ol>
 *   <li>{@code System.loadLibrary("omniccl_jni")}: {@code java.library.path}
 *       (libomniccl_jni.so finds libomniccl.so.1 next to itself or through
 *       the system's search path);
 *   <li>the copies bundled in the jar under {@code native/linux-x86_64/},
 *       extracted to a private (0700) temporary directory, loaded, and
 *       deleted again (Linux keeps a loaded library mapped).
 * </ol>
 *
 * If neither works, the {@link UnsatisfiedLinkError} names both places and
 * why each failed.
 */
final class NativeLoader {
  static final String LIBRARY = "omniccl_jni";
  static final String RESOURCE_DIR = "native/linux-x86_64/";
  private static final String[] BUNDLED = {"libomniccl.so.1", "libomniccl_jni.so"};

  private static boolean loaded;

  private NativeLoader() {}

  static synchronized void load() {
    if (loaded) {
      return;
    }
    String fromPath;
    try {
      System.loadLibrary(LIBRARY);
      loaded = true;
      return;
    } catch (UnsatisfiedLinkError e) {
      fromPath = e.getMessage();
    }
    String fromJar = loadFromJar();
    if (fromJar == null) {
      loaded = true;
      return;
    }
    throw new UnsatisfiedLinkError(
        "OmniCCL: cannot load the native library lib" + LIBRARY + ".so. Tried (1) java.library.path ["
            + System.getProperty("java.library.path") + "]: " + fromPath + "; (2) the jar's "
            + RESOURCE_DIR + ": " + fromJar
            + ". Put the directory holding libomniccl_jni.so and libomniccl.so.1 on"
            + " -Djava.library.path, or use the org.omniccl:omniccl jar built for linux-x86_64.");
  }

  /** Returns null on success, else why it failed. */
  private static String loadFromJar() {
    String os = System.getProperty("os.name", "").toLowerCase(Locale.ROOT);
    String arch = System.getProperty("os.arch", "");
    if (!os.contains("linux") || !(arch.equals("amd64") || arch.equals("x86_64"))) {
      return "the jar bundles linux-x86_64 libraries only; this is " + os + "/" + arch;
    }
    for (String name : BUNDLED) {
      if (NativeLoader.class.getClassLoader().getResource(RESOURCE_DIR + name) == null) {
        return "no resource " + RESOURCE_DIR + name + " on the class path";
      }
    }
    Path dir = null;
    try {
      dir = Files.createTempDirectory("omniccl-native-");
      for (String name : BUNDLED) {
        try (InputStream in = NativeLoader.class.getClassLoader().getResourceAsStream(RESOURCE_DIR + name)) {
          Files.copy(in, dir.resolve(name), StandardCopyOption.REPLACE_EXISTING);
        }
      }
      // libomniccl_jni.so has RUNPATH $ORIGIN: it finds libomniccl.so.1 here.
      System.load(dir.resolve("libomniccl_jni.so").toAbsolutePath().toString());
      return null;
    } catch (IOException | UnsatisfiedLinkError e) {
      return "extracting to " + dir + " and loading failed: " + e;
    } finally {
      if (dir != null) {
        for (String name : BUNDLED) {
          try {
            Files.deleteIfExists(dir.resolve(name));
          } catch (IOException ignored) {
            // best effort: a leftover file in a private temp dir is harmless
          }
        }
        try {
          Files.deleteIfExists(dir);
        } catch (IOException ignored) {
          // as above
        }
      }
    }
  }
}
