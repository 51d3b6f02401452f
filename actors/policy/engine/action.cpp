#include "actors/policy/engine/action.hpp"

namespace castellan::policy {

std::string_view to_string(action x) noexcept {
  switch (x) {
  case action::allow:
    return "allow";
  case action::warn:
    return "warn";
  case action::deny:
    return "deny";
  }
  return "deny";
}

std::optional<action> parse_action(std::string_view text) noexcept {
  if (text == "allow")
    return action::allow;
  if (text == "warn")
    return action::warn;
  if (text == "deny")
    return action::deny;
  return std::nullopt;
}

} // namespace castellan::policy
