#pragma once

/// @file api_json.hpp
/// The JSON bodies of the API: requests read strictly (an unknown field, a
/// wrong type, a missing field are errors naming the field), results and
/// status written as the CLI's `--json` writes them, plus `"v": 1`.

#include <string>
#include <string_view>
#include <utility>
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

/// result_body for a stream of results, faster: a worker's `enforcement`
/// report (about 5 KiB of JSON) is the same for every exec it runs, so its
/// parsed and re-serialised form is remembered by text (the last 64) and
/// spliced in, instead of parsed and written again for every result. The
/// same object as result_body, with `enforcement` as its first member. One
/// per thread (the api actor holds one).
class result_encoder {
public:
  std::string body(exec_result& r);

private:
  std::vector<std::pair<std::string, std::string>> cache_; ///< report text → its JSON
  std::size_t next_ = 0;                                   ///< the entry replaced next
};

/// `GET /v1/pools`: `{"v":1,"pools":[{name, size, idle, busy, starting,
/// queued, queue_limit, spawned, completed, lost, policy, policy_revision}]}`.
std::string pools_body(const std::vector<pool_status>& pools);

} // namespace castellan::api
