#pragma once

/// @file json_format.hpp
/// Pretty-printing in the layout of hand-written policies: one rule per line,
/// short objects and arrays of scalars inline, everything else indented.

#include <string>

#include <nlohmann/json.hpp>

namespace castellan::policy {

/// `value` as indented JSON; objects and arrays that fit in `width` columns
/// and hold no nested object stay on one line. Invalid UTF-8 is replaced.
std::string format_json(const nlohmann::ordered_json& value, size_t width = 100);

} // namespace castellan::policy
