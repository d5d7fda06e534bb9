/*
 * layout.c - the binary layout of OmniCCL's public C ABI, pinned.
 *
 * Programs compiled against omniccl.h bake these sizes, offsets and values
 * into their machine code, so within one ABI major (libomniccl.so.1) none may
 * change: every one here is asserted at compile time, and this file is
 * compiled as C99 and as C++ by tests/abi (both in the build and as tests),
 * so renumbering an enumerator or moving a field fails the build.
 *
 * Appending is allowed: a new enumerator adds a line here; a field appended
 * to occl_config_t adds its offset line and updates sizeof(occl_config_t)
 * and OCCL_CONFIG_VERSION, while every existing offset stays.
 * Offsets and sizes are those of LP64 Linux, the platforms OmniCCL supports.
 */
#include <stddef.h>
#include <stdint.h>

#include <omniccl/dlpack.h>
#include <omniccl/omniccl.h>

#if defined(__cplusplus)
#define ABI_ASSERT(cond, what) static_assert(cond, what)
#elif defined(__STDC_VERSION__) && __STDC_VERSION__ >= 201112L
#define ABI_ASSERT(cond, what) _Static_assert(cond, what)
#else
/* C99 has no _Static_assert: an array of negative size fails instead. */
#define ABI_ASSERT_NAME2(line) occl_abi_assert_line_##line
#define ABI_ASSERT_NAME(line) ABI_ASSERT_NAME2(line)
#define ABI_ASSERT(cond, what) typedef char ABI_ASSERT_NAME(__LINE__)[(cond) ? 1 : -1]
#endif

#if !defined(__LP64__)
#error "layout.c pins the LP64 layout; add the pins of this data model first"
#endif

/* ---- Versions and macros whose values callers compile in ---------------- */
ABI_ASSERT(OCCL_ABI_VERSION == 1, "OCCL_ABI_VERSION (the SONAME) changed");
ABI_ASSERT(OCCL_VERSION_CODE == OCCL_VERSION_MAJOR * 10000 + OCCL_VERSION_MINOR * 100 + OCCL_VERSION_PATCH,
           "OCCL_VERSION_CODE formula");
ABI_ASSERT(OCCL_UNIQUE_ID_BYTES == 128, "OCCL_UNIQUE_ID_BYTES");
ABI_ASSERT(OCCL_CONFIG_MAGIC == 0x4f43434cu, "OCCL_CONFIG_MAGIC");
ABI_ASSERT(OCCL_CONFIG_VERSION == 2u, "OCCL_CONFIG_VERSION (raise it only when appending)");
ABI_ASSERT(OCCL_ABI_VERSION_MINOR == 4, "OCCL_ABI_VERSION_MINOR");
ABI_ASSERT(OCCL_OPTIONS_MAGIC == 0x4f43434fu, "OCCL_OPTIONS_MAGIC");
ABI_ASSERT(OCCL_OPTIONS_VERSION == 1u, "OCCL_OPTIONS_VERSION (raise it only when appending)");
ABI_ASSERT(OCCL_CONFIG_UNDEF_INT64 == INT64_MIN, "OCCL_CONFIG_UNDEF_INT64");
ABI_ASSERT(OCCL_FROM_ENV == -1, "OCCL_FROM_ENV");
ABI_ASSERT(OCCL_SPLIT_NOCOLOR == -1, "OCCL_SPLIT_NOCOLOR");
ABI_ASSERT(OCCL_RED_OP_CUSTOM_BASE == 64, "OCCL_RED_OP_CUSTOM_BASE");

/* ---- occl_status_t ------------------------------------------------------ */
ABI_ASSERT(sizeof(occl_status_t) == sizeof(int), "occl_status_t is an int-sized enum");
ABI_ASSERT(OCCL_SUCCESS == 0, "OCCL_SUCCESS");
ABI_ASSERT(OCCL_ERR_INVALID_ARGUMENT == 1, "OCCL_ERR_INVALID_ARGUMENT");
ABI_ASSERT(OCCL_ERR_UNSUPPORTED == 2, "OCCL_ERR_UNSUPPORTED");
ABI_ASSERT(OCCL_ERR_TIMEOUT == 3, "OCCL_ERR_TIMEOUT");
ABI_ASSERT(OCCL_ERR_PEER_FAILURE == 4, "OCCL_ERR_PEER_FAILURE");
ABI_ASSERT(OCCL_ERR_MISMATCH == 5, "OCCL_ERR_MISMATCH");
ABI_ASSERT(OCCL_ERR_SYSTEM == 6, "OCCL_ERR_SYSTEM");
ABI_ASSERT(OCCL_ERR_INTERNAL == 7, "OCCL_ERR_INTERNAL");
ABI_ASSERT(OCCL_ERR_ABORTED == 8, "OCCL_ERR_ABORTED");
ABI_ASSERT(OCCL_ERR_IN_PROGRESS == 9, "OCCL_ERR_IN_PROGRESS");
ABI_ASSERT(OCCL_ERR_VERSION == 10, "OCCL_ERR_VERSION");
ABI_ASSERT(OCCL_ERR_OUT_OF_MEMORY == 11, "OCCL_ERR_OUT_OF_MEMORY");
ABI_ASSERT(OCCL_ERR_COMM_FAILED == 12, "OCCL_ERR_COMM_FAILED");
ABI_ASSERT(OCCL_ERR_INTERRUPTED == 13, "OCCL_ERR_INTERRUPTED");

/* ---- occl_red_op_t ------------------------------------------------------ */
ABI_ASSERT(sizeof(occl_red_op_t) == sizeof(int), "occl_red_op_t is an int-sized enum");
ABI_ASSERT(OCCL_SUM == 0, "OCCL_SUM");
ABI_ASSERT(OCCL_PROD == 1, "OCCL_PROD");
ABI_ASSERT(OCCL_MIN == 2, "OCCL_MIN");
ABI_ASSERT(OCCL_MAX == 3, "OCCL_MAX");
ABI_ASSERT(OCCL_AVG == 4, "OCCL_AVG");
ABI_ASSERT(OCCL_BAND == 5, "OCCL_BAND");
ABI_ASSERT(OCCL_BOR == 6, "OCCL_BOR");
ABI_ASSERT(OCCL_BXOR == 7, "OCCL_BXOR");
ABI_ASSERT(OCCL_PREMUL_SUM == 8, "OCCL_PREMUL_SUM");
/* ABI 1.4 */
ABI_ASSERT(OCCL_LAND == 9, "OCCL_LAND");
ABI_ASSERT(OCCL_LOR == 10, "OCCL_LOR");
ABI_ASSERT(OCCL_LXOR == 11, "OCCL_LXOR");
ABI_ASSERT(OCCL_MAXLOC == 12, "OCCL_MAXLOC");
ABI_ASSERT(OCCL_MINLOC == 13, "OCCL_MINLOC");
ABI_ASSERT(OCCL_RED_OP_MAX_ENUM == 0x7fffffff, "OCCL_RED_OP_MAX_ENUM");
ABI_ASSERT(OCCL_RED_OP_MIN_ENUM == -0x7fffffff - 1, "OCCL_RED_OP_MIN_ENUM");
ABI_ASSERT(sizeof(occl_red_op_t) == sizeof(int), "occl_red_op_t is int-sized");

/* ---- Handles and structs ------------------------------------------------ */
ABI_ASSERT(sizeof(occl_comm_t) == sizeof(void*), "occl_comm_t is a pointer");
ABI_ASSERT(sizeof(occl_work_t) == sizeof(void*), "occl_work_t is a pointer");

ABI_ASSERT(sizeof(occl_unique_id_t) == 128, "sizeof(occl_unique_id_t)");
ABI_ASSERT(offsetof(occl_unique_id_t, internal) == 0, "occl_unique_id_t.internal");

ABI_ASSERT(offsetof(occl_config_t, size) == 0, "occl_config_t.size");
ABI_ASSERT(offsetof(occl_config_t, magic) == 8, "occl_config_t.magic");
ABI_ASSERT(offsetof(occl_config_t, version) == 12, "occl_config_t.version");
ABI_ASSERT(offsetof(occl_config_t, timeout_ms) == 16, "occl_config_t.timeout_ms");
ABI_ASSERT(offsetof(occl_config_t, transport) == 24, "occl_config_t.transport");
ABI_ASSERT(offsetof(occl_config_t, algorithm) == 32, "occl_config_t.algorithm");
/* version 1 ended here, at 40 bytes; version 2 (ABI 1.1) appended blocking */
ABI_ASSERT(offsetof(occl_config_t, blocking) == 40, "occl_config_t.blocking (version 2)");
ABI_ASSERT(sizeof(occl_config_t) == 48, "sizeof(occl_config_t) (version 2)");

/* ---- occl_options_t (ABI 1.1) ------------------------------------------- */
ABI_ASSERT(offsetof(occl_options_t, size) == 0, "occl_options_t.size");
ABI_ASSERT(offsetof(occl_options_t, magic) == 8, "occl_options_t.magic");
ABI_ASSERT(offsetof(occl_options_t, version) == 12, "occl_options_t.version");
ABI_ASSERT(offsetof(occl_options_t, stream) == 16, "occl_options_t.stream");
ABI_ASSERT(offsetof(occl_options_t, timeout_ms) == 24, "occl_options_t.timeout_ms");
ABI_ASSERT(offsetof(occl_options_t, interrupt) == 32, "occl_options_t.interrupt");
ABI_ASSERT(offsetof(occl_options_t, interrupt_data) == 40, "occl_options_t.interrupt_data");
ABI_ASSERT(sizeof(occl_options_t) == 48, "sizeof(occl_options_t) (version 1)");

/* ---- point-to-point matching (0.3) -------------------------------------- */
ABI_ASSERT(OCCL_ERR_TRUNCATED == 14, "OCCL_ERR_TRUNCATED");
ABI_ASSERT(OCCL_ANY_SOURCE == -1, "OCCL_ANY_SOURCE");
ABI_ASSERT(OCCL_ANY_TAG == -1, "OCCL_ANY_TAG");
ABI_ASSERT(OCCL_PROC_NULL == -2, "OCCL_PROC_NULL");
ABI_ASSERT(OCCL_TAG_UB == 2147483647, "OCCL_TAG_UB");
ABI_ASSERT(offsetof(occl_recv_status_t, source) == 0, "occl_recv_status_t.source");
ABI_ASSERT(offsetof(occl_recv_status_t, tag) == 4, "occl_recv_status_t.tag");
ABI_ASSERT(offsetof(occl_recv_status_t, bytes) == 8, "occl_recv_status_t.bytes");
ABI_ASSERT(offsetof(occl_recv_status_t, count) == 16, "occl_recv_status_t.count");
ABI_ASSERT(sizeof(occl_recv_status_t) == 24, "sizeof(occl_recv_status_t)");

/* ---- DLPack 1.x (omniccl/dlpack.h) -------------------------------------- */
ABI_ASSERT(DLPACK_MAJOR_VERSION == 1, "DLPACK_MAJOR_VERSION");

ABI_ASSERT(sizeof(DLPackVersion) == 8, "sizeof(DLPackVersion)");
ABI_ASSERT(offsetof(DLPackVersion, major) == 0, "DLPackVersion.major");
ABI_ASSERT(offsetof(DLPackVersion, minor) == 4, "DLPackVersion.minor");

ABI_ASSERT(sizeof(DLDeviceType) == 4, "DLDeviceType is 32 bits");
ABI_ASSERT(kDLCPU == 1, "kDLCPU");
ABI_ASSERT(kDLCUDA == 2, "kDLCUDA");
ABI_ASSERT(kDLCUDAHost == 3, "kDLCUDAHost");
ABI_ASSERT(kDLOpenCL == 4, "kDLOpenCL");
ABI_ASSERT(kDLVulkan == 7, "kDLVulkan");
ABI_ASSERT(kDLMetal == 8, "kDLMetal");
ABI_ASSERT(kDLVPI == 9, "kDLVPI");
ABI_ASSERT(kDLROCM == 10, "kDLROCM");
ABI_ASSERT(kDLROCMHost == 11, "kDLROCMHost");
ABI_ASSERT(kDLExtDev == 12, "kDLExtDev");
ABI_ASSERT(kDLCUDAManaged == 13, "kDLCUDAManaged");
ABI_ASSERT(kDLOneAPI == 14, "kDLOneAPI");
ABI_ASSERT(kDLWebGPU == 15, "kDLWebGPU");
ABI_ASSERT(kDLHexagon == 16, "kDLHexagon");
ABI_ASSERT(kDLMAIA == 17, "kDLMAIA");

ABI_ASSERT(sizeof(DLDevice) == 8, "sizeof(DLDevice)");
ABI_ASSERT(offsetof(DLDevice, device_type) == 0, "DLDevice.device_type");
ABI_ASSERT(offsetof(DLDevice, device_id) == 4, "DLDevice.device_id");

ABI_ASSERT(kDLInt == 0, "kDLInt");
ABI_ASSERT(kDLUInt == 1, "kDLUInt");
ABI_ASSERT(kDLFloat == 2, "kDLFloat");
ABI_ASSERT(kDLOpaqueHandle == 3, "kDLOpaqueHandle");
ABI_ASSERT(kDLBfloat == 4, "kDLBfloat");
ABI_ASSERT(kDLComplex == 5, "kDLComplex");
ABI_ASSERT(kDLBool == 6, "kDLBool");
ABI_ASSERT(kDLFloat8_e3m4 == 7, "kDLFloat8_e3m4");
ABI_ASSERT(kDLFloat8_e4m3 == 8, "kDLFloat8_e4m3");
ABI_ASSERT(kDLFloat8_e4m3b11fnuz == 9, "kDLFloat8_e4m3b11fnuz");
ABI_ASSERT(kDLFloat8_e4m3fn == 10, "kDLFloat8_e4m3fn");
ABI_ASSERT(kDLFloat8_e4m3fnuz == 11, "kDLFloat8_e4m3fnuz");
ABI_ASSERT(kDLFloat8_e5m2 == 12, "kDLFloat8_e5m2");
ABI_ASSERT(kDLFloat8_e5m2fnuz == 13, "kDLFloat8_e5m2fnuz");
ABI_ASSERT(kDLFloat8_e8m0fnu == 14, "kDLFloat8_e8m0fnu");
ABI_ASSERT(kDLFloat6_e2m3fn == 15, "kDLFloat6_e2m3fn");
ABI_ASSERT(kDLFloat6_e3m2fn == 16, "kDLFloat6_e3m2fn");
ABI_ASSERT(kDLFloat4_e2m1fn == 17, "kDLFloat4_e2m1fn");

ABI_ASSERT(sizeof(DLDataType) == 4, "sizeof(DLDataType)");
ABI_ASSERT(offsetof(DLDataType, code) == 0, "DLDataType.code");
ABI_ASSERT(offsetof(DLDataType, bits) == 1, "DLDataType.bits");
ABI_ASSERT(offsetof(DLDataType, lanes) == 2, "DLDataType.lanes");

ABI_ASSERT(sizeof(DLTensor) == 48, "sizeof(DLTensor)");
ABI_ASSERT(offsetof(DLTensor, data) == 0, "DLTensor.data");
ABI_ASSERT(offsetof(DLTensor, device) == 8, "DLTensor.device");
ABI_ASSERT(offsetof(DLTensor, ndim) == 16, "DLTensor.ndim");
ABI_ASSERT(offsetof(DLTensor, dtype) == 20, "DLTensor.dtype");
ABI_ASSERT(offsetof(DLTensor, shape) == 24, "DLTensor.shape");
ABI_ASSERT(offsetof(DLTensor, strides) == 32, "DLTensor.strides");
ABI_ASSERT(offsetof(DLTensor, byte_offset) == 40, "DLTensor.byte_offset");

ABI_ASSERT(sizeof(DLManagedTensor) == 64, "sizeof(DLManagedTensor)");
ABI_ASSERT(offsetof(DLManagedTensor, dl_tensor) == 0, "DLManagedTensor.dl_tensor");
ABI_ASSERT(offsetof(DLManagedTensor, manager_ctx) == 48, "DLManagedTensor.manager_ctx");
ABI_ASSERT(offsetof(DLManagedTensor, deleter) == 56, "DLManagedTensor.deleter");

ABI_ASSERT(DLPACK_FLAG_BITMASK_READ_ONLY == 1, "DLPACK_FLAG_BITMASK_READ_ONLY");
ABI_ASSERT(DLPACK_FLAG_BITMASK_IS_COPIED == 2, "DLPACK_FLAG_BITMASK_IS_COPIED");
ABI_ASSERT(DLPACK_FLAG_BITMASK_IS_SUBBYTE_TYPE_PADDED == 4, "DLPACK_FLAG_BITMASK_IS_SUBBYTE_TYPE_PADDED");

ABI_ASSERT(sizeof(DLManagedTensorVersioned) == 80, "sizeof(DLManagedTensorVersioned)");
ABI_ASSERT(offsetof(DLManagedTensorVersioned, version) == 0, "DLManagedTensorVersioned.version");
ABI_ASSERT(offsetof(DLManagedTensorVersioned, manager_ctx) == 8, "DLManagedTensorVersioned.manager_ctx");
ABI_ASSERT(offsetof(DLManagedTensorVersioned, deleter) == 16, "DLManagedTensorVersioned.deleter");
ABI_ASSERT(offsetof(DLManagedTensorVersioned, flags) == 24, "DLManagedTensorVersioned.flags");
ABI_ASSERT(offsetof(DLManagedTensorVersioned, dl_tensor) == 32, "DLManagedTensorVersioned.dl_tensor");

ABI_ASSERT(sizeof(occl_message_t) == 8, "sizeof(occl_message_t)");
ABI_ASSERT(OCCL_MESSAGE_NULL == 0 && OCCL_MESSAGE_NO_PROC == 1, "OCCL_MESSAGE_NULL, OCCL_MESSAGE_NO_PROC");
