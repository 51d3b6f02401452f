#include "actors/api/policy_routes.hpp"

#include <algorithm>
#include <array>
#include <optional>
#include <utility>
#include <variant>
#include <vector>

#include <nlohmann/json.hpp>

#include "actors/api/api_error.hpp"
#include "actors/api/api_json.hpp"
#include "actors/exec_json.hpp"
#include "actors/policy/engine/compiled_policy.hpp"
#include "actors/policy/engine/policy_directory.hpp"
#include "actors/policy/engine/policy_loader.hpp"
#include "actors/policy/engine/policy_parser.hpp"
#include "actors/pool/policy_explainer.hpp"
#include "actors/supervisor/request_policy.hpp"

namespace castellan::api {

namespace {

using json = nlohmann::json;
namespace pol = castellan::policy;

/// How errors name the posted policy (and what a decision names it).
constexpr const char* posted_file = "request policy";

http_response answer(unsigned status, std::string body) {
  http_response r;
  r.status = status;
  r.body = std::move(body);
  return r;
}

http_response answer(const api_error& err) {
  return answer(err.status, err.body());
}

api_error field_error(std::string pointer, std::string message) {
  return api_error{400, "invalid_field", std::move(message), std::move(pointer)};
}

/// One policy error as the API shows it: `pointer` into the policy that
/// has it, `file` (a policy's name) when that is not the posted one.
json error_json(const pol::policy_error& e) {
  json j = {{"pointer", e.pointer}, {"message", e.message}};
  if (!e.value.empty())
    j["value"] = e.value;
  if (!e.file.empty() && e.file != posted_file)
    j["file"] = pol::policy_name_of(e.file);
  return j;
}

/// Every error in one line, for an error message.
std::string describe_all(const std::vector<pol::policy_error>& errors) {
  std::string text;
  for (const auto& e : errors)
    text += (text.empty() ? "" : "; ") + e.describe();
  return text;
}

/// The request's `policy` member, checked: an object (at `/policy`).
std::variant<const json*, api_error> policy_member(const json& doc) {
  auto it = doc.find("policy");
  if (it == doc.end())
    return field_error("/policy", "the field 'policy' is missing");
  if (!it->is_object())
    return field_error("/policy", "'policy' must be a policy document (a JSON object), not " +
                                      std::string(it->type_name()));
  return &*it;
}

/// The first `extends` entry that is a path, as the 400 that names it.
std::optional<api_error> extends_path_error(const pol::policy_document& doc) {
  const auto refused = extends_by_path(doc, posted_file);
  if (refused.empty())
    return std::nullopt;
  return field_error("/policy" + refused.front().pointer,
                     "'extends' names policies of the daemon's policy directory only, not "
                     "paths: " +
                         refused.front().value);
}

/// The effective policy of a posted one, or the 4xx that says why not.
std::variant<pol::policy_document, api_error> posted_policy(const json& policy,
                                                            const std::string& policy_dir) {
  auto doc = pol::parse_policy_json(policy, posted_file);
  if (!doc)
    return api_error{400, "invalid_policy", describe_all(doc.errors()),
                     "/policy" + doc.errors().front().pointer};
  if (auto err = extends_path_error(*doc))
    return *err;
  auto merged = resolve_client_policy(*doc, posted_file, policy_dir);
  if (!merged) {
    const auto& first = merged.errors().front();
    // An error in a policy it extends has no place in the request.
    const std::string where = first.file == posted_file ? "/policy" + first.pointer : "/policy";
    return api_error{400, "invalid_policy", describe_all(merged.errors()), where};
  }
  return std::move(*merged);
}

/// The policy `name` of the policy directory, or the 4xx that says why not.
std::variant<pol::policy_document, api_error> named_policy(const json& name,
                                                           const std::string& policy_dir) {
  if (!name.is_string() || name.get<std::string>().empty())
    return field_error("/name", "'name' must be the name of a policy of the daemon's policy "
                                "directory (a non-empty string)");
  const std::string wanted = name.get<std::string>();
  const std::string dir = client_policy_dir(policy_dir);
  // Only names the directory lists: never a path built from what the
  // client sent.
  std::string file;
  if (!dir.empty())
    if (auto files = pol::list_policy_files(dir))
      for (const auto& f : *files)
        if (pol::policy_name_of(f) == wanted)
          file = f;
  if (file.empty())
    return api_error{404, "unknown_policy",
                     "the daemon's policy directory has no policy '" + wanted + "'", "/name"};
  auto doc = pol::load_policy(file, dir);
  if (!doc)
    return api_error{400, "invalid_policy",
                     "policy '" + wanted + "' is invalid: " + describe_all(doc.errors()), "/name"};
  return std::move(*doc);
}

std::string why(const explanation& e) {
  if (e.by_sandbox)
    return "the sandbox a pool builds from this policy decides, not a rule of the policy alone";
  switch (e.source) {
  case pol::decision_source::rule:
    return "the rule at " + e.by +
           " matched (of the rules that match, the most restrictive decides, then the first)";
  case pol::decision_source::default_action:
    return "no rule matched: the policy's default for " + std::string(to_string(e.kind)) +
           " decides";
  case pol::decision_source::host_deny:
    return "net.hosts.deny names the host";
  case pol::decision_source::host_allow:
    return "net.hosts.allow names the host";
  case pol::decision_source::host_not_allowed:
    return "net.hosts.allow exists and does not name the host";
  case pol::decision_source::invalid_query:
    return "the query cannot be decided (a relative path, an invalid address…): denied";
  }
  return {};
}

json explanation_json(const explanation& e) {
  json j = {{"kind", to_string(e.kind)},
            {"query", e.query},
            {"decision", pol::to_string(e.verdict)},
            {"by", e.by},
            {"why", why(e)}};
  if (!e.by_sandbox && (e.source == pol::decision_source::rule ||
                        e.source == pol::decision_source::host_deny ||
                        e.source == pol::decision_source::host_allow))
    j["rule"] = e.by;
  if (!e.origin.empty())
    j["origin"] = e.origin;
  return j;
}

} // namespace

http_response check_policy_request(std::string_view body, const std::string& policy_dir,
                                   const policy_scope& scope) {
  auto parsed = parse_body_object(body);
  if (auto* err = std::get_if<api_error>(&parsed))
    return answer(*err);
  const json& doc = std::get<json>(parsed);
  for (auto it = doc.begin(); it != doc.end(); ++it)
    if (it.key() != "policy")
      return answer(field_error("/" + it.key(), "unknown field '" + it.key() +
                                                    "' (expected policy)"));
  auto member = policy_member(doc);
  if (auto* err = std::get_if<api_error>(&member))
    return answer(*err);
  const json& policy = *std::get<const json*>(member);
  // Before anything is read: the directory's other policies are not the
  // caller's to read, not even through what an error quotes.
  if (auto refused = refuse_extends(scope, policy, "/policy"))
    return answer(*refused);

  auto invalid = [](const std::vector<pol::policy_error>& errors) {
    json list = json::array();
    for (const auto& e : errors)
      list.push_back(error_json(e));
    return answer(200, dump_json(json{{"v", 1}, {"valid", false}, {"errors", std::move(list)}}));
  };
  auto checked = pol::parse_policy_json(policy, posted_file);
  if (!checked)
    return invalid(checked.errors());
  if (auto err = extends_path_error(*checked))
    return answer(*err);
  auto merged = resolve_client_policy(*checked, posted_file, policy_dir);
  if (!merged)
    return invalid(merged.errors());
  json out = {{"v", 1}, {"valid", true}};
  if (auto warnings = policy_warnings(*merged); !warnings.empty())
    out["warnings"] = warnings;
  return answer(200, dump_json(out));
}

http_response explain_policy_request(std::string_view body, const std::string& policy_dir,
                                     const policy_scope& scope) {
  auto parsed = parse_body_object(body);
  if (auto* err = std::get_if<api_error>(&parsed))
    return answer(*err);
  const json& doc = std::get<json>(parsed);
  constexpr std::array<explain_kind, 3> kinds = {explain_kind::fs, explain_kind::net,
                                                 explain_kind::exec};
  // The queries, checked for form first: a bad request reads nothing.
  std::vector<std::pair<explain_kind, std::string>> queries;
  std::array<std::vector<std::string>, 3> pointers; // per kind, each query's pointer
  for (auto it = doc.begin(); it != doc.end(); ++it) {
    const std::string& key = it.key();
    if (key == "policy" || key == "name")
      continue;
    bool known = false;
    for (std::size_t k = 0; k < kinds.size(); ++k) {
      if (key != to_string(kinds[k]))
        continue;
      known = true;
      const json& v = it.value();
      std::vector<std::pair<std::string, const json*>> items;
      if (v.is_array()) {
        if (v.empty())
          return answer(field_error("/" + key, "'" + key + "' is an empty array"));
        for (std::size_t i = 0; i < v.size(); ++i)
          items.emplace_back("/" + key + "/" + std::to_string(i), &v[i]);
      } else {
        items.emplace_back("/" + key, &v);
      }
      for (const auto& [pointer, item] : items) {
        if (!item->is_string() || item->get<std::string>().empty())
          return answer(field_error(pointer, "'" + key + "' must be a query " +
                                                 explain_syntax(kinds[k]) +
                                                 " (a non-empty string) or an array of them"));
        if (queries.size() == max_explain_queries)
          return answer(field_error(pointer, "more than " + std::to_string(max_explain_queries) +
                                                 " queries in one request"));
        pointers[k].push_back(pointer);
        queries.emplace_back(kinds[k], item->get<std::string>());
      }
    }
    if (!known)
      return answer(field_error("/" + key, "unknown field '" + key +
                                               "' (expected policy or name, and fs, net, exec)"));
  }
  if (queries.empty())
    return answer(field_error("/fs", "no query: give 'fs', 'net' or 'exec'"));
  // fs first, then net, then exec, each in the order given.
  std::stable_sort(queries.begin(), queries.end(),
                   [](const auto& a, const auto& b) { return a.first < b.first; });

  const bool has_policy = doc.contains("policy");
  const bool has_name = doc.contains("name");
  if (has_policy == has_name)
    return answer(field_error(has_policy ? "/name" : "/policy",
                              "give either 'policy' (a policy document) or 'name' (a policy of "
                              "the daemon's policy directory), not both or neither"));
  std::variant<pol::policy_document, api_error> loaded = api_error{};
  std::string policy_name;
  if (has_policy) {
    auto member = policy_member(doc);
    if (auto* err = std::get_if<api_error>(&member))
      return answer(*err);
    if (auto refused = refuse_extends(scope, *std::get<const json*>(member), "/policy"))
      return answer(*refused);
    loaded = posted_policy(*std::get<const json*>(member), policy_dir);
    policy_name = posted_file;
  } else {
    // Whether the directory has it is not said to a caller that may not
    // name it.
    if (doc["name"].is_string())
      if (auto refused = refuse_name(scope, doc["name"].get<std::string>(), "/name"))
        return answer(*refused);
    loaded = named_policy(doc["name"], policy_dir);
    if (doc["name"].is_string())
      policy_name = doc["name"].get<std::string>();
  }
  if (auto* err = std::get_if<api_error>(&loaded))
    return answer(*err);
  const policy_explainer explainer(
      pol::compiled_policy::compile(std::move(std::get<pol::policy_document>(loaded)), policy_name));

  json decisions = json::array();
  std::array<std::size_t, 3> next{};
  for (const auto& [kind, query] : queries) {
    const auto k = static_cast<std::size_t>(kind);
    const std::string& pointer = pointers[k][next[k]++];
    auto e = explainer.explain(kind, query);
    if (!e)
      return answer(field_error(pointer, "'" + std::string(to_string(kind)) + "' " +
                                             e.error().describe()));
    decisions.push_back(explanation_json(*e));
  }
  return answer(200, dump_json(json{{"v", 1},
                                    {"policy", policy_name},
                                    {"decisions", std::move(decisions)}}));
}

} // namespace castellan::api
