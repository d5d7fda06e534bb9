/*
 * omniccl.i - the SWIG interface from which the JNI library libomniccl_jni.so
 * and the package-private classes OmniCCLNative / OmniCCLNativeJNI are
 * generated. It wraps an explicit allowlist of the stable C ABI
 * (omniccl/omniccl.h), renamed to Java names; nothing else is visible.
 *
 * Conversions (one typemap each, all below):
 *   occl_status_t result   a failure throws OmniCCLException.fromStatus(status,
 *                          occl_last_error()), i.e. the matching subclass with
 *                          the library's message; success returns void
 *   const DLTensor*        a NativeTensor (direct ByteBuffer + byte offset +
 *                          DLPack dtype + element count, or, without a
 *                          buffer, a device address + DLPack device), or
 *                          null for NULL; the memory is passed as is (no copy)
 *   const occl_options_t*  long[] {stream, timeout_ms} (CallOptions.toNative)
 *                          over OCCL_OPTIONS_INIT, or null for NULL
 *   occl_comm_t / work_t   long (the handle's address; 0 is NULL)
 *   occl_comm_t* etc.      one-element arrays receiving the output
 *   occl_work_t* work      long[1] to start a non-blocking operation, or null
 *                          to block until it completes (the C ABI's NULL)
 *   const occl_config_t*   a Config (null for defaults)
 *   const int64_t* counts  long[] (null for NULL), read only
 *   void* / size_t         long (a registered buffer's address, 0 is NULL,
 *                          and size in bytes)
 *   occl_window_t*         long[1] holding the window number, read and
 *                          written back
 *
 * The declarations at the end are the allowlist. They are compiled against
 * the real header, so a signature that drifts from it fails the build.
 */
%module OmniCCLNative

%include <typemaps.i>

/* int64_t as Java long (not through stdint.i, whose long long would need
 * casts to the header's int64_t). */
%typemap(jni) int64_t "jlong"
%typemap(jtype) int64_t "long"
%typemap(jstype) int64_t "long"
%typemap(in) int64_t %{ $1 = (int64_t)$input; %}
%typemap(javain) int64_t "$javainput"

/* Package-private: the public API is the hand-written org.omniccl facade. */
%pragma(java) moduleclassmodifiers="final class"
%pragma(java) jniclassclassmodifiers="final class"
%pragma(java) jniclasscode=%{
  static {
    NativeLoader.load();
  }

  private OmniCCLNativeJNI() {}
%}
%pragma(java) modulecode=%{
  static {
    // The library loaded must fit the header this code was compiled against.
    checkHeader(headerAbiVersion(), headerVersion());
  }

  private OmniCCLNative() {}
%}

%{
#include <stdint.h>
#include <string.h>

#include "omniccl/omniccl.h"

/* Throws the Java exception for a failed status, carrying occl_last_error()
 * (read first: it belongs to this thread and the failed call). */
static void occl_java_throw(JNIEnv* env, occl_status_t status) {
  const char* detail = occl_last_error();
  const char* text = (detail != NULL && detail[0] != '\0') ? detail : occl_status_string(status);
  jstring message = (*env)->NewStringUTF(env, text);
  if (message == NULL) return; /* OutOfMemoryError pending */
  jclass cls = (*env)->FindClass(env, "org/omniccl/OmniCCLException");
  if (cls == NULL) return; /* NoClassDefFoundError pending */
  jmethodID of = (*env)->GetStaticMethodID(env, cls, "fromStatus",
                                           "(ILjava/lang/String;)Lorg/omniccl/OmniCCLException;");
  if (of == NULL) return;
  jobject ex = (*env)->CallStaticObjectMethod(env, cls, of, (jint)status, message);
  if (ex != NULL && !(*env)->ExceptionCheck(env)) (*env)->Throw(env, (jthrowable)ex);
}

static void occl_java_illegal_argument(JNIEnv* env, const char* text) {
  jclass cls = (*env)->FindClass(env, "java/lang/IllegalArgumentException");
  if (cls != NULL) (*env)->ThrowNew(env, cls, text);
}

/* Fills *t from an org.omniccl.NativeTensor. Returns 0 with an exception
 * pending if the object does not describe memory. */
static int occl_java_tensor(JNIEnv* env, jobject obj, DLTensor* t, int64_t* shape) {
  /* Field IDs stay valid while the class is loaded; looking them up costs
   * microseconds per call, so it is done once (threads racing here store the
   * same values; f_count, stored last with release order, publishes them). */
  static jfieldID f_buf, f_off, f_code, f_bits, f_addr, f_dtype, f_did, f_count;
  if (__atomic_load_n(&f_count, __ATOMIC_ACQUIRE) == NULL) {
    jclass cls = (*env)->GetObjectClass(env, obj);
    f_buf = (*env)->GetFieldID(env, cls, "buffer", "Ljava/nio/ByteBuffer;");
    f_off = (*env)->GetFieldID(env, cls, "byteOffset", "J");
    f_code = (*env)->GetFieldID(env, cls, "dlCode", "I");
    f_bits = (*env)->GetFieldID(env, cls, "dlBits", "I");
    f_addr = (*env)->GetFieldID(env, cls, "address", "J");
    f_dtype = (*env)->GetFieldID(env, cls, "deviceType", "I");
    f_did = (*env)->GetFieldID(env, cls, "deviceId", "I");
    jfieldID count = (*env)->GetFieldID(env, cls, "count", "J");
    (*env)->DeleteLocalRef(env, cls);
    if (!f_buf || !f_off || !f_code || !f_bits || !f_addr || !f_dtype || !f_did || !count) return 0;
    __atomic_store_n(&f_count, count, __ATOMIC_RELEASE);
  }
  memset(t, 0, sizeof *t);
  jobject buf = (*env)->GetObjectField(env, obj, f_buf);
  if (buf != NULL) {
    /* Host memory: a direct buffer. */
    void* data = (*env)->GetDirectBufferAddress(env, buf);
    (*env)->DeleteLocalRef(env, buf);
    if (data == NULL) {
      occl_java_illegal_argument(env, "tensor memory: not a direct ByteBuffer");
      return 0;
    }
    t->data = data;
    t->device.device_type = kDLCPU;
    t->device.device_id = 0;
    t->byte_offset = (uint64_t)(*env)->GetLongField(env, obj, f_off);
  } else {
    /* Memory given by address on a device (DeviceBuffer.cuda): the library
     * checks the device before it touches the memory. */
    t->data = (void*)(intptr_t)(*env)->GetLongField(env, obj, f_addr);
    t->device.device_type = (DLDeviceType)(*env)->GetIntField(env, obj, f_dtype);
    t->device.device_id = (int32_t)(*env)->GetIntField(env, obj, f_did);
    t->byte_offset = 0;
  }
  *shape = (int64_t)(*env)->GetLongField(env, obj, f_count);
  t->ndim = 1;
  t->dtype.code = (uint8_t)(*env)->GetIntField(env, obj, f_code);
  t->dtype.bits = (uint8_t)(*env)->GetIntField(env, obj, f_bits);
  t->dtype.lanes = 1;
  t->shape = shape;
  t->strides = NULL;
  return 1;
}

/* Reads an org.omniccl.Config into *c; the strings are released by
 * occl_java_config_release. Returns 0 with an exception pending on failure. */
typedef struct occl_java_config {
  occl_config_t config;
  jstring transport, algorithm;
} occl_java_config;

static int occl_java_config_read(JNIEnv* env, jobject obj, occl_java_config* c) {
  occl_config_t init = OCCL_CONFIG_INIT;
  c->config = init;
  c->transport = c->algorithm = NULL;
  jclass cls = (*env)->GetObjectClass(env, obj);
  jfieldID f_timeout = (*env)->GetFieldID(env, cls, "timeoutMs", "J");
  jfieldID f_transport = (*env)->GetFieldID(env, cls, "transport", "Ljava/lang/String;");
  jfieldID f_algorithm = (*env)->GetFieldID(env, cls, "algorithm", "Ljava/lang/String;");
  if (!f_timeout || !f_transport || !f_algorithm) return 0;
  jlong timeout = (*env)->GetLongField(env, obj, f_timeout);
  if (timeout > 0) c->config.timeout_ms = (int64_t)timeout;
  c->transport = (jstring)(*env)->GetObjectField(env, obj, f_transport);
  c->algorithm = (jstring)(*env)->GetObjectField(env, obj, f_algorithm);
  if (c->transport != NULL) {
    c->config.transport = (*env)->GetStringUTFChars(env, c->transport, NULL);
    if (c->config.transport == NULL) return 0;
  }
  if (c->algorithm != NULL) {
    c->config.algorithm = (*env)->GetStringUTFChars(env, c->algorithm, NULL);
    if (c->config.algorithm == NULL) return 0;
  }
  return 1;
}

static void occl_java_config_release(JNIEnv* env, occl_java_config* c) {
  if (c->transport != NULL && c->config.transport != NULL)
    (*env)->ReleaseStringUTFChars(env, c->transport, c->config.transport);
  if (c->algorithm != NULL && c->config.algorithm != NULL)
    (*env)->ReleaseStringUTFChars(env, c->algorithm, c->config.algorithm);
}
%}

/* ---- status: failure becomes an exception ------------------------------ */
%typemap(jni) occl_status_t "jint"
%typemap(jtype) occl_status_t "int"
%typemap(jstype) occl_status_t "int"
%typemap(in) occl_status_t %{ $1 = (occl_status_t)$input; %}
%typemap(javain) occl_status_t "$javainput"
/* As a result, per function (OCCL_CALL / OCCL_DONE below): void in Java or
 * the exception; for work_test / work_wait_for, true when complete, false
 * while in progress. */

/* ---- handles as long --------------------------------------------------- */
%define OCCL_HANDLE(TYPE)
%typemap(jni) TYPE "jlong"
%typemap(jtype) TYPE "long"
%typemap(jstype) TYPE "long"
%typemap(in) TYPE %{ $1 = (TYPE)(intptr_t)$input; %}
%typemap(javain) TYPE "$javainput"
/* TYPE* OUT: a long[] of at least one element receives the handle. */
%typemap(jni) TYPE* OUT "jlongArray"
%typemap(jtype) TYPE* OUT "long[]"
%typemap(jstype) TYPE* OUT "long[]"
%typemap(javain) TYPE* OUT "$javainput"
%typemap(in) TYPE* OUT (TYPE handle) %{
  handle = NULL;
  $1 = &handle;
  if ($input == NULL || (*jenv)->GetArrayLength(jenv, $input) < 1) {
    occl_java_illegal_argument(jenv, "output: need a long[] of length >= 1");
    return $null;
  }
%}
%typemap(argout) TYPE* OUT %{
  {
    jlong value = (jlong)(intptr_t)handle$argnum;
    (*jenv)->SetLongArrayRegion(jenv, $input, 0, 1, &value);
  }
%}
%enddef
OCCL_HANDLE(occl_comm_t)
OCCL_HANDLE(occl_work_t)

/* occl_work_t* work: null blocks (NULL), long[1] starts and receives a handle. */
%typemap(jni) occl_work_t* WORK "jlongArray"
%typemap(jtype) occl_work_t* WORK "long[]"
%typemap(jstype) occl_work_t* WORK "long[]"
%typemap(javain) occl_work_t* WORK "$javainput"
%typemap(in) occl_work_t* WORK (occl_work_t handle) %{
  handle = NULL;
  $1 = NULL;
  if ($input != NULL) {
    if ((*jenv)->GetArrayLength(jenv, $input) < 1) {
      occl_java_illegal_argument(jenv, "work: need a long[] of length >= 1 or null");
      return $null;
    }
    $1 = &handle;
  }
%}
%typemap(argout) occl_work_t* WORK %{
  if ($input != NULL) {
    jlong value = (jlong)(intptr_t)handle$argnum;
    (*jenv)->SetLongArrayRegion(jenv, $input, 0, 1, &value);
  }
%}

/* ---- reduce ops as int ------------------------------------------------- */
%typemap(jni) occl_red_op_t "jint"
%typemap(jtype) occl_red_op_t "int"
%typemap(jstype) occl_red_op_t "int"
%typemap(in) occl_red_op_t %{ $1 = (occl_red_op_t)$input; %}
%typemap(javain) occl_red_op_t "$javainput"
%typemap(jni) occl_red_op_t* OUT "jintArray"
%typemap(jtype) occl_red_op_t* OUT "int[]"
%typemap(jstype) occl_red_op_t* OUT "int[]"
%typemap(javain) occl_red_op_t* OUT "$javainput"
%typemap(in) occl_red_op_t* OUT (occl_red_op_t op) %{
  op = OCCL_SUM;
  $1 = &op;
  if ($input == NULL || (*jenv)->GetArrayLength(jenv, $input) < 1) {
    occl_java_illegal_argument(jenv, "output: need an int[] of length >= 1");
    return $null;
  }
%}
%typemap(argout) occl_red_op_t* OUT %{
  {
    jint value = (jint)op$argnum;
    (*jenv)->SetIntArrayRegion(jenv, $input, 0, 1, &value);
  }
%}

/* ---- tensors: NativeTensor or null ------------------------------------- */
%typemap(jni) const DLTensor* "jobject"
%typemap(jtype) const DLTensor* "NativeTensor"
%typemap(jstype) const DLTensor* "NativeTensor"
%typemap(javain) const DLTensor* "$javainput"
%typemap(in) const DLTensor* (DLTensor tensor, int64_t shape) %{
  $1 = NULL;
  if ($input != NULL) {
    if (!occl_java_tensor(jenv, $input, &tensor, &shape)) return $null;
    $1 = &tensor;
  }
%}

/* ---- counts and displacements: long[] or null ---------------------------- */
%typemap(jni) const int64_t* COUNTS "jlongArray"
%typemap(jtype) const int64_t* COUNTS "long[]"
%typemap(jstype) const int64_t* COUNTS "long[]"
%typemap(javain) const int64_t* COUNTS "$javainput"
%typemap(in) const int64_t* COUNTS %{
  $1 = NULL;
  if ($input != NULL) {
    $1 = (int64_t*)(*jenv)->GetLongArrayElements(jenv, $input, NULL);
    if ($1 == NULL) return $null;
  }
%}
%typemap(freearg) const int64_t* COUNTS %{
  if ($input != NULL && $1 != NULL)
    (*jenv)->ReleaseLongArrayElements(jenv, $input, (jlong*)$1, JNI_ABORT);
%}

/* ---- per-call options: long[] {stream, timeout_ms} or null ------------- */
%typemap(jni) const occl_options_t* OPTS "jlongArray"
%typemap(jtype) const occl_options_t* OPTS "long[]"
%typemap(jstype) const occl_options_t* OPTS "long[]"
%typemap(javain) const occl_options_t* OPTS "$javainput"
%typemap(in) const occl_options_t* OPTS (occl_options_t opts) %{
  $1 = NULL;
  if ($input != NULL) {
    jlong v[2];
    if ((*jenv)->GetArrayLength(jenv, $input) != 2) {
      occl_java_illegal_argument(jenv, "options: need a long[] {stream, timeout_ms}");
      return $null;
    }
    (*jenv)->GetLongArrayRegion(jenv, $input, 0, 2, v);
    occl_options_t init = OCCL_OPTIONS_INIT;
    opts = init;
    opts.stream = (void*)(intptr_t)v[0];
    opts.timeout_ms = (int64_t)v[1];
    $1 = &opts;
  }
%}

/* ---- config: org.omniccl.Config or null -------------------------------- */
%typemap(jni) const occl_config_t* "jobject"
%typemap(jtype) const occl_config_t* "Config"
%typemap(jstype) const occl_config_t* "Config"
%typemap(javain) const occl_config_t* "$javainput"
%typemap(in) const occl_config_t* (occl_java_config cfg, int have) %{
  $1 = NULL;
  have = 0;
  if ($input != NULL) {
    have = 1;
    if (!occl_java_config_read(jenv, $input, &cfg)) {
      occl_java_config_release(jenv, &cfg);
      return $null;
    }
    $1 = &cfg.config;
  }
%}
%typemap(freearg) const occl_config_t* %{
  if (have$argnum) occl_java_config_release(jenv, &cfg$argnum);
%}

/* ---- unique id: byte[OCCL_UNIQUE_ID_BYTES] ------------------------------ */
%typemap(jni) occl_unique_id_t* "jbyteArray"
%typemap(jtype) occl_unique_id_t* "byte[]"
%typemap(jstype) occl_unique_id_t* "byte[]"
%typemap(javain) occl_unique_id_t* "$javainput"
%typemap(in) occl_unique_id_t* (occl_unique_id_t id) %{
  if ($input == NULL || (*jenv)->GetArrayLength(jenv, $input) != OCCL_UNIQUE_ID_BYTES) {
    occl_java_illegal_argument(jenv, "unique id: need a byte[] of length 128");
    return $null;
  }
  (*jenv)->GetByteArrayRegion(jenv, $input, 0, OCCL_UNIQUE_ID_BYTES, (jbyte*)id.internal);
  $1 = &id;
%}
%typemap(argout) occl_unique_id_t* %{
  (*jenv)->SetByteArrayRegion(jenv, $input, 0, OCCL_UNIQUE_ID_BYTES, (const jbyte*)id$argnum.internal);
%}

/* ---- scalar outputs -------------------------------------------------------- */
%apply int* OUTPUT { int* rank, int* size, int* version };
%typemap(jni) const char** NAME "jobjectArray"
%typemap(jtype) const char** NAME "String[]"
%typemap(jstype) const char** NAME "String[]"
%typemap(javain) const char** NAME "$javainput"
%typemap(in) const char** NAME (const char* name) %{
  name = NULL;
  $1 = ($1_ltype)&name;
  if ($input == NULL || (*jenv)->GetArrayLength(jenv, $input) < 1) {
    occl_java_illegal_argument(jenv, "output: need a String[] of length >= 1");
    return $null;
  }
%}
%typemap(argout) const char** NAME %{
  if (name$argnum != NULL) {
    jstring s = (*jenv)->NewStringUTF(jenv, name$argnum);
    if (s != NULL) (*jenv)->SetObjectArrayElement(jenv, $input, 0, s);
  }
%}


/* ======================================================================== */
/* The allowlist                                                            */
/* ======================================================================== */

%rename(statusString) occl_status_string;
const char* occl_status_string(occl_status_t status);
%rename(lastError) occl_last_error;
const char* occl_last_error(void);

%define OCCL_CALL(NAME, JAVA_NAME)
%rename(JAVA_NAME) NAME;
%typemap(jni) occl_status_t NAME "void"
%typemap(jtype) occl_status_t NAME "void"
%typemap(jstype) occl_status_t NAME "void"
%typemap(out) occl_status_t NAME %{
  if ($1 != OCCL_SUCCESS) {
    occl_java_throw(jenv, $1);
  }
%}
%typemap(javaout) occl_status_t NAME { $jnicall; }
%enddef

%define OCCL_DONE(NAME, JAVA_NAME)
%rename(JAVA_NAME) NAME;
%typemap(jni) occl_status_t NAME "jboolean"
%typemap(jtype) occl_status_t NAME "boolean"
%typemap(jstype) occl_status_t NAME "boolean"
%typemap(out) occl_status_t NAME %{
  $result = JNI_FALSE;
  if ($1 == OCCL_SUCCESS) {
    $result = JNI_TRUE;
  } else if ($1 != OCCL_ERR_IN_PROGRESS) {
    occl_java_throw(jenv, $1);
  }
%}
%typemap(javaout) occl_status_t NAME { return $jnicall; }
%enddef

OCCL_CALL(occl_get_version, getVersion)
occl_status_t occl_get_version(int* version);
OCCL_CALL(occl_init_check, initCheck)
occl_status_t occl_init_check(int abi_version, int header_version);

OCCL_CALL(occl_get_unique_id, getUniqueId)
occl_status_t occl_get_unique_id(occl_unique_id_t* id);
OCCL_CALL(occl_comm_init, commInit)
occl_status_t occl_comm_init(occl_comm_t* OUT, const char* init_method, int rank,
                             int world_size, const occl_config_t* config);
OCCL_CALL(occl_comm_init_unique_id, commInitUniqueId)
occl_status_t occl_comm_init_unique_id(occl_comm_t* OUT, int world_size,
                                       occl_unique_id_t* id, int rank,
                                       const occl_config_t* config);
OCCL_CALL(occl_comm_split, commSplit)
occl_status_t occl_comm_split(occl_comm_t comm, int color, int key,
                              const occl_config_t* config, occl_comm_t* OUT);
OCCL_CALL(occl_comm_destroy, commDestroy)
occl_status_t occl_comm_destroy(occl_comm_t comm);
OCCL_CALL(occl_comm_abort, commAbort)
occl_status_t occl_comm_abort(occl_comm_t comm);
OCCL_CALL(occl_comm_rank, commRank)
occl_status_t occl_comm_rank(occl_comm_t comm, int* rank);
OCCL_CALL(occl_comm_size, commSize)
occl_status_t occl_comm_size(occl_comm_t comm, int* size);
OCCL_CALL(occl_comm_transport, commTransport)
occl_status_t occl_comm_transport(occl_comm_t comm, const char** NAME);
OCCL_CALL(occl_comm_set_timeout, commSetTimeout)
occl_status_t occl_comm_set_timeout(occl_comm_t comm, int64_t timeout_ms);
OCCL_CALL(occl_red_op_create_premul_sum, redOpCreatePremulSum)
occl_status_t occl_red_op_create_premul_sum(occl_comm_t comm, double scalar,
                                            occl_red_op_t* OUT);
OCCL_CALL(occl_red_op_destroy, redOpDestroy)
occl_status_t occl_red_op_destroy(occl_comm_t comm, occl_red_op_t op);

OCCL_CALL(occl_send, send)
occl_status_t occl_send(const DLTensor* tensor, int peer, occl_comm_t comm, occl_work_t* WORK);
OCCL_CALL(occl_recv, recv)
occl_status_t occl_recv(const DLTensor* tensor, int peer, occl_comm_t comm, occl_work_t* WORK);
OCCL_CALL(occl_broadcast, broadcast)
occl_status_t occl_broadcast(const DLTensor* tensor, int root, occl_comm_t comm,
                             occl_work_t* WORK);
OCCL_CALL(occl_scatter, scatter)
occl_status_t occl_scatter(const DLTensor* sendbuf, const DLTensor* recvbuf, int root,
                           occl_comm_t comm, occl_work_t* WORK);
OCCL_CALL(occl_gather, gather)
occl_status_t occl_gather(const DLTensor* sendbuf, const DLTensor* recvbuf, int root,
                          occl_comm_t comm, occl_work_t* WORK);
OCCL_CALL(occl_reduce, reduce)
occl_status_t occl_reduce(const DLTensor* sendbuf, const DLTensor* recvbuf, occl_red_op_t op,
                          int root, occl_comm_t comm, occl_work_t* WORK);
OCCL_CALL(occl_all_reduce, allReduce)
occl_status_t occl_all_reduce(const DLTensor* sendbuf, const DLTensor* recvbuf,
                              occl_red_op_t op, occl_comm_t comm, occl_work_t* WORK);
OCCL_CALL(occl_all_gather, allGather)
occl_status_t occl_all_gather(const DLTensor* sendbuf, const DLTensor* recvbuf,
                              occl_comm_t comm, occl_work_t* WORK);
OCCL_CALL(occl_reduce_scatter, reduceScatter)
occl_status_t occl_reduce_scatter(const DLTensor* sendbuf, const DLTensor* recvbuf,
                                  occl_red_op_t op, occl_comm_t comm, occl_work_t* WORK);
OCCL_CALL(occl_all_to_all, allToAll)
occl_status_t occl_all_to_all(const DLTensor* sendbuf, const DLTensor* recvbuf,
                              occl_comm_t comm, occl_work_t* WORK);
OCCL_CALL(occl_barrier, barrier)
occl_status_t occl_barrier(occl_comm_t comm, occl_work_t* WORK);
OCCL_CALL(occl_all_gatherv, allGatherv)
occl_status_t occl_all_gatherv(const DLTensor* sendbuf, const DLTensor* recvbuf,
                               const int64_t* COUNTS, const int64_t* COUNTS,
                               occl_comm_t comm, occl_work_t* WORK);
OCCL_CALL(occl_all_to_allv, allToAllv)
occl_status_t occl_all_to_allv(const DLTensor* sendbuf, const int64_t* COUNTS,
                               const int64_t* COUNTS, const DLTensor* recvbuf,
                               const int64_t* COUNTS, const int64_t* COUNTS,
                               occl_comm_t comm, occl_work_t* WORK);
OCCL_CALL(occl_gatherv, gatherv)
occl_status_t occl_gatherv(const DLTensor* sendbuf, const DLTensor* recvbuf,
                           const int64_t* COUNTS, const int64_t* COUNTS, int root,
                           occl_comm_t comm, occl_work_t* WORK);
OCCL_CALL(occl_scatterv, scatterv)
occl_status_t occl_scatterv(const DLTensor* sendbuf, const int64_t* COUNTS,
                            const int64_t* COUNTS, const DLTensor* recvbuf, int root,
                            occl_comm_t comm, occl_work_t* WORK);

OCCL_CALL(occl_work_wait, workWait)
occl_status_t occl_work_wait(occl_work_t work);
OCCL_DONE(occl_work_test, workTest)
occl_status_t occl_work_test(occl_work_t work);
OCCL_CALL(occl_work_free, workFree)
occl_status_t occl_work_free(occl_work_t work);
OCCL_DONE(occl_work_wait_for, workWaitFor)
occl_status_t occl_work_wait_for(occl_work_t work, int64_t timeout_ms);

/* ABI 1.1: the operations with per-call options (a CUDA stream, a deadline). */
OCCL_CALL(occl_send_ex, sendEx)
occl_status_t occl_send_ex(const DLTensor* tensor, int peer, occl_comm_t comm,
                           const occl_options_t* OPTS, occl_work_t* WORK);
OCCL_CALL(occl_recv_ex, recvEx)
occl_status_t occl_recv_ex(const DLTensor* tensor, int peer, occl_comm_t comm,
                           const occl_options_t* OPTS, occl_work_t* WORK);
OCCL_CALL(occl_broadcast_ex, broadcastEx)
occl_status_t occl_broadcast_ex(const DLTensor* tensor, int root, occl_comm_t comm,
                                const occl_options_t* OPTS, occl_work_t* WORK);
OCCL_CALL(occl_scatter_ex, scatterEx)
occl_status_t occl_scatter_ex(const DLTensor* sendbuf, const DLTensor* recvbuf, int root,
                              occl_comm_t comm, const occl_options_t* OPTS, occl_work_t* WORK);
OCCL_CALL(occl_gather_ex, gatherEx)
occl_status_t occl_gather_ex(const DLTensor* sendbuf, const DLTensor* recvbuf, int root,
                             occl_comm_t comm, const occl_options_t* OPTS, occl_work_t* WORK);
OCCL_CALL(occl_reduce_ex, reduceEx)
occl_status_t occl_reduce_ex(const DLTensor* sendbuf, const DLTensor* recvbuf, occl_red_op_t op,
                             int root, occl_comm_t comm, const occl_options_t* OPTS,
                             occl_work_t* WORK);
OCCL_CALL(occl_all_reduce_ex, allReduceEx)
occl_status_t occl_all_reduce_ex(const DLTensor* sendbuf, const DLTensor* recvbuf,
                                 occl_red_op_t op, occl_comm_t comm, const occl_options_t* OPTS,
                                 occl_work_t* WORK);
OCCL_CALL(occl_all_gather_ex, allGatherEx)
occl_status_t occl_all_gather_ex(const DLTensor* sendbuf, const DLTensor* recvbuf,
                                 occl_comm_t comm, const occl_options_t* OPTS, occl_work_t* WORK);
OCCL_CALL(occl_reduce_scatter_ex, reduceScatterEx)
occl_status_t occl_reduce_scatter_ex(const DLTensor* sendbuf, const DLTensor* recvbuf,
                                     occl_red_op_t op, occl_comm_t comm,
                                     const occl_options_t* OPTS, occl_work_t* WORK);
OCCL_CALL(occl_all_to_all_ex, allToAllEx)
occl_status_t occl_all_to_all_ex(const DLTensor* sendbuf, const DLTensor* recvbuf,
                                 occl_comm_t comm, const occl_options_t* OPTS, occl_work_t* WORK);
OCCL_CALL(occl_barrier_ex, barrierEx)
occl_status_t occl_barrier_ex(occl_comm_t comm, const occl_options_t* OPTS, occl_work_t* WORK);
OCCL_CALL(occl_all_gatherv_ex, allGathervEx)
occl_status_t occl_all_gatherv_ex(const DLTensor* sendbuf, const DLTensor* recvbuf,
                                  const int64_t* COUNTS, const int64_t* COUNTS, occl_comm_t comm,
                                  const occl_options_t* OPTS, occl_work_t* WORK);
OCCL_CALL(occl_all_to_allv_ex, allToAllvEx)
occl_status_t occl_all_to_allv_ex(const DLTensor* sendbuf, const int64_t* COUNTS,
                                  const int64_t* COUNTS, const DLTensor* recvbuf,
                                  const int64_t* COUNTS, const int64_t* COUNTS, occl_comm_t comm,
                                  const occl_options_t* OPTS, occl_work_t* WORK);
OCCL_CALL(occl_gatherv_ex, gathervEx)
occl_status_t occl_gatherv_ex(const DLTensor* sendbuf, const DLTensor* recvbuf,
                              const int64_t* COUNTS, const int64_t* COUNTS, int root,
                              occl_comm_t comm, const occl_options_t* OPTS, occl_work_t* WORK);
OCCL_CALL(occl_scatterv_ex, scattervEx)
occl_status_t occl_scatterv_ex(const DLTensor* sendbuf, const int64_t* COUNTS,
                               const int64_t* COUNTS, const DLTensor* recvbuf, int root,
                               occl_comm_t comm, const occl_options_t* OPTS, occl_work_t* WORK);

/* ABI 1.2: point-to-point matching (tags, status, probes), synchronous sends,
 * cancel, matched probes. */

/* occl_recv_status_t* STATUS: a long[] of at least 4 elements receiving
 * {source, tag, bytes, count}, or null for NULL. Written also when the call
 * fails (a truncated receive fills it). */
%typemap(jni) occl_recv_status_t* STATUS "jlongArray"
%typemap(jtype) occl_recv_status_t* STATUS "long[]"
%typemap(jstype) occl_recv_status_t* STATUS "long[]"
%typemap(javain) occl_recv_status_t* STATUS "$javainput"
%typemap(in) occl_recv_status_t* STATUS (occl_recv_status_t st) %{
  $1 = NULL;
  st.source = OCCL_PROC_NULL;
  st.tag = OCCL_ANY_TAG;
  st.bytes = 0;
  st.count = 0;
  if ($input != NULL) {
    if ((*jenv)->GetArrayLength(jenv, $input) < 4) {
      occl_java_illegal_argument(jenv, "status: need a long[] of length >= 4 or null");
      return $null;
    }
    $1 = &st;
  }
%}
%typemap(argout) occl_recv_status_t* STATUS %{
  if ($input != NULL) {
    jlong v[4] = {st$argnum.source, st$argnum.tag, st$argnum.bytes, st$argnum.count};
    (*jenv)->SetLongArrayRegion(jenv, $input, 0, 4, v);
  }
%}

/* occl_message_t* MESSAGE: a long[1] holding the message number, read
 * (occl_mrecv) and written back (every call that takes one). */
%typemap(jni) occl_message_t* MESSAGE "jlongArray"
%typemap(jtype) occl_message_t* MESSAGE "long[]"
%typemap(jstype) occl_message_t* MESSAGE "long[]"
%typemap(javain) occl_message_t* MESSAGE "$javainput"
%typemap(in) occl_message_t* MESSAGE (occl_message_t msg) %{
  if ($input == NULL || (*jenv)->GetArrayLength(jenv, $input) < 1) {
    occl_java_illegal_argument(jenv, "message: need a long[] of length >= 1");
    return $null;
  }
  {
    jlong v;
    (*jenv)->GetLongArrayRegion(jenv, $input, 0, 1, &v);
    msg = (occl_message_t)v;
  }
  $1 = &msg;
%}
%typemap(argout) occl_message_t* MESSAGE %{
  {
    jlong v = (jlong)msg$argnum;
    (*jenv)->SetLongArrayRegion(jenv, $input, 0, 1, &v);
  }
%}
%apply int* OUTPUT { int* flag, int* cancelled };

OCCL_CALL(occl_send_tagged, sendTagged)
occl_status_t occl_send_tagged(const DLTensor* tensor, int peer, int tag, occl_comm_t comm,
                               const occl_options_t* OPTS, occl_work_t* WORK);
OCCL_CALL(occl_recv_tagged, recvTagged)
occl_status_t occl_recv_tagged(const DLTensor* tensor, int source, int tag, occl_comm_t comm,
                               const occl_options_t* OPTS, occl_recv_status_t* STATUS,
                               occl_work_t* WORK);
OCCL_CALL(occl_work_recv_status, workRecvStatus)
occl_status_t occl_work_recv_status(occl_work_t work, occl_recv_status_t* STATUS);
OCCL_CALL(occl_sendrecv, sendrecv)
occl_status_t occl_sendrecv(const DLTensor* sendbuf, int dest, int sendtag, const DLTensor* recvbuf,
                            int source, int recvtag, occl_comm_t comm, const occl_options_t* OPTS,
                            occl_recv_status_t* STATUS);
OCCL_CALL(occl_iprobe, iprobe)
occl_status_t occl_iprobe(int source, int tag, occl_comm_t comm, const occl_options_t* OPTS,
                          int* flag, occl_recv_status_t* STATUS);
OCCL_CALL(occl_probe, probe)
occl_status_t occl_probe(int source, int tag, occl_comm_t comm, const occl_options_t* OPTS,
                         occl_recv_status_t* STATUS);
OCCL_CALL(occl_ssend_tagged, ssendTagged)
occl_status_t occl_ssend_tagged(const DLTensor* tensor, int peer, int tag, occl_comm_t comm,
                                const occl_options_t* OPTS, occl_work_t* WORK);
OCCL_CALL(occl_work_cancel, workCancel)
occl_status_t occl_work_cancel(occl_work_t work, occl_comm_t comm, int* cancelled);
OCCL_CALL(occl_mprobe, mprobe)
occl_status_t occl_mprobe(int source, int tag, occl_comm_t comm, const occl_options_t* OPTS,
                          occl_message_t* MESSAGE, occl_recv_status_t* STATUS);
OCCL_CALL(occl_improbe, improbe)
occl_status_t occl_improbe(int source, int tag, occl_comm_t comm, const occl_options_t* OPTS,
                           int* flag, occl_message_t* MESSAGE, occl_recv_status_t* STATUS);
OCCL_CALL(occl_mrecv, mrecv)
occl_status_t occl_mrecv(const DLTensor* tensor, occl_message_t* MESSAGE, occl_comm_t comm,
                         const occl_options_t* OPTS, occl_recv_status_t* STATUS,
                         occl_work_t* WORK);

/* ABI 1.3: registered buffers. */

/* void* ADDRESS: a memory address as long (0 is NULL), passed as is. */
%typemap(jni) void* ADDRESS "jlong"
%typemap(jtype) void* ADDRESS "long"
%typemap(jstype) void* ADDRESS "long"
%typemap(javain) void* ADDRESS "$javainput"
%typemap(in) void* ADDRESS %{ $1 = (void*)(intptr_t)$input; %}

/* size_t BYTES: a long, at least 0 (Communicator checks the sign). */
%typemap(jni) size_t BYTES "jlong"
%typemap(jtype) size_t BYTES "long"
%typemap(jstype) size_t BYTES "long"
%typemap(javain) size_t BYTES "$javainput"
%typemap(in) size_t BYTES %{ $1 = (size_t)$input; %}

/* occl_window_t* WINDOW: a long[1] holding the window number, read
 * (deregister) and written back (both calls). */
%typemap(jni) occl_window_t* WINDOW "jlongArray"
%typemap(jtype) occl_window_t* WINDOW "long[]"
%typemap(jstype) occl_window_t* WINDOW "long[]"
%typemap(javain) occl_window_t* WINDOW "$javainput"
%typemap(in) occl_window_t* WINDOW (occl_window_t win) %{
  if ($input == NULL || (*jenv)->GetArrayLength(jenv, $input) < 1) {
    occl_java_illegal_argument(jenv, "window: need a long[] of length >= 1");
    return $null;
  }
  {
    jlong v;
    (*jenv)->GetLongArrayRegion(jenv, $input, 0, 1, &v);
    win = (occl_window_t)v;
  }
  $1 = &win;
%}
%typemap(argout) occl_window_t* WINDOW %{
  {
    jlong v = (jlong)win$argnum;
    (*jenv)->SetLongArrayRegion(jenv, $input, 0, 1, &v);
  }
%}

OCCL_CALL(occl_comm_window_register, commWindowRegister)
occl_status_t occl_comm_window_register(occl_comm_t comm, void* ADDRESS, size_t BYTES,
                                        occl_window_t* WINDOW);
OCCL_CALL(occl_comm_window_deregister, commWindowDeregister)
occl_status_t occl_comm_window_deregister(occl_comm_t comm, occl_window_t* WINDOW);

/* occl_init_check with the header this JNI code was compiled against
 * (checkHeader(headerAbiVersion(), headerVersion()) is OCCL_INIT_CHECK()): a
 * libomniccl.so.1 found on the library path that is older than the jar's,
 * or of another ABI major, fails the first use with both versions named.
 * The versions are arguments so that tests can pass ones that do not fit. */
%{
static int occl_java_header_abi_version(void) { return OCCL_ABI_VERSION; }
static int occl_java_header_version(void) { return OCCL_VERSION_CODE; }
static occl_status_t occl_java_check_header(int abi_version, int header_version) {
  return occl_init_check(abi_version, header_version);
}
%}
%rename(headerAbiVersion) occl_java_header_abi_version;
int occl_java_header_abi_version(void);
%rename(headerVersion) occl_java_header_version;
int occl_java_header_version(void);
OCCL_CALL(occl_java_check_header, checkHeader)
occl_status_t occl_java_check_header(int abi_version, int header_version);

/* occl_status_t* STATUS: an int[1] receiving a status code. */
%typemap(jni) occl_status_t* STATUS "jintArray"
%typemap(jtype) occl_status_t* STATUS "int[]"
%typemap(jstype) occl_status_t* STATUS "int[]"
%typemap(javain) occl_status_t* STATUS "$javainput"
%typemap(in) occl_status_t* STATUS (occl_status_t status) %{
  status = OCCL_SUCCESS;
  $1 = &status;
  if ($input == NULL || (*jenv)->GetArrayLength(jenv, $input) < 1) {
    occl_java_illegal_argument(jenv, "output: need an int[] of length >= 1");
    return $null;
  }
%}
%typemap(argout) occl_status_t* STATUS %{
  {
    jint value = (jint)status$argnum;
    (*jenv)->SetIntArrayRegion(jenv, $input, 0, 1, &value);
  }
%}

OCCL_CALL(occl_comm_get_async_error, commGetAsyncError)
occl_status_t occl_comm_get_async_error(occl_comm_t comm, occl_status_t* STATUS);

/* ABI 1.4: prefix reductions. */
OCCL_CALL(occl_scan_ex, scanEx)
occl_status_t occl_scan_ex(const DLTensor* sendbuf, const DLTensor* recvbuf, occl_red_op_t op,
                           occl_comm_t comm, const occl_options_t* OPTS, occl_work_t* WORK);
OCCL_CALL(occl_exscan_ex, exscanEx)
occl_status_t occl_exscan_ex(const DLTensor* sendbuf, const DLTensor* recvbuf, occl_red_op_t op,
                             occl_comm_t comm, const occl_options_t* OPTS, occl_work_t* WORK);
