// The wire format of the engine's messages and the checks that calls match:
// every message starts with a WireHeader carrying the operation's signature,
// step and size; a received header is compared whole with the one this rank
// would have sent, and only when they differ is the difference described
// (header_diff), naming the fields and ranks. Status answers carry the same
// fields as text (encode_signature), so that calls that differ where no
// message is exchanged (a root) are found too.
#pragma once

#include <array>
#include <bit>
#include <cstdint>
#include <cstring>
#include <string>
#include <type_traits>

#include "algorithm/op.h"
#include "transport/transport.h"

namespace omniccl {

constexpr uint32_t kWireMagic = 0x4f434d48;  // "OCMH"

/// The kind of a withdrawal mark: a header-only message that a rank sends
/// every peer when it rejects collective `seq` for its arguments or
/// withdraws it (a peer rejected it), after its messages of that call that
/// were under way. `root` names the rank that rejected it. A receiver still
/// in that call withdraws it too; one past it drops the mark, and any
/// message of a withdrawn call (Mesh::withdrawn), so the links stay in step.
/// Not an OpKind of any call (no table is indexed by it).
inline constexpr OpKind kWithdrawMark = OpKind(0x40);

/// Precedes every message (engine.h: a transfer is a header, then its payload).
struct WireHeader {
  uint32_t magic;
  uint8_t kind;
  uint8_t dtype;
  uint8_t redop;
  uint8_t algo;
  int32_t root;
  uint32_t step;
  uint64_t seq;
  uint64_t count;
  uint64_t bytes;
};
static_assert(sizeof(WireHeader) == 40 && sizeof(WireHeader) == transport::kEngineHeaderBytes, "wire header layout");
static_assert(std::has_unique_object_representations_v<WireHeader>, "no padding: headers compare with memcmp");
static_assert(sizeof(WireHeader) <= transport::kMaxHeader, "the header fits every link");

/// A WireHeader as five 8-byte words, built in registers. A header written
/// field by field (bytes, 4-byte and 8-byte stores) and then copied or
/// compared with wider loads makes each load wait until those stores reach
/// the cache, and stores leave in order, behind the previous message's ring
/// stores, whose line the peer holds (a cross-core transfer). Written and
/// read as these words, every load takes its bytes from one store.
using WireWords = std::array<uint64_t, 5>;
constexpr WireWords wire_words(const OpSignature& sig, uint32_t step, uint64_t bytes) {
  if constexpr (std::endian::native == std::endian::little) {
    return {uint64_t{kWireMagic} | uint64_t{uint8_t(sig.kind)} << 32 | uint64_t{uint8_t(sig.dtype)} << 40 |
                uint64_t{uint8_t(sig.redop)} << 48 | uint64_t{sig.algo} << 56,
            uint64_t{uint32_t(sig.root)} | uint64_t{step} << 32, sig.seq, sig.count, bytes};
  } else {
    return std::bit_cast<WireWords>(WireHeader{kWireMagic, uint8_t(sig.kind), uint8_t(sig.dtype), uint8_t(sig.redop),
                                               sig.algo, sig.root, step, sig.seq, sig.count, bytes});
  }
}
static_assert(sizeof(WireWords) == sizeof(WireHeader));
// The words hold WireHeader's bytes: every field lands where the struct has it.
static_assert([] {
  OpSignature sig;
  sig.kind = OpKind::kReduce;
  sig.dtype = DType::kFloat64;
  sig.redop = RedOp::kMax;
  sig.root = -3;
  sig.count = 0x1122334455667788;
  sig.seq = 0x99aabbccddeeff01;
  sig.algo = 0xa5;
  const WireHeader h = std::bit_cast<WireHeader>(wire_words(sig, 0xdeadbeef, 0x0102030405060708));
  return h.magic == kWireMagic && h.kind == uint8_t(OpKind::kReduce) && h.dtype == uint8_t(DType::kFloat64) &&
         h.redop == uint8_t(RedOp::kMax) && h.algo == 0xa5 && h.root == -3 && h.step == 0xdeadbeef &&
         h.seq == 0x99aabbccddeeff01 && h.count == 0x1122334455667788 && h.bytes == 0x0102030405060708;
}());

/// Whether the 40 bytes at `at` (a received header, not stored by this
/// thread just now) hold `w`: five 8-byte loads.
inline bool header_is(const void* at, const WireWords& w) {
  const char* p = static_cast<const char*>(at);
  uint64_t diff = 0;
  for (size_t i = 0; i < w.size(); ++i) {
    uint64_t x;
    std::memcpy(&x, p + 8 * i, 8);
    diff |= x ^ w[i];
  }
  return diff == 0;
}

/// The fields every rank must agree on, as carried by headers and answers.
struct SigFields {
  uint8_t kind, dtype, redop, algo;
  int32_t root;
  uint64_t seq, count;
};

SigFields fields_of(const OpSignature& s);
/// The fields as text (Mesh::OpStatus::signature), and back (false when
/// malformed).
std::string encode_signature(const SigFields& f);
bool decode_signature(const std::string& text, SigFields& f);
/// "dtype float32 on rank 0 vs int32 on rank 2; ..." or "" when equal
/// (`p2p`: the sequence number is a message number).
std::string diff_fields(const SigFields& mine, const SigFields& theirs, int me, int peer, bool p2p);
/// What differs between header `h` from rank `peer` and the one this rank
/// (`me`) expected for `mine` at `step` with `bytes` of payload; never ""
/// (the headers are known to differ). The magic is checked by the caller.
std::string header_diff(const WireHeader& h, const OpSignature& mine, uint32_t step, uint64_t bytes, int me, int peer);

}  // namespace omniccl
