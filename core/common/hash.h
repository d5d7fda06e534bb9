// FNV-1a, the one non-cryptographic hash of the core: names of store files
// and the 24-bit signatures the device path compares between ranks. Not for
// anything an attacker chooses to collide (sha256.h is).
#pragma once

#include <cstdint>
#include <string_view>

namespace omniccl {

class Fnv1a {
 public:
  static constexpr uint64_t kOffset = 0xcbf29ce484222325ull;
  static constexpr uint64_t kPrime = 0x100000001b3ull;

  /// Starts from `seed` (FNV's offset basis unless another is wanted, as
  /// for two independent hashes of one text).
  explicit constexpr Fnv1a(uint64_t seed = kOffset) : h_(seed) {}

  /// Mixes in a whole 64-bit word at once (FNV-1a over words: the fields
  /// of a call, not bytes of a text).
  constexpr Fnv1a& word(uint64_t v) {
    h_ = (h_ ^ v) * kPrime;
    return *this;
  }
  /// Mixes in each byte of `s` (textbook FNV-1a).
  constexpr Fnv1a& bytes(std::string_view s) {
    for (unsigned char c : s) h_ = (h_ ^ c) * kPrime;
    return *this;
  }
  constexpr uint64_t value() const { return h_; }
  /// The hash folded to its low 24 bits, for the signature field of a
  /// device-path word (the bits below a sequence number).
  constexpr uint32_t low24() const { return uint32_t(h_ ^ (h_ >> 32)) & 0xffffffu; }

 private:
  uint64_t h_;
};

}  // namespace omniccl
