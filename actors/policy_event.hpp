#pragma once

/// @file policy_event.hpp
/// One security-relevant event of an exec, as a plain struct without CAF:
/// the supervisor's decisions (actors/mediation) produce it on a thread of
/// their own, the exec messages (exec_messages.hpp, which adds its
/// `inspect()`) carry it to the client.

#include <cstdint>
#include <string>
#include <string_view>

namespace castellan {

/// What happened to a decided call.
enum class event_kind : uint8_t {
  syscall_denied,       ///< refused with an errno
  policy_warning,       ///< allowed, and reported
  optimistic_violation, ///< the caller was killed (a read an `optimistic` rule forbids)
};

/// The verdict behind an event.
enum class event_decision : uint8_t { allow, deny, warn, kill };

/// "syscall_denied", "policy_warning", "optimistic_violation" (the text of
/// the result's JSON and of audit records); "unknown" for a value this build
/// does not know (one from another node).
const char* to_string(event_kind x) noexcept;
/// "allow", "deny", "warn", "kill"; "unknown" likewise.
const char* to_string(event_decision x) noexcept;
/// Parse the texts above; false for anything else.
bool from_string(std::string_view text, event_kind& out) noexcept;
bool from_string(std::string_view text, event_decision& out) noexcept;

/// A security-relevant event that happened during one exec (a denial, a
/// warning, an optimistic-read kill); attached to the exec's result.
struct policy_event {
  event_kind kind = event_kind::syscall_denied;
  std::string syscall;  ///< e.g. "openat", or the wire check ("FS_WRITE")
  std::string target;   ///< the path or address
  event_decision decision = event_decision::deny;
  std::string rule;     ///< JSON pointer of the deciding rule, or "default"
  int32_t pid = 0;
  int64_t timestamp_ns = 0; ///< CLOCK_REALTIME
};

} // namespace castellan
