#pragma once

/// @file bearer_token.hpp
/// The API's bearer tokens as secrets: made from getrandom, known to the
/// daemon only by their SHA-256 (libcrypto's EVP_Digest), compared in
/// constant time (CRYPTO_memcmp). CAF-free and Beast-free, so that the
/// config loader reads the tokens file with the same rules.

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "ipc/outcome.hpp"

namespace castellan::api {

/// A SHA-256 digest.
using token_digest = std::array<uint8_t, 32>;

/// Every token `make_token` makes starts with this; the rest is base64url.
inline constexpr std::string_view token_prefix = "cst_";

/// Random bytes in a token: 256 bits.
inline constexpr std::size_t token_random_bytes = 32;

/// A fresh token: `cst_` and 32 bytes from getrandom(2) in base64url
/// without padding (47 characters in all).
outcome<std::string> make_token();

/// The SHA-256 of `token` (the whole text, prefix included).
token_digest digest_of(std::string_view token);

/// Whether two digests are equal, in a time that does not depend on where
/// they differ.
bool same_digest(const token_digest& a, const token_digest& b);

/// 64 lower-case hex digits.
std::string to_hex(const token_digest& d);

/// The digest written as 64 hex digits (either case); nullopt otherwise.
std::optional<token_digest> digest_from_hex(std::string_view hex);

/// The credentials of an `Authorization: Bearer <token>` header value (the
/// scheme in any case, one or more spaces, then the token, which has no
/// space, comma or control character): the token; nullopt when the header
/// is not a bearer token.
std::optional<std::string_view> bearer_credentials(std::string_view header);

} // namespace castellan::api
