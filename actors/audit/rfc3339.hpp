#pragma once

/// @file rfc3339.hpp
/// Wall-clock timestamps of audit records: nanoseconds since the Unix epoch
/// (CLOCK_REALTIME) and their RFC 3339 text with nanoseconds, always in UTC
/// ("2025-11-21T23:54:01.123456789Z").

#include <cstdint>
#include <string>
#include <string_view>

namespace castellan {

/// CLOCK_REALTIME now, in nanoseconds since the epoch.
int64_t realtime_ns();

/// `ns` as RFC 3339 UTC with nine fractional digits.
std::string format_rfc3339(int64_t ns);

/// Parses RFC 3339 ("2025-11-21T23:54:01Z", "…T23:54:01.5+02:00", up to nine
/// fractional digits; 't'/'z' and a space instead of 'T' are accepted).
/// False if `text` is not such a timestamp.
bool parse_rfc3339(std::string_view text, int64_t& ns);

} // namespace castellan
