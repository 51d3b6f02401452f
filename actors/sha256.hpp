#pragma once

/// @file sha256.hpp
/// Content identities: the code in audit records, a request policy's pool.

#include <string>
#include <string_view>

namespace castellan {

/// The SHA-256 of `data` as 64 lower-case hex digits; empty if the crypto
/// library cannot compute it.
std::string sha256_hex(std::string_view data);

} // namespace castellan
