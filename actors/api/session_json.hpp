#pragma once

/// @file session_json.hpp
/// The JSON of the session routes (docs/api.md, "Sessions"): the paths
/// under /v1/sessions, the create body read strictly (an unknown field or a
/// bad value is an error naming the field), and sessions and their stats as
/// the API writes them. No CAF, no server.

#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "actors/api/api_json.hpp"
#include "actors/session/session_messages.hpp"

namespace castellan::api {

/// What a path under `/v1/sessions` names.
struct session_route {
  enum class kind : uint8_t {
    none,       ///< not a session path
    collection, ///< /v1/sessions
    one,        ///< /v1/sessions/{id}
    exec,       ///< /v1/sessions/{id}/exec
    run,        ///< /v1/sessions/{id}/run
    files,      ///< /v1/sessions/{id}/files[/…] (session_files_routes.hpp)
    unknown,    ///< /v1/sessions/{id}/… of no route
  };
  kind type = kind::none;
  std::string id; ///< the `{id}` segment, as sent (any text: unknown ids are 404)
  /// For `files`: what follows `/files` ("" or "/…"), still percent-encoded.
  std::string files_rest;
};

/// The route of `path` (without its query string).
session_route match_session_route(std::string_view path);

/// `POST /v1/sessions` `{pool?, workspace?, idle_ttl_ms?, max_lifetime_ms?}`
/// (an empty body is `{}`). The owner is the caller's, not the body's.
std::variant<session_options, api_error> parse_session_options(std::string_view body);

/// A session: `{"v":1,"id","owner","pool","workspace","created",
/// "idle_ttl_ms","max_lifetime_ms"}` (`created` RFC 3339 UTC; `owner` the
/// token's name, "" for a caller without one; `workspace` "" for none).
std::string session_info_body(const session_info& info);

/// A session's stats: session_info_body's members and `state`, `execs`,
/// `idle_ms`, `age_ms`, `end_reason`, and `worker` `{cpu_us, memory_bytes,
/// memory_peak_bytes, tasks}` (zeros once it ended).
std::string session_stats_body(const session_stats& stats);

/// `GET /v1/sessions`: `{"v":1,"sessions":[…as session_info_body, without
/// "v"…]}`.
std::string session_list_body(const std::vector<session_info>& sessions);

} // namespace castellan::api
