/*
 * runtime_check.c - run-time side of the ABI contract (DESIGN.md section 3),
 * checked against the built libomniccl.so.1 from C:
 *
 *   - OCCL_INIT_CHECK() passes; a different ABI major or a newer header fails
 *     with OCCL_ERR_VERSION and a message;
 *   - occl_get_version() returns OCCL_VERSION_CODE;
 *   - status strings, destroy(NULL) and friends behave as documented;
 *   - an old caller's occl_config_t - only its first 4 fields, with size set
 *     to match - is accepted by occl_comm_init, and the library reads no byte
 *     past it (the struct ends at an inaccessible page);
 *   - a 1-rank communicator works without peers (tcp:// on 127.0.0.1).
 *
 * Prints one line per check and exits 1 if any failed.
 */
#define _DEFAULT_SOURCE /* mmap's MAP_ANONYMOUS, sockets */

#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <unistd.h>

#include <omniccl/omniccl.h>

static int failures = 0;

/* Records one check; `detail` is printed with failures (may be NULL). */
static void expect(int ok, const char* what, const char* detail) {
  printf("%s: %s\n", ok ? "ok  " : "FAIL", what);
  if (!ok) {
    ++failures;
    if (detail != NULL && detail[0] != '\0') printf("      %s\n", detail);
  }
}

/* Stops the program: later checks depend on this one. */
static void require(int ok, const char* what, const char* detail) {
  expect(ok, what, detail);
  if (!ok) exit(1);
}

/* A TCP port on 127.0.0.1 that was free a moment ago, or -1. */
static int free_port(void) {
  struct sockaddr_in addr;
  socklen_t len = sizeof addr;
  int port = -1;
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) return -1;
  memset(&addr, 0, sizeof addr);
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = 0;
  if (bind(fd, (struct sockaddr*)&addr, sizeof addr) == 0 && getsockname(fd, (struct sockaddr*)&addr, &len) == 0) {
    port = ntohs(addr.sin_port);
  }
  close(fd);
  return port;
}

/* The occl_config_t of a caller compiled when it had only these 4 fields. */
struct old_config {
  size_t size;
  unsigned int magic;
  unsigned int version;
  int64_t timeout_ms;
};

/* The occl_options_t of a caller compiled with only size/magic/version and
   stream (a shorter struct than the library's). */
struct old_options {
  size_t size;
  unsigned int magic;
  unsigned int version;
  void* stream;
};

/* The occl_options_t of a caller compiled against a newer header with one
   more field than this library knows. */
struct newer_options {
  occl_options_t known;
  int64_t field_from_the_future;
};

/*
 * Returns `bytes` at the very end of a readable page, followed by a
 * PROT_NONE page: a library reading more than the struct's size crashes.
 */
static void* at_page_end(size_t bytes) {
  long page = sysconf(_SC_PAGESIZE);
  char* base = (char*)mmap(NULL, 2 * (size_t)page, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  require(base != MAP_FAILED, "mmap two pages", NULL);
  require(mprotect(base + page, (size_t)page, PROT_NONE) == 0, "mprotect the guard page", NULL);
  return base + page - bytes;
}

static struct old_config* old_config_at_page_end(void) {
  return (struct old_config*)at_page_end(sizeof(struct old_config));
}

/* ABI 1.1: the per-call options struct from old, current and newer callers. */
static void check_options(occl_comm_t comm) {
  int64_t data[2] = {5, 7};
  int64_t shape[1] = {2};
  DLTensor t = {data, {kDLCPU, 0}, 1, {(uint8_t)kDLInt, 64, 1}, shape, NULL, 0};
  occl_options_t opt = OCCL_OPTIONS_INIT;
  struct old_options* old = (struct old_options*)at_page_end(sizeof(struct old_options));
  struct newer_options newer;
  occl_status_t s;

  expect(occl_all_reduce_ex(&t, &t, OCCL_SUM, comm, NULL, NULL) == OCCL_SUCCESS, "occl_all_reduce_ex with NULL options",
         occl_last_error());
  opt.timeout_ms = 5000;
  expect(occl_all_reduce_ex(&t, &t, OCCL_SUM, comm, &opt, NULL) == OCCL_SUCCESS && data[0] == 5 && data[1] == 7,
         "occl_all_reduce_ex with OCCL_OPTIONS_INIT and a per-call timeout", occl_last_error());

  old->size = sizeof *old;
  old->magic = OCCL_OPTIONS_MAGIC;
  old->version = 1;
  old->stream = NULL;
  s = occl_barrier_ex(comm, (const occl_options_t*)(const void*)old, NULL);
  expect(s == OCCL_SUCCESS, "an old caller's 4-field occl_options_t (size 24) is read only up to its size",
         occl_last_error());

  newer.known = opt;
  newer.known.size = sizeof newer;
  newer.known.version = OCCL_OPTIONS_VERSION + 1;
  newer.field_from_the_future = 42;
  expect(occl_barrier_ex(comm, &newer.known, NULL) == OCCL_SUCCESS,
         "a newer caller's longer occl_options_t is accepted (known fields read)", occl_last_error());

  opt.magic = 0;
  s = occl_barrier_ex(comm, &opt, NULL);
  expect(s == OCCL_ERR_INVALID_ARGUMENT && strstr(occl_last_error(), "magic") != NULL,
         "occl_options_t without OCCL_OPTIONS_MAGIC is an invalid argument naming the magic", occl_last_error());
  opt.magic = OCCL_OPTIONS_MAGIC;
  opt.size = 8;
  s = occl_barrier_ex(comm, &opt, NULL);
  expect(s == OCCL_ERR_VERSION && strstr(occl_last_error(), "size") != NULL,
         "an occl_options_t shorter than its header is OCCL_ERR_VERSION naming the size", occl_last_error());
  opt.size = sizeof opt;
  opt.timeout_ms = -5;
  s = occl_barrier_ex(comm, &opt, NULL);
  expect(s == OCCL_ERR_INVALID_ARGUMENT && strstr(occl_last_error(), "timeout_ms") != NULL,
         "a negative options.timeout_ms is an invalid argument naming it", occl_last_error());
}

int main(void) {
  char detail[512];

  /* Versions. */
  occl_status_t s = OCCL_INIT_CHECK();
  expect(s == OCCL_SUCCESS, "OCCL_INIT_CHECK() == OCCL_SUCCESS", occl_last_error());
  expect(occl_init_check(OCCL_ABI_VERSION + 1, OCCL_VERSION_CODE) == OCCL_ERR_VERSION && occl_last_error()[0] != '\0',
         "occl_init_check: another ABI major gives OCCL_ERR_VERSION with a message", NULL);
  expect(occl_init_check(OCCL_ABI_VERSION, OCCL_VERSION_CODE + 1) == OCCL_ERR_VERSION,
         "occl_init_check: a header newer than the library gives OCCL_ERR_VERSION", NULL);
  int version = -1;
  s = occl_get_version(&version);
  snprintf(detail, sizeof detail, "status %d, version %d, OCCL_VERSION_CODE %d", (int)s, version, OCCL_VERSION_CODE);
  expect(s == OCCL_SUCCESS && version == OCCL_VERSION_CODE, "occl_get_version() == OCCL_VERSION_CODE", detail);
  expect(occl_get_version(NULL) == OCCL_ERR_INVALID_ARGUMENT, "occl_get_version(NULL) == OCCL_ERR_INVALID_ARGUMENT",
         NULL);

  /* Status strings and NULL handles. */
  expect(strncmp(occl_status_string(OCCL_ERR_TIMEOUT), "OCCL_ERR_TIMEOUT", 16) == 0,
         "occl_status_string(OCCL_ERR_TIMEOUT) names the status", occl_status_string(OCCL_ERR_TIMEOUT));
  expect(occl_status_string((occl_status_t)999) != NULL, "occl_status_string(999) is not NULL", NULL);
  expect(occl_comm_destroy(NULL) == OCCL_SUCCESS, "occl_comm_destroy(NULL) succeeds", NULL);
  expect(occl_comm_abort(NULL) == OCCL_SUCCESS, "occl_comm_abort(NULL) succeeds", NULL);
  expect(occl_work_free(NULL) == OCCL_SUCCESS, "occl_work_free(NULL) succeeds", NULL);

  int port = free_port();
  require(port > 0, "find a free TCP port on 127.0.0.1", NULL);
  char init[64];
  snprintf(init, sizeof init, "tcp://127.0.0.1:%d", port);

  /* A config with a wrong magic is refused, leaving *comm NULL. */
  occl_config_t bad = OCCL_CONFIG_INIT;
  bad.magic = 0;
  occl_comm_t comm = (occl_comm_t)&bad; /* any non-NULL value */
  expect(occl_comm_init(&comm, init, 0, 1, &bad) == OCCL_ERR_INVALID_ARGUMENT && comm == NULL,
         "occl_comm_init refuses a config without OCCL_CONFIG_MAGIC and sets *comm = NULL", NULL);

  /* An old caller's shorter config, with nothing readable after it. */
  struct old_config* old = old_config_at_page_end();
  old->size = sizeof *old;
  old->magic = OCCL_CONFIG_MAGIC;
  old->version = 1;
  old->timeout_ms = 60000;
  s = occl_comm_init(&comm, init, 0, 1, (const occl_config_t*)(const void*)old);
  require(s == OCCL_SUCCESS && comm != NULL, "occl_comm_init accepts a 4-field config (size 24) on 1 rank",
          occl_last_error());

  /* The 1-rank communicator works without peers. */
  int rank = -1, size = -1;
  expect(occl_comm_rank(comm, &rank) == OCCL_SUCCESS && rank == 0, "occl_comm_rank == 0", NULL);
  expect(occl_comm_size(comm, &size) == OCCL_SUCCESS && size == 1, "occl_comm_size == 1", NULL);
  int64_t data[2] = {5, 7};
  int64_t shape[1] = {2};
  DLTensor t = {data, {kDLCPU, 0}, 1, {(uint8_t)kDLInt, 64, 1}, shape, NULL, 0};
  s = occl_all_reduce(&t, &t, OCCL_SUM, comm, NULL);
  expect(s == OCCL_SUCCESS && data[0] == 5 && data[1] == 7, "all_reduce on 1 rank leaves [5, 7]", occl_last_error());
  /* Any int is an occl_red_op_t; values that name no op are rejected. */
  s = occl_all_reduce(&t, &t, (occl_red_op_t)-1, comm, NULL);
  expect(s == OCCL_ERR_INVALID_ARGUMENT && strstr(occl_last_error(), "-1") != NULL,
         "reduce op -1 is an invalid argument naming the value", occl_last_error());
  check_options(comm);
  {
    occl_status_t async_error = OCCL_ERR_INTERNAL;
    s = occl_comm_get_async_error(comm, &async_error);
    expect(s == OCCL_SUCCESS && async_error == OCCL_SUCCESS,
           "occl_comm_get_async_error of a healthy communicator is OCCL_SUCCESS", occl_last_error());
    expect(occl_comm_get_async_error(comm, NULL) == OCCL_ERR_INVALID_ARGUMENT,
           "occl_comm_get_async_error(comm, NULL) is an invalid argument", NULL);
  }
  occl_work_t work = NULL;
  s = occl_barrier(comm, &work);
  if (s == OCCL_SUCCESS) s = occl_work_wait(work);
  expect(s == OCCL_SUCCESS, "an async barrier on 1 rank completes", occl_last_error());
  expect(occl_work_free(work) == OCCL_SUCCESS, "occl_work_free", NULL);
  s = occl_comm_destroy(comm);
  expect(s == OCCL_SUCCESS, "occl_comm_destroy", occl_last_error());

  printf("%s\n", failures == 0 ? "all ABI run-time checks passed" : "ABI run-time checks FAILED");
  return failures == 0 ? 0 : 1;
}
