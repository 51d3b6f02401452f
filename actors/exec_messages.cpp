#include "actors/exec_messages.hpp"

#include <array>
#include <utility>

namespace castellan {

namespace {

constexpr std::array<std::pair<error_class, const char*>, 9> error_class_names{{
  {error_class::ok, "ok"},
  {error_class::exception, "exception"},
  {error_class::timeout, "timeout"},
  {error_class::cancelled, "cancelled"},
  {error_class::limit_exceeded, "limit_exceeded"},
  {error_class::policy_kill, "policy_kill"},
  {error_class::oom, "oom"},
  {error_class::worker_lost, "worker_lost"},
  {error_class::busy, "busy"},
}};

} // namespace

std::string to_string(error_class x) {
  for (const auto& [value, name] : error_class_names)
    if (value == x)
      return name;
  return "error_class(" + std::to_string(static_cast<int>(x)) + ")";
}

bool from_string(std::string_view name, error_class& out) {
  for (const auto& [value, text] : error_class_names) {
    if (name == text) {
      out = value;
      return true;
    }
  }
  return false;
}

std::string to_string(worker_state x) {
  switch (x) {
    case worker_state::starting:
      return "starting";
    case worker_state::ready:
      return "ready";
    case worker_state::running:
      return "running";
    case worker_state::stopped:
      return "stopped";
  }
  return "worker_state(" + std::to_string(static_cast<int>(x)) + ")";
}

} // namespace castellan
