#pragma once

/// @file json_bytes.hpp
/// Arbitrary bytes in JSON text: UTF-8 as it is, anything else as base64
/// (RFC 4648, standard alphabet, padded) beside a flag that says so. What an
/// exec writes and reads is bytes; JSON strings are Unicode.

#include <optional>
#include <string>
#include <string_view>

namespace castellan {

/// True when `bytes` is well-formed UTF-8 (no overlong forms, surrogates or
/// code points above U+10FFFF).
bool is_utf8(std::string_view bytes) noexcept;

/// How many bytes at the end of `bytes` (0 to 3) are the start of a UTF-8
/// sequence that is cut short: what truncating output in the middle of a
/// character leaves.
std::size_t incomplete_utf8_tail(std::string_view bytes) noexcept;

/// The bytes `text` (UTF-8) takes inside a JSON string as nlohmann's dump
/// writes it: a quote, a backslash and \\b \\f \\n \\r \\t take two, any other
/// control character six (\\u00XX), everything else itself.
std::size_t json_string_bytes(std::string_view text) noexcept;

/// True when `bytes` may go into JSON as text: UTF-8, taking at most twice
/// its size there (quotes, backslashes and line breaks, however many, stay
/// text). Bytes the exec chooses, up to 32 MiB of them (files_out), must
/// not grow sixfold into the answer by being mostly control characters:
/// those go as base64, a third larger.
bool compact_as_text(std::string_view bytes) noexcept;

std::string base64_encode(std::string_view bytes);

/// The bytes of `text`, or nothing when it is not canonical padded base64
/// (whitespace, a foreign character, a wrong length or stray padding).
std::optional<std::string> base64_decode(std::string_view text);

} // namespace castellan
