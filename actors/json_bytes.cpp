#include "actors/json_bytes.hpp"

#include <openssl/evp.h>

namespace castellan {

bool is_utf8(std::string_view bytes) noexcept {
  const auto* p = reinterpret_cast<const unsigned char*>(bytes.data());
  const auto* end = p + bytes.size();
  while (p < end) {
    const unsigned char c = *p;
    if (c < 0x80) {
      ++p;
      continue;
    }
    std::size_t n;
    unsigned char lo = 0x80, hi = 0xBF; // the allowed range of the second byte
    if (c >= 0xC2 && c <= 0xDF) {
      n = 1;
    } else if (c >= 0xE0 && c <= 0xEF) {
      n = 2;
      if (c == 0xE0)
        lo = 0xA0; // overlong
      else if (c == 0xED)
        hi = 0x9F; // surrogates
    } else if (c >= 0xF0 && c <= 0xF4) {
      n = 3;
      if (c == 0xF0)
        lo = 0x90; // overlong
      else if (c == 0xF4)
        hi = 0x8F; // above U+10FFFF
    } else {
      return false;
    }
    if (static_cast<std::size_t>(end - p) <= n)
      return false;
    if (p[1] < lo || p[1] > hi)
      return false;
    for (std::size_t i = 2; i <= n; ++i)
      if ((p[i] & 0xC0) != 0x80)
        return false;
    p += n + 1;
  }
  return true;
}

std::size_t json_string_bytes(std::string_view text) noexcept {
  std::size_t n = 0;
  for (const char ch : text) {
    const auto c = static_cast<unsigned char>(ch);
    if (c == '"' || c == '\\' || c == '\b' || c == '\f' || c == '\n' || c == '\r' || c == '\t')
      n += 2;
    else if (c < 0x20)
      n += 6;
    else
      n += 1;
  }
  return n;
}

bool compact_as_text(std::string_view bytes) noexcept {
  return is_utf8(bytes) && json_string_bytes(bytes) <= 2 * bytes.size();
}

std::size_t incomplete_utf8_tail(std::string_view bytes) noexcept {
  // The last lead byte among the final three, and whether its sequence is
  // longer than what follows it.
  const std::size_t n = bytes.size();
  for (std::size_t back = 1; back <= 3 && back <= n; ++back) {
    const auto c = static_cast<unsigned char>(bytes[n - back]);
    if ((c & 0xC0) == 0x80)
      continue; // a continuation byte: look further back
    std::size_t len = c >= 0xF0 ? 4 : c >= 0xE0 ? 3 : c >= 0xC0 ? 2 : 1;
    return len > back ? back : 0;
  }
  return 0;
}

std::string base64_encode(std::string_view bytes) {
  std::string out(4 * ((bytes.size() + 2) / 3) + 1, '\0');
  const int n = EVP_EncodeBlock(reinterpret_cast<unsigned char*>(out.data()),
                                reinterpret_cast<const unsigned char*>(bytes.data()),
                                static_cast<int>(bytes.size()));
  out.resize(n > 0 ? static_cast<std::size_t>(n) : 0);
  return out;
}

std::optional<std::string> base64_decode(std::string_view text) {
  if (text.size() % 4 != 0)
    return std::nullopt;
  // EVP_DecodeBlock skips white space and decodes padding as zero bytes:
  // check the text strictly first, then drop what the padding stood for.
  std::size_t padding = 0;
  for (std::size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    const bool letter = (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') ||
                        (c >= '0' && c <= '9') || c == '+' || c == '/';
    if (c == '=') {
      if (i + 2 < text.size())
        return std::nullopt; // padding only in the last two places
      ++padding;
    } else if (!letter || padding != 0) {
      return std::nullopt;
    }
  }
  if (text.empty())
    return std::string();
  std::string out(text.size() / 4 * 3, '\0');
  const int n = EVP_DecodeBlock(reinterpret_cast<unsigned char*>(out.data()),
                                reinterpret_cast<const unsigned char*>(text.data()),
                                static_cast<int>(text.size()));
  if (n < 0 || static_cast<std::size_t>(n) != out.size())
    return std::nullopt;
  out.resize(out.size() - padding);
  // Canonical: the bits the padding leaves over are zero, so that one
  // string of bytes has one text.
  if (base64_encode(out) != text)
    return std::nullopt;
  return out;
}

} // namespace castellan
