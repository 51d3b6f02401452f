#pragma once

/// @file api_json.hpp
/// The JSON bodies of the API: requests read strictly (an unknown field, a
/// wrong type, a missing field are errors naming the field), results and
/// status written as the CLI's `--json` writes them, plus `"v": 1`.

#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "actors/exec_messages.hpp"

namespace castellan::api {

/// A request the API refuses: HTTP status, error code, message, and the
/// JSON pointer of the field at fault (empty when it is the whole body).
struct api_error {
  unsigned status = 400;
  std::string code;
  std::string message;
  std::string field;

  std::string body() const;
};

/// `POST /v1/exec` `{code, timeout_ms?, pool?, policy?}` (command == false)
/// or `POST /v1/run` `{argv, timeout_ms?, pool?, policy?}` (command == true).
std::variant<exec_request, api_error> parse_exec_body(std::string_view body, bool command);

/// An exec's result: `castellan exec --json`'s object plus `"v": 1`.
std::string result_body(const exec_result& r);

/// `GET /v1/pools`: `{"v":1,"pools":[{name, size, idle, busy, starting,
/// queued, queue_limit, spawned, completed, lost, policy, policy_revision}]}`.
std::string pools_body(const std::vector<pool_status>& pools);

} // namespace castellan::api
