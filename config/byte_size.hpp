#pragma once

/// @file byte_size.hpp
/// Sizes in the daemon's config: a number of bytes, or a string of digits
/// with a binary unit ("256MiB"). Parsed strictly: no spaces, no fractions,
/// no decimal units (MB would be ambiguous), nothing that overflows.

#include <cstdint>
#include <string>
#include <string_view>

namespace castellan::config {

/// The result of parsing a size: `bytes` when `error` is empty, else why not.
struct byte_size_parse {
  uint64_t bytes = 0;
  std::string error;
};

/// Parses "<digits>[B|KiB|MiB|GiB|TiB]" ("4096", "64KiB", "256MiB").
byte_size_parse parse_byte_size(std::string_view text);

/// The shortest exact spelling of `bytes` in the form parse_byte_size reads:
/// "256MiB", "1536KiB", "1000" (bytes that are no whole KiB stay a number).
std::string format_byte_size(uint64_t bytes);

} // namespace castellan::config
