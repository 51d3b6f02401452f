#pragma once

/// @file duration.hpp
/// Parses the durations the CLI accepts: "500ms", "2s", "1.5s", "3m", or a
/// bare number of seconds.

#include <cstdint>
#include <optional>
#include <string_view>

namespace castellan::cli {

/// Milliseconds, or nothing if `text` is not a positive duration.
std::optional<uint64_t> parse_duration_ms(std::string_view text);

} // namespace castellan::cli
