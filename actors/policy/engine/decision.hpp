#pragma once

/// @file decision.hpp
/// The answer of a policy check, with the reason: which rule decided.

#include <cstdint>
#include <string_view>

#include "actors/policy/engine/action.hpp"

namespace castellan::policy {

/// What decided a check.
enum class decision_source : uint8_t {
  default_action,   ///< no rule matched: the domain's default
  rule,             ///< a rule of fs.rules, net.rules or exec.rules
  host_deny,        ///< an entry of net.hosts.deny matched the host name
  host_allow,       ///< an entry of net.hosts.allow matched the host name
  host_not_allowed, ///< net.hosts.allow exists and does not name the host
  invalid_query,    ///< the query itself is malformed (relative path, bad address…)
};

/// The verdict of one check and why.
///
/// Resolution: every matching rule votes; the most restrictive action wins
/// (deny > warn > allow); among equally restrictive votes the first in
/// document order reports (net: rules, then hosts.deny, then hosts.allow);
/// with no vote, the domain's default decides.
struct decision {
  action verdict = action::deny;
  decision_source source = decision_source::invalid_query;
  int32_t index = -1; ///< position in the deciding list, -1 for default/invalid/not-allowed
  /// JSON pointer of the deciding entry ("/fs/rules/3", "/net/hosts/deny/0"),
  /// "/net/hosts/allow" when the host is not on the allow list, "default" or
  /// "invalid". Points into the policy that answered (static for the last
  /// three): valid while that policy lives.
  std::string_view pointer = "invalid";

  friend bool operator==(const decision& a, const decision& b) noexcept {
    return a.verdict == b.verdict && a.source == b.source && a.index == b.index &&
           a.pointer == b.pointer;
  }
  friend bool operator!=(const decision& a, const decision& b) noexcept { return !(a == b); }
};

namespace detail {

/// A vote's rank: higher wins. Action first; then earlier document order
/// (`order` < 2^26); a default (no order) loses ties against any rule.
constexpr uint32_t vote_score(action a, uint32_t order) noexcept {
  return ((static_cast<uint32_t>(a) + 1u) << 26) | (0x3FFFFFFu - order);
}

constexpr uint32_t default_score(action a) noexcept {
  return (static_cast<uint32_t>(a) + 1u) << 26;
}

constexpr action score_action(uint32_t score) noexcept {
  return static_cast<action>((score >> 26) - 1u);
}

constexpr uint32_t score_order(uint32_t score) noexcept {
  return 0x3FFFFFFu - (score & 0x3FFFFFFu);
}

inline constexpr std::string_view default_pointer = "default";
inline constexpr std::string_view invalid_pointer = "invalid";
inline constexpr std::string_view not_allowed_pointer = "/net/hosts/allow";

/// The decision for a malformed query.
constexpr decision invalid_decision() noexcept {
  return decision{action::deny, decision_source::invalid_query, -1, invalid_pointer};
}

} // namespace detail

} // namespace castellan::policy
