#pragma once

/// @file proxy_actor.hpp
/// The egress proxy actor: the only way out of a sandbox's network
/// namespace. It owns an egress_proxy (an asio::io_context on its own
/// thread); pools attach their workers' egress sockets to it, and every
/// connection it decides becomes a connection_record for audit and counters
/// for telemetry.

#include <cstdint>
#include <memory>
#include <string>

#include <caf/actor_system.hpp>
#include <caf/replies_to.hpp>
#include <caf/typed_actor.hpp>

#include "actors/audit/audit_actor.hpp"
#include "actors/messages.hpp"
#include "actors/proxy/egress_limits.hpp"
#include "actors/telemetry/telemetry_actor.hpp"

namespace castellan {

using proxy_actor = caf::typed_actor<
  // A pool's worker: serve the connections that arrive on its socket.
  caf::reacts_to<egress_link>,
  // The worker (pool, id) is gone: close its link and its connections.
  caf::reacts_to<egress_detach_atom, std::string, uint64_t>,
  // The counters.
  caf::replies_to<status_atom>::with<egress_status>,
  // Close everything and quit.
  caf::reacts_to<shutdown_atom>>;

struct proxy_config {
  proxy::egress_limits limits;
  audit_actor audit;                        ///< may be null
  telemetry_actor telemetry;                ///< may be null
};

/// Spawns the proxy actor (its I/O thread starts at once).
proxy_actor spawn_proxy(caf::actor_system& sys, proxy_config cfg);

} // namespace castellan
