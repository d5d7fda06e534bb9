// occl_comm_window_register / occl_comm_window_deregister: buffers of CUDA
// memory that every rank maps once, so that operations on them read the
// peers' buffers in place (algorithm/device/device_direct.cc).
#include <cstdlib>

#include "common/log.h"
#include "communicator/communicator.h"

namespace omniccl {

namespace {

/// "ok <text>" or "err <status> <message>": what one rank says of a step.
std::string outcome(const std::string& text) { return "ok " + text; }
std::string outcome(const Error& e) { return str_cat("err ", int(e.status()), " ", e.what()); }

}  // namespace

// Every rank's outcome of a step; throws on every rank alike when one
// failed (the lowest such rank's error, named), so no rank is left with a
// registration its peers lack.
std::vector<std::string> Communicator::agree(const std::string& mine, const char* what) {
  std::vector<std::string> all;
  submit([&](Engine&) { all = internal_all_gather(mine, op_deadline()); }, false);
  for (int r = 0; r < size_; ++r) {
    const std::string& s = all[size_t(r)];
    if (s.rfind("ok ", 0) == 0) {
      all[size_t(r)] = s.substr(3);
      continue;
    }
    char* end = nullptr;
    const long st = s.size() > 4 ? std::strtol(s.c_str() + 4, &end, 10) : 0;
    const std::string message = end != nullptr && *end == ' ' ? std::string(end + 1) : s;
    fail(st > 0 ? Status(st) : Status::kInternal, what, ": rank ", r, ": ", message);
  }
  return all;
}

algo::DeviceRegion Communicator::import_regions(const void* p, size_t bytes, const std::vector<std::string>& records) {
  transport::DeviceWindow& w = *mesh_->device_window();
  algo::DeviceRegion region;
  region.base = static_cast<const char*>(p);
  region.bytes = bytes;
  region.at.assign(size_t(size_), nullptr);
  region.at[size_t(rank_)] = const_cast<char*>(region.base);
  std::string mine = outcome("");
  const Deadline deadline = op_deadline();  // one for all peers: the call's timeout bounds the whole step
  try {
    for (int r = 0; r < size_; ++r) {
      if (r != rank_) region.at[size_t(r)] = w.import_range(r, records[size_t(r)], deadline);
    }
  } catch (const Error& e) {
    mine = outcome(e);
  }
  try {
    agree(mine, "registering a buffer");
  } catch (...) {
    for (int r = 0; r < size_; ++r) {
      if (r != rank_ && region.at[size_t(r)] != nullptr) w.release_range(region.at[size_t(r)]);
    }
    throw;
  }
  return region;
}

/// This rank's argument error, as an outcome ("" when there is none).
std::string Communicator::refusal(const std::string& refused, bool bad, const std::string& why) {
  if (!refused.empty()) return outcome(Error(Status::kInvalidArgument, refused));
  return bad ? outcome(Error(Status::kInvalidArgument, why)) : std::string();
}

uint64_t Communicator::register_window(const void* p, size_t bytes, const std::string& refused) {
  check_usable();
  const std::string bad =
      refusal(refused, p == nullptr || bytes == 0,
              str_cat("a registered buffer needs an address and at least one byte (got ", bytes, " bytes at ", p, ")"));
  if (!bad.empty()) agree(bad, "registering a buffer");  // throws on every rank
  const uint64_t handle = ++registrations_;
  if (!device_) {
    agree(outcome(""), "registering a buffer");
    OCCL_LOG(kInfo, kColl, "registered buffer ", handle,
             ": no device path on this communicator (CUDA tensors are staged or absent), so nothing is mapped");
    registered_[handle] = 0;
    return handle;
  }
  transport::DeviceWindow& w = *mesh_->device_window();
  std::string mine;
  try {
    mine = outcome(w.export_range(p, bytes));
  } catch (const Error& e) {
    mine = outcome(e);
  }
  // Whatever happens from here, the peers are done with this export when
  // this call returns: they imported it, or the registration failed.
  struct ExportsDone {
    transport::DeviceWindow& w;
    ~ExportsDone() { w.exports_done(); }
  } done{w};
  const std::vector<std::string> records = agree(mine, "registering a buffer");
  registered_[handle] = device_->add_region(import_regions(p, bytes, records));
  OCCL_LOG(kInfo, kColl, "registered buffer ", handle, ": ", bytes, " bytes, mapped by every rank");
  return handle;
}

void Communicator::deregister_window(uint64_t handle, const std::string& refused) {
  check_usable();
  auto it = registered_.find(handle);
  const std::string bad = refusal(refused, it == registered_.end(),
                                  str_cat("no registered buffer has handle ", handle, " on this communicator"));
  if (!bad.empty()) agree(bad, "deregistering a buffer");  // throws on every rank
  const uint32_t id = it->second;
  registered_.erase(it);
  if (id == 0) {
    agree(outcome(""), "deregistering a buffer");
    return;
  }
  std::string mine = outcome("");
  algo::DeviceRegion region;
  try {
    region = device_->remove_region(id, timeout_ms_.load());
  } catch (const Error& e) {
    mine = outcome(e);
  }
  // Every rank's operations that may read the buffers are done once all
  // have said so: only then are the mappings given back.
  transport::DeviceWindow& w = *mesh_->device_window();
  auto release = [&] {
    for (int r = 0; r < size_; ++r) {
      if (r != rank_ && r < int(region.at.size())) w.release_range(region.at[size_t(r)]);
    }
  };
  try {
    agree(mine, "deregistering a buffer");
  } catch (...) {
    release();
    throw;
  }
  release();
}

}  // namespace omniccl
