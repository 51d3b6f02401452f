#include "actors/api/bearer_token.hpp"

#include <sys/random.h>

#include <cerrno>

#include <openssl/crypto.h>
#include <openssl/evp.h>

namespace castellan::api {

namespace {

std::string base64url(const uint8_t* data, std::size_t n) {
  static constexpr char alphabet[] =
      "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";
  std::string out;
  out.reserve((n * 4 + 2) / 3);
  std::size_t i = 0;
  for (; i + 3 <= n; i += 3) {
    const uint32_t v = (uint32_t{data[i]} << 16) | (uint32_t{data[i + 1]} << 8) | data[i + 2];
    out += alphabet[(v >> 18) & 63];
    out += alphabet[(v >> 12) & 63];
    out += alphabet[(v >> 6) & 63];
    out += alphabet[v & 63];
  }
  if (n - i == 1) {
    const uint32_t v = uint32_t{data[i]} << 16;
    out += alphabet[(v >> 18) & 63];
    out += alphabet[(v >> 12) & 63];
  } else if (n - i == 2) {
    const uint32_t v = (uint32_t{data[i]} << 16) | (uint32_t{data[i + 1]} << 8);
    out += alphabet[(v >> 18) & 63];
    out += alphabet[(v >> 12) & 63];
    out += alphabet[(v >> 6) & 63];
  }
  return out;
}

int hex_value(char c) {
  if (c >= '0' && c <= '9')
    return c - '0';
  if (c >= 'a' && c <= 'f')
    return c - 'a' + 10;
  if (c >= 'A' && c <= 'F')
    return c - 'A' + 10;
  return -1;
}

} // namespace

outcome<std::string> make_token() {
  uint8_t bytes[token_random_bytes];
  std::size_t got = 0;
  while (got < sizeof bytes) {
    // getrandom blocks until the pool is initialised, never returns weak
    // bytes; an interrupted call is retried.
    const ssize_t n = ::getrandom(bytes + got, sizeof bytes - got, 0);
    if (n < 0) {
      if (errno == EINTR)
        continue;
      return errno_failure("getrandom");
    }
    got += static_cast<std::size_t>(n);
  }
  std::string token = std::string(token_prefix) + base64url(bytes, sizeof bytes);
  OPENSSL_cleanse(bytes, sizeof bytes);
  return token;
}

token_digest digest_of(std::string_view token) {
  token_digest d{};
  unsigned int len = 0;
  // EVP_Digest with SHA-256 fails only when the library cannot allocate; a
  // zero digest then matches no entry of a loaded file (whose digests are
  // checked to be 64 hex digits, and no real token hashes to zero).
  if (EVP_Digest(token.data(), token.size(), d.data(), &len, EVP_sha256(), nullptr) != 1 ||
      len != d.size())
    d.fill(0);
  return d;
}

bool same_digest(const token_digest& a, const token_digest& b) {
  return CRYPTO_memcmp(a.data(), b.data(), a.size()) == 0;
}

std::string to_hex(const token_digest& d) {
  static constexpr char digits[] = "0123456789abcdef";
  std::string out;
  out.reserve(64);
  for (uint8_t b : d) {
    out += digits[b >> 4];
    out += digits[b & 15];
  }
  return out;
}

std::optional<token_digest> digest_from_hex(std::string_view hex) {
  token_digest d{};
  if (hex.size() != 2 * d.size())
    return std::nullopt;
  for (std::size_t i = 0; i < d.size(); ++i) {
    const int hi = hex_value(hex[2 * i]);
    const int lo = hex_value(hex[2 * i + 1]);
    if (hi < 0 || lo < 0)
      return std::nullopt;
    d[i] = static_cast<uint8_t>((hi << 4) | lo);
  }
  return d;
}

std::optional<std::string_view> bearer_credentials(std::string_view header) {
  constexpr std::string_view scheme = "bearer";
  if (header.size() <= scheme.size())
    return std::nullopt;
  for (std::size_t i = 0; i < scheme.size(); ++i) {
    char c = header[i];
    if (c >= 'A' && c <= 'Z')
      c = static_cast<char>(c - 'A' + 'a');
    if (c != scheme[i])
      return std::nullopt;
  }
  std::string_view rest = header.substr(scheme.size());
  if (rest.front() != ' ')
    return std::nullopt;
  while (!rest.empty() && rest.front() == ' ')
    rest.remove_prefix(1);
  while (!rest.empty() && (rest.back() == ' ' || rest.back() == '\t'))
    rest.remove_suffix(1);
  if (rest.empty())
    return std::nullopt;
  for (char c : rest) {
    const auto u = static_cast<unsigned char>(c);
    if (u <= 0x20 || u == 0x7f || c == ',')
      return std::nullopt;
  }
  return rest;
}

} // namespace castellan::api
