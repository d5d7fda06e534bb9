// SHA-256 (FIPS 180-4) and HMAC-SHA-256 (RFC 2104), for proving knowledge of
// the job token without sending it. Small and dependency-free; not meant for
// bulk data.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace omniccl {

using Digest = std::array<uint8_t, 32>;

/// SHA-256 of data.
Digest sha256(std::string_view data);
/// HMAC-SHA-256 of message under key.
Digest hmac_sha256(std::string_view key, std::string_view message);
/// Equality of two digests in time independent of where they differ.
bool digest_equal(const Digest& a, const Digest& b);
/// Lower-case hex of a digest (tests, logs).
std::string to_hex(const Digest& d);
/// 32 bytes from the OS's random source (getrandom).
Digest random_nonce();

}  // namespace omniccl
