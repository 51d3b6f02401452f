#pragma once

/// @file actor_system_setup.hpp
/// What an `actor_system_config` needs before castellan's actors can run in
/// it: the type-id block (so messages serialise across nodes).

#include <caf/actor_system_config.hpp>

namespace castellan {

/// Registers castellan's message types. Call once per config, before the
/// actor system is constructed from it.
void prepare_actor_system_config(caf::actor_system_config& cfg);

} // namespace castellan
