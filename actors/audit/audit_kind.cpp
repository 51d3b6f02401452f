#include "actors/audit/audit_kind.hpp"

namespace castellan {

std::string_view kind_name(audit_kind x) {
  switch (x) {
  case audit_kind::exec_start:
    return "exec_start";
  case audit_kind::exec_end:
    return "exec_end";
  case audit_kind::syscall_denied:
    return "syscall_denied";
  case audit_kind::policy_warning:
    return "policy_warning";
  case audit_kind::optimistic_violation:
    return "optimistic_violation";
  case audit_kind::policy_event:
    return "policy_event";
  case audit_kind::policy_rejected:
    return "policy_rejected";
  case audit_kind::timeout:
    return "timeout";
  case audit_kind::oom:
    return "oom";
  case audit_kind::worker_lost:
    return "worker_lost";
  case audit_kind::connection:
    return "connection";
  case audit_kind::drop_report:
    return "drop_report";
  case audit_kind::session:
    return "session";
  }
  return "policy_event";
}

bool from_string(std::string_view name, audit_kind& out) {
  for (auto k : all_audit_kinds) {
    if (kind_name(k) == name) {
      out = k;
      return true;
    }
  }
  return false;
}

audit_kind security_kind(event_kind kind) {
  switch (kind) {
    case event_kind::syscall_denied:
      return audit_kind::syscall_denied;
    case event_kind::policy_warning:
      return audit_kind::policy_warning;
    case event_kind::optimistic_violation:
      return audit_kind::optimistic_violation;
  }
  return audit_kind::policy_event;
}

bool always_recorded(audit_kind x) {
  switch (x) {
  case audit_kind::syscall_denied:
  case audit_kind::optimistic_violation:
  case audit_kind::policy_event:
  case audit_kind::policy_rejected:
  case audit_kind::timeout:
  case audit_kind::oom:
  case audit_kind::worker_lost:
  case audit_kind::drop_report:
  case audit_kind::session:
    return true;
  case audit_kind::exec_start:
  case audit_kind::exec_end:
  case audit_kind::policy_warning:
  case audit_kind::connection:
    return false;
  }
  return true;
}

bool should_record(bool enabled, const std::set<std::string>& events, audit_kind x,
                   std::string_view syscall) {
  if (always_recorded(x))
    return true;
  if (!enabled)
    return false;
  if (events.count("*") > 0 || events.count("all") > 0)
    return true;
  // std::set<std::string>::count has no string_view overload in C++17.
  if (events.count(std::string{kind_name(x)}) > 0)
    return true;
  return !syscall.empty() && events.count(std::string{syscall}) > 0;
}

} // namespace castellan
