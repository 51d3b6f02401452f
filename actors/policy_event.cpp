#include "actors/policy_event.hpp"

namespace castellan {

const char* to_string(event_kind x) noexcept {
  switch (x) {
    case event_kind::syscall_denied:
      return "syscall_denied";
    case event_kind::policy_warning:
      return "policy_warning";
    case event_kind::optimistic_violation:
      return "optimistic_violation";
  }
  return "unknown";
}

const char* to_string(event_decision x) noexcept {
  switch (x) {
    case event_decision::allow:
      return "allow";
    case event_decision::deny:
      return "deny";
    case event_decision::warn:
      return "warn";
    case event_decision::kill:
      return "kill";
  }
  return "unknown";
}

bool from_string(std::string_view text, event_kind& out) noexcept {
  for (auto x : {event_kind::syscall_denied, event_kind::policy_warning,
                 event_kind::optimistic_violation})
    if (text == to_string(x)) {
      out = x;
      return true;
    }
  return false;
}

bool from_string(std::string_view text, event_decision& out) noexcept {
  for (auto x : {event_decision::allow, event_decision::deny, event_decision::warn,
                 event_decision::kill})
    if (text == to_string(x)) {
      out = x;
      return true;
    }
  return false;
}

} // namespace castellan
