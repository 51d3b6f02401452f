#pragma once

/// @file api_json.hpp
/// The JSON bodies of the API: requests read strictly (an unknown field, a
/// wrong type, a missing field are errors naming the field), results and
/// status written as the CLI's `--json` writes them, plus `"v": 1`.

#include <cstddef>
#include <string>
#include <string_view>
#include <utility>
#include <variant>
#include <vector>

#include <nlohmann/json.hpp>

#include "actors/cancel_messages.hpp"
#include "actors/exec_messages.hpp"
#include "actors/telemetry/telemetry_messages.hpp"

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

/// The deepest nesting of arrays and objects a request body may have: a
/// policy is a few levels deep, and deeper JSON would only cost the
/// recursive code behind the parser (schema validation, dumping) stack.
inline constexpr std::size_t max_body_depth = 64;

/// True when `text` nests arrays and objects deeper than `max_depth`
/// (brackets inside strings do not count). Linear, no recursion.
bool nests_deeper_than(std::string_view text, std::size_t max_depth);

/// The body as a JSON object, or the 400 `bad_json` error saying why not
/// (not JSON, not an object, nested deeper than max_body_depth).
std::variant<nlohmann::json, api_error> parse_body_object(std::string_view body);

/// The longest id a client may give its exec.
inline constexpr std::size_t max_exec_id_chars = 64;

/// An exec request as the API reads it: the request for the supervisor,
/// and the client's own name for the exec.
struct exec_body {
  exec_request request;
  /// The client's id for the exec (`"id"`), empty when it gave none: 1 to 64
  /// of [A-Za-z0-9._-], not digits only (those name the API's numeric
  /// `exec_id`), not "." or ".." (which clients rewrite in a URL path).
  std::string id;
};

/// `POST /v1/exec` `{code, id?, timeout_ms?, pool?, policy?, stdin? |
/// stdin_base64?, env?, cwd?}` (command == false) or `POST /v1/run` `{argv,
/// …}` (command == true). `in_session`: the body of `POST
/// /v1/sessions/{id}/exec|run`, which refuses `pool` and `policy` (a
/// session runs on the pool and policy it was created with).
std::variant<exec_body, api_error> parse_exec_body(std::string_view body, bool command,
                                                   bool in_session = false);

/// An exec's result: `castellan exec --json`'s object plus `"v": 1`, and
/// `"id"` when the client named the exec.
std::string result_body(const exec_result& r, std::string_view id = {});

/// result_body for a stream of results, faster: a worker's `enforcement`
/// report (about 5 KiB of JSON) is the same for every exec it runs, so its
/// parsed and re-serialised form is remembered by text (the last 64) and
/// spliced in, instead of parsed and written again for every result; and
/// the members of a result without events, exception or files are written
/// directly rather than through a JSON object. The same object as
/// result_body, with `enforcement` as its first member. One per thread (the
/// api actor holds one).
class result_encoder {
public:
  std::string body(exec_result& r, std::string_view id = {});

private:
  std::vector<std::pair<std::string, std::string>> cache_; ///< report text → its JSON
  std::size_t next_ = 0;                                   ///< the entry replaced next
};

/// `GET /v1/pools`: `{"v":1,"pools":[{name, size, idle, busy, starting,
/// queued, queue_limit, spawned, completed, lost, policy, policy_revision}]}`.
std::string pools_body(const std::vector<pool_status>& pools);

/// What the server itself says in `GET /v1/status`.
struct server_status {
  bool draining = false;
  uint64_t uptime_ms = 0;   ///< since the API started
  uint64_t in_flight = 0;   ///< execs admitted, not yet answered
  uint64_t connections = 0; ///< open connections
};

/// castellan's version, as `castellan --version` says it.
std::string_view castellan_version();

/// `GET /v1/status`: `{"v":1,"version","draining","uptime_ms","in_flight",
/// "connections","pools":[…as GET /v1/pools…],"summary":{execs, latency_us,
/// workers, syscalls, audit}}`.
std::string status_body(const server_status& server, const std::vector<pool_status>& pools,
                        const telemetry_summary& summary);

/// `DELETE /v1/execs/{id}`, answered: `{"v":1,"exec_id":N,"id":"…",
/// "cancelled":bool,"outcome":"…"}` (`id` when the exec has one);
/// `cancelled` is false when the exec had finished first.
std::string cancel_body(const cancel_reply& reply, std::string_view id);

} // namespace castellan::api
