#pragma once

/// @file audit_query.hpp
/// Reading audit logs back: parsing a JSON line, the `castellan audit tail`
/// filter (--kind, --exec, --since) and its one-line human rendering. No CAF.

#include <cstdint>
#include <set>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "ipc/outcome.hpp"

namespace castellan {

/// What `audit tail` shows: records of these kinds (empty: all), of this exec
/// (0: any), at or after `since_ns`.
struct tail_filter {
  std::set<std::string> kinds;
  uint64_t exec_id = 0;
  int64_t since_ns = INT64_MIN;
};

/// Parses one line of an audit log: a JSON object with `v`, `ts` and `kind`.
outcome<nlohmann::ordered_json> parse_audit_line(std::string_view line);

/// Parses `--since`: an RFC 3339 time, or a duration before `now_ns` with a
/// unit ("90s", "15m", "2h", "1d").
bool parse_since(std::string_view text, int64_t now_ns, int64_t& out_ns);

/// Whether a parsed record passes `filter`.
bool tail_matches(const tail_filter& filter, const nlohmann::ordered_json& rec);

/// One line for humans: time, kind, then the fields that matter for the kind.
std::string pretty_audit_line(const nlohmann::ordered_json& rec);

} // namespace castellan
