#pragma once

/// @file audit_params.hpp
/// The query of `GET /v1/audit` (docs/api.md): `kind` (repeatable, or
/// comma-separated), `exec` and `since`, checked and turned into what the
/// audit stream filters by. No CAF, no Beast.

#include <cstdint>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <variant>

#include "actors/api/api_json.hpp"

namespace castellan::api {

/// What a `GET /v1/audit` asks for.
struct audit_params {
  std::set<std::string> kinds; ///< empty: every kind
  uint64_t exec_id = 0;        ///< 0: any exec
  /// Records at or after this time (nanoseconds since the epoch) from the
  /// audit file before the live ones; nullopt: live records only.
  std::optional<int64_t> since_ns;
};

/// Parses the query string (what follows `?` in the target, percent-encoded;
/// `+` is not a space: a time zone offset keeps it). `now_ns` is what a
/// duration (`since=15m`) counts back from. An unknown parameter, an
/// unknown kind, an exec that is not a positive decimal or a `since` that is
/// neither RFC 3339 nor a duration is a 400 whose `field` names the
/// parameter.
std::variant<audit_params, api_error> parse_audit_params(std::string_view query, int64_t now_ns);

} // namespace castellan::api
