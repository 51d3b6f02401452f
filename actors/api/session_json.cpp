#include "actors/api/session_json.hpp"

#include <optional>

#include <nlohmann/json.hpp>

#include "actors/api/workspace_routes.hpp"
#include "actors/audit/rfc3339.hpp"
#include "actors/exec_json.hpp"

namespace castellan::api {

namespace {

using json = nlohmann::json;

constexpr std::string_view sessions_path = "/v1/sessions";

api_error field_error(const std::string& key, std::string message) {
  return api_error{400, "invalid_field", std::move(message), "/" + key};
}

/// A TTL field: an integer of milliseconds from 1 on (the supervisor's
/// maximum is checked there, which knows it).
std::optional<api_error> read_ms(const std::string& key, const json& v, uint64_t& out) {
  if (!v.is_number_unsigned() || v.get<uint64_t>() == 0)
    return field_error(key, "'" + key + "' must be a positive integer of milliseconds, not " +
                                v.dump());
  out = v.get<uint64_t>();
  return std::nullopt;
}

json info_json(const session_info& info) {
  return json{{"id", info.id},
              {"owner", info.owner},
              {"pool", info.pool},
              // As its owner names it.
              {"workspace", client_workspace_name(info.owner, info.workspace)
                                .value_or(info.workspace)},
              {"created", format_rfc3339(info.created_ns)},
              {"idle_ttl_ms", info.idle_ttl_ms},
              {"max_lifetime_ms", info.max_lifetime_ms}};
}

} // namespace

session_route match_session_route(std::string_view path) {
  session_route r;
  if (path.substr(0, sessions_path.size()) != sessions_path)
    return r;
  std::string_view rest = path.substr(sessions_path.size());
  if (rest.empty()) {
    r.type = session_route::kind::collection;
    return r;
  }
  if (rest.front() != '/')
    return r; // /v1/sessionsX
  rest.remove_prefix(1);
  const auto slash = rest.find('/');
  r.id = std::string(rest.substr(0, slash));
  if (slash == std::string_view::npos) {
    r.type = r.id.empty() ? session_route::kind::collection : session_route::kind::one;
    return r;
  }
  const std::string_view tail = rest.substr(slash + 1);
  if (r.id.empty())
    r.type = session_route::kind::unknown;
  else if (tail == "exec")
    r.type = session_route::kind::exec;
  else if (tail == "run")
    r.type = session_route::kind::run;
  else if (tail == "files" || tail.substr(0, 6) == "files/") {
    r.type = session_route::kind::files;
    r.files_rest = std::string(tail.substr(5));
  }
  else
    r.type = session_route::kind::unknown;
  return r;
}

std::variant<session_options, api_error> parse_session_options(std::string_view body) {
  session_options out;
  if (body.empty())
    return out;
  auto parsed = parse_body_object(body);
  if (auto* err = std::get_if<api_error>(&parsed))
    return std::move(*err);
  const json& doc = std::get<json>(parsed);
  for (auto it = doc.begin(); it != doc.end(); ++it) {
    const std::string& key = it.key();
    const json& v = it.value();
    if (key == "pool") {
      if (!v.is_string() || v.get<std::string>().empty())
        return field_error(key, "'pool' must be a non-empty string (a pool's name)");
      out.pool = v.get<std::string>();
    } else if (key == "workspace") {
      // A name of the caller's workspaces (workspace_routes.hpp), checked
      // and mapped to the store's by the route, which knows the caller.
      if (!v.is_string() || v.get<std::string>().empty())
        return field_error(key, "'workspace' must be the name of a workspace (a non-empty "
                                "string)");
      out.workspace = v.get<std::string>();
    } else if (key == "idle_ttl_ms") {
      if (auto err = read_ms(key, v, out.idle_ttl_ms))
        return std::move(*err);
    } else if (key == "max_lifetime_ms") {
      if (auto err = read_ms(key, v, out.max_lifetime_ms))
        return std::move(*err);
    } else {
      return field_error(key, "unknown field '" + key +
                                  "' (expected pool, workspace, idle_ttl_ms, max_lifetime_ms)");
    }
  }
  return out;
}

std::string session_info_body(const session_info& info) {
  json j = info_json(info);
  j["v"] = 1;
  return dump_json(j);
}

std::string session_stats_body(const session_stats& stats) {
  json j = info_json(stats.info);
  j["v"] = 1;
  j["state"] = to_string(stats.state);
  j["execs"] = stats.execs;
  j["idle_ms"] = stats.idle_ms;
  j["age_ms"] = stats.age_ms;
  j["end_reason"] = stats.end_reason;
  // The worker's numbers, not its host pid: a client has no use for it.
  j["worker"] = json{{"cpu_us", stats.worker.cpu_us},
                     {"memory_bytes", stats.worker.memory_bytes},
                     {"memory_peak_bytes", stats.worker.memory_peak_bytes},
                     {"tasks", stats.worker.pids}};
  return dump_json(j);
}

std::string session_list_body(const std::vector<session_info>& sessions) {
  json list = json::array();
  for (const auto& s : sessions)
    list.push_back(info_json(s));
  return dump_json(json{{"v", 1}, {"sessions", std::move(list)}});
}

} // namespace castellan::api
