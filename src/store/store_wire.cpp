#include "store/store_wire.h"

#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <openssl/rand.h>

#include "util/error.h"

namespace gpudiag::storewire {

namespace {

void put_le(std::string& buf, std::uint64_t v, int bytes) {
  for (int i = 0; i < bytes; ++i) buf.push_back(static_cast<char>((v >> (8 * i)) & 0xff));
}

std::uint64_t get_le(std::string_view s) {
  std::uint64_t v = 0;
  for (std::size_t i = 0; i < s.size(); ++i)
    v |= static_cast<std::uint64_t>(static_cast<unsigned char>(s[i])) << (8 * i);
  return v;
}

}  // namespace

Writer::Writer(Type type, std::uint32_t id) {
  buf_.assign(kLenBytes, '\0');
  u8(static_cast<std::uint8_t>(type));
  u32(id);
}

Writer& Writer::u8(std::uint8_t v) {
  put_le(buf_, v, 1);
  return *this;
}
Writer& Writer::u16(std::uint16_t v) {
  put_le(buf_, v, 2);
  return *this;
}
Writer& Writer::u32(std::uint32_t v) {
  put_le(buf_, v, 4);
  return *this;
}
Writer& Writer::i64(std::int64_t v) {
  put_le(buf_, static_cast<std::uint64_t>(v), 8);
  return *this;
}
Writer& Writer::str(std::string_view s) {
  u32(static_cast<std::uint32_t>(s.size()));
  buf_.append(s);
  return *this;
}
Writer& Writer::strs(const std::vector<std::string>& v) {
  u32(static_cast<std::uint32_t>(v.size()));
  for (const auto& s : v) str(s);
  return *this;
}

std::string Writer::finish() {
  std::string len;
  put_le(len, buf_.size() - kLenBytes, 4);
  buf_.replace(0, kLenBytes, len);
  return std::move(buf_);
}

std::string_view Reader::take(std::size_t n) {
  if (rest_.size() < n) throw ProtocolError("truncated message");
  auto out = rest_.substr(0, n);
  rest_.remove_prefix(n);
  return out;
}

std::uint8_t Reader::u8() { return static_cast<std::uint8_t>(get_le(take(1))); }
std::uint16_t Reader::u16() { return static_cast<std::uint16_t>(get_le(take(2))); }
std::uint32_t Reader::u32() { return static_cast<std::uint32_t>(get_le(take(4))); }
std::int64_t Reader::i64() { return static_cast<std::int64_t>(get_le(take(8))); }
std::string Reader::str() {
  auto n = u32();
  return std::string(take(n));
}
std::vector<std::string> Reader::strs() {
  auto n = u32();
  // Each string needs at least its 4-byte length: refuse counts the body cannot hold.
  if (n > rest_.size() / 4) throw ProtocolError("key count larger than the message");
  std::vector<std::string> out;
  out.reserve(n);
  for (std::uint32_t i = 0; i < n; ++i) out.push_back(str());
  return out;
}
void Reader::expect_done() const {
  if (!rest_.empty()) throw ProtocolError("trailing bytes in message");
}

std::vector<std::optional<std::string>> read_values(Reader& r, std::size_t expected) {
  if (r.u32() != expected) throw ProtocolError("a MULTI_GET reply of the wrong length");
  std::vector<std::optional<std::string>> out(expected);
  for (auto& v : out) {
    bool present = r.u8() != 0;
    auto s = r.str();
    if (present) v = std::move(s);
  }
  return out;
}

bool next_frame(std::string_view buf, Frame& out, std::uint32_t max_frame) {
  if (buf.size() < kLenBytes) return false;
  auto len = static_cast<std::uint32_t>(get_le(buf.substr(0, kLenBytes)));
  if (len > max_frame)
    throw ProtocolError("message of " + std::to_string(len) + " bytes exceeds the limit of " +
                        std::to_string(max_frame));
  if (len < 5) throw ProtocolError("message shorter than its header");
  if (buf.size() < kLenBytes + len) return false;
  auto body = buf.substr(kLenBytes, len);
  out.type = static_cast<Type>(static_cast<unsigned char>(body[0]));
  out.id = static_cast<std::uint32_t>(get_le(body.substr(1, 4)));
  out.payload = body.substr(5);
  out.total = kLenBytes + len;
  return true;
}

namespace {

std::string proof(std::string_view label, std::string_view secret, std::string_view server_nonce,
                  std::string_view client_nonce, std::string_view token, std::uint32_t rank) {
  std::string msg;
  for (auto part : {label, server_nonce, client_nonce, token}) {
    put_le(msg, part.size(), 4);
    msg.append(part);
  }
  put_le(msg, rank, 4);
  unsigned char mac[EVP_MAX_MD_SIZE];
  unsigned int len = 0;
  if (!HMAC(EVP_sha256(), secret.data(), static_cast<int>(secret.size()),
            reinterpret_cast<const unsigned char*>(msg.data()), msg.size(), mac, &len) ||
      len != kProofBytes)
    throw Error(ExitCode::internal, "store: OpenSSL's HMAC-SHA256 failed");
  return std::string(reinterpret_cast<const char*>(mac), len);
}

}  // namespace

std::string random_nonce() {
  std::string n(kNonceBytes, '\0');
  if (RAND_bytes(reinterpret_cast<unsigned char*>(n.data()), static_cast<int>(n.size())) != 1)
    throw Error(ExitCode::internal, "store: OpenSSL's RAND_bytes failed to draw a nonce");
  return n;
}

std::string client_proof(std::string_view secret, std::string_view server_nonce,
                         std::string_view client_nonce, std::string_view token,
                         std::uint32_t rank) {
  return proof("gpudiag-store-v1 client", secret, server_nonce, client_nonce, token, rank);
}

std::string server_proof(std::string_view secret, std::string_view server_nonce,
                         std::string_view client_nonce, std::string_view token,
                         std::uint32_t rank) {
  return proof("gpudiag-store-v1 server", secret, server_nonce, client_nonce, token, rank);
}

bool proofs_equal(std::string_view a, std::string_view b) {
  return a.size() == b.size() && CRYPTO_memcmp(a.data(), b.data(), a.size()) == 0;
}

}  // namespace gpudiag::storewire
