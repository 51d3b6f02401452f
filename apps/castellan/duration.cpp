#include "apps/castellan/duration.hpp"

#include <cmath>
#include <cstdlib>
#include <string>

namespace castellan::cli {

std::optional<uint64_t> parse_duration_ms(std::string_view text) {
  std::string s(text);
  if (s.empty())
    return std::nullopt;
  char* end = nullptr;
  const double value = std::strtod(s.c_str(), &end);
  if (end == s.c_str() || !std::isfinite(value) || value <= 0)
    return std::nullopt;
  const std::string_view unit(end);
  double factor = 0;
  if (unit.empty() || unit == "s")
    factor = 1000;
  else if (unit == "ms")
    factor = 1;
  else if (unit == "m")
    factor = 60'000;
  else
    return std::nullopt;
  const double ms = value * factor;
  if (ms < 1 || ms > 86'400'000.0)
    return std::nullopt;
  return static_cast<uint64_t>(std::llround(ms));
}

} // namespace castellan::cli
