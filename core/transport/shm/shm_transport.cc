#include "transport/shm/shm_transport.h"

#include <random>

#include "common/shared_memory.h"
#include "common/status.h"
#include "transport/shm/shm_link.h"

namespace omniccl::transport {

namespace {

constexpr char kName[] = "shm";

/// Its part of an endpoint: the segment's name, then '1' or '0' (single copy).
struct ShmPart {
  std::string segment;
  bool single_copy = false;
  static ShmPart of(const Endpoint& e) {
    const std::string& p = e.part(kName);
    ShmPart out;
    if (p.empty()) return out;
    if (p.size() < 2 || (p.back() != '0' && p.back() != '1')) {
      fail(Status::kInternal, "malformed shared-memory part in the address record of rank ", e.rank);
    }
    out.segment = p.substr(0, p.size() - 1);
    out.single_copy = p.back() == '1';
    return out;
  }
};

class ShmTransport final : public Transport {
 public:
  ShmTransport(const ShmOptions& o, int rank, int size, std::string session)
      : options_(o), rank_(rank), size_(size), session_(std::move(session)) {}
  const char* name() const override { return kName; }
  int priority() const override { return 20; }
  std::string part() override;
  void prepare() override;
  Verdict can_connect(const Endpoint& local, const Endpoint& peer) const override;
  std::unique_ptr<Link> connect(LinkSetup& setup) override;
  void setup_done() override {
    if (own_) own_->unlink();  // every peer has mapped it
  }
  std::atomic<uint32_t>* wake_word() override { return own_ ? &own_->wake_word() : nullptr; }
  bool shares_host_memory() const override { return true; }
  std::array<std::unique_ptr<Link>, 2> loopback() override;

 private:
  ShmOptions options_;
  int rank_;
  int size_;
  std::string session_;
  std::string name_;                 ///< this rank's segment's name (part)
  std::unique_ptr<ShmSegment> own_;  ///< this rank's segment: the rings from every peer (prepare)
  std::unique_ptr<ShmSegment> loop_[2];
};

std::string ShmTransport::part() {
  name_ = ShmSegment::name_for(session_, rank_);
  return name_ + (options_.single_copy ? "1" : "0");
}

void ShmTransport::prepare() {
  remove_dead_shm_objects();
  own_ = ShmSegment::create(name_, size_);
}

// Both ranks on one host, and both made a segment (none is made when another
// transport is forced).
Verdict ShmTransport::can_connect(const Endpoint& local, const Endpoint& peer) const {
  if (local.host_id != peer.host_id) {
    if (local.hostname != peer.hostname) return {false, "other host"};
    return {false, "same host name but another boot id or namespace"};
  }
  std::string reason = "same host and boot id";
  for (const Endpoint* e : {&local, &peer}) {
    const ShmPart p = ShmPart::of(*e);
    if (p.segment.empty()) return {false, str_cat("rank ", e->rank, " offers no shared memory")};
    if (!p.single_copy) reason += str_cat("; single copy off on rank ", e->rank);
  }
  return {true, reason};
}

std::unique_ptr<Link> ShmTransport::connect(LinkSetup& s) {
  const int peer = s.peer->rank;
  std::unique_ptr<ShmSegment> seg;
  try {
    seg = ShmSegment::open(ShmPart::of(*s.peer).segment, size_);
  } catch (const Error& e) {
    if (e.status() != Status::kPeerFailure) throw;
    fail(Status::kPeerFailure, "rank ", peer, " failed during link setup: ", e.what());
  }
  return std::make_unique<ShmLink>(peer, seg->ring(rank_), seg->ring_data(rank_), own_->ring(peer),
                                   own_->ring_data(peer), std::move(s.doorbell), std::move(seg), options_.single_copy);
}

// Ranks 0 and 1 of a private session in this process; each link keeps its
// peer's segment mapped, this object keeps both own ones.
std::array<std::unique_ptr<Link>, 2> ShmTransport::loopback() {
  const std::string session = str_cat("loopback", std::random_device{}());
  std::string name[2];
  for (int r = 0; r < 2; ++r) {
    name[r] = ShmSegment::name_for(session, r);
    loop_[r] = ShmSegment::create(name[r], 2);
  }
  std::array<std::unique_ptr<Link>, 2> links;
  for (int r = 0; r < 2; ++r) {
    const int p = 1 - r;
    auto peer = ShmSegment::open(name[p], 2);
    links[size_t(r)] = std::make_unique<ShmLink>(
        p, peer->ring(r), peer->ring_data(r), loop_[r]->ring(p), loop_[r]->ring_data(p), [] {}, std::move(peer),
        options_.single_copy,
        /*quiet=*/true);
  }
  for (auto& seg : loop_) seg->unlink();
  return links;
}

}  // namespace

std::unique_ptr<Transport> make_shm_transport(const ShmOptions& options, int rank, int size,
                                              const std::string& session) {
  return std::make_unique<ShmTransport>(options, rank, size, session);
}

}  // namespace omniccl::transport
