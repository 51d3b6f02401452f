#pragma once

/// @file remote_exec.hpp
/// `castellan exec|run|status --connect …`: the same commands, sent to a
/// running daemon's API instead of a supervisor started for the one call,
/// with the same output and exit codes.

#include <chrono>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "actors/exec_messages.hpp"
#include "apps/castellan/daemon_client.hpp"
#include "ipc/outcome.hpp"

namespace castellan::cli {

struct remote_options {
  std::string target;                 ///< --connect / CASTELLAN_CONNECT
  std::string pool;                   ///< --pool; empty: the daemon's default
  std::string request_policy_json;    ///< a request policy, resolved locally
  std::optional<uint64_t> timeout_ms; ///< --timeout, counted from `started`
  bool json = false;
  /// Where each of the request's files_out goes (--file-out).
  std::vector<std::string> file_out_locals;
  /// The session to run in (`castellan session exec|run`); empty: a pool.
  /// Not with `pool` or `request_policy_json`.
  std::string session;
};

/// A connection to the daemon at `target`, with CASTELLAN_TOKEN as its
/// bearer token when set.
outcome<std::unique_ptr<daemon_client>> connect_to(const std::string& target);

/// A daemon's 2xx answer as JSON, or the exit code (having said why: an
/// unreachable daemon, its error, an answer that is not a JSON object).
struct daemon_answer {
  int exit_code = 0;
  nlohmann::json body;
};

/// One request to the daemon at `target` (connect_to), answered.
daemon_answer ask_daemon(const std::string& target, const std::string& method,
                         const std::string& route, const std::string& body = {});

/// An error answer of the daemon as the CLI shows it (stderr); the exit
/// code: 1 for a refusal for load (busy, draining, too many execs or
/// sessions), else 2.
int report_error(const daemon_reply& reply);

/// Runs `req` on the daemon; the process exit code. Ctrl-C cancels the exec
/// there (DELETE /v1/execs/{id}) and its `cancelled` result is printed.
int run_remote(const remote_options& o, const exec_request& req,
               std::chrono::steady_clock::time_point started);

/// The daemon's pools, as `castellan status` prints a supervisor's, or
/// (metrics) its Prometheus exposition.
int remote_status(const std::string& target, bool metrics);

} // namespace castellan::cli
