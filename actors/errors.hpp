#pragma once

/// @file errors.hpp
/// castellan's error codes as a CAF error category.

#include <cstdint>
#include <string>

#include <caf/actor_system.hpp>
#include <caf/error.hpp>
#include <caf/make_message.hpp>
#include <caf/message.hpp>

#include "ipc/outcome.hpp"

namespace castellan {

enum class castellan_errc : uint8_t {
  invalid_request = 1, ///< a request names something impossible
  no_such_pool,        ///< routed to a pool that does not exist
  spawn_failed,        ///< a worker could not be started
  policy_invalid,      ///< a policy failed validation
  no_such_policy,      ///< a named policy is not loaded
  io_failed,           ///< a file or socket operation failed
  shutting_down,       ///< the actor is stopping
  busy,                ///< a limit on what exists at once was reached (sessions)
  no_such_session,     ///< a session id that is not (or no longer) known
  session_ended,       ///< the session's worker is gone, and its state with it
  no_such_workspace,   ///< a workspace name the store does not have
  workspace_in_use,    ///< a workspace a session (a lease) still uses cannot be removed
  workspace_exists,    ///< a workspace of that name exists already
  no_space,            ///< the host's disk has no room for a workspace's quota
  workspaces_disabled, ///< the supervisor has no workspace store
};

std::string to_string(castellan_errc x);

/// A `caf::error` of our category with `what` as its context.
caf::error make_error(castellan_errc code, std::string what);

/// Converts a failure of the CAF-free layers.
caf::error make_error(castellan_errc code, const failure& err);

/// What a person reads: for our errors the message they carry, as written
/// (CAF's own rendering quotes and escapes it); other errors as CAF renders
/// them.
std::string describe(const caf::error& err, const caf::actor_system& sys);

} // namespace castellan

CAF_ERROR_CODE_ENUM(castellan::castellan_errc, "castellan")
