#pragma once

/// @file session_internal.hpp
/// The session's whole interface: the public session_actor plus what only
/// its own parts send it. Its pool holds it as a worker_state_listener, and
/// its reaper timer is a message to itself; a client cannot forge either.

#include "actors/session/session_actor.hpp"

namespace castellan {

using session_internal_actor = session_actor::extend<
  // From its pool: its worker changed state (ready, stopped, …).
  caf::reacts_to<worker_state_event>,
  // From itself: time to check the idle TTL and the maximum lifetime.
  caf::reacts_to<session_tick_atom>>;

} // namespace castellan
