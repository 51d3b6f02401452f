#pragma once

/// @file policy_routes.hpp
/// `POST /v1/policies/check` and `POST /v1/policies/explain`: a policy a
/// client posts (or names, from the daemon's policy directory) validated,
/// or asked queries, by the engine and the explainer `castellan policy
/// check` and `castellan policy explain` use. A posted policy's `extends`
/// names resolve in the policy directory only; a path is refused before
/// anything is read. No CAF, no server: a request body in, a response out.
/// The work is CPU-bound and reads the policy directory: the API runs it on
/// an actor of its own, never on the I/O thread.

#include <cstddef>
#include <string>
#include <string_view>

#include "actors/api/http_server.hpp"
#include "actors/api/policy_scope.hpp"

namespace castellan::api {

/// The most queries one explain request may ask.
inline constexpr std::size_t max_explain_queries = 64;

/// `{"policy": {…}}` → 200 `{"v":1,"valid":true[,"warnings":[…]]}` or 200
/// `{"v":1,"valid":false,"errors":[{"pointer","message"[,"value"][,"file"]}]}`;
/// a request that is not of that form gets a 4xx error naming the field.
/// `policy_dir` is where `extends` names resolve (client_policy_dir);
/// `scope` the policies the caller may name there (403 otherwise).
http_response check_policy_request(std::string_view body, const std::string& policy_dir,
                                   const policy_scope& scope = {});

/// `{"policy": {…} | "name": "…", "fs"?, "net"?, "exec"?}` (each query a
/// string or an array of them, in `castellan policy explain`'s syntax) →
/// 200 `{"v":1,"policy":"…","decisions":[{"kind","query","decision","by",
/// "why"[,"rule"][,"origin"]}]}`, fs queries first, then net, then exec.
http_response explain_policy_request(std::string_view body, const std::string& policy_dir,
                                     const policy_scope& scope = {});

} // namespace castellan::api
