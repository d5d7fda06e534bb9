/* The library of abi_fixture.h (see there). */
#include "abi_fixture.h"

occl_status_t occl_comm_init(const occl_config_t* config) {
  return config && config->size >= sizeof(size_t) ? OCCL_SUCCESS : OCCL_ERR_INVALID_ARGUMENT;
}

occl_status_t occl_recv(occl_recv_status_t* status) {
  status->source = 0;
  status->tag = 0;
  return OCCL_SUCCESS;
}

#ifndef REMOVED_FUNCTION
#ifdef CHANGED_PARAMETER
occl_status_t occl_set_count(int64_t count) {
#else
occl_status_t occl_set_count(int count) {
#endif
  return count >= 0 ? OCCL_SUCCESS : OCCL_ERR_INVALID_ARGUMENT;
}
#endif

#ifdef APPENDED_FUNCTION
occl_status_t occl_appended(void) { return OCCL_SUCCESS; }
#endif
