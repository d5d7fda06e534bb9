#include "transport/auth.h"

#include <sys/socket.h>

#include <cerrno>
#include <cstring>
#include <string_view>

#include "common/net.h"
#include "common/status.h"

namespace omniccl::transport::auth {

namespace {

std::string_view bytes(const Digest& d) { return {reinterpret_cast<const char*>(d.data()), d.size()}; }

std::string_view bytes(const wire::Hello& h) { return {reinterpret_cast<const char*>(&h), sizeof h}; }

/// The connector's proof over the acceptor's nonce, its own, and the hello.
Digest connector_mac(const std::string& token, std::string_view na, std::string_view nc, const wire::Hello& h) {
  return hmac_sha256(token, str_cat(kConnectorLabel, na, nc, bytes(h)));
}

/// The acceptor's proof.
Digest acceptor_mac(const std::string& token, std::string_view na, std::string_view nc, const wire::Hello& h) {
  return hmac_sha256(token, str_cat(kAcceptorLabel, nc, na, bytes(h)));
}

}  // namespace

void send_hello(int fd, const wire::Hello& hello, const std::string& token, Deadline deadline,
                const std::string& what) {
  if (token.empty()) {
    net::write_all(fd, &hello, sizeof hello, deadline, what);
    return;
  }
  char challenge[sizeof kChallengeMagic + kNonceBytes];
  try {
    net::read_all(fd, challenge, sizeof challenge, deadline, what);
  } catch (const Error& e) {
    if (e.status() == Status::kTimeout) throw;
    fail(Status::kPeerFailure, what, ": the peer closed the connection before asking for the job token (", e.what(),
         "): it exited, or OMNICCL_JOB_TOKEN is unset there");
  }
  if (std::memcmp(challenge, kChallengeMagic, sizeof kChallengeMagic) != 0) {
    fail(Status::kPeerFailure, what, ": the peer did not ask for the job token (is OMNICCL_JOB_TOKEN unset there?)");
  }
  const std::string_view na(challenge + sizeof kChallengeMagic, kNonceBytes);
  const Digest mine = random_nonce();
  const Digest mac = connector_mac(token, na, bytes(mine), hello);
  std::string msg(bytes(hello));
  msg += bytes(mac);
  msg += bytes(mine);
  net::write_all(fd, msg.data(), msg.size(), deadline, what);
  Digest proof{};
  try {
    net::read_all(fd, proof.data(), proof.size(), deadline, what);
  } catch (const Error& e) {
    if (e.status() == Status::kTimeout) throw;
    fail(Status::kPeerFailure, what,
         ": the peer refused this rank's job token (OMNICCL_JOB_TOKEN differs): ", e.what());
  }
  if (!digest_equal(proof, acceptor_mac(token, na, bytes(mine), hello))) {
    fail(Status::kPeerFailure, what, ": the peer could not prove it knows the job token: it is not a rank of this job");
  }
}

Responder::Responder(int fd, std::string token) : fd_(fd), token_(std::move(token)) {
  if (token_.empty()) return;
  nonce_ = random_nonce();
  std::string challenge(kChallengeMagic, sizeof kChallengeMagic);
  challenge += bytes(nonce_);
  // A fresh socket's buffer takes 36 bytes; anything else is a dead peer.
  ssize_t w = ::send(fd_, challenge.data(), challenge.size(), MSG_NOSIGNAL | MSG_DONTWAIT);
  if (w != static_cast<ssize_t>(challenge.size())) why_ = "could not send the token challenge";
}

Responder::State Responder::failed(std::string why) {
  why_ = std::move(why);
  return State::kFailed;
}

Responder::State Responder::on_readable() {
  if (!why_.empty()) return State::kFailed;
  const size_t want = sizeof(wire::Hello) + (token_.empty() ? 0 : kMacBytes + kNonceBytes);
  while (in_.size() < want) {
    char buf[128];
    ssize_t n = ::recv(fd_, buf, want - in_.size(), MSG_DONTWAIT);
    if (n > 0) {
      in_.append(buf, static_cast<size_t>(n));
      continue;
    }
    if (n == 0) return failed("closed before its hello");
    if (errno == EINTR) continue;
    if (errno == EAGAIN || errno == EWOULDBLOCK) return State::kMore;
    return failed(str_cat("recv failed: ", std::strerror(errno)));
  }
  std::memcpy(&hello_, in_.data(), sizeof hello_);
  if (token_.empty()) return State::kDone;
  Digest mac{};
  std::memcpy(mac.data(), in_.data() + sizeof hello_, mac.size());
  const std::string_view nc(in_.data() + sizeof hello_ + kMacBytes, kNonceBytes);
  if (!digest_equal(mac, connector_mac(token_, bytes(nonce_), nc, hello_))) {
    return failed("it does not know the job token (OMNICCL_JOB_TOKEN)");
  }
  const Digest proof = acceptor_mac(token_, bytes(nonce_), nc, hello_);
  ssize_t w = ::send(fd_, proof.data(), proof.size(), MSG_NOSIGNAL | MSG_DONTWAIT);
  if (w != static_cast<ssize_t>(proof.size())) return failed("could not send the token proof");
  return State::kDone;
}

}  // namespace omniccl::transport::auth
