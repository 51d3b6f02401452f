#include "actors/exec_json.hpp"

#include "actors/json_bytes.hpp"

namespace castellan {

nlohmann::json to_json(const policy_event& e) {
  return {{"kind", to_string(e.kind)},         {"syscall", e.syscall}, {"target", e.target},
          {"decision", to_string(e.decision)}, {"rule", e.rule},       {"pid", e.pid},
          {"timestamp_ns", e.timestamp_ns}};
}

namespace {

/// Output as a JSON string: as it is when it is UTF-8, else base64.
nlohmann::json output(const std::string& bytes, bool& base64) {
  base64 = !is_utf8(bytes);
  return base64 ? base64_encode(bytes) : bytes;
}

} // namespace

nlohmann::json to_json(const exec_result& r) {
  bool stdout_base64 = false;
  bool stderr_base64 = false;
  nlohmann::json out = output(r.stdout_data, stdout_base64);
  nlohmann::json err = output(r.stderr_data, stderr_base64);
  nlohmann::json events = nlohmann::json::array();
  for (const auto& e : r.events)
    events.push_back(to_json(e));
  nlohmann::json exception = nullptr;
  if (r.has_exception)
    exception = {{"type", r.exception.type},
                 {"message", r.exception.message},
                 {"traceback", r.exception.traceback}};
  nlohmann::json enforcement = nullptr;
  if (!r.enforcement.empty()) {
    enforcement = nlohmann::json::parse(r.enforcement, nullptr, false);
    if (enforcement.is_discarded())
      enforcement = r.enforcement; // not ours to drop: show it as text
  }
  return {
    {"exec_id", r.exec_id},
    {"exit_code", r.exit_code},
    {"error_class", to_string(r.error)},
    {"stdout", std::move(out)},
    {"stderr", std::move(err)},
    {"stdout_base64", stdout_base64},
    {"stderr_base64", stderr_base64},
    {"stdout_truncated", r.stdout_truncated},
    {"stderr_truncated", r.stderr_truncated},
    {"exception", exception},
    {"events", events},
    {"timing", {{"queue_us", r.timing.queue_us}, {"run_us", r.timing.run_us}}},
    {"usage", {{"cpu_us", r.usage.cpu_us}, {"peak_memory_bytes", r.usage.peak_memory_bytes}}},
    {"worker_id", r.worker_id},
    {"detail", r.detail},
    {"enforcement", enforcement},
  };
}

std::string dump_json(const nlohmann::json& j, int indent) {
  return j.dump(indent, ' ', false, nlohmann::json::error_handler_t::replace);
}

} // namespace castellan
