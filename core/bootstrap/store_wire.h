// Private: the wire format of the TCP store (tcp_store.cc and its tests).
//
// Every message, request or reply, is a fixed 20-byte header followed by the
// key and the value:
//
//   offset size  field
//        0    4  magic "OCST" (bytes 'O' 'C' 'S' 'T')
//        4    2  version (little endian), kVersion
//        6    2  command (requests) or reply code (replies), little endian
//        8    4  key length in bytes, little endian
//       12    8  value length in bytes, little endian
//
// Requests: kSet (key, value), kGet (key; value: empty, or an 8-byte
// little-endian wait bound in ms, after which an absent key is answered
// kNotFound), kAdd (key, 8-byte little-endian
// signed delta), kCheck (key), kErase (key), kSetOnClose (key, value: the
// server sets key = value when this connection closes, for whatever reason;
// an empty value cancels; at most kMaxOnCloseBytes per connection), kHeartbeat
// (key; value: an 8-byte little-endian silence limit in ms, then a notice of
// at most kMaxOnCloseBytes with the key: this connection's member is alive;
// the server sets key = notice once the connection has sent nothing for the
// limit, i.e. the process stopped (SIGSTOP, hung, frozen host) while its
// socket stays open; limit 0 stops watching; the reply is kValue with the
// server process's "pid P on HOST"). Replies carry no key: kOk (set,
// erase, check when the key exists), kNotFound (check), kValue (get: the
// value; add: the new integer as 8 bytes little endian) and kError (value =
// message). The server answers a kGet of an absent key only once the key is
// set (or its wait bound passed), so clients block in the kernel instead of
// polling.
//
// Both sides reject a header with the wrong magic or version, an unknown
// command, or lengths above kMaxKeyBytes / kMaxValueBytes before allocating
// anything for it.
//
// Authentication, when the job has a token (OMNICCL_JOB_TOKEN): right after
// accepting, the server sends kAuthMagic and a 32-byte random nonce Ns; the
// client answers HMAC-SHA-256(token, kClientLabel | Ns | Nc) and its own
// 32-byte nonce Nc; the server checks the MAC (else it drops the connection
// and logs it) and answers HMAC-SHA-256(token, kServerLabel | Nc | Ns), which
// the client checks. Requests flow only after that. The token itself never
// crosses the wire, and a recorded exchange cannot be replayed (fresh nonces).
//
// Shedding: a connection that has proven nothing yet (no request completed,
// or no token proof) may be closed to keep descriptors for the job (too many
// such connections at once, silent too long, or the process out of
// descriptors). The server then sends kShedMagic alone, where the client
// expects a reply header, the challenge or the server's proof, and closes.
// Nothing the connection sent was executed, so the client connects again
// (until its deadline); a wrong token is still answered by a bare close.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>

#include "common/status.h"

namespace omniccl::bootstrap::wire {

inline constexpr char kMagic[4] = {'O', 'C', 'S', 'T'};
inline constexpr uint16_t kVersion = 1;
inline constexpr size_t kHeaderBytes = 20;
/// Largest key accepted on the wire (1 MiB).
inline constexpr uint64_t kMaxKeyBytes = uint64_t{1} << 20;
/// Largest value accepted on the wire (64 MiB).
inline constexpr uint64_t kMaxValueBytes = uint64_t{64} << 20;

/// Keys and values one connection may register with kSetOnClose (bytes).
inline constexpr uint64_t kMaxOnCloseBytes = 4096;

/// First bytes of the server's challenge (authenticated stores only).
inline constexpr char kAuthMagic[4] = {'O', 'C', 'A', 'U'};
inline constexpr size_t kNonceBytes = 32;
inline constexpr size_t kMacBytes = 32;
inline constexpr char kClientLabel[] = "omniccl store client";
inline constexpr char kServerLabel[] = "omniccl store server";
/// The server closed this connection to keep descriptors for the job,
/// before executing anything it sent: connect again.
inline constexpr char kShedMagic[4] = {'O', 'C', 'S', 'H'};

/// Request commands and reply codes (the header's command field).
enum class Cmd : uint16_t {
  kSet = 1,
  kGet = 2,
  kAdd = 3,
  kCheck = 4,
  kErase = 5,
  kSetOnClose = 6,
  kHeartbeat = 7,
  kOk = 0x81,
  kValue = 0x82,
  kNotFound = 0x83,
  kError = 0x84,
};

/// A decoded message header.
struct Header {
  Cmd cmd = Cmd::kOk;
  uint32_t key_len = 0;
  uint64_t value_len = 0;
};

/// Whether c is a command a client may send.
inline bool is_request(Cmd c) { return c >= Cmd::kSet && c <= Cmd::kHeartbeat; }
/// Whether c is a reply code the server may send.
inline bool is_reply(Cmd c) { return c >= Cmd::kOk && c <= Cmd::kError; }

/// Stores v little endian into p[0..bytes).
inline void put_le(char* p, uint64_t v, size_t bytes) {
  for (size_t i = 0; i < bytes; ++i) p[i] = static_cast<char>((v >> (8 * i)) & 0xff);
}

/// Reads a little-endian integer of `bytes` bytes from p.
inline uint64_t get_le(const char* p, size_t bytes) {
  uint64_t v = 0;
  for (size_t i = 0; i < bytes; ++i) v |= uint64_t{static_cast<unsigned char>(p[i])} << (8 * i);
  return v;
}

/// Writes the kHeaderBytes-byte header of h to out.
inline void encode_header(const Header& h, char* out) {
  std::memcpy(out, kMagic, 4);
  put_le(out + 4, kVersion, 2);
  put_le(out + 6, static_cast<uint16_t>(h.cmd), 2);
  put_le(out + 8, h.key_len, 4);
  put_le(out + 12, h.value_len, 8);
}

/// Builds a complete message: header, key, value.
inline std::string encode_message(Cmd cmd, const std::string& key, const std::string& value) {
  std::string msg(kHeaderBytes, '\0');
  encode_header(Header{cmd, static_cast<uint32_t>(key.size()), value.size()}, msg.data());
  msg.reserve(kHeaderBytes + key.size() + value.size());
  msg += key;
  msg += value;
  return msg;
}

/// Decodes and validates the kHeaderBytes bytes at in. Returns an empty
/// string on success, else why the header is invalid (for logs/errors).
inline std::string decode_header(const char* in, Header* out) {
  if (std::memcmp(in, kMagic, 4) != 0) return "bad magic";
  uint64_t version = get_le(in + 4, 2);
  if (version != kVersion) return str_cat("unsupported protocol version ", version);
  out->cmd = static_cast<Cmd>(get_le(in + 6, 2));
  if (!is_request(out->cmd) && !is_reply(out->cmd)) {
    return str_cat("unknown command ", get_le(in + 6, 2));
  }
  out->key_len = static_cast<uint32_t>(get_le(in + 8, 4));
  out->value_len = get_le(in + 12, 8);
  if (out->key_len > kMaxKeyBytes) return str_cat("key length ", out->key_len, " exceeds 1 MiB");
  if (out->value_len > kMaxValueBytes) {
    return str_cat("value length ", out->value_len, " exceeds 64 MiB");
  }
  return {};
}

}  // namespace omniccl::bootstrap::wire
