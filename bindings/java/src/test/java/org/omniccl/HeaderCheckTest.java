package org.omniccl;

import static org.junit.jupiter.api.Assertions.assertDoesNotThrow;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import org.junit.jupiter.api.Test;

/**
 * The check OmniCCLNative runs when it loads, checkHeader(headerAbiVersion(),
 * headerVersion()), called with versions that do or do not fit the library
 * loaded: the failure names both, and the class stays usable.
 */
class HeaderCheckTest {

  /** OCCL_ERR_VERSION in omniccl.h. */
  private static final int VERSION_STATUS = 10;

  private static final int ABI = OmniCCLNative.headerAbiVersion();
  private static final int HEADER = OmniCCLNative.headerVersion();

  @Test
  void theHeaderOfTheJniCodeIsTheLibrarys() {
    // Built from one tree: the header and the library are the same version.
    assertEquals(Communicator.libraryVersion(), HEADER);
    assertTrue(ABI >= 1, "ABI major " + ABI);
  }

  @Test
  void aHeaderThatFitsPasses() {
    assertDoesNotThrow(() -> OmniCCLNative.checkHeader(ABI, HEADER));
    // An older header of the same ABI major fits too.
    assertDoesNotThrow(() -> OmniCCLNative.checkHeader(ABI, HEADER - 1));
  }

  @Test
  void anotherAbiMajorFailsNamingBothVersions() {
    for (int abi : new int[] {ABI + 1, ABI - 1}) {
      OmniCCLException e = assertThrows(OmniCCLException.class, () -> OmniCCLNative.checkHeader(abi, HEADER));
      assertEquals(VERSION_STATUS, e.status());
      assertTrue(e.statusName().startsWith("OCCL_ERR_VERSION"), e.statusName());
      assertTrue(e.getMessage().contains("omniccl.h version " + HEADER + " (ABI " + abi + ")"), e.getMessage());
      assertTrue(e.getMessage().contains("library is version " + HEADER + " (ABI " + ABI + ")"), e.getMessage());
    }
  }

  @Test
  void aHeaderNewerThanTheLibraryFailsNamingBothVersions() {
    OmniCCLException e = assertThrows(OmniCCLException.class, () -> OmniCCLNative.checkHeader(ABI, HEADER + 1));
    assertEquals(VERSION_STATUS, e.status());
    assertTrue(e.getMessage().contains("omniccl.h version " + (HEADER + 1) + " (ABI " + ABI + ")"), e.getMessage());
    assertTrue(e.getMessage().contains("library is version " + HEADER + " (ABI " + ABI + ")"), e.getMessage());
  }

  @Test
  void aFailedCheckLeavesTheBindingUsable() {
    assertThrows(OmniCCLException.class, () -> OmniCCLNative.checkHeader(ABI + 1, HEADER));
    assertEquals(HEADER, Communicator.libraryVersion());
    try (Communicator c = Communicator.init(Ranks.fileRendezvous(), 0, 1)) {
      assertEquals(1, c.size());
    }
  }
}
