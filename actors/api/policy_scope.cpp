#include "actors/api/policy_scope.hpp"

namespace castellan::api {

policy_scope scope_of(const std::string& token, const std::vector<std::string>& pools,
                      const std::map<std::string, std::string>& pool_policies) {
  policy_scope s;
  s.token = token;
  s.names.emplace();
  for (const auto& p : pools)
    if (auto it = pool_policies.find(p); it != pool_policies.end())
      s.names->insert(it->second);
  return s;
}

std::optional<api_error> refuse_name(const policy_scope& scope, const std::string& name,
                                     const std::string& pointer) {
  if (!scope.names || scope.names->count(name) != 0)
    return std::nullopt;
  std::string mine;
  for (const auto& n : *scope.names)
    mine += (mine.empty() ? "'" : ", '") + n + "'";
  return api_error{403, "policy_not_allowed",
                   "token '" + scope.token + "' may not name policy '" + name +
                       "': a token limited to some pools names only the policies its pools use (" +
                       (mine.empty() ? std::string("none") : mine) +
                       "), and may always send a policy of its own",
                   pointer};
}

std::optional<api_error> refuse_extends(const policy_scope& scope, const nlohmann::json& policy,
                                        const std::string& pointer) {
  if (!scope.names || !policy.is_object())
    return std::nullopt;
  auto it = policy.find("extends");
  if (it == policy.end())
    return std::nullopt;
  if (it->is_string())
    return refuse_name(scope, it->get<std::string>(), pointer + "/extends");
  if (!it->is_array())
    return std::nullopt;
  for (std::size_t i = 0; i < it->size(); ++i) {
    const auto& e = (*it)[i];
    if (!e.is_string())
      continue; // the schema refuses it, and it names nothing
    if (auto err = refuse_name(scope, e.get<std::string>(), pointer + "/extends/" + std::to_string(i)))
      return err;
  }
  return std::nullopt;
}

} // namespace castellan::api
