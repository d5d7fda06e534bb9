/*
 * omniccl/dlpack.h - the DLPack 1.1 tensor structures, written for OmniCCL from
 * the DLPack specification (https://dmlc.github.io/dlpack/latest/).
 *
 * It uses DLPack's own include guard (DLPACK_DLPACK_H_) so that it can be
 * included together with the official <dlpack/dlpack.h> in either order: the
 * first one included wins and the layouts are identical. Static assertions at
 * the end pin the layout on every platform OmniCCL supports (LP64).
 *
 * C99; also valid C++.
 */
#ifndef DLPACK_DLPACK_H_
#define DLPACK_DLPACK_H_

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
#define DLPACK_EXTERN_C extern "C"
#else
#define DLPACK_EXTERN_C
#endif

/** Major version of the DLPack layout described here. */
#define DLPACK_MAJOR_VERSION 1
/** Minor version of the DLPack layout described here. */
#define DLPACK_MINOR_VERSION 1

#ifndef DLPACK_DLL
#define DLPACK_DLL
#endif

#ifdef __cplusplus
extern "C" {
#endif

/** A DLPack version (major changes break the ABI, minor ones append). */
typedef struct {
  uint32_t major;
  uint32_t minor;
} DLPackVersion;

/** Where a tensor's memory lives. Values are fixed by the specification. */
#ifdef __cplusplus
typedef enum : int32_t {
#else
typedef enum {
#endif
  kDLCPU = 1,
  kDLCUDA = 2,
  kDLCUDAHost = 3,
  kDLOpenCL = 4,
  kDLVulkan = 7,
  kDLMetal = 8,
  kDLVPI = 9,
  kDLROCM = 10,
  kDLROCMHost = 11,
  kDLExtDev = 12,
  kDLCUDAManaged = 13,
  kDLOneAPI = 14,
  kDLWebGPU = 15,
  kDLHexagon = 16,
  kDLMAIA = 17,
  kDLTrn = 18
} DLDeviceType;

/** A device: its type and its ordinal (0 for the host). */
typedef struct {
  DLDeviceType device_type;
  int32_t device_id;
} DLDevice;

/** Kinds of element. Values are fixed by the specification. */
typedef enum {
  kDLInt = 0U,
  kDLUInt = 1U,
  kDLFloat = 2U,
  kDLOpaqueHandle = 3U,
  kDLBfloat = 4U,
  kDLComplex = 5U,
  kDLBool = 6U,
  kDLFloat8_e3m4 = 7U,
  kDLFloat8_e4m3 = 8U,
  kDLFloat8_e4m3b11fnuz = 9U,
  kDLFloat8_e4m3fn = 10U,
  kDLFloat8_e4m3fnuz = 11U,
  kDLFloat8_e5m2 = 12U,
  kDLFloat8_e5m2fnuz = 13U,
  kDLFloat8_e8m0fnu = 14U,
  kDLFloat6_e2m3fn = 15U,
  kDLFloat6_e3m2fn = 16U,
  kDLFloat4_e2m1fn = 17U
} DLDataTypeCode;

/** An element type: code (a DLDataTypeCode), bits per lane, number of lanes. */
typedef struct {
  uint8_t code;
  uint8_t bits;
  uint16_t lanes;
} DLDataType;

/**
 * A strided view of memory. `strides` are in elements, not bytes; NULL strides
 * mean a compact row-major tensor. The first element is at
 * (char*)data + byte_offset.
 */
typedef struct {
  void* data;
  DLDevice device;
  int32_t ndim;
  DLDataType dtype;
  int64_t* shape;
  int64_t* strides;
  uint64_t byte_offset;
} DLTensor;

/** The legacy (unversioned) managed tensor, "dltensor" capsules. */
typedef struct DLManagedTensor {
  DLTensor dl_tensor;
  void* manager_ctx;
  void (*deleter)(struct DLManagedTensor* self);
} DLManagedTensor;

/** The producer's data must not be written through this tensor. */
#define DLPACK_FLAG_BITMASK_READ_ONLY (1UL << 0UL)
/** The producer copied the data; the consumer owns an independent copy. */
#define DLPACK_FLAG_BITMASK_IS_COPIED (1UL << 1UL)
/** Sub-byte types are padded to a whole byte per element. */
#define DLPACK_FLAG_BITMASK_IS_SUBBYTE_TYPE_PADDED (1UL << 2UL)

/** The versioned managed tensor (DLPack >= 1.0), "dltensor_versioned" capsules. */
typedef struct DLManagedTensorVersioned {
  DLPackVersion version;
  void* manager_ctx;
  void (*deleter)(struct DLManagedTensorVersioned* self);
  uint64_t flags;
  DLTensor dl_tensor;
} DLManagedTensorVersioned;

#ifdef __cplusplus
} /* extern "C" */
#endif

/* Layout pins (LP64). A mismatch here means this header disagrees with DLPack. */
#if defined(__cplusplus)
#define OCCL_DLPACK_STATIC_ASSERT(c, m) static_assert(c, m)
#elif defined(__STDC_VERSION__) && __STDC_VERSION__ >= 201112L
#define OCCL_DLPACK_STATIC_ASSERT(c, m) _Static_assert(c, m)
#else /* C99: a negative array size fails the build */
#define OCCL_DLPACK_CAT2(a, b) a##b
#define OCCL_DLPACK_CAT(a, b) OCCL_DLPACK_CAT2(a, b)
#define OCCL_DLPACK_STATIC_ASSERT(c, m) typedef char OCCL_DLPACK_CAT(occl_dlpack_assert_, __LINE__)[(c) ? 1 : -1]
#endif
#if defined(__LP64__) || defined(_WIN64)
OCCL_DLPACK_STATIC_ASSERT(sizeof(DLPackVersion) == 8, "DLPackVersion layout");
OCCL_DLPACK_STATIC_ASSERT(sizeof(DLDevice) == 8, "DLDevice layout");
OCCL_DLPACK_STATIC_ASSERT(sizeof(DLDataType) == 4, "DLDataType layout");
OCCL_DLPACK_STATIC_ASSERT(sizeof(DLTensor) == 48, "DLTensor layout");
OCCL_DLPACK_STATIC_ASSERT(offsetof(DLTensor, device) == 8, "DLTensor.device offset");
OCCL_DLPACK_STATIC_ASSERT(offsetof(DLTensor, ndim) == 16, "DLTensor.ndim offset");
OCCL_DLPACK_STATIC_ASSERT(offsetof(DLTensor, dtype) == 20, "DLTensor.dtype offset");
OCCL_DLPACK_STATIC_ASSERT(offsetof(DLTensor, shape) == 24, "DLTensor.shape offset");
OCCL_DLPACK_STATIC_ASSERT(offsetof(DLTensor, strides) == 32, "DLTensor.strides offset");
OCCL_DLPACK_STATIC_ASSERT(offsetof(DLTensor, byte_offset) == 40, "DLTensor.byte_offset offset");
OCCL_DLPACK_STATIC_ASSERT(sizeof(DLManagedTensor) == 64, "DLManagedTensor layout");
OCCL_DLPACK_STATIC_ASSERT(sizeof(DLManagedTensorVersioned) == 80, "DLManagedTensorVersioned layout");
OCCL_DLPACK_STATIC_ASSERT(offsetof(DLManagedTensorVersioned, flags) == 24, "DLManagedTensorVersioned.flags offset");
OCCL_DLPACK_STATIC_ASSERT(offsetof(DLManagedTensorVersioned, dl_tensor) == 32,
                          "DLManagedTensorVersioned.dl_tensor offset");
#endif
#undef OCCL_DLPACK_STATIC_ASSERT
#undef OCCL_DLPACK_CAT
#undef OCCL_DLPACK_CAT2

#endif /* DLPACK_DLPACK_H_ */
