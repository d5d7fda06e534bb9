/*
 * header_use.c - uses every type, macro and function of the public headers
 * once, so that compiling it with strict flags checks that omniccl.h and
 * omniccl/dlpack.h are valid C99, C++11 and C++20 with no warnings.
 *
 * Each function is assigned to a pointer of its exact type, which pins the
 * signatures: a changed parameter or return type fails to compile (C++) or
 * warns about incompatible pointer types (C, an error under -Werror).
 *
 * Compiled only (-fsyntax-only) by tests/abi/CMakeLists.txt; never linked.
 */
#include <omniccl/dlpack.h>
#include <omniccl/omniccl.h>

/* DLPack's linkage macros (empty in C, extern "C" in C++). */
DLPACK_EXTERN_C DLPACK_DLL int occl_abi_dlpack_linkage(void);

/* Not static, so nothing here is "defined but not used". */
int occl_abi_use_everything(void);

int occl_abi_use_everything(void) {
  /* Versions. */
  int code = OCCL_VERSION_CODE + OCCL_VERSION_MAJOR + OCCL_VERSION_MINOR + OCCL_VERSION_PATCH;
  int abi = OCCL_ABI_VERSION;
  int dlpack = DLPACK_MAJOR_VERSION * 100 + DLPACK_MINOR_VERSION;

  /* Enumerations (one value of each; layout.c pins every value). */
  occl_status_t status = OCCL_ERR_COMM_FAILED;
  occl_red_op_t op = OCCL_PREMUL_SUM;
  int custom_op = OCCL_RED_OP_CUSTOM_BASE;
  DLDeviceType device_type = kDLCPU;
  DLDataTypeCode type_code = kDLFloat;

  /* Handles and structs, every field given. */
  occl_comm_t comm = NULL;
  occl_work_t work = NULL;
  occl_unique_id_t id = {{0}};
  occl_config_t config = OCCL_CONFIG_INIT;
  int64_t shape[1] = {1};
  float value = 0.0f;
  DLPackVersion version = {DLPACK_MAJOR_VERSION, DLPACK_MINOR_VERSION};
  DLDevice device = {kDLCPU, 0};
  DLDataType dtype = {(uint8_t)kDLFloat, 32, 1};
  DLTensor tensor = {&value, {kDLCPU, 0}, 1, {(uint8_t)kDLFloat, 32, 1}, shape, NULL, 0};
  DLManagedTensor managed = {{NULL, {kDLCUDA, 0}, 0, {(uint8_t)kDLInt, 8, 1}, NULL, NULL, 0}, NULL, NULL};
  uint64_t flags =
      DLPACK_FLAG_BITMASK_READ_ONLY | DLPACK_FLAG_BITMASK_IS_COPIED | DLPACK_FLAG_BITMASK_IS_SUBBYTE_TYPE_PADDED;
  DLManagedTensorVersioned versioned = {{DLPACK_MAJOR_VERSION, DLPACK_MINOR_VERSION},
                                        NULL,
                                        NULL,
                                        0,
                                        {NULL, {kDLCPU, 0}, 0, {(uint8_t)kDLBool, 8, 1}, NULL, NULL, 0}};
  int from_env = OCCL_FROM_ENV + OCCL_SPLIT_NOCOLOR;
  int64_t undef = OCCL_CONFIG_UNDEF_INT64;
  unsigned int magic = OCCL_CONFIG_MAGIC + OCCL_CONFIG_VERSION;

  /* Every function, by its exact type. */
  const char* (*status_string)(occl_status_t) = occl_status_string;
  const char* (*last_error)(void) = occl_last_error;
  occl_status_t (*get_version)(int*) = occl_get_version;
  occl_status_t (*init_check)(int, int) = occl_init_check;
  occl_status_t (*get_unique_id)(occl_unique_id_t*) = occl_get_unique_id;
  occl_status_t (*comm_init)(occl_comm_t*, const char*, int, int, const occl_config_t*) = occl_comm_init;
  occl_status_t (*comm_init_unique_id)(occl_comm_t*, int, const occl_unique_id_t*, int, const occl_config_t*) =
      occl_comm_init_unique_id;
  occl_status_t (*comm_split)(occl_comm_t, int, int, const occl_config_t*, occl_comm_t*) = occl_comm_split;
  occl_status_t (*comm_destroy)(occl_comm_t) = occl_comm_destroy;
  occl_status_t (*comm_abort)(occl_comm_t) = occl_comm_abort;
  occl_status_t (*comm_rank)(occl_comm_t, int*) = occl_comm_rank;
  occl_status_t (*comm_size)(occl_comm_t, int*) = occl_comm_size;
  occl_status_t (*comm_transport)(occl_comm_t, const char**) = occl_comm_transport;
  occl_status_t (*comm_set_timeout)(occl_comm_t, int64_t) = occl_comm_set_timeout;
  occl_status_t (*premul_sum)(occl_comm_t, double, occl_red_op_t*) = occl_red_op_create_premul_sum;
  occl_status_t (*red_op_destroy)(occl_comm_t, occl_red_op_t) = occl_red_op_destroy;
  occl_status_t (*send)(const DLTensor*, int, occl_comm_t, occl_work_t*) = occl_send;
  occl_status_t (*recv)(const DLTensor*, int, occl_comm_t, occl_work_t*) = occl_recv;
  occl_status_t (*broadcast)(const DLTensor*, int, occl_comm_t, occl_work_t*) = occl_broadcast;
  occl_status_t (*scatter)(const DLTensor*, const DLTensor*, int, occl_comm_t, occl_work_t*) = occl_scatter;
  occl_status_t (*gather)(const DLTensor*, const DLTensor*, int, occl_comm_t, occl_work_t*) = occl_gather;
  occl_status_t (*reduce)(const DLTensor*, const DLTensor*, occl_red_op_t, int, occl_comm_t, occl_work_t*) =
      occl_reduce;
  occl_status_t (*all_reduce)(const DLTensor*, const DLTensor*, occl_red_op_t, occl_comm_t, occl_work_t*) =
      occl_all_reduce;
  occl_status_t (*all_gather)(const DLTensor*, const DLTensor*, occl_comm_t, occl_work_t*) = occl_all_gather;
  occl_status_t (*reduce_scatter)(const DLTensor*, const DLTensor*, occl_red_op_t, occl_comm_t, occl_work_t*) =
      occl_reduce_scatter;
  occl_status_t (*all_to_all)(const DLTensor*, const DLTensor*, occl_comm_t, occl_work_t*) = occl_all_to_all;
  occl_status_t (*barrier)(occl_comm_t, occl_work_t*) = occl_barrier;
  occl_status_t (*all_gatherv)(const DLTensor*, const DLTensor*, const int64_t*, const int64_t*, occl_comm_t,
                               occl_work_t*) = occl_all_gatherv;
  occl_status_t (*all_to_allv)(const DLTensor*, const int64_t*, const int64_t*, const DLTensor*, const int64_t*,
                               const int64_t*, occl_comm_t, occl_work_t*) = occl_all_to_allv;
  occl_status_t (*gatherv)(const DLTensor*, const DLTensor*, const int64_t*, const int64_t*, int, occl_comm_t,
                           occl_work_t*) = occl_gatherv;
  occl_status_t (*scatterv)(const DLTensor*, const int64_t*, const int64_t*, const DLTensor*, int, occl_comm_t,
                            occl_work_t*) = occl_scatterv;
  occl_status_t (*work_wait)(occl_work_t) = occl_work_wait;
  occl_status_t (*work_test)(occl_work_t) = occl_work_test;
  occl_status_t (*work_free)(occl_work_t) = occl_work_free;
  occl_status_t (*work_wait_for)(occl_work_t, int64_t) = occl_work_wait_for;
  /* ABI 1.1 */
  occl_options_t options = OCCL_OPTIONS_INIT;
  occl_interrupt_fn interrupt = NULL;
  occl_status_t (*get_async_error)(occl_comm_t, occl_status_t*) = occl_comm_get_async_error;
  occl_status_t (*send_ex)(const DLTensor*, int, occl_comm_t, const occl_options_t*, occl_work_t*) = occl_send_ex;
  occl_status_t (*recv_ex)(const DLTensor*, int, occl_comm_t, const occl_options_t*, occl_work_t*) = occl_recv_ex;
  occl_status_t (*broadcast_ex)(const DLTensor*, int, occl_comm_t, const occl_options_t*, occl_work_t*) =
      occl_broadcast_ex;
  occl_status_t (*scatter_ex)(const DLTensor*, const DLTensor*, int, occl_comm_t, const occl_options_t*, occl_work_t*) =
      occl_scatter_ex;
  occl_status_t (*gather_ex)(const DLTensor*, const DLTensor*, int, occl_comm_t, const occl_options_t*, occl_work_t*) =
      occl_gather_ex;
  occl_status_t (*reduce_ex)(const DLTensor*, const DLTensor*, occl_red_op_t, int, occl_comm_t, const occl_options_t*,
                             occl_work_t*) = occl_reduce_ex;
  occl_status_t (*all_reduce_ex)(const DLTensor*, const DLTensor*, occl_red_op_t, occl_comm_t, const occl_options_t*,
                                 occl_work_t*) = occl_all_reduce_ex;
  occl_status_t (*all_gather_ex)(const DLTensor*, const DLTensor*, occl_comm_t, const occl_options_t*, occl_work_t*) =
      occl_all_gather_ex;
  occl_status_t (*reduce_scatter_ex)(const DLTensor*, const DLTensor*, occl_red_op_t, occl_comm_t,
                                     const occl_options_t*, occl_work_t*) = occl_reduce_scatter_ex;
  occl_status_t (*all_to_all_ex)(const DLTensor*, const DLTensor*, occl_comm_t, const occl_options_t*, occl_work_t*) =
      occl_all_to_all_ex;
  occl_status_t (*barrier_ex)(occl_comm_t, const occl_options_t*, occl_work_t*) = occl_barrier_ex;
  occl_status_t (*all_gatherv_ex)(const DLTensor*, const DLTensor*, const int64_t*, const int64_t*, occl_comm_t,
                                  const occl_options_t*, occl_work_t*) = occl_all_gatherv_ex;
  occl_status_t (*all_to_allv_ex)(const DLTensor*, const int64_t*, const int64_t*, const DLTensor*, const int64_t*,
                                  const int64_t*, occl_comm_t, const occl_options_t*, occl_work_t*) =
      occl_all_to_allv_ex;
  occl_status_t (*gatherv_ex)(const DLTensor*, const DLTensor*, const int64_t*, const int64_t*, int, occl_comm_t,
                              const occl_options_t*, occl_work_t*) = occl_gatherv_ex;
  occl_status_t (*scatterv_ex)(const DLTensor*, const int64_t*, const int64_t*, const DLTensor*, int, occl_comm_t,
                               const occl_options_t*, occl_work_t*) = occl_scatterv_ex;

  /* Touch what was declared so that -Wall -Wextra stays quiet. */
  const void* functions[] = {(const void*)&status_string,
                             (const void*)&last_error,
                             (const void*)&get_version,
                             (const void*)&init_check,
                             (const void*)&get_unique_id,
                             (const void*)&comm_init,
                             (const void*)&comm_init_unique_id,
                             (const void*)&comm_split,
                             (const void*)&comm_destroy,
                             (const void*)&comm_abort,
                             (const void*)&comm_rank,
                             (const void*)&comm_size,
                             (const void*)&comm_transport,
                             (const void*)&comm_set_timeout,
                             (const void*)&premul_sum,
                             (const void*)&red_op_destroy,
                             (const void*)&send,
                             (const void*)&recv,
                             (const void*)&broadcast,
                             (const void*)&scatter,
                             (const void*)&gather,
                             (const void*)&reduce,
                             (const void*)&all_reduce,
                             (const void*)&all_gather,
                             (const void*)&reduce_scatter,
                             (const void*)&all_to_all,
                             (const void*)&barrier,
                             (const void*)&all_gatherv,
                             (const void*)&all_to_allv,
                             (const void*)&gatherv,
                             (const void*)&scatterv,
                             (const void*)&work_wait,
                             (const void*)&work_test,
                             (const void*)&work_wait_for,
                             (const void*)&work_free,
                             (const void*)&get_async_error,
                             (const void*)&send_ex,
                             (const void*)&recv_ex,
                             (const void*)&broadcast_ex,
                             (const void*)&scatter_ex,
                             (const void*)&gather_ex,
                             (const void*)&reduce_ex,
                             (const void*)&all_reduce_ex,
                             (const void*)&all_gather_ex,
                             (const void*)&reduce_scatter_ex,
                             (const void*)&all_to_all_ex,
                             (const void*)&barrier_ex,
                             (const void*)&all_gatherv_ex,
                             (const void*)&all_to_allv_ex,
                             (const void*)&gatherv_ex,
                             (const void*)&scatterv_ex};
  options.interrupt = interrupt;
  options.timeout_ms = OCCL_CONFIG_UNDEF_INT64 + OCCL_ABI_VERSION_MINOR;
  config.blocking = (int32_t)(OCCL_ERR_INTERRUPTED - 13);
  versioned.version = version;
  versioned.flags = flags;
  versioned.dl_tensor = tensor;
  managed.dl_tensor.device = device;
  managed.dl_tensor.dtype = dtype;
  config.timeout_ms = undef;
  config.magic = magic - OCCL_CONFIG_VERSION;
  id.internal[OCCL_UNIQUE_ID_BYTES - 1] = 1;
  /* The version guard, as programs call it (never linked, only compiled). */
  if (OCCL_INIT_CHECK() != OCCL_SUCCESS) return -1;
  return code + abi + dlpack + (int)status + (int)op + custom_op + (int)device_type + (int)type_code + from_env +
         (comm == NULL) + (work == NULL) + managed.dl_tensor.ndim + (config.size == sizeof(occl_config_t)) +
         (int)versioned.flags + (options.size == sizeof(occl_options_t)) + (options.magic == OCCL_OPTIONS_MAGIC) +
         (int)options.version - (int)OCCL_OPTIONS_VERSION + config.blocking + id.internal[OCCL_UNIQUE_ID_BYTES - 1] +
         (int)(sizeof functions / sizeof functions[0]);
}
