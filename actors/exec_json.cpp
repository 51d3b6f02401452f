#include "actors/exec_json.hpp"

namespace castellan {

nlohmann::json to_json(const policy_event& e) {
  return {{"kind", to_string(e.kind)},         {"syscall", e.syscall}, {"target", e.target},
          {"decision", to_string(e.decision)}, {"rule", e.rule},       {"pid", e.pid},
          {"timestamp_ns", e.timestamp_ns}};
}

nlohmann::json to_json(const exec_result& r) {
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
    {"stdout", r.stdout_data},
    {"stderr", r.stderr_data},
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
