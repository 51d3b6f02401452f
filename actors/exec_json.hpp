#pragma once

/// @file exec_json.hpp
/// The JSON form of an exec result — what `castellan exec --json` prints and
/// what the daemon's API returns. Output that is not UTF-8 is base64, with
/// `stdout_base64` / `stderr_base64` true (json_bytes.hpp).

#include <nlohmann/json.hpp>

#include "actors/exec_messages.hpp"
#include "ipc/outcome.hpp"

namespace castellan {

/// `{"exec_id", "exit_code", "error_class", "stdout", "stderr", "stdout_base64",
///   "stderr_base64", "stdout_truncated",
///   "stderr_truncated", "exception": {…} | null, "events": […],
///   "timing": {"queue_us", "run_us"}, "usage": {"cpu_us", "peak_memory_bytes"},
///   "worker_id", "detail"}`
nlohmann::json to_json(const exec_result& r);

nlohmann::json to_json(const policy_event& e);

/// The exec_result a to_json object describes (what the daemon's API
/// answers): the CLI as a client prints it as if it had run the exec
/// itself. A member missing or of the wrong type is a failure naming it;
/// members it does not know (`v`, `id`) are ignored.
outcome<exec_result> result_from_json(const nlohmann::json& j);

/// Serialises without throwing on output that is not valid UTF-8 (invalid
/// bytes become U+FFFD): code output is arbitrary bytes.
std::string dump_json(const nlohmann::json& j, int indent = -1);

} // namespace castellan
