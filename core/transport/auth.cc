#include "transport/auth.h"

#include <poll.h>
#include <sys/socket.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <string_view>
#include <thread>

#include "common/log.h"
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

namespace {

bool is(const char* got, const char (&magic)[4]) { return std::memcmp(got, magic, 4) == 0; }

/// Reads up to n bytes of the acceptor's answer: returns how many arrived
/// before the connection closed (n when all did). Waits in slices of at most
/// 100 ms, running tick between them; throws kTimeout at the deadline.
size_t read_answer(int fd, char* buf, size_t n, Deadline deadline, const std::function<void()>& tick,
                   const std::string& what) {
  size_t got = 0;
  while (got < n) {
    ssize_t r = ::recv(fd, buf + got, n - got, MSG_DONTWAIT);
    if (r > 0) {
      got += static_cast<size_t>(r);
      continue;
    }
    if (r == 0) return got;
    if (errno == EINTR) continue;
    if (errno != EAGAIN && errno != EWOULDBLOCK) return got;  // reset: closed as far as this side can tell
    if (deadline.expired()) fail(Status::kTimeout, what, ": timed out waiting for the peer to answer the hello");
    pollfd p{fd, POLLIN, 0};
    ::poll(&p, 1, deadline.remaining_ms(100));
    if (tick) tick();
  }
  return got;
}

/// Writes all of data; false when the acceptor has already closed the
/// connection (it dropped it: the verdict is to connect again).
bool send_part(int fd, const void* data, size_t n, Deadline deadline, const std::string& what) {
  try {
    net::write_all(fd, data, n, deadline, what);
    return true;
  } catch (const Error& e) {
    if (e.status() == Status::kPeerFailure) return false;  // EPIPE or ECONNRESET
    throw;
  }
}

/// After attempt `attempt` was dropped: logs it, fails at the deadline, and
/// pauses a little before the next one.
void dropped(int attempt, Deadline deadline, const std::function<void()>& tick, const std::string& what) {
  OCCL_LOG(kInfo, kTransport, what, ": the peer dropped setup connection attempt ", attempt,
           " before accepting it (its handshake timeout passed: a slow or lossy network); connecting again");
  if (deadline.expired()) {
    fail(Status::kTimeout, what, ": no setup connection was accepted before the deadline (", attempt, " attempts)");
  }
  std::this_thread::sleep_for(std::chrono::milliseconds(std::min(10 * attempt, 200)));
  if (tick) tick();
}

}  // namespace

bool send_hello(int fd, const wire::Hello& hello, const std::string& token, Deadline deadline,
                const std::function<void()>& tick, const std::string& what) {
  if (token.empty()) {
    if (!send_part(fd, &hello, sizeof hello, deadline, what)) return false;
  } else {
    char challenge[sizeof kChallengeMagic + kNonceBytes];
    const size_t got = read_answer(fd, challenge, sizeof challenge, deadline, tick, what);
    if (got == 0) return false;
    if (got == 4 && is(challenge, kTimedOutMagic)) {
      fail(Status::kPeerFailure, what,
           ": the peer waited for a hello without a job token: is OMNICCL_JOB_TOKEN unset there (it is set here)?");
    }
    if (got == 4 && is(challenge, kRefusedMagic)) fail(Status::kPeerFailure, what, ": the peer refused the connection");
    if (got < sizeof challenge || !is(challenge, kChallengeMagic)) {
      fail(Status::kPeerFailure, what, ": the peer did not ask for the job token (is OMNICCL_JOB_TOKEN unset there?)");
    }
    const std::string_view na(challenge + sizeof kChallengeMagic, kNonceBytes);
    const Digest mine = random_nonce();
    const Digest mac = connector_mac(token, na, bytes(mine), hello);
    std::string msg(bytes(hello));
    msg += bytes(mac);
    msg += bytes(mine);
    if (!send_part(fd, msg.data(), msg.size(), deadline, what)) return false;
    Digest proof{};
    char* p = reinterpret_cast<char*>(proof.data());
    const size_t n = read_answer(fd, p, proof.size(), deadline, tick, what);
    if (n == 0 || (n == 4 && is(p, kTimedOutMagic))) return false;
    if (n == 4 && is(p, kRefusedMagic)) {
      fail(Status::kPeerFailure, what, ": the peer refused this rank's job token (OMNICCL_JOB_TOKEN differs)");
    }
    if (n < proof.size()) fail(Status::kPeerFailure, what, ": the peer closed the connection during the token proof");
    if (!digest_equal(proof, acceptor_mac(token, na, bytes(mine), hello))) {
      fail(Status::kPeerFailure, what,
           ": the peer could not prove it knows the job token: it is not a rank of this job");
    }
  }
  return true;
}

Verdict read_verdict(int fd, Deadline deadline, const std::function<void()>& tick, const std::string& what) {
  char verdict[4];
  const size_t got = read_answer(fd, verdict, sizeof verdict, deadline, tick, what);
  if (got == 0) return Verdict::kDropped;
  if (got == 4 && is(verdict, kAcceptedMagic)) return Verdict::kAccepted;
  if (got == 4 && is(verdict, kTimedOutMagic)) return Verdict::kDropped;
  if (got == 4 && is(verdict, kRefusedMagic)) {
    fail(Status::kPeerFailure, what,
         ": the peer refused the hello (another session or an unexpected rank: is it a rank of another job?)");
  }
  if (got == 4 && is(verdict, kChallengeMagic)) {
    fail(Status::kPeerFailure, what,
         ": the peer asks for a job token and this rank has none: set the same OMNICCL_JOB_TOKEN on every rank");
  }
  fail(Status::kPeerFailure, what, ": the peer answered the hello with something that is not a verdict");
}

UniqueFd connect_hello(const std::function<UniqueFd()>& connect, const wire::Hello& hello, const std::string& token,
                       Deadline deadline, const std::function<void()>& tick, const std::string& what) {
  for (int attempt = 1;; ++attempt) {
    UniqueFd fd = connect_and_hello(connect, hello, token, deadline, tick, what);
    if (read_verdict(fd.get(), deadline, tick, what) == Verdict::kAccepted) return fd;
    dropped(attempt, deadline, tick, what);
  }
}

UniqueFd connect_and_hello(const std::function<UniqueFd()>& connect, const wire::Hello& hello, const std::string& token,
                           Deadline deadline, const std::function<void()>& tick, const std::string& what) {
  for (int attempt = 1;; ++attempt) {
    UniqueFd fd = connect();
    if (send_hello(fd.get(), hello, token, deadline, tick, what)) return fd;
    dropped(attempt, deadline, tick, what);
  }
}

void send_verdict(int fd, const char (&verdict)[4]) {
  ssize_t w = ::send(fd, verdict, sizeof verdict, MSG_NOSIGNAL | MSG_DONTWAIT);
  (void)w;
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
