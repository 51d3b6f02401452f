#include "actors/api/workspace_routes.hpp"

#include <algorithm>
#include <chrono>
#include <vector>

#include <nlohmann/json.hpp>

#include "actors/api/api_error.hpp"
#include "actors/api/bearer_token.hpp"
#include "actors/api/session_registry.hpp"
#include "actors/errors.hpp"
#include "actors/exec_json.hpp"
#include "actors/session/workspace_name.hpp"

namespace castellan::api {

namespace {

using json = nlohmann::json;

/// The store's work (mke2fs, fallocate, mount) may take a while for a
/// large quota; the API waits this long.
constexpr auto store_timeout = std::chrono::seconds(60);

constexpr std::string_view workspaces_path = "/v1/workspaces";

http_response json_response(unsigned status, std::string body) {
  http_response r;
  r.status = status;
  r.body = std::move(body);
  return r;
}

/// "t" and 12 hex digits of the name's SHA-256, and a dot; "" without a
/// token. 48 bits: the operator names the tokens, and two that share a
/// prefix would share their workspaces (never another token's on purpose).
std::string prefix_of(const std::string& owner) {
  if (owner.empty())
    return {};
  return "t" + to_hex(digest_of(owner)).substr(0, 12) + ".";
}

json workspace_json(const workspace_info& w, const std::string& name) {
  return json{{"name", name},          {"quota_bytes", w.quota_bytes},
              {"mounted", w.mounted},  {"used_bytes", w.used_bytes},
              {"free_bytes", w.free_bytes}, {"users", w.users}};
}

/// The supervisor's refusal of a workspace request.
http_response workspace_refused(const caf::error& err, const caf::actor_system& sys,
                                const std::string& name) {
  const std::string message = describe(err, sys);
  if (err.category() == caf::detail::error_factory<castellan_errc>::category) {
    switch (static_cast<castellan_errc>(err.code())) {
    case castellan_errc::busy:
      return json_response(429, error_body("too_many_workspaces", message));
    case castellan_errc::invalid_request:
      return json_response(400, error_body("invalid_field", message,
                                           message.find("quota") != std::string::npos
                                               ? "/quota_bytes"
                                               : "/name"));
    case castellan_errc::no_such_workspace:
      // The store's name is not the client's.
      return json_response(404, error_body("unknown_workspace",
                                           "no workspace '" + name + "'"));
    default:
      break;
    }
  }
  return supervisor_error(err, sys);
}

} // namespace

std::string store_workspace_name(const std::string& owner, const std::string& name) {
  return prefix_of(owner) + name;
}

std::optional<std::string> client_workspace_name(const std::string& owner,
                                                 const std::string& stored) {
  const std::string prefix = prefix_of(owner);
  if (stored.compare(0, prefix.size(), prefix) != 0)
    return std::nullopt;
  return stored.substr(prefix.size());
}

std::optional<api_error> check_workspace_name(const std::string& owner, const std::string& name,
                                              const std::string& field) {
  const std::string prefix = prefix_of(owner);
  if (auto ok = validate_workspace_name(name); !ok)
    return api_error{400, "invalid_field", ok.error().message, field};
  if (name.size() + prefix.size() > workspace_name_max)
    return api_error{400, "invalid_field",
                     "a token's workspace name has at most " +
                         std::to_string(workspace_name_max - prefix.size()) + " characters",
                     field};
  return std::nullopt;
}

bool is_workspace_path(std::string_view path) {
  return path.substr(0, workspaces_path.size()) == workspaces_path &&
         (path.size() == workspaces_path.size() || path[workspaces_path.size()] == '/');
}

std::variant<http_response, caf::message> decide_workspace_request(const http_request& req,
                                                                    const caller& who) {
  const std::string_view path = std::string_view(req.target).substr(0, req.target.find('?'));
  const std::string owner = owner_of(who);
  std::string_view rest = path.substr(workspaces_path.size());
  if (!rest.empty())
    rest.remove_prefix(1);
  auto not_allowed = [&](const char* allowed) {
    http_response r = json_response(
        405, error_body("method_not_allowed",
                        req.method + " " + std::string(path) + ": use " + allowed));
    r.headers.emplace_back("Allow", allowed);
    return r;
  };
  if (rest.empty()) {
    if (req.method == "GET")
      return caf::make_message(workspace_list_atom::value, req.id, owner);
    if (req.method != "POST")
      return not_allowed("GET, POST");
    auto parsed = parse_body_object(req.body);
    if (auto* err = std::get_if<api_error>(&parsed))
      return json_response(err->status, err->body());
    const json& doc = std::get<json>(parsed);
    std::string name;
    uint64_t quota = 0;
    for (auto it = doc.begin(); it != doc.end(); ++it) {
      const std::string& key = it.key();
      const json& v = it.value();
      if (key == "name") {
        if (!v.is_string())
          return json_response(400, error_body("invalid_field",
                                               "'name' must be a string", "/name"));
        name = v.get<std::string>();
      } else if (key == "quota_bytes") {
        if (!v.is_number_unsigned() || v.get<uint64_t>() == 0)
          return json_response(400, error_body("invalid_field",
                                               "'quota_bytes' must be a positive integer, not " +
                                                   v.dump(),
                                               "/quota_bytes"));
        quota = v.get<uint64_t>();
      } else {
        return json_response(400, error_body("invalid_field",
                                             "unknown field '" + key +
                                                 "' (expected name, quota_bytes)",
                                             "/" + key));
      }
    }
    if (!doc.contains("name"))
      return json_response(400,
                           error_body("invalid_field", "the field 'name' is missing", "/name"));
    if (auto bad = check_workspace_name(owner, name, "/name"))
      return json_response(bad->status, bad->body());
    return caf::make_message(workspace_create_atom::value, req.id, owner, std::move(name), quota);
  }
  const std::string name(rest);
  if (req.method != "DELETE")
    return not_allowed("DELETE");
  if (check_workspace_name(owner, name, "")) // nothing of that name can be the caller's
    return json_response(404, error_body("unknown_workspace", "no workspace '" + name + "'"));
  return caf::make_message(workspace_remove_atom::value, req.id, owner, name);
}

caf::message_handler workspace_handlers(caf::event_based_actor* self,
                                        supervisor_actor supervisor,
                                        std::shared_ptr<api_responder> responder) {
  return {
      [=](workspace_list_atom, uint64_t request_id, std::string& owner) {
        self->request(supervisor, store_timeout, workspace_list_atom::value)
            .then(
                [=](std::vector<workspace_info>& all) {
                  json list = json::array();
                  for (const auto& w : all)
                    if (auto name = client_workspace_name(owner, w.name))
                      list.push_back(workspace_json(w, *name));
                  responder->complete(
                      request_id,
                      json_response(200, dump_json(json{{"v", 1}, {"workspaces", list}})));
                },
                [=](caf::error& err) {
                  responder->complete(request_id, workspace_refused(err, self->system(), {}));
                });
      },
      [=](workspace_create_atom, uint64_t request_id, std::string& owner, std::string& name,
          uint64_t quota) {
        self->request(supervisor, store_timeout, workspace_create_atom::value,
                      store_workspace_name(owner, name), quota)
            .then(
                [=](workspace_info& w) {
                  json j = workspace_json(w, name);
                  j["v"] = 1;
                  responder->complete(request_id, json_response(201, dump_json(j)));
                },
                [=](caf::error& err) {
                  responder->complete(request_id, workspace_refused(err, self->system(), name));
                });
      },
      [=](workspace_remove_atom, uint64_t request_id, std::string& owner, std::string& name) {
        self->request(supervisor, store_timeout, workspace_remove_atom::value,
                      store_workspace_name(owner, name))
            .then(
                [=](workspace_info& w) {
                  json j = workspace_json(w, name);
                  j["v"] = 1;
                  responder->complete(request_id, json_response(200, dump_json(j)));
                },
                [=](caf::error& err) {
                  responder->complete(request_id, workspace_refused(err, self->system(), name));
                });
      },
  };
}

} // namespace castellan::api
