#pragma once

/// @file policy_scope.hpp
/// Which policies of the daemon's policy directory a caller may name
/// (docs/api.md, "Policies a token may name"): in `POST /v1/policies/explain`'s
/// `name`, and in the `extends` of a policy it posts there, to
/// `/v1/policies/check` or with an exec. A token limited to some pools
/// may name only the policies those pools use: the directory is shared by
/// every pool, and a policy says what its pool's workers may reach. A
/// policy body of its own it may always send. No CAF, no server.

#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "actors/api/api_json.hpp"

namespace castellan::api {

/// The policies one caller may name.
struct policy_scope {
  /// nullopt: any (a caller without a token, a token without `pools`).
  std::optional<std::set<std::string>> names;
  std::string token; ///< the token's name, for the error
};

/// The scope of token `token` limited to `pools`: the policy each of them
/// names, by `pool_policies` (pool name → the name of its policy in the
/// policy directory; a pool whose policy is a file by path has none).
policy_scope scope_of(const std::string& token, const std::vector<std::string>& pools,
                      const std::map<std::string, std::string>& pool_policies);

/// The 403 `policy_not_allowed` when `scope` does not let its caller name
/// `name` (at `pointer` in the request); nullopt when it does. Whether the
/// directory has such a policy is not looked at: the answer says nothing
/// of policies the caller may not name.
std::optional<api_error> refuse_name(const policy_scope& scope, const std::string& name,
                                     const std::string& pointer);

/// The same for the `extends` of a posted policy document (`policy`, at
/// `pointer` in the request, e.g. "/policy"): the first entry refused. A
/// single string is looked at too, though the schema refuses it later.
std::optional<api_error> refuse_extends(const policy_scope& scope, const nlohmann::json& policy,
                                        const std::string& pointer);

} // namespace castellan::api
