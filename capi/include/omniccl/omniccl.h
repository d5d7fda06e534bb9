/*
 * omniccl.h - the stable C ABI of OmniCCL, a collective-communication library.
 *
 * ABI policy
 *   - This header is C99 and C++ compatible. Types and values are only ever
 *     appended: no enumerator is renumbered, no struct field reordered, no
 *     function removed or changed within one ABI major (OCCL_ABI_VERSION),
 *     which is also the SONAME of the library (libomniccl.so.1).
 *   - Every function returns occl_status_t (OCCL_SUCCESS == 0) except the two
 *     string accessors. On failure, occl_last_error() gives a thread-local
 *     message that names what was wrong (argument, rank, peer, op, sequence
 *     number, OS error, hint).
 *   - Handles are opaque. Every create has a destroy; destroy accepts NULL.
 *   - Extensible structs (occl_config_t) start with size/magic/version; the
 *     library reads min(size, its own sizeof) and defaults newer fields.
 *   - Tensors are DLPack DLTensor (see omniccl/dlpack.h). They must be
 *     contiguous (NULL strides or compact row-major strides); byte_offset is
 *     honoured. Counts and sizes are 64-bit.
 *
 * Threads: one communicator may be used from one thread at a time for issuing
 * operations; occl_comm_abort() and the occl_work_* functions may be called
 * from any thread.
 */
#ifndef OMNICCL_OMNICCL_H_
#define OMNICCL_OMNICCL_H_

#include <stddef.h>
#include <stdint.h>

#include "omniccl/dlpack.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ------------------------------------------------------------------------ */
/* Versions                                                                  */
/* ------------------------------------------------------------------------ */

/** Library version: the one version number of the project. */
#define OCCL_VERSION_MAJOR 0
#define OCCL_VERSION_MINOR 3
#define OCCL_VERSION_PATCH 0
/** MAJOR*10000 + MINOR*100 + PATCH, comparable with occl_get_version(). */
#define OCCL_VERSION_CODE (OCCL_VERSION_MAJOR * 10000 + OCCL_VERSION_MINOR * 100 + OCCL_VERSION_PATCH)
/** ABI major: the SONAME suffix. Changes only when the ABI breaks. */
#define OCCL_ABI_VERSION 1

/* ------------------------------------------------------------------------ */
/* Status codes (fixed values, never renumbered)                             */
/* ------------------------------------------------------------------------ */

typedef enum occl_status {
  OCCL_SUCCESS = 0,
  /** An argument is wrong (NULL, bad rank/root, wrong size, non-contiguous...). */
  OCCL_ERR_INVALID_ARGUMENT = 1,
  /** The request is well-formed but not supported (e.g. a non-CPU device). */
  OCCL_ERR_UNSUPPORTED = 2,
  /** A deadline passed; the message names the ranks that did not arrive. */
  OCCL_ERR_TIMEOUT = 3,
  /** A peer exited, was killed or disconnected. */
  OCCL_ERR_PEER_FAILURE = 4,
  /** Ranks called different operations (op, dtype, count, root, reduce op). */
  OCCL_ERR_MISMATCH = 5,
  /** An operating-system call failed; the message carries errno text. */
  OCCL_ERR_SYSTEM = 6,
  /** A bug in OmniCCL; please report it with the message. */
  OCCL_ERR_INTERNAL = 7,
  /** The communicator was aborted. */
  OCCL_ERR_ABORTED = 8,
  /** occl_work_test: the operation has not completed yet. */
  OCCL_ERR_IN_PROGRESS = 9,
  /** Header and library versions (or config struct versions) do not fit. */
  OCCL_ERR_VERSION = 10,
  /** Memory could not be allocated. */
  OCCL_ERR_OUT_OF_MEMORY = 11,
  /** The communicator is unusable after an earlier error (see the message). */
  OCCL_ERR_COMM_FAILED = 12,
  /**
   * (ABI 1.1) A blocking call was ended by its occl_options_t.interrupt
   * callback. The communicator is unusable afterwards (its peers are told).
   */
  OCCL_ERR_INTERRUPTED = 13,
  /**
   * (0.3) A point-to-point message was larger than its receive buffer (MPI's
   * MPI_ERR_TRUNCATE): the buffer holds its first part, the receive failed,
   * and the communicator stays usable.
   */
  OCCL_ERR_TRUNCATED = 14
} occl_status_t;

/**
 * A static English name and description of a status code, e.g.
 * "OCCL_ERR_TIMEOUT: a deadline passed". Never NULL; unknown values give
 * "unknown status".
 */
const char* occl_status_string(occl_status_t status);

/**
 * The message describing the last failure of an occl_* call on this thread,
 * or "" if none failed yet. Valid until the next occl_* call on this thread.
 */
const char* occl_last_error(void);

/**
 * Stores the run-time library version (OCCL_VERSION_CODE of the build) in
 * *version. Returns OCCL_ERR_INVALID_ARGUMENT if version is NULL.
 */
occl_status_t occl_get_version(int* version);

/**
 * Checks that the header a program was compiled against fits the library it
 * runs with. Call as OCCL_INIT_CHECK(). Returns OCCL_ERR_VERSION, with both
 * versions in the message, if the ABI majors differ or the header is newer
 * than the library.
 */
occl_status_t occl_init_check(int abi_version, int header_version);
#define OCCL_INIT_CHECK() occl_init_check(OCCL_ABI_VERSION, OCCL_VERSION_CODE)

/* ------------------------------------------------------------------------ */
/* Reduce operations                                                         */
/*                                                                           */
/* Value rules for occl_red_op_t:                                            */
/*   0..13  the built-in ops below, valid on every communicator (9..13,    */
/*          the logical ops and MAXLOC/MINLOC, since ABI 1.4);               */
/*   >= 64  (OCCL_RED_OP_CUSTOM_BASE) ops made at run time by                */
/*          occl_red_op_create_premul_sum(), valid only on the communicator  */
/*          that made them and until occl_red_op_destroy();                  */
/*   any other value (14..63, negatives) is OCCL_ERR_INVALID_ARGUMENT.       */
/* An op must also be defined for the dtype: BAND/BOR/BXOR on floating-point */
/* or complex types, MIN/MAX on complex types, MAXLOC/MINLOC on other than   */
/* integer, float32 or float64 pairs are OCCL_ERR_INVALID_ARGUMENT.          */
/* OCCL_RED_OP_MAX_ENUM/MIN_ENUM exist only so that every int is a valid     */
/* value of the enum type in C++.                                            */
/* ------------------------------------------------------------------------ */

typedef enum occl_red_op {
  OCCL_SUM = 0,
  OCCL_PROD = 1,
  OCCL_MIN = 2,
  OCCL_MAX = 3,
  /** Sum divided by the number of ranks (integers: truncating division). */
  OCCL_AVG = 4,
  /** Bitwise AND/OR/XOR: integer and bool types only. */
  OCCL_BAND = 5,
  OCCL_BOR = 6,
  OCCL_BXOR = 7,
  /**
   * Placeholder value for PREMUL_SUM; real pre-multiplied sums are created
   * with occl_red_op_create_premul_sum(), which returns a value >=
   * OCCL_RED_OP_CUSTOM_BASE. Passing OCCL_PREMUL_SUM itself means a scalar 1.
   */
  OCCL_PREMUL_SUM = 8,
  /* The logical ops (ABI 1.4), as MPI_LAND/LOR/LXOR: every real dtype, floats
     and bool included; a nonzero element is true (NaN too, -0.0 not), and
     each result element is 1 (true) or 0 (false) in the tensor's dtype. */
  /** Logical AND: 1 where every input element is nonzero, else 0. */
  OCCL_LAND = 9,
  /** Logical OR: 1 where any input element is nonzero, else 0. */
  OCCL_LOR = 10,
  /** Logical XOR: 1 where an odd number of input elements are nonzero. */
  OCCL_LXOR = 11,
  /**
   * (value, index) pairs, as MPI_MAXLOC / MPI_MINLOC on MPI_2INT or
   * MPI_2DOUBLE_PRECISION: the tensor holds count / 2 pairs of its own
   * dtype, value at element 2k and index at 2k + 1, so count must be even
   * (and for reduce_scatter the count of each rank's block). The larger
   * (MAXLOC) or smaller (MINLOC) value wins; equal values keep the smaller
   * index; a NaN value wins over any number. Integer, float32 and float64
   * dtypes only.
   */
  OCCL_MAXLOC = 12,
  OCCL_MINLOC = 13,
  /**
   * Not an op: widens the enum's range, so the values made by
   * occl_red_op_create_premul_sum() (>= OCCL_RED_OP_CUSTOM_BASE) are valid
   * occl_red_op_t values in C++ too (as NCCL's ncclMaxRedOp does).
   */
  OCCL_RED_OP_MAX_ENUM = 0x7fffffff,
  /** Not an op: with the above, makes every int a valid occl_red_op_t, so a
   *  bad value (e.g. -1) is reported as OCCL_ERR_INVALID_ARGUMENT. */
  OCCL_RED_OP_MIN_ENUM = -0x7fffffff - 1
} occl_red_op_t;

/** Reduce ops created at run time have values at or above this. */
#define OCCL_RED_OP_CUSTOM_BASE 64

/* ------------------------------------------------------------------------ */
/* Handles and configuration                                                 */
/* ------------------------------------------------------------------------ */

/** A communicator: a group of ranks that run collectives together. */
typedef struct occl_comm* occl_comm_t;
/** A pending operation started with a non-NULL work argument. */
typedef struct occl_work* occl_work_t;

/** Bytes of an occl_unique_id_t. */
#define OCCL_UNIQUE_ID_BYTES 128
/** Rendezvous information created by one process and shared out of band. */
typedef struct occl_unique_id {
  char internal[OCCL_UNIQUE_ID_BYTES];
} occl_unique_id_t;

#define OCCL_CONFIG_MAGIC 0x4f43434cu /* "OCCL" */
/** 2 since ABI 1.1 (field `blocking` appended); version 1 callers still work. */
#define OCCL_CONFIG_VERSION 2u
/** An int64 config field left at its default. */
#define OCCL_CONFIG_UNDEF_INT64 INT64_MIN

/**
 * Communicator options. Initialise with OCCL_CONFIG_INIT and change fields;
 * NULL strings and OCCL_CONFIG_UNDEF_INT64 mean "environment setting, else
 * built-in default".
 */
typedef struct occl_config {
  size_t size;          /**< sizeof(occl_config_t) as the caller compiled it */
  unsigned int magic;   /**< OCCL_CONFIG_MAGIC */
  unsigned int version; /**< OCCL_CONFIG_VERSION */
  /** Deadline of each blocking call in ms (OMNICCL_TIMEOUT; default 600000). */
  int64_t timeout_ms;
  /** "auto", "shm" or "tcp" (OMNICCL_TRANSPORT; default "auto"). */
  const char* transport;
  /**
   * Algorithm override (OMNICCL_ALGO): a name applied to every collective
   * that has it ("ring"), or a list "all_reduce=ring,broadcast=tree".
   * Unknown names, or a name no listed collective offers, are an error.
   */
  const char* algorithm;
  /**
   * (ABI 1.1, config version 2) 1 (default): occl_comm_init*,
   * occl_comm_split return once the communicator is ready. 0: they return
   * OCCL_ERR_IN_PROGRESS at once with a handle that finishes in the
   * background; poll it with occl_comm_get_async_error() until that reports
   * OCCL_SUCCESS (ready) or an error; occl_comm_abort() or
   * occl_comm_destroy() end it promptly in any phase. Other calls on the
   * handle return OCCL_ERR_IN_PROGRESS until it is ready (NCCL's
   * blocking = 0).
   */
  int32_t blocking;
} occl_config_t;

#define OCCL_CONFIG_INIT \
  { sizeof(occl_config_t), OCCL_CONFIG_MAGIC, OCCL_CONFIG_VERSION, OCCL_CONFIG_UNDEF_INT64, NULL, NULL, 1 }

/* ------------------------------------------------------------------------ */
/* Communicators                                                             */
/* ------------------------------------------------------------------------ */

/** Pass as rank or world_size to take the value from the environment. */
#define OCCL_FROM_ENV (-1)

/**
 * Creates rendezvous information for occl_comm_init_unique_id(). The calling
 * process serves the rendezvous until it exits, so it must stay alive while
 * the ranks initialise. Share the bytes with every rank out of band.
 */
occl_status_t occl_get_unique_id(occl_unique_id_t* id);

/**
 * Creates a communicator; collective over all world_size ranks.
 *
 * init_method:
 *   "env://"           MASTER_ADDR/MASTER_PORT with rank and size from RANK/
 *                      WORLD_SIZE (torchrun), OMPI_COMM_WORLD_RANK/SIZE (Open
 *                      MPI), PMI_RANK/PMI_SIZE (MPICH/Hydra) or SLURM_PROCID/
 *                      SLURM_NTASKS (Slurm), in that order of preference.
 *   "tcp://host:port"  rank 0 serves the rendezvous on host:port.
 *   "file:///path"     a directory on a file system every rank sees.
 * rank, world_size: explicit values, or OCCL_FROM_ENV.
 * config: NULL for defaults.
 * On success *comm is a new communicator (free with occl_comm_destroy); on
 * failure *comm is NULL and nothing is left behind.
 */
occl_status_t occl_comm_init(occl_comm_t* comm, const char* init_method, int rank, int world_size,
                             const occl_config_t* config);

/** Creates a communicator from an id made by occl_get_unique_id(). */
occl_status_t occl_comm_init_unique_id(occl_comm_t* comm, int world_size, const occl_unique_id_t* id, int rank,
                                       const occl_config_t* config);

/** Color value for ranks that want no communicator from occl_comm_split. */
#define OCCL_SPLIT_NOCOLOR (-1)

/**
 * Splits comm: ranks passing the same color get a new communicator together,
 * ordered by key (ties by old rank). Collective over comm. A rank passing
 * OCCL_SPLIT_NOCOLOR gets *newcomm = NULL. config NULL inherits comm's.
 */
occl_status_t occl_comm_split(occl_comm_t comm, int color, int key, const occl_config_t* config, occl_comm_t* newcomm);

/**
 * Frees a communicator (local; peers are told it left). NULL is accepted.
 * Pending work handles stay valid and complete with OCCL_ERR_ABORTED if
 * they had not finished.
 */
occl_status_t occl_comm_destroy(occl_comm_t comm);

/**
 * Aborts and frees a communicator: local, never blocks on peers. Operations
 * in flight on other threads return OCCL_ERR_ABORTED. The peers are told
 * this rank failed (OCCL_ERR_PEER_FAILURE naming it), not that it left as
 * after occl_comm_destroy. NULL is accepted.
 */
occl_status_t occl_comm_abort(occl_comm_t comm);

/** Stores this process's rank in comm. */
occl_status_t occl_comm_rank(occl_comm_t comm, int* rank);
/** Stores the number of ranks in comm. */
occl_status_t occl_comm_size(occl_comm_t comm, int* size);
/** Stores the transport comm uses: "shm", "tcp", "mixed" (some peers on other
    hosts) or "self" (one rank); a static string. */
occl_status_t occl_comm_transport(occl_comm_t comm, const char** name);
/** Changes the deadline of later blocking calls on comm (ms, > 0). */
occl_status_t occl_comm_set_timeout(occl_comm_t comm, int64_t timeout_ms);

/**
 * Creates a PREMUL_SUM reduce op for comm: each rank's input is multiplied by
 * scalar before summing. For integer dtypes the scalar must be integral.
 * Free with occl_red_op_destroy.
 */
occl_status_t occl_red_op_create_premul_sum(occl_comm_t comm, double scalar, occl_red_op_t* op);
/** Frees an op made by occl_red_op_create_premul_sum. */
occl_status_t occl_red_op_destroy(occl_comm_t comm, occl_red_op_t op);

/* ------------------------------------------------------------------------ */
/* Operations                                                                */
/*                                                                           */
/* Every operation takes `work`: NULL runs it to completion (blocking); a    */
/* non-NULL pointer starts it and stores a handle to wait on. Operations on   */
/* one communicator run in the order they were issued. Tensors hold `count`  */
/* elements = the product of their shape. All ranks must call an operation  */
/* with matching op, dtype, count, root and reduce op; a difference is       */
/* reported as OCCL_ERR_MISMATCH naming the ranks and fields.               */
/* ------------------------------------------------------------------------ */

/** Sends tensor to rank peer; matched by occl_recv on peer, in order. */
occl_status_t occl_send(const DLTensor* tensor, int peer, occl_comm_t comm, occl_work_t* work);
/** Receives into tensor from rank peer. Sizes must match the send. */
occl_status_t occl_recv(const DLTensor* tensor, int peer, occl_comm_t comm, occl_work_t* work);

/** Copies root's tensor into tensor on every rank (in place). */
occl_status_t occl_broadcast(const DLTensor* tensor, int root, occl_comm_t comm, occl_work_t* work);

/**
 * Splits root's sendbuf (size * n elements) into size parts; rank i receives
 * part i in recvbuf (n elements). sendbuf is ignored (may be NULL) on
 * non-roots. In place on root: recvbuf data == sendbuf data + root * n.
 */
occl_status_t occl_scatter(const DLTensor* sendbuf, const DLTensor* recvbuf, int root, occl_comm_t comm,
                           occl_work_t* work);

/**
 * Collects every rank's sendbuf (n elements) into root's recvbuf (size * n,
 * in rank order). recvbuf is ignored (may be NULL) on non-roots.
 */
occl_status_t occl_gather(const DLTensor* sendbuf, const DLTensor* recvbuf, int root, occl_comm_t comm,
                          occl_work_t* work);

/**
 * Reduces every rank's sendbuf with op into root's recvbuf. Non-root inputs
 * are never modified; recvbuf is ignored (may be NULL) on non-roots. In
 * place on root when recvbuf and sendbuf are the same memory.
 */
occl_status_t occl_reduce(const DLTensor* sendbuf, const DLTensor* recvbuf, occl_red_op_t op, int root,
                          occl_comm_t comm, occl_work_t* work);

/**
 * Reduces every rank's sendbuf with op into every rank's recvbuf; every rank
 * gets bit-identical results. In place when sendbuf and recvbuf coincide.
 */
occl_status_t occl_all_reduce(const DLTensor* sendbuf, const DLTensor* recvbuf, occl_red_op_t op, occl_comm_t comm,
                              occl_work_t* work);

/** Concatenates every rank's sendbuf (n) into every recvbuf (size * n). */
occl_status_t occl_all_gather(const DLTensor* sendbuf, const DLTensor* recvbuf, occl_comm_t comm, occl_work_t* work);

/**
 * Reduces sendbuf (size * n elements) with op; rank i receives reduced part i
 * in recvbuf (n elements).
 */
occl_status_t occl_reduce_scatter(const DLTensor* sendbuf, const DLTensor* recvbuf, occl_red_op_t op, occl_comm_t comm,
                                  occl_work_t* work);

/**
 * Part j of rank i's sendbuf (size * n elements) becomes part i of rank j's
 * recvbuf. In place when the two coincide.
 */
occl_status_t occl_all_to_all(const DLTensor* sendbuf, const DLTensor* recvbuf, occl_comm_t comm, occl_work_t* work);

/** Returns once every rank has entered the barrier. */
occl_status_t occl_barrier(occl_comm_t comm, occl_work_t* work);

/**
 * all_gather with per-rank counts: rank i contributes recv_counts[i]
 * elements, placed at recv_displs[i] (elements) of recvbuf; recv_displs NULL
 * means packed in rank order.
 */
occl_status_t occl_all_gatherv(const DLTensor* sendbuf, const DLTensor* recvbuf, const int64_t* recv_counts,
                               const int64_t* recv_displs, occl_comm_t comm, occl_work_t* work);

/**
 * all_to_all with per-peer counts and displacements (elements); NULL
 * displacements mean packed in rank order. send_counts[j] on rank i must equal
 * recv_counts[i] on rank j.
 */
occl_status_t occl_all_to_allv(const DLTensor* sendbuf, const int64_t* send_counts, const int64_t* send_displs,
                               const DLTensor* recvbuf, const int64_t* recv_counts, const int64_t* recv_displs,
                               occl_comm_t comm, occl_work_t* work);

/**
 * gather with per-rank counts: root's recv_counts/recv_displs (elements,
 * displs NULL = packed) say where each rank's sendbuf lands. Non-roots may
 * pass NULL recvbuf, recv_counts and recv_displs.
 */
occl_status_t occl_gatherv(const DLTensor* sendbuf, const DLTensor* recvbuf, const int64_t* recv_counts,
                           const int64_t* recv_displs, int root, occl_comm_t comm, occl_work_t* work);

/**
 * scatter with per-rank counts: root sends send_counts[i] elements at
 * send_displs[i] (NULL = packed) to rank i's recvbuf. Non-roots may pass NULL
 * sendbuf, send_counts and send_displs.
 */
occl_status_t occl_scatterv(const DLTensor* sendbuf, const int64_t* send_counts, const int64_t* send_displs,
                            const DLTensor* recvbuf, int root, occl_comm_t comm, occl_work_t* work);

/* ------------------------------------------------------------------------ */
/* Work handles                                                              */
/* ------------------------------------------------------------------------ */

/** Blocks until work completes; returns the operation's status. */
occl_status_t occl_work_wait(occl_work_t work);

/**
 * Non-blocking check. Returns OCCL_ERR_IN_PROGRESS while running, else the
 * operation's status (OCCL_SUCCESS once done).
 */
occl_status_t occl_work_test(occl_work_t work);

/**
 * Frees a handle; NULL is accepted. An operation still running continues
 * (its buffers must stay valid until it ends) and is no longer waitable.
 */
occl_status_t occl_work_free(occl_work_t work);

/* ------------------------------------------------------------------------ */
/* Appended in 0.1 (ABI 1)                                                   */
/* ------------------------------------------------------------------------ */

/**
 * Waits at most timeout_ms (>= 0) for work. Returns OCCL_ERR_IN_PROGRESS if
 * it is still running then (the operation continues; wait again or free the
 * handle), else the operation's status. Lets callers wait in slices, e.g. to
 * react to signals between them.
 */
occl_status_t occl_work_wait_for(occl_work_t work, int64_t timeout_ms);

/* ------------------------------------------------------------------------ */
/* Appended in 0.2 (ABI 1.1): per-call options, non-blocking creation,       */
/* asynchronous errors, interruptible blocking calls                         */
/* ------------------------------------------------------------------------ */

/** ABI minor: 1 once the functions below exist (the library's
    occl_get_version() is then >= 200); 2 once the point-to-point matching
    functions appended in 0.3 exist as well (version >= 300); 3 once the
    registered buffers appended for 0.4 exist as well (unreleased: until 0.4
    is tagged the version still reads 300, so test this macro, not it); 4
    once the logical ops (OCCL_LAND, OCCL_LOR, OCCL_LXOR), OCCL_MAXLOC and
    OCCL_MINLOC, complex tensors (DLPack kDLComplex, 64 and 128 bits) and
    the prefix reductions (occl_scan, occl_exscan) appended for 0.4 exist
    as well. */
#define OCCL_ABI_VERSION_MINOR 4

#define OCCL_OPTIONS_MAGIC 0x4f43434fu /* "OCCO" */
#define OCCL_OPTIONS_VERSION 1u

/**
 * Called by a blocking call (work == NULL) while it waits, at least every
 * 50 ms once it has waited that long, on the calling thread. Return nonzero
 * to end the call with OCCL_ERR_INTERRUPTED (the communicator is unusable
 * afterwards and its peers are told), zero to keep waiting. It must not call
 * occl_* functions on the same communicator.
 */
typedef int (*occl_interrupt_fn)(void* user_data);

/**
 * Per-call options for the occl_*_ex entry points. Initialise with
 * OCCL_OPTIONS_INIT and change fields; like occl_config_t the library reads
 * min(size, its own sizeof) bytes, so fields are only ever appended. NULL
 * options mean all defaults (the same as the entry point without _ex).
 */
typedef struct occl_options {
  size_t size;          /**< sizeof(occl_options_t) as the caller compiled it */
  unsigned int magic;   /**< OCCL_OPTIONS_MAGIC */
  unsigned int version; /**< OCCL_OPTIONS_VERSION */
  /**
   * A CUDA stream (cudaStream_t) that CUDA tensors of this call are ordered
   * on; NULL means the default stream. Ignored for CPU tensors.
   */
  void* stream;
  /**
   * Deadline of this call in ms (> 0), counted from when it first has to
   * wait; OCCL_CONFIG_UNDEF_INT64 uses the communicator's
   * (occl_comm_set_timeout / occl_config_t.timeout_ms).
   */
  int64_t timeout_ms;
  /** NULL, or checked while a blocking call waits (see occl_interrupt_fn). */
  occl_interrupt_fn interrupt;
  /** Passed to interrupt. */
  void* interrupt_data;
} occl_options_t;

#define OCCL_OPTIONS_INIT \
  { sizeof(occl_options_t), OCCL_OPTIONS_MAGIC, OCCL_OPTIONS_VERSION, NULL, OCCL_CONFIG_UNDEF_INT64, NULL, NULL }

/**
 * The state of a communicator created with occl_config_t.blocking = 0, and
 * afterwards its asynchronous error (NCCL's ncclCommGetAsyncError). Stores
 * in *async_error: OCCL_ERR_IN_PROGRESS while it is still being created,
 * OCCL_SUCCESS when it is ready and has not failed, else the status of the
 * error that made it unusable (failed creation, or an operation that failed
 * later, e.g. in the background); occl_last_error() then has its message.
 * Returns OCCL_ERR_INVALID_ARGUMENT for a NULL argument, else OCCL_SUCCESS.
 */
occl_status_t occl_comm_get_async_error(occl_comm_t comm, occl_status_t* async_error);

/*
 * The operations above with per-call options (NULL = defaults). Arguments
 * and results are those of the function without _ex.
 */
occl_status_t occl_send_ex(const DLTensor* tensor, int peer, occl_comm_t comm, const occl_options_t* options,
                           occl_work_t* work);
occl_status_t occl_recv_ex(const DLTensor* tensor, int peer, occl_comm_t comm, const occl_options_t* options,
                           occl_work_t* work);
occl_status_t occl_broadcast_ex(const DLTensor* tensor, int root, occl_comm_t comm, const occl_options_t* options,
                                occl_work_t* work);
occl_status_t occl_scatter_ex(const DLTensor* sendbuf, const DLTensor* recvbuf, int root, occl_comm_t comm,
                              const occl_options_t* options, occl_work_t* work);
occl_status_t occl_gather_ex(const DLTensor* sendbuf, const DLTensor* recvbuf, int root, occl_comm_t comm,
                             const occl_options_t* options, occl_work_t* work);
occl_status_t occl_reduce_ex(const DLTensor* sendbuf, const DLTensor* recvbuf, occl_red_op_t op, int root,
                             occl_comm_t comm, const occl_options_t* options, occl_work_t* work);
occl_status_t occl_all_reduce_ex(const DLTensor* sendbuf, const DLTensor* recvbuf, occl_red_op_t op, occl_comm_t comm,
                                 const occl_options_t* options, occl_work_t* work);
occl_status_t occl_all_gather_ex(const DLTensor* sendbuf, const DLTensor* recvbuf, occl_comm_t comm,
                                 const occl_options_t* options, occl_work_t* work);
occl_status_t occl_reduce_scatter_ex(const DLTensor* sendbuf, const DLTensor* recvbuf, occl_red_op_t op,
                                     occl_comm_t comm, const occl_options_t* options, occl_work_t* work);
occl_status_t occl_all_to_all_ex(const DLTensor* sendbuf, const DLTensor* recvbuf, occl_comm_t comm,
                                 const occl_options_t* options, occl_work_t* work);
occl_status_t occl_barrier_ex(occl_comm_t comm, const occl_options_t* options, occl_work_t* work);
occl_status_t occl_all_gatherv_ex(const DLTensor* sendbuf, const DLTensor* recvbuf, const int64_t* recv_counts,
                                  const int64_t* recv_displs, occl_comm_t comm, const occl_options_t* options,
                                  occl_work_t* work);
occl_status_t occl_all_to_allv_ex(const DLTensor* sendbuf, const int64_t* send_counts, const int64_t* send_displs,
                                  const DLTensor* recvbuf, const int64_t* recv_counts, const int64_t* recv_displs,
                                  occl_comm_t comm, const occl_options_t* options, occl_work_t* work);
occl_status_t occl_gatherv_ex(const DLTensor* sendbuf, const DLTensor* recvbuf, const int64_t* recv_counts,
                              const int64_t* recv_displs, int root, occl_comm_t comm, const occl_options_t* options,
                              occl_work_t* work);
occl_status_t occl_scatterv_ex(const DLTensor* sendbuf, const int64_t* send_counts, const int64_t* send_displs,
                               const DLTensor* recvbuf, int root, occl_comm_t comm, const occl_options_t* options,
                               occl_work_t* work);

/* ------------------------------------------------------------------------ */
/* Appended in 0.3 (ABI 1.2): point-to-point matching (tags, status)         */
/* ------------------------------------------------------------------------ */
/*                                                                          */
/* As MPI: a message goes to the first posted receive whose source and tag  */
/* match it; messages from one rank are received in the order it sent them */
/* (non-overtaking). Messages that arrive before a matching receive is      */
/* posted are kept (OMNICCL_P2P_UNEXPECTED_BYTES in all, 256 MiB by          */
/* default; beyond it OCCL_ERR_OUT_OF_MEMORY). A receive's tensor is an     */
/* upper bound: a smaller message succeeds and the status says how much     */
/* came; a larger one is OCCL_ERR_TRUNCATED (the tensor holds its first     */
/* part, the communicator stays usable). A message of another dtype than   */
/* the receive tensor's fails that receive with OCCL_ERR_MISMATCH. Sends to */
/* this rank itself are matched by receives from it, in either order (a     */
/* blocking receive from itself needs the send posted first). occl_send and */
/* occl_recv are these with tag 0. A receive only completes while            */
/* operations are issued in the same order on its peers: a receive posted   */
/* before a collective must be matched before that collective runs.          */

/** Receive source: any rank. */
#define OCCL_ANY_SOURCE (-1)
/** Receive tag: any tag. */
#define OCCL_ANY_TAG (-1)
/** Peer of a send or receive that completes at once and moves nothing. */
#define OCCL_PROC_NULL (-2)
/** The largest tag (tags are 0..OCCL_TAG_UB). */
#define OCCL_TAG_UB 2147483647

/** What a receive got (MPI_Status). */
typedef struct occl_recv_status {
  /** The sender's rank; OCCL_PROC_NULL for a receive from OCCL_PROC_NULL. */
  int source;
  /** The message's tag; OCCL_ANY_TAG for a receive from OCCL_PROC_NULL. */
  int tag;
  /** Bytes stored in the receive tensor. */
  int64_t bytes;
  /** Elements of the receive tensor's dtype stored (bytes / its size). */
  int64_t count;
} occl_recv_status_t;

/**
 * Sends tensor to rank peer (this rank itself allowed, OCCL_PROC_NULL: no-op)
 * with tag (0..OCCL_TAG_UB). Blocking when work is NULL (it returns once the
 * tensor may be reused), else stores a handle. options may be NULL.
 */
occl_status_t occl_send_tagged(const DLTensor* tensor, int peer, int tag, occl_comm_t comm,
                               const occl_options_t* options, occl_work_t* work);
/**
 * Receives into tensor the first message from source (a rank,
 * OCCL_ANY_SOURCE or OCCL_PROC_NULL) with tag (or OCCL_ANY_TAG). Blocking
 * when work is NULL: then *status (if not NULL) is filled when it ends,
 * also on OCCL_ERR_TRUNCATED. With a handle, read the status with
 * occl_work_recv_status once it has completed; status is not written.
 */
occl_status_t occl_recv_tagged(const DLTensor* tensor, int source, int tag, occl_comm_t comm,
                               const occl_options_t* options, occl_recv_status_t* status, occl_work_t* work);
/**
 * The status of a completed receive's handle (also when it failed). Returns
 * OCCL_ERR_IN_PROGRESS while it runs, OCCL_ERR_INVALID_ARGUMENT for NULL
 * arguments, else OCCL_SUCCESS. For other operations' handles the status is
 * that of a receive from OCCL_PROC_NULL.
 */
occl_status_t occl_work_recv_status(occl_work_t work, occl_recv_status_t* status);
/**
 * MPI_Sendrecv: sends sendbuf to dest with sendtag and receives into recvbuf
 * from source with recvtag, both in progress at once (so pairs of ranks
 * exchanging never deadlock), and returns when both are done; *status (if
 * not NULL) is the receive's. Blocking only; options.interrupt is not
 * consulted (use the tagged calls with handles and occl_work_wait_for).
 */
occl_status_t occl_sendrecv(const DLTensor* sendbuf, int dest, int sendtag, const DLTensor* recvbuf, int source,
                            int recvtag, occl_comm_t comm, const occl_options_t* options, occl_recv_status_t* status);
/**
 * MPI_Iprobe: whether a message from source (a rank, OCCL_ANY_SOURCE or
 * OCCL_PROC_NULL) with tag (or OCCL_ANY_TAG) can be received now, without
 * receiving it. Does not wait: reads what has already arrived from the ranks
 * that could match (keeping it as a message that arrived before its
 * receive, within OMNICCL_P2P_UNEXPECTED_BYTES), then sets *flag to 1 and
 * fills *status (if not NULL) for the first matching message in arrival
 * order, or sets *flag to 0 and leaves *status alone. The status's bytes
 * and count describe the whole message (count in the sender's dtype). A
 * receive from the same thread naming the status's source and tag then gets
 * exactly that message. OCCL_PROC_NULL: *flag 1 and the PROC_NULL status.
 * options may be NULL.
 */
occl_status_t occl_iprobe(int source, int tag, occl_comm_t comm, const occl_options_t* options, int* flag,
                          occl_recv_status_t* status);
/**
 * MPI_Probe: waits until a message from source (a rank, OCCL_ANY_SOURCE or
 * OCCL_PROC_NULL) with tag (or OCCL_ANY_TAG) can be received, without
 * receiving it, and fills *status (if not NULL) as occl_iprobe does. The
 * deadline and interrupt are a blocking receive's (options may be NULL; an
 * interrupted probe leaves the communicator unusable, as an interrupted
 * receive does). OCCL_ERR_MISMATCH when every rank it could hear from has
 * moved on (to a collective, or left) without a matching send.
 */
occl_status_t occl_probe(int source, int tag, occl_comm_t comm, const occl_options_t* options,
                         occl_recv_status_t* status);

/* ------------------------------------------------------------------------ */
/* Appended in 0.3 (ABI 1.2): synchronous sends and cancellation            */
/* ------------------------------------------------------------------------ */

/**
 * MPI_Ssend / MPI_Issend: as occl_send_tagged, but the send completes only
 * once a receive on peer has matched its message (a probe does not match
 * it). Blocking when work is NULL. A blocking synchronous send to this rank
 * itself with no matching receive already posted can never complete and is
 * OCCL_ERR_MISMATCH (post the receive first, or use a handle); with a handle
 * it completes when a receive takes the message. The deadline and peer
 * failure apply as to a receive. OCCL_ERR_MISMATCH also when peer moves on
 * to a collective operation (or leaves) before a receive matched the
 * message: a synchronous send must be matched before the operations issued
 * after it on its receiver. Ordinary sends carry no flag and cause no ack.
 * options may be NULL.
 */
occl_status_t occl_ssend_tagged(const DLTensor* tensor, int peer, int tag, occl_comm_t comm,
                                const occl_options_t* options, occl_work_t* work);
/**
 * MPI_Cancel: cancels the operation of handle work, started on comm, if it
 * can still be cancelled: a receive that no message has matched yet, or a
 * synchronous send to this rank itself that no receive has matched yet.
 * Its handle then completes with OCCL_SUCCESS having moved nothing, and
 * *cancelled (if not NULL) is set to 1; otherwise (already matched or
 * complete, a send to another rank, another operation) the operation goes on
 * as if not asked and *cancelled is 0 (MPI_Test_cancelled). Runs after the
 * operations issued on comm before it. Returns OCCL_ERR_INVALID_ARGUMENT for
 * a NULL work or comm.
 */
occl_status_t occl_work_cancel(occl_work_t work, occl_comm_t comm, int* cancelled);

/* ------------------------------------------------------------------------ */
/* Appended in 0.3 (ABI 1.2): matched probes                                */
/* ------------------------------------------------------------------------ */

/**
 * A message taken out of matching by occl_mprobe / occl_improbe
 * (MPI_Message): only occl_mrecv with it receives that message, whatever
 * other receives or probes are posted. A plain number, not an allocation.
 */
typedef uint64_t occl_message_t;
/** No message (MPI_MESSAGE_NULL): what occl_mrecv leaves in its argument. */
#define OCCL_MESSAGE_NULL ((occl_message_t)0)
/** The message of a matched probe of OCCL_PROC_NULL (MPI_MESSAGE_NO_PROC). */
#define OCCL_MESSAGE_NO_PROC ((occl_message_t)1)

/**
 * MPI_Mprobe: as occl_probe (waits for a message from source with tag), but
 * the message found is taken out of matching and *message (not NULL) names
 * it for occl_mrecv; *status (if not NULL) describes it as occl_probe's.
 * OCCL_PROC_NULL: *message is OCCL_MESSAGE_NO_PROC. The message stays
 * counted in OMNICCL_P2P_UNEXPECTED_BYTES until it is received.
 */
occl_status_t occl_mprobe(int source, int tag, occl_comm_t comm, const occl_options_t* options, occl_message_t* message,
                          occl_recv_status_t* status);
/**
 * MPI_Improbe: as occl_iprobe (does not wait); when *flag is 1 the message
 * found is taken out of matching as occl_mprobe takes it, and *message (not
 * NULL) names it; when 0, *message is OCCL_MESSAGE_NULL.
 */
occl_status_t occl_improbe(int source, int tag, occl_comm_t comm, const occl_options_t* options, int* flag,
                           occl_message_t* message, occl_recv_status_t* status);
/**
 * MPI_Mrecv / MPI_Imrecv: receives into tensor the message *message (from
 * occl_mprobe or occl_improbe on comm) as occl_recv_tagged would receive it
 * (the tensor is an upper bound; OCCL_ERR_TRUNCATED, OCCL_ERR_MISMATCH for
 * another dtype), and sets *message to OCCL_MESSAGE_NULL. The message is all
 * there already, so this never waits for a peer. Blocking when work is NULL
 * (then *status, if not NULL, is filled), else a handle whose status
 * occl_work_recv_status gives. OCCL_MESSAGE_NO_PROC: the PROC_NULL status at
 * once. OCCL_ERR_INVALID_ARGUMENT for NULL message, OCCL_MESSAGE_NULL, or a
 * message this communicator does not hold. A CUDA tensor receives it on
 * options' stream (staged through host memory): the call returns before the
 * stream reaches it, and a blocking call's *status is the probe's.
 */
occl_status_t occl_mrecv(const DLTensor* tensor, occl_message_t* message, occl_comm_t comm,
                         const occl_options_t* options, occl_recv_status_t* status, occl_work_t* work);

/* ------------------------------------------------------------------------ */
/* Appended in 0.4 (ABI 1.3): registered buffers                            */
/* ------------------------------------------------------------------------ */

/**
 * A buffer registered with a communicator (occl_comm_window_register). A
 * plain number, not an allocation.
 */
typedef uint64_t occl_window_t;
/** No registered buffer: what occl_comm_window_deregister leaves behind. */
#define OCCL_WINDOW_NULL ((occl_window_t)0)

/**
 * Registers bytes of CUDA device memory at buffer with comm, as NCCL's
 * ncclCommWindowRegister: collective, every rank registers one buffer of its
 * own (its own size and place) in the same order. On the CUDA IPC path, an
 * operation whose buffers lie in registered ones on every rank, at the same
 * offset in the same registration on every rank, reads the peers' buffers
 * in place instead of copying through the communicator's scratch buffers:
 * all_reduce (input and output registered), all_gather, broadcast and
 * reduce_scatter (input registered). Ranks that disagree on whether or where
 * a buffer is registered get OCCL_ERR_MISMATCH on that operation, as for
 * any mismatched call. Where CUDA tensors are staged, or on a communicator
 * without GPUs, registering succeeds and changes nothing (the log says so).
 * *window (not NULL) receives the handle. Errors, on every rank alike, name
 * the rank that could not register: OCCL_ERR_INVALID_ARGUMENT (not device
 * memory of the communicator's GPU, or past the end of its allocation),
 * OCCL_ERR_UNSUPPORTED (memory of CUDA's virtual memory API made without
 * the POSIX file descriptor handle type, which no other process can map;
 * PyTorch's expandable segments have it and are mapped). Blocking; bounded by
 * the communicator's timeout.
 */
occl_status_t occl_comm_window_register(occl_comm_t comm, void* buffer, size_t bytes, occl_window_t* window);
/**
 * Deregisters *window (from occl_comm_window_register on comm) and sets it
 * to OCCL_WINDOW_NULL: collective, in the same order on every rank. Waits
 * (bounded by the communicator's timeout: OCCL_ERR_TIMEOUT) until the
 * operations enqueued before it that may read the buffer have passed, on
 * every rank, then unmaps the peers' buffers; the memory may be freed once
 * it returns. OCCL_ERR_INVALID_ARGUMENT for NULL, OCCL_WINDOW_NULL or a
 * handle comm did not give.
 */
occl_status_t occl_comm_window_deregister(occl_comm_t comm, occl_window_t* window);

/* ------------------------------------------------------------------------ */
/* Appended in 0.4 (ABI 1.4): prefix reductions                              */
/* ------------------------------------------------------------------------ */

/**
 * Inclusive prefix reduction (MPI_Scan): rank i's recvbuf gets op applied
 * to the sendbufs of ranks 0..i, in rank order (x0 op x1 op ... op xi).
 * sendbuf and recvbuf have the same dtype and element count on every rank;
 * in place when they coincide. op: SUM, PROD, MIN, MAX, the bitwise and the
 * logical ops, and on rank 0 a logical op gives the 0/1 truth of its own
 * input. AVG and PREMUL_SUM have no prefix meaning: OCCL_ERR_INVALID_ARGUMENT.
 * Floating-point results may differ from a left-to-right sum by rounding
 * (the partial results are combined in a tree), but are the same on every
 * run for the same communicator size. CUDA tensors are staged through host
 * memory (ordered on the call's stream like the staged collectives).
 */
occl_status_t occl_scan(const DLTensor* sendbuf, const DLTensor* recvbuf, occl_red_op_t op, occl_comm_t comm,
                        occl_work_t* work);
/**
 * Exclusive prefix reduction (MPI_Exscan): rank i > 0 gets op over the
 * sendbufs of ranks 0..i-1; rank 0's recvbuf is left as it was (MPI leaves
 * it undefined). Arguments and ops as occl_scan.
 */
occl_status_t occl_exscan(const DLTensor* sendbuf, const DLTensor* recvbuf, occl_red_op_t op, occl_comm_t comm,
                          occl_work_t* work);
/** occl_scan with per-call options (NULL = defaults). */
occl_status_t occl_scan_ex(const DLTensor* sendbuf, const DLTensor* recvbuf, occl_red_op_t op, occl_comm_t comm,
                           const occl_options_t* options, occl_work_t* work);
/** occl_exscan with per-call options (NULL = defaults). */
occl_status_t occl_exscan_ex(const DLTensor* sendbuf, const DLTensor* recvbuf, occl_red_op_t op, occl_comm_t comm,
                             const occl_options_t* options, occl_work_t* work);

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* OMNICCL_OMNICCL_H_ */
