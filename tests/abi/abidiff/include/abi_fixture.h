/*
 * A small library shaped like omniccl.h (the same names for the extensible
 * struct and the status enum), changed in one way per macro, to show that
 * capi/abi/abi.sh check passes the changes the ABI rules allow and catches
 * the ones they forbid (tests/abi/abidiff_selftest.sh). No macro: the
 * "released" version.
 */
#ifndef ABI_FIXTURE_H
#define ABI_FIXTURE_H
#include <stddef.h>
#include <stdint.h>

typedef enum occl_status {
  OCCL_SUCCESS = 0,
#ifdef RENUMBERED_ENUMERATOR
  OCCL_ERR_INVALID_ARGUMENT = 3,
#else
  OCCL_ERR_INVALID_ARGUMENT = 2,
#endif
#ifdef APPENDED_ENUMERATOR
  OCCL_ERR_NEW = 4,
#endif
} occl_status_t;

/* Extensible: size/magic/version first, fields appended only. */
typedef struct occl_config {
  size_t size;
  unsigned int magic;
  unsigned int version;
#ifdef INSERTED_FIELD
  int inserted;
#endif
  int64_t timeout_ms;
#ifdef APPENDED_FIELD
  int blocking;
#endif
} occl_config_t;

/* Fixed: the caller allocates it, so its size is part of the ABI. */
typedef struct occl_recv_status {
  int source;
  int tag;
#ifdef GROWN_FIXED_STRUCT
  int64_t bytes;
#endif
} occl_recv_status_t;

occl_status_t occl_comm_init(const occl_config_t* config);
occl_status_t occl_recv(occl_recv_status_t* status);
#ifndef REMOVED_FUNCTION
#ifdef CHANGED_PARAMETER
occl_status_t occl_set_count(int64_t count);
#else
occl_status_t occl_set_count(int count);
#endif
#endif
#ifdef APPENDED_FUNCTION
occl_status_t occl_appended(void);
#endif

#endif
