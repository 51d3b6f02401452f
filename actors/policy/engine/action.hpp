#pragma once

/// @file action.hpp
/// The three verdicts a policy can give, ordered by restrictiveness.

#include <cstdint>
#include <optional>
#include <string_view>

namespace castellan::policy {

/// What happens to an operation. The numeric order is the priority order of
/// resolution (deny > warn > allow), so `std::max` picks the winner.
enum class action : uint8_t {
  allow = 0, ///< the operation proceeds
  warn = 1,  ///< the operation proceeds and is reported (audit, the exec's result)
  deny = 2,  ///< the operation is refused
};

/// "allow", "warn" or "deny".
std::string_view to_string(action x) noexcept;

/// Parses "allow", "warn" or "deny"; nothing for anything else.
std::optional<action> parse_action(std::string_view text) noexcept;

/// The more restrictive of two actions.
constexpr action most_restrictive(action a, action b) noexcept {
  return static_cast<uint8_t>(a) >= static_cast<uint8_t>(b) ? a : b;
}

} // namespace castellan::policy
