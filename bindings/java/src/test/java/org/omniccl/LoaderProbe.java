package org.omniccl;

/** Loads the library in a fresh JVM (NativeLoaderTest) and prints the outcome. */
public final class LoaderProbe {
  private LoaderProbe() {}

  /**
   * Prints "version N", or the error.
   *
   * @param args unused
   */
  public static void main(String[] args) {
    try {
      System.out.println("version " + Communicator.libraryVersion());
    } catch (Throwable e) {
      System.out.println(e);
    }
  }
}
