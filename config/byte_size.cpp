#include "config/byte_size.hpp"

#include <limits>

namespace castellan::config {

namespace {

struct unit {
  std::string_view name;
  unsigned shift;
};

// Largest first, for format_byte_size.
constexpr unit units[] = {{"TiB", 40}, {"GiB", 30}, {"MiB", 20}, {"KiB", 10}, {"B", 0}};

constexpr const char* unit_list = "B, KiB, MiB, GiB or TiB";

} // namespace

byte_size_parse parse_byte_size(std::string_view text) {
  byte_size_parse out;
  std::size_t i = 0;
  uint64_t value = 0;
  while (i < text.size() && text[i] >= '0' && text[i] <= '9') {
    const auto digit = static_cast<uint64_t>(text[i] - '0');
    if (value > (std::numeric_limits<uint64_t>::max() - digit) / 10) {
      out.error = "too large";
      return out;
    }
    value = value * 10 + digit;
    ++i;
  }
  if (i == 0) {
    out.error = "not a size: it must start with a number of bytes or of " + std::string(unit_list) +
                " (e.g. \"256MiB\")";
    return out;
  }
  const std::string_view suffix = text.substr(i);
  if (suffix.empty()) {
    out.bytes = value;
    return out;
  }
  if (suffix.front() == ' ' || suffix.front() == '\t') {
    out.error = "no space between the number and its unit (e.g. \"256MiB\")";
    return out;
  }
  for (const auto& u : units) {
    if (suffix != u.name)
      continue;
    if (u.shift != 0 && value > (std::numeric_limits<uint64_t>::max() >> u.shift)) {
      out.error = "too large";
      return out;
    }
    out.bytes = value << u.shift;
    return out;
  }
  out.error = "unknown unit \"" + std::string(suffix) + "\" (use " + unit_list +
              ", with no space: e.g. \"256MiB\")";
  return out;
}

std::string format_byte_size(uint64_t bytes) {
  if (bytes == 0)
    return "0";
  for (const auto& u : units) {
    if (u.shift == 0)
      break;
    const uint64_t mask = (uint64_t{1} << u.shift) - 1;
    if ((bytes & mask) == 0)
      return std::to_string(bytes >> u.shift) + std::string(u.name);
  }
  return std::to_string(bytes);
}

} // namespace castellan::config
