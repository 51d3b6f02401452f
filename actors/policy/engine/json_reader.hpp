#pragma once

/// @file json_reader.hpp
/// Reads untrusted JSON text into a document, refusing what would make the
/// rest of the pipeline ambiguous or expensive: syntax errors (with line and
/// column), duplicate object keys (which value would win is not obvious to a
/// reader of the file), nesting deeper than `max_json_depth` and texts larger
/// than `max_policy_bytes`. Never throws.

#include <cstddef>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "actors/policy/engine/policy_error.hpp"

namespace castellan::policy {

/// A policy file larger than this is refused (policies are hand-written).
inline constexpr size_t max_policy_bytes = 4u * 1024u * 1024u;

/// Objects and arrays nested deeper than this are refused.
inline constexpr size_t max_json_depth = 32;

/// Parses `text`; errors name `file`.
validated<nlohmann::json> read_json(std::string_view text, std::string_view file);

/// Appends `token` to `pointer` with RFC 6901 escaping ("~" → "~0", "/" → "~1").
std::string append_pointer(std::string pointer, std::string_view token);

/// Compact JSON of `value`, shortened to about `limit` characters.
std::string render_value(const nlohmann::json& value, size_t limit = 120);

} // namespace castellan::policy
