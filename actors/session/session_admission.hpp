#pragma once

/// @file session_admission.hpp
/// Whether a new session may be created, and what it is then: its id, and
/// the TTLs in force. Pure functions over the supervisor's counts, no CAF.

#include <cstdint>
#include <string>

#include "actors/session/session_limits.hpp"
#include "actors/session/session_messages.hpp"
#include "ipc/outcome.hpp"

namespace castellan {

/// Why a session cannot be created.
struct session_refusal {
  bool busy = false; ///< a count limit (answered `busy`); else the options are invalid
  std::string reason;
};

/// The session `opts` asks for under `limits`, given `total` sessions and
/// `of_owner` of its owner's: its TTLs resolved (0: the default) and checked
/// against the maximums, or why not. Fills every field of session_info but
/// id, pool and created_ns.
bool admit_session(const session_limits& limits, const session_options& opts, std::size_t total,
                   std::size_t of_owner, session_info& out, session_refusal& why);

/// A new session id: "s-" and 16 hex digits from the kernel's random pool.
std::string new_session_id();

} // namespace castellan
