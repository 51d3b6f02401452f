#pragma once

/// @file policy_event.hpp
/// One security-relevant event of an exec, as a plain struct without CAF:
/// the supervisor's decisions (actors/mediation) produce it on a thread of
/// their own, the exec messages (exec_messages.hpp, which adds its
/// `inspect()`) carry it to the client.

#include <cstdint>
#include <string>

namespace castellan {

/// A security-relevant event that happened during one exec (a denial, a
/// warning, an optimistic-read kill); attached to the exec's result.
struct policy_event {
  std::string kind;     ///< "syscall_denied", "policy_warning", "optimistic_violation"
  std::string syscall;  ///< e.g. "openat", or the wire check ("FS_WRITE")
  std::string target;   ///< the path or address
  std::string decision; ///< "deny", "warn", "kill"
  std::string rule;     ///< JSON pointer of the deciding rule, or "default"
  int32_t pid = 0;
  int64_t timestamp_ns = 0; ///< CLOCK_REALTIME
};

} // namespace castellan
