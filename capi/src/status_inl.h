#pragma once

#include <new>

#include "common/status.h"

namespace omniccl::capi {

template <typename Fn>
occl_status_t guard(const char* func, Fn&& fn) {
  try {
    fn();
    return OCCL_SUCCESS;
  } catch (const Error& e) {
    return set_error(static_cast<occl_status_t>(e.status()), str_cat(func, ": ", e.what()));
  } catch (const std::bad_alloc&) {
    return set_error(OCCL_ERR_OUT_OF_MEMORY, str_cat(func, ": out of memory"));
  } catch (const std::exception& e) {
    return set_error(OCCL_ERR_INTERNAL, str_cat(func, ": internal error: ", e.what()));
  } catch (...) {
    return set_error(OCCL_ERR_INTERNAL, str_cat(func, ": internal error (unknown exception)"));
  }
}

}  // namespace omniccl::capi
