/*
 * include_order.c - omniccl/dlpack.h must coexist with itself, with
 * omniccl.h and with the official <dlpack/dlpack.h>, in any include order.
 *
 * Compiled (-fsyntax-only) once per order by tests/abi/CMakeLists.txt, with
 * one of these macros defined:
 *   TWICE              omniccl/dlpack.h twice, then omniccl.h
 *   DLPACK_FIRST       omniccl/dlpack.h, then omniccl.h
 *   OMNICCL_FIRST      omniccl.h, then omniccl/dlpack.h
 *   OFFICIAL_FIRST     <dlpack/dlpack.h> (tests/abi/official, a stand-in
 *                      with the official guard), then omniccl.h
 *   OFFICIAL_LAST      omniccl.h, then <dlpack/dlpack.h>
 * Whichever DLPack header comes first wins (DLPACK_DLPACK_H_ guards both);
 * the code below must compile against either.
 */
#if defined(TWICE)
#include <omniccl/dlpack.h>
#include <omniccl/dlpack.h>
#include <omniccl/omniccl.h>
#elif defined(DLPACK_FIRST)
#include <omniccl/dlpack.h>
#include <omniccl/omniccl.h>
#elif defined(OMNICCL_FIRST)
#include <omniccl/omniccl.h>
#include <omniccl/dlpack.h>
#elif defined(OFFICIAL_FIRST)
#include <dlpack/dlpack.h>
#include <omniccl/omniccl.h>
#ifndef OCCL_TEST_OFFICIAL_DLPACK
#error "the official <dlpack/dlpack.h> came first, so its definitions must be the ones in use"
#endif
#elif defined(OFFICIAL_LAST)
#include <omniccl/omniccl.h>
#include <dlpack/dlpack.h>
#ifdef OCCL_TEST_OFFICIAL_DLPACK
#error "omniccl/dlpack.h came first, so the official header must have been skipped"
#endif
#else
#error "define one of TWICE, DLPACK_FIRST, OMNICCL_FIRST, OFFICIAL_FIRST, OFFICIAL_LAST"
#endif

#ifndef DLPACK_DLPACK_H_
#error "DLPACK_DLPACK_H_ (the official DLPack include guard) is not defined"
#endif

/* omniccl.h's API with DLPack types from whichever header won. */
occl_status_t occl_abi_broadcast_one(DLTensor* t, occl_comm_t comm);

occl_status_t occl_abi_broadcast_one(DLTensor* t, occl_comm_t comm) {
  DLManagedTensorVersioned m;
  m.version.major = DLPACK_MAJOR_VERSION;
  m.version.minor = DLPACK_MINOR_VERSION;
  m.flags = DLPACK_FLAG_BITMASK_READ_ONLY;
  m.dl_tensor = *t;
  m.dl_tensor.device.device_type = kDLCPU;
  return occl_broadcast(&m.dl_tensor, 0, comm, NULL);
}
